"""Hyperparameter search (agents/learning/tuning.py, search_space.py) and multi-seed results
(agents/learning/multiseed.py).

The searches train tiny runs (128 timesteps, 2 envs, 10 evaluation deals): they
check the bookkeeping (N trials across workers, resume, pruning, run
directories, reports), not what is learnt. The PostgreSQL test starts its own
throwaway server (initdb + pg_ctl on a free port, as the ``postgres`` user when
run as root), or uses ``$COLDIRON_TEST_POSTGRES_URL``; it is skipped, with the
reason, only where no server can be started.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import math
import os
import pwd
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import optuna
import pytest
import yaml
from helpers import load_file
from optuna.trial import TrialState

from agents.evaluation.stats import wilson_interval
from agents.learning.config import ConfigError, load_config
from agents.learning.multiseed import (
    SeedRun,
    aggregate,
    aggregate_results,
    expand_seed_root,
    parse_seeds,
    run_label,
    seed_aggregates,
    t_critical,
    train_seeds,
    twin_seed_groups,
    unfinished_runs,
)
from agents.learning.provenance import TrainingError
from agents.learning.search_space import SamplerSpec, load_tuning_config
from agents.learning.training import RunDir, latest_checkpoint
from agents.learning.tuning import (
    BEST_CONFIG,
    CURVES_PNG,
    DB_FILE,
    IMPORTANCES_PNG,
    SUMMARY_CSV,
    SUMMARY_MD,
    SUMMARY_PNG,
    TRIALS_DIR,
    WORKER_ATTR,
    TuneError,
    build_sampler,
    default_storage_url,
    open_study,
    plot_study,
    run_worker,
    tune,
)

PG_URL_ENV = "COLDIRON_TEST_POSTGRES_URL"
PG_REQUIRE_ENV = "COLDIRON_REQUIRE_POSTGRES"
STOP_TIMEOUT_SECONDS = 300  # generous: a loaded CI machine saves and writes reports slowly
SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def stopped_state(run_dir: Path) -> Any:
    """The ``state.json`` of the checkpoint a run directory would resume from."""
    checkpoint = latest_checkpoint(RunDir(run_dir))
    assert checkpoint is not None and (checkpoint / "model.zip").is_file(), run_dir
    return json.loads((checkpoint / "state.json").read_text())


def script_main(name: str) -> Any:
    """``main`` of ``scripts/<name>.py`` (the scripts folder is not a package)."""
    return load_file(SCRIPTS / f"{name}.py", f"_script_{name}").main


BASE: dict[str, Any] = {
    "name": "tiny",
    "seed": 0,
    "algorithm": {
        "name": "maskable_ppo",
        "hyperparameters": {
            "learning_rate": 3.0e-4,
            "n_steps": 32,
            "batch_size": 64,
            "n_epochs": 1,
        },
    },
    "policy": {"net_arch": [8]},
    "training": {"total_timesteps": 128, "n_envs": 2, "progress_bar": False},
    "evaluation": {"freq": 128, "episodes": 10},
    "checkpoint": {"freq": 100_000},
}
SEARCH: dict[str, Any] = {
    "sampler": {"kind": "random", "seed": 1},
    "pruner": {"kind": "none"},
    "parameters": {
        "algorithm.hyperparameters.learning_rate": {
            "distribution": "float",
            "low": 1.0e-5,
            "high": 1.0e-2,
            "log": True,
        },
        "algorithm.hyperparameters.gamma": {"distribution": "float", "low": 0.9, "high": 1.0},
        "algorithm.hyperparameters.n_epochs": {"distribution": "int", "low": 1, "high": 2},
        "policy.net_arch": {"distribution": "categorical", "choices": [[8], [16, 16]]},
    },
}


def write_config(path: Path, search: Any = SEARCH, **changes: Any) -> Path:
    data = json.loads(json.dumps(BASE))
    data.update(changes)
    if search is not None:
        data["search"] = search
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def with_param(name: str, spec: Any) -> dict[str, Any]:
    search: dict[str, Any] = json.loads(json.dumps(SEARCH))
    search["parameters"][name] = spec
    return search


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


# ---------------------------------------------------------------- the search: section
def test_valid_search_section_parses_and_applies(tmp_path: Path) -> None:
    tcfg = load_tuning_config(write_config(tmp_path / "t.yaml"))
    specs = tcfg.search.parameters
    assert list(specs) == list(SEARCH["parameters"])
    arch = specs["policy.net_arch"]
    assert arch.encoded  # lists go to Optuna as JSON text and come back as lists
    data = tcfg.trial_data(
        {
            "algorithm.hyperparameters.learning_rate": 1e-3,
            "algorithm.hyperparameters.gamma": 0.95,
            "algorithm.hyperparameters.n_epochs": 2,
            "policy.net_arch": arch.optuna_choices()[1],
        }
    )
    assert data["policy"]["net_arch"] == [16, 16]
    assert data["algorithm"]["hyperparameters"]["gamma"] == 0.95
    assert data["algorithm"]["hyperparameters"]["n_steps"] == 32  # untouched
    assert "search" not in data
    assert tcfg.search.sampler.kind == "random"


BAD_SEARCHES = [
    ({"parameters": {}, "bogus": 1}, "search.bogus", "unknown key"),
    ({"parameters": {}}, "search.parameters", "at least 1"),
    (
        with_param(
            "algorithm.hyperparameters.learnin_rate",
            {"distribution": "float", "low": 0.1, "high": 0.2},
        ),
        "search.parameters[algorithm.hyperparameters.learnin_rate]",
        "unknown hyperparameter",
    ),
    (
        with_param("policy.widths", {"distribution": "int", "low": 1, "high": 2}),
        "search.parameters[policy.widths]",
        "unknown config key 'policy.widths'",
    ),
    (
        with_param("seed", {"distribution": "int", "low": 0, "high": 9}),
        "search.parameters[seed]",
        "luckiest",
    ),
    (
        with_param("evaluation.episodes", {"distribution": "int", "low": 100, "high": 200}),
        "search.parameters[evaluation.episodes]",
        "scored on",
    ),
    (
        with_param(
            "algorithm.hyperparameters.gamma", {"distribution": "float", "low": 0.99, "high": 0.9}
        ),
        "search.parameters[algorithm.hyperparameters.gamma].high",
        "must be above low",
    ),
    (
        with_param(
            "algorithm.hyperparameters.gamma", {"distribution": "float", "low": 0.9, "high": 1.5}
        ),
        "search.parameters[algorithm.hyperparameters.gamma].high",
        "gamma",
    ),
    (
        with_param(
            "algorithm.hyperparameters.ent_coef",
            {"distribution": "float", "low": 0.0, "high": 0.1, "log": True},
        ),
        "search.parameters[algorithm.hyperparameters.ent_coef].low",
        "log",
    ),
    (
        with_param(
            "algorithm.hyperparameters.gamma", {"distribution": "normal", "low": 0.9, "high": 1.0}
        ),
        "search.parameters[algorithm.hyperparameters.gamma].distribution",
        "must be one of",
    ),
    (
        with_param(
            "algorithm.hyperparameters.gamma", {"distribution": "float", "low": 0.9, "hihg": 1.0}
        ),
        "search.parameters[algorithm.hyperparameters.gamma].hihg",
        "unknown key",
    ),
    (
        with_param("policy.activation", {"distribution": "categorical", "choices": ["tanh"]}),
        "search.parameters[policy.activation].choices",
        "at least 2",
    ),
    (
        with_param(
            "policy.activation", {"distribution": "categorical", "choices": ["tanh", "swish"]}
        ),
        "search.parameters[policy.activation].choices[1]",
        "'swish' gives an invalid config: policy.activation",
    ),
    (
        with_param(
            "algorithm.hyperparameters.n_epochs", {"distribution": "float", "low": 1, "high": 4}
        ),
        "search.parameters[algorithm.hyperparameters.n_epochs].distribution",
        "use distribution: int",
    ),
    (
        with_param(
            "algorithm.hyperparameters.n_epochs", {"distribution": "int", "low": 1.5, "high": 4}
        ),
        "search.parameters[algorithm.hyperparameters.n_epochs].low",
        "valid integer, got 1.5",
    ),
    (
        with_param("training.n_envs", {"distribution": "int", "low": 1, "high": 4}),
        # n_envs 1 and 4 give rollouts of 32 and 128 steps: batch_size 64 (not searched)
        # must divide them, so the range is refused against the fixed key.
        "search.parameters[training.n_envs].low",
        "batch_size",
    ),
    ({**SEARCH, "pruner": {"kind": "median", "lower": 0.1}}, "search.pruner.lower", "unknown key"),
    ({**SEARCH, "sampler": {"kind": "grid"}}, "search.sampler.kind", "'tpe' or 'random'"),
    ({**SEARCH, "pruner": {"kind": "hyperband"}}, "search.pruner.kind", "must be one of"),
    (
        {**SEARCH, "pruner": {"kind": "successive_halving", "min_resource": 0}},
        "search.pruner.min_resource",
        "greater than or equal to 1, got 0",
    ),
    (
        with_param("algorithm.hyperparameters.gamma", {"low": 0.9, "high": 1.0}),
        "search.parameters[algorithm.hyperparameters.gamma].distribution",
        "must be one of ['float', 'int', 'categorical'], got None",
    ),
    (
        with_param("algorithm.hyperparameters.gamma", 0.9),
        "search.parameters[algorithm.hyperparameters.gamma]",
        "must be a mapping",
    ),
]


@pytest.mark.parametrize(("search", "key", "reason"), BAD_SEARCHES)
def test_bad_search_section_is_refused_naming_file_and_key(
    tmp_path: Path, search: Any, key: str, reason: str
) -> None:
    path = write_config(tmp_path / "bad.yaml", search)
    with pytest.raises(ConfigError) as info:
        load_tuning_config(path)
    assert info.value.file == str(path)
    assert info.value.key == key
    assert reason in info.value.reason


def test_missing_search_section_and_bad_base_config_are_refused(tmp_path: Path) -> None:
    path = write_config(tmp_path / "none.yaml", search=None)
    with pytest.raises(ConfigError, match=r"none\.yaml: search: required"):
        load_tuning_config(path)
    path = write_config(tmp_path / "base.yaml", seed=-1)
    with pytest.raises(ConfigError) as info:
        load_tuning_config(path)
    assert info.value.key == "seed"


def test_joint_constraint_of_two_searched_keys_is_left_to_sampling(tmp_path: Path) -> None:
    both = with_param(
        "algorithm.hyperparameters.n_steps", {"distribution": "int", "low": 16, "high": 64}
    )
    both["parameters"]["algorithm.hyperparameters.batch_size"] = {
        "distribution": "categorical",
        "choices": [32, 64],
    }
    tcfg = load_tuning_config(write_config(tmp_path / "joint.yaml", both))
    # n_steps 16 * 2 envs = 32 < batch_size 64: this combination fails its trial, with the reason
    from agents.learning.search_space import InvalidSample

    params = {path: getattr(p, "low", None) for path, p in tcfg.search.parameters.items()}
    params["policy.net_arch"] = tcfg.search.parameters["policy.net_arch"].optuna_choices()[0]
    params["algorithm.hyperparameters.batch_size"] = 64
    with pytest.raises(InvalidSample, match="batch_size"):
        tcfg.trial_config(params)


def test_cli_refuses_a_bad_search_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main = script_main("tune")
    bad = with_param(
        "algorithm.hyperparameters.gamma", {"distribution": "float", "low": 2.0, "high": 3.0}
    )
    path = write_config(tmp_path / "bad.yaml", bad)
    assert main(["--config", str(path), "--trials", "2", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "search.parameters[algorithm.hyperparameters.gamma].low" in err
    assert str(path) in err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_train_script_refuses_a_bad_search_section_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main = script_main("train")
    bad = with_param("policy.widths", {"distribution": "int", "low": 1, "high": 2})
    path = write_config(tmp_path / "bad.yaml", bad)
    out = tmp_path / "run"
    assert main(["--config", str(path), "--out", str(out), "--no-progress-bar"]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "search.parameters[policy.widths]" in err
    assert "unknown config key" in err
    assert not out.exists(), "nothing may run before validation passes"


def test_run_config_keeps_search_as_plain_data_without_importing_search_space(
    tmp_path: Path,
) -> None:
    path = write_config(tmp_path / "t.yaml")
    cfg = load_config(path)  # the run config alone: search: is opaque data
    assert cfg.search == SEARCH
    assert cfg.to_dict()["search"] == SEARCH
    code = (
        "import sys; from agents.learning.config import load_config; "
        f"cfg = load_config({str(path)!r}); assert cfg.search is not None; "
        "assert 'agents.learning.search_space' not in sys.modules, 'import cycle'"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


# ---------------------------------------------------------------- trial accounting (no training)
def test_a_worker_joining_a_study_of_n_finished_trials_runs_none(tmp_path: Path) -> None:
    """``optimize`` starts a trial before ``MaxTrialsCallback`` can stop it: the worker
    checks the count first."""
    tcfg = load_tuning_config(write_config(tmp_path / "t.yaml"))
    url = default_storage_url(tmp_path)
    study, _ = open_study(tcfg, url, "done")
    for state in (TrialState.COMPLETE, TrialState.PRUNED):
        study.add_trial(
            optuna.trial.create_trial(state=state, value=0.5, params={}, distributions={})
        )
    run_worker(study, tcfg, 2, tmp_path, log=lambda _m: None)
    assert len(optuna.load_study(study_name="done", storage=url).trials) == 2
    assert not (tmp_path / TRIALS_DIR).exists()


def test_no_reports_leaves_the_summary_to_another_process(tmp_path: Path) -> None:
    """What the copies ``--workers K`` starts are told (``--no-reports``): the first process
    writes the summary once they are done."""
    path = write_config(tmp_path / "t.yaml")
    out = tmp_path / "out"
    out.mkdir()
    study = optuna.create_study(
        study_name="tiny", storage=default_storage_url(out), direction="maximize"
    )
    study.add_trial(optuna.trial.create_trial(value=0.5, params={}, distributions={}))
    quiet = tune(path, 1, out=out, reports=False, log=lambda _m: None)
    assert quiet.finished == 1 and quiet.files == {} and not (out / SUMMARY_MD).exists()
    assert script_main("tune")(["--config", str(path), "--trials", "1", "--out", str(out)]) == 0
    assert (out / SUMMARY_MD).is_file() and (out / BEST_CONFIG).is_file()


def test_study_of_another_config_is_refused(tmp_path: Path) -> None:
    from agents.learning.tuning import TuneError

    url = default_storage_url(tmp_path)
    open_study(load_tuning_config(write_config(tmp_path / "a.yaml")), url, "s")
    other = load_tuning_config(write_config(tmp_path / "b.yaml", seed=5))
    with pytest.raises(TuneError, match=r"another config .*: config\.seed: \d+ -> 5;"):
        open_study(other, url, "s")  # the key that changed, with both values


def test_a_study_made_before_the_config_was_kept_learns_it_when_next_opened(
    tmp_path: Path,
) -> None:
    """A study that kept only the fingerprint gains the config on a matching open, so a later
    refusal names the changed key too."""
    from agents.learning.tuning import BASE_ATTR, FINGERPRINT_ATTR, SEARCH_ATTR, TuneError

    url = default_storage_url(tmp_path)
    tcfg = load_tuning_config(write_config(tmp_path / "a.yaml"))
    old = optuna.create_study(study_name="s", storage=url, direction="maximize")
    old.set_user_attr(FINGERPRINT_ATTR, tcfg.fingerprint())  # as before BASE_ATTR existed
    old.set_user_attr(SEARCH_ATTR, tcfg.search.model_dump())
    open_study(tcfg, url, "s")
    assert BASE_ATTR in optuna.load_study(study_name="s", storage=url).user_attrs
    other = load_tuning_config(write_config(tmp_path / "b.yaml", seed=5))
    with pytest.raises(TuneError, match=r"config\.seed: \d+ -> 5"):
        open_study(other, url, "s")


def test_summary_plot_handles_few_and_many_completed_trials(tmp_path: Path) -> None:
    from agents.learning.tuning import _importances

    study = optuna.create_study(direction="maximize")
    assert _importances(study)[1] == "importances need >= 2 completed trials (0 so far)"
    dist = {
        "x": optuna.distributions.FloatDistribution(0.0, 1.0),
        "k": optuna.distributions.IntDistribution(1, 4),
    }
    study.add_trial(
        optuna.trial.create_trial(params={"x": 0.5, "k": 2}, distributions=dist, value=0.3)
    )
    reason = plot_study(study, tmp_path)
    assert reason is not None and "(1 so far)" in reason
    assert (tmp_path / SUMMARY_PNG).is_file() and not (tmp_path / IMPORTANCES_PNG).exists()
    for i in range(8):
        x, k = i / 8, 1 + i % 4
        study.add_trial(
            optuna.trial.create_trial(params={"x": x, "k": k}, distributions=dist, value=x)
        )
    importances, reason = _importances(study)
    assert reason is None
    assert set(importances) == {"x", "k"}
    assert importances["x"] > importances["k"]  # the value is x
    assert plot_study(study, tmp_path) is None
    for name in (SUMMARY_PNG, CURVES_PNG, IMPORTANCES_PNG):
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG"), name


# ---------------------------------------------------------------- searches (tiny training)
def _check_n(out: Path, url: str, study_name: str, n: int, workers: int) -> optuna.Study:
    """N finished trials, or up to ``workers - 1`` more (those running when the N-th ended)."""
    study = optuna.load_study(study_name=study_name, storage=url)
    trials = study.get_trials()
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert n <= len(finished) <= n + workers - 1
    assert len(trials) == len(finished)  # no failed trial either
    numbers = [t.number for t in trials]
    assert sorted(numbers) == list(range(len(trials)))  # none duplicated
    run_dirs = {Path(t.user_attrs["run_dir"]) for t in finished}
    assert len(run_dirs) == len(finished)
    on_disk = {p.resolve() for p in (out / TRIALS_DIR).iterdir()}
    assert on_disk == run_dirs  # one kept directory per finished trial, none lost
    for d in run_dirs:
        for name in ("config.yaml", "model.zip", "evaluations.json", "learning_curve.png"):
            assert (d / name).is_file(), d / name
    for t in finished:
        assert t.state == TrialState.COMPLETE
        assert t.value == pytest.approx(t.user_attrs["wins"] / t.user_attrs["episodes"])
        assert sorted(t.intermediate_values) == [0, 128]
    for name in (SUMMARY_CSV, SUMMARY_MD, SUMMARY_PNG, CURVES_PNG, BEST_CONFIG):
        assert (out / name).is_file(), name
    rows = (out / SUMMARY_CSV).read_text().strip().splitlines()
    assert len(rows) == 1 + len(trials)
    best = load_config(out / BEST_CONFIG)  # ready to train: validates as a run config
    params = study.best_trial.params
    assert best.algorithm.hyperparameters["gamma"] == params["algorithm.hyperparameters.gamma"]
    return study


@pytest.mark.slow
def test_two_workers_on_sqlite_finish_n_trials(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "t.yaml")
    out = tmp_path / "out"
    result = tune(cfg, 3, workers=2, out=out, log=lambda _m: None)
    assert result.finished in (3, 4) and not result.interrupted
    study = _check_n(out, default_storage_url(out), "tiny", 3, workers=2)
    assert len({t.user_attrs[WORKER_ATTR] for t in study.trials}) == 2, "both workers trained"
    # continue to N = 5: one or two trials left for two workers
    result = tune(cfg, 5, workers=2, out=out, log=lambda _m: None)
    assert result.finished in (5, 6)
    _check_n(out, default_storage_url(out), "tiny", 5, workers=2)


def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _pg_bindir() -> Path | None:
    found = shutil.which("pg_ctl")
    candidates = [Path(found).resolve().parent] if found else []
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for d in candidates:
        if (d / "pg_ctl").is_file() and (d / "initdb").is_file():
            return d
    return None


def _no_server(reason: str) -> NoReturn:
    """Skip (or, where ``$COLDIRON_REQUIRE_POSTGRES`` is set, as in CI, fail) for ``reason``."""
    if os.environ.get(PG_REQUIRE_ENV):
        pytest.fail(f"{PG_REQUIRE_ENV} is set but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL URL: ``$COLDIRON_TEST_POSTGRES_URL``, or a throwaway local server."""
    env_url = os.environ.get(PG_URL_ENV)
    if env_url:
        yield env_url
        return
    if importlib.util.find_spec("psycopg2") is None:  # in the tune extra: a broken install
        pytest.fail("psycopg2 is not installed: install the tune extra (psycopg2-binary)")
    bindir = _pg_bindir()
    if bindir is None:
        _no_server("no PostgreSQL server binaries (pg_ctl, initdb): install Debian's postgresql")
    prefix: list[str] = []
    base = Path(tempfile.mkdtemp(prefix="coldiron-pg-"))
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        runuser = shutil.which("runuser")
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            user = None
        if runuser is None or user is None:
            shutil.rmtree(base, ignore_errors=True)
            _no_server("running as root without a 'postgres' user and runuser to start a server")
        os.chown(base, user.pw_uid, user.pw_gid)
        prefix = [runuser, "-u", "postgres", "--"]
    data = base / "data"
    port = _free_port()
    server_opts = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off"
    steps = [
        [str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"],
        [
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(base / "log"),
            "-w",
            "-t",
            "60",
            "-o",
            server_opts,
            "start",
        ],
    ]
    for cmd in steps:
        done = subprocess.run(prefix + cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            log = (base / "log").read_text() if (base / "log").is_file() else ""
            shutil.rmtree(base, ignore_errors=True)
            _no_server(f"cannot start a PostgreSQL server: {done.stderr.strip()} {log.strip()}")
    try:
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_two_workers_on_postgresql_finish_n_trials(tmp_path: Path, postgres_url: str) -> None:
    cfg = write_config(tmp_path / "t.yaml")
    out = tmp_path / "out"
    name = f"pg-{os.getpid()}-{tmp_path.name}"
    result = tune(
        cfg, 4, storage=postgres_url, study_name=name, workers=2, out=out, log=lambda _m: None
    )
    assert result.finished in (4, 5)
    assert not (out / "study.db").exists()  # the study lives in PostgreSQL
    study = _check_n(out, postgres_url, name, 4, workers=2)
    assert len({t.user_attrs[WORKER_ATTR] for t in study.trials}) == 2, "both workers trained"


@pytest.mark.slow
def test_rerun_continues_the_study_and_best_config_trains(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "t.yaml")
    tune(cfg, 2, out=tmp_path / "first-place", log=lambda _m: None)
    out = tmp_path / "out"  # an output folder (with its SQLite study) can be moved
    shutil.move(tmp_path / "first-place", out)
    url = default_storage_url(out)
    first = optuna.load_study(study_name="tiny", storage=url).get_trials()
    assert [t.state for t in first] == [TrialState.COMPLETE] * 2
    result = tune(cfg, 3, out=out, log=lambda _m: None)
    after = optuna.load_study(study_name="tiny", storage=url).get_trials()
    assert result.finished == 3
    assert len(after) == 3  # exactly one more trial
    for old, new in zip(first, after, strict=False):
        assert (old.number, old.params, old.value) == (new.number, new.params, new.value)
    assert tune(cfg, 3, out=out, log=lambda _m: None).finished == 3  # nothing left to run
    assert len(optuna.load_study(study_name="tiny", storage=url).get_trials()) == 3

    train_main = script_main("train")
    run = tmp_path / "from-best"
    assert (
        train_main(["--config", str(out / BEST_CONFIG), "--out", str(run), "--timesteps", "64"])
        == 0
    )
    assert (run / "model.zip").is_file()


@pytest.mark.slow
def test_interrupted_search_keeps_finished_trials_and_continues(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stable_baselines3.common.callbacks import BaseCallback

    from agents.learning import tuning
    from agents.learning.training import train as real_train

    calls: list[int] = []

    class CtrlC(BaseCallback):
        def _on_step(self) -> bool:
            raise KeyboardInterrupt

    def train_once_then_ctrl_c(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            kwargs["extra_callbacks"] = [*kwargs.get("extra_callbacks", ()), CtrlC()]
        return real_train(*args, **kwargs)

    monkeypatch.setattr(tuning, "train", train_once_then_ctrl_c)
    cfg = write_config(tmp_path / "t.yaml")
    out = tmp_path / "out"
    logs: list[str] = []
    optuna_records: list[logging.LogRecord] = []

    class Catcher(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            optuna_records.append(record)

    catcher = Catcher()
    optuna_log = logging.getLogger("optuna")
    optuna_log.addHandler(catcher)
    try:
        result = tune(cfg, 2, out=out, log=logs.append)
    finally:
        optuna_log.removeHandler(catcher)
    assert result.interrupted and result.finished == 1
    assert not any("--resume" in m for m in logs), "a trial is never resumed: no such hint"
    assert any("rerun the command to continue" in m for m in logs)
    # the stop is said once, as a stop: not as Optuna's failure with a stack trace
    assert any("trial 1 stopped (not counted)" in m for m in logs), logs
    said = [r.getMessage() for r in optuna_records]
    assert not any(m.startswith("Trial 1 failed") for m in said), said
    trials = optuna.load_study(study_name="tiny", storage=default_storage_url(out)).get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.FAIL]
    stopped = Path(trials[1].user_attrs["run_dir"])
    assert stopped_state(stopped)["reason"] == "interrupt"  # the interrupted run saved itself
    assert "timesteps" in trials[1].user_attrs  # the summary shows where the stopped one stood
    assert (out / SUMMARY_MD).is_file()  # reports are written after Ctrl-C too

    monkeypatch.setattr(tuning, "train", real_train)
    result = tune(cfg, 2, out=out, log=lambda _m: None)
    trials = optuna.load_study(study_name="tiny", storage=default_storage_url(out)).get_trials()
    assert result.finished == 2 and not result.interrupted
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE]


@pytest.mark.slow
def test_pruned_trial_is_recorded_pruned_and_its_run_kept(tmp_path: Path) -> None:
    # a win rate below 100% is pruned at the first evaluation after the warm-up (timestep 64)
    search = {**SEARCH, "pruner": {"kind": "threshold", "lower": 1.0, "n_warmup_steps": 1}}
    cfg = write_config(tmp_path / "t.yaml", search, evaluation={"freq": 64, "episodes": 10})
    out = tmp_path / "out"
    result = tune(cfg, 1, out=out, log=lambda _m: None)
    assert result.finished == 1 and result.best_number is None
    (trial,) = optuna.load_study(study_name="tiny", storage=default_storage_url(out)).get_trials()
    assert trial.state == TrialState.PRUNED
    assert sorted(trial.intermediate_values) == [0, 64]
    run = Path(trial.user_attrs["run_dir"])
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "pruned" and meta["pruned_at"] == 64
    assert meta["timesteps"] == 64  # training stopped at the pruning evaluation, not at 128
    assert (run / "model.zip").is_file() and (run / "config.yaml").is_file()
    assert not (out / BEST_CONFIG).exists()  # no complete trial: nothing to export
    assert "pruned" in (out / SUMMARY_MD).read_text()


# ---------------------------------------------------------------- seeds
@pytest.mark.parametrize(
    ("text", "seeds"),
    [("0-4", [0, 1, 2, 3, 4]), ("0,2,5", [0, 2, 5]), ("7", [7]), (" 3-4 , 9 ", [3, 4, 9])],
)
def test_parse_seeds(text: str, seeds: list[int]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty value"),
        ("0,,2", "empty item"),
        ("4-1", "goes backwards"),
        ("a", "'a' is not a seed"),
        ("1.5", "'1.5' is not a seed"),
        ("-1", ">= 0"),
        ("0-2,2", "seed 2 is given twice"),
        ("0-100000", "more than"),
    ],
)
def test_parse_seeds_errors_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="--seeds") as info:
        parse_seeds(text)
    assert message in str(info.value)


def test_t_critical_matches_the_tables() -> None:
    table = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 9: 2.262, 29: 2.045, 120: 1.980}
    for df, t in table.items():
        assert t_critical(df) == pytest.approx(t, abs=5e-4)
    assert t_critical(4, 0.90) == pytest.approx(2.132, abs=5e-4)
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_critical(0)


def test_aggregate_across_seeds_and_pooled() -> None:
    runs = [SeedRun(f"s{i}", i, w, 100) for i, w in enumerate((50, 60, 70))]
    agg = aggregate(runs, "cfg")
    assert agg.mean == pytest.approx(0.6)
    assert agg.std == pytest.approx(0.1)
    half = 4.302653 * 0.1 / math.sqrt(3)
    assert agg.t_low is not None and agg.t_high is not None
    assert agg.t_low == pytest.approx(0.6 - half, abs=1e-6)
    assert agg.t_high == pytest.approx(0.6 + half, abs=1e-6)
    assert (agg.pooled_wins, agg.pooled_episodes) == (180, 300)
    assert (agg.pooled_low, agg.pooled_high) == wilson_interval(180, 300)
    assert agg.pooled_high - agg.pooled_low < agg.t_high - agg.t_low  # ignores seed variance
    # the t interval is clipped to [0, 1]; one seed has no t interval
    assert aggregate([SeedRun("a", 0, 0, 10), SeedRun("b", 1, 10, 10)]).t_low == 0.0
    one = aggregate([SeedRun("a", 0, 3, 10)])
    assert one.t_low is None and one.mean == 0.3
    with pytest.raises(ValueError, match="impossible"):
        aggregate([SeedRun("bad", 0, 11, 10)])


def _fake_run(root: Path, seed: int, wins: int, episodes: int = 100, **changes: Any) -> Path:
    root.mkdir(parents=True)
    cfg = {**json.loads(json.dumps(BASE)), "seed": seed, **changes}
    (root / "config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    record = {"timesteps": 128, "wins": wins, "episodes": episodes, "win_rate": wins / episodes}
    (root / "evaluations.json").write_text(json.dumps({"evaluations": [record]}))
    return root


def test_run_directories_of_one_config_are_aggregated(tmp_path: Path) -> None:
    runs = [_fake_run(tmp_path / "cfg" / f"seed-{s}", s, w) for s, w in ((0, 40), (1, 50), (2, 60))]
    assert expand_seed_root(str(tmp_path / "cfg")) == [str(r) for r in runs]
    assert run_label(str(runs[1]), "seed-1") == "cfg/seed-1"  # says which config
    assert run_label("heuristic", "heuristic") == "heuristic"
    other = _fake_run(tmp_path / "other", 3, 10, name="other")
    specs = [str(runs[0]), "heuristic", str(runs[1]), str(other)]
    (agg2,) = seed_aggregates(specs, [(40, 100), (30, 100), (50, 100), (10, 100)])
    assert [r.label for r in agg2.runs] == [str(runs[0]), str(runs[1])]
    assert agg2.mean == pytest.approx(0.45)
    twin = _fake_run(tmp_path / "twin", 0, 41)  # a retraining of seed 0: not another seed
    assert seed_aggregates([str(runs[0]), str(twin)], [(40, 100), (41, 100)]) == []
    assert twin_seed_groups([str(runs[0]), str(twin), "heuristic"]) == [[str(runs[0]), str(twin)]]


@pytest.mark.slow
def test_train_seeds_trains_one_run_per_seed_and_skips_done_ones(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path / "t.yaml", search=None))
    logs: list[str] = []
    results = train_seeds(cfg, [0, 1], tmp_path / "seeds", log=logs.append)
    assert [r.run_dir.name for r in results] == ["seed-0", "seed-1"]
    assert [load_config(r.run_dir / "config.yaml").seed for r in results] == [0, 1]
    agg = aggregate_results(results, "tiny")
    assert agg is not None and agg.n_seeds == 2
    again = train_seeds(cfg, [0, 1], tmp_path / "seeds", log=logs.append)
    assert sum("already completed" in m for m in logs) == 2
    assert [r.history for r in again] == [r.history for r in results]


def test_a_seed_folder_of_another_config_is_refused_naming_what_differs(tmp_path: Path) -> None:
    from agents.learning.config import apply_overrides, dump_config

    cfg = load_config(write_config(tmp_path / "t.yaml", search=None))
    run = tmp_path / "seeds" / "seed-0"
    run.mkdir(parents=True)
    other = apply_overrides(cfg, timesteps=cfg.training.total_timesteps * 2, seed=0)
    other.training.progress_bar = not cfg.training.progress_bar  # not part of the recipe
    (run / "config.yaml").write_text(dump_config(other))
    for status in ("completed", "interrupted"):
        (run / "meta.json").write_text(json.dumps({"status": status}))
        with pytest.raises(
            TrainingError, match=r"another config \(training\.total_timesteps: "
        ) as e:
            train_seeds(cfg, [0], tmp_path / "seeds", log=lambda _m: None)
        assert f"{other.training.total_timesteps} -> {cfg.training.total_timesteps}" in str(e.value)
        assert "progress_bar" not in str(e.value)


# ---------------------------------------------------------------- several machines
def test_seeded_sampler_is_reproducible_only_for_the_study_creator() -> None:
    dist = {"x": optuna.distributions.FloatDistribution(0.0, 1.0)}

    def first_samples(sampler: optuna.samplers.BaseSampler) -> list[float]:
        study = optuna.create_study(sampler=sampler, direction="maximize")
        return [study.ask(dist).params["x"] for _ in range(3)]

    spec = SamplerSpec(kind="random", seed=7, n_startup_trials=5)
    creator = first_samples(build_sampler(spec))
    assert first_samples(build_sampler(spec)) == creator  # a seeded solo search repeats
    # any other worker (another process: another nonce) samples other values
    others = [first_samples(build_sampler(spec, nonce=11)), first_samples(build_sampler(spec, 12))]
    assert all(o != creator for o in others) and others[0] != others[1]


def test_a_study_that_does_not_maximise_is_refused_untouched(tmp_path: Path) -> None:
    cfg = load_tuning_config(write_config(tmp_path / "t.yaml"))
    url = default_storage_url(tmp_path)
    optuna.create_study(study_name="min", storage=url, direction="minimize")
    optuna.create_study(study_name="two", storage=url, directions=["maximize", "maximize"])
    with pytest.raises(TuneError, match=r"1 objective\(s\) \(minimize\)"):
        open_study(cfg, url, "min")
    with pytest.raises(TuneError, match=r"2 objective\(s\) \(maximize, maximize\)"):
        open_study(cfg, url, "two")
    assert optuna.load_study(study_name="min", storage=url).user_attrs == {}


def test_an_output_folder_of_another_study_is_refused(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "t.yaml")
    out = tmp_path / "out"
    out.mkdir()
    (out / "study.json").write_text(json.dumps({"storage": "sqlite:///elsewhere", "study": "x"}))
    with pytest.raises(TuneError, match="belongs to study"):
        tune(cfg, 1, out=out, log=lambda _m: None)
    # the same study name, but the folder's study lives in another storage: refused,
    # and no stray study is created in the storage given
    (out / "study.json").write_text(
        json.dumps({"storage": "sqlite:///elsewhere", "study": "tiny", "study_id": "abc"})
    )
    url = default_storage_url(tmp_path)
    with pytest.raises(TuneError, match="is not in"):
        tune(cfg, 1, out=out, storage=url, log=lambda _m: None)
    assert optuna.get_all_study_names(url) == []


def test_a_refused_storage_names_a_folder_and_leaves_no_output_folder(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "t.yaml")
    folder = tmp_path / "a-folder"
    folder.mkdir()
    out = tmp_path / "new-out"
    with pytest.raises(TuneError, match=r"a-folder is a folder, not a database file"):
        tune(cfg, 1, out=out, storage=f"sqlite:///{folder}", log=lambda _m: None)
    assert not out.exists()  # the search never started: nothing left behind
    # a study of another kind in the storage: refused, and the new --out removed too
    url = default_storage_url(tmp_path)
    optuna.create_study(study_name="tiny", storage=url, direction="minimize")
    with pytest.raises(TuneError, match=r"objective"):
        tune(cfg, 1, out=out, storage=url, log=lambda _m: None)
    assert not out.exists()
    kept = tmp_path / "kept"  # an --out that was there before is never removed
    kept.mkdir()
    with pytest.raises(TuneError, match=r"objective"):
        tune(cfg, 1, out=kept, storage=url, log=lambda _m: None)
    assert kept.is_dir()


@pytest.mark.slow
def test_two_machines_on_one_storage_finish_n_trials(tmp_path: Path) -> None:
    """Two independent ``tune.py`` processes (no shared lock, separate --out) on one URL."""
    cfg = write_config(tmp_path / "t.yaml")
    url = default_storage_url(tmp_path)
    optuna.create_study(study_name="shared", storage=url, direction="maximize")
    cmd = [sys.executable, str(SCRIPTS / "tune.py"), "--config", str(cfg), "--trials", "4"]
    procs = [
        subprocess.Popen(
            [*cmd, "--storage", url, "--study", "shared", "--out", str(tmp_path / f"m{i}")],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    study = optuna.load_study(study_name="shared", storage=url)
    finished = [t for t in study.trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert len(finished) in (4, 5)  # the other machine's running trial may finish too
    assert len(study.trials) == len(finished), "no trial failed"
    dirs = {Path(t.user_attrs["run_dir"]) for t in finished}
    on_disk = {p.resolve() for i in range(2) for p in (tmp_path / f"m{i}" / TRIALS_DIR).iterdir()}
    assert dirs == on_disk and len(dirs) == len(finished)
    samples = [json.dumps(t.params, sort_keys=True) for t in finished]
    assert len(set(samples)) == len(finished), "the machines' seeded samplers repeated"


def test_unfinished_seed_runs_are_named(tmp_path: Path) -> None:
    done = _fake_run(tmp_path / "a", 0, 10)
    stopped = _fake_run(tmp_path / "b", 1, 10)
    (done / "meta.json").write_text(json.dumps({"status": "completed"}))
    (stopped / "meta.json").write_text(json.dumps({"status": "interrupted"}))
    specs = [str(done), "heuristic", str(stopped)]
    assert unfinished_runs(specs) == [(str(stopped), "interrupted")]


def test_evaluate_warns_before_playing_that_twin_seeds_are_not_aggregated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _fake_run(tmp_path / "a", 0, 10)
    b = _fake_run(tmp_path / "b", 0, 12)
    # (these fake runs have no model: evaluate stops with an error after the warning)
    assert script_main("evaluate")(["--agent", str(a), "--agent", str(b), "--episodes", "5"]) == 2
    err = capsys.readouterr().err
    assert "repeated seed" in err and "not aggregated" in err and "has no model" in err


@pytest.mark.slow
def test_ctrl_c_during_the_warm_start_then_rerun_starts_the_seed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents.learning import imitation

    def interrupted(*_a: Any, **_k: Any) -> Any:
        raise KeyboardInterrupt

    cfg = load_config(
        write_config(
            tmp_path / "t.yaml",
            search=None,
            imitation={"enabled": True, "episodes": 3, "epochs": 1, "batch_size": 64},
        )
    )
    monkeypatch.setattr(imitation, "warm_start", interrupted)
    (first,) = train_seeds(cfg, [0, 1], tmp_path / "seeds", log=lambda _m: None)
    assert first.interrupted and first.timesteps == 0
    meta = json.loads((first.run_dir / "meta.json").read_text())
    assert meta["status"] == "starting"
    monkeypatch.undo()
    logs: list[str] = []
    results = train_seeds(cfg, [0, 1], tmp_path / "seeds", log=logs.append)
    assert any("starting it over" in m for m in logs)
    assert [r.interrupted for r in results] == [False, False]
    for r in results:
        assert json.loads((r.run_dir / "meta.json").read_text())["status"] == "completed"
        assert (r.run_dir / "imitation.json").is_file()


def _study_exists(db: Path) -> bool:
    """Whether the SQLite file holds a study yet (read-only: it creates nothing)."""
    if not db.is_file():
        return False
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
            return bool(con.execute("SELECT count(*) FROM studies").fetchone()[0])
    except sqlite3.Error:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("how", ["sigterm-to-main", "ctrl-c-to-group"])
def test_a_stopped_search_stops_every_worker_and_keeps_the_study(tmp_path: Path, how: str) -> None:
    """``kill <pid>`` of ``tune.py --workers 2`` (the workers get no signal themselves), or
    Ctrl-C in a terminal (SIGINT to the whole foreground process group)."""
    cfg = write_config(
        tmp_path / "t.yaml",
        training={"total_timesteps": 200_000, "n_envs": 2, "progress_bar": False},
    )
    out = tmp_path / "out"
    url = default_storage_url(out)
    cmd = [sys.executable, str(SCRIPTS / "tune.py"), "--config", str(cfg), "--trials", "3"]
    proc = subprocess.Popen(
        [*cmd, "--workers", "2", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        deadline = time.monotonic() + 300
        running: list[Any] = []
        while len(running) < 2 and time.monotonic() < deadline:
            time.sleep(1)
            if not _study_exists(out / DB_FILE):
                continue  # opening a storage tune.py is still creating races its schema
            with contextlib.suppress(Exception):
                study = optuna.load_study(study_name="tiny", storage=url)
                running = [  # learning has begun: the evaluation at timestep 0 is reported
                    t
                    for t in study.get_trials(states=(TrialState.RUNNING,))
                    if t.intermediate_values
                ]
        if len(running) != 2:
            proc.kill()
            shown = proc.communicate()[0][-3000:]
            raise AssertionError(f"both workers should be training; tune.py said:\n{shown}")
        if how == "sigterm-to-main":
            proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGINT)
        output = proc.communicate(timeout=STOP_TIMEOUT_SECONDS)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            output = proc.communicate()[0]
    assert proc.returncode == 130, output
    trials = optuna.load_study(study_name="tiny", storage=url).get_trials()
    states = {t.number: t.state.name for t in trials}
    assert trials and all(t.state == TrialState.FAIL for t in trials), (states, output)
    for t in trials:  # each stopped trial saved a checkpoint before its worker left
        saved = stopped_state(Path(t.user_attrs["run_dir"]))
        assert saved["reason"] == "interrupt", (saved, states, output)
    assert (out / SUMMARY_MD).is_file()
