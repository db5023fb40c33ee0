"""lab/house_metrics.py's growth by issue (lab/docs/structure.md): the commits'
net changes add up to the difference between the two trees' line counts, every commit that
changes the count is attributed to an issue, no attribution contradicts the issue a commit's
subject names, and the record lab/docs/structure.md shows is what the script computes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOUSE_JSON = ROOT / "lab" / "records" / "house.json"


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture(scope="module")
def house() -> ModuleType:
    if git("rev-parse", "--is-shallow-repository").strip() == "true":
        pytest.skip("a shallow clone: the history since the issue was filed is not here")
    import lab.house_metrics

    return lab.house_metrics


def counted_lines(house: ModuleType, commit: str) -> int:
    """The lines counted without the other issues' files in ``commit``'s tree (git's own
    files, not the working tree's)."""
    apart = {f for files in house.COUNTED_APART.values() for f in files}
    total = 0
    for path in git("ls-tree", "-r", "--name-only", commit, "--", *house.PRODUCTION).split():
        if path.endswith(".py") and path not in apart:
            total += len(git("show", f"{commit}:{path}").splitlines())
    return total


def test_growth_adds_up_and_every_commit_has_its_issue(house: ModuleType) -> None:
    growth = house.growth_since(house.FILED_AT)
    expected = counted_lines(house, "HEAD") - counted_lines(house, house.FILED_AT)
    assert sum(growth["by_issue"].values()) == expected
    assert sum(c["net_lines"] for c in growth["commits"]) == expected
    assert growth["commits"], "nothing changed the count since the issue was filed"
    unattributed = [c["commit"] for c in growth["commits"] if c["issue"] == house.UNATTRIBUTED]
    assert not unattributed, (
        f"commits that change the count with no issue: {unattributed} (start a subject with "
        "'Issue N:', or list the commit in house_metrics.ATTRIBUTION)"
    )


def test_attributions_are_main_line_commits_and_agree_with_their_subjects(
    house: ModuleType,
) -> None:
    walk = git("log", "--first-parent", "--format=%H %s", f"{house.FILED_AT}..HEAD")
    subjects = {
        sha[: house.SHORT_SHA]: subject
        for sha, _, subject in (line.partition(" ") for line in walk.splitlines())
    }
    assert set(house.ATTRIBUTION) <= set(subjects), sorted(set(house.ATTRIBUTION) - set(subjects))
    for sha, issue in house.ATTRIBUTION.items():
        named = house.SUBJECT_ISSUE.match(subjects[sha])
        if named is not None:
            assert house.ISSUES[named.group(1)] == issue, (sha, subjects[sha], issue)


def test_the_record_is_what_the_script_computes(house: ModuleType) -> None:
    entries: dict[str, Any] = json.loads(HOUSE_JSON.read_text())["entries"]
    measured = [e for e in entries.values() if "growth" in e]
    assert measured, f"{HOUSE_JSON} has no growth measurement"
    for entry in measured:
        growth = house.growth_since(entry["growth"]["since"], entry["commit"])
        assert growth["by_issue"] == entry["growth"]["by_issue"]
        assert sum(growth["by_issue"].values()) == (
            entry["production_lines_without_other_issues"]
            - counted_lines(house, entry["growth"]["since"])
        )


def test_the_baseline_sentence_counts_the_lines_at_filing_and_issue_20s_own(
    house: ModuleType,
) -> None:
    """lab/docs/structure.md's "against the issue's own baseline": the lines counted at the
    commit the issue was filed at, plus issue 20's own net change, against 11,500."""
    from lab.tables import HOUSE_TARGET_LINES, house_growth

    entries: dict[str, Any] = json.loads(HOUSE_JSON.read_text())["entries"]
    last = [e for e in entries.values() if "growth" in e][-1]
    at_filing = counted_lines(house, last["growth"]["since"])
    own = last["growth"]["by_issue"][house.ISSUE_20]
    sentence = house_growth().split("Against the issue's own baseline:")[1]
    assert f"took {at_filing:,} lines" in sentence
    assert f"take {at_filing + own:,} with issue 20's own change" in sentence
    assert f"{at_filing + own - HOUSE_TARGET_LINES:,} over the {HOUSE_TARGET_LINES:,}" in sentence
