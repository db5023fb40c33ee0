"""The observation: the one module that knows its layout.

Flat mode (default) is a ``Box(0, 1, (N,), float32)`` vector that SB3's
``MlpPolicy`` takes unchanged:

| slice     | name        | size | encoding                                         |
| --------- | ----------- | ---- | ------------------------------------------------ |
| 0:40      | hand        | 40   | 1.0 if numbered card id ``i`` is held (H, D, C, S × A..10) |
| 40        | hurt        | 1    | Hurt / 6                                         |
| 41        | turn        | 1    | turn / turns (1/24 .. 1)                         |
| 42        | deck_count  | 1    | cards left in the deck / 54                      |
| 43:47     | phase       | 4    | one-hot: turn, iron, bonus, over                 |
| 47        | iron_count  | 1    | Iron applications this turn / 3                  |
| 48:102    | discarded   | 54   | only with ``recall=True``: 1.0 if card id ``i`` was discarded |

Dict mode (``observation_mode="dict"``) carries the same content in natural
types: ``hand`` MultiBinary(40), ``hurt`` Discrete(7), ``turn``
Discrete(turns + 1) (0 never occurs), ``deck_count`` Discrete(55), ``phase``
Discrete(4), ``iron_count`` Discrete(4), and with ``recall=True``
``discarded`` MultiBinary(54).

Card ids are those of :mod:`coldiron_env.cards`: numbered ``suit * 10 + rank - 1``,
court ``40 + suit * 3 + (J, Q, K)``, Jokers 52 then 53 in the order drawn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np
from gymnasium import spaces

from coldiron_env.actions import NUM_PHASES
from coldiron_env.cards import DECK_SIZE, NUM_NUMBERED
from coldiron_env.game import Game
from coldiron_env.options import IRON_APPLICATIONS_PER_TURN, MAX_HURT

ObservationMode = Literal["flat", "dict"]
OBSERVATION_MODES: Final = ("flat", "dict")


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


HAND = Field("hand", 0, NUM_NUMBERED, "1 if numbered card id i is held")
HURT = Field("hurt", HAND.stop, 1, "Hurt / 6")
TURN = Field("turn", HURT.stop, 1, "turn / turns")
DECK_COUNT = Field("deck_count", TURN.stop, 1, "cards left / 54")
PHASE = Field("phase", DECK_COUNT.stop, NUM_PHASES, "one-hot turn, iron, bonus, over")
IRON_COUNT = Field("iron_count", PHASE.stop, 1, "Iron applications this turn / 3")
DISCARDED = Field("discarded", IRON_COUNT.stop, DECK_SIZE, "1 if card id i was discarded (recall)")

BASE_FIELDS: Final = (HAND, HURT, TURN, DECK_COUNT, PHASE, IRON_COUNT)
RECALL_FIELDS: Final = (*BASE_FIELDS, DISCARDED)


def flat_fields(recall: bool) -> tuple[Field, ...]:
    return RECALL_FIELDS if recall else BASE_FIELDS


def flat_size(recall: bool) -> int:
    return flat_fields(recall)[-1].stop


def layout_table(recall: bool = True) -> str:
    """The flat layout as a Markdown table (for docs and ``--help``)."""
    rows = ["| slice | name | size | encoding |", "| --- | --- | --- | --- |"]
    for f in flat_fields(recall):
        where = f"{f.start}" if f.size == 1 else f"{f.start}:{f.stop}"
        rows.append(f"| {where} | {f.name} | {f.size} | {f.description} |")
    return "\n".join(rows)


def observation_space(mode: str, recall: bool, turns: int) -> spaces.Space[Any]:
    if mode == "flat":
        return spaces.Box(0.0, 1.0, shape=(flat_size(recall),), dtype=np.float32)
    if mode == "dict":
        parts: dict[str, spaces.Space[Any]] = {
            "hand": spaces.MultiBinary(NUM_NUMBERED),
            "hurt": spaces.Discrete(MAX_HURT + 1),
            "turn": spaces.Discrete(turns + 1),
            "deck_count": spaces.Discrete(DECK_SIZE + 1),
            "phase": spaces.Discrete(NUM_PHASES),
            "iron_count": spaces.Discrete(IRON_APPLICATIONS_PER_TURN + 1),
        }
        if recall:
            parts["discarded"] = spaces.MultiBinary(DECK_SIZE)
        return spaces.Dict(parts)
    raise ValueError(f"observation_mode must be one of {OBSERVATION_MODES}, got {mode!r}")


def _bits(mask: int, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=np.int8)
    while mask:
        low = mask & -mask
        out[low.bit_length() - 1] = 1
        mask ^= low
    return out


class FlatEncoder:
    """Writes the flat observation of a game into a preallocated buffer.

    Hand and discard bits are written incrementally (only the cards that
    changed since the last call); :meth:`encode` returns one copy.
    """

    def __init__(self, recall: bool, turns: int) -> None:
        self.recall = recall
        self.buffer = np.zeros(flat_size(recall), dtype=np.float32)
        self._turns = turns
        self._hand = 0
        self._discarded = 0
        self._phase = -1

    def clear(self) -> None:
        self.buffer[:] = 0.0
        self._hand = 0
        self._discarded = 0
        self._phase = -1

    def encode(self, game: Game) -> np.ndarray:
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
        return buf.copy()


def _write_bits(buf: np.ndarray, offset: int, changed: int, now: int) -> None:
    while changed:
        low = changed & -changed
        buf[offset + low.bit_length() - 1] = 1.0 if now & low else 0.0
        changed ^= low


def dict_observation(game: Game, recall: bool) -> dict[str, Any]:
    obs: dict[str, Any] = {
        "hand": _bits(game.hand, NUM_NUMBERED),
        "hurt": np.int64(game.hurt),
        "turn": np.int64(game.turn),
        "deck_count": np.int64(DECK_SIZE - game.pos),
        "phase": np.int64(game.phase),
        "iron_count": np.int64(game.iron_count),
    }
    if recall:
        obs["discarded"] = _bits(game.discarded, DECK_SIZE)
    return obs


def flat_from_dict(obs: dict[str, Any], turns: int) -> np.ndarray:
    """The flat vector of a dict observation (same content, for tests and tools)."""
    recall = "discarded" in obs
    out = np.zeros(flat_size(recall), dtype=np.float32)
    out[HAND.start : HAND.stop] = obs["hand"]
    out[HURT.start] = obs["hurt"] / MAX_HURT
    out[TURN.start] = obs["turn"] / turns
    out[DECK_COUNT.start] = obs["deck_count"] / DECK_SIZE
    out[PHASE.start + int(obs["phase"])] = 1.0
    out[IRON_COUNT.start] = obs["iron_count"] / IRON_APPLICATIONS_PER_TURN
    if recall:
        out[DISCARDED.start : DISCARDED.stop] = obs["discarded"]
    return out


@dataclass(frozen=True)
class ObservationView:
    """A decoded observation, for agents that reason about the game.

    ``hand`` and ``discarded`` are bit masks over card ids (``discarded`` is
    ``None`` without recall).
    """

    hand: int
    hurt: int
    turn: int
    deck_count: int
    phase: int
    iron_count: int
    discarded: int | None


def _mask_from(values: Any) -> int:
    out = 0
    for i in np.flatnonzero(np.asarray(values) > 0.5).tolist():
        out |= 1 << i
    return out


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
    recall = vec.shape[-1] == flat_size(True)
    return ObservationView(
        hand=_mask_from(vec[HAND.start : HAND.stop]),
        hurt=round(vec[HURT.start] * MAX_HURT),
        turn=round(vec[TURN.start] * turns),
        deck_count=round(vec[DECK_COUNT.start] * DECK_SIZE),
        phase=int(np.argmax(vec[PHASE.start : PHASE.stop])),
        iron_count=round(vec[IRON_COUNT.start] * IRON_APPLICATIONS_PER_TURN),
        discarded=_mask_from(vec[DISCARDED.start : DISCARDED.stop]) if recall else None,
    )
