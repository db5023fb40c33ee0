"""Regenerate the golden playthroughs in ``tests/golden/`` (OpenSpiel style).

Each golden file records one whole game of ``coldiron/ColdIron-v0``: the env
kwargs, the seed (if the deal came from one), the 54 card codes of the deck,
and for the reset and every step the action, the observation (as a list, or a
dict of lists), the reward, ``terminated``, ``truncated`` and the full
``info`` (``action_mask`` as a list). ``tests/test_golden.py`` replays every
file through the env and fails on the first step that differs.

The set (a few dozen games) mixes a seeded random-legal policy, a seeded
"pressure" policy (mostly Threaten and the Iron, bonuses taken), a "cautious"
one and a Threaten-only one (to midnight, and to wins on decks with a phrase
near the top), scripted decks
for rare endings (deck exhausted, an illegal action), both rule variants, the
dict observation and ``recall``; every outcome code occurs at least once
(checked here and by the test).

Usage::

    .venv/bin/python tests/regen_golden.py           # rewrite tests/golden/*.json
    .venv/bin/python tests/regen_golden.py --check   # exit 1 if anything would change

Run it after an *intended* change of the rules, the observation or the info
contract, then review ``git diff tests/golden`` before committing: every changed
step should be explained by the change. Files are written atomically (temp
file + ``os.replace``); stale ``*.json`` files not in the set are removed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from agents.atomic import atomic_write_text
from agents.evaluation.lockstep import Move, play_lockstep
from agents.players.base import Agent
from coldiron_env.actions import BONUS, IRON, NUM_ACTIONS, REST, STOP, THREATEN, rack_rank_action
from coldiron_env.cards import (
    CARD_CODES,
    FIRST_COURT,
    FIRST_JOKER,
    NUM_SUITS,
    RUN_LENGTH,
    deck_codes,
    numbered_id,
)
from coldiron_env.game import OUTCOMES
from coldiron_env.options import VARIANTS

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "tests" / "golden"
FORMAT = 1
RACK_TEN = rack_rank_action(10)

Policy = Callable[[list[int], random.Random], int]


def jsonable(value: Any) -> Any:
    """Observation / info values as plain JSON types (arrays become lists)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


# ---------------------------------------------------------------------- policies
def random_legal(legal: list[int], rng: random.Random) -> int:
    return rng.choice(legal)


def pressure(legal: list[int], rng: random.Random) -> int:
    """Mostly Threaten and the Iron; bonuses taken; Iron again half the time."""
    if BONUS in legal:
        return BONUS if rng.random() < 0.85 else STOP
    if legal == [IRON, STOP]:
        return IRON if rng.random() < 0.5 else STOP
    roll = rng.random()
    if roll < 0.6:
        return THREATEN
    if roll < 0.85:
        return IRON
    return rng.choice(legal)


def threaten_only(legal: list[int], rng: random.Random) -> int:
    if BONUS in legal:
        return BONUS
    return THREATEN if THREATEN in legal else legal[0]


def cautious(legal: list[int], rng: random.Random) -> int:
    """Threaten, Rest, one Iron then Stop; declines half the bonuses: lasts to midnight."""
    if BONUS in legal:
        return BONUS if rng.random() < 0.5 else STOP
    if legal == [IRON, STOP]:
        return STOP
    return rng.choice([THREATEN, THREATEN, REST, IRON])


POLICIES: dict[str, Policy] = {
    "cautious": cautious,
    "random": random_legal,
    "pressure": pressure,
    "threaten": threaten_only,
}


# ------------------------------------------------------------------------ decks
def _deck(*top: str) -> list[str]:
    """``top`` on top, then the rest of the pack in order (no Joker if ``top`` holds one)."""
    return [*top, *(c for c in CARD_CODES if c not in top)]


def phrase_on_top(seed: int) -> list[str]:
    """A phrase (random runs) shuffled among four other cards on top, the rest shuffled."""
    rng = random.Random(seed)
    phrase: list[str] = []
    for suit in range(NUM_SUITS):
        lo = rng.randint(1, 8)
        phrase += [CARD_CODES[numbered_id(suit, lo + i)] for i in range(RUN_LENGTH)]
    rest = [c for c in CARD_CODES if c not in phrase]
    rng.shuffle(rest)
    head = phrase + rest[:4]
    rng.shuffle(head)
    return head + rest[4:]


def exhaust_deck() -> tuple[list[str], list[int]]:
    """Draw all court cards and Jokers with Threaten (bonuses taken), Threaten the
    four 10s, then rack 10: the deck runs out before a match."""
    courts = CARD_CODES[FIRST_COURT:FIRST_JOKER]
    tens = ["10H", "10D", "10C", "10S"]
    head = ["JK", *courts[:3], "JK", *courts[3:6], *courts[6:], *tens]
    actions = [THREATEN, BONUS, THREATEN, BONUS, *[THREATEN] * 6, *[THREATEN] * 4, RACK_TEN]
    return _deck(*head), actions


# ------------------------------------------------------------------------ games
def game_specs() -> list[dict[str, Any]]:
    """The golden set: name, env kwargs, seed or deck, policy or actions."""
    std: dict[str, Any] = {}
    always, more = VARIANTS["always"].changes(), VARIANTS["more"].changes()
    variants = (("always", always), ("more", more))
    seeded: list[tuple[str, dict[str, Any], int, str]] = [
        *((f"{p}_std_s{s}", std, s, p) for p in ("random", "pressure") for s in range(6)),
        *(
            (f"{p}_{v}_s{s}", kw, base + s, p)
            for v, kw in variants
            for s in range(3)
            for p, base in (("random", 100), ("pressure", 200))
        ),
        *((f"random_dict_s{s}", {"observation_mode": "dict"}, 300 + s, "random") for s in range(2)),
        *((f"pressure_recall_s{s}", {"recall": True}, 400 + s, "pressure") for s in range(2)),
        (
            "pressure_dict_recall_more",
            {"observation_mode": "dict", "recall": True, **more},
            500,
            "pressure",
        ),
        ("threaten_800", std, 800, "threaten"),
        ("threaten_801", always, 801, "threaten"),
        ("cautious_std", std, 802, "cautious"),
    ]
    joker_top = ("JK", "5H", "JK", "KS", "6H", "7D", "8D", "9D", "JH", "AC", "2C")
    exhausted, exhausting = exhaust_deck()
    return [
        *({"name": n, "kwargs": kw, "seed": seed, "policy": p} for n, kw, seed, p in seeded),
        *(
            {
                "name": f"won_phrase_on_top_{i}",
                "kwargs": kw,
                "deck": phrase_on_top(600 + i),
                "policy": "threaten",
            }
            for i, kw in enumerate((std, always, more, std))
        ),
        *(
            {
                "name": f"joker_in_bonus_{v}",
                "kwargs": kw,
                "deck": _deck(*joker_top),
                "actions": [IRON, BONUS],
                "policy": "cautious",
            }
            for v, kw in (("std", std), ("more", more))
        ),
        {
            "name": "joker_declined",
            "kwargs": std,
            "deck": _deck("JK", "5H", "KD", "JK", "6H"),
            "actions": [THREATEN, STOP, THREATEN, IRON, IRON, STOP, STOP],
            "policy": "cautious",
        },
        {"name": "deck_exhausted_rack", "kwargs": std, "deck": exhausted, "actions": exhausting},
        {
            "name": "illegal_after_play",
            "kwargs": {"loss_reward": -1.0},
            "seed": 700,
            "policy": "pressure",
            "illegal_at": 5,
        },
        {"name": "illegal_first_step", "kwargs": std, "seed": 701, "actions": [STOP]},
    ]


class GoldenPlayer(Agent):
    """A golden game's moves: its script first, then an illegal action at step
    ``illegal_at`` if asked, else its policy (seeded by the game's name)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.script = list(spec.get("actions", []))
        self.policy = POLICIES.get(spec.get("policy", ""), random_legal)
        self.rng = random.Random(f"{spec['name']}")
        self.steps = 0

    def act(self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None = None) -> int:
        legal = [int(a) for a in np.flatnonzero(action_mask)]
        self.steps += 1
        if self.script:
            return int(self.script.pop(0))
        if self.spec.get("illegal_at") == self.steps - 1:
            return next(a for a in range(NUM_ACTIONS) if a not in legal)
        if "policy" in self.spec:
            return self.policy(legal, self.rng)
        raise RuntimeError(f"golden game {self.spec['name']}: script ended before the game")


def play(spec: dict[str, Any]) -> dict[str, Any]:
    """Play one golden game and return its record."""
    reset = {"options": {"deck": spec["deck"]}} if "deck" in spec else {"seed": spec["seed"]}
    record: dict[str, Any] = {}
    steps: list[dict[str, Any]] = []

    def start(_game: int, obs: Any, info: dict[str, Any]) -> None:
        record.update(obs=jsonable(obs), info=jsonable(info))

    def moved(move: Move) -> None:
        steps.append(
            {
                "action": move.action,
                "obs": jsonable(move.next_obs),
                "reward": move.reward,
                "terminated": move.terminated,
                "truncated": move.truncated,
                "info": jsonable(move.next_info),
            }
        )

    player = GoldenPlayer(spec)
    (game,) = play_lockstep(
        lambda _: player, spec["kwargs"], [reset], batch=1, on_start=start, on_move=moved
    )
    return {
        "format": FORMAT,
        "name": spec["name"],
        "env_kwargs": spec["kwargs"],
        "seed": spec.get("seed"),
        "deck": deck_codes(game.deck),
        "reset": record,
        "steps": steps,
        "outcome": game.outcome,
    }


def render(record: dict[str, Any]) -> str:
    """JSON with one line per key and one line per step (readable ``git diff``)."""
    lines = []
    for key in sorted(record):
        value = record[key]
        if key == "steps":
            body = ",\n".join("  " + json.dumps(step, sort_keys=True) for step in value)
            lines.append(f'"{key}": [\n{body}\n ]')
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(value, sort_keys=True)}")
    return "{\n " + ",\n ".join(lines) + "\n}\n"


def build() -> dict[str, str]:
    """File name -> file text of the whole golden set; checks that it covers every outcome."""
    files: dict[str, str] = {}
    outcomes: set[str] = set()
    for spec in game_specs():
        record = play(spec)
        outcomes.add(record["outcome"])
        files[f"{spec['name']}.json"] = render(record)
    missing = [o for o in OUTCOMES if o not in outcomes]
    if missing:
        raise SystemExit(f"golden set does not cover outcome(s) {missing}; change seeds or decks")
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if regeneration would change any file"
    )
    parser.add_argument("--dir", type=Path, default=GOLDEN_DIR, help="golden directory")
    args = parser.parse_args(argv)
    files = build()
    existing = {p.name for p in args.dir.glob("*.json")} if args.dir.is_dir() else set()
    changed = sorted(
        name
        for name, text in files.items()
        if not (args.dir / name).is_file() or (args.dir / name).read_text("utf-8") != text
    )
    stale = sorted(existing - set(files))
    if args.check:
        if changed or stale:
            print(f"golden files would change: {changed}; stale: {stale}", file=sys.stderr)
            return 1
        print(f"{len(files)} golden files up to date")
        return 0
    args.dir.mkdir(parents=True, exist_ok=True)
    for name in changed:
        atomic_write_text(args.dir / name, files[name])
    for name in stale:
        (args.dir / name).unlink()
    print(f"{len(files)} golden games; {len(changed)} written, {len(stale)} removed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
