"""Expert iteration: the planner over a trained network teaches the network.

Anthony, Tian & Barber (2017), *Thinking fast and slow with deep learning and tree search*:
a search that uses the network plays better than the network alone, so cloning its choices
improves the network, which makes the search better again. The search is the planner
(``agents/players/planner.py``) with the network as its base policy: it keeps the network's
action unless paired rollouts find a significantly better one (from turn 18 on).

Each round (:func:`agents.learning.training.expert_iteration`, after RL or alone in
``scripts/distill.py``): the network plays ``episodes`` deals of the ``SEARCH`` deal stream
(apart from every other deal by construction); the planner over the *current* network labels
every state it visited (:func:`label`, in one process or several: :class:`Labellers`); the
network is cloned on those labels (with ``keep_rounds`` > 1 on the kept earlier rounds' too;
with ``targets: soft`` on each compared action's chance of being the best) at a small
learning rate, its value head fitted to its Monte-Carlo returns; the round is committed with
its model (:func:`commit_round`).

The network agrees with about 98% of the labels before a round: the planner changes few
decisions, late in the game, and cloning must teach those without undoing the rest.
Oversampling the changed decisions ten-fold at twice the learning rate wrecked the policy
(lab/docs/experiments.md); the gentle default gains round after round.
"""

from __future__ import annotations

import functools
import io
import multiprocessing
import signal
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.pool import Pool
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from agents.atomic import atomic_write_bytes, atomic_write_json, read_json
from agents.learning.config import (
    ExpertIterationConfig,
    Rollouts,
    Targets,
    config_changes,
    describe_changes,
)
from agents.learning.imitation import DAGGER_BATCH, Demonstrations, collect_dagger, concat
from agents.learning.provenance import TrainingError, sha256_bytes, sha256_file
from agents.learning.sb3_agent import (
    MODEL_FILE,
    KnowledgePolicy,
    SB3Agent,
    load_sb3_agent,
    policy_net,
)
from agents.players.planner import BUDGETS, PlannerAgent
from agents.players.rollouts import COMPILED

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

    from agents.evaluation.lockstep import Move
    from agents.learning.config import Config
    from coldiron_env.knowledge import Knowledge

EXPERT_FILE: Final = "expert_iteration.json"
"""A run's expert-iteration record: its settings and every finished round."""
MODEL_SHA_KEY: Final = "model_sha256"
"""A round record's SHA-256 of the model it left (``model.zip``)."""
START_SHA_KEY: Final = "start_sha256"
"""The SHA-256 of ``model.zip`` before the first round."""
POLL_SECONDS: Final = 0.5
"""How often a parallel round looks for a stop request."""
LABELS_DIR: Final = "labels"
"""The run directory's folder of kept labels, one file a round (``keep_rounds`` > 1)."""


def search_over(
    agent: SB3Agent, budget: str, compiled: bool = COMPILED, rollouts: Rollouts = "heuristic"
) -> PlannerAgent:
    """The planner at ``budget`` over ``agent`` (its current weights), its rollouts compiled or
    in Python (the same labels), played by the heuristic or by ``agent`` (``rollouts``)."""
    return PlannerAgent(
        BUDGETS[budget],
        name=f"{budget} over {agent.name}",
        base=KnowledgePolicy(agent),
        compiled=compiled,
        rollout_policy=policy_net(agent) if rollouts == "network" else None,
    )


# ---------------------------------------------------------------- labelling
def label(
    agent: SB3Agent | str,
    budget: str,
    episodes: int,
    first: int,
    gamma: float,
    batch: int = DAGGER_BATCH,
    compiled: bool = COMPILED,
    rollouts: Rollouts = "heuristic",
    targets: Targets = "hard",
    soft_z: float | None = None,
) -> Demonstrations:
    """``agent`` plays deals ``first ..`` (``batch`` at a time, in lockstep); then the planner
    over it labels every state it visited (:func:`~agents.learning.imitation.collect_dagger`,
    its sampling seeded by the deal). Soft ``targets`` add a soft label a decision: each
    candidate's chance of being the best, alternatives handicapped by ``soft_z`` standard
    errors (None: the planner's ``z``; ``DecisionRecord.chance_best``), or the planner's
    choice for certain where it did not plan. ``agent`` may be a saved model's file, loaded
    once a round (what :class:`Labellers` hands its processes)."""
    if isinstance(agent, str):
        agent = _worker_agent(agent)
    planner = search_over(agent, budget, compiled, rollouts)
    planner.base = played = PlayedBase(planner)  # in place of running the network again
    handicap = planner.config.z if soft_z is None else soft_z

    def soft_label(choice: int, actions: int) -> np.ndarray:
        record = planner.decisions.pop() if planner.decisions else None  # if it planned
        row = np.zeros(actions, dtype=np.float32)
        chances = {choice: 1.0} if record is None else record.chance_best(handicap)
        row[list(chances)] = list(chances.values())
        return row

    soft = targets == "soft"
    planner.decisions = [] if soft else None
    return collect_dagger(agent.model, played.teacher, agent.env_kwargs, episodes, first,
                          gamma, batch, soft_label if soft else None)  # fmt: skip


class PlayedBase:
    """The planner's base while it labels the network's games: the action the network played
    at each state, not the network run again (half of a round's labelling time; the same labels,
    tested). The planner asks once a decision, in order; ``teacher`` starts each game's."""

    def __init__(self, planner: PlannerAgent) -> None:
        self.planner = planner
        self.actions: Iterator[int] = iter(())

    def teacher(self, moves: Sequence[Move]) -> PlannerAgent:
        self.actions = iter([move.action for move in moves])
        return self.planner

    def act_knowledge(self, kn: Knowledge) -> int:
        return next(self.actions)


def _worker_init() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the pool
    import torch  # noqa: PLC0415 (only in labelling processes)

    torch.set_num_threads(1)


@functools.lru_cache(maxsize=1)
def _worker_agent(model_file: str) -> SB3Agent:
    """A labelling process's network, loaded once per saved round (keyed by its file's path)."""
    return load_sb3_agent(model_file)


@dataclass(eq=False)
class Labellers:
    """Processes that label a round's deals in parallel (``workers`` > 1), or this one; the
    other fields are :func:`label`'s. Each round the network is saved to a file of its own,
    which each process loads once; the deals go out a DAgger batch at a time. A context
    manager: leaving it (Ctrl-C included) stops the processes."""

    workers: int
    batch: int = DAGGER_BATCH
    compiled: bool = COMPILED
    rollouts: Rollouts = "heuristic"
    targets: Targets = "hard"
    soft_z: float | None = None
    _pool: Pool | None = field(default=None, init=False, repr=False)
    _folder: tempfile.TemporaryDirectory[str] | None = field(default=None, init=False, repr=False)
    _saved: int = field(default=0, init=False, repr=False)
    _stopped: bool = field(default=False, init=False, repr=False)

    def __enter__(self) -> Labellers:
        if self.workers > 1:
            self._folder = tempfile.TemporaryDirectory(prefix="coldiron-labels-")
            context = multiprocessing.get_context("spawn")  # no forked torch state
            self._pool = context.Pool(self.workers, initializer=_worker_init)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._pool is not None:
            if kind is None and not self._stopped:
                self._pool.close()
            else:
                self._pool.terminate()
            self._pool.join()
            self._pool = None
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None

    def label(
        self,
        agent: SB3Agent,
        budget: str,
        episodes: int,
        first: int,
        gamma: float,
        stop: Callable[[], bool] | None = None,
    ) -> Demonstrations | None:
        """As :func:`label`, spread over the processes; None once ``stop()`` says so (asked
        before each batch here, every :data:`POLL_SECONDS` in parallel). Each task is a batch
        the network plays in lockstep, so the labels do not depend on who labels which."""
        settings = (self.compiled, self.rollouts, self.targets, self.soft_z)
        tasks = [(budget, min(self.batch, episodes - s), first + s, gamma, self.batch, *settings)
                 for s in range(0, episodes, self.batch)]  # fmt: skip
        if self._pool is None or self._folder is None:
            parts = []
            for task in tasks:
                if stop is not None and stop():
                    return None
                parts.append(label(agent, *task))
            return concat(parts)
        self._saved += 1
        model_file = str(Path(self._folder.name) / f"round-{self._saved}.zip")
        agent.model.save(model_file)
        pending = self._pool.starmap_async(label, [(model_file, *t) for t in tasks], chunksize=1)
        while not pending.ready():
            pending.wait(POLL_SECONDS)
            if stop is not None and stop():
                self._stopped = True
                return None
        return concat(pending.get())


# ---------------------------------------------------------------- the round record
def identity(cfg: Config) -> dict[str, Any]:
    """What the labels and the network depend on: ``cfg.expert_iteration`` but how many
    processes label, and the seed of the deals (the run's)."""
    return {**cfg.expert_iteration.model_dump(exclude={"workers"}), "seed": cfg.seed}


def labels_file(run_root: Path, round_index: int) -> Path:
    """Where round ``round_index``'s labels are kept (``keep_rounds`` > 1)."""
    return run_root / LABELS_DIR / f"round-{round_index:03d}.npz"


def kept_rounds(round_index: int, settings: ExpertIterationConfig) -> range:
    """The earlier rounds whose labels round ``round_index`` clones on with its own."""
    return range(max(0, round_index - settings.keep_rounds + 1), round_index)


def check_kept_labels(run_root: Path, settings: ExpertIterationConfig) -> None:
    """Refuse a continued run whose next round would clone on labels no longer kept."""
    done = len(expert_rounds(run_root))
    if settings.keep_rounds > 1 and done < settings.rounds:
        for r in kept_rounds(done, settings):
            if not labels_file(run_root, r).is_file():
                raise TrainingError(
                    f"{labels_file(run_root, r)} is missing: expert_iteration.keep_rounds "
                    f"clones round {done + 1} on the labels of rounds before it, which this "
                    "run directory no longer holds; continue in a new --out"
                )


def forget_labels(run_root: Path, before: int) -> None:
    """Delete the kept labels of rounds before ``before`` (no later round clones on them)
    and what a hard kill left half-written."""
    folder = run_root / LABELS_DIR
    if not folder.is_dir():
        return
    for r in range(before):
        labels_file(run_root, r).unlink(missing_ok=True)
    for leftover in folder.glob(".*.tmp"):
        leftover.unlink(missing_ok=True)
    if not any(folder.iterdir()):
        folder.rmdir()


def expert_rounds(run_root: Path) -> list[dict[str, Any]]:
    """The expert-iteration rounds a run has finished (none before the phase)."""
    return list(read_json(run_root / EXPERT_FILE, {"rounds": []})["rounds"])


def model_bytes(model: BaseAlgorithm) -> bytes:
    """The bytes ``model.save`` writes (hashed and written as they are: a zip's timestamps
    make two saves of one model differ)."""
    buffer = io.BytesIO()
    model.save(buffer)
    return buffer.getvalue()


def start_hash(run_root: Path, rounds: list[dict[str, Any]]) -> str | None:
    """The SHA-256 of the model before the first round (as recorded, or of ``model.zip``)."""
    if rounds:
        start = read_json(run_root / EXPERT_FILE, {}).get(START_SHA_KEY)
        return None if start is None else str(start)
    model_file = run_root / MODEL_FILE
    return sha256_file(model_file) if model_file.is_file() else None


def commit_round(
    run_root: Path, model: BaseAlgorithm, cfg: Config, start: str | None, rounds: list[Any]
) -> None:
    """Commit the last of ``rounds`` in two atomic writes: the record naming the new model's
    SHA-256, then the model (:func:`reconcile_rounds` mends a kill in between)."""
    data = model_bytes(model)
    rounds[-1][MODEL_SHA_KEY] = sha256_bytes(data)
    doc = {"settings": identity(cfg), START_SHA_KEY: start, "rounds": rounds}
    atomic_write_json(run_root / EXPERT_FILE, doc)
    atomic_write_bytes(run_root / MODEL_FILE, data)


def reconcile_rounds(run_root: Path) -> str | None:
    """After a kill between :func:`commit_round`'s two writes (the record one round ahead of
    ``model.zip``), drop the last record: the round is played again. Returns what was done
    (None: nothing); :class:`TrainingError` when the model is neither round's."""
    record_file, model_file = run_root / EXPERT_FILE, run_root / MODEL_FILE
    doc = read_json(record_file, {})
    rounds = doc.get("rounds", [])
    if not rounds or MODEL_SHA_KEY not in rounds[-1]:
        return None  # no round, or a record from before the hashes
    actual = sha256_file(model_file) if model_file.is_file() else None
    if actual == rounds[-1][MODEL_SHA_KEY]:
        return None
    previous = rounds[-2].get(MODEL_SHA_KEY) if len(rounds) > 1 else doc.get(START_SHA_KEY)
    if actual is None or actual != previous:
        raise TrainingError(
            f"{model_file} is neither the model of the last round recorded in {record_file} "
            f"({len(rounds)}) nor the one before: the run directory was changed by hand"
        )
    doc["rounds"] = rounds[:-1]
    atomic_write_json(record_file, doc)
    return (
        f"round {len(rounds)} was recorded but its model was not written (a hard kill): "
        "it is played again"
    )


def check_resumable(cfg: Config, run_root: Path) -> None:
    """Refuse a ``cfg`` that would continue the run's rounds with other settings than
    ``expert_iteration.rounds`` (two recipes mixed)."""
    path = run_root / EXPERT_FILE
    if not path.is_file() or not cfg.expert_iteration.rounds:
        return  # no round played, or none follows: the rounds played stay the model
    defaults = ExpertIterationConfig().model_dump(exclude={"workers"})  # a record older than
    recorded = {**defaults, **read_json(path, {}).get("settings", {})}  # an option: its default
    changes = config_changes(recorded, identity(cfg))
    if changes := {k: v for k, v in changes.items() if k != "rounds"}:
        raise TrainingError(
            f"{path} records other expert-iteration settings than the config's "
            f"({describe_changes(changes)}); only expert_iteration.rounds may change on resume"
        )


def prepare_resume(cfg: Config, run_root: Path, log: Callable[[str], None]) -> None:
    """The checks and repair before a continued run writes anything."""
    check_resumable(cfg, run_root)
    note = reconcile_rounds(run_root)
    if note is not None:
        log(f"{run_root}: {note}")
    check_kept_labels(run_root, cfg.expert_iteration)
