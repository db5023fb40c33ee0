"""Export a trained policy as ONNX (torch, Stable-Baselines3): the other half of
:mod:`agents.integrations.onnx_policy`, which runs the file with onnxruntime alone.

``scripts/export.py`` is the command line; the file's layout is described in
:mod:`agents.integrations.onnx_policy`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from agents.atomic import atomic_write_bytes
from agents.evaluation.lockstep import Move, play_lockstep
from agents.players.base import Agent
from coldiron_env.actions import NUM_ACTIONS

if TYPE_CHECKING:
    from agents.learning.sb3_agent import MaskedPolicy, SB3Agent

from agents.integrations.onnx_policy import (
    ACTION_OUTPUT,
    ALGORITHM_KEY,
    BATCH_DIM,
    ENV_KWARGS_KEY,
    FORMAT_KEY,
    FORMAT_VERSION,
    MASK_DTYPE,
    MASK_INPUT,
    OBS_SIZE_KEY,
    OBSERVATION_INPUT,
    ONNX_SUFFIX,
    RUNTIME_THREADS,
    SOURCE_KEY,
    load_onnx_agent,
)

OPSET: Final = 18
CHECK_ROWS: Final = 512
"""Random (observation, mask) rows the export checks the file on against the model."""
CHECK_SEED: Final = 0
TIE_TOLERANCE: Final = 1e-4
"""Two legal scores closer than this (relative to the larger) are a near-tie: float
rounding may order them differently in onnxruntime and torch, so the check skips such rows."""
EXPORTER_NOISE: Final = (
    r".*The axis name: .* will not be used",
    r".*isinstance\(treespec, LeafSpec\)",
)
"""Warnings of torch.onnx's exporter that say nothing about the exported graph."""
NEW_FILE_MODE: Final = 0o666
BENCHMARK_BATCH: Final = 256
"""Rows of the batched inference timing (the evaluator's lockstep batch)."""
WARMUP_DEALS: Final = 16
"""Deals each agent plays in each mode before the timings (compilation, first calls)."""
BENCHMARK_REPEATS: Final = 3
"""Each timing is the best of this many passes (the machine is shared)."""


class OnnxExportError(ValueError):
    """A spec that cannot be exported (not a network, recurrent, bad ``--out``...)."""


# ------------------------------------------------------------------ export (torch, lazily)
@dataclass(frozen=True)
class ExportResult:
    """What :func:`export_onnx` wrote."""

    path: Path
    source: str
    algorithm: str
    env_kwargs: dict[str, Any]
    observation_size: int
    checked_rows: int
    near_ties: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path), "source": self.source, "algorithm": self.algorithm,
            "env_kwargs": self.env_kwargs, "observation_size": self.observation_size,
            "checked_rows": self.checked_rows, "near_ties": self.near_ties,
            "seconds": round(self.seconds, 3),
        }  # fmt: skip


def check_out_path(out: str | os.PathLike[str]) -> Path:
    """``out`` as the path to write, or :class:`OnnxExportError` saying what is wrong."""
    path = Path(out)
    if path.suffix != ONNX_SUFFIX:
        raise OnnxExportError(f"--out {str(out)!r}: the file name must end in {ONNX_SUFFIX}")
    if path.is_dir():
        raise OnnxExportError(f"--out {str(out)!r} is a directory; give a file name")
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if ancestor.exists() and not ancestor.is_dir():
        raise OnnxExportError(f"--out {str(out)!r}: {str(ancestor)!r} is a file, not a folder")
    if ancestor.exists() and not os.access(ancestor, os.W_OK):
        raise OnnxExportError(f"--out {str(out)!r}: cannot write in {str(ancestor)!r}")
    return path


def network_agent(agent_spec: str) -> SB3Agent:
    """The trained network ``agent_spec`` names; :class:`OnnxExportError` for a built-in
    player, a search over a network, an ONNX file or a recurrent or dict-observation model
    (``ValueError`` naming the spec for an unknown one)."""
    from agents.learning.sb3_agent import SB3Agent  # noqa: PLC0415 (training stack)
    from agents.registry import SEARCH_OVER_MODELS, SHIPPED_MODELS, is_builtin, make_agent  # noqa: PLC0415

    trained = ", ".join(SHIPPED_MODELS)
    if is_builtin(agent_spec):
        raise OnnxExportError(
            f"{agent_spec!r} is a built-in player, not a network: only a trained model can be "
            f"exported ({trained}, a run directory or a .zip model)"
        )
    search = SEARCH_OVER_MODELS.get(agent_spec)
    if search is not None:
        raise OnnxExportError(
            f"{agent_spec!r} searches (rollouts) over the network {search.model!r}: only the "
            f"network itself can be exported (--agent {search.model})"
        )
    if Path(agent_spec).suffix == ONNX_SUFFIX:
        raise OnnxExportError(f"{agent_spec!r} is already an ONNX policy")
    agent = make_agent(agent_spec)
    if not isinstance(agent, SB3Agent):
        raise OnnxExportError(
            f"{agent_spec!r} is not a Stable-Baselines3 network ({type(agent).__name__}): only "
            f"a trained model can be exported ({trained}, a run directory or a .zip model)"
        )
    spec = agent.policy.spec
    if spec.recurrent:
        raise OnnxExportError(
            f"{agent_spec!r} is a {spec.class_name} ({spec.name}) model: its LSTM state runs "
            "through the episode, and the exported graph is a function of one observation; "
            "recurrent policies are not exported"
        )
    if (
        agent.env_kwargs.get("mask_in_observation")
        or agent.env_kwargs.get("observation_mode", "flat") != "flat"
    ):
        raise OnnxExportError(
            f"{agent_spec!r} was trained on a dict observation (env options "
            f"{agent.env_kwargs}); the ONNX file takes the flat observation "
            "(observation_mode='flat')"
        )
    return agent


def _greedy_module(policy: MaskedPolicy) -> Any:
    """A torch module ``(observation, action_mask) -> action``: the scores
    :meth:`MaskedPolicy.scores` computes, illegal ones set to -inf, then argmax."""
    import torch as th  # noqa: PLC0415 (export only)
    from stable_baselines3.common.preprocessing import preprocess_obs  # noqa: PLC0415

    sb3_policy: Any = policy.model.policy
    normalizer = policy.obs_normalizer
    family = policy.spec.family

    class Greedy(th.nn.Module):
        mean: th.Tensor
        scale: th.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.policy = sb3_policy
            self.normalize = normalizer is not None and bool(normalizer.norm_obs)
            if self.normalize:
                assert normalizer is not None
                rms: Any = normalizer.obs_rms  # one RunningMeanStd: the observation is flat
                self.register_buffer("mean", th.as_tensor(rms.mean, dtype=th.float32))
                scale = np.sqrt(rms.var + normalizer.epsilon)
                self.register_buffer("scale", th.as_tensor(scale, dtype=th.float32))
                self.clip = float(normalizer.clip_obs)

        def scores(self, observation: th.Tensor) -> th.Tensor:
            obs = observation
            if self.normalize:
                obs = th.clamp((obs - self.mean) / self.scale, -self.clip, self.clip)
            if family == "q_value":
                if hasattr(self.policy, "quantile_net"):
                    q: th.Tensor = self.policy.quantile_net(obs).mean(dim=1)
                    return q
                values: th.Tensor = self.policy.q_net(obs)
                return values
            pre = preprocess_obs(
                obs, self.policy.observation_space, normalize_images=self.policy.normalize_images
            )
            features = self.policy.pi_features_extractor(pre)
            latent = self.policy.mlp_extractor.forward_actor(features)
            logits: th.Tensor = self.policy.action_net(latent)
            # the Categorical's normalised logits, as MaskedPolicy.scores returns them
            return logits - th.logsumexp(logits, dim=1, keepdim=True)

        def forward(self, observation: th.Tensor, action_mask: th.Tensor) -> th.Tensor:
            scores = self.scores(observation)
            masked = scores.masked_fill(action_mask == 0, float("-inf"))
            return masked.argmax(dim=1)

    return Greedy().eval()


def export_onnx(
    agent_spec: str, out: str | os.PathLike[str], check_rows: int = CHECK_ROWS
) -> ExportResult:
    """Write the trained network ``agent_spec`` (a shipped name, run directory or ``.zip``)
    to ``out`` as ONNX (atomically), after checking on ``check_rows`` random observations
    and masks that onnxruntime picks the model's action (near-ties excepted)."""
    import onnx  # noqa: PLC0415 (the onnx extra)
    import torch as th  # noqa: PLC0415 (export only)

    start = time.perf_counter()
    path = check_out_path(out)
    agent = network_agent(agent_spec)
    space = agent.model.observation_space
    shape = getattr(space, "shape", None)
    if shape is None or len(shape) != 1:
        raise OnnxExportError(
            f"{agent_spec!r}: observation space {space} is not a flat vector; the ONNX file "
            "takes the flat observation"
        )
    size = int(shape[0])
    env_kwargs = dict(agent.env_kwargs)
    try:
        env_json = json.dumps(env_kwargs, sort_keys=True)
    except TypeError as exc:
        raise OnnxExportError(f"{agent_spec!r}: env options are not JSON: {exc}") from None
    module = _greedy_module(agent.policy)
    example = (th.zeros(2, size), th.ones(2, NUM_ACTIONS, dtype=th.int8))
    batch = th.export.Dim(BATCH_DIM)
    with th.no_grad(), _quiet_exporter():
        program = th.onnx.export(
            module,
            example,
            dynamo=True,
            input_names=[OBSERVATION_INPUT, MASK_INPUT],
            output_names=[ACTION_OUTPUT],
            dynamic_shapes={"observation": {0: batch}, "action_mask": {0: batch}},
            external_data=False,
            opset_version=OPSET,
            verbose=False,
        )
    if program is None:
        raise OnnxExportError(f"{agent_spec!r}: torch.onnx.export returned no program")
    proto = program.model_proto
    metadata = {
        FORMAT_KEY: FORMAT_VERSION,
        ENV_KWARGS_KEY: env_json,
        ALGORITHM_KEY: agent.policy.spec.name,
        SOURCE_KEY: agent_spec,
        OBS_SIZE_KEY: str(size),
    }
    onnx.helper.set_model_props(proto, metadata)
    proto.doc_string = (
        f"Cold Iron policy {agent_spec!r} ({agent.policy.spec.class_name}): the masked greedy "
        f"action; make its env with gym.make('coldiron/ColdIron-v0', **env_kwargs)"
    )
    onnx.checker.check_model(proto, full_check=True)
    data = proto.SerializeToString()
    near_ties = check_against_model(data, agent.policy, size, check_rows, agent_spec)
    atomic_write_bytes(path, data)
    _readable_by_all(path)
    return ExportResult(
        path, agent_spec, agent.policy.spec.name, env_kwargs, size, check_rows, near_ties,
        time.perf_counter() - start,
    )  # fmt: skip


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """Silence torch.onnx's notes that do not concern this graph (torchvision's operators
    not registered, a renamed dynamic axis, a deprecated pytree check)."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            for message in EXPORTER_NOISE:
                warnings.filterwarnings("ignore", message=message)
            yield
    finally:
        logger.setLevel(level)


def _readable_by_all(path: Path) -> None:
    """The mode a new file gets under the umask (the atomic write's temporary file is 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    path.chmod(NEW_FILE_MODE & ~umask)


def check_against_model(
    model_bytes: bytes, policy: MaskedPolicy, size: int, rows: int, label: str
) -> int:
    """Run the ONNX graph and the model on ``rows`` random observations in [0, 1] and random
    masks; :class:`OnnxExportError` if any action differs where the model's two best legal
    scores are not a near-tie. Returns the number of near-tie rows."""
    import onnxruntime as ort  # noqa: PLC0415 (the onnx extra)

    if rows <= 0:
        return 0
    rng = np.random.default_rng(CHECK_SEED)
    obs = rng.random((rows, size), dtype=np.float32)
    masks = rng.random((rows, NUM_ACTIONS)) < rng.random((rows, 1))
    masks[np.arange(rows), rng.integers(0, NUM_ACTIONS, rows)] = True
    session = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    feed = {OBSERVATION_INPUT: obs, MASK_INPUT: masks.astype(MASK_DTYPE)}
    onnx_actions = session.run([ACTION_OUTPUT], feed)[0]
    model_actions = policy.act(obs, masks)
    near = near_tie_rows(np.asarray(policy.scores(obs)), masks)
    wrong = np.flatnonzero((onnx_actions != model_actions) & ~near)
    if wrong.size:
        raise OnnxExportError(
            f"{label}: the exported graph picks another action than the model on "
            f"{wrong.size} of {rows} random rows (first: row {int(wrong[0])}, ONNX "
            f"{int(onnx_actions[wrong[0]])}, model {int(model_actions[wrong[0]])})"
        )
    return int(near.sum())


def near_tie_rows(scores: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """Rows whose two best legal scores are within :data:`TIE_TOLERANCE` (relative)."""
    legal = np.where(np.asarray(masks, dtype=bool), scores, -np.inf)
    top = -np.sort(-legal, axis=1)[:, :2]
    finite = np.isfinite(top[:, 1])
    gap = np.where(finite, top[:, 0] - np.where(finite, top[:, 1], 0.0), np.inf)
    scale = np.maximum(1.0, np.abs(top[:, 0]))
    near: np.ndarray = gap <= TIE_TOLERANCE * scale
    return near


# ------------------------------------------------------------------ speed and agreement
def _decision_batches(agent: Agent, decks: np.ndarray, env_kwargs: Mapping[str, Any]) -> Any:
    """Every (observation, mask) ``agent`` meets on ``decks``, in play order (arrays)."""
    from coldiron_env.cards import deck_codes  # noqa: PLC0415

    observations: list[np.ndarray] = []
    masks: list[np.ndarray] = []

    def record(move: Move) -> None:
        observations.append(np.asarray(move.obs, dtype=np.float32))
        masks.append(move.info["action_mask"].astype(bool))

    resets = [{"options": {"deck": deck_codes(row)}} for row in decks.tolist()]
    play_lockstep(lambda _: agent, env_kwargs, resets, batch=1, on_move=record)
    return np.stack(observations), np.stack(masks)


def _recorder(rows: list[tuple[str, int]]) -> Callable[[int, list[int], str, int], None]:
    """An evaluation callback appending each deal's ``(outcome, last turn)`` to ``rows``."""

    def record(_index: int, _deck: list[int], outcome: str, turn: int) -> None:
        rows.append((outcome, turn))

    return record


def _best_time(run: Any, repeats: int = BENCHMARK_REPEATS) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def benchmark(
    agent_spec: str, onnx_path: str | os.PathLike[str], episodes: int, seed: int
) -> dict[str, Any]:
    """Time the SB3 agent ``agent_spec`` and its ONNX file ``onnx_path`` on the same
    ``episodes`` validation deals of ``seed``: whole games one decision at a time and in the
    evaluator's lockstep batches (env included), and inference alone on every decision met
    (batch 1 and :data:`BENCHMARK_BATCH`); also whether the two play the same games."""
    from agents.evaluation.arena import agent_seeds, evaluate_agent, validation_decks  # noqa: PLC0415
    from agents.gitinfo import git_commit, git_dirty, utc_now  # noqa: PLC0415
    from agents.registry import PLAY_TORCH_THREADS, make_agent, set_torch_threads  # noqa: PLC0415

    set_torch_threads(PLAY_TORCH_THREADS)
    load_before = os.getloadavg()
    sb3 = make_agent(agent_spec)
    onnx_agent = load_onnx_agent(onnx_path)
    decks = validation_decks(seed, episodes)
    seeds = agent_seeds(seed, episodes)
    for agent in (sb3, onnx_agent):  # warm up: numba's compilation, the first sessions
        for batched in (False, True):
            warm = min(episodes, WARMUP_DEALS)
            evaluate_agent(agent, decks[:warm], seeds[:warm], use_batch=batched)
    games: dict[str, dict[str, Any]] = {}
    per_deal: dict[str, dict[str, list[tuple[str, int]]]] = {}
    for label, agent in (("sb3", sb3), ("onnx", onnx_agent)):
        for mode, batched in (("one_at_a_time", False), ("lockstep", True)):
            rows: list[tuple[str, int]] = []
            result = evaluate_agent(
                agent, decks, seeds, label=label, use_batch=batched, callback=_recorder(rows)
            )
            games.setdefault(label, {})[mode] = {
                "seconds": round(result.seconds, 3),
                "decisions": result.total_steps,
                "microseconds_per_decision": round(1e6 * result.seconds_per_decision, 2),
                "wins": result.wins,
            }
            per_deal.setdefault(label, {})[mode] = rows
    obs, masks = _decision_batches(sb3, decks, onnx_agent.env_kwargs)
    policies = {"sb3": getattr(sb3, "batch_policy"), "onnx": onnx_agent.policy}  # noqa: B009
    inference: dict[str, dict[str, Any]] = {}
    actions: dict[str, np.ndarray] = {}
    for label, policy in policies.items():
        actions[label] = np.concatenate(
            [policy.act(obs[i : i + BENCHMARK_BATCH], masks[i : i + BENCHMARK_BATCH])
             for i in range(0, len(obs), BENCHMARK_BATCH)]
        )  # fmt: skip
        one = _best_time(
            lambda p=policy: [p.act(obs[i : i + 1], masks[i : i + 1]) for i in range(len(obs))]
        )
        many = _best_time(
            lambda p=policy: [p.act(obs[i : i + BENCHMARK_BATCH], masks[i : i + BENCHMARK_BATCH])
                              for i in range(0, len(obs), BENCHMARK_BATCH)]
        )  # fmt: skip
        inference[label] = {
            "batch_1_microseconds_per_decision": round(1e6 * one / len(obs), 2),
            f"batch_{BENCHMARK_BATCH}_microseconds_per_decision": round(1e6 * many / len(obs), 3),
        }
    reference = per_deal["sb3"]["one_at_a_time"]
    same_deals = {
        f"onnx_{mode}": sum(a == b for a, b in zip(reference, rows, strict=True))
        for mode, rows in per_deal["onnx"].items()
    }
    return {
        "what": "ONNX Runtime against the Stable-Baselines3 agent, same model, same deals",
        "agent": agent_spec,
        "onnx": str(onnx_path),
        "deals": {"set": "validation", "seed": seed, "episodes": episodes},
        "agreement": {
            "deals_with_the_same_outcome_and_last_turn_as_sb3_one_at_a_time": same_deals,
            "decisions_compared": len(obs),
            "decisions_with_the_same_action": int((actions["sb3"] == actions["onnx"]).sum()),
        },
        "games": games,
        "inference_only": inference,
        "threads": {"torch": PLAY_TORCH_THREADS, "onnxruntime": RUNTIME_THREADS},
        "versions": _versions(),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "note": "shared machine: other work may have been running; times are approximate "
            f"(each inference figure is the best of {BENCHMARK_REPEATS} passes)",
        },
        "commit": git_commit(),
        "dirty": git_dirty(),
        "date": utc_now(),
    }


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    out: dict[str, str] = {}
    for package in ("onnx", "onnxruntime", "torch", "stable-baselines3", "sb3-contrib"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "not installed"
    return out
