"""The lab's tests: the checkout's root and the product's test helpers on the import path, and
looks at the report seed logged to a file of each test's own."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "tests"):  # `import lab`, and tests/helpers.py
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))


@pytest.fixture(autouse=True)
def _looks_logged_apart(tmp_path_factory: pytest.TempPathFactory,
                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Looks the tests take go to a log of their own, never to lab/records/report_looks.jsonl."""
    from lab.looks import LOOK_LOG_VARIABLE

    monkeypatch.setenv(LOOK_LOG_VARIABLE, str(tmp_path_factory.mktemp("looks") / "looks.jsonl"))


@pytest.fixture
def audit(tmp_path: Path) -> Iterator[Path]:
    """A deal audit in a fresh folder for the test (as tests/conftest.py's)."""
    from coldiron_env.dealer import set_audit

    folder = tmp_path / "audit"
    folder.mkdir()
    set_audit(folder)
    yield folder
    set_audit(None)
