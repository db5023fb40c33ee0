"""The Gymnasium environment ``coldiron/ColdIron-v0``, a thin adapter over the rules engine."""

from __future__ import annotations

import inspect
import operator
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final, Literal, SupportsFloat, get_args

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from coldiron_env import observation as obs_layout
from coldiron_env.actions import (
    ACTION_TABLE,
    ENV_MASKS,
    ENV_MASKS_INT8,
    LEGAL_BITS,
    NUM_ACTIONS,
    PHASE_NAMES,
    PHASE_OVER,
)
from coldiron_env.cards import CARD_CODES, DECK_SIZE, hand_codes
from coldiron_env.dealer import Dealer
from coldiron_env.game import (
    WON,
    Game,
    GameOverError,
    IllegalActionError,
    action_index,
    max_decisions,
)
from coldiron_env.options import CURRICULUM_KEYS, RuleOptions, plain
from coldiron_env.picture import draw_table
from coldiron_env.render import render_text

IllegalAction = Literal["end", "raise", "penalize"]
ILLEGAL_ACTION_POLICIES: Final = get_args(IllegalAction)
DEFAULT_ILLEGAL_REWARD: Final = -0.1
"""Reward of an illegal action under ``illegal_action="penalize"``."""
DEFAULT_MAX_ILLEGAL: Final = 10
"""Illegal actions in an episode under ``illegal_action="penalize"``: the last forfeits the game."""
RESET_OPTION_KEYS: Final = ("deck",)
_REWARDS: Final = ("win_reward", "loss_reward", "illegal_reward")  # the options checked finite


class SeedError(ValueError, gym.error.Error):
    """A seed ``reset`` cannot take. Both a ``ValueError`` and Gymnasium's own ``Error`` (what
    Gymnasium raises for a negative seed), so the single and the vector env raise one class
    and code catching either keeps working."""


def seed_value(seed: Any) -> int | None:
    """``reset``'s seed as Gymnasium takes it: None or an int of at least 0 (a NumPy integer
    as the int it holds; a bool or anything else refused by name, as the vector env does)."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise SeedError(f"seed must be an int or None, got {seed!r}")
    value = operator.index(seed)
    if value < 0:
        raise SeedError(f"seed must be at least 0, got {value}")
    return value


def reset_deck_option(options: Any) -> Any:
    """The ``deck`` of ``reset``'s ``options`` (None without one), the options checked: a
    dict of :data:`RESET_OPTION_KEYS` (the single env's and the vector env's ``reset``)."""
    if options is not None and not isinstance(options, Mapping):
        raise ValueError(f"reset options must be a dict, got {options!r}")
    unknown = sorted(set(options or ()) - set(RESET_OPTION_KEYS))
    if unknown:
        raise ValueError(f"unknown reset option(s) {unknown}; known: {list(RESET_OPTION_KEYS)}")
    return (options or {}).get("deck")


def is_int(value: object) -> bool:
    """An int proper: not a bool (a NumPy integer is taken through :func:`plain` first)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_option(ok: bool, name: str, what: str, value: object) -> None:
    """Refuse option ``name``'s ``value`` unless ``ok``, in the words every option shares."""
    if not ok:
        raise ValueError(f"{name} must be {what}, got {value!r}")


class ColdIronEnv(gym.Env[Any, np.int64]):
    """
    Cold Iron, a solo card game by Matthew Hartley: over 24 turns (6pm to midnight) the
    parents question a changeling to collect, in each of the four suits, three numbered
    cards of consecutive rank, before the Changeling's Hurt reaches 6 or the deck runs out.

    ## Description
    A 54-card pack (40 numbered cards Ace..10 in four suits, 12 court cards, 2 Jokers) is
    shuffled face down. Each turn the player applies one method:

    - **Threaten**: draw one card; a numbered card is kept, a court card discarded. A
      Joker offers three bonus draws, which the player may take.
    - **Apply the Iron**: draw and resolve one card, then the Changeling takes 1 Hurt. A
      Joker (if the Changeling lives) offers three bonus draws in which each court card
      hurts. Up to three applications a turn, decided one at a time after seeing each card.
    - **Rack the Creature**: name a rank or a suit and draw until a numbered card of it
      appears (kept). Every court card drawn on the way hurts; a Joker slays the Changeling.
    - **Rest and Lament**: draw and discard one card; Hurt -1.

    The game is won the moment the hand holds the phrase: a run of three consecutive ranks
    in every suit (A-2-3 .. 8-9-10, no wrap-around). It is lost when Hurt reaches 6
    (``slain``), when the deck empties first (``deck_exhausted``), or when the 24th turn
    ends (``midnight``). Every rule and ruling is numbered in ``RULES.md``.

    ## Action Space
    ``Discrete(19)``; legality depends on the phase (``info["action_mask"]``,
    :meth:`action_masks`).

    {actions}

    ## Observation Space
    Default (``observation_mode="flat"``): ``Box(0, 1, (48,), float32)``; ``recall=True``
    appends the discard pile (54 values), ``counting=True`` what a card-counting player
    computes from the cards seen (153 values: the deck's contents, each suit's live run
    windows and useful cards, each rack's odds...); with both, ``(255,)``, laid out as below
    (without ``recall`` there is no ``discarded`` and every later block starts 54 places
    earlier: ``observation.flat_fields(recall, counting)`` gives the slices of any
    combination). A card id is ``suit * 10 + rank - 1`` for the numbered cards (suits
    Hearts, Diamonds, Clubs, Spades; Ace = 1), ``40 + suit * 3 + court`` for Jack, Queen,
    King, and 52, 53 for the Jokers in the order they are drawn (``coldiron_env.cards``):

    {layout}

    ``observation_mode="dict"``: a ``Dict`` with the same content in natural types: ``hand``
    MultiBinary(40), ``hurt`` Discrete(7), ``turn`` Discrete(turns + 1), ``deck_count``
    Discrete(55), ``phase`` Discrete(4), ``iron_count`` Discrete(4), and with ``recall=True``
    ``discarded`` MultiBinary(54), with ``counting=True`` ``counting`` (``Box(0, 1,
    (153,))``, the counting rows of the table in order).

    ``mask_in_observation=True`` (either mode): ``Dict({"observations": <the observation
    above>, "action_mask": Box(0, 1, (19,), int8)})``, the convention of RLlib's
    action-masking RLModule and TorchRL's ``ActionMask`` transform; ``action_mask`` equals
    ``info["action_mask"]``. Without ``recall`` or ``counting`` the discard pile is hidden,
    as the rules require, and the game is partially observable: a player must remember what
    was drawn.

    ## Rewards
    ``win_reward`` (default 1.0) on the step that wins; ``loss_reward`` (default 0.0) on the
    step that loses (slain, deck exhausted, midnight, or an illegal action under
    ``illegal_action="end"``); ``illegal_reward`` (default -0.1) on an illegal action under
    ``illegal_action="penalize"``, plus ``loss_reward`` on the one that forfeits the game;
    0.0 on every other step.

    ## Illegal actions
    What an action outside the mask (``info["action_mask"]``) does is ``illegal_action``:

    * ``"end"`` (default): the episode ends at once as a loss (``illegal``). For learners
      that use the mask (sb3-contrib's MaskablePPO, a masked sampler): they never take one,
      and evaluation counts it as a loss.
    * ``"raise"``: :class:`~coldiron_env.game.IllegalActionError` naming the action, the
      phase and the legal actions (nothing changes). For debugging a player.
    * ``"penalize"``: for learners without masks (SB3's PPO, A2C, DQN, rl-zoo3, CleanRL):
      nothing happens in the game, the step's reward is ``illegal_reward``, and the
      ``max_illegal_actions``-th illegal action of an episode forfeits the game: it ends as
      a loss (``terminated=True``, outcome ``illegal``, reward ``illegal_reward +
      loss_reward``). Under ``"end"`` such a learner's first illegal action ends the
      episode with the same reward as any loss, which teaches it nothing.

    An action outside ``Discrete(19)`` always raises. ``illegal_reward`` and
    ``max_illegal_actions`` other than their defaults under another policy do nothing, and
    the env warns so.

    ## Starting State
    A shuffled deck drawn from ``self.np_random`` (or the deck given as
    ``reset(options={"deck": [...]})``), an empty hand, Hurt 0, turn 1 (6:00pm), phase
    ``turn``. Decks are shuffled 64 at a time (``coldiron_env.dealer.Dealer``):
    ``reset(seed=s)`` and the resets after it replay exactly, and so does a copy or pickle
    of the env, but restoring ``np_random``'s state between resets does not replay the next
    deal, and drawing from ``np_random`` does not change it. A seed is None or an int of at
    least 0 (a NumPy integer too); any other raises ``SeedError``.

    ## Episode End
    Termination: the phrase completes (``won``), Hurt reaches 6 (``slain``), the deck
    empties without the phrase (``deck_exhausted``), the 24th turn ends (``midnight``), or
    an illegal action is taken with ``illegal_action="end"`` or the
    ``max_illegal_actions``-th with ``"penalize"`` (``illegal``). Every game ends within 74
    decisions in the standard game, so no time limit is needed and the env never truncates;
    ``env.unwrapped.max_episode_steps`` bounds an episode's steps, illegal actions included
    (for a ``TimeLimit`` that never cuts a game short; the registration sets none, so
    ``gym.make`` adds no ``TimeLimit``). ``step`` after the episode ended raises
    :class:`~coldiron_env.game.GameOverError`, and so does ``step`` before the first
    ``reset`` on the env itself (through ``gym.make``, Gymnasium's ``OrderEnforcing`` raises
    ``ResetNeeded`` first).

    ## Information
    After ``reset`` and every ``step``: ``action_mask`` (``np.int8``, shape (19,), a fresh
    array each call; once the episode has ended it marks every action, so an all-zero mask
    never signals the end), ``phase`` (``"turn"``, ``"iron"``, ``"bonus"``, ``"over"``),
    ``turn``, ``hurt``, ``deck_count``, ``iron_count``, ``hand`` (card codes sorted by suit
    then rank), ``drawn`` (codes of the cards the step drew, in order); when the episode
    ends, ``outcome`` (``"won"``, ``"slain"``, ``"deck_exhausted"``, ``"midnight"``,
    ``"illegal"``) and ``is_success`` (bool).

    ## Rendering
    ``render_mode="ansi"``: :meth:`render` returns the table as text (clock, Hurt, deck
    count, the hand by suit with its best run window's cards marked ``*``, the last action
    and its draws, then the legal actions or the outcome); ``"human"`` prints that text
    after every ``reset`` and ``step``; ``"rgb_array"`` returns the same table drawn as a
    ``(480, 640, 3)`` ``uint8`` image. Without a render mode :meth:`render` warns and
    returns None.

    ## Arguments
    ```python
    import gymnasium as gym
    import coldiron_env

    env = gym.make(
        "coldiron/ColdIron-v0",
        render_mode=None,            # or "ansi", "human", "rgb_array" (see Rendering)
        observation_mode="flat",     # or "dict"
        recall=False,                # True: observe the discard pile (perfect memory)
        counting=False,              # True: also what a card counter computes (see the table)
        bonus_always=False,          # variant: a Joker's bonus is always taken
        bonus_joker_grants_more=False,  # variant: a Joker among bonus draws grants 3 more
        win_reward=1.0,
        loss_reward=0.0,
        illegal_action="end",        # or "raise", or "penalize" (learners without masks)
        illegal_reward=-0.1,         # "penalize": reward of an illegal action
        max_illegal_actions=10,      # "penalize": the game is forfeit (lost) at this many
        turns=24,                    # training curricula only: not the real game
        suits_required=4,            # training curricula only: not the real game
        mask_in_observation=False,   # True: Dict(observations=, action_mask=) (RLlib, TorchRL)
    )
    obs, info = env.reset(seed=0, options={"deck": None})  # or 54 card codes
    ```

    A training curriculum changes ``turns`` and ``suits_required`` between deals, in any
    framework: ``env.unwrapped.set_env_kwargs({"suits_required": 1})`` (or
    ``envs.call("set_env_kwargs", {...})`` on Gymnasium's sync or async vector env,
    ``envs.set_env_kwargs({...})`` on the native one, which has no ``call``, and
    ``envs.unwrapped.set_env_kwargs({...})`` once it is wrapped) takes effect at the next
    ``reset``; the observation space stays as built.

    ## Version History
    * v0: Initial version. The id stays ``v0`` (other code relies on it, as the project's
      contract lays down), so the changes are listed here:

      - added later, each off by default (earlier configurations' observations and rewards
        unchanged): ``counting``, ``illegal_action="penalize"`` with ``illegal_reward`` and
        ``max_illegal_actions``, ``render_mode="rgb_array"``, ``mask_in_observation``;
      - 2026-12-04: the forfeit under ``"penalize"`` became a termination with the loss's
        reward added (it was a truncation: learners bootstrapped from a game that was over);
      - 2026-12-05, the native vector env: actions not shaped ``(num_envs,)`` are refused (any
        array of ``num_envs`` values was reshaped); a negative seed is refused before any env
        is reseeded; a NumPy array of seeds is taken; each ``_key`` of ``info`` is its own
        array; ``hand_codes`` / ``deck_ids`` refuse an index outside ``0..num_envs - 1`` (-1
        read the last env);
      - 2026-12-05, the single env: a NumPy integer seed is taken as the int it holds and a
        bool seed refused, as the vector env does; ``illegal_reward`` or
        ``max_illegal_actions`` set under another policy than ``"penalize"`` is warned about
        (it does nothing); the text render marks a penalized illegal action as the last one
        and says why a slain Changeling died (a Joker drawn by a rack, or Hurt 6);
      - 2026-12-05, both envs: a seed ``reset`` cannot take raises ``coldiron_env.SeedError``,
        both a ``ValueError`` and a ``gymnasium.error.Error`` (the single env raised
        Gymnasium's, the vector env a ``ValueError``).
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "human", "rgb_array"], "render_fps": 4}  # noqa: RUF012 (Gymnasium declares it so)

    def __init__(
        self,
        render_mode: str | None = None,
        observation_mode: str = "flat",
        recall: bool = False,
        counting: bool = False,
        bonus_always: bool = False,
        bonus_joker_grants_more: bool = False,
        win_reward: float = 1.0,
        loss_reward: float = 0.0,
        illegal_action: str = "end",
        illegal_reward: float = DEFAULT_ILLEGAL_REWARD,
        max_illegal_actions: int = DEFAULT_MAX_ILLEGAL,
        turns: int = 24,
        suits_required: int = 4,
        mask_in_observation: bool = False,
    ) -> None:
        # a NumPy scalar (a sweep's value) is taken as the Python value it holds
        recall, counting, mask_in_observation = map(plain, (recall, counting, mask_in_observation))
        win_reward, loss_reward, illegal_reward, max_illegal_actions = map(
            plain, (win_reward, loss_reward, illegal_reward, max_illegal_actions)
        )
        renders = self.metadata["render_modes"]
        ok = render_mode is None or render_mode in renders
        check_option(ok, "render_mode", f"None or one of {renders}", render_mode)
        views = obs_layout.OBSERVATION_MODES
        ok = observation_mode in views
        check_option(ok, "observation_mode", f"one of {views}", observation_mode)
        flags = {"recall": recall, "counting": counting, "mask_in_observation": mask_in_observation}
        for name, flag in flags.items():
            check_option(isinstance(flag, bool), name, "a bool", flag)
        policies = ILLEGAL_ACTION_POLICIES
        ok = illegal_action in policies
        check_option(ok, "illegal_action", f"one of {policies}", illegal_action)
        for name, value in zip(_REWARDS, (win_reward, loss_reward, illegal_reward), strict=True):
            ok = is_int(value) or isinstance(value, float)  # only then finite: a str is no number
            check_option(ok and bool(np.isfinite(value)), name, "a finite number", value)
        ok = is_int(max_illegal_actions) and max_illegal_actions >= 1
        check_option(ok, "max_illegal_actions", "a positive int", max_illegal_actions)
        inert = [
            f"{name}={value!r}"
            for name, value, default in (
                ("illegal_reward", illegal_reward, DEFAULT_ILLEGAL_REWARD),
                ("max_illegal_actions", max_illegal_actions, DEFAULT_MAX_ILLEGAL),
            )
            if value != default
        ]
        if inert and illegal_action != "penalize":  # an option that does nothing: said
            gym.logger.warn(
                f"{', '.join(inert)} applies only under illegal_action='penalize', "
                f"not {illegal_action!r}: it does nothing here"
            )
        rules = RuleOptions(
            bonus_always=bonus_always,
            bonus_joker_grants_more=bonus_joker_grants_more,
            turns=turns,
            suits_required=suits_required,
        )
        self.render_mode = render_mode
        self.observation_mode = observation_mode
        self.recall = recall
        self.counting = counting
        self.mask_in_observation = mask_in_observation
        self.win_reward = float(win_reward)
        self.loss_reward = float(loss_reward)
        self.illegal_action = illegal_action
        self.illegal_reward = float(illegal_reward)
        self.max_illegal_actions = max_illegal_actions
        self._raise_illegal = illegal_action == "raise"
        self._penalize = illegal_action == "penalize"
        self.illegal_count = 0
        """Illegal actions taken in this episode (``penalize``)."""
        self._penalized = False  # the last step an illegal action penalized (the text shows it)

        self.action_space = spaces.Discrete(NUM_ACTIONS)
        self.observation_space = obs_layout.observation_space(
            observation_mode, recall, rules.turns, counting, mask_in_observation
        )
        self._flat = observation_mode == "flat"
        self._apply_rules(rules)
        self._next_rules = self.rules
        self._dealer = Dealer()
        self._needs_reset = True
        self._hand_mask = -1
        self._hand_codes: list[str] = []

    # ------------------------------------------------------------ Gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        codes = reset_deck_option(options)
        super().reset(seed=seed_value(seed))
        if self._next_rules is not self.rules:  # a curriculum's new stage
            self._apply_rules(self._next_rules)
        self.game.reset(self._dealer.deal(self.np_random, codes), dealt=True)
        self.illegal_count = 0
        self._penalized = False
        self._needs_reset = False
        self._encoder.clear()
        self._hand_mask = -1
        if self.render_mode == "human":
            self.render()
        return self._observe(), self._info()

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        game = self.game
        a = action_index(action)
        if self._needs_reset or game.phase == PHASE_OVER:
            raise GameOverError("step() called before reset() or after the episode ended")
        self._penalized = False
        if LEGAL_BITS[game.phase] >> a & 1:
            game.step(a)
        elif self._raise_illegal:
            raise IllegalActionError(game.describe_illegal(a))
        elif self._penalize:
            self.illegal_count += 1
            game.drawn = []
            game.last_action = a  # what the table shows as the last action
            self._penalized = True
            if self.illegal_count >= self.max_illegal_actions:
                game.forfeit(a)  # the game is lost: penalized, and the loss's reward
        else:
            game.forfeit(a)
        reward = 0.0
        terminated = game.phase == PHASE_OVER
        if terminated:
            reward = self.win_reward if game.outcome == WON else self.loss_reward
        if self._penalized:
            reward = self.illegal_reward + reward
        if self.render_mode == "human":
            self.render()
        return self._observe(), reward, terminated, False, self._info()

    def render(self) -> str | np.ndarray | None:
        if self.render_mode is None:
            gym.logger.warn(
                "render() called without a render_mode; pass render_mode='ansi', 'human' "
                "or 'rgb_array' to gymnasium.make"
            )
            return None
        if self.render_mode == "rgb_array":
            return draw_table(self.game, self._penalized and self.game.outcome is None)
        text = render_text(self.game)
        if self._penalized and self.game.outcome is None:
            count = f"{self.illegal_count} of {self.max_illegal_actions}"
            text = f"{text.rstrip()}\n(that action was illegal: penalized, {count})\n"
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def env_kwargs(self) -> dict[str, Any]:
        """Every option of this env by name, as ``ColdIronEnv(**env.env_kwargs())`` rebuilds
        it (``render_mode`` aside); the rule options are those of the current deal."""
        out = {
            name: getattr(self, name)
            for name in inspect.signature(ColdIronEnv).parameters
            if name != "render_mode" and hasattr(self, name)
        }
        out.update(self.rules.to_dict())
        return out

    def set_env_kwargs(self, env_kwargs: Mapping[str, Any]) -> None:
        """Deal every game from the next ``reset`` on with these ``turns`` /
        ``suits_required`` (a training curriculum); any other option must keep its value
        (the spaces and rewards are fixed at construction)."""
        self._next_rules = curriculum_rules(
            self._next_rules, self.env_kwargs(), env_kwargs, "the env", self._max_turns()
        )

    def _max_turns(self) -> int | None:
        """The most turns the observation space holds (dict mode), None when unbounded."""
        if self._flat:
            return None
        space: Any = self.observation_space
        if self.mask_in_observation:
            space = space[obs_layout.OBSERVATIONS_KEY]
        return int(space["turn"].n) - 1

    def _apply_rules(self, rules: RuleOptions) -> None:
        self.rules = rules
        self.game = Game(list(range(DECK_SIZE)), rules)
        self._encoder = obs_layout.FlatEncoder(self.recall, rules.turns, self.counting)
        self.max_episode_steps = max_decisions(rules) + (
            self.max_illegal_actions if self._penalize else 0
        )

    def action_masks(self) -> np.ndarray:
        """Legal actions as a bool array of shape (19,) (for sb3-contrib's MaskablePPO);
        every action once the episode has ended (see ``info["action_mask"]``). Before the
        first ``reset()`` there is no game: ``GameOverError``, as ``step()``."""
        if self._needs_reset:
            raise GameOverError("action_masks() called before reset()")
        mask: np.ndarray = ENV_MASKS[self.game.phase].copy()
        return mask

    # ------------------------------------------------------------ helpers
    def _observe(self) -> Any:
        obs: Any
        if self._flat:
            obs = self._encoder.encode(self.game)
        else:
            obs = obs_layout.dict_observation(self.game, self.recall, self.counting)
        if self.mask_in_observation:
            return obs_layout.with_mask(obs, ENV_MASKS_INT8[self.game.phase].copy())
        return obs

    def _info(self) -> dict[str, Any]:
        game = self.game
        if game.hand != self._hand_mask:
            self._hand_mask = game.hand
            self._hand_codes = hand_codes(game.hand)
        info: dict[str, Any] = {
            "action_mask": ENV_MASKS_INT8[game.phase].copy(),
            "phase": PHASE_NAMES[game.phase],
            "turn": game.turn,
            "hurt": game.hurt,
            "deck_count": DECK_SIZE - game.pos,
            "iron_count": game.iron_count,
            "hand": list(self._hand_codes),
            "drawn": [CARD_CODES[c] for c in game.drawn],
        }
        if game.outcome is not None:
            info["outcome"] = game.outcome
            info["is_success"] = game.outcome == WON
        return info


def curriculum_rules(
    rules: RuleOptions,
    known: Mapping[str, Any],
    env_kwargs: Mapping[str, Any],
    who: str,
    max_turns: int | None = None,
) -> RuleOptions:
    """``rules`` with the ``turns`` / ``suits_required`` of ``env_kwargs``. Refuses, by name, an
    unknown option, a change to anything but :data:`CURRICULUM_KEYS` (``known``: the env's
    options now), or more ``turns`` than ``max_turns`` (dict mode's ``turn`` is
    ``Discrete(turns + 1)`` as built: a longer game would leave the space)."""
    unknown = sorted(set(env_kwargs) - set(known))
    if unknown:
        raise ValueError(f"unknown env option(s) {unknown}; known: {sorted(known)}")
    fixed = sorted(k for k, v in env_kwargs.items() if k not in CURRICULUM_KEYS and v != known[k])
    if fixed:
        raise ValueError(
            f"{who} can change only {list(CURRICULUM_KEYS)} between deals, not {fixed}"
        )
    turns = plain(env_kwargs.get("turns"))  # np.int64(30) too: a sweep's value
    if max_turns is not None and isinstance(turns, int) and turns > max_turns:
        raise ValueError(
            f"{who} was built with turns={max_turns} in dict mode, whose 'turn' space holds "
            f"no more: turns={turns} would leave the observation space (build it with the "
            "largest turns of the curriculum)"
        )
    return replace(rules, **{k: env_kwargs[k] for k in CURRICULUM_KEYS if k in env_kwargs})


if ColdIronEnv.__doc__ is not None:  # None under python -OO
    ColdIronEnv.__doc__ = ColdIronEnv.__doc__.replace(
        "{actions}", ACTION_TABLE.replace("\n", "\n    ")
    ).replace("{layout}", obs_layout.layout_table().replace("\n", "\n    "))
