"""Expert iteration: the planner over a trained network teaches the network.

Anthony, Tian & Barber (2017), *Thinking fast and slow with deep learning and tree
search*: a search that uses the network plays better than the network alone, so
cloning the search's choices improves the network, and the improved network makes the
search better again. Here the search is the planner (``agents/players/planner.py``)
with the network as its base policy: it keeps the network's action unless paired
rollouts on sampled orders of the unseen cards find a significantly better one (from
turn 18 on, at the planner's budget).

Each round (:func:`distill_round`):

1. the network plays ``episodes`` deals of the ``SEARCH`` deal stream
   (``coldiron_env.dealer.DealStream``: apart from every training, imitation,
   validation and evaluation deal by construction), masked and deterministic;
2. the planner over the *current* network labels every state the network visited
   (DAgger, :func:`agents.learning.imitation.collect_dagger`);
3. the network is cloned on that round's labels with a small learning rate
   (:func:`agents.learning.imitation.behaviour_clone`; the value head is fitted to the
   network's Monte-Carlo returns).

The network agrees with about 98% of the labels before a round: the planner changes
few decisions, late in the game, and the cloning must teach those without undoing
the rest. Measured: oversampling the changed decisions ten-fold at twice the learning
rate wrecked the policy (docs/experiments.md); the gentle default gains round after round.
"""

from __future__ import annotations

import io
import json
import multiprocessing
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from multiprocessing.pool import Pool
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from agents.atomic import atomic_write_bytes, atomic_write_json, atomic_write_text
from agents.learning.imitation import (
    DAGGER_BATCH,
    Demonstrations,
    behaviour_clone,
    collect_dagger,
    concat,
)
from agents.learning.provenance import (
    META_FILE,
    SHA256_KEY,
    file_hashes,
    provenance,
    sha256_bytes,
    sha256_file,
    utc_now,
)
from agents.learning.sb3_agent import (
    CONFIG_FILE,
    MODEL_FILE,
    KnowledgePolicy,
    SB3Agent,
    find_config,
    load_sb3_agent,
    policy_net,
)
from agents.players.planner import BUDGETS, PlannerAgent
from agents.players.rollouts import COMPILED
from coldiron_env.dealer import STREAM_INDEX_BITS, DealStream, stream_seed

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

    from agents.learning.config import Config

DEFAULT_BUDGET: Final = "planner"
ROLLOUTS: Final = ("heuristic", "network")
"""Who plays the planner's rollouts: ``heuristic``, or the network being trained (its
current weights: the search improves as the network does)."""


@dataclass(frozen=True)
class SearchDistillation:
    """How many rounds of what size, and how gently to clone."""

    rounds: int = 8
    """Rounds of play, label, clone."""
    episodes: int = 2000
    """Deals the network plays (and the planner labels) per round."""
    budget: str = DEFAULT_BUDGET
    """The planner's budget (``agents.players.planner.BUDGETS``)."""
    epochs: int = 4
    """Cloning epochs per round, over that round's labels."""
    batch_size: int = 512
    learning_rate: float = 1e-4
    seed: int = 0
    """Seed of the ``SEARCH`` deals (round r plays indices r*episodes ...)."""
    workers: int = 1
    """Processes labelling a round's deals (the labels do not depend on it)."""
    rollouts: str = ROLLOUTS[0]
    """Who plays the planner's rollouts (:data:`ROLLOUTS`)."""

    def __post_init__(self) -> None:
        if self.rollouts not in ROLLOUTS:
            raise ValueError(f"rollouts must be one of {ROLLOUTS}, got {self.rollouts!r}")
        for name in ("rounds", "episodes", "epochs", "batch_size", "workers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.budget not in BUDGETS:
            raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {self.budget!r}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate!r}")
        if self.rounds * self.episodes > 1 << STREAM_INDEX_BITS:
            raise ValueError(f"rounds x episodes must be at most {1 << STREAM_INDEX_BITS}")
        stream_seed(DealStream.SEARCH, self.seed)  # refuses a seed outside its range

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def identity(self) -> dict[str, Any]:
        """What the labels and the network depend on (not how many processes label; the
        rollouts only when not the heuristic's, as records made before they could be)."""
        return {
            k: v
            for k, v in self.to_dict().items()
            if k != "workers" and not (k == "rollouts" and v == ROLLOUTS[0])
        }


def search_over(
    agent: SB3Agent,
    budget: str = DEFAULT_BUDGET,
    compiled: bool = COMPILED,
    rollouts: str = ROLLOUTS[0],
) -> PlannerAgent:
    """The planner at ``budget`` with ``agent`` (its current weights) as base policy
    (``compiled``: its rollouts compiled or in Python; the same labels), its rollouts
    played by the heuristic or by ``agent`` (``rollouts``)."""
    return PlannerAgent(
        BUDGETS[budget],
        name=f"{budget} over {agent.name}",
        base=KnowledgePolicy(agent),
        compiled=compiled,
        rollout_policy=policy_net(agent) if rollouts == "network" else None,
    )


# ---------------------------------------------------------------- labelling
def label(
    agent: SB3Agent,
    budget: str,
    episodes: int,
    first: int,
    gamma: float,
    batch: int = DAGGER_BATCH,
    compiled: bool = COMPILED,
    rollouts: str = ROLLOUTS[0],
) -> Demonstrations:
    """``agent`` plays deals ``first ..`` (``batch`` at a time); the planner over it labels
    every state it visited."""
    return collect_dagger(
        agent.model,
        lambda: search_over(agent, budget, compiled, rollouts),
        agent.env_kwargs,
        episodes,
        first,
        gamma,
        batch,
    )


def chunks(episodes: int, first: int, batch: int = DAGGER_BATCH) -> list[tuple[int, int]]:
    """``(first deal, deals)`` of each labelling task: the batches the network plays in
    lockstep, so the labels do not depend on which process labels which batch."""
    return [(first + s, min(batch, episodes - s)) for s in range(0, episodes, batch)]


POLL_SECONDS: Final = 0.5
"""How often a parallel round looks for a stop request."""
_WORKER_AGENT: dict[str, SB3Agent] = {}
"""A labelling process's network, loaded once per saved round (keyed by its file's path)."""


def _worker_init() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the pool
    import torch  # noqa: PLC0415 (only in labelling processes)

    torch.set_num_threads(1)


def _label_chunk(
    model_file: str,
    budget: str,
    first: int,
    episodes: int,
    gamma: float,
    compiled: bool,
    rollouts: str,
) -> Demonstrations:
    if model_file not in _WORKER_AGENT:
        _WORKER_AGENT.clear()
        _WORKER_AGENT[model_file] = load_sb3_agent(model_file)
    agent = _WORKER_AGENT[model_file]
    return label(agent, budget, episodes, first, gamma, episodes, compiled, rollouts)


class Labellers:
    """Processes that label a round's deals in parallel (``workers`` > 1), or this one.

    Each round the network is saved to a file of its own in a temporary folder, and each
    process loads it once; the deals are handed out a DAgger batch at a time. A context
    manager: leaving it (Ctrl-C included) stops the processes. ``compiled``: the planner's
    rollouts compiled (with numba, the default then) or in Python (the same labels).
    """

    def __init__(self, workers: int, batch: int = DAGGER_BATCH, compiled: bool = COMPILED) -> None:
        self.workers = workers
        self.batch = batch
        self.compiled = compiled
        self._pool: Pool | None = None
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self._saved = 0
        self._stopped = False

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
        rollouts: str = ROLLOUTS[0],
    ) -> Demonstrations | None:
        """As :func:`label`, spread over the processes; None once ``stop()`` says so (it is
        asked between DAgger batches here, every :data:`POLL_SECONDS` in parallel)."""
        tasks = chunks(episodes, first, self.batch)
        if self._pool is None or self._folder is None:
            parts = []
            for start, n in tasks:
                if stop is not None and stop():
                    return None
                parts.append(
                    label(agent, budget, n, start, gamma, self.batch, self.compiled, rollouts)
                )
            return concat(parts)
        self._saved += 1
        model_file = str(Path(self._folder.name) / f"round-{self._saved}.zip")
        agent.model.save(model_file)
        pending = self._pool.starmap_async(
            _label_chunk,
            [(model_file, budget, s, n, gamma, self.compiled, rollouts) for s, n in tasks],
            chunksize=1,
        )
        while not pending.ready():
            pending.wait(POLL_SECONDS)
            if stop is not None and stop():
                self._stopped = True
                return None
        return concat(pending.get())


def distill_round(
    agent: SB3Agent,
    settings: SearchDistillation,
    round_index: int,
    log: Callable[[str], None] | None = None,
    labellers: Labellers | None = None,
    stop: Callable[[], bool] | None = None,
) -> dict[str, Any] | None:
    """One round: ``agent`` plays, the planner over it labels, ``agent`` is cloned (in place).
    None (``agent`` unchanged) when ``stop()`` said so during the labelling."""
    t0 = time.perf_counter()
    first = stream_seed(DealStream.SEARCH, settings.seed, round_index * settings.episodes)
    gamma = float(getattr(agent.model, "gamma", 1.0))
    labellers = Labellers(1) if labellers is None else labellers  # one process: no pool
    demos = labellers.label(
        agent, settings.budget, settings.episodes, first, gamma, stop, settings.rollouts
    )
    if demos is None:
        return None
    t1 = time.perf_counter()
    stats = behaviour_clone(
        agent.model,
        demos,
        epochs=settings.epochs,
        batch_size=settings.batch_size,
        learning_rate=settings.learning_rate,
        value_pretrain=True,
        seed=round_index,
    )
    agent.reset()
    result = {
        "round": round_index,
        "decisions": len(demos),
        "network_won": demos.wins,
        "episodes": demos.episodes,
        "agreement_before": stats["accuracy_before"],
        "agreement_after": stats["accuracy_after"],
        "label_seconds": round(t1 - t0, 1),
        "clone_seconds": round(time.perf_counter() - t1, 1),
    }
    if log is not None:
        log(
            f"round {round_index + 1}/{settings.rounds}: the network won "
            f"{demos.wins}/{demos.episodes} deals; agreed with the planner on "
            f"{stats['accuracy_before']:.2%} of {len(demos):,} decisions before cloning, "
            f"{stats['accuracy_after']:.2%} after ({result['label_seconds']:.0f} s + "
            f"{result['clone_seconds']:.0f} s)"
        )
    return result


def play_rounds(
    agent: SB3Agent,
    settings: SearchDistillation,
    first_round: int,
    log: Callable[[str], None],
    finished: Callable[[dict[str, Any]], None],
    stop: Callable[[], bool] | None = None,
) -> bool:
    """Rounds ``first_round .. settings.rounds - 1`` on ``agent`` (improved in place), with
    ``finished(record)`` after each (where the caller saves). True when ``stop()`` ended
    them before the last (the round under way is dropped)."""
    with Labellers(settings.workers) as labellers:
        for r in range(first_round, settings.rounds):
            record = distill_round(agent, settings, r, log, labellers, stop)
            if record is None:
                return True
            finished(record)
            if stop is not None and stop() and r + 1 < settings.rounds:
                return True
    return False


# ---------------------------------------------------------------- after RL, in a training run
EXPERT_FILE: Final = "expert_iteration.json"
"""A training run's expert-iteration record: its settings and every finished round."""


def settings_of(cfg: Config) -> SearchDistillation:
    """The config's ``expert_iteration`` section; the deals are seeded by the run's seed."""
    return SearchDistillation(**cfg.expert_iteration.model_dump(), seed=cfg.seed)


def expert_rounds(run_root: Path) -> list[dict[str, Any]]:
    """The expert-iteration rounds a training run has finished (none before the phase)."""
    path = run_root / EXPERT_FILE
    if not path.is_file():
        return []
    return list(json.loads(path.read_text(encoding="utf-8"))["rounds"])


def rounds_done(run_root: Path) -> int:
    """How many expert-iteration rounds a training run has finished."""
    return len(expert_rounds(run_root))


MODEL_SHA_KEY: Final = "model_sha256"
"""A round record's SHA-256 of the model it left (``model.zip``)."""
START_SHA_KEY: Final = "start_sha256"
"""The SHA-256 of ``model.zip`` before the first round."""


def model_bytes(model: BaseAlgorithm) -> bytes:
    """The bytes ``model.save`` writes (hashed and written as they are: a zip's timestamps
    make two saves of one model differ)."""
    buffer = io.BytesIO()
    model.save(buffer)
    return buffer.getvalue()


def _start_hash(record_file: Path, model_file: Path, rounds: list[dict[str, Any]]) -> str | None:
    """The recorded SHA-256 of the model before the first round (that model's file's now,
    before any round)."""
    if rounds and record_file.is_file():
        start = json.loads(record_file.read_text(encoding="utf-8")).get(START_SHA_KEY)
        return None if start is None else str(start)
    return sha256_file(model_file) if model_file.is_file() else None


def reconcile_rounds(record_file: Path, model_file: Path) -> str | None:
    """Bring a round record and its model back in step after a hard kill.

    A round is committed in two writes: the record naming the new model's SHA-256, then the
    model. A kill between the two leaves the record one round ahead of ``model.zip``, which
    still holds the previous round's model: that last record is dropped (the round is played
    again). Returns what was done (None: nothing to do); :class:`DistillationError` when the
    model matches neither the last round nor the one before.
    """
    if not record_file.is_file():
        return None
    doc = json.loads(record_file.read_text(encoding="utf-8"))
    rounds = doc.get("rounds", [])
    if not rounds or MODEL_SHA_KEY not in rounds[-1]:
        return None  # no round, or a record from before the hashes
    actual = sha256_file(model_file) if model_file.is_file() else None
    if actual == rounds[-1][MODEL_SHA_KEY]:
        return None
    previous = rounds[-2].get(MODEL_SHA_KEY) if len(rounds) > 1 else doc.get(START_SHA_KEY)
    if actual is None or actual != previous:
        raise DistillationError(
            f"{model_file} is neither the model of the last round recorded in {record_file} "
            f"({len(rounds)}) nor the one before: the run directory was changed by hand"
        )
    doc["rounds"] = rounds[:-1]
    if SHA256_KEY in doc:  # a distillation's meta.json also pins its files
        doc[SHA256_KEY] = {**doc[SHA256_KEY], MODEL_FILE: actual}
    atomic_write_json(record_file, doc)
    return (
        f"round {len(rounds)} was recorded but its model was not written (a hard kill): "
        "it is played again"
    )


def check_resumable(cfg: Config, run_root: Path) -> None:
    """Raise :class:`DistillationError` if ``cfg`` cannot continue the run's rounds: only
    ``expert_iteration.rounds`` may change (anything else would mix two recipes)."""
    path = run_root / EXPERT_FILE
    if not path.is_file():
        return
    if not cfg.expert_iteration.rounds:
        return  # no round follows: the rounds played stay the model
    recorded = json.loads(path.read_text(encoding="utf-8")).get("settings", {})
    had = {k: v for k, v in recorded.items() if k != "rounds"}
    wanted = {k: v for k, v in settings_of(cfg).identity().items() if k != "rounds"}
    if had != wanted:
        raise DistillationError(
            f"{path} records other expert-iteration settings ({had}) than the config's "
            f"({wanted}); only expert_iteration.rounds may change on resume"
        )


def train_rounds(
    model: BaseAlgorithm,
    cfg: Config,
    run_root: Path,
    validate: Callable[[BaseAlgorithm], float],
    log: Callable[[str], None],
    stop: Callable[[], bool],
) -> bool:
    """The expert-iteration phase of a training run (``scripts/train.py``, after RL).

    ``model`` (the RL phase's network, or the rounds so far when the run is resumed) is
    improved in place round by round; after each round ``model.zip`` and
    :data:`EXPERT_FILE` (settings, the round's figures, ``validate``'s win rate) are
    written atomically. Returns True when ``stop()`` ended it early (the round under way is
    dropped; the run resumes after the last finished one).
    """
    settings = settings_of(cfg)
    path = run_root / EXPERT_FILE
    check_resumable(cfg, run_root)
    rounds = expert_rounds(run_root)
    if len(rounds) >= settings.rounds:
        return False
    log(
        f"expert iteration: rounds {len(rounds) + 1}-{settings.rounds} of "
        f"{settings.episodes:,} deals, labelled by {settings.budget} over the network in "
        f"{settings.workers} process(es)"
    )

    start = _start_hash(path, run_root / MODEL_FILE, rounds)

    def finished(record: dict[str, Any]) -> None:
        record["validation_win_rate"] = validate(model)
        log(f"  validation deals won: {record['validation_win_rate']:.2%}")
        data = model_bytes(model)
        record[MODEL_SHA_KEY] = sha256_bytes(data)
        rounds.append(record)
        doc = {"settings": settings.identity(), START_SHA_KEY: start, "rounds": rounds}
        atomic_write_json(path, doc)  # the record first, naming the model it expects ...
        atomic_write_bytes(run_root / MODEL_FILE, data)  # ... then the model (reconcile_rounds)

    agent = SB3Agent(model, cfg.env_kwargs(), name=cfg.name or "model")
    return play_rounds(agent, settings, len(rounds), log, finished, stop)


# ---------------------------------------------------------------- a run directory
STATUS_RUNNING, STATUS_COMPLETED, STATUS_INTERRUPTED = "running", "completed", "interrupted"


class DistillationError(RuntimeError):
    """A run that cannot start or continue (a run directory of other settings...)."""


@dataclass
class DistillationResult:
    out: Path
    rounds_done: int
    interrupted: bool
    rounds: list[dict[str, Any]]


def run_distillation(
    start: str,
    out: Path,
    settings: SearchDistillation,
    log: Callable[[str], None] = print,
    start_path: Path | None = None,
) -> DistillationResult:
    """Distil the planner over the network ``start`` into it for ``settings.rounds`` rounds,
    writing ``out/`` (a run directory that ``evaluate.py`` loads): ``model.zip`` and
    ``meta.json`` after every round (atomic writes; a rerun with the same arguments
    continues after the last finished round, Ctrl-C loses at most the round under way),
    ``config.yaml`` copied from the start's run. ``start`` is the network's name as given
    (recorded in ``meta.json``); ``start_path`` its run directory or zip (default
    ``Path(start)``; ``scripts/distill.py`` resolves the shipped names).
    """
    meta_path = out / META_FILE
    wanted = {"start": start, "settings": settings.identity()}
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        had = {"start": meta.get("start"), "settings": meta.get("settings")}
        if had != wanted:
            raise DistillationError(
                f"{out} holds a distillation of other settings ({had}); "
                "choose another --out or rerun with the same arguments to continue"
            )
        note = reconcile_rounds(meta_path, out / MODEL_FILE)
        if note is not None:
            log(f"{out}: {note}")
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            meta["rounds_done"] = len(meta["rounds"])
        agent = load_sb3_agent(out)
        log(f"continuing {out} after round {meta['rounds_done']} of {settings.rounds}")
    else:
        path = Path(start) if start_path is None else start_path
        if not path.exists():
            raise DistillationError(f"{start!r} is not a trained network (no {path})")
        agent = load_sb3_agent(path, name=start)
        config = find_config(path / MODEL_FILE if path.is_dir() else path)
        if config is None:
            raise DistillationError(f"{start!r}: no {CONFIG_FILE} beside the model")
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / CONFIG_FILE, config.read_text(encoding="utf-8"))
        data = model_bytes(agent.model)
        meta = {
            **wanted,
            "start_config": _shown(config),
            "workers": settings.workers,
            "rounds_done": 0,
            "rounds": [],
            "status": STATUS_RUNNING,
            **provenance(),
            "command": sys.argv,
            "start_time": utc_now(),
            START_SHA_KEY: sha256_bytes(data),
            SHA256_KEY: {MODEL_FILE: sha256_bytes(data), **file_hashes(out, [CONFIG_FILE])},
        }
        atomic_write_bytes(out / MODEL_FILE, data)
        atomic_write_json(meta_path, meta)
    t0, spent = time.perf_counter(), float(meta.get("wall_seconds", 0.0))

    def finished(record: dict[str, Any]) -> None:
        data = model_bytes(agent.model)
        record[MODEL_SHA_KEY] = sha256_bytes(data)
        meta["rounds"].append(record)
        meta["rounds_done"] = len(meta["rounds"])
        meta["wall_seconds"] = round(spent + time.perf_counter() - t0, 1)
        meta[SHA256_KEY] = {**meta.get(SHA256_KEY, {}), MODEL_FILE: record[MODEL_SHA_KEY]}
        atomic_write_json(meta_path, meta)  # the record first, then the model it names
        atomic_write_bytes(out / MODEL_FILE, data)

    try:
        play_rounds(agent, settings, int(meta["rounds_done"]), log, finished)
    except KeyboardInterrupt:
        meta["status"] = STATUS_INTERRUPTED
        atomic_write_json(meta_path, meta)
        log(f"\ninterrupted: {meta['rounds_done']} round(s) kept in {out}; rerun to continue")
        return DistillationResult(out, int(meta["rounds_done"]), True, list(meta["rounds"]))
    meta.update(status=STATUS_COMPLETED, end_time=utc_now())
    atomic_write_json(meta_path, meta)
    return DistillationResult(out, int(meta["rounds_done"]), False, list(meta["rounds"]))


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it is under it (as commands name it)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
