"""The one play loop (agents/evaluation/lockstep.py): seats, hooks, given envs, and the
imitation and DAgger datasets it records, against the same games replayed one env at a time."""

from __future__ import annotations

import itertools
import re
from typing import Any

import numpy as np
import pytest

from agents.evaluation.arena import validation_decks
from agents.evaluation.lockstep import Episode, Move, play_lockstep
from agents.learning.imitation import collect_dagger, collect_demonstrations
from agents.learning.sb3_agent import MaskedPolicy, SB3Agent
from agents.players.base import Agent
from agents.players.heuristic import HeuristicAgent
from agents.players.planner import PlannerAgent
from agents.registry import make_agent
from coldiron_env.cards import deck_codes
from coldiron_env.env import ColdIronEnv
from coldiron_env.knowledge import Knowledge
from coldiron_env.options import RuleOptions

GAMMA = 0.9


def _returns(rewards: list[float]) -> list[float]:
    g, out = 0.0, []
    for r in reversed(rewards):
        g = r + GAMMA * g
        out.append(g)
    return out[::-1]


def test_demonstrations_are_the_teachers_games_replayed_one_env_at_a_time() -> None:
    demos = collect_demonstrations(HeuristicAgent(), {"recall": True}, 6, 40, GAMMA)
    env, teacher = ColdIronEnv(recall=True), HeuristicAgent()
    row, wins = 0, 0
    for ep in range(6):
        obs, info = env.reset(seed=40 + ep)
        teacher.reset(40 + ep)
        rewards, done = [], False
        while not done:
            action = teacher.act(obs, info["action_mask"], info)
            assert np.array_equal(demos.obs[row], obs) and demos.actions[row] == action
            assert np.array_equal(demos.masks[row], info["action_mask"].astype(bool))
            assert demos.episode[row] == ep
            obs, reward, done, _, info = env.step(action)
            rewards.append(float(reward))
            row += 1
        assert np.allclose(demos.returns[row - len(rewards) : row], _returns(rewards))
        wins += info["outcome"] == "won"
    assert row == len(demos) and (demos.episodes, demos.wins) == (6, wins)


def test_dagger_rows_are_the_students_games_labelled_by_fresh_teachers() -> None:
    """Batches of 4 over 9 deals (the last batch short): each row is the student's game as
    one env plays it, labelled by a teacher that followed that game alone."""
    agent = make_agent("trained")
    assert isinstance(agent, SB3Agent)
    demos = collect_dagger(
        agent.model, lambda _: HeuristicAgent(), agent.env_kwargs, 9, 70, GAMMA, batch=4
    )
    env, student = ColdIronEnv(**agent.env_kwargs), MaskedPolicy(agent.model)
    row, wins, labels_differ = 0, 0, 0
    for ep in range(9):
        obs, info = env.reset(seed=70 + ep)
        teacher = HeuristicAgent()
        teacher.reset(70 + ep)
        rewards, done = [], False
        while not done:
            label = teacher.act(obs, info["action_mask"], info)
            mask = info["action_mask"].astype(bool)
            move = int(student.act(obs[None], mask[None])[0])
            assert np.array_equal(demos.obs[row], obs) and demos.actions[row] == label
            assert np.array_equal(demos.masks[row], mask) and demos.episode[row] == ep
            labels_differ += label != move
            obs, reward, done, _, info = env.step(move)
            rewards.append(float(reward))
            row += 1
        assert np.allclose(demos.returns[row - len(rewards) : row], _returns(rewards))
        wins += info["outcome"] == "won"
    assert row == len(demos) and (demos.episodes, demos.wins) == (9, wins)
    assert labels_differ, "the labels must not be the student's moves for this to test"


class _Counter(Agent):
    """Plays the lowest legal action; counts its decisions."""

    def __init__(self) -> None:
        self.decisions = 0

    def act(self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None = None) -> int:
        self.decisions += 1
        return int(np.flatnonzero(action_mask)[0])


def test_seats_hooks_and_given_envs() -> None:
    """A seat per game, in order; ``on_start`` once per game with its reset; ``on_move``
    chained step to step, the last one ending the game; given envs reused, not closed."""
    seated: list[int] = []
    started: dict[int, Any] = {}
    moves: dict[int, list[Move]] = {}
    players = [_Counter() for _ in range(5)]

    def seat(game: int) -> Agent:
        seated.append(game)
        return players[game]

    def start(game: int, obs: Any, info: dict[str, Any]) -> None:
        started[game] = obs

    envs = [ColdIronEnv(), ColdIronEnv()]
    resets = [{"seed": 10 + k} for k in range(5)]

    def moved(move: Move) -> None:
        moves.setdefault(move.game, []).append(move)

    ended = play_lockstep(seat, {}, resets, envs=envs, on_start=start, on_move=moved)
    assert seated == list(range(5)) and sorted(started) == list(range(5))
    alone = play_lockstep(lambda _: _Counter(), {}, resets, batch=1)
    assert ended == alone and len({e.steps for e in ended}) > 1
    for game, episode in enumerate(ended):
        played = moves[game]
        assert isinstance(episode, Episode) and len(played) == episode.steps
        assert players[game].decisions == episode.steps
        assert played[0].obs is started[game]
        assert all(a.next_obs is b.obs for a, b in itertools.pairwise(played))
        assert played[-1].terminated and not any(m.terminated for m in played[:-1])
        assert played[-1].next_info["outcome"] == episode.outcome
    assert all(env.game.outcome is not None for env in envs)  # still open: the last games


def test_the_vector_engine_refuses_seats_and_hooks() -> None:
    agent = make_agent("trained")
    assert isinstance(agent, SB3Agent)
    resets = [{"seed": 1}]
    for extra in ({"on_move": print}, {"on_start": print}, {"envs": [ColdIronEnv()]}):
        with pytest.raises(ValueError, match="vector engine plays a BatchPolicy alone"):
            play_lockstep(agent.batch_policy, agent.env_kwargs, resets, engine="vector", **extra)
    with pytest.raises(ValueError, match="vector engine"):
        play_lockstep(lambda _: _Counter(), {}, resets, engine="vector")
    with pytest.raises(ValueError, match="batch must be positive"):
        play_lockstep(lambda _: _Counter(), {}, resets, batch=0)
    assert play_lockstep(lambda _: _Counter(), {}, []) == []  # no game: nothing played


@pytest.mark.parametrize("rules", [{}, {"bonus_always": True, "turns": 12}])
def test_the_game_engine_plays_the_envs_games_and_shows_only_knowledge(
    rules: dict[str, Any],
) -> None:
    """On the rules engine, a player deciding from knowledge plays the games the env plays
    (the same actions, outcomes, turns and decks), its hooks shown what a player knows
    (never the ``Game``: its deck order), the env's masks and its win reward."""
    decks = validation_decks(77, 12)
    resets = [{"options": {"deck": deck_codes(row)}} for row in decks.tolist()]
    moves: dict[str, dict[int, list[Move]]] = {}
    starts: dict[str, dict[int, list[int]]] = {"game": {}, "single": {}}
    ended = {}
    for engine in ("game", "single"):

        def seat(game: int) -> Agent:
            agent = make_agent("planner")  # its sampled orders seeded by the game
            assert isinstance(agent, PlannerAgent)
            agent.set_rules(RuleOptions.from_kwargs(rules))  # as evaluation tells it
            agent.reset(seed=game)
            return agent

        played = moves.setdefault(engine, {})
        ended[engine] = play_lockstep(
            seat,
            rules,
            resets,
            1,
            engine,  # type: ignore[arg-type]
            on_move=lambda move, played=played: played.setdefault(move.game, []).append(move),
            on_start=lambda game, _, info, engine=engine: starts[engine].__setitem__(
                game, info["action_mask"].tolist()
            ),
        )
    assert ended["game"] == ended["single"] and len({e.outcome for e in ended["game"]}) > 1
    for game, played in moves["game"].items():
        env_moves = moves["single"][game]
        assert [m.action for m in played] == [m.action for m in env_moves]
        assert [m.reward for m in played] == [m.reward for m in env_moves]
        for move, env_move in zip(played, env_moves, strict=True):
            assert isinstance(move.obs, Knowledge) and not hasattr(move.obs, "deck")
            for key in ("info", "next_info"):
                mask, env_mask = (
                    getattr(move, key)["action_mask"],
                    getattr(env_move, key)["action_mask"],
                )
                assert mask.dtype == env_mask.dtype and np.array_equal(mask, env_mask)
            assert move.obs.turn == env_move.info["turn"] and move.obs.hurt == env_move.info["hurt"]
            assert (move.terminated, move.truncated) == (env_move.terminated, env_move.truncated)
        assert starts["game"][game] == starts["single"][game]
        assert all(a.next_obs is b.obs for a, b in itertools.pairwise(played))
        assert played[-1].terminated and not any(m.terminated for m in played[:-1])


def test_the_game_engine_refuses_what_it_cannot_play() -> None:
    deck = {"options": {"deck": deck_codes(validation_decks(77, 1)[0].tolist())}}
    agent = make_agent("trained")
    with pytest.raises(ValueError, match="game engine plays seats"):
        play_lockstep(agent.batch_policy, {}, [deck], engine="game")  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="game engine plays given decks"):
        play_lockstep(lambda _: HeuristicAgent(), {}, [{"seed": 3}], engine="game")
    with pytest.raises(ValueError, match="'agent' cannot play on the engine"):
        play_lockstep(lambda _: _Counter(), {}, [deck], engine="game")
    with pytest.raises(ValueError, match="engine must be one of"):
        play_lockstep(lambda _: _Counter(), {}, [deck], engine="fast")  # type: ignore[arg-type]


def test_the_game_engine_takes_seeds_beside_decks_and_refuses_other_options() -> None:
    """A reset's seed does not change a given deck's game (as in the env); options beyond the
    rules and the observation are refused by name, not dropped (rewards, the illegal-action
    rule, a misspelt option)."""
    deck = deck_codes(validation_decks(78, 1)[0].tolist())
    plain = play_lockstep(lambda _: HeuristicAgent(), {}, [{"options": {"deck": deck}}], 1, "game")
    seeded = [{"seed": 5, "options": {"deck": deck}}]
    assert play_lockstep(lambda _: HeuristicAgent(), {}, seeded, 1, "game") == plain
    ids = [{"options": {"deck": validation_decks(78, 1)[0].tolist()}}]  # the engine's card ids
    assert play_lockstep(lambda _: HeuristicAgent(), {}, ids, 1, "game") == plain
    with pytest.raises(ValueError, match=re.escape("each card id 0..53 once")):
        play_lockstep(lambda _: HeuristicAgent(), {}, [{"options": {"deck": [0] * 54}}], 1, "game")
    observed = {"observation_mode": "dict", "recall": True, "counting": True}
    assert play_lockstep(lambda _: HeuristicAgent(), observed, seeded, 1, "game") == plain
    for kwargs, needle in (
        ({"win_reward": 5.0}, "['win_reward'] not allowed"),
        ({"illegal_action": "raise"}, "['illegal_action'] not allowed"),
        ({"turn": 10}, "turn"),
        ({"turns": 0}, "turns"),
        ({"observation_mode": "nonsense"}, "observation_mode"),
        ({"counting": "yes"}, "counting"),
    ):
        with pytest.raises((ValueError, TypeError), match=re.escape(needle)):
            play_lockstep(lambda _: HeuristicAgent(), kwargs, seeded, 1, "game")
