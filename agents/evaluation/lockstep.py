"""The one play loop: games side by side, one decision each per step, until all have ended.

Everything that plays whole games (evaluation, training's validation, imitation, labelling,
``scripts/play.py``) plays through :func:`play_lockstep`. Who plays:

* a :class:`BatchPolicy` (a trained model): one ``act`` call a step for the whole batch, on
  the stacked observations and masks (a finished game's row keeps its last observation and an
  all-legal mask until the batch ends; its action is ignored);
* or a :data:`Seat`: the :class:`~agents.players.base.Agent` of each game, asked
  ``act(obs, info["action_mask"], info)`` (on the ``game`` engine ``act_knowledge(kn)``).

Callers keep what they need through two hooks: ``on_start(game, obs, info)`` after each reset and
``on_move(move)`` after each step (:class:`Move`). The games' endings are returned
(:class:`Episode`, in game order).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, cast, get_args, runtime_checkable

import numpy as np

from agents.players.base import Agent, KnowledgeActor
from coldiron_env.actions import ENV_MASKS, LEGAL_BITS, NUM_ACTIONS, PHASE_OVER
from coldiron_env.cards import parse_deck
from coldiron_env.env import ColdIronEnv, reset_deck_option
from coldiron_env.game import WON, Game, action_index
from coldiron_env.knowledge import Knowledge
from coldiron_env.observation import OBSERVATION_OPTIONS
from coldiron_env.options import RULE_KEYS, RuleOptions

LOCKSTEP_BATCH: Final = 256  # games a BatchPolicy plays at once (one forward pass a step)
Engine = Literal["auto", "single", "vector", "game"]
ENGINES: Final = get_args(Engine)


@runtime_checkable
class BatchPolicy(Protocol):
    """Deterministic play of many games at once (e.g. a trained model's masked policy):
    ``act(obs, masks, episode_starts)`` takes a batch (leading dimension n) and returns n legal
    actions; a policy with memory (an LSTM) keeps one state per row, cleared where
    ``episode_starts`` is true and by ``reset_states()``."""

    def reset_states(self) -> None: ...

    def act(
        self, obs: Any, masks: np.ndarray, episode_starts: np.ndarray | None = None
    ) -> np.ndarray: ...


EVAL_ENV_KWARGS: Final = OBSERVATION_OPTIONS + RULE_KEYS  # of evaluations and the game engine


def check_env_kwargs(env_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Validated :data:`EVAL_ENV_KWARGS`: the rules and the observation (another option, a
    reward's or shaping's, or a bad value: ``ValueError`` naming it)."""
    unknown = sorted(set(env_kwargs) - set(EVAL_ENV_KWARGS))
    if unknown:
        raise ValueError(
            f"env option(s) {unknown} not allowed; allowed: {list(EVAL_ENV_KWARGS)} (rewards, "
            "shaping and the illegal-action policy are the env's defaults)"
        )
    kwargs = dict(env_kwargs)
    ColdIronEnv(**kwargs).close()  # raises ValueError naming a bad value
    return kwargs


Seat = Callable[[int], Agent]  # seat(game): the agent that plays game ``game``, reset for it


@dataclass(frozen=True)
class Episode:
    """How one game of :func:`play_lockstep` ended."""

    outcome: str
    turn: int
    steps: int
    deck: tuple[int, ...]  # the card ids in the order the game used them (Jokers as drawn)
    actions: tuple[int, ...] = ()  # the actions taken, in order: the game replays from both


@dataclass(frozen=True)
class Move:
    """One step of one game, as :func:`play_lockstep`'s ``on_move`` is told it."""

    game: int  # index of the game's reset
    obs: Any
    info: dict[str, Any]  # the observation and info the action was chosen on
    action: int
    reward: float
    next_obs: Any
    next_info: dict[str, Any]
    terminated: bool
    truncated: bool


def stack_observations(observations: Sequence[Any]) -> Any:
    """A batch of flat (array) or dict observations, leading dimension n."""
    if isinstance(observations[0], dict):
        return {k: np.stack([o[k] for o in observations]) for k in observations[0]}
    return np.stack(observations)


def play_lockstep(
    players: BatchPolicy | Seat,
    env_kwargs: Mapping[str, Any],
    resets: Sequence[Mapping[str, Any]],
    batch: int = LOCKSTEP_BATCH,
    engine: Engine = "auto",
    *,
    envs: Sequence[ColdIronEnv] | None = None,
    on_start: Callable[[int, Any, dict[str, Any]], None] | None = None,
    on_move: Callable[[Move], None] | None = None,
) -> list[Episode]:
    """Play one game per entry of ``resets`` (the kwargs of its ``reset``), in order, up to
    ``batch`` side by side.

    ``engine``: ``single`` plays plain :class:`ColdIronEnv` games (``envs``, reused batch after
    batch: by default ``min(batch, games)`` built from ``env_kwargs``); ``vector``, for a
    :class:`BatchPolicy` without hooks, one native vector env (the same games move for move, its
    batched observation several times faster with ``counting``); ``game`` the rules engine (no
    observation encoded: several times faster), on given decks (codes, or card ids), each seat's
    agent told :meth:`Knowledge.from_game <coldiron_env.knowledge.Knowledge.from_game>` before each
    decision, never the game (the hooks see that knowledge as the observation; ``info`` holds the
    ``action_mask``; rewards and an illegal action's loss are the env's defaults). ``auto`` (the
    default) takes ``vector`` when it can and Gymnasium has it, else ``single``.
    """
    if batch <= 0:
        raise ValueError(f"batch must be positive, got {batch!r}")
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {list(ENGINES)}, got {engine!r}")
    if not resets:
        return []
    if engine == "game":
        if isinstance(players, BatchPolicy) or envs is not None:
            raise ValueError("the game engine plays seats' agents (no BatchPolicy or envs)")
        rules = RuleOptions.from_kwargs(check_env_kwargs(env_kwargs))
        return _play_games(players, rules, resets, on_start, on_move)
    policy = players if isinstance(players, BatchPolicy) else None
    per_game = policy is None or envs is not None or on_start is not None or on_move is not None
    if engine == "vector" and per_game:
        raise ValueError("the vector engine plays a BatchPolicy alone (no seat, envs or hooks)")
    if engine == "vector" or (engine == "auto" and not per_game and _vector_can_play(resets)):
        assert policy is not None
        return [
            episode
            for start in range(0, len(resets), batch)
            for episode in _play_vector_chunk(policy, env_kwargs, resets[start : start + batch])
        ]
    tables = list(envs or [ColdIronEnv(**env_kwargs) for _ in range(min(batch, len(resets)))])
    episodes: list[Episode] = []
    for start in range(0, len(resets), len(tables)):
        chunk = resets[start : start + len(tables)]
        episodes += _play_chunk(players, tables[: len(chunk)], chunk, start, on_start, on_move)
    for env in tables if not envs else []:
        env.close()
    return episodes


def _play_chunk(
    players: BatchPolicy | Seat,
    envs: Sequence[ColdIronEnv],
    chunk: Sequence[Mapping[str, Any]],
    first: int,
    on_start: Callable[[int, Any, dict[str, Any]], None] | None,
    on_move: Callable[[Move], None] | None,
) -> list[Episode]:
    """:func:`play_lockstep`'s ``single`` engine on one batch (games ``first ..``)."""
    n = len(chunk)
    obs: list[Any] = []
    infos: list[dict[str, Any]] = []
    for i, (env, kwargs) in enumerate(zip(envs, chunk, strict=True)):
        o, info = env.reset(**kwargs)
        obs.append(o)
        infos.append(info)
        if on_start is not None:
            on_start(first + i, o, info)
    policy = players if isinstance(players, BatchPolicy) else None
    seats = [] if policy is not None else [cast(Seat, players)(first + i) for i in range(n)]
    ended: list[Episode | None] = [None] * n
    taken: list[list[int]] = [[] for _ in range(n)]
    starts = np.ones(n, dtype=bool)
    all_legal = np.ones(NUM_ACTIONS, dtype=bool)
    if policy is not None:
        policy.reset_states()
    while any(e is None for e in ended):
        actions: Sequence[int] | np.ndarray
        if policy is not None:
            masks = [
                all_legal if e is not None else info["action_mask"].astype(bool)
                for e, info in zip(ended, infos, strict=True)
            ]
            actions = policy.act(stack_observations(obs), np.stack(masks), starts)
            starts[:] = False
        else:
            actions = [
                seat.act(o, info["action_mask"], info) if e is None else 0
                for seat, o, info, e in zip(seats, obs, infos, ended, strict=True)
            ]
        for i, env in enumerate(envs):
            if ended[i] is not None:
                continue
            o, reward, terminated, truncated, info = env.step(actions[i])  # checks the action
            action = int(actions[i])
            taken[i].append(action)
            if on_move is not None:
                done = (bool(terminated), bool(truncated))
                on_move(Move(first + i, obs[i], infos[i], action, float(reward), o, info, *done))
            obs[i], infos[i] = o, info
            if terminated or truncated:
                ended[i] = Episode(
                    str(info["outcome"]), int(info["turn"]), len(taken[i]),
                    tuple(env.game.deck), tuple(taken[i]),
                )  # fmt: skip
    return [e for e in ended if e is not None]


def _play_games(
    seat: Seat,
    rules: RuleOptions,
    resets: Sequence[Mapping[str, Any]],
    on_start: Callable[[int, Any, dict[str, Any]], None] | None,
    on_move: Callable[[Move], None] | None,
) -> list[Episode]:
    """:func:`play_lockstep`'s ``game`` engine: one game after another on one engine (a
    reset's ``seed`` does not change a given deck's game, as in the env)."""
    episodes: list[Episode] = []
    game: Game | None = None
    checked: Agent | None = None
    for i, kwargs in enumerate(resets):
        if set(kwargs) - {"seed", "options"} or reset_deck_option(kwargs.get("options")) is None:
            raise ValueError(f"the game engine plays given decks, not reset({dict(kwargs)!r})")
        given = kwargs["options"]["deck"]
        ids = isinstance(given, (list, tuple)) and bool(given) and isinstance(given[0], int)
        deck = list(given) if ids else parse_deck(given)  # card ids (the engine's) or codes
        if game is None:
            game = Game(deck, rules)
        else:
            game.reset(deck, dealt=not ids)  # ids checked by the engine, codes by parse_deck
        agent = seat(i)
        # a Protocol's isinstance is slow: checked once an agent
        if agent is not checked and not isinstance(agent, KnowledgeActor):
            name = getattr(agent, "name", type(agent).__name__)
            raise ValueError(f"agent {name!r} cannot play on the engine (no act_knowledge)")
        checked = agent
        decide = cast(KnowledgeActor, agent).act_knowledge
        kn = Knowledge.from_game(game)
        info = {"action_mask": ENV_MASKS[game.phase].astype(np.int8)}
        if on_start is not None:
            on_start(i, kn, info)
        taken: list[int] = []
        while game.phase != PHASE_OVER:
            # not an action at all raises, as the env does (R18); an illegal one loses the game
            action = action_index(decide(kn))
            taken.append(action)
            if LEGAL_BITS[game.phase] >> action & 1:
                game.step(action)
            else:
                game.forfeit(action)
            after = Knowledge.from_game(game)
            if on_move is not None:
                next_info = {"action_mask": ENV_MASKS[game.phase].astype(np.int8)}
                reward = float(game.outcome == WON)
                over = game.phase == PHASE_OVER
                on_move(Move(i, kn, info, action, reward, after, next_info, over, False))
                info = next_info
            kn = after
        assert game.outcome is not None
        episodes.append(
            Episode(game.outcome, game.turn, game.steps, tuple(game.deck), tuple(taken))
        )
    return episodes


def _vector_can_play(resets: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the native vector env can deal these resets (a seed or a deck each)."""
    try:
        import coldiron_env.vector  # noqa: F401, PLC0415 (needs gymnasium >= 1.0)
    except ImportError:
        return False
    for kwargs in resets:
        if set(kwargs) - {"seed", "options"} or set(kwargs.get("options") or {}) - {"deck"}:
            return False
    return True


def _play_vector_chunk(
    policy: BatchPolicy, env_kwargs: Mapping[str, Any], chunk: Sequence[Mapping[str, Any]]
) -> list[Episode]:
    """:func:`play_lockstep`'s ``vector`` engine on one batch: each game's first ending is
    kept (``NEXT_STEP`` autoreset: the step after it deals that row a game nobody counts)."""
    from coldiron_env.vector import ColdIronVectorEnv  # noqa: PLC0415 (gymnasium >= 1.0)

    n = len(chunk)
    venv = ColdIronVectorEnv(n, autoreset_mode="NEXT_STEP", **env_kwargs)
    seeds = [kwargs.get("seed") for kwargs in chunk]
    decks = [(kwargs.get("options") or {}).get("deck") for kwargs in chunk]
    obs, info = venv.reset(
        seed=seeds if any(s is not None for s in seeds) else None,
        options={"deck": decks} if any(d is not None for d in decks) else None,
    )
    ended: list[Episode | None] = [None] * n
    taken: list[list[int]] = [[] for _ in range(n)]
    starts = np.ones(n, dtype=bool)
    policy.reset_states()
    while any(e is None for e in ended):
        actions = policy.act(obs, info["action_mask"].astype(bool), starts)
        starts[:] = False
        live = np.array([e is None for e in ended])
        obs, _, terminated, truncated, info = venv.step(actions)  # it checks the actions
        for i in np.flatnonzero(live).tolist():
            taken[i].append(int(actions[i]))
        for i in np.flatnonzero(live & (terminated | truncated)).tolist():
            ended[i] = Episode(
                str(info["outcome"][i]), int(info["turn"][i]), len(taken[i]),
                venv.deck_ids(i), tuple(taken[i]),
            )  # fmt: skip
    venv.close()
    return [e for e in ended if e is not None]
