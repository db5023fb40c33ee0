"""Is a network's value head a win chance? The precondition of truncated rollouts (issue 19).

    .venv/bin/python -m lab.experiments.value_calibration --model distilled --seed 601 \\
        --episodes 600 --json lab/records/value_calibration.json

A truncated rollout stops after a few moves and scores the position by a learned value
instead of playing to the end; the search then compares candidates by those values, so the
value must be the win chance of the rollout player from there. The network (``--model``)
plays ``--episodes`` validation deals of ``--seed`` on the rules engine; at every decision
from ``--from-turn`` on (where the search plans) the position is kept, its value read
from the network's value head, and its win chance under the network's own play estimated
by ``--orders`` network rollouts on sampled orders of the unseen cards (the planner's
rollouts: the network's action, then the network to the end; a game that can no longer be
won stops there, lost). The record holds, over those positions: the means, the correlation
(Pearson, and Spearman with tied ranks averaged), the root-mean-square gap between value and
rollout estimate against the rollouts' own sampling error, the same with the value clipped
to [0, 1] (what ``truncated.py`` scores with), the means by bins of the value
(calibration), and the decisions left in the network's own game at such a position, that
one included (a rollout from there plays about as many, fewer where it stops at a game that
can no longer be won; a truncation saves at most the ones after the candidate).
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from pathlib import Path
from typing import Any, Final

import numpy as np

ROOT: Final = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agents.atomic import atomic_write_json, check_writable  # noqa: E402
from agents.evaluation.arena import validation_decks  # noqa: E402
from agents.evaluation.lockstep import Move, play_lockstep  # noqa: E402
from agents.gitinfo import code_stamp  # noqa: E402
from agents.players.policy_net import play_network  # noqa: E402
from agents.players.rollouts import candidate_games  # noqa: E402
from agents.players.threads import one_blas_thread  # noqa: E402
from coldiron_env.cards import deck_codes  # noqa: E402
from coldiron_env.game import WON  # noqa: E402
from coldiron_env.knowledge import Knowledge  # noqa: E402

BINS: Final = (-math.inf, 0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0, math.inf)
"""Edges of the value bins of the calibration table, each bin ``[low, high)`` (a value head
is not held to [0, 1]: the first and last bins hold what falls outside)."""
CHUNK: Final = 256
"""Positions whose values are read in one forward pass."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="distilled", help="a shipped network's name")
    parser.add_argument("--seed", type=int, default=601, help="validation seed")
    parser.add_argument("--episodes", type=int, default=600)
    parser.add_argument("--from-turn", type=int, default=18)
    parser.add_argument("--orders", type=int, default=256, help="rollouts a position")
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    for flag in ("episodes", "from_turn", "orders"):
        if getattr(args, flag) <= 0:
            parser.error(f"--{flag.replace('_', '-')} must be positive")
    try:
        check_writable(args.json, "--json")
    except ValueError as error:
        parser.error(str(error))
    stamp = code_stamp(ignore=args.json)

    import torch

    from agents.learning.sb3_agent import SB3Agent, policy_net
    from agents.registry import make_agent

    torch.set_num_threads(1)
    agent = make_agent(args.model)
    if not isinstance(agent, SB3Agent):
        parser.error(f"--model {args.model!r} is not a trained network")
    net = policy_net(agent)
    policy: Any = agent.model.policy
    rng = np.random.default_rng([args.seed, args.episodes])
    start = time.process_time()

    kept: list[Knowledge] = []
    first: list[int] = []
    per_game = [0] * args.episodes

    def keep(move: Move) -> None:  # the network's decisions from the turn, game by game
        if move.obs.turn >= args.from_turn:
            kept.append(move.obs)
            first.append(move.action)
            per_game[move.game] += 1

    def seat(_: int) -> Any:  # the network itself, deciding from what a player knows
        return net

    decks = validation_decks(args.seed, args.episodes).tolist()
    resets = [{"options": {"deck": deck_codes(row)}} for row in decks]
    played = play_lockstep(seat, {}, resets, engine="game", on_move=keep)
    won_games = sum(episode.outcome == WON for episode in played)
    moves_left = [left for count in per_game for left in range(count, 0, -1)]

    if not kept:
        parser.error(f"no decision from turn {args.from_turn} in the network's games")
    obs = np.stack([kn.observation("flat", net.recall, net.counting) for kn in kept])
    values = np.concatenate(
        [
            policy.predict_values(torch.as_tensor(obs[i : i + CHUNK])).flatten().detach().numpy()
            for i in range(0, len(kept), CHUNK)
        ]
    ).astype(float)
    chances = np.empty(len(kept))
    with one_blas_thread():
        for i, (kn, action) in enumerate(zip(kept, first, strict=True)):
            orders = kn.sample_order_array(rng, args.orders)
            actions, games = candidate_games(kn, orders, [action])
            chances[i] = play_network(net, actions, games, kn.rules).mean()

    from scipy.stats import pearsonr, spearmanr

    def correlation(result: Any) -> float | None:  # None where a series is constant
        r = float(result.statistic)
        return None if math.isnan(r) else r

    clipped = np.clip(values, 0.0, 1.0)
    sampling = float(np.sqrt(np.mean(chances * (1 - chances) / args.orders)))
    table = []
    for low, high in itertools.pairwise(BINS):
        inside = (values >= low) & (values < high)
        if inside.any():
            table.append(
                {
                    "value_from": None if math.isinf(low) else low,
                    "value_to": None if math.isinf(high) else high,
                    "positions": int(inside.sum()),
                    "mean_value": float(values[inside].mean()),
                    "mean_rollout_chance": float(chances[inside].mean()),
                }
            )
    record = {
        "what": "the network's value head against its rollout win chance, issue 19 point 2",
        "command": " ".join(
            [
                *("lab/experiments/value_calibration.py", "--model", args.model),
                *("--seed", str(args.seed), "--episodes", str(args.episodes)),
                *("--from-turn", str(args.from_turn), "--orders", str(args.orders)),
                *("--json", str(args.json)),
            ]
        ),
        **stamp,
        "deals": "validation",
        "seed": args.seed,
        "episodes": args.episodes,
        "games_won": won_games,
        "model": args.model,
        "from_turn": args.from_turn,
        "orders": args.orders,
        "positions": len(kept),
        "mean_value": float(values.mean()),
        "mean_rollout_chance": float(chances.mean()),
        "pearson": correlation(pearsonr(values, chances)) if len(kept) > 1 else None,
        "spearman": correlation(spearmanr(values, chances)),
        "rms_gap": float(np.sqrt(np.mean((values - chances) ** 2))),
        "mean_clipped_value": float(clipped.mean()),
        "pearson_clipped": correlation(pearsonr(clipped, chances)) if len(kept) > 1 else None,
        "rms_gap_clipped": float(np.sqrt(np.mean((clipped - chances) ** 2))),
        "rms_sampling_error": sampling,
        "values_below_0": int((values < 0).sum()),
        "values_above_1": int((values > 1).sum()),
        "mean_decisions_left": float(np.mean(moves_left)),
        "cpu_seconds": round(time.process_time() - start, 1),
        "bins": table,
    }
    atomic_write_json(args.json, record)
    for key in ("positions", "mean_value", "mean_rollout_chance", "pearson", "spearman"):
        print(f"{key}: {record[key]}")
    print(f"rms gap {record['rms_gap']:.4f} against sampling error {sampling:.4f}")
    for row in table:
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
