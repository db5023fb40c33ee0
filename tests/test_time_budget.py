"""A run's time budget (``training.minutes``): RL cut to what its share of the time holds at
the rate measured, rounds that would not end in time not started, the cut budgets written
down, and nothing changed where the budget does not bind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from test_training import _one_torch_thread, tiny  # noqa: F401 (its autouse fixture too)

from agents.learning import imitation, training
from agents.learning.config import ConfigError, config_from_dict, load_config
from agents.learning.training import PROBE_ROLLOUTS, rollout_size, train

ROOT = Path(__file__).resolve().parent.parent
CONFIGURED = 20_000  # steps the tiny config asks for: a tiny budget of time cannot hold them


def _config(minutes: float | None, steps: int = CONFIGURED, imitation: bool = False) -> Any:
    cfg = tiny(load_config(ROOT / "configs" / "maskable_ppo.yaml"), steps=steps,
               imitation=imitation)  # fmt: skip
    cfg.training.minutes = minutes
    return cfg


def test_a_budget_too_small_cuts_the_warm_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(imitation, "CHUNK", 1)  # a look at the clock after every deal
    cfg = _config(1e-6, imitation=True)  # spent before the warm start begins, on any machine
    cfg.imitation.episodes, cfg.imitation.epochs = 40, 5
    assert cfg.imitation.dagger_rounds == 1
    result = train(cfg, tmp_path / "run", log=lambda _: None)
    stats = json.loads((result.run_dir / "imitation.json").read_text())
    assert stats["episodes"] == 1  # one look at the clock: the first chunk, no more
    assert len(stats["epoch_losses"]) == 1  # one epoch at least, then the clock stops it
    assert stats["dagger_rounds"] == []  # a DAgger round starts only before the deadline


def test_a_budget_too_small_cuts_rl_and_the_rounds_and_writes_the_cut_down(
    tmp_path: Path,
) -> None:
    cfg = _config(1e-6)  # spent before RL begins, on any machine: RL keeps just its probe
    assert cfg.expert_iteration.rounds == 1
    lines: list[str] = []
    result = train(cfg, tmp_path / "run", log=lines.append)
    run = result.run_dir
    meta = json.loads((run / "meta.json").read_text())
    budget = meta["time_budget"]
    assert budget["rl_steps_configured"] == CONFIGURED and budget["rl_steps_per_second"] > 0
    probed = PROBE_ROLLOUTS * rollout_size(cfg)
    assert budget["rl_steps_cut_to"] == probed < CONFIGURED  # the probe is kept, no more
    assert result.timesteps >= budget["rl_steps_cut_to"]  # whole rollouts, as without a budget
    assert result.timesteps < CONFIGURED
    assert not result.interrupted and meta["status"] == "completed"
    assert budget["rounds_configured"] == 1 and result.expert_rounds == []
    written = load_config(run / "config.yaml")  # what the run did, for a reader and a resume
    assert written.training.total_timesteps == budget["rl_steps_cut_to"]
    assert written.expert_iteration.rounds == 0
    assert any(line.startswith("time budget: RL runs at") for line in lines)
    assert "time budget: 0 of 1 round(s) fit" in lines
    # The run is complete as cut: resuming it has nothing left to do.
    with pytest.raises(Exception, match="already completed"):
        train(written, resume=run, log=lambda _: None)


@pytest.mark.parametrize(
    ("fits", "rounds", "kept"),
    [(1_200, True, 1_000), (600, True, 600), (400, True, 64), (400, False, 400), (32, True, 64)],
)
def test_rl_is_cut_to_what_fits_or_to_its_probe_when_that_is_too_few(
    fits: int, rounds: bool, kept: int
) -> None:
    """1,000 steps planned, a probe of 64: under half of them (RL_LEAST) left to RL when
    rounds follow, only the probe is kept (and at least the probe, always)."""
    assert training.RL_LEAST == 0.5
    assert training.kept_rl_steps(1_000, fits, 64, rounds) == kept


def test_a_budget_that_holds_the_run_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same network, step for step, as the run without a budget (the teacher's deals
    played a chunk at a time or all at once)."""
    steps = 4 * PROBE_ROLLOUTS * rollout_size(_config(None))
    free = train(_config(None, steps, True), tmp_path / "free", log=lambda _: None)
    monkeypatch.setattr(imitation, "CHUNK", 1)
    timed = train(_config(60.0, steps, True), tmp_path / "timed", log=lambda _: None)
    assert timed.timesteps == free.timesteps and len(timed.expert_rounds) == 1
    budget = json.loads((timed.run_dir / "meta.json").read_text())["time_budget"]
    assert "rl_steps_cut_to" not in budget and "rounds_configured" not in budget
    assert load_config(timed.run_dir / "config.yaml").training.total_timesteps == steps
    a = torch.load(_policy(free.run_dir), weights_only=True)
    b = torch.load(_policy(timed.run_dir), weights_only=True)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _policy(run: Path) -> Path:
    import zipfile

    out = run / "policy.pth"
    with zipfile.ZipFile(run / "model.zip") as z:
        out.write_bytes(z.read("policy.pth"))
    return out


@pytest.mark.parametrize("minutes", [0, -1.0, "20"])
def test_a_budget_that_is_not_a_positive_number_is_refused(minutes: Any) -> None:
    data = _config(None).to_dict()
    data["training"]["minutes"] = minutes
    with pytest.raises(ConfigError, match="minutes"):
        config_from_dict(data)


@pytest.mark.parametrize("minutes", ["-1", "nan"])
def test_main_refuses_a_bad_minutes_flag(minutes: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "main.py"), "--out", "run", "--minutes", minutes],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2 and "--minutes must be >= 0" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_a_machine_that_slows_after_the_probe_ends_rl_with_its_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = training.TimeProbe._on_step

    def slowed(self: training.TimeProbe) -> bool:
        go = original(self)
        if self.done and not self.late:
            self.share = 0.0  # the rate measured no longer holds: RL's time is up
        return go

    monkeypatch.setattr(training.TimeProbe, "_on_step", slowed)
    lines: list[str] = []
    result = train(_config(60.0), tmp_path / "run", log=lines.append)
    probed = PROBE_ROLLOUTS * rollout_size(_config(None))
    assert probed < result.timesteps < CONFIGURED and not result.interrupted
    written = load_config(result.run_dir / "config.yaml")
    assert written.training.total_timesteps == result.timesteps  # a resume has no RL left
    budget = json.loads((result.run_dir / "meta.json").read_text())["time_budget"]
    assert budget["rl_steps_cut_to"] == result.timesteps
    assert f"time budget: RL's share is up at {result.timesteps:,} steps" in lines
    assert len(result.expert_rounds) == 1  # the rounds' time was not RL's
