"""The bound's validity on the games of real players: the heuristic, the planner and a network.

    .venv/bin/python -m lab.experiments.bound_checks --episodes 2000 \\
        --json lab/records/bound_checks.json

For each player, on the same validation deals (seed 913): its game is played in the env
(each deal dealt with the ``deck`` option), replayed in the relaxed game with the
need-known ``W``'s penalties (``lab.bound.twin_result``), and checked
against the deal's bound:

* the penalties' sum ``Z`` has mean zero within its interval (the bound's validity rests on
  it: ``E[Z] = 0`` for every player who sees only what a player sees);
* on every deal, the bound is at least the player's own penalised result ``R - Z`` (the
  clairvoyant can play that game), and ``R`` (the relaxed twin's own result, read from the
  relaxed game's draws) is 1 whenever the real game (played to its end) was won.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from agents.atomic import atomic_write_json
from agents.evaluation.arena import agent_env_kwargs, validation_decks
from agents.evaluation.lockstep import play_lockstep
from agents.gitinfo import code_stamp
from agents.registry import make_agent
from coldiron_env.cards import deck_codes
from lab.bound import ValueModel, deal_bound, twin_result

Z_95 = 1.96
SEED = 913
PLAYERS = ("heuristic", "planner", "distilled-30")


def actions_of(agent: Any, decks: np.ndarray) -> list[list[int]]:
    """The actions ``agent`` takes on each deck (what it sees: the env's observation), reset
    with seed ``k`` before deck ``k``."""
    actions: list[list[int]] = [[] for _ in decks]

    def seat(k: int) -> Any:
        agent.reset(seed=k)
        return agent

    resets = [{"seed": k, "options": {"deck": deck_codes(d)}} for k, d in enumerate(decks.tolist())]
    on_move = lambda move: actions[move.game].append(move.action)  # noqa: E731
    play_lockstep(
        seat, agent_env_kwargs(agent, {}), resets, batch=1, engine="single", on_move=on_move
    )
    return actions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--players", nargs="+", default=list(PLAYERS))
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    stamp = code_stamp(args.json)  # the code that plays, before it plays
    model = ValueModel.need_game()
    decks = validation_decks(SEED, args.episodes)
    start = time.perf_counter()
    bounds = np.array([deal_bound(d, model) for d in decks])
    bound_seconds = time.perf_counter() - start
    rows = []
    for name in args.players:
        agent = make_agent(name)
        start = time.perf_counter()
        played = actions_of(agent, decks)
        zs, slack, wins, twin_wins, twin_sure = [], [], 0, 0, 0
        for k, deck in enumerate(decks):
            r, z, outcome = twin_result(deck, played[k], model)
            zs.append(z)
            slack.append(bounds[k] - (r - z))
            wins += outcome == "won"
            twin_wins += r >= (outcome == "won")
            twin_sure += r == 1.0
        z_arr = np.asarray(zs)
        se = float(z_arr.std(ddof=1) / np.sqrt(len(z_arr)))
        rows.append({
            "player": name, "games": len(z_arr), "real_wins": wins,
            "mean_z": float(z_arr.mean()), "z_ci95": [float(z_arr.mean()) - Z_95 * se,
                                                      float(z_arr.mean()) + Z_95 * se],
            "z_in_standard_errors": float(z_arr.mean()) / se,
            "deals_bound_below_result": int(np.sum(np.asarray(slack) < -1e-9)),
            "min_slack": float(np.min(slack)),
            "twin_wins": twin_sure,
            "twin_wins_whenever_real_wins": twin_wins == len(z_arr),
            "seconds": round(time.perf_counter() - start, 1),
        })  # fmt: skip
        print(rows[-1], flush=True)
    atomic_write_json(args.json, {
        "command": ".venv/bin/python -m lab.experiments.bound_checks "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "value_function": model.name, "deals": f"{args.episodes} validation deals of seed {SEED}",
        "bound_mean": float(bounds.mean()), "bound_seconds": round(bound_seconds, 1),
        "rows": rows, **stamp,
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
