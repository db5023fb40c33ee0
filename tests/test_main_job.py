"""The main job (scripts/main.py): train, then evaluate against the built-in players."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_training import tiny

from agents.learning.config import dump_config, load_config

ROOT = Path(__file__).resolve().parent.parent
EPISODES = 40


@pytest.mark.slow
def test_main_job_trains_then_evaluates_on_the_same_deals(tmp_path: Path) -> None:
    cfg = tiny(load_config(ROOT / "configs" / "maskable_ppo.yaml"))
    config = tmp_path / "tiny.yaml"
    config.write_text(dump_config(cfg))
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "main.py"), "--config", str(config),
         "--out", str(out), "--episodes", str(EPISODES), "--no-progress-bar"],
        capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / "evaluation.json").read_text())
    names = [a["agent"] for a in report["agents"]]
    assert names[1:] == ["random", "threaten", "heuristic"]
    assert all(a["episodes"] == EPISODES for a in report["agents"])
    assert (out / "evaluation.png").stat().st_size > 0
    assert f"chart: {out / 'evaluation.png'}" in proc.stdout
    for name in names:
        assert name in proc.stdout, f"the table names {name}"
    # A job stopped between training and evaluation: --resume evaluates, training nothing.
    again = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "main.py"), "--resume", str(out),
         "--episodes", str(EPISODES // 2), "--no-progress-bar"],
        capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert "its training completed; evaluating it" in again.stdout
    assert "run directory:" not in again.stdout  # nothing was trained
    rewritten = json.loads((out / "evaluation.json").read_text())
    assert all(a["episodes"] == EPISODES // 2 for a in rewritten["agents"])


def test_main_job_refuses_a_bad_config(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "configs" / "maskable_ppo.yaml").read_text() + "\nbogus_key: 1\n")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "main.py"), "--config", str(bad), "--out", "r"],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "bogus_key" in proc.stderr and str(bad) in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "named"),
    [(["--seed", "-1"], "--seed"), (["--episodes", "0"], "--episodes")],
)
def test_main_job_refuses_bad_arguments_before_training(
    tmp_path: Path, args: list[str], named: str
) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "main.py"), "--out", str(tmp_path / "run"), *args],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2 and named in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()  # nothing trained
