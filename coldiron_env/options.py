"""Game parameters, kept apart from game state: the rule variants.

:class:`RuleOptions` is frozen and validated on construction; a bad value is
refused with a ``ValueError`` that names the option and the value.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Final

from coldiron_env.cards import NUM_SUITS

STANDARD_TURNS: Final = 24  # 6pm to midnight, 15 minutes a turn
MAX_HURT: Final = 6  # Hurt reaching this slays the Changeling
IRON_APPLICATIONS_PER_TURN: Final = 3
BONUS_DRAWS: Final = 3  # draws granted by a Joker in Threaten or the Iron
MAX_TURNS_OPTION: Final = 99  # upper bound accepted for the training-only `turns` option


@dataclass(frozen=True, slots=True)
class RuleOptions:
    """Rule options of one game of Cold Iron. The defaults are the spec's reading.

    Attributes:
        bonus_always: variant *bonus always taken*: a Joker drawn by Threaten or
            the Iron grants its three bonus draws at once, and the ``bonus``
            phase never occurs. Default ``False``: the player may decline.
        bonus_joker_grants_more: variant *a Joker in the bonus grants three
            more*: a Joker drawn during bonus draws adds three further bonus
            draws to the bonus under way. Default ``False``: it is discarded
            with no further effect.
        turns: number of turns before midnight. ``24`` is the game; other
            values are for training curricula only and are not Cold Iron.
        suits_required: suits whose run completes the phrase. ``4`` is the
            game; fewer is for training curricula only.
    """

    bonus_always: bool = False
    bonus_joker_grants_more: bool = False
    turns: int = STANDARD_TURNS
    suits_required: int = NUM_SUITS

    def __post_init__(self) -> None:
        for name in ("bonus_always", "bonus_joker_grants_more"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ValueError(
                    f"rule option {name!r} must be a bool, got {value!r} ({type(value).__name__})"
                )
        _check_int("turns", self.turns, 1, MAX_TURNS_OPTION)
        _check_int("suits_required", self.suits_required, 1, NUM_SUITS)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> RuleOptions:
        """Build from a mapping; an unknown key is refused by name."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown rule option(s) {unknown}; known: {sorted(known)}")
        return cls(**values)


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(
            f"rule option {name!r} must be an int, got {value!r} ({type(value).__name__})"
        )
    if not low <= value <= high:
        raise ValueError(f"rule option {name!r} must be in {low}..{high}, got {value}")


DEFAULT_RULES: Final = RuleOptions()
