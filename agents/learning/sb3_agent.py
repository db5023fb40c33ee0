"""Trained Stable-Baselines3 models as agents, and batched masked play.

:func:`load_sb3_agent` loads a run directory's ``model.zip`` or any ``.zip`` as an
:class:`SB3Agent`, which carries ``env_kwargs``: the env options its model was trained with
(the real game), so evaluation builds the matching env. A missing, corrupt or incompatible
file raises :class:`ModelLoadError`, naming it.

Actions are deterministic and always legal: the best legal logit (actor-critic) or Q-value
(DQN; QR-DQN: the mean over quantiles). For MaskablePPO this is exactly ``predict(obs,
action_masks=mask, deterministic=True)``; the others, trained without masks, play their best
legal action. RecurrentPPO keeps its LSTM state through an episode.
"""

from __future__ import annotations

import itertools
import json
import pickle
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import gymnasium as gym
import numpy as np
import torch as th
import yaml

from agents.evaluation.lockstep import stack_observations
from agents.learning.algorithms import AlgorithmSpec, algorithm_of, get_algorithm
from agents.learning.provenance import META_FILE, FileChanged, check_hashes
from agents.players.base import Agent, legal_rows
from agents.players.policy_net import PolicyNet
from coldiron_env import ENV_ID
from coldiron_env.actions import ENV_MASKS
from coldiron_env.knowledge import Knowledge
from coldiron_env.observation import ACTION_MASK_KEY, OBSERVATIONS_KEY, with_mask

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.vec_env import VecNormalize

MODEL_FILE: Final = "model.zip"
CONFIG_FILE: Final = "config.yaml"
VECNORMALIZE_FILE: Final = "vecnormalize.pkl"
ALGORITHM_ATTR: Final = "coldiron_algorithm"
"""Model attribute (saved inside the zip) naming its registry algorithm."""
ENV_KWARGS_ATTR: Final = "coldiron_env_kwargs"
"""Model attribute (saved inside the zip) holding the env kwargs it was trained for."""


class ModelLoadError(ValueError):
    """A model file that is missing, corrupt or incompatible (the message names it)."""


def q_values(policy: Any, obs_t: Any) -> th.Tensor:
    """A DQN's Q-values, or a QR-DQN's (the mean of its quantiles), shape (n, 19)."""
    if hasattr(policy, "quantile_net"):
        q: th.Tensor = policy.quantile_net(obs_t).mean(dim=1)
    else:
        q = policy.q_net(obs_t)
    return q


def zero_lstm_states(policy: Any, n: int) -> tuple[th.Tensor, th.Tensor]:
    """A recurrent policy's LSTM state at the start of ``n`` episodes."""
    shape = policy.lstm_hidden_state_shape
    zeros = th.zeros((shape[0], n, shape[2]), device=policy.device)
    return zeros, zeros.clone()


class MaskedPolicy:
    """Deterministic best-legal-action play of an SB3 model for a batch (leading dimension
    n); a recurrent model keeps an LSTM state a row, cleared where ``episode_starts``."""

    def __init__(self, model: BaseAlgorithm, obs_normalizer: VecNormalize | None = None) -> None:
        self.model = model
        self.spec: AlgorithmSpec = algorithm_of(model)
        self.obs_normalizer = obs_normalizer
        self._lstm_states: Any = None
        space = model.observation_space
        keys = set(space.spaces) if isinstance(space, gym.spaces.Dict) else set()
        self._mask_inside = keys == {OBSERVATIONS_KEY, ACTION_MASK_KEY}  # mask_in_observation

    def reset_states(self) -> None:
        self._lstm_states = None

    def scores(self, obs: Any, episode_starts: np.ndarray | None = None) -> Any:
        """Logits or Q-values, shape (n, 19), as a torch tensor (no gradient)."""
        policy: Any = self.model.policy
        if self.obs_normalizer is not None:
            obs = self.obs_normalizer.normalize_obs(obs)
        with th.no_grad():
            obs_t, _ = policy.obs_to_tensor(obs)
            if self.spec.family == "q_value":
                return q_values(policy, obs_t)
            if self.spec.recurrent:
                n = (next(iter(obs_t.values())) if isinstance(obs_t, dict) else obs_t).shape[0]
                if self._lstm_states is None or self._lstm_states[0].shape[1] != n:
                    self._lstm_states = zero_lstm_states(policy, n)
                starts = np.zeros(n) if episode_starts is None else episode_starts
                starts_t = th.as_tensor(starts, dtype=th.float32, device=policy.device)
                dist, self._lstm_states = policy.get_distribution(
                    obs_t, self._lstm_states, starts_t
                )
                return dist.distribution.logits
            return policy.get_distribution(obs_t).distribution.logits

    def act(
        self, obs: Any, masks: np.ndarray, episode_starts: np.ndarray | None = None
    ) -> np.ndarray:
        if self._mask_inside and not (isinstance(obs, dict) and ACTION_MASK_KEY in obs):
            obs = with_mask(obs, np.asarray(masks, dtype=np.int8))
        scores = self.scores(obs, episode_starts)
        legal = th.as_tensor(legal_rows(masks), device=scores.device)
        masked = th.where(legal, scores, th.full_like(scores, -th.inf))
        return masked.argmax(dim=1).cpu().numpy()


class SB3Agent(Agent):
    """A trained model playing as an :class:`~agents.players.base.Agent` (one env)."""

    def __init__(
        self,
        model: BaseAlgorithm,
        env_kwargs: dict[str, Any],
        name: str = "model",
        obs_normalizer: VecNormalize | None = None,
    ) -> None:
        self.model = model
        self.env_kwargs = dict(env_kwargs)
        self.env_kwargs_inferred = False
        """Whether ``env_kwargs`` were read from the observation space (a zip saved by SB3
        alone): its rule options unknown, the standard ones assumed."""
        self.name = name
        self.policy = MaskedPolicy(model, obs_normalizer)
        self._episode_start = True

    @property
    def batch_policy(self) -> MaskedPolicy:
        """The same play for a batch of games (evaluation plays deals in lockstep with it)."""
        return self.policy

    def reset(self, seed: int | None = None) -> None:
        self.policy.reset_states()
        self._episode_start = True

    def act(self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None = None) -> int:
        starts = np.array([self._episode_start])
        self._episode_start = False
        batch = stack_observations([obs])
        return int(self.policy.act(batch, np.asarray(action_mask)[None], starts)[0])


class KnowledgePolicy:
    """A trained memoryless model deciding from what the player knows (a
    :class:`~coldiron_env.knowledge.Knowledge`, as the planner's base policy), on the
    observation built from it. Recurrent models are refused: they need the whole episode."""

    def __init__(self, agent: SB3Agent) -> None:
        if agent.policy.spec.recurrent:
            raise ValueError(f"{agent.name}: a recurrent model cannot decide from a Knowledge")
        self.agent = agent
        self.name = agent.name
        kwargs = agent.env_kwargs
        self._obs_kwargs = {
            "mode": kwargs.get("observation_mode", "flat"),
            "recall": bool(kwargs.get("recall", False)),
            "counting": bool(kwargs.get("counting", False)),
        }

    def act_knowledge(self, kn: Knowledge) -> int:
        obs = kn.observation(**self._obs_kwargs)
        mask = ENV_MASKS[kn.phase][None].copy()
        return int(self.agent.policy.act(obs, mask)[0])


ACTIVATION_NAMES: Final = {th.nn.Tanh: "tanh", th.nn.ReLU: "relu"}
"""Torch activations a :class:`~agents.players.policy_net.PolicyNet` can run, by its names."""


def policy_net(agent: SB3Agent) -> PolicyNet:
    """The actor of a trained actor-critic MLP on flat observations (no normalizer) as a NumPy
    :class:`~agents.players.policy_net.PolicyNet`: its action scores without torch (what
    network-played rollouts run)."""
    policy: Any = agent.model.policy
    kwargs = agent.env_kwargs
    problems = []
    if agent.policy.spec.family == "q_value" or agent.policy.spec.recurrent:
        problems.append(f"a {agent.policy.spec.class_name} model (need an actor-critic MLP)")
    if kwargs.get("observation_mode", "flat") != "flat" or kwargs.get("mask_in_observation"):
        problems.append("not the flat observation")
    if agent.policy.obs_normalizer is not None:
        problems.append("an observation normalizer")
    if not problems and type(policy.features_extractor).__name__ != "FlattenExtractor":
        problems.append("a features extractor other than a flatten")
    activation = ACTIVATION_NAMES.get(getattr(policy, "activation_fn", None))  # type: ignore[arg-type]
    if not problems and activation is None:
        problems.append(f"activation {policy.activation_fn!r}")
    if problems:
        raise ValueError(
            f"{agent.name}: cannot run as a NumPy policy network: {'; '.join(problems)}"
        )
    layers = [m for m in policy.mlp_extractor.policy_net if isinstance(m, th.nn.Linear)]
    layers.append(policy.action_net)

    def array(t: th.Tensor) -> np.ndarray:
        return np.ascontiguousarray(t.detach().cpu().numpy().astype(np.float32))

    return PolicyNet(
        weights=tuple(array(layer.weight.T) for layer in layers),
        biases=tuple(array(layer.bias) for layer in layers),
        activation=str(activation),
        recall=bool(kwargs.get("recall", False)),
        counting=bool(kwargs.get("counting", False)),
        name=agent.name,
    )


def find_config(zip_path: Path) -> Path | None:
    """The resolved ``config.yaml`` saved beside the model ``zip_path`` (or its run folder)."""
    for folder in (zip_path.parent, zip_path.parent.parent):
        if (folder / CONFIG_FILE).is_file():
            return folder / CONFIG_FILE
    return None


def load_sb3_agent(
    path: str | Path,
    name: str | None = None,
    *,
    algorithm: str | None = None,
    env_kwargs: dict[str, Any] | None = None,
    normalizer_file: Path | None = None,
) -> SB3Agent:
    """Load a trained model (run directory or ``.zip``) as an agent.

    The algorithm and env options are the ones the zip records (:func:`tag_model`), else its
    run's ``config.yaml``'s, else ``algorithm`` and ``env_kwargs`` (another tool's run: see
    :mod:`agents.integrations.zoo_files`), else read off SB3's own record and the model's
    observation space. The normalizer is the ``vecnormalize.pkl`` beside the zip, else
    ``normalizer_file``. Raises :class:`ModelLoadError` naming the file when it is missing,
    corrupt, changed since its folder's ``meta.json`` recorded its SHA-256, not a model of a
    registered algorithm, or does not fit the env it was trained for.
    """
    given = Path(path)
    zip_path = given / MODEL_FILE if given.is_dir() else given
    if not zip_path.is_file():
        if not given.is_dir():
            raise ModelLoadError(f"{zip_path}: no such model file")
        others = sorted(p.name for p in given.glob("*.zip"))
        if others:  # an rl-zoo3 run folder: its models are named after the env
            raise ModelLoadError(
                f"{given}: no {MODEL_FILE} in this folder; pass one of the models in it: "
                f"{', '.join(others)}"
            )
        if (given / CONFIG_FILE).is_file() or (given / META_FILE).is_file():
            raise ModelLoadError(f"{zip_path}: missing (the run directory has no model)")
        raise ModelLoadError(
            f"{given}: not a run directory (no {MODEL_FILE}: a folder made by train.py, "
            "main.py or rl-zoo3 holds one)"
        )
    try:  # the files this load reads, where meta.json records them
        check_hashes(zip_path.parent, (zip_path.name, CONFIG_FILE, VECNORMALIZE_FILE))
    except FileChanged as exc:
        raise ModelLoadError(str(exc)) from None
    try:
        with zipfile.ZipFile(zip_path) as archive:
            data: dict[str, Any] = json.loads(archive.read("data"))
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise ModelLoadError(f"{zip_path}: not a Stable-Baselines3 model file ({exc})") from None
    algo_name, recorded = data.get(ALGORITHM_ATTR), data.get(ENV_KWARGS_ATTR)
    config_path = find_config(zip_path)
    if (algo_name is None or not recorded) and config_path is not None:
        try:
            cfg = yaml.safe_load(config_path.read_text(encoding="utf-8")) or {}
            algo_name = algo_name or (cfg.get("algorithm") or {}).get("name")
            recorded = recorded or dict(cfg["env"])
        except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError) as exc:
            raise ModelLoadError(f"{config_path}: cannot read the run's config: {exc}") from None
    algo_name = algo_name or algorithm or algorithm_from_data(data)  # SB3's own record last
    if algo_name is None:
        raise ModelLoadError(
            f"{zip_path}: cannot tell which algorithm trained this model "
            f"(no {ALGORITHM_ATTR!r} in the file, no {CONFIG_FILE} beside it, not an "
            "rl-zoo3 run, and its policy class is none of a registered algorithm's; "
            "agents.learning.sb3_agent.tag_model(model, ALGORITHM, ENV_KWARGS) before "
            "model.save() records both)"
        )
    try:
        spec = get_algorithm(str(algo_name))
    except ValueError as exc:
        raise ModelLoadError(f"{zip_path}: {exc}") from None
    try:
        model = spec.load_class().load(zip_path, device="cpu")
    except Exception as exc:  # SB3 raises many kinds on a bad file
        raise ModelLoadError(
            f"{zip_path}: cannot load as {spec.class_name}: {type(exc).__name__}: {exc}"
        ) from None
    model.tensorboard_log = None  # the run's folder it was saved in: a learn() would write there
    kwargs = recorded if recorded is not None else env_kwargs
    inferred = kwargs is None
    if kwargs is None:  # the observation options whose space the model was built on
        kwargs = observation_kwargs_of(model.observation_space)
        if kwargs is None:
            raise ModelLoadError(
                f"{zip_path}: no env options of the standard rules give its observation space "
                f"{model.observation_space} (a rule variant or a curriculum's turns change a "
                "dict space): record them with agents.learning.sb3_agent.tag_model(model, "
                "ALGORITHM, ENV_KWARGS) before model.save()"
            )
    _check_compatible(model, dict(kwargs), zip_path)
    normalizer = None
    norm_path = zip_path.parent / VECNORMALIZE_FILE
    if not norm_path.is_file() and normalizer_file is not None:
        norm_path = normalizer_file
    if norm_path.is_file():
        try:
            normalizer = pickle.loads(norm_path.read_bytes())
        except Exception as exc:
            raise ModelLoadError(
                f"{norm_path}: cannot load the observation normalizer: {exc}"
            ) from None
        normalizer.training = False
    label = name or (given.name if given.is_dir() else given.stem)
    agent = SB3Agent(model, dict(kwargs), name=label, obs_normalizer=normalizer)
    agent.env_kwargs_inferred = inferred  # its rules unknown: the standard ones assumed
    return agent


POLICY_MODULES: Final = {
    "sb3_contrib.common.maskable.policies": "maskable_ppo",
    "sb3_contrib.common.recurrent.policies": "recurrent_ppo",
    "sb3_contrib.qrdqn.policies": "qrdqn",
    "stable_baselines3.dqn.policies": "dqn",
}
"""The registered algorithm of a policy class's module (SB3's own actor-critic is below)."""
ACTOR_CRITIC_MODULE: Final = "stable_baselines3.common.policies"
PPO_ONLY_KEY: Final = "clip_range"
"""Saved by PPO, not A2C (which share the actor-critic policy)."""
TRPO_KEY: Final = "cg_max_steps"
"""Saved by sb3-contrib's TRPO (not registered), which shares the actor-critic policy too."""


def algorithm_from_data(data: dict[str, Any]) -> str | None:
    """The registered algorithm of a zip saved by SB3 itself, read from its ``data`` record
    (its policy class's module; PPO and A2C told apart by PPO's ``clip_range``), or None."""
    policy = data.get("policy_class")
    module = policy.get("__module__") if isinstance(policy, dict) else None
    if module == ACTOR_CRITIC_MODULE:
        return "ppo" if PPO_ONLY_KEY in data else None if TRPO_KEY in data else "a2c"
    return POLICY_MODULES.get(str(module))


def observation_kwargs_of(space: gym.Space[Any]) -> dict[str, Any] | None:
    """The env's observation options (mode, recall, counting, the mask inside) whose space is
    ``space`` under the standard rules, or None when none is."""
    names = ("observation_mode", "recall", "counting", "mask_in_observation")
    for values in itertools.product(("flat", "dict"), *[(False, True)] * (len(names) - 1)):
        kwargs: dict[str, Any] = dict(zip(names, values, strict=True))
        env = gym.make(ENV_ID, **kwargs)
        matches = env.observation_space == space
        env.close()
        if matches:
            return {k: v for k, v in kwargs.items() if v not in (False, "flat")}
    return None


def _check_compatible(model: BaseAlgorithm, env_kwargs: dict[str, Any], zip_path: Path) -> None:
    try:
        env = gym.make(ENV_ID, **env_kwargs)
    except (TypeError, ValueError) as exc:
        raise ModelLoadError(
            f"{zip_path}: its env options {env_kwargs} are invalid: {exc}"
        ) from None
    env.close()
    for kind in ("action", "observation"):
        has, wants = getattr(model, f"{kind}_space"), getattr(env, f"{kind}_space")
        if has != wants:
            raise ModelLoadError(
                f"{zip_path}: model {kind} space {has} does not match the env's {wants} "
                f"(env options {env_kwargs})"
            )


def tag_model(model: BaseAlgorithm, algorithm: str, env_kwargs: dict[str, Any]) -> None:
    """Record the algorithm and env kwargs on the model (saved inside its zip)."""
    setattr(model, ALGORITHM_ATTR, algorithm)
    setattr(model, ENV_KWARGS_ATTR, dict(env_kwargs))
