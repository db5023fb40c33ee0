"""Cold Iron as an OpenSpiel game: ``import coldiron_env.openspiel`` registers ``python_cold_iron``.

    import pyspiel
    from coldiron_env.openspiel import game_string  # registers the game
    from coldiron_env.options import VARIANTS

    game = pyspiel.load_game("python_cold_iron")                   # the standard game
    variant = pyspiel.load_game(game_string(VARIANTS["always"]))  # a rule variant

One player; the draws are chance nodes. A player action that draws cards
(every action but Stop) leaves the state at a chance node whose outcomes are the
cards not seen yet, uniformly: the perfect-memory view, which is exactly the
distribution of the next card given everything seen. The two Jokers are one
outcome while both are unseen (probability 2/n, labelled 52: the engine labels
Jokers 52 then 53 in the order drawn), the remaining one (53) with probability
1/n once the first is seen. How many cards an action draws depends on the cards
drawn (a Rack draws until a numbered card of the rank or suit named; a Joker's
bonus draws three, more under a variant), but each draw decision depends only on
the cards drawn before it. So after each chance outcome the pending action is
tried on a clone of the engine (:class:`~coldiron_env.game.Game`) whose deck is
the cards known so far followed by the unseen cards in any order: when the step
consumed no card past the known ones, the action is complete and the clone is the
new position; otherwise another card is drawn. The rules are the engine's; this
module only decides when to ask chance for a card. The engine is unchanged.

A sequence of chance outcomes equal to a dealt deck (``coldiron_env.dealer``,
Jokers already 52 before 53) plays that deck exactly as ``Game(deck)`` does.

Parameters (all optional): every field of :class:`~coldiron_env.options.RuleOptions`
with its default (the rule variants, and ``turns`` / ``suits_required`` for training
curricula), and the observation options of the env:

| parameter | default | meaning |
| --- | --- | --- |
| ``recall`` | True | observation: the discard pile (so the tensor is the whole state) |
| ``counting`` | False | observation: the counting block (153 values) |

The observation tensor is the env's flat observation for the same options
(``ColdIronEnv(recall=..., counting=...)``, :class:`~coldiron_env.observation.FlatEncoder`);
at a chance node it is that of the position before the pending action. Returns: 1.0
for a win, 0.0 for any loss (terminal rewards only, as OpenSpiel's MCTS requires). The
information-state string is the history (OpenSpiel's observer for public-information
games); the state's ``str`` is the env's text rendering.

Not imported by ``coldiron_env/__init__.py``: the core package needs only gymnasium and
numpy; this module needs ``open_spiel`` (the ``openspiel`` extra).
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import pyspiel
from open_spiel.python.observation import IIGObserverForPublicInfoGame

from coldiron_env.actions import ACTION_NAMES, LEGAL_ACTIONS, NUM_ACTIONS, PHASE_NAMES, PHASE_OVER
from coldiron_env.analysis import FULL_DECK_MASK, JOKER_MASK
from coldiron_env.cards import CARD_CODES, DECK_SIZE, FIRST_JOKER, hand_codes
from coldiron_env.game import WON, Game, max_decisions
from coldiron_env.observation import FlatEncoder, flat_size
from coldiron_env.options import DEFAULT_RULES, RuleOptions
from coldiron_env.render import render_text

SHORT_NAME: Final = "python_cold_iron"
"""The name ``pyspiel.load_game`` knows the game by."""
NUM_PLAYERS: Final = 1
WIN_RETURN: Final = 1.0
LOSS_RETURN: Final = 0.0
NO_ACTION: Final = -1
"""``pending`` when no player action is waiting for cards."""
RULE_PARAMETERS: Final[dict[str, Any]] = DEFAULT_RULES.to_dict()
"""The rule variants (``RuleOptions``' fields and defaults)."""
OBSERVATION_PARAMETERS: Final[dict[str, Any]] = {"recall": True, "counting": False}
"""The observation options (``ColdIronEnv``'s ``recall`` and ``counting``)."""
DEFAULT_PARAMETERS: Final[dict[str, Any]] = {**RULE_PARAMETERS, **OBSERVATION_PARAMETERS}
SECOND_JOKER: Final = FIRST_JOKER + 1

GAME_TYPE: Final = pyspiel.GameType(
    short_name=SHORT_NAME,
    long_name="Python Cold Iron",
    dynamics=pyspiel.GameType.Dynamics.SEQUENTIAL,
    chance_mode=pyspiel.GameType.ChanceMode.EXPLICIT_STOCHASTIC,
    information=pyspiel.GameType.Information.PERFECT_INFORMATION,
    utility=pyspiel.GameType.Utility.GENERAL_SUM,
    reward_model=pyspiel.GameType.RewardModel.TERMINAL,
    max_num_players=NUM_PLAYERS,
    min_num_players=NUM_PLAYERS,
    provides_information_state_string=True,
    provides_information_state_tensor=False,
    provides_observation_string=True,
    provides_observation_tensor=True,
    parameter_specification=DEFAULT_PARAMETERS,
)


def game_string(rules: RuleOptions) -> str:
    """The ``pyspiel.load_game`` string of the game under ``rules`` (its parameters that
    differ from the game's)."""
    changes = rules.changes()
    inner = ",".join(f"{k}={v}" for k, v in changes.items())
    return f"{SHORT_NAME}({inner})" if changes else SHORT_NAME


def split_parameters(params: dict[str, Any] | None) -> tuple[RuleOptions, bool, bool]:
    """The rules, ``recall`` and ``counting`` of a parameter dict (missing ones default);
    an unknown parameter or a bad value is refused by name (``ValueError``)."""
    values = {**DEFAULT_PARAMETERS, **(params or {})}
    unknown = sorted(set(values) - set(DEFAULT_PARAMETERS))
    if unknown:
        raise ValueError(
            f"unknown {SHORT_NAME} parameter(s) {unknown}; known: {sorted(DEFAULT_PARAMETERS)}"
        )
    rules = RuleOptions.from_dict({k: values[k] for k in RULE_PARAMETERS})
    flags = []
    for name in OBSERVATION_PARAMETERS:
        value = values[name]
        if not isinstance(value, bool):
            raise ValueError(f"{SHORT_NAME} parameter {name!r} must be a bool, got {value!r}")
        flags.append(value)
    return rules, flags[0], flags[1]


class ColdIronGame(pyspiel.Game):  # type: ignore[misc]  # pyspiel has no type information
    """The game: rules and observation options from its parameters; makes states and observers."""

    def __init__(self, params: dict[str, Any] | None = None) -> None:
        rules, recall, counting = split_parameters(params)
        self.rules = rules
        self.recall = recall
        self.counting = counting
        info = pyspiel.GameInfo(
            num_distinct_actions=NUM_ACTIONS,
            max_chance_outcomes=DECK_SIZE,
            num_players=NUM_PLAYERS,
            min_utility=LOSS_RETURN,
            max_utility=WIN_RETURN,
            utility_sum=None,
            # OpenSpiel takes this one figure as the bound on decisions and on chance nodes
            # (a Python game's MaxChanceNodesInHistory): every draw is a chance node.
            max_game_length=max(max_decisions(rules), DECK_SIZE),
        )
        super().__init__(GAME_TYPE, info, {**DEFAULT_PARAMETERS, **(params or {})})

    def new_initial_state(self) -> ColdIronState:
        return ColdIronState(self)

    def make_py_observer(
        self, iig_obs_type: Any = None, params: dict[str, Any] | None = None
    ) -> Any:
        """The env's flat observation (the default observer), or the history for a
        perfect-recall information state."""
        if iig_obs_type is None or (iig_obs_type.public_info and not iig_obs_type.perfect_recall):
            return ColdIronObserver(self, params)
        return IIGObserverForPublicInfoGame(iig_obs_type, params)


class ColdIronState(pyspiel.State):  # type: ignore[misc]  # pyspiel has no type information
    """A position: the engine's game after the last completed action, plus the player
    action waiting for cards (``pending``) and the cards it has drawn so far (``partial``).

    The engine's ``deck[:pos]`` are the cards drawn so far, in order; the rest of its
    deck is filler that is never read (every read past the known cards is found out
    on a clone before it is committed).
    """

    def __init__(self, game: ColdIronGame) -> None:
        super().__init__(game)
        self.engine = Game(list(range(DECK_SIZE)), game.rules)
        self.pending = NO_ACTION
        self.partial: list[int] = []
        self._partial_mask = 0

    # ------------------------------------------------------------ queries
    @property
    def seen(self) -> int:
        """Bit mask of every card drawn, the pending action's included."""
        engine = self.engine
        return engine.hand | engine.discarded | self._partial_mask

    def current_player(self) -> int:
        if self.pending != NO_ACTION:
            return int(pyspiel.PlayerId.CHANCE)
        if self.engine.phase == PHASE_OVER:
            return int(pyspiel.PlayerId.TERMINAL)
        return 0

    def is_terminal(self) -> bool:
        return self.pending == NO_ACTION and self.engine.phase == PHASE_OVER

    def _legal_actions(self, player: int) -> list[int]:
        if self.pending != NO_ACTION or self.engine.phase == PHASE_OVER:
            return []
        return list(LEGAL_ACTIONS[self.engine.phase])

    def chance_outcomes(self) -> list[tuple[int, float]]:
        """The unseen cards, each ``1/n``; the Jokers one outcome (the next Joker's label)."""
        if self.pending == NO_ACTION:
            raise ValueError("chance_outcomes() asked of a state that is not a chance node")
        unseen = FULL_DECK_MASK & ~self.seen
        count = unseen.bit_count()
        outcomes = [(c, 1.0 / count) for c in range(FIRST_JOKER) if unseen >> c & 1]
        jokers = (unseen & JOKER_MASK).bit_count()
        if jokers:
            label = FIRST_JOKER if unseen >> FIRST_JOKER & 1 else SECOND_JOKER
            outcomes.append((label, jokers / count))
        return outcomes

    def returns(self) -> list[float]:
        won = self.is_terminal() and self.engine.outcome == WON
        return [WIN_RETURN if won else LOSS_RETURN]

    def rewards(self) -> list[float]:
        return self.returns()

    @property
    def outcome(self) -> str | None:
        """The engine's outcome code once the game is over (``won``, ``slain``...)."""
        return self.engine.outcome if self.is_terminal() else None

    # ------------------------------------------------------------ moves
    def _apply_action(self, action: int) -> None:
        if self.pending != NO_ACTION:
            self._draw(action)
        else:
            if self.engine.phase == PHASE_OVER:
                raise ValueError("the game is over: no action can be applied")
            if action not in LEGAL_ACTIONS[self.engine.phase]:
                raise ValueError(self.engine.describe_illegal(action))
            self.pending = action
        self._complete()

    def _draw(self, card: int) -> None:
        """Chance drew ``card`` for the pending action."""
        if not 0 <= card < DECK_SIZE or self.seen >> card & 1:
            raise ValueError(f"chance outcome {card} is not an unseen card")
        if card == SECOND_JOKER and not self.seen >> FIRST_JOKER & 1:
            raise ValueError(f"the first Joker drawn is card {FIRST_JOKER}, got {card}")
        self.partial.append(card)
        self._partial_mask |= 1 << card

    def _complete(self) -> None:
        """Commit the pending action if the cards drawn so far complete it (tried on a clone)."""
        engine = self.engine
        known = engine.deck[: engine.pos] + self.partial
        unseen = FULL_DECK_MASK & ~self.seen
        trial = engine.clone()
        trial.deck = known + [c for c in range(DECK_SIZE) if unseen >> c & 1]
        trial.step(self.pending)
        if trial.pos <= len(known):
            self.engine = trial
            self.pending = NO_ACTION
            self.partial = []
            self._partial_mask = 0

    # ------------------------------------------------------------ text
    def _action_to_string(self, player: int, action: int) -> str:
        if player == pyspiel.PlayerId.CHANCE:
            return f"draw {CARD_CODES[action]}" if 0 <= action < DECK_SIZE else f"card {action}"
        return ACTION_NAMES[action] if 0 <= action < NUM_ACTIONS else f"action {action}"

    def __str__(self) -> str:
        text = render_text(self.engine)
        if self.pending != NO_ACTION:
            drawn = " ".join(CARD_CODES[c] for c in self.partial) or "nothing yet"
            text += f"\nPending: {ACTION_NAMES[self.pending]}; drew {drawn}"
        return text


class ColdIronObserver:
    """The env's flat observation (OpenSpiel's ``PyObserver`` interface: ``tensor``,
    ``dict``, ``set_from``, ``string_from``)."""

    def __init__(self, game: ColdIronGame, params: dict[str, Any] | None) -> None:
        if params:
            raise ValueError(
                f"{SHORT_NAME} observers take no parameters (set recall/counting on the "
                f"game), got {params}"
            )
        self._encoder = FlatEncoder(game.recall, game.rules.turns, game.counting)
        self.tensor = np.zeros(flat_size(game.recall, game.counting), dtype=np.float32)
        self.dict = {"observation": self.tensor}

    def set_from(self, state: ColdIronState, player: int) -> None:
        self._encoder.clear()
        self.tensor[:] = self._encoder.encode(state.engine)

    def string_from(self, state: ColdIronState, player: int) -> str:
        engine = state.engine
        hand = " ".join(hand_codes(engine.hand)) or "-"
        return (
            f"turn {engine.turn}/{engine.rules.turns} phase {PHASE_NAMES[engine.phase]} "
            f"iron {engine.iron_count} hurt {engine.hurt} deck {DECK_SIZE - engine.pos} "
            f"hand {hand} discarded {' '.join(hand_codes(engine.discarded)) or '-'}"
        )


pyspiel.register_game(GAME_TYPE, ColdIronGame)
