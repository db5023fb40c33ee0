"""The bound on a stricter relaxed game, in which a Rest's card is lost as in the real game.

    .venv/bin/python -m lab.experiments.strict_bound --episodes 10 --lost 2 \
        --json lab/records/strict_bound_validation.json

The relaxed game of :mod:`lab.bound` keeps every numbered card drawn, a
Rest's included, and that is too generous for a bound below one half: an honest player
who applies the Iron while Hurt <= 1 and Rests otherwise wins 65% of its deals
(``lab/records/relaxed_players.json``), because every Rest then draws a card that counts.
Here only a Rest discards (a rack still keeps every numbered card it draws, so any real
player's twin still holds the real hand and more): the **strict relaxed game**.

Its hand is no longer fixed by how many cards were drawn: it is the numbered cards drawn
less those a Rest drew (``gone``), so the clairvoyant's search (:mod:`lab.bound`'s, the
relaxed game's rules of :mod:`lab.relaxed` with a :class:`~lab.relaxed.Keeping` that loses
cards) is memoised on ``(position, turn, Hurt, decision point, gone)`` in hash maps, and
that search does not end: one deal filled 15 GB in 14 minutes. So the game solved is
between the two: **the first ``--lost`` numbered cards a Rest draws are lost, later ones
kept** (a relaxation of the real game still: the hand holds the real one). ``--lost 0`` is
the relaxed game.

``W`` is the need-known game's value (:mod:`lab.need_game`) averaged over
what a player knows of the need, now given the hand *and* the unseen numbered cards (a
Rest's card is neither): ``W = sum over r of P(r | hand, unseen) * V(position, r)``. It is
still a supersolution: a Rest that discards its card ``x`` leaves a need at least the
need the need-known game assumes (one less than before, as if ``x`` were kept), and the
need-known value falls as the need rises.

``--real`` goes the rest of the way: a rack also loses the numbered cards it draws that do
not match it, as in Cold Iron itself, and the expectation of ``W`` after a rack's card sums
over the unseen cards (kept if they match the rack, lost if not); ``W`` stays a
supersolution by the same argument (a lost card leaves the need at least the kept one).
Unpruned, that search does not fit this machine's memory on a deal. Pruned (``--prune``:
the cuts need ``W`` a supersolution, and a real rack's expectation of ``W`` is at most the
strict game's, tested), with its caches held to the state budget and the cut started from
the best game losing at most ``--warm-lost`` numbered cards, it gives the real game's bound
under this ``W`` in minutes a deal; with ``--forbid`` (the clairvoyant may lose at most
``--lost`` numbered cards) lower estimates of it.

Standard rules only.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, Final, cast

import numpy as np

from coldiron_env.cards import NUM_NUMBERED
from lab import bound
from lab.bound import ABORTED, NO_BUDGET, NO_CUT, ValueModel, search_state, solve, states
from lab.need_game import start_value
from lab.relaxed import DealFacts, Keeping

UPPER_SLACK: Final = bound.UPPER_SLACK
"""Room for the need-known table's single-precision rounding in the cut's upper bound."""
WINDOWS: Final = (0.01, 0.03, 0.08, 0.2, 1.0)
"""``--prune``: the cut's windows above the warm start, tried in turn until a search fits
its state budget (the last cuts at the root: ``W`` at the start)."""
STATE_BUDGET: Final = 4_000_000
WARM_SLACK: Final = 1e-9
"""The warm start's cut sits this far below a value known to be reached."""


def strict_deal_bound(
    deck: Any,
    cap: int = NUM_NUMBERED,
    forbid: bool = False,
    prune: bool = False,
    window: float = 0.0,
    budget: int = NO_BUDGET,
    real: bool = False,
    warm: float | None = None,
) -> tuple[float, int]:
    """The clairvoyant's maximum of ``R - Z`` over every game of ``deck`` in which the
    first ``cap`` numbered cards a Rest draws are lost, with the need-known ``W``, and how
    many decision points the search memoised. ``forbid``: every Rest's card is lost, and
    the clairvoyant may not Rest on more than ``cap`` numbered cards: a maximum over fewer
    games, so a lower estimate of the strict game's bound, not a bound.

    ``prune``: cut every subtree whose ``W`` (an upper bound on what it scores: ``W`` is a
    supersolution) is at most the best found, starting from ``warm`` (by default the best
    game that loses no numbered card; it must be a game searched, as :func:`warm_start`'s
    are with ``cap`` = 40) plus ``window``: then the result is the maximum when that is
    above the cut, else an upper bound at most the cut (a valid bound either way, looser by
    at most ``window``); :data:`ABORTED` when the search outgrew ``budget`` states.

    ``real``: a rack also loses every numbered card it draws that does not match it, as in
    the real game (with every Rest card lost too: ``cap`` = 40 and ``forbid`` False, the
    search is of Cold Iron itself, penalised)."""
    alpha = NO_CUT
    if prune and not forbid:
        start = warm_start(deck, 0, real) if warm is None else warm
        alpha = start - WARM_SLACK + window
    keeping = Keeping(cap, forbid, real)
    S = search_state(DealFacts.of(deck), ValueModel.need_game(), keeping, prune, budget)
    return solve(S, alpha), states(S)


def warm_start(deck: Any, lost: int, real: bool) -> float:
    """The best game of ``deck`` that loses at most ``lost`` numbered cards (to Rests, or
    with ``real`` to Rests and racks): one of the games the pruned search searches, with
    the same penalties, so its maximum is at least this (a cut's starting point)."""
    return strict_deal_bound(deck, lost, True, real=real)[0]


def pruned_bound(deck: Any, real: bool = False, warm_lost: int = 0) -> tuple[float, int, float]:
    """The strict game's bound on ``deck`` (the real game's with ``real``) by pruned
    searches from the warm start of :func:`warm_start` (``warm_lost`` cards), the window
    widened until one fits the state budget: ``(bound, states, window)``."""
    warm = warm_start(deck, warm_lost, real)
    for window in WINDOWS:
        value, states = strict_deal_bound(
            deck, NUM_NUMBERED, False, True, window, STATE_BUDGET, real, warm
        )
        if value < ABORTED / 2:  # an aborted subtree's sentinel carries the penalties before it
            return value, states, window
    raise AssertionError("the widest window cuts at the root")


def strict_start_value() -> float:
    """``W`` at the start of a deal (the bound can only be lower, on average): nothing is
    lost yet, so it is the need-known game's start value."""
    return start_value()


DealResult = tuple[float, int, float, float]
"""A deal's result: value, states, seconds and window."""


def _one_deal(
    deck: Any, lost: int, forbid: bool, prune: bool, real: bool = False, warm_lost: int = 0
) -> DealResult:
    start = time.perf_counter()
    if prune:
        value, count, window = pruned_bound(deck, real, warm_lost)
    else:
        value, count = strict_deal_bound(deck, lost, forbid, real=real)
        window = 0.0
    seconds = time.perf_counter() - start
    print(f"{value:.4f} {count} states {seconds:.1f} s window {window}", flush=True)
    return value, count, seconds, window


def _repair(path: Any) -> int:
    import json

    from agents.atomic import atomic_write_json

    doc = json.loads(path.read_text(encoding="utf-8"))
    start = strict_start_value() + UPPER_SLACK
    fixed = [i for i, v in enumerate(doc["per_deal"]) if v >= ABORTED / 2]
    for i in fixed:
        doc["per_deal"][i] = start
        doc["windows"][i] = 1.0
    v = np.asarray(doc["per_deal"])
    half = 1.96 * float(v.std(ddof=1)) / np.sqrt(len(v))
    doc.update(mean=float(v.mean()), ci_low=float(v.mean()) - half, ci_high=float(v.mean()) + half)
    doc["repaired"] = {
        "deals": fixed,
        "why": "their searches outgrew the state budget and the escalation missed it (the "
        "sentinel had penalties added); each is given W at the start, the widest window",
    }
    atomic_write_json(path, doc)
    print(f"repaired deals {fixed}: mean {100 * v.mean():.2f}%")
    return 0


def main(argv: list[str] | None = None) -> int:
    import multiprocessing as mp

    from agents.atomic import atomic_write_json
    from agents.evaluation.arena import validation_decks
    from agents.gitinfo import git_commit, git_dirty, utc_now

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=901, help="validation deals of this seed")
    parser.add_argument("--lost", type=int, default=2, help="numbered Rest cards lost")
    parser.add_argument(
        "--forbid",
        action="store_true",
        help="every Rest's card lost, at most --lost Rests on numbered cards: a lower "
        "estimate of the strict game's bound (not a bound)",
    )
    parser.add_argument(
        "--prune",
        action="store_true",
        help="the strict game itself (every Rest card lost) by pruned searches",
    )
    parser.add_argument(
        "--real",
        action="store_true",
        help="racks lose their non-matching numbered cards too (Cold Iron itself, no "
        "relaxation): with --prune its bound, with --forbid a lower estimate of it (at most "
        "--lost numbered cards lost)",
    )
    parser.add_argument(
        "--warm-lost",
        type=int,
        default=0,
        help="--prune: start the cut from the best game losing at most this many numbered "
        "cards (a higher start cuts more; the bound is the same up to the window)",
    )
    parser.add_argument("--deals", choices=("validation", "evaluation"), default="validation")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--why", help="why the report seed is looked at (the look log)")
    parser.add_argument(
        "--repair",
        action="store_true",
        help="rewrite --json's deals that hold the over-budget sentinel (a bug since fixed) "
        "with W at the start (the widest window: a valid, loose bound)",
    )
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    # the code that runs, stamped now (a long run ends after later commits)
    code = {"commit": git_commit(), "dirty": git_dirty(ignore=args.json)}
    if args.repair:
        return _repair(args.json)
    if args.real and not (args.prune or args.forbid):
        parser.error("--real needs --prune or --forbid")
    if args.warm_lost < 0 or (args.warm_lost and not args.prune):
        parser.error(f"--warm-lost {args.warm_lost}: a count of cards, with --prune only")
    settings = _settings(args)
    checkpoint = args.json.with_name(args.json.name + ".partial")
    try:
        results = _done(args.json, checkpoint, settings, args.episodes)
    except ValueError as error:
        parser.error(str(error))
    if args.deals == "validation":
        decks = validation_decks(args.seed, args.episodes)
    else:
        from agents.evaluation.arena import deal_decks
        from lab.looks import record_look

        decks = deal_decks(args.seed, args.episodes)
        record_look(args.seed, args.episodes, ["strict bound (need-known W)"], args.why, sys.argv)
    job = partial(
        _one_deal,
        lost=args.lost,
        forbid=args.forbid,
        prune=args.prune,
        real=args.real,
        warm_lost=args.warm_lost,
    )
    if results:
        print(f"resuming: {len(results)} deals done", flush=True)
    todo = list(decks)[len(results) :]
    with contextlib.ExitStack() as stack:
        if args.workers > 1 and len(todo) > 1:
            pool = stack.enter_context(mp.get_context("spawn").Pool(args.workers))
            solved: Iterator[DealResult] = pool.imap(job, todo, chunksize=1)
        else:
            solved = map(job, todo)
        for result in solved:  # in the deals' order: a checkpoint after each
            results.append(result)
            atomic_write_json(checkpoint, {"settings": settings, "results": results})
    values = [r[0] for r in results]
    states = [r[1] for r in results]
    seconds = [r[2] for r in results]
    windows = [r[3] for r in results]
    v = np.asarray(values)
    half = 1.96 * float(v.std(ddof=1)) / np.sqrt(len(v))
    atomic_write_json(args.json, {
        "command": ".venv/bin/python -m lab.experiments.strict_bound "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "game": (
            "the real game (every Rest card and a rack's unmatched cards lost), pruned "
            "searches"
            if args.real and args.prune
            else "the real game, the clairvoyant losing at most "
            f"{args.lost} numbered cards (a Rest's or a rack's)"
            if args.real
            else "strict game (every Rest card lost), pruned searches"
            if args.prune
            else f"strict game, the clairvoyant Resting on at most {args.lost} numbered cards"
            if args.forbid
            else f"relaxed game, the first {args.lost} numbered cards a Rest draws lost"
        ),
        "windows": windows if args.prune else None, "settings": settings,
        "lower_estimate": args.forbid, "lost": None if args.prune else args.lost,
        "real": args.real, "episodes": len(v),
        "warm_lost": args.warm_lost if args.prune else None,
        "seed": args.seed, "deals": args.deals, "workers": args.workers,
        "mean": float(v.mean()), "ci_low": float(v.mean()) - half,
        "ci_high": float(v.mean()) + half, "start_value": strict_start_value(),
        "per_deal": values, "states": states, "seconds": seconds,
        **code, "time": utc_now(),
    })  # fmt: skip
    checkpoint.unlink(missing_ok=True)
    print(f"mean {100 * v.mean():.2f}% [{100 * (v.mean() - half):.2f}%, "
          f"{100 * (v.mean() + half):.2f}%]")  # fmt: skip
    return 0


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """What decides a deal's result: a run resumes only from results made with these."""
    return {
        "seed": args.seed,
        "deals": args.deals,
        "lost": None if args.prune else args.lost,
        "forbid": args.forbid,
        "prune": args.prune,
        "real": args.real,
        "warm_lost": args.warm_lost if args.prune else None,
    }


def _done(
    record: Path, checkpoint: Path, settings: dict[str, Any], episodes: int
) -> list[DealResult]:
    """The deals already solved with ``settings``, in order: from the checkpoint of a run
    cut off, else from a finished record of at most ``episodes`` deals made with them (the
    first ``N`` deals of a seed are the same for every ``N``). Refused (``ValueError``):
    a checkpoint made with other settings, or more deals than asked for (the rest would be
    lost). Records made before settings were recorded are never resumed from."""
    import json

    for path, key in ((checkpoint, "results"), (record, None)):
        if not path.exists():
            continue
        doc = json.loads(path.read_text())
        made = doc.get("settings")
        if made != settings:
            if key is None:
                return []  # another run's record: this run replaces it
            raise ValueError(
                f"{path}: a run with other settings ({made}); remove it or choose another --json"
            )
        if key is None:
            windows = doc["windows"] or [0.0] * len(doc["per_deal"])
            results = list(
                zip(doc["per_deal"], doc["states"], doc["seconds"], windows, strict=True)
            )
        else:
            results = [cast(DealResult, tuple(r)) for r in doc[key]]
        if len(results) > episodes:
            raise ValueError(
                f"{path}: holds {len(results)} deals, more than --episodes {episodes}; "
                "choose another --json"
            )
        return results
    return []


if __name__ == "__main__":
    raise SystemExit(main())
