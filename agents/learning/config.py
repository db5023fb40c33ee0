"""Run configurations: a pydantic schema, YAML loading and validation.

A run is described by one YAML file (``configs/``). :func:`load_config` validates every key
*before* anything runs; a problem is a :class:`ConfigError` naming the file, the key path
(``algorithm.hyperparameters.learning_rate``, ``curriculum[0].turns``) and the reason:
pydantic's first error, with the value given.

The schema is a tree of pydantic v2 models (:class:`Config` at the root), strict (a YAML
``true`` is not an int, ``"8"`` not a number; a whole float such as ``1.0e6`` is a count) and
closed (an unknown key is refused, naming the known ones). Checks spanning several keys are
model validators. The hyperparameters are a mapping whose keys the algorithm's SB3 class
must take and whose values :class:`Hyperparameters` checks. Nothing is ``eval``-ed:
activations are names, schedules mappings such as ``{schedule: linear, start: 3.0e-4, end:
0.0}``. The ``search:`` section of a tuning config is an opaque mapping here, validated by
:mod:`agents.learning.search_space` (not imported here).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Final, Literal, get_args

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    model_validator,
)
from pydantic_core import ErrorDetails

from agents.learning.algorithms import ALGORITHMS, AlgorithmSpec, get_algorithm
from coldiron_env.cards import NUM_SUITS
from coldiron_env.dealer import STREAM_INDEX_BITS, STREAM_SEED_BITS
from coldiron_env.env import DEFAULT_ILLEGAL_REWARD, DEFAULT_MAX_ILLEGAL, IllegalAction
from coldiron_env.observation import ObservationMode
from coldiron_env.options import (
    CURRICULUM_KEYS,
    DEFAULT_RULES,
    MAX_TURNS_OPTION,
    STANDARD_TURNS,
    VARIANT_KEYS,
)

VecEnvKind = Literal["native", "dummy", "subproc"]
Device = Literal["cpu", "cuda", "auto"]
Potential = Literal["run_windows"]
ScheduleKind = Literal["constant", "linear"]
Activation = Literal["tanh", "relu", "elu", "leaky_relu", "gelu", "silu", "selu"]

SCHEDULE_KINDS: Final = get_args(ScheduleKind)
DEFAULT_LAYERS: Final = (64, 64)
DEFAULT_GAMMA: Final = 0.99
"""SB3's default ``gamma``: the shaping discount when neither ``shaping.gamma`` nor the
hyperparameters set one."""


class ConfigError(ValueError):
    """A configuration problem: ``file``, ``key`` (dotted path) and ``reason``."""

    def __init__(self, file: str | None, key: str, reason: str) -> None:
        self.file = file or "<config>"
        self.key = key or "<root>"
        self.reason = reason
        super().__init__(f"{self.file}: {self.key}: {reason}")


class _Refusal(ValueError):
    """Raised by a validator: the ``reason``, and the ``key`` path below the value checked
    (which pydantic reports it at; :func:`_located` appends ``key``)."""

    def __init__(self, reason: str, *key: str | int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.key = key


# ---------------------------------------------------------------- value types
def _whole_number(value: Any) -> Any:
    """A float with an integral value (``1.0e6`` written for a count) as an int."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _registered_algorithm(name: str) -> str:
    if name not in ALGORITHMS:
        raise _Refusal(f"must be one of {sorted(ALGORITHMS)}, got {name!r}")
    return name


def _planner_budget(name: str) -> str:
    from agents.players.planner import BUDGETS  # noqa: PLC0415 (only for a config that names one)

    if name not in BUDGETS:
        raise _Refusal(f"must be one of {sorted(BUDGETS)}, got {name!r}")
    return name


Count = Annotated[int, BeforeValidator(_whole_number)]
"""An int (strict: no bool, no string); a whole float is accepted."""
STREAM_SEED_LIMIT: Final = 1 << STREAM_SEED_BITS
"""Seeds of the training, imitation and validation deal streams are below this."""
STREAM_INDEX_LIMIT: Final = 1 << STREAM_INDEX_BITS
"""Deals a stream holds per seed."""
Number = Annotated[float, Field(allow_inf_nan=False)]
"""A finite number (an int is accepted, a bool is not)."""
LayerSizes = list[Annotated[Count, Field(ge=1)]]


def _tag(name: str) -> str:
    """The tag of one member of a union; tags appear in pydantic's error locations."""
    return f"<{name}>"


def _is_tag(part: str | int) -> bool:
    return isinstance(part, str) and part.startswith("<") and part.endswith(">")


# ---------------------------------------------------------------- schema
class _Section(BaseModel):
    """A mapping of the config file: closed, strict, validated again on assignment."""

    model_config = ConfigDict(extra="forbid", strict=True, validate_assignment=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys_only(cls, data: Any) -> Any:
        """An empty section (``env:`` alone, YAML null) takes the defaults; unknown keys
        are refused listing the known ones (``extra="forbid"`` would not name them)."""
        if data is None:
            return {}
        if isinstance(data, Mapping):
            for key in data:
                if key not in cls.model_fields:
                    raise _Refusal(f"unknown key; known keys here: {sorted(cls.model_fields)}", key)
        return data


class EnvConfig(_Section):
    """Options passed to ``coldiron/ColdIron-v0`` (training and evaluation alike)."""

    observation_mode: ObservationMode = "flat"
    recall: bool = False
    counting: bool = False
    """Also observe what a card-counting player computes (``coldiron_env.observation``)."""
    # the rule variants, RuleOptions' own (a bool each; the curriculum's options are stages')
    __annotations__.update(dict.fromkeys(VARIANT_KEYS, bool))
    locals().update({name: getattr(DEFAULT_RULES, name) for name in VARIANT_KEYS})
    win_reward: Number = 1.0
    loss_reward: Number = 0.0
    illegal_action: IllegalAction = "end"
    """``end`` (masked learners), ``penalize`` (learners without masks), ``raise``."""
    illegal_reward: Number = DEFAULT_ILLEGAL_REWARD
    max_illegal_actions: Count = Field(default=DEFAULT_MAX_ILLEGAL, ge=1)

    @model_validator(mode="after")
    def _a_win_pays_more(self) -> EnvConfig:
        if not self.win_reward > self.loss_reward:
            raise _Refusal(
                f"{self.win_reward} must be above loss_reward ({self.loss_reward}): "
                "the learner would be taught to lose",
                "win_reward",
            )
        return self


class ShapingConfig(_Section):
    """Potential-based reward shaping, training only (see :mod:`agents.learning.shaping`)."""

    enabled: bool = False
    potential: Potential = "run_windows"
    coefficient: Number = Field(default=0.01, ge=0.0)
    gamma: Number | None = Field(default=None, gt=0.0, le=1.0)
    """Discount in F = gamma * Phi(s') - Phi(s); ``null`` = the algorithm's gamma."""


class CurriculumStage(_Section):
    """Training-only rule options used until a fraction of the timestep budget."""

    until_fraction: Number = Field(gt=0.0, lt=1.0)
    turns: Count = Field(default=STANDARD_TURNS, ge=1, le=MAX_TURNS_OPTION)
    suits_required: Count = Field(default=NUM_SUITS, ge=1, le=NUM_SUITS)

    @model_validator(mode="after")
    def _changes_the_rules(self) -> CurriculumStage:
        if self.turns == STANDARD_TURNS and self.suits_required == NUM_SUITS:
            raise _Refusal("is the real game: a stage must change turns or suits")
        return self


class NetArch(_Section):
    """Separate layer sizes for the actor (``pi``) and the critic (``vf``)."""

    pi: LayerSizes = Field(default_factory=lambda: list(DEFAULT_LAYERS))
    vf: LayerSizes = Field(default_factory=lambda: list(DEFAULT_LAYERS))


def _net_arch_shape(value: Any) -> str | None:
    if isinstance(value, list):
        return _tag("layers")
    return _tag("pi_vf") if isinstance(value, (Mapping, NetArch)) else None


NetArchField = Annotated[
    Annotated[LayerSizes, Tag(_tag("layers"))] | Annotated[NetArch, Tag(_tag("pi_vf"))],
    Discriminator(
        _net_arch_shape,
        custom_error_type="net_arch_shape",
        custom_error_message="must be a list of layer sizes or a mapping {pi: [...], vf: [...]}",
    ),
]


class PolicyConfig(_Section):
    """The policy network (SB3 ``policy_kwargs``), structured."""

    net_arch: NetArchField = Field(default_factory=lambda: list(DEFAULT_LAYERS))
    activation: Activation = "tanh"
    ortho_init: bool | None = None
    lstm_hidden_size: Count | None = Field(default=None, ge=1)
    n_lstm_layers: Count | None = Field(default=None, ge=1)
    shared_lstm: bool | None = None
    enable_critic_lstm: bool | None = None
    n_quantiles: Count | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _lstm_sharing(self) -> PolicyConfig:
        if self.shared_lstm and self.enable_critic_lstm:
            raise _Refusal("must be false when shared_lstm is true", "enable_critic_lstm")
        return self


class AlgorithmConfig(_Section):
    name: Annotated[str, AfterValidator(_registered_algorithm)]
    policy: str | None = None
    """SB3 policy name; ``null`` = the registry's default for the observation mode."""
    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments of the algorithm's class, checked and normalised (an int learning
    rate becomes a float) by :class:`Hyperparameters`."""

    @property
    def spec(self) -> AlgorithmSpec:
        return get_algorithm(self.name)

    @model_validator(mode="after")
    def _check_hyperparameters(self) -> AlgorithmConfig:
        accepted = hyperparameters_of(self.spec)
        for key in self.hyperparameters:
            if key in MANAGED_ARGUMENTS:
                raise _Refusal(
                    f"not a hyperparameter: {MANAGED_ARGUMENTS[key]}", "hyperparameters", key
                )
            if key not in accepted:
                raise _Refusal(
                    f"unknown hyperparameter for {self.name}; known: {sorted(accepted)}",
                    "hyperparameters",
                    key,
                )
        try:
            checked = Hyperparameters.model_validate(self.hyperparameters)
        except ValidationError as exc:
            parts, reason = _located(exc.errors()[0])
            raise _Refusal(reason, "hyperparameters", *parts) from None
        self.hyperparameters.update(checked.model_dump(exclude_unset=True))  # normalised, in order
        return self


class TrainingConfig(_Section):
    total_timesteps: Count = Field(ge=1)
    n_envs: Count = Field(default=8, ge=1)
    vec_env: VecEnvKind = "dummy"
    normalize_obs: bool = False
    normalize_reward: bool = False
    device: Device = "cpu"
    torch_threads: Count = Field(default=1, ge=1)
    progress_bar: bool = True
    log_interval: Count = Field(default=1, ge=1)
    minutes: Number | None = Field(default=None, gt=0)
    """The run's wall time here, at most (None: any); RL steps and rounds cut to fit it
    (``training.TimeProbe``, docs/training.md#time-budget)."""


class EvaluationConfig(_Section):
    """Periodic evaluation on a fixed set of deals: the first ``episodes`` deals of the
    validation stream of ``seed`` (:class:`coldiron_env.dealer.DealStream`)."""

    freq: Count = Field(default=50_000, ge=1)
    episodes: Count = Field(default=500, ge=1, le=STREAM_INDEX_LIMIT)
    """At most the validation stream's deals of one seed."""
    seed: Count = Field(default=0, ge=0, lt=STREAM_SEED_LIMIT)
    deterministic: bool = True


class CheckpointConfig(_Section):
    freq: Count = Field(default=100_000, ge=1)


class ImitationConfig(_Section):
    """Behaviour-cloning warm start (see :mod:`agents.learning.imitation`)."""

    enabled: bool = False
    teacher: str = "heuristic"
    episodes: Count = Field(default=2_000, ge=1)
    epochs: Count = Field(default=10, ge=1)
    batch_size: Count = Field(default=256, ge=1)
    learning_rate: Number = Field(default=1e-3, gt=0.0)
    value_pretrain: bool = True
    seed: Count = Field(default=0, ge=0, lt=STREAM_SEED_LIMIT)
    """Seed of the teacher's deals in the imitation stream (apart from every other deal)."""
    dagger_rounds: Count = Field(default=0, ge=0)
    """DAgger rounds after cloning: the student plays, the teacher labels its states."""
    dagger_episodes: Count = Field(default=2_000, ge=1)
    dagger_epochs: Count = Field(default=3, ge=1)

    @model_validator(mode="after")
    def _names_a_teacher(self) -> ImitationConfig:
        from agents.players.roster import BUILTIN_AGENTS  # noqa: PLC0415 (as _planner_budget)

        if self.enabled and self.teacher not in BUILTIN_AGENTS:
            known = ", ".join(BUILTIN_AGENTS)
            raise _Refusal(f"must be a built-in player ({known}), got {self.teacher!r}", "teacher")
        return self


Rollouts = Literal["heuristic", "network"]
"""Who plays the planner's rollouts in expert iteration (``expert_iteration.rollouts``)."""
Targets = Literal["hard", "soft"]
"""What expert iteration clones on (``expert_iteration.targets``)."""


class ExpertIterationConfig(_Section):
    """Expert iteration after RL (see :mod:`agents.learning.expert_iteration`): each round
    the network plays ``episodes`` deals of its own stream (seeded by the run's ``seed``),
    the planner over it labels every state it visited, and it is cloned on the labels."""

    rounds: Count = Field(default=0, ge=0)
    """Rounds after RL (0: none)."""
    episodes: Count = Field(default=2_000, ge=1)
    """Deals the network plays (and the planner labels) per round."""
    budget: Annotated[str, AfterValidator(_planner_budget)] = "planner"
    """The planner's budget: a name of ``agents.players.planner.BUDGETS``."""
    epochs: Count = Field(default=4, ge=1)
    """Cloning epochs per round, over that round's labels (and the kept rounds')."""
    batch_size: Count = Field(default=512, ge=1)
    learning_rate: Number = Field(default=1e-4, gt=0.0)
    workers: Count = Field(default=1, ge=1)
    """Processes labelling each round's deals (the labels do not depend on it)."""
    rollouts: Rollouts = "heuristic"
    """Who plays the planner's rollouts: the heuristic, or the network being trained."""
    keep_rounds: Count = Field(default=1, ge=1)
    """Rounds of labels the network is cloned on each round, this one's included (DAgger's
    aggregation; 1: this round's only). Kept in the run directory so a resumed run has them."""
    targets: Targets = "hard"
    """What the network is cloned on: the planner's choices (hard), or the chance that each
    action it compared is the best, from its paired estimates (soft)."""
    soft_z: Number | None = Field(default=None, ge=0.0)
    """Soft labels: each alternative's estimate handicapped by this many standard errors
    (null: the planner's own ``z``, so an alternative at its switching threshold gets even
    odds; 0: the plain chance of being the best)."""

    @model_validator(mode="after")
    def _soft_z_with_soft_targets(self) -> ExpertIterationConfig:
        if self.soft_z is not None and self.targets != "soft":
            raise _Refusal("is for soft labels only (targets: soft)", "soft_z")
        return self

    @model_validator(mode="after")
    def _deals_in_the_stream(self) -> ExpertIterationConfig:
        if self.rounds * self.episodes > STREAM_INDEX_LIMIT:
            raise _Refusal(f"rounds x episodes must be at most {STREAM_INDEX_LIMIT}", "episodes")
        return self


class Config(_Section):
    """One training run (fields in the order a config file is written)."""

    name: str | None = Field(default=None, pattern=r"^[^/\\]+$")
    """The run's name: its folder under ``runs/`` when there is no ``--out`` (no path)."""
    description: str | None = None
    seed: Count = Field(default=0, ge=0, lt=STREAM_SEED_LIMIT)
    env: EnvConfig = Field(default_factory=EnvConfig)
    shaping: ShapingConfig = Field(default_factory=ShapingConfig)
    curriculum: list[CurriculumStage] = Field(default_factory=list)
    algorithm: AlgorithmConfig
    training: TrainingConfig
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    imitation: ImitationConfig = Field(default_factory=ImitationConfig)
    expert_iteration: ExpertIterationConfig = Field(default_factory=ExpertIterationConfig)
    search: dict[str, Any] | None = None
    """Hyperparameter search space of ``scripts/tune.py``, kept as plain data here and
    validated by :mod:`agents.learning.search_space`; training ignores it."""

    def to_dict(self) -> dict[str, Any]:
        """Plain data (a deep copy), in the order a config file is written."""
        plain = self.model_dump()
        if plain.get("search") is None:
            plain.pop("search", None)
        return plain

    def env_kwargs(self) -> dict[str, Any]:
        """The env keyword arguments (the real game: no curriculum options)."""
        return self.env.model_dump()

    def stage_env_kwargs(self, timesteps: int) -> dict[str, Any]:
        """Env kwargs in force after ``timesteps`` (the curriculum, then the real game)."""
        total = self.training.total_timesteps
        return {**self.env_kwargs(), **stage_options(self.curriculum, timesteps, total)}

    @property
    def gamma(self) -> float:
        """The discount the algorithm learns with (its hyperparameter, else SB3's default)."""
        return float(self.algorithm.hyperparameters.get("gamma", DEFAULT_GAMMA))

    @property
    def shaping_gamma(self) -> float:
        return self.gamma if self.shaping.gamma is None else self.shaping.gamma

    @model_validator(mode="after")
    def _check_across_sections(self) -> Config:
        spec = self.algorithm.spec
        _check_rollout(self, spec)
        _check_policy(self.policy, spec)
        _check_curriculum(self.curriculum, self.env.observation_mode)
        _check_shaping_gamma(self)
        _check_policy_name(self.algorithm.policy, spec, self.env.observation_mode)
        cloned = {
            "imitation": self.imitation.enabled,
            "expert iteration": self.expert_iteration.rounds,
        }
        for phase, used in cloned.items():
            if used and self.training.normalize_obs:
                raise _Refusal(
                    f"cannot be combined with {phase} (the clone is trained on raw observations)",
                    "training",
                    "normalize_obs",
                )
        if self.expert_iteration.rounds and spec.recurrent:
            raise _Refusal(
                f"{spec.name} is recurrent: the planner's base policy decides from what "
                "the player knows, without the episode's memory",
                "expert_iteration",
                "rounds",
            )
        return self


# ---------------------------------------------------------------- hyperparameters
def _known_schedule_kind(value: Any) -> Any:
    if isinstance(value, Mapping) and value.get("schedule") not in SCHEDULE_KINDS:
        raise _Refusal(
            f"must be one of {list(SCHEDULE_KINDS)}, got {value.get('schedule')!r}", "schedule"
        )
    return value


def _schedule_shape(value: Any) -> str:
    """A schedule's union tag: its ``schedule`` (a key, or a validated field), or number."""
    kind = value.get("schedule") if isinstance(value, Mapping) else None
    return _tag(str(kind or getattr(value, "schedule", "number")))


PositiveNumber = Annotated[Number, Field(gt=0.0)]
NOT_GIVEN: Any = None
"""The default of a hyperparameter a config does not set (never validated: SB3's default
applies)."""


class LinearSchedule(_Section):
    schedule: Literal["linear"]
    start: PositiveNumber
    end: Annotated[Number, Field(ge=0.0)]  # decaying to exactly 0


class ConstantSchedule(_Section):
    schedule: Literal["constant"]
    value: PositiveNumber


Schedule = Annotated[
    Annotated[PositiveNumber, Tag(_tag("number"))]
    | Annotated[LinearSchedule, Tag(_tag("linear"))]
    | Annotated[ConstantSchedule, Tag(_tag("constant"))],
    Discriminator(_schedule_shape),
    BeforeValidator(_known_schedule_kind),
]
"""A positive number, or the mapping of SB3's ``ConstantSchedule`` or ``LinearSchedule``."""


class Hyperparameters(_Section):
    """Every hyperparameter this schema accepts, with its type and bounds; an algorithm takes
    those its SB3 class's ``__init__`` takes (:func:`hyperparameters_of`). Validated on the
    keys a config gives (the others keep SB3's defaults)."""

    learning_rate: Schedule = NOT_GIVEN
    n_steps: Count = Field(NOT_GIVEN, ge=1)
    batch_size: Count = Field(NOT_GIVEN, ge=2)
    n_epochs: Count = Field(NOT_GIVEN, ge=1)
    gamma: Number = Field(NOT_GIVEN, gt=0.0, le=1.0)
    gae_lambda: Number = Field(NOT_GIVEN, ge=0.0, le=1.0)
    clip_range: Schedule = NOT_GIVEN
    clip_range_vf: Schedule | None = None
    normalize_advantage: bool = NOT_GIVEN
    ent_coef: Number = Field(NOT_GIVEN, ge=0.0)
    vf_coef: Number = Field(NOT_GIVEN, ge=0.0)
    max_grad_norm: Number = Field(NOT_GIVEN, gt=0.0)
    target_kl: Number | None = Field(NOT_GIVEN, gt=0.0)
    stats_window_size: Count = Field(NOT_GIVEN, ge=1)
    use_rms_prop: bool = NOT_GIVEN
    rms_prop_eps: Number = Field(NOT_GIVEN, gt=0.0)
    buffer_size: Count = Field(NOT_GIVEN, ge=1)
    learning_starts: Count = Field(NOT_GIVEN, ge=0)
    tau: Number = Field(NOT_GIVEN, gt=0.0, le=1.0)
    train_freq: Count = Field(NOT_GIVEN, ge=1)
    gradient_steps: Count = Field(NOT_GIVEN, ge=1)
    target_update_interval: Count = Field(NOT_GIVEN, ge=1)
    exploration_fraction: Number = Field(NOT_GIVEN, ge=0.0, le=1.0)
    exploration_initial_eps: Number = Field(NOT_GIVEN, ge=0.0, le=1.0)
    exploration_final_eps: Number = Field(NOT_GIVEN, ge=0.0, le=1.0)
    optimize_memory_usage: bool = NOT_GIVEN

    @model_validator(mode="after")
    def _exploration_decays(self) -> Hyperparameters:
        lo, hi = self.exploration_final_eps, self.exploration_initial_eps
        if lo is not None and hi is not None and lo > hi:
            raise _Refusal(f"{lo} is above exploration_initial_eps {hi}", "exploration_final_eps")
        return self


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
    """The hyperparameter names algorithm ``spec`` accepts: its class's ``__init__``'s."""
    params = inspect.signature(spec.load_class().__init__).parameters
    return set(params) & set(Hyperparameters.model_fields)


def default_hyperparameter(spec: AlgorithmSpec, name: str) -> Any:
    """The default of hyperparameter ``name`` in the algorithm's class."""
    return inspect.signature(spec.load_class().__init__).parameters[name].default


# ---------------------------------------------------------------- cross-section checks
def _check_rollout(cfg: Config, spec: AlgorithmSpec) -> None:
    """An on-policy batch must fit in, and divide, one rollout of ``n_steps * n_envs``."""
    accepted = hyperparameters_of(spec)
    if "n_steps" not in accepted or "batch_size" not in accepted or spec.off_policy:
        return  # DQN's n_steps is its n-step return, not a rollout
    hp = cfg.algorithm.hyperparameters
    n_steps = int(hp.get("n_steps", default_hyperparameter(spec, "n_steps")))
    n_total = n_steps * cfg.training.n_envs
    batch = int(hp.get("batch_size", default_hyperparameter(spec, "batch_size")))
    where = ("algorithm", "hyperparameters", "batch_size")
    if batch > n_total:
        raise _Refusal(f"{batch} is larger than n_steps * n_envs = {n_total} (one rollout)", *where)
    if n_total % batch:
        raise _Refusal(
            f"n_steps * n_envs = {n_total} is not divisible by batch_size {batch}", *where
        )


def _check_policy(pol: PolicyConfig, spec: AlgorithmSpec) -> None:
    if spec.family == "q_value":
        if isinstance(pol.net_arch, NetArch):
            raise _Refusal(
                f"{spec.name} takes one list of layer sizes, not pi/vf", "policy", "net_arch"
            )
        if pol.ortho_init is not None:
            raise _Refusal(f"not used by {spec.name}", "policy", "ortho_init")
    if pol.n_quantiles is not None and spec.name != "qrdqn":
        raise _Refusal("only for qrdqn", "policy", "n_quantiles")
    for key in ("lstm_hidden_size", "n_lstm_layers", "shared_lstm", "enable_critic_lstm"):
        if getattr(pol, key) is not None and not spec.recurrent:
            raise _Refusal(f"only for a recurrent algorithm, not {spec.name}", "policy", key)


def _check_shaping_gamma(cfg: Config) -> None:
    """Shaping keeps the best policy only with the discount the agent learns with (Ng, Harada
    and Russell 1999): an explicit ``shaping.gamma`` must be the algorithm's."""
    given = cfg.shaping.gamma
    if cfg.shaping.enabled and given is not None and given != cfg.gamma:
        raise _Refusal(
            f"{given} is not the algorithm's gamma ({cfg.gamma}): F = gamma * Phi(s') - Phi(s) "
            "with another discount than the agent's can change the best policy; "
            "leave it null to use the algorithm's",
            "shaping",
            "gamma",
        )


def stage_options(stages: Sequence[CurriculumStage], timesteps: int, total: int) -> dict[str, int]:
    """The rule options in force after ``timesteps`` of a ``total``-step budget: the first
    stage whose ``until_fraction * total`` is still ahead, then the real game (``{}``)."""
    for stage in stages:
        if timesteps < stage.until_fraction * total:
            return {key: int(getattr(stage, key)) for key in CURRICULUM_KEYS}
    return {}


def _check_curriculum(stages: Sequence[CurriculumStage], observation_mode: str) -> None:
    last = 0.0
    for i, stage in enumerate(stages):
        if stage.until_fraction <= last:
            raise _Refusal(
                f"must increase from stage to stage ({last} before)",
                "curriculum",
                i,
                "until_fraction",
            )
        last = stage.until_fraction
        if observation_mode == "dict" and stage.turns > STANDARD_TURNS:
            raise _Refusal(
                f"dict observations encode the turn as Discrete({STANDARD_TURNS + 1}): "
                f"more than {STANDARD_TURNS} turns needs observation_mode flat",
                "curriculum",
                i,
                "turns",
            )


def _check_policy_name(policy: str | None, spec: AlgorithmSpec, observation_mode: str) -> None:
    expected = spec.policy_name(observation_mode)
    if policy not in (None, expected):
        raise _Refusal(
            f"{spec.name} with observation_mode {observation_mode!r} takes {expected!r} (or "
            f"null), got {policy!r}",
            "algorithm",
            "policy",
        )


# ---------------------------------------------------------------- pydantic errors -> ConfigError
def _located(error: ErrorDetails) -> tuple[list[str | int], str]:
    """The key path and reason of one pydantic error: pydantic's message and the value
    given, or the reason and key of a :class:`_Refusal` raised by a validator."""
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, _Refusal):
        return [*error["loc"], *cause.key], cause.reason
    given = "" if error["type"] == "missing" else f", got {error['input']!r}"
    return list(error["loc"]), error["msg"] + given


def _key_path(parts: Sequence[str | int]) -> str:
    """``("curriculum", 0, "turns")`` as ``curriculum[0].turns``; union tags are dropped and a
    key holding dots (a searched key path) is bracketed: ``parameters[policy.net_arch]``."""
    out = ""
    for part in (p for p in parts if not _is_tag(p)):
        bracket = isinstance(part, int) or "." in part
        out += f"[{part}]" if bracket else (f".{part}" if out else str(part))
    return out


def config_error(exc: ValidationError, file: str | None, *prefix: str) -> ConfigError:
    """Pydantic's errors as a :class:`ConfigError`: the first one's file, key path under
    ``prefix`` and reason, then every other problem with its key."""
    errors = exc.errors()
    parts, reason = _located(errors[0])
    for other in errors[1:]:
        more, why = _located(other)
        reason += f"; also {_key_path([*prefix, *more])}: {why}"
    return ConfigError(file, _key_path([*prefix, *parts]), reason)


# ---------------------------------------------------------------- YAML loading
class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads ``3e-4`` as a float (YAML 1.2; PyYAML needs a dot) and
    refuses a key given twice in one mapping (PyYAML keeps the last, silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG:  # "<<: *anchor": its keys may be overridden
                continue
            key = self.construct_object(key_node, deep=True)  # a key in full, for the message
            try:
                twice = key in seen
                seen.add(key)
            except TypeError:  # a list or mapping as a key
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} cannot be a key", key_node.start_mark
                ) from None
            if twice:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice", key_node.start_mark
                )
        return super().construct_mapping(node, deep=deep)


MERGE_TAG: Final = "tag:yaml.org,2002:merge"


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
    except UnicodeDecodeError as exc:  # a model .zip, a Latin-1 file
        raise ConfigError(
            file, "<file>", f"not a UTF-8 text file (byte {exc.start}): a YAML config is text"
        ) from None
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise ConfigError(file, "<file>", f"invalid YAML: {exc}") from None


def load_config(path: str | Path) -> Config:
    """Read and validate the YAML run description at ``path``."""
    return config_from_dict(read_yaml(path), str(path))


def config_from_dict(data: Any, file: str | None = None) -> Config:
    """Validate a parsed mapping into a :class:`Config` (``file`` is named in errors)."""
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise config_error(exc, file) from None


def apply_overrides(
    cfg: Config, *, timesteps: int | None = None, seed: int | None = None, file: str | None = None
) -> Config:
    """A copy of ``cfg`` with command-line overrides applied and validated again."""
    data = cfg.to_dict()
    flags = []
    if timesteps is not None:
        data["training"]["total_timesteps"] = timesteps
        flags.append(f"--timesteps {timesteps}")
    if seed is not None:
        data["seed"] = seed
        flags.append(f"--seed {seed}")
    where = f"{file or '<config>'} with {' '.join(flags)}" if flags else file
    return config_from_dict(data, where)  # an error names the flag, not only the file


def config_changes(
    had: Mapping[str, Any], now: Mapping[str, Any], prefix: str = ""
) -> dict[str, tuple[Any, Any]]:
    """``dotted.key -> (before, after)`` where two config trees differ (into dicts both hold)."""
    out: dict[str, tuple[Any, Any]] = {}
    for key in sorted(had.keys() | now.keys()):
        a, b = had.get(key), now.get(key)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out.update(config_changes(a, b, f"{prefix}{key}."))
        elif a != b:
            out[f"{prefix}{key}"] = (a, b)
    return out


def describe_changes(changes: Mapping[str, tuple[Any, Any]]) -> str:
    """:func:`config_changes` as text: ``key: before -> after; ...``."""
    return "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in changes.items())


def dump_config(cfg: Config) -> str:
    """The resolved config as YAML text (loads back to an equal config)."""
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False, default_flow_style=None)


# ---------------------------------------------------------------- building SB3 arguments
ACTIVATIONS: Final = {
    "tanh": "Tanh", "relu": "ReLU", "elu": "ELU", "leaky_relu": "LeakyReLU", "gelu": "GELU",
    "silu": "SiLU", "selu": "SELU",
}  # fmt: skip
"""The ``torch.nn`` class of each :data:`Activation`."""


def activation_class(name: str) -> type[Any]:
    """The ``torch.nn`` activation class for a name of :data:`Activation`."""
    from torch import nn  # noqa: PLC0415 (config loading stays torch-free)

    activation: type[Any] = getattr(nn, ACTIVATIONS[name])
    return activation


def policy_kwargs(cfg: Config) -> dict[str, Any]:
    """SB3 ``policy_kwargs`` from the ``policy:`` section."""
    plain = cfg.policy.model_dump(exclude_none=True)
    arch, activation = plain.pop("net_arch"), plain.pop("activation")
    return {"net_arch": arch, "activation_fn": activation_class(activation), **plain}


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
