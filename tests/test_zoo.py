"""rl-zoo3 on Cold Iron: the shipped hyperparameter files, a tiny training, loading its model."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from helpers import load_file, streams_of

from agents.evaluation.arena import agent_seeds, deal_decks, evaluate_agent
from agents.integrations.zoo_files import zoo_run_of
from agents.learning.sb3_agent import ModelLoadError
from agents.registry import make_agent
from coldiron_env import ENV_ID
from coldiron_env.actions import NUM_ACTIONS
from coldiron_env.env import ColdIronEnv

ROOT = Path(__file__).resolve().parent.parent
ZOO_DIR = ROOT / "configs" / "rl_zoo3"
ZOO_ALGOS = ("ppo", "a2c", "dqn", "qrdqn", "ppo_lstm")


@pytest.mark.parametrize("algo", ZOO_ALGOS)
def test_each_shipped_file_holds_valid_settings_for_the_env(algo: str) -> None:
    data = yaml.safe_load((ZOO_DIR / f"{algo}.yml").read_text())
    assert set(data) == {ENV_ID}
    settings = data[ENV_ID]
    env = ColdIronEnv(**settings["env_kwargs"])  # a bad option would raise, naming it
    assert env.illegal_action == "penalize", "a learner without masks needs the penalize mode"
    assert settings["n_envs"] >= 1 and settings["n_timesteps"] > 0


def _write_zoo_run(tmp_path: Path, algo: str, env_kwargs: str) -> Path:
    """The files rl-zoo3 writes beside a model (its own YAML dialect), around an empty zip."""
    run = tmp_path / "logs" / algo / "coldiron-ColdIron-v0_1"
    (run / "coldiron-ColdIron-v0").mkdir(parents=True)
    ordered = "!!python/object/apply:collections.OrderedDict\n"
    (run / "coldiron-ColdIron-v0" / "args.yml").write_text(
        ordered + f"- - - algo\n    - {algo}\n  - - env_kwargs\n    - null\n"
    )
    (run / "coldiron-ColdIron-v0" / "config.yml").write_text(
        ordered + f"- - - env_kwargs\n    - {env_kwargs}\n  - - n_envs\n    - 4\n"
    )
    zip_path = run / "coldiron-ColdIron-v0.zip"
    zip_path.write_bytes(b"")
    return zip_path


def test_zoo_run_files_are_read_safely(tmp_path: Path) -> None:
    zip_path = _write_zoo_run(tmp_path, "ppo_lstm", "{counting: true, illegal_action: penalize}")
    assert zoo_run_of(zip_path) == (
        "recurrent_ppo",
        {"counting": True, "illegal_action": "penalize"},
    )
    other = _write_zoo_run(tmp_path / "x", "sac", "{}")
    with pytest.raises(ModelLoadError, match="rl-zoo3 algorithm 'sac'"):
        zoo_run_of(other)
    assert zoo_run_of(tmp_path / "elsewhere.zip") is None


@pytest.mark.slow
def test_tiny_zoo_training_through_the_shipped_file_then_our_evaluation(tmp_path: Path) -> None:
    pytest.importorskip("rl_zoo3")
    command = [
        sys.executable, "-m", "rl_zoo3.train", "--algo", "ppo", "--env", ENV_ID,
        "--gym-packages", "coldiron_env", "-conf", str(ZOO_DIR / "ppo.yml"),
        "-n", "2048", "--eval-freq", "-1", "-f", str(tmp_path / "logs"), "--seed", "3",
    ]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (zip_path,) = (tmp_path / "logs" / "ppo").glob("*/coldiron-ColdIron-v0.zip")
    agent = make_agent(str(zip_path))
    assert agent.env_kwargs["counting"] is True  # type: ignore[attr-defined]
    result = evaluate_agent(agent, deal_decks(11, 20), agent_seeds(11, 20))
    assert result.episodes == 20 and result.outcomes["illegal"] == 0  # played masked
    run = zip_path.parent
    monitor = next(run.glob("*.monitor.csv")).read_text().splitlines()
    assert monitor[1].split(",")[-1] == "outcome", "the shipped file logs each episode's outcome"
    report = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "zoo_report.py"), str(run)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert report.returncode == 0, report.stderr
    assert "illegal actions" in report.stdout


@pytest.mark.parametrize(
    ("env_kwargs", "info_keywords"),
    [
        ({}, ()),  # the env's default rewards, no outcome column: decoded from rewards
        ({"loss_reward": -1.0}, ("outcome",)),  # a forfeit's -1.0 is also a loss's -1.0
        ({"loss_reward": -1.0, "illegal_reward": -0.05, "max_illegal_actions": 3}, ("outcome",)),
    ],
    ids=["defaults", "loss-1", "other-penalty"],
)
def test_zoo_report_reads_wins_lengths_and_illegal_actions_off_monitor_files(
    tmp_path: Path, env_kwargs: dict[str, float], info_keywords: tuple[str, ...]
) -> None:
    """Episodes played through SB3's Monitor (as rl-zoo3 runs them), counted independently."""
    from stable_baselines3.common.monitor import Monitor

    run = tmp_path / "logs" / "ppo" / "coldiron-ColdIron-v0_1"
    run.mkdir(parents=True)
    if env_kwargs:  # rl-zoo3's config.yml beside the monitors says which rewards were used
        flow = ", ".join(f"{k}: {v}" for k, v in env_kwargs.items())
        _write_zoo_run(tmp_path, "ppo", "{illegal_action: penalize, " + flow + "}")
    rng = np.random.default_rng(5)
    won = steps = illegal = episodes = first_step = truncated_episodes = 0
    for env_index in range(2):
        env = Monitor(
            ColdIronEnv(illegal_action="penalize", **env_kwargs),  # type: ignore[arg-type]
            str(run / f"{env_index}"),
            allow_early_resets=True,
            info_keywords=info_keywords,
        )
        for seed in range(8):
            _, info = env.reset(seed=seed)
            done = False
            while not done:
                action = int(rng.integers(NUM_ACTIONS))
                illegal += not info["action_mask"][action]
                _, _, terminated, truncated, info = env.step(action)
                steps += 1
                done = terminated or truncated
            won += info["outcome"] == "won"
            truncated_episodes += info["outcome"] == "illegal"
            first_step += env.get_episode_lengths()[-1] == 1
            episodes += 1
        env.close()
    assert illegal > 0, "random play should try illegal actions"
    assert 0 < first_step < episodes, "random play should end some games at once, not all"
    assert truncated_episodes > 0, "some episodes should end by their last illegal action"
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "zoo_report.py"), str(run), "--last", "1000"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"{episodes} episodes" in out
    expected = (
        f"won {won / episodes:.2%}, mean length {steps / episodes:.1f} steps, "
        f"ended at step 1 {first_step / episodes:.2%}, illegal actions {illegal / steps:.2%}"
    )
    assert expected in out


def test_zoo_report_names_a_folder_without_episodes(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "zoo_report.py"), str(tmp_path)],
        check=False,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and str(tmp_path) in proc.stderr


# ---------------------------------------------------------------- ppo_mask (MaskablePPO)
ZOO_LAUNCHER = ROOT / "scripts" / "zoo.py"
PPO_MASK_FILE = ZOO_DIR / "ppo_mask.yml"
SCRATCH_CONFIG = ROOT / "configs" / "maskable_ppo_scratch.yaml"
OPTUNA_SEED = 13
"""A --seed whose two random-sampler trials draw small rollouts (the sampler is seeded)."""


def _zoo(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ZOO_LAUNCHER), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
    )


def _ppo_mask_settings() -> dict[str, Any]:
    settings: dict[str, Any] = yaml.safe_load(PPO_MASK_FILE.read_text())[ENV_ID]
    return settings


def _curriculum_stages(settings: dict[str, Any]) -> list[dict[str, Any]]:
    (callback,) = settings["callback"]
    (name,) = callback
    assert name == "agents.integrations.zoo.CurriculumCallback"
    stages: list[dict[str, Any]] = callback[name]["stages"]
    return stages


def test_ppo_mask_file_is_the_scratch_config_with_its_curriculum() -> None:
    settings = _ppo_mask_settings()
    env = ColdIronEnv(**settings["env_kwargs"])
    assert env.illegal_action == "raise", "an unmasked action must stop the run, not pass"
    scratch = yaml.safe_load(SCRATCH_CONFIG.read_text())
    hyper, training = scratch["algorithm"]["hyperparameters"], scratch["training"]
    assert settings["env_kwargs"]["counting"] is scratch["env"]["counting"] is True
    rollout = settings["n_steps"] * settings["n_envs"]
    assert rollout == hyper["n_steps"] * training["n_envs"]
    for key in ("batch_size", "n_epochs", "gamma", "gae_lambda", "clip_range", "ent_coef"):
        assert settings[key] == hyper[key], key
    schedule, start = settings["learning_rate"].split("_")  # rl-zoo3: linear to 0 from start
    assert (schedule, float(start)) == ("lin", hyper["learning_rate"]["start"])
    assert hyper["learning_rate"] == {"schedule": "linear", "start": float(start), "end": 0.0}
    assert "pi=[128, 128], vf=[128, 128]" in settings["policy_kwargs"]
    assert settings["env_wrapper"] == "agents.integrations.zoo.StagedGame"
    assert _curriculum_stages(settings) == scratch["curriculum"]


def test_stage_options_follow_the_project_curriculum() -> None:
    """The callback's stage at each step is the project trainer's (Config.stage_env_kwargs)."""
    pytest.importorskip("rl_zoo3")
    from agents.integrations import zoo
    from agents.learning.config import load_config

    cfg = load_config(SCRATCH_CONFIG)
    total = cfg.training.total_timesteps
    stages = zoo.parse_stages(_curriculum_stages(_ppo_mask_settings()))
    seen = set()
    for t in [*range(0, total, total // 97), *(int(s.until_fraction * total) + d
                                               for s in stages for d in (-1, 0, 1))]:  # fmt: skip
        expected = cfg.stage_env_kwargs(t)
        got = {**cfg.env_kwargs(), **zoo.stage_options(stages, t, total)}
        assert got == expected, t
        seen.add(expected.get("suits_required", 4))
    assert seen == {1, 2, 3, 4}


@pytest.mark.parametrize(
    ("stages", "message"),
    [
        ([], "non-empty list"),
        ({"until_fraction": 0.1, "suits_required": 1}, "non-empty list"),
        ([{"until_fraction": 0.1}], r"stages\[0\].*real game"),
        ([{"until_fraction": 0.1, "suits": 1}], r"stages\[0\].*unknown key"),
        ([{"until_fraction": 1.5, "suits_required": 1}], r"stages\[0\].*less than 1"),
        (
            [
                {"until_fraction": 0.5, "suits_required": 1},
                {"until_fraction": 0.2, "suits_required": 2},
            ],
            r"stages\[1\]: until_fraction must increase",
        ),
    ],
)
def test_curriculum_callback_refuses_bad_stages(stages: Any, message: str) -> None:
    pytest.importorskip("rl_zoo3")
    from agents.integrations import zoo

    with pytest.raises(zoo.CurriculumError, match=message):
        zoo.CurriculumCallback(stages=stages)


def test_staged_game_switches_rules_at_the_next_reset_with_the_real_observation_space() -> None:
    """rl-zoo3's env stack (gym.make's wrappers under SB3's Monitor) with the file's
    env_wrapper: the game under it changes its rules only when told, from the next episode."""
    pytest.importorskip("rl_zoo3")
    import gymnasium as gym
    from stable_baselines3.common.monitor import Monitor

    from agents.integrations import zoo

    kwargs = _ppo_mask_settings()["env_kwargs"]
    env = zoo.StagedGame(
        Monitor(gym.spec(ENV_ID).make(**kwargs), info_keywords=("suits_required",))
    )
    real = ColdIronEnv(**kwargs)
    assert env.observation_space == real.observation_space and env.rules() == (24, 4)
    env.reset(seed=5)
    env.set_rule_options({"suits_required": 1})
    assert env.rules() == (24, 4), "a switch waits for the next episode"
    _, info = env.reset()
    assert env.rules() == (24, 1)
    assert (
        env.get_wrapper_attr("action_masks")().tolist() == info["action_mask"].astype(bool).tolist()
    )
    done = False
    while not done:  # the first legal action each step: the episode ends, the monitor logs it
        action = int(np.flatnonzero(info["action_mask"])[0])
        _, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    assert info["suits_required"] == 1 and info["turns"] == 24
    assert env.get_wrapper_attr("get_episode_rewards")(), "the monitor saw the episode"
    env.set_rule_options({})
    env.reset()
    assert env.rules() == (24, 4)
    with pytest.raises(zoo.CurriculumError, match="not curriculum options"):
        env.set_rule_options({"counting": False})
    with pytest.raises(zoo.CurriculumError, match="StagedGame wraps a Cold Iron env"):
        zoo.StagedGame(Monitor(gym.make("CartPole-v1")))


def test_install_registers_ppo_mask_once_with_the_ppo_sampler() -> None:
    pytest.importorskip("rl_zoo3")
    from rl_zoo3 import exp_manager
    from rl_zoo3.hyperparams_opt import HYPERPARAMS_CONVERTER, HYPERPARAMS_SAMPLER
    from rl_zoo3.utils import ALGOS
    from sb3_contrib import MaskablePPO

    from agents.integrations import zoo

    zoo.install()
    zoo.install()  # idempotent
    assert ALGOS["ppo_mask"] is zoo.ZooMaskablePPO and issubclass(ALGOS["ppo_mask"], MaskablePPO)
    assert HYPERPARAMS_SAMPLER["ppo_mask"] is HYPERPARAMS_SAMPLER["ppo"]
    assert HYPERPARAMS_CONVERTER["ppo_mask"] is HYPERPARAMS_CONVERTER["ppo"]
    assert exp_manager.EvalCallback is zoo.ZooEvalCallback  # type: ignore[attr-defined]
    assert exp_manager.TrialEvalCallback is zoo.ZooTrialEvalCallback  # type: ignore[attr-defined]


def test_zoo_env_gives_the_masks_and_predict_uses_them(tmp_path: Path) -> None:
    """rl-zoo3's own env stack (DummyVecEnv of Monitor-wrapped gym.make envs) hands
    MaskablePPO the env's masks; predict without masks reads them, and is legal where the
    unmasked policy is not."""
    pytest.importorskip("rl_zoo3")
    import argparse

    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks

    from agents.integrations import zoo

    zoo.install()
    args = argparse.Namespace(algo="ppo_mask", env=ENV_ID)
    manager = zoo.ZooExperimentManager(
        args, "ppo_mask", ENV_ID, str(tmp_path), config=str(PPO_MASK_FILE), seed=4,
        hyperparams={"n_envs": 4}, eval_freq=-1,
    )  # fmt: skip
    experiment = manager.setup_experiment()
    assert experiment is not None
    model: Any = experiment[0]
    venv: Any = model.get_env()
    assert manager.eval_env_kwargs == manager.env_kwargs == {"illegal_action": "raise",
                                                              "counting": True}  # fmt: skip
    obs = venv.reset()
    unmasked_illegal = 0
    rows = np.arange(4)
    for _ in range(100):
        masks = get_action_masks(venv)
        assert masks.shape == (4, NUM_ACTIONS) and not masks.all()  # the env's, not a default
        plain, _ = MaskablePPO.predict(model, obs, action_masks=None)  # the unmasked policy
        unmasked_illegal += int((~masks[rows, plain]).sum())
        actions, _ = model.predict(obs)  # masks read from the env
        assert masks[rows, actions].all()
        obs, _, _, _ = venv.step(actions)  # illegal_action="raise": an illegal one raises
    assert unmasked_illegal > 0, "the untrained policy should pick illegal actions unmasked"
    venv.close()
    model.env = None
    with pytest.raises(zoo.MaskRequiredError, match="needs action_masks"):
        model.predict(obs)  # no masks and no env to read them from: refused, not unmasked


def test_launcher_refuses_a_seed_the_streams_cannot_take_and_own_options_for_enjoy(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The launcher's refusals, in process (its main returns before rl-zoo3 runs)."""
    pytest.importorskip("rl_zoo3")
    from helpers import REPORT_SEED

    launcher = load_file(ZOO_LAUNCHER, "coldiron_zoo_launcher")

    def refused(*args: str) -> str:
        assert launcher.main(list(args)) == 2, args
        return str(capsys.readouterr().err)

    for seed in (REPORT_SEED, 1 << 16):
        assert "0..65535" in refused("train", "--algo", "ppo_mask", "--seed", str(seed))
    assert "--seed must be an integer" in refused("train", "--algo", "ppo_mask", "--seed=x")
    assert "train only" in refused("enjoy", "--record", "x.json")
    assert "unknown command 'fit'" in refused("fit")


def test_a_missing_or_negative_seed_is_drawn_in_the_streams_range() -> None:
    pytest.importorskip("rl_zoo3")
    from agents.integrations import zoo

    rng = np.random.default_rng(0)
    assert zoo.with_seed(["--algo", "ppo", "--seed", "7"], rng) == ["--algo", "ppo", "--seed", "7"]
    drawn = [zoo.with_seed(argv, rng) for argv in (["-n", "5"], ["--seed", "-1"], ["--seed=-1"])]
    seeds = [int(a[-1].removeprefix("--seed=")) for a in drawn]
    assert all(0 <= s < 1 << 16 for s in seeds) and len(set(seeds)) > 1
    assert drawn[0][:-1] == ["-n", "5", "--seed"] and drawn[2][0].startswith("--seed=")


@pytest.mark.slow
def test_tiny_ppo_mask_train_enjoy_and_our_evaluation(tmp_path: Path) -> None:
    """Training (collection and periodic evaluation) and enjoy run masked: the file's
    illegal_action="raise" would stop them at the first unmasked action."""
    pytest.importorskip("rl_zoo3")
    logs, record = tmp_path / "logs", tmp_path / "record.json"
    common = ["--algo", "ppo_mask", "--env", ENV_ID, "--gym-packages", "coldiron_env"]
    proc = _zoo(
        "train", *common, "-conf", str(PPO_MASK_FILE), "-f", str(logs), "--seed", "3",
        "-n", "2048", "-params", "n_envs:4", "n_steps:128", "batch_size:128",
        "--eval-freq", "512", "--eval-episodes", "4", "--num-threads", "1",
        "--record", str(record), "--note", "test",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (zip_path,) = (logs / "ppo_mask").glob("*/coldiron-ColdIron-v0.zip")
    run = zip_path.parent
    evaluations = np.load(run / "evaluations.npz")
    assert len(evaluations["timesteps"]) >= 2, "the masked periodic evaluation ran"
    data = json.loads(record.read_text())
    assert data["algo"] == "ppo_mask" and data["timesteps"] >= 2048
    assert data["model"] == str(zip_path) and data["steps_per_second"] > 0
    assert data["machine"]["note"] == "test"
    report = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "zoo_report.py"), str(run)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    assert "illegal actions 0.00%" in report.stdout

    proc = _zoo("enjoy", *common, "-f", str(logs), "--exp-id", "1", "--no-render",
                "-n", "400", "--stochastic", "--num-threads", "1")  # fmt: skip
    # --stochastic: sampled unmasked, the young policy would soon draw an illegal action
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert " Episodes" in proc.stdout and "Mean episode length" in proc.stdout

    agent = make_agent(str(zip_path))
    assert type(agent.model).__name__ == "MaskablePPO"  # type: ignore[attr-defined]
    assert agent.env_kwargs["counting"] is True  # type: ignore[attr-defined]
    result = evaluate_agent(agent, deal_decks(11, 20), agent_seeds(11, 20))
    assert result.episodes == 20 and result.outcomes["illegal"] == 0
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "evaluate.py"), "--agent", str(zip_path),
         "--episodes", "20", "--seed", "11"],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert zip_path.stem in out.stdout


@pytest.mark.slow
def test_tiny_ppo_mask_optuna_study_runs_masked_trials(tmp_path: Path) -> None:
    """Two trials with rl-zoo3's PPO sampler; their evaluation env raises on an illegal
    action, which rl-zoo3 would turn into a pruned trial: both must complete."""
    pytest.importorskip("rl_zoo3")
    logs = tmp_path / "logs"
    proc = _zoo(
        "train", "--algo", "ppo_mask", "--env", ENV_ID, "--gym-packages", "coldiron_env",
        "-conf", str(PPO_MASK_FILE), "-f", str(logs), "--seed", str(OPTUNA_SEED),
        "-optimize", "--n-trials", "2", "-n", "1024", "--n-evaluations", "1",
        "--eval-episodes", "4", "-params", "n_envs:2", "--sampler", "random",
        "--pruner", "none", "--no-optim-plots", "--num-threads", "1",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (report,) = (logs / "ppo_mask").glob("report_*.csv")
    with report.open() as fh:
        trials = list(csv.DictReader(fh))
    assert [t["state"] for t in trials] == ["COMPLETE", "COMPLETE"], trials
    assert all(np.isfinite(float(t["value"])) for t in trials)


# ------------------------------------------- held-out deals and the curriculum, as dealt
TINY_SEED = 3
TINY_ENVS, TINY_STEPS, TINY_BUDGET = 4, 128, 4096
"""A tiny run: 8 rollouts of 512 steps, long enough to pass every stage of the file's."""
EVAL_EPISODES = 4
DEALS_PER_SEED = 64
NEAR_SEEDS = range(0, TINY_SEED + TINY_ENVS + 16)
"""Evaluation seeds rl-zoo3's ``seed + i`` seeding reaches (and more), compared deck by deck."""


@pytest.fixture(scope="module")
def tiny_audited_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny ``scripts/zoo.py train`` of the shipped file (curriculum, periodic evaluation)
    under the deal audit: ``(its run folder, the audit folder)``."""
    pytest.importorskip("rl_zoo3")
    import os

    from coldiron_env.dealer import AUDIT_VARIABLE

    tmp = tmp_path_factory.mktemp("zoo_audit")
    audit, logs = tmp / "audit", tmp / "logs"
    audit.mkdir()
    proc = subprocess.run(
        [sys.executable, str(ZOO_LAUNCHER), "train", "--algo", "ppo_mask", "--env", ENV_ID,
         "--gym-packages", "coldiron_env", "-conf", str(PPO_MASK_FILE), "-f", str(logs),
         "--seed", str(TINY_SEED), "-n", str(TINY_BUDGET), "-params", f"n_envs:{TINY_ENVS}",
         f"n_steps:{TINY_STEPS}", "batch_size:128", "--eval-freq", "1024",
         "--eval-episodes", str(EVAL_EPISODES), "--num-threads", "1"],
        capture_output=True, text=True, timeout=600, check=False, cwd=ROOT,
        env={**os.environ, AUDIT_VARIABLE: str(audit)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = (logs / "ppo_mask").glob("coldiron-ColdIron-v0_*")
    return run, audit


@pytest.mark.slow
def test_a_zoo_run_deals_no_evaluation_deal(tiny_audited_run: tuple[Path, Path]) -> None:
    """rl-zoo3 seeds env i with seed + i, the deals of evaluate.py --seed seed+i; through the
    launcher the training envs deal from the training stream and the periodic evaluation
    from the validation stream: no deck dealt is an evaluation seed's."""
    from helpers import REPORT_SEED, read_audit

    from coldiron_env.dealer import DealStream

    _, audit = tiny_audited_run
    records = read_audit(audit)
    streams = Counter(streams_of(records))
    assert set(streams) == {DealStream.TRAINING, DealStream.VALIDATION}, streams
    assert streams[DealStream.TRAINING] > TINY_BUDGET // 100, "the training envs dealt"
    assert streams[DealStream.VALIDATION] >= EVAL_EPISODES, "the evaluation env dealt"
    evaluation = {tuple(d) for s in [*NEAR_SEEDS, REPORT_SEED]
                  for d in deal_decks(s, DEALS_PER_SEED).tolist()}  # fmt: skip
    clash = evaluation & {deck for _, deck in records}
    assert not clash, f"{len(clash)} evaluation deal(s) were dealt by the zoo run"


def _stage_suits(timesteps: int) -> int:
    """suits_required in force after ``timesteps`` of the tiny run (the scratch config's
    curriculum, read here independently of the callback)."""
    for stage in yaml.safe_load(SCRATCH_CONFIG.read_text())["curriculum"]:
        if timesteps < stage["until_fraction"] * TINY_BUDGET:
            return int(stage["suits_required"])
    return 4


@pytest.mark.slow
def test_a_zoo_run_plays_each_stage_then_evaluates_on_the_real_game(
    tiny_audited_run: tuple[Path, Path],
) -> None:
    """Every episode the training envs played (their monitor files) had the suits_required of
    the stage in force when it was dealt: stages switch at rollout ends, from each env's next
    episode; the first episodes are the first stage's."""
    run, _ = tiny_audited_run
    rollout = TINY_ENVS * TINY_STEPS
    played: Counter[int] = Counter()
    for env_index in range(TINY_ENVS):
        lines = (run / f"{env_index}.monitor.csv").read_text().splitlines()
        rows = list(csv.DictReader(lines[1:]))
        assert rows, f"env {env_index} finished no episode"
        start = 0  # the env step of the episode's first action
        for row in rows:
            dealt_in = (start - 1) // TINY_STEPS if start else 0  # the rollout of its reset
            expected = _stage_suits(dealt_in * rollout)  # the stage switched to before it
            assert int(row["suits_required"]) == expected, (env_index, start, row)
            played[expected] += 1
            start += int(row["l"])
    assert set(played) == {1, 2, 3, 4}, played


@pytest.mark.slow
def test_only_the_training_envs_follow_the_curriculum(tmp_path: Path) -> None:
    """In process: the periodic evaluation deals only the real game while the training envs
    deal every stage's games, switched at the stated steps."""
    pytest.importorskip("rl_zoo3")
    import argparse

    from agents.integrations import zoo

    zoo.install()
    args = argparse.Namespace(algo="ppo_mask", env=ENV_ID)
    manager = zoo.ZooExperimentManager(
        args, "ppo_mask", ENV_ID, str(tmp_path), config=str(PPO_MASK_FILE), seed=TINY_SEED,
        hyperparams={"n_envs": TINY_ENVS, "n_steps": TINY_STEPS, "batch_size": 128},
        n_timesteps=TINY_BUDGET, eval_freq=1024, n_eval_episodes=EVAL_EPISODES, log_interval=-1,
    )  # fmt: skip
    experiment = manager.setup_experiment()
    assert experiment is not None
    model: Any = experiment[0]
    manager.learn(model)
    (curriculum,) = [c for c in manager.callbacks if isinstance(c, zoo.CurriculumCallback)]
    (evaluation,) = [c for c in manager.callbacks if isinstance(c, zoo.ZooEvalCallback)]
    rollout = TINY_ENVS * TINY_STEPS
    assert curriculum.switches == [
        (0, {"turns": 24, "suits_required": 1}),
        (rollout, {"turns": 24, "suits_required": 2}),
        (2 * rollout, {"turns": 24, "suits_required": 3}),
        (4 * rollout, {}),
    ]
    assert [_stage_suits(t) for t, _ in curriculum.switches] == [1, 2, 3, 4]
    trained = Counter[tuple[int, int]]()
    for dealt in model.get_env().get_attr("dealt"):
        trained.update(dealt)
    assert {suits for _, suits in trained} == {1, 2, 3, 4}, trained
    evaluated = Counter[tuple[int, int]]()
    for dealt in evaluation.eval_env.get_attr("dealt"):
        evaluated.update(dealt)
    assert set(evaluated) == {(24, 4)} and evaluated.total() >= EVAL_EPISODES, evaluated


def test_a_zoo_runs_normalizer_and_models_are_found_where_rl_zoo3_puts_them(
    tmp_path: Path,
) -> None:
    """rl-zoo3 writes ``ENV_N/ENV.zip`` and keeps ``vecnormalize.pkl`` in ``ENV_N/ENV/``: the
    model plays with it (and ONNX export folds it in); the run folder names its models."""
    import pickle

    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    from agents.learning.sb3_agent import SB3Agent, load_sb3_agent

    zip_path = _write_zoo_run(tmp_path, "ppo_mask", "{counting: true}")
    env = DummyVecEnv([lambda: ColdIronEnv(counting=True)])
    MaskablePPO("MlpPolicy", env, n_steps=64, batch_size=64, seed=0).save(zip_path)
    stats = VecNormalize(env, norm_reward=False)
    (zip_path.parent / zip_path.stem / "vecnormalize.pkl").write_bytes(pickle.dumps(stats))
    agent = make_agent(str(zip_path))  # the registry's rl-zoo3 loader
    assert isinstance(agent, SB3Agent) and agent.policy.obs_normalizer is not None
    with pytest.raises(ModelLoadError, match=r"pass one of the models in it: coldiron-ColdIron"):
        load_sb3_agent(zip_path.parent)
