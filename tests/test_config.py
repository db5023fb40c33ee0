"""The run-config schema: every shipped config validates; bad ones are refused by file and key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from agents.learning.algorithms import ALGORITHMS, get_algorithm
from agents.learning.config import (
    ConfigError,
    NetArch,
    activation_class,
    algorithm_kwargs,
    apply_overrides,
    config_from_dict,
    dump_config,
    load_config,
    policy_kwargs,
)
from coldiron_env.options import MAX_TURNS_OPTION

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))


def minimal(**over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "algorithm": {
            "name": "maskable_ppo",
            "hyperparameters": {"n_steps": 64, "batch_size": 128},
        },
        "training": {"total_timesteps": 1000, "n_envs": 4},
    }
    data.update(over)
    return data


def write(tmp_path: Path, data: Any, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def refused(tmp_path: Path, data: Any) -> ConfigError:
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(path) in str(err.value), "the error must name the file"
    return err.value


# ---------------------------------------------------------------- shipped configs
def test_every_algorithm_has_a_shipped_config() -> None:
    names = {p.stem for p in CONFIGS}
    assert set(ALGORITHMS) <= names, f"missing configs for {set(ALGORITHMS) - names}"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_config_validates(path: Path) -> None:
    cfg = load_config(path)
    assert path.stem.removeprefix("tune_").startswith(cfg.algorithm.name)  # NAME[_variant]
    kwargs = policy_kwargs(cfg)
    assert "net_arch" in kwargs and kwargs["activation_fn"].__module__.startswith("torch")
    algorithm_kwargs(cfg)  # schedules build
    # The resolved config round-trips through YAML unchanged.
    again = config_from_dict(yaml.safe_load(dump_config(cfg)))
    assert again == cfg


def test_default_config_is_maskable_ppo_with_imitation() -> None:
    cfg = load_config(ROOT / "configs" / "maskable_ppo.yaml")
    assert cfg.algorithm.spec.supports_masks
    assert cfg.imitation.enabled and cfg.imitation.teacher == "heuristic"
    assert not cfg.shaping.enabled


# ---------------------------------------------------------------- errors of each kind
def test_unknown_top_level_key(tmp_path: Path) -> None:
    err = refused(tmp_path, minimal(learning_rate=3e-4))
    assert err.key == "learning_rate"
    assert "unknown key" in err.reason


def test_unknown_nested_key(tmp_path: Path) -> None:
    data = minimal()
    data["env"] = {"observation_mode": "flat", "recal": True}
    err = refused(tmp_path, data)
    assert err.key == "env.recal" and "recall" in err.reason  # lists the known keys


def test_unknown_hyperparameter(tmp_path: Path) -> None:
    data = minimal()
    data["algorithm"]["hyperparameters"]["buffer_size"] = 1000  # an off-policy key
    err = refused(tmp_path, data)
    assert err.key == "algorithm.hyperparameters.buffer_size"
    assert "maskable_ppo" in err.reason


def test_wrong_type(tmp_path: Path) -> None:
    data = minimal()
    data["training"]["n_envs"] = "eight"
    err = refused(tmp_path, data)
    assert err.key == "training.n_envs" and "int" in err.reason


def test_wrong_type_bool(tmp_path: Path) -> None:
    data = minimal(env={"recall": "yes"})
    err = refused(tmp_path, data)
    assert err.key == "env.recall" and "bool" in err.reason


@pytest.mark.parametrize("value", [True, "8", 2.5])
def test_a_count_takes_no_bool_string_or_fraction(tmp_path: Path, value: Any) -> None:
    data = minimal()
    data["training"]["n_envs"] = value
    err = refused(tmp_path, data)
    assert err.key == "training.n_envs" and "valid integer" in err.reason
    assert repr(value) in err.reason  # the value given


def test_a_whole_float_is_a_count() -> None:
    data = minimal()
    data["training"]["total_timesteps"] = 2.0e3
    data["algorithm"]["hyperparameters"]["n_epochs"] = 3.0
    cfg = config_from_dict(data)
    assert cfg.training.total_timesteps == 2000 and type(cfg.training.total_timesteps) is int
    assert type(cfg.algorithm.hyperparameters["n_epochs"]) is int


def test_error_is_one_line_with_file_key_and_reason(tmp_path: Path) -> None:
    err = refused(tmp_path, minimal(curriculum=[{"until_fraction": 0.5, "turns": 100}]))
    assert err.key == "curriculum[0].turns"
    assert err.reason == f"Input should be less than or equal to {MAX_TURNS_OPTION}, got 100"
    assert str(err) == f"{err.file}: curriculum[0].turns: {err.reason}"
    assert "\n" not in str(err)


def test_mutation_keeps_working_and_is_type_checked() -> None:
    cfg = config_from_dict(minimal())
    cfg.training.progress_bar = False
    assert cfg.training.progress_bar is False
    with pytest.raises(ValueError, match="n_envs"):
        cfg.training.n_envs = "eight"  # type: ignore[assignment]
    assert cfg.training.n_envs == 4


def test_negative_learning_rate(tmp_path: Path) -> None:
    data = minimal()
    data["algorithm"]["hyperparameters"]["learning_rate"] = -3e-4
    err = refused(tmp_path, data)
    assert err.key == "algorithm.hyperparameters.learning_rate" and "greater than 0" in err.reason


def test_schedule_start_negative(tmp_path: Path) -> None:
    data = minimal()
    data["algorithm"]["hyperparameters"]["learning_rate"] = {
        "schedule": "linear",
        "start": -1.0,
        "end": 0.0,
    }
    err = refused(tmp_path, data)
    assert err.key == "algorithm.hyperparameters.learning_rate.start"


def test_unknown_schedule_kind(tmp_path: Path) -> None:
    data = minimal()
    data["algorithm"]["hyperparameters"]["clip_range"] = {"schedule": "cosine", "start": 0.2}
    err = refused(tmp_path, data)
    assert err.key == "algorithm.hyperparameters.clip_range.schedule"


@pytest.mark.parametrize("gamma", [0.0, 1.5, -0.1])
def test_gamma_outside_unit_interval(tmp_path: Path, gamma: float) -> None:
    data = minimal()
    data["algorithm"]["hyperparameters"]["gamma"] = gamma
    err = refused(tmp_path, data)
    assert err.key == "algorithm.hyperparameters.gamma"


def test_gamma_one_is_allowed() -> None:
    data = minimal()
    data["algorithm"]["hyperparameters"]["gamma"] = 1.0
    assert config_from_dict(data).algorithm.hyperparameters["gamma"] == 1.0


def test_batch_not_dividing_rollout(tmp_path: Path) -> None:
    data = minimal()
    data["algorithm"]["hyperparameters"].update(n_steps=100, batch_size=64)  # 400 % 64 != 0
    err = refused(tmp_path, data)
    assert err.key == "algorithm.hyperparameters.batch_size"
    assert "divisible" in err.reason and "400" in err.reason


def test_unknown_algorithm(tmp_path: Path) -> None:
    data = minimal()
    data["algorithm"] = {"name": "sac"}
    err = refused(tmp_path, data)
    assert err.key == "algorithm.name" and "maskable_ppo" in err.reason


def test_unknown_activation(tmp_path: Path) -> None:
    err = refused(tmp_path, minimal(policy={"activation": "sigmoidish"}))
    assert err.key == "policy.activation" and "tanh" in err.reason


def test_unknown_vec_env(tmp_path: Path) -> None:
    data = minimal()
    data["training"]["vec_env"] = "ray"
    err = refused(tmp_path, data)
    assert err.key == "training.vec_env"


def test_bad_layer_size(tmp_path: Path) -> None:
    err = refused(tmp_path, minimal(policy={"net_arch": {"pi": [64, 0], "vf": [64]}}))
    assert err.key == "policy.net_arch.pi[1]"


def test_missing_required(tmp_path: Path) -> None:
    err = refused(tmp_path, {"algorithm": {"name": "ppo"}})
    assert err.key == "training"


def test_managed_argument_refused(tmp_path: Path) -> None:
    data = minimal()
    data["algorithm"]["hyperparameters"]["policy_kwargs"] = {"net_arch": [8]}
    err = refused(tmp_path, data)
    assert "policy:" in err.reason


def test_curriculum_must_increase_and_change_rules(tmp_path: Path) -> None:
    stages = [{"until_fraction": 0.5, "turns": 30}, {"until_fraction": 0.3, "suits_required": 2}]
    err = refused(tmp_path, minimal(curriculum=stages))
    assert err.key == "curriculum[1].until_fraction"
    err = refused(tmp_path, minimal(curriculum=[{"until_fraction": 0.5}]))
    assert err.key == "curriculum[0]" and "real game" in err.reason


def test_qvalue_policy_takes_one_list(tmp_path: Path) -> None:
    data = minimal(policy={"net_arch": {"pi": [8], "vf": [8]}})
    data["algorithm"] = {"name": "dqn"}
    err = refused(tmp_path, data)
    assert err.key == "policy.net_arch"


def test_invalid_yaml_names_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("algorithm: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broken\.yaml"):
        load_config(path)


def test_a_binary_or_latin1_file_names_file(tmp_path: Path) -> None:
    for name, data in (
        ("model.zip", b"PK\x03\x04\x90\x00"),
        ("latin.yaml", "seed: 1 # é".encode("latin-1")),
    ):
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(ConfigError, match=rf"{name.replace('.', '[.]')}.*UTF-8"):
            load_config(path)


def test_missing_file_names_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.yaml"):
        load_config(tmp_path / "nope.yaml")


# ---------------------------------------------------------------- resolution
def test_scientific_notation_without_dot_is_a_float(tmp_path: Path) -> None:
    path = tmp_path / "sci.yaml"
    path.write_text(
        "algorithm:\n  name: ppo\n  hyperparameters: {learning_rate: 3e-4}\n"
        "training: {total_timesteps: 1e3}\n",
        encoding="utf-8",
    )
    cfg = load_config(path)
    assert cfg.algorithm.hyperparameters["learning_rate"] == pytest.approx(3e-4)
    assert cfg.training.total_timesteps == 1000


def test_overrides_are_validated() -> None:
    cfg = config_from_dict(minimal())
    new = apply_overrides(cfg, timesteps=5000, seed=7)
    assert (new.training.total_timesteps, new.seed) == (5000, 7)
    assert cfg.training.total_timesteps == 1000  # the original is untouched
    with pytest.raises(ConfigError, match=r"training\.total_timesteps"):
        apply_overrides(cfg, timesteps=0)
    with pytest.raises(ConfigError, match=r"^c\.yaml with --seed 99999999: seed: "):
        apply_overrides(cfg, seed=99_999_999, file="c.yaml")  # the flag named, not only the file


def test_policy_kwargs_structured() -> None:
    from torch import nn

    cfg = config_from_dict(
        minimal(policy={"net_arch": {"pi": [32], "vf": [16, 16]}, "activation": "relu"})
    )
    assert isinstance(cfg.policy.net_arch, NetArch)
    kwargs = policy_kwargs(cfg)
    assert kwargs == {"net_arch": {"pi": [32], "vf": [16, 16]}, "activation_fn": nn.ReLU}
    assert activation_class("tanh") is nn.Tanh


def test_linear_schedule_built() -> None:
    data = minimal()
    data["algorithm"]["hyperparameters"]["learning_rate"] = {
        "schedule": "linear",
        "start": 1e-3,
        "end": 0,
    }
    schedule = algorithm_kwargs(config_from_dict(data))["learning_rate"]
    assert schedule(1.0) == pytest.approx(1e-3) and schedule(0.0) == pytest.approx(0.0)
    assert schedule(0.5) == pytest.approx(5e-4)


def test_curriculum_stages_then_real_game() -> None:
    cfg = config_from_dict(
        minimal(
            curriculum=[
                {"until_fraction": 0.25, "turns": 40},
                {"until_fraction": 0.5, "suits_required": 2},
            ]
        )
    )
    assert cfg.stage_env_kwargs(0)["turns"] == 40
    assert cfg.stage_env_kwargs(300)["suits_required"] == 2
    assert cfg.stage_env_kwargs(300)["turns"] == 24
    assert "turns" not in cfg.stage_env_kwargs(600)  # the real game: env defaults
    assert "turns" not in cfg.env_kwargs()


def test_registry_entries_resolve() -> None:
    for name, spec in ALGORITHMS.items():
        assert spec.load_class().__name__ == spec.class_name
        assert get_algorithm(name) is spec
    with pytest.raises(ValueError, match="unknown algorithm"):
        get_algorithm("sac")


def test_train_script_exits_nonzero_without_traceback(tmp_path: Path) -> None:
    data = minimal()
    data["algorithm"]["hyperparameters"]["learning_rate"] = -1.0
    path = write(tmp_path, data, "bad.yaml")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train.py"), "--config", str(path), "--out", "run"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert str(path) in proc.stderr and "algorithm.hyperparameters.learning_rate" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_train_script_needs_its_run_directory(tmp_path: Path) -> None:
    """Training writes only where its user says: no default folder under the working one."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train.py"), "--config",
         str(ROOT / "configs" / "ppo.yaml")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "--out DIR" in proc.stderr
    assert list(tmp_path.iterdir()) == []
    assert not (tmp_path / "runs").exists(), "nothing may run before validation passes"


@pytest.mark.parametrize(
    ("section", "key", "reason"),
    [
        ({"budget": "planner-huge"}, "expert_iteration.budget", "planner-small"),
        ({"workers": 0}, "expert_iteration.workers", "greater than or equal to 1, got 0"),
        ({"learning_rate": 0.0}, "expert_iteration.learning_rate", "0.0"),
        ({"rounds": 2, "seed": 3}, "expert_iteration.seed", "unknown key"),
        ({"rounds": 9000, "episodes": 2000}, "expert_iteration.episodes", "rounds x episodes"),
    ],
)
def test_bad_expert_iteration_is_refused_by_key(
    tmp_path: Path, section: dict[str, Any], key: str, reason: str
) -> None:
    err = refused(tmp_path, minimal(expert_iteration=section))
    assert err.key == key and reason in err.reason


def test_expert_iteration_needs_a_memoryless_network_on_raw_observations(tmp_path: Path) -> None:
    data = minimal(expert_iteration={"rounds": 1})
    data["algorithm"] = {"name": "recurrent_ppo", "hyperparameters": {"n_steps": 64}}
    err = refused(tmp_path, data)
    assert err.key == "expert_iteration.rounds" and "recurrent" in err.reason
    data = minimal(expert_iteration={"rounds": 1})
    data["training"]["normalize_obs"] = True
    err = refused(tmp_path, data)
    assert err.key == "training.normalize_obs" and "expert iteration" in err.reason
    config_from_dict(minimal(expert_iteration={"rounds": 0}, training={
        "total_timesteps": 1000, "n_envs": 4, "normalize_obs": True}))  # fmt: skip


def test_the_planner_budgets_of_the_schema_are_the_registered_ones(tmp_path: Path) -> None:
    from agents.learning.config import ExpertIterationConfig
    from agents.players.planner import BUDGETS

    assert {ExpertIterationConfig(budget=name).budget for name in BUDGETS} == set(BUDGETS)
    err = refused(tmp_path, minimal(expert_iteration={"budget": "planner-tiny"}))
    assert err.key == "expert_iteration.budget" and str(sorted(BUDGETS)) in err.reason


def test_a_misspelt_teacher_is_refused_before_training(tmp_path: Path) -> None:
    data = minimal()
    data["imitation"] = {"enabled": True, "teacher": "heuristc"}
    err = refused(tmp_path, data)
    assert err.key == "imitation.teacher"
    assert "'heuristc'" in err.reason and "heuristic" in err.reason
    data["imitation"] = {"enabled": False, "teacher": "heuristc"}  # not used: not checked
    config_from_dict(data)


def test_a_key_given_twice_is_refused_with_its_line(tmp_path: Path) -> None:
    text = (ROOT / "configs" / "ppo.yaml").read_text()
    path = tmp_path / "twice.yaml"
    path.write_text(text + "\nname: other\n")  # PyYAML alone keeps the last, silently
    with pytest.raises(ConfigError, match=r"twice\.yaml: <file>: invalid YAML: key 'name' appears "
                       r"twice(.|\n)*line \d+"):  # fmt: skip
        load_config(path)
    path.write_text(text.replace("training:", "training:\n  n_envs: 8\n  n_envs: 16", 1))
    with pytest.raises(ConfigError, match="key 'n_envs' appears twice"):
        load_config(path)


def test_yaml_merge_keys_still_load_and_a_list_as_a_key_is_refused(tmp_path: Path) -> None:
    from agents.learning.config import read_yaml

    path = tmp_path / "merge.yaml"
    path.write_text("a: &x {k: 1, m: 2}\nb:\n  <<: *x\n  k: 3\n")  # a merged key overridden
    assert read_yaml(path) == {"a": {"k": 1, "m": 2}, "b": {"k": 3, "m": 2}}
    path.write_text("a: 1\n[1, 2]: 3\n")
    with pytest.raises(ConfigError, match=r"key \[1, 2\] cannot be a key"):
        read_yaml(path)


def test_shaping_gamma_other_than_the_algorithms_is_refused(tmp_path: Path) -> None:
    data = minimal(shaping={"enabled": True, "gamma": 0.9})
    data["algorithm"]["hyperparameters"]["gamma"] = 0.99
    err = refused(tmp_path, data)
    assert err.key == "shaping.gamma" and "0.99" in err.reason
    data["shaping"]["gamma"] = 0.99  # the same discount, said twice: accepted
    assert config_from_dict(data).shaping_gamma == 0.99
    data["shaping"] = {"enabled": False, "gamma": 0.9}  # not shaping: nothing to keep
    assert not config_from_dict(data).shaping.enabled
    data["shaping"] = {"enabled": True, "gamma": None}
    assert config_from_dict(data).shaping_gamma == 0.99


def test_more_evaluation_deals_than_a_validation_seed_holds_is_refused(tmp_path: Path) -> None:
    from coldiron_env.dealer import STREAM_INDEX_BITS

    data = minimal(evaluation={"episodes": (1 << STREAM_INDEX_BITS) + 1})
    err = refused(tmp_path, data)
    assert err.key == "evaluation.episodes"
    data["evaluation"]["episodes"] = 1 << STREAM_INDEX_BITS  # deals 0 .. 2**24 - 1: all there
    assert config_from_dict(data).evaluation.episodes == 1 << STREAM_INDEX_BITS


def test_a_name_with_a_path_in_it_is_refused(tmp_path: Path) -> None:
    """The name is the run's folder under runs/: a path would put the run elsewhere."""
    for name in ("/tmp/elsewhere", "../up", "a\\b"):
        assert refused(tmp_path, minimal(name=name)).key == "name"
    assert config_from_dict(minimal(name="my-run.v2")).name == "my-run.v2"


def test_a_win_must_pay_more_than_a_loss(tmp_path: Path) -> None:
    err = refused(tmp_path, minimal(env={"win_reward": 0.0, "loss_reward": 1.0}))
    assert err.key == "env.win_reward" and "loss_reward" in err.reason
    assert config_from_dict(minimal(env={"win_reward": 1.0, "loss_reward": -1.0}))


def test_every_problem_of_a_config_is_named_not_only_the_first(tmp_path: Path) -> None:
    """Two mistakes: both keys named in one error (a reader fixes them in one go)."""
    data = minimal(seed="x")
    del data["training"]
    err = refused(tmp_path, data)
    assert "seed" in str(err) and "training" in str(err)
    assert "; also " in str(err)
