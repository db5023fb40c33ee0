"""rl-zoo3 with sb3-contrib's MaskablePPO as ``ppo_mask``: train, enjoy, tune.

    .venv/bin/python scripts/zoo.py train --algo ppo_mask --env coldiron/ColdIron-v0 \\
        --gym-packages coldiron_env -conf configs/rl_zoo3/ppo_mask.yml -f logs/ \\
        [--record docs/records/FILE.json --note "what else ran"]
    .venv/bin/python scripts/zoo.py train ... -optimize --n-trials 20 -n 200000   # Optuna
    .venv/bin/python scripts/zoo.py enjoy --algo ppo_mask --env coldiron/ColdIron-v0 \\
        --gym-packages coldiron_env -f logs/ --exp-id 1 --no-render -n 3000

Everything after ``train``/``enjoy`` goes to rl-zoo3's own ``rl_zoo3.train``/``rl_zoo3.enjoy``
(``--help`` lists their options), after :mod:`agents.integrations.zoo` has registered
``ppo_mask`` (masked collection, evaluation, Optuna trials and prediction). Any other algo
runs as with ``python -m rl_zoo3.train``, except that ``--eval-freq`` evaluates on the
hyperparameter file's ``env_kwargs`` and that the deals are held out: the training envs deal
from the training stream, the evaluation env from the validation stream, never the deals of
``scripts/evaluate.py --seed N`` (so ``--seed`` is ``0..65535``; without one, one is drawn
there). A hyperparameter file can give a curriculum (``configs/rl_zoo3/ppo_mask.yml`` does:
``env_wrapper`` and ``callback`` of :mod:`agents.integrations.zoo`).

``--record FILE`` (train, not ``-optimize``; this launcher's own option) writes a JSON
record of the training: the run folder, steps taken, wall and training seconds, steps per
second, the machine's load average before and after, ``--note``.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from agents.atomic import atomic_write_json
from agents.gitinfo import git_commit, git_dirty, utc_now

EXIT_ERROR = 2
COMMANDS = ("train", "enjoy")
OWN_OPTIONS = ("--record", "--note")
PACKAGES = ("rl_zoo3", "stable_baselines3", "sb3_contrib", "torch", "gymnasium")
PROGRAM = ".venv/bin/python scripts/zoo.py"


class UsageError(ValueError):
    """A command line this launcher cannot run (the message says why)."""


def split_own_options(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """This launcher's ``--record``/``--note`` (``--opt VALUE`` or ``--opt=VALUE``), and the
    rest of ``argv`` in order, for rl-zoo3."""
    own: dict[str, str] = {}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, sep, value = arg.partition("=")
        if name in OWN_OPTIONS:
            if not sep:
                if i + 1 >= len(argv):
                    raise UsageError(f"{name} needs a value")
                value = argv[i + 1]
                i += 1
            if name in own:
                raise UsageError(f"{name} given twice")
            own[name] = value
        else:
            rest.append(arg)
        i += 1
    return own, rest


def training_record(run: Any, command: str, wall: float, load_before: tuple[float, ...],
                    note: str) -> dict[str, Any]:  # fmt: skip
    """What ``--record`` writes for a finished training (``run``: a ``ZooRun``)."""
    manager = run.manager
    steps, seconds = run.timesteps, run.learn_seconds
    save_path = Path(manager.save_path)
    load_after = os.getloadavg()
    return {
        "what": f"rl-zoo3 training of {manager.algo!r} through scripts/zoo.py",
        "command": command,
        "commit": git_commit(),
        "dirty": git_dirty(),
        "time": utc_now(),
        "algo": manager.algo,
        "env": str(manager.env_name.gym_id),
        "hyperparameter_file": manager.config,
        "seed": manager.seed,
        "n_envs": manager.n_envs,
        "env_kwargs": dict(manager.env_kwargs),
        "run": str(save_path),
        "model": str(save_path / f"{manager.env_name}.zip"),
        "requested_timesteps": int(manager.n_timesteps),
        "timesteps": steps,
        "wall_seconds": round(wall, 1),
        "training_seconds": round(seconds, 1) if seconds is not None else None,
        "steps_per_second": round(steps / seconds) if steps and seconds else None,
        "machine": {
            "cpus": os.cpu_count(),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in load_after],
            "note": note or "no note; other work may have been running (speeds approximate)",
        },
        "versions": {name: version(name.replace("_", "-")) for name in PACKAGES},
    }


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if args else EXIT_ERROR
    command, rest = args[0], args[1:]
    try:
        if command not in COMMANDS:
            raise UsageError(f"unknown command {command!r}; expected one of {COMMANDS}")
        own, zoo_argv = split_own_options(rest)
        record = own.get("--record")
        if command == "enjoy" and own:
            raise UsageError(f"{sorted(own)} apply to train only")
        if record is not None and any(a in ("-optimize", "--optimize-hyperparameters")
                                      for a in zoo_argv):  # fmt: skip
            raise UsageError("--record records a training run, not an -optimize study")
        from agents.integrations import zoo  # rl-zoo3 and torch: after the quick checks

        zoo.check_seed(zoo_argv)
        names = [a.partition("=")[0] for a in zoo_argv]  # argparse takes --opt=VALUE too
        algo = next(
            (a.partition("=")[2] or (zoo_argv[k + 1] if k + 1 < len(zoo_argv) else None)
             for k, a in enumerate(zoo_argv) if names[k] == "--algo"),
            None,
        )  # fmt: skip
        conf = any(name in ("-conf", "--conf-file") for name in names)
        if command == "train" and algo == "ppo_mask" and not conf:
            raise UsageError(  # rl-zoo3 ships no file for it: its own error is a traceback
                "rl-zoo3 has no hyperparameters of its own for ppo_mask: "
                "pass -conf configs/rl_zoo3/ppo_mask.yml (or a file of yours)"
            )
    except ValueError as exc:  # UsageError, or a --seed the deal streams cannot take
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR

    if command == "enjoy":
        zoo.run_enjoy(zoo_argv)
        return 0
    started, load_before = time.perf_counter(), os.getloadavg()
    run = zoo.run_train(zoo_argv)
    if record is not None:
        line = " ".join([PROGRAM, shlex.join(args)])
        data = training_record(run, line, time.perf_counter() - started, load_before,
                               own.get("--note", ""))  # fmt: skip
        atomic_write_json(record, data)
        print(f"record: {record}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
