"""Agent names and specs: ``make_agent("heuristic")``, ``"trained"`` or ``"runs/ppo"``.

A spec is a built-in player's name (:mod:`agents.players.roster`), a model shipped with the
package (:data:`SHIPPED_MODELS`), a search over one (:data:`SEARCH_OVER_MODELS`), or a path
to a trained model: a run directory or a ``.zip`` file, loaded by
:func:`agents.learning.sb3_agent.load_sb3_agent`.

Other code registers itself through entry points, so this module imports none of it: players by name
(:data:`PLAYER_GROUP`: OpenSpiel's ``mcts``) and loaders of other model formats
(:data:`LOADER_GROUP`: an ``.onnx`` policy, an RLlib checkpoint, a zip rl-zoo3 saved, whose
folder holds its last and its best model: name the ``.zip``), declared in ``pyproject.toml``
(another package can declare its own) and imported only when used, so the built-in players work
without the training stack or any extra.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Final

from agents.players.base import Agent
from agents.players.roster import BUILTIN_AGENTS

PLAYER_GROUP: Final = "coldiron.players"  # make(name) -> Agent (OpenSpiel's mcts)
LOADER_GROUP: Final = "coldiron.loaders"  # load(path) -> Agent | None (ONNX, RLlib, rl-zoo3)


def _registered(group: str) -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=group)}


def _load(ep: EntryPoint) -> Any:
    """The object an entry point names; a missing extra is a ``ValueError`` saying so."""
    try:
        return ep.load()
    except ImportError as err:
        extras = ",".join(ep.extras) or "its"
        raise ValueError(
            f"{ep.name!r} needs the {extras} extra (pip install -e '.[{extras}]'): {err}"
        ) from err


def agent_names() -> list[str]:
    """Every agent that has a name: built-in and registered players, shipped models, search
    over them."""
    return [*BUILTIN_AGENTS, *_registered(PLAYER_GROUP), *SHIPPED_MODELS, *SEARCH_OVER_MODELS]


def _planner_over(name: str, search: SearchOverModel) -> Agent:
    from agents.learning.sb3_agent import (  # noqa: PLC0415 (training stack)
        KnowledgePolicy,
        SB3Agent,
        policy_net,
    )
    from agents.players.planner import BUDGETS, PlannerAgent  # noqa: PLC0415

    network = make_agent(search.model)
    if not isinstance(network, SB3Agent):
        raise ValueError(f"{name}: {search.model!r} is not a trained network")
    overrides: dict[str, Any] = dict(search.overrides)  # PlannerConfig checks each value
    return PlannerAgent(
        replace(BUDGETS[search.budget], **overrides),
        name=name,
        base=KnowledgePolicy(network),
        rollout_policy=policy_net(network) if search.network_rollouts else None,
    )


MODEL_SUFFIX: Final = ".zip"
MODELS_DIR: Final = Path(__file__).resolve().parent / "models"
SHIPPED_MODELS: Final[dict[str, Path]] = {
    "trained": MODELS_DIR / "trained",
    "distilled": MODELS_DIR / "distilled",
    "distilled-20": MODELS_DIR / "distilled-20",
    "distilled-30": MODELS_DIR / "distilled-30",
    "tabula-rasa": MODELS_DIR / "tabula-rasa",
}
"""Names of the trained models in the package -> their run directories (``docs/models.md``)."""


@dataclass(frozen=True)
class SearchOverModel:
    """The planner over a shipped network: the network proposes, the planner keeps its
    action unless rollouts find a significantly better one."""

    model: str  # the shipped network (a key of SHIPPED_MODELS)
    network_rollouts: bool  # the rollouts played by the network itself (else by heuristic)
    overrides: tuple[tuple[str, float | int], ...] = ()  # PlannerConfig fields set apart
    budget: str = "planner"  # the budget's name (agents.players.planner.BUDGETS)


SEARCH_OVER_MODELS: Final[dict[str, SearchOverModel]] = {
    "planner-trained": SearchOverModel("trained", network_rollouts=False),
    "strongest-z2": SearchOverModel("distilled-30", network_rollouts=True),
    "strongest-d30": SearchOverModel(
        "distilled-30", network_rollouts=True, overrides=(("z", 1.0),)
    ),
    "strongest": SearchOverModel("distilled", network_rollouts=True, overrides=(("z", 1.0),)),
}
"""Search over the shipped networks, by name (each one and its history: ``docs/models.md``;
chosen on validation deals, lab/records/search_probes_501.json). A search keeps the network it
was measured with."""
PLAY_TORCH_THREADS: Final = 1
"""Torch threads for playing trained models: on a busy 2-core machine two threads made
evaluation ten times slower (10,000 deals in 60 s against 3.4 s)."""


def set_torch_threads(threads: int = PLAY_TORCH_THREADS) -> None:
    """Use ``threads`` torch threads from now on (nothing to do without torch)."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"torch threads must be a positive int, got {threads!r}")
    try:
        import torch  # noqa: PLC0415 (the training stack is optional)
    except ImportError:
        return
    torch.set_num_threads(threads)


def is_builtin(spec: str) -> bool:
    return spec in BUILTIN_AGENTS


def make_agent(spec: str) -> Agent:
    """The agent ``spec`` names (the module doc); ``ValueError`` naming the spec when it is
    neither a name nor an existing path, or the file when a model cannot be loaded."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"agent spec must be a non-empty string, got {spec!r}")
    factory = BUILTIN_AGENTS.get(spec)
    if factory is not None:
        return factory()
    registered = _registered(PLAYER_GROUP).get(spec)
    if registered is not None:
        made: Agent = _load(registered)(spec)
        return made
    if spec in SEARCH_OVER_MODELS:
        return _planner_over(spec, SEARCH_OVER_MODELS[spec])
    shipped = SHIPPED_MODELS.get(spec)
    path = Path(spec) if shipped is None else shipped
    names = ", ".join(agent_names())
    if not path.exists():
        if path.suffix or len(path.parts) > 1:
            raise ValueError(f"model path {spec!r} does not exist")
        raise ValueError(
            f"unknown agent {spec!r}: expected a named agent ({names}), a run directory, a "
            f"{MODEL_SUFFIX} model file or a model another loader takes ({LOADER_GROUP})"
        )
    for loader in _registered(LOADER_GROUP).values():
        agent: Agent | None = _load(loader)(path)
        if agent is not None:
            return agent
    if not (path.is_dir() or path.suffix == MODEL_SUFFIX):
        raise ValueError(
            f"cannot load agent from {spec!r}: expected a run directory, a {MODEL_SUFFIX} model "
            f"file or a model another loader takes (named agents: {names})"
        )
    try:
        from agents.learning.sb3_agent import load_sb3_agent  # noqa: PLC0415 (training stack, lazily)
    except ImportError as err:
        raise ValueError(f"cannot load model {spec!r}: SB3 support is unavailable ({err})") from err
    return load_sb3_agent(path, name=spec if shipped is not None else None)
