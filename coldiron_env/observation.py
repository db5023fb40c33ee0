"""The observation: the one module that knows its layout.

Flat mode (default) is a ``Box(0, 1, (N,), float32)`` vector that SB3's ``MlpPolicy`` takes
unchanged. Its fields, in order (:func:`layout_table`):

* always (48 values): ``hand``, ``hurt``, ``turn``, ``deck_count``, ``phase``, ``iron_count``;
* with ``recall=True`` (54 more): ``discarded``, the discard pile, which a player with a
  perfect memory knows but the rules forbid examining;
* with ``counting=True`` (153 more): what a card-counting player computes in their head from
  the cards seen (:mod:`coldiron_env.analysis`): the deck's contents, each suit's live run
  windows and useful cards, the keep bound, each rack's odds, the next card's odds and the
  Iron bonus's risk.

Dict mode (``observation_mode="dict"``) carries the same content in natural types, and
``mask_in_observation=True`` wraps either mode in a ``Dict`` of ``observations`` and
``action_mask`` (:func:`observation_space`, :func:`with_mask`). Card ids are those of
:mod:`coldiron_env.cards`. Two encoders write these layouts: :class:`FlatEncoder` for one
game (the single env, incremental) and :func:`encode_batch` for many (the vector env).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

import numpy as np
import numpy.typing as npt

from coldiron_env.actions import NUM_ACTIONS, NUM_PHASES
from coldiron_env.analysis import IMPOSSIBLE, NUM_COURTS, RACK_COUNT, Counting, popcount
from coldiron_env.cards import DECK_SIZE, NUM_JOKERS, NUM_NUMBERED, NUM_RANKS, NUM_SUITS, RUN_LENGTH
from coldiron_env.game import I64, Game, Games
from coldiron_env.options import IRON_APPLICATIONS_PER_TURN, MAX_HURT, STANDARD_TURNS, RuleOptions

if TYPE_CHECKING:
    from gymnasium import spaces


ObservationMode = Literal["flat", "dict"]
OBSERVATION_MODES: Final = ("flat", "dict")
OBSERVATION_OPTIONS: Final = ("observation_mode", "recall", "counting")
"""The env options that change only what a player observes (a trained model brings its own)."""
COUNTING_KEY: Final = "counting"
"""Dict-mode key of the counting block."""
OBSERVATIONS_KEY: Final = "observations"
"""``mask_in_observation=True``: the key of the configured observation."""
ACTION_MASK_KEY: Final = "action_mask"
"""``mask_in_observation=True``: the key of the legal-action mask (int8, 1 = legal)."""
MAX_NEED: Final = NUM_SUITS * RUN_LENGTH  # 12: the phrase from an empty hand
KEEP_SCALE: Final = STANDARD_TURNS  # keep bounds are shown divided by this, clipped to 1

U64 = npt.NDArray[np.uint64]
F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Field:
    """One named slice of the flat vector."""

    name: str
    start: int
    size: int
    description: str

    @property
    def stop(self) -> int:
        return self.start + self.size


def _tile(start: int, specs: Sequence[tuple[str, int, str]]) -> tuple[Field, ...]:
    out = []
    for name, size, description in specs:
        out.append(Field(name, start, size, description))
        start += size
    return tuple(out)


BASE_FIELDS: Final = _tile(
    0,
    (
        ("hand", NUM_NUMBERED, "1 if numbered card id i is held"),
        ("hurt", 1, "Hurt / 6"),
        ("turn", 1, "turn / turns"),
        ("deck_count", 1, "cards left / 54"),
        ("phase", NUM_PHASES, "one-hot turn, iron, bonus, over"),
        ("iron_count", 1, "Iron applications this turn / 3"),
    ),
)
HAND, HURT, TURN, DECK_COUNT, PHASE, IRON_COUNT = BASE_FIELDS
BASE_SIZE: Final = IRON_COUNT.stop
DISCARDED: Final = Field("discarded", BASE_SIZE, DECK_SIZE, "1 if card id i was discarded (recall)")
COUNTING_SPECS: Final = (
    ("unseen", NUM_NUMBERED, "counting: 1 if numbered card id i is still in the deck"),
    ("courts_left", 1, "counting: court cards in the deck / 12"),
    ("jokers_left", 1, "counting: Jokers in the deck / 2"),
    ("suit_need", NUM_SUITS, "counting: cards missing from each suit's best live run / 3"),
    ("suit_dead", NUM_SUITS, "counting: 1 if the suit has no live run window"),
    ("useful", NUM_NUMBERED, "counting: 1 if numbered card id i is missing from a best live run"),
    ("need", 1, "counting: cards the phrase still needs / 12 (1 if out of reach)"),
    ("keep_bound", 1, "counting: most cards still keepable within 5 Hurt / 24 (at most 1)"),
    ("hopeless", 1, "counting: 1 if the phrase needs more cards than keep_bound"),
    ("rack_targets", RACK_COUNT, "counting: targets of rack A..10, H..S still in the deck / 10"),
    ("rack_alive", RACK_COUNT, "counting: chance each rack reaches its first target alive"),
    ("rack_courts", RACK_COUNT, "counting: courts each rack draws and lives, expected / 6"),
    ("rack_useful", RACK_COUNT, "counting: chance each rack keeps a useful card"),
    ("next_card", 3, "counting: chance the next card is a court, a Joker, a useful card"),
    ("bonus_risk", 1, "counting: chance an Iron bonus now would slay"),
)
COUNTING_SIZE: Final = sum(size for _, size, _ in COUNTING_SPECS)
COUNTING_FIELDS: Final = _tile(0, COUNTING_SPECS)
"""The counting block's fields, offsets relative to the block (its dict-mode ``Box``)."""
_COUNTING = {f.name: f for f in COUNTING_FIELDS}


def flat_fields(recall: bool, counting: bool = False) -> tuple[Field, ...]:
    """The flat vector's fields, in order."""
    fields = (*BASE_FIELDS, DISCARDED) if recall else BASE_FIELDS
    return fields + _tile(counting_start(recall), COUNTING_SPECS) if counting else fields


def layout(recall: bool = False, counting: bool = False) -> dict[str, slice]:
    """Each field's slice of the flat observation with these options, by name:
    ``obs[layout(counting=True)["hurt"]] * 6`` is the Hurt."""
    return {f.name: slice(f.start, f.stop) for f in flat_fields(recall, counting)}


def flat_size(recall: bool, counting: bool = False) -> int:
    return flat_fields(recall, counting)[-1].stop


def counting_start(recall: bool) -> int:
    """Where the counting block begins (with ``counting=True``)."""
    return DISCARDED.stop if recall else BASE_SIZE


def layout_table(recall: bool = True, counting: bool = True) -> str:
    """The flat layout as a Markdown table (for docs and ``--help``)."""
    rows = ["| slice | name | size | encoding |", "| --- | --- | --- | --- |"]
    for f in flat_fields(recall, counting):
        where = f"{f.start}" if f.size == 1 else f"{f.start}:{f.stop}"
        rows.append(f"| {where} | {f.name} | {f.size} | {f.description} |")
    return "\n".join(rows)


def observation_space(
    mode: str, recall: bool, turns: int, counting: bool = False, mask: bool = False
) -> spaces.Space[Any]:
    """The env's observation space (the only part of this module that needs Gymnasium); with
    ``mask``, ``Dict({"observations": <that space>, "action_mask": Box(0, 1, (19,), int8)})``."""
    from gymnasium import spaces  # noqa: PLC0415 (the layout and encoders do without it)

    if mask:
        inner = observation_space(mode, recall, turns, counting)
        mask_space = spaces.Box(0, 1, shape=(NUM_ACTIONS,), dtype=np.int8)
        return spaces.Dict({OBSERVATIONS_KEY: inner, ACTION_MASK_KEY: mask_space})
    if mode == "flat":
        return spaces.Box(0.0, 1.0, shape=(flat_size(recall, counting),), dtype=np.float32)
    if mode == "dict":
        parts: dict[str, spaces.Space[Any]] = {
            "hand": spaces.MultiBinary(NUM_NUMBERED),
            "hurt": spaces.Discrete(MAX_HURT + 1),
            "turn": spaces.Discrete(turns + 1),  # 0 never occurs
            "deck_count": spaces.Discrete(DECK_SIZE + 1),
            "phase": spaces.Discrete(NUM_PHASES),
            "iron_count": spaces.Discrete(IRON_APPLICATIONS_PER_TURN + 1),
        }
        if recall:
            parts["discarded"] = spaces.MultiBinary(DECK_SIZE)
        if counting:
            parts[COUNTING_KEY] = spaces.Box(0.0, 1.0, shape=(COUNTING_SIZE,), dtype=np.float32)
        return spaces.Dict(parts)
    raise ValueError(f"observation_mode must be one of {OBSERVATION_MODES}, got {mode!r}")


# --------------------------------------------------------------------------- counting
def counting_block(
    hand: U64,
    seen: U64,
    hurt: I64,
    turn: I64,
    deck_count: I64,
    turns: int | I64,
    suits_required: int | I64,
    rules: RuleOptions,
) -> F32:
    """The counting block of ``n`` games, shape (n, 153): :class:`~coldiron_env.analysis.Counting`
    laid out as :data:`COUNTING_FIELDS` (``turns``, ``suits_required``: one or one per game;
    the variants of ``rules``)."""
    c = Counting(hand, seen, hurt, turn, deck_count, turns, suits_required, rules)
    n = hand.shape[0]
    out = np.empty((n, COUNTING_SIZE), dtype=np.float32)

    def put(name: str, values: Any) -> None:
        f = _COUNTING[name]
        out[:, f.start : f.stop] = np.asarray(values).reshape(n, f.size)

    dead = c.suit_need >= IMPOSSIBLE
    hopeless = (c.need >= IMPOSSIBLE) | (c.need > c.keep_bound)
    deck = np.maximum(deck_count, 1)
    useful_left = popcount(c.useful & c.unseen)
    targets = np.maximum(c.rack_targets, 1)
    put("unseen", bits(c.unseen, NUM_NUMBERED))
    put("courts_left", c.courts / NUM_COURTS)
    put("jokers_left", c.jokers / NUM_JOKERS)
    put("suit_need", np.where(dead, RUN_LENGTH, c.suit_need) / RUN_LENGTH)
    put("suit_dead", dead)
    put("useful", bits(c.useful, NUM_NUMBERED))
    put("need", np.minimum(c.need, MAX_NEED) / MAX_NEED)
    put("keep_bound", np.minimum(c.keep_bound, KEEP_SCALE) / KEEP_SCALE)
    put("hopeless", hopeless)
    put("rack_targets", c.rack_targets / NUM_RANKS)
    put("rack_alive", c.rack_alive)
    put("rack_courts", c.rack_courts / MAX_HURT)
    put("rack_useful", c.rack_hits / targets)
    put("next_card", np.stack([c.courts, c.jokers, useful_left], axis=1) / deck[:, None])
    put("bonus_risk", c.bonus_risk)
    return out


# --------------------------------------------------------------------------- one game
def bits(masks: U64, count: int) -> npt.NDArray[np.uint8]:
    """Rows of the low ``count`` bits of each uint64 mask (bit ``i`` in column ``i``)."""
    as_bytes = np.ascontiguousarray(masks, dtype="<u8").view(np.uint8).reshape(-1, 8)
    return np.unpackbits(as_bytes, axis=1, count=count, bitorder="little")


def _game_counting(game: Game) -> F32:
    """The counting block of one game (computed as a batch of one)."""
    hand, seen = np.array([[game.hand], [game.hand | game.discarded]], dtype=np.uint64)
    hurt, turn, left = np.array([[game.hurt], [game.turn], [DECK_SIZE - game.pos]], dtype=np.int64)
    rules = game.rules
    block = counting_block(hand, seen, hurt, turn, left, rules.turns, rules.suits_required, rules)
    row: F32 = block[0]
    return row


class FlatEncoder:
    """Writes the flat observation of a game into a preallocated buffer, the hand and discard
    bits incrementally (only the cards changed since the last call); :meth:`encode` returns a
    copy."""

    def __init__(self, recall: bool, turns: int, counting: bool = False) -> None:
        self.recall = recall
        self.counting = counting
        self.buffer = np.zeros(flat_size(recall, counting), dtype=np.float32)
        self._turns = turns
        self._counting_at = counting_start(recall)
        self.clear()

    def clear(self) -> None:
        """Forget the last game written (a new deal)."""
        self.buffer[:] = 0.0
        self._hand = 0
        self._discarded = 0
        self._phase = -1

    def encode(self, game: Game) -> F32:
        buf = self.buffer
        changed = game.hand ^ self._hand
        if changed:
            self._hand = game.hand
            _write_bits(buf, HAND.start, changed, game.hand)
        if self.recall:
            changed = game.discarded ^ self._discarded
            if changed:
                self._discarded = game.discarded
                _write_bits(buf, DISCARDED.start, changed, game.discarded)
        buf[HURT.start] = game.hurt / MAX_HURT
        buf[TURN.start] = game.turn / self._turns
        buf[DECK_COUNT.start] = (DECK_SIZE - game.pos) / DECK_SIZE
        if game.phase != self._phase:
            if self._phase >= 0:
                buf[PHASE.start + self._phase] = 0.0
            buf[PHASE.start + game.phase] = 1.0
            self._phase = game.phase
        buf[IRON_COUNT.start] = game.iron_count / IRON_APPLICATIONS_PER_TURN
        if self.counting:
            buf[self._counting_at :] = _game_counting(game)
        return buf.copy()


def _write_bits(buf: np.ndarray, offset: int, changed: int, now: int) -> None:
    while changed:
        low = changed & -changed
        buf[offset + low.bit_length() - 1] = 1.0 if now & low else 0.0
        changed ^= low


def _mask_bits(mask: int, size: int) -> npt.NDArray[np.int8]:
    row: npt.NDArray[np.int8] = bits(np.array([mask], dtype=np.uint64), size)[0].view(np.int8)
    return row


def dict_observation(game: Game, recall: bool, counting: bool = False) -> dict[str, Any]:
    obs: dict[str, Any] = {
        "hand": _mask_bits(game.hand, NUM_NUMBERED),
        "hurt": np.int64(game.hurt),
        "turn": np.int64(game.turn),
        "deck_count": np.int64(DECK_SIZE - game.pos),
        "phase": np.int64(game.phase),
        "iron_count": np.int64(game.iron_count),
    }
    if recall:
        obs["discarded"] = _mask_bits(game.discarded, DECK_SIZE)
    if counting:
        obs[COUNTING_KEY] = _game_counting(game)
    return obs


def with_mask(observation: Any, action_mask: npt.NDArray[np.int8]) -> dict[str, Any]:
    """An observation of a ``mask_in_observation`` space: ``observation`` (one game's or a batch's)
    beside its ``action_mask`` (shape (19,) or (n, 19))."""
    return {OBSERVATIONS_KEY: observation, ACTION_MASK_KEY: action_mask}


# --------------------------------------------------------------------------- many games
_PHASE_ONE_HOT: Final = np.eye(NUM_PHASES, dtype=np.float32)


def encode_batch(
    mode: str,
    games: Games,
    rules: RuleOptions,
    recall: bool,
    counting: bool,
    rows: I64 | None = None,
) -> Any:
    """Observations of the games ``rows`` of ``games`` (default: all ``n``; each with its
    own ``turns`` and ``suits_required``, the variants of ``rules``): an (n, N) float32
    array in flat mode, a dict of arrays (leading dimension n) in dict mode."""
    pick = slice(None) if rows is None else rows
    hand = games.hand[pick].view(np.uint64)
    discarded = games.discarded[pick].view(np.uint64)
    hurt, turn, phase = games.hurt[pick], games.turn[pick], games.phase[pick]
    iron_count, deck_count = games.iron_count[pick], DECK_SIZE - games.pos[pick]
    turns, suits_required = games.turns[pick], games.suits_required[pick]
    block = None
    if counting:
        seen = hand | discarded
        block = counting_block(hand, seen, hurt, turn, deck_count, turns, suits_required, rules)
    if mode == "dict":
        obs: dict[str, Any] = {
            "hand": bits(hand, NUM_NUMBERED).view(np.int8),
            "hurt": hurt.copy(),
            "turn": turn.copy(),
            "deck_count": deck_count.copy(),
            "phase": phase.copy(),
            "iron_count": iron_count.copy(),
        }
        if recall:
            obs["discarded"] = bits(discarded, DECK_SIZE).view(np.int8)
        if block is not None:
            obs[COUNTING_KEY] = block
        return obs
    out = np.empty((hand.shape[0], flat_size(recall, counting)), dtype=np.float32)
    out[:, HAND.start : HAND.stop] = bits(hand, NUM_NUMBERED)
    out[:, HURT.start] = hurt / MAX_HURT
    out[:, TURN.start] = turn / turns
    out[:, DECK_COUNT.start] = deck_count / DECK_SIZE
    out[:, PHASE.start : PHASE.stop] = np.take(_PHASE_ONE_HOT, phase, axis=0)
    out[:, IRON_COUNT.start] = iron_count / IRON_APPLICATIONS_PER_TURN
    if recall:
        out[:, DISCARDED.start : DISCARDED.stop] = bits(discarded, DECK_SIZE)
    if block is not None:
        out[:, counting_start(recall) :] = block
    return out


# --------------------------------------------------------------------------- decoding
@dataclass(frozen=True)
class ObservationView:
    """A decoded observation, for agents that reason about the game: ``hand`` and ``discarded``
    are bit masks over card ids (``discarded`` is ``None`` without recall). The counting block,
    derived from these, is not decoded."""

    hand: int
    hurt: int
    turn: int
    deck_count: int
    phase: int
    iron_count: int
    discarded: int | None


def _mask_from(values: Any) -> int:
    return sum(1 << i for i in np.flatnonzero(np.asarray(values) > 0.5).tolist())


_RECALL_BY_SIZE: Final = {
    flat_size(recall, counting): recall for recall in (False, True) for counting in (False, True)
}


def decode(obs: Any, turns: int) -> ObservationView:
    """Decode a flat vector or a dict observation (``turns`` as passed to the env)."""
    if isinstance(obs, dict):
        discarded = obs.get("discarded")
        return ObservationView(
            hand=_mask_from(obs["hand"]),
            hurt=int(obs["hurt"]),
            turn=int(obs["turn"]),
            deck_count=int(obs["deck_count"]),
            phase=int(obs["phase"]),
            iron_count=int(obs["iron_count"]),
            discarded=None if discarded is None else _mask_from(discarded),
        )
    vec = np.asarray(obs, dtype=np.float64)
    recall = _RECALL_BY_SIZE.get(vec.shape[-1])
    if recall is None:
        raise ValueError(
            f"a flat observation has one of the sizes {sorted(_RECALL_BY_SIZE)}, "
            f"got {vec.shape[-1]}"
        )
    return ObservationView(
        hand=_mask_from(vec[HAND.start : HAND.stop]),
        hurt=round(vec[HURT.start] * MAX_HURT),
        turn=round(vec[TURN.start] * turns),
        deck_count=round(vec[DECK_COUNT.start] * DECK_SIZE),
        phase=int(np.argmax(vec[PHASE.start : PHASE.stop])),
        iron_count=round(vec[IRON_COUNT.start] * IRON_APPLICATIONS_PER_TURN),
        discarded=_mask_from(vec[DISCARDED.start : DISCARDED.stop]) if recall else None,
    )
