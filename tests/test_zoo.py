"""rl-zoo3 on Cold Iron: the shipped hyperparameter files, a tiny training, loading its model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from agents.evaluation.arena import agent_seeds, deal_decks, evaluate_agent
from agents.learning.sb3_agent import ModelLoadError, zoo_run_of
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
        ({"loss_reward": -1.0}, ("outcome",)),  # a truncation's -1.0 is also a loss's -1.0
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
