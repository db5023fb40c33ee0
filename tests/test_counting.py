"""The ``counting`` observation: every field against an independent count of the game's cards."""

from __future__ import annotations

import random
from fractions import Fraction
from functools import cache

import numpy as np
import pytest

from coldiron_env import observation
from coldiron_env.cards import DECK_SIZE, FIRST_COURT, FIRST_JOKER, NUM_RANKS, NUM_SUITS
from coldiron_env.env import ColdIronEnv
from coldiron_env.game import Game

# Independent constants (spec), as in tests/helpers.py.
MAX_HURT = 6
WINDOWS = [(start, start + 1, start + 2) for start in range(1, 9)]  # ranks A-2-3 .. 8-9-10
RACKS = [("rank", r) for r in range(1, 11)] + [("suit", s) for s in range(4)]


def card(suit: int, rank: int) -> int:
    return suit * NUM_RANKS + rank - 1


def fields_of(vec: np.ndarray, recall: bool) -> dict[str, np.ndarray]:
    out = {}
    for f in observation.flat_fields(recall, counting=True):
        out[f.name] = vec[f.start : f.stop]
    return out


@cache
def rack_odds(k: int, j: int, c: int, hurt_left: int) -> tuple[Fraction, Fraction]:
    """(P(first target before a Joker and the slaying court), E[courts before it]), by recursion
    over the next relevant card (a target, a Joker or a court card, equally likely each)."""
    if k == 0 or hurt_left <= 0:  # no target, or the Changeling is already slain
        return Fraction(0), Fraction(0)
    total = k + j + c
    alive = Fraction(k, total)
    courts = Fraction(0)
    if c and hurt_left > 1:
        a, e = rack_odds(k, j, c - 1, hurt_left - 1)
        alive += Fraction(c, total) * a
        courts += Fraction(c, total) * (a + e)
    return alive, courts


def bonus_risk(deck: int, courts: int, hurt_left: int) -> Fraction:
    """P(at least hurt_left courts among 3 draws from deck cards holding courts), by recursion."""

    def go(draws: int, deck: int, courts: int, need: int) -> Fraction:
        if need <= 0:
            return Fraction(1)
        if draws == 0 or deck == 0:
            return Fraction(0)
        hit = Fraction(courts, deck) * go(draws - 1, deck - 1, courts - 1, need - 1)
        miss = Fraction(deck - courts, deck) * go(draws - 1, deck - 1, courts, need)
        return hit + miss

    return go(3, deck, courts, hurt_left)


def expected(game: Game) -> dict[str, np.ndarray]:
    """Every counting field, counted from the game's hand and discard pile only."""
    seen = {c for c in range(DECK_SIZE) if (game.hand | game.discarded) >> c & 1}
    held = {c for c in range(FIRST_COURT) if game.hand >> c & 1}
    unseen = [c for c in range(DECK_SIZE) if c not in seen]
    courts = sum(FIRST_COURT <= c < FIRST_JOKER for c in unseen)
    jokers = sum(c >= FIRST_JOKER for c in unseen)
    suit_need, suit_dead, useful = [], [], set()
    for s in range(NUM_SUITS):
        if any(all(card(s, r) in held for r in w) for w in WINDOWS):
            suit_need.append(0)
            suit_dead.append(False)
            continue
        live = [w for w in WINDOWS if all(card(s, r) in held or card(s, r) in unseen for r in w)]
        if not live:
            suit_need.append(3)
            suit_dead.append(True)
            continue
        missing = [[card(s, r) for r in w if card(s, r) not in held] for w in live]
        best = min(len(m) for m in missing)
        suit_need.append(best)
        suit_dead.append(False)
        for m in missing:
            if len(m) == best:
                useful.update(m)
    need = 99 if any(suit_dead) else sum(suit_need)
    rack_targets, rack_alive, rack_courts, rack_useful = [], [], [], []
    for kind, value in RACKS:
        targets = [
            c for c in unseen
            if c < FIRST_COURT and (c % 10 + 1 == value if kind == "rank" else c // 10 == value)
        ]  # fmt: skip
        alive, courts_before = rack_odds(len(targets), jokers, courts, MAX_HURT - game.hurt)
        rack_targets.append(len(targets) / 10)
        rack_alive.append(float(alive))
        rack_courts.append(float(courts_before) / MAX_HURT)
        rack_useful.append(sum(c in useful for c in targets) / len(targets) if targets else 0.0)
    deck = len(unseen)
    bits = np.zeros(40)
    bits[[c for c in unseen if c < FIRST_COURT]] = 1
    useful_bits = np.zeros(40)
    useful_bits[sorted(useful)] = 1
    return {
        "unseen": bits,
        "courts_left": np.array([courts / 12]),
        "jokers_left": np.array([jokers / 2]),
        "suit_need": np.array(suit_need) / 3,
        "suit_dead": np.array(suit_dead, dtype=float),
        "useful": useful_bits,
        "need": np.array([min(need, 12) / 12]),
        "rack_targets": np.array(rack_targets),
        "rack_alive": np.array(rack_alive),
        "rack_courts": np.array(rack_courts),
        "rack_useful": np.array(rack_useful),
        "next_card": np.array([courts, jokers, len(useful)]) / max(deck, 1),
        "bonus_risk": np.array([float(bonus_risk(deck, courts, MAX_HURT - game.hurt))]),
    }


@pytest.mark.parametrize("recall", [False, True])
def test_counting_fields_match_an_independent_count(recall: bool) -> None:
    env = ColdIronEnv(counting=True, recall=recall)
    rng = random.Random(7)
    checked = 0
    dead_seen = hopeless_seen = False
    for seed in range(70):
        obs, info = env.reset(seed=seed)
        while True:
            got = fields_of(obs, recall)
            want = expected(env.game)
            for name, values in want.items():
                np.testing.assert_allclose(got[name], values, atol=1e-6, err_msg=name)
            bound = got["keep_bound"][0] * 24
            assert 0 <= bound <= env.game.deck_count
            need = 99 if got["suit_dead"].any() else round(got["need"][0] * 12)
            assert got["hopeless"][0] == float(need > round(bound) or need >= 99)
            dead_seen |= bool(got["suit_dead"].any())
            hopeless_seen |= bool(got["hopeless"][0])
            checked += 1
            if info["phase"] == "over":
                break
            legal = [int(a) for a in np.flatnonzero(info["action_mask"])]
            # mostly draw one card at a time, so that games are long and varied
            action = rng.choice([a for a in legal if a in (0, 1, 16, 17, 18)] or legal)
            if rng.random() < 0.15:
                action = rng.choice(legal)
            obs, _, _, _, info = env.step(action)
    assert checked > 800
    assert dead_seen and hopeless_seen  # the rarer fields were exercised


def test_counting_never_reads_the_deck_order() -> None:
    """Two games equal up to the current position but with the rest of the deck reversed
    observe the same counting block."""
    env_a, env_b = ColdIronEnv(counting=True), ColdIronEnv(counting=True)
    obs_a, _ = env_a.reset(seed=3)
    for _ in range(6):
        obs_a, *_ = env_a.step(0 if env_a.game.phase == 0 else 17)
    game = env_a.game
    deck = list(game.deck)
    deck[game.pos :] = reversed(deck[game.pos :])
    clone = game.clone()
    clone.deck = deck
    env_b.reset(seed=3)
    env_b.game = clone
    env_b._encoder.clear()
    obs_b = env_b._observe()
    np.testing.assert_array_equal(obs_a, obs_b)
    assert deck != list(game.deck)


def test_popcount_without_numpy_2(monkeypatch: pytest.MonkeyPatch) -> None:
    from coldiron_env.analysis import popcount

    rng = np.random.default_rng(0)
    values = rng.integers(0, 2**63, size=5000, dtype=np.uint64) | np.uint64(1 << 63)
    expected = [bin(int(v)).count("1") for v in values]
    assert popcount(values).tolist() == expected
    monkeypatch.delattr(np, "bitwise_count", raising=False)  # NumPy 1.x has none
    assert popcount(values).tolist() == expected
