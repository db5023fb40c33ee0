"""Hyperparameter search with Optuna: the ``search:`` section, the objective, workers, reports.

A tuning config is an ordinary run config (:mod:`agents.config`) plus a
``search:`` section naming the settings to search and how (``docs/tuning.md``)::

    search:
      sampler: {kind: tpe, seed: null, n_startup_trials: 5}
      pruner: {kind: median, n_startup_trials: 5, n_warmup_steps: 1}
      parameters:
        algorithm.hyperparameters.learning_rate: {distribution: float, low: 1.0e-5, high: 1.0e-3, log: true}
        algorithm.hyperparameters.n_epochs: {distribution: int, low: 2, high: 10}
        policy.net_arch: {distribution: categorical, choices: [[64, 64], [128, 128]]}

:func:`load_tuning_config` splits ``search:`` off, validates the rest with
:func:`agents.config.config_from_dict` and the search space with
:func:`parse_search`: every problem is a :class:`~agents.config.ConfigError`
naming the file and the key (``search.parameters[PATH].low``...).

**Objective.** A trial samples the parameters into the base config, trains it
(:func:`agents.training.train`) into ``OUT/trials/trial-NNNN`` (kept: config,
models, evaluations, curve) and returns the win rate of the *final* evaluation
on the config's fixed evaluation deals (``evaluation:``), played on the plain
real game: shaping and curriculum never apply to it. Every periodic evaluation
is reported to Optuna as an intermediate value (step = timesteps); when the
pruner says so, training stops at once, the trial is recorded ``PRUNED`` and its
run directory is kept (``meta.json`` status ``pruned``).

**Exactly N trials.** ``--trials N`` asks for N *finished* (complete or pruned)
trials in the study, whatever the number of workers and machines. Before each
trial a worker counts the study's finished and running trials and starts one
only below N (it waits while the last running trials may still fail, and
leaves once N are finished). Optuna numbers trials under a row lock on the
study, so after its trial is created a worker checks that fewer than N counted
trials precede it; the rare loser of a race is recorded ``FAIL`` with the user
attribute ``surplus`` before any training, and never counted. Crashed workers'
trials are failed by Optuna's heartbeat (:data:`HEARTBEAT_SECONDS`).

**Resuming.** Optuna commits each trial to the storage as it ends, so Ctrl-C
loses no finished trial: the running trials save a checkpoint in their run
directory and are recorded ``FAIL``. Rerunning the same command loads the study
(the config and search space must be the same: a fingerprint is stored with the
study) and runs only the trials still missing to reach N.

**Outputs** (under ``OUT``): ``study.db`` (default storage), ``trials/``,
``summary.csv``, ``summary.md``, ``summary.png`` (win rate per trial, parameter
importances), ``best_config.yaml`` (ready to train: ``scripts/train.py
--config OUT/best_config.yaml``) and ``best_trial.json``.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import io
import json
import math
import multiprocessing
import os
import re
import socket
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import yaml
from stable_baselines3.common.callbacks import BaseCallback

from agents.config import (
    Config,
    ConfigError,
    config_from_dict,
    dump_config,
    hyperparameters_of,
)
from agents.training import (
    META_FILE,
    RunDir,
    TrainingError,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    train,
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

HEARTBEAT_SECONDS: Final = 30
GRACE_SECONDS: Final = 120
"""A RUNNING trial without a heartbeat for this long is failed (its worker died)."""
SQLITE_TIMEOUT_SECONDS: Final = 60
POLL_SECONDS: Final = 2.0
MAX_CONSECUTIVE_FAILURES: Final = 3
FINGERPRINT_ATTR: Final = "coldiron_fingerprint"
SEARCH_ATTR: Final = "coldiron_search"
SURPLUS_ATTR: Final = "surplus"
ERROR_ATTR: Final = "error"

DB_FILE: Final = "study.db"
TRIALS_DIR: Final = "trials"
SUMMARY_CSV: Final = "summary.csv"
SUMMARY_MD: Final = "summary.md"
SUMMARY_PNG: Final = "summary.png"
BEST_CONFIG: Final = "best_config.yaml"
BEST_JSON: Final = "best_trial.json"
EXIT_INTERRUPTED: Final = 130

_SCALAR_CHOICE = (type(None), bool, int, float, str)


class TuneError(RuntimeError):
    """A search that cannot start or continue (study mismatch, worker failure...)."""


class SurplusTrial(Exception):  # noqa: N818 (an outcome, not a bug)
    """The study already had N counted trials when this one was created."""


class InvalidSample(Exception):  # noqa: N818
    """The sampled combination of parameters is not a valid config."""


# ---------------------------------------------------------------- YAML
class _Loader(yaml.SafeLoader):
    """SafeLoader reading ``3e-4`` as a float, like :mod:`agents.config`'s loader."""


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


def _read_yaml(path: str | Path) -> Any:
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(file, "<file>", f"cannot read the file: {exc.strerror or exc}") from None
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        raise ConfigError(file, "<file>", f"invalid YAML: {exc}") from None


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

    def build(self, worker: int = 0) -> optuna.samplers.BaseSampler:
        """The sampler of worker ``worker`` (a seed is offset per worker: no twin samples)."""
        import optuna

        seed = None if self.seed is None else self.seed + worker
        if self.kind == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            # constant_liar: running trials count as bad guesses, so parallel
            # workers do not all sample the same promising point.
            return optuna.samplers.TPESampler(
                seed=seed, n_startup_trials=self.n_startup_trials, constant_liar=True
            )


@dataclass(frozen=True)
class PrunerSpec:
    kind: str = "median"
    n_startup_trials: int = DEFAULT_PRUNER_STARTUP
    n_warmup_steps: int = DEFAULT_WARMUP_STEPS
    min_resource: int | str = "auto"
    reduction_factor: int = DEFAULT_REDUCTION_FACTOR
    lower: float = 0.0

    def build(self) -> optuna.pruners.BasePruner:
        import optuna

        if self.kind == "median":
            return optuna.pruners.MedianPruner(
                n_startup_trials=self.n_startup_trials, n_warmup_steps=self.n_warmup_steps
            )
        if self.kind == "successive_halving":
            return optuna.pruners.SuccessiveHalvingPruner(
                min_resource=self.min_resource, reduction_factor=self.reduction_factor
            )
        if self.kind == "threshold":
            return optuna.pruners.ThresholdPruner(
                lower=self.lower, n_warmup_steps=self.n_warmup_steps
            )
        return optuna.pruners.NopPruner()


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
                raise TuneError(f"parameter {path!r} is not in the search space of {self.file}")
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
    data = _read_yaml(path)
    if not isinstance(data, Mapping):
        raise ConfigError(file, "<root>", f"must be a mapping, got {type(data).__name__}")
    rest = {k: v for k, v in data.items() if k != SEARCH_KEY}
    if SEARCH_KEY not in data:
        raise ConfigError(
            file, SEARCH_KEY, "required for tuning: the settings to search (docs/tuning.md)"
        )
    base = config_from_dict(copy.deepcopy(rest), file)
    base_data = base.to_dict()
    base_data.pop(SEARCH_KEY, None)  # when agents.config knows the section itself
    search = parse_search(data[SEARCH_KEY], base_data, base, file)
    return TuningConfig(file, base, base_data, search, data[SEARCH_KEY])


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
    return PrunerSpec(kind, startup, warmup, min_resource, factor, lower)


# ---------------------------------------------------------------- storage
def default_storage_url(out: Path) -> str:
    return f"sqlite:///{(out / DB_FILE).resolve()}"


def redact(url: str) -> str:
    """``url`` with any password hidden (for logs and reports)."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 (a malformed URL is reported by the storage itself)
        return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)


def make_storage(url: str) -> optuna.storages.RDBStorage:
    """An RDB storage for any SQLAlchemy URL, with heartbeats (dead workers' trials fail).

    SQLite gets a long lock timeout: several processes write the same file.
    """
    import optuna

    engine_kwargs: dict[str, Any]
    if url.startswith("sqlite"):
        engine_kwargs = {"connect_args": {"timeout": SQLITE_TIMEOUT_SECONDS}}
    else:
        engine_kwargs = {"pool_pre_ping": True}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        try:
            return optuna.storages.RDBStorage(
                url,
                engine_kwargs=engine_kwargs,
                heartbeat_interval=HEARTBEAT_SECONDS,
                grace_period=GRACE_SECONDS,
            )
        except (ImportError, ModuleNotFoundError) as exc:
            raise TuneError(
                f"storage {redact(url)}: missing database driver ({exc}); for PostgreSQL "
                "install psycopg2-binary"
            ) from None
        except Exception as exc:
            raise TuneError(f"storage {redact(url)}: cannot open it: {exc}") from None


# ---------------------------------------------------------------- counting trials
def _states() -> tuple[Any, Any, Any, Any]:
    from optuna.trial import TrialState

    return TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING


def count_finished(study: optuna.Study) -> int:
    """Complete + pruned trials: what ``--trials N`` counts."""
    complete, pruned, _, _ = _states()
    return len(study.get_trials(deepcopy=False, states=(complete, pruned)))


def _census(study: optuna.Study) -> tuple[int, int]:
    """(finished, finished + running/waiting) trials of the study."""
    complete, pruned, running, waiting = _states()
    trials = study.get_trials(deepcopy=False, states=(complete, pruned, running, waiting))
    finished = sum(t.state in (complete, pruned) for t in trials)
    return finished, len(trials)


def _fail_stale(study: optuna.Study) -> None:
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


# ---------------------------------------------------------------- pruning callback
class PruningCallback(BaseCallback):
    """Reports each periodic evaluation to the trial and stops training when it is pruned.

    Placed after the trainer's ``RunCallback`` (in ``extra_callbacks``), it reads
    the evaluation that callback has just written (``evaluations.json`` of the
    run directory) at the same evaluation schedule; training stops by returning
    ``False`` so the trainer still saves the model, a checkpoint and ``meta.json``.
    """

    def __init__(self, trial: optuna.trial.BaseTrial, run: RunDir, eval_freq: int) -> None:
        super().__init__(verbose=0)
        self.trial = trial
        self.run = run
        self.eval_freq = eval_freq
        self.reported_step = -1
        self.pruned_at: int | None = None
        self._next = 0

    def _on_training_start(self) -> None:
        n = self.model.num_timesteps
        self._next = (n // self.eval_freq + 1) * self.eval_freq
        self.report_new()

    def _on_step(self) -> bool:
        if self.pruned_at is None:
            n = self.model.num_timesteps
            if n >= self._next:
                self._next = (n // self.eval_freq + 1) * self.eval_freq
                self.report_new()
        return self.pruned_at is None

    def report_new(self) -> None:
        """Report the evaluations not reported yet; ask the pruner."""
        for record in self.run.load_history():
            step = int(record["timesteps"])
            if step > self.reported_step:
                self.trial.report(float(record["win_rate"]), step)
                self.reported_step = step
                if self.pruned_at is None and self.trial.should_prune():
                    self.pruned_at = step


# ---------------------------------------------------------------- the objective
@dataclass
class Objective:
    """One trial: claim a slot, sample, train into ``trials/trial-NNNN``, return the win rate."""

    tcfg: TuningConfig
    out: Path
    n_trials: int
    worker: int = 0
    log: Callable[[str], None] = print

    def run_dir(self, number: int) -> Path:
        return self.out / TRIALS_DIR / f"trial-{number:04d}"

    def __call__(self, trial: optuna.Trial) -> float:
        import optuna

        complete, pruned, running, waiting = _states()
        ahead = [
            t
            for t in trial.study.get_trials(
                deepcopy=False, states=(complete, pruned, running, waiting)
            )
            if t.number < trial.number
        ]
        if len(ahead) >= self.n_trials:
            trial.set_user_attr(SURPLUS_ATTR, True)
            raise SurplusTrial(
                f"trial {trial.number}: {len(ahead)} trials were already finished or running "
                f"(target {self.n_trials}); discarded before training"
            )
        params = {p.path: p.suggest(trial) for p in self.tcfg.search.parameters}
        raw = dict(trial.params)
        try:
            cfg = self.tcfg.trial_config(raw)
        except InvalidSample as exc:
            trial.set_user_attr(ERROR_ATTR, str(exc))
            raise
        cfg.training.progress_bar = False
        run = RunDir(self.run_dir(trial.number))
        trial.set_user_attr("run_dir", str(run.root.resolve()))
        trial.set_user_attr("host", socket.gethostname())
        shown = ", ".join(f"{k}={v!r}" for k, v in params.items())
        self.log(f"[worker {self.worker}] trial {trial.number}: {shown} -> {run.root}")
        callback = PruningCallback(trial, run, cfg.evaluation.freq)
        try:
            result = train(
                cfg,
                run.root,
                config_file=self.tcfg.file,
                extra_callbacks=[callback],
                log=self.log,
            )
        except TrainingError as exc:
            trial.set_user_attr(ERROR_ATTR, str(exc))
            raise
        if result.interrupted:
            raise KeyboardInterrupt
        history = result.history
        trial.set_user_attr("timesteps", result.timesteps)
        trial.set_user_attr("wall_seconds", round(result.wall_seconds, 1))
        if history:
            last = history[-1]
            for key in ("episodes", "wins", "ci_low", "ci_high"):
                trial.set_user_attr(key, last[key])
        if callback.pruned_at is not None:
            _mark_pruned(run, callback.pruned_at)
            trial.set_user_attr("pruned_at", callback.pruned_at)
            raise optuna.TrialPruned(
                f"win rate below the pruner's bar at {callback.pruned_at} timesteps"
            )
        if not history:
            raise TrainingError(f"{run.root}: training ended without an evaluation")
        return float(history[-1]["win_rate"])


def _mark_pruned(run: RunDir, step: int) -> None:
    meta_path = run.root / META_FILE
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    meta.update(status="pruned", pruned_at=step)
    atomic_write_json(meta_path, meta)


# ---------------------------------------------------------------- study and workers
def open_study(
    tcfg: TuningConfig, storage_url: str, study_name: str, worker: int = 0
) -> tuple[optuna.Study, bool]:
    """Load or create the study; ``(study, created)``. A study of another config is refused."""
    import optuna

    storage = make_storage(storage_url)
    sampler = tcfg.search.sampler.build(worker)
    pruner = tcfg.search.pruner.build()
    created = False
    try:
        study = optuna.load_study(
            study_name=study_name, storage=storage, sampler=sampler, pruner=pruner
        )
    except KeyError:
        study = optuna.create_study(
            study_name=study_name,
            storage=storage,
            sampler=sampler,
            pruner=pruner,
            direction="maximize",
            load_if_exists=True,
        )
        created = True
    fingerprint = tcfg.fingerprint()
    stored = study.user_attrs.get(FINGERPRINT_ATTR)
    if stored is None:
        study.set_user_attr(FINGERPRINT_ATTR, fingerprint)
        study.set_user_attr(SEARCH_ATTR, tcfg.search.to_dict())
        study.set_user_attr("config_name", tcfg.name)
    elif stored != fingerprint:
        raise TuneError(
            f"study {study_name!r} in {redact(storage_url)} was made with another config or "
            f"search space (fingerprint {stored}, {tcfg.file} gives {fingerprint}); "
            "use --study NEW_NAME (or restore the config)"
        )
    if study.direction != optuna.study.StudyDirection.MAXIMIZE:
        raise TuneError(f"study {study_name!r} does not maximise: not a win-rate study")
    return study, created


def run_worker(
    config_file: str,
    storage_url: str,
    study_name: str,
    n_trials: int,
    out: Path,
    worker: int = 0,
    log: Callable[[str], None] = print,
) -> int:
    """Run trials until the study has ``n_trials`` finished ones; returns how many this ran."""
    tcfg = load_tuning_config(config_file)
    study, _ = open_study(tcfg, storage_url, study_name, worker)
    objective = Objective(tcfg, out, n_trials, worker, log)
    done: list[Any] = []
    ran = 0
    failures = 0
    complete, pruned, _, _ = _states()
    while True:
        finished, active = _census(study)
        if finished >= n_trials:
            return ran
        if active >= n_trials:  # the last trials run elsewhere: they may still fail
            _fail_stale(study)
            time.sleep(POLL_SECONDS)
            continue
        done.clear()
        study.optimize(
            objective,
            n_trials=1,
            catch=(SurplusTrial, InvalidSample, TrainingError, ValueError, RuntimeError),
            callbacks=[lambda _s, t: done.append(t)],
            gc_after_trial=True,
        )
        trial = done[-1] if done else None
        if trial is None or trial.state in (complete, pruned):
            ran += trial is not None
            failures = 0
        elif not trial.user_attrs.get(SURPLUS_ATTR):
            failures += 1
            log(
                f"[worker {worker}] trial {trial.number} failed: {trial.user_attrs.get(ERROR_ATTR, '')}"
            )
            if failures >= MAX_CONSECUTIVE_FAILURES:
                raise TuneError(
                    f"{failures} trials failed in a row in worker {worker} (last: trial "
                    f"{trial.number}); see the log above"
                )


def _worker_entry(
    config_file: str, storage_url: str, study_name: str, n_trials: int, out: str, worker: int
) -> None:
    """Process target of a local worker (``--workers K``)."""
    try:
        run_worker(config_file, storage_url, study_name, n_trials, Path(out), worker)
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    except (TuneError, ConfigError) as exc:
        print(f"[worker {worker}] error: {exc}", file=sys.stderr, flush=True)
        sys.exit(2)
    except BaseException:
        traceback.print_exc()
        sys.exit(1)


@dataclass
class TuneResult:
    study_name: str
    storage: str
    out: Path
    finished: int
    interrupted: bool
    best_number: int | None
    best_value: float | None
    best_params: dict[str, Any]
    files: dict[str, Path]


def tune(
    config_file: str | Path,
    n_trials: int,
    *,
    storage: str | None = None,
    study_name: str | None = None,
    workers: int = 1,
    out: Path | None = None,
    log: Callable[[str], None] = print,
) -> TuneResult:
    """Run (or continue) the search of ``config_file`` until ``n_trials`` trials are finished.

    ``workers`` local processes share the storage (``workers == 1``: in this
    process). Other machines join by running the same call against the same
    ``storage`` URL. Reports are written at the end, also after Ctrl-C.
    """
    if n_trials < 1:
        raise ValueError(f"--trials must be >= 1, got {n_trials}")
    if workers < 1:
        raise ValueError(f"--workers must be >= 1, got {workers}")
    file = str(config_file)
    tcfg = load_tuning_config(file)
    name = study_name or tcfg.name
    out = out if out is not None else Path("runs") / f"tune-{name}"
    out.mkdir(parents=True, exist_ok=True)
    url = storage or default_storage_url(out)
    study, created = open_study(tcfg, url, name)
    trials_dir = out / TRIALS_DIR
    if created and trials_dir.is_dir() and any(trials_dir.iterdir()):
        raise TuneError(
            f"{trials_dir}: holds trial directories of another study, but study {name!r} is new "
            f"in {redact(url)}; use another --out (or the storage those trials belong to)"
        )
    before = count_finished(study)
    log(
        f"study {name!r} in {redact(url)}: {before} finished trial(s), target {n_trials}, "
        f"{workers} worker(s), trial runs in {trials_dir}"
    )
    interrupted = False
    if before < n_trials:
        try:
            if workers == 1:
                run_worker(file, url, name, n_trials, out, 0, log)
            else:
                _run_processes(file, url, name, n_trials, out, workers, log)
        except KeyboardInterrupt:
            interrupted = True
            log(
                "interrupted: finished trials are saved in the study; rerun the command to continue"
            )
    study, _ = open_study(tcfg, url, name)
    files = write_reports(study, tcfg, out, url, log)
    best = _best(study)
    return TuneResult(
        name,
        url,
        out,
        count_finished(study),
        interrupted,
        best.number if best else None,
        best.value if best else None,
        dict(best.params) if best else {},
        files,
    )


def _run_processes(
    file: str,
    url: str,
    name: str,
    n_trials: int,
    out: Path,
    workers: int,
    log: Callable[[str], None],
) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(
            target=_worker_entry,
            args=(file, url, name, n_trials, str(out), i),
            name=f"tune-worker-{i}",
        )
        for i in range(workers)
    ]
    for p in procs:
        p.start()
    interrupted = False
    try:
        for p in procs:
            p.join()
    except KeyboardInterrupt:  # the workers got SIGINT too: let them save and leave
        interrupted = True
        for p in procs:
            p.join()
    codes = [p.exitcode for p in procs]
    if interrupted or any(c == EXIT_INTERRUPTED for c in codes):
        raise KeyboardInterrupt
    bad = [(i, c) for i, c in enumerate(codes) if c != 0]
    if bad:
        raise TuneError(f"worker(s) failed (index, exit code): {bad}; see the log above")
    log(f"{workers} workers done")


# ---------------------------------------------------------------- reports
def _best(study: optuna.Study) -> optuna.trial.FrozenTrial | None:
    try:
        return study.best_trial
    except ValueError:  # no complete trial
        return None


def _last_intermediate(trial: optuna.trial.FrozenTrial) -> tuple[int | None, float | None]:
    if not trial.intermediate_values:
        return None, None
    step = max(trial.intermediate_values)
    return step, trial.intermediate_values[step]


def summary_rows(study: optuna.Study, tcfg: TuningConfig) -> list[dict[str, Any]]:
    """One row per trial: state, win rate (pruned: last evaluation), interval, parameters."""
    specs = tcfg.search.by_path()
    rows = []
    for t in study.get_trials(deepcopy=False):
        step, inter = _last_intermediate(t)
        value = t.value if t.value is not None else inter
        row: dict[str, Any] = {
            "trial": t.number,
            "state": t.state.name.lower()
            + (" (surplus)" if t.user_attrs.get(SURPLUS_ATTR) else ""),
            "win_rate": value,
            "ci_low": t.user_attrs.get("ci_low"),
            "ci_high": t.user_attrs.get("ci_high"),
            "timesteps": t.user_attrs.get("timesteps", step),
            "seconds": (
                round((t.datetime_complete - t.datetime_start).total_seconds(), 1)
                if t.datetime_complete and t.datetime_start
                else None
            ),
        }
        for path, spec in specs.items():
            row[path] = spec.decode(t.params[path]) if path in t.params else None
        row["host"] = t.user_attrs.get("host")
        row["run_dir"] = t.user_attrs.get("run_dir")
        rows.append(row)
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def format_summary(rows: Sequence[Mapping[str, Any]]) -> str:
    """A markdown table of ``rows`` (win rates in %)."""
    if not rows:
        return "(no trials)"
    headers = [k for k in rows[0] if k != "run_dir"]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        cells = []
        for h in headers:
            v = row[h]
            if h in ("win_rate", "ci_low", "ci_high") and v is not None:
                cells.append(f"{100 * v:.2f}%")
            else:
                cells.append(_cell(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _importances(study: optuna.Study) -> tuple[dict[str, float], str | None]:
    """Parameter importances, or ``({}, reason)`` when they cannot be computed."""
    import optuna

    complete, _, _, _ = _states()
    done = study.get_trials(deepcopy=False, states=(complete,))
    if len(done) < 2:
        return {}, f"importances need >= 2 completed trials ({len(done)} so far)"
    if len({t.value for t in done}) < 2:
        return {}, "all completed trials have the same win rate: no importance to measure"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return dict(optuna.importance.get_param_importances(study)), None
    except (RuntimeError, ValueError, ZeroDivisionError) as exc:
        return {}, f"importances not computed: {exc}"


def plot_study(study: optuna.Study, path: Path, title: str) -> str | None:
    """PNG: win rate per trial (complete / pruned) and parameter importances.

    Returns the reason importances are missing, if they are.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    complete, pruned, _, _ = _states()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.5))
    try:
        for state, marker, label in (
            (complete, "o", "complete"),
            (pruned, "x", "pruned (last eval)"),
        ):
            xs, ys, lo, hi = [], [], [], []
            for t in study.get_trials(deepcopy=False, states=(state,)):
                _, inter = _last_intermediate(t)
                v = t.value if t.value is not None else inter
                if v is None:
                    continue
                xs.append(t.number)
                ys.append(100 * v)
                lo.append(100 * (v - t.user_attrs.get("ci_low", v)))
                hi.append(100 * (t.user_attrs.get("ci_high", v) - v))
            if xs:
                ax.errorbar(xs, ys, yerr=[lo, hi], fmt=marker, capsize=3, label=label)
        best = _best(study)
        if best is not None and best.value is not None:
            ax.axhline(
                100 * best.value, ls="--", lw=1, color="grey", label=f"best: trial {best.number}"
            )
        ax.set_xlabel("trial")
        ax.set_ylabel("evaluation win rate (%)")
        ax.set_title(f"{title}: win rate per trial (95% Wilson)")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", fontsize=8)
        importances, reason = _importances(study)
        if importances:
            names = list(importances)[::-1]
            bx.barh(names, [importances[n] for n in names], color="#4C72B0")
            bx.set_xlabel("importance (PED-ANOVA, normalised)")
            bx.tick_params(axis="y", labelsize=8)
        else:
            bx.text(0.5, 0.5, reason or "", ha="center", va="center", wrap=True, fontsize=9)
            bx.set_xticks([])
            bx.set_yticks([])
        bx.set_title("parameter importances")
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100)
    finally:
        plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return reason


def export_best(
    study: optuna.Study, tcfg: TuningConfig, path: Path
) -> optuna.trial.FrozenTrial | None:
    """Write the best complete trial's config (``search:`` dropped) as ready-to-train YAML."""
    best = _best(study)
    if best is None:
        return None
    cfg = config_from_dict(tcfg.trial_data(best.params), tcfg.file)  # validated again
    header = (
        f"# Best trial {best.number} of study {study.study_name!r} (win rate {best.value:.4f} on "
        f"{best.user_attrs.get('episodes', '?')} fixed deals), from {tcfg.file}.\n"
        f"# Train it with: python scripts/train.py --config {path}\n"
    )
    atomic_write_text(path, header + dump_config(cfg))
    return best


def write_reports(
    study: optuna.Study, tcfg: TuningConfig, out: Path, url: str, log: Callable[[str], None] = print
) -> dict[str, Path]:
    """summary.csv / .md / .png, best_config.yaml and best_trial.json; prints the table."""
    rows = summary_rows(study, tcfg)
    files = {"csv": out / SUMMARY_CSV, "md": out / SUMMARY_MD, "png": out / SUMMARY_PNG}
    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({k: _cell(v) for k, v in r.items()} for r in rows)
    atomic_write_text(files["csv"], buf.getvalue())
    table = format_summary(rows)
    best = export_best(study, tcfg, out / BEST_CONFIG)
    finished = count_finished(study)
    head = [
        f"# Study {study.study_name}",
        "",
        f"- config: {tcfg.file}",
        f"- storage: {redact(url)}",
        f"- finished trials (complete + pruned): {finished}",
        "- objective: final evaluation win rate on the config's fixed evaluation deals",
    ]
    if best is not None:
        files["best_config"] = out / BEST_CONFIG
        files["best_json"] = out / BEST_JSON
        atomic_write_json(
            files["best_json"],
            {
                "study": study.study_name,
                "trial": best.number,
                "win_rate": best.value,
                "params": {p: tcfg.search.by_path()[p].decode(v) for p, v in best.params.items()},
                "user_attrs": best.user_attrs,
                "config": str(out / BEST_CONFIG),
            },
        )
        head.append(f"- best: trial {best.number}, win rate {100 * (best.value or 0):.2f}%")
    reason = plot_study(study, files["png"], study.study_name)
    if reason:
        head.append(f"- importances: {reason}")
    atomic_write_text(files["md"], "\n".join([*head, "", table, ""]))
    log(table)
    log("\n".join(head[2:]))
    log(f"reports: {', '.join(str(p) for p in files.values())}")
    return files
