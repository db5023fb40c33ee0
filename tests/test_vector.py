"""The native vector env plays exactly the games of the single env, and its SB3 adapter trains.

The oracle is :class:`~coldiron_env.env.ColdIronEnv` (the engine of ``game.py``):
N single envs and one :class:`ColdIronVectorEnv` are stepped side by side with
the same actions and compared on every observation, reward, termination,
mask and info field, over thousands of deals in both rule variants.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from helpers import check_curriculum_refusals, rule_variant_sets, variant_id

import coldiron_env
from coldiron_env.actions import (
    BONUS,
    IRON,
    NUM_ACTIONS,
    PHASE_NAMES,
    REST,
    STOP,
    THREATEN,
    rack_rank_action,
)
from coldiron_env.cards import CARD_CODES, DECK_SIZE, parse_card
from coldiron_env.dealer import shuffled_deck
from coldiron_env.env import ColdIronEnv, SeedError
from coldiron_env.game import GameOverError, IllegalActionError
from coldiron_env.vector import NUMBA_AVAILABLE, ColdIronVectorEnv

BACKENDS = ["numba", "python"] if NUMBA_AVAILABLE else ["python"]

PHRASE = ["AH", "2H", "3H", "AD", "2D", "3D", "AC", "2C", "3C", "AS", "2S", "3S"]


# ------------------------------------------------------------------ helpers
def complete_deck(prefix: list[str], suffix: list[str] | None = None) -> list[str]:
    """``prefix`` first, ``suffix`` last, every other card in between (id order)."""
    suffix = suffix or []
    used = Counter(prefix + suffix)
    middle: list[str] = []
    for card in range(DECK_SIZE):
        code = CARD_CODES[card]
        if used[code]:
            used[code] -= 1
        else:
            middle.append(code)
    deck = prefix + middle + suffix
    assert len(deck) == DECK_SIZE
    return deck


def rigged_deck(rng: np.random.Generator) -> list[str]:
    """A shuffled deck with the phrase's twelve cards (in random order) on top: easy wins."""
    top = list(rng.permutation(PHRASE))
    rest = [c for c in (CARD_CODES[i] for i in shuffled_deck(rng)) if c not in PHRASE]
    return [str(c) for c in top] + rest


class Policy:
    """Random legal actions with a style: uniform, threaten-heavy (wins, bonuses), or
    quiet (threaten/rest, for long games that empty the deck); rarely an illegal action."""

    def __init__(self, style: str, seed: int, illegal_rate: float) -> None:
        self.style = style
        self.rng = random.Random(seed)
        self.illegal_rate = illegal_rate

    def act(self, mask: np.ndarray) -> int:
        rng = self.rng
        if rng.random() < self.illegal_rate:
            return rng.randrange(NUM_ACTIONS)
        legal = np.flatnonzero(mask).tolist()
        if self.style == "threaten" and rng.random() < 0.8:
            for preferred in (BONUS, THREATEN, IRON):
                if preferred in legal:
                    return preferred
        if self.style == "quiet" and rng.random() < 0.95:
            for preferred in (BONUS, THREATEN, REST, STOP):
                if preferred in legal and (preferred != REST or rng.random() < 0.5):
                    return preferred
        return int(rng.choice(legal))


def assert_same_obs(vector_obs: Any, single_obs: list[Any], where: str) -> None:
    if isinstance(vector_obs, dict):
        assert set(vector_obs) == set(single_obs[0]), where
        for key, batch in vector_obs.items():
            if isinstance(batch, dict):  # mask_in_observation: the observation inside
                assert_same_obs(batch, [o[key] for o in single_obs], f"{where}: {key}")
                continue
            expected = np.stack([np.asarray(o[key]) for o in single_obs])
            assert batch.dtype == expected.dtype, (where, key)
            np.testing.assert_array_equal(batch, expected, err_msg=f"{where}: {key}")
    else:
        expected = np.stack(single_obs)
        assert vector_obs.dtype == np.float32
        np.testing.assert_array_equal(vector_obs, expected, err_msg=where)


def batch_of_one(obs: Any) -> Any:
    """One game's observation as a batch of one (nested dicts too)."""
    if isinstance(obs, dict):
        return {k: batch_of_one(v) for k, v in obs.items()}
    return np.asarray(obs)[None]


def assert_same_info_row(info: dict[str, Any], i: int, single: dict[str, Any], where: str) -> None:
    np.testing.assert_array_equal(info["action_mask"][i], single["action_mask"], err_msg=where)
    for key in ("phase", "turn", "hurt", "deck_count", "iron_count"):
        assert info["_" + key][i], (where, key)
        assert info[key][i] == single[key], (where, key, info[key][i], single[key])


def lockstep(
    kwargs: dict[str, Any],
    n: int,
    steps: int,
    seed: int,
    style: str,
    rigged_every: int = 0,
    illegal_rate: float = 0.0,
    backend: str = "numba" if NUMBA_AVAILABLE else "python",
) -> tuple[Counter[str], set[str], int]:
    """Step ``n`` single envs and one vector env side by side; return outcomes, phases, deals."""
    vec = ColdIronVectorEnv(n, backend=backend, **kwargs)
    assert vec.backend == backend
    singles = [ColdIronEnv(**kwargs) for _ in range(n)]
    policies = [Policy(style, seed * 1000 + i, illegal_rate) for i in range(n)]
    rng = np.random.default_rng(seed)
    outcomes: Counter[str] = Counter()
    phases: set[str] = set()
    deals = n
    vobs, vinfo = vec.reset(seed=seed)
    results = [env.reset(seed=seed + i) for i, env in enumerate(singles)]
    sobs = [r[0] for r in results]
    sinfo = [r[1] for r in results]
    assert_same_obs(vobs, sobs, "reset")
    for t in range(steps):
        if rigged_every and t % rigged_every == rigged_every - 1:
            # a batched deck option: some envs get an easy deck, the others a shuffled one
            decks = [rigged_deck(rng) if rng.random() < 0.7 else None for _ in range(n)]
            vobs, vinfo = vec.reset(options={"deck": decks})
            results = [
                env.reset(options={"deck": d}) if d is not None else env.reset()
                for env, d in zip(singles, decks, strict=True)
            ]
            sobs = [r[0] for r in results]
            sinfo = [r[1] for r in results]
            deals += n
            assert_same_obs(vobs, sobs, f"deck reset {t}")
        actions = np.array(
            [p.act(info["action_mask"]) for p, info in zip(policies, sinfo, strict=True)]
        )
        vobs, vrew, vterm, vtrunc, vinfo = vec.step(actions)
        has_final = vinfo.get("_final_obs", np.zeros(n, dtype=bool))
        assert ("final_obs" in vinfo) == bool((vterm | vtrunc).any())
        for i, env in enumerate(singles):
            where = f"step {t} env {i} action {actions[i]}"
            obs, reward, terminated, truncated, info = env.step(int(actions[i]))
            assert vrew[i] == reward, where
            assert vterm[i] == terminated, where
            assert vtrunc[i] == truncated, where
            assert has_final[i] == (terminated or truncated), where
            phases.add(info["phase"])
            if terminated or truncated:
                final = vinfo["final_obs"][i]
                assert_same_obs(batch_of_one(final), [obs], where + " final_obs")
                assert_same_info_row(vinfo["final_info"], i, info, where + " final_info")
                assert vinfo["outcome"][i] == info["outcome"], where
                assert vinfo["is_success"][i] == info["is_success"], where
                assert vinfo["_outcome"][i] and vinfo["final_info"]["_outcome"][i], where
                outcomes[info["outcome"]] += 1
                obs, info = env.reset()
                deals += 1
            else:
                assert not vinfo.get("_outcome", np.zeros(n, bool))[i], where
            sobs[i] = obs
            sinfo[i] = info
            assert_same_info_row(vinfo, i, info, where)
        assert_same_obs(vobs, sobs, f"step {t}")
        np.testing.assert_array_equal(
            vec.action_masks(), np.stack([s["action_mask"] for s in sinfo]).astype(bool)
        )
    return outcomes, phases, deals


# ------------------------------------------------------------------ equivalence
CONFIGS: list[tuple[str, dict[str, Any], str, int, float]] = [
    # name, env kwargs, policy style, rigged-deck period, illegal-action rate
    ("flat-uniform", {}, "uniform", 0, 0.01),
    ("flat-threaten-rigged", {}, "threaten", 12, 0.0),
    ("recall-threaten-rigged", {"recall": True}, "threaten", 15, 0.005),
    ("dict-recall-uniform", {"observation_mode": "dict", "recall": True}, "uniform", 20, 0.0),
    ("dict-threaten", {"observation_mode": "dict"}, "threaten", 10, 0.0),
    ("bonus-always-rigged", {"bonus_always": True, "recall": True}, "threaten", 12, 0.0),
    (
        "joker-grants-more",
        {"bonus_joker_grants_more": True, "win_reward": 2.0, "loss_reward": -1.0},
        "threaten",
        10,
        0.01,
    ),
    (
        "both-variants-uniform",
        {"bonus_always": True, "bonus_joker_grants_more": True},
        "uniform",
        0,
        0.0,
    ),
    *((f"{variant_id(v)}-threaten", v, "threaten", 12, 0.0) for v in rule_variant_sets() if v),
    ("long-quiet", {"turns": 99, "recall": True}, "quiet", 0, 0.0),
    ("short-curriculum", {"turns": 6, "suits_required": 1}, "uniform", 0, 0.0),
    ("counting-threaten-rigged", {"counting": True}, "threaten", 12, 0.005),
    (
        "penalize-uniform",
        {"illegal_action": "penalize", "illegal_reward": -0.25, "max_illegal_actions": 3,
         "loss_reward": -1.0},
        "uniform", 0, 0.3,
    ),
    (
        "dict-counting-recall-more",
        {"observation_mode": "dict", "counting": True, "recall": True,
         "bonus_joker_grants_more": True},
        "uniform", 0, 0.0,
    ),
    (
        "counting-curriculum",
        {"counting": True, "turns": 8, "suits_required": 2},
        "quiet", 0, 0.0,
    ),
    (
        "mask-in-flat-counting",
        {"counting": True, "mask_in_observation": True},
        "threaten", 12, 0.0,
    ),
    (
        "mask-in-dict-penalize",
        {"observation_mode": "dict", "mask_in_observation": True, "illegal_action": "penalize"},
        "uniform", 0, 0.6,
    ),
]  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_lockstep_equivalence_over_thousands_of_deals(backend: str) -> None:
    outcomes: Counter[str] = Counter()
    phases: set[str] = set()
    deals = 0
    for k, (name, kwargs, style, rigged, illegal) in enumerate(CONFIGS):
        got, seen, dealt = lockstep(
            kwargs,
            n=12,
            steps=160,
            seed=100 + k,
            style=style,
            rigged_every=rigged,
            illegal_rate=illegal,
            backend=backend,
        )
        outcomes.update(got)
        phases |= seen
        deals += dealt
        if kwargs.get("illegal_action") == "penalize":  # the forfeits compared, not just steps
            assert got["illegal"] > 0, (name, got)
        if kwargs.get("bonus_always"):
            assert "bonus" not in seen, name
    assert deals >= 2400, deals
    assert phases == set(PHASE_NAMES), phases
    for outcome in ("won", "slain", "deck_exhausted", "midnight", "illegal"):
        assert outcomes[outcome] > 0, (outcome, outcomes)


# ------------------------------------------------------------------ scripted edge cases
SCRIPTS: list[tuple[str, dict[str, Any], list[str], list[int], str]] = [
    (
        "the last card completes the phrase on a rack (R7 before R9)",
        {},
        complete_deck(
            [
                "JK",
                "JH",
                "QH",
                "KH",
                "JK",
                "JD",
                "QD",
                "KD",
                "JC",
                "QC",
                "KC",
                "JS",
                "QS",
                "KS",
                *PHRASE[:-1],
            ],
            ["3S"],
        ),
        [THREATEN, BONUS, THREATEN, BONUS] + [THREATEN] * 17 + [rack_rank_action(3)],
        "won",
    ),
    (
        "a rack runs to a last court card: deck exhausted, no Hurt from it (R11)",
        {},
        complete_deck(
            [
                "JK",
                "JH",
                "QH",
                "KH",
                "JK",
                "JD",
                "QD",
                "KD",
                "JC",
                "QC",
                "KC",
                "JS",
                "QS",
                "AH",
                "AD",
                "AC",
                "AS",
            ],
            ["KS"],
        ),
        [THREATEN, BONUS, THREATEN, BONUS] + [THREATEN] * 9 + [rack_rank_action(1)],
        "deck_exhausted",
    ),
    (
        "a Joker mid-rack slays",
        {},
        complete_deck(["4H", "JK", "AH"]),
        [rack_rank_action(1)],
        "slain",
    ),
    (
        "court cards of a rack slay before the match",
        {},
        complete_deck(["4H", "JH", "QH", "KH", "JD", "QD", "KD", "AH"]),
        [rack_rank_action(1)],
        "slain",
    ),
    (
        "court cards of an Iron bonus slay; the third Iron's Joker",
        {},
        complete_deck(["AH", "2H", "JK", "KH", "KD", "KC"]),
        [IRON, IRON, IRON, BONUS],
        "slain",
    ),
    (
        "a Joker among bonus draws grants three more (variant)",
        {"bonus_joker_grants_more": True, "suits_required": 1},
        complete_deck(["JK", "AH", "JK", "2H", "AD", "2D", "3H"]),  # 3H: the sixth bonus draw
        [THREATEN, BONUS],
        "won",
    ),
    (
        "the bonus is always taken (variant); the third Iron ends the turn",
        {"bonus_always": True},
        complete_deck(["AH", "JK", "2H", "JH", "3H", "4H"]),
        [IRON, IRON, IRON, REST, STOP],
        "illegal",
    ),
    (
        "an Iron bonus draws the last card, a court: deck exhausted before its Hurt",
        {"turns": 60},
        complete_deck([], ["JK", "4S", "5S", "KS"]),
        [REST] * 50 + [IRON, BONUS],
        "deck_exhausted",
    ),
    (
        "midnight after the last turn; Rest at Hurt 0",
        {"turns": 3},
        complete_deck(["AH", "2H", "3H"]),
        [REST, THREATEN, IRON, STOP],
        "midnight",
    ),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("label", "kwargs", "deck", "actions", "outcome"), SCRIPTS, ids=[s[0] for s in SCRIPTS]
)
def test_scripted_deals_match_the_engine(
    label: str,
    kwargs: dict[str, Any],
    deck: list[str],
    actions: list[int],
    outcome: str,
    backend: str,
) -> None:
    # env 0 plays the scripted deck, env 1 a shuffled one with the same actions where legal
    vec = ColdIronVectorEnv(2, backend=backend, **kwargs)
    single = ColdIronEnv(**kwargs)
    vobs, vinfo = vec.reset(seed=3, options={"deck": [deck, None]})
    obs, info = single.reset(options={"deck": deck})
    np.testing.assert_array_equal(vobs[0], obs)
    for t, action in enumerate(actions):
        other = (
            action
            if vinfo["action_mask"][1][action]
            else int(np.flatnonzero(vinfo["action_mask"][1])[0])
        )
        vobs, vrew, vterm, _, vinfo = vec.step(np.array([action, other]))
        obs, reward, terminated, _, info = single.step(action)
        assert (vrew[0], vterm[0]) == (reward, terminated), (label, t)
        if terminated:
            np.testing.assert_array_equal(vinfo["final_obs"][0], obs)
            assert vinfo["final_info"]["hurt"][0] == info["hurt"]
            assert vinfo["final_info"]["deck_count"][0] == info["deck_count"]
            assert vinfo["outcome"][0] == info["outcome"] == outcome, label
            assert t == len(actions) - 1, (label, "ended early")
            return
        np.testing.assert_array_equal(vobs[0], obs, err_msg=f"{label} step {t}")
        assert_same_info_row(vinfo, 0, info, f"{label} step {t}")
    pytest.fail(f"{label}: the script did not end the game")


# ------------------------------------------------------------------ API, seeding, autoreset
def test_make_vec_through_the_registry() -> None:
    envs = gym.make_vec(
        coldiron_env.ENV_ID,
        num_envs=5,
        vectorization_mode="vector_entry_point",
        recall=True,
        bonus_always=True,
    )
    assert isinstance(envs.unwrapped, ColdIronVectorEnv)
    assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    obs, info = envs.reset(seed=1)
    assert obs.shape == (5, 102) and obs.dtype == np.float32
    assert envs.observation_space.shape == (5, 102)
    assert envs.single_observation_space == ColdIronEnv(recall=True).observation_space
    assert envs.action_space.shape == (5,)
    masks = envs.unwrapped.action_masks()
    assert masks.shape == (5, NUM_ACTIONS) and masks.dtype == np.bool_
    assert info["action_mask"].shape == (5, NUM_ACTIONS) and info["action_mask"].dtype == np.int8
    assert envs.unwrapped.rules.bonus_always


def test_options_are_validated_like_the_single_env() -> None:
    with pytest.raises(ValueError, match="observation_mode"):
        ColdIronVectorEnv(2, observation_mode="pixels")
    with pytest.raises(ValueError, match="bonus_always"):
        ColdIronVectorEnv(2, bonus_always="yes")
    with pytest.raises(ValueError, match="render_mode"):
        ColdIronVectorEnv(2, render_mode="ansi")
    with pytest.raises(ValueError, match="num_envs"):
        ColdIronVectorEnv(0)
    with pytest.raises(TypeError):
        ColdIronVectorEnv(2, colour="red")
    with pytest.raises(ValueError, match="backend must be one of"):
        ColdIronVectorEnv(2, backend="cuda")
    assert ColdIronVectorEnv(2).backend == ("numba" if NUMBA_AVAILABLE else "python")
    assert ColdIronVectorEnv(2, backend="python").backend == "python"


def test_seed_int_list_and_reproducibility() -> None:
    a = ColdIronVectorEnv(4)
    b = ColdIronVectorEnv(4)
    obs_a, _ = a.reset(seed=7)
    np.random.seed(123)  # noqa: NPY002 (the global generators play no part)
    random.seed(123)
    obs_b, _ = b.reset(seed=[7, 8, 9, 10])
    np.testing.assert_array_equal(obs_a, obs_b)
    for _ in range(200):
        actions = np.argmax(a.action_masks(), axis=1)  # first legal action: threaten / iron / stop
        ra = a.step(actions)
        rb = b.step(actions)
        np.testing.assert_array_equal(ra[0], rb[0])
        np.testing.assert_array_equal(ra[1], rb[1])
    # a None entry keeps that env's generator running: env 1 deals its generator's next deck
    c = ColdIronVectorEnv(2)
    c.reset(seed=[5, 6])
    c.reset(seed=[5, None])
    single = ColdIronEnv()
    single.reset(seed=6)
    first = list(single.game.deck)
    single.reset()
    assert c._games.deck[1].tolist() == single.game.deck != first
    c.reset(seed=[5, 6])
    assert c._games.deck[1].tolist() == first
    with pytest.raises(ValueError, match="seed list must hold 2"):
        c.reset(seed=[1, 2, 3])
    with pytest.raises(ValueError, match="seed for env 1"):
        c.reset(seed=[1, "2"])  # type: ignore[list-item]


def test_autoreset_same_step() -> None:
    envs = ColdIronVectorEnv(3)
    envs.reset(seed=0, options={"deck": [complete_deck(["JK", "AH"])] * 3})
    # a rack for Aces draws the Joker first: every game is slain on this step
    obs, rewards, terminated, truncated, info = envs.step(np.full(3, rack_rank_action(1)))
    assert terminated.all() and not truncated.any()
    assert info["_final_obs"].all() and info["_final_info"].all()
    assert list(info["outcome"]) == ["slain"] * 3 and not info["is_success"].any()
    assert list(info["final_info"]["phase"]) == ["over"] * 3
    assert (info["final_info"]["action_mask"] == 1).all()  # over: every action is marked
    for final in info["final_obs"]:
        assert final[43 + 3] == 1.0  # phase one-hot: over
    # the returned observation and info are those of the new deal
    assert list(info["phase"]) == ["turn"] * 3 and (info["deck_count"] == DECK_SIZE).all()
    assert (info["turn"] == 1).all() and (obs[:, :40] == 0).all()
    assert envs.action_masks().any(axis=1).all()
    np.testing.assert_array_equal(rewards, np.zeros(3))


def test_truncation_with_max_episode_steps() -> None:
    envs = ColdIronVectorEnv(2, max_episode_steps=2)
    envs.reset(seed=0, options={"deck": [complete_deck(["AH", "AD", "AC"])] * 2})
    _, _, terminated, truncated, info = envs.step(np.array([THREATEN, THREATEN]))
    assert not (terminated | truncated).any()
    _, _, terminated, truncated, info = envs.step(np.array([THREATEN, THREATEN]))
    assert truncated.all() and not terminated.any()
    assert info["_final_obs"].all()
    # no game has an outcome this step: its keys are absent, as in Gymnasium's vector envs
    assert "outcome" not in info and "outcome" not in info["final_info"]
    assert "is_success" not in info and "is_success" not in info["final_info"]
    envs = ColdIronVectorEnv(2, max_episode_steps=1, autoreset_mode="next_step")
    envs.reset(seed=0)
    _, _, _, truncated, info = envs.step(np.array([REST, REST]))
    assert truncated.all() and "outcome" not in info and "is_success" not in info


def test_every_next_step_episode_gets_its_whole_time_limit() -> None:
    """Under NEXT_STEP the step that deals the next game is not one of its steps: every
    episode, not only the first, is truncated after ``max_episode_steps`` actions."""
    limit = 3
    envs = ColdIronVectorEnv(2, max_episode_steps=limit, autoreset_mode="next_step")
    _, info = envs.reset(seed=0)
    lengths: list[int] = []
    steps = np.zeros(2, dtype=int)
    restarting = np.zeros(2, dtype=bool)
    for _ in range(40):
        mask = info["action_mask"].astype(bool)
        actions = np.where(mask[:, REST], REST, mask.argmax(axis=1))  # Rest, else the first legal
        _, _, terminated, truncated, info = envs.step(actions)
        steps += ~restarting
        for i in np.flatnonzero(truncated):
            lengths.append(int(steps[i]))
        done = terminated | truncated
        steps[done] = 0
        restarting = done
    assert len(lengths) >= 10 and set(lengths) == {limit}, lengths


def test_the_sb3_vec_env_passes_a_time_limit_truncation_on_without_an_outcome() -> None:
    pytest.importorskip("stable_baselines3")
    from agents.learning.sb3_vec import ColdIronSB3VecEnv

    venv = ColdIronSB3VecEnv(2, max_episode_steps=1)
    venv.reset()
    venv.step_async(np.array([REST, REST]))
    _, _, dones, infos = venv.step_wait()
    assert dones.all()
    assert all(i["TimeLimit.truncated"] and "outcome" not in i for i in infos)


def test_batched_deck_option_errors() -> None:
    envs = ColdIronVectorEnv(2)
    good = complete_deck([])
    with pytest.raises(ValueError, match="single list of 54 codes"):
        envs.reset(options={"deck": good})
    with pytest.raises(ValueError, match="must hold 2 decks"):
        envs.reset(options={"deck": [good]})
    bad = list(good)
    bad[5] = "ZZ"
    with pytest.raises(ValueError, match=r"env 1: deck position 5: unknown card code 'ZZ'"):
        envs.reset(options={"deck": [good, bad]})
    with pytest.raises(ValueError, match="env 0: deck must hold exactly 54"):
        envs.reset(options={"deck": [good[:-1], None]})
    with pytest.raises(ValueError, match=r"unknown reset option\(s\) \['shuffle'\]"):
        envs.reset(options={"shuffle": True})
    with pytest.raises(ValueError, match="list of 2 decks"):
        envs.reset(options={"deck": 5})
    envs.reset(options={"deck": np.array([good, good[::-1]])})  # an array of codes, per env
    assert envs._games.deck[1, 0] == parse_card(good[-1])
    envs.reset(options={"deck": [good, None]})
    assert parse_card(good[0]) == envs._games.deck[0, 0]


def test_illegal_actions_end_or_raise() -> None:
    envs = ColdIronVectorEnv(2, loss_reward=-1.0)
    envs.reset(seed=0)
    _, rewards, terminated, _, info = envs.step(np.array([STOP, THREATEN]))
    assert terminated[0] and info["outcome"][0] == "illegal" and rewards[0] == -1.0
    assert info["final_info"]["phase"][0] == "over"
    strict = ColdIronVectorEnv(2, illegal_action="raise")
    obs, _ = strict.reset(seed=0)
    with pytest.raises(
        IllegalActionError,
        match=r"env 1: action 18 \(bonus\) is illegal in "
        r"phase 'turn'; legal: 0 \(threaten\)",
    ):
        strict.step(np.array([THREATEN, BONUS]))
    np.testing.assert_array_equal(strict._observe(None), obs)  # nothing moved
    for actions, message in (
        (np.array([0, 19]), r"env 1: action 19 is outside the action space Discrete\(19\)"),
        (np.array([-1, 0]), "env 0: action -1 is outside"),
        (np.array([0.0, 1.0]), "must be integers"),
        (np.array([0, 1, 2]), "array of 2 integers"),
        (np.array([[0, 0]]), r"shape \(2,\)\), got shape \(1, 2\)"),
        (np.array([[0], [0]]), r"got shape \(2, 1\)"),
        (np.int64(0), r"got shape \(\)"),
    ):
        with pytest.raises(IllegalActionError, match=message):
            envs.step(actions)
    with pytest.raises(GameOverError, match="before reset"):
        ColdIronVectorEnv(1).step(np.array([0]))


def test_a_raised_illegal_action_leaves_next_step_deals_alone() -> None:
    """Under NEXT_STEP a step that raises must not deal the games waiting for their new deal:
    after the error the games are those of a run that never stepped illegally."""

    def finished_first_game(rng_seed: int) -> tuple[ColdIronVectorEnv, Any]:
        envs = ColdIronVectorEnv(2, illegal_action="raise", autoreset_mode="NEXT_STEP")
        envs.reset(seed=rng_seed)
        mask = envs.action_masks()
        terminated = np.zeros(2, dtype=np.bool_)
        while not terminated[0]:  # both play their first legal action until game 0 ends
            first = [int(np.flatnonzero(row)[0]) for row in mask]
            _, _, terminated, _, _ = envs.step(np.array(first))
            assert not terminated[1], "game 1 must outlive game 0 for this test"
            mask = envs.action_masks()
        return envs, mask

    envs, mask = finished_first_game(0)
    plain, _ = finished_first_game(0)
    illegal = int(np.flatnonzero(~mask[1])[0])
    with pytest.raises(IllegalActionError, match="env 1"):
        envs.step(np.array([THREATEN, illegal]))
    legal = int(np.flatnonzero(mask[1])[0])
    after = envs.step(np.array([THREATEN, legal]))
    expected = plain.step(np.array([THREATEN, legal]))
    assert envs.deck_ids(0) == plain.deck_ids(0)  # game 0's new deal is the next, not the one after
    np.testing.assert_array_equal(after[0], expected[0])
    np.testing.assert_array_equal(after[1], expected[1])


@pytest.mark.parametrize("options", ["deck", [], ("deck",)])
def test_reset_options_that_are_not_a_dict_are_refused(options: Any) -> None:
    with pytest.raises(ValueError, match="reset options must be a dict, got"):
        ColdIronVectorEnv(2).reset(seed=0, options=options)


def test_numpy_scalar_options_are_taken_as_the_values_they_hold() -> None:
    envs = ColdIronVectorEnv(2, max_episode_steps=np.int64(100), win_reward=np.float32(2.0))
    assert envs.max_episode_steps == 100 and envs.win_reward == 2.0


def test_state_memory_is_linear_in_num_envs() -> None:
    sizes = [ColdIronVectorEnv(n, recall=True).state_nbytes() for n in (64, 128, 256)]
    per_env = (sizes[1] - sizes[0]) / 64
    assert per_env > 0
    assert sizes[2] - sizes[1] == 128 * per_env  # affine in N: a fixed part plus N x per_env
    assert sizes[0] - 64 * per_env < per_env  # and the fixed part is tiny


def test_hand_codes() -> None:
    envs = ColdIronVectorEnv(1)
    envs.reset(options={"deck": [complete_deck(["3H", "AS"])]})
    envs.step(np.array([THREATEN]))
    envs.step(np.array([THREATEN]))
    assert envs.hand_codes(0) == ["3H", "AS"]


# ------------------------------------------------------------------ SB3 adapter
def _sb3_rollout(venv: Any, steps: int, seed: int) -> list[Any]:
    from sb3_contrib.common.maskable.utils import get_action_masks

    rng = np.random.default_rng(seed)
    trace: list[Any] = [venv.reset()]
    for _ in range(steps):
        masks = get_action_masks(venv)
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        obs, rewards, dones, infos = venv.step(actions)
        terminal = [
            (i, info["terminal_observation"], info["is_success"], info["outcome"])
            for i, info in enumerate(infos)
            if dones[i]
        ]
        trace.append((obs, rewards, dones, terminal))
    return trace


def test_sb3_native_and_dummy_play_the_same_games() -> None:
    from agents.learning.training import build_vec_env

    native = build_vec_env("native", 4, {"recall": True}, seed=11)
    dummy = build_vec_env("dummy", 4, {"recall": True}, seed=11)
    a = _sb3_rollout(native, 120, seed=2)
    b = _sb3_rollout(dummy, 120, seed=2)
    np.testing.assert_array_equal(a[0], b[0])
    ended = 0
    for (oa, ra, da, ta), (ob, rb, db, tb) in zip(a[1:], b[1:], strict=True):
        np.testing.assert_array_equal(oa, ob)
        np.testing.assert_array_equal(ra, rb)
        np.testing.assert_array_equal(da, db)
        assert ra.dtype == rb.dtype == np.float32
        assert len(ta) == len(tb)
        for (ia, fa, sa, outa), (ib, fb, sb, outb) in zip(ta, tb, strict=True):
            assert (ia, sa, outa) == (ib, sb, outb)
            np.testing.assert_array_equal(fa, fb)
            ended += 1
    assert ended > 10
    assert native.env_is_wrapped(gym.Wrapper) == [False] * 4
    assert native.get_attr("recall") == [True] * 4
    masks = native.env_method("action_masks", indices=[1, 2])
    assert len(masks) == 2 and masks[0].shape == (NUM_ACTIONS,)
    with pytest.raises(ValueError, match="vec_env kind"):
        build_vec_env("threads", 2, {})  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["native", "dummy"])
def test_maskable_ppo_learns_with_masks(kind: str) -> None:
    import torch
    from sb3_contrib import MaskablePPO

    from agents.learning.training import build_vec_env

    torch.set_num_threads(1)
    # illegal_action="raise": one unmasked illegal action would fail the test
    venv = build_vec_env(kind, 4, {"illegal_action": "raise"}, seed=0)  # type: ignore[arg-type]
    model = MaskablePPO(
        "MlpPolicy", venv, n_steps=128, batch_size=128, n_epochs=2, seed=0, device="cpu"
    )
    model.learn(total_timesteps=2048)
    assert model.num_timesteps >= 2048
    assert model.ep_info_buffer is not None and len(model.ep_info_buffer) > 0
    assert "r" in model.ep_info_buffer[0]
    venv.close()


@pytest.mark.slow
def test_subproc_vec_env_finds_masks() -> None:
    from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported

    from agents.learning.training import build_vec_env

    venv = build_vec_env("subproc", 2, {"observation_mode": "dict"}, seed=4)
    try:
        obs = venv.reset()
        assert isinstance(obs, dict)
        assert set(obs) >= {"hand", "phase"} and obs["hand"].shape == (2, 40)
        assert is_masking_supported(venv)
        assert get_action_masks(venv).shape == (2, NUM_ACTIONS)
    finally:
        venv.close()


def test_without_numba_the_same_loop_runs_as_python_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from coldiron_env import vector

    default = ColdIronVectorEnv(3)  # compiled when numba is installed
    monkeypatch.setattr(vector, "NUMBA_AVAILABLE", False)
    with pytest.warns(RuntimeWarning, match=r"coldiron\[fast\]"):
        slow = ColdIronVectorEnv(3)
    assert slow.backend == "python"
    with pytest.raises(ValueError, match=r"needs numba: pip install 'coldiron\[fast\]'"):
        ColdIronVectorEnv(3, backend="numba")
    for env in (slow, default):
        env.reset(seed=5)
    rng = np.random.default_rng(0)
    for _ in range(60):
        masks = default.action_masks()
        np.testing.assert_array_equal(masks, slow.action_masks())
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        a, b = slow.step(actions), default.step(actions)
        for x, y in zip(a[:4], b[:4], strict=True):
            np.testing.assert_array_equal(x, y)


# ------------------------------------------------------------------ NEXT_STEP autoreset
def lockstep_next_step(
    kwargs: dict[str, Any], n: int, steps: int, seed: int, style: str, illegal_rate: float
) -> tuple[Counter[str], int]:
    """The vector env under NEXT_STEP against single envs reset by hand one step later."""
    vec = ColdIronVectorEnv(n, autoreset_mode="next_step", **kwargs)
    assert vec.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    singles = [ColdIronEnv(**kwargs) for _ in range(n)]
    policies = [Policy(style, seed * 1000 + i, illegal_rate) for i in range(n)]
    vobs, vinfo = vec.reset(seed=seed)
    results = [env.reset(seed=seed + i) for i, env in enumerate(singles)]
    sobs, sinfo = [r[0] for r in results], [r[1] for r in results]
    assert_same_obs(vobs, sobs, "reset")
    pending = [False] * n
    outcomes: Counter[str] = Counter()
    resets = 0
    for t in range(steps):
        # what a masked sampler does: it always finds an action to draw
        masks = vinfo["action_mask"]
        assert masks.any(axis=1).all(), f"step {t}: an empty mask"
        actions = np.array([p.act(m) for p, m in zip(policies, masks, strict=True)])
        vobs, vrew, vterm, vtrunc, vinfo = vec.step(actions)
        assert "final_obs" not in vinfo
        for i, env in enumerate(singles):
            where = f"step {t} env {i} action {actions[i]}"
            if pending[i]:  # the vector env deals again and ignores the action
                obs, info = env.reset()
                resets += 1
                assert (vrew[i], vterm[i], vtrunc[i]) == (0.0, False, False), where
                pending[i] = False
            else:
                obs, reward, terminated, truncated, info = env.step(int(actions[i]))
                assert (vrew[i], vterm[i], vtrunc[i]) == (reward, terminated, truncated), where
                if terminated or truncated:
                    pending[i] = True
                    assert vinfo["_outcome"][i] and vinfo["outcome"][i] == info["outcome"], where
                    assert vinfo["is_success"][i] == info["is_success"], where
                    outcomes[info["outcome"]] += 1
                else:
                    assert not vinfo.get("_outcome", np.zeros(n, bool))[i], where
            sobs[i], sinfo[i] = obs, info
            assert_same_info_row(vinfo, i, info, where)
        assert_same_obs(vobs, sobs, f"step {t}")
        np.testing.assert_array_equal(
            vec.action_masks(), np.stack([s["action_mask"] for s in sinfo]).astype(bool)
        )
    return outcomes, resets


def test_lockstep_equivalence_under_next_step_autoreset() -> None:
    outcomes: Counter[str] = Counter()
    resets = 0
    for k, (kwargs, style, illegal) in enumerate(
        [
            ({}, "uniform", 0.01),
            ({"counting": True, "recall": True}, "threaten", 0.0),
            ({"observation_mode": "dict", "bonus_always": True}, "threaten", 0.0),
            ({"illegal_action": "penalize", "max_illegal_actions": 2}, "uniform", 0.1),
        ]
    ):
        got, dealt = lockstep_next_step(kwargs, n=10, steps=150, seed=300 + k, style=style,
                                        illegal_rate=illegal)  # fmt: skip
        outcomes.update(got)
        resets += dealt
    assert resets >= 150, resets
    for outcome in ("won", "slain", "midnight", "illegal"):
        assert outcomes[outcome] > 0, (outcome, outcomes)


def test_autoreset_mode_by_name_or_enum_and_refused_otherwise() -> None:
    named = ColdIronVectorEnv(2, autoreset_mode="NEXT_STEP")
    assert named.autoreset_mode == AutoresetMode.NEXT_STEP
    assert ColdIronVectorEnv(2, autoreset_mode=AutoresetMode.SAME_STEP).autoreset_mode == (
        AutoresetMode.SAME_STEP
    )
    with pytest.raises(ValueError, match="autoreset_mode must be one of"):
        ColdIronVectorEnv(2, autoreset_mode="disabled")
    with pytest.raises(ValueError, match="autoreset_mode must be one of"):
        ColdIronVectorEnv(2, autoreset_mode="sometimes")


def test_gymnasium_vector_observation_wrappers_work_under_next_step() -> None:
    from gymnasium.wrappers.vector import FlattenObservation, NormalizeObservation

    same = gym.make_vec(coldiron_env.ENV_ID, num_envs=4, vectorization_mode="vector_entry_point")
    with pytest.raises(ValueError, match="autoreset_mode"):
        NormalizeObservation(same)  # Gymnasium refuses SAME_STEP, the SB3 convention
    envs = gym.make_vec(
        coldiron_env.ENV_ID,
        num_envs=4,
        vectorization_mode="vector_entry_point",
        autoreset_mode="NEXT_STEP",
    )
    assert isinstance(envs.unwrapped, ColdIronVectorEnv)
    normalized = NormalizeObservation(envs)
    flat_dict = FlattenObservation(
        gym.make_vec(
            coldiron_env.ENV_ID,
            num_envs=4,
            vectorization_mode="vector_entry_point",
            autoreset_mode=AutoresetMode.NEXT_STEP,
            observation_mode="dict",
            counting=True,
        )
    )
    rng = np.random.default_rng(0)
    ends = 0
    for wrapped in (normalized, flat_dict):
        obs, info = wrapped.reset(seed=1)
        assert obs.shape[0] == 4 and obs.ndim == 2
        assert wrapped.observation_space.contains(obs) or wrapped is normalized
        for _ in range(120):
            masks = info["action_mask"].astype(bool)
            actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
            obs, _, terminated, truncated, info = wrapped.step(actions)
            assert np.isfinite(obs).all()
            ends += int((terminated | truncated).sum())
    assert ends > 0
    dict_space = ColdIronEnv(observation_mode="dict", counting=True).observation_space
    assert flat_dict.single_observation_space.shape == (gym.spaces.flatdim(dict_space),)


def test_curriculum_rules_apply_from_each_games_next_deal() -> None:
    vec = ColdIronVectorEnv(3, counting=True)
    vec.reset(seed=4)
    vec.set_env_kwargs({"turns": 2, "suits_required": 1, "counting": True})
    assert vec._games.turns.tolist() == [24, 24, 24]  # games in progress keep their rules
    finished = np.zeros(3, dtype=bool)
    for _ in range(80):  # threaten until every game has been dealt again
        actions = np.array([0 if m[0] else int(np.flatnonzero(m)[0]) for m in vec.action_masks()])
        _, _, terminated, truncated, _ = vec.step(actions)
        finished |= terminated | truncated
        if finished.all():
            break
    assert finished.all() and vec._games.turns.tolist() == [2, 2, 2]
    assert vec._games.suits_required.tolist() == [1, 1, 1]
    check_curriculum_refusals(vec)


def test_a_single_env_curriculum_plays_as_the_vector_envs() -> None:
    """``set_env_kwargs`` on the single env: the game in progress keeps its rules, the next
    deal has the new ones, and the games and observations are the vector env's, step by step."""
    kwargs = {"counting": True}
    env = ColdIronEnv(**kwargs)
    vec = ColdIronVectorEnv(1, autoreset_mode="NEXT_STEP", backend="python", **kwargs)
    obs, info = env.reset(seed=11)
    vobs, _ = vec.reset(seed=11)
    env.set_env_kwargs({"turns": 3, "suits_required": 1, "counting": True})
    vec.set_env_kwargs({"turns": 3, "suits_required": 1})
    assert env.rules.turns == 24  # the game in progress keeps its rules
    deals, pending = 0, False
    for _ in range(200):
        action = int(np.flatnonzero(info["action_mask"])[0])
        if pending:  # NEXT_STEP: the vector env deals now; the single env was reset below
            vobs, *_ = vec.step(np.array([action]))
            pending = False
        np.testing.assert_array_equal(vobs[0], obs)
        obs, _, terminated, _, info = env.step(action)
        vobs, _, vterm, _, _ = vec.step(np.array([action]))
        assert bool(vterm[0]) == terminated
        if terminated:
            deals += 1
            obs, info = env.reset()
            pending = True
            assert env.rules.turns == 3 and env.rules.suits_required == 1
            assert info["turn"] == 1
    assert deals >= 3
    assert env.env_kwargs()["turns"] == 3
    check_curriculum_refusals(env)


def test_a_dict_vector_curriculum_cannot_outgrow_its_turn_space() -> None:
    vec = ColdIronVectorEnv(2, observation_mode="dict", turns=6)
    with pytest.raises(ValueError, match="would leave the observation space"):
        vec.set_env_kwargs({"turns": 24})
    vec.set_env_kwargs({"turns": 5})


def test_numpy_scalars_size_the_env_and_are_held_to_the_dict_mode_turn_space() -> None:
    """``num_envs=np.int64(3)`` as the sync and async vector envs take it; a NumPy ``turns``
    beyond the dict-mode 'turn' space is refused as a Python int is (its observations would
    leave the space); the python backend pickles (the numba one did already)."""
    import pickle

    vec = ColdIronVectorEnv(num_envs=np.int64(3))
    assert vec.num_envs == 3 and type(vec.num_envs) is int
    for env in (
        ColdIronEnv(observation_mode="dict"),
        ColdIronVectorEnv(2, observation_mode="dict"),
    ):
        with pytest.raises(ValueError, match=r"turns=30 would leave the observation space"):
            env.set_env_kwargs({"turns": np.int64(30)})
    python = ColdIronVectorEnv(2, backend="python")
    python.reset(seed=0)
    copy = pickle.loads(pickle.dumps(python))
    actions = np.zeros(2, dtype=np.int64)
    np.testing.assert_array_equal(copy.step(actions)[0], python.step(actions)[0])


def test_vector_action_masks_before_the_first_reset_is_refused_as_step_is() -> None:
    vec = ColdIronVectorEnv(2)
    with pytest.raises(GameOverError, match=r"action_masks\(\) called before reset\(\)"):
        vec.action_masks()
    vec.reset(seed=0)
    assert vec.action_masks().shape == (2, 19)


def test_a_batch_policy_answering_floats_is_refused_not_truncated() -> None:
    """Through the vector engine as through single envs: 0.9 is not action 0."""
    from agents.evaluation.lockstep import play_lockstep

    class Floats:
        def reset_states(self) -> None:
            pass

        def act(self, obs: Any, masks: np.ndarray, starts: Any = None) -> np.ndarray:
            return masks.argmax(axis=1) + 0.9

    for engine in ("vector", "single"):
        with pytest.raises(IllegalActionError, match=r"integer"):
            play_lockstep(Floats(), {}, [{"seed": 0}, {"seed": 1}], engine=engine)  # type: ignore[arg-type]


def test_the_finished_only_monitor_reports_what_sb3s_vec_monitor_reports() -> None:
    """The native training env's monitor visits only the finished envs; over the same steps
    its infos, episode returns and lengths and counters are SB3's VecMonitor's."""
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.vec_env import VecMonitor

    from agents.learning.sb3_vec import ColdIronSB3VecEnv, FinishedOnlyVecMonitor

    ours, sb3 = (m(ColdIronSB3VecEnv(16)) for m in (FinishedOnlyVecMonitor, VecMonitor))
    for venv in (ours, sb3):
        venv.seed(3)
        venv.reset()
    rng = np.random.default_rng(0)
    episodes = 0
    for _ in range(200):
        masks = ours.env_method("action_masks")
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        for venv in (ours, sb3):
            venv.step_async(actions)
        (o1, r1, d1, i1), (o2, r2, d2, i2) = ours.step_wait(), sb3.step_wait()
        assert np.array_equal(o1, o2) and np.array_equal(r1, r2) and np.array_equal(d1, d2)
        for a, b in zip(i1, i2, strict=True):
            assert a.keys() == b.keys()
            if "episode" in a:
                assert (a["episode"]["r"], a["episode"]["l"]) == (
                    b["episode"]["r"],
                    b["episode"]["l"],
                )
                episodes += 1
    assert episodes > 100 and ours.episode_count == sb3.episode_count == episodes


def test_a_refused_seed_reseeds_no_env_and_an_env_index_is_checked() -> None:
    """``reset(seed=[5, -1])`` is refused naming env 1 before env 0 is reseeded (its next
    deal is the one it would have had); every ``_key`` of ``info`` is its own array; an env
    index out of range is refused by name, not read from the end."""
    envs, untouched = ColdIronVectorEnv(2), ColdIronVectorEnv(2)
    for venv in (envs, untouched):
        venv.reset(seed=100)
    with pytest.raises(SeedError, match="seed for env 1: seed must be at least 0, got -1"):
        envs.reset(seed=[5, -1])
    with pytest.raises(gym.error.Error, match="seed must be at least 0, got -3"):
        envs.reset(seed=-3)  # Gymnasium's error, as the single env raises (and a ValueError)
    _, info = envs.reset()
    untouched.reset()
    assert envs.deck_ids(0) == untouched.deck_ids(0) and envs.deck_ids(1) == untouched.deck_ids(1)
    present = [info[key] for key in info if key.startswith("_")]
    assert len({id(array) for array in present}) == len(present) > 1
    for i in (-1, 2, 1.0):
        with pytest.raises(IndexError, match=r"env index must be an int in 0..1"):
            envs.hand_codes(i)  # type: ignore[arg-type]
        with pytest.raises(IndexError, match=r"env index must be an int in 0..1"):
            envs.deck_ids(i)  # type: ignore[arg-type]


@pytest.mark.skipif(not NUMBA_AVAILABLE, reason="numba is not installed")
def test_the_loop_compiles_without_its_cache_where_numba_cannot_write_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where numba finds no writable place for its cache (a read-only install, no HOME) it
    raises at decoration; the loop is then compiled without the cache, not refused."""
    from coldiron_env import batched

    real = batched.numba.njit
    asked: list[bool] = []

    def njit(*args: Any, **kwargs: Any) -> Any:  # numba calls it too, positionally
        if "cache" in kwargs:
            asked.append(kwargs["cache"])
            if kwargs["cache"]:
                raise RuntimeError("cannot cache function 'f': no locator available for file")
        return real(*args, **kwargs)

    monkeypatch.setattr(batched.numba, "njit", njit)

    def double(x: int) -> int:
        return 2 * x

    fast = batched.compiled(double)
    assert asked == [True, False] and fast(21) == 42 and fast.py_func is double
