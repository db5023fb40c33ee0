"""The action space: the one place that knows the action indices (spec table).

| index  | action                                                        | legal in phase |
| ------ | ------------------------------------------------------------- | -------------- |
| 0      | Threaten                                                      | turn           |
| 1      | Apply the Iron (first application, or again)                  | turn, iron     |
| 2..11  | Rack rank A, 2, ..., 10 (2 = Ace, 11 = 10)                    | turn           |
| 12..15 | Rack suit Hearts, Diamonds, Clubs, Spades                     | turn           |
| 16     | Rest and Lament                                               | turn           |
| 17     | Stop: end the turn after ironing, or decline a Joker's bonus  | iron, bonus    |
| 18     | Take the Joker's three bonus draws                            | bonus          |
"""

from __future__ import annotations

from typing import Final

import numpy as np

from coldiron_env.cards import (
    NUM_RANKS,
    NUM_SUITS,
    RANK_CODES,
    SUIT_FIELD_MASK,
    SUIT_NAMES,
    SUITS,
    numbered_id,
)

ACTION_TABLE: Final = "\n".join(row for row in (__doc__ or "").splitlines() if row.startswith("|"))
"""The table above, as the env's docstring shows it."""

NUM_ACTIONS: Final = 19

THREATEN: Final = 0
IRON: Final = 1
RACK_RANK_FIRST: Final = 2  # rack Ace; rack rank r is RACK_RANK_FIRST + r - 1
RACK_SUIT_FIRST: Final = RACK_RANK_FIRST + NUM_RANKS  # 12: rack Hearts
REST: Final = RACK_SUIT_FIRST + NUM_SUITS  # 16
STOP: Final = REST + 1  # 17
BONUS: Final = STOP + 1  # 18

# Phases of a game (the spec's `turn`, `iron`, `bonus`, `over`).
PHASE_TURN: Final = 0
PHASE_IRON: Final = 1
PHASE_BONUS: Final = 2
PHASE_OVER: Final = 3
NUM_PHASES: Final = 4
PHASE_NAMES: Final = ("turn", "iron", "bonus", "over")

LEGAL_ACTIONS: Final[tuple[tuple[int, ...], ...]] = (
    tuple(range(REST + 1)),  # turn: every method and rack target
    (IRON, STOP),  # iron: apply again or end the turn
    (STOP, BONUS),  # bonus: decline or take the three draws
    (),  # over
)
"""``LEGAL_ACTIONS[phase]``: the legal actions, ascending. Legality depends on the phase alone."""

LEGAL_BITS: Final[tuple[int, ...]] = tuple(
    sum(1 << a for a in actions) for actions in LEGAL_ACTIONS
)
"""``LEGAL_BITS[phase] >> action & 1`` tells whether ``action`` is legal."""

LEGAL_MASKS: Final = np.array(
    [[a in LEGAL_ACTIONS[p] for a in range(NUM_ACTIONS)] for p in range(NUM_PHASES)], dtype=bool
)
"""``LEGAL_MASKS[phase]``: the legal actions as a bool row of shape (19,) (do not modify)."""
LEGAL_MASKS.flags.writeable = False
ENV_MASKS: Final = LEGAL_MASKS.copy()
ENV_MASKS[PHASE_OVER] = True
ENV_MASKS.flags.writeable = False
"""``ENV_MASKS[phase]``: the mask the envs report (``info["action_mask"]``, ``action_masks()``):
the legal actions, but every action once the game is over (as pgx does). An empty mask would
crash a masked sampler, and the only action that can follow is one a vector env ignores while
it deals the game again (``NEXT_STEP`` autoreset); the single env refuses any step after the end.
"""
ENV_MASKS_INT8: Final = ENV_MASKS.astype(np.int8)
"""``ENV_MASKS_INT8[phase]``: the same as ``np.int8`` (the env's ``info["action_mask"]``)."""
ENV_MASKS_INT8.flags.writeable = False
RACK_ACTIONS: Final = tuple(range(RACK_RANK_FIRST, REST))
"""Every rack: ranks A..10, then suits Hearts..Spades."""


def rack_rank_action(rank: int) -> int:
    """Action that racks for rank 1 (Ace) .. 10."""
    if not 1 <= rank <= NUM_RANKS:
        raise ValueError(f"rack rank must be 1..{NUM_RANKS}, got {rank!r}")
    return RACK_RANK_FIRST + rank - 1


def is_rack(action: int) -> bool:
    return RACK_RANK_FIRST <= action < REST


RACK_TARGETS: Final[tuple[int, ...]] = (
    *(0,) * RACK_RANK_FIRST,
    *(sum(1 << numbered_id(s, r) for s in range(NUM_SUITS)) for r in range(1, NUM_RANKS + 1)),
    *(SUIT_FIELD_MASK << numbered_id(s, 1) for s in range(NUM_SUITS)),
    *(0,) * (NUM_ACTIONS - REST),
)
"""``RACK_TARGETS[action]``: mask of the numbered cards that end that rack (0 if not a rack)."""


ACTION_NAMES: Final[tuple[str, ...]] = (
    "threaten",
    "iron",
    *(f"rack {code}" for code in RANK_CODES),
    *(f"rack {name.lower()}" for name in SUIT_NAMES),
    "rest",
    "stop",
    "bonus",
)
"""Short names, also accepted by :func:`parse_action` (``"rack 7"``, ``"rack hearts"``)."""

ACTION_LABELS: Final[tuple[str, ...]] = (
    "Threaten",
    "Apply the Iron",
    *(f"Rack rank {RANK_CODES[r]}" for r in range(NUM_RANKS)),
    *(f"Rack suit {SUIT_NAMES[s]}" for s in range(NUM_SUITS)),
    "Rest and Lament",
    "Stop",
    "Take the bonus",
)
"""Long names used by the text view."""

_ALIASES: Final[dict[str, int]] = {
    **{name.lower(): a for a, name in enumerate(ACTION_NAMES)},  # "rack A" typed as shown
    "threat": THREATEN,
    "apply the iron": IRON,
    "rest and lament": REST,
    "lament": REST,
    "decline": STOP,
    "end": STOP,
    "take": BONUS,
    "rack 1": RACK_RANK_FIRST,
    "rack ace": RACK_RANK_FIRST,
    "rack t": RACK_RANK_FIRST + NUM_RANKS - 1,
    **{f"rack {SUITS[s].lower()}": RACK_SUIT_FIRST + s for s in range(NUM_SUITS)},
    **{f"rack {SUIT_NAMES[s].lower().rstrip('s')}": RACK_SUIT_FIRST + s for s in range(NUM_SUITS)},
}


def parse_action(text: str) -> int:
    """Action index from a number (``"7"``) or a name (``"rack 7"``, ``"rack hearts"``).

    Raises ``ValueError`` naming the text when it is neither.
    """
    key = " ".join(text.strip().lower().split())
    if key.isdigit():
        action = int(key)
        if 0 <= action < NUM_ACTIONS:
            return action
        raise ValueError(f"action number {action} is outside 0..{NUM_ACTIONS - 1}")
    try:
        return _ALIASES[key]
    except KeyError:
        raise ValueError(
            f"unknown action {text!r}; use a number 0..{NUM_ACTIONS - 1} or a name such as "
            f"'threaten', 'iron', 'rack 7', 'rack hearts', 'rest', 'stop', 'bonus'"
        ) from None
