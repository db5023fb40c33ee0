"""Cold Iron on RLlib (Ray): PPO with action masking, and its checkpoints as agents.

Training (``scripts/rllib_train.py``) builds a :class:`ray.rllib.algorithms.ppo.PPOConfig`
with :func:`build_config`: RLlib's new API stack, the env made by :func:`make_env` with
``mask_in_observation=True`` (a ``Dict({"observations": ..., "action_mask": ...})``
observation) and RLlib's ``ActionMaskingTorchRLModule``, which adds ``log(mask)`` to the
policy's logits, so an illegal action is never sampled.

**The env runners import the env themselves.** Ray's env-runner processes never import
``coldiron_env`` (a creator calling ``gym.make("coldiron/ColdIron-v0")`` fails there with
"Namespace coldiron not found"): :func:`make_env` imports it inside the runner, and
builds the env from ``"coldiron_env:coldiron/ColdIron-v0"``. On a cluster every node
needs the project installed (``pip install -e ".[rllib,fast]"``), as it needs Ray.

**Checkpoints.** ``Algorithm.save_to_path(DIR)`` writes ``DIR/rllib_checkpoint.json`` and
the module's weights; :func:`save_env_options` adds ``DIR/coldiron_env.json`` (the env
options the policy was trained with). :func:`load_rllib_agent` reads both back:
``agents.registry.make_agent(DIR)`` and ``scripts/evaluate.py --agent DIR`` play the
module's most probable legal action, on the same deals as every other player.

Settings (:class:`RllibSettings`) come from a YAML file (``configs/rllib/ppo.yaml``)
validated here: an unknown key or a value of the wrong type is a ``ValueError`` naming it.
A curriculum (fewer suits in the phrase first, as ``configs/maskable_ppo_scratch.yaml``)
is applied between iterations by :func:`set_training_env`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import numpy as np

from agents.atomic import atomic_write_json
from agents.players.base import Agent, legal_rows

if TYPE_CHECKING:
    import gymnasium as gym
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModule

ENV_SPEC: Final = "coldiron_env:coldiron/ColdIron-v0"
"""The env id with its module: ``gym.make`` imports ``coldiron_env`` (which registers it)."""
ENV_OPTIONS_FILE: Final = "coldiron_env.json"
"""Written beside ``rllib_checkpoint.json``: the env options the policy was trained with."""
ENV_OPTIONS_FORMAT: Final = 1
OBSERVATION_OPTIONS: Final = ("observation_mode", "recall", "counting")
"""Env options that shape the observation (what a player needs to play the policy)."""
FIXED_ENV_OPTIONS: Final = ("mask_in_observation", "render_mode", "illegal_action")
"""Env options the integration sets itself (the masking module needs the mask; the
illegal-action policy is :func:`build_config`'s argument)."""
VECTOR_MODES: Final = ("sync", "native")
"""``sync``: Gymnasium's SyncVectorEnv over single envs; ``native``: the project's vector
env (``coldiron_env.vector``, fast with numba: ``pip install -e ".[rllib,fast]"``)."""
VECTOR_AUTORESET: Final = "NEXT_STEP"
"""The autoreset mode RLlib's env runner expects (a step after the end returns a reset)."""
NUM_ENVS_KEY: Final = "num_envs"
"""The key RLlib adds to the env config when it asks for a vector env."""
MODULE_ID: Final = "default_policy"
RUNNER_INDEX_SPAN: Final = 1 << 12
"""Stream indices per env runner: a runner's envs deal from indices of their own."""
RLLIB_ENV_NAME: Final = "coldiron"
"""The name :func:`build_config` registers :func:`make_env` under (``ray.tune.register_env``)."""
ILLEGAL_SCORE: Final = -np.inf


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class PPOSettings:
    """PPO's hyperparameters (``PPOConfig.training`` arguments of the same names)."""

    lr: float = 3.0e-4
    gamma: float = 1.0
    lambda_: float = 0.95
    clip_param: float = 0.2
    entropy_coeff: float = 0.01
    vf_loss_coeff: float = 0.5
    vf_clip_param: float = 10.0
    grad_clip: float = 0.5
    use_kl_loss: bool = False
    num_epochs: int = 4
    train_batch_size_per_learner: int = 16_384
    minibatch_size: int = 4_096


@dataclass(frozen=True)
class ModelSettings:
    """The policy and value networks (RLlib's ``DefaultModelConfig`` keys of the same names)."""

    fcnet_hiddens: tuple[int, ...] = (128, 128)
    fcnet_activation: str = "tanh"
    vf_share_layers: bool = False


@dataclass(frozen=True)
class RunnerSettings:
    """How each env runner steps its games."""

    num_envs_per_env_runner: int = 16
    vectorize: str = "sync"


@dataclass(frozen=True)
class Stage:
    """A curriculum stage: until ``until_fraction`` of the budget, the phrase needs only
    ``suits_required`` suits (a training curriculum, not the real game)."""

    until_fraction: float
    suits_required: int


@dataclass(frozen=True)
class RllibSettings:
    """Everything a training run is built from (``configs/rllib/ppo.yaml``)."""

    env: dict[str, Any] = field(default_factory=lambda: {"counting": True})
    ppo: PPOSettings = field(default_factory=PPOSettings)
    model: ModelSettings = field(default_factory=ModelSettings)
    env_runners: RunnerSettings = field(default_factory=RunnerSettings)
    curriculum: tuple[Stage, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["model"]["fcnet_hiddens"] = list(self.model.fcnet_hiddens)
        out["curriculum"] = [asdict(stage) for stage in self.curriculum]
        return out

    def env_at(self, fraction: float) -> dict[str, Any]:
        """The training env options at ``fraction`` of the budget (the curriculum's stage,
        or the real game ``env`` once every stage is over)."""
        for stage in self.curriculum:
            if fraction < stage.until_fraction:
                return {**self.env, "suits_required": stage.suits_required}
        return dict(self.env)


SECTIONS: Final = {"ppo": PPOSettings, "model": ModelSettings, "env_runners": RunnerSettings}


def _check_value(where: str, expected: Any, value: Any) -> Any:
    """``value`` as the type of the default ``expected`` (ValueError naming ``where``)."""
    if isinstance(expected, bool):
        if not isinstance(value, bool):
            raise ValueError(f"{where} must be true or false, got {value!r}")
        return value
    if isinstance(expected, int):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{where} must be a positive integer, got {value!r}")
        return value
    if isinstance(expected, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{where} must be a non-negative number, got {value!r}")
        return float(value)
    if isinstance(expected, str):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{where} must be a non-empty string, got {value!r}")
        return value
    if isinstance(expected, tuple):
        if not isinstance(value, (list, tuple)) or not value:
            raise ValueError(f"{where} must be a non-empty list of layer sizes, got {value!r}")
        return tuple(_check_value(f"{where}[{i}]", 1, v) for i, v in enumerate(value))
    raise TypeError(f"{where}: no check for a default of type {type(expected).__name__}")


def _section(name: str, cls: Any, data: Any) -> Any:
    if not isinstance(data, Mapping):
        raise ValueError(f"settings section {name!r} must be a mapping, got {data!r}")
    defaults = cls()
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in section {name!r}; allowed: {sorted(known)}")
    values = {k: _check_value(f"{name}.{k}", getattr(defaults, k), v) for k, v in data.items()}
    return cls(**values)


def check_env_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Validated env options (``ValueError`` naming a key the env refuses or one this
    integration sets itself)."""
    from coldiron_env.env import ColdIronEnv  # noqa: PLC0415 (keeps this module light)

    if not isinstance(options, Mapping):
        raise ValueError(f"settings section 'env' must be a mapping, got {options!r}")
    fixed = sorted(set(options) & set(FIXED_ENV_OPTIONS))
    if fixed:
        raise ValueError(f"env option(s) {fixed} are set by the RLlib integration itself")
    kwargs = dict(options)
    if kwargs.get("observation_mode", "flat") != "flat":
        raise ValueError(
            "env option observation_mode must be 'flat' for RLlib (its encoder and the "
            f"checkpoint's player take one flat vector), got {kwargs['observation_mode']!r}"
        )
    try:
        ColdIronEnv(**kwargs).close()
    except TypeError as exc:
        raise ValueError(f"bad env option in section 'env': {exc}") from None
    return kwargs


STAGE_KEYS: Final = ("until_fraction", "suits_required")
REAL_SUITS: Final = 4
"""Suits the real game's phrase needs (a curriculum stage needs fewer)."""


def _curriculum(data: Any) -> tuple[Stage, ...]:
    if not isinstance(data, list):
        raise ValueError(f"curriculum must be a list of stages, got {data!r}")
    stages: list[Stage] = []
    for i, item in enumerate(data):
        where = f"curriculum[{i}]"
        if not isinstance(item, Mapping) or set(item) != set(STAGE_KEYS):
            raise ValueError(f"{where} must have exactly the keys {list(STAGE_KEYS)}, got {item!r}")
        fraction, suits = item["until_fraction"], item["suits_required"]
        previous = stages[-1].until_fraction if stages else 0.0
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
            raise ValueError(f"{where}.until_fraction must be a number, got {fraction!r}")
        if not previous < fraction < 1:
            raise ValueError(
                f"{where}.until_fraction must be in ({previous}, 1) (increasing), got {fraction!r}"
            )
        if isinstance(suits, bool) or not isinstance(suits, int) or not 1 <= suits < REAL_SUITS:
            raise ValueError(f"{where}.suits_required must be 1..{REAL_SUITS - 1}, got {suits!r}")
        stages.append(Stage(float(fraction), suits))
    return tuple(stages)


def settings_from_dict(data: Mapping[str, Any]) -> RllibSettings:
    """Validated settings from a mapping (a parsed YAML file); missing keys keep defaults."""
    if not isinstance(data, Mapping):
        raise ValueError(f"RLlib settings must be a mapping, got {type(data).__name__}")
    allowed = {"env", "curriculum", *SECTIONS}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ValueError(f"unknown settings section(s) {unknown}; allowed: {sorted(allowed)}")
    parts = {
        name: _section(name, cls, data[name]) for name, cls in SECTIONS.items() if name in data
    }
    env = check_env_options(data.get("env", RllibSettings().env))
    if "suits_required" in env or "turns" in env:
        raise ValueError(
            "env: suits_required and turns are the real game's (a curriculum is the "
            "'curriculum' section; the checkpoint is scored on the real game)"
        )
    curriculum = _curriculum(data.get("curriculum", []))
    settings = RllibSettings(env=env, curriculum=curriculum, **parts)
    if settings.env_runners.vectorize not in VECTOR_MODES:
        raise ValueError(
            f"env_runners.vectorize must be one of {VECTOR_MODES}, "
            f"got {settings.env_runners.vectorize!r}"
        )
    if settings.ppo.minibatch_size > settings.ppo.train_batch_size_per_learner:
        raise ValueError(
            f"ppo.minibatch_size ({settings.ppo.minibatch_size}) exceeds "
            f"ppo.train_batch_size_per_learner ({settings.ppo.train_batch_size_per_learner})"
        )
    return settings


def load_settings(path: str | Path) -> RllibSettings:
    """Settings from a YAML file (``ValueError`` naming the file on a bad one)."""
    import yaml  # noqa: PLC0415 (comes with ray)

    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{file}: cannot read RLlib settings: {exc}") from None
    try:
        return settings_from_dict(data or {})
    except ValueError as exc:
        raise ValueError(f"{file}: {exc}") from None


# --------------------------------------------------------------------------- training


def make_env(env_config: Mapping[str, Any]) -> gym.Env[Any, Any] | gym.vector.VectorEnv:
    """The env creator RLlib's env runners call (``env_config`` = the env options).

    Imports ``coldiron_env`` here, in the runner's process. With ``num_envs`` in the
    config (RLlib's ``vector_entry_point`` mode) it returns the native vector env with
    ``NEXT_STEP`` autoreset, else one :class:`~coldiron_env.env.ColdIronEnv`.
    """
    import gymnasium as gym  # noqa: PLC0415 (in the runner's process)

    import coldiron_env  # noqa: F401, PLC0415 (registers coldiron/ColdIron-v0 in this process)
    from agents.integrations.streams import (  # noqa: PLC0415 (in the runner's process)
        TrainingDeals,
        TrainingDealsVector,
    )

    kwargs = {str(k): v for k, v in dict(env_config).items()}
    num_envs = kwargs.pop(NUM_ENVS_KEY, None)
    kwargs["mask_in_observation"] = True
    # RLlib seeds its envs with the config's seed plus offsets (evaluation seeds): the
    # wrappers deal from the training stream whatever the seed
    if num_envs is not None:
        from coldiron_env.vector import ColdIronVectorEnv  # noqa: PLC0415 (gymnasium >= 1.0)

        return TrainingDealsVector(
            ColdIronVectorEnv(int(num_envs), autoreset_mode=VECTOR_AUTORESET, **kwargs)
        )
    return TrainingDeals(gym.make(ENV_SPEC, **kwargs), index=_runner_index(env_config))


def _runner_index(env_config: Mapping[str, Any]) -> int:
    """The env's place among RLlib's runners (``EnvContext``), 0 outside RLlib."""
    worker = int(getattr(env_config, "worker_index", 0) or 0)
    vector = int(getattr(env_config, "vector_index", 0) or 0)
    return worker * RUNNER_INDEX_SPAN + vector


def build_config(
    settings: RllibSettings,
    *,
    num_env_runners: int = 1,
    seed: int = 0,
    illegal_action: Literal["end", "raise"] = "end",
) -> PPOConfig:
    """RLlib PPO with action masking on Cold Iron (new API stack, one local learner).

    ``illegal_action="raise"`` makes an unmasked action fail the run (tests); env runner
    failures are never retried, so such an error ends training.
    """
    from ray.rllib.algorithms.ppo import PPOConfig  # noqa: PLC0415 (the rllib extra)
    from ray.rllib.core.rl_module.default_model_config import (  # noqa: PLC0415
        DefaultModelConfig,
    )
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec  # noqa: PLC0415
    from ray.rllib.examples.rl_modules.classes.action_masking_rlm import (  # noqa: PLC0415
        ActionMaskingTorchRLModule,
    )
    from ray.tune.registry import register_env  # noqa: PLC0415

    if isinstance(num_env_runners, bool) or not isinstance(num_env_runners, int):
        raise ValueError(f"num_env_runners must be an int, got {num_env_runners!r}")
    if num_env_runners < 0:
        raise ValueError(
            f"num_env_runners must be 0 (sample in the driver) or more, got {num_env_runners}"
        )
    if illegal_action not in ("end", "raise"):
        raise ValueError(f"illegal_action must be 'end' or 'raise', got {illegal_action!r}")
    env_config = {**check_env_options(settings.env), "illegal_action": illegal_action}
    ppo, model, runners = settings.ppo, settings.model, settings.env_runners
    register_env(RLLIB_ENV_NAME, make_env)
    config = (
        PPOConfig()
        .environment(env=RLLIB_ENV_NAME, env_config=env_config)
        .framework("torch", torch_compile_learner=False)
        .env_runners(
            num_env_runners=num_env_runners,
            num_envs_per_env_runner=runners.num_envs_per_env_runner,
            gym_env_vectorize_mode=(
                "vector_entry_point" if runners.vectorize == "native" else "sync"
            ),
            num_cpus_per_env_runner=1,
        )
        .learners(num_learners=0)
        .resources(num_cpus_for_main_process=1)
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=ActionMaskingTorchRLModule,
                model_config=DefaultModelConfig(
                    fcnet_hiddens=list(model.fcnet_hiddens),
                    fcnet_activation=model.fcnet_activation,
                    vf_share_layers=model.vf_share_layers,
                ),
            )
        )
        .training(
            lr=ppo.lr,
            gamma=ppo.gamma,
            lambda_=ppo.lambda_,
            clip_param=ppo.clip_param,
            entropy_coeff=ppo.entropy_coeff,
            vf_loss_coeff=ppo.vf_loss_coeff,
            vf_clip_param=ppo.vf_clip_param,
            grad_clip=ppo.grad_clip,
            use_kl_loss=ppo.use_kl_loss,
            num_epochs=ppo.num_epochs,
            train_batch_size_per_learner=ppo.train_batch_size_per_learner,
            minibatch_size=ppo.minibatch_size,
        )
        .fault_tolerance(restart_failed_env_runners=False, ignore_env_runner_failures=False)
        .debugging(seed=seed)
        .python_environment(extra_python_environs_for_worker={"OMP_NUM_THREADS": "1"})
    )
    return config


def set_training_env(algo: Any, env_options: Mapping[str, Any]) -> list[Any]:
    """Rebuild every env runner's envs with ``env_options`` (a curriculum stage); the next
    ``algo.train()`` samples from them. Returns each runner's env options, as set."""
    options = dict(env_options)

    def rebuild(runner: Any) -> Any:
        config = runner.config.copy(copy_frozen=False)
        fixed = {k: v for k, v in config.env_config.items() if k in FIXED_ENV_OPTIONS}
        config.env_config = {**options, **fixed}
        config.freeze()
        runner.config = config
        runner.make_env()
        return dict(runner.config.env_config)

    group = algo.env_runner_group
    local = group.num_remote_env_runners() == 0
    results: list[Any] = group.foreach_env_runner(rebuild, local_env_runner=local)
    return results


def save_env_options(checkpoint: str | Path, env_options: Mapping[str, Any]) -> Path:
    """Write ``coldiron_env.json`` (the env options of the policy) into a checkpoint."""
    path = Path(checkpoint) / ENV_OPTIONS_FILE
    atomic_write_json(
        path,
        {"format": ENV_OPTIONS_FORMAT, "env_id": ENV_SPEC, "env_kwargs": dict(env_options)},
    )
    return path


# --------------------------------------------------------------------------- playing


class RLlibLoadError(ValueError):
    """A checkpoint that is missing, corrupt or does not fit the env (the message names it)."""


class RLlibPolicy:
    """Deterministic masked play of an RLlib module for a batch of games (the arena's
    ``BatchPolicy``): the module's logits, illegal actions at ``-inf``, the best one."""

    def __init__(self, module: RLModule) -> None:
        self.module = module

    def reset_states(self) -> None:
        """Nothing to clear: the policy has no memory."""

    def scores(self, obs: Any, masks: np.ndarray) -> np.ndarray:
        """The module's action logits for a batch, shape (n, 19)."""
        import torch  # noqa: PLC0415 (the rllib extra)
        from ray.rllib.core.columns import Columns  # noqa: PLC0415

        from coldiron_env.observation import ACTION_MASK_KEY, OBSERVATIONS_KEY  # noqa: PLC0415

        batch = {
            Columns.OBS: {
                OBSERVATIONS_KEY: torch.as_tensor(np.asarray(obs, dtype=np.float32)),
                ACTION_MASK_KEY: torch.as_tensor(np.asarray(masks, dtype=np.float32)),
            }
        }
        with torch.no_grad():
            out = self.module.forward_inference(batch)
        logits: np.ndarray = out[Columns.ACTION_DIST_INPUTS].cpu().numpy()
        return logits

    def act(
        self, obs: Any, masks: np.ndarray, episode_starts: np.ndarray | None = None
    ) -> np.ndarray:
        legal = legal_rows(masks)
        scores = self.scores(obs, legal)
        masked = np.where(legal, scores, ILLEGAL_SCORE)
        best: np.ndarray = masked.argmax(axis=1)
        return best


class RLlibAgent(Agent):
    """An RLlib checkpoint playing Cold Iron: the module's most probable legal action.

    ``env_kwargs`` are the observation options it was trained with (the arena builds the
    matching env); ``act`` gets the plain observation and builds the masked ``Dict``.
    """

    def __init__(self, module: RLModule, env_kwargs: Mapping[str, Any], name: str) -> None:
        self.module = module
        self.env_kwargs = dict(env_kwargs)
        self.name = name
        self.policy = RLlibPolicy(module)

    @property
    def batch_policy(self) -> RLlibPolicy:
        """The same play for a batch of games (evaluation plays deals in lockstep with it)."""
        return self.policy

    def act(self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None = None) -> int:
        if isinstance(obs, dict):
            raise ValueError(
                f"{self.name}: expected the flat observation of {self.env_kwargs}, got a dict"
            )
        return int(self.policy.act(np.asarray(obs)[None], np.asarray(action_mask)[None])[0])


def read_env_options(checkpoint: Path) -> dict[str, Any]:
    """The env options saved in ``checkpoint`` (:class:`RLlibLoadError` naming the file)."""
    path = checkpoint / ENV_OPTIONS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        options = data["env_kwargs"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RLlibLoadError(
            f"{path}: cannot read the env options of this RLlib checkpoint ({exc}); it is "
            "written by scripts/rllib_train.py (save_env_options)"
        ) from None
    if not isinstance(options, dict):
        raise RLlibLoadError(f"{path}: 'env_kwargs' must be a mapping, got {options!r}")
    return options


def module_path(checkpoint: Path) -> Path:
    """Where ``Algorithm.save_to_path`` puts the policy's RLModule inside a checkpoint."""
    return checkpoint / "learner_group" / "learner" / "rl_module" / MODULE_ID


def load_rllib_agent(path: str | Path, name: str | None = None) -> RLlibAgent:
    """An RLlib PPO checkpoint (a directory with ``rllib_checkpoint.json``) as an agent.

    Needs the rllib extra (ray, torch). Raises :class:`RLlibLoadError` naming the path when
    the checkpoint, its env options or its module are missing or do not fit the env.
    """
    checkpoint = Path(path)
    if not (checkpoint / "rllib_checkpoint.json").is_file():
        raise RLlibLoadError(f"{checkpoint}: not an RLlib checkpoint (no rllib_checkpoint.json)")
    options = read_env_options(checkpoint)
    observation: dict[str, Any] = {str(k): options[k] for k in OBSERVATION_OPTIONS if k in options}
    try:
        from ray.rllib.core.rl_module.rl_module import (  # noqa: PLC0415 (the rllib extra)
            RLModule as RLModuleClass,
        )
    except ImportError as exc:
        raise RLlibLoadError(
            f"{checkpoint}: loading an RLlib checkpoint needs ray[rllib] "
            f'(pip install -e ".[rllib,fast]"): {exc}'
        ) from None
    where = module_path(checkpoint)
    if not where.is_dir():
        raise RLlibLoadError(f"{checkpoint}: no RLModule at {where}")
    try:
        module = RLModuleClass.from_checkpoint(where.resolve())  # pyarrow: absolute paths
    except Exception as exc:  # RLlib raises many kinds on a bad checkpoint
        raise RLlibLoadError(
            f"{where}: cannot load the RLModule: {type(exc).__name__}: {exc}"
        ) from None
    _check_spaces(module, observation, checkpoint)
    module.eval()
    return RLlibAgent(module, observation, name or checkpoint.name)


def _check_spaces(module: RLModule, observation: Mapping[str, Any], checkpoint: Path) -> None:
    env = make_env(observation)
    try:
        obs_space, act_space = env.observation_space, env.action_space
    finally:
        env.close()
    if module.action_space != act_space:
        raise RLlibLoadError(
            f"{checkpoint}: module action space {module.action_space} is not the env's {act_space}"
        )
    if module.observation_space != obs_space:
        raise RLlibLoadError(
            f"{checkpoint}: module observation space {module.observation_space} does not match "
            f"the env's {obs_space} (options {dict(observation)})"
        )


def agent_from_path(path: Path) -> RLlibAgent | None:
    """The RLlib checkpoint directory at ``path`` as an agent, None for anything else (the
    registry's loader: ``pyproject.toml``'s ``coldiron.loaders`` entry points)."""
    return load_rllib_agent(path) if (path / "rllib_checkpoint.json").is_file() else None
