"""Shared pytest configuration: the ``rule`` marker and the import path of the test helpers."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))


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
