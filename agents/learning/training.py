"""Training runs: a run is a list of resumable phases over one config.

:func:`train` runs :data:`PHASES` in order (what each writes: ``docs/run_directory.md``),
each doing what is left of it, so a run stopped anywhere (Ctrl-C, SIGTERM, ``kill -9``)
resumes where it stopped: :func:`imitation` (env and model built, the warm start, the
first checkpoint), :func:`reinforcement_learning` (SB3's ``learn`` with :class:`RunCallback`:
periodic evaluations, checkpoints, curriculum switches), :func:`expert_iteration` (rounds of
the planner over the network teaching it). :func:`distill` runs the last phase alone on a
trained network. Every file is written atomically (``agents.atomic``); a checkpoint is a
folder renamed into place whole (:func:`save_checkpoint`).
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
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
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, get_args
from zipfile import BadZipFile

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecNormalize
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
from agents.evaluation.plots import pyplot, save_png
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
from agents.learning.multiseed import run_status
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
from agents.learning.sb3_vec import ColdIronSB3VecEnv, FinishedOnlyVecMonitor
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
CHECKPOINTS_DIR: Final = "checkpoints"
"""The run's checkpoints: ``checkpoints/NNNNNN/``, the newest one the checkpoint."""
LEGACY_CHECKPOINT: Final = "checkpoint"
"""Where runs made before ``checkpoints/`` kept theirs (a folder, or a link to one)."""
STATE_FILE: Final = "state.json"
REPLAY_FILE: Final = "replay_buffer.pkl"
TB_DIR: Final = "tb"
TB_RUN_NAME: Final = "run"
STATUS_STARTING: Final = "starting"
"""``meta.json`` status until learning begins (the imitation warm start runs before it)."""
STATUS_RUNNING: Final = "running"
STATUS_COMPLETED: Final = "completed"
RECIPE_KEY: Final = "recipe"
"""``meta.json``'s copy of the resolved config as the run began (:func:`check_recipe`)."""
RESUME_MAY_CHANGE: Final = frozenset(
    {"training.total_timesteps", "expert_iteration.rounds",  # the budgets
     "training.progress_bar", "training.torch_threads", "training.device", "training.vec_env",
     "training.log_interval", "training.minutes", "expert_iteration.workers"}  # how it runs
)  # fmt: skip
"""The config keys a resumed run may change (``vec_env``: the native and SB3's vector envs
play the same games; ``workers``: the labels do not depend on it)."""
IMITATION_SHARE: Final = 0.3  # of a time budget (training.minutes), the warm start's at most
RL_SHARE: Final = 0.6  # of the time left when RL begins (training.minutes); rounds: the rest
RL_SHARE_ALONE: Final = 0.95  # with no rounds; the rest: RL's last evaluation, the files
RL_LEAST: Final = 0.5  # of RL's steps: a share holding fewer keeps just the probe (kept_rl_steps)
PROBE_ROLLOUTS: Final = 2  # RL's rate is measured on the first rollouts
RATE_KEYS: Final = ("win_rate", "ci_low", "ci_high")
UNRECORDED: Final = frozenset({"agent", "seconds", "won_bits"})
"""The keys of ``AgentResult.to_dict`` an evaluation record leaves out."""
PINNED_FILES: Final = (MODEL_FILE, CONFIG_FILE, VECNORMALIZE_FILE, EXPERT_FILE)
"""The files whose SHA-256 ``meta.json`` records when a run stops (checked on load)."""
UNSTARTED_ENTRIES: Final = frozenset(
    {CONFIG_FILE, META_FILE, IMITATION_FILE, TB_DIR, CHECKPOINTS_DIR}
)
"""What a run stopped before learning began can hold (all of it is made again)."""


# ---------------------------------------------------------------- envs
class StagedEnv(gym.Env[Any, np.int64]):
    """A ``ColdIronEnv`` whose rule options can change between episodes (curriculum):
    :meth:`set_env_kwargs` takes effect at the next ``reset``. The observation space is that
    of ``space_kwargs`` (the real game), so it never changes."""

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

    SB3 seeds the env it is given (``env.seed(seed)``), and a plain ``VecEnv`` then deals env
    ``i`` from ``reset(seed=seed + i)``: the deals of ``evaluate.py --seed seed+i``. Here env
    ``i`` deals from ``stream_seed(stream, s, first_index + i)`` (``seed(None)``: a random
    ``s``), never an evaluation deal; ``first_index`` moves a resumed run on to new deals.
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
    """``n_envs`` Cold Iron games as an SB3 ``VecEnv`` with episode statistics: ``native``
    (:class:`~agents.learning.sb3_vec.ColdIronSB3VecEnv`, one NumPy step for all), ``dummy``
    or ``subproc`` (a :class:`StagedEnv` each, under a ``Monitor``). ``seed``: env ``i`` deals
    ``reset(seed=seed + i)``, evaluation's deals (training wraps it in
    :class:`StreamSeededVecEnv`)."""
    if kind not in get_args(VecEnvKind):
        raise ValueError(f"vec_env kind must be one of {get_args(VecEnvKind)}, got {kind!r}")
    venv: VecEnv
    if kind == "native":
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
    """Switch every env of ``venv`` (any of :func:`build_vec_env`'s) to ``env_kwargs`` from
    its next episode (the native vec env's one call reaches its vector env)."""
    venv.env_method("set_env_kwargs", dict(env_kwargs))


def make_training_env(
    cfg: Config, timesteps: int = 0, normalizer_path: Path | None = None, first_index: int = 0
) -> VecEnv:
    """The training env stack for ``cfg`` at ``timesteps`` (its curriculum stage): env ``i``
    deals ``stream_seed(TRAINING, cfg.seed, first_index + i)``; shaping, normalisation."""
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
            venv = VecNormalize(
                venv,
                norm_obs=cfg.training.normalize_obs,
                norm_reward=cfg.training.normalize_reward,
                gamma=cfg.gamma,
            )
    return venv


# ---------------------------------------------------------------- evaluation
def evaluate_model(
    model: BaseAlgorithm,
    env_kwargs: dict[str, Any],
    seeds: Sequence[int],
    obs_normalizer: VecNormalize | None = None,
) -> AgentResult:
    """Play deal ``reset(seed=s)`` for every ``s`` with ``model`` (masked, deterministic) on
    plain ``ColdIronEnv``s (no shaping, no curriculum), a forward pass a step per batch."""
    result = AgentResult("model")
    policy = MaskedPolicy(model, obs_normalizer)
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

    def __get__(self, run: RunDir, owner: object = None) -> Path:
        return run.root / self.name


@dataclass(frozen=True)
class RunDir:
    """Paths of one run directory (layout: ``docs/run_directory.md``)."""

    root: Path
    config = _InRun(CONFIG_FILE)
    meta = _InRun(META_FILE)
    model = _InRun(MODEL_FILE)
    best_model = _InRun(BEST_MODEL_FILE)
    eval_csv = _InRun(EVAL_CSV)
    eval_json = _InRun(EVAL_JSON)
    curve = _InRun(CURVE_FILE)
    checkpoints = _InRun(CHECKPOINTS_DIR)
    tensorboard = _InRun(TB_DIR)


@contextlib.contextmanager
def recorded_signals() -> Iterator[list[int]]:
    """While in force, SIGINT and SIGTERM are only recorded (main thread only) in the list
    yielded, for the caller to act on: while learning (:class:`StopOnRequest`), while saving
    (a second Ctrl-C must not break the save), while tuning's workers run. A
    ``KeyboardInterrupt`` raised by a handler can land in a finalizer, where Python prints
    "Exception ignored" and carries on: the stop would be lost."""
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


def sigterm_as_ctrl_c() -> None:
    """Make SIGTERM (a scheduler or ``kill`` stopping the job) save and stop like Ctrl-C."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def write_learning_curve(history: list[dict[str, Any]], path: Path, title: str) -> None:
    """Evaluation win rate with its 95% Wilson interval against timesteps (PNG)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    if history:
        x = np.array([h["timesteps"] for h in history], dtype=float)
        rate, low, high = (np.array([h[k] for h in history]) * 100 for k in RATE_KEYS)
        ax.fill_between(x, low, high, alpha=0.25, label="95% Wilson interval")
        ax.plot(x, rate, marker="o", label="evaluation win rate")
        ax.legend(loc="best")
    ax.set_xlabel("timesteps")
    ax.set_ylabel("win rate (%)")
    episodes = history[-1]["episodes"] if history else 0
    ax.set_title(f"{title} ({episodes} fixed deals per evaluation)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_png(fig, path, dpi=100)


def write_history(run: RunDir, history: list[dict[str, Any]]) -> None:
    """``evaluations.json`` and ``evaluations.csv``."""
    atomic_write_json(run.eval_json, {"evaluations": history})
    buf = io.StringIO()
    writer = csv.writer(buf)
    outcomes = [f"outcome_{o}" for o in OUTCOMES]
    writer.writerow(["timesteps", "episodes", "wins", *RATE_KEYS, *outcomes, "mean_turns", "time"])
    for h in history:
        counts = [h["episodes"], h["wins"]]
        rates = [f"{h[k]:.6f}" for k in RATE_KEYS]
        ends = [h["outcomes"].get(o, 0) for o in OUTCOMES]
        writer.writerow(
            [h["timesteps"], *counts, *rates, *ends, f"{h['mean_turns']:.3f}", h["time"]]
        )
    atomic_write_text(run.eval_csv, buf.getvalue())


# ---------------------------------------------------------------- callback
def _next_multiple(n: int, freq: int) -> int:
    return (n // freq + 1) * freq


class RunCallback(BaseCallback):
    """Periodic evaluation, best model, checkpoints and curriculum switches; ends ``learn``
    at the next step once a stop was requested (``requests``: :func:`recorded_signals`').

    Hand-written rather than sb3-contrib's ``MaskableEvalCallback``: evaluation plays the
    fixed validation deals (a seed per deal) in lockstep batches for every algorithm and
    records Wilson intervals and outcomes, none of which that callback does."""

    def __init__(self, run: Run) -> None:
        super().__init__(verbose=0)
        self.run, self.cfg = run, run.cfg
        self.seeds = eval_seeds(run.cfg)
        self._next_eval = self._next_ckpt = 0
        self._stage_kwargs: dict[str, Any] | None = None
        self._go_on = True
        self._started = False  # learn() may be called twice: a time budget's rate probe first
        self.requests: list[int] = []

    def _on_training_start(self) -> None:
        n = self.model.num_timesteps
        self._next_eval = _next_multiple(n, self.cfg.evaluation.freq)
        self._next_ckpt = _next_multiple(n, self.cfg.checkpoint.freq)
        self._stage_kwargs = self.cfg.stage_env_kwargs(n)
        if not self._started and (not self.run.history or self.run.history[-1]["timesteps"] < n):
            self._report(self.evaluate())
        self._started = True

    def _on_step(self) -> bool:
        n = self.model.num_timesteps
        if n >= self._next_eval:
            self._next_eval = _next_multiple(n, self.cfg.evaluation.freq)
            self._report(self.evaluate())
        if n >= self._next_ckpt:
            self._next_ckpt = _next_multiple(n, self.cfg.checkpoint.freq)
            save_checkpoint(self.model, self.run.dir, self.cfg)
        return self._go_on and not self.requests

    def _report(self, record: dict[str, Any]) -> None:
        """Hand an evaluation made while learning to ``on_evaluation``, which may stop it."""
        if self.run.on_evaluation is not None and not self.run.on_evaluation(record):
            self._go_on = False

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
        t0 = time.perf_counter()
        result = evaluate_model(
            model, self.cfg.env_kwargs(), self.seeds, model.get_vec_normalize_env()
        )
        figures = {k: v for k, v in result.to_dict().items() if k not in UNRECORDED}
        seconds = round(time.perf_counter() - t0, 3)
        record = {"timesteps": int(model.num_timesteps), **figures, "eval_seconds": seconds}
        record["time"] = utc_now()
        run = self.run
        run.history.append(record)
        write_history(run.dir, run.history)
        title = f"{self.cfg.name or self.cfg.algorithm.name} (seed {self.cfg.seed})"
        write_learning_curve(run.history, run.dir.curve, title)
        if result.win_rate > run.best_win_rate:
            run.best_win_rate = result.win_rate
            atomic_save(run.dir.best_model, model.save)
        if getattr(model, "_logger", None) is not None:  # none before learn() began
            for key in ("win_rate", "ci_low", "ci_high", "mean_turns"):
                self.logger.record(f"eval/{key}", record[key])
        return record


# ---------------------------------------------------------------- checkpoints
_CHECKPOINT_NAME: Final = re.compile(r"\d{6,}")
_PARTIAL_NAME: Final = re.compile(r"\.partial-[0-9a-f]{8}")
_HALF_WRITTEN_NAME: Final = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")
"""A temporary file of :func:`agents.atomic.atomic_target` (``tempfile.mkstemp``'s name)."""


def _complete_checkpoints(run: RunDir) -> list[Path]:
    """``checkpoints/NNNNNN`` oldest first: each was renamed into place whole."""
    if not run.checkpoints.is_dir():
        return []
    found = [p for p in run.checkpoints.iterdir() if _CHECKPOINT_NAME.fullmatch(p.name)]
    return sorted(found, key=lambda p: int(p.name))


def latest_checkpoint(run: RunDir) -> Path | None:
    """The checkpoint a resume starts from: the newest in ``checkpoints/`` (or a run of the
    older layout's ``checkpoint`` folder or link); None before the first."""
    done = _complete_checkpoints(run)
    if done:
        return done[-1]
    legacy = run.root / LEGACY_CHECKPOINT
    return legacy if (legacy / STATE_FILE).is_file() else None


def save_checkpoint(
    model: BaseAlgorithm, run: RunDir, cfg: Config, reason: str = "periodic"
) -> Path:
    """Everything needed to resume (model, normalizer, replay buffer, ``state.json``) as the
    run's new checkpoint: written whole into a temporary folder, then renamed to the next
    number in ``checkpoints/``, so a kill at any moment (``kill -9`` included) leaves the
    previous checkpoint or this one, never a mix (the renames are not synced: a power cut is
    another matter). The older ones are removed after."""
    older = _complete_checkpoints(run)
    partial = run.checkpoints / f".partial-{uuid.uuid4().hex[:8]}"
    partial.mkdir(parents=True)
    save_model(model, partial)
    if cfg.algorithm.spec.off_policy and getattr(model, "replay_buffer", None) is not None:
        atomic_save(partial / REPLAY_FILE, model.save_replay_buffer)  # type: ignore[attr-defined]
    state = {"timesteps": int(model.num_timesteps), "reason": reason, "time": utc_now()}
    atomic_write_json(partial / STATE_FILE, state)
    final = run.checkpoints / f"{int(older[-1].name) + 1 if older else 1:06d}"
    os.rename(partial, final)
    for old in older:
        shutil.rmtree(old)
    return final


def tidy_checkpoints(run: RunDir) -> list[str]:
    """Remove what a kill can leave behind: unfinished checkpoint folders, checkpoints older
    than the newest, the atomic writers' half-written files. Only names training makes are
    touched (a user's files stay). Returns the names removed."""
    done = _complete_checkpoints(run)
    removed = []
    if run.checkpoints.is_dir():
        for entry in run.checkpoints.iterdir():
            if _PARTIAL_NAME.fullmatch(entry.name) or entry in done[:-1]:
                shutil.rmtree(entry)
                removed.append(f"{CHECKPOINTS_DIR}/{entry.name}")
    for entry in run.root.iterdir():
        if _HALF_WRITTEN_NAME.fullmatch(entry.name) and entry.is_file():
            entry.unlink()
            removed.append(entry.name)
    return sorted(removed)


def save_model(model: BaseAlgorithm, folder: Path) -> None:
    """``model.zip`` and (with one) ``vecnormalize.pkl`` into ``folder``."""
    atomic_save(folder / MODEL_FILE, model.save)
    normalizer = model.get_vec_normalize_env()
    if normalizer is not None:
        atomic_write_bytes(folder / VECNORMALIZE_FILE, pickle.dumps(normalizer))


# ---------------------------------------------------------------- models
def rollout_size(cfg: Config) -> int:
    """Steps an algorithm collects between two checks of its budget: ``n_steps * n_envs``
    on-policy, ``train_freq * n_envs`` off-policy."""
    spec = cfg.algorithm.spec
    key = "train_freq" if spec.off_policy else "n_steps"
    per_env = int(cfg.algorithm.hyperparameters.get(key, default_hyperparameter(spec, key)))
    return per_env * cfg.training.n_envs


def steps_to_train(cfg: Config, done: int) -> int:
    """The steps ``learn`` takes from ``done`` to reach ``training.total_timesteps``: rounded
    up to whole rollouts (SB3 never stops inside one), so the progress bar ends at its total."""
    left = cfg.training.total_timesteps - done
    size = rollout_size(cfg)
    return -(-left // size) * size if left > 0 else 0


def check_device(device: str, config_file: str | None = None) -> None:
    """Refuse ``training.device: cuda`` where torch sees no CUDA device (SB3 would train on
    the CPU without a word while the run's config said cuda)."""
    if device == "cuda" and not torch.cuda.is_available():
        where = f"{config_file}: " if config_file else ""
        raise TrainingError(
            f"{where}training.device: 'cuda', but torch {torch.__version__} sees no CUDA "
            "device on this machine; use device: cpu (or auto: the GPU when there is one)"
        )


def build_model(cfg: Config, venv: VecEnv, run: RunDir) -> BaseAlgorithm:
    check_device(cfg.training.device)  # train() checked it naming the file; other callers too
    spec = cfg.algorithm.spec
    model = spec.load_class()(
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
    """A run directory's JSON record (``kind()`` when absent); a damaged one is a
    :class:`TrainingError` naming it."""
    try:
        doc = read_json(path, kind())
    except ValueError as err:
        raise TrainingError(f"{err}: the run directory is damaged") from None
    if not isinstance(doc, kind):
        raise TrainingError(f"{path}: expected a JSON {kind.__name__}, got {doc!r:.80}")
    return doc


def _load_for_resume(cfg: Config, venv: VecEnv, run: RunDir, ck: Path) -> BaseAlgorithm:
    """The model (and replay buffer) of checkpoint ``ck``, on ``venv``."""
    spec = cfg.algorithm.spec
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
    """A fresh run directory ``out`` holding the resolved config (a run writes only where its
    user says: there is no default folder)."""
    if out is None:
        raise TrainingError("a new run needs its directory: --out DIR (a new or empty folder)")
    try:
        check_writable(out, "--out", folder=True)
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
    written, the model and its training env (once built or loaded), the evaluation history
    and its best win rate."""

    dir: RunDir
    cfg: Config
    meta: dict[str, Any]
    log: Callable[[str], None]
    model: BaseAlgorithm | None = None
    venv: VecEnv | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    best_win_rate: float = -1.0
    resumed: bool = False
    """Continued from a checkpoint (the timestep count and TensorBoard run go on)."""
    teacher_factory: Callable[[str], Any] | None = None
    extra_callbacks: Sequence[BaseCallback] = ()
    on_evaluation: Callable[[dict[str, Any]], bool] | None = None
    """Told each evaluation made while learning; returning False stops learning (a pruned
    tuning trial: the run ends as if its budget were spent)."""
    deadline: float = math.inf
    """When ``training.minutes`` ends, in ``time.perf_counter``'s seconds (inf: no budget)."""


def time_left(run: Run) -> str:
    return f"{max(run.deadline - time.perf_counter(), 0) / 60:.1f} min of the budget left"


class TimeProbe(BaseCallback):
    """RL's rate on its first rollouts; if RL's share of the time left cannot hold the config's
    steps, the total is cut (:func:`kept_rl_steps`; config.yaml too) and ``learn`` ended. A
    machine that slows down later: ``learn`` ends with the share all the same (``late``)."""

    def __init__(self, run: Run) -> None:
        super().__init__(verbose=0)
        self.run, self.size, self.n0, self.t0, self.share = run, rollout_size(run.cfg), 0, 0.0, 0.0
        self.cut = self.done = self.late = False

    def _on_training_start(self) -> None:  # after RunCallback's first evaluation
        if not self.t0:  # the first learn() only
            self.n0, self.t0 = self.num_timesteps, time.perf_counter()
            share = RL_SHARE if self.run.cfg.expert_iteration.rounds else RL_SHARE_ALONE
            self.share = share * (self.run.deadline - self.t0)

    def _on_step(self) -> bool:  # every step: a clock read once the rate is known
        if self.done:
            self.late = time.perf_counter() > self.t0 + self.share
            return not self.late
        run, cfg, size = self.run, self.run.cfg, self.size
        if self.num_timesteps <= (probed := self.n0 + PROBE_ROLLOUTS * size):
            return True
        self.done, rate = True, (probed - self.n0) / (time.perf_counter() - self.t0)
        planned = cfg.training.total_timesteps
        fits = self.n0 + int(rate * self.share) // size * size
        keep = kept_rl_steps(planned, fits, probed, cfg.expert_iteration.rounds > 0)
        run.meta["time_budget"] = {"minutes": cfg.training.minutes, "rl_steps_per_second":
                                   round(rate), "rl_steps_configured": planned}  # fmt: skip
        self.cut = keep < planned
        if self.cut:
            cfg.training.total_timesteps = keep
            run.meta["time_budget"]["rl_steps_cut_to"] = keep
            atomic_write_text(run.dir.config, dump_config(cfg))
        to_rounds = (
            ": too few to matter, RL stops here for the rounds" if probed == keep < fits else ""
        )
        run.log(
            f"time budget: RL runs at {rate:,.0f} steps/s here: its share ({self.share / 60:.1f}"
            f" min) holds {min(fits, planned):,} of the {planned:,} steps configured{to_rounds}; "
            f"{time_left(run)}"
        )
        return not self.cut


def kept_rl_steps(planned: int, fits: int, probed: int, rounds: bool) -> int:
    """RL's steps under a time budget: all ``planned`` where its share ``fits`` them; else what
    fits (the ``probed`` steps at least), but just the probe where that is under ``RL_LEAST`` of
    them and rounds follow: there a few RL steps moved nothing measurable, where the rounds in
    their time did (docs/training.md#time-budget)."""
    if fits >= planned:
        return planned
    return probed if fits < RL_LEAST * planned and rounds else max(fits, probed)


Phase = Callable[[Run], bool]
"""A phase does what is left of it on the run's model and returns True when a stop request
(Ctrl-C, SIGTERM) ended it: the run then resumes where it stopped."""


def imitation(run: Run) -> bool:
    """Phase 1 (a new run): the training env and the model, the warm start on a teacher's play
    (``imitation:``), the first checkpoint. A stop before it leaves nothing: the run starts
    over."""
    if run.model is not None:
        return False  # resumed: the checkpoint holds what this phase made
    cfg = run.cfg
    run.venv = make_training_env(cfg, 0)
    run.model = build_model(cfg, run.venv, run.dir)
    if cfg.imitation.enabled:
        from agents.learning import imitation as cloning  # noqa: PLC0415 (looked up when called)

        now = time.perf_counter()  # the warm start's share of a time budget (inf: none)
        until = now + IMITATION_SHARE * (run.deadline - now)
        stats = cloning.warm_start(run.model, cfg, run.teacher_factory, run.log, until)
        atomic_write_json(run.dir.root / IMITATION_FILE, stats)
    save_checkpoint(run.model, run.dir, cfg, reason="start")  # a hard kill resumes from here
    run.meta.update(status=STATUS_RUNNING, package_version=coldiron_env.__version__)
    atomic_write_json(run.dir.meta, run.meta)
    return False


def reinforcement_learning(run: Run) -> bool:
    """Phase 2: SB3's ``learn`` up to ``training.total_timesteps`` (:class:`RunCallback`),
    then a checkpoint and ``model.zip`` (at a stop too) and the evaluation of the end. Over
    once expert iteration has begun."""
    model, cfg, log = run.model, run.cfg, run.log
    assert model is not None
    if expert_rounds(run.dir.root):
        return False  # the checkpoint holds the end of RL, model.zip the rounds since
    callback = RunCallback(run)
    remaining = steps_to_train(cfg, model.num_timesteps)
    left = cfg.training.total_timesteps - model.num_timesteps
    if remaining > 0:
        log(
            f"training {remaining:,} steps: the {left:,} left of {cfg.training.total_timesteps:,}"
            f" rounded up to whole rollouts of {rollout_size(cfg):,} steps (the algorithm's unit "
            "of collection)"
            if remaining != left
            else f"training {remaining:,} steps"
        )
    stopped = False
    try:
        with recorded_signals() as requests:
            callback.requests, t = requests, cfg.training
            probe = [TimeProbe(run)] if run.deadline < math.inf else []
            calls = CallbackList([callback, *probe, *run.extra_callbacks])
            learn = partial(model.learn, callback=calls, log_interval=t.log_interval,
                            tb_log_name=TB_RUN_NAME, progress_bar=t.progress_bar)  # fmt: skip
            if remaining > 0:
                learn(remaining, reset_num_timesteps=not run.resumed)
            if probe and probe[0].cut and not requests:  # on to the total the time allows
                learn(steps_to_train(cfg, model.num_timesteps), reset_num_timesteps=False)
            if probe and probe[0].late and not requests:  # RL's time is up: it ends here
                t.total_timesteps = run.meta["time_budget"]["rl_steps_cut_to"] = model.num_timesteps
                atomic_write_text(run.dir.config, dump_config(cfg))
                log(f"time budget: RL's share is up at {model.num_timesteps:,} steps")  # fmt: skip
        stopped = bool(requests)
    except KeyboardInterrupt:  # raised by a callback, or off the main thread
        stopped = True
    if stopped:
        log(f"\ninterrupted at {model.num_timesteps} timesteps: saving a checkpoint")
    with recorded_signals() as caught:  # a second Ctrl-C or SIGTERM must not break the save
        save_checkpoint(model, run.dir, cfg, reason="interrupt" if stopped else "end")
        save_model(model, run.dir.root)
    if caught and not stopped:
        log("interrupted while saving: the model and checkpoint are saved")
        return True
    history = run.history
    if not stopped and (not history or history[-1]["timesteps"] < model.num_timesteps):
        callback.init_callback(model)
        callback.evaluate()
    return stopped


def expert_iteration(run: Run) -> bool:
    """Phase 3: the rounds of ``expert_iteration:`` after the last one recorded, each
    committed with its model and validated on the evaluation deals. A stop drops the round
    under way."""
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
    labellers = Labellers(settings.workers, rollouts=settings.rollouts, targets=settings.targets,
                          soft_z=settings.soft_z)  # fmt: skip
    kept: dict[int, Demonstrations] = {}  # the kept rounds' labels: read from disk once
    last, out_of_time = 0.0, False
    with recorded_signals() as requests, labellers:
        for r in range(len(rounds), settings.rounds):
            if run.deadline - time.perf_counter() < last:  # the last round says it won't fit
                out_of_time = True
                break
            t0 = time.perf_counter()
            first = stream_seed(DealStream.SEARCH, cfg.seed, r * settings.episodes)
            demos = labellers.label(
                agent, settings.budget, settings.episodes, first, gamma,
                lambda: bool(requests) or time.perf_counter() > run.deadline,
            )  # fmt: skip
            if demos is None:
                out_of_time = not requests
                break
            t1 = time.perf_counter()
            clone_on, before = demos, None
            if settings.keep_rounds > 1:  # the labels of the rounds before it too (DAgger)
                demos.save(labels_file(root, r))
                kept = {
                    k: kept.get(k) or Demonstrations.load(labels_file(root, k))
                    for k in kept_rounds(r, settings)
                }
                clone_on = concat([*kept.values(), demos])
                kept[r] = demos
                before = accuracy(model, demos)
            stats = behaviour_clone(model, clone_on, epochs=settings.epochs, seed=r,
                                    batch_size=settings.batch_size,
                                    learning_rate=settings.learning_rate)  # fmt: skip
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
            validation = evaluate_model(model, cfg.env_kwargs(), eval_seeds(cfg))
            record["validation_win_rate"] = validation.win_rate
            left = f"; {time_left(run)}" if run.deadline < math.inf else ""
            log(f"  validation deals won: {validation.win_rate:.2%}{left}")
            rounds.append(record)
            commit_round(root, model, cfg, start, rounds)
            forget_labels(root, r + 2 - settings.keep_rounds)  # keeps those round r + 1 needs
            last = time.perf_counter() - t0
            if requests:
                break
    if out_of_time:
        log(f"time budget: {len(rounds)} of {settings.rounds} round(s) fit")
        run.meta.setdefault("time_budget", {})["rounds_configured"] = settings.rounds
        settings.rounds = len(rounds)
        atomic_write_text(run.dir.config, dump_config(cfg))
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
    on_evaluation: Callable[[dict[str, Any]], bool] | None = None,
    log: Callable[[str], None] = print,
    resume_hint: bool = True,
) -> TrainResult:
    """Train ``cfg`` into a new run directory ``out``, or continue run ``resume`` (``cfg`` is
    then its ``config.yaml``, perhaps with a larger budget): the :data:`PHASES` in order. A
    stop (Ctrl-C, SIGTERM) saves what the phase under way has done and returns
    ``interrupted``, logging the ``--resume`` command unless ``resume_hint`` is false."""
    torch.set_num_threads(cfg.training.torch_threads)
    where = config_file or (str(Path(resume) / CONFIG_FILE) if resume is not None else None)
    check_device(cfg.training.device, where)
    t_start = time.perf_counter()
    if resume is not None and _stopped_before_training(RunDir(resume)):
        log(f"{resume}: stopped before training began (no checkpoint): starting it over")
        _clear_unstarted(RunDir(resume))
        out, resume = resume, None
    run = _reopen(cfg, RunDir(resume), log) if resume else _start(cfg, out, config_file, log)
    run.teacher_factory, run.extra_callbacks = teacher_factory, extra_callbacks
    run.on_evaluation = on_evaluation
    if cfg.training.minutes is not None:
        run.deadline = t_start + 60 * cfg.training.minutes
        log(f"time budget: {cfg.training.minutes:g} min (training.minutes)")
    stopped = False
    try:
        for phase in PHASES:
            if stopped := phase(run):
                break
    except KeyboardInterrupt:  # a stop no phase records: during imitation, or raised by code
        stopped = True
    if latest_checkpoint(run.dir) is None:
        _close(run.venv)
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
    """Expert iteration on the trained network ``start`` (a name, recorded; ``start_path``:
    its run directory or zip), a run of that one phase with deals seeded by ``seed`` into the
    run directory ``out``. Rerunning continues after the last finished round (only
    ``settings.rounds`` may change)."""
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
    data = {**load_config(config).to_dict(), "seed": seed, "expert_iteration": dict(settings)}
    cfg = config_from_dict(data, str(config))
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
    """A run continued from its newest checkpoint, the evaluation history trimmed to it and
    what a hard stop left behind removed. Refused before anything is written: a config
    changed beyond :data:`RESUME_MAY_CHANGE`, a budget below the steps trained, nothing left."""
    if not run.meta.is_file():
        raise TrainingError(
            f"{run.meta}: missing: it holds the recipe the run began with, so the config "
            "cannot be checked against it; restore it (a copy of the run) to resume"
        )
    meta = _run_record(run.meta, dict)
    check_recipe(cfg, run, meta.get(RECIPE_KEY))
    ck = latest_checkpoint(run)
    if ck is None:
        raise TrainingError(f"{run.checkpoints}: no checkpoint to resume from")
    trained = _run_record(ck / STATE_FILE, dict).get("timesteps", 0)
    if type(trained) is not int or trained < 0:  # a bool is not a count
        raise TrainingError(f"{ck / STATE_FILE}: timesteps must be a whole number, got {trained!r}")
    rounds = len(_run_record(run.root / EXPERT_FILE, dict).get("rounds", []))
    history = list(_run_record(run.eval_json, dict).get("evaluations", []))
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
    if rounds and steps_to_train(cfg, trained) > 0:
        raise TrainingError(
            f"{run.root}: RL ended and {rounds} round(s) of expert iteration followed; RL "
            f"cannot continue after them (total_timesteps {cfg.training.total_timesteps:,} > "
            f"{trained:,} trained)"
        )
    removed = tidy_checkpoints(run)
    if removed:
        log(f"{run.root}: removed what a hard stop left behind: {', '.join(removed)}")
    prepare_resume(cfg, run.root, log)
    resumes = meta.setdefault("resumes", [])
    first_index = (len(resumes) + 1) * cfg.training.n_envs  # deals no earlier leg played
    try:
        venv = make_training_env(cfg, trained, ck / VECNORMALIZE_FILE, first_index)
    except ValueError as exc:  # the training stream's indices are used up
        raise TrainingError(f"{run.root}: cannot resume again: {exc}") from None
    try:  # loaded before the run's files change: a damaged checkpoint leaves them as they were
        model = _load_for_resume(cfg, venv, run, ck)
    except TrainingError:
        venv.close()
        raise
    if meta.pop(SHA256_KEY, None) is not None:  # the files change from here: unpin them first
        atomic_write_json(run.meta, meta)
    atomic_write_text(run.config, dump_config(cfg))
    leg = {"time": utc_now(), "command": sys.argv, "timesteps": model.num_timesteps}
    resumes.append({**leg, "first_deal_index": first_index})
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
    return Run(run, cfg, meta, log, model, venv, kept, best, resumed=True)


def check_recipe(cfg: Config, run: RunDir, recipe: dict[str, Any] | None) -> None:
    """Refuse a config that differs from the one ``run`` began with (``recipe``) beyond
    :data:`RESUME_MAY_CHANGE`: its config.yaml would no longer describe it. A run without a
    recipe this version reads (none, or of an older layout) is not checked."""
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


def _close(venv: VecEnv | None) -> None:
    if venv is not None:
        with contextlib.suppress(Exception):
            venv.close()


def _finish(run: Run, stopped: bool, t_start: float) -> TrainResult:
    """The run's end (or stop): its env closed, ``meta.json`` completed with the SHA-256 of
    the files a loader checks."""
    assert run.model is not None
    _close(run.venv)
    wall = time.perf_counter() - t_start
    rounds = expert_rounds(run.dir.root)
    timesteps = int(run.model.num_timesteps)
    run.meta.update(
        status="interrupted" if stopped else STATUS_COMPLETED,
        end_time=utc_now(),
        timesteps=timesteps,
        wall_seconds=round(wall + float(run.meta.get("wall_seconds", 0.0)), 1),
        expert_iteration_rounds=len(rounds),
    )
    run.meta[SHA256_KEY] = file_hashes(run.dir.root, PINNED_FILES)
    atomic_write_json(run.dir.meta, run.meta)
    return TrainResult(run.dir.root, timesteps, stopped, wall, run.history, rounds)


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it is under it (as commands name it)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _clear_unstarted(run: RunDir) -> None:
    """Empty a run directory stopped before learning began; refuse anything unexpected."""
    tidy_checkpoints(run)  # a checkpoint folder a hard kill left unfinished
    extra = sorted(
        p.name
        for p in run.root.iterdir()
        if p.name not in UNSTARTED_ENTRIES or (p == run.checkpoints and any(p.iterdir()))
    )
    if extra:
        raise TrainingError(
            f"{run.root}: stopped before learning began, but holds {extra}, which training "
            "did not write; move them away to start the run over"
        )
    for entry in run.root.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _stopped_before_training(run: RunDir) -> bool:
    """A run directory left by a stop before learning began: no checkpoint yet (the first
    is written before the status becomes ``running``; a hard kill can land in between)."""
    started = run_status(run.root) in (STATUS_STARTING, STATUS_RUNNING)
    return started and latest_checkpoint(run) is None
