"""Training runs: a run is a list of resumable phases over one config.

:func:`train` runs a config's :data:`PHASES` in order (see ``docs/run_directory.md`` for
what they write), each doing what is left of it, so a run stopped in any phase (Ctrl-C,
SIGTERM, ``kill -9``) resumes where it stopped:

1. :func:`imitation`: the env and model built, the warm start, the first checkpoint;
2. :func:`reinforcement_learning`: SB3's ``learn`` with :class:`RunCallback` (periodic
   evaluation into ``evaluations.csv`` / ``.json``, ``learning_curve.png`` and
   ``best_model.zip``, periodic checkpoints, curriculum stage switches);
3. :func:`expert_iteration`: rounds of the planner over the network teaching it
   (:mod:`agents.learning.expert_iteration`), ``model.zip`` and ``expert_iteration.json``
   after each; the checkpoint stays at the end of RL. :func:`distill` runs this phase
   alone on a trained network (``scripts/distill.py``).

Pieces: :func:`build_vec_env` (the SB3 ``VecEnv``: ``native``, or ``dummy``/``subproc`` of
:class:`StagedEnv`, which can switch curriculum rule options between episodes) and
:func:`make_training_env` (-> :class:`StreamSeededVecEnv` -> ``ShapingVecEnv`` if shaping
is on -> ``VecNormalize`` if normalisation is on); :func:`evaluate_model` (masked,
deterministic play of seeded deals on *plain* envs of the real game: true win rates).
Every file is written atomically (temp file + ``os.replace``).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import pickle
import re
import shutil
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, get_args
from zipfile import BadZipFile

import gymnasium as gym
import matplotlib
import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import (
    DummyVecEnv,
    SubprocVecEnv,
    VecEnv,
    VecNormalize,
)
from stable_baselines3.common.vec_env.base_vec_env import VecEnvWrapper

import coldiron_env
from agents.atomic import (
    atomic_save,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    check_writable,
    read_json,
)
from agents.evaluation.arena import AgentResult
from agents.evaluation.lockstep import play_lockstep
from agents.gitinfo import utc_now
from agents.learning.config import (
    Config,
    ExpertIterationConfig,
    VecEnvKind,
    algorithm_kwargs,
    config_changes,
    config_from_dict,
    default_hyperparameter,
    describe_changes,
    dump_config,
    load_config,
    policy_kwargs,
)
from agents.learning.expert_iteration import (
    EXPERT_FILE,
    Labellers,
    commit_round,
    expert_rounds,
    forget_labels,
    kept_rounds,
    labels_file,
    model_bytes,
    prepare_resume,
    start_hash,
)
from agents.learning.imitation import Demonstrations, accuracy, behaviour_clone, concat
from agents.learning.provenance import META_FILE, SHA256_KEY, TrainingError, file_hashes, provenance
from agents.learning.sb3_agent import (
    CONFIG_FILE,
    MODEL_FILE,
    VECNORMALIZE_FILE,
    MaskedPolicy,
    SB3Agent,
    find_config,
    load_sb3_agent,
    tag_model,
)
from agents.learning.shaping import ShapingVecEnv
from coldiron_env.dealer import STREAM_SEED_BITS, DealStream, stream_seed
from coldiron_env.env import ColdIronEnv
from coldiron_env.game import OUTCOMES
from coldiron_env.options import CURRICULUM_KEYS, RuleOptions

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

BEST_MODEL_FILE: Final = "best_model.zip"
EVAL_CSV: Final = "evaluations.csv"
EVAL_JSON: Final = "evaluations.json"
CURVE_FILE: Final = "learning_curve.png"
IMITATION_FILE: Final = "imitation.json"
CHECKPOINT_DIR: Final = "checkpoint"
STATE_FILE: Final = "state.json"
STATUS_STARTING: Final = "starting"
"""``meta.json`` status until learning begins (the imitation warm start runs before it)."""
STATUS_RUNNING: Final = "running"
STATUS_COMPLETED: Final = "completed"
RECIPE_KEY: Final = "recipe"
"""``meta.json``'s copy of the resolved config as the run began, which a resume holds its
``config.yaml`` to (:func:`check_recipe`)."""
RESUME_MAY_CHANGE: Final = frozenset(
    {"training.total_timesteps", "expert_iteration.rounds",  # the budgets
     "training.progress_bar", "training.torch_threads", "training.device", "training.vec_env",
     "training.log_interval", "expert_iteration.workers"}  # how it runs, not what it learns
)  # fmt: skip
"""The config keys a resumed run may change (``vec_env``: the native and SB3's vector envs
play the same games; ``workers``: the labels do not depend on it)."""
REPLAY_FILE: Final = "replay_buffer.pkl"
TB_DIR: Final = "tb"
TB_RUN_NAME: Final = "run"
UNRECORDED: Final = frozenset({"agent", "seconds", "won_bits"})
"""The keys of ``AgentResult.to_dict`` an evaluation record leaves out (``evaluations.json``)."""


# ---------------------------------------------------------------- envs
class StagedEnv(gym.Env[Any, np.int64]):
    """A ``ColdIronEnv`` whose rule options can change between episodes (curriculum).

    :meth:`set_env_kwargs` takes effect at the next ``reset``. The observation
    space is that of ``space_kwargs`` (the real game), so it never changes.
    """

    def __init__(
        self,
        env_kwargs: dict[str, Any],
        space_kwargs: dict[str, Any] | None = None,
        ignore_sigint: bool = False,
    ) -> None:
        if ignore_sigint:  # subprocess workers: Ctrl-C and SIGTERM are handled by the trainer
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        self._kwargs = dict(env_kwargs)
        self._pending: dict[str, Any] | None = None
        self.inner = ColdIronEnv(**self._kwargs)
        reference = ColdIronEnv(**(space_kwargs or self._kwargs))
        self.observation_space = reference.observation_space
        self.action_space = reference.action_space

    def set_env_kwargs(self, env_kwargs: dict[str, Any]) -> None:
        if env_kwargs != self._kwargs:
            self._pending = dict(env_kwargs)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if self._pending is not None:
            rng = self.inner.np_random
            self._kwargs, self._pending = self._pending, None
            self.inner = ColdIronEnv(**self._kwargs)
            if seed is None:  # deal on from the same (training-stream) generator
                self.inner.np_random = rng
        return self.inner.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        return self.inner.step(action)

    def action_masks(self) -> np.ndarray:
        return self.inner.action_masks()


class StreamSeededVecEnv(VecEnvWrapper):
    """A training env whose seeds are always deal-stream seeds.

    Stable-Baselines3 seeds the env it is given: the algorithm's constructor and
    ``load`` call ``set_random_seed(seed)``, which calls ``env.seed(seed)``, and a plain
    ``VecEnv`` then deals env ``i`` from ``reset(seed=seed + i)``: the deals of
    ``evaluate.py --seed seed+i``. Here ``seed(s)`` deals env ``i`` from
    ``stream_seed(stream, s, first_index + i)`` instead (a random run seed for
    ``seed(None)``), so whoever seeds the env, with whatever value, it deals from its own
    stream: never an evaluation deal (tests/test_held_out.py checks the decks dealt).
    ``first_index`` moves a resumed run on to deals it has not played.
    """

    def __init__(self, venv: VecEnv, stream: DealStream, first_index: int = 0) -> None:
        super().__init__(venv)
        stream_seed(stream, 0, first_index + venv.num_envs - 1)  # refuses an index too large
        self.stream = stream
        self.first_index = first_index

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        if seed is None:
            seed = int(np.random.default_rng().integers(1 << STREAM_SEED_BITS))
        return self.venv.seed(stream_seed(self.stream, seed, self.first_index))

    def reset(self) -> Any:
        return self.venv.reset()

    def step_wait(self) -> Any:
        return self.venv.step_wait()


def build_vec_env(
    kind: VecEnvKind, n_envs: int, env_kwargs: dict[str, Any], seed: int | None = None
) -> VecEnv:
    """The SB3 ``VecEnv`` of ``n_envs`` Cold Iron games, with episode statistics (as SB3's
    ``make_vec_env``): ``native`` (:class:`~agents.learning.sb3_vec.ColdIronSB3VecEnv`, one
    NumPy step for all, under a ``VecMonitor`` that visits only finished envs), ``dummy`` or
    ``subproc`` (a :class:`StagedEnv` each, under a ``Monitor``); all switch curriculum options
    (:func:`set_vec_env_kwargs`). ``seed``: env ``i`` deals ``reset(seed=seed + i)``
    first: evaluation's deals, so a training env wraps this in :class:`StreamSeededVecEnv`
    (:func:`make_training_env`)."""
    if kind not in get_args(VecEnvKind):
        raise ValueError(f"vec_env kind must be one of {get_args(VecEnvKind)}, got {kind!r}")
    venv: VecEnv
    if kind == "native":
        try:
            from agents.learning.sb3_vec import (  # noqa: PLC0415
                ColdIronSB3VecEnv,
                FinishedOnlyVecMonitor,
            )
        except ImportError as exc:
            raise TrainingError(
                f"vec_env 'native' is not available ({exc}); use vec_env: dummy or subproc"
            ) from None
        venv = FinishedOnlyVecMonitor(ColdIronSB3VecEnv(n_envs, **env_kwargs))
    else:
        space_kwargs = {k: v for k, v in env_kwargs.items() if k not in CURRICULUM_KEYS}

        def make() -> gym.Env[Any, Any]:
            return Monitor(StagedEnv(env_kwargs, space_kwargs, ignore_sigint=kind == "subproc"))

        if kind == "subproc":
            fork = "fork" if sys.platform != "win32" else None
            venv = SubprocVecEnv([make] * n_envs, start_method=fork)
        else:
            venv = DummyVecEnv([make] * n_envs)
    if seed is not None:
        venv.seed(seed)
    return venv


def set_vec_env_kwargs(venv: VecEnv, env_kwargs: dict[str, Any]) -> None:
    """Switch every env of ``venv`` to ``env_kwargs`` from its next episode."""
    base: Any = venv
    while isinstance(base, VecEnvWrapper):
        base = base.venv
    if hasattr(base, "set_env_kwargs"):  # a native vec env that supports curricula
        base.set_env_kwargs(dict(env_kwargs))
        return
    try:
        venv.env_method("set_env_kwargs", dict(env_kwargs))
    except AttributeError:
        raise TrainingError(
            f"the {type(base).__name__} training env cannot change rule options "
            "(curriculum); use vec_env: dummy or subproc"
        ) from None


def make_training_env(
    cfg: Config, timesteps: int = 0, normalizer_path: Path | None = None, first_index: int = 0
) -> VecEnv:
    """The training env stack for ``cfg`` at ``timesteps`` (curriculum stage). Env ``i``
    deals from ``stream_seed(TRAINING, cfg.seed, first_index + i)`` whoever seeds it
    (:class:`StreamSeededVecEnv`)."""
    kwargs = cfg.stage_env_kwargs(timesteps)
    base = build_vec_env(cfg.training.vec_env, cfg.training.n_envs, kwargs)
    venv: VecEnv = StreamSeededVecEnv(base, DealStream.TRAINING, first_index)
    venv.seed(cfg.seed)
    if cfg.shaping.enabled:
        venv = ShapingVecEnv(
            venv, cfg.shaping_gamma, cfg.shaping.coefficient, cfg.shaping.potential
        )
    if cfg.training.normalize_obs or cfg.training.normalize_reward:
        if normalizer_path is not None and normalizer_path.is_file():
            venv = VecNormalize.load(str(normalizer_path), venv)
            venv.training = True
        else:
            gamma = float(cfg.algorithm.hyperparameters.get("gamma", 0.99))
            venv = VecNormalize(
                venv,
                norm_obs=cfg.training.normalize_obs,
                norm_reward=cfg.training.normalize_reward,
                gamma=gamma,
            )
    return venv


# ---------------------------------------------------------------- evaluation
def evaluate_model(
    model: BaseAlgorithm,
    env_kwargs: dict[str, Any],
    seeds: Sequence[int],
    obs_normalizer: VecNormalize | None = None,
) -> AgentResult:
    """Play deal ``reset(seed=s)`` for every ``s`` with ``model`` (masked, deterministic).

    Plain ``ColdIronEnv`` instances: no shaping, no curriculum, whatever the
    training env uses. Up to :data:`~agents.evaluation.lockstep.LOCKSTEP_BATCH` games run
    in lockstep, one forward pass per step for the whole batch.
    """
    policy = MaskedPolicy(model, obs_normalizer)
    result = AgentResult("model")
    for episode in play_lockstep(policy, env_kwargs, [{"seed": int(s)} for s in seeds]):
        result.add(episode.outcome, episode.turn, episode.steps)
    return result


def eval_seeds(cfg: Config) -> list[int]:
    """The fixed deals of periodic evaluation: the first ``episodes`` deals of the validation
    stream of ``evaluation.seed`` (never a training, imitation or reported deal)."""
    ev = cfg.evaluation
    return [stream_seed(DealStream.VALIDATION, ev.seed, k) for k in range(ev.episodes)]


# ---------------------------------------------------------------- run directory
class _InRun:
    """A :class:`RunDir` attribute: the path of the file or folder ``name`` in the run."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, run: RunDir | None, owner: type[RunDir] | None = None) -> Path:
        if run is None:
            raise AttributeError(f"RunDir.{self.name}: a path of one run, read on a RunDir")
        return run.root / self.name

    def __set__(self, run: RunDir, value: object) -> None:
        raise AttributeError(f"RunDir paths are fixed by its root: cannot set {self.name}")


@dataclass
class RunDir:
    """Paths of one run directory (layout: ``docs/run_directory.md``)."""

    root: Path
    config = _InRun(CONFIG_FILE)
    meta = _InRun(META_FILE)
    model = _InRun(MODEL_FILE)
    best_model = _InRun(BEST_MODEL_FILE)
    normalizer = _InRun(VECNORMALIZE_FILE)
    eval_csv = _InRun(EVAL_CSV)
    eval_json = _InRun(EVAL_JSON)
    curve = _InRun(CURVE_FILE)
    checkpoint = _InRun(CHECKPOINT_DIR)
    tensorboard = _InRun(TB_DIR)

    def load_history(self) -> list[dict[str, Any]]:
        return list(_run_record(self.eval_json, dict).get("evaluations", []))


@contextlib.contextmanager
def recorded_signals() -> Iterator[list[int]]:
    """While in force, SIGINT and SIGTERM are only recorded (main thread only); yields the
    list of those that arrived (the caller decides).

    Used while learning (:class:`StopOnRequest` ends ``learn`` at the next step), while
    saving (a second Ctrl-C must not break the save) and by the tuning parent. A
    ``KeyboardInterrupt`` raised by a signal handler can land in a weakref callback or a
    finalizer, where Python prints "Exception ignored" and carries on: the stop is lost.
    """
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda signum, _frame: caught.append(signum))
    try:
        yield caught
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class StopOnRequest(BaseCallback):
    """Ends ``learn`` at the next env step once a stop was requested."""

    def __init__(self, requests: list[int]) -> None:
        super().__init__(verbose=0)
        self.requests = requests

    def _on_step(self) -> bool:
        return not self.requests


def sigterm_as_ctrl_c() -> None:
    """Make SIGTERM (a scheduler or ``kill`` stopping the job) save and stop like Ctrl-C."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def write_learning_curve(history: list[dict[str, Any]], path: Path, title: str) -> None:
    """Evaluation win rate with its 95% Wilson interval against timesteps (PNG)."""
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 (after choosing the backend)

    fig, ax = plt.subplots(figsize=(7, 4))
    if history:
        x = np.array([h["timesteps"] for h in history], dtype=float)
        y = np.array([h["win_rate"] for h in history]) * 100
        lo = np.array([h["ci_low"] for h in history]) * 100
        hi = np.array([h["ci_high"] for h in history]) * 100
        ax.fill_between(x, lo, hi, alpha=0.25, label="95% Wilson interval")
        ax.plot(x, y, marker="o", label="evaluation win rate")
        ax.legend(loc="best")
    ax.set_xlabel("timesteps")
    ax.set_ylabel("win rate (%)")
    episodes = history[-1]["episodes"] if history else 0
    ax.set_title(f"{title} ({episodes} fixed deals per evaluation)")
    ax.grid(alpha=0.3)
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


# ---------------------------------------------------------------- callback
@dataclass
class RunState:
    """What the callback keeps across a run (and a resume)."""

    history: list[dict[str, Any]] = field(default_factory=list)
    best_win_rate: float = -1.0


class RunCallback(BaseCallback):
    """Periodic evaluation, best model, checkpoints and curriculum switches."""

    def __init__(self, cfg: Config, run: RunDir, state: RunState, title: str) -> None:
        super().__init__(verbose=0)
        self.cfg = cfg
        self.run = run
        self.state = state
        self.title = title
        self.seeds = eval_seeds(cfg)
        self._next_eval = 0
        self._next_ckpt = 0
        self._stage_kwargs: dict[str, Any] | None = None

    def _on_training_start(self) -> None:
        n = self.model.num_timesteps
        self._next_eval = (n // self.cfg.evaluation.freq + 1) * self.cfg.evaluation.freq
        self._next_ckpt = (n // self.cfg.checkpoint.freq + 1) * self.cfg.checkpoint.freq
        self._stage_kwargs = self.cfg.stage_env_kwargs(n)
        if not self.state.history or self.state.history[-1]["timesteps"] < n:
            self.evaluate()

    def _on_step(self) -> bool:
        n = self.model.num_timesteps
        if n >= self._next_eval:
            self._next_eval = (n // self.cfg.evaluation.freq + 1) * self.cfg.evaluation.freq
            self.evaluate()
        if n >= self._next_ckpt:
            self._next_ckpt = (n // self.cfg.checkpoint.freq + 1) * self.cfg.checkpoint.freq
            save_checkpoint(self.model, self.run, self.cfg)
        return True

    def _on_rollout_end(self) -> None:
        kwargs = self.cfg.stage_env_kwargs(self.model.num_timesteps)
        if kwargs != self._stage_kwargs:
            self._stage_kwargs = kwargs
            env = self.model.get_env()
            assert env is not None
            set_vec_env_kwargs(env, kwargs)
            rules = RuleOptions.from_kwargs(kwargs)
            for key in CURRICULUM_KEYS:
                self.logger.record(f"curriculum/{key}", getattr(rules, key))

    def evaluate(self) -> dict[str, Any]:
        model = self.model
        normalizer = model.get_vec_normalize_env()
        t0 = time.perf_counter()
        result = evaluate_model(model, self.cfg.env_kwargs(), self.seeds, normalizer)
        figures = {k: v for k, v in result.to_dict().items() if k not in UNRECORDED}
        record = {
            "timesteps": int(model.num_timesteps),
            **figures,
            "eval_seconds": round(time.perf_counter() - t0, 3),
            "time": utc_now(),
        }
        self.state.history.append(record)
        write_history(self.run, self.state.history)
        write_learning_curve(self.state.history, self.run.curve, self.title)
        if result.win_rate > self.state.best_win_rate:
            self.state.best_win_rate = result.win_rate
            atomic_save(self.run.best_model, model.save)
        if self.logger is not None:
            self.logger.record("eval/win_rate", result.win_rate)
            self.logger.record("eval/ci_low", record["ci_low"])
            self.logger.record("eval/ci_high", record["ci_high"])
            self.logger.record("eval/mean_turns", result.mean_turns)
        return record


def write_history(run: RunDir, history: list[dict[str, Any]]) -> None:
    atomic_write_json(run.eval_json, {"evaluations": history})
    buf = io.StringIO()
    columns = ["timesteps", "episodes", "wins", "win_rate", "ci_low", "ci_high"]
    columns += [f"outcome_{o}" for o in OUTCOMES] + ["mean_turns", "time"]
    writer = csv.writer(buf)
    writer.writerow(columns)
    for h in history:
        writer.writerow(
            [h["timesteps"], h["episodes"], h["wins"], f"{h['win_rate']:.6f}"]
            + [f"{h['ci_low']:.6f}", f"{h['ci_high']:.6f}"]
            + [h["outcomes"].get(o, 0) for o in OUTCOMES]
            + [f"{h['mean_turns']:.3f}", h["time"]]
        )
    atomic_write_text(run.eval_csv, buf.getvalue())


# ---------------------------------------------------------------- checkpoints
CHECKPOINT_SLOT: Final = "checkpoint-"
"""Prefix of the folders holding checkpoints; ``checkpoint`` is a link to the latest."""
STAGING_PREFIX: Final = ".staging-"
_SLOT_NAME: Final = re.compile(rf"{CHECKPOINT_SLOT}(\d{{12}}|legacy)-[0-9a-f]{{8}}")
"""A checkpoint folder's name as :func:`save_checkpoint` makes it (nothing else is touched)."""
_STAGING_NAME: Final = re.compile(
    rf"{re.escape(STAGING_PREFIX)}({_SLOT_NAME.pattern}|link-[0-9a-f]{{8}})"
)
_HALF_WRITTEN_NAME: Final = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")
"""A temporary file of :func:`agents.atomic.atomic_target` (``tempfile.mkstemp``'s name)."""


def save_checkpoint(
    model: BaseAlgorithm, run: RunDir, cfg: Config, reason: str = "periodic"
) -> None:
    """Everything needed to resume: model, normalizer, replay buffer and ``state.json``.

    Written whole into a new folder, which then becomes the checkpoint by one atomic
    replacement of the link ``checkpoint``: a kill at any moment (``kill -9`` included)
    leaves the previous checkpoint or the new one, never a mix of the two. Older
    checkpoint folders are removed afterwards.
    """
    steps = int(model.num_timesteps)
    slot = run.root / f"{CHECKPOINT_SLOT}{steps:012d}-{uuid.uuid4().hex[:8]}"
    staging = run.root / f"{STAGING_PREFIX}{slot.name}"
    staging.mkdir(parents=True)
    atomic_save(staging / MODEL_FILE, model.save)
    normalizer = model.get_vec_normalize_env()
    if normalizer is not None:
        atomic_write_bytes(staging / VECNORMALIZE_FILE, pickle.dumps(normalizer))
    if cfg.algorithm.spec.off_policy and getattr(model, "replay_buffer", None) is not None:
        atomic_save(staging / REPLAY_FILE, model.save_replay_buffer)  # type: ignore[attr-defined]
    atomic_write_json(
        staging / STATE_FILE, {"timesteps": steps, "reason": reason, "time": utc_now()}
    )
    os.rename(staging, slot)
    _point_checkpoint_at(run, slot)
    tidy_checkpoints(run)


def _point_checkpoint_at(run: RunDir, slot: Path) -> None:
    """Make ``checkpoint`` a link to ``slot`` in one atomic step."""
    link = run.checkpoint
    if link.is_dir() and not link.is_symlink():  # a run directory of an older layout
        os.rename(link, run.root / f"{CHECKPOINT_SLOT}legacy-{uuid.uuid4().hex[:8]}")
    temporary = run.root / f"{STAGING_PREFIX}link-{uuid.uuid4().hex[:8]}"
    try:
        os.symlink(slot.name, temporary)
    except OSError:  # no symbolic links here (Windows without the privilege): not atomic
        if link.is_symlink():
            link.unlink()
        elif link.exists():
            shutil.rmtree(link)
        os.rename(slot, link)
        return
    os.replace(temporary, link)


def tidy_checkpoints(run: RunDir) -> list[str]:
    """Remove what a kill can leave behind: half-written checkpoint folders, links and files,
    and checkpoint folders the link no longer points at. Only names training makes are
    touched (a user's ``checkpoint-backup`` stays), and no checkpoint folder is removed
    while the link is missing or broken (:func:`relink_checkpoint` mends that first).
    Returns the names removed."""
    # a sound link, or a real folder where symbolic links cannot be made (then no slot is
    # the checkpoint, and every slot is stale)
    linked = (run.checkpoint / STATE_FILE).is_file()
    current = run.checkpoint.resolve() if linked else None
    removed = []
    for entry in run.root.iterdir():
        name = entry.name
        stale_slot = (
            current is not None and _SLOT_NAME.fullmatch(name) and entry.resolve() != current
        )
        half_written = _HALF_WRITTEN_NAME.fullmatch(name) and entry.is_file()
        if _STAGING_NAME.fullmatch(name) or stale_slot or half_written:
            _remove(entry)
            removed.append(name)
    return sorted(removed)


def relink_checkpoint(run: RunDir) -> str | None:
    """Point a missing or broken ``checkpoint`` link (a copy or sync tool that drops links)
    at the newest complete checkpoint folder; the folder's name, or None when the link
    was sound or there is no complete folder."""
    link = run.checkpoint
    if (link / STATE_FILE).is_file() or (link.exists() and not link.is_symlink()):
        return None
    slots = [
        entry
        for entry in run.root.iterdir()
        if _SLOT_NAME.fullmatch(entry.name) and (entry / MODEL_FILE).is_file()
        and (entry / STATE_FILE).is_file()
    ]  # fmt: skip
    if not slots:
        return None
    newest = max(slots, key=lambda slot: (slot.name.split("-")[1] != "legacy", slot.name))
    if link.is_symlink():
        link.unlink()
    _point_checkpoint_at(run, newest)
    return newest.name


def _remove(entry: Path) -> None:
    """Delete a file, a link (not what it points at) or a folder with its contents."""
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry)
    else:
        entry.unlink()


def save_final(model: BaseAlgorithm, run: RunDir) -> None:
    atomic_save(run.model, model.save)
    normalizer = model.get_vec_normalize_env()
    if normalizer is not None:
        atomic_write_bytes(run.normalizer, pickle.dumps(normalizer))


# ---------------------------------------------------------------- models
def rollout_size(cfg: Config) -> int:
    """Steps an algorithm collects between two checks of its budget: ``n_steps * n_envs``
    for on-policy algorithms, ``train_freq * n_envs`` for off-policy ones."""
    spec = cfg.algorithm.spec
    hyper = cfg.algorithm.hyperparameters
    if spec.off_policy:
        per_env = int(hyper.get("train_freq", default_hyperparameter(spec, "train_freq")))
    else:
        per_env = int(hyper.get("n_steps", default_hyperparameter(spec, "n_steps")))
    return per_env * cfg.training.n_envs


def steps_to_train(cfg: Config, done: int) -> int:
    """The steps ``learn`` takes from ``done`` to reach ``training.total_timesteps``: rounded
    up to whole rollouts (SB3 never stops inside one), so the progress bar ends at its total."""
    left = cfg.training.total_timesteps - done
    if left <= 0:
        return 0
    size = rollout_size(cfg)
    return -(-left // size) * size


def check_device(device: str, config_file: str | None = None) -> None:
    """Refuse ``training.device: cuda`` where torch sees no CUDA device (Stable-Baselines3
    would train on the CPU without a word while the run's config said cuda)."""
    if device == "cuda" and not torch.cuda.is_available():
        where = f"{config_file}: " if config_file else ""
        raise TrainingError(
            f"{where}training.device: 'cuda', but torch {torch.__version__} sees no CUDA "
            "device on this machine; use device: cpu (or auto: the GPU when there is one)"
        )


def build_model(cfg: Config, venv: VecEnv, run: RunDir) -> BaseAlgorithm:
    check_device(cfg.training.device)  # train() checked it naming the file; other callers too
    spec = cfg.algorithm.spec
    cls = spec.load_class()
    model = cls(
        cfg.algorithm.policy or spec.policy_name(cfg.env.observation_mode),
        venv,
        policy_kwargs=policy_kwargs(cfg),
        tensorboard_log=str(run.tensorboard),
        seed=cfg.seed,
        device=cfg.training.device,
        verbose=0,
        **algorithm_kwargs(cfg),
    )
    tag_model(model, spec.name, cfg.env_kwargs())
    return model


def _run_record(path: Path, kind: type) -> Any:
    """A run directory's JSON record (``kind()`` when absent): a damaged one is a
    :class:`TrainingError` naming it."""
    try:
        doc = read_json(path, kind())
    except ValueError as err:
        raise TrainingError(f"{err}: the run directory is damaged") from None
    if not isinstance(doc, kind):
        raise TrainingError(f"{path}: expected a JSON {kind.__name__}, got {doc!r:.80}")
    return doc


def _load_for_resume(cfg: Config, venv: VecEnv, run: RunDir) -> BaseAlgorithm:
    spec = cfg.algorithm.spec
    ck = run.checkpoint
    if not (ck / MODEL_FILE).is_file():
        raise TrainingError(f"{ck / MODEL_FILE}: no checkpoint to resume from")
    check_device(cfg.training.device, str(run.config))
    try:
        model = spec.load_class().load(ck / MODEL_FILE, env=venv, device=cfg.training.device)
    except (ValueError, KeyError, EOFError, OSError, BadZipFile, pickle.UnpicklingError) as err:
        # a damaged file (SB3 words a bad zip as a ValueError), or spaces the config changed
        raise TrainingError(f"{ck / MODEL_FILE}: cannot resume from it: {err}") from None
    model.tensorboard_log = str(run.tensorboard)
    model._last_obs = None  # force a fresh env reset
    if spec.off_policy and (ck / REPLAY_FILE).is_file():
        model.load_replay_buffer(ck / REPLAY_FILE)  # type: ignore[attr-defined]
    tag_model(model, spec.name, cfg.env_kwargs())
    return model


def prepare_run_dir(cfg: Config, out: Path | None, config_file: str | None) -> RunDir:
    """A fresh run directory (``out`` or ``runs/<name>-<time>``) holding the resolved config."""
    flag = "--out"
    if out is None:
        stem = cfg.name or (Path(config_file).stem if config_file else cfg.algorithm.name)
        out = Path("runs") / f"{stem}-{datetime.now():%Y%m%d-%H%M%S}"
        flag = "the run directory"
    try:
        check_writable(out, flag, folder=True)
    except ValueError as err:
        raise TrainingError(str(err)) from None
    if out.exists() and any(out.iterdir()):
        raise TrainingError(
            f"{out}: output directory exists and is not empty (use --resume {out} to continue it)"
        )
    out.mkdir(parents=True, exist_ok=True)
    run = RunDir(out)
    atomic_write_text(run.config, dump_config(cfg))
    return run


# ---------------------------------------------------------------- the phases
@dataclass
class Run:
    """One run as its phases share it: the directory, the config, ``meta.json`` as it will be
    written, the model and its training env (once built or loaded), the evaluation history."""

    dir: RunDir
    cfg: Config
    meta: dict[str, Any]
    log: Callable[[str], None]
    model: BaseAlgorithm | None = None
    venv: VecEnv | None = None
    state: RunState = field(default_factory=RunState)
    resumed: bool = False
    """Continued from a checkpoint (the timestep count and TensorBoard run go on)."""
    teacher_factory: Callable[[str], Any] | None = None
    extra_callbacks: Sequence[BaseCallback] = ()


Phase = Callable[[Run], bool]
"""A phase does what is left of it on the run's model and returns True when a stop request
(Ctrl-C, SIGTERM) ended it: the run then resumes where it stopped."""


def imitation(run: Run) -> bool:
    """Phase 1 (a new run): build the training env and the model, warm-start the model on a
    teacher's play (``imitation:``), save the first checkpoint. A stop before that
    checkpoint leaves nothing trained: the run starts over."""
    if run.model is not None:
        return False  # resumed: the checkpoint holds what this phase made
    cfg = run.cfg
    run.venv = make_training_env(cfg, 0)
    run.model = build_model(cfg, run.venv, run.dir)
    if cfg.imitation.enabled:
        from agents.learning import imitation as cloning  # noqa: PLC0415 (looked up when called)

        stats = cloning.warm_start(run.model, cfg, teacher_factory=run.teacher_factory, log=run.log)
        atomic_write_json(run.dir.root / IMITATION_FILE, stats)
    save_checkpoint(run.model, run.dir, cfg, reason="start")  # a hard kill resumes from here
    run.meta.update(status=STATUS_RUNNING, package_version=coldiron_env.__version__)
    atomic_write_json(run.dir.meta, run.meta)
    return False


def reinforcement_learning(run: Run) -> bool:
    """Phase 2: SB3's ``learn`` up to ``training.total_timesteps`` (periodic evaluations and
    checkpoints: :class:`RunCallback`), then a checkpoint and ``model.zip`` (at a stop too)
    and the evaluation of the end. Over once expert iteration has begun."""
    model, cfg, log = run.model, run.cfg, run.log
    assert model is not None
    if expert_rounds(run.dir.root):
        return False  # the checkpoint holds the end of RL, model.zip the rounds since
    title = f"{cfg.name or cfg.algorithm.name} (seed {cfg.seed})"
    callback = RunCallback(cfg, run.dir, run.state, title)
    remaining = steps_to_train(cfg, model.num_timesteps)
    if remaining > 0:
        log(
            f"training {remaining:,} steps: {cfg.training.total_timesteps:,} rounded up to whole "
            f"rollouts of {rollout_size(cfg):,} steps (the algorithm's unit of collection)"
            if model.num_timesteps + remaining != cfg.training.total_timesteps
            else f"training {remaining:,} steps"
        )
    stopped = False
    try:
        with recorded_signals() as requests:
            if remaining > 0:
                callbacks = [StopOnRequest(requests), callback, *run.extra_callbacks]
                model.learn(
                    total_timesteps=remaining,
                    callback=CallbackList(callbacks),
                    log_interval=cfg.training.log_interval,
                    tb_log_name=TB_RUN_NAME,
                    reset_num_timesteps=not run.resumed,
                    progress_bar=cfg.training.progress_bar,
                )
        stopped = bool(requests)
    except KeyboardInterrupt:  # raised by a callback, or off the main thread
        stopped = True
    if stopped:
        log(f"\ninterrupted at {model.num_timesteps} timesteps: saving a checkpoint")
    with recorded_signals() as caught:  # a second Ctrl-C or SIGTERM must not break the save
        save_checkpoint(model, run.dir, cfg, reason="interrupt" if stopped else "end")
        save_final(model, run.dir)
    if caught and not stopped:
        log("interrupted while saving: the model and checkpoint are saved")
        return True
    history = run.state.history
    if not stopped and (not history or history[-1]["timesteps"] < model.num_timesteps):
        callback.init_callback(model)
        callback.evaluate()
    return stopped


def expert_iteration(run: Run) -> bool:
    """Phase 3: the rounds of ``expert_iteration:`` (:mod:`agents.learning.expert_iteration`)
    after the last one recorded, each committed with its model and validated on the
    evaluation deals. A stop drops the round under way."""
    model, cfg, log = run.model, run.cfg, run.log
    assert model is not None
    settings, root = cfg.expert_iteration, run.dir.root
    rounds = expert_rounds(root)
    if len(rounds) >= settings.rounds:
        return False
    if rounds:  # the rounds so far are the model
        model.set_parameters(str(run.dir.model), exact_match=True, device=model.device)
    log(
        f"expert iteration: rounds {len(rounds) + 1}-{settings.rounds} of "
        f"{settings.episodes:,} deals, labelled by {settings.budget} over the network in "
        f"{settings.workers} process(es)"
    )
    start = start_hash(root, rounds)
    agent = SB3Agent(model, cfg.env_kwargs(), name=cfg.name or "model")
    gamma = float(getattr(model, "gamma", 1.0))
    labellers = Labellers(
        settings.workers,
        rollouts=settings.rollouts,
        targets=settings.targets,
        soft_z=settings.soft_z,
    )
    kept: dict[int, Demonstrations] = {}  # the kept rounds' labels: read from disk once
    env_kwargs, seeds = cfg.env_kwargs(), eval_seeds(cfg)  # each round's validation
    with recorded_signals() as requests, labellers:
        for r in range(len(rounds), settings.rounds):
            t0 = time.perf_counter()
            first = stream_seed(DealStream.SEARCH, cfg.seed, r * settings.episodes)
            demos = labellers.label(
                agent, settings.budget, settings.episodes, first, gamma, lambda: bool(requests)
            )
            if demos is None:
                break
            t1 = time.perf_counter()
            clone_on, before = demos, None
            if settings.keep_rounds > 1:  # the labels of the rounds before it too (DAgger)
                demos.save(labels_file(root, r))
                for k in kept_rounds(r, settings):
                    if k not in kept:  # a resumed run's (check_kept_labels found them)
                        kept[k] = Demonstrations.load(labels_file(root, k))
                clone_on = concat([*(kept[k] for k in kept_rounds(r, settings)), demos])
                kept = {k: kept[k] for k in kept_rounds(r + 1, settings) if k in kept}
                kept[r] = demos
                before = accuracy(model, demos)
            stats = behaviour_clone(
                model,
                clone_on,
                epochs=settings.epochs,
                batch_size=settings.batch_size,
                learning_rate=settings.learning_rate,
                value_pretrain=True,
                seed=r,
            )
            agent.reset()
            if before is not None:  # agreement on this round's labels, not the kept ones
                stats.update(accuracy_before=before, accuracy_after=accuracy(model, demos))
            record = {
                "round": r,
                "decisions": len(demos),
                "cloned_on": len(clone_on),
                "network_won": demos.wins,
                "episodes": demos.episodes,
                "agreement_before": stats["accuracy_before"],
                "agreement_after": stats["accuracy_after"],
                "label_seconds": round(t1 - t0, 1),
                "clone_seconds": round(time.perf_counter() - t1, 1),
            }
            log(
                f"round {r + 1}/{settings.rounds}: the network won {demos.wins}/"
                f"{demos.episodes} deals; agreed with the planner on "
                f"{stats['accuracy_before']:.2%} of {len(demos):,} decisions before cloning, "
                f"{stats['accuracy_after']:.2%} after ({record['label_seconds']:.0f} s + "
                f"{record['clone_seconds']:.0f} s)"
            )
            record["validation_win_rate"] = evaluate_model(model, env_kwargs, seeds).win_rate
            log(f"  validation deals won: {record['validation_win_rate']:.2%}")
            rounds.append(record)
            commit_round(root, model, cfg, start, rounds)
            forget_labels(root, r + 2 - settings.keep_rounds)  # keeps those round r + 1 needs
            if requests:
                break
    stopped = len(rounds) < settings.rounds
    if stopped:
        log(f"\ninterrupted during expert iteration: {len(rounds)} round(s) kept")
    return stopped


PHASES: Final[tuple[Phase, ...]] = (imitation, reinforcement_learning, expert_iteration)
"""A training run: imitation, then RL, then expert iteration (each skips what is done)."""


# ---------------------------------------------------------------- the run
@dataclass
class TrainResult:
    run_dir: Path
    timesteps: int
    interrupted: bool
    wall_seconds: float
    history: list[dict[str, Any]]
    expert_rounds: list[dict[str, Any]] = field(default_factory=list)
    """The expert-iteration rounds finished (``expert_iteration.json``)."""


def train(
    cfg: Config,
    out: Path | None = None,
    *,
    resume: Path | None = None,
    config_file: str | None = None,
    extra_callbacks: Sequence[BaseCallback] = (),
    teacher_factory: Callable[[str], Any] | None = None,
    log: Callable[[str], None] = print,
    resume_hint: bool = True,
) -> TrainResult:
    """Train ``cfg`` into a new run directory ``out``, or continue run ``resume``: the
    :data:`PHASES` in order, each doing what is left of it.

    On resume the run's own ``config.yaml`` is the config (``cfg`` is that
    config, possibly with a larger timestep budget or more expert-iteration rounds). A stop
    (Ctrl-C, SIGTERM) saves what the phase under way has done and returns with
    ``interrupted=True`` (and logs the ``--resume`` command unless ``resume_hint`` is false:
    a tuning trial is never resumed).
    """
    torch.set_num_threads(cfg.training.torch_threads)
    where = config_file or (str(Path(resume) / CONFIG_FILE) if resume is not None else None)
    check_device(cfg.training.device, where)
    t_start = time.perf_counter()
    if resume is not None and (RunDir(resume).root.is_dir()):
        relinked = relink_checkpoint(RunDir(resume))
        if relinked is not None:
            log(f"{resume}: the link 'checkpoint' was missing or broken: it points at {relinked}")
    if resume is not None and _stopped_before_training(RunDir(resume)):
        log(f"{resume}: stopped before training began (no checkpoint): starting it over")
        _clear_unstarted(RunDir(resume))
        out, resume = resume, None
    if resume is not None:
        run = _reopen(cfg, RunDir(resume), log)
    else:
        run = _start(cfg, out, config_file, log)
    run.teacher_factory, run.extra_callbacks = teacher_factory, extra_callbacks
    stopped = False
    try:
        for phase in PHASES:
            stopped = phase(run)
            if stopped:
                break
    except KeyboardInterrupt:  # a stop no phase records: during imitation, or raised by code
        stopped = True
    if not (run.dir.checkpoint / STATE_FILE).is_file():
        if run.venv is not None:
            with contextlib.suppress(Exception):
                run.venv.close()
        log("\ninterrupted before learning began (nothing trained yet)")
        if resume_hint:
            log(f"start it over with: .venv/bin/python scripts/train.py --resume {run.dir.root}")
        return TrainResult(run.dir.root, 0, True, time.perf_counter() - t_start, [])
    result = _finish(run, stopped, t_start)
    if stopped and resume_hint:
        log(f"resume with: .venv/bin/python scripts/train.py --resume {run.dir.root}")
    return result


def distill(
    start: str,
    out: Path,
    settings: ExpertIterationConfig,
    seed: int,
    *,
    start_path: Path | None = None,
    log: Callable[[str], None] = print,
) -> TrainResult:
    """Expert iteration on the trained network ``start``: a run of that one phase
    (:func:`expert_iteration`, its deals seeded by ``seed``) into ``out``, a run directory
    that ``evaluate.py`` loads (``model.zip``, ``config.yaml`` copied from the start's run,
    ``expert_iteration.json``, ``meta.json``). Rerunning continues after the last finished
    round (only ``settings.rounds`` may change). ``start`` is the network's name as given
    (recorded in ``meta.json``); ``start_path`` its run directory or zip (default
    ``Path(start)``; ``scripts/distill.py`` resolves the shipped names).
    """
    t_start = time.perf_counter()
    run_dir = RunDir(out)
    if settings.rounds < 1:
        raise TrainingError(f"--rounds must be at least 1, got {settings.rounds}")
    meta = _run_record(run_dir.meta, dict)
    if meta and (meta.get("start") != start or "rounds" in meta):  # "rounds": an older layout
        what = (
            f"another distillation (of {meta['start']!r})"
            if "start" in meta
            else "a run that is not a distillation"
        )
        raise TrainingError(
            f"{out} holds {what}; choose another --out or rerun with the same arguments to continue"
        )
    path = out if meta else Path(start) if start_path is None else start_path
    if not path.exists():
        raise TrainingError(f"{start!r} is not a trained network (no {path})")
    config = find_config(path / MODEL_FILE if path.is_dir() else path)
    if config is None:
        raise TrainingError(f"{start!r}: no {CONFIG_FILE} beside the model")
    data = {**load_config(config).to_dict(), "seed": seed}
    cfg = config_from_dict({**data, "expert_iteration": settings.model_dump()}, str(config))
    agent = load_sb3_agent(path, name=start)
    if not meta:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(run_dir.config, config.read_text(encoding="utf-8"))
        atomic_write_bytes(run_dir.model, model_bytes(agent.model))
        meta = {"start": start, "start_config": _shown(config), "seed": seed,
                "workers": settings.workers, **provenance(), "command": sys.argv,
                "start_time": utc_now()}  # fmt: skip
    elif len(expert_rounds(out)) < settings.rounds:  # a rerun continuing: its command kept
        resumed = {"time": utc_now(), "command": sys.argv, "rounds": settings.rounds}
        meta.setdefault("resumes", []).append(resumed)
    prepare_resume(cfg, out, log)
    meta.pop(SHA256_KEY, None)  # the files change from here
    meta["status"] = STATUS_RUNNING
    atomic_write_json(run_dir.meta, meta)
    run = Run(run_dir, cfg, meta, log, model=agent.model)
    result = _finish(run, expert_iteration(run), t_start)
    if result.interrupted:
        log(f"{len(result.expert_rounds)} round(s) kept in {out}; rerun to continue")
    return result


def _start(
    cfg: Config, out: Path | None, config_file: str | None, log: Callable[[str], None]
) -> Run:
    """A new run: its directory, the resolved config and ``meta.json`` (``starting``)."""
    run = prepare_run_dir(cfg, out, config_file)
    meta = {
        "config_file": config_file,
        RECIPE_KEY: cfg.to_dict(),
        "algorithm": cfg.algorithm.name,
        "seed": cfg.seed,
        **provenance(),
        "command": sys.argv,
        "start_time": utc_now(),
        "status": STATUS_STARTING,
    }
    atomic_write_json(run.meta, meta)
    return Run(run, cfg, meta, log)


def _reopen(cfg: Config, run: RunDir, log: Callable[[str], None]) -> Run:
    """A run continued: what a hard stop left half-made mended, the config checked and
    saved, the env and model loaded from the checkpoint, the evaluation history trimmed to
    the checkpoint's. Refused before anything is written: a config that changed more than
    :data:`RESUME_MAY_CHANGE`, a budget below the steps trained, a run with nothing left."""
    if not run.meta.is_file():
        raise TrainingError(
            f"{run.meta}: missing: it holds the recipe the run began with, so the config "
            "cannot be checked against it; restore it (a copy of the run) to resume"
        )
    meta = _run_record(run.meta, dict)
    check_recipe(cfg, run, meta.get(RECIPE_KEY))
    state = _run_record(run.checkpoint / STATE_FILE, dict)
    trained = state.get("timesteps", 0)
    if isinstance(trained, bool) or not isinstance(trained, int) or trained < 0:
        raise TrainingError(
            f"{run.checkpoint / STATE_FILE}: timesteps must be a whole number, got {trained!r}"
        )
    try:
        rounds = len(expert_rounds(run.root))
        history = run.load_history()
    except ValueError as err:  # expert_iteration.json, evaluations.json
        raise TrainingError(f"{err}: the run directory is damaged") from None
    if steps_to_train(cfg, trained) == 0:
        if trained < load_config(run.config).training.total_timesteps:  # RL not done
            raise TrainingError(
                f"{run.root}: --timesteps {cfg.training.total_timesteps:,} is not above the "
                f"{trained:,} timesteps already trained: a budget may be raised, not lowered"
            )
        if meta.get("status") == STATUS_COMPLETED and rounds >= cfg.expert_iteration.rounds:
            raise TrainingError(
                f"{run.root}: already completed ({trained:,} timesteps, {rounds} round(s) of "
                "expert iteration): nothing to resume; raise --timesteps or "
                "expert_iteration.rounds to train it further"
            )
    removed = tidy_checkpoints(run)
    if removed:
        log(f"{run.root}: removed what a hard stop left half-written: {', '.join(removed)}")
    prepare_resume(cfg, run.root, log)
    if rounds and steps_to_train(cfg, trained) > 0:
        raise TrainingError(
            f"{run.root}: RL ended and {rounds} round(s) of expert iteration followed; RL "
            f"cannot continue after them (total_timesteps {cfg.training.total_timesteps:,} > "
            f"{trained:,} trained)"
        )
    resumes = meta.setdefault("resumes", [])
    first_index = (len(resumes) + 1) * cfg.training.n_envs  # deals no earlier leg played
    try:
        venv = make_training_env(cfg, trained, run.checkpoint / VECNORMALIZE_FILE, first_index)
    except ValueError as exc:  # the training stream's indices are used up
        raise TrainingError(f"{run.root}: cannot resume again: {exc}") from None
    try:  # loaded before the run's files change: a damaged checkpoint leaves them as they were
        model = _load_for_resume(cfg, venv, run)
    except TrainingError:
        venv.close()
        raise
    if meta.pop(SHA256_KEY, None) is not None:  # the files change from here
        atomic_write_json(run.meta, meta)
    atomic_write_text(run.config, dump_config(cfg))
    resumes.append(
        {
            "time": utc_now(),
            "command": sys.argv,
            "timesteps": model.num_timesteps,
            "first_deal_index": first_index,
        }
    )
    meta.update(status=STATUS_RUNNING, package_version=coldiron_env.__version__)
    atomic_write_json(run.meta, meta)
    kept = [h for h in history if h["timesteps"] <= model.num_timesteps]
    best = max((h["win_rate"] for h in kept), default=-1.0)
    if len(kept) < len(history):  # evaluations of a model lost with a hard kill
        log(
            f"{run.root}: {len(history) - len(kept)} evaluation(s) after the checkpoint's "
            f"{model.num_timesteps:,} timesteps dropped (their model was not checkpointed)"
        )
        write_history(run, kept)
        if max(h["win_rate"] for h in history[len(kept) :]) > best:
            run.best_model.unlink(missing_ok=True)  # it was a dropped evaluation's model
    log(f"resuming {run.root} at {model.num_timesteps} timesteps")
    return Run(run, cfg, meta, log, model, venv, RunState(kept, best), resumed=True)


def check_recipe(cfg: Config, run: RunDir, recipe: dict[str, Any] | None) -> None:
    """Refuse to resume ``run`` with a config that differs from the one it began with
    (``recipe``, kept in ``meta.json``) beyond :data:`RESUME_MAY_CHANGE`: the checkpoint
    would be trained on under a config.yaml that does not describe it. Runs made before the
    recipe was kept, or whose recipe no longer validates, are not checked."""
    if recipe is None:
        return
    try:  # fields added since the run began take their defaults, as config.yaml's do
        recipe = config_from_dict(recipe).to_dict()
    except ValueError:
        return  # a recipe this version cannot read: nothing to hold config.yaml to
    changed = config_changes(recipe, cfg.to_dict())
    if changed := {k: v for k, v in changed.items() if k not in RESUME_MAY_CHANGE}:
        raise TrainingError(
            f"{run.config}: changed since the run began ({describe_changes(changed)}); a "
            f"resumed run keeps its recipe: only {', '.join(sorted(RESUME_MAY_CHANGE))} may change"
        )


def _finish(run: Run, stopped: bool, t_start: float) -> TrainResult:
    """The run's end (or stop): its env closed, ``meta.json`` completed with the SHA-256 of
    the files a loader checks."""
    model = run.model
    assert model is not None
    if run.venv is not None:
        with contextlib.suppress(Exception):
            run.venv.close()
    wall = time.perf_counter() - t_start
    rounds = expert_rounds(run.dir.root)
    run.meta.update(
        status="interrupted" if stopped else STATUS_COMPLETED,
        end_time=utc_now(),
        timesteps=int(model.num_timesteps),
        wall_seconds=round(wall + float(run.meta.get("wall_seconds", 0.0)), 1),
        expert_iteration_rounds=len(rounds),
    )
    run.meta[SHA256_KEY] = file_hashes(run.dir.root, PINNED_FILES)
    atomic_write_json(run.dir.meta, run.meta)
    timesteps = int(model.num_timesteps)
    return TrainResult(run.dir.root, timesteps, stopped, wall, run.state.history, rounds)


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it is under it (as commands name it)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


PINNED_FILES: Final = (MODEL_FILE, CONFIG_FILE, VECNORMALIZE_FILE, EXPERT_FILE)
"""The files whose SHA-256 ``meta.json`` records when a run stops (checked on load)."""
UNSTARTED_ENTRIES: Final = frozenset({CONFIG_FILE, META_FILE, IMITATION_FILE, "tb"})
"""What a run stopped before learning began can hold (all of it is made again)."""


def _clear_unstarted(run: RunDir) -> None:
    """Empty a run directory stopped before learning began; refuse anything unexpected."""
    tidy_checkpoints(run)  # a checkpoint folder a hard kill left unlinked
    extra = sorted(p.name for p in run.root.iterdir() if p.name not in UNSTARTED_ENTRIES)
    if extra:
        raise TrainingError(
            f"{run.root}: stopped before learning began, but holds {extra}, which training "
            "did not write; move them away to start the run over"
        )
    for entry in run.root.iterdir():
        _remove(entry)


def _stopped_before_training(run: RunDir) -> bool:
    """A run directory left by a stop before learning began: no checkpoint yet (the first
    is written before the status becomes ``running``; a hard kill can land in between)."""
    if (run.checkpoint / STATE_FILE).is_file() or not run.meta.is_file():
        return False
    try:
        status = json.loads(run.meta.read_text(encoding="utf-8")).get("status")
    except (OSError, ValueError):
        return False
    return status in (STATUS_STARTING, STATUS_RUNNING)
