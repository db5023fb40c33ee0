"""Trained networks deciding together on validation deals: does an ensemble beat its members?

    .venv/bin/python -m lab.experiments.ensemble --seed 200 --episodes 10000 \\
        --ensemble prob:runs/ei-net-wide-seed9,distilled --member runs/ei-net-wide-seed9 \\
        --against distilled --json lab/records/validation_ensembles.json

An ``--ensemble MODE:A,B,...`` plays the legal action with the highest sum over its members
of ``prob`` (each member's masked softmax) or ``logit`` (each member's masked log-softmax,
a product of experts). Each member is a registry name or a run directory (a masked actor:
what ``scripts/evaluate.py`` loads). Every ensemble, every ``--member`` and the
``--against`` network play the same validation deals, batched as evaluation plays a
network, and the record (``scripts/evaluate.py``'s, plus the ensembles' members) pairs
each with ``--against``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any, Final

import numpy as np
import torch as th

ROOT: Final = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agents.atomic import atomic_write_json  # noqa: E402
from agents.evaluation.arena import (  # noqa: E402
    evaluate,
    format_paired,
    format_table,
    paired_lines,
    report,
)
from agents.evaluation.lockstep import stack_observations  # noqa: E402
from agents.learning.sb3_agent import MaskedPolicy, SB3Agent  # noqa: E402
from agents.players.base import Agent, legal_rows  # noqa: E402
from agents.registry import make_agent, set_torch_threads  # noqa: E402

MODES: Final = ("prob", "logit")


class EnsemblePolicy:
    """The :class:`~agents.evaluation.lockstep.BatchPolicy` of several masked actors."""

    def __init__(self, members: list[MaskedPolicy], mode: str) -> None:
        self.members = members
        self.mode = mode

    def reset_states(self) -> None:
        """Memoryless: nothing to clear."""

    def act(
        self, obs: Any, masks: np.ndarray, episode_starts: np.ndarray | None = None
    ) -> np.ndarray:
        legal = th.as_tensor(legal_rows(masks))
        total = th.zeros(legal.shape)
        for member in self.members:
            scores = th.where(legal, member.scores(obs), -th.inf)
            total += th.softmax(scores, 1) if self.mode == "prob" else th.log_softmax(scores, 1)
        best: np.ndarray = th.where(legal, total, -th.inf).argmax(1).numpy()
        return best


class EnsembleAgent(Agent):
    """An ensemble playing as an :class:`~agents.players.base.Agent` (batched in evaluation)."""

    def __init__(self, spec: str) -> None:
        mode, _, names = spec.partition(":")
        if mode not in MODES or not names:
            raise ValueError(f"--ensemble {spec!r}: expected MODE:A,B,... with MODE in {MODES}")
        self.members = names.split(",")
        members: list[SB3Agent] = []
        for name in self.members:
            member = make_agent(name)
            if not isinstance(member, SB3Agent) or member.policy.spec.recurrent:
                raise ValueError(f"--ensemble {spec!r}: {name!r} is not a memoryless network")
            if members and member.env_kwargs != members[0].env_kwargs:
                raise ValueError(
                    f"--ensemble {spec!r}: {name!r} sees {member.env_kwargs}, the first member "
                    f"{members[0].env_kwargs}: members must share one observation"
                )
            members.append(member)
        self.name = f"ensemble-{mode}:{names}"
        self.env_kwargs = dict(members[0].env_kwargs)
        self.batch_policy = EnsemblePolicy([m.policy for m in members], mode)

    def reset(self, seed: int | None = None) -> None:
        """Memoryless: nothing to reset."""

    def act(self, obs: Any, action_mask: np.ndarray, info: dict[str, Any] | None = None) -> int:
        batch = stack_observations([obs])  # flat or dict, as evaluation stacks them
        return int(self.batch_policy.act(batch, np.asarray(action_mask)[None])[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ensemble", action="append", required=True, help="MODE:A,B,...")
    parser.add_argument("--member", action="append", default=[], help="a network alone")
    parser.add_argument("--against", required=True, help="pair every agent with this network")
    parser.add_argument("--seed", type=int, required=True, help="validation seed")
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    set_torch_threads(1)
    ensembles = [EnsembleAgent(spec) for spec in args.ensemble]
    agents: list[tuple[str, Agent]] = [(e.name, e) for e in ensembles]
    agents += [(name, make_agent(name)) for name in [*args.member, args.against]]
    results = evaluate(agents, args.episodes, args.seed, {}, validation=True)
    pairs = paired_lines(results, args.against)
    print(format_table(results))
    print(format_paired(pairs))
    doc = report(results, args.episodes, args.seed, {})
    doc.update(
        deals="validation",
        paired=pairs,
        ensembles={e.name: {"mode": e.batch_policy.mode, "members": e.members} for e in ensembles},
        command=shlex.join(
            ["lab/experiments/ensemble.py", *(sys.argv[1:] if argv is None else argv)]
        ),
    )
    atomic_write_json(args.json, doc)
    print(f"json: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
