"""Run configurations: a typed schema, YAML loading and validation.

A run is described by one YAML file (see ``configs/``). :func:`load_config`
parses it and validates every key *before* anything runs; any problem is raised
as a :class:`ConfigError` naming the file, the key path (for example
``algorithm.hyperparameters.learning_rate``) and the reason.

The schema is plain dataclasses walked by a small validator (:func:`_build`):
each field's type annotation gives the expected YAML type, and its
``metadata`` the bounds (``min``, ``max``, ``*_exclusive``) or the allowed
``choices``. Nothing is ``eval``-ed: activations are looked up by name in
:data:`ACTIVATIONS`, schedules are mappings such as
``{schedule: linear, start: 3.0e-4, end: 0.0}``.

Extending the schema is adding a field to :class:`Config` whose type is another
dataclass. The ``search:`` section of a tuning config is kept here as an opaque
mapping; :mod:`agents.learning.search_space` validates it (this module does not
import it).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, Union

import yaml

from agents.learning.algorithms import ALGORITHMS, AlgorithmSpec, get_algorithm

VEC_ENV_KINDS: Final = ("native", "dummy", "subproc")
OBSERVATION_MODES: Final = ("flat", "dict")
POTENTIALS: Final = ("run_windows",)
SCHEDULE_KINDS: Final = ("constant", "linear")
STANDARD_TURNS: Final = 24
STANDARD_SUITS: Final = 4
MAX_TURNS: Final = 99  # as coldiron_env.options.MAX_TURNS_OPTION

ACTIVATION_NAMES: Final = ("tanh", "relu", "elu", "leaky_relu", "gelu", "silu", "selu")
"""Activation names accepted by ``policy.activation`` (mapped by :func:`activation_class`)."""


class ConfigError(ValueError):
    """A configuration problem: ``file``, ``key`` (dotted path) and ``reason``."""

    def __init__(self, file: str | None, key: str, reason: str) -> None:
        self.file = file or "<config>"
        self.key = key or "<root>"
        self.reason = reason
        super().__init__(f"{self.file}: {self.key}: {reason}")


# ---------------------------------------------------------------- schema
def _c(default: Any = dataclasses.MISSING, **meta: Any) -> Any:
    """A dataclass field with a default and validation metadata."""
    if isinstance(default, (list, dict)):
        value = default
        return field(default_factory=lambda: type(value)(value), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class EnvConfig:
    """Options passed to ``coldiron/ColdIron-v0`` (training and evaluation alike)."""

    observation_mode: str = _c("flat", choices=OBSERVATION_MODES)
    recall: bool = False
    bonus_always: bool = False
    bonus_joker_grants_more: bool = False
    win_reward: float = 1.0
    loss_reward: float = 0.0

    def kwargs(self) -> dict[str, Any]:
        """The env keyword arguments (the real game: no curriculum options)."""
        return dataclasses.asdict(self)


@dataclass
class ShapingConfig:
    """Potential-based reward shaping, training only (see :mod:`agents.learning.shaping`)."""

    enabled: bool = False
    potential: str = _c("run_windows", choices=POTENTIALS)
    coefficient: float = _c(0.01, min=0.0)
    gamma: float | None = _c(None, min=0.0, min_exclusive=True, max=1.0)
    """Discount in F = gamma * Phi(s') - Phi(s); ``null`` = the algorithm's gamma."""


@dataclass
class CurriculumStage:
    """Training-only rule options used until a fraction of the timestep budget."""

    until_fraction: float = _c(min=0.0, max=1.0, min_exclusive=True, max_exclusive=True)
    turns: int = _c(STANDARD_TURNS, min=1, max=MAX_TURNS)
    suits_required: int = _c(STANDARD_SUITS, min=1, max=STANDARD_SUITS)


@dataclass
class NetArch:
    """Separate layer sizes for the actor (``pi``) and the critic (``vf``)."""

    pi: list[int] = _c([64, 64], item_min=1)  # noqa: RUF009 (a field)
    vf: list[int] = _c([64, 64], item_min=1)  # noqa: RUF009 (a field)


@dataclass
class PolicyConfig:
    """The policy network (SB3 ``policy_kwargs``), structured."""

    net_arch: list[int] | NetArch = _c([64, 64], item_min=1)  # noqa: RUF009 (a field)
    activation: str = _c("tanh", choices=ACTIVATION_NAMES)
    ortho_init: bool | None = None
    lstm_hidden_size: int | None = _c(None, min=1)
    n_lstm_layers: int | None = _c(None, min=1)
    shared_lstm: bool | None = None
    enable_critic_lstm: bool | None = None
    n_quantiles: int | None = _c(None, min=1)


@dataclass
class AlgorithmConfig:
    name: str = _c(choices=tuple(ALGORITHMS))
    policy: str | None = None
    """SB3 policy name; ``null`` = the registry's default for the observation mode."""
    hyperparameters: dict[str, Any] = _c({})  # noqa: RUF009 (a field)

    @property
    def spec(self) -> AlgorithmSpec:
        return get_algorithm(self.name)


@dataclass
class TrainingConfig:
    total_timesteps: int = _c(min=1)
    n_envs: int = _c(8, min=1)
    vec_env: str = _c("dummy", choices=VEC_ENV_KINDS)
    normalize_obs: bool = False
    normalize_reward: bool = False
    device: str = _c("cpu", choices=("cpu", "cuda", "auto"))
    torch_threads: int = _c(1, min=1)
    progress_bar: bool = True
    log_interval: int = _c(1, min=1)


@dataclass
class EvaluationConfig:
    """Periodic evaluation on a fixed set of deals (seeds ``seed .. seed+episodes-1``)."""

    freq: int = _c(50_000, min=1)
    episodes: int = _c(500, min=1)
    seed: int = _c(1_000_000, min=0)
    deterministic: bool = True


@dataclass
class CheckpointConfig:
    freq: int = _c(100_000, min=1)


@dataclass
class ImitationConfig:
    """Behaviour-cloning warm start (see :mod:`agents.learning.imitation`)."""

    enabled: bool = False
    teacher: str = "heuristic"
    episodes: int = _c(2_000, min=1)
    epochs: int = _c(10, min=1)
    batch_size: int = _c(256, min=1)
    learning_rate: float = _c(1e-3, min=0.0, min_exclusive=True)
    value_pretrain: bool = True
    seed: int = _c(50_000_000, min=0)
    dagger_rounds: int = _c(0, min=0)
    """DAgger rounds after cloning: the student plays, the teacher labels its states."""
    dagger_episodes: int = _c(2_000, min=1)
    dagger_epochs: int = _c(3, min=1)


@dataclass
class Config:
    """One training run."""

    algorithm: AlgorithmConfig
    training: TrainingConfig
    name: str | None = None
    description: str | None = None
    seed: int = _c(0, min=0)
    env: EnvConfig = field(default_factory=EnvConfig)
    shaping: ShapingConfig = field(default_factory=ShapingConfig)
    curriculum: list[CurriculumStage] = _c([])  # noqa: RUF009 (a field)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    imitation: ImitationConfig = field(default_factory=ImitationConfig)
    search: dict[str, Any] | None = None
    """Hyperparameter search space of ``scripts/tune.py``, kept as plain data here and
    validated by :mod:`agents.learning.search_space`; training ignores it."""

    def to_dict(self) -> dict[str, Any]:
        """Plain data, in the order a config file is read (top-level keys first)."""
        plain: dict[str, Any] = _to_plain(self)
        if plain.get("search") is None:
            plain.pop("search", None)
        first = ("name", "description", "seed", "env", "shaping", "curriculum", "algorithm")
        return {k: plain[k] for k in first} | {k: v for k, v in plain.items() if k not in first}

    def env_kwargs(self) -> dict[str, Any]:
        return self.env.kwargs()

    def stage_env_kwargs(self, timesteps: int) -> dict[str, Any]:
        """Env kwargs in force after ``timesteps`` (the curriculum, then the real game)."""
        kwargs = self.env.kwargs()
        for stage in self.curriculum:
            if timesteps < stage.until_fraction * self.training.total_timesteps:
                kwargs.update(turns=stage.turns, suits_required=stage.suits_required)
                break
        return kwargs

    @property
    def shaping_gamma(self) -> float:
        if self.shaping.gamma is not None:
            return self.shaping.gamma
        gamma = self.algorithm.hyperparameters.get("gamma", 0.99)
        return float(gamma)


# ---------------------------------------------------------------- hyperparameters
@dataclass(frozen=True)
class HyperSpec:
    """Type and bounds of one hyperparameter."""

    kind: Literal["float", "int", "bool", "schedule"]
    low: float | None = None
    high: float | None = None
    low_exclusive: bool = False
    nullable: bool = False


HYPERPARAMETERS: Final[dict[str, HyperSpec]] = {
    "learning_rate": HyperSpec("schedule", 0.0, None, low_exclusive=True),
    "n_steps": HyperSpec("int", 1),
    "batch_size": HyperSpec("int", 2),
    "n_epochs": HyperSpec("int", 1),
    "gamma": HyperSpec("float", 0.0, 1.0, low_exclusive=True),
    "gae_lambda": HyperSpec("float", 0.0, 1.0),
    "clip_range": HyperSpec("schedule", 0.0, None, low_exclusive=True),
    "clip_range_vf": HyperSpec("schedule", 0.0, None, low_exclusive=True, nullable=True),
    "normalize_advantage": HyperSpec("bool"),
    "ent_coef": HyperSpec("float", 0.0),
    "vf_coef": HyperSpec("float", 0.0),
    "max_grad_norm": HyperSpec("float", 0.0, None, low_exclusive=True),
    "target_kl": HyperSpec("float", 0.0, None, low_exclusive=True, nullable=True),
    "stats_window_size": HyperSpec("int", 1),
    "use_rms_prop": HyperSpec("bool"),
    "rms_prop_eps": HyperSpec("float", 0.0, None, low_exclusive=True),
    "buffer_size": HyperSpec("int", 1),
    "learning_starts": HyperSpec("int", 0),
    "tau": HyperSpec("float", 0.0, 1.0, low_exclusive=True),
    "train_freq": HyperSpec("int", 1),
    "gradient_steps": HyperSpec("int", 1),
    "target_update_interval": HyperSpec("int", 1),
    "exploration_fraction": HyperSpec("float", 0.0, 1.0),
    "exploration_initial_eps": HyperSpec("float", 0.0, 1.0),
    "exploration_final_eps": HyperSpec("float", 0.0, 1.0),
    "optimize_memory_usage": HyperSpec("bool"),
}
"""Every hyperparameter this schema accepts (an algorithm takes those its class takes)."""

MANAGED_ARGUMENTS: Final[dict[str, str]] = {
    "policy": "set it as algorithm.policy",
    "policy_kwargs": "set it in the policy: section",
    "env": "set by the trainer from env: and training:",
    "seed": "set the top-level seed:",
    "device": "set training.device",
    "tensorboard_log": "the trainer logs into the run directory",
    "verbose": "set by the trainer",
}


def hyperparameters_of(spec: AlgorithmSpec) -> set[str]:
    """The hyperparameter names algorithm ``spec`` accepts."""
    params = inspect.signature(spec.load_class().__init__).parameters
    return set(params) & set(HYPERPARAMETERS)


# ---------------------------------------------------------------- YAML loading
class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads ``3e-4`` as a float (YAML 1.2; PyYAML needs a dot)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.VERBOSE,
    ),
    list("-+0123456789."),
)


def read_yaml(path: str | Path) -> Any:
    """The data of the YAML file at ``path`` (``ConfigError`` naming the file if unreadable)."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(file, "<file>", f"cannot read the file: {exc.strerror or exc}") from None
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise ConfigError(file, "<file>", f"invalid YAML: {exc}") from None


def load_config(path: str | Path) -> Config:
    """Read and validate the YAML run description at ``path``."""
    return config_from_dict(read_yaml(path), str(path))


def config_from_dict(data: Any, file: str | None = None) -> Config:
    """Validate a parsed mapping into a :class:`Config` (``file`` is named in errors)."""
    cfg: Config = _build(Config, data, "", file)
    validate(cfg, file)
    return cfg


def apply_overrides(
    cfg: Config, *, timesteps: int | None = None, seed: int | None = None, file: str | None = None
) -> Config:
    """A copy of ``cfg`` with command-line overrides applied and validated again."""
    data = cfg.to_dict()
    if timesteps is not None:
        data["training"]["total_timesteps"] = timesteps
    if seed is not None:
        data["seed"] = seed
    return config_from_dict(data, file)


def dump_config(cfg: Config) -> str:
    """The resolved config as YAML text (loads back to an equal config)."""
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False, default_flow_style=None)


# ---------------------------------------------------------------- generic validator
_PLAIN_TYPES: Final = {bool: "a bool", int: "an int", float: "a number", str: "a string"}


def _describe(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def _build(cls: type[Any], data: Any, path: str, file: str | None) -> Any:
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(file, path, f"must be a mapping, got {_describe(data)}")
    hints = typing.get_type_hints(cls)
    fields_ = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields_:
            where = f"{path}.{key}" if path else str(key)
            raise ConfigError(file, where, f"unknown key; known keys here: {sorted(fields_)}")
    values: dict[str, Any] = {}
    for name, f in fields_.items():
        where = f"{path}.{name}" if path else name
        if name in data:
            values[name] = _coerce(data[name], hints[name], dict(f.metadata), where, file)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(file, where, "required key is missing")
    return cls(**values)


def _coerce(value: Any, tp: Any, meta: dict[str, Any], path: str, file: str | None) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None:
            if type(None) in options:
                return None
            raise ConfigError(file, path, "must not be null")
        non_null = [o for o in options if o is not type(None)]
        errors = []
        for option in non_null:
            try:
                return _coerce(value, option, meta, path, file)
            except ConfigError as exc:
                errors.append(exc)
        if len(non_null) == 1:
            raise errors[0]
        # Report the alternative matching the YAML shape (mapping vs list vs scalar).
        for error, option in zip(errors, non_null, strict=True):
            shape = typing.get_origin(option) or option
            if (isinstance(value, Mapping) and dataclasses.is_dataclass(shape)) or (
                isinstance(value, list) and shape is list
            ):
                raise error
        names = " or ".join(_type_name(o) for o in non_null)
        raise ConfigError(file, path, f"must be {names}, got {_describe(value)}")
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, path, file)  # type: ignore[arg-type]
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(file, path, f"must be a list, got {_describe(value)}")
        (item_tp,) = typing.get_args(tp)
        item_meta = {k[5:]: v for k, v in meta.items() if k.startswith("item_")}
        return [_coerce(v, item_tp, item_meta, f"{path}[{i}]", file) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(file, path, f"must be a mapping, got {_describe(value)}")
        return dict(value)
    return _scalar(value, tp, meta, path, file)


def _type_name(tp: Any) -> str:
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    if typing.get_origin(tp) is list:
        return "a list"
    return str(_PLAIN_TYPES.get(tp, getattr(tp, "__name__", str(tp))))


def _scalar(value: Any, tp: Any, meta: dict[str, Any], path: str, file: str | None) -> Any:
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(file, path, f"must be a bool (true/false), got {_describe(value)}")
    elif tp is int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # 1.0e6 written for a count
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(file, path, f"must be an int, got {_describe(value)}")
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(file, path, f"must be a number, got {_describe(value)}")
        value = float(value)
        if not math.isfinite(value):
            raise ConfigError(file, path, f"must be a finite number, got {value!r}")
    elif tp is str:
        if not isinstance(value, str):
            raise ConfigError(file, path, f"must be a string, got {_describe(value)}")
    else:  # pragma: no cover (schema bug)
        raise TypeError(f"unsupported schema type {tp!r} at {path}")
    _check_bounds(value, meta, path, file)
    return value


def _check_bounds(value: Any, meta: Mapping[str, Any], path: str, file: str | None) -> None:
    choices = meta.get("choices")
    if choices is not None and value not in choices:
        raise ConfigError(file, path, f"must be one of {list(choices)}, got {value!r}")
    low, high = meta.get("min"), meta.get("max")
    if low is not None:
        bad = value <= low if meta.get("min_exclusive") else value < low
        if bad:
            op = ">" if meta.get("min_exclusive") else ">="
            raise ConfigError(file, path, f"must be {op} {low}, got {value!r}")
    if high is not None:
        bad = value >= high if meta.get("max_exclusive") else value > high
        if bad:
            op = "<" if meta.get("max_exclusive") else "<="
            raise ConfigError(file, path, f"must be {op} {high}, got {value!r}")


def _to_plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, list):
        return [_to_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _to_plain(v) for k, v in obj.items()}
    return obj


# ---------------------------------------------------------------- cross-field validation
def validate(cfg: Config, file: str | None = None) -> None:
    """Checks that span several keys (and the per-algorithm hyperparameters)."""
    spec = cfg.algorithm.spec
    _validate_hyperparameters(cfg, spec, file)
    _validate_policy(cfg, spec, file)
    _validate_curriculum(cfg, file)
    if cfg.algorithm.policy is not None:
        allowed = {spec.flat_policy, spec.dict_policy}
        if cfg.algorithm.policy not in allowed:
            raise ConfigError(
                file,
                "algorithm.policy",
                f"must be one of {sorted(allowed)} (or null) for {spec.name}, "
                f"got {cfg.algorithm.policy!r}",
            )
        expected = spec.policy_name(cfg.env.observation_mode)
        if cfg.algorithm.policy != expected:
            raise ConfigError(
                file,
                "algorithm.policy",
                f"observation_mode {cfg.env.observation_mode!r} needs {expected!r}, "
                f"got {cfg.algorithm.policy!r}",
            )
    if cfg.imitation.enabled and not cfg.imitation.teacher.strip():
        raise ConfigError(file, "imitation.teacher", "must name a teacher agent")
    if cfg.imitation.enabled and cfg.training.normalize_obs:
        raise ConfigError(
            file,
            "training.normalize_obs",
            "cannot be combined with imitation (the clone is trained on raw observations)",
        )


def _validate_hyperparameters(cfg: Config, spec: AlgorithmSpec, file: str | None) -> None:
    base = "algorithm.hyperparameters"
    accepted = hyperparameters_of(spec)
    hp = cfg.algorithm.hyperparameters
    for key, value in list(hp.items()):
        path = f"{base}.{key}"
        if key in MANAGED_ARGUMENTS:
            raise ConfigError(file, path, f"not a hyperparameter: {MANAGED_ARGUMENTS[key]}")
        if key not in accepted:
            raise ConfigError(
                file, path, f"unknown hyperparameter for {spec.name}; known: {sorted(accepted)}"
            )
        hp[key] = _hyper_value(value, HYPERPARAMETERS[key], path, file)
    n_total = None
    if "n_steps" in accepted and not spec.off_policy:  # DQN's n_steps is its n-step return
        n_steps = int(hp.get("n_steps", _default_of(spec, "n_steps")))
        n_total = n_steps * cfg.training.n_envs
    if "batch_size" in accepted and n_total is not None:
        batch = int(hp.get("batch_size", _default_of(spec, "batch_size")))
        if batch > n_total:
            raise ConfigError(
                file,
                f"{base}.batch_size",
                f"{batch} is larger than n_steps * n_envs = {n_total} (one rollout)",
            )
        if n_total % batch:
            raise ConfigError(
                file,
                f"{base}.batch_size",
                f"n_steps * n_envs = {n_total} is not divisible by batch_size {batch}",
            )
    lo = hp.get("exploration_final_eps")
    hi = hp.get("exploration_initial_eps")
    if lo is not None and hi is not None and lo > hi:
        raise ConfigError(
            file, f"{base}.exploration_final_eps", f"{lo} is above exploration_initial_eps {hi}"
        )


def _default_of(spec: AlgorithmSpec, name: str) -> Any:
    return inspect.signature(spec.load_class().__init__).parameters[name].default


def _hyper_value(value: Any, hs: HyperSpec, path: str, file: str | None) -> Any:
    if value is None:
        if hs.nullable:
            return None
        raise ConfigError(file, path, "must not be null")
    meta = {"min": hs.low, "max": hs.high, "min_exclusive": hs.low_exclusive}
    if hs.kind == "schedule":
        if isinstance(value, Mapping):
            return _schedule(value, meta, path, file)
        return _scalar(value, float, meta, path, file)
    tp = {"float": float, "int": int, "bool": bool}[hs.kind]
    return _scalar(value, tp, meta, path, file)


def _schedule(
    value: Mapping[str, Any], meta: dict[str, Any], path: str, file: str | None
) -> dict[str, Any]:
    kind = value.get("schedule")
    if kind not in SCHEDULE_KINDS:
        raise ConfigError(
            file, f"{path}.schedule", f"must be one of {list(SCHEDULE_KINDS)}, got {kind!r}"
        )
    keys = ("schedule", "value") if kind == "constant" else ("schedule", "start", "end")
    for key in value:
        if key not in keys:
            raise ConfigError(
                file, f"{path}.{key}", f"unknown key for a {kind} schedule; known: {list(keys)}"
            )
    out: dict[str, Any] = {"schedule": kind}
    for key in keys[1:]:
        if key not in value:
            raise ConfigError(file, f"{path}.{key}", "required key is missing")
        bounds = dict(meta)
        if kind == "linear" and key == "end":
            bounds["min_exclusive"] = False  # decaying to exactly 0 is common
        out[key] = _scalar(value[key], float, bounds, f"{path}.{key}", file)
    return out


def _validate_policy(cfg: Config, spec: AlgorithmSpec, file: str | None) -> None:
    pol = cfg.policy
    if spec.family == "q_value":
        if isinstance(pol.net_arch, NetArch):
            raise ConfigError(
                file, "policy.net_arch", f"{spec.name} takes one list of layer sizes, not pi/vf"
            )
        if pol.ortho_init is not None:
            raise ConfigError(file, "policy.ortho_init", f"not used by {spec.name}")
    if pol.n_quantiles is not None and spec.name != "qrdqn":
        raise ConfigError(file, "policy.n_quantiles", "only for qrdqn")
    lstm_keys = ("lstm_hidden_size", "n_lstm_layers", "shared_lstm", "enable_critic_lstm")
    for key in lstm_keys:
        if getattr(pol, key) is not None and not spec.recurrent:
            raise ConfigError(
                file, f"policy.{key}", f"only for a recurrent algorithm, not {spec.name}"
            )
    if pol.shared_lstm and pol.enable_critic_lstm:
        raise ConfigError(
            file, "policy.enable_critic_lstm", "must be false when shared_lstm is true"
        )


def _validate_curriculum(cfg: Config, file: str | None) -> None:
    last = 0.0
    for i, stage in enumerate(cfg.curriculum):
        path = f"curriculum[{i}]"
        if stage.until_fraction <= last:
            raise ConfigError(
                file, f"{path}.until_fraction", f"must increase from stage to stage ({last} before)"
            )
        last = stage.until_fraction
        if stage.turns == STANDARD_TURNS and stage.suits_required == STANDARD_SUITS:
            raise ConfigError(file, path, "is the real game: a stage must change turns or suits")
        if cfg.env.observation_mode == "dict" and stage.turns > STANDARD_TURNS:
            raise ConfigError(
                file,
                f"{path}.turns",
                f"dict observations encode the turn as Discrete({STANDARD_TURNS + 1}): "
                f"more than {STANDARD_TURNS} turns needs observation_mode flat",
            )


# ---------------------------------------------------------------- building SB3 arguments
def activation_class(name: str) -> type[Any]:
    """The ``torch.nn`` activation class for a name of :data:`ACTIVATION_NAMES`."""
    from torch import nn  # noqa: PLC0415 (config loading stays torch-free)

    table: dict[str, type[nn.Module]] = {
        "tanh": nn.Tanh,
        "relu": nn.ReLU,
        "elu": nn.ELU,
        "leaky_relu": nn.LeakyReLU,
        "gelu": nn.GELU,
        "silu": nn.SiLU,
        "selu": nn.SELU,
    }
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"unknown activation {name!r}; known: {sorted(table)}") from None


def policy_kwargs(cfg: Config) -> dict[str, Any]:
    """SB3 ``policy_kwargs`` from the ``policy:`` section."""
    pol = cfg.policy
    arch: Any = (
        {"pi": list(pol.net_arch.pi), "vf": list(pol.net_arch.vf)}
        if isinstance(pol.net_arch, NetArch)
        else list(pol.net_arch)
    )
    out: dict[str, Any] = {"net_arch": arch, "activation_fn": activation_class(pol.activation)}
    for key in (
        "ortho_init",
        "lstm_hidden_size",
        "n_lstm_layers",
        "shared_lstm",
        "enable_critic_lstm",
        "n_quantiles",
    ):
        value = getattr(pol, key)
        if value is not None:
            out[key] = value
    return out


def algorithm_kwargs(cfg: Config) -> dict[str, Any]:
    """SB3 constructor keyword arguments from ``algorithm.hyperparameters`` (schedules built)."""
    from stable_baselines3.common.utils import (  # noqa: PLC0415
        ConstantSchedule,
        LinearSchedule,
    )

    out: dict[str, Any] = {}
    for key, value in cfg.algorithm.hyperparameters.items():
        if isinstance(value, Mapping):
            if value["schedule"] == "constant":
                out[key] = ConstantSchedule(float(value["value"]))
            else:
                out[key] = LinearSchedule(float(value["start"]), float(value["end"]), 1.0)
        else:
            out[key] = value
    return out
