"""Hyperparameter search with Optuna: the objective, the study, its workers and the reports.

The search space is the config's ``search:`` section (:mod:`agents.learning.search_space`);
how to run a search: ``docs/tuning.md``. A trial trains the sampled config into
``OUT/trials/trial-NNNN`` (kept) and returns its final evaluation's win rate; every periodic
evaluation is reported to Optuna, whose pruner can stop it (``PRUNED``).

Workers are Optuna's way to search in parallel: processes running the same search on one
storage (``--workers K`` starts K copies of the command, :func:`_run_copies`; another
machine runs it against the same ``--storage``). Each runs ``study.optimize`` with Optuna's
:class:`~optuna.study.MaxTrialsCallback`: trials start while fewer than ``--trials N`` are
finished (complete or pruned; failed ones are replaced), so W workers end with N to
N + W - 1. Optuna's heartbeat fails a dead worker's trials. Optuna commits each trial as it
ends: Ctrl-C loses no finished trial (running ones save a checkpoint, recorded ``FAIL``) and
rerunning continues the study, whose config and search space are stored with it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import optuna
from optuna.study import MaxTrialsCallback
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy.engine import make_url

if TYPE_CHECKING:
    import pandas as pd

from agents.atomic import atomic_write_json, atomic_write_text
from agents.evaluation.arena import markdown_table
from agents.evaluation.plots import pyplot, save_png
from agents.learning.config import config_changes, config_from_dict, describe_changes, dump_config
from agents.learning.provenance import META_FILE
from agents.learning.search_space import (
    InvalidSample,
    PrunerSpec,
    SamplerSpec,
    TuningConfig,
    load_tuning_config,
)
from agents.learning.training import recorded_signals, train

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
STUDY_ID_ATTR: Final = "coldiron_study_id"
"""Study attribute: a random id written once, so an output folder knows its study."""
ERROR_ATTR: Final = "error"
INVALID_ATTR: Final = "invalid_sample"
WORKER_ATTR: Final = "worker"
"""Trial attribute: ``host:pid`` of the worker that ran it."""
SEED_ATTR: Final = "seed"
NONCE_BYTES: Final = 8
POLL_SECONDS: Final = 0.5
"""How often ``--workers K`` looks for a stop request while its copies run."""
TUNE_SCRIPT: Final = Path(__file__).resolve().parents[2] / "scripts" / "tune.py"
"""The command ``--workers K`` starts copies of."""

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
FINISHED: Final = (TrialState.COMPLETE, TrialState.PRUNED)
"""What ``--trials N`` counts."""
OPTUNA_OPTIMIZE_LOGGER: Final = "optuna.study._optimize"
"""The logger of Optuna's trial loop (where it reports a failed trial)."""


class TuneError(RuntimeError):
    """A search that cannot start or continue (study mismatch, worker failure...)."""


def worker_name() -> str:
    """This process as trials and logs name it: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def build_sampler(spec: SamplerSpec, nonce: int | None = None) -> optuna.samplers.BaseSampler:
    """A worker's sampler. A configured seed is used as is without a ``nonce`` (by the one
    worker of the process that created the study: a seeded one-worker search repeats); any
    other worker mixes in its own random ``nonce``, so no two workers replay samples."""
    seed = spec.seed
    if seed is not None and nonce is not None:
        seed = int(np.random.SeedSequence([seed, nonce]).generate_state(1)[0])
    if spec.kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    # constant_liar: running trials count as bad guesses, so parallel workers do not all
    # sample the same promising point
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
    """An RDB storage for any SQLAlchemy URL, with heartbeats (dead workers' trials fail);
    SQLite gets a long lock timeout (several processes write the file)."""
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
        except ImportError as exc:
            raise TuneError(
                f"storage {redact(url)}: missing database driver ({exc}); for PostgreSQL "
                "install psycopg2-binary"
            ) from None
        except Exception as exc:
            raise TuneError(f"storage {redact(url)}: cannot open it: {exc}") from None


def count_finished(study: optuna.Study) -> int:
    """Complete + pruned trials: what ``--trials N`` counts."""
    return len(study.get_trials(deepcopy=False, states=FINISHED))


# ---------------------------------------------------------------- the objective
@dataclass
class Objective:
    """One trial: sample, train into ``trials/trial-NNNN``, return the win rate."""

    tcfg: TuningConfig
    out: Path
    log: Callable[[str], None] = print

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
        run_dir = self.out / TRIALS_DIR / f"trial-{trial.number:04d}"
        trial.set_user_attr("run_dir", str(run_dir.resolve()))
        trial.set_user_attr("host", socket.gethostname())
        trial.set_user_attr(WORKER_ATTR, worker_name())
        trial.set_user_attr(SEED_ATTR, cfg.seed)
        if run_dir.exists():
            raise TuneError(
                f"{run_dir}: already exists, but trial {trial.number} of study "
                f"{trial.study.study_name!r} is new; another search used this --out "
                "(use another --out, or the storage those trials belong to)"
            )
        shown = ", ".join(f"{k}={v!r}" for k, v in params.items())
        self.log(f"[{worker_name()}] trial {trial.number}: {shown} -> {run_dir}")
        pruned_at: list[int] = []

        def report(record: dict[str, Any]) -> bool:
            """Each evaluation is an intermediate value; the pruner may stop training."""
            trial.report(float(record["win_rate"]), int(record["timesteps"]))
            if trial.should_prune():
                pruned_at.append(int(record["timesteps"]))
            return not pruned_at

        result = train(
            cfg,
            run_dir,
            config_file=self.tcfg.file,
            on_evaluation=report,
            log=self.log,
            resume_hint=False,  # a stopped trial is replaced by a new one, never resumed
        )
        trial.set_user_attr("timesteps", result.timesteps)
        trial.set_user_attr("wall_seconds", round(result.wall_seconds, 1))
        if result.history:  # a stopped trial's too: the summary shows where it stood
            for key in ("episodes", "wins", "ci_low", "ci_high"):
                trial.set_user_attr(key, result.history[-1][key])
        if result.interrupted:
            raise KeyboardInterrupt
        if pruned_at:
            meta = json.loads((run_dir / META_FILE).read_text(encoding="utf-8"))
            meta.update(status="pruned", pruned_at=pruned_at[0])
            atomic_write_json(run_dir / META_FILE, meta)
            trial.set_user_attr("pruned_at", pruned_at[0])
            raise optuna.TrialPruned(f"win rate below the pruner's bar at {pruned_at[0]} timesteps")
        return float(result.history[-1]["win_rate"])


# ---------------------------------------------------------------- the study
def open_study(
    tcfg: TuningConfig, storage_url: str, study_name: str, create: bool = True
) -> tuple[optuna.Study, bool]:
    """Load or create the study: ``(study, created)``; one of another config, or not
    maximising one objective, is refused. ``create=False``: a missing study is an error."""
    sampler, pruner = build_sampler(tcfg.search.sampler), build_pruner(tcfg.search.pruner)
    where: dict[str, Any] = {"study_name": study_name, "storage": make_storage(storage_url),
                             "sampler": sampler, "pruner": pruner}  # fmt: skip
    created = False
    try:
        study = optuna.load_study(**where)
    except KeyError:
        if not create:
            raise TuneError(
                f"study {study_name!r} is not in {redact(storage_url)}, but the output folder "
                f"was made for it ({STUDY_FILE}); give its --storage, or use another --out"
            ) from None
        try:
            study, created = optuna.create_study(**where, direction="maximize"), True
        except optuna.exceptions.DuplicatedStudyError:  # another machine created it just now
            study = optuna.load_study(**where)
    if study.directions != [optuna.study.StudyDirection.MAXIMIZE]:
        raise TuneError(
            f"study {study_name!r} in {redact(storage_url)} has {len(study.directions)} "
            f"objective(s) ({', '.join(d.name.lower() for d in study.directions)}): not a "
            "win-rate study (one objective, maximised); use --study NEW_NAME"
        )
    fingerprint = tcfg.fingerprint()
    stored = study.user_attrs.get(FINGERPRINT_ATTR)
    plain = json.loads(json.dumps(tcfg.base_data, default=str))  # as the storage keeps it
    if stored is not None and stored != fingerprint:
        had = {  # a study made before the config was kept: its search's changes alone
            "config": study.user_attrs.get(BASE_ATTR, plain),
            "search": study.user_attrs.get(SEARCH_ATTR),
        }
        changes = config_changes(had, {"config": plain, "search": tcfg.search.model_dump()})
        what = f": {describe_changes(changes)}" if changes else ""
        raise TuneError(
            f"study {study_name!r} in {redact(storage_url)} was made with another config or "
            f"search space (fingerprint {stored}, {tcfg.file} gives {fingerprint}){what}; "
            "use --study NEW_NAME (or restore the config)"
        )
    kept = {
        STUDY_ID_ATTR: os.urandom(NONCE_BYTES).hex(),
        FINGERPRINT_ATTR: fingerprint,
        SEARCH_ATTR: tcfg.search.model_dump(),
        BASE_ATTR: plain,
        "config_name": tcfg.name,
    }
    for key, value in kept.items():  # a new study's; an older one's missing (BASE_ATTR)
        if key not in study.user_attrs:
            study.set_user_attr(key, value)
    return study, created


@dataclass
class FailureLimit:
    """Optuna callback: a worker stops after :data:`MAX_CONSECUTIVE_FAILURES` failed trials
    (:data:`MAX_CONSECUTIVE_INVALID` invalid samples) in a row, where ``catch`` would go on."""

    log: Callable[[str], None]
    failures: int = 0
    invalid: int = 0

    def __call__(self, _study: optuna.Study, trial: FrozenTrial) -> None:
        if trial.state != TrialState.FAIL:
            self.failures = self.invalid = 0
            return
        reason = trial.user_attrs.get(ERROR_ATTR, "see the traceback above")
        self.log(f"[{worker_name()}] trial {trial.number} failed (not counted): {reason}")
        if trial.user_attrs.get(INVALID_ATTR):
            self.invalid += 1
            if self.invalid >= MAX_CONSECUTIVE_INVALID:
                raise TuneError(
                    f"{self.invalid} samples in a row gave an invalid config in worker "
                    f"{worker_name()} (two searched keys that clash): narrow the search: section"
                )
        else:
            self.failures += 1
            if self.failures >= MAX_CONSECUTIVE_FAILURES:
                raise TuneError(
                    f"{self.failures} trials failed in a row in worker {worker_name()} (last: "
                    f"trial {trial.number}); see the log above"
                )


class StoppedTrials(logging.Filter):
    """Drops Optuna's two warnings (one with a stack trace) about a trial stopped by Ctrl-C or
    SIGTERM for one line: a stop is not an error (the trial saved, a rerun replaces it)."""

    def __init__(self, log: Callable[[str], None]) -> None:
        super().__init__()
        self.log = log
        self.stopped: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        trial = record.getMessage().split(" failed ", 1)[0]  # "Trial N"
        if record.exc_info and isinstance(record.exc_info[1], KeyboardInterrupt):
            self.stopped.add(trial)
            self.log(f"[{worker_name()}] {trial.lower()} stopped (not counted), saved")
            return False
        return trial not in self.stopped  # its "failed with value None" follow-up


def run_worker(
    study: optuna.Study,
    tcfg: TuningConfig,
    n_trials: int,
    out: Path,
    log: Callable[[str], None] = print,
) -> None:
    """Run trials until ``study`` has ``n_trials`` finished ones (Optuna's
    :class:`~optuna.study.MaxTrialsCallback`; failed trials are replaced)."""
    if count_finished(study) >= n_trials:
        return  # optimize() would start a trial before any callback could stop it
    optuna_log = logging.getLogger(OPTUNA_OPTIMIZE_LOGGER)
    quiet = StoppedTrials(log)
    optuna_log.addFilter(quiet)
    try:
        study.optimize(
            Objective(tcfg, out, log),
            catch=(Exception,),  # recorded as FAIL with the reason; FailureLimit stops a loop
            callbacks=[MaxTrialsCallback(n_trials, states=FINISHED), FailureLimit(log)],
            gc_after_trial=True,
        )
    finally:
        optuna_log.removeFilter(quiet)


def _run_copies(command: list[str], workers: int) -> None:
    """Run ``workers`` copies of ``command`` (a one-worker ``scripts/tune.py``) to their end.

    Hand-written beside Optuna (which leaves starting processes to its user) to pass a stop
    on: each copy has a session of its own, so a terminal's Ctrl-C (or a ``kill``) reaches
    this process alone, which passes it on to each copy once (a second could break a save)."""
    with recorded_signals() as stop:
        copies = [subprocess.Popen(command, start_new_session=True) for _ in range(workers)]
        while not stop and any(p.poll() is None for p in copies):
            time.sleep(POLL_SECONDS)
        if stop:
            for p in copies:
                if p.poll() is None:
                    p.send_signal(signal.SIGINT)
        codes = [p.wait() for p in copies]
    if stop or EXIT_INTERRUPTED in codes:
        raise KeyboardInterrupt
    if any(codes):
        raise TuneError(f"worker(s) failed (exit codes {codes}); see the log above")


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
    reports: bool = True,
    log: Callable[[str], None] = print,
) -> TuneResult:
    """Run (or continue) the search of ``config_file`` until ``n_trials`` trials are finished:
    in this process, or ``workers`` copies of ``scripts/tune.py``. The reports (unless
    ``reports`` is false) are written at the end, after Ctrl-C too."""
    if n_trials < 1:
        raise ValueError(f"--trials must be >= 1, got {n_trials}")
    if workers < 1:
        raise ValueError(f"--workers must be >= 1, got {workers}")
    file = str(config_file)
    tcfg = load_tuning_config(file)
    name = study_name or tcfg.name
    if out is None:
        raise TuneError("a search needs its output folder: --out DIR")
    made_out = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    url = storage or default_storage_url(out)
    try:
        marker = _read_marker(out, name, url)
        study, created = open_study(tcfg, url, name, create=marker is None)
        _claim_out(out, study, url, created, marker)
    except Exception:
        if made_out:  # leave no folder behind for a search that never started
            _remove_unstarted(out)
        raise
    before = count_finished(study)
    log(
        f"study {name!r} in {redact(url)}: {before} finished trial(s), target {n_trials}, "
        f"{workers} worker(s), trial runs in {out / TRIALS_DIR}"
    )
    interrupted = False
    failure: TuneError | None = None
    if before < n_trials:
        try:
            if workers == 1:
                if not created:  # only the study's creator samples its seed as is
                    study.sampler = build_sampler(tcfg.search.sampler, _nonce())
                run_worker(study, tcfg, n_trials, out, log)
            else:
                _run_copies([sys.executable, str(TUNE_SCRIPT), "--config", file, "--trials",
                             str(n_trials), "--storage", url, "--study", name, "--out", str(out),
                             "--no-reports"], workers)  # fmt: skip
                log(f"{workers} workers done")
        except KeyboardInterrupt:
            interrupted = True
            log(
                "interrupted: finished trials are saved in the study; rerun the command to continue"
            )
        except TuneError as exc:
            failure = exc  # still write the reports of the trials that finished
    files = write_reports(study, tcfg, out, url, log) if reports else {}
    if failure is not None:
        raise failure
    best = _best(study)
    number, value = (best.number, best.value) if best else (None, None)
    return TuneResult(name, url, out, count_finished(study), interrupted, number, value, files)


def _nonce() -> int:
    """A random number of this process (differs between processes, machines, containers)."""
    return int.from_bytes(os.urandom(NONCE_BYTES), "little")


def _remove_unstarted(out: Path) -> None:
    """Remove the ``out`` made for a search refused before it started, unless it holds more
    than the refusal wrote (another search started in it at once)."""
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
        return "(no trials)\n"
    shown = df.drop(columns="run_dir").astype(object)
    for col in RATE_COLUMNS:
        shown[col] = [f"{100 * v:.2f}%" if _cell(v) else "" for v in df[col]]
    rows = [[_cell(v) for v in row] for row in shown.itertuples(index=False)]
    return markdown_table(list(shown.columns), rows)


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
    """Optuna's matplotlib plots: ``summary.png`` (win rate per complete trial, its 95% Wilson
    interval, the best so far), ``curves.png`` (each trial's evaluations), ``importances.png``
    (PED-ANOVA) once measurable. Returns why importances are missing, if they are."""
    pyplot()  # the Agg backend chosen before Optuna's plots import pyplot
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
        save_png(ax.get_figure(root=True), out / name, dpi=100, bbox_inches="tight")
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
        f"# .venv/bin/python scripts/train.py --config {path} --seeds 0-2 --out runs/best-seeds\n"
    )
    atomic_write_text(path, header + dump_config(cfg))
    return best


def write_reports(
    study: optuna.Study, tcfg: TuningConfig, out: Path, url: str, log: Callable[[str], None] = print
) -> dict[str, Path]:
    """summary.csv / .md, the plots, best_config.yaml and best_trial.json; prints the table."""
    df = summary_table(study, tcfg)
    files = {"csv": out / SUMMARY_CSV, "md": out / SUMMARY_MD, "png": out / SUMMARY_PNG,
             "curves": out / CURVES_PNG}  # fmt: skip
    atomic_write_text(files["csv"], df.to_csv(index=False))
    best = export_best(study, tcfg, out / BEST_CONFIG)
    head = [
        f"# Study {study.study_name}",
        "",
        f"- config: {tcfg.file}",
        f"- storage: {redact(url)}",
        f"- finished trials (complete + pruned): {count_finished(study)}",
        "- objective: final evaluation win rate on the config's fixed evaluation deals",
    ]
    if best is not None:
        files["best_config"], files["best_json"] = out / BEST_CONFIG, out / BEST_JSON
        params = {p: tcfg.search.parameters[p].decode(v) for p, v in best.params.items()}
        atomic_write_json(files["best_json"], {"study": study.study_name, "trial": best.number,
                                               "win_rate": best.value, "params": params,
                                               "user_attrs": best.user_attrs,
                                               "config": str(out / BEST_CONFIG)})  # fmt: skip
        head.append(f"- best: trial {best.number}, win rate {100 * (best.value or 0):.2f}%")
    importances, reason = _importances(study)
    shown = ", ".join(f"{name} {value:.2f}" for name, value in importances.items())
    head.append(f"- importances (PED-ANOVA): {shown or reason}")
    if plot_study(study, out) is None:
        files["importances"] = out / IMPORTANCES_PNG
    table = format_summary(df)
    atomic_write_text(files["md"], "\n".join([*head, "", table]))
    log(table)
    log("\n".join(head[2:]))
    log(f"reports: {', '.join(str(p) for p in files.values())}")
    return files
