"""Expert iteration (agents/learning/expert_iteration.py, scripts/distill.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import load_file, network_weights

pytest.importorskip("sb3_contrib")

from agents.learning import expert_iteration as ei
from agents.learning.config import ExpertIterationConfig, Rollouts
from agents.learning.imitation import Demonstrations, collect_dagger
from agents.learning.provenance import META_FILE, TrainingError
from agents.learning.sb3_agent import KnowledgePolicy, MaskedPolicy, SB3Agent, load_sb3_agent
from agents.learning.training import RunDir, distill, latest_checkpoint
from agents.registry import SHIPPED_MODELS, make_agent
from coldiron_env.dealer import DealStream, stream_seed
from coldiron_env.env import ColdIronEnv
from coldiron_env.knowledge import Knowledge

ROOT = Path(__file__).resolve().parent.parent
distill_main = load_file(ROOT / "scripts" / "distill.py", "_script_distill").main
TRAINED = SHIPPED_MODELS["trained"]
TINY = {"rounds": 2, "episodes": 6, "budget": "planner-small"}


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--rounds", "0"], "--rounds"),
        (["--episodes", "0"], "--episodes"),
        (["--budget", "planner-huge"], "--budget"),
        (["--learning-rate", "0"], "--learning-rate"),
        (["--seed", "-1"], "seed"),
        (["--keep-rounds", "0"], "--keep-rounds"),
        (["--targets", "fuzzy"], "--targets"),
        (["--targets", "soft", "--soft-z", "-1"], "--soft-z"),  # named by their flags
    ],
)
def test_bad_settings_are_refused_by_name(
    args: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        status = distill_main(["--out", str(tmp_path / "x"), "--episodes", "2", *args])
    except SystemExit as exc:  # argparse refuses a budget that is not a choice
        status = int(exc.code or 0)
    assert status == 2 and named in capsys.readouterr().err
    with pytest.raises(ValueError, match="episodes"):
        ExpertIterationConfig(episodes=True)  # type: ignore[arg-type]
    assert not (tmp_path / "x" / "model.zip").exists(), "nothing is written before the check"


def test_the_search_keeps_the_networks_action_before_it_plans() -> None:
    """The planner over the network is the network until turn 18 (where it starts planning)."""
    agent = make_agent("trained")
    assert isinstance(agent, SB3Agent)
    search, network = ei.search_over(agent, "planner-small"), KnowledgePolicy(agent)
    env = ColdIronEnv(**agent.env_kwargs)
    checked = 0
    for seed in range(5):
        env.reset(seed=seed)
        while env.game.turn < search.config.plan_from_turn and env.game.outcome is None:
            kn = Knowledge.from_game(env.game)
            action = network.act_knowledge(kn)
            assert search.act_knowledge(kn) == action
            checked += 1
            env.step(action)
    assert checked > 50


def _distill(out: Path, seed: int = 0) -> Any:
    settings = ExpertIterationConfig(**TINY)  # type: ignore[arg-type]
    return distill("trained", out, settings, seed, start_path=TRAINED, log=lambda _: None)


def test_a_run_writes_a_loadable_run_directory_round_by_round(tmp_path: Path) -> None:
    out = tmp_path / "distilled"
    before = network_weights(make_agent("trained"))
    result = _distill(out)
    assert (len(result.expert_rounds), result.interrupted) == (2, False)
    meta = json.loads((out / META_FILE).read_text())
    assert meta["status"] == "completed" and meta["expert_iteration_rounds"] == 2
    record = json.loads((out / ei.EXPERT_FILE).read_text())
    assert record["settings"] == {**ExpertIterationConfig(**TINY).model_dump(exclude={"workers"}),
                                  "seed": 0} and meta["start"] == "trained"  # fmt: skip
    assert {"package_version", "git_commit", "versions", "wall_seconds"} <= set(meta)
    assert [r["round"] for r in record["rounds"]] == [0, 1]
    assert all(r["episodes"] == TINY["episodes"] and r["decisions"] > 0 for r in record["rounds"])
    distilled = make_agent(str(out))  # evaluate.py, ladder.py and play.py load it so
    assert isinstance(distilled, SB3Agent)
    assert not np.array_equal(network_weights(distilled), before), "cloning changed nothing"
    assert distilled.env_kwargs == make_agent("trained").env_kwargs  # type: ignore[attr-defined]


def test_an_interrupted_run_continues_after_its_last_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "distilled"
    real = ei.Labellers.label
    calls: list[int] = []

    def interrupted_in_round_2(self: ei.Labellers, *args: Any) -> Any:
        calls.append(len(calls))
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while round 2 is labelled
        return real(self, *args)

    monkeypatch.setattr(ei.Labellers, "label", interrupted_in_round_2)
    first = _distill(out)
    assert (len(first.expert_rounds), first.interrupted) == (1, True)
    assert json.loads((out / META_FILE).read_text())["status"] == "interrupted"
    second = _distill(out)
    assert (len(second.expert_rounds), second.interrupted) == (2, False)
    assert len(calls) == 3, "round 1 is kept, round 2 is played again"
    assert second.expert_rounds[0] == first.expert_rounds[0]
    with pytest.raises(TrainingError, match=str(out)):
        _distill(out, seed=3)


def test_the_script_refuses_what_is_not_a_network(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "distill.py"), "--start", "heuristic",
         "--out", str(tmp_path / "x"), "--rounds", "1", "--episodes", "2"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "'heuristic' is not a trained network" in proc.stderr
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "distill.py"), "--out", str(tmp_path / "y"),
         "--episodes", "0"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "error: --episodes: " in proc.stderr  # the flag, named
    run = tmp_path / "run"  # a training run's folder is not a distillation to continue
    run.mkdir()
    (run / META_FILE).write_text(json.dumps({"algorithm": "maskable_ppo", "seed": 0}))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "distill.py"), "--out", str(run)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "holds a run that is not a distillation" in proc.stderr


# ---------------------------------------------------------------- labelling on both cores
def _same(a: Any, b: Any) -> bool:
    return (
        len(a) == len(b)
        and all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("obs", "masks", "actions"))
        and np.allclose(a.returns, b.returns)
        and np.array_equal(a.episode, b.episode)
        and (a.episodes, a.wins) == (b.episodes, b.wins)
    )


@pytest.mark.parametrize("rollouts", ["heuristic", "network"])
def test_labels_are_those_of_the_search_over_the_network_run_on_each_state(
    rollouts: Rollouts,
) -> None:
    """Labelling takes the network's action at a state from its game, not from running it
    again: the labels are the planner's over the network itself (KnowledgePolicy)."""
    agent = make_agent("trained")
    assert isinstance(agent, SB3Agent)
    first = stream_seed(DealStream.SEARCH, 7, 0)
    fast = ei.label(agent, "planner-small", 6, first, 1.0, batch=3, rollouts=rollouts)
    search = ei.search_over(agent, "planner-small", rollouts=rollouts)
    assert isinstance(search.base, KnowledgePolicy)
    slow = collect_dagger(agent.model, lambda _: search, agent.env_kwargs, 6, first, 1.0, 3)
    assert _same(fast, slow) and search.planned > 0


def test_two_labelling_processes_give_the_labels_of_one() -> None:
    agent = make_agent("trained")
    assert isinstance(agent, SB3Agent)
    first = stream_seed(DealStream.SEARCH, 5, 0)
    alone = ei.label(agent, "planner-small", 7, first, 1.0, batch=3)
    assert alone.episodes == 7 and len(alone) > 7 * 10
    with ei.Labellers(2, batch=3) as labellers:
        together = labellers.label(agent, "planner-small", 7, first, 1.0)
    assert together is not None and _same(alone, together)
    with ei.Labellers(1, batch=3) as labellers:
        here = labellers.label(agent, "planner-small", 7, first, 1.0)
    assert here is not None and _same(alone, here)


def test_network_rollouts_label_with_the_network_and_alike_in_two_processes() -> None:
    from agents.players.policy_net import NetRoller

    agent = make_agent("trained")
    assert isinstance(agent, SB3Agent)
    planner = ei.search_over(agent, "planner-small", rollouts="network")
    assert isinstance(planner._roller, NetRoller)
    assert not isinstance(ei.search_over(agent, "planner-small")._roller, NetRoller)
    first = stream_seed(DealStream.SEARCH, 6, 0)
    alone = ei.label(agent, "planner-small", 4, first, 1.0, batch=2, rollouts="network")
    with ei.Labellers(2, batch=2, rollouts="network") as labellers:
        together = labellers.label(agent, "planner-small", 4, first, 1.0)
    assert together is not None and _same(alone, together)
    heuristic = ei.label(agent, "planner-small", 4, first, 1.0, batch=2)
    assert np.array_equal(heuristic.obs, alone.obs), "the same states, labelled by each search"


def test_soft_labels_are_the_searchs_chances_and_alike_in_two_processes() -> None:
    """Soft labelling keeps the hard labels; each row is a distribution over legal actions,
    one-hot on the label where the planner did not plan, and spread over the actions it
    compared (its choice mostly the likeliest) somewhere; two processes give the same."""
    agent = make_agent("trained")
    assert isinstance(agent, SB3Agent)
    first = stream_seed(DealStream.SEARCH, 5, 0)
    hard = ei.label(agent, "planner-small", 12, first, 1.0, batch=4)
    soft = ei.label(agent, "planner-small", 12, first, 1.0, batch=4, targets="soft")
    assert hard.targets is None and soft.targets is not None and _same(hard, soft)
    rows = soft.targets
    assert np.allclose(rows.sum(axis=1), 1.0) and not rows[~soft.masks].any()
    spread = (rows > 0).sum(axis=1) > 1
    assert spread.any(), "no planned decision compared two actions: nothing is checked"
    sure = ~spread
    assert np.array_equal(rows[sure].argmax(axis=1), soft.actions[sure])
    likeliest = rows[spread].argmax(axis=1)
    assert (likeliest == soft.actions[spread]).mean() > 0.8, "the planner's rule, made soft"
    plain = ei.label(agent, "planner-small", 12, first, 1.0, batch=4,
                     targets="soft", soft_z=0.0)  # fmt: skip
    assert plain.targets is not None and _same(plain, soft)
    base = np.arange(len(rows)), MaskedPolicy(agent.model).act(soft.obs, soft.masks)
    assert (plain.targets[base] <= rows[base] + 1e-6).all(), "the network's action loses..."
    assert (plain.targets[base] < rows[base] - 0.1).any(), "...its handicap's help"
    with ei.Labellers(2, batch=4, targets="soft") as labellers:
        together = labellers.label(agent, "planner-small", 12, first, 1.0)
    assert together is not None and together.targets is not None
    assert _same(soft, together) and np.array_equal(soft.targets, together.targets)


def _distill_soft(out: Path, rounds: int, keep: int = 3) -> Any:
    soft = {**TINY, "rounds": rounds, "keep_rounds": keep, "targets": "soft"}
    settings = ExpertIterationConfig(**soft)  # type: ignore[arg-type]
    return distill("trained", out, settings, 0, start_path=TRAINED, log=lambda _: None)


def test_a_run_on_soft_labels_keeps_them_and_resumes_as_an_unbroken_run(tmp_path: Path) -> None:
    """Soft labels kept across 3 rounds (the labels held in memory, the resumed run's read
    from disk): 2 rounds continued to 3 end with the network of 3 rounds in one go; the
    setting is recorded, and hard labels may not continue the run."""
    straight = _distill_soft(tmp_path / "straight", 3)
    cloned_on = [r["cloned_on"] for r in straight.expert_rounds]
    decisions = [r["decisions"] for r in straight.expert_rounds]
    assert cloned_on[2] == sum(decisions), "round 3 clones on all three rounds' labels"
    kept = Demonstrations.load(ei.labels_file(tmp_path / "straight", 2))
    assert kept.targets is not None and np.allclose(kept.targets.sum(axis=1), 1.0)
    out = tmp_path / "continued"
    _distill_soft(out, 2)
    resumed = _distill_soft(out, 3)
    assert [r["cloned_on"] for r in resumed.expert_rounds] == cloned_on
    assert np.array_equal(
        network_weights(load_sb3_agent(out)), network_weights(load_sb3_agent(tmp_path / "straight"))
    ), "the continued run ends with the unbroken run's network"
    recorded = json.loads((out / ei.EXPERT_FILE).read_text())["settings"]
    assert recorded["targets"] == "soft"
    hard = ExpertIterationConfig(**{**TINY, "rounds": 4, "keep_rounds": 3})  # type: ignore[arg-type]
    with pytest.raises(TrainingError, match=r"only expert_iteration\.rounds may change"):
        distill("trained", out, hard, 0, start_path=TRAINED, log=lambda _: None)
    with pytest.raises(ValueError, match="soft_z"):
        ExpertIterationConfig(soft_z=1.0)  # hard labels have no handicap


def test_a_stop_request_ends_the_labelling() -> None:
    agent = make_agent("trained")
    assert isinstance(agent, SB3Agent)
    first = stream_seed(DealStream.SEARCH, 5, 0)
    asked: list[int] = []

    def stop_after_one_batch() -> bool:
        asked.append(1)
        return len(asked) > 1

    with ei.Labellers(1, batch=2) as labellers:
        assert labellers.label(agent, "planner-small", 6, first, 1.0, stop_after_one_batch) is None
    assert len(asked) == 2, "asked before each batch: one was labelled, then it stopped"
    with ei.Labellers(2, batch=2) as labellers:
        assert labellers.label(agent, "planner-small", 400, first, 1.0, lambda: True) is None
        pool = labellers._pool
    assert pool is not None and all(not p.is_alive() for p in pool._pool)  # type: ignore[attr-defined]


# ---------------------------------------------------------------- in a training run
def _tiny_run_config(rounds: int) -> Any:
    from agents.learning.config import config_from_dict, load_config

    data = load_config(ROOT / "configs" / "maskable_ppo.yaml").to_dict()
    data["algorithm"]["hyperparameters"].update(n_steps=32, batch_size=32)
    data["training"].update(total_timesteps=64, n_envs=2, progress_bar=False, vec_env="dummy")
    data["training"]["torch_threads"] = 1
    data["evaluation"].update(freq=64, episodes=4)
    data["imitation"]["enabled"] = False
    data["expert_iteration"].update(rounds=rounds, episodes=3, budget="planner-small", workers=1)
    return config_from_dict(data)


def test_a_training_run_ends_with_its_rounds_and_resumes_inside_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rounds run after RL and save model.zip each; a stop (a real SIGINT) in round 2 keeps
    round 1, and the resumed run plays round 2 from round 1's network, not RL's."""
    from agents.learning.training import train

    cfg = _tiny_run_config(rounds=2)
    out = tmp_path / "run"
    real = ei.Labellers.label
    starts: list[tuple[int, np.ndarray]] = []

    def round_(self: ei.Labellers, agent: SB3Agent, *rest: Any) -> Any:
        starts.append((len(starts), network_weights(agent)))
        if len(starts) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the round is labelled
        return real(self, agent, *rest)

    monkeypatch.setattr(ei.Labellers, "label", round_)
    first = train(cfg, out, log=lambda _: None)
    assert first.interrupted and [r["round"] for r in first.expert_rounds] == [0]
    after_round_1 = network_weights(load_sb3_agent(out))
    rl_end_checkpoint = latest_checkpoint(RunDir(out))
    assert rl_end_checkpoint is not None
    rl_end = network_weights(load_sb3_agent(rl_end_checkpoint / "model.zip"))
    assert not np.array_equal(after_round_1, rl_end), "model.zip is round 1's network"
    assert np.array_equal(starts[0][1], rl_end), "round 1 starts from the end of RL"
    assert json.loads((out / "meta.json").read_text())["status"] == "interrupted"

    second = train(cfg, resume=out, log=lambda _: None)
    assert not second.interrupted
    assert [r["round"] for r in second.expert_rounds] == [0, 1]
    assert second.expert_rounds[0] == first.expert_rounds[0], "round 1 is kept, not replayed"
    assert len(starts) == 3 and np.array_equal(starts[-1][1], after_round_1)
    assert all(0.0 <= r["validation_win_rate"] <= 1.0 for r in second.expert_rounds)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "completed" and meta["expert_iteration_rounds"] == 2
    assert [r["command"] for r in meta["resumes"]] == [sys.argv], "the resuming command kept"
    assert not np.array_equal(network_weights(load_sb3_agent(out)), after_round_1)

    other = cfg.model_copy(deep=True)
    other.expert_iteration.episodes = 4
    config_before = (out / "config.yaml").read_text()
    with pytest.raises(
        TrainingError, match=r"expert_iteration\.episodes: 3 -> 4\).*only expert_iteration\.rounds"
    ):  # the config the run began with (meta.json's recipe) holds it
        train(other, resume=out, log=lambda _: None)
    assert (out / "config.yaml").read_text() == config_before, "the refused config is not kept"
    longer = cfg.model_copy(deep=True)
    longer.training.total_timesteps = 4 * cfg.training.total_timesteps
    with pytest.raises(TrainingError, match="RL cannot continue after them"):
        train(longer, resume=out, log=lambda _: None)
    assert (out / "config.yaml").read_text() == config_before
    more = cfg.model_copy(deep=True)
    more.expert_iteration.rounds = 3
    third = train(more, resume=out, log=lambda _: None)
    assert [r["round"] for r in third.expert_rounds] == [0, 1, 2]
    assert third.expert_rounds[:2] == second.expert_rounds


def test_a_record_from_before_the_rollouts_option_resumes_as_heuristic_rollouts(
    tmp_path: Path,
) -> None:
    """The shipped `trained` recorded its settings before `rollouts` existed: such a record
    reads as heuristic rollouts, so a config with them may resume it and one with network
    rollouts may not."""
    cfg = _tiny_run_config(rounds=2)
    settings = ei.identity(cfg)
    assert settings.pop("rollouts") == "heuristic"
    assert settings.pop("keep_rounds") == 1  # nor keep_rounds, which came later
    assert settings.pop("targets") == "hard"  # nor targets
    assert settings.pop("soft_z") is None
    (tmp_path / ei.EXPERT_FILE).write_text(json.dumps({"settings": settings, "rounds": []}))
    ei.check_resumable(cfg, tmp_path)
    network = cfg.model_copy(deep=True)
    network.expert_iteration.rollouts = "network"
    with pytest.raises(TrainingError, match=r"only expert_iteration\.rounds may change"):
        ei.check_resumable(network, tmp_path)
    with pytest.raises(TrainingError, match=r"\(rollouts: 'heuristic' -> 'network'\)"):
        ei.check_resumable(network, tmp_path)  # the one setting changed, with both values


def _distill_keeping(out: Path, rounds: int, keep: int) -> Any:
    kept = {**TINY, "rounds": rounds, "keep_rounds": keep}
    settings = ExpertIterationConfig(**kept)  # type: ignore[arg-type]
    return distill("trained", out, settings, 0, start_path=TRAINED, log=lambda _: None)


def test_kept_labels_are_cloned_on_and_survive_an_interruption(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With keep_rounds = 2 each round clones on its labels and the round before's; a run
    stopped in round 3 and continued ends with the network of a run never stopped, and
    the labels no later round needs are deleted."""
    straight = _distill_keeping(tmp_path / "straight", 3, 2)
    decisions = [r["decisions"] for r in straight.expert_rounds]
    cloned_on = [r["cloned_on"] for r in straight.expert_rounds]
    assert cloned_on == [decisions[0], decisions[0] + decisions[1], decisions[1] + decisions[2]]
    labels = tmp_path / "straight" / ei.LABELS_DIR
    assert sorted(p.name for p in labels.iterdir()) == ["round-002.npz"], "only the next's"
    kept = Demonstrations.load(ei.labels_file(tmp_path / "straight", 2))
    assert (len(kept), kept.episodes) == (decisions[2], TINY["episodes"])

    real, calls = ei.Labellers.label, []

    def interrupted_in_round_3(self: ei.Labellers, *args: Any) -> Any:
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return real(self, *args)

    monkeypatch.setattr(ei.Labellers, "label", interrupted_in_round_3)
    out = tmp_path / "stopped"
    assert _distill_keeping(out, 3, 2).interrupted
    monkeypatch.setattr(ei.Labellers, "label", real)
    resumed = _distill_keeping(out, 3, 2)
    timing = ("label_seconds", "clone_seconds", ei.MODEL_SHA_KEY)  # a zip holds its time
    assert [{k: v for k, v in r.items() if k not in timing} for r in resumed.expert_rounds] == [
        {k: v for k, v in r.items() if k not in timing} for r in straight.expert_rounds
    ]
    assert np.array_equal(
        network_weights(load_sb3_agent(out)), network_weights(load_sb3_agent(tmp_path / "straight"))
    ), "the continued run ends with the unbroken run's network"
    meta = json.loads((out / META_FILE).read_text())
    assert [r["rounds"] for r in meta["resumes"]] == [3], "the continuing command is kept"
    assert meta["resumes"][0]["command"] == sys.argv

    (labels / "round-002.npz").unlink()
    meta_before = (tmp_path / "straight" / META_FILE).read_text()
    with pytest.raises(TrainingError, match=r"round-002\.npz is missing"):
        _distill_keeping(tmp_path / "straight", 4, 2)
    assert (tmp_path / "straight" / META_FILE).read_text() == meta_before, "refused first"
    with pytest.raises(TrainingError, match=r"only expert_iteration\.rounds may change"):
        _distill_keeping(out, 4, 3)
