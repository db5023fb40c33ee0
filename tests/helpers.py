"""Deck-building and play helpers for the tests.

The pack is spelled out here from the spec (not imported from the engine), so
that a mistake in ``coldiron_env.cards`` cannot hide itself in the tests.

``stack("AH", "2H", ...)`` is "these cards first, in this order, then the rest
of the pack in a fixed order". The fixed order of the rest can be chosen:

* ``"pack"`` (default): numbered cards suit by suit (Hearts, Diamonds, Clubs,
  Spades), Ace..10 within a suit, then the court cards, then the Jokers;
* ``"safe"``: the 28 numbered cards of ranks A, 2, 4, 5, 7, 8, 10 first
  (:data:`SAFE`: no three of them are consecutive in any suit, so drawing and
  keeping them never makes a run), then the 3s, 6s and 9s, then the court
  cards, then the Jokers.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

SUITS = ("H", "D", "C", "S")
RANKS = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10")
COURTS = ("J", "Q", "K")
JOKER = "JK"

NUMBERED = tuple(r + s for s in SUITS for r in RANKS)  # 40
COURT_CARDS = tuple(c + s for s in SUITS for c in COURTS)  # 12
PACK = (*NUMBERED, *COURT_CARDS, JOKER, JOKER)  # 54, pack order

REPORT_SEED = 20_261_130
"""The README's held-out evaluation seed (the lab's ``lab.looks.REPORT_SEED``, checked equal by
the lab's tests): the tests play it to show nothing is dealt from it in training."""

# Action indices, from the spec's table (independent of coldiron_env.actions).
THREATEN = 0
IRON = 1
REST = 16
STOP = 17
BONUS = 18
N_ACTIONS = 19
TURN_ACTIONS = tuple(range(17))
IRON_ACTIONS = (IRON, STOP)
BONUS_ACTIONS = (STOP, BONUS)


def rack_rank(rank: str) -> int:
    """Action racking rank ``"A"``, ``"2"`` .. ``"10"``."""
    return 2 + RANKS.index(rank)


def rack_suit(suit: str) -> int:
    """Action racking suit ``"H"``, ``"D"``, ``"C"`` or ``"S"``."""
    return 12 + SUITS.index(suit)


def rank_value(code: str) -> int:
    return RANKS.index(code[:-1]) + 1


SAFE_RANKS = ("A", "2", "4", "5", "7", "8", "10")  # no three consecutive
SAFE = tuple(r + s for s in SUITS for r in SAFE_RANKS)  # 28 cards that never make a run
BREAKERS = tuple(r + s for s in SUITS for r in ("3", "6", "9"))

REST_ORDERS: dict[str, tuple[str, ...]] = {
    "pack": PACK,
    "safe": (*SAFE, *BREAKERS, *COURT_CARDS, JOKER, JOKER),
}


def stack(*first: str, rest: str | Sequence[str] = "pack") -> list[str]:
    """A full 54-card deck: ``first`` in that order, then every other card of the
    pack in the order ``rest`` (a name of :data:`REST_ORDERS` or an explicit
    preference order of codes; cards it omits follow in pack order)."""
    order = REST_ORDERS[rest] if isinstance(rest, str) else (*rest, *PACK)
    remaining = list(PACK)
    for code in first:
        if code not in remaining:
            raise AssertionError(f"test deck uses {code!r} more often than the pack holds it")
        remaining.remove(code)
    tail: list[str] = []
    for code in order:
        if code in remaining:
            remaining.remove(code)
            tail.append(code)
    deck = [*first, *tail]
    assert len(deck) == 54 and sorted(deck) == sorted(PACK), deck
    return deck


def phrase_cards(starts: dict[str, int] | None = None) -> list[str]:
    """The twelve cards of a phrase: for each suit three ranks from ``starts[suit]``
    (default Ace: A-2-3 in every suit)."""
    starts = starts or {}
    out: list[str] = []
    for s in SUITS:
        lo = starts.get(s, 1)
        out += [RANKS[lo - 1 + i] + s for i in range(3)]
    return out


def legal(info: dict[str, Any]) -> list[int]:
    return [int(a) for a in np.flatnonzero(info["action_mask"])]


def play(env: Any, actions: Iterable[int]) -> list[tuple[Any, float, bool, bool, dict[str, Any]]]:
    """Step ``env`` through ``actions``; every action must be legal and the game
    must not end before the last one. Returns the step results."""
    out: list[tuple[Any, float, bool, bool, dict[str, Any]]] = []
    actions = list(actions)
    for i, a in enumerate(actions):
        if out:
            info = out[-1][4]
            assert not out[-1][2], f"game ended ({info.get('outcome')}) before action #{i} {a}"
            assert a in legal(info), f"action #{i} {a} not legal in phase {info['phase']}"
        obs, reward, terminated, truncated, info = env.step(a)
        out.append((obs, float(reward), bool(terminated), bool(truncated), info))
    return out


def game_cards(game: Any) -> list[int]:
    """Every card id the engine accounts for: hand bits + discard bits + the undrawn deck."""
    hand = [i for i in range(64) if game.hand >> i & 1]
    discarded = [i for i in range(64) if game.discarded >> i & 1]
    return sorted(hand + discarded + list(game.deck[game.pos :]))


def hand_sort_key(code: str) -> tuple[int, int]:
    return SUITS.index(code[-1]), rank_value(code)


def load_file(path: Path, name: str) -> ModuleType:
    """The module of a script or example file (scripts/ and docs/examples/ are not packages),
    registered under ``name`` (dataclasses look their module up by name)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def streams_of(records: Iterable[tuple[int | None, tuple[int, ...]]]) -> list[Any]:
    """The deal stream of every deck in a deal audit (:func:`read_audit`), in
    order; fails on a deck from an evaluation seed, from a generator without an integer seed,
    or from one seeded outside every stream (the OS's 128-bit entropy: an unseeded one)."""
    from coldiron_env.dealer import EVALUATION_SEED_LIMIT, STREAM_SPAN, DealStream

    streams = {int(s) for s in DealStream}
    found = []
    for seed, _ in records:
        assert seed is not None, "a deck was shuffled by a generator without an integer seed"
        assert seed >= EVALUATION_SEED_LIMIT, f"a deck was dealt from evaluation seed {seed}"
        assert seed // STREAM_SPAN in streams, (
            f"a deck was dealt from seed {seed}, outside every stream (an unseeded generator?)"
        )
        found.append(DealStream(seed // STREAM_SPAN))
    return found


def check_curriculum_refusals(env: Any) -> None:
    """``set_env_kwargs`` refuses, by name, a non-curriculum change, an unknown option and
    a bad ``turns`` (the single and the vector env alike)."""
    import pytest

    with pytest.raises(ValueError, match=r"only \['turns', 'suits_required'\]"):
        env.set_env_kwargs({"recall": True})
    with pytest.raises(ValueError, match="unknown env option"):
        env.set_env_kwargs({"colour": "red"})
    with pytest.raises(ValueError, match="turns"):
        env.set_env_kwargs({"turns": 0})


def network_weights(agent: Any) -> np.ndarray:
    """Every weight of an SB3 agent's policy (``agents.learning.sb3_agent.SB3Agent``), flat."""
    return np.concatenate([p.detach().numpy().ravel() for p in agent.model.policy.parameters()])


def rule_variant_sets() -> list[dict[str, bool]]:
    """The rule variants as option dicts: the game itself, each variant alone, all of them
    together. Derived from ``coldiron_env.options.VARIANT_KEYS``, so that a new variant is
    played by every test that takes its variants from here (a contributor's variant, missing
    from the numba core, passed the hand-written lists it was not in)."""
    from coldiron_env.options import VARIANT_KEYS

    return [{}, *({key: True} for key in VARIANT_KEYS), dict.fromkeys(VARIANT_KEYS, True)]


def variant_id(options: dict[str, Any]) -> str:
    """A test id for :func:`rule_variant_sets`' entries."""
    return "+".join(sorted(options)) or "game"


def flat_from_dict(obs: dict[str, Any], turns: int) -> np.ndarray:
    """The flat vector of a dict observation, built from the layout's fields independently of
    the env's own flattening (the oracle of tests/test_env_contract.py)."""
    from coldiron_env.cards import DECK_SIZE
    from coldiron_env.observation import (
        COUNTING_KEY,
        DECK_COUNT,
        DISCARDED,
        HAND,
        HURT,
        IRON_COUNT,
        PHASE,
        TURN,
        counting_start,
        flat_size,
    )  # fmt: skip
    from coldiron_env.options import IRON_APPLICATIONS_PER_TURN, MAX_HURT

    recall = "discarded" in obs
    counting = COUNTING_KEY in obs
    out = np.zeros(flat_size(recall, counting), dtype=np.float32)
    out[HAND.start : HAND.stop] = obs["hand"]
    out[HURT.start] = obs["hurt"] / MAX_HURT
    out[TURN.start] = obs["turn"] / turns
    out[DECK_COUNT.start] = obs["deck_count"] / DECK_SIZE
    out[PHASE.start + int(obs["phase"])] = 1.0
    out[IRON_COUNT.start] = obs["iron_count"] / IRON_APPLICATIONS_PER_TURN
    if recall:
        out[DISCARDED.start : DISCARDED.stop] = obs["discarded"]
    if counting:
        out[counting_start(recall) :] = obs[COUNTING_KEY]
    return out


def read_audit(folder: str | Path) -> list[tuple[int | None, tuple[int, ...]]]:
    """Every ``(generator seed, deck)`` recorded in ``folder`` by the deal audit
    (``coldiron_env.dealer.AUDIT_VARIABLE``)."""
    from coldiron_env.dealer import AUDIT_FILE_PREFIX

    out: list[tuple[int | None, tuple[int, ...]]] = []
    for path in sorted(Path(folder).glob(f"{AUDIT_FILE_PREFIX}*.txt")):
        for line in path.read_text().splitlines():
            seed, deck = line.split()
            out.append((None if seed == "unseeded" else int(seed), tuple(bytes.fromhex(deck))))
    return out
