"""Held out in fact: the decks actually dealt while training never come from an evaluation
seed, whoever seeds the envs (Stable-Baselines3 reseeds the VecEnv with the model's seed).

Every run here has seed 2026. Before ``StreamSeededVecEnv``, SB3's ``set_random_seed(2026)``
re-seeded training env ``i`` with ``2026 + i``, so it dealt exactly the deals of
``evaluate.py --seed 2026+i``: these tests failed. They read the deal audit
(``coldiron_env.dealer.AUDIT_VARIABLE``): every shuffled deck any env dealt, in any process
(subprocess envs and labelling processes included), with the seed of the generator that
shuffled it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import read_audit, streams_of

from agents.evaluation.arena import deal_decks
from agents.learning.config import config_from_dict
from agents.learning.training import train
from coldiron_env.dealer import (
    STREAM_SPAN,
    DealStream,
)

RUN_SEED = 2026
"""The old report seed: a run seeded so trained on its deals before the fix."""
NEAR_SEEDS = range(RUN_SEED - 16, RUN_SEED + 80)
"""Evaluation seeds whose first deals are compared deck by deck with what was dealt."""
DEALS_PER_SEED = 64
Records = list[tuple[int | None, tuple[int, ...]]]


def evaluation_decks() -> set[tuple[int, ...]]:
    return {tuple(d) for s in NEAR_SEEDS for d in deal_decks(s, DEALS_PER_SEED).tolist()}


def check_dealt(folder: Path, expected: set[DealStream]) -> Records:
    records = read_audit(folder)
    assert records, "nothing was dealt: the run did not run"
    assert set(streams_of(records)) == expected
    clash = evaluation_decks() & {deck for _, deck in records}
    assert not clash, f"{len(clash)} evaluation deal(s) were dealt while training"
    return records


def tiny(algorithm: str, vec_env: str, **sections: Any) -> dict[str, Any]:
    hyper: dict[str, Any] = {"learning_rate": 3e-4}
    if algorithm in ("maskable_ppo", "ppo", "recurrent_ppo"):
        hyper.update(n_steps=16, batch_size=32, n_epochs=1)
    elif algorithm == "a2c":
        hyper.update(n_steps=8)
    else:  # dqn, qrdqn
        hyper.update(learning_starts=16, buffer_size=1000, batch_size=16, train_freq=4)
    data: dict[str, Any] = {
        "name": f"held-out-{algorithm}",
        "seed": RUN_SEED,
        "algorithm": {"name": algorithm, "hyperparameters": hyper},
        "policy": {"net_arch": [8]},
        "training": {"total_timesteps": 256, "n_envs": 4, "vec_env": vec_env,
                     "progress_bar": False},
        "evaluation": {"freq": 128, "episodes": 6, "seed": 3},
        "checkpoint": {"freq": 128},
    }  # fmt: skip
    if algorithm == "recurrent_ppo":
        data["policy"]["lstm_hidden_size"] = 8
    data.update(sections)
    return data


def test_the_audit_sees_an_evaluation_deal_as_one(audit: Path) -> None:
    """The guard can fail: a plain env seeded 2026 deals evaluation seed 2026's first deal."""
    from coldiron_env.env import ColdIronEnv

    env = ColdIronEnv()
    env.reset(seed=RUN_SEED)
    ((seed, deck),) = read_audit(audit)
    assert seed == RUN_SEED and list(deck) == deal_decks(RUN_SEED, 1)[0].tolist()
    with pytest.raises(AssertionError, match="evaluation seed"):
        streams_of(read_audit(audit))


def test_the_audit_sees_an_unseeded_deal_as_one(audit: Path) -> None:
    """A deck from a generator seeded by the OS is named as such, not taken for a stream's."""
    from coldiron_env.env import ColdIronEnv

    ColdIronEnv().reset()
    ((seed, _),) = read_audit(audit)
    assert seed is not None and seed >= 1 << 64  # the OS's entropy, recorded as it is
    with pytest.raises(AssertionError, match="outside every stream"):
        streams_of(read_audit(audit))


def test_the_benchmarks_training_rows_deal_training_deals(audit: Path) -> None:
    """scripts/benchmark.py trains MaskablePPO too (seeded RUN_SEED here): on training deals."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import benchmark

    rows = benchmark.training_rows(benchmark.QUICK, RUN_SEED)
    assert all(row.timesteps > 0 for row in rows)
    check_dealt(audit, {DealStream.TRAINING})


@pytest.mark.slow
@pytest.mark.parametrize(
    ("algorithm", "vec_env"),
    [
        ("maskable_ppo", "native"),
        ("maskable_ppo", "dummy"),
        ("maskable_ppo", "subproc"),
        ("ppo", "native"),
        ("a2c", "dummy"),
        ("dqn", "native"),
        ("qrdqn", "dummy"),
        ("recurrent_ppo", "subproc"),
    ],
)
def test_training_deals_come_from_the_training_stream(
    algorithm: str, vec_env: str, audit: Path, tmp_path: Path
) -> None:
    cfg = config_from_dict(tiny(algorithm, vec_env))
    result = train(cfg, tmp_path / "run", log=lambda _m: None)
    assert result.timesteps >= 256 and not result.interrupted
    check_dealt(audit, {DealStream.TRAINING, DealStream.VALIDATION})


@pytest.mark.slow
def test_a_resumed_run_deals_training_deals_it_has_not_dealt(audit: Path, tmp_path: Path) -> None:
    cfg = config_from_dict(tiny("maskable_ppo", "native"))
    out = tmp_path / "run"
    train(cfg, out, log=lambda _m: None)
    first = {deck for seed, deck in read_audit(audit) if seed is not None
             and seed // STREAM_SPAN == DealStream.TRAINING}  # fmt: skip
    for path in audit.iterdir():
        path.unlink()
    more = config_from_dict({**tiny("maskable_ppo", "native"),
                             "training": {**tiny("maskable_ppo", "native")["training"],
                                          "total_timesteps": 512}})  # fmt: skip
    result = train(more, resume=out, log=lambda _m: None)
    assert result.timesteps >= 512
    records = check_dealt(audit, {DealStream.TRAINING, DealStream.VALIDATION})
    again = {deck for seed, deck in records if seed is not None
             and seed // STREAM_SPAN == DealStream.TRAINING}  # fmt: skip
    assert again and not again & first, "the resumed leg dealt the first leg's deals again"
    meta = json.loads((out / "meta.json").read_text())
    assert meta["resumes"][-1]["first_deal_index"] == 4


@pytest.mark.slow
def test_imitation_dagger_labelling_and_validation_deal_from_their_streams(
    audit: Path, tmp_path: Path
) -> None:
    data = tiny("maskable_ppo", "native")
    data["env"] = {"counting": True}
    data["imitation"] = {"enabled": True, "episodes": 6, "epochs": 1, "dagger_rounds": 1,
                         "dagger_episodes": 4, "dagger_epochs": 1, "seed": 7}  # fmt: skip
    data["expert_iteration"] = {"rounds": 1, "episodes": 4, "budget": "planner-small",
                                "epochs": 1, "workers": 2}  # fmt: skip
    result = train(config_from_dict(data), tmp_path / "run", log=lambda _m: None)
    assert len(result.expert_rounds) == 1
    check_dealt(
        audit,
        {DealStream.TRAINING, DealStream.VALIDATION, DealStream.IMITATION, DealStream.SEARCH},
    )


@pytest.mark.slow
def test_seeds_runs_and_tuning_trials_deal_from_the_training_stream(
    audit: Path, tmp_path: Path
) -> None:
    import yaml

    from agents.learning.multiseed import train_seeds
    from agents.learning.tuning import tune

    cfg = config_from_dict(tiny("maskable_ppo", "dummy"))
    results = train_seeds(cfg, [RUN_SEED, RUN_SEED + 1], tmp_path / "seeds", log=lambda _m: None)
    assert len(results) == 2
    check_dealt(audit, {DealStream.TRAINING, DealStream.VALIDATION})
    for path in audit.iterdir():
        path.unlink()
    search = {"sampler": {"kind": "random", "seed": 1}, "pruner": {"kind": "none"},
              "parameters": {"algorithm.hyperparameters.learning_rate": {
                  "distribution": "float", "low": 1e-4, "high": 1e-3, "log": True}}}  # fmt: skip
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump({**tiny("maskable_ppo", "native"), "search": search}))
    outcome = tune(path, 2, out=tmp_path / "tune", log=lambda _m: None)
    assert outcome.finished == 2
    check_dealt(audit, {DealStream.TRAINING, DealStream.VALIDATION})


def test_curriculum_switch_deals_on_from_the_same_stream(audit: Path) -> None:
    """A curriculum stage switch used to reseed each env from ``integers(2**31 - 1)``: an
    evaluation seed."""
    from agents.learning.training import StagedEnv

    env = StagedEnv({"turns": 30})
    env.reset(seed=int(DealStream.TRAINING) * STREAM_SPAN + 5)
    env.set_env_kwargs({})
    for _ in range(3):
        env.reset()
    assert env.inner.rules.turns == 24
    seeds = {seed for seed, _ in read_audit(audit)}
    assert seeds == {int(DealStream.TRAINING) * STREAM_SPAN + 5}
    assert len({deck for _, deck in read_audit(audit)}) == 4
    assert np.all(np.array([len(d) for _, d in read_audit(audit)]) == 54)
