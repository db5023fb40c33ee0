"""Pair one player's per-deal wins in two search-probe records of the same deals.

    python -m lab.experiments.pair_records --agent search:distilled:network:1024:18:z=1.0 \\
        --pair lab/records/search_probes_501.json lab/records/search_probes_501_keepfix.json \\
        --pair lab/records/search_probes_502.json lab/records/search_probes_502_keepfix.json \\
        --json lab/records/keepfix_paired.json

Two records of ``lab/experiments/search_probes.py`` made at different commits (one
change between them) hold the same player's win on every deal; paired deal by deal
(:func:`agents.evaluation.stats.mcnemar`, the deals of each ``--pair`` checked to be the
same seed and count), each pair and all pooled: what the change did, on the same deals.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agents.atomic import atomic_write_json  # noqa: E402
from agents.evaluation.stats import mcnemar, wilson_interval  # noqa: E402
from agents.gitinfo import code_stamp  # noqa: E402
from lab import unpack_wins  # noqa: E402


def wins_of(path: Path, agent: str) -> tuple[dict[str, Any], list[bool]]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    entry = doc["agents"].get(agent)
    if entry is None:
        raise SystemExit(f"error: {path}: no agent {agent!r} (has {sorted(doc['agents'])})")
    return doc, unpack_wins(entry["wins"], doc["episodes"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", required=True, help="the player's label in both records")
    parser.add_argument(
        "--pair", nargs=2, action="append", type=Path, required=True, metavar=("BEFORE", "AFTER")
    )
    parser.add_argument("--json", type=Path, required=True, help="record to write")
    args = parser.parse_args(argv)
    pairs, before_all, after_all = [], [], []
    for before_file, after_file in args.pair:
        before_doc, before = wins_of(before_file, args.agent)
        after_doc, after = wins_of(after_file, args.agent)
        same = ("seed", "episodes", "deals")  # the deals' stream, seed and count
        if any(before_doc.get(k) != after_doc.get(k) for k in same):
            raise SystemExit(f"error: {before_file} and {after_file} hold different deals")
        pairs.append(
            {
                "before": str(before_file),
                "after": str(after_file),
                "seed": before_doc["seed"],
                "won_before": sum(before),
                "won_after": sum(after),
                **mcnemar(before, after),
            }
        )
        before_all += before
        after_all += after
    pooled = {
        "won_before": sum(before_all),
        "won_after": sum(after_all),
        "after_ci95": list(wilson_interval(sum(after_all), len(after_all))),
        **mcnemar(before_all, after_all),
    }
    atomic_write_json(
        args.json,
        {
            "agent": args.agent,
            "pairs": pairs,
            "pooled": pooled,
            "command": " ".join(["lab/experiments/pair_records.py", *(argv or sys.argv[1:])]),
            **code_stamp(args.json),
        },
    )
    print(
        f"{args.agent}: {pooled['won_before']} -> {pooled['won_after']} of {pooled['deals']} "
        f"deals ({pooled['only_other_wins']} won only after, {pooled['only_base_wins']} only "
        f"before; p = {pooled['p_two_sided']:.3g})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
