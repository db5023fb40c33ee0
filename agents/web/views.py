"""What the pages draw: a game's state at one moment, as the engine holds it, in plain data.

A state is a list (compact: a report holds half a million of them) read by
``static/viewer.js``: ``[action, turn, hurt, deck, phase, iron, hand, drawn, marked, runs]``,
where ``action`` is the action taken from this state (-1 at the end), ``hand``, ``drawn`` (by
the step that led here) and ``marked`` (the held cards of each suit's best run window, as the
text render stars them) are card ids written as one character each of :data:`CARD_CHARS`, and
``runs`` a digit a suit: its best window's cards held, 3 for a complete run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from coldiron_env.actions import ACTION_LABELS, ACTION_NAMES, LEGAL_ACTIONS, PHASE_NAMES
from coldiron_env.cards import CARD_CODES, NUM_SUITS, SUIT_NAMES, suit_field
from coldiron_env.game import OUTCOMES, Game
from coldiron_env.judge import BEST_WINDOW, HAS_RUN, run_cards
from coldiron_env.options import MAX_HURT, RuleOptions
from coldiron_env.render import clock, slain_by

CARD_CHARS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
RUN_DONE: Final = 3  # a suit's ``runs`` digit once its run is complete
SAVE_VERSION: Final = 1  # scripts/play.py's saved-game format

META: Final[dict[str, Any]] = {
    "cards": CARD_CODES,
    "chars": CARD_CHARS,
    "actions": ACTION_NAMES,
    "labels": ACTION_LABELS,
    "phases": PHASE_NAMES,
    "legal": LEGAL_ACTIONS,
    "suits": SUIT_NAMES,
    "outcomes": OUTCOMES,
    "max_hurt": MAX_HURT,
}
"""The names the pages show, by index (the engine's own tables)."""


def cards(ids: Sequence[int] | int) -> str:
    """Card ids (or a bit mask of them) as :data:`CARD_CHARS` characters."""
    if isinstance(ids, int):
        ids = [c for c in range(ids.bit_length()) if ids >> c & 1]
    return "".join(CARD_CHARS[c] for c in ids)


def state(game: Game, action: int = -1) -> list[Any]:
    """``game``'s state now (the module docstring's list), ``action`` the one taken from it."""
    unseen = ~(game.hand | game.discarded)
    marked, runs = [], ""
    for suit in range(NUM_SUITS):
        field = suit_field(game.hand, suit)
        window = run_cards(field, suit_field(unseen, suit))
        marked += [suit * 10 + r for r in range(10) if window >> r & 1]
        runs += str(RUN_DONE if HAS_RUN[field] else BEST_WINDOW[field])
    return [action, game.turn, game.hurt, game.deck_count, game.phase, game.iron_count,
            cards(game.hand), cards(game.drawn), cards(marked), runs]  # fmt: skip


def replay(deck: Sequence[int], actions: Sequence[int], rules: RuleOptions) -> list[list[Any]]:
    """Every state of the game ``actions`` play on ``deck`` (card ids, as the engine takes them),
    each with the action taken from it: what a report shows, step by step."""
    game = Game(deck, rules)
    states = []
    for action in actions:
        states.append(state(game, action))
        if game.phase == PHASE_NAMES.index("over"):
            break
        game.step(action) if game.is_legal(action) else game.forfeit(action)
    states.append(state(game))
    return states


def status(game: Game) -> dict[str, Any]:
    """The play page's view of ``game``: its state, clock, legal actions and ending."""
    over = game.outcome is not None
    return {
        "state": state(game),
        "turns": game.rules.turns,
        "clock": clock(game.turn),
        "legal": [] if over else list(LEGAL_ACTIONS[game.phase]),
        "outcome": game.outcome,
        "why": slain_by(game).strip(" ()"),
    }


def save_document(
    deck: Sequence[str], env_kwargs: dict[str, Any], actions: Sequence[int]
) -> dict[str, Any]:
    """A game in ``scripts/play.py``'s saved format (``--load FILE`` resumes it)."""
    return {
        "version": SAVE_VERSION,
        "deck": list(deck),
        "env_kwargs": dict(env_kwargs),
        "actions": [ACTION_NAMES[a] for a in actions],
    }
