"""The strength ladder: every player of Cold Iron on the same deals, up to the clairvoyant bound.

    nice -n 10 python scripts/ladder.py --episodes 10000 --planner-episodes 2000 \\
        --seed 0 --workers 2 --out-dir docs/ladder

Rows, all on the deals of ``agents.evaluation.arena.deal_decks(SEED, EPISODES)``:

* ``random``, ``threaten``, ``heuristic`` on all ``EPISODES`` deals;
* every trained run (``--runs DIR...``, or each directory under ``runs/``
  holding a model), loaded with ``agents.registry.make_agent``; a run that
  cannot be loaded is skipped with a note;
* the planner at two budgets (``--planner NAME``, default ``planner-small`` and
  ``planner``) on the **first** ``PLANNER_EPISODES`` deals, with ``heuristic``
  again on those same deals for a paired comparison (McNemar: deals won by one
  and lost by the other);
* the clairvoyant bound (``agents.players.solver``: the share of deals that can be won
  at all with the deck order known) on the first ``SOLVER_EPISODES`` deals
  (default: all).

Each agent is reset with the evaluation's per-deal seed (``agent_seeds``), so a
row is the same whether it is played by one process or split over
``--workers``. "s/game" is the processing time per game (summed over workers).
Writes ``ladder.md`` (Markdown table), ``ladder.json`` and ``ladder.png`` in
``--out-dir`` (atomic writes). Ctrl-C writes the rows finished so far.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from agents.atomic import atomic_target, atomic_write_json, atomic_write_text
from agents.evaluation.arena import (
    agent_seeds,
    deal_decks,
    evaluate_agent,
)
from agents.evaluation.stats import intervals_disjoint, wilson_interval
from agents.players.solver import UNKNOWN, UNWINNABLE, WINNABLE, solve_deck
from agents.registry import make_agent
from coldiron_env.game import OUTCOMES

BASE_AGENTS: Final = ("random", "threaten", "heuristic")
DEFAULT_PLANNERS: Final = ("planner-small", "planner")
PLANNER_BASELINE: Final = "heuristic"
RUNS_DIR: Final = Path("runs")
MODEL_NAMES: Final = ("model.zip",)  # sb3_agent.MODEL_FILE (not imported: SB3 is heavy)
CHUNK: Final = 25
"""Deals per task handed to a worker."""
SOLVER_LABEL: Final = "clairvoyant bound"
PERCENT: Final = 100.0
PUBLIC_FILE_MODE: Final = 0o644
EXIT_ERROR: Final = 2
EXIT_INTERRUPTED: Final = 130


@dataclass
class Row:
    """One line of the ladder."""

    label: str
    kind: str  # "agent", "planner", "baseline-subset", "bound"
    episodes: int
    wins: int
    outcomes: dict[str, int]
    seconds: float
    won: list[bool] = field(default_factory=list, repr=False)
    note: str = ""
    decisions: int = 0
    """Decisions taken, for a planner (its ``stats``); 0 when not counted."""

    @property
    def win_rate(self) -> float:
        return self.wins / self.episodes

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.wins, self.episodes)

    def to_dict(self) -> dict[str, Any]:
        low, high = self.interval
        return {
            "label": self.label,
            "kind": self.kind,
            "episodes": self.episodes,
            "wins": self.wins,
            "win_rate": self.win_rate,
            "ci_low": low,
            "ci_high": high,
            "outcomes": self.outcomes,
            "seconds_per_game": self.seconds / self.episodes,
            "seconds_per_decision": self.seconds / self.decisions if self.decisions else None,
            "note": self.note,
        }


# --------------------------------------------------------------------------- workers
def _agent_chunk(task: tuple[str, int, int, int, int]) -> tuple[int, list[str], float, int]:
    """Play agent ``spec`` on deals ``start:stop`` of (seed, episodes): outcomes in order,
    seconds, decisions taken."""
    spec, seed, episodes, start, stop = task
    decks = deal_decks(seed, episodes)[start:stop]
    seeds = agent_seeds(seed, episodes)[start:stop]
    outcomes: list[str] = [""] * (stop - start)
    decisions = 0

    def record(i: int, _deck: list[int], outcome: str, _turn: int) -> None:
        outcomes[i] = outcome

    agent = make_agent(spec)
    result = evaluate_agent(agent, decks, seeds, callback=record)
    stats = getattr(agent, "stats", None)
    decisions = int(getattr(stats, "decisions", 0))
    return start, outcomes, result.seconds, decisions


def _solver_chunk(task: tuple[int, int, int, int, int]) -> tuple[int, list[str], float, int]:
    seed, episodes, start, stop, max_nodes = task
    decks = deal_decks(seed, episodes)[start:stop].tolist()
    begin = time.perf_counter()
    verdicts = [solve_deck(deck, max_nodes=max_nodes).verdict for deck in decks]
    return start, verdicts, time.perf_counter() - begin, 0


def _chunks(count: int) -> list[tuple[int, int]]:
    return [(s, min(s + CHUNK, count)) for s in range(0, count, CHUNK)]


def _run(pool: Any, func: Any, tasks: list[Any], count: int) -> tuple[list[str], float, int]:
    results: list[str] = [""] * count
    seconds = 0.0
    decisions = 0
    mapper = pool.imap_unordered if pool is not None else map
    for start, items, secs, steps in mapper(func, tasks):
        results[start : start + len(items)] = items
        seconds += secs
        decisions += steps
    return results, seconds, decisions


def play_row(
    pool: Any, spec: str, label: str, kind: str, seed: int, episodes: int, count: int
) -> Row:
    """``spec`` on the first ``count`` of the ``episodes`` deals of ``seed``."""
    tasks = [(spec, seed, episodes, a, b) for a, b in _chunks(count)]
    outcomes, seconds, decisions = _run(pool, _agent_chunk, tasks, count)
    tally = dict.fromkeys(OUTCOMES, 0)
    for outcome in outcomes:
        tally[outcome] += 1
    won = [o == "won" for o in outcomes]
    return Row(label, kind, count, sum(won), tally, seconds, won, decisions=decisions)


def solver_row(pool: Any, seed: int, episodes: int, count: int, max_nodes: int) -> Row:
    tasks = [(seed, episodes, a, b, max_nodes) for a, b in _chunks(count)]
    verdicts, seconds, _ = _run(pool, _solver_chunk, tasks, count)
    tally = {v: verdicts.count(v) for v in (WINNABLE, UNWINNABLE, UNKNOWN)}
    # A deal the search could not settle counts as winnable: the figure stays an upper bound.
    bound = tally[WINNABLE] + tally[UNKNOWN]
    won = [v != UNWINNABLE for v in verdicts]
    return Row(SOLVER_LABEL, "bound", count, bound, tally, seconds, won)


# --------------------------------------------------------------------------- runs
def find_runs(explicit: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """Run directories to evaluate and notes on what was skipped."""
    notes: list[str] = []
    if explicit:
        return list(explicit), notes
    if not RUNS_DIR.is_dir():
        notes.append(f"no trained runs: {RUNS_DIR}/ does not exist (pass --runs DIR...)")
        return [], notes
    runs = sorted(
        str(p)
        for p in RUNS_DIR.iterdir()
        if p.is_dir() and any((p / m).exists() for m in MODEL_NAMES)
    )
    if not runs:
        notes.append(f"no trained runs: no directory under {RUNS_DIR}/ holds a model")
    return runs, notes


def loadable(spec: str) -> str | None:
    """None if ``spec`` loads as an agent, else why not."""
    try:
        make_agent(spec)
    except (ValueError, OSError) as err:
        return str(err)
    return None


# --------------------------------------------------------------------------- paired
def mcnemar(base: Sequence[bool], other: Sequence[bool]) -> dict[str, Any]:
    """Paired comparison on the same deals: discordant counts and the exact two-sided p-value."""
    only_other = sum(1 for b, o in zip(base, other, strict=True) if o and not b)
    only_base = sum(1 for b, o in zip(base, other, strict=True) if b and not o)
    n = only_other + only_base
    k = min(only_other, only_base)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n if n else 1.0
    diff = (only_other - only_base) / len(base)
    se = math.sqrt(n / len(base) - diff * diff) / math.sqrt(len(base)) if n else 0.0
    return {
        "deals": len(base),
        "only_other_wins": only_other,
        "only_base_wins": only_base,
        "difference": diff,
        "difference_ci95": [diff - 1.96 * se, diff + 1.96 * se],
        "p_two_sided": min(1.0, 2 * tail),
    }


def deals_for_disjoint(p_base: float, p_other: float) -> float:
    """Deals needed for two Wilson 95% intervals at these rates to stop overlapping (approx.)."""
    gap = p_other - p_base
    if gap <= 0:
        return math.inf
    spread = math.sqrt(p_base * (1 - p_base)) + math.sqrt(p_other * (1 - p_other))
    return (1.96 * spread / gap) ** 2


# --------------------------------------------------------------------------- output
def table_markdown(rows: Sequence[Row], seed: int, episodes: int) -> str:
    head = ["player", "deals", "win rate", "95% interval", *OUTCOMES, "s/game"]
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "|".join(" --- " for _ in head) + "|",
    ]
    for r in rows:
        low, high = r.interval
        if r.kind == "bound":
            breakdown = [
                f"winnable {r.outcomes[WINNABLE]}",
                f"unwinnable {r.outcomes[UNWINNABLE]}",
                f"unknown {r.outcomes[UNKNOWN]}",
                "",
                "",
            ]
        else:
            breakdown = [str(r.outcomes[o]) for o in OUTCOMES]
        deals = f"{r.episodes}" + ("" if r.episodes == episodes else f" (first {r.episodes})")
        lines.append(
            "| "
            + " | ".join(
                [
                    r.label,
                    deals,
                    f"{PERCENT * r.win_rate:.2f}%",
                    f"[{PERCENT * low:.2f}%, {PERCENT * high:.2f}%]",
                    *breakdown,
                    f"{r.seconds / r.episodes:.4f}",
                ]
            )
            + " |"
        )
    lines.append("")
    lines.append(
        f"Deals: row i of `shuffled_decks(numpy.random.default_rng({seed}), {episodes})`; "
        "'first M' rows use the first M of those deals. Intervals: Wilson score, 95%. "
        "s/game: processing seconds per game (summed over workers)."
    )
    return "\n".join(lines)


def plot_ladder(rows: Sequence[Row], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r.label}\n({r.episodes} deals)" for r in rows]
    rates = [PERCENT * r.win_rate for r in rows]
    err_low = [PERCENT * (r.win_rate - r.interval[0]) for r in rows]
    err_high = [PERCENT * (r.interval[1] - r.win_rate) for r in rows]
    colours = {
        "agent": "#4C72B0",
        "planner": "#DD8452",
        "baseline-subset": "#8C8C8C",
        "bound": "#55A868",
    }
    fig, ax = plt.subplots(figsize=(8.0, 0.55 * len(rows) + 1.5))
    try:
        ys = list(range(len(rows)))[::-1]
        ax.barh(
            ys,
            rates,
            xerr=[err_low, err_high],
            capsize=4,
            color=[colours.get(r.kind, "#4C72B0") for r in rows],
            edgecolor="black",
        )
        for y, rate, high in zip(ys, rates, err_high, strict=True):
            ax.annotate(
                f"{rate:.2f}%",
                (rate + high, y),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                fontsize=8,
            )
        ax.set_yticks(ys, labels, fontsize=8)
        ax.set_xlabel("win rate (%), Wilson 95% interval")
        ax.set_xlim(
            0, min(PERCENT, max(r + h for r, h in zip(rates, err_high, strict=True)) * 1.15 + 1)
        )
        ax.set_title("Cold Iron strength ladder (same deals)")
        ax.grid(axis="x", alpha=0.3)
        fig.tight_layout()
        with atomic_target(path, suffix=".png") as tmp:
            fig.savefig(tmp, format="png", dpi=110)
    finally:
        plt.close(fig)
    return path


def write_outputs(
    out_dir: Path,
    rows: Sequence[Row],
    comparisons: dict[str, Any],
    notes: Sequence[str],
    args: argparse.Namespace,
    command: str,
    interrupted: bool,
) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    md = ["# Cold Iron strength ladder", ""]
    if interrupted:
        md += ["**Interrupted: only the rows finished are shown.**", ""]
    md += [table_markdown(rows, args.seed, args.episodes), ""]
    if comparisons:
        md += ["## Planner vs heuristic on the same deals (paired)", ""]
        md += [
            "| planner | deals | planner-only wins | heuristic-only wins | difference [95%] | "
            "McNemar p | intervals disjoint | deals for disjoint (projected) | s/decision |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for name, c in comparisons.items():
            low, high = c["difference_ci95"]
            md.append(
                f"| {name} | {c['deals']} | {c['only_other_wins']} | {c['only_base_wins']} | "
                f"{PERCENT * c['difference']:+.2f} pts "
                f"[{PERCENT * low:+.2f}, {PERCENT * high:+.2f}] | "
                f"{c['p_two_sided']:.3g} | {'yes' if c['disjoint'] else 'no'} | "
                f"{c['deals_for_disjoint']:.0f} | {c['seconds_per_decision']:.4f} |"
            )
        md.append("")
    if notes:
        md += ["Notes:", "", *(f"- {n}" for n in notes), ""]
    md += ["Reproduce:", "", "```", command, "```", ""]
    paths = [out_dir / "ladder.md", out_dir / "ladder.json", out_dir / "ladder.png"]
    atomic_write_text(paths[0], "\n".join(md))
    atomic_write_json(
        paths[1],
        {
            "seed": args.seed,
            "episodes": args.episodes,
            "planner_episodes": args.planner_episodes,
            "solver_episodes": args.solver_episodes,
            "rows": [r.to_dict() for r in rows],
            "paired": comparisons,
            "notes": list(notes),
            "interrupted": interrupted,
            "command": command,
            "interval": "Wilson score, 95% (z = 1.96)",
        },
    )
    if rows:
        plot_ladder(rows, paths[2])
    for path in paths:
        if path.exists():
            path.chmod(PUBLIC_FILE_MODE)  # temporary files are created private
    return paths


# --------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--episodes", type=int, default=10_000, help="deals (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the deals (default 0)")
    parser.add_argument(
        "--planner-episodes",
        type=int,
        default=1000,
        help="first deals the planners play (default 1000, at most --episodes)",
    )
    parser.add_argument(
        "--solver-episodes",
        type=int,
        default=None,
        help="first deals the clairvoyant solver decides (default: all --episodes)",
    )
    parser.add_argument(
        "--planner",
        action="append",
        default=None,
        metavar="NAME",
        help=f"planner budget to rank (repeatable; default {' and '.join(DEFAULT_PLANNERS)})",
    )
    parser.add_argument("--runs", nargs="*", default=None, metavar="DIR", help="trained run dirs")
    parser.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--solver-max-nodes", type=int, default=0, help="node cap (0: none)")
    parser.add_argument("--out-dir", type=Path, default=Path("docs/ladder"), help="output folder")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = "python scripts/ladder.py " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        for name in ("episodes", "planner_episodes", "workers"):
            if getattr(args, name) <= 0:
                raise ValueError(
                    f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}"
                )
        if args.planner_episodes > args.episodes:
            raise ValueError(
                f"--planner-episodes ({args.planner_episodes}) exceeds --episodes ({args.episodes})"
            )
        if args.solver_episodes is None:
            args.solver_episodes = args.episodes
        if not 0 <= args.solver_episodes <= args.episodes:
            raise ValueError(
                f"--solver-episodes must be in 0..{args.episodes}, got {args.solver_episodes}"
            )
        planners = args.planner or list(DEFAULT_PLANNERS)
        for name in planners:
            make_agent(name)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR
    runs, notes = find_runs(args.runs)
    rows: list[Row] = []
    comparisons: dict[str, Any] = {}
    interrupted = False
    pool = mp.get_context("spawn").Pool(args.workers) if args.workers > 1 else None
    seed, n, m = args.seed, args.episodes, args.planner_episodes

    def progress(row: Row) -> None:
        low, high = row.interval
        print(
            f"  {row.label}: {PERCENT * row.win_rate:.2f}% [{PERCENT * low:.2f}%, "
            f"{PERCENT * high:.2f}%] on {row.episodes} deals, "
            f"{row.seconds / row.episodes:.4f} s/game",
            file=sys.stderr,
            flush=True,
        )

    try:
        for spec in BASE_AGENTS:
            rows.append(play_row(pool, spec, spec, "agent", seed, n, n))
            progress(rows[-1])
        for run in runs:
            why = loadable(run)
            if why is not None:
                notes.append(f"skipped run {run}: {why}")
                continue
            rows.append(play_row(pool, run, Path(run).name, "agent", seed, n, n))
            progress(rows[-1])
        heuristic = next(r for r in rows if r.label == PLANNER_BASELINE)
        if m < n:
            base = play_row(
                pool,
                PLANNER_BASELINE,
                f"{PLANNER_BASELINE} (first {m})",
                "baseline-subset",
                seed,
                n,
                m,
            )
            rows.append(base)
        else:
            base = heuristic
        for name in planners:
            row = play_row(pool, name, name, "planner", seed, n, m)
            rows.append(row)
            progress(row)
            pair = mcnemar(base.won, row.won)
            pair["disjoint"] = intervals_disjoint(base.interval, row.interval)
            pair["deals_for_disjoint"] = deals_for_disjoint(base.win_rate, row.win_rate)
            pair["seconds_per_decision"] = row.seconds / max(row.decisions, 1)
            comparisons[name] = pair
        if args.solver_episodes:
            rows.append(solver_row(pool, seed, n, args.solver_episodes, args.solver_max_nodes))
            progress(rows[-1])
    except KeyboardInterrupt:
        interrupted = True
        print("interrupted: writing the rows finished so far", file=sys.stderr)
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()
    paths = write_outputs(args.out_dir, rows, comparisons, notes, args, command, interrupted)
    print(table_markdown(rows, seed, n))
    for path in paths:
        print(f"wrote {path}")
    return EXIT_INTERRUPTED if interrupted else 0


if __name__ == "__main__":
    raise SystemExit(main())
