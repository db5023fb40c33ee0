"""Hyperparameter search with Optuna: objective, storage, workers and reports.

The search space is the config's ``search:`` section (:mod:`agents.learning.search_space`).
How to run it on one machine, with K workers or on several machines:
``docs/tuning.md``.

**Objective.** A trial samples the parameters into the base config, trains it
(:func:`agents.learning.training.train`) into ``OUT/trials/trial-NNNN`` (kept: config,
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
study, so once its trial exists a worker checks that fewer than N counted
trials precede it; the rare loser of a race is recorded ``FAIL`` with the user
attribute ``surplus`` before any training, and never counted. The trials of a
worker that died are failed by Optuna's heartbeat (:data:`GRACE_SECONDS`).

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

import contextlib
import csv
import io
import json
import multiprocessing
import os
import re
import signal
import socket
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.context import ForkServerContext, SpawnContext
from pathlib import Path
from typing import Any, Final

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy.engine import make_url
from stable_baselines3.common.callbacks import BaseCallback

from agents.atomic import atomic_write_bytes, atomic_write_json, atomic_write_text
from agents.learning.config import ConfigError, config_from_dict, dump_config
from agents.learning.provenance import META_FILE
from agents.learning.search_space import (
    InvalidSample,
    PrunerSpec,
    SamplerSpec,
    TuningConfig,
    load_tuning_config,
)
from agents.learning.training import (
    RunDir,
    TrainingError,
    recorded_signals,
    sigterm_as_ctrl_c,
    train,
)

HEARTBEAT_SECONDS: Final = 30
GRACE_SECONDS: Final = 120
"""A RUNNING trial without a heartbeat for this long is failed (its worker died)."""
SQLITE_TIMEOUT_SECONDS: Final = 60
POLL_SECONDS: Final = 2.0
CLAIM_LOCK_TIMEOUT_SECONDS: Final = 120.0
POLL_MAX_SECONDS: Final = 30.0
"""Waiting for other machines' last trials: polls back off from POLL_SECONDS to this."""
MAX_CONSECUTIVE_FAILURES: Final = 3
MAX_CONSECUTIVE_INVALID: Final = 50
"""Samples in a row that make an invalid config (two searched keys that clash) stop a worker."""
FINGERPRINT_ATTR: Final = "coldiron_fingerprint"
SEARCH_ATTR: Final = "coldiron_search"
SURPLUS_ATTR: Final = "surplus"
ERROR_ATTR: Final = "error"
INVALID_ATTR: Final = "invalid_sample"
WORKER_ATTR: Final = "worker"
"""Trial attribute: ``host:pid/worker`` of the process that ran it."""
SEED_ATTR: Final = "seed"
NONCE_BYTES: Final = 8
STUDY_ID_ATTR: Final = "coldiron_study_id"
"""Study attribute: a random id written once, so an output folder knows its study."""
STUDY_FILE: Final = "study.json"
"""Under ``OUT``: which study (storage, name) the trial directories belong to."""

DB_FILE: Final = "study.db"
TRIALS_DIR: Final = "trials"
SUMMARY_CSV: Final = "summary.csv"
SUMMARY_MD: Final = "summary.md"
SUMMARY_PNG: Final = "summary.png"
BEST_CONFIG: Final = "best_config.yaml"
BEST_JSON: Final = "best_trial.json"
EXIT_INTERRUPTED: Final = 130


class TuneError(RuntimeError):
    """A search that cannot start or continue (study mismatch, worker failure...)."""


class SurplusTrial(Exception):
    """The study already had N counted trials when this one was created."""


def process_nonce() -> int:
    """A random number of this process (differs between processes, machines, containers)."""
    return int.from_bytes(os.urandom(NONCE_BYTES), "little")


def build_sampler(
    spec: SamplerSpec, worker: int = 0, previous: int = 0, nonce: int | None = None
) -> optuna.samplers.BaseSampler:
    """The sampler of worker ``worker`` joining a study of ``previous`` trials.

    A configured seed is used as is only by the process that created the study
    (worker 0, no trial yet, ``nonce`` None): a fresh one-worker search with a
    seed is reproducible. Any other worker mixes the seed with its index, the
    trials already in the study and ``nonce`` (:func:`process_nonce`), so
    parallel workers, other machines and a continued study never replay the
    same samples.
    """
    seed = None
    if spec.seed is not None:
        seed = spec.seed
        if worker or previous or nonce is not None:
            words = [spec.seed, worker, previous, *([] if nonce is None else [nonce])]
            seed = int(np.random.SeedSequence(words).generate_state(1)[0])
    if spec.kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        # constant_liar: running trials count as bad guesses, so parallel
        # workers do not all sample the same promising point.
        return optuna.samplers.TPESampler(
            seed=seed, n_startup_trials=spec.n_startup_trials, constant_liar=True
        )


def build_pruner(spec: PrunerSpec) -> optuna.pruners.BasePruner:
    if spec.kind == "median":
        return optuna.pruners.MedianPruner(
            n_startup_trials=spec.n_startup_trials, n_warmup_steps=spec.n_warmup_steps
        )
    if spec.kind == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=spec.min_resource, reduction_factor=spec.reduction_factor
        )
    if spec.kind == "threshold":
        return optuna.pruners.ThresholdPruner(lower=spec.lower, n_warmup_steps=spec.n_warmup_steps)
    return optuna.pruners.NopPruner()


# ---------------------------------------------------------------- storage
def default_storage_url(out: Path) -> str:
    return f"sqlite:///{(out / DB_FILE).resolve()}"


def redact(url: str) -> str:
    """``url`` with any password hidden (for logs and reports)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # a malformed URL is reported by the storage itself
        return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)


def make_storage(url: str) -> optuna.storages.RDBStorage:
    """An RDB storage for any SQLAlchemy URL, with heartbeats (dead workers' trials fail).

    SQLite gets a long lock timeout: several processes write the same file.
    """
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
FINISHED: Final = (TrialState.COMPLETE, TrialState.PRUNED)
"""What ``--trials N`` counts."""
COUNTED: Final = (*FINISHED, TrialState.RUNNING, TrialState.WAITING)
"""Trials that hold one of the N places (finished, or still able to finish)."""


def count_finished(study: optuna.Study) -> int:
    """Complete + pruned trials: what ``--trials N`` counts."""
    return len(study.get_trials(deepcopy=False, states=FINISHED))


def _census(study: optuna.Study) -> tuple[int, int]:
    """(finished, finished + running/waiting) trials of the study."""
    trials = study.get_trials(deepcopy=False, states=COUNTED)
    finished = sum(t.state in FINISHED for t in trials)
    return finished, len(trials)


def _fail_stale(study: optuna.Study) -> None:
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
    claim_lock: Any = None
    """A lock shared by this machine's workers, held from the count to the trial's creation."""
    holding: bool = False

    def run_dir(self, number: int) -> Path:
        return self.out / TRIALS_DIR / f"trial-{number:04d}"

    def acquire(self) -> None:
        """Take the local claim lock (after a timeout, go on: the claim check still holds)."""
        if self.claim_lock is not None:
            self.holding = bool(self.claim_lock.acquire(timeout=CLAIM_LOCK_TIMEOUT_SECONDS))

    def release(self) -> None:
        if self.holding:
            self.holding = False
            self.claim_lock.release()

    def __call__(self, trial: optuna.Trial) -> float:
        counted = trial.study.get_trials(deepcopy=False, states=COUNTED)
        self.release()  # this trial now exists: the other local workers count it
        ahead = [t for t in counted if t.number < trial.number]
        if len(ahead) >= self.n_trials:
            trial.set_user_attr(SURPLUS_ATTR, True)
            raise SurplusTrial(
                f"trial {trial.number}: {len(ahead)} trials were already finished or running "
                f"(target {self.n_trials}); discarded before training"
            )
        try:
            return self._train(trial)
        except (optuna.TrialPruned, KeyboardInterrupt):
            raise
        except Exception as exc:
            trial.set_user_attr(ERROR_ATTR, f"{type(exc).__name__}: {exc}")
            if isinstance(exc, InvalidSample):
                trial.set_user_attr(INVALID_ATTR, True)
            raise

    def _train(self, trial: optuna.Trial) -> float:
        params = {p.path: p.suggest(trial) for p in self.tcfg.search.parameters}
        cfg = self.tcfg.trial_config(dict(trial.params))
        cfg.training.progress_bar = False
        run = RunDir(self.run_dir(trial.number))
        trial.set_user_attr("run_dir", str(run.root.resolve()))
        host = socket.gethostname()
        trial.set_user_attr("host", host)
        trial.set_user_attr(WORKER_ATTR, f"{host}:{os.getpid()}/{self.worker}")
        trial.set_user_attr(SEED_ATTR, cfg.seed)
        if run.root.exists():
            raise TuneError(
                f"{run.root}: already exists, but trial {trial.number} of study "
                f"{trial.study.study_name!r} is new; another search used this --out "
                "(use another --out, or the storage those trials belong to)"
            )
        shown = ", ".join(f"{k}={v!r}" for k, v in params.items())
        self.log(f"[worker {self.worker}] trial {trial.number}: {shown} -> {run.root}")
        callback = PruningCallback(trial, run, cfg.evaluation.freq)
        result = train(
            cfg,
            run.root,
            config_file=self.tcfg.file,
            extra_callbacks=[callback],
            log=self.log,
            resume_hint=False,  # a stopped trial is replaced by a new one, never resumed
        )
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
    tcfg: TuningConfig,
    storage_url: str,
    study_name: str,
    worker: int = 0,
    nonce: int | None = None,
    create: bool = True,
) -> tuple[optuna.Study, bool]:
    """Load or create the study; ``(study, created)``. A study of another config is refused.

    ``nonce``: see :func:`build_sampler` (None only in the process that may
    create the study, or its single in-process worker). ``create=False``: a
    missing study is an error (an output folder says it exists).
    """
    storage = make_storage(storage_url)
    sampler = build_sampler(tcfg.search.sampler, worker, 0, nonce)
    pruner = build_pruner(tcfg.search.pruner)
    created = False
    try:
        study = optuna.load_study(
            study_name=study_name, storage=storage, sampler=sampler, pruner=pruner
        )
    except KeyError:
        if not create:
            raise TuneError(
                f"study {study_name!r} is not in {redact(storage_url)}, but the output folder "
                f"was made for it ({STUDY_FILE}); give its --storage, or use another --out"
            ) from None
        try:
            study = optuna.create_study(
                study_name=study_name,
                storage=storage,
                sampler=sampler,
                pruner=pruner,
                direction="maximize",
            )
            created = True
        except optuna.exceptions.DuplicatedStudyError:  # another machine created it just now
            study = optuna.load_study(
                study_name=study_name, storage=storage, sampler=sampler, pruner=pruner
            )
    if len(study.directions) != 1:
        raise TuneError(
            f"study {study_name!r} in {redact(storage_url)} has {len(study.directions)} "
            "objectives: not a win-rate study; use --study NEW_NAME"
        )
    direction = study.direction
    if direction != optuna.study.StudyDirection.MAXIMIZE:
        raise TuneError(
            f"study {study_name!r} in {redact(storage_url)} does not maximise: "
            "not a win-rate study; use --study NEW_NAME"
        )
    fingerprint = tcfg.fingerprint()
    stored = study.user_attrs.get(FINGERPRINT_ATTR)
    if STUDY_ID_ATTR not in study.user_attrs:
        study.set_user_attr(STUDY_ID_ATTR, os.urandom(NONCE_BYTES).hex())
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
    if tcfg.search.sampler.seed is not None:
        study.sampler = build_sampler(tcfg.search.sampler, worker, len(study.trials), nonce)
    return study, created


def run_worker(
    config_file: str,
    storage_url: str,
    study_name: str,
    n_trials: int,
    out: Path,
    worker: int = 0,
    log: Callable[[str], None] = print,
    claim_lock: Any = None,
    solo: bool = False,
) -> int:
    """Run trials until the study has ``n_trials`` finished ones; returns how many this ran.

    ``claim_lock`` (shared by the workers of one machine) makes counting the
    trials and creating the next one atomic among them, so local workers never
    create a surplus trial; across machines the check in :class:`Objective`
    catches the rare race. ``solo``: the single in-process worker of the
    process that created the study (its seeded sampler is reproducible).
    """
    tcfg = load_tuning_config(config_file)
    nonce = None if solo else process_nonce()
    study, _ = open_study(tcfg, storage_url, study_name, worker, nonce)
    objective = Objective(tcfg, out, n_trials, worker, log, claim_lock)
    done: list[Any] = []
    ran = 0
    failures = 0
    invalid = 0
    wait = POLL_SECONDS
    while True:
        objective.acquire()
        try:
            finished, active = _census(study)
            if finished >= n_trials:
                return ran
            if active >= n_trials:  # the last trials run elsewhere: they may still fail
                objective.release()
                _fail_stale(study)
                time.sleep(wait)
                wait = min(2 * wait, POLL_MAX_SECONDS)
                continue
            wait = POLL_SECONDS
            done.clear()
            study.optimize(
                objective,
                n_trials=1,
                catch=(Exception,),  # recorded as FAIL; MAX_CONSECUTIVE_FAILURES stops a loop
                callbacks=[lambda _s, t: done.append(t)],
                gc_after_trial=True,
            )
        finally:
            objective.release()
        trial = done[-1] if done else None
        if trial is None or trial.state in FINISHED:
            ran += trial is not None
            failures = invalid = 0
        elif trial.user_attrs.get(INVALID_ATTR):
            invalid += 1
            log(
                f"[worker {worker}] trial {trial.number}: {trial.user_attrs.get(ERROR_ATTR)} "
                f"(not trained; {invalid} invalid sample(s) in a row)"
            )
            if invalid >= MAX_CONSECUTIVE_INVALID:
                raise TuneError(
                    f"{invalid} samples in a row gave an invalid config in worker {worker} "
                    "(two searched keys that clash): narrow the search: section"
                )
        elif not trial.user_attrs.get(SURPLUS_ATTR):
            failures += 1
            reason = trial.user_attrs.get(ERROR_ATTR, "see the traceback above")
            log(f"[worker {worker}] trial {trial.number} failed: {reason}")
            if failures >= MAX_CONSECUTIVE_FAILURES:
                raise TuneError(
                    f"{failures} trials failed in a row in worker {worker} (last: trial "
                    f"{trial.number}); see the log above"
                )


def _worker_entry(
    config_file: str,
    storage_url: str,
    study_name: str,
    n_trials: int,
    out: str,
    worker: int,
    claim_lock: Any,
) -> None:
    """Process target of a local worker (``--workers K``).

    The worker leaves the terminal's process group: Ctrl-C reaches the main
    process only, which passes it on once (a second SIGINT could break the
    trial's checkpoint). SIGTERM (e.g. a job scheduler stopping every process)
    saves and stops like Ctrl-C.
    """
    with contextlib.suppress(OSError):
        os.setpgrp()
    sigterm_as_ctrl_c()
    try:
        run_worker(
            config_file, storage_url, study_name, n_trials, Path(out), worker, claim_lock=claim_lock
        )
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
    marker = _read_marker(out, name, url)
    study, created = open_study(tcfg, url, name, create=marker is None)
    trials_dir = out / TRIALS_DIR
    _claim_out(out, study, url, created, marker)
    before = count_finished(study)
    log(
        f"study {name!r} in {redact(url)}: {before} finished trial(s), target {n_trials}, "
        f"{workers} worker(s), trial runs in {trials_dir}"
    )
    interrupted = False
    failure: BaseException | None = None
    if before < n_trials:
        try:
            if workers == 1:
                run_worker(file, url, name, n_trials, out, 0, log, solo=created)
            else:
                _run_processes(file, url, name, n_trials, out, workers, log)
        except KeyboardInterrupt:
            interrupted = True
            log(
                "interrupted: finished trials are saved in the study; rerun the command to continue"
            )
        except (TuneError, ConfigError) as exc:
            failure = exc  # still write the reports of the trials that finished
    study, _ = open_study(tcfg, url, name)
    files = write_reports(study, tcfg, out, url, log)
    if failure is not None:
        raise failure
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


def _read_marker(out: Path, name: str, url: str) -> dict[str, Any] | None:
    """``OUT/study.json`` (None if absent); refuses an ``out`` that holds another study."""
    marker = out / STUDY_FILE
    if not marker.is_file():
        return None
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TuneError(f"{marker}: unreadable ({exc}); use another --out") from None
    if not isinstance(data, dict) or data.get("study") != name:
        raise TuneError(
            f"{out}: belongs to study {data.get('study') if isinstance(data, dict) else data!r} "
            f"({marker}), not to study {name!r} in {redact(url)}; use another --out"
        )
    return data


def _claim_out(
    out: Path, study: optuna.Study, url: str, created: bool, marker: dict[str, Any] | None
) -> None:
    """Tie ``out`` to ``study`` (``study.json``); refuse trial directories of another one."""
    study_id = study.user_attrs.get(STUDY_ID_ATTR)
    if marker is not None and "study_id" in marker:
        if marker["study_id"] != study_id:
            raise TuneError(
                f"{out}: belongs to study {marker.get('study')!r} of {marker.get('storage')} "
                f"(id {marker.get('study_id')}), not to the study of that name in "
                f"{redact(url)} (id {study_id}); use another --out"
            )
        return
    trials_dir = out / TRIALS_DIR
    if created and trials_dir.is_dir() and any(trials_dir.iterdir()):
        raise TuneError(
            f"{trials_dir}: holds trial directories of another study, but study "
            f"{study.study_name!r} is new in {redact(url)}; use another --out "
            "(or the storage those trials belong to)"
        )
    atomic_write_json(
        out / STUDY_FILE, {"study": study.study_name, "study_id": study_id, "storage": redact(url)}
    )


JOIN_POLL_SECONDS = 0.5  # how often the parent looks for a stop request while workers run


def _worker_context() -> ForkServerContext | SpawnContext:
    """``forkserver`` with this module preloaded where available, else ``spawn``.

    The fork server is a fresh single-threaded interpreter that imports torch,
    Stable-Baselines3 and Optuna once; each worker is then forked from it at
    once, without inheriting the parent's threads or open database connections.
    """
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([__name__])
        return ctx
    return multiprocessing.get_context("spawn")


def _run_processes(
    file: str,
    url: str,
    name: str,
    n_trials: int,
    out: Path,
    workers: int,
    log: Callable[[str], None],
) -> None:
    ctx = _worker_context()
    claim_lock = ctx.Lock()
    procs = [
        ctx.Process(
            target=_worker_entry,
            args=(file, url, name, n_trials, str(out), i, claim_lock),
            name=f"tune-worker-{i}",
        )
        for i in range(workers)
    ]
    # Ctrl-C and SIGTERM are only recorded here (see recorded_signals: a raised
    # KeyboardInterrupt can be lost while the workers train on).
    with recorded_signals() as stop_signals:
        for p in procs:
            p.start()
        while not stop_signals and any(p.is_alive() for p in procs):
            for p in procs:
                p.join(timeout=JOIN_POLL_SECONDS)
        if stop_signals:
            # The workers have their own process group: pass the stop on once,
            # then wait (later signals are only recorded) while they save and leave.
            for p in procs:
                if p.pid is not None and p.is_alive():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(p.pid, signal.SIGINT)
            for p in procs:
                if p.pid is not None:
                    p.join()
    interrupted = bool(stop_signals)
    codes = [p.exitcode for p in procs]
    if interrupted or any(c == EXIT_INTERRUPTED for c in codes):
        raise KeyboardInterrupt
    bad = [(i, c) for i, c in enumerate(codes) if c != 0]
    if bad:
        raise TuneError(f"worker(s) failed (index, exit code): {bad}; see the log above")
    log(f"{workers} workers done")


# ---------------------------------------------------------------- reports
def _best(study: optuna.Study) -> FrozenTrial | None:
    try:
        return study.best_trial
    except ValueError:  # no complete trial
        return None


def _last_intermediate(trial: FrozenTrial) -> tuple[int | None, float | None]:
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
        row["seed"] = t.user_attrs.get(SEED_ATTR)
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
    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(done) < 2:
        return {}, f"importances need >= 2 completed trials ({len(done)} so far)"
    if len({t.value for t in done}) < 2:
        return {}, "all completed trials have the same win rate: no importance to measure"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            evaluator = optuna.importance.PedAnovaImportanceEvaluator()  # no scikit-learn needed
            return dict(optuna.importance.get_param_importances(study, evaluator=evaluator)), None
    except (ImportError, RuntimeError, ValueError, ZeroDivisionError) as exc:
        return {}, f"importances not computed: {exc}"


def plot_study(study: optuna.Study, path: Path, title: str) -> str | None:
    """PNG: win rate per trial (complete / pruned) and parameter importances.

    Returns the reason importances are missing, if they are.
    """
    import matplotlib  # noqa: PLC0415 (loaded on use)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 (after choosing the Agg backend)

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.5))
    try:
        for state, marker, label in (
            (TrialState.COMPLETE, "o", "complete"),
            (TrialState.PRUNED, "x", "pruned (last eval)"),
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


def export_best(study: optuna.Study, tcfg: TuningConfig, path: Path) -> FrozenTrial | None:
    """Write the best complete trial's config (``search:`` dropped) as ready-to-train YAML."""
    best = _best(study)
    if best is None:
        return None
    cfg = config_from_dict(tcfg.trial_data(best.params), tcfg.file)  # validated again
    header = (
        f"# Best trial {best.number} of study {study.study_name!r} (win rate {best.value:.4f} on "
        f"{best.user_attrs.get('episodes', '?')} fixed deals), from {tcfg.file}.\n"
        f"# One training seed ({cfg.seed}) and the tuning budget ({cfg.training.total_timesteps} "
        "timesteps, name from the tuning config):\n"
        "# raise training.total_timesteps for a real run, and compare seeds before trusting it:\n"
        f"# .venv/bin/python scripts/train.py --config {path} --seeds 0-2\n"
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
