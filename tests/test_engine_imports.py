"""The rules engine is Gymnasium-free: its modules import where Gymnasium cannot."""

from __future__ import annotations

import subprocess
import sys
import textwrap

ENGINE_MODULES = (
    "cards", "actions", "options", "judge", "dealer", "game", "render",
    "analysis", "observation", "knowledge",
)  # fmt: skip

# The package's __init__ registers the env with Gymnasium, so the engine modules
# are loaded from their files as submodules of a stand-in package with no
# __init__ code: importing them must not need Gymnasium.
CODE = textwrap.dedent(
    """
    import importlib.abc, importlib.util, sys, types
    from pathlib import Path

    class NoGym(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "gymnasium" or name.startswith("gymnasium."):
                raise ImportError(f"gymnasium is blocked in this test: {name}")
            return None

    sys.meta_path.insert(0, NoGym())
    for name in list(sys.modules):
        if name == "gymnasium" or name.startswith("gymnasium."):
            del sys.modules[name]
    try:
        import gymnasium  # noqa: F401
    except ImportError:
        pass
    else:
        raise SystemExit("the gymnasium block does not work")

    spec = importlib.util.find_spec("coldiron_env")
    pkg_dir = Path(next(iter(spec.submodule_search_locations)))
    pkg = types.ModuleType("coldiron_env")
    pkg.__path__ = [str(pkg_dir)]
    sys.modules["coldiron_env"] = pkg
    import importlib
    for mod in MODULES:
        importlib.import_module("coldiron_env." + mod)
    assert not any(m == "gymnasium" or m.startswith("gymnasium.") for m in sys.modules)

    # and the engine plays a game
    from coldiron_env.game import Game
    from coldiron_env.render import render_text
    game = Game(list(range(54)))
    while not game.over:
        game.step(0)
    print("OK", game.outcome, len(render_text(game)) > 0)
    """
)


def test_engine_modules_import_without_gymnasium() -> None:
    code = f"MODULES = {ENGINE_MODULES!r}\n" + CODE
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
    assert proc.stdout.split() == ["OK", "midnight", "True"], proc.stdout


def test_the_block_really_blocks() -> None:
    # The same harness must fail for a module that does need Gymnasium.
    code = f"MODULES = {('env',)!r}\n" + CODE
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode != 0
    assert "gymnasium is blocked" in proc.stderr
