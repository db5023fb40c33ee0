"""scripts/experiments/house_metrics.py's growth by issue (docs/structure.md): the commits'
net changes add up to the difference between the two trees' line counts, and every commit
the attribution names lies on the main line it walks (a mistyped or stale commit fails)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers import load_file

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def house() -> ModuleType:
    module = load_file(ROOT / "scripts" / "experiments" / "house_metrics.py", "house_metrics")
    known = subprocess.run(
        ["git", "cat-file", "-e", f"{module.FILED_AT}^{{commit}}"], cwd=ROOT, check=False
    )
    if known.returncode != 0:
        pytest.skip(f"this checkout's history does not reach {module.FILED_AT} (a shallow clone)")
    return module


def counted_lines(house: ModuleType, commit: str) -> int:
    """The lines counted without the other issues' files in ``commit``'s tree (git's own
    files, not the working tree's)."""
    apart = {f for files in house.COUNTED_APART.values() for f in files}
    tree = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", commit, "--", *house.PRODUCTION],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    total = 0
    for path in tree:
        if path.endswith(".py") and path not in apart:
            text = subprocess.run(
                ["git", "show", f"{commit}:{path}"],
                cwd=ROOT, capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
            total += len(text.splitlines())
    return total


def test_growth_adds_up_to_the_trees_difference(house: ModuleType) -> None:
    growth = house.growth_since(house.FILED_AT)
    expected = counted_lines(house, "HEAD") - counted_lines(house, house.FILED_AT)
    assert sum(growth["by_issue"].values()) == expected
    assert sum(c["net_lines"] for c in growth["commits"]) == expected
    assert {c["issue"] for c in growth["commits"]} <= {
        *house.ATTRIBUTION.values(),
        house.UNATTRIBUTED,
    }


def test_every_attributed_commit_is_on_the_main_line(house: ModuleType) -> None:
    walked = subprocess.run(
        ["git", "log", "--first-parent", "--format=%H", f"{house.FILED_AT}..HEAD"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    short = {sha[: len(house.FILED_AT)] for sha in walked}
    assert set(house.ATTRIBUTION) <= short, sorted(set(house.ATTRIBUTION) - short)
