"""Every entry script runs as the command its docs and records name."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted([*ROOT.glob("scripts/*.py"), *ROOT.glob("scripts/experiments/*.py")])


def _runs_main(tree: ast.Module) -> bool:
    """Whether the module ends its ``if __name__ == "__main__":`` block by calling main()."""
    for node in tree.body:
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "__name__"
        ):
            return any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "main"
                for n in ast.walk(node)
            )
    return False


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_script_with_a_main_calls_it_when_run(script: Path) -> None:
    """``strict_bound.py`` lost its guard once: run as its records say, it did nothing."""
    tree = ast.parse(script.read_text(encoding="utf-8"))
    if not any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body):
        pytest.skip("no main()")
    assert _runs_main(tree), f"{script}: main() is never called when the script is run"


def test_the_strict_bound_command_runs_and_prints_its_usage() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "experiments" / "strict_bound.py"), "--help"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert out.returncode == 0 and "--episodes" in out.stdout, out.stderr
