"""Offline: how one round of expert iteration's cloning changes a network, by cloning variant.

    .venv/bin/python -m lab.experiments.clone_variants --start runs/main-fixed-seeding \\
        --json lab/records/clone_variants.json

The start network plays two sets of SEARCH deals and the planner over it labels every state
(set A trains, set B measures). Each variant clones set A into a fresh copy of the start
network; then on set B: the share of the planner's changes the clone now makes (switch
recall), the share of the decisions the planner kept that it now changes (collateral), and
the win rate on validation deals. No evaluation deal is played.

The variants beyond the recipe clone with :func:`weighted_clone`: the product's cloning
(``agents.learning.imitation.behaviour_clone``) for a flat actor-critic network, with two
options the product does not offer (the recipe won: ``lab/docs/experiments.md``).
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
import torch.nn.functional as F

from agents.atomic import atomic_write_json
from agents.evaluation.arena import evaluate
from agents.gitinfo import git_commit, utc_now
from agents.learning.expert_iteration import Labellers
from agents.learning.imitation import (
    FORWARD_CHUNK,
    VALUE_LOSS_WEIGHT,
    Demonstrations,
    _Cloner,
    _descend,
    _masked,
    _rows,
    accuracy,
    behaviour_clone,
)
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


def weighted_clone(
    model: Any,
    demos: Demonstrations,
    *,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    value_pretrain: bool = True,
    seed: int = 0,
    anchor: float = 0.0,
    changed_weight: float = 1.0,
) -> dict[str, Any]:
    """``behaviour_clone`` (the same batches, loss and value regression) with two options.

    ``anchor`` > 0 adds ``anchor`` times the KL divergence from the network's masked policy
    before this call, on every decision: labels that agree with the network then move its
    logits little, so teaching those that differ changes fewer other decisions.
    ``changed_weight`` weighs the labels that differ from the network's choice (1: all
    alike). Without either it is ``behaviour_clone`` itself. Hard labels on a flat
    actor-critic network only.
    """
    if not anchor and changed_weight == 1.0:
        return behaviour_clone(model, demos, epochs=epochs, batch_size=batch_size,
                               learning_rate=learning_rate, value_pretrain=value_pretrain,
                               seed=seed)  # fmt: skip
    cloner = _Cloner(model)
    if cloner.spec.recurrent or cloner.spec.family == "q_value":
        raise ValueError("anchor and changed_weight are for flat actor-critic networks")
    device = cloner.policy.device
    with torch.no_grad():  # the network's masked logits on every decision, before cloning
        reference = torch.cat([
            _masked(cloner.scores_values(_rows(demos.obs, idx))[0],
                    torch.as_tensor(demos.masks[idx], device=device))
            for idx in (np.arange(s, min(s + FORWARD_CHUNK, len(demos)))
                        for s in range(0, len(demos), FORWARD_CHUNK))
        ])  # fmt: skip
    optimizer = torch.optim.Adam(model.policy.parameters(), lr=learning_rate)
    rng = np.random.default_rng(seed)
    before = accuracy(model, demos)
    model.policy.set_training_mode(True)
    for _ in range(epochs):
        order = rng.permutation(len(demos))
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            masks = torch.as_tensor(demos.masks[idx], device=device)
            actions = torch.as_tensor(demos.actions[idx], device=device)
            scores, values = cloner.scores_values(_rows(demos.obs, idx))
            logits = _masked(scores, masks) if cloner.spec.supports_masks else scores
            old = reference[torch.as_tensor(idx, device=device)]
            weights = 1.0 + (changed_weight - 1.0) * (old.argmax(dim=1) != actions).float()
            loss = (weights * F.cross_entropy(logits, actions, reduction="none")).mean()
            if anchor:
                old_logp, new_logp = F.log_softmax(old, dim=1), F.log_softmax(logits, dim=1)
                loss = loss + anchor * (old_logp.exp() * (old_logp - new_logp)).sum(dim=1).mean()
            if value_pretrain and values is not None:
                returns = torch.as_tensor(demos.returns[idx], device=device)
                loss = loss + VALUE_LOSS_WEIGHT * F.mse_loss(values, returns)
            _descend(optimizer, loss)
    model.policy.set_training_mode(False)
    return {"accuracy_before": before, "accuracy_after": accuracy(model, demos)}


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
        stats = weighted_clone(agent.model, train_set, batch_size=512, value_pretrain=True,
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
