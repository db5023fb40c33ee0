"""A native batched Cold Iron: ``N`` games stepped at once by one compiled loop.

:class:`ColdIronVectorEnv` is a :class:`gymnasium.vector.VectorEnv` that plays exactly the
games of :class:`~coldiron_env.env.ColdIronEnv` (the rules of ``RULES.md``), ``num_envs`` at a
time. It is registered as the ``vector_entry_point`` of ``coldiron/ColdIron-v0``::

    envs = gymnasium.make_vec("coldiron/ColdIron-v0", num_envs=1024,
                              vectorization_mode="vector_entry_point")

The games are stepped by the batched rules core, :func:`coldiron_env.batched.step_games`.
With numba installed (the ``fast`` extra: ``pip install "coldiron[fast]"``) it is compiled
(``backend="numba"``, the default then; about a second to compile the first time, cached on
disk). Without numba the same code runs as plain Python (``backend="python"``): the same
games, about forty times slower, with a warning saying so. Observations are written by
:func:`coldiron_env.observation.encode_batch`, the layout's one owner.

Autoreset
---------
``autoreset_mode`` is ``AutoresetMode.SAME_STEP`` (default, SB3's convention) or
``NEXT_STEP`` (Gymnasium's default; a ``gymnasium.vector.AutoresetMode`` or its name):

* ``SAME_STEP``: a game that ends is dealt again within the same :meth:`step`; the returned
  observation and ``info`` are those of the new deal; the last observation is in
  ``info["final_obs"]`` (an object array, entry ``i`` set where ``info["_final_obs"][i]``)
  and the last ``info`` in ``info["final_info"]``. The state is never ``over`` when a step
  begins, so every mask has a legal action.
* ``NEXT_STEP``: the step that ends a game returns its terminal observation, ``info`` and
  reward; the next :meth:`step` deals that game again, ignores its action and returns the new
  deal's observation with reward 0 and ``terminated``/``truncated`` false. The terminal step's
  ``action_mask`` marks every action (:data:`~coldiron_env.actions.ENV_MASKS`: the game is over
  and whatever is sampled is ignored), so a masked sampler always has an action to draw.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from gymnasium import spaces
from gymnasium.utils import seeding

try:
    from gymnasium.vector import AutoresetMode, VectorEnv
    from gymnasium.vector.utils import batch_space
except ImportError as _old:  # pragma: no cover - exercised on gymnasium 0.29
    import gymnasium

    raise ImportError(
        f"the native vector env needs gymnasium>=1.0 (installed: {gymnasium.__version__}); "
        "the single env coldiron/ColdIron-v0 also works with gymnasium 0.29.1"
    ) from _old

from coldiron_env.actions import ENV_MASKS, ENV_MASKS_INT8, LEGAL_MASKS, NUM_ACTIONS, PHASE_NAMES
from coldiron_env.batched import (
    CODE_WON,
    FORFEIT,
    NUMBA_AVAILABLE,
    OUTCOME_NAMES,
    PLAYING,
    SKIP,
    SLOW_WARNING,
    pack_rules,
    step_games,
)
from coldiron_env.cards import DECK_SIZE, hand_codes, parse_deck
from coldiron_env.dealer import SHUFFLE_BATCH, audit_deals, auditing, relabel_jokers
from coldiron_env.env import (
    ColdIronEnv,
    SeedError,
    check_option,
    curriculum_rules,
    is_int,
    reset_deck_option,
    seed_value,
)
from coldiron_env.game import I8, I64, GameOverError, Games, IllegalActionError, describe_illegal
from coldiron_env.observation import encode_batch, with_mask
from coldiron_env.options import plain

Bools = npt.NDArray[np.bool_]
AnyArray = npt.NDArray[Any]

PHASE_NAME_ARRAY: Final = np.array(PHASE_NAMES)
OUTCOME_NAME_ARRAY: Final = np.array(OUTCOME_NAMES)
_ORDERED_BATCH: Final = np.broadcast_to(
    np.arange(DECK_SIZE, dtype=np.int64), (SHUFFLE_BATCH, DECK_SIZE)
)
AUTORESET_MODES: Final = (AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP)
BACKENDS: Final = ("auto", "numba", "python")


class ColdIronVectorEnv(VectorEnv[Any, I64, AnyArray]):
    """``num_envs`` games of Cold Iron stepped together (a native :class:`VectorEnv`).

    Takes the keyword arguments of :class:`~coldiron_env.env.ColdIronEnv` (validated by it,
    with the same messages) except that ``render_mode`` must be ``None``; plus
    ``max_episode_steps`` (optional truncation, as ``gymnasium.make`` would add; every game
    ends by itself within 74 steps), ``autoreset_mode`` (see the module doc) and ``backend``
    (``"auto"``: numba when installed, else ``"python"``).

    * Spaces: ``single_observation_space`` / ``single_action_space`` are the single env's;
      ``observation_space`` and ``action_space`` (``MultiDiscrete([19] * N)``) are batched:
      flat observations an (N, obs size) float32 array, dict observations a dict of arrays.
    * ``step(actions)`` takes N integer actions. One outside ``Discrete(19)`` raises
      :class:`IllegalActionError` (no game changes); an illegal one ends that game
      (``outcome="illegal"``), raises, or is penalized, as ``illegal_action`` says.
    * ``info`` (Gymnasium's dict-of-arrays convention, each key with its ``_key`` mask):
      ``action_mask`` (N, 19) int8, ``phase`` (a NumPy string array of names), ``turn``,
      ``hurt``, ``deck_count``, ``iron_count``; for the games that ended this step,
      ``outcome`` (string array, ``""`` where ``_outcome`` is false) and ``is_success``
      (under ``SAME_STEP`` also inside ``final_info``, with ``final_obs``). A key that no
      game has this step is absent, as in Gymnasium. The single env's per-game ``hand`` and
      ``drawn`` are left out (see :meth:`hand_codes`).
    * ``reset(seed=s)`` seeds game ``i`` with ``s + i``: it deals game ``i`` exactly the decks a
      :class:`ColdIronEnv` deals after ``reset(seed=s + i)``, on the first deal and on every
      automatic one (each game has its own generator and batch of shuffles). It also takes a
      list or NumPy array of N seeds, ``None`` entries keeping that game's generator (every
      seed is checked before any game is reseeded); ``reset(options={"deck": decks})`` deals
      ``decks[i]`` (54 codes, or ``None`` for a shuffled deck) to game ``i``.
    * :meth:`set_env_kwargs` changes ``turns`` / ``suits_required`` (training curricula)
      from each game's next deal.
    """

    metadata: dict[str, Any] = {  # noqa: RUF012 (Gymnasium declares it so)
        "autoreset_mode": AutoresetMode.SAME_STEP,
        "render_modes": [],
    }

    def __init__(
        self,
        num_envs: int,
        render_mode: str | None = None,
        max_episode_steps: int | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
        backend: str = "auto",
        **kwargs: Any,
    ) -> None:
        num_envs = plain(num_envs)  # np.int64(3) too, as the sync and async vector envs
        check_option(is_int(num_envs) and num_envs >= 1, "num_envs", "a positive int", num_envs)
        if render_mode is not None:
            raise ValueError(
                f"render_mode must be None for the native vector env, got {render_mode!r}; "
                "render single games with ColdIronEnv"
            )
        max_episode_steps = plain(max_episode_steps)
        ok = max_episode_steps is None or (is_int(max_episode_steps) and max_episode_steps >= 1)
        check_option(ok, "max_episode_steps", "None or a positive int", max_episode_steps)
        self.autoreset_mode = _autoreset_mode(autoreset_mode)
        self.metadata = {**type(self).metadata, "autoreset_mode": self.autoreset_mode}
        check_option(backend in BACKENDS, "backend", f"one of {BACKENDS}", backend)
        if backend == "numba" and not NUMBA_AVAILABLE:
            raise ValueError(
                "backend='numba' needs numba: pip install 'coldiron[fast]' (or use 'python')"
            )
        self.backend = "numba" if backend == "auto" and NUMBA_AVAILABLE else backend
        if self.backend == "auto":
            self.backend = "python"
            warnings.warn(SLOW_WARNING, RuntimeWarning, stacklevel=2)
        template = ColdIronEnv(**kwargs)  # validates every option, with its messages
        self._env_kwargs = template.env_kwargs()
        self.num_envs = num_envs
        self.render_mode = None
        self.rules = template.rules
        self.observation_mode = template.observation_mode
        self.recall = template.recall
        self.counting = template.counting
        self.mask_in_observation = template.mask_in_observation
        self.win_reward = template.win_reward
        self.loss_reward = template.loss_reward
        self.illegal_action = template.illegal_action
        self.illegal_reward = template.illegal_reward
        self.max_illegal_actions = template.max_illegal_actions
        self.max_episode_steps = max_episode_steps
        self.single_observation_space = template.observation_space
        self._max_turns = template._max_turns()
        self.single_action_space = spaces.Discrete(NUM_ACTIONS)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        template.close()
        self._rewards = np.array(
            [0.0, self.win_reward] + [self.loss_reward] * (len(OUTCOME_NAMES) - 2), dtype=np.float64
        )
        self._next_rules = self.rules
        self._packed = pack_rules(self.rules)  # the variants: fixed at construction

        n = num_envs
        self._index = np.arange(n)
        self._games = Games.zeros(n)
        self._games.deal(self._index, 0, self.rules)
        self._arrays = tuple(self._games)  # the same arrays, for step_games' faster dispatch
        self._steps = np.zeros(n, dtype=np.int64)
        self._illegal_count = np.zeros(n, dtype=np.int64)
        self._pending_reset = np.zeros(n, dtype=np.bool_)  # NEXT_STEP: deal again next step
        # dealing: a generator and a batch of shuffles per game, as ColdIronEnv's Dealer
        self._rngs: list[np.random.Generator | None] = [None] * n
        self._pool = np.zeros((n, SHUFFLE_BATCH, DECK_SIZE), dtype=np.int8)
        self._pool_next = np.full(n, SHUFFLE_BATCH, dtype=np.int64)
        self._needs_reset = True

    # ------------------------------------------------------------ Gym API
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | npt.NDArray[np.integer[Any]] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Deal a new game to every env (see the class docstring for ``seed`` and ``options``)."""
        n = self.num_envs
        seeds = self._seed_list(seed)
        decks = self._deck_option(options)
        for i, s in enumerate(seeds):
            if s is not None:
                self._rngs[i] = seeding.np_random(s)[0]
                self._pool_next[i] = SHUFFLE_BATCH  # a new generator discards the batch
        if isinstance(seed, (int, np.integer)):
            super().reset(seed=int(seed))  # the vector env's own np_random, as Gymnasium's
        dealt = np.empty((n, DECK_SIZE), dtype=np.int8)
        shuffled = np.array([i for i, d in enumerate(decks) if d is None], dtype=np.int64)
        if shuffled.size:
            dealt[shuffled] = self._deal(shuffled)
        for i, codes in enumerate(decks):
            if codes is not None:  # a given deck consumes no randomness, as in ColdIronEnv
                dealt[i] = codes
        self._start(self._index, dealt)
        self._pending_reset[:] = False
        self._needs_reset = False
        return self._observe(None), self._info()

    def step(
        self, actions: Any
    ) -> tuple[Any, npt.NDArray[np.float64], Bools, Bools, dict[str, Any]]:
        """Take one action in every game (games that end are dealt again: ``autoreset_mode``)."""
        if self._needs_reset:
            raise GameOverError("step() called before reset()")
        action = self._check_actions(actions)
        restarting = self._pending_reset
        legal = LEGAL_MASKS[self._games.phase, action] | restarting
        if self.illegal_action == "raise" and not legal.all():  # before anything changes
            i = int(np.flatnonzero(~legal)[0])
            raise IllegalActionError(
                f"env {i}: {describe_illegal(int(action[i]), int(self._games.phase[i]))}"
            )
        if restarting.any():  # NEXT_STEP: these games ended last step; their action is ignored
            again = np.flatnonzero(restarting)
            self._start(again, self._deal(again))
            action = np.where(restarting, SKIP, action)
        penalized: Bools | None = None
        limit: Bools | None = None
        if not legal.all():
            if self.illegal_action == "penalize":  # nothing happens, until the limit
                penalized = ~legal
                self._illegal_count += penalized
                limit = penalized & (self._illegal_count >= self.max_illegal_actions)
                action = np.where(penalized, np.where(limit, FORFEIT, SKIP), action)
            else:
                action = np.where(legal, action, FORFEIT)
        # the compiled kernel or its Python (looked up here: an attribute would not pickle)
        kernel = step_games if self.backend == "numba" else step_games.py_func
        kernel(action, self._arrays, self._packed)
        outcome = self._games.outcome
        terminated = outcome != PLAYING
        self._steps += ~restarting
        if self.max_episode_steps is None:
            truncated = np.zeros(self.num_envs, dtype=np.bool_)
        else:
            truncated = self._steps >= self.max_episode_steps
        rewards = self._rewards[outcome]
        if penalized is not None and limit is not None:
            rewards[penalized] = self.illegal_reward
            rewards[limit] += self.loss_reward  # the forfeit: penalized, and the game lost
        done = terminated | truncated
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            self._pending_reset = done.copy()
            info = self._info(outcome=outcome if done.any() else None)
            return self._observe(None), rewards, terminated, truncated, info
        if not done.any():
            return self._observe(None), rewards, terminated, truncated, self._info()
        ended = np.flatnonzero(done)
        final_batch = self._observe(ended)
        final_info = self._info(outcome=outcome, rows=ended)
        final_obs = np.full(self.num_envs, None, dtype=object)
        if isinstance(final_batch, dict):
            for j, i in enumerate(ended.tolist()):
                final_obs[i] = _row(final_batch, j)
        else:
            final_obs[ended] = np.fromiter(final_batch, dtype=object, count=ended.size)
        self._start(ended, self._deal(ended))
        info = self._info()
        info.update(final_obs=final_obs, _final_obs=done, final_info=final_info, _final_info=done)
        for key in ("outcome", "is_success"):
            if key in final_info:  # not when only truncations ended games
                info[key] = final_info[key]
                info["_" + key] = final_info["_" + key]
        return self._observe(None), rewards, terminated, truncated, info

    def action_masks(self) -> Bools:
        """Legal actions of every game, an (N, 19) bool array (for sb3-contrib's MaskablePPO);
        a game that is over (waiting for its ``NEXT_STEP`` deal) marks every action. Before
        the first ``reset()`` there are no games: ``GameOverError``, as ``step()``."""
        if self._needs_reset:
            raise GameOverError("action_masks() called before reset()")
        return np.take(ENV_MASKS, self._games.phase, axis=0)

    def set_env_kwargs(self, env_kwargs: Mapping[str, Any]) -> None:
        """Play every game dealt from now on with these ``turns`` / ``suits_required``.

        For training curricula; any other option must keep its value (the spaces
        and rewards are fixed at construction). Games in progress keep their rules.
        """
        self._next_rules = curriculum_rules(
            self._next_rules, self._env_kwargs, env_kwargs, "the vector env", self._max_turns
        )

    # ------------------------------------------------------------ queries
    def hand_codes(self, i: int) -> list[str]:
        """Card codes of game ``i``'s hand, sorted by suit then rank (the single env's ``hand``)."""
        return hand_codes(int(self._games.hand[self._env_index(i)]))

    def deck_ids(self, i: int) -> tuple[int, ...]:
        """Card ids of game ``i`` in the order the game uses them, Jokers relabelled as drawn
        (the single env's ``game.deck``)."""
        return tuple(int(c) for c in self._games.deck[self._env_index(i)])

    def _env_index(self, i: int) -> int:
        if (
            isinstance(i, bool)
            or not isinstance(i, (int, np.integer))
            or not 0 <= i < self.num_envs
        ):
            raise IndexError(f"env index must be an int in 0..{self.num_envs - 1}, got {i!r}")
        return int(i)

    def state_nbytes(self) -> int:
        """Bytes of NumPy state held for all games (grows linearly with ``num_envs``)."""
        arrays = [v for v in vars(self).values() if isinstance(v, np.ndarray) and v.base is None]
        return sum(a.nbytes for a in [*arrays, *self._games])

    # ------------------------------------------------------------ internals
    def _check_actions(self, actions: Any) -> I64:
        a = np.asarray(actions)
        if a.shape != (self.num_envs,):
            raise IllegalActionError(
                f"actions must be an array of {self.num_envs} integers (one per env, shape "
                f"({self.num_envs},)), got shape {a.shape}"
            )
        if a.dtype.kind not in "iu":
            raise IllegalActionError(
                f"actions must be integers in 0..{NUM_ACTIONS - 1}, got dtype {a.dtype}"
            )
        out = a.astype(np.int64, copy=True)
        outside = (out < 0) | (out >= NUM_ACTIONS)
        if outside.any():
            i = int(np.flatnonzero(outside)[0])
            raise IllegalActionError(
                f"env {i}: action {int(out[i])} is outside the action space Discrete({NUM_ACTIONS})"
            )
        return out

    def _seed_list(self, seed: object) -> list[int | None]:
        n = self.num_envs
        if seed is None:
            return [None] * n
        if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            first = seed_value(seed)  # the single env's rule (and error)
            assert first is not None
            return [first + i for i in range(n)]
        if isinstance(seed, np.ndarray) and seed.ndim == 1:
            seed = seed.tolist()  # one seed an env, as a list
        if isinstance(seed, (str, bytes)) or not isinstance(seed, Sequence):
            raise SeedError(f"seed must be None, an int or a list of {n} ints, got {seed!r}")
        if len(seed) != n:
            raise SeedError(f"seed list must hold {n} entries (one per env), got {len(seed)}")
        out: list[int | None] = []
        for i, s in enumerate(seed):  # every seed checked before any env is reseeded
            try:
                out.append(seed_value(s))  # the single env's rule
            except SeedError as err:
                raise SeedError(f"seed for env {i}: {err}") from None
        return out

    def _deck_option(self, options: dict[str, Any] | None) -> list[list[int] | None]:
        n = self.num_envs
        decks = reset_deck_option(options)
        if decks is None:
            return [None] * n
        if isinstance(decks, (str, bytes)) or not isinstance(decks, Iterable):
            raise ValueError(
                f"deck option must be a list of {n} decks (each 54 card codes or None), "
                f"got {type(decks).__name__}"
            )
        decks = list(decks)  # also a tuple, or a NumPy array with one row per env
        if len(decks) > 0 and all(isinstance(d, str) for d in decks):
            raise ValueError(
                f"deck option must be a list of {n} decks (one per env, each 54 card codes or "
                f"None), got a single list of {len(decks)} codes"
            )
        if len(decks) != n:
            raise ValueError(f"deck option must hold {n} decks (one per env), got {len(decks)}")
        out: list[list[int] | None] = []
        for i, codes in enumerate(decks):
            try:
                out.append(None if codes is None else parse_deck(codes))
            except ValueError as err:
                raise ValueError(f"deck option, env {i}: {err}") from None
        return out

    def _deal(self, envs: I64) -> I8:
        """The next shuffled deck of each game in ``envs``, each from its own generator (game
        ``i`` refills its batch of shuffles exactly as a :class:`~coldiron_env.dealer.Dealer`)."""
        empty = envs[self._pool_next[envs] >= SHUFFLE_BATCH]
        if empty.size:
            for i in empty.tolist():
                rng = self._rngs[i]
                if rng is None:
                    rng = self._rngs[i] = seeding.np_random()[0]
                self._pool[i] = rng.permuted(_ORDERED_BATCH, axis=1)
            self._pool[empty] = relabel_jokers(self._pool[empty])
            self._pool_next[empty] = 0
        decks = np.take(
            self._pool.reshape(-1, DECK_SIZE), envs * SHUFFLE_BATCH + self._pool_next[envs], axis=0
        )
        self._pool_next[envs] += 1
        if auditing():
            audit_deals([self._rngs[i] for i in envs.tolist()], decks)
        return decks

    def _start(self, envs: I64, decks: I8) -> None:
        """Start new games on ``decks`` (k, 54) in ``envs``, with the rules now in force."""
        self._games.deal(envs, decks, self._next_rules)
        self._steps[envs] = 0
        self._illegal_count[envs] = 0

    def _observe(self, envs: I64 | None) -> Any:
        games = self._games
        obs = encode_batch(
            self.observation_mode, games, self.rules, self.recall, self.counting, envs
        )
        if self.mask_in_observation:
            phase = games.phase if envs is None else games.phase[envs]
            return with_mask(obs, np.take(ENV_MASKS_INT8, phase, axis=0))
        return obs

    def _info(self, outcome: I64 | None = None, rows: I64 | None = None) -> dict[str, Any]:
        """The batched ``info`` of every game; with ``outcome``, the outcomes of the games
        that ended; with ``rows``, only those games are marked present."""
        phase = self._games.phase
        present = np.zeros(self.num_envs, dtype=np.bool_)
        present[slice(None) if rows is None else rows] = True
        info: dict[str, Any] = {
            "action_mask": np.take(ENV_MASKS_INT8, phase, axis=0),
            "phase": PHASE_NAME_ARRAY[phase],
            "turn": self._games.turn.copy(),
            "hurt": self._games.hurt.copy(),
            "deck_count": DECK_SIZE - self._games.pos,
            "iron_count": self._games.iron_count.copy(),
        }
        for key in list(info):
            info["_" + key] = present.copy()  # one array a key, as Gymnasium's vector envs
        if outcome is not None and (over := outcome != PLAYING).any():  # absent when none ended
            info["outcome"] = OUTCOME_NAME_ARRAY[outcome]
            info["_outcome"] = over
            info["is_success"] = outcome == CODE_WON
            info["_is_success"] = over
        return info


def _row(batch: dict[str, Any], j: int) -> dict[str, Any]:
    """Game ``j``'s observation from a batch of (possibly nested) dict observations."""
    return {k: _row(v, j) if isinstance(v, dict) else v[j] for k, v in batch.items()}


def _autoreset_mode(value: AutoresetMode | str) -> AutoresetMode:
    """An ``AutoresetMode`` from itself or its name (``"next_step"``, ``"SAME_STEP"``...)."""
    key = value.strip().upper() if isinstance(value, str) else None
    for mode in AUTORESET_MODES:
        if value is mode or key in (mode.name, str(mode.value).upper()):
            return mode
    names = [m.name for m in AUTORESET_MODES]
    raise ValueError(f"autoreset_mode must be one of {names} (or its name), got {value!r}")
