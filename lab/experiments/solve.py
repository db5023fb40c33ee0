"""The clairvoyant upper bound: the share of deals that can be won at all.

Deals ``--deals`` decks from ``--seed`` (the dealer's batched shuffles), solves each exactly
with :mod:`lab.solver` (every found win replayed on a fresh engine) over
``--workers`` processes, and prints the share of winnable deals with its 95% Wilson interval,
the search effort and the time; ``--out FILE`` writes them as JSON. Ctrl-C prints and saves
what was solved so far.

    nice -n 10 .venv/bin/python -m lab.experiments.solve --deals 10000 --workers 2 \\
        --out runs/solver.json
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
from agents.evaluation.stats import wilson_interval
from coldiron_env.cards import deck_codes
from coldiron_env.dealer import shuffled_decks
from coldiron_env.options import RuleOptions, add_variant_flags, variants_of
from lab.solver import UNKNOWN, UNWINNABLE, WINNABLE, Solved, solve_decks

CHUNK: int = 50  # deals per task handed to a worker


def _solve_chunk(args: tuple[list[list[int]], dict[str, Any], int]) -> list[Solved]:
    decks, rules_dict, max_nodes = args
    return solve_decks(decks, max_nodes, RuleOptions.from_dict(rules_dict))


def summarize(results: list[Solved], decks: list[list[int]], wall: float) -> dict[str, Any]:
    n = len(results)
    wins = sum(v == WINNABLE for v, _, _ in results)
    unknown = sum(v == UNKNOWN for v, _, _ in results)
    # Unknown deals count as winnable: the figure stays an upper bound.
    bound = wins + unknown
    low, high = wilson_interval(bound, n) if n else (0.0, 1.0)
    nodes = [k for _, k, _ in results]
    times = [t for _, _, t in results]
    unwinnable = [
        deck_codes(d) for d, (v, _, _) in zip(decks, results, strict=True) if v == UNWINNABLE
    ]
    return {
        "deals": n,
        "winnable": wins,
        "unwinnable": n - wins - unknown,
        "unknown": unknown,
        "upper_bound": bound / n if n else None,
        "wilson95": [low, high],
        "nodes_mean": float(np.mean(nodes)) if nodes else 0.0,
        "nodes_max": max(nodes, default=0),
        "seconds_per_deal_mean": float(np.mean(times)) if times else 0.0,
        "seconds_per_deal_max": max(times, default=0.0),
        "wall_seconds": wall,
        "unwinnable_decks": unwinnable[:20],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    add = parser.add_argument
    add("--deals", type=int, default=10_000, help="number of deals (default 10000)")
    add("--seed", type=int, default=0, help="seed of the deals (default 0)")
    add("--workers", type=int, default=2, help="processes (default 2)")
    add("--max-nodes", type=int, default=0, help="node cap, 0 = none (unknown counts as won)")
    add_variant_flags(parser)
    add("--out", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    least = {"--deals": (args.deals, 1), "--workers": (args.workers, 1),
             "--max-nodes": (args.max_nodes, 0), "--seed": (args.seed, 0)}  # fmt: skip
    for flag, (value, low) in least.items():
        if value < low:
            parser.error(f"{flag} must be {low} or more, got {value}")
    if args.out is not None:
        try:
            check_writable(args.out, "--out")
        except ValueError as err:
            parser.error(str(err))
    rules = RuleOptions(**variants_of(args))
    decks: list[list[int]] = shuffled_decks(np.random.default_rng(args.seed), args.deals).tolist()
    tasks = [
        (decks[i : i + CHUNK], rules.to_dict(), args.max_nodes) for i in range(0, len(decks), CHUNK)
    ]
    results: list[Solved] = []
    start = time.perf_counter()
    interrupted = False
    try:
        if args.workers == 1:
            for task in tasks:
                results.extend(_solve_chunk(task))
        else:
            with mp.Pool(args.workers) as pool:
                for chunk in pool.imap(_solve_chunk, tasks):
                    results.extend(chunk)
    except KeyboardInterrupt:
        interrupted = True
        print(f"interrupted: reporting the {len(results)} deals solved so far", file=sys.stderr)
    wall = time.perf_counter() - start
    summary = summarize(results, decks[: len(results)], wall)
    summary.update({"seed": args.seed, "rules": rules.to_dict(), "interrupted": interrupted})
    if summary["deals"]:
        low, high = summary["wilson95"]
        print(
            f"clairvoyant solver: {summary['winnable']}/{summary['deals']} deals winnable "
            f"({summary['unwinnable']} unwinnable, {summary['unknown']} unknown)\n"
            f"upper bound on any player's win rate: {summary['upper_bound']:.4f} "
            f"(95% Wilson {low:.4f}..{high:.4f})\n"
            f"nodes/deal mean {summary['nodes_mean']:.0f} max {summary['nodes_max']}; "
            f"time/deal mean {summary['seconds_per_deal_mean'] * 1000:.1f} ms "
            f"max {summary['seconds_per_deal_max']:.2f} s; wall {wall:.1f} s "
            f"on {args.workers} worker(s)"
        )
    if args.out is not None:
        atomic_write_json(args.out, summary)
    return 130 if interrupted else 0


if __name__ == "__main__":
    raise SystemExit(main())
