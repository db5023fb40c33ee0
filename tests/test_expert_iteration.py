"""Expert iteration (agents/learning/expert_iteration.py, scripts/distill.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

from agents.learning import expert_iteration as ei
from agents.learning.sb3_agent import KnowledgePolicy, SB3Agent
from agents.registry import make_agent
from coldiron_env.env import ColdIronEnv
from coldiron_env.knowledge import Knowledge

ROOT = Path(__file__).resolve().parent.parent
TINY = {"rounds": 2, "episodes": 6, "budget": "planner-small"}


def _params(agent: SB3Agent) -> np.ndarray:
    return np.concatenate([p.detach().numpy().ravel() for p in agent.model.policy.parameters()])


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"rounds": 0}, "rounds"),
        ({"episodes": True}, "episodes"),
        ({"budget": "planner-huge"}, "budget"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_settings_are_refused_by_name(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        ei.SearchDistillation(**kwargs)


def test_the_search_keeps_the_networks_action_before_it_plans() -> None:
    """The planner over the network is the network until turn 18 (where it starts planning)."""
    agent = make_agent("trained")
    assert isinstance(agent, SB3Agent)
    search, network = ei.search_over(agent, "planner-small"), KnowledgePolicy(agent)
    env = ColdIronEnv(**agent.env_kwargs)
    checked = 0
    for seed in range(5):
        env.reset(seed=seed)
        while env.game.turn < search.config.plan_from_turn and env.game.outcome is None:
            kn = Knowledge.from_game(env.game)
            action = network.act_knowledge(kn)
            assert search.act_knowledge(kn) == action
            checked += 1
            env.step(action)
    assert checked > 50


def test_a_run_writes_a_loadable_run_directory_round_by_round(tmp_path: Path) -> None:
    out = tmp_path / "distilled"
    settings = ei.SearchDistillation(**TINY)  # type: ignore[arg-type]
    before = _params(make_agent("trained"))  # type: ignore[arg-type]
    result = ei.run_distillation("trained", out, settings, log=lambda _: None)
    assert (result.rounds_done, result.interrupted) == (2, False)
    meta = json.loads((out / ei.META_FILE).read_text())
    assert meta["status"] == "completed" and meta["rounds_done"] == 2
    assert meta["settings"] == settings.to_dict() and meta["start"] == "trained"
    assert {"package_version", "git_commit", "versions", "wall_seconds"} <= set(meta)
    assert [r["round"] for r in meta["rounds"]] == [0, 1]
    assert all(r["episodes"] == TINY["episodes"] and r["decisions"] > 0 for r in meta["rounds"])
    distilled = make_agent(str(out))  # evaluate.py, ladder.py and play.py load it so
    assert isinstance(distilled, SB3Agent)
    assert not np.array_equal(_params(distilled), before), "cloning changed nothing"
    assert distilled.env_kwargs == make_agent("trained").env_kwargs  # type: ignore[attr-defined]


def test_an_interrupted_run_continues_after_its_last_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "distilled"
    settings = ei.SearchDistillation(**TINY)  # type: ignore[arg-type]
    real = ei.distill_round
    calls: list[int] = []

    def interrupted_in_round_2(agent: SB3Agent, s: Any, r: int, log: Any = None) -> Any:
        calls.append(r)
        if r == 1 and calls.count(1) == 1:
            raise KeyboardInterrupt
        return real(agent, s, r, log)

    monkeypatch.setattr(ei, "distill_round", interrupted_in_round_2)
    first = ei.run_distillation("trained", out, settings, log=lambda _: None)
    assert (first.rounds_done, first.interrupted) == (1, True)
    assert json.loads((out / ei.META_FILE).read_text())["status"] == "interrupted"
    second = ei.run_distillation("trained", out, settings, log=lambda _: None)
    assert (second.rounds_done, second.interrupted) == (2, False)
    assert calls == [0, 1, 1], "round 0 is kept, round 1 is played again"
    other = ei.SearchDistillation(**{**TINY, "seed": 3})  # type: ignore[arg-type]
    with pytest.raises(ei.DistillationError, match=str(out)):
        ei.run_distillation("trained", out, other, log=lambda _: None)


def test_the_script_refuses_what_is_not_a_network(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "distill.py"), "--start", "heuristic",
         "--out", str(tmp_path / "x"), "--rounds", "1", "--episodes", "2"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "'heuristic' is not a trained network" in proc.stderr
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "distill.py"), "--out", str(tmp_path / "y"),
         "--episodes", "0"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "episodes" in proc.stderr
