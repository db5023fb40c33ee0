"""Cold Iron as an OpenSpiel game (``coldiron_env.openspiel``) and the ``mcts`` player.

The game must agree with the env: the same deal (its cards as the chance outcomes) gives
the same legal actions, observations, outcome and return at every step.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import load_file, rule_variant_sets

pyspiel = pytest.importorskip("pyspiel")

from agents.evaluation.arena import agent_seeds, deal_decks, evaluate_agent  # noqa: E402
from agents.integrations.mcts import MCTSAgent  # noqa: E402
from coldiron_env.actions import ENV_MASKS, PHASE_OVER  # noqa: E402
from coldiron_env.cards import DECK_SIZE, FIRST_JOKER, deck_codes  # noqa: E402
from coldiron_env.dealer import shuffled_decks  # noqa: E402
from coldiron_env.env import ColdIronEnv  # noqa: E402
from coldiron_env.game import Game  # noqa: E402
from coldiron_env.openspiel import (  # noqa: E402
    DEFAULT_PARAMETERS,
    SHORT_NAME,
    ColdIronState,
    split_parameters,
)

ROOT = Path(__file__).resolve().parent.parent
PLAYTHROUGH_SCRIPT = ROOT / "tests" / "openspiel_playthrough.py"
PLAYTHROUGHS = sorted((ROOT / "tests" / "golden" / "openspiel").glob("*.txt"))
VARIANTS: tuple[dict[str, Any], ...] = (
    *rule_variant_sets(),
    {"turns": 3, "suits_required": 1},
    {"recall": False, "counting": True},
)
DECK_SEED = 4242
"""Deals of these tests (not the report seed)."""


def game_string(params: dict[str, Any]) -> str:
    if not params:
        return SHORT_NAME
    inner = ",".join(f"{k}={v}" for k, v in sorted(params.items()))
    return f"{SHORT_NAME}({inner})"


def env_kwargs(params: dict[str, Any]) -> dict[str, Any]:
    """The env options of the same game and observation."""
    return {**DEFAULT_PARAMETERS, **params}


def test_load_game_registers_and_reads_parameters() -> None:
    game = pyspiel.load_game(SHORT_NAME)
    assert game.num_players() == 1
    assert game.num_distinct_actions() == 19
    assert game.max_chance_outcomes() == DECK_SIZE
    assert game.get_parameters() == DEFAULT_PARAMETERS
    variant = pyspiel.load_game(game_string({"bonus_always": True}))
    assert variant.rules.bonus_always and not game.rules.bonus_always


@pytest.mark.parametrize("params", VARIANTS, ids=game_string)
def test_random_sim_test(params: dict[str, Any]) -> None:
    game = pyspiel.load_game(game_string(params))
    pyspiel.random_sim_test(game, num_sims=15, serialize=False, verbose=False)


def test_bad_parameters_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="turns"):
        split_parameters({"turns": 0})
    with pytest.raises(ValueError, match="recall"):
        split_parameters({"recall": 1})
    with pytest.raises(ValueError, match="unknown"):
        split_parameters({"jokers": 3})
    with pytest.raises(pyspiel.SpielError):
        pyspiel.load_game(f"{SHORT_NAME}(jokers=3)")


def test_chance_outcomes_are_the_unseen_cards_uniformly() -> None:
    game = pyspiel.load_game(SHORT_NAME)
    state = game.new_initial_state()
    state.apply_action(0)  # Threaten: one card
    outcomes = dict(state.chance_outcomes())
    assert state.is_chance_node()
    assert sum(outcomes.values()) == pytest.approx(1.0)
    assert len(outcomes) == DECK_SIZE - 1  # both Jokers are one outcome
    assert outcomes[FIRST_JOKER] == pytest.approx(2 / DECK_SIZE)
    assert FIRST_JOKER + 1 not in outcomes
    assert outcomes[0] == pytest.approx(1 / DECK_SIZE)
    state.apply_action(FIRST_JOKER)  # a Joker: the bonus is offered
    assert not state.is_chance_node()
    assert state.legal_actions() == [17, 18]
    state.apply_action(18)  # take the bonus: three draws
    outcomes = dict(state.chance_outcomes())
    assert FIRST_JOKER not in outcomes
    assert outcomes[FIRST_JOKER + 1] == pytest.approx(1 / (DECK_SIZE - 1))
    assert len(outcomes) == DECK_SIZE - 1


def test_second_joker_before_first_and_seen_cards_are_refused() -> None:
    state = pyspiel.load_game(SHORT_NAME).new_initial_state()
    state.apply_action(0)
    with pytest.raises(Exception, match="first Joker"):
        state.apply_action(FIRST_JOKER + 1)
    state.apply_action(5)  # 6 of hearts
    state.apply_action(0)
    with pytest.raises(Exception, match="not an unseen card"):
        state.apply_action(5)


def play_both(params: dict[str, Any], deck: list[int], rng: random.Random) -> tuple[Any, Any]:
    """One game on ``deck`` in the env and in OpenSpiel (chance outcomes the deck's cards),
    the same random legal actions; asserts they agree at every decision."""
    env = ColdIronEnv(**env_kwargs(params))
    obs, info = env.reset(options={"deck": deck_codes(deck)})
    state = pyspiel.load_game(game_string(params)).new_initial_state()
    drawn = 0
    reward = 0.0
    decisions = 0
    while True:
        while state.is_chance_node():
            card = deck[drawn]
            assert card in dict(state.chance_outcomes()), f"card {card} is not a chance outcome"
            state.apply_action(card)
            drawn += 1
        assert state.is_terminal() == (info["phase"] == "over")
        if not state.is_terminal():
            assert state.legal_actions() == np.flatnonzero(info["action_mask"]).tolist()
        np.testing.assert_array_equal(
            np.asarray(state.observation_tensor(0), dtype=np.float32), obs
        )
        assert drawn == DECK_SIZE - info["deck_count"]
        if state.is_terminal():
            return state, (info, reward, decisions)
        action = rng.choice(state.legal_actions())
        state.apply_action(action)
        obs, step_reward, terminated, _, info = env.step(action)
        reward = float(step_reward)
        decisions += 1
        assert terminated == (info["phase"] == "over")


@pytest.mark.parametrize("params", VARIANTS, ids=game_string)
def test_a_dealt_deck_plays_as_in_the_env(params: dict[str, Any]) -> None:
    decks = shuffled_decks(np.random.default_rng(DECK_SEED), 12).tolist()
    rng = random.Random(7)
    outcomes = set()
    for deck in decks:
        state, (info, reward, decisions) = play_both(params, deck, rng)
        assert state.outcome == info["outcome"]
        assert state.returns() == [reward]
        assert state.engine.steps == decisions
        outcomes.add(info["outcome"])
    assert outcomes, "no game was played"


def test_heuristic_wins_the_same_games_in_openspiel_and_in_the_engine() -> None:
    """Returns agree with the engine on games that are won (random play never wins)."""
    from agents.players.heuristic import HeuristicAgent
    from coldiron_env.knowledge import Knowledge

    decks = deal_decks(DECK_SEED, 40).tolist()
    player = HeuristicAgent()
    wins = 0
    for deck in decks:
        engine = Game(deck)
        state: ColdIronState = pyspiel.load_game(SHORT_NAME).new_initial_state()
        drawn = 0
        while not state.is_terminal():
            if state.is_chance_node():
                state.apply_action(deck[drawn])
                drawn += 1
                continue
            action = player.act_knowledge(Knowledge.from_game(state.engine))
            assert action == player.act_knowledge(Knowledge.from_game(engine))
            state.apply_action(action)
            engine.step(action)
        assert engine.phase == PHASE_OVER
        assert state.outcome == engine.outcome
        assert state.returns() == [1.0 if engine.won else 0.0]
        wins += engine.won
    assert wins > 0, "no deal was won: the returns of a win were not compared"


def test_observation_at_a_chance_node_is_the_position_before_the_action() -> None:
    state = pyspiel.load_game(SHORT_NAME).new_initial_state()
    before = list(state.observation_tensor(0))
    state.apply_action(1)  # the Iron
    assert state.is_chance_node()
    assert list(state.observation_tensor(0)) == before
    assert str(state).endswith("Pending: iron; drew nothing yet")
    state.apply_action(45)  # a court card: Hurt 1, the Iron may go on
    assert not state.is_chance_node()
    assert list(state.observation_tensor(0)) != before


# --------------------------------------------------------------------------- golden
def load_script() -> Any:
    return load_file(PLAYTHROUGH_SCRIPT, "openspiel_playthrough")


def test_golden_playthroughs_exist() -> None:
    assert len(PLAYTHROUGHS) >= 1, "no golden playthrough in tests/golden/openspiel"


@pytest.mark.parametrize("path", PLAYTHROUGHS, ids=lambda p: p.stem)
def test_golden_playthrough_replays(path: Path) -> None:
    from open_spiel.python.algorithms import generate_playthrough

    original = path.read_text(encoding="utf-8")
    params = load_script().parse_playthrough(original)
    assert len(params["action_sequence"]) > 10
    replayed = generate_playthrough.playthrough(**params, seed=0)
    old, new = original.splitlines(), replayed.splitlines()
    for i, (a, b) in enumerate(zip(old, new, strict=False)):
        assert a == b, f"{path.name} line {i + 1} differs:\n  kept: {a}\n  now:  {b}"
    assert len(old) == len(new), f"{path.name}: {len(new)} lines now, {len(old)} kept"


def test_playthrough_check_mode_reports_up_to_date() -> None:
    assert load_script().main(["--check"]) == 0, "run tests/openspiel_playthrough.py"


# --------------------------------------------------------------------------- mcts
def test_mcts_plays_through_the_env_reproducibly() -> None:
    decks = deal_decks(DECK_SEED, 3)
    seeds = agent_seeds(DECK_SEED, 3)
    first = evaluate_agent(MCTSAgent(simulations=8), decks, seeds)
    again = evaluate_agent(MCTSAgent(simulations=8), decks, seeds)
    assert first.episodes == 3 and first.outcomes["illegal"] == 0
    assert first.outcomes == again.outcomes and first.total_steps == again.total_steps
    variant = evaluate_agent(MCTSAgent(simulations=8), decks, seeds, {"bonus_always": True})
    assert variant.episodes == 3 and variant.outcomes["illegal"] == 0


def test_mcts_tracks_the_game_from_what_it_sees() -> None:
    agent = MCTSAgent(simulations=4)
    env = ColdIronEnv()
    deck = deal_decks(DECK_SEED, 1)[0].tolist()
    obs, info = env.reset(options={"deck": deck_codes(deck)})
    agent.reset(seed=3)
    done = False
    while not done:
        action = agent.act(obs, info["action_mask"], info)
        assert agent.state.engine.hand == env.game.hand
        assert agent.state.engine.discarded == env.game.discarded
        obs, _, done, _, info = env.step(action)
    # a step's cards misreported: the agent notices
    env.reset(options={"deck": deck_codes(deck)})
    agent.reset(seed=3)
    obs, info = env.reset(options={"deck": deck_codes(deck)})
    action = agent.act(obs, info["action_mask"], info)
    obs, _, _, _, info = env.step(action)
    info["drawn"] = []
    with pytest.raises(RuntimeError, match="more cards"):
        agent.act(obs, info["action_mask"], info)


def test_mcts_needs_the_info_and_valid_settings() -> None:
    agent = MCTSAgent(simulations=2)
    with pytest.raises(ValueError, match="info"):
        agent.act(np.zeros(48), ENV_MASKS[0], None)
    with pytest.raises(ValueError, match="simulations"):
        MCTSAgent(simulations=0)
    with pytest.raises(ValueError, match="uct_c"):
        MCTSAgent(uct_c=-1.0)
