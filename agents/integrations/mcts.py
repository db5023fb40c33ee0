"""``mcts``: OpenSpiel's MCTS bot (random rollouts) playing Cold Iron through the env.

The bot searches the OpenSpiel game :mod:`coldiron_env.openspiel` (``python_cold_iron``),
whose draws are chance nodes over the unseen cards. The agent plays through the project's
:class:`~agents.players.base.Agent` interface, so the arena plays it on the same deals as
every other player: it rebuilds the OpenSpiel state from what a player sees (its own
actions, and the codes of the cards each step drew, ``info["drawn"]``; never the deck's
order), checks it against the step's ``info`` (phase, hand, Hurt, deck count, legal
actions), and asks :class:`open_spiel.python.algorithms.mcts.MCTSBot` for the action.

Search: a fixed number of simulations per decision (``simulations``), UCT constant
``uct_c``, ``rollouts`` uniformly random rollouts per leaf (OpenSpiel's
``RandomRolloutEvaluator``), MCTS-Solver back-ups on. All randomness comes from one
``numpy.random.RandomState`` seeded by :meth:`MCTSAgent.reset` (the arena's per-deal seed).

Needs ``open_spiel`` (the ``openspiel`` extra). The players ``mcts`` (100 simulations a
decision) and ``mcts-large`` (1,000) register themselves by name (``pyproject.toml``'s
``coldiron.players`` entry points, :func:`make_mcts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import numpy as np
import pyspiel
from open_spiel.python.algorithms.mcts import MCTSBot, RandomRolloutEvaluator

from agents.players.base import Agent
from coldiron_env.actions import PHASE_NAMES
from coldiron_env.cards import DECK_SIZE, FIRST_JOKER, JOKER_CODE, hand_codes, parse_card
from coldiron_env.openspiel import SHORT_NAME, ColdIronState
from coldiron_env.options import DEFAULT_RULES, RuleOptions

DEFAULT_SIMULATIONS: Final = 100
"""Simulations per decision by default (the roster's ``mcts``; ``mcts-large``: 1,000)."""
DEFAULT_UCT_C: Final = 2.0
"""OpenSpiel's example value (``open_spiel/python/examples/mcts.py``)."""
DEFAULT_ROLLOUTS: Final = 1
NO_ACTION: Final = -1
SEED_MODULUS: Final = 2**32
"""``numpy.random.RandomState`` takes seeds below this."""


def load_game(rules: RuleOptions = DEFAULT_RULES) -> Any:
    """``python_cold_iron`` under ``rules`` (the observation options do not matter to MCTS)."""
    return pyspiel.load_game(SHORT_NAME, dict(rules.to_dict()))


def _check_positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"mcts: {name} must be a positive int, got {value!r}")
    return value


class MCTSAgent(Agent):
    """OpenSpiel's MCTS with random rollouts, fixed simulations a decision, seeded by ``reset``."""

    name = "mcts"
    searches = True

    def __init__(
        self,
        simulations: int = DEFAULT_SIMULATIONS,
        uct_c: float = DEFAULT_UCT_C,
        rollouts: int = DEFAULT_ROLLOUTS,
        rules: RuleOptions = DEFAULT_RULES,
        name: str = "mcts",
    ) -> None:
        self.simulations = _check_positive("simulations", simulations)
        self.rollouts = _check_positive("rollouts", rollouts)
        if isinstance(uct_c, bool) or not isinstance(uct_c, (int, float)) or not uct_c > 0:
            raise ValueError(f"mcts: uct_c must be a positive number, got {uct_c!r}")
        self.uct_c = float(uct_c)
        self.name = name
        self._rules = rules
        self._game = load_game(rules)
        self._rng = np.random.RandomState()
        self._bot = self._make_bot()
        self._state: ColdIronState = self._game.new_initial_state()
        self._last_action = NO_ACTION

    def _make_bot(self) -> MCTSBot:
        evaluator = RandomRolloutEvaluator(n_rollouts=self.rollouts, random_state=self._rng)
        return MCTSBot(
            self._game,
            self.uct_c,
            self.simulations,
            evaluator,
            solve=True,
            random_state=self._rng,
        )

    def set_rules(self, rules: RuleOptions) -> None:
        """Play under ``rules`` (the arena calls this before an evaluation)."""
        if rules != self._rules:
            self._rules = rules
            self._game = load_game(rules)
            self._bot = self._make_bot()
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self._rng.seed(seed % SEED_MODULUS)
        self._state = self._game.new_initial_state()
        self._last_action = NO_ACTION

    @property
    def state(self) -> ColdIronState:
        """The OpenSpiel state the agent has rebuilt (for tests)."""
        return self._state

    def observe_step(self, info: Mapping[str, Any]) -> None:
        """Apply the agent's last action and the cards it drew (``info["drawn"]``) to the
        OpenSpiel state, then check the state against ``info``."""
        state = self._state
        if self._last_action != NO_ACTION:
            state.apply_action(self._last_action)
            self._last_action = NO_ACTION
            for code in info["drawn"]:
                if not state.is_chance_node():
                    raise RuntimeError(
                        f"mcts: the step drew {list(info['drawn'])} but the OpenSpiel game "
                        f"completed the action before card {code!r}"
                    )
                state.apply_action(self._card_id(code))
        elif info.get("drawn"):
            raise RuntimeError(f"mcts: cards {info['drawn']} drawn before the agent acted")
        if state.is_chance_node():
            raise RuntimeError("mcts: the OpenSpiel game expects more cards than the step drew")
        self._check(info)

    def _card_id(self, code: str) -> int:
        if code == JOKER_CODE:  # Jokers are 52 then 53 in the order drawn
            return FIRST_JOKER + 1 if self._state.seen >> FIRST_JOKER & 1 else FIRST_JOKER
        return parse_card(code)

    def _check(self, info: Mapping[str, Any]) -> None:
        engine = self._state.engine
        mine = {
            "phase": PHASE_NAMES[engine.phase],
            "hand": hand_codes(engine.hand),
            "hurt": engine.hurt,
            "turn": engine.turn,
            "deck_count": DECK_SIZE - engine.pos,
        }
        theirs = {key: info[key] for key in mine if key in info}
        differ = {k: (mine[k], theirs[k]) for k in theirs if list_or(mine[k]) != list_or(theirs[k])}
        if differ:
            raise RuntimeError(f"mcts: lost track of the game (mine, env's): {differ}")

    def replay(
        self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None, action: int
    ) -> None:
        self._observe(info)
        self._last_action = action  # applied with the cards its step draws, at the next one

    def act(self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None = None) -> int:
        self._observe(info)
        legal = self._state.legal_actions()
        masked = np.flatnonzero(np.asarray(action_mask)).tolist()
        if legal != masked:
            raise RuntimeError(f"mcts: legal actions {legal} differ from the env's mask {masked}")
        action = int(self._bot.step(self._state))
        self._last_action = action
        return action

    def _observe(self, info: dict[str, Any] | None) -> None:
        if info is None or "drawn" not in info:
            raise ValueError(
                "mcts needs each step's info from the env (the cards it drew, info['drawn'])"
            )
        self.observe_step(info)


def list_or(value: Any) -> Any:
    """Lists and tuples compared as lists."""
    return list(value) if isinstance(value, (list, tuple)) else value


MCTS_BUDGETS: Final = {"mcts": 100, "mcts-large": 1000}
"""The registered players' simulations a decision."""


def make_mcts(name: str) -> MCTSAgent:
    """The registered player ``name`` (``mcts`` or ``mcts-large``)."""
    return MCTSAgent(simulations=MCTS_BUDGETS[name], name=name)
