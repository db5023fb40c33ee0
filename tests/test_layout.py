"""The product and the lab apart: imports go one way, and the wheel holds the product only."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("coldiron_env", "agents", "scripts", "tests")


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function, or names to
    ``importlib.import_module``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.add(str(node.args[0].value))
    return found


def product_files() -> list[Path]:
    return sorted(p for folder in PRODUCT for p in (ROOT / folder).rglob("*.py"))


def test_nothing_in_the_product_imports_the_lab() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in mods if m == "lab" or m.startswith("lab."))
        for path in product_files()
        if (mods := imported_modules(path))
    }
    assert not {k: v for k, v in offenders.items() if v}


def test_the_scanner_sees_an_import_of_the_lab(tmp_path: Path) -> None:
    """The test above can fail: each way of importing is seen."""
    for line in ("import lab", "from lab.looks import REPORT_SEED", "def f():\n    import lab.x",
                 "importlib.import_module('lab.tables')"):  # fmt: skip
        probe = tmp_path / "probe.py"
        probe.write_text(line + "\n")
        assert any(m == "lab" or m.startswith("lab.") for m in imported_modules(probe)), line


def test_the_registry_imports_no_integration() -> None:
    """Integrations register themselves (pyproject.toml's entry points): no arrow runs back."""
    mods = imported_modules(ROOT / "agents" / "registry.py")
    assert not [m for m in mods if m.startswith("agents.integrations")]


def test_the_integrations_are_registered_and_found() -> None:
    from agents.registry import LOADER_GROUP, PLAYER_GROUP, _registered

    assert {"mcts", "mcts-large"} <= set(_registered(PLAYER_GROUP))
    assert {"onnx", "rllib"} <= set(_registered(LOADER_GROUP))


@pytest.mark.slow
def test_the_wheel_holds_the_product_and_not_the_lab(tmp_path: Path) -> None:
    """Built from a copy of the tracked files (a build writes build/ and *.egg-info beside
    its sources, which the checkout must not get)."""
    source = tmp_path / "source"
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
         "-q", "-w", str(tmp_path / "dist")],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("coldiron-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names if "dist-info" not in name}
    assert tops == {"agents", "coldiron_env"}, tops
    assert "agents/registry.py" in names and "coldiron_env/env.py" in names
    assert any(name.startswith("agents/models/distilled/") for name in names)
