"""The ``search:`` section of a tuning config: a pydantic schema (no Optuna import).

A tuning config is a run config plus a ``search:`` section naming the settings to search
and how (``docs/tuning.md``)::

    search:
      sampler: {kind: tpe, seed: null, n_startup_trials: 5}
      pruner: {kind: median, n_startup_trials: 5, n_warmup_steps: 1}
      parameters:
        algorithm.hyperparameters.learning_rate:
          {distribution: float, low: 1.0e-5, high: 1.0e-3, log: true}
        policy.net_arch: {distribution: categorical, choices: [[64, 64], [128, 128]]}

:class:`SearchSpace` is a tree of pydantic models like the run config's (closed, strict).
:func:`parse_search` also checks the section against the base config (each key path
exists, each bound and choice gives a valid config); every problem is a
:class:`~agents.learning.config.ConfigError` naming the file and the key
(``search.parameters[PATH].low``). A script training from a config that holds a ``search:``
section validates it with :func:`check_search`. The Optuna side is
:mod:`agents.learning.tuning`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, Union, get_args

from pydantic import BeforeValidator, Discriminator, Field, Tag, ValidationError, model_validator

from agents.learning.config import (
    Config,
    ConfigError,
    Count,
    Number,
    _Refusal,
    _Section,
    _tag,
    config_error,
    config_from_dict,
    hyperparameters_of,
    read_yaml,
)

if TYPE_CHECKING:
    import optuna

SEARCH_KEY: Final = "search"
DEFAULT_WARMUP_STEPS: Final = 1
"""Median/threshold pruning never acts on the initial evaluation (timestep 0)."""
INTERIOR_PROBE: Final = 0.382
"""Where inside a float range one extra value is validated (catches float-for-int)."""
_SCALAR_CHOICE: Final = (type(None), bool, int, float, str)


class InvalidSample(Exception):
    """The sampled combination of parameters is not a valid config."""


# ---------------------------------------------------------------- the schema
class FloatParam(_Section):
    """A range: ``low`` < ``high``, optional ``log: true`` (``low`` > 0) or ``step``."""

    distribution: Literal["float"]
    low: Number
    high: Number
    log: bool = False
    step: Number | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _well_formed(self) -> FloatParam:
        if not self.low < self.high:
            raise _Refusal(
                f"must be above low ({self.low!r}), got {self.high!r} (a fixed value "
                "belongs in the config itself)",
                "high",
            )
        if self.log and self.low <= 0:
            raise _Refusal(f"must be > 0 with log: true, got {self.low!r}", "low")
        if self.step is not None and self.log:
            raise _Refusal("cannot be combined with log: true", "step")
        if self.step is not None and self.step > self.high - self.low:
            raise _Refusal(f"{self.step!r} is larger than high - low", "step")
        return self

    def suggest(self, trial: optuna.trial.BaseTrial, name: str) -> Any:
        return trial.suggest_float(name, self.low, self.high, step=self.step, log=self.log)

    def decode(self, raw: Any) -> Any:
        return float(raw)


class IntParam(FloatParam):
    distribution: Literal["int"]  # type: ignore[assignment]
    low: Count
    high: Count
    step: Count | None = Field(default=None, gt=0)

    def suggest(self, trial: optuna.trial.BaseTrial, name: str) -> Any:
        return trial.suggest_int(name, self.low, self.high, step=self.step or 1, log=self.log)

    def decode(self, raw: Any) -> Any:
        return int(raw)


class CategoricalParam(_Section):
    """At least two distinct values; lists and mappings go to Optuna as their JSON text."""

    distribution: Literal["categorical"]
    choices: list[Any] = Field(min_length=2)

    @model_validator(mode="after")
    def _distinct(self) -> CategoricalParam:
        texts = [json.dumps(c, sort_keys=True) for c in self.choices]
        for i, text in enumerate(texts):
            if text in texts[:i]:
                raise _Refusal(f"duplicate choice {self.choices[i]!r}", "choices", i)
        return self

    @property
    def encoded(self) -> bool:
        return not all(isinstance(c, _SCALAR_CHOICE) for c in self.choices)

    def optuna_choices(self) -> list[Any]:
        return [json.dumps(c) for c in self.choices] if self.encoded else list(self.choices)

    def suggest(self, trial: optuna.trial.BaseTrial, name: str) -> Any:
        return self.decode(trial.suggest_categorical(name, self.optuna_choices()))

    def decode(self, raw: Any) -> Any:
        """The config value of Optuna's parameter value ``raw``."""
        return json.loads(raw) if self.encoded else raw


class SamplerSpec(_Section):
    kind: Literal["tpe", "random"] = "tpe"
    seed: Count | None = Field(default=None, ge=0)
    n_startup_trials: Count = Field(default=5, ge=0)


class MedianPruner(_Section):
    kind: Literal["median"] = "median"
    n_startup_trials: Count = Field(default=5, ge=0)
    n_warmup_steps: Count = Field(default=DEFAULT_WARMUP_STEPS, ge=0)


MinResource = Annotated[  # tagged: an error names the key, not the union's members
    Annotated[Literal["auto"], Tag(_tag("auto"))] | Annotated[Count, Field(ge=1), Tag(_tag("n"))],
    Discriminator(lambda value: _tag("auto" if value == "auto" else "n")),
]


class SuccessiveHalvingPruner(_Section):
    kind: Literal["successive_halving"]
    min_resource: MinResource = "auto"
    reduction_factor: Count = Field(default=3, ge=2)


class ThresholdPruner(_Section):
    kind: Literal["threshold"]
    lower: Number = Field(ge=0.0, le=1.0)
    """A win rate: trials below it are pruned."""
    n_warmup_steps: Count = Field(default=DEFAULT_WARMUP_STEPS, ge=0)


class NopPruner(_Section):
    kind: Literal["none"]


def _union(field: str, *members: type[_Section], default: str | None = None) -> Any:
    """A pydantic union of ``members`` told apart by ``field`` (a Literal each); a missing
    or unknown ``field`` is refused at that key, naming the known values (pydantic would
    report it at the union); ``default`` fills a missing one."""
    kinds = [get_args(m.model_fields[field].annotation)[0] for m in members]

    def known(value: Any) -> Any:
        value = {} if value is None else value
        if isinstance(value, Mapping):
            value = {field: default, **value} if default else value
            if value.get(field) not in kinds:
                raise _Refusal(f"must be one of {kinds}, got {value.get(field)!r}", field)
        return value

    def tag(value: Any) -> str | None:
        kind = value.get(field) if isinstance(value, Mapping) else getattr(value, field, None)
        return _tag(str(kind)) if kind in kinds else None

    tagged = tuple(Annotated[m, Tag(_tag(k))] for m, k in zip(members, kinds, strict=True))
    return Annotated[
        Union[tagged],  # noqa: UP007 (a union of a tuple of types)
        Discriminator(
            tag,
            custom_error_type="not_a_mapping",
            custom_error_message=f"must be a mapping with a {field}: {kinds}",
        ),
        BeforeValidator(known),
    ]


Param = FloatParam | IntParam | CategoricalParam
PrunerSpec = MedianPruner | SuccessiveHalvingPruner | ThresholdPruner | NopPruner
if TYPE_CHECKING:
    ParamField = Param
    PrunerField = PrunerSpec
else:
    ParamField = _union("distribution", FloatParam, IntParam, CategoricalParam)
    PrunerField = _union(
        "kind", MedianPruner, SuccessiveHalvingPruner, ThresholdPruner, NopPruner, default="median"
    )


class SearchSpace(_Section):
    """A ``search:`` section (its key paths are checked against a base config by
    :func:`parse_search`)."""

    sampler: SamplerSpec = Field(default_factory=SamplerSpec)
    pruner: PrunerField = Field(default_factory=MedianPruner)
    parameters: dict[str, ParamField] = Field(min_length=1)


@dataclass
class TuningConfig:
    """A tuning config file: the base run config (plain data and validated) and the search."""

    file: str
    base: Config
    search: SearchSpace

    @property
    def name(self) -> str:
        return self.base.name or Path(self.file).stem

    @property
    def base_data(self) -> dict[str, Any]:
        """The base config's plain data (a fresh copy)."""
        return self.base.to_dict()

    def fingerprint(self) -> str:
        """Hash of the base config and the search space (a study is tied to it)."""
        data = {"config": self.base_data, "search": self.search.model_dump()}
        text = json.dumps(data, sort_keys=True, default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def trial_data(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The base config's plain data with Optuna's ``params`` (raw values) applied."""
        data = self.base_data
        for path, raw in params.items():
            _set_path(data, path, self.search.parameters[path].decode(raw))
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
    if SEARCH_KEY not in data:
        raise ConfigError(
            file, SEARCH_KEY, "required for tuning: the settings to search (docs/tuning.md)"
        )
    base = config_from_dict({k: v for k, v in data.items() if k != SEARCH_KEY}, file)
    return TuningConfig(file, base, parse_search(data[SEARCH_KEY], base, file))


def check_search(cfg: Config, file: str | None = None) -> SearchSpace | None:
    """Validate the ``search:`` section a run config holds (``None`` without one): training
    ignores it but refuses an invalid one, as tuning does."""
    if cfg.search is None:
        return None
    return parse_search(cfg.search, cfg.model_copy(update={"search": None}), file)


def _under(key: str, path: str) -> bool:
    return key == path or key.startswith((f"{path}.", f"{path}["))


def _set_path(data: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node: Any = data
    for part in parents:
        node = node[part]
    node[last] = copy.deepcopy(value)


NOT_SEARCHED: Final = {
    "seed": "a study searched over seeds picks the luckiest one; compare settings on one seed",
    "name": "it names the run, it does not change what is learnt",
    "description": "it describes the run, it does not change what is learnt",
    "evaluation": "it sets the deals and budget trials are scored on, the same for every trial",
    "search": "it is the search itself",
}
"""Config sections and keys a study may not search over, and why."""


def _base_value(base: Config, path: str) -> Any:
    """The base config's value at ``path`` (None for an accepted hyperparameter not set);
    ``_Refusal`` for an unknown key path."""
    parts = path.split(".")
    if any(not p.strip() for p in parts):
        raise _Refusal("must be a dotted key path such as algorithm.hyperparameters.gamma")
    if parts[0] in NOT_SEARCHED:
        raise _Refusal(f"{parts[0]} is not a setting to search: {NOT_SEARCHED[parts[0]]}")
    node: Any = base.to_dict()
    for i, part in enumerate(parts):
        here = ".".join(parts[:i])
        if not isinstance(node, Mapping):
            raise _Refusal(f"unknown config key {path!r}: {here} is not a section ({node!r})")
        if part not in node and here == "algorithm.hyperparameters" and i == len(parts) - 1:
            accepted = hyperparameters_of(base.algorithm.spec)
            if part in accepted:
                return None
            raise _Refusal(
                f"unknown hyperparameter {part!r} for {base.algorithm.name}; "
                f"known: {sorted(accepted)}"
            )
        if part not in node:
            known = sorted(str(k) for k in node)
            raise _Refusal(f"unknown config key {'.'.join(parts[: i + 1])!r}; known here: {known}")
        node = node[part]
    return node


def _probes(p: Param) -> list[tuple[str, Any]]:
    """The values of ``p`` checked alone on the base config: each choice, each bound and
    (a float range without step) one value between them."""
    if isinstance(p, CategoricalParam):
        return [(f"choices[{i}]", c) for i, c in enumerate(p.choices)]
    probes: list[tuple[str, Any]] = [("low", p.low), ("high", p.high)]
    if isinstance(p, FloatParam) and not isinstance(p, IntParam) and p.step is None:
        lo, hi = (math.log(p.low), math.log(p.high)) if p.log else (p.low, p.high)
        inner = lo + INTERIOR_PROBE * (hi - lo)
        probes.append(("a value between low and high", math.exp(inner) if p.log else inner))
    return probes


def parse_search(raw: Any, base: Config, file: str | None = None) -> SearchSpace:
    """Validate a ``search:`` section against the base config (``ConfigError`` naming the key).

    Each key path must exist in the config (or be a hyperparameter its algorithm accepts),
    and each bound, each choice and a value inside a float range must give a valid config
    set alone on the base config. An error that concerns *another searched* key too
    (``batch_size`` must divide ``n_steps * n_envs`` when both are searched) is left to
    sampling: such a sample fails its trial (not counted), with the reason.
    """
    try:
        search = SearchSpace.model_validate(raw)
    except ValidationError as exc:
        raise config_error(exc, file, SEARCH_KEY) from None
    base_data = base.to_dict()
    searched = list(search.parameters)
    for i, (path, p) in enumerate(search.parameters.items()):
        where = f"{SEARCH_KEY}.parameters[{path}]"
        try:
            base_value = _base_value(base, path)
        except _Refusal as exc:
            raise ConfigError(file, where, exc.reason) from None
        if type(p) is FloatParam and type(base_value) is int:
            raise ConfigError(
                file, f"{where}.distribution", f"{path} is an int setting: use distribution: int"
            )
        if any(_under(path, q) or _under(q, path) for q in searched[:i]):
            raise ConfigError(file, where, "overlaps another searched key path")
    for path, p in search.parameters.items():
        for label, value in _probes(p):
            data = copy.deepcopy(base_data)
            _set_path(data, path, value)
            try:
                config_from_dict(data, file)
            except ConfigError as exc:
                own = _under(exc.key, path)
                if own or not any(_under(exc.key, q) for q in searched):  # else: a joint one
                    suffix = "" if label.startswith("a value") else f".{label}"
                    raise ConfigError(
                        file,
                        f"{SEARCH_KEY}.parameters[{path}]{suffix}",
                        f"{label} {value!r} gives an invalid config: {exc.key}: {exc.reason}",
                    ) from None
    return search
