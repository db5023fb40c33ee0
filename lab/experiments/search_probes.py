"""Search players on validation deals, in parallel processes: which is stronger, at what cost.

    .venv/bin/python -m lab.experiments.search_probes --seed 501 --episodes 4000 \\
        --agent heuristic --agent distilled --agent search:distilled:heuristic:1024:18 \\
        --agent search:distilled:network:1024:18 --json lab/records/search_probes_501.json

An agent is a registry name (``heuristic``, ``planner-trained``, ``strongest``...) or a
search spec ``search:MODEL:ROLLOUTS:SAMPLES:FROM_TURN``: the planner over the network
``MODEL`` (its base policy), its rollouts played by ``heuristic``, by the ``network`` itself
or by another shipped network named (``search:distilled-30:distilled:1024:18``),
``SAMPLES`` sampled orders a decision at most, planning from turn ``FROM_TURN``, then any
other ``PlannerConfig`` fields as ``:NAME=VALUE`` (``:z=1.5:racks=14:min_samples=256``;
``:racks=None``: every rack, unranked; ``SAMPLES`` and ``FROM_TURN`` only by their place,
any other name refused). Every agent
plays the same validation deals (``reset(seed=stream_seed(VALIDATION, SEED, k))``), split
over ``--workers`` processes (each agent is reset with the evaluation's per-deal seeds, so
the result does not depend on the split). The record keeps, per agent, its win rate with
its Wilson interval, the per-deal wins (to pair any two agents later), the processing time
per game and per decision; an existing record gains the agents it does not hold yet.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import time
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agents.atomic import atomic_write_json  # noqa: E402
from agents.evaluation.arena import (  # noqa: E402
    agent_seeds,
    evaluate_agent,
    pack_wins,
    validation_decks,
)
from agents.evaluation.stats import mcnemar, wilson_interval  # noqa: E402
from agents.gitinfo import git_commit, git_dirty, utc_now  # noqa: E402
from agents.players.base import Agent  # noqa: E402
from lab import unpack_wins  # noqa: E402

SEARCH_PREFIX: Final = "search:"
LOOKAHEAD_PREFIX: Final = "lookahead:"  # the two-step search (lookahead.py)
TRUNCATED_PREFIX: Final = "truncated:"  # rollouts cut short, the value head (truncated.py)
SEARCH_FIELDS: Final = 4  # MODEL:ROLLOUTS:SAMPLES:FROM_TURN
STATS_BATCH: Final = 64  # sampled orders between two looks at the statistics (the planner's)


def make(spec: str) -> Agent:
    """The agent ``spec`` names (see the module doc)."""
    from agents.registry import make_agent

    if spec.startswith(TRUNCATED_PREFIX):
        from lab.experiments.truncated import make_truncated  # value at a horizon

        return make_truncated(spec, make)
    if spec.startswith(LOOKAHEAD_PREFIX):
        from lab.experiments.lookahead import make_lookahead  # the two-step search

        return make_lookahead(spec, make)
    if not spec.startswith(SEARCH_PREFIX):
        return make_agent(spec)
    from agents.learning.sb3_agent import KnowledgePolicy, SB3Agent, policy_net
    from agents.players.planner import PlannerAgent, PlannerConfig

    parts = spec[len(SEARCH_PREFIX) :].split(":")
    if len(parts) < SEARCH_FIELDS:
        raise ValueError(f"{spec!r}: expected search:MODEL:ROLLOUTS:SAMPLES:FROM_TURN")
    model, rollouts, samples, from_turn = parts[0], parts[1], int(parts[2]), int(parts[3])
    extra: dict[str, Any] = {}
    set_by_place = {"samples", "plan_from_turn"}  # params: the heuristic's, not a number
    named = {f.name for f in dataclasses.fields(PlannerConfig)} - set_by_place - {"params"}
    for item in parts[SEARCH_FIELDS:]:
        key, _, value = item.partition("=")
        if key not in named:
            raise ValueError(f"{spec!r}: {key!r} is not one of {', '.join(sorted(named))}")
        try:  # racks=None: every rack, unranked (planner-free: no hand-written ranking)
            extra[key] = None if value == "None" else float(value) if "." in value else int(value)
        except ValueError:
            raise ValueError(f"{spec!r}: {key}={value!r} is not a number") from None

    def trained(name: str) -> SB3Agent:
        agent = make_agent(name)
        if not isinstance(agent, SB3Agent):
            raise ValueError(f"{spec!r}: {name!r} is not a trained network")
        return agent

    network = trained(model)
    roller = network if rollouts in ("heuristic", "network") else trained(rollouts)
    batch = min(STATS_BATCH, samples)
    implied = {"batch": batch, "min_samples": batch}  # a :NAME=VALUE overrides these
    config = PlannerConfig(samples=samples, plan_from_turn=from_turn, **{**implied, **extra})
    return PlannerAgent(
        config,
        name=spec,
        base=KnowledgePolicy(network),
        rollout_policy=None if rollouts == "heuristic" else policy_net(roller),
    )


def _play(task: tuple[str, int, int, int, int]) -> dict[str, Any]:
    spec, seed, episodes, lo, hi = task
    import torch

    torch.set_num_threads(1)
    agent = make(spec)
    decks = validation_decks(seed, episodes)[lo:hi]
    seeds = agent_seeds(seed, episodes)[lo:hi]
    won: list[bool] = []
    start = time.process_time()
    result = evaluate_agent(
        agent, decks, seeds, {}, callback=lambda i, d, o, t: won.append(o == "won")
    )
    return {
        "won": won,
        "cpu_seconds": time.process_time() - start,
        "decisions": result.total_steps,
    }


def probe(spec: str, seed: int, episodes: int, workers: int) -> dict[str, Any]:
    """``spec`` on the validation deals: its record entry."""
    cuts = [episodes * w // workers for w in range(workers + 1)]
    tasks = [(spec, seed, episodes, cuts[w], cuts[w + 1]) for w in range(workers)]
    start = time.perf_counter()
    with get_context("spawn").Pool(workers) as pool:
        parts = pool.map(_play, tasks)
    won = [w for part in parts for w in part["won"]]
    cpu = sum(part["cpu_seconds"] for part in parts)
    decisions = sum(part["decisions"] for part in parts)
    low, high = wilson_interval(sum(won), len(won))
    return {
        "agent": spec,
        "episodes": len(won),
        "won": sum(won),
        "win_rate": sum(won) / len(won),
        "ci_low": low,
        "ci_high": high,
        "wins": pack_wins(won),
        "wall_seconds": round(time.perf_counter() - start, 1),
        "cpu_seconds_per_game": round(cpu / len(won), 4),
        "cpu_ms_per_decision": round(1000 * cpu / max(decisions, 1), 3),
        "workers": workers,
    }


def paired(base: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """``other`` against ``base`` deal by deal (McNemar's exact test)."""
    result = mcnemar(
        unpack_wins(base["wins"], base["episodes"]), unpack_wins(other["wins"], other["episodes"])
    )
    return {"against": base["agent"], **result}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", action="append", required=True)
    parser.add_argument("--seed", type=int, required=True, help="validation seed")
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--against", default=None, help="pair every agent with this one")
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    doc: dict[str, Any] = (
        json.loads(args.json.read_text()) if args.json.exists() else {"agents": {}}
    )
    if (
        doc.get("seed", args.seed) != args.seed
        or doc.get("episodes", args.episodes) != args.episodes
    ):
        raise SystemExit(f"{args.json} holds seed {doc.get('seed')}, {doc.get('episodes')} deals")
    agents = list(dict.fromkeys([*doc["agents"], *args.agent]))  # the record's, then the new
    doc.update(
        deals="validation",
        seed=args.seed,
        episodes=args.episodes,
        # a command that makes the whole record again (agents held are skipped when rerun)
        command=shlex.join(
            ["lab/experiments/search_probes.py", "--seed", str(args.seed)]
            + ["--episodes", str(args.episodes), "--workers", str(args.workers)]
            + [word for spec in agents for word in ("--agent", spec)]
            + (["--against", args.against] if args.against else [])
            + ["--json", str(args.json)]
        ),
    )
    for spec in args.agent:
        if spec in doc["agents"]:
            continue
        code = {"commit": git_commit(), "dirty": git_dirty(ignore=args.json)}  # what ran
        entry = probe(spec, args.seed, args.episodes, args.workers)
        entry.update(code, date=utc_now())
        doc["agents"][spec] = entry
        atomic_write_json(args.json, doc)
        print(
            f"{spec}: {entry['win_rate']:.2%} [{entry['ci_low']:.2%}, {entry['ci_high']:.2%}] "
            f"on {entry['episodes']} deals; {entry['cpu_seconds_per_game']:.3f} CPU-s a game, "
            f"{entry['cpu_ms_per_decision']:.2f} ms a decision",
            flush=True,
        )
    against = args.against or next(iter(doc["agents"]))
    doc["agents"][against].pop("paired", None)  # paired with another agent on a run before
    for spec, entry in doc["agents"].items():
        if spec != against:
            entry["paired"] = paired(doc["agents"][against], entry)
            p = entry["paired"]
            low, high = p["difference_ci95"]
            print(
                f"  {spec} - {against}: {100 * p['difference']:+.2f} "
                f"[{100 * low:+.2f}, {100 * high:+.2f}] points, p = {p['p_two_sided']:.2g}"
            )
    atomic_write_json(args.json, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
