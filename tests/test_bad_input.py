"""Bad input is refused with an exception of the right type whose message names the problem."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from helpers import BONUS, IRON, JOKER, STOP, THREATEN, stack

from coldiron_env.env import ColdIronEnv
from coldiron_env.game import GameOverError, IllegalActionError

try:
    from coldiron_env.vector import ColdIronVectorEnv
except ImportError:  # Gymnasium 0.29 (CI's job for CleanRL's pin): the single env alone
    ColdIronVectorEnv = None  # type: ignore[assignment,misc]


def fresh(**kwargs: Any) -> ColdIronEnv:
    env = ColdIronEnv(**kwargs)
    env.reset(seed=0)
    return env


# ----------------------------------------------------------------------- deck option
@pytest.mark.parametrize(
    ("deck", "names"),
    [
        (stack()[:53], ["54", "53"]),
        ([*stack(), "AH"], ["54", "55"]),
        ([], ["54", "0"]),
        ([*stack()[:53], "XQ"], ["XQ"]),
        ([*stack()[:53], "11H"], ["11H"]),
        ([*stack()[:53], ""], ["''"]),
        ([*stack()[:53], 7], ["7"]),
        ([*stack()[:52], "AH", "JK"], ["AH", "duplicate"]),
        (["5d" if c == "AH" else c for c in stack("5D")], ["5D", "duplicate"]),
        ([JOKER if c == "AH" else c for c in stack()], ["Joker", "third"]),
    ],
    ids=[
        "53-cards",
        "55-cards",
        "empty",
        "unknown-code",
        "rank-11",
        "empty-code",
        "int-code",
        "duplicate",
        "duplicate-case",
        "third-joker",
    ],
)
def test_malformed_deck_refused(deck: list[Any], names: list[str]) -> None:
    env = ColdIronEnv()
    with pytest.raises(ValueError) as err:
        env.reset(options={"deck": deck})
    msg = str(err.value)
    for name in names:
        assert name.lower() in msg.lower(), f"{name!r} not named in {msg!r}"


@pytest.mark.parametrize(
    "deck", ["AH 2H", 54, {"AH": 1}, b"AH"], ids=["str", "int", "dict", "bytes"]
)
def test_deck_not_a_list_refused(deck: Any) -> None:
    env = ColdIronEnv()
    with pytest.raises(ValueError, match="deck"):
        env.reset(options={"deck": deck})


def test_tuple_deck_accepted() -> None:
    env = ColdIronEnv()
    _, info = env.reset(options={"deck": tuple(stack("9C"))})
    env.step(THREATEN)
    assert env.game.hand != 0 and info["deck_count"] == 54


def test_numpy_array_deck_accepted() -> None:
    env = ColdIronEnv()
    _, info = env.reset(options={"deck": np.array(stack("9C"))})
    env.step(THREATEN)
    assert env.game.hand != 0 and info["deck_count"] == 54


def test_unknown_reset_option_key_refused() -> None:
    env = ColdIronEnv()
    with pytest.raises(ValueError, match="dek"):
        env.reset(options={"dek": stack()})


def test_bad_deck_leaves_env_usable() -> None:
    env = ColdIronEnv()
    env.reset(seed=1)
    with pytest.raises(ValueError):
        env.reset(options={"deck": stack()[:10]})
    _, info = env.reset(options={"deck": stack("4S")})
    env.step(THREATEN)
    assert env.game.deck_count == 53 and info["turn"] == 1


# --------------------------------------------------------------------------- actions
def test_a_seed_is_an_int_numpys_included_in_the_single_env_as_in_the_vector_env() -> None:
    """A NumPy integer seeds as the int it holds (the deals a sweep's seed gives); a bool, a
    string or a float is refused by name, in the single env as in the vector env."""
    env, plain = ColdIronEnv(), ColdIronEnv()
    env.reset(seed=np.int64(3))
    plain.reset(seed=3)
    assert env.game.deck == plain.game.deck
    env.reset()
    plain.reset()
    assert env.game.deck == plain.game.deck  # the generator too, not only the first deal
    for bad in (True, "3", 3.0):
        with pytest.raises(
            ValueError, match=re.escape(f"seed must be an int or None, got {bad!r}")
        ):
            ColdIronEnv().reset(seed=bad)  # type: ignore[arg-type]
    for catch in (ValueError, gym.error.Error):  # one class in both envs, caught as either
        with pytest.raises(catch, match="seed must be at least 0, got -2"):
            ColdIronEnv().reset(seed=np.int64(-2))
    if ColdIronVectorEnv is None:
        return
    listed, arrayed = ColdIronVectorEnv(2), ColdIronVectorEnv(2)
    listed.reset(seed=[4, 9])
    arrayed.reset(seed=np.array([4, 9]))  # a NumPy array of seeds, as the list it holds
    assert listed.deck_ids(1) == arrayed.deck_ids(1)
    for bad in (True, "3", 3.0):
        with pytest.raises(ValueError, match="seed must be None, an int or a list"):
            ColdIronVectorEnv(2).reset(seed=bad)  # type: ignore[arg-type]
    for catch in (ValueError, gym.error.Error):
        with pytest.raises(catch, match="seed for env 0: seed must be at least 0, got -2"):
            ColdIronVectorEnv(2).reset(seed=np.array([-2, 1]))


@pytest.mark.parametrize("policy", ["end", "raise"])
@pytest.mark.parametrize("action", [-1, 19, 20, 10**6, np.int64(19), np.int8(-3)])
def test_out_of_range_action_raises_naming_it(policy: str, action: Any) -> None:
    env = fresh(illegal_action=policy)
    with pytest.raises(IllegalActionError) as err:
        env.step(action)
    assert re.search(rf"(?<!\d){int(action)}(?!\d)", str(err.value)), str(err.value)
    assert env.game.steps == 0


@pytest.mark.parametrize(
    "action", [1.5, 1.0, "1", None, [1], np.array([1, 2]), True, np.bool_(False)]
)
def test_non_integer_action_raises(action: Any) -> None:
    env = fresh()
    with pytest.raises((IllegalActionError, TypeError)) as err:
        env.step(action)
    assert "action" in str(err.value)
    assert env.game.steps == 0


def test_numpy_integer_actions_accepted() -> None:
    env = fresh()
    for a in (np.int64(THREATEN), np.int32(THREATEN), np.array(THREATEN)):
        env.step(a)
    assert env.game.steps == 3


def test_illegal_action_under_end_policy() -> None:
    env = ColdIronEnv(illegal_action="end", loss_reward=-2.5, win_reward=3.0)
    env.reset(options={"deck": stack("5H")})
    _, reward, terminated, truncated, info = env.step(STOP)
    assert terminated and not truncated
    assert reward == -2.5
    assert info["outcome"] == "illegal" and info["is_success"] is False
    assert info["action_mask"].all() and info["phase"] == "over"  # ENV_MASKS: every action
    assert info["deck_count"] == 54, "an illegal action drew a card"


def test_illegal_action_under_raise_policy_names_action_phase_and_legal() -> None:
    env = ColdIronEnv(illegal_action="raise")
    env.reset(options={"deck": stack("5H", JOKER)})
    env.step(IRON)
    game = env.game
    state = (game.phase, game.turn, game.hurt, game.pos, game.hand, game.discarded, game.steps)
    with pytest.raises(IllegalActionError) as err:
        env.step(BONUS)
    msg = str(err.value)
    assert re.search(r"\b18\b", msg), msg  # the action
    assert "iron" in msg  # the phase
    assert re.search(r"\b1\b", msg) and re.search(r"\b17\b", msg), msg  # the legal actions
    after = (game.phase, game.turn, game.hurt, game.pos, game.hand, game.discarded, game.steps)
    assert after == state
    _, _, _, _, info = env.step(IRON)  # still playable: Joker, bonus on offer
    assert info["phase"] == "bonus"


def test_step_after_the_episode_ended_raises() -> None:
    env = ColdIronEnv()
    env.reset(options={"deck": stack("5H", JOKER)})
    _, _, terminated, _, _ = env.step(2 + 8)  # rack 9: the Joker slays
    assert terminated
    with pytest.raises(GameOverError, match="reset"):
        env.step(THREATEN)


def test_step_before_reset_raises() -> None:
    env = ColdIronEnv()
    with pytest.raises(GameOverError, match="reset"):
        env.step(THREATEN)


# ---------------------------------------------------------------------- env kwargs
@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"observation_mode": "pixels"}, ["observation_mode", "pixels"]),
        ({"illegal_action": "ignore"}, ["illegal_action", "ignore"]),
        ({"render_mode": "video"}, ["render_mode", "video"]),
        ({"recall": "yes"}, ["recall", "yes"]),
        ({"bonus_always": 1}, ["bonus_always", "1"]),
        ({"bonus_joker_grants_more": None}, ["bonus_joker_grants_more", "None"]),
        ({"turns": 0}, ["turns", "0"]),
        ({"turns": 100}, ["turns", "100"]),
        ({"turns": 24.0}, ["turns", "24.0"]),
        ({"suits_required": 5}, ["suits_required", "5"]),
        ({"suits_required": 0}, ["suits_required", "0"]),
        ({"win_reward": float("nan")}, ["win_reward", "nan"]),
        ({"loss_reward": float("-inf")}, ["loss_reward", "inf"]),
        ({"win_reward": "1"}, ["win_reward"]),
        ({"loss_reward": True}, ["loss_reward"]),
    ],
    ids=lambda v: "-".join(f"{k}={v[k]}" for k in v) if isinstance(v, dict) else None,
)
def test_bad_env_kwargs_refused(kwargs: dict[str, Any], names: list[str]) -> None:
    with pytest.raises(ValueError) as err:
        ColdIronEnv(**kwargs)
    msg = str(err.value)
    for name in names:
        assert name in msg, f"{name!r} not named in {msg!r}"


def test_unknown_env_kwarg_refused() -> None:
    with pytest.raises(TypeError, match="bonus_allways"):
        ColdIronEnv(bonus_allways=True)  # type: ignore[call-arg]


def test_illegal_action_under_penalize_policy_changes_nothing_then_forfeits() -> None:
    """The limit's illegal action ends the game as a loss: terminated, not truncated (a
    learner must not bootstrap from a game that is over), with the loss's reward added."""
    from coldiron_env.knowledge import Knowledge

    env = ColdIronEnv(
        illegal_action="penalize", illegal_reward=-0.5, max_illegal_actions=3, loss_reward=-2.0
    )
    assert env.max_episode_steps == ColdIronEnv().max_episode_steps + 3
    obs, info = env.reset(options={"deck": stack("5H", JOKER)})
    kn = Knowledge()
    kn.observe(obs, info)
    obs, reward, terminated, truncated, info = env.step(IRON)
    kn.observe(obs, info)
    game = env.game
    state = (game.phase, game.turn, game.hurt, game.pos, game.hand, game.discarded, game.steps)
    for count in (1, 2):
        obs2, reward, terminated, truncated, info = env.step(BONUS)  # illegal in phase iron
        assert (reward, terminated, truncated) == (-0.5, False, False)
        assert env.illegal_count == count
        assert (game.phase, game.turn, game.hurt, game.pos, game.hand, game.discarded,
                game.steps) == state  # fmt: skip
        np.testing.assert_array_equal(obs2, obs)
        assert info["drawn"] == [] and "outcome" not in info
        kn.observe(obs2, info)
        assert kn == Knowledge.from_game(game)  # a player's memory stays right
    env.step(IRON)  # a legal action in between does not reset the count
    _, reward, terminated, truncated, info = env.step(THREATEN if game.phase else BONUS)
    assert (reward, terminated, truncated) == (-2.5, True, False)
    assert info["outcome"] == "illegal" and info["is_success"] is False
    with pytest.raises(GameOverError):
        env.step(IRON)
    env.reset(seed=1)
    assert env.illegal_count == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"illegal_action": "forgive"}, "illegal_action must be one of"),
        ({"illegal_reward": float("nan")}, "illegal_reward must be a finite number"),
        ({"illegal_reward": "low"}, "illegal_reward must be a finite number"),
        ({"max_illegal_actions": 0}, "max_illegal_actions must be a positive int"),
        ({"max_illegal_actions": True}, "max_illegal_actions must be a positive int"),
    ],
)
def test_bad_illegal_action_options_are_refused_by_name(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ColdIronEnv(**kwargs)


def test_numpy_scalar_options_are_taken_as_the_values_they_hold() -> None:
    """A sweep's values are often NumPy scalars: each is the Python value it holds, and a
    value of the wrong kind is still refused by name."""
    env = ColdIronEnv(
        win_reward=np.float32(2.0),
        loss_reward=np.int64(-1),
        recall=np.bool_(True),
        max_illegal_actions=np.int64(3),
        illegal_action="penalize",
        turns=np.int64(20),
        bonus_always=np.bool_(True),
    )
    assert (env.win_reward, env.loss_reward, env.max_illegal_actions) == (2.0, -1, 3)
    assert type(env.win_reward) is float and type(env.rules.turns) is int
    assert env.recall is True and env.rules.bonus_always is True
    _, info = env.reset(seed=0)
    assert info["turn"] == 1
    with pytest.raises(ValueError, match=r"recall must be a bool, got 1\.0"):
        ColdIronEnv(recall=np.float32(1.0))
    with pytest.raises(ValueError, match=r"rule option 'turns' must be an int, got 20\.0"):
        ColdIronEnv(turns=np.float64(20.0))


@pytest.mark.parametrize("policy", ["end", "raise"])
def test_penalize_options_that_would_do_nothing_are_warned_about(policy: str) -> None:
    """``illegal_reward`` and ``max_illegal_actions`` act only under ``penalize``: set to
    anything but their defaults under another policy the env warns, naming them (a config or
    model that sets them still loads); at their defaults, or under penalize, it is silent."""
    with pytest.warns(UserWarning, match=rf"illegal_reward=5\.0 applies only .* not '{policy}'"):
        ColdIronEnv(illegal_action=policy, illegal_reward=5.0)
    with pytest.warns(UserWarning, match=r"max_illegal_actions=3 applies only"):
        ColdIronEnv(illegal_action=policy, max_illegal_actions=3)
    if ColdIronVectorEnv is not None:  # it validates through the single env
        with pytest.warns(UserWarning, match=r"max_illegal_actions=3 applies only"):
            ColdIronVectorEnv(2, illegal_action=policy, max_illegal_actions=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ColdIronEnv(illegal_action=policy, illegal_reward=-0.1, max_illegal_actions=10)
        ColdIronEnv(illegal_action="penalize", illegal_reward=5.0, max_illegal_actions=3)


@pytest.mark.parametrize("options", ["deck", [], ("deck",)])
def test_reset_options_that_are_not_a_dict_are_refused(options: Any) -> None:
    with pytest.raises(ValueError, match="reset options must be a dict, got"):
        ColdIronEnv().reset(seed=0, options=options)  # the vector env's: tests/test_vector.py


def test_atomic_writes_name_the_file_asked_for_and_follow_the_umask(tmp_path: Path) -> None:
    from agents.atomic import atomic_write_json

    with pytest.raises(IsADirectoryError, match=re.escape(str(tmp_path))) as err:
        atomic_write_json(tmp_path, {})
    assert err.value.filename == str(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OSError) as err2:  # a folder that cannot be made: a file is in the way
        atomic_write_json(blocker / "out.json", {})
    assert err2.value.filename == str(blocker)  # the file in the way
    old = os.umask(0o027)
    try:
        # the module reads the umask once, at import: a fresh interpreter under 027
        code = "from agents.atomic import atomic_write_json; atomic_write_json('a.json', {})"
        subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, env={
            **os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})  # fmt: skip
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o640
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left


# ---------------------------------------------------------------- the rules engine
def test_the_engine_refuses_what_is_not_a_deck_rules_or_an_action() -> None:
    from coldiron_env.game import Game
    from coldiron_env.options import RuleOptions

    deck = list(range(54))
    with pytest.raises(ValueError, match=r"each card id 0\.\.53 once; \[1, 99\]"):
        Game([99, 1, 1, *range(3, 54)])
    with pytest.raises(ValueError, match=r"each card id 0\.\.53 once; \[-1\]"):
        Game([-1, *range(1, 54)])
    with pytest.raises(ValueError, match=r"must hold 54 card ids, got 53"):
        Game(deck[:-1])
    with pytest.raises(ValueError, match=r"card ids \(integers\)"):
        Game([float(c) for c in deck])
    with pytest.raises(TypeError, match=r"rules must be a RuleOptions.*bonus_always"):
        Game(deck, {"bonus_always": True})  # type: ignore[arg-type]
    row = np.arange(54, dtype=np.int8)  # a NumPy row of small ints plays as the list does
    a, b = Game(row), Game(deck)  # type: ignore[arg-type]
    for game in (a, b):
        game.step(THREATEN)
    assert (a.hand, a.discarded, a.pos) == (b.hand, b.discarded, b.pos)
    assert Game(deck, RuleOptions(turns=3)).rules.turns == 3
    game = Game(deck)
    for action, named in [(True, "True"), ("0", "'0'"), (1.0, "1.0"), (25, "outside")]:
        with pytest.raises(IllegalActionError, match=re.escape(named)):
            game.step(action)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"action 0 is legal in phase 'turn': not forfeit"):
        game.forfeit(THREATEN)
    assert game.steps == 0 and game.phase_name == "turn"  # nothing was played
    game.forfeit(STOP)
    assert game.outcome == "illegal"


def test_a_player_that_answers_no_action_is_refused_on_either_evaluation_path() -> None:
    """What the env refuses (an action out of range, a float, a bool) is refused the same
    way when the evaluator drives the engine for a player that decides from knowledge."""
    from agents.evaluation.arena import deal_decks, evaluate_agent
    from agents.players.base import Agent

    class Bad(Agent):
        def __init__(self, answer: object) -> None:
            self.answer = answer

        def act(self, obs: Any, action_mask: Any, info: Any = None) -> int:
            return self.answer  # type: ignore[return-value]

        def act_knowledge(self, kn: Any) -> int:
            return self.answer  # type: ignore[return-value]

    decks = deal_decks(0, 2)
    for answer in (25, 0.0, True):
        for engine in (True, False):
            with pytest.raises(IllegalActionError):
                evaluate_agent(Bad(answer), decks, [0, 1], use_engine=engine, use_batch=False)
    # an action in range but illegal loses the game, on both paths (R18's default)
    for engine in (True, False):
        result = evaluate_agent(Bad(STOP), decks, [0, 1], use_engine=engine, use_batch=False)
        assert result.outcomes["illegal"] == 2 and result.wins == 0


def test_action_masks_before_the_first_reset_is_refused_as_step_is() -> None:
    env = ColdIronEnv()
    with pytest.raises(GameOverError, match=r"action_masks\(\) called before reset\(\)"):
        env.action_masks()
    env.reset(seed=0)
    assert env.action_masks().any()


def test_knowledge_built_by_hand_is_refused_where_it_cannot_describe_a_position() -> None:
    from coldiron_env.knowledge import Knowledge

    with pytest.raises(ValueError, match=r"no phase 9"):
        Knowledge(phase=9).position()
    with pytest.raises(ValueError, match=r"the hand holds cards it has not seen"):
        Knowledge(hand=1, seen=0, deck_count=54).position()
    with pytest.raises(ValueError, match=r"observation, or its info"):
        Knowledge().observe(None, {})
    with pytest.raises(TypeError, match=r"numpy.random.Generator, got 0"):
        list(Knowledge().resample(0, 2))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"count must be an int >= 0, got -1"):
        Knowledge().sample_order_array(np.random.default_rng(0), -1)
    assert len(list(Knowledge().resample(np.random.default_rng(0), 2))) == 2


def test_a_folder_that_is_no_run_directory_is_named_as_such(tmp_path: Path) -> None:
    pytest.importorskip("stable_baselines3")
    from agents.learning.sb3_agent import ModelLoadError, load_sb3_agent

    (tmp_path / "notes.txt").write_text("not a model\n")
    with pytest.raises(ModelLoadError, match=rf"{re.escape(str(tmp_path))}: not a run directory"):
        load_sb3_agent(tmp_path)
