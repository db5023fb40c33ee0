"""Every entry script runs as the command its docs and records name."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(ROOT.glob("scripts/*.py"))


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
    """A script that lost its guard would do nothing when run as its docs say."""
    tree = ast.parse(script.read_text(encoding="utf-8"))
    if not any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body):
        pytest.skip("no main()")
    assert _runs_main(tree), f"{script}: main() is never called when the script is run"


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / script), *args],
        capture_output=True,
        check=False,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_zoo_train_of_ppo_mask_without_a_file_says_which_to_pass() -> None:
    """rl-zoo3 has no ppo_mask file of its own: its error was a FileNotFoundError traceback."""
    for algo in (["--algo", "ppo_mask"], ["--algo=ppo_mask"]):
        done = _run("zoo.py", "train", *algo, "--env", "coldiron/ColdIron-v0")
        assert done.returncode == 2, done.stderr
        assert "pass -conf configs/rl_zoo3/ppo_mask.yml" in done.stderr
        assert "Traceback" not in done.stderr


def test_zoo_train_takes_its_file_in_either_argparse_form() -> None:
    """``--conf-file=PATH`` is a file given, as rl-zoo3's argparse reads it (a bad --seed
    is refused after the check, so nothing trains here)."""
    for conf in (
        ["-conf", "configs/rl_zoo3/ppo_mask.yml"],
        ["--conf-file=configs/rl_zoo3/ppo_mask.yml"],
    ):
        done = _run("zoo.py", "train", "--algo", "ppo_mask", *conf, "--seed", "70000")
        assert "no hyperparameters of its own" not in done.stderr, done.stderr
        assert done.returncode == 2 and "--seed 70000" in done.stderr  # the next check's refusal


def test_rllib_training_without_ray_says_how_to_install_it() -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("ray is installed here")
    done = _run("rllib_train.py", "--steps", "10", "--out", "unused-never-made")
    assert done.returncode == 2, done.stderr
    assert "needs ray[rllib]" in done.stderr and ".[rllib,fast]" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (ROOT / "unused-never-made").exists()


def _script(name: str) -> object:
    """A script's module, imported from scripts/ (its main runs in this process)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"script_{name}", ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("script", "argv", "named"),
    [
        ("main", ["--resume", "runs/x", "--config", "configs/ppo.yaml"], "--config with --resume"),
        (
            "evaluate",
            ["--agent", "heuristic", "--json", "e.json", "--plot", "./e.json"],
            "same file",
        ),
        ("evaluate", ["--agent", "heuristic", "--plot", "README.md/e.png"], "--plot"),
        ("distill", ["--start", "trained", "--out", "README.md"], "--out README.md: is a file"),
        ("distill", ["--start", "trained", "--out", "runs/x", "--seed", "-3"], "--seed must be"),
        (
            "tune",
            ["--config", "configs/tune_maskable_ppo.yaml", "--trials", "1", "--out", "README.md"],
            "--out README.md: is a file",
        ),
    ],
)
def test_a_bad_argument_is_refused_by_name_before_any_work(
    script: str, argv: list[str], named: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(ROOT)
    main = _script(script).main  # type: ignore[attr-defined]
    try:
        code = main(argv)
    except SystemExit as stop:  # argparse's parser.error
        code = stop.code
    assert code == 2
    assert named in capsys.readouterr().err


def test_ctrl_c_in_evaluate_keeps_the_agents_that_finished(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The second agent stopped by Ctrl-C: the first one's result is printed and written,
    marked interrupted, exit status 130."""
    import json

    module: Any = _script("evaluate")
    real = module.evaluate

    def stopped_after_one(agents: Any, *args: Any, progress: Any, **kwargs: Any) -> Any:
        real(agents[:1], *args, progress=progress, **kwargs)
        raise KeyboardInterrupt

    module.evaluate = stopped_after_one
    out = tmp_path / "e.json"
    argv = ["--agent", "threaten", "--agent", "heuristic", "--deals", "validation", "--seed", "3"]
    assert module.main([*argv, "--episodes", "20", "--json", str(out)]) == 130
    doc = json.loads(out.read_text())
    assert [a["agent"] for a in doc["agents"]] == ["threaten"]
    assert "1 of 2" in doc["interrupted"]
    assert "threaten" in capsys.readouterr().out
