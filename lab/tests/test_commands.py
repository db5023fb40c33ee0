"""Every lab command runs as its docs and records name it (``python -m lab.X``)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from test_scripts import _runs_main  # the product's check of its scripts, reused

from lab import ROOT

COMMANDS = sorted(p for p in (ROOT / "lab").rglob("*.py") if "tests" not in p.parts)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_command_with_a_main_calls_it_when_run(command: Path) -> None:
    """``strict_bound.py`` lost its guard once: run as its records say, it did nothing."""
    tree = ast.parse(command.read_text(encoding="utf-8"))
    if not any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body):
        pytest.skip("no main()")
    assert _runs_main(tree), f"{command}: main() is never called when it is run"


def _module(path: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", path, *args],
        capture_output=True, text=True, check=False, cwd=ROOT, timeout=300,
    )  # fmt: skip


def test_the_strict_bound_command_runs_and_prints_its_usage() -> None:
    out = _module("lab.experiments.strict_bound", "--help")
    assert out.returncode == 0 and "--episodes" in out.stdout, out.stderr


@pytest.mark.parametrize(
    ("module", "argv", "named"),
    [
        ("lab.experiments.bound", ["--model", "nedd"], "not one of zero, need"),
        ("lab.experiments.bound", ["--model", "zero", "--json", "scripts"], "--json scripts: is a"),
        ("lab.main_job", ["--record", "README.md/m.json", "--", "--out", "x"], "--record README"),
        ("lab.main_job", ["--record", "m.json", "--", "--episodes", "3"], "give scripts/main.py"),
        ("lab.looks", ["--why", "x", "--", "true", "--seed", "3"], "does not play the report"),
        ("lab.experiments.solve", ["--deals", "2", "--max-nodes", "-1"], "--max-nodes"),
        ("lab.experiments.solve", ["--deals", "2", "--seed", "-1"], "--seed"),
        ("lab.experiments.solve", ["--deals", "2", "--out", "lab"], "--out lab: is a directory"),
        ("lab.ladder_rows", ["--add-bound", "2", "--out-dir", "README.md"], "--out-dir"),
    ],
)
def test_a_bad_argument_is_refused_by_name_before_any_work(
    module: str, argv: list[str], named: str
) -> None:
    done = _module(module, *argv)
    assert done.returncode == 2 and named in done.stderr, done.stderr
