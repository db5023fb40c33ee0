"""lab/learners.py: each row runs the recipe it names at the one budget, the scratch rows
with no hand-written player anywhere, and the figures of its record are the seeds' own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from scipy import stats

from agents.learning.config import config_from_dict
from lab import learners
from lab.tables import learners as learners_table

BUDGET = 300_000


@pytest.mark.parametrize("learner", [x for x in learners.LEARNERS if x.kind == "sb3"],
                         ids=lambda x: f"{x.name}-{x.variant}")  # fmt: skip
def test_an_sb3_row_is_its_config_at_the_budget(learner: learners.Learner) -> None:
    cfg = config_from_dict(learners.sb3_config(learner, BUDGET, 7))  # a valid config
    assert cfg.training.total_timesteps == BUDGET and cfg.seed == 7
    assert cfg.evaluation.freq * learners.CURVE_POINTS == BUDGET
    assert cfg.expert_iteration.rounds == 0  # labelled by a search: not RL's budget
    assert cfg.imitation.enabled == (learner.variant == learners.IMITATION)
    if learner.variant == learners.SCRATCH:  # no teacher of any kind
        assert not cfg.imitation.enabled and not cfg.shaping.enabled


def test_every_shipped_recipe_has_a_scratch_row_and_rllib_and_zoo_are_there() -> None:
    names = {(x.name, x.variant) for x in learners.LEARNERS}
    for recipe in learners.SB3_RECIPES:
        assert (recipe, learners.SCRATCH) in names  # the env's reward alone
        assert (recipe, learners.IMITATION) in names  # and as the config ships
        assert (learners.ROOT / "configs" / f"{recipe}.yaml").is_file()
    assert {x.kind for x in learners.LEARNERS} == {"sb3", "rllib", "zoo"}
    for x in learners.LEARNERS:
        assert (learners.ROOT / x.recipe).exists(), x.recipe


def test_the_t_interval_is_students() -> None:
    values = [0.10, 0.13, 0.115]
    mean, low, high = learners.t_interval(values)
    ref = stats.t.interval(0.95, len(values) - 1, loc=mean, scale=stats.sem(values))
    assert mean == pytest.approx(sum(values) / 3)
    assert (low, high) == pytest.approx(ref)


def _run(seed: int, wins: int, base_only: int, other_only: int) -> dict[str, Any]:
    episodes = 1000
    curve = [{"env_steps": s, "seconds": s / 1000, "win_rate": s / 1e7} for s in (0, 5000)]
    return {"seed": seed, "run": f"x-s{seed}", "wins": wins, "win_rate": wins / episodes,
            "paired": {"difference": (other_only - base_only) / episodes}, "env_steps": 5000,
            "seconds": 5.0 + seed, "curve": curve}  # fmt: skip


def test_a_row_pools_the_seeds_and_the_table_shows_it(tmp_path: Path) -> None:
    runs = [_run(0, 100, 20, 10), _run(1, 130, 5, 15), _run(2, 115, 10, 10)]
    row = learners.row(learners.LEARNERS[0], runs, 1000)
    assert row["pooled_wins"] == 345 and row["seeds"] == 3
    assert row["win_rate_t95"][0] == pytest.approx(0.115)
    assert row["difference_t95"][0] == pytest.approx(0.0)
    assert row["steps_per_second"] == pytest.approx(15000 / 18.0)
    doc = {"rows": [row], "baseline": {"win_rate": 0.17, "interval_95": [0.16, 0.18]},
           "budget_env_steps": 5000, "episodes": 1000, "deals": "evaluation", "seed": 9,
           "cpu": "a CPU", "command": "cmd", "validation_deals": {"episodes": 2000}}  # fmt: skip
    record = tmp_path / "learners.json"
    record.write_text(json.dumps(doc))
    table = learners_table(str(record))  # an absolute path stays itself under ROOT
    assert "11.50% [" in table and "10.00 13.00 11.50" in table and "34.50%" not in table
    assert "+0.00 [" in table and "| 0.1 |" in table  # minutes a run: 6 s on average
    png = learners.plot_curves(doc, tmp_path / "curves.png")
    assert png.stat().st_size > 0


def test_a_run_a_stop_cut_starts_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    learner = learners.LEARNERS[0]
    out = learner.run_dir(tmp_path, 0)
    out.mkdir(parents=True)
    (out / "meta.json").write_text(json.dumps({"status": "running"}))  # cut short
    seen: list[bool] = []

    def command(*_: object) -> list[str]:
        seen.append(out.exists())
        return ["true"]

    monkeypatch.setattr(learners, "command", command)
    name, code, _ = learners.train_one(learner, tmp_path, BUDGET, 0)
    assert (name, code) == (out.name, 0) and seen == [False]  # gone before the command ran
    out.mkdir()
    (out / "meta.json").write_text(json.dumps({"status": "completed"}))
    assert learners.finished(learner, tmp_path, 0)  # a finished one is kept (train skips it)


def test_the_masks_column_says_which_learners_train_with_the_mask() -> None:
    rows = {(x.name, x.variant): x for x in learners.LEARNERS}
    assert rows["maskable_ppo", learners.SCRATCH].masks
    assert rows["rllib_ppo", learners.SCRATCH].masks
    assert rows["zoo_ppo_mask", learners.SCRATCH].masks
    for name in ("ppo", "a2c", "dqn", "qrdqn", "recurrent_ppo"):  # masked only when they play
        assert not rows[name, learners.IMITATION].masks, name
