"""The ``search:`` section of a tuning config: schema and validation (no Optuna import).

A tuning config is an ordinary run config (:mod:`agents.learning.config`) plus a
``search:`` section naming the settings to search and how (``docs/tuning.md``)::

    search:
      sampler: {kind: tpe, seed: null, n_startup_trials: 5}
      pruner: {kind: median, n_startup_trials: 5, n_warmup_steps: 1}
      parameters:
        algorithm.hyperparameters.learning_rate:
          {distribution: float, low: 1.0e-5, high: 1.0e-3, log: true}
        algorithm.hyperparameters.n_epochs: {distribution: int, low: 2, high: 10}
        policy.net_arch: {distribution: categorical, choices: [[64, 64], [128, 128]]}

:func:`load_tuning_config` splits ``search:`` off, validates the rest with
:func:`agents.learning.config.config_from_dict` and the search space with
:func:`parse_search`: every problem is a :class:`~agents.learning.config.ConfigError`
naming the file and the key (``search.parameters[PATH].low``, ...).
:mod:`agents.learning.config` keeps ``search:`` as an opaque mapping and does not
import this module (the dependency goes one way): a script that trains from a
config holding a ``search:`` section validates it with :func:`check_search`.
The Optuna side (objective, workers, reports) is :mod:`agents.learning.tuning`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from agents.learning.config import (
    Config,
    ConfigError,
    config_from_dict,
    hyperparameters_of,
    read_yaml,
)

if TYPE_CHECKING:
    import optuna

SEARCH_KEY: Final = "search"
DISTRIBUTIONS: Final = ("float", "int", "categorical")
SAMPLER_KINDS: Final = ("tpe", "random")
PRUNER_KINDS: Final = ("median", "successive_halving", "threshold", "none")
PARAM_KEYS: Final = {
    "float": ("distribution", "low", "high", "log", "step"),
    "int": ("distribution", "low", "high", "log", "step"),
    "categorical": ("distribution", "choices"),
}
SAMPLER_KEYS: Final = ("kind", "seed", "n_startup_trials")
PRUNER_KEYS: Final = {
    "median": ("kind", "n_startup_trials", "n_warmup_steps"),
    "successive_halving": ("kind", "min_resource", "reduction_factor"),
    "threshold": ("kind", "lower", "n_warmup_steps"),
    "none": ("kind",),
}
SEARCH_KEYS: Final = ("sampler", "pruner", "parameters")
DEFAULT_TPE_STARTUP: Final = 5
DEFAULT_PRUNER_STARTUP: Final = 5
DEFAULT_WARMUP_STEPS: Final = 1
"""Median/threshold pruning never acts on the initial evaluation (timestep 0)."""
DEFAULT_REDUCTION_FACTOR: Final = 3
INTERIOR_PROBE: Final = 0.382
"""Where inside a float range one extra value is validated (catches float-for-int)."""

_SCALAR_CHOICE: Final = (type(None), bool, int, float, str)


class InvalidSample(Exception):
    """The sampled combination of parameters is not a valid config."""


# ---------------------------------------------------------------- the search space
@dataclass(frozen=True)
class ParamSpec:
    """One searched setting: its dotted key path in the config and its distribution."""

    path: str
    distribution: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] = ()

    @property
    def encoded(self) -> bool:
        """Non-scalar choices (lists, mappings) go to Optuna as their JSON text."""
        return self.distribution == "categorical" and not all(
            isinstance(c, _SCALAR_CHOICE) for c in self.choices
        )

    def optuna_choices(self) -> list[Any]:
        if self.encoded:
            return [json.dumps(c) for c in self.choices]
        return list(self.choices)

    def decode(self, raw: Any) -> Any:
        """The config value of Optuna's parameter value ``raw``."""
        if self.encoded:
            return copy.deepcopy(json.loads(raw))
        if self.distribution == "int":
            return int(raw)
        if self.distribution == "float":
            return float(raw)
        return raw

    def suggest(self, trial: optuna.trial.BaseTrial) -> Any:
        """Sample this parameter for ``trial`` (its Optuna name is the key path)."""
        if self.distribution == "categorical":
            return self.decode(trial.suggest_categorical(self.path, self.optuna_choices()))
        assert self.low is not None and self.high is not None
        if self.distribution == "int":
            step = int(self.step) if self.step is not None else 1
            return trial.suggest_int(
                self.path, int(self.low), int(self.high), step=step, log=self.log
            )
        return trial.suggest_float(self.path, self.low, self.high, step=self.step, log=self.log)

    def to_dict(self) -> dict[str, Any]:
        if self.distribution == "categorical":
            return {"distribution": self.distribution, "choices": list(self.choices)}
        out: dict[str, Any] = {"distribution": self.distribution, "low": self.low}
        out["high"] = self.high
        out["log"] = self.log
        out["step"] = self.step
        return out


@dataclass(frozen=True)
class SamplerSpec:
    kind: str = "tpe"
    seed: int | None = None
    n_startup_trials: int = DEFAULT_TPE_STARTUP


@dataclass(frozen=True)
class PrunerSpec:
    kind: str = "median"
    n_startup_trials: int = DEFAULT_PRUNER_STARTUP
    n_warmup_steps: int = DEFAULT_WARMUP_STEPS
    min_resource: int | str = "auto"
    reduction_factor: int = DEFAULT_REDUCTION_FACTOR
    lower: float = 0.0


@dataclass(frozen=True)
class SearchSpace:
    """A validated ``search:`` section."""

    parameters: tuple[ParamSpec, ...]
    sampler: SamplerSpec = field(default_factory=SamplerSpec)
    pruner: PrunerSpec = field(default_factory=PrunerSpec)

    def by_path(self) -> dict[str, ParamSpec]:
        return {p.path: p for p in self.parameters}

    def to_dict(self) -> dict[str, Any]:
        return {
            "sampler": vars(self.sampler).copy(),
            "pruner": vars(self.pruner).copy(),
            "parameters": {p.path: p.to_dict() for p in self.parameters},
        }


@dataclass
class TuningConfig:
    """A tuning config file: the base run config (plain data and validated) and the search."""

    file: str
    base: Config
    base_data: dict[str, Any]
    search: SearchSpace
    raw_search: Any

    @property
    def name(self) -> str:
        return self.base.name or Path(self.file).stem

    def fingerprint(self) -> str:
        """Hash of the base config and the search space (a study is tied to it)."""
        text = json.dumps(
            {"config": self.base_data, "search": self.search.to_dict()},
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def trial_data(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The base config's plain data with Optuna's ``params`` (raw values) applied."""
        specs = self.search.by_path()
        data = copy.deepcopy(self.base_data)
        for path, raw in params.items():
            if path not in specs:
                raise KeyError(f"parameter {path!r} is not in the search space of {self.file}")
            _set_path(data, path, specs[path].decode(raw))
        return data

    def trial_config(self, params: Mapping[str, Any]) -> Config:
        """The validated config of a trial (``InvalidSample`` if the combination is invalid)."""
        try:
            return config_from_dict(self.trial_data(params), self.file)
        except ConfigError as exc:
            raise InvalidSample(f"invalid combination of sampled values: {exc}") from None


def load_tuning_config(path: str | Path) -> TuningConfig:
    """Read a tuning config: the run config (validated) and its ``search:`` section."""
    file = str(path)
    data = read_yaml(path)
    if not isinstance(data, Mapping):
        raise ConfigError(file, "<root>", f"must be a mapping, got {type(data).__name__}")
    rest = {k: v for k, v in data.items() if k != SEARCH_KEY}
    if SEARCH_KEY not in data:
        raise ConfigError(
            file, SEARCH_KEY, "required for tuning: the settings to search (docs/tuning.md)"
        )
    base = config_from_dict(copy.deepcopy(rest), file)
    base_data = base.to_dict()
    search = parse_search(data[SEARCH_KEY], base_data, base, file)
    return TuningConfig(file, base, base_data, search, data[SEARCH_KEY])


def check_search(cfg: Config, file: str | None = None) -> SearchSpace | None:
    """Validate the ``search:`` section a run config holds (``None`` without one).

    Training ignores the section but refuses a config whose section is invalid,
    as tuning does (``ConfigError`` naming the file and the key).
    """
    if cfg.search is None:
        return None
    base_data = cfg.to_dict()
    base_data.pop(SEARCH_KEY)
    return parse_search(cfg.search, base_data, cfg, file)


def _under(key: str, path: str) -> bool:
    return key == path or key.startswith((f"{path}.", f"{path}["))


def _set_path(data: dict[str, Any], path: str, value: Any) -> None:
    node: Any = data
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = copy.deepcopy(value)


_MISSING: Final = object()


def _resolve_path(
    base: Mapping[str, Any], path: str, cfg: Config, where: str, file: str | None
) -> Any:
    """The base value at ``path`` (``_MISSING`` for an accepted hyperparameter not set)."""
    parts = path.split(".")
    if not path or any(not p.strip() for p in parts):
        raise ConfigError(
            file, where, "must be a dotted key path such as algorithm.hyperparameters.gamma"
        )
    node: Any = base
    for i, part in enumerate(parts):
        here = ".".join(parts[:i])
        if not isinstance(node, Mapping):
            raise ConfigError(
                file, where, f"unknown config key {path!r}: {here} is not a section ({node!r})"
            )
        if part not in node:
            if here == "algorithm.hyperparameters" and i == len(parts) - 1:
                accepted = hyperparameters_of(cfg.algorithm.spec)
                if part in accepted:
                    return _MISSING
                raise ConfigError(
                    file,
                    where,
                    f"unknown hyperparameter {part!r} for {cfg.algorithm.name}; "
                    f"known: {sorted(accepted)}",
                )
            known = sorted(str(k) for k in node)
            raise ConfigError(
                file, where, f"unknown config key {'.'.join(parts[: i + 1])!r}; known here: {known}"
            )
        node = node[part]
    return node


def _number(value: Any, where: str, file: str | None, *, integer: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = "an int" if integer else "a number"
        raise ConfigError(file, where, f"must be {kind}, got {value!r} ({type(value).__name__})")
    if integer and not float(value).is_integer():
        raise ConfigError(file, where, f"must be an int, got {value!r}")
    if not math.isfinite(value):
        raise ConfigError(file, where, f"must be finite, got {value!r}")
    return int(value) if integer else float(value)


def _check_keys(
    spec: Mapping[str, Any], allowed: Sequence[str], where: str, file: str | None
) -> None:
    for key in spec:
        if key not in allowed:
            raise ConfigError(
                file, f"{where}.{key}", f"unknown key; known keys here: {list(allowed)}"
            )


def _mapping(value: Any, where: str, file: str | None) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(file, where, f"must be a mapping, got {value!r}")
    return value


def _parse_param(path: str, spec: Any, where: str, file: str | None) -> ParamSpec:
    if not isinstance(spec, Mapping):
        raise ConfigError(
            file,
            where,
            f"must be a mapping such as {{distribution: float, low: ..., high: ...}}, got {spec!r}",
        )
    dist = spec.get("distribution")
    if dist is None:
        raise ConfigError(
            file, f"{where}.distribution", f"required key is missing; one of {list(DISTRIBUTIONS)}"
        )
    if dist not in DISTRIBUTIONS:
        raise ConfigError(
            file, f"{where}.distribution", f"must be one of {list(DISTRIBUTIONS)}, got {dist!r}"
        )
    _check_keys(spec, PARAM_KEYS[dist], where, file)
    if dist == "categorical":
        choices = spec.get("choices")
        if not isinstance(choices, list) or len(choices) < 2:
            raise ConfigError(
                file, f"{where}.choices", f"must be a list of at least 2 values, got {choices!r}"
            )
        texts = [json.dumps(c, sort_keys=True) for c in choices]
        for i, text in enumerate(texts):
            if text in texts[:i]:
                raise ConfigError(file, f"{where}.choices[{i}]", f"duplicate choice {choices[i]!r}")
        return ParamSpec(path, dist, choices=tuple(choices))
    integer = dist == "int"
    for key in ("low", "high"):
        if key not in spec:
            raise ConfigError(file, f"{where}.{key}", "required key is missing")
    low = _number(spec["low"], f"{where}.low", file, integer=integer)
    high = _number(spec["high"], f"{where}.high", file, integer=integer)
    if not low < high:
        raise ConfigError(
            file,
            f"{where}.high",
            f"must be above low ({low!r}), got {high!r} "
            "(a fixed value belongs in the config itself)",
        )
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise ConfigError(file, f"{where}.log", f"must be true or false, got {log!r}")
    if log and low <= 0:
        raise ConfigError(file, f"{where}.low", f"must be > 0 with log: true, got {low!r}")
    step = spec.get("step")
    if step is not None:
        step = _number(step, f"{where}.step", file, integer=integer)
        if step <= 0:
            raise ConfigError(file, f"{where}.step", f"must be > 0, got {step!r}")
        if log:
            raise ConfigError(file, f"{where}.step", "cannot be combined with log: true")
        if step > high - low:
            raise ConfigError(file, f"{where}.step", f"{step!r} is larger than high - low")
    return ParamSpec(path, dist, low=low, high=high, log=log, step=step)


def _probe_values(p: ParamSpec) -> list[tuple[str, Any]]:
    if p.distribution == "categorical":
        return [(f"choices[{i}]", c) for i, c in enumerate(p.choices)]
    assert p.low is not None and p.high is not None
    probes: list[tuple[str, Any]] = [("low", p.low), ("high", p.high)]
    if p.distribution == "float" and p.step is None:
        if p.log:
            inner = math.exp(
                math.log(p.low) + INTERIOR_PROBE * (math.log(p.high) - math.log(p.low))
            )
        else:
            inner = p.low + INTERIOR_PROBE * (p.high - p.low)
        probes.append(("a value between low and high", inner))
    return probes


def parse_search(
    raw: Any, base_data: Mapping[str, Any], base: Config, file: str | None = None
) -> SearchSpace:
    """Validate a ``search:`` section against the base config (``ConfigError`` naming the key).

    Each parameter's key path must exist in the config (or be a hyperparameter
    its algorithm accepts); its bounds/choices must be well formed, and each
    bound, each choice and a value inside a float range must give a valid config
    when set alone on the base config. An error that only concerns *another
    searched* key (e.g. ``batch_size`` must divide ``n_steps * n_envs`` when both
    are searched) is left to sampling time: such a combination fails its trial
    (``FAIL``, not counted), with the reason.
    """
    search = _mapping(raw, SEARCH_KEY, file)
    if not search:
        raise ConfigError(file, SEARCH_KEY, "must name the parameters to search")
    _check_keys(search, SEARCH_KEYS, SEARCH_KEY, file)
    sampler = _parse_sampler(search.get("sampler"), file)
    pruner = _parse_pruner(search.get("pruner"), file)
    where = f"{SEARCH_KEY}.parameters"
    params_raw = _mapping(search.get("parameters"), where, file)
    if not params_raw:
        raise ConfigError(file, where, "required: at least one parameter to search")
    params: list[ParamSpec] = []
    for path, spec in params_raw.items():
        pwhere = f"{where}[{path}]"
        if not isinstance(path, str):
            raise ConfigError(file, pwhere, "must be a dotted key path (a string)")
        base_value = _resolve_path(base_data, path, base, pwhere, file)
        p = _parse_param(path, spec, pwhere, file)
        if (
            p.distribution == "float"
            and isinstance(base_value, int)
            and not isinstance(base_value, bool)
        ):
            raise ConfigError(
                file, f"{pwhere}.distribution", f"{path} is an int setting: use distribution: int"
            )
        params.append(p)
    for i, p in enumerate(params):
        if any(_under(p.path, q.path) or _under(q.path, p.path) for q in params[:i]):
            raise ConfigError(file, f"{where}[{p.path}]", "overlaps another searched key path")
    searched = [p.path for p in params]
    for p in params:
        for label, value in _probe_values(p):
            _check_value(base_data, p, label, value, searched, file)
    return SearchSpace(tuple(params), sampler, pruner)


def _check_value(
    base_data: Mapping[str, Any],
    p: ParamSpec,
    label: str,
    value: Any,
    searched: Sequence[str],
    file: str | None,
) -> None:
    data = copy.deepcopy(dict(base_data))
    _set_path(data, p.path, value)
    try:
        config_from_dict(data, file)
    except ConfigError as exc:
        own = _under(exc.key, p.path)
        joint = not own and any(_under(exc.key, q) for q in searched)
        if not joint:
            suffix = f".{label}" if not label.startswith("a value") else ""
            raise ConfigError(
                file,
                f"{SEARCH_KEY}.parameters[{p.path}]{suffix}",
                f"{label} {value!r} gives an invalid config: {exc.key}: {exc.reason}",
            ) from None


def _int_option(
    spec: Mapping[str, Any], key: str, default: int, where: str, file: str | None, low: int
) -> int:
    if key not in spec:
        return default
    value = int(_number(spec[key], f"{where}.{key}", file, integer=True))
    if value < low:
        raise ConfigError(file, f"{where}.{key}", f"must be >= {low}, got {value}")
    return value


def _parse_sampler(raw: Any, file: str | None) -> SamplerSpec:
    where = f"{SEARCH_KEY}.sampler"
    spec = _mapping(raw, where, file)
    _check_keys(spec, SAMPLER_KEYS, where, file)
    kind = spec.get("kind", "tpe")
    if kind not in SAMPLER_KINDS:
        raise ConfigError(
            file, f"{where}.kind", f"must be one of {list(SAMPLER_KINDS)}, got {kind!r}"
        )
    seed = spec.get("seed")
    if seed is not None:
        seed = _int_option(spec, "seed", 0, where, file, 0)
    startup = _int_option(spec, "n_startup_trials", DEFAULT_TPE_STARTUP, where, file, 0)
    return SamplerSpec(kind, seed, startup)


def _parse_pruner(raw: Any, file: str | None) -> PrunerSpec:
    where = f"{SEARCH_KEY}.pruner"
    spec = _mapping(raw, where, file)
    kind = spec.get("kind", "median")
    if kind not in PRUNER_KINDS:
        raise ConfigError(
            file, f"{where}.kind", f"must be one of {list(PRUNER_KINDS)}, got {kind!r}"
        )
    _check_keys(spec, PRUNER_KEYS[kind], where, file)
    startup = _int_option(spec, "n_startup_trials", DEFAULT_PRUNER_STARTUP, where, file, 0)
    warmup = _int_option(spec, "n_warmup_steps", DEFAULT_WARMUP_STEPS, where, file, 0)
    factor = _int_option(spec, "reduction_factor", DEFAULT_REDUCTION_FACTOR, where, file, 2)
    min_resource: int | str = spec.get("min_resource", "auto")
    if min_resource != "auto":
        min_resource = _int_option(spec, "min_resource", 1, where, file, 1)
    lower = 0.0
    if kind == "threshold":
        if "lower" not in spec:
            raise ConfigError(file, f"{where}.lower", "required key is missing (a win rate)")
        lower = _number(spec["lower"], f"{where}.lower", file, integer=False)
        if not 0.0 <= lower <= 1.0:
            raise ConfigError(file, f"{where}.lower", f"a win rate between 0 and 1, got {lower!r}")
    return PrunerSpec(kind, startup, warmup, min_resource, factor, lower)
