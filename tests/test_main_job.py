"""The main job (scripts/main.py): train, then evaluate against the built-in players."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import load_file
from test_training import tiny

from agents.evaluation.arena import REPORT_SEED, AgentResult
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


def test_main_job_refuses_a_bad_config(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "configs" / "maskable_ppo.yaml").read_text() + "\nbogus_key: 1\n")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "main.py"), "--config", str(bad)],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "bogus_key" in proc.stderr and str(bad) in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "named"),
    [(["--seed", "-1"], "--seed"), (["--record", "."], "is a directory")],
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


def _results(wins: int, heuristic_wins: int, episodes: int = 1000) -> list[AgentResult]:
    out = []
    for name, won in (("net", wins), ("heuristic", heuristic_wins)):
        result = AgentResult(name)
        for i in range(episodes):
            result.add("won" if i < won else "slain", 24, 26)
        out.append(result)
    return out


@pytest.mark.parametrize(
    ("wins", "heuristic_wins", "seed", "deals", "intervals"),
    [
        (300, 150, REPORT_SEED, "the report seed's 1,000 deals", "apart by"),
        (150, 300, 7, "1,000 evaluation deals of seed 7", "below `heuristic`'s"),
        (160, 170, 7, "1,000 evaluation deals of seed 7", "overlap by"),
    ],
)
def test_the_main_job_record_says_which_deals_and_how_the_intervals_lie(
    tmp_path: Path, wins: int, heuristic_wins: int, seed: int, deals: str, intervals: str
) -> None:
    main_job_record = load_file(ROOT / "scripts" / "main.py", "_script_main").main_job_record

    (tmp_path / "meta.json").write_text(json.dumps({"wall_seconds": 1.0, "timesteps": 8}))
    results = _results(wins, heuristic_wins)
    args = argparse.Namespace(seed=seed, note="")
    record = main_job_record(
        SimpleNamespace(run_dir=tmp_path), results, 1.0, (0.0, 0.0, 0.0), args, "c.yaml"
    )
    summary = record["summary"]
    assert summary[f"`net` on {deals}"].startswith(f"{100 * wins / 1000:.2f}%")
    assert intervals in summary["the two Wilson intervals"]
    (low, high), (hlow, hhigh) = (r.interval for r in results)
    if intervals == "overlap by":
        overlap = min(high, hhigh) - max(low, hlow)
        assert summary["the two Wilson intervals"] == f"overlap by {100 * overlap:.2f} points"
