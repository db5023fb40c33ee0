"""rl-zoo3 with sb3-contrib's MaskablePPO, as the algorithm ``ppo_mask``.

rl-zoo3 2.9's ``ALGOS`` has no MaskablePPO. :func:`install` adds it (idempotent);
``scripts/zoo.py`` calls it and then rl-zoo3's own ``train``/``enjoy``::

    .venv/bin/python scripts/zoo.py train --algo ppo_mask --env coldiron/ColdIron-v0 \\
        --gym-packages coldiron_env -conf configs/rl_zoo3/ppo_mask.yml -f logs/
    .venv/bin/python scripts/zoo.py enjoy --algo ppo_mask --env coldiron/ColdIron-v0 \\
        --gym-packages coldiron_env -f logs/ --exp-id 1 --no-render -n 3000

Where the masks come from, at each place rl-zoo3 acts:

* **Collection** (training): MaskablePPO calls sb3-contrib's ``get_action_masks(env)``,
  which calls ``env_method("action_masks")`` on rl-zoo3's ``DummyVecEnv``; each env is
  ``gym.make``'s wrapper stack under SB3's ``Monitor``, and ``get_wrapper_attr`` reaches
  :meth:`coldiron_env.env.ColdIronEnv.action_masks` through them.
* **Periodic evaluation** (``--eval-freq N``) **and Optuna trials** (``-optimize``):
  :func:`install` replaces rl-zoo3's ``EvalCallback``/``TrialEvalCallback`` (in
  ``rl_zoo3.exp_manager``) with :class:`ZooEvalCallback`/:class:`ZooTrialEvalCallback`,
  sb3-contrib's ``MaskableEvalCallback`` with masks on for a MaskablePPO model and off for
  any other (so the other algorithms evaluate as before). :class:`ZooExperimentManager`
  builds the evaluation env with the hyperparameter file's ``env_kwargs`` (rl-zoo3 2.9
  builds it without them unless ``--eval-env-kwargs`` is given).
* **Prediction** (``enjoy``, or any ``model.predict`` without ``action_masks``):
  :class:`ZooMaskablePPO` takes the masks from the model's env; :func:`run_enjoy` loads the
  model with enjoy's env. Without an env and without masks it raises instead of playing
  unmasked.

``ppo_mask``'s Optuna sampler is rl-zoo3's PPO sampler (``sample_ppo_params``): MaskablePPO
takes the same hyperparameters.

Held-out deals, for every algorithm: rl-zoo3 seeds env ``i`` with ``seed + i``, the deals of
``scripts/evaluate.py --seed seed+i``. :class:`ZooExperimentManager` wraps each VecEnv rl-zoo3
builds in :class:`~agents.learning.training.StreamSeededVecEnv`: the training envs (those of
the Optuna trials too) deal from ``DealStream.TRAINING``, the periodic-evaluation env from
``DealStream.VALIDATION``, whoever seeds them with whatever value (tests/test_zoo.py audits
the decks dealt). The run seed is therefore limited to the streams' ``0..65535``.

A curriculum (the training-only rule options ``turns``/``suits_required`` at fractions of
``n_timesteps``, as ``agents.learning.training`` runs one), from the hyperparameter file::

    env_wrapper: agents.integrations.zoo.StagedGame
    callback:
      - agents.integrations.zoo.CurriculumCallback:
          stages: [{until_fraction: 0.1, suits_required: 1}, ...]

:class:`StagedGame` puts a :class:`ZooStagedEnv` (the project's ``StagedEnv``: rule options
that change at the next reset, the real game's observation space) in place of the game under
rl-zoo3's wrappers, and :class:`CurriculumCallback` switches the *training* envs' options at
rollout ends. The evaluation env is never switched: periodic evaluation, ``enjoy`` and
``scripts/evaluate.py`` play the real game.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

import gymnasium as gym
import numpy as np
import rl_zoo3.exp_manager as zoo_exp_manager
import rl_zoo3.train as zoo_train
from pydantic import ValidationError
from rl_zoo3.callbacks import TrialEvalCallback
from rl_zoo3.exp_manager import ExperimentManager
from rl_zoo3.hyperparams_opt import HYPERPARAMS_CONVERTER, HYPERPARAMS_SAMPLER
from rl_zoo3.utils import ALGOS
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.callbacks import MaskableEvalCallback
from sb3_contrib.common.maskable.utils import get_action_masks
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv

from agents.learning.config import CurriculumStage, stage_options
from agents.learning.training import StagedEnv, StreamSeededVecEnv
from coldiron_env.dealer import STREAM_SEED_BITS, DealStream
from coldiron_env.env import ColdIronEnv
from coldiron_env.options import CURRICULUM_KEYS, DEFAULT_RULES

ZOO_ALGO: Final = "ppo_mask"
"""The name rl-zoo3 knows MaskablePPO by (``--algo ppo_mask``; its folder under ``-f``)."""
SAMPLER_TEMPLATE: Final = "ppo"
"""rl-zoo3's algorithm whose Optuna sampler and converter ``ppo_mask`` reuses."""
SEED_LIMIT: Final = 1 << STREAM_SEED_BITS
"""Run seeds the deal streams take (``coldiron_env.dealer.stream_seed``): ``0..SEED_LIMIT-1``."""
RULE_OPTIONS: Final = CURRICULUM_KEYS
"""The training-only rule options a curriculum stage sets (``ColdIronEnv`` arguments)."""
REAL_GAME: Final = {k: getattr(DEFAULT_RULES, k) for k in CURRICULUM_KEYS}
STAGE_METHOD: Final = "set_rule_options"
"""The :class:`StagedGame` method :class:`CurriculumCallback` calls on the training envs."""


class MaskRequiredError(ValueError):
    """A MaskablePPO prediction with no masks given and no env to read them from."""


class ZooMaskablePPO(MaskablePPO):
    """MaskablePPO for rl-zoo3: ``predict`` without ``action_masks`` reads them from the
    model's env (rl-zoo3's ``enjoy`` and evaluation call ``predict`` without masks)."""

    def predict(
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        if action_masks is None:
            action_masks = self.env_action_masks(observation)
        return super().predict(observation, state, episode_start, deterministic, action_masks)

    def env_action_masks(self, observation: np.ndarray | dict[str, np.ndarray]) -> np.ndarray:
        """The legal-action masks of the model's env, one row per env; ``observation`` must
        be that env's (one row per env)."""
        if self.env is None:
            raise MaskRequiredError(
                f"{ZOO_ALGO}: predict() needs action_masks, or a model loaded with the env "
                "it plays in (load(path, env=venv)) to read them from"
            )
        masks = np.asarray(get_action_masks(self.env))
        first = next(iter(observation.values())) if isinstance(observation, dict) else observation
        rows = np.asarray(first).shape[0] if np.ndim(first) > 1 else 1
        if masks.shape[0] != rows:
            raise MaskRequiredError(
                f"{ZOO_ALGO}: the model's env has {masks.shape[0]} envs but the observation "
                f"{rows} rows: pass action_masks for an observation from another env"
            )
        return masks


def _masking_for(model: BaseAlgorithm) -> bool:
    return isinstance(model, MaskablePPO)


class ZooEvalCallback(MaskableEvalCallback):
    """rl-zoo3's periodic evaluation, masked for a MaskablePPO model, plain for others."""

    def _init_callback(self) -> None:
        super()._init_callback()
        self.use_masking = _masking_for(self.model)


class ZooTrialEvalCallback(TrialEvalCallback, MaskableEvalCallback):
    """rl-zoo3's Optuna trial evaluation (report, prune) on sb3-contrib's masked evaluation,
    masked for a MaskablePPO model, plain for others."""

    def _init_callback(self) -> None:
        super()._init_callback()
        self.use_masking = _masking_for(self.model)


class CurriculumError(ValueError):
    """A curriculum this module cannot run (the message says why)."""


class ZooStagedEnv(StagedEnv):
    """The project's :class:`~agents.learning.training.StagedEnv` (rule options switched at
    the next reset, the real game's observation space), as rl-zoo3 runs an env: it renders,
    and every step's info says the rule options of the game played (``turns``,
    ``suits_required``: the monitor can log them per episode)."""

    def __init__(self, env_kwargs: dict[str, Any]) -> None:
        space = {k: v for k, v in env_kwargs.items() if k not in RULE_OPTIONS}
        super().__init__(env_kwargs, space)
        self.metadata = self.inner.metadata
        self.render_mode = self.inner.render_mode
        self.dealt: Counter[tuple[int, int]] = Counter()
        """Games dealt under each ``(turns, suits_required)``."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        out = super().reset(seed=seed, options=options)
        self.dealt[self.rules()] += 1
        return out

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = super().step(action)
        info["turns"], info["suits_required"] = self.rules()
        return obs, reward, terminated, truncated, info

    def rules(self) -> tuple[int, int]:
        """``(turns, suits_required)`` of the game being played."""
        rules = self.inner.rules
        return int(rules.turns), int(rules.suits_required)

    def render(self) -> Any:
        return self.inner.render()

    def close(self) -> None:
        self.inner.close()


class StagedGame(gym.Wrapper[Any, Any, Any, Any]):
    """rl-zoo3 ``env_wrapper``: the Cold Iron game under ``env`` (rl-zoo3's ``Monitor`` over
    ``gym.make``'s wrappers) becomes a :class:`ZooStagedEnv` of the same options, whose rule
    options :meth:`set_rule_options` changes from the next episode (a curriculum:
    :class:`CurriculumCallback`). Until then it plays the env's own game, so an env nobody
    switches (the evaluation env) plays the real game."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        game = env.unwrapped
        if not isinstance(game, ColdIronEnv) or game.spec is None:
            raise CurriculumError(
                f"StagedGame wraps a Cold Iron env made by gym.make (rl-zoo3 --env "
                f"coldiron/ColdIron-v0), not {type(game).__name__}"
            )
        self.env_kwargs: dict[str, Any] = dict(game.spec.kwargs)
        """The env's own options (rl-zoo3's ``env_kwargs``): a stage changes only its
        ``RULE_OPTIONS``."""
        self.staged = ZooStagedEnv(self.env_kwargs)
        self.staged.spec = game.spec
        holder: Any = env
        while isinstance(holder, gym.Wrapper) and holder.env is not game:
            holder = holder.env
        if not isinstance(holder, gym.Wrapper):
            raise CurriculumError("StagedGame found no wrapper holding the game to replace")
        holder.env = self.staged

    def set_rule_options(self, options: Mapping[str, int]) -> None:
        """Play from the next episode with ``options`` (``RULE_OPTIONS`` keys; ``{}``: the
        env's own game)."""
        unknown = sorted(set(options) - set(RULE_OPTIONS))
        if unknown:
            raise CurriculumError(f"rule options {unknown} are not curriculum options "
                                  f"{list(RULE_OPTIONS)}")  # fmt: skip
        self.staged.set_env_kwargs({**self.env_kwargs, **options})

    def rules(self) -> tuple[int, int]:
        """``(turns, suits_required)`` of the game being played."""
        return self.staged.rules()


def parse_stages(stages: Sequence[Mapping[str, Any]]) -> list[CurriculumStage]:
    """``stages`` (``{until_fraction, turns?, suits_required?}`` each, fractions increasing)
    as the project's :class:`~agents.learning.config.CurriculumStage`; a
    :class:`CurriculumError` naming the bad stage otherwise."""
    if isinstance(stages, (str, Mapping)) or not stages:
        raise CurriculumError(f"CurriculumCallback stages must be a non-empty list, got {stages!r}")
    parsed: list[CurriculumStage] = []
    for i, stage in enumerate(stages):
        try:
            parsed.append(CurriculumStage.model_validate(dict(stage)))
        except ValidationError as exc:
            why = "; ".join(".".join(map(str, e["loc"])) + (": " if e["loc"] else "") + e["msg"]
                            for e in exc.errors())  # fmt: skip
            raise CurriculumError(f"CurriculumCallback stages[{i}] {stage!r}: {why}") from None
        except (TypeError, ValueError) as exc:  # not a mapping
            raise CurriculumError(f"CurriculumCallback stages[{i}] {stage!r}: {exc}") from None
        if i and parsed[i].until_fraction <= parsed[i - 1].until_fraction:
            raise CurriculumError(
                f"CurriculumCallback stages[{i}]: until_fraction must increase from stage to "
                f"stage ({parsed[i].until_fraction} after {parsed[i - 1].until_fraction})"
            )
    return parsed


class CurriculumCallback(BaseCallback):
    """rl-zoo3 ``callback``: the training envs play ``stages`` (see :func:`parse_stages`),
    each until its fraction of the ``learn`` budget (``n_timesteps``), then the real game;
    switched at rollout ends, from each env's next episode, as ``agents.learning.training``
    does. Needs ``env_wrapper: agents.integrations.zoo.StagedGame``. Logs
    ``curriculum/suits_required`` and ``curriculum/turns``."""

    def __init__(self, stages: Sequence[Mapping[str, Any]], verbose: int = 0) -> None:
        super().__init__(verbose)
        self.stages = parse_stages(stages)
        self.total: int | None = None
        self.options: dict[str, int] | None = None
        self.switches: list[tuple[int, dict[str, int]]] = []
        """``(timesteps, options)`` of every switch made (``{}``: the real game)."""

    def _on_training_start(self) -> None:
        env = self.training_env
        if not env.has_attr(STAGE_METHOD):
            raise CurriculumError(
                "CurriculumCallback needs the hyperparameter file's env_wrapper to be "
                "agents.integrations.zoo.StagedGame (it switches the game's rule options)"
            )
        self.total = int(self.locals["total_timesteps"])
        options = self._switch()
        if options:  # learn() reset the envs with the env's own rules: deal the stage's games
            self._reset_envs()

    def _on_rollout_end(self) -> None:
        self._switch()

    def _on_step(self) -> bool:
        return True

    def _switch(self) -> dict[str, int]:
        if self.total is None:
            raise CurriculumError("CurriculumCallback used before training started")
        options = stage_options(self.stages, self.num_timesteps, self.total)
        if options != self.options:
            self.training_env.env_method(STAGE_METHOD, options)
            self.options = options
            self.switches.append((self.num_timesteps, options))
            if self.verbose:
                print(f"curriculum at {self.num_timesteps} steps: {options or 'the real game'}")
        rules = {**REAL_GAME, **options}
        self.logger.record("curriculum/turns", rules["turns"])
        self.logger.record("curriculum/suits_required", rules["suits_required"])
        return options

    def _reset_envs(self) -> None:
        """What ``learn()`` did when it began, again: new episodes, under the stage's rules."""
        model: Any = self.model
        model._last_obs = self.training_env.reset()
        model._last_episode_starts = np.ones((self.training_env.num_envs,), dtype=bool)
        normalizer = model.get_vec_normalize_env()
        if normalizer is not None:
            model._last_original_obs = normalizer.get_original_obs()


class ZooExperimentManager(ExperimentManager):
    """rl-zoo3's ``ExperimentManager`` that deals held-out deals (training envs from the
    training stream, evaluation envs from the validation stream, whatever the seed), evaluates
    on the hyperparameter file's env options (unless ``--eval-env-kwargs`` says otherwise)
    and times its training."""

    timesteps: int | None = None
    learn_seconds: float | None = None
    _building: Final = threading.Lock()
    """``create_envs`` swaps ``vec_env_wrapper`` while it builds (Optuna may run trials in
    threads)."""

    def create_envs(self, n_envs: int, eval_env: bool = False, no_log: bool = False) -> VecEnv:
        """rl-zoo3's env, its base VecEnv wrapped first in
        :class:`~agents.learning.training.StreamSeededVecEnv`: env ``i`` deals from
        ``stream_seed(stream, seed, i)`` (``VALIDATION`` for the evaluation env, ``TRAINING``
        otherwise), never from an evaluation seed, however it is reseeded later."""
        stream = DealStream.VALIDATION if eval_env else DealStream.TRAINING
        with self._building:
            given = self.vec_env_wrapper

            def held_out(venv: VecEnv) -> VecEnv:
                wrapped: VecEnv = StreamSeededVecEnv(venv, stream)
                wrapped.seed(self.seed)
                return given(wrapped) if given is not None else wrapped

            self.vec_env_wrapper = held_out
            try:
                env: VecEnv = super().create_envs(n_envs, eval_env, no_log)
            finally:
                self.vec_env_wrapper = given
        return env

    def _preprocess_hyperparams(self, hyperparams: dict[str, Any]) -> Any:
        out = super()._preprocess_hyperparams(hyperparams)
        if self._eval_env_kwargs_args is None:
            self.eval_env_kwargs = dict(self.env_kwargs)
        return out

    def learn(self, model: BaseAlgorithm) -> None:
        start = time.perf_counter()
        try:
            super().learn(model)
        finally:
            self.learn_seconds = time.perf_counter() - start
            self.timesteps = int(model.num_timesteps)


def install() -> None:
    """Register ``ppo_mask`` (MaskablePPO) in rl-zoo3: its class, Optuna sampler and
    converter, and the masked evaluation callbacks. Safe to call again."""
    present = ALGOS.get(ZOO_ALGO)
    if present is not None and not issubclass(present, MaskablePPO):
        raise RuntimeError(
            f"rl-zoo3 already has an algorithm {ZOO_ALGO!r} ({present.__name__}), "
            "not sb3-contrib's MaskablePPO: refusing to replace it"
        )
    ALGOS[ZOO_ALGO] = ZooMaskablePPO
    HYPERPARAMS_SAMPLER[ZOO_ALGO] = HYPERPARAMS_SAMPLER[SAMPLER_TEMPLATE]
    HYPERPARAMS_CONVERTER[ZOO_ALGO] = HYPERPARAMS_CONVERTER[SAMPLER_TEMPLATE]
    setattr(zoo_exp_manager, "EvalCallback", ZooEvalCallback)  # noqa: B010 (not exported)
    setattr(zoo_exp_manager, "TrialEvalCallback", ZooTrialEvalCallback)  # noqa: B010


@contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


@contextmanager
def _argv(program: str, argv: Sequence[str]) -> Iterator[None]:
    saved = sys.argv
    sys.argv = [program, *argv]
    try:
        yield
    finally:
        sys.argv = saved


def _seed_arguments(argv: Sequence[str]) -> list[tuple[int, str]]:
    """``(index of the value, value)`` of each ``--seed`` in ``argv``."""
    found = []
    for i, arg in enumerate(argv):
        if arg == "--seed" and i + 1 < len(argv):
            found.append((i + 1, argv[i + 1]))
        elif arg.startswith("--seed="):
            found.append((i, arg.split("=", 1)[1]))
    return found


def check_seed(argv: Sequence[str]) -> None:
    """Refuse a ``--seed`` the deal streams cannot take (``ValueError`` naming it): a run
    seed is ``0..65535`` (negative: rl-zoo3's "draw one", drawn in that range here)."""
    for _, value in _seed_arguments(argv):
        try:
            seed = int(value)
        except ValueError:
            raise ValueError(f"--seed must be an integer, got {value!r}") from None
        if seed >= SEED_LIMIT:
            raise ValueError(
                f"--seed {seed}: the training and validation deal streams take a run seed in "
                f"0..{SEED_LIMIT - 1} (a negative one draws one)"
            )


def with_seed(argv: Sequence[str], rng: np.random.Generator | None = None) -> list[str]:
    """``argv`` with a run seed the deal streams take: a missing or negative ``--seed``
    (rl-zoo3 would draw one up to 2**32) becomes ``--seed N``, N drawn in ``0..65535``."""
    check_seed(argv)
    out = list(argv)
    given = _seed_arguments(out)
    if given and int(given[-1][1]) >= 0:
        return out
    drawn = str(int((rng or np.random.default_rng()).integers(SEED_LIMIT)))
    if not given:
        return [*out, "--seed", drawn]
    for index, _ in given:
        out[index] = f"--seed={drawn}" if out[index].startswith("--seed=") else drawn
    return out


@dataclass(frozen=True)
class ZooRun:
    """What :func:`run_train` did: the experiment (its ``save_path``, ``algo``, ...),
    and for a training (not ``-optimize``) the steps taken and the seconds they took."""

    manager: Any
    timesteps: int | None
    learn_seconds: float | None


def run_train(argv: Sequence[str]) -> ZooRun:
    """``python -m rl_zoo3.train ARGV`` with ``ppo_mask`` installed and
    :class:`ZooExperimentManager` in place of rl-zoo3's."""
    install()
    argv = with_seed(argv)
    made: list[Any] = []

    def manager(*args: Any, **kwargs: Any) -> Any:
        made.append(ZooExperimentManager(*args, **kwargs))
        return made[-1]

    with _argv("rl_zoo3.train", argv), _patched(zoo_train, "ExperimentManager", manager):
        zoo_train.train()
    if not made:
        raise RuntimeError("rl-zoo3's train() returned without creating its experiment")
    return ZooRun(made[-1], made[-1].timesteps, made[-1].learn_seconds)


def run_enjoy(argv: Sequence[str]) -> None:
    """``python -m rl_zoo3.enjoy ARGV`` with ``ppo_mask`` installed; a ``ppo_mask`` model is
    loaded with enjoy's env, so that its predictions are masked."""
    # imported here: rl_zoo3.enjoy needs `requests` (rl-zoo3's hub download), training does not
    zoo_enjoy = importlib.import_module("rl_zoo3.enjoy")
    install()
    made: list[VecEnv] = []
    create_test_env: Callable[..., VecEnv] = getattr(zoo_enjoy, "create_test_env")  # noqa: B009

    def create_and_keep(*args: Any, **kwargs: Any) -> VecEnv:
        made.append(create_test_env(*args, **kwargs))
        return made[-1]

    class EnjoyMaskablePPO(ZooMaskablePPO):
        @classmethod
        def load(  # type: ignore[override]
            cls,
            path: Any,
            env: Any = None,
            device: Any = "auto",
            custom_objects: dict[str, Any] | None = None,
            print_system_info: bool = False,
            force_reset: bool = True,
            **kwargs: Any,
        ) -> ZooMaskablePPO:
            if env is None:
                if not made:
                    raise RuntimeError("rl-zoo3's enjoy loaded the model before its env")
                env = made[-1]
            model: ZooMaskablePPO = super().load(
                path, env, device, custom_objects, print_system_info, force_reset, **kwargs
            )
            return model

    algos = {**ALGOS, ZOO_ALGO: EnjoyMaskablePPO}
    with (
        _argv("rl_zoo3.enjoy", argv),
        _patched(zoo_enjoy, "create_test_env", create_and_keep),
        _patched(zoo_enjoy, "ALGOS", algos),
    ):
        zoo_enjoy.enjoy()
