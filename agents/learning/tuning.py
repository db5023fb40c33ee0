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

**N trials.** ``--trials N`` asks for N *finished* (complete or pruned) trials
in the study. Each worker runs :meth:`optuna.Study.optimize` with Optuna's
:class:`~optuna.study.MaxTrialsCallback`: it starts a trial while fewer than N are
finished, so trials that fail are replaced, and the workers running when the N-th
trial finishes complete theirs: a study of W workers (all machines together) ends
with N to N + W - 1 finished trials. The trials of a worker that died are failed
by Optuna's heartbeat (:data:`GRACE_SECONDS`).

**Resuming.** Optuna commits each trial to the storage as it ends, so Ctrl-C
loses no finished trial: the running trials save a checkpoint in their run
directory and are recorded ``FAIL``. Rerunning the same command loads the study
(the config and search space must be the same: a fingerprint is stored with the
study) and runs only the trials still missing to reach N.

**Outputs** (under ``OUT``): ``study.db`` (default storage), ``trials/``,
``summary.csv`` and ``summary.md`` (Optuna's ``trials_dataframe``), ``summary.png``,
``curves.png`` and ``importances.png`` (Optuna's matplotlib plots), ``best_config.yaml``
(ready to train: ``scripts/train.py --config OUT/best_config.yaml``) and ``best_trial.json``.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import multiprocessing
import os
import re
import shutil
import signal
import socket
import sys
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.context import ForkServerContext, SpawnContext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import optuna
from optuna.study import MaxTrialsCallback
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy.engine import make_url
from stable_baselines3.common.callbacks import BaseCallback

if TYPE_CHECKING:
    import pandas as pd

from agents.atomic import atomic_write_bytes, atomic_write_json, atomic_write_text
from agents.evaluation.plots import pyplot
from agents.learning.config import (
    ConfigError,
    config_changes,
    config_from_dict,
    describe_changes,
    dump_config,
)
from agents.learning.provenance import META_FILE, TrainingError
from agents.learning.search_space import (
    InvalidSample,
    PrunerSpec,
    SamplerSpec,
    TuningConfig,
    load_tuning_config,
)
from agents.learning.training import RunDir, recorded_signals, sigterm_as_ctrl_c, train

HEARTBEAT_SECONDS: Final = 30
GRACE_SECONDS: Final = 120
"""A RUNNING trial without a heartbeat for this long is failed (its worker died)."""
SQLITE_TIMEOUT_SECONDS: Final = 60
MAX_CONSECUTIVE_FAILURES: Final = 3
MAX_CONSECUTIVE_INVALID: Final = 50
"""Samples in a row that make an invalid config (two searched keys that clash) stop a worker."""
FINGERPRINT_ATTR: Final = "coldiron_fingerprint"
SEARCH_ATTR: Final = "coldiron_search"
BASE_ATTR: Final = "coldiron_base_config"
"""The base config's plain data, kept so that a refused config can be told what changed."""
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
CURVES_PNG: Final = "curves.png"
IMPORTANCES_PNG: Final = "importances.png"
BEST_CONFIG: Final = "best_config.yaml"
BEST_JSON: Final = "best_trial.json"
EXIT_INTERRUPTED: Final = 130


class TuneError(RuntimeError):
    """A search that cannot start or continue (study mismatch, worker failure...)."""


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


PRUNERS: Final[dict[str, Callable[..., optuna.pruners.BasePruner]]] = {
    "median": optuna.pruners.MedianPruner,
    "successive_halving": optuna.pruners.SuccessiveHalvingPruner,
    "threshold": optuna.pruners.ThresholdPruner,
    "none": optuna.pruners.NopPruner,
}
"""Optuna's pruner of each ``search.pruner.kind`` (the spec's other keys are its arguments)."""


def build_pruner(spec: PrunerSpec) -> optuna.pruners.BasePruner:
    return PRUNERS[spec.kind](**spec.model_dump(exclude={"kind"}))


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
    sqlite = url.startswith("sqlite")
    database = None
    if sqlite:
        with contextlib.suppress(Exception):  # a malformed URL is reported by the storage
            database = make_url(url).database
    if database and Path(database).is_dir():  # sqlite would say "unable to open database file"
        raise TuneError(f"storage {redact(url)}: {database} is a folder, not a database file")
    engine_kwargs: dict[str, Any] = (
        {"connect_args": {"timeout": SQLITE_TIMEOUT_SECONDS}} if sqlite else {"pool_pre_ping": True}
    )
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


FINISHED: Final = (TrialState.COMPLETE, TrialState.PRUNED)
"""What ``--trials N`` counts."""


def count_finished(study: optuna.Study) -> int:
    """Complete + pruned trials: what ``--trials N`` counts."""
    return len(study.get_trials(deepcopy=False, states=FINISHED))


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
    """One trial: sample, train into ``trials/trial-NNNN``, return the win rate."""

    tcfg: TuningConfig
    out: Path
    worker: int = 0
    log: Callable[[str], None] = print

    def run_dir(self, number: int) -> Path:
        return self.out / TRIALS_DIR / f"trial-{number:04d}"

    def __call__(self, trial: optuna.Trial) -> float:
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
        params = {path: p.suggest(trial, path) for path, p in self.tcfg.search.parameters.items()}
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
        history = result.history
        trial.set_user_attr("timesteps", result.timesteps)
        trial.set_user_attr("wall_seconds", round(result.wall_seconds, 1))
        if history:  # a stopped trial's too: the summary shows where it stood
            last = history[-1]
            for key in ("episodes", "wins", "ci_low", "ci_high"):
                trial.set_user_attr(key, last[key])
        if result.interrupted:
            raise KeyboardInterrupt
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
    if study.directions != [optuna.study.StudyDirection.MAXIMIZE]:
        raise TuneError(
            f"study {study_name!r} in {redact(storage_url)} has {len(study.directions)} "
            f"objective(s) ({', '.join(d.name.lower() for d in study.directions)}): not a "
            "win-rate study (one objective, maximised); use --study NEW_NAME"
        )
    fingerprint = tcfg.fingerprint()
    stored = study.user_attrs.get(FINGERPRINT_ATTR)
    if STUDY_ID_ATTR not in study.user_attrs:
        study.set_user_attr(STUDY_ID_ATTR, os.urandom(NONCE_BYTES).hex())
    plain = json.loads(json.dumps(tcfg.base_data, default=str))  # as the storage keeps it
    if stored is None:
        study.set_user_attr(FINGERPRINT_ATTR, fingerprint)
        study.set_user_attr(SEARCH_ATTR, tcfg.search.to_dict())
        study.set_user_attr(BASE_ATTR, plain)
        study.set_user_attr("config_name", tcfg.name)
    elif BASE_ATTR not in study.user_attrs and stored == fingerprint:
        study.set_user_attr(BASE_ATTR, plain)  # a study made before the config was kept
    if stored is not None and stored != fingerprint:
        changes = config_changes(
            {
                "config": study.user_attrs.get(BASE_ATTR),
                "search": study.user_attrs.get(SEARCH_ATTR),
            },
            {"config": plain, "search": tcfg.search.to_dict()},
        )
        if BASE_ATTR not in study.user_attrs:  # a study made before the config was kept
            changes = {k: v for k, v in changes.items() if not k.startswith("config")}
        what = f": {describe_changes(changes)}" if changes else ""
        raise TuneError(
            f"study {study_name!r} in {redact(storage_url)} was made with another config or "
            f"search space (fingerprint {stored}, {tcfg.file} gives {fingerprint}){what}; "
            "use --study NEW_NAME (or restore the config)"
        )
    if tcfg.search.sampler.seed is not None:
        study.sampler = build_sampler(tcfg.search.sampler, worker, len(study.trials), nonce)
    return study, created


@dataclass
class FailureLimit:
    """Optuna callback: a worker stops after :data:`MAX_CONSECUTIVE_FAILURES` failed trials
    in a row (:data:`MAX_CONSECUTIVE_INVALID` invalid samples): with ``catch`` Optuna would
    go on failing trials forever."""

    worker: int
    log: Callable[[str], None]
    failures: int = 0
    invalid: int = 0

    def __call__(self, _study: optuna.Study, trial: FrozenTrial) -> None:
        if trial.state != TrialState.FAIL:
            self.failures = self.invalid = 0
            return
        reason = trial.user_attrs.get(ERROR_ATTR, "see the traceback above")
        self.log(f"[worker {self.worker}] trial {trial.number} failed (not counted): {reason}")
        if trial.user_attrs.get(INVALID_ATTR):
            self.invalid += 1
            if self.invalid >= MAX_CONSECUTIVE_INVALID:
                raise TuneError(
                    f"{self.invalid} samples in a row gave an invalid config in worker "
                    f"{self.worker} (two searched keys that clash): narrow the search: section"
                )
        else:
            self.failures += 1
            if self.failures >= MAX_CONSECUTIVE_FAILURES:
                raise TuneError(
                    f"{self.failures} trials failed in a row in worker {self.worker} (last: "
                    f"trial {trial.number}); see the log above"
                )


class StoppedTrials(logging.Filter):
    """Drops Optuna's two warnings (one with a stack trace) about a trial stopped by Ctrl-C
    or SIGTERM, logging one line instead: a stop is not an error (the trial saved its
    checkpoint, is recorded ``FAIL`` and a rerun replaces it)."""

    def __init__(self, worker: int, log: Callable[[str], None]) -> None:
        super().__init__()
        self.worker = worker
        self.log = log
        self.stopped: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        trial = message.split(" failed ", 1)[0]  # "Trial N"
        if record.exc_info and isinstance(record.exc_info[1], KeyboardInterrupt):
            self.stopped.add(trial)
            self.log(f"[worker {self.worker}] {trial.lower()} stopped (not counted), saved")
            return False
        return trial not in self.stopped  # its "failed with value None" follow-up


OPTUNA_OPTIMIZE_LOGGER: Final = "optuna.study._optimize"
"""The logger of Optuna's trial loop (where it reports a failed trial)."""


def run_worker(
    config_file: str,
    storage_url: str,
    study_name: str,
    n_trials: int,
    out: Path,
    worker: int = 0,
    log: Callable[[str], None] = print,
    solo: bool = False,
) -> None:
    """Run trials until the study has ``n_trials`` finished ones (Optuna's
    :class:`~optuna.study.MaxTrialsCallback`; failed trials are replaced).

    ``solo``: the single in-process worker of the process that created the study
    (its seeded sampler is reproducible).
    """
    tcfg = load_tuning_config(config_file)
    study, _ = open_study(tcfg, storage_url, study_name, worker, None if solo else process_nonce())
    if count_finished(study) >= n_trials:
        return  # optimize() would start a trial before any callback could stop it
    optuna_log = logging.getLogger(OPTUNA_OPTIMIZE_LOGGER)
    quiet = StoppedTrials(worker, log)
    optuna_log.addFilter(quiet)
    try:
        study.optimize(
            Objective(tcfg, out, worker, log),
            catch=(Exception,),  # recorded as FAIL with the reason; FailureLimit stops a loop
            callbacks=[MaxTrialsCallback(n_trials, states=FINISHED), FailureLimit(worker, log)],
            gc_after_trial=True,
        )
    finally:
        optuna_log.removeFilter(quiet)


def _worker_entry(
    config_file: str,
    storage_url: str,
    study_name: str,
    n_trials: int,
    out: str,
    worker: int,
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
    try:
        out.mkdir(parents=True)
        made_out = True
    except FileExistsError:
        made_out = False
    url = storage or default_storage_url(out)
    try:
        marker = _read_marker(out, name, url)
        study, created = open_study(tcfg, url, name, create=marker is None)
        _claim_out(out, study, url, created, marker)
    except (TuneError, ConfigError):
        if made_out:  # leave no folder behind for a search that never started
            _remove_unstarted(out)
        raise
    trials_dir = out / TRIALS_DIR
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
        files,
    )


def _remove_unstarted(out: Path) -> None:
    """Remove the ``out`` this call made for a search refused before it started, unless it
    holds more than that refusal can have written (another search started in it at once)."""
    if {p.name for p in out.iterdir()} <= {DB_FILE, STUDY_FILE}:
        shutil.rmtree(out, ignore_errors=True)


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
    procs = [
        ctx.Process(
            target=_worker_entry,
            args=(file, url, name, n_trials, str(out), i),
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


def _last_evaluation(trial: FrozenTrial) -> float | None:
    """The final win rate, or (pruned, stopped) the last reported evaluation."""
    if trial.value is not None or not trial.intermediate_values:
        return trial.value
    return trial.intermediate_values[max(trial.intermediate_values)]


SUMMARY_COLUMNS: Final = ("trial", "state", "win_rate", "ci_low", "ci_high", "timesteps", "seconds")
SUMMARY_ATTRS: Final = ("ci_low", "ci_high", "timesteps", SEED_ATTR, "host", "run_dir")
RATE_COLUMNS: Final = ("win_rate", "ci_low", "ci_high")


def summary_table(study: optuna.Study, tcfg: TuningConfig) -> pd.DataFrame:
    """Optuna's ``trials_dataframe``, one row per trial: state, win rate (pruned: last
    evaluation), Wilson interval, timesteps, seconds, parameters, seed, host, run directory."""
    import pandas as pd  # noqa: PLC0415 (Optuna's trials_dataframe needs it)

    attrs = ("number", "state", "value", "duration", "params", "user_attrs")
    df = study.trials_dataframe(attrs=attrs)
    if df.empty:
        return df
    df["value"] = [_last_evaluation(t) for t in study.get_trials(deepcopy=False)]
    df["state"] = df["state"].str.lower()
    df["duration"] = pd.to_timedelta(df["duration"]).dt.total_seconds().round(1)
    names = {"number": "trial", "value": "win_rate", "duration": "seconds"}
    names |= {f"params_{p}": p for p in tcfg.search.parameters}
    names |= {f"user_attrs_{a}": a for a in SUMMARY_ATTRS}
    df = df.rename(columns=names)
    df = df.loc[:, ~df.columns.duplicated()]  # a searched top-level seed: the trial's seed
    columns = [*SUMMARY_COLUMNS, *tcfg.search.parameters, SEED_ATTR, "host", "run_dir"]
    return df.reindex(columns=list(dict.fromkeys(columns)))


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def format_summary(df: pd.DataFrame) -> str:
    """A markdown table of :func:`summary_table` (win rates in %, no run directory)."""
    if df.empty:
        return "(no trials)"
    shown = df.drop(columns="run_dir").astype(object)
    for col in RATE_COLUMNS:
        shown[col] = [f"{100 * v:.2f}%" if _cell(v) else "" for v in df[col]]
    rows = [[_cell(v) for v in row] for row in shown.itertuples(index=False)]
    lines = ["| " + " | ".join(shown.columns) + " |", "|" + "---|" * len(shown.columns)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


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


def plot_study(study: optuna.Study, out: Path) -> str | None:
    """Optuna's matplotlib plots: ``summary.png`` (win rate per complete trial with its 95%
    Wilson interval, best so far), ``curves.png`` (each trial's evaluations: pruned trials
    stop early) and, once measurable, ``importances.png`` (PED-ANOVA).

    Returns the reason importances are missing, if they are.
    """
    plt = pyplot()  # the Agg backend chosen before Optuna's plots import pyplot
    from optuna.visualization import matplotlib as plots  # noqa: PLC0415

    _, reason = _importances(study)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # experimental plots, too few trials to compare
        axes = {
            SUMMARY_PNG: plots.plot_optimization_history(study, target_name="win rate"),
            CURVES_PNG: plots.plot_intermediate_values(study),
        }
        if reason is None:
            evaluator = optuna.importance.PedAnovaImportanceEvaluator()
            axes[IMPORTANCES_PNG] = plots.plot_param_importances(study, evaluator=evaluator)
    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    rates = [float(t.value or 0.0) for t in done]
    lows = [v - t.user_attrs.get("ci_low", v) for v, t in zip(rates, done, strict=True)]
    highs = [t.user_attrs.get("ci_high", v) - v for v, t in zip(rates, done, strict=True)]
    axes[SUMMARY_PNG].errorbar(
        [t.number for t in done], rates, yerr=[lows, highs], fmt="none", ecolor="grey", capsize=3
    )
    axes[SUMMARY_PNG].set_title(f"{study.study_name}: win rate per trial (95% Wilson)")
    for name, ax in axes.items():
        buf, fig = io.BytesIO(), ax.get_figure(root=True)
        assert fig is not None
        fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
        plt.close(fig)
        atomic_write_bytes(out / name, buf.getvalue())
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
    """summary.csv / .md, the plots, best_config.yaml and best_trial.json; prints the table."""
    df = summary_table(study, tcfg)
    files = {"csv": out / SUMMARY_CSV, "md": out / SUMMARY_MD, "png": out / SUMMARY_PNG}
    files["curves"] = out / CURVES_PNG
    atomic_write_text(files["csv"], df.to_csv(index=False))
    table = format_summary(df)
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
                "params": {p: tcfg.search.parameters[p].decode(v) for p, v in best.params.items()},
                "user_attrs": best.user_attrs,
                "config": str(out / BEST_CONFIG),
            },
        )
        head.append(f"- best: trial {best.number}, win rate {100 * (best.value or 0):.2f}%")
    importances, reason = _importances(study)
    shown = ", ".join(f"{name} {value:.2f}" for name, value in importances.items())
    head.append(f"- importances (PED-ANOVA): {shown or reason}")
    if plot_study(study, out) is None:
        files["importances"] = out / IMPORTANCES_PNG
    atomic_write_text(files["md"], "\n".join([*head, "", table, ""]))
    log(table)
    log("\n".join(head[2:]))
    log(f"reports: {', '.join(str(p) for p in files.values())}")
    return files
