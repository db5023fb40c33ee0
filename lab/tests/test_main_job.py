"""The README's main-job record (``lab/main_job.py``): which deals, how the intervals lie, and
the whole command on a tiny budget (the record of a real run of ``scripts/main.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.evaluation.arena import AgentResult
from lab import ROOT
from lab.looks import LOOK_LOG_VARIABLE, REPORT_SEED, read_looks
from lab.main_job import main, main_job_record


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
    budget = {"minutes": 1.0, "rl_steps_per_second": 99, "rl_steps_cut_to": 8}
    meta = {"wall_seconds": 1.0, "timesteps": 8, "time_budget": budget}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    results = _results(wins, heuristic_wins)
    record = main_job_record(tmp_path, results, 1.0, 2048, (0.0, 0.0), seed, "", ["main.py"])
    assert record["time_budget"] == budget, "the rate and the cuts, as the run measured them"
    summary = record["summary"]
    assert summary[f"`net` on {deals}"].startswith(f"{100 * wins / 1000:.2f}%")
    assert intervals in summary["the two Wilson intervals"]
    (low, high), (hlow, hhigh) = (r.interval for r in results)
    if intervals == "overlap by":
        overlap = min(high, hhigh) - max(low, hlow)
        assert summary["the two Wilson intervals"] == f"overlap by {100 * overlap:.2f} points"


@pytest.mark.slow
def test_the_record_of_a_tiny_main_job_on_the_report_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_training import tiny

    from agents.learning.config import dump_config, load_config

    log = tmp_path / "looks.jsonl"
    monkeypatch.setenv(LOOK_LOG_VARIABLE, str(log))
    config = tmp_path / "tiny.yaml"
    config.write_text(dump_config(tiny(load_config(ROOT / "configs" / "maskable_ppo.yaml"))))
    record, out = tmp_path / "record.json", tmp_path / "run"
    argv = ["--record", str(record), "--note", "a test", "--why", "the test", "--",
            "--config", str(config), "--out", str(out), "--episodes", "30",
            "--seed", str(REPORT_SEED), "--no-progress-bar"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(record.read_text())
    assert [r["agent"] for r in doc["results"]][1:] == ["random", "threaten", "heuristic"]
    assert doc["peak_rss_mib"] > 50 and doc["wall_seconds"] > 0
    assert "a test" in doc["machine"] and doc["timesteps"] > 0
    (look,) = read_looks(log)
    assert look["episodes"] == 30 and look["why"] == "the test"
