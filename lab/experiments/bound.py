"""An upper bound on every honest player's win rate (lab/bound.py).

    .venv/bin/python -m lab.experiments.bound --model need --deals validation --seed 901 \\
        --episodes 20
    .venv/bin/python -m lab.experiments.bound --fit lab/records/bound_w.json             # fit W
    .venv/bin/python -m lab.experiments.bound --model lab/records/bound_w.json --deals validation \\
        --episodes 200 --seed 901 --json bound-validation.json
    .venv/bin/python -m lab.experiments.bound --model lab/records/bound_w.json --episodes 200 \\
        --json docs/records/bound.json --why "..."                  # the report seed: logged

Each deal's bound is the clairvoyant's maximum of (win - penalties) over every game of the
relaxed game (every numbered card drawn is kept); their mean bounds the win rate of every
player who sees only what a player sees. Deals run in parallel processes. ``--model zero``
is W = 0: the clairvoyant (100% here); ``--model need`` is the need-known game's value
(lab/need_game.py: derived from the rules, nothing fitted), the best W here.

This is the bound on the *relaxed* game (about 91% with ``need``). The README's ceiling is
lower: the same W on the strict relaxed game, where a Rest's card is lost, by
``lab/experiments/strict_bound.py --prune`` (lab/docs/bound.md; about 8 minutes a core for
10 validation deals). Without ``--deals validation`` the deals are the report seed's, and
the look is logged (``--why``).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from agents.atomic import atomic_write_json, check_writable
from agents.evaluation.arena import (
    EVALUATION_DEALS,
    VALIDATION_DEALS,
    decks_of,
    validation_decks,
)
from agents.gitinfo import git_commit, utc_now
from lab.bound import ValueModel, deal_bound
from lab.looks import REPORT_SEED, record_look

EXIT_ERROR = 2
Z_95 = 1.96
DRIFT_SEED = 906
DRIFT_DEALS = 300
_MODEL: dict[str, ValueModel] = {}
NAMED_MODELS = {"zero": ValueModel.zero, "need": ValueModel.need_game}
"""``--model`` names that need no file: W = 0, and the need-known game's value."""


def _init(model: ValueModel) -> None:
    _MODEL["w"] = model


def _one(deck: np.ndarray) -> float:
    return deal_bound(deck, _MODEL["w"])


def _inputs(args: argparse.Namespace) -> tuple[ValueModel, np.ndarray]:
    """``W`` and the deals, every argument checked before anything runs (``ValueError``
    naming the argument)."""
    for name in ("episodes", "workers"):
        if getattr(args, name) <= 0:
            raise ValueError(f"--{name} must be positive, got {getattr(args, name)}")
    if args.json is not None:
        check_writable(args.json, "--json")
    if args.model in NAMED_MODELS:
        model = NAMED_MODELS[args.model]()
    else:
        path = Path(args.model)
        if not path.is_file():
            raise ValueError(
                f"--model {args.model}: no such file (a W written by --fit), and not one of "
                f"{', '.join(NAMED_MODELS)}"
            )
        try:
            model = ValueModel.load(path)
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ValueError(f"--model {path}: not a W written by --fit ({err!r:.120})") from None
    try:
        decks = decks_of(args.seed, args.episodes, args.deals == VALIDATION_DEALS)
    except ValueError as err:
        raise ValueError(f"--seed {args.seed}: {err}") from None
    return model, decks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fit", type=Path, metavar="FILE", help="fit W and write it to FILE")
    parser.add_argument("--rounds", type=int, default=8, help="fitting rounds (with --fit)")
    parser.add_argument("--fit-deals", type=int, default=1500, help="deals a fitting round plays")
    parser.add_argument(
        "--monte-carlo-rounds", type=int, default=2, help="first rounds fitted to game results"
    )
    parser.add_argument("--network", action="store_true", help="W as a small network")
    parser.add_argument(
        "--model", default=None, help="W: a file written by --fit, zero, or need (no file)"
    )
    parser.add_argument("--episodes", type=int, default=200, help="deals (default 200)")
    parser.add_argument(
        "--seed",
        type=int,
        default=REPORT_SEED,
        help=f"seed of the deals (default {REPORT_SEED}, the report seed: every look at it is "
        "logged in lab/records/report_looks.jsonl; use --deals validation to try things)",
    )
    parser.add_argument(
        "--deals",
        choices=(EVALUATION_DEALS, VALIDATION_DEALS),
        default=EVALUATION_DEALS,
        help="evaluation deals (default: the report's) or validation deals",
    )
    parser.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--json", type=Path, help="write the bound's record")
    parser.add_argument("--why", help="why the report seed is looked at (the look log)")
    args = parser.parse_args(argv)
    command = ".venv/bin/python -m lab.experiments.bound " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    if args.fit is not None:
        from lab.bound_fit import FitSettings, fit_value_model

        settings = FitSettings(
            rounds=args.rounds,
            deals=args.fit_deals,
            monte_carlo_rounds=args.monte_carlo_rounds,
            network=args.network,
        )
        if args.network:  # the settings measured for the network form
            settings.learning_rate, settings.epochs, settings.expectile = 0.01, 400, 0.5
            settings.l2 = 1e-6
        model = fit_value_model(settings)
        if args.monte_carlo_rounds >= args.rounds:
            model.name = "fitted to game results (Monte Carlo)"
        elif args.network:
            model.name = "fitted value iteration, small network"
        model.meta["command"] = command
        model.save(args.fit)
        print(f"wrote {args.fit}")
        return 0
    if args.model is None:
        parser.error("--model need, zero or a FILE written by --fit (or --fit FILE)")
    try:
        model, decks = _inputs(args)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR
    if args.deals == EVALUATION_DEALS:
        record_look(args.seed, args.episodes, [f"bound ({model.name})"], args.why, sys.argv)
    start = time.perf_counter()
    if args.workers > 1:
        with mp.get_context("spawn").Pool(args.workers, _init, (model,)) as pool:
            values = np.asarray(pool.map(_one, list(decks), chunksize=4))
    else:
        _init(model)
        values = np.asarray([_one(d) for d in decks])
    seconds = time.perf_counter() - start
    mean = float(values.mean())
    half = Z_95 * float(values.std(ddof=1)) / np.sqrt(len(values)) if len(values) > 1 else 0.0
    interval = (
        f"[{100 * (mean - half):.2f}%, {100 * (mean + half):.2f}%]"
        if len(values) > 1
        else "(one deal: no interval)"
    )
    print(f"bound on {len(values)} {args.deals} deals (seed {args.seed}), W: {model.name}: "
          f"{100 * mean:.2f}% {interval} ({seconds:.0f} s)")  # fmt: skip
    from lab.bound import CAPACITY_SIZE, NEED_GAME_SIZE
    from lab.bound_fit import drift

    rises: dict[str, Any]
    if model.theta.size == CAPACITY_SIZE:  # the drift's greedy player reads logistic features
        rises = {"not_measured": "the capacity form is not a feature model"}
        print("drift of W: not measured (the capacity form is not a feature model)")
    elif model.theta.size == NEED_GAME_SIZE:
        from lab.need_game import start_value

        w0 = start_value()
        rises = {
            "start_value": w0,
            "not_measured": "no action is expected to raise W (a supersolution by "
            "construction); the clairvoyant's best game drifts down by W(start) - bound",
        }
        print(f"W at the start: {100 * w0:.2f}% (the bound is at most this, deal by deal)")
    else:
        where = f"{DRIFT_DEALS} validation deals of seed {DRIFT_SEED}"
        measured = drift(model, validation_decks(DRIFT_SEED, DRIFT_DEALS).astype(np.int64))
        rises = {**measured, "deals": where}
        print(f"drift of W where its greedy player goes ({where}): {measured}")
    if args.json is not None:
        doc: dict[str, Any] = {
            "drift": rises,
            "episodes": len(values), "mean": mean,
            "ci_low": mean - half if len(values) > 1 else None,  # one deal: no interval
            "ci_high": mean + half if len(values) > 1 else None,
            "interval": "normal 95% over deals", "seed": args.seed, "deals": args.deals,
            "value_function": {"name": model.name, "file": args.model, "meta": model.meta},
            "per_deal": values.tolist(), "seconds": round(seconds, 1), "workers": args.workers,
            "command": command, "commit": git_commit(), "time": utc_now(),
        }  # fmt: skip
        atomic_write_json(args.json, doc)
        print(f"json: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
