"""Training: tiny runs per config, reload, resume, shaping off in evaluation, imitation,
load errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from stable_baselines3.common.callbacks import BaseCallback

from agents.evaluation.arena import agent_seeds, deal_decks, evaluate_agent
from agents.learning.config import Config, config_from_dict, load_config
from agents.learning.imitation import behaviour_clone, collect_demonstrations
from agents.learning.sb3_agent import ModelLoadError, load_sb3_agent, tag_model
from agents.learning.shaping import ShapingVecEnv, run_window_potential
from agents.learning.training import (
    RunDir,
    StagedEnv,
    StreamSeededVecEnv,
    build_vec_env,
    evaluate_model,
    latest_checkpoint,
    make_training_env,
    rollout_size,
    set_vec_env_kwargs,
    train,
)
from agents.players.base import Agent
from coldiron_env.actions import BONUS, PHASE_BONUS, PHASE_IRON, STOP, THREATEN
from coldiron_env.cards import deck_codes
from coldiron_env.dealer import DealStream
from coldiron_env.env import ColdIronEnv
from coldiron_env.observation import decode

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = sorted(p for p in (ROOT / "configs").glob("*.yaml") if not p.stem.startswith("tune_"))
TINY_STEPS = 256


def newest_checkpoint(run: Path) -> Path:
    """The checkpoint a resume of ``run`` starts from."""
    ck = latest_checkpoint(RunDir(run))
    assert ck is not None, f"{run}: no checkpoint"
    return ck


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Any:
    """Small networks: one thread is fastest, and the machine is shared."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class ScriptedTeacher(Agent):
    """Threaten every turn and take every bonus; stop ironing at once (deterministic)."""

    name = "scripted"

    def act(self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None = None) -> int:
        phase = decode(obs, 24).phase
        if phase == PHASE_BONUS:
            return BONUS
        if phase == PHASE_IRON:
            return STOP
        return THREATEN


def tiny(cfg: Config, *, steps: int = TINY_STEPS, imitation: bool = False, **over: Any) -> Config:
    """A copy of ``cfg`` shrunk to a few hundred steps on 2 envs."""
    data = cfg.to_dict()
    hp = data["algorithm"]["hyperparameters"]
    spec = cfg.algorithm.spec
    if spec.off_policy:
        hp.update(learning_starts=32, buffer_size=2000, batch_size=32, target_update_interval=64)
    elif "batch_size" in hp or spec.name != "a2c":
        hp.update(n_steps=32, batch_size=32)
    else:
        hp.update(n_steps=8)
    data["training"].update(total_timesteps=steps, n_envs=2, progress_bar=False, vec_env="dummy")
    data["evaluation"].update(freq=128, episodes=6)
    data["checkpoint"].update(freq=128)
    dagger = min(data["imitation"]["dagger_rounds"], 1)  # keep DAgger covered, but tiny
    data["imitation"].update(
        enabled=imitation, episodes=3, epochs=1, batch_size=64,
        dagger_rounds=dagger, dagger_episodes=3, dagger_epochs=1,
    )  # fmt: skip
    rounds = min(data["expert_iteration"]["rounds"], 1)  # keep expert iteration covered, tiny
    data["expert_iteration"].update(rounds=rounds, episodes=3, budget="planner-small", workers=1)
    for key, value in over.items():
        section, _, name = key.partition("__")
        data[section][name] = value
    return config_from_dict(data)


def scripted_factory(name: str) -> Agent:
    return ScriptedTeacher()


def play(agent: Agent, seeds: list[int]) -> list[str]:
    env = ColdIronEnv(**agent.env_kwargs)  # type: ignore[attr-defined]
    outcomes = []
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        agent.reset(seed)
        done = False
        while not done:
            action = agent.act(obs, info["action_mask"], info)
            assert info["action_mask"][action], "a trained agent must play legal actions"
            obs, _, done, _, info = env.step(action)
        outcomes.append(info["outcome"])
    return outcomes


# ---------------------------------------------------------------- end to end, per config
@pytest.mark.slow
@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_tiny_run_saves_reloads_and_evaluates(path: Path, tmp_path: Path) -> None:
    from agents.learning.training import steps_to_train

    cfg = tiny(load_config(path), imitation=True)
    result = train(cfg, tmp_path / "run", teacher_factory=scripted_factory, log=lambda _: None)
    run = result.run_dir
    assert not result.interrupted and result.timesteps >= TINY_STEPS
    assert result.timesteps == steps_to_train(cfg, 0)  # whole rollouts, as announced
    for name in (
        "model.zip",
        "best_model.zip",
        "config.yaml",
        "meta.json",
        "evaluations.csv",
        "evaluations.json",
        "learning_curve.png",
        "imitation.json",
    ):
        assert (run / name).is_file(), name
    assert (newest_checkpoint(run) / "state.json").is_file()
    assert any((run / "tb").rglob("events.out.tfevents*")), "TensorBoard logs are written"
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "completed" and meta["seed"] == cfg.seed
    assert meta["algorithm"] == cfg.algorithm.name and meta["package_version"]
    assert meta["timesteps"] == result.timesteps and meta["git_commit"]
    assert load_config(run / "config.yaml") == cfg  # the resolved config
    history = json.loads((run / "evaluations.json").read_text())["evaluations"]
    assert history[0]["timesteps"] == 0 and history[-1]["timesteps"] == result.timesteps
    assert all(
        h["episodes"] == 6 and 0 <= h["ci_low"] <= h["win_rate"] <= h["ci_high"] for h in history
    )
    if cfg.algorithm.spec.off_policy:
        assert (newest_checkpoint(run) / "replay_buffer.pkl").is_file()

    agent = load_sb3_agent(run)
    assert agent.env_kwargs == cfg.env_kwargs()
    outcomes = play(agent, [11, 12, 13])
    assert len(outcomes) == 3 and "illegal" not in outcomes
    # The zip alone (moved away from its run directory) still carries algorithm and env.
    alone = tmp_path / "alone.zip"
    alone.write_bytes((run / "model.zip").read_bytes())
    assert load_sb3_agent(alone).env_kwargs == cfg.env_kwargs()


# ---------------------------------------------------------------- resume
class InterruptAt(BaseCallback):
    def __init__(self, at: int) -> None:
        super().__init__()
        self.at = at

    def _on_step(self) -> bool:
        if self.model.num_timesteps >= self.at:
            raise KeyboardInterrupt
        return True


class _Finalized:
    pass


class SignalAt(BaseCallback):
    """Sends this process a real signal once, as Ctrl-C or ``kill`` would, from inside a
    finalizer: where an exception raised by a signal handler is ignored by Python."""

    def __init__(self, at: int, signum: int) -> None:
        super().__init__()
        self.at = at
        self.signum = signum
        self.sent_at: int | None = None

    def _on_step(self) -> bool:
        if self.sent_at is None and self.model.num_timesteps >= self.at:
            self.sent_at = self.model.num_timesteps
            holder = _Finalized()
            weakref.finalize(holder, os.kill, os.getpid(), self.signum)
            del holder
        return True


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_learning_stops_the_run_and_saves_it(signum: int, tmp_path: Path) -> None:
    """Ctrl-C or SIGTERM during ``learn`` stops at the next step, whatever code it lands in."""
    cfg = tiny(load_config(ROOT / "configs" / "maskable_ppo.yaml"), steps=4096)
    sender = SignalAt(300, signum)
    before = signal.getsignal(signum)
    result = train(cfg, tmp_path / "run", extra_callbacks=[sender], log=lambda _: None)
    assert signal.getsignal(signum) is before, "the handler in force before training is back"
    assert result.interrupted and sender.sent_at is not None
    assert sender.sent_at <= result.timesteps < cfg.training.total_timesteps
    state = json.loads((newest_checkpoint(tmp_path / "run") / "state.json").read_text())
    assert state["timesteps"] == result.timesteps and state["reason"] == "interrupt"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["maskable_ppo", "dqn"])
def test_interrupt_then_resume_continues_the_run(name: str, tmp_path: Path) -> None:
    cfg = tiny(load_config(ROOT / "configs" / f"{name}.yaml"), steps=512)
    out = tmp_path / "run"
    first = train(cfg, out, extra_callbacks=[InterruptAt(200)], log=lambda _: None)
    assert first.interrupted
    stopped = first.timesteps
    assert 200 <= stopped < 512
    state = json.loads((newest_checkpoint(out) / "state.json").read_text())
    assert state["timesteps"] == stopped and state["reason"] == "interrupt"
    assert json.loads((out / "meta.json").read_text())["status"] == "interrupted"
    before = json.loads((out / "evaluations.json").read_text())["evaluations"]

    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train.py"), "--resume", str(out),
         "--no-progress-bar"],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = next(line for line in proc.stdout.splitlines() if line.startswith("training "))
    left, size = 512 - stopped, rollout_size(cfg)
    if left % size:  # what is left, not the whole budget, is rounded up to whole rollouts
        assert said.startswith(f"training {-(-left // size) * size:,} steps: the {left:,} left")
    else:
        assert said == f"training {left:,} steps"
    after = json.loads((out / "evaluations.json").read_text())["evaluations"]
    assert after[: len(before)] == before, "the evaluation history is appended to"
    steps = [h["timesteps"] for h in after]
    assert steps == sorted(steps) and steps[-1] >= 512
    assert all(s >= stopped for s in steps[len(before) :])
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "completed" and meta["resumes"][0]["timesteps"] == stopped
    assert meta["timesteps"] >= 512
    runs = list((out / "tb").iterdir())
    assert len(runs) == 1, f"the resumed run logs into the same TensorBoard run, got {runs}"
    agent = load_sb3_agent(out)
    assert agent.model.num_timesteps == meta["timesteps"]


@pytest.mark.slow
def test_a_resume_that_would_change_the_run_is_refused_before_it_writes(tmp_path: Path) -> None:
    """A config.yaml edited beyond the budgets, a lowered budget, a finished run, an --out that
    is a file: each refused naming the problem, the run's files as they were."""
    from agents.learning.config import apply_overrides, dump_config
    from agents.learning.provenance import TrainingError

    cfg = tiny(load_config(ROOT / "configs" / "maskable_ppo.yaml"), steps=512,
               expert_iteration__rounds=0)  # fmt: skip
    out = tmp_path / "run"
    first = train(cfg, out, extra_callbacks=[InterruptAt(200)], log=lambda _: None)
    assert first.interrupted

    def files() -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in (out / "meta.json", out / "config.yaml")}

    before = files()
    edited = config_from_dict({**cfg.to_dict(), "policy": {**cfg.to_dict()["policy"],
                                                          "net_arch": [64, 64]}})  # fmt: skip
    (out / "config.yaml").write_text(dump_config(edited))
    with pytest.raises(TrainingError, match=r"config.yaml: changed since the run began "
                       r"\(policy.net_arch: \{'pi': \[256, 256\].* -> \[64, 64\]\)"):  # fmt: skip
        train(edited, resume=out, log=lambda _: None)
    (out / "config.yaml").write_bytes(before["config.yaml"])
    lowered = apply_overrides(cfg, timesteps=first.timesteps - 64)
    with pytest.raises(TrainingError, match=r"is not above the .* timesteps already trained"):
        train(lowered, resume=out, log=lambda _: None)
    assert files() == before, "nothing written by a refused resume"
    meta = json.loads(before["meta.json"])
    del meta["recipe"]["expert_iteration"]["keep_rounds"]  # a field added since the run began
    (out / "meta.json").write_text(json.dumps(meta))
    more_rounds = apply_overrides(cfg, timesteps=1024)  # raising the budget is allowed
    more_rounds.expert_iteration.workers = 2  # and how it runs
    assert not train(more_rounds, resume=out, log=lambda _: None).interrupted
    done = files()
    with pytest.raises(TrainingError, match="already completed"):
        train(more_rounds, resume=out, log=lambda _: None)
    assert files() == done
    (tmp_path / "a-file").write_text("")
    with pytest.raises(TrainingError, match=r"--out .*a-file: is a file, not a directory"):
        train(cfg, tmp_path / "a-file", log=lambda _: None)


# ---------------------------------------------------------------- shaping
def test_shaping_terms_telescope_and_vanish_at_terminal() -> None:
    venv = StreamSeededVecEnv(build_vec_env("dummy", 2, {}), DealStream.TRAINING)
    venv.seed(5)
    venv = ShapingVecEnv(venv, gamma=1.0, coefficient=0.5)
    obs = venv.reset()
    totals = np.zeros(2)
    finished = 0
    rng = np.random.default_rng(0)
    last_phi = run_window_potential(obs, 0.5)
    while finished < 6:
        masks = np.stack(venv.env_method("action_masks"))
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        obs, _, dones, infos = venv.step(actions)
        phi = run_window_potential(obs, 0.5)
        for i in range(2):
            expected = (0.0 if dones[i] else phi[i]) - last_phi[i]
            assert infos[i]["shaping"] == pytest.approx(expected)
            totals[i] += infos[i]["shaping"]
            if dones[i]:
                # Phi(s0) = 0 (empty hand) and Phi(terminal) = 0: an episode's shaping sums to 0.
                assert totals[i] == pytest.approx(0.0)
                totals[i] = 0.0
                finished += 1
        last_phi = phi
    venv.close()


def test_potential_counts_best_windows() -> None:
    obs = np.zeros((1, 48), dtype=np.float32)
    obs[0, [0, 1, 5]] = 1.0  # AH 2H 6H: best window A-2-3 holds 2
    obs[0, [10 + 6, 10 + 7, 10 + 8]] = 1.0  # 7D 8D 9D: a full run, 3
    assert run_window_potential(obs, 1.0)[0] == pytest.approx(5.0)


@pytest.mark.slow
def test_evaluation_env_has_no_shaping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = load_config(ROOT / "configs" / "maskable_ppo.yaml")
    cfg = tiny(base, shaping__enabled=True, shaping__coefficient=5.0)
    assert isinstance(make_training_env(cfg), ShapingVecEnv)
    from agents.learning import training

    built: list[Any] = []

    class Recording(ColdIronEnv):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            built.append(self)

    from agents.evaluation import lockstep as evaluation

    monkeypatch.setattr(training, "ColdIronEnv", Recording)
    monkeypatch.setattr(evaluation, "ColdIronEnv", Recording)  # the evaluation envs
    result = train(cfg, tmp_path / "run", log=lambda _: None)
    monkeypatch.undo()
    assert built and all(type(e) is Recording and e.win_reward == 1.0 for e in built)
    # The reported win rate is the true one: replay the same deals independently.
    last = result.history[-1]
    agent = load_sb3_agent(result.run_dir)
    seeds = list(range(cfg.evaluation.seed, cfg.evaluation.seed + cfg.evaluation.episodes))
    outcomes = play(agent, seeds)
    assert last["wins"] == outcomes.count("won")
    assert last["outcomes"] == {o: outcomes.count(o) for o in last["outcomes"]}


@pytest.mark.slow
def test_observation_normalizer_is_saved_and_used_by_the_loaded_agent(tmp_path: Path) -> None:
    base = load_config(ROOT / "configs" / "maskable_ppo.yaml")
    cfg = tiny(base, training__normalize_obs=True, expert_iteration__rounds=0)
    result = train(cfg, tmp_path / "run", log=lambda _: None)
    run = result.run_dir
    assert (run / "vecnormalize.pkl").is_file()
    assert (newest_checkpoint(run) / "vecnormalize.pkl").is_file()
    agent = load_sb3_agent(run)
    normalizer = agent.policy.obs_normalizer
    assert normalizer is not None and not normalizer.training
    assert normalizer.obs_rms.count > result.timesteps / 2, "statistics were gathered"
    obs, _ = ColdIronEnv(**cfg.env_kwargs()).reset(seed=0)  # the observation it trained on
    assert not np.allclose(normalizer.normalize_obs(obs), obs), "the agent sees normalized input"
    # The loaded agent (model + normalizer) plays the final evaluation's games again.
    last = result.history[-1]
    seeds = list(range(cfg.evaluation.seed, cfg.evaluation.seed + cfg.evaluation.episodes))
    outcomes = play(agent, seeds)
    assert last["outcomes"] == {o: outcomes.count(o) for o in last["outcomes"]}


# ---------------------------------------------------------------- curriculum
def test_staged_env_switches_rules_at_next_reset() -> None:
    venv = StreamSeededVecEnv(
        build_vec_env("dummy", 2, {"turns": 40, "suits_required": 2}), DealStream.TRAINING
    )
    venv.seed(3)
    venv.reset()
    assert venv.get_attr("inner")[0].rules.turns == 40
    set_vec_env_kwargs(venv, {})
    assert venv.get_attr("inner")[0].rules.turns == 40  # not before the episode ends
    venv.env_method("reset")
    inner = venv.get_attr("inner")
    assert all(e.rules.turns == 24 and e.rules.suits_required == 4 for e in inner)
    assert venv.observation_space == ColdIronEnv().observation_space
    venv.close()


def test_staged_env_exposes_masks() -> None:
    env = StagedEnv({})
    env.reset(seed=1)
    assert env.action_masks().dtype == bool and env.action_masks().sum() == 17


# ---------------------------------------------------------------- imitation
def small_model(name: str) -> Any:
    data: dict[str, Any] = {
        "algorithm": {"name": name},
        "training": {"total_timesteps": 1000, "n_envs": 1, "progress_bar": False},
        "policy": {"net_arch": [32]},
    }
    if name == "recurrent_ppo":
        data["policy"]["lstm_hidden_size"] = 16
        data["algorithm"]["hyperparameters"] = {"n_steps": 64, "batch_size": 64}
    elif name == "maskable_ppo":
        data["algorithm"]["hyperparameters"] = {"n_steps": 64, "batch_size": 64}
    cfg = config_from_dict(data)
    from agents.learning.training import RunDir, build_model

    return build_model(cfg, build_vec_env("dummy", 1, {}), RunDir(Path("unused")))


@pytest.mark.parametrize("name", ["maskable_ppo", "ppo", "dqn", "recurrent_ppo"])
def test_behaviour_cloning_imitates_a_scripted_teacher(name: str) -> None:
    import torch

    torch.manual_seed(0)
    demos = collect_demonstrations(ScriptedTeacher(), {}, episodes=12, seed=100)
    assert len(demos) > 100 and set(np.unique(demos.actions)) >= {THREATEN}
    model = small_model(name)
    stats = behaviour_clone(
        model, demos, epochs=30, batch_size=64, learning_rate=3e-3, value_pretrain=True
    )
    assert stats["accuracy_after"] > 0.97, stats
    assert stats["accuracy_after"] > stats["accuracy_before"] + 0.2, stats
    assert stats["epoch_losses"][-1] < stats["epoch_losses"][0]


def test_demonstrations_hold_returns_and_episodes() -> None:
    demos = collect_demonstrations(ScriptedTeacher(), {}, episodes=5, seed=7, gamma=1.0)
    assert demos.episodes == 5 and set(demos.episode.tolist()) == set(range(5))
    assert demos.masks[np.arange(len(demos)), demos.actions].all()
    # Returns are 1.0 for won episodes and 0.0 otherwise with gamma 1 and default rewards.
    assert set(np.unique(demos.returns).tolist()) <= {0.0, 1.0}
    assert (
        int(demos.returns[np.r_[0, np.flatnonzero(np.diff(demos.episode)) + 1]].sum()) == demos.wins
    )


# ---------------------------------------------------------------- loading errors
def test_load_missing_file_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "absent.zip"
    with pytest.raises(ModelLoadError, match=r"absent\.zip"):
        load_sb3_agent(missing)
    with pytest.raises(ModelLoadError, match=r"model\.zip"):
        load_sb3_agent(tmp_path)  # a directory without a model


def test_load_corrupt_file_names_it(tmp_path: Path) -> None:
    bad = tmp_path / "corrupt.zip"
    bad.write_bytes(b"this is not a zip file")
    with pytest.raises(ModelLoadError, match=r"corrupt\.zip"):
        load_sb3_agent(bad)


def test_load_incompatible_model_names_it(tmp_path: Path) -> None:
    model = small_model("ppo")
    tag_model(model, "ppo", {"recall": True})  # trained on 48 inputs, claims recall (102)
    path = tmp_path / "mismatch.zip"
    model.save(path)
    with pytest.raises(ModelLoadError, match=r"mismatch\.zip.*observation space"):
        load_sb3_agent(path)


@pytest.mark.parametrize(
    ("algorithm", "env_kwargs"),
    [
        ("maskable_ppo", {"counting": True}),
        ("ppo", {"observation_mode": "dict", "recall": True}),
        ("a2c", {}),
        ("dqn", {"mask_in_observation": True, "recall": True}),
    ],
)
def test_a_zip_saved_by_sb3_itself_loads_with_its_algorithm_and_observation(
    tmp_path: Path, algorithm: str, env_kwargs: dict[str, Any]
) -> None:
    """A model a user's own loop built and saved with SB3 alone (untagged, no config beside
    it): its algorithm read from the policy class SB3 recorded (PPO and A2C told apart), its
    observation options from its observation space, and it plays."""
    import gymnasium as gym

    from agents.learning.algorithms import get_algorithm

    spec = get_algorithm(algorithm)
    dict_space = env_kwargs.get("observation_mode") == "dict" or "mask_in_observation" in env_kwargs
    policy = spec.dict_policy if dict_space else spec.flat_policy
    model = spec.load_class()(policy, gym.make("coldiron/ColdIron-v0", **env_kwargs))
    path = tmp_path / "own.zip"
    model.save(path)
    agent = load_sb3_agent(path)
    assert type(agent.model).__name__ == spec.class_name and agent.env_kwargs == env_kwargs
    assert agent.env_kwargs_inferred
    result = evaluate_agent(agent, deal_decks(5, 3), agent_seeds(5, 3))
    assert result.episodes == 3
    if env_kwargs.get("mask_in_observation"):  # played on the plain observation, mask beside
        plain = ColdIronEnv(recall=True)
        obs, info = plain.reset(seed=4)
        for _ in range(20):
            mask = info["action_mask"]
            inside = {"observations": obs[None], "action_mask": mask[None]}
            q = model.q_net(model.policy.obs_to_tensor(inside)[0])[0].detach().numpy()
            expected = int(np.flatnonzero(mask)[np.argmax(q[mask.astype(bool)])])
            assert agent.act(obs, mask, info) == expected
            obs, _, done, _, info = plain.step(expected)
            if done:
                obs, info = plain.reset()


def test_load_zip_of_unknown_algorithm_names_it(tmp_path: Path) -> None:
    model = small_model("ppo")
    tag_model(model, "sac", {})
    path = tmp_path / "alien.zip"
    model.save(path)
    with pytest.raises(ModelLoadError, match=r"alien\.zip.*unknown algorithm"):
        load_sb3_agent(path)


def test_masked_play_is_legal_and_matches_predict_for_maskable(tmp_path: Path) -> None:
    model = small_model("maskable_ppo")
    tag_model(model, "maskable_ppo", {})
    path = tmp_path / "m.zip"
    model.save(path)
    agent = load_sb3_agent(path)
    env = ColdIronEnv()
    obs, info = env.reset(seed=3)
    for _ in range(30):
        mask = info["action_mask"].astype(bool)
        ours = agent.act(obs, info["action_mask"], info)
        theirs, _ = agent.model.predict(obs, action_masks=mask, deterministic=True)  # type: ignore[call-arg]
        assert ours == int(theirs) and mask[ours]
        obs, _, done, _, info = env.step(ours)
        if done:
            obs, info = env.reset()


def _per_deal(
    agent: Agent, decks: np.ndarray, **how: Any
) -> list[tuple[str, int, tuple[int, ...]]]:
    """(outcome, turn at the end, deck used) of every deal, in deal order."""
    rows: list[tuple[str, int, tuple[int, ...]]] = []

    def record(i: int, deck: list[int], outcome: str, turn: int) -> None:
        assert i == len(rows), "the callback runs once per deal, in deal order"
        rows.append((outcome, turn, tuple(deck)))

    evaluate_agent(agent, decks, agent_seeds(0, len(decks)), callback=record, **how)
    return rows


@pytest.mark.parametrize("name", ["maskable_ppo", "dqn", "recurrent_ppo"])
def test_batched_evaluation_plays_the_same_games_as_one_env_at_a_time(
    name: str, tmp_path: Path
) -> None:
    import torch

    torch.manual_seed(1)
    model = small_model(name)
    if name == "recurrent_ppo":  # make the LSTM state matter to the choice of action
        with torch.no_grad():
            for p in model.policy.parameters():
                p.mul_(8.0)
    tag_model(model, name, {})
    model.save(tmp_path / "m.zip")
    agent = load_sb3_agent(tmp_path / "m.zip")
    decks = deal_decks(5, 40)
    one_at_a_time = _per_deal(agent, decks, use_batch=False)
    batched = _per_deal(agent, decks)  # the default for a trained model
    assert batched == one_at_a_time
    assert len({turn for _, turn, _ in batched}) > 1, "the games must differ for this to test"
    from agents.evaluation import lockstep as evaluation

    small_batches = evaluation.play_lockstep(
        agent.batch_policy,
        agent.env_kwargs,
        [{"options": {"deck": deck_codes(row)}} for row in decks.tolist()],
        batch=7,  # several chunks, the last one short
    )
    assert [(e.outcome, e.turn, e.deck) for e in small_batches] == batched
    for engine in ("single", "vector"):  # auto takes the vector env: both must agree
        played = evaluation.play_lockstep(
            agent.batch_policy,
            agent.env_kwargs,
            [{"options": {"deck": deck_codes(row)}} for row in decks.tolist()],
            batch=7,
            engine=engine,  # type: ignore[arg-type]
        )
        assert [(e.outcome, e.turn, e.deck) for e in played] == batched, engine
    if name == "recurrent_ppo":  # the test above can see a mishandled LSTM state:
        policy = agent.batch_policy

        class Forgetful:
            def reset_states(self) -> None:
                policy.reset_states()

            def act(self, obs: Any, masks: np.ndarray, starts: Any = None) -> np.ndarray:
                policy.reset_states()  # no memory at all
                return policy.act(obs, masks, starts)

        forgetful = evaluation.play_lockstep(
            Forgetful(), agent.env_kwargs, [{"options": {"deck": deck_codes(r)}} for r in decks]
        )
        assert [(e.outcome, e.turn, e.deck) for e in forgetful] != batched


def test_batched_evaluation_of_a_dict_observation_model(tmp_path: Path) -> None:
    import torch

    torch.manual_seed(2)
    env_kwargs = {"observation_mode": "dict"}
    cfg = config_from_dict(
        {
            "env": env_kwargs,
            "algorithm": {"name": "maskable_ppo", "hyperparameters": {"n_steps": 64}},
            "policy": {"net_arch": [16]},
            "training": {"total_timesteps": 1000, "n_envs": 1, "progress_bar": False},
        }
    )
    from agents.learning.training import RunDir, build_model

    model = build_model(cfg, build_vec_env("dummy", 1, env_kwargs), RunDir(tmp_path))
    tag_model(model, "maskable_ppo", env_kwargs)
    model.save(tmp_path / "m.zip")
    agent = load_sb3_agent(tmp_path / "m.zip")
    decks = deal_decks(6, 24)
    batched = _per_deal(agent, decks)
    assert batched == _per_deal(agent, decks, use_batch=False)
    assert len({turn for _, turn, _ in batched}) > 1


def test_evaluate_model_counts_outcomes() -> None:
    model = small_model("ppo")
    result = evaluate_model(model, {}, list(range(20)))
    assert result.episodes == 20 and sum(result.outcomes.values()) == 20
    assert result.outcomes["illegal"] == 0  # masked play never forfeits


def test_resolved_config_yaml_is_plain(tmp_path: Path) -> None:
    cfg = tiny(load_config(ROOT / "configs" / "ppo.yaml"))
    from agents.learning.config import dump_config

    text = dump_config(cfg)
    assert "!!python" not in text and yaml.safe_load(text)["algorithm"]["name"] == "ppo"


def test_budgets_round_up_to_whole_rollouts_and_say_so() -> None:
    from agents.learning.config import config_from_dict
    from agents.learning.training import rollout_size, steps_to_train

    on = config_from_dict(
        {
            "algorithm": {"name": "maskable_ppo", "hyperparameters": {"n_steps": 512,
                                                                       "batch_size": 64}},
            "training": {"total_timesteps": 2048, "n_envs": 8},
        }
    )  # fmt: skip
    assert rollout_size(on) == 4096
    assert steps_to_train(on, 0) == 4096  # the README's example: 2,048 asked, 4,096 trained
    assert steps_to_train(on, 4096) == 0
    on.training.total_timesteps = 8192
    assert steps_to_train(on, 4096) == 4096
    off = config_from_dict(
        {
            "algorithm": {"name": "dqn", "hyperparameters": {"train_freq": 4}},
            "training": {"total_timesteps": 1001, "n_envs": 3},
        }
    )
    assert rollout_size(off) == 12
    assert steps_to_train(off, 0) == 1008


@pytest.mark.parametrize(
    "env_kwargs",
    [{"counting": True}, {"observation_mode": "dict", "recall": True, "counting": True}],
)
def test_a_network_decides_from_what_a_player_knows_as_from_the_env(
    env_kwargs: dict[str, Any], tmp_path: Path
) -> None:
    """KnowledgePolicy (a model deciding from a Knowledge: the planner's base) picks the
    action the model picks from the env's observation, at every step of real games."""
    import torch

    from agents.learning.sb3_agent import KnowledgePolicy
    from agents.learning.training import RunDir, build_model
    from agents.players.planner import PlannerAgent, PlannerConfig
    from coldiron_env.knowledge import Knowledge

    torch.manual_seed(3)
    cfg = config_from_dict(
        {
            "env": env_kwargs,
            "algorithm": {"name": "maskable_ppo", "hyperparameters": {"n_steps": 64}},
            "policy": {"net_arch": [32]},
            "training": {"total_timesteps": 1000, "n_envs": 1, "progress_bar": False},
        }
    )
    model = build_model(cfg, build_vec_env("dummy", 1, env_kwargs), RunDir(tmp_path))
    with torch.no_grad():  # sharpen the untrained policy so that its choices vary
        for p in model.policy.parameters():
            p.mul_(6.0)
    tag_model(model, "maskable_ppo", env_kwargs)
    model.save(tmp_path / "m.zip")
    agent = load_sb3_agent(tmp_path / "m.zip")
    policy = KnowledgePolicy(agent)
    env = ColdIronEnv(**env_kwargs)
    chosen: set[int] = set()
    for seed in range(8):
        obs, info = env.reset(seed=seed)
        agent.reset()
        done = False
        while not done:
            action = agent.act(obs, info["action_mask"], info)
            assert policy.act_knowledge(Knowledge.from_game(env.game)) == action
            chosen.add(action)
            obs, _, done, _, info = env.step(action)
    assert len(chosen) >= 3, "the policy must make choices for this to test anything"
    planner = PlannerAgent(PlannerConfig(samples=8, batch=4, min_samples=4), base=policy)
    result = evaluate_agent(planner, deal_decks(3, 6), agent_seeds(3, 6))
    assert result.episodes == 6 and result.outcomes["illegal"] == 0


def test_soft_labels_one_hot_clone_as_the_actions_and_soft_mass_is_learned(
    tmp_path: Path,
) -> None:
    """Cloning on soft labels that are the actions one-hot gives the network cloning on
    the actions gives; labels that give Rest 0.8 of the mass where the teacher Threatened
    late teach it there; they survive a save and load."""
    import copy

    import torch

    from agents.learning.imitation import Demonstrations
    from coldiron_env.actions import REST

    demos = collect_demonstrations(ScriptedTeacher(), {}, episodes=12, seed=100)
    torch.manual_seed(0)
    start = small_model("maskable_ppo")
    behaviour_clone(start, demos, epochs=30, batch_size=64, learning_rate=3e-3)

    def cloned(on: Demonstrations) -> Any:
        model = copy.deepcopy(start)
        behaviour_clone(model, on, epochs=10, batch_size=64, learning_rate=3e-3,
                        value_pretrain=False, seed=1)  # fmt: skip
        return model

    def params(model: Any) -> np.ndarray:
        return np.concatenate([p.detach().numpy().ravel() for p in model.policy.parameters()])

    one_hot = copy.copy(demos)
    one_hot.targets = demos.soft_targets()
    assert np.allclose(one_hot.targets.sum(axis=1), 1.0)
    assert np.allclose(params(cloned(one_hot)), params(cloned(demos)), atol=1e-5)

    late = np.array([decode(o, 24).turn >= 18 for o in demos.obs])
    switched = late & (demos.actions == THREATEN) & demos.masks[:, REST]
    assert switched.sum() > 20
    soft = copy.copy(demos)
    soft.targets = demos.soft_targets().copy()
    soft.targets[switched, THREATEN] = 0.2
    soft.targets[switched, REST] = 0.8
    model = cloned(soft)

    def rest_chance(m: Any) -> float:  # the masked policy's, where the labels were softened
        with torch.no_grad():
            logits = m.policy.get_distribution(torch.as_tensor(demos.obs)).distribution.logits
        masked = logits.masked_fill(~torch.as_tensor(demos.masks), float("-inf"))
        return float(masked.softmax(dim=1)[torch.as_tensor(switched), REST].mean())

    assert rest_chance(model) > rest_chance(start) + 0.3

    soft.save(tmp_path / "labels.npz")
    back = Demonstrations.load(tmp_path / "labels.npz")
    assert back.targets is not None and np.array_equal(back.targets, soft.targets)
    assert np.array_equal(back.obs, soft.obs) and np.array_equal(back.actions, soft.actions)
    assert (back.episodes, back.wins) == (soft.episodes, soft.wins)
    demos.save(tmp_path / "hard.npz")
    assert Demonstrations.load(tmp_path / "hard.npz").targets is None
    with pytest.raises(ValueError, match="soft labels"):
        behaviour_clone(small_model("dqn"), soft, epochs=1, batch_size=64, learning_rate=1e-3)


def test_a_cuda_device_without_cuda_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """Stable-Baselines3 quietly trained on the CPU while the run's config said cuda."""
    import torch

    from agents.learning.provenance import TrainingError

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    cfg = tiny(load_config(ROOT / "configs" / "ppo.yaml"), training__device="cuda")
    with pytest.raises(TrainingError, match=r"ppo\.yaml: training\.device: 'cuda', but torch"):
        train(cfg, tmp_path / "run", config_file="configs/ppo.yaml", log=lambda _: None)
    assert not (tmp_path / "run").exists()
    with pytest.raises(TrainingError, match=r"run/config\.yaml: training\.device: 'cuda'"):
        train(cfg, resume=tmp_path / "run", log=lambda _: None)  # the run's file to edit
