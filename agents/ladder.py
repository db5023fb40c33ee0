"""The strength ladder: every player of Cold Iron on the same deals.

    nice -n 10 .venv/bin/python scripts/ladder.py --episodes 10000 --planner-episodes 10000 \\
        --workers 2 --out-dir runs/ladder

Rows, all on the deals of ``agents.evaluation.arena.deal_decks(SEED, EPISODES)`` (with
``validation``, ``validation_decks``: the deals choices are made on):

* ``random``, ``threaten``, ``heuristic`` on all ``EPISODES`` deals;
* every trained run (``--runs DIR...``, or each directory under ``runs/`` holding a model),
  loaded with ``agents.registry.make_agent``; a run that cannot be loaded is skipped with a note;
* the planners (``--planner NAME``, default ``planner-small`` and ``planner``) on the **first**
  ``PLANNER_EPISODES`` deals, with ``heuristic`` again on those deals for a paired comparison
  (McNemar: deals won by one and lost by the other).

The lab adds rows of bounds (the clairvoyant's, the information-relaxation bound's) to a
ladder written here (``lab/ladder_rows.py``): a row of ``kind`` ``bound`` tallies its own
verdicts.

Each agent is reset with the evaluation's per-deal seed (``agent_seeds``), so a row is the same
whether played by one process or split over ``--workers``. "s/game" is the processing time per
game (summed over workers). :func:`run_ladder` plays the rows (each an ``AgentResult``, its
``kind`` saying which sort), :func:`write_outputs` writes ``ladder.md``, ``ladder.json`` and
``ladder.png`` in ``--out-dir``. Ctrl-C writes the rows finished so far.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.pool import Pool
from pathlib import Path
from typing import Any, Final

from agents.atomic import atomic_write_json, atomic_write_text
from agents.evaluation.arena import (
    EVALUATION_DEALS,
    VALIDATION_DEALS,
    AgentResult,
    ResultKind,
    agent_seeds,
    decks_of,
    evaluate_agent,
    markdown_table,
)
from agents.evaluation.plots import plot_win_rates
from agents.evaluation.stats import DISAGREEMENT, Z_95, disagreement, mcnemar, p_text
from agents.learning.multiseed import run_label
from agents.registry import make_agent, set_torch_threads
from coldiron_env.game import OUTCOMES

BASE_AGENTS: Final = ("random", "threaten", "heuristic")
DEFAULT_PLANNERS: Final = ("planner-small", "planner")
PLANNER_BASELINE: Final = "heuristic"
RUNS_DIR: Final = Path("runs")
MODEL_FILE: Final = "model.zip"  # sb3_agent.MODEL_FILE (not imported: SB3 is heavy)
CHUNK: Final = 25  # deals per task of a planner (slow per deal: small tasks balance)
FAST_CHUNK: Final = 1000  # deals per task of the others (a model is loaded once a task)
PERCENT: Final = 100.0
OUTPUT_FILES: Final = ("ladder.md", "ladder.json", "ladder.png")
DEFAULT_EPISODES: Final = 10_000
DEFAULT_PLANNER_EPISODES: Final = 1000
DEFAULT_WORKERS: Final = 2


@dataclass(frozen=True)
class LadderSettings:
    """What a ladder plays: the deals, the planners and runs, workers."""

    seed: int = 0
    episodes: int = DEFAULT_EPISODES
    validation: bool = False  # the seed's validation deals instead of its evaluation deals
    planner_episodes: int = DEFAULT_PLANNER_EPISODES
    planners: tuple[str, ...] = DEFAULT_PLANNERS
    runs: tuple[str, ...] = ()  # trained runs; none: every folder under runs/ holding a model
    workers: int = DEFAULT_WORKERS


@dataclass
class Ladder:
    """The rows played (in table order), the paired planner comparisons and notes."""

    rows: list[AgentResult] = field(default_factory=list)
    comparisons: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False


def _agent_chunk(task: tuple[str, int, int, bool, int, int]) -> AgentResult:
    """Play agent ``spec`` on deals ``start:stop`` of (seed, episodes, validation)."""
    spec, seed, episodes, validation, start, stop = task
    decks = decks_of(seed, episodes, validation)[start:stop]
    seeds = agent_seeds(seed, episodes)[start:stop]
    return evaluate_agent(make_agent(spec), decks, seeds)


def _in_order(pool: Pool | None, func: Callable[[Any], Any], tasks: list[Any]) -> Iterator[Any]:
    """``func`` over ``tasks`` (on ``pool`` if any), the results in the tasks' order."""
    return map(func, tasks) if pool is None else pool.imap(func, tasks)


def _chunks(count: int, size: int = CHUNK) -> list[tuple[int, int]]:
    return [(s, min(s + size, count)) for s in range(0, count, size)]


def play_row(
    pool: Any,
    spec: str,
    label: str,
    kind: ResultKind,
    seed: int,
    episodes: int,
    count: int,
    validation: bool = False,
) -> AgentResult:
    """``spec`` on the first ``count`` of the ``episodes`` deals of ``seed`` (its validation
    deals with ``validation``)."""
    size = CHUNK if kind == "planner" else FAST_CHUNK
    tasks = [(spec, seed, episodes, validation, a, b) for a, b in _chunks(count, size)]
    row = AgentResult(label, kind=kind)
    for part in _in_order(pool, _agent_chunk, tasks):
        row.extend(part)
    return row


def deals_for_disjoint(p_base: float, p_other: float) -> float:
    """Deals needed for two Wilson 95% intervals at these rates to stop overlapping (approx.)."""
    gap = p_other - p_base
    if gap <= 0:
        return math.inf
    spread = math.sqrt(p_base * (1 - p_base)) + math.sqrt(p_other * (1 - p_other))
    return (Z_95 * spread / gap) ** 2


def print_progress(row: AgentResult) -> None:
    """One line per finished row on stderr."""
    per_game = row.seconds / row.episodes
    print(f"  {row.agent}: {PERCENT * row.win_rate:.2f}% {row.interval_text} on {row.episodes} "
          f"deals, {per_game:.4f} s/game", file=sys.stderr, flush=True)  # fmt: skip


def worker_pool(workers: int) -> Pool | None:
    """Spawned workers (each plays trained models on one torch thread, as the scripts do);
    none for one worker."""
    return mp.get_context("spawn").Pool(workers, set_torch_threads) if workers > 1 else None


def close_pool(pool: Pool | None) -> None:
    """Stop :func:`worker_pool`'s workers (whatever they are doing: a run interrupted)."""
    if pool is not None:
        pool.terminate()
        pool.join()


def compare(base: AgentResult, row: AgentResult) -> dict[str, Any]:
    """``row`` paired with ``base`` on the same deals: McNemar, whether the intervals are
    disjoint, the deals that would make them so, and ``row``'s seconds a decision."""
    return {
        **mcnemar(base.won, row.won),
        "disjoint": base.interval[1] < row.interval[0] or row.interval[1] < base.interval[0],
        "deals_for_disjoint": deals_for_disjoint(base.win_rate, row.win_rate),
        "seconds_per_decision": row.seconds_per_decision,
    }


def run_ladder(
    settings: LadderSettings, progress: Callable[[AgentResult], None] | None = None
) -> Ladder:
    """Play every row of the ladder; Ctrl-C stops it with the rows finished so far."""
    runs = list(settings.runs or sorted(str(p.parent) for p in RUNS_DIR.glob(f"*/{MODEL_FILE}")))
    none = f"no trained runs: no directory under {RUNS_DIR}/ holds a model (pass --runs DIR...)"
    ladder = Ladder(notes=[] if runs else [none])
    seed, n, m, val = (
        settings.seed,
        settings.episodes,
        settings.planner_episodes,
        settings.validation,
    )
    pool = worker_pool(settings.workers)

    def add(row: AgentResult) -> AgentResult:
        ladder.rows.append(row)
        if progress is not None and row.kind != "baseline-subset":
            progress(row)
        return row

    try:
        for spec in BASE_AGENTS:
            add(play_row(pool, spec, spec, "agent", seed, n, n, val))
        for run in runs:
            try:
                make_agent(run)  # one that cannot be loaded is skipped with a note
            except (ValueError, OSError) as err:
                ladder.notes.append(f"skipped run {run}: {err}")
                continue
            label = run_label(run, Path(run).name)  # PARENT/seed-N for a --seeds run
            add(play_row(pool, run, label, "agent", seed, n, n, val))
        base = next(r for r in ladder.rows if r.agent == PLANNER_BASELINE)
        if m < n:
            label = f"{PLANNER_BASELINE} (first {m})"
            base = add(play_row(pool, PLANNER_BASELINE, label, "baseline-subset", seed, n, m, val))
        for name in settings.planners:
            row = add(play_row(pool, name, name, "planner", seed, n, m, val))
            ladder.comparisons[name] = compare(base, row)
    except KeyboardInterrupt:
        ladder.interrupted = True
        print("interrupted: writing the rows finished so far", file=sys.stderr)
    finally:
        close_pool(pool)
    return ladder


def row_dict(row: AgentResult) -> dict[str, Any]:
    """A ladder row in ``ladder.json``: the result's own fields, labelled, with seconds per game
    (and per decision for a planner)."""
    fields = row.to_dict()
    return {
        "label": fields.pop("agent"),
        "kind": row.kind,
        **fields,
        "seconds_per_game": row.seconds / row.episodes,
        "seconds_per_decision": row.seconds_per_decision if row.kind == "planner" else None,
        "note": row.note,
    }


def table_markdown(
    rows: Sequence[AgentResult], seed: int, episodes: int, validation: bool = False
) -> str:
    head = ["player", "deals", "win rate", "95% interval", *OUTCOMES, "s/game"]
    body = []
    for r in rows:
        bound = r.kind == "bound"  # its verdicts, named, then blank cells
        kinds = tuple(r.outcomes) if bound else OUTCOMES
        breakdown = [f"{k} {r.outcomes[k]}" if bound else str(r.outcomes[k]) for k in kinds]
        breakdown += [""] * (len(OUTCOMES) - len(kinds))
        deals = f"{r.episodes}" + ("" if r.episodes == episodes else f" (first {r.episodes})")
        rate = f"{PERCENT * r.win_rate:.2f}%"
        body.append(
            [r.agent, deals, rate, r.interval_text, *breakdown, f"{r.seconds / r.episodes:.4f}"]
        )
    dealt = (
        f"`agents.evaluation.arena.validation_decks({seed}, {episodes})` (validation deals)"
        if validation
        else f"`shuffled_decks(numpy.random.default_rng({seed}), {episodes})`"
    )
    return markdown_table(head, body) + (
        f"\nDeals: row i of {dealt}; "
        "'first M' rows use the first M of those deals. Intervals: Wilson score, 95%. "
        "s/game: processing seconds per game (summed over workers)."
    )


def write_outputs(
    out_dir: Path, ladder: Ladder, settings: LadderSettings, command: str
) -> list[Path]:
    """Write ``ladder.md``, ``ladder.json`` and (with rows) ``ladder.png`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = ladder.rows
    md = ["# Cold Iron strength ladder", ""]
    if ladder.interrupted:
        md += ["**Interrupted: only the rows finished are shown.**", ""]
    md += [table_markdown(rows, settings.seed, settings.episodes, settings.validation), ""]
    if ladder.comparisons:
        md += ["## The planners and the added rows, paired with heuristic on the same deals", ""]
        head = [
            "player", "deals", "player-only wins", "heuristic-only wins", "difference [95%]",
            "McNemar p", "intervals disjoint", "deals for disjoint (projected)", "s/decision",
        ]  # fmt: skip
        body = []
        for name, c in ladder.comparisons.items():
            low, high = (PERCENT * x for x in c["difference_ci95"])
            body.append([
                name, str(c["deals"]), str(c["only_other_wins"]), str(c["only_base_wins"]),
                f"{PERCENT * c['difference']:+.2f} pts [{low:+.2f}, {high:+.2f}]",
                f"{p_text(c['p_two_sided'], 3)}{' *' if disagreement(c) else ''}",
                "yes" if c["disjoint"] else "no", f"{c['deals_for_disjoint']:.0f}",
                f"{c['seconds_per_decision']:.4f}",
            ])  # fmt: skip
        md.append(markdown_table(head, body))
        if any(disagreement(c) for c in ladder.comparisons.values()):
            md += [f"\\* {DISAGREEMENT}.", ""]
    if ladder.notes:
        md += ["Notes:", "", *(f"- {n}" for n in ladder.notes), ""]
    md += ["Reproduce:", "", "```", command, "```", ""]
    paths = [out_dir / name for name in OUTPUT_FILES]
    atomic_write_text(paths[0], "\n".join(md))
    doc = {
        "seed": settings.seed,
        "episodes": settings.episodes,
        "deals": VALIDATION_DEALS if settings.validation else EVALUATION_DEALS,
        "planner_episodes": settings.planner_episodes,
        "rows": [row_dict(r) for r in rows],
        "paired": ladder.comparisons,
        "notes": list(ladder.notes),
        "interrupted": ladder.interrupted,
        "command": command,
        "interval": "Wilson score, 95% (z = 1.96)",
    }
    atomic_write_json(paths[1], doc)
    if rows:
        plot_win_rates(rows, paths[2], "Cold Iron strength ladder (same deals)")
    return paths
