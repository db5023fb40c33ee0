"""Issue 52 point 3 (no teacher): every attempt's curve, what a player does turn by turn, and
a search over a network's own action scores.

    .venv/bin/python -m lab.experiments.no_teacher curves \\
        --run tabula-rasa-s0=runs/tabula-rasa-s0 --run no-teacher-rllib-ppo-10m=runs/rllib-10m \\
        --run tabula-rasa-keep4=runs/tr-keep4@151 \\
        --json lab/records/no_teacher_curves.json
    .venv/bin/python -m lab.experiments.no_teacher plot \\
        --json lab/records/no_teacher_curves.json --png lab/docs/no_teacher.png
    .venv/bin/python -m lab.experiments.no_teacher profile --agent heuristic \\
        --agent runs/tabula-rasa-s0 --deals 2000 --json lab/records/no_teacher_profile.json
    .venv/bin/python -m lab.experiments.no_teacher bias-search runs/tabula-rasa-s0 \\
        --json lab/records/no_teacher_bias_search.json
    .venv/bin/python -m lab.experiments.no_teacher bias-grid runs/tabula-rasa-s0 \\
        --json lab/records/no_teacher_bias_grid.json

``curves`` reads each run's validation history as the run wrote it: an SB3 run directory's
``evaluations.csv`` (win rate against env steps) and ``expert_iteration.json`` (against
rounds), or an RLlib record (``scripts/rllib_train.py --record``: its ``curve``);
``ID=PATH@N`` numbers a ``scripts/distill.py`` leg's rounds after the N rounds of the run it
continues. Every run
named validates on the same 2,000 deals (validation seed 0, the configs' own), where
``heuristic``'s figure, played by this command, is the line to beat.

``profile`` plays agents on validation deals and counts, turn by turn, what each does at the
start of the turn (Threaten, the Iron, a rank rack, a suit rack, Rest) and its mean Hurt then.

``bias-search`` is the cross-entropy method over a table of numbers added to the network's
action scores, one per night quarter (turns 1-6, 7-12, 13-18, 19-24) and kind of action
(:data:`KINDS`): a search over the network's own policy, no hand-written player anywhere. Its
fitness is the win rate on fresh training-stream deals each generation; the mean of each
generation is scored on the validation deals. ``bias-grid`` plays the tables of
:data:`GRID` on the validation deals: the network held to Threaten until turn 18 (its Hurt
kept for the last quarter), then pushed to rack suits from turn 19, by more and more.
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np

ROOT: Final = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agents.atomic import atomic_write_json  # noqa: E402
from agents.evaluation.arena import validation_decks  # noqa: E402
from agents.gitinfo import code_stamp  # noqa: E402
from coldiron_env.actions import (  # noqa: E402
    BONUS,
    IRON,
    LEGAL_MASKS,
    NUM_ACTIONS,
    RACK_RANK_FIRST,
    RACK_SUIT_FIRST,
    REST,
    STOP,
    THREATEN,
)
from coldiron_env.dealer import DealStream, stream_seed  # noqa: E402

if TYPE_CHECKING:
    from coldiron_env.game import Games

VALIDATION_SEED: Final = 0  # the configs' evaluation.seed: every no-teacher run validated on it
VALIDATION_DEALS: Final = 2000
KINDS: Final = ("threaten", "iron", "rack_rank", "rack_suit", "rest", "stop", "bonus")
TURN_KINDS: Final = KINDS[:5]  # what a turn can start with
QUARTERS: Final = 4  # of the 24-turn night, for bias-search's table
TURNS: Final = 24
FORCE: Final = 1e6  # a bias no action score outweighs
GRID: Final[tuple[tuple[str, dict[tuple[int, str], float]], ...]] = (
    ("the network alone", {}),
    ("no Iron on turns 1-18", {(q, "iron"): -FORCE for q in range(3)}),
    ("Threaten on turns 1-18", {(q, "threaten"): FORCE for q in range(3)}),
    *(
        (
            f"Threaten on turns 1-18, suit racks +{push:g} from turn 19",
            {**{(q, "threaten"): FORCE for q in range(3)}, (3, "rack_suit"): push},
        )
        for push in (1.0, 2.0, 3.0, 5.0, 8.0)
    ),
)
"""``bias-grid``'s tables: (what it is, {(quarter, kind): bias}), every other entry 0."""
BIAS_SEED_OFFSET: Final = 5000  # bias-search's training-stream seeds: offset + 1000 * seed + gen


def kind_of_action() -> np.ndarray:
    """Each action index's kind (an index into :data:`KINDS`)."""
    kinds = np.empty(NUM_ACTIONS, dtype=np.int64)
    kinds[THREATEN], kinds[IRON], kinds[REST], kinds[STOP], kinds[BONUS] = 0, 1, 4, 5, 6
    kinds[RACK_RANK_FIRST:RACK_SUIT_FIRST] = 2
    kinds[RACK_SUIT_FIRST:REST] = 3
    return kinds


# ------------------------------------------------------------------------------ curves
def sb3_curves(folder: Path, after: int = 0) -> dict[str, Any]:
    """An SB3 run directory's validation history: ``rl`` (env steps, win rate) from
    ``evaluations.csv`` (none in a ``scripts/distill.py`` folder), ``rounds`` (round, win
    rate) from ``expert_iteration.json``, numbered from ``after`` (the rounds of the run
    it continues)."""
    csv_file = folder / "evaluations.csv"
    rows = list(csv.DictReader(csv_file.open())) if csv_file.is_file() else []
    rl = [[int(r["timesteps"]), float(r["win_rate"])] for r in rows]
    rounds: list[list[float]] = []
    expert = folder / "expert_iteration.json"
    if expert.is_file():
        recorded = json.loads(expert.read_text())
        rounds = [[after + r["round"] + 1, r["validation_win_rate"]] for r in recorded["rounds"]]
    return {"rl": rl, "rounds": rounds}


def rllib_curves(record: Path) -> dict[str, Any]:
    """An RLlib record's validation history (``curve``: env steps, win rate)."""
    curve = json.loads(record.read_text())["curve"]
    return {"rl": [[p["env_steps"], p["win_rate"]] for p in curve], "rounds": []}


def run_curves(path: Path, after: int = 0) -> dict[str, Any]:
    """The validation curves of a run: an SB3 run directory (or a ``scripts/distill.py``
    folder, its rounds numbered from ``after``), or an RLlib record (a ``.json`` file, or a
    folder holding ``record.json``)."""
    if path.is_dir() and any(
        (path / f).is_file() for f in ("evaluations.csv", "expert_iteration.json")
    ):
        return sb3_curves(path, after)
    record = path / "record.json" if path.is_dir() else path
    if record.is_file():
        return rllib_curves(record)
    raise SystemExit(f"{path}: neither an SB3 run directory nor an RLlib record")


def collect(runs: Sequence[str], heuristic_rate: float) -> dict[str, Any]:
    """The ``curves`` record: each ``ID=PATH``'s curves, and ``heuristic`` on the same deals."""
    out: dict[str, Any] = {
        "deals": {"stream": "validation", "seed": VALIDATION_SEED, "episodes": VALIDATION_DEALS},
        "heuristic": heuristic_rate,
        "runs": {},
    }
    for spec in runs:
        name, sep, path = spec.partition("=")
        if not sep:
            raise SystemExit(f"--run {spec!r}: give ID=PATH or ID=PATH@ROUNDS")
        path, at, rounds = path.partition("@")  # a distill leg after the ROUNDS of another run
        after = int(rounds) if at else 0
        entry = {"path": path, **run_curves(Path(path), after)}
        out["runs"][name] = entry | ({"after_rounds": after} if at else {})
    return out


def plot(record: dict[str, Any], png: Path) -> None:
    """Two panels: RL's validation win rate against env steps, and expert iteration's
    against rounds; ``heuristic`` dotted on both."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), width_ratios=(3, 2))
    runs = record["runs"]
    for rank, (name, run) in enumerate(runs.items()):
        on_top = {"zorder": len(runs) - rank}  # over a later run that shares its start
        if run["rl"]:
            steps, rate = np.array(run["rl"], dtype=float).T
            left.plot(steps / 1e6, 100 * rate, marker=".", label=name, **on_top)
        if run["rounds"]:
            rounds, rate = np.array(run["rounds"], dtype=float).T
            right.plot(rounds, 100 * rate, marker=".", label=name, **on_top)
    for axis, xlabel in ((left, "env steps (millions)"), (right, "expert-iteration round")):
        axis.axhline(100 * record["heuristic"], color="k", linestyle=":", label="heuristic")
        axis.set_xlabel(xlabel)
        axis.set_ylabel("validation deals won (%)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    deals = record["deals"]
    fig.suptitle(
        f"No teacher: every attempt on {deals['episodes']:,} deals of validation seed "
        f"{deals['seed']}"
    )
    fig.tight_layout()
    fig.savefig(png, dpi=110)


# ------------------------------------------------------------------------------ profile
def validation_seeds(deals: int, seed: int = VALIDATION_SEED) -> list[int]:
    return [stream_seed(DealStream.VALIDATION, seed, k) for k in range(deals)]


def profile(spec: str, deals: int) -> dict[str, Any]:
    """What ``spec`` does at the start of each turn on validation deals, and its outcomes."""
    import gymnasium as gym

    from agents.registry import make_agent

    agent = make_agent(spec)
    kwargs = dict(getattr(agent, "env_kwargs", None) or {"counting": True})
    env = gym.make("coldiron_env:coldiron/ColdIron-v0", **kwargs)
    kinds = kind_of_action()
    counts = np.zeros((TURNS, len(TURN_KINDS)), dtype=np.int64)
    hurt = np.zeros(TURNS)
    outcomes: dict[str, int] = {}
    for k, seed in enumerate(validation_seeds(deals)):
        obs, info = env.reset(seed=seed)
        agent.reset(seed=k)
        over = False
        while not over:
            action = agent.act(obs, info["action_mask"], info)
            if info["phase"] == "turn":
                counts[info["turn"] - 1, kinds[action]] += 1
                hurt[info["turn"] - 1] += info["hurt"]
            obs, _, terminated, truncated, info = env.step(action)
            over = terminated or truncated
        outcomes[info["outcome"]] = outcomes.get(info["outcome"], 0) + 1
    games = counts.sum(axis=1)
    return {
        "agent": spec,
        "deals": deals,
        "outcomes": outcomes,
        "win_rate": outcomes.get("won", 0) / deals,
        "turns": [
            {
                "turn": t + 1,
                "games": int(games[t]),
                "mean_hurt": round(hurt[t] / max(games[t], 1), 3),
                **{
                    kind: round(counts[t, i] / max(games[t], 1), 3)
                    for i, kind in enumerate(TURN_KINDS)
                },
            }
            for t in range(TURNS)
        ],
    }


# ------------------------------------------------------------------------------ bias search
def play_biased(net: Any, bias: np.ndarray, decks: np.ndarray) -> Games:
    """The games the network plays on ``decks`` (one row a deck) when
    ``bias[quarter(turn), kind(action)]`` is added to its action scores (the best legal one
    played, as evaluation plays a network), as they ended."""
    from coldiron_env.batched import PLAYING, SKIP, pack_rules, step_games
    from coldiron_env.game import Games
    from coldiron_env.options import RuleOptions

    rules = RuleOptions()
    n = decks.shape[0]
    games = Games.zeros(n)
    games.deal(slice(None), decks, rules)
    packed = pack_rules(rules)
    table = bias.reshape(QUARTERS, len(KINDS))[:, kind_of_action()]
    live, outcome = np.ones(n, dtype=bool), np.full(n, PLAYING, dtype=np.int64)
    actions = np.full(n, SKIP, dtype=np.int64)
    while (index := np.flatnonzero(live)).size:
        scores = net.logits(net.observe(games, rules, index))
        scores += table[np.minimum((games.turn[index] - 1) * QUARTERS // TURNS, QUARTERS - 1)]
        scores[~LEGAL_MASKS[games.phase[index]]] = -np.inf
        actions[:] = SKIP
        actions[index] = scores.argmax(axis=1)
        step_games(actions, games, packed)
        ended = live & (games.outcome != PLAYING)
        outcome[ended] = games.outcome[ended]  # a later step's SKIP does not keep the code
        live &= ~ended
    games.outcome[:] = outcome
    return games


def win_rate(games: Games) -> float:
    from coldiron_env.batched import CODE_WON

    return float((games.outcome == CODE_WON).mean())


def bias_search(
    model: str, generations: int, population: int, elite: int, deals: int, sigma: float, seed: int
) -> dict[str, Any]:
    """The cross-entropy method over the bias table (module docstring), logged generation
    by generation (printed as it goes)."""
    from agents.learning.sb3_agent import SB3Agent, policy_net
    from agents.registry import make_agent

    agent = make_agent(model)
    if not isinstance(agent, SB3Agent):
        raise SystemExit(f"{model}: not a trained network")
    net = policy_net(agent)
    rng = np.random.default_rng(seed)
    validation = validation_decks(VALIDATION_SEED, VALIDATION_DEALS)
    dim = QUARTERS * len(KINDS)
    mean, spread = np.zeros(dim), np.full(dim, sigma)
    record: dict[str, Any] = {
        "model": model,
        "settings": {
            "generations": generations,
            "population": population,
            "elite": elite,
            "deals": deals,
            "sigma": sigma,
            "seed": seed,
        },
        "kinds": list(KINDS),
        "network_validation": win_rate(play_biased(net, mean, validation)),
        "generations": [],
    }
    print(f"{model}: {record['network_validation']:.2%} of the validation deals", flush=True)
    for gen in range(generations):
        start = time.perf_counter()
        train_seed = BIAS_SEED_OFFSET + 1000 * seed + gen  # fresh deals each generation
        train = validation_decks(train_seed, deals, DealStream.TRAINING)
        candidates = mean + spread * rng.standard_normal((population, dim))
        candidates[0] = mean  # the last mean, scored on the same deals as its children
        fitness = np.array([win_rate(play_biased(net, c, train)) for c in candidates])
        best = np.argsort(-fitness)[:elite]
        mean, spread = candidates[best].mean(axis=0), np.maximum(candidates[best].std(axis=0), 0.1)
        entry = {
            "generation": gen + 1,
            "training_seed": train_seed,
            "last_mean_fitness": float(fitness[0]),
            "elite_fitness": float(fitness[best].mean()),
            "mean_validation": win_rate(play_biased(net, mean, validation)),
            "mean": mean.reshape(QUARTERS, len(KINDS)).round(3).tolist(),
            "seconds": round(time.perf_counter() - start, 1),
        }
        record["generations"].append(entry)
        print(
            f"generation {gen + 1}: elite {entry['elite_fitness']:.2%} on training deals, the "
            f"mean {entry['mean_validation']:.2%} on validation ({entry['seconds']} s)",
            flush=True,
        )
    return record


def bias_grid(model: str) -> dict[str, Any]:
    """Each table of :data:`GRID` played on the validation deals: win rate, mean Hurt at the
    end, and the outcomes."""
    from coldiron_env.batched import OUTCOME_NAMES

    net = network(model)
    validation = validation_decks(VALIDATION_SEED, VALIDATION_DEALS)
    rows = []
    for what, cells in GRID:
        table = np.zeros((QUARTERS, len(KINDS)))
        for (quarter, kind), value in cells.items():
            table[quarter, KINDS.index(kind)] = value
        games = play_biased(net, table.ravel(), validation)
        codes, counts = np.unique(games.outcome, return_counts=True)
        rows.append({
            "table": what,
            "win_rate": win_rate(games),
            "mean_hurt_at_end": round(float(games.hurt.mean()), 3),
            "outcomes": {OUTCOME_NAMES[c]: int(n) for c, n in zip(codes, counts, strict=True)},
        })  # fmt: skip
        print(f"{rows[-1]['win_rate']:.2%}  {what}", flush=True)
    return {"model": model, "deals": VALIDATION_DEALS, "tables": rows}


def network(model: str) -> Any:
    """A trained masked actor as a NumPy :class:`~agents.players.policy_net.PolicyNet`."""
    from agents.learning.sb3_agent import SB3Agent, policy_net
    from agents.registry import make_agent

    agent = make_agent(model)
    if not isinstance(agent, SB3Agent):
        raise SystemExit(f"{model}: not a trained network")
    return policy_net(agent)


# ------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    curves = sub.add_parser("curves", help="collect the no-teacher runs' validation curves")
    curves.add_argument("--run", action="append", required=True, metavar="ID=PATH")
    curves.add_argument("--json", type=Path, required=True)
    drawn = sub.add_parser("plot", help="draw a curves record")
    drawn.add_argument("--json", type=Path, required=True)
    drawn.add_argument("--png", type=Path, required=True)
    prof = sub.add_parser("profile", help="what players do turn by turn")
    prof.add_argument("--agent", action="append", required=True)
    prof.add_argument("--deals", type=int, default=VALIDATION_DEALS)
    prof.add_argument("--json", type=Path, required=True)
    search = sub.add_parser("bias-search", help="CEM over a network's action-score biases")
    search.add_argument("model")
    search.add_argument("--generations", type=int, default=30)
    search.add_argument("--population", type=int, default=24)
    search.add_argument("--elite", type=int, default=6)
    search.add_argument("--deals", type=int, default=2000)
    search.add_argument("--sigma", type=float, default=1.5)
    search.add_argument("--seed", type=int, default=0)
    search.add_argument("--json", type=Path, required=True)
    grid = sub.add_parser("bias-grid", help="the bias tables of GRID on validation deals")
    grid.add_argument("model")
    grid.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    stamp = code_stamp(ignore=getattr(args, "json", None))  # the code as the command starts
    command = shlex.join(["python", "-m", "lab.experiments.no_teacher", *(argv or sys.argv[1:])])
    if args.command == "plot":
        plot(json.loads(args.json.read_text()), args.png)
        return 0
    if args.command == "curves":
        heuristic = profile("heuristic", VALIDATION_DEALS)["win_rate"]
        record = collect(args.run, heuristic)
    elif args.command == "bias-grid":
        record = bias_grid(args.model)
    elif args.command == "profile":
        record = {"players": [profile(spec, args.deals) for spec in args.agent]}
    else:
        record = bias_search(
            args.model, args.generations, args.population, args.elite, args.deals,
            args.sigma, args.seed,
        )  # fmt: skip
    atomic_write_json(args.json, {"command": command, **stamp, **record})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
