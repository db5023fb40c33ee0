"""Offline: how one round of expert iteration's cloning changes a network, by cloning variant.

    .venv/bin/python -m lab.experiments.clone_variants --start runs/main-fixed-seeding \\
        --json lab/records/clone_variants.json

The start network plays two sets of SEARCH deals and the planner over it labels every state
(set A trains, set B measures). Each variant clones set A into a fresh copy of the start
network; then on set B: the share of the planner's changes the clone now makes (switch
recall), the share of the decisions the planner kept that it now changes (collateral), and
the win rate on validation deals. No evaluation deal is played.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.atomic import atomic_write_json
from agents.evaluation.arena import evaluate
from agents.gitinfo import git_commit, utc_now
from agents.learning.expert_iteration import Labellers
from agents.learning.imitation import Demonstrations, behaviour_clone
from agents.learning.sb3_agent import MaskedPolicy, load_sb3_agent
from coldiron_env.dealer import DealStream, stream_seed


def _variant(lr: float, anchor: float = 0.0, changed: float = 1.0) -> dict[str, Any]:
    return {"learning_rate": lr, "epochs": 4, "anchor": anchor, "changed_weight": changed}


VARIANTS: dict[str, dict[str, Any]] = {
    "recipe (Adam 1e-4, 4 epochs)": _variant(1e-4),
    "anchor 1": _variant(1e-4, anchor=1.0),
    "anchor 1, changes x5": _variant(1e-4, anchor=1.0, changed=5.0),
    "anchor 1, changes x10, lr 2e-4": _variant(2e-4, anchor=1.0, changed=10.0),
    "anchor 3, changes x10, lr 2e-4": _variant(2e-4, anchor=3.0, changed=10.0),
    "changes x10, lr 2e-4 (no anchor)": _variant(2e-4, changed=10.0),
}


def choices(model: Any, demos: Demonstrations) -> np.ndarray:
    policy = MaskedPolicy(model)
    out = []
    for start in range(0, len(demos), 4096):
        idx = np.arange(start, min(start + 4096, len(demos)))
        out.append(policy.act(demos.obs[idx], demos.masks[idx]))
    return np.concatenate(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--start", required=True)
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=77, help="SEARCH-stream seed of the deals")
    parser.add_argument("--validation-seed", type=int, default=200)
    parser.add_argument("--validation-episodes", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--variant", action="append", help="only these variants")
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    start = load_sb3_agent(args.start)
    gamma = float(getattr(start.model, "gamma", 1.0))
    sets = []
    t0 = time.perf_counter()
    with Labellers(args.workers) as labellers:
        for r in range(2):
            first = stream_seed(DealStream.SEARCH, args.seed, r * args.episodes)
            demos = labellers.label(start, "planner", args.episodes, first, gamma)
            assert demos is not None
            sets.append(demos)
    label_seconds = time.perf_counter() - t0
    train_set, test_set = sets
    before = choices(start.model, test_set)
    changed = before != test_set.actions
    results = []
    (base,) = evaluate(
        [("start", start)], args.validation_episodes, args.validation_seed, validation=True
    )
    results.append({"variant": "none (the start network)", "settings": {},
                    "switch_recall": 0.0, "collateral": 0.0,
                    "validation_win_rate": base.win_rate,
                    "validation_wins": base.wins})  # fmt: skip
    for name, settings in VARIANTS.items():
        if args.variant and name not in args.variant:
            continue
        agent = load_sb3_agent(args.start)
        stats = behaviour_clone(agent.model, train_set, batch_size=512, value_pretrain=True,
                                seed=0, **settings)  # fmt: skip
        agent.reset()
        after = choices(agent.model, test_set)
        (played,) = evaluate([(name, agent)], args.validation_episodes, args.validation_seed,
                             validation=True)  # fmt: skip
        row = {
            "variant": name,
            "settings": settings,
            "train_agreement_after": stats["accuracy_after"],
            "switch_recall": float((after[changed] == test_set.actions[changed]).mean()),
            "collateral": float((after[~changed] != test_set.actions[~changed]).mean()),
            "validation_win_rate": played.win_rate,
            "validation_wins": played.wins,
        }
        print(json.dumps(row), flush=True)
        results.append(row)
    atomic_write_json(args.json, {
        "command": "lab/experiments/clone_variants.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "start": args.start, "commit": git_commit(), "time": utc_now(),
        "label_seconds": round(label_seconds, 1),
        "deals": {"labels": f"SEARCH seed {args.seed}, 2 x {args.episodes}",
                  "validation": f"{args.validation_episodes} validation deals of seed "
                                f"{args.validation_seed}"},
        "changed_on_set_b": int(changed.sum()), "decisions_on_set_b": len(changed),
        "results": results,
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
