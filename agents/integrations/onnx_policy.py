"""Trained policies as ONNX files: export with torch, play with onnxruntime and numpy alone.

**The file.** ``scripts/export.py --agent NAME --out FILE.onnx``
(:func:`agents.integrations.onnx_export.export_onnx`) writes
a trained model's deterministic masked play as one ONNX graph:

* inputs ``observation`` (float32, ``[batch, n]``: the env's flat observation) and
  ``action_mask`` (int8, ``[batch, 19]``: ``info["action_mask"]``, nonzero = legal);
* output ``action`` (int64, ``[batch]``): the best legal action, the one
  :class:`agents.learning.sb3_agent.SB3Agent` plays (the most probable legal action of an
  actor-critic policy, the highest legal Q-value of DQN, the highest legal mean over
  quantiles of QR-DQN; ties go to the lowest index, as torch's ``argmax``);
* ``metadata_props``: ``env_kwargs`` (JSON: the env options the model was trained with, so
  ``gym.make("coldiron/ColdIron-v0", **env_kwargs)`` gives its observation), and the
  algorithm, the source and the observation size.

A ``vecnormalize.pkl`` beside the model is folded into the graph (its observation
statistics), so the file takes the env's raw observation. Recurrent policies
(RecurrentPPO) and dict observations are refused: the graph is a memoryless function of
one flat observation.

**Running it.** :class:`OnnxPolicy` and :func:`load_onnx_agent` (what
``agents.registry.make_agent("x.onnx")`` returns) need onnxruntime and numpy only: this
module never imports torch or Stable-Baselines3 (the export is
:mod:`agents.integrations.onnx_export`). The agent
carries ``env_kwargs`` and a ``batch_policy``, so ``scripts/evaluate.py --agent x.onnx``
plays it on the right observation, many deals at once.

An ONNX file is not a pickle: loading one runs no Python code from it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from agents.players.base import Agent, legal_rows
from coldiron_env.actions import NUM_ACTIONS
from coldiron_env.env import ColdIronEnv

if TYPE_CHECKING:
    import onnxruntime


ONNX_SUFFIX: Final = ".onnx"
OBSERVATION_INPUT: Final = "observation"
MASK_INPUT: Final = "action_mask"
ACTION_OUTPUT: Final = "action"
BATCH_DIM: Final = "batch"
ENV_KWARGS_KEY: Final = "env_kwargs"
"""``metadata_props`` key of the env options (a JSON object)."""
ALGORITHM_KEY: Final = "coldiron_algorithm"
SOURCE_KEY: Final = "coldiron_source"
OBS_SIZE_KEY: Final = "coldiron_observation_size"
FORMAT_KEY: Final = "coldiron_onnx_format"
FORMAT_VERSION: Final = "1"
"""Version of this file layout (inputs, output, metadata), checked when a file is loaded."""
ONNX_OBS_TYPE: Final = "tensor(float)"
ONNX_MASK_TYPE: Final = "tensor(int8)"
ONNX_ACTION_TYPE: Final = "tensor(int64)"
MASK_DTYPE: Final = np.int8
RUNTIME_THREADS: Final = 1
"""onnxruntime threads by default: one, as torch's for play (a small network; a busy
2-core machine)."""


class OnnxLoadError(ValueError):
    """An ONNX file that is missing, corrupt or not a Cold Iron policy (the message names it)."""


# ------------------------------------------------------------------ runtime (no torch)
class OnnxPolicy:
    """An exported policy run by onnxruntime: the arena's ``BatchPolicy``.

    ``act(obs, masks)`` takes a batch (leading dimension n, or one unbatched row) and
    returns n legal actions (int64). The policy is memoryless: ``reset_states`` and
    ``episode_starts`` are accepted and ignored.
    """

    def __init__(self, path: str | os.PathLike[str], threads: int = RUNTIME_THREADS) -> None:
        import onnxruntime as ort  # noqa: PLC0415 (the onnx extra)

        self.path = Path(path)
        if not self.path.is_file():
            raise OnnxLoadError(f"{self.path}: no such ONNX file")
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a positive int, got {threads!r}")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        try:
            self.session: onnxruntime.InferenceSession = ort.InferenceSession(
                str(self.path), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own kinds on a bad file
            raise OnnxLoadError(
                f"{self.path}: not a loadable ONNX model ({type(exc).__name__}: {exc})"
            ) from None
        self.metadata: dict[str, str] = dict(self.session.get_modelmeta().custom_metadata_map)
        self.env_kwargs = _metadata_env_kwargs(self.path, self.metadata)
        self.observation_size = self._check_signature()
        self.algorithm = self.metadata.get(ALGORITHM_KEY, "")

    def _check_signature(self) -> int:
        inputs = {i.name: i for i in self.session.get_inputs()}
        outputs = {o.name: o for o in self.session.get_outputs()}
        expected = {OBSERVATION_INPUT: ONNX_OBS_TYPE, MASK_INPUT: ONNX_MASK_TYPE}
        if set(inputs) != set(expected) or ACTION_OUTPUT not in outputs:
            raise OnnxLoadError(
                f"{self.path}: expected inputs {sorted(expected)} and output {ACTION_OUTPUT!r}, "
                f"got inputs {sorted(inputs)} and outputs {sorted(outputs)} "
                "(write the file with scripts/export.py)"
            )
        for name, dtype in expected.items():
            if inputs[name].type != dtype:
                raise OnnxLoadError(
                    f"{self.path}: input {name!r} is {inputs[name].type}, expected {dtype}"
                )
        if outputs[ACTION_OUTPUT].type != ONNX_ACTION_TYPE:
            raise OnnxLoadError(
                f"{self.path}: output {ACTION_OUTPUT!r} is {outputs[ACTION_OUTPUT].type}, "
                f"expected {ONNX_ACTION_TYPE}"
            )
        obs_shape = inputs[OBSERVATION_INPUT].shape
        mask_shape = inputs[MASK_INPUT].shape
        if (
            len(obs_shape) != 2
            or not isinstance(obs_shape[1], int)
            or mask_shape[1:] != [NUM_ACTIONS]
        ):
            raise OnnxLoadError(
                f"{self.path}: input shapes {obs_shape} and {mask_shape}, expected "
                f"[batch, n] and [batch, {NUM_ACTIONS}]"
            )
        return int(obs_shape[1])

    def reset_states(self) -> None:
        """Nothing to forget: the exported policy has no memory."""

    def act(
        self, obs: Any, masks: np.ndarray, episode_starts: np.ndarray | None = None
    ) -> np.ndarray:
        observation = np.asarray(obs, dtype=np.float32)
        mask = np.asarray(masks)
        if observation.ndim == 1:
            observation, mask = observation[None], mask[None]
        if observation.ndim != 2 or observation.shape[1] != self.observation_size:
            raise ValueError(
                f"{self.path.name}: observation batch of shape {observation.shape}, expected "
                f"(n, {self.observation_size}) (env options {self.env_kwargs})"
            )
        if mask.shape != (observation.shape[0], NUM_ACTIONS):
            raise ValueError(
                f"{self.path.name}: action mask batch of shape {mask.shape}, expected "
                f"({observation.shape[0]}, {NUM_ACTIONS})"
            )
        legal = legal_rows(mask).astype(MASK_DTYPE)
        feed = {OBSERVATION_INPUT: np.ascontiguousarray(observation), MASK_INPUT: legal}
        actions: np.ndarray = self.session.run([ACTION_OUTPUT], feed)[0]
        return actions


def _metadata_env_kwargs(path: Path, metadata: Mapping[str, str]) -> dict[str, Any]:
    if metadata.get(FORMAT_KEY) != FORMAT_VERSION:
        raise OnnxLoadError(
            f"{path}: not a Cold Iron policy of format {FORMAT_VERSION} ({FORMAT_KEY!r} is "
            f"{metadata.get(FORMAT_KEY)!r} in its metadata; write it with scripts/export.py)"
        )
    text = metadata.get(ENV_KWARGS_KEY)
    if text is None:
        raise OnnxLoadError(f"{path}: no {ENV_KWARGS_KEY!r} in its metadata_props")
    try:
        env_kwargs = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OnnxLoadError(f"{path}: {ENV_KWARGS_KEY!r} is not JSON ({exc})") from None
    if not isinstance(env_kwargs, dict):
        raise OnnxLoadError(f"{path}: {ENV_KWARGS_KEY!r} is not a JSON object: {text}")
    return env_kwargs


class OnnxAgent(Agent):
    """An exported policy playing as an :class:`~agents.players.base.Agent` (one env), with
    the env options it needs (``env_kwargs``) and its batched play (``batch_policy``)."""

    def __init__(self, policy: OnnxPolicy, name: str) -> None:
        self.policy = policy
        self.name = name
        self.env_kwargs: dict[str, Any] = dict(policy.env_kwargs)

    @property
    def batch_policy(self) -> OnnxPolicy:
        return self.policy

    def act(self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None = None) -> int:
        return int(self.policy.act(np.asarray(obs)[None], np.asarray(action_mask)[None])[0])


def load_onnx_agent(
    path: str | os.PathLike[str], name: str | None = None, threads: int = RUNTIME_THREADS
) -> OnnxAgent:
    """The policy in the ONNX file ``path`` (written by :func:`export_onnx`) as an agent.

    :class:`OnnxLoadError` names the file when it is missing, not ONNX, lacks the metadata,
    has other inputs or outputs, or does not fit the observation of its own ``env_kwargs``.
    """
    policy = OnnxPolicy(path, threads=threads)
    try:
        env = ColdIronEnv(**policy.env_kwargs)
    except (TypeError, ValueError) as exc:
        raise OnnxLoadError(
            f"{policy.path}: its env options {policy.env_kwargs} are invalid: {exc}"
        ) from None
    shape = env.observation_space.shape
    env.close()
    if shape != (policy.observation_size,):
        raise OnnxLoadError(
            f"{policy.path}: takes observations of size {policy.observation_size}, but its env "
            f"options {policy.env_kwargs} give observations of shape {shape}"
        )
    return OnnxAgent(policy, name or policy.path.name)


def agent_from_path(path: Path) -> OnnxAgent | None:
    """The ``.onnx`` policy at ``path`` as an agent, None for any other file (the registry's
    loader: ``pyproject.toml``'s ``coldiron.loaders`` entry points)."""
    return load_onnx_agent(path) if path.suffix == ".onnx" and path.is_file() else None
