"""The models shipped in the package load by name, carry their provenance, and play."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from agents.evaluation.arena import agent_seeds, deal_decks, evaluate_agent
from agents.learning.config import ExpertIterationConfig, config_from_dict, load_config
from agents.learning.sb3_agent import load_sb3_agent
from agents.registry import SEARCH_OVER_MODELS, SHIPPED_MODELS, agent_names, make_agent

ROOT = Path(__file__).resolve().parent.parent
DEALS = 40


@pytest.mark.parametrize("name", sorted(SHIPPED_MODELS))
def test_a_shipped_model_loads_by_name_and_plays_like_its_run_directory(name: str) -> None:
    run = SHIPPED_MODELS[name]
    assert name in agent_names()
    for file in ("model.zip", "config.yaml", "meta.json"):
        assert (run / file).is_file(), f"{run / file} is missing: the model ships with it"
    by_name, by_path = make_agent(name), load_sb3_agent(run)
    decks, seeds = deal_decks(3, DEALS), agent_seeds(3, DEALS)
    played = evaluate_agent(by_name, decks, seeds=seeds)
    assert played.won == evaluate_agent(by_path, decks, seeds=seeds).won
    assert played.outcomes["illegal"] == 0 and played.episodes == DEALS


@pytest.mark.parametrize("name", sorted(SHIPPED_MODELS))
def test_a_shipped_model_records_the_command_that_reproduces_it(name: str) -> None:
    """docs/models.md's command trains the shipped config and seed (as its meta.json says)."""
    run = SHIPPED_MODELS[name]
    meta = json.loads((run / "meta.json").read_text(encoding="utf-8"))
    assert meta["status"] == "completed"
    doc = (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
    if "start" in meta:  # expert iteration over another shipped model (scripts/distill.py)
        record = run / "expert_iteration.json"  # meta.json held the rounds before it
        done = json.loads(record.read_text()) if "settings" not in meta else meta
        settings = done["settings"]
        assert len(done["rounds"]) == settings["rounds"]
        start = meta["start"]
        # read by today's schema: a setting added since, at its default, changes nothing
        given = ExpertIterationConfig(**{k: v for k, v in settings.items() if k != "seed"})
        others = given.model_dump(exclude={"rounds", "workers"})
        defaults = ExpertIterationConfig().model_dump(exclude={"rounds", "workers"})
        options = "".join(  # the settings apart from the defaults, as distill.py spells them
            f" --{key.replace('_', '-')} {value}"
            for key, value in others.items()
            if value != defaults[key]
        )
        command = (
            f"scripts/distill.py --start {start} --rounds {settings['rounds']} "
            f"--seed {settings['seed']} --workers 2{options}"
        )
        assert command in doc and f"`{name}`" in doc
        # the run it continued, when its record ships too (it may have been stopped by hand:
        # its status is not asserted)
        start_meta = run / "start_meta.json"
        if not start_meta.is_file():
            return
        meta = json.loads(start_meta.read_text(encoding="utf-8"))
        rounds = json.loads((run / "start_expert_iteration.json").read_text())["rounds"]
        assert len(rounds) == meta["expert_iteration_rounds"]
    saved = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
    # read by today's schema: a setting added since, at its default, changes nothing trained
    shipped = config_from_dict(saved).to_dict()
    config_file = ROOT / meta["config_file"]
    current = load_config(config_file).to_dict()
    shipped.get("training", {}).pop("progress_bar", None)
    current.get("training", {}).pop("progress_bar", None)
    assert shipped == current, f"{config_file} changed since {name} was trained: retrain it"
    assert shipped["expert_iteration"]["rounds"] == meta["expert_iteration_rounds"]
    command = f"scripts/train.py --config {meta['config_file']} --seed {meta['seed']}"
    assert command in doc and f"`{name}`" in doc


def test_the_planner_over_a_shipped_model_is_named_and_uses_it() -> None:
    from agents.learning.sb3_agent import KnowledgePolicy
    from agents.players.planner import BUDGETS, PlannerAgent

    for name, search in SEARCH_OVER_MODELS.items():
        assert search.model in SHIPPED_MODELS and name in agent_names()
        planner = make_agent(name)
        assert isinstance(planner, PlannerAgent) and planner.name == name
        budget = BUDGETS[search.budget] if isinstance(search.budget, str) else search.budget
        assert planner.config == replace(budget, **dict(search.overrides))
        assert isinstance(planner.base, KnowledgePolicy)
        ours = planner.base.agent.model.policy.state_dict()
        shipped = load_sb3_agent(SHIPPED_MODELS[search.model]).model.policy.state_dict()
        assert ours.keys() == shipped.keys()
        assert all(torch.equal(ours[k], shipped[k]) for k in ours), "the base is the shipped net"
        rollouts = planner.rollout_policy
        assert (rollouts is not None) == search.network_rollouts
        if rollouts is not None:  # the rollouts are played by the same network's actor
            first = ours["mlp_extractor.policy_net.0.weight"].numpy()
            assert np.array_equal(rollouts.weights[0], first.T)


def test_a_counting_network_plays_the_same_games_in_the_vector_env_and_in_single_envs() -> None:
    """Evaluation's default engine (the native vector env) against plain envs, move for move:
    deals given as decks and as seeds, with the shipped counting network."""
    from agents.evaluation.lockstep import play_lockstep
    from coldiron_env.cards import deck_codes

    agent = make_agent("trained")
    policy = agent.batch_policy  # type: ignore[attr-defined]
    kwargs = agent.env_kwargs  # type: ignore[attr-defined]
    assert kwargs["counting"], "the shipped default sees the counting observation"
    by_deck = [{"options": {"deck": deck_codes(r)}} for r in deal_decks(4, 60).tolist()]
    by_seed = [{"seed": 1000 + k} for k in range(60)]
    for resets in (by_deck, by_seed):
        single = play_lockstep(policy, kwargs, resets, batch=16, engine="single")
        vector = play_lockstep(policy, kwargs, resets, batch=16, engine="vector")
        assert vector == single
        assert len({(e.outcome, e.turn) for e in single}) > 2, "the games must differ"
    with pytest.raises(ValueError, match="engine must be"):
        play_lockstep(policy, kwargs, by_seed, engine="fast")  # type: ignore[arg-type]


# ---------------------------------------------------------------- pins
PINS = json.loads((Path(__file__).parent / "pins" / "shipped_models.json").read_text())
"""The shipped models' pins (written by the lab: ``.venv/bin/python -m lab.pins --write``)."""
PIN_SEED, PIN_DEALS = 900, 1_000  # the pins' deals: the first 1,000 validation deals of seed 900


@pytest.mark.parametrize("name", sorted(SHIPPED_MODELS))
def test_a_shipped_model_plays_its_pinned_games(name: str) -> None:
    """A swapped or retrained zip (its meta.json updated to match) still fails here."""
    from agents.evaluation.arena import evaluate
    from agents.registry import make_agent

    assert f"the first {PIN_DEALS} validation deals of seed {PIN_SEED}" in PINS["deals"]
    (result,) = evaluate([(name, make_agent(name))], PIN_DEALS, PIN_SEED, validation=True)
    assert result.episodes == PIN_DEALS
    assert result.outcomes == PINS["models"][name]["outcomes"], (
        f"{name} plays other games than pinned: reship it on purpose with lab.pins --write"
    )


@pytest.mark.parametrize("name", sorted(SHIPPED_MODELS))
def test_every_shipped_file_is_hashed_in_its_meta(name: str) -> None:
    from agents.learning.provenance import sha256_file

    folder = SHIPPED_MODELS[name]
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    files = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name != "meta.json")
    assert sorted(meta["sha256"]) == files
    pin = PINS["models"][name]
    assert meta["sha256"] == pin["sha256"]
    assert sha256_file(folder / "meta.json") == pin["meta_sha256"], (
        f"{name}'s meta.json changed since it was pinned: lab.pins --write"
    )


@pytest.mark.parametrize("changed", ["model.zip", "config.yaml"])
def test_a_changed_shipped_file_is_refused_by_name(changed: str, tmp_path: Path) -> None:
    import shutil

    from agents.learning.sb3_agent import ModelLoadError

    folder = tmp_path / "trained"
    shutil.copytree(SHIPPED_MODELS["trained"], folder)
    load_sb3_agent(folder)  # as shipped: loads
    with open(folder / changed, "ab") as fh:
        fh.write(b"\n")  # still a valid zip / YAML: only the hash tells
    with pytest.raises(ModelLoadError, match=rf"{changed}: changed since .*meta.json"):
        load_sb3_agent(folder)
    (folder / changed).unlink()
    with pytest.raises(ModelLoadError, match=rf"{changed}: (missing|run directory has no model)"):
        load_sb3_agent(folder)


@pytest.mark.slow
def test_a_loaded_shipped_model_learns_without_writing_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped zip records the TensorBoard folder of the run that made it
    (runs/maskable_ppo-...): a learn() after loading wrote there, in the user's working
    folder. Loaded, it logs nowhere unless told."""
    from agents.learning.training import build_vec_env

    monkeypatch.chdir(tmp_path)
    agent = load_sb3_agent(SHIPPED_MODELS["trained"])
    assert agent.model.tensorboard_log is None
    venv = build_vec_env("native", agent.model.n_envs, agent.env_kwargs)
    try:
        agent.model.set_env(venv)
        agent.model.learn(total_timesteps=1)  # one rollout
    finally:
        venv.close()
    assert list(tmp_path.iterdir()) == []
