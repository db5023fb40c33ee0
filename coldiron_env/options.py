"""Game parameters, kept apart from game state: the rule variants.

:class:`RuleOptions` is frozen and validated on construction (a bad value is refused with a
``ValueError`` naming the option and the value). It is the one carrier of the rules through
every layer (engine, envs, knowledge, players, configs, scripts): the option lists below are
derived from its fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from coldiron_env.cards import NUM_SUITS

if TYPE_CHECKING:
    import argparse

STANDARD_TURNS: Final = 24  # 6pm to midnight, 15 minutes a turn
MAX_HURT: Final = 6  # Hurt reaching this slays the Changeling
IRON_APPLICATIONS_PER_TURN: Final = 3
BONUS_DRAWS: Final = 3  # draws granted by a Joker in Threaten or the Iron
MAX_TURNS_OPTION: Final = 99  # upper bound accepted for the training-only `turns` option
CURRICULUM_KEYS: Final = ("turns", "suits_required")
"""The options a training curriculum may change between deals (not Cold Iron's own values)."""


@dataclass(frozen=True, slots=True)
class RuleOptions:
    """Rule options of one game of Cold Iron. The defaults are the spec's reading.

    A new variant is a field here (a bool: :data:`VARIANT_KEYS` picks it up, and with it the
    env's and scripts' options and the tests' variant lists, ``tests/helpers.py``), played
    where its rule is played: ``game.Game``, the compiled ``batched`` core (packed by
    ``batched.pack_rules``) and, if it changes what can still be kept, the keep bound
    ``analysis.max_keeps`` (and its compiled twin ``agents.players.rollouts.keep_bound``),
    which assume that a Rest heals one Hurt and that only the Iron and a Joker's bonus keep
    more than a card a turn (:attr:`joker_keeps`). The lockstep, golden and solver tests then
    play it on every layer.

    Attributes:
        bonus_always: variant *bonus always taken*: a Joker drawn by Threaten or the Iron
            grants its three bonus draws at once, and the ``bonus`` phase never occurs.
            Default ``False``: the player may decline.
        bonus_joker_grants_more: variant *a Joker in the bonus grants three more*: a Joker
            drawn during bonus draws adds three further bonus draws to the bonus under way.
            Default ``False``: it is discarded with no further effect.
        turns: number of turns before midnight. ``24`` is the game; other values are for
            training curricula only and are not Cold Iron.
        suits_required: suits whose run completes the phrase. ``4`` is the game; fewer is
            for training curricula only.
    """

    bonus_always: bool = False
    bonus_joker_grants_more: bool = False
    turns: int = STANDARD_TURNS
    suits_required: int = NUM_SUITS

    def __post_init__(self) -> None:
        for name in RULE_KEYS:  # a NumPy scalar (a sweep's value) as the Python value it holds
            object.__setattr__(self, name, plain(getattr(self, name)))
        for name in VARIANT_KEYS:
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ValueError(
                    f"rule option {name!r} must be a bool, got {value!r} ({type(value).__name__})"
                )
        _check_int("turns", self.turns, 1, MAX_TURNS_OPTION)
        _check_int("suits_required", self.suits_required, 1, NUM_SUITS)

    @property
    def joker_keeps(self) -> int:
        """Cards one Joker's bonus may add to a keep bound (``analysis.max_keeps``): its
        three draws, counted twice when a Joker in the bonus grants three more."""
        return BONUS_DRAWS * (2 if self.bonus_joker_grants_more else 1)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def changes(self) -> dict[str, Any]:
        """The options that differ from the game's: the env kwargs that select these rules."""
        return {k: v for k, v in self.to_dict().items() if v != getattr(DEFAULT_RULES, k)}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> RuleOptions:
        """Build from a mapping; an unknown key is refused by name."""
        unknown = sorted(set(values) - set(RULE_KEYS))
        if unknown:
            raise ValueError(f"unknown rule option(s) {unknown}; known: {sorted(RULE_KEYS)}")
        return cls(**values)

    @classmethod
    def from_kwargs(cls, env_kwargs: Mapping[str, Any]) -> RuleOptions:
        """The rules of an env's keyword arguments (the other options are ignored)."""
        return cls(**{k: v for k, v in env_kwargs.items() if k in RULE_KEYS})


def plain(value: Any) -> Any:
    """A NumPy scalar as the Python bool, int or float it holds (``np.float32(1.0)`` -> 1.0);
    anything else unchanged, for the options' own type checks."""
    return value.item() if isinstance(value, np.generic) else value


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(
            f"rule option {name!r} must be an int, got {value!r} ({type(value).__name__})"
        )
    if not low <= value <= high:
        raise ValueError(f"rule option {name!r} must be in {low}..{high}, got {value}")


RULE_KEYS: Final = tuple(f.name for f in fields(RuleOptions))
"""Every rule option, in field order: the env options that change the game."""
VARIANT_KEYS: Final = tuple(k for k in RULE_KEYS if k not in CURRICULUM_KEYS)
"""The rule variants (each a bool, ``False`` in the game)."""
DEFAULT_RULES: Final = RuleOptions()
VARIANTS: Final = {
    "always": RuleOptions(bonus_always=True),
    "more": RuleOptions(bonus_joker_grants_more=True),
}
"""Each rule variant alone, by its short name (golden files and playthroughs)."""


def add_variant_flags(parser: argparse.ArgumentParser) -> None:
    """A script's ``--bonus-always``-style flag for each rule variant."""
    for name in VARIANT_KEYS:
        parser.add_argument(f"--{name.replace('_', '-')}", action="store_true", help="rule variant")


def variants_of(args: argparse.Namespace) -> dict[str, bool]:
    """The rule variants a script's flags (:func:`add_variant_flags`) select."""
    return {name: getattr(args, name) for name in VARIANT_KEYS}
