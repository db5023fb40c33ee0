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

import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import coldiron_env
from agents.atomic import atomic_save, atomic_write_json, atomic_write_text
from agents.learning.imitation import behaviour_clone, collect_dagger
from agents.learning.sb3_agent import (
    CONFIG_FILE,
    MODEL_FILE,
    KnowledgePolicy,
    SB3Agent,
    find_config,
    load_sb3_agent,
)
from agents.learning.training import META_FILE, git_commit, library_versions, utc_now
from agents.players.planner import BUDGETS, PlannerAgent
from coldiron_env.dealer import STREAM_INDEX_BITS, DealStream, stream_seed

DEFAULT_BUDGET: Final = "planner"


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

    def __post_init__(self) -> None:
        for name in ("rounds", "episodes", "epochs", "batch_size"):
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


def search_over(agent: SB3Agent, budget: str = DEFAULT_BUDGET) -> PlannerAgent:
    """The planner at ``budget`` with ``agent`` (its current weights) as base policy."""
    return PlannerAgent(
        BUDGETS[budget], name=f"{budget} over {agent.name}", base=KnowledgePolicy(agent)
    )


def distill_round(
    agent: SB3Agent,
    settings: SearchDistillation,
    round_index: int,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """One round: ``agent`` plays, the planner over it labels, ``agent`` is cloned (in place)."""
    t0 = time.perf_counter()
    first = stream_seed(DealStream.SEARCH, settings.seed, round_index * settings.episodes)
    gamma = float(getattr(agent.model, "gamma", 1.0))
    demos = collect_dagger(
        agent.model,
        lambda: search_over(agent, settings.budget),
        agent.env_kwargs,
        settings.episodes,
        first,
        gamma=gamma,
    )
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
) -> DistillationResult:
    """Distil the planner over ``start`` (an agent spec: ``trained``, a run directory or a
    zip) into it for ``settings.rounds`` rounds, writing ``out/`` (a run directory that
    ``evaluate.py`` loads): ``model.zip`` and ``meta.json`` after every round (atomic
    writes; a rerun with the same arguments continues after the last finished round,
    Ctrl-C loses at most the round under way), ``config.yaml`` copied from ``start``.
    """
    from agents.registry import make_agent  # noqa: PLC0415 (the registry imports learning lazily)

    meta_path = out / META_FILE
    wanted = {"start": start, "settings": settings.to_dict()}
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        had = {"start": meta.get("start"), "settings": meta.get("settings")}
        if had != wanted:
            raise DistillationError(
                f"{out} holds a distillation of other settings ({had}); "
                "choose another --out or rerun with the same arguments to continue"
            )
        agent = load_sb3_agent(out)
        log(f"continuing {out} after round {meta['rounds_done']} of {settings.rounds}")
    else:
        source = make_agent(start)
        if not isinstance(source, SB3Agent):
            raise DistillationError(f"{start!r} is not a trained network")
        config = _config_of(start)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / CONFIG_FILE, config.read_text(encoding="utf-8"))
        agent = source
        meta = {
            **wanted,
            "start_config": _shown(config),
            "rounds_done": 0,
            "rounds": [],
            "status": STATUS_RUNNING,
            "package_version": coldiron_env.__version__,
            "git_commit": git_commit(),
            "versions": library_versions(),
            "command": sys.argv,
            "start_time": utc_now(),
        }
        atomic_save(out / MODEL_FILE, agent.model.save)
        atomic_write_json(meta_path, meta)
    t0, spent = time.perf_counter(), float(meta.get("wall_seconds", 0.0))
    try:
        for r in range(int(meta["rounds_done"]), settings.rounds):
            meta["rounds"].append(distill_round(agent, settings, r, log))
            meta["rounds_done"] = r + 1
            meta["wall_seconds"] = round(spent + time.perf_counter() - t0, 1)
            atomic_save(out / MODEL_FILE, agent.model.save)
            atomic_write_json(meta_path, meta)
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


def _config_of(start: str) -> Path:
    """The resolved ``config.yaml`` beside the model ``start`` names."""
    from agents.registry import SHIPPED_MODELS  # noqa: PLC0415

    path = SHIPPED_MODELS.get(start, Path(start))
    config = find_config(path / MODEL_FILE if path.is_dir() else path)
    if config is None:
        raise DistillationError(f"{start!r}: no {CONFIG_FILE} beside the model")
    return config
