"""Property tests over random decks and random legal action sequences (hypothesis).

Besides the invariants (the 54 cards are conserved, Hurt in 0..6, turn in
1..24, the mask is the engine's legal set, every game ends within the step
bound, same input same trajectory), every step is compared with
:class:`RefGame`, a small reference model of the rules written from the spec
for these tests (card codes, sets, no bit tricks), so the engine is checked
against a second, independent reading of the rules.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from helpers import (
    BONUS,
    IRON,
    JOKER,
    PACK,
    RANKS,
    REST,
    STOP,
    SUITS,
    THREATEN,
    game_cards,
    legal,
    phrase_cards,
    rule_variant_sets,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from coldiron_env.env import ColdIronEnv

VARIANTS: tuple[dict[str, Any], ...] = (*rule_variant_sets(),)
LEGAL = {"turn": tuple(range(17)), "iron": (IRON, STOP), "bonus": (STOP, BONUS), "over": ()}
# The env's mask: the legal set, and every action once the game is over (documented).
MASK = {**LEGAL, "over": tuple(range(19))}
SETTINGS = settings(max_examples=200, deadline=None)

decks = st.permutations(list(PACK))
choices = st.lists(st.integers(0, 10_000), min_size=80, max_size=80)
variants = st.sampled_from(VARIANTS)


@st.composite
def rich_decks(draw: Any) -> list[str]:
    """A deck whose first 12..22 cards hold a whole phrase (shuffled among a few
    others): Threaten-heavy play then wins now and then, as well as losing."""
    starts = {s: draw(st.integers(1, 8)) for s in SUITS}
    ph = phrase_cards(starts)
    others = list(PACK)
    for c in ph:
        others.remove(c)
    others = draw(st.permutations(others))
    k = draw(st.integers(0, 10))
    head = draw(st.permutations([*ph, *others[:k]]))
    return [*head, *others[k:]]


def numbered(code: str) -> bool:
    return code[:-1] in RANKS


def court(code: str) -> bool:
    return code != JOKER and code[:-1] in ("J", "Q", "K")


def phrase(hand: set[str]) -> bool:
    for s in SUITS:
        ranks = {RANKS.index(c[:-1]) + 1 for c in hand if c[-1] == s}
        if not any({lo, lo + 1, lo + 2} <= ranks for lo in range(1, 9)):
            return False
    return True


class RefGame:
    """The rules of the spec, written plainly over card codes."""

    def __init__(self, deck: list[str], bonus_always: bool = False, more: bool = False) -> None:
        self.deck = list(deck)
        self.pos = 0
        self.hand: set[str] = set()
        self.discards: list[str] = []
        self.hurt = 0
        self.turn = 1
        self.phase = "turn"
        self.irons = 0
        self.outcome: str | None = None
        self.source = ""
        self.always = bonus_always
        self.more = more
        self.drawn: list[str] = []

    def end(self, outcome: str) -> bool:
        self.outcome = outcome
        self.phase = "over"
        return True

    def draw(self) -> str:
        card = self.deck[self.pos]
        self.pos += 1
        self.drawn.append(card)
        return card

    def resolve(self, card: str, keep: bool) -> bool:
        if keep:
            self.hand.add(card)
            if phrase(self.hand):
                return self.end("won")
        else:
            self.discards.append(card)
        if self.pos == len(self.deck):
            return self.end("deck_exhausted")
        return False

    def add_hurt(self) -> bool:
        self.hurt += 1
        return self.end("slain") if self.hurt >= 6 else False

    def end_turn(self) -> None:
        if self.turn == 24:
            self.end("midnight")
        else:
            self.turn += 1
            self.irons = 0
            self.phase = "turn"

    def after_iron(self) -> None:
        if self.irons == 3:
            self.end_turn()
        else:
            self.phase = "iron"

    def after_bonus(self) -> None:
        if self.source == "iron":
            self.after_iron()
        else:
            self.end_turn()

    def bonus(self) -> None:
        left = 3
        while left:
            left -= 1
            card = self.draw()
            if self.resolve(card, numbered(card)):
                return
            if card == JOKER:
                if self.more:
                    left += 3
            elif court(card) and self.source == "iron" and self.add_hurt():
                return

    def joker_offer(self) -> None:
        if self.always:
            self.bonus()
            if self.phase != "over":
                self.after_bonus()
        else:
            self.phase = "bonus"

    def step(self, action: int) -> None:
        assert action in LEGAL[self.phase]
        self.drawn = []
        if action == THREATEN:
            card = self.draw()
            if self.resolve(card, numbered(card)):
                return
            if card == JOKER:
                self.source = "threaten"
                self.joker_offer()
            else:
                self.end_turn()
        elif action == IRON:
            self.irons += 1
            card = self.draw()
            if self.resolve(card, numbered(card)) or self.add_hurt():
                return
            if card == JOKER:
                self.source = "iron"
                self.joker_offer()
            else:
                self.after_iron()
        elif action == STOP:
            if self.phase == "iron":
                self.end_turn()
            else:
                self.after_bonus()
        elif action == BONUS:
            self.bonus()
            if self.phase != "over":
                self.after_bonus()
        elif action == REST:
            card = self.draw()
            if self.resolve(card, False):
                return
            self.hurt = max(0, self.hurt - 1)
            self.end_turn()
        else:  # rack
            if action < 12:
                rank = RANKS[action - 2]

                def match(c: str) -> bool:
                    return numbered(c) and c[:-1] == rank
            else:
                suit = SUITS[action - 12]

                def match(c: str) -> bool:
                    return numbered(c) and c[-1] == suit

            while True:
                card = self.draw()
                if match(card):
                    if not self.resolve(card, True):
                        self.end_turn()
                    return
                if self.resolve(card, False):
                    return
                if card == JOKER:
                    self.end("slain")
                    return
                if court(card) and self.add_hurt():
                    return


def sort_key(code: str) -> tuple[int, int]:
    return SUITS.index(code[-1]), RANKS.index(code[:-1])


def uniform(acts: list[int], pick: int, hand: list[str], hurt: int) -> int:
    return acts[pick % len(acts)]


def seeker(acts: list[int], pick: int, hand: list[str], hurt: int) -> int:
    """Threaten a lot, take bonuses, Iron now and then, and rack for a card that
    advances a run (a crude player that reaches wins, bonus phases and slain)."""
    if len(acts) == 2:  # iron or bonus phase
        return BONUS if BONUS in acts and pick % 10 < 8 else (STOP if pick % 10 < 7 else acts[0])
    roll = pick % 20
    if roll < 11:
        return THREATEN
    if roll < 14:
        return IRON
    if roll < 16:
        return REST
    held = set(hand)
    wanted: list[str] = []
    for s in SUITS:
        ranks = {RANKS.index(c[:-1]) + 1 for c in held if c[-1] == s}
        if any({lo, lo + 1, lo + 2} <= ranks for lo in range(1, 9)):
            continue
        best = max(range(1, 9), key=lambda lo: (len({lo, lo + 1, lo + 2} & ranks), -lo))
        wanted += [RANKS[r - 1] + s for r in (best, best + 1, best + 2) if r not in ranks]
    if not wanted:
        return THREATEN
    card = wanted[pick % len(wanted)]
    if roll < 15:
        return 2 + RANKS.index(card[:-1])  # rack its rank
    return 12 + SUITS.index(card[-1])  # rack its suit


def play_and_check(
    deck: list[str], picks: list[int], kwargs: dict[str, Any], policy: Any = uniform
) -> list[Any]:
    """Play one game, checking every invariant and the reference model; the trajectory."""
    env = ColdIronEnv(**kwargs)
    ref = RefGame(
        deck,
        bonus_always=kwargs.get("bonus_always", False),
        more=kwargs.get("bonus_joker_grants_more", False),
    )
    obs, info = env.reset(options={"deck": deck})
    game = env.game
    trajectory: list[Any] = [(obs.tolist(), sorted(info.items(), key=str).__repr__())]
    steps = 0
    while True:
        # invariants
        assert game_cards(game) == list(range(54)), "cards not conserved"
        assert game.hand & game.discarded == 0
        assert 0 <= info["hurt"] <= 6 and 1 <= info["turn"] <= 24
        assert info["hurt"] == game.hurt and info["turn"] == game.turn
        assert list(game.legal_actions()) == list(LEGAL[info["phase"]])
        assert legal(info) == list(MASK[info["phase"]])
        np.testing.assert_array_equal(env.action_masks(), info["action_mask"].astype(bool))
        assert len(info["hand"]) + len(ref.discards) + info["deck_count"] == 54
        # the reference model
        assert info["phase"] == ref.phase, (steps, info["phase"], ref.phase)
        assert (info["turn"], info["hurt"], info["deck_count"]) == (
            ref.turn,
            ref.hurt,
            54 - ref.pos,
        ), steps
        assert info["hand"] == sorted(ref.hand, key=sort_key), steps
        assert info["drawn"] == ref.drawn, steps
        assert info.get("outcome") == ref.outcome, steps
        if ref.phase != "over":
            assert not phrase(ref.hand), "a complete phrase did not end the game"
        if info["phase"] == "over":
            break
        acts = legal(info)
        a = policy(acts, picks[steps % len(picks)], info["hand"], info["hurt"])
        assert a in acts
        obs, reward, terminated, truncated, info = env.step(a)
        ref.step(a)
        steps += 1
        assert steps <= env.max_episode_steps, "game longer than max_episode_steps"
        assert terminated == (info["phase"] == "over") and truncated is False
        assert reward == (1.0 if info.get("outcome") == "won" else 0.0)
        trajectory.append(
            (a, obs.tolist(), float(reward), sorted(info.items(), key=str).__repr__())
        )
    # the outcome's consequences
    outcome = info["outcome"]
    assert outcome in ("won", "slain", "deck_exhausted", "midnight")
    assert info["is_success"] == (outcome == "won") == phrase(set(info["hand"]))
    if info["hurt"] == 6:
        assert outcome == "slain"
    if info["deck_count"] == 0:
        assert outcome in ("won", "deck_exhausted")
    if outcome == "deck_exhausted":
        assert info["deck_count"] == 0
    if outcome == "midnight":
        assert info["turn"] == 24
    return trajectory


@SETTINGS
@given(deck=decks, picks=choices, kwargs=variants)
def test_random_games_keep_invariants_and_match_reference(
    deck: list[str], picks: list[int], kwargs: dict[str, Any]
) -> None:
    first = play_and_check(deck, picks, kwargs)
    second = play_and_check(deck, picks, kwargs)
    assert first == second, "same deck and actions gave different trajectories"


@SETTINGS
@given(deck=rich_decks(), picks=choices, kwargs=variants)
def test_run_seeking_games(deck: list[str], picks: list[int], kwargs: dict[str, Any]) -> None:
    # Decks with a phrase near the top and a crude run-seeking player: wins, bonus
    # phases, slain and midnight all occur (uniform play on shuffled decks nearly
    # never wins).
    play_and_check(deck, picks, kwargs, policy=seeker)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), policy=st.integers(0, 2**16), kwargs=variants)
def test_same_seed_same_trajectory(seed: int, policy: int, kwargs: dict[str, Any]) -> None:
    def episode() -> list[Any]:
        env = ColdIronEnv(**kwargs)
        rng = np.random.default_rng(policy)
        obs, info = env.reset(seed=seed)
        out: list[Any] = [env.game.deck[:], obs.tolist()]
        while info["phase"] != "over":
            a = int(rng.choice(legal(info)))
            obs, r, _, _, info = env.step(a)
            out.append((a, obs.tolist(), r, info["hand"], info["phase"], info.get("outcome")))
        return out

    assert episode() == episode()
