"""Shared pytest configuration: the ``rule`` marker, the import path of the test helpers, no
Hypothesis database, and the checkout held unchanged by the whole run (nothing written
where nobody asked)."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

TESTS_DIR = Path(__file__).resolve().parent
ROOT = TESTS_DIR.parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

try:  # a venv for one integration's tests alone (RLlib's: .ci/run) has no Hypothesis
    from hypothesis import settings
    from hypothesis.configuration import set_hypothesis_home_dir
except ImportError:
    pass
else:
    settings.register_profile("coldiron", database=None)  # no example database in the checkout
    settings.load_profile("coldiron")
    set_hypothesis_home_dir(tempfile.mkdtemp(prefix="coldiron-hypothesis-"))  # nor its files

UNWATCHED: Final = frozenset(
    {".git", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", "build"}
)
"""Folders the interpreter and the tools write (bytecode, caches; pytest's own cache is made on a
fresh clone's first run); the venvs are left out too."""


def checkout_files(root: Path = ROOT) -> dict[str, tuple[int, int]]:
    """Every file of the checkout but caches and venvs: (size, modification time) by path."""
    out: dict[str, tuple[int, int]] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in UNWATCHED and not d.startswith(".venv")]
        for name in files:
            stat = (Path(folder) / name).stat()
            out[str((Path(folder) / name).relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return out


def written_between(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]
) -> list[str]:
    """The files made or changed between two :func:`checkout_files`."""
    return sorted(path for path, stat in after.items() if before.get(path) != stat)


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controlling process only
        session.config.stash[_BEFORE] = checkout_files()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when a test, or a command it ran, wrote into the checkout."""
    before = session.config.stash.get(_BEFORE, None)
    if before is None:
        return
    written = written_between(before, checkout_files())
    if written:
        print(f"\nthe suite wrote into the checkout: {', '.join(written[:20])}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_BEFORE = pytest.StashKey[dict[str, tuple[int, int]]]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        'rule(rid): the test checks rule rid ("R1".."R20") of RULES.md '
        "(tests/test_rules_coverage.py requires one per rule)",
    )


@pytest.fixture
def audit(tmp_path: Path) -> Iterator[Path]:
    """A deal audit (``coldiron_env.dealer.set_audit``) in a fresh folder for the test: every
    deck any env deals, in any process, with the seed that shuffled it."""
    from coldiron_env.dealer import AUDIT_VARIABLE, set_audit

    folder = tmp_path / "audit"
    folder.mkdir()
    set_audit(folder)
    assert os.environ[AUDIT_VARIABLE] == str(folder)  # what subprocesses read
    yield folder
    set_audit(None)
