"""The leaner-house figures (issue 20): production lines, files per rule variant, the
expert-iteration trace, measured on this checkout and written to a record.

    python scripts/experiments/house_metrics.py --json docs/records/house.json --label after

- **Lines**: ``wc -l`` of the production Python (``coldiron_env``, ``agents``, ``scripts``),
  and the same with the files that the other open issues added counted apart
  (:data:`COUNTED_APART`: the bound, OpenSpiel, RLlib, rl-zoo3, ONNX).
- **Rule variants**: the production files naming each rule variant (a field of
  ``RuleOptions`` other than the curriculum's ``turns`` / ``suits_required``).
- **The expert-iteration trace**: a tiny training run (the default config with a few
  steps, one labelling process) with ``play_out`` replaced by a recorder, which keeps the
  Python stack the first time the planner's rollouts run: the project's frames from
  ``train`` to ``play_out``. Its ``calls`` is the number of arrows in that chain.

The record keeps one entry per ``--label`` (a later run with the same label replaces it).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import traceback
from dataclasses import fields
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agents.atomic import atomic_write_json  # noqa: E402
from agents.gitinfo import git_commit, git_dirty  # noqa: E402
from coldiron_env.options import RuleOptions  # noqa: E402

PRODUCTION: Final = ("coldiron_env", "agents", "scripts")
COUNTED_APART: Final[dict[str, tuple[str, ...]]] = {
    "the bound (issue 19)": (
        "agents/evaluation/bound.py",
        "agents/evaluation/bound_fit.py",
        "agents/evaluation/need_game.py",
        "scripts/bound.py",
        "scripts/experiments/bound_search.py",
        "scripts/experiments/bound_checks.py",
        "scripts/experiments/strict_bound.py",
        "scripts/experiments/capacity_w.py",
        "scripts/experiments/relaxed_players.py",
        "scripts/experiments/strict_players.py",
    ),
    "new search players (issue 19)": (
        "agents/players/policy_net.py",
        "agents/players/threads.py",
        "scripts/experiments/search_probes.py",
    ),
    "OpenSpiel": (
        "coldiron_env/openspiel.py",
        "agents/players/mcts.py",
        "scripts/openspiel_playthrough.py",
    ),
    "RLlib": ("agents/integrations/rllib.py", "scripts/rllib_train.py"),
    "rl-zoo3 (masked PPO)": (
        "agents/integrations/zoo.py",
        "scripts/zoo.py",
        "scripts/zoo_report.py",
    ),
    "ONNX": (
        "agents/integrations/onnx_export.py",
        "agents/integrations/onnx_policy.py",
        "scripts/export.py",
    ),
}
CURRICULUM_FIELDS: Final = ("turns", "suits_required")
TRACE_START: Final = "train"
TRACE_END: Final = "play_out"
TRACE_EPISODES: Final = 16  # enough deals that some game reaches the turn the planner plans from


def python_files() -> list[Path]:
    return sorted(p for d in PRODUCTION for p in (ROOT / d).rglob("*.py"))


def lines_of(path: Path) -> int:
    return len(path.read_text().splitlines())


def line_counts() -> dict[str, Any]:
    files = python_files()
    per_file = {str(p.relative_to(ROOT)): lines_of(p) for p in files}
    apart = {
        group: sum(per_file.get(f, 0) for f in group_files)
        for group, group_files in COUNTED_APART.items()
    }
    total = sum(per_file.values())
    return {
        "production_lines": total,
        "counted_apart": apart,
        "production_lines_without_other_issues": total - sum(apart.values()),
        "per_package": {
            d: sum(n for f, n in per_file.items() if f.startswith(d + "/")) for d in PRODUCTION
        },
        "agents_learning": sum(n for f, n in per_file.items() if f.startswith("agents/learning/")),
    }


def rule_variant_files() -> dict[str, dict[str, int]]:
    """Per rule variant: the production files naming it, and how many times each does."""
    variants = [f.name for f in fields(RuleOptions) if f.name not in CURRICULUM_FIELDS]
    found: dict[str, dict[str, int]] = {}
    for name in variants:
        found[name] = {}
        for path in python_files():
            count = path.read_text().count(name)
            if count:
                found[name][str(path.relative_to(ROOT))] = count
    return found


def expert_iteration_trace() -> list[str]:
    """The project's frames from ``train`` to ``play_out`` in a tiny run (see the docstring)."""
    from agents.learning import training
    from agents.learning.config import config_from_dict, load_config
    from agents.players import rollouts

    data = load_config(ROOT / "configs" / "maskable_ppo.yaml").to_dict()
    data["algorithm"]["hyperparameters"].update(n_steps=32, batch_size=32)
    data["training"].update(total_timesteps=64, n_envs=2, progress_bar=False, vec_env="dummy")
    data["training"]["torch_threads"] = 1
    data["evaluation"].update(freq=64, episodes=4)
    # a network that plays long enough games for the planner to plan (from turn 18)
    data["imitation"].update(episodes=300, epochs=4, dagger_rounds=0)
    data["expert_iteration"].update(
        rounds=1, episodes=TRACE_EPISODES, budget="planner-small", workers=1
    )
    cfg = config_from_dict(data)

    seen: list[list[str]] = []
    original = rollouts.play_out

    def recorder(*args: Any, **kwargs: Any) -> Any:
        if not seen:
            stack = traceback.extract_stack()[:-1]
            seen.append(
                [
                    f"{Path(f.filename).resolve().relative_to(ROOT)}:{f.name}"
                    for f in stack
                    if Path(f.filename).resolve().is_relative_to(ROOT)
                    and not Path(f.filename).resolve().is_relative_to(ROOT / ".venv")
                ]
            )
        return original(*args, **kwargs)

    rollouts.play_out = recorder
    try:
        with tempfile.TemporaryDirectory(prefix="coldiron-trace-") as out:
            training.train(cfg, out=Path(out))
    finally:
        rollouts.play_out = original
    if not seen:
        raise RuntimeError("play_out was never called from Python: the trace is not measurable")
    frames = seen[0]
    starts = [i for i, f in enumerate(frames) if f.endswith(f":{TRACE_START}")]
    if not starts:
        raise RuntimeError(f"no {TRACE_START!r} frame on the stack: {frames}")
    return [*frames[starts[0] :], f"agents/players/rollouts.py:{TRACE_END}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, required=True, help="the record to write")
    parser.add_argument("--label", required=True, help="this measurement's name in the record")
    parser.add_argument("--no-trace", action="store_true", help="skip the tiny training run")
    args = parser.parse_args(argv)

    entry: dict[str, Any] = {"commit": git_commit(), "dirty": git_dirty(), **line_counts()}
    variants = rule_variant_files()
    entry["rule_variants"] = {
        name: {"files": len(found), "mentions": sum(found.values()), "where": found}
        for name, found in variants.items()
    }
    if not args.no_trace:
        chain = expert_iteration_trace()
        entry["expert_iteration_trace"] = {"calls": len(chain) - 1, "chain": chain}
    doc = json.loads(args.json.read_text()) if args.json.exists() else {"entries": {}}
    doc["command"] = "python scripts/experiments/house_metrics.py --json FILE --label LABEL"
    doc["entries"][args.label] = entry
    atomic_write_json(args.json, doc)
    print(json.dumps({k: v for k, v in entry.items() if k != "rule_variants"}, indent=2))
    for name, v in entry["rule_variants"].items():
        print(f"{name}: {v['files']} files, {v['mentions']} mentions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
