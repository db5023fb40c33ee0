"""The ceiling's levels: what the report seed's bound certifies, at which confidence, and what
it only estimates.

    .venv/bin/python -m lab.experiments.ceiling --bound lab/records/strict_bound_report.json \\
        --json lab/records/ceiling_levels.json

The bound record holds one information-relaxation bound per deal (``per_deal``: a number in
[0, 1] on each of the report seed's first deals) and ``start_value``, the supersolution ``W``
at the start of the game. Every honest player's win rate is at most the mean of the per-deal
bound over *all* deals, which the record samples. From it:

- **certified, no statistics**: ``W`` at the start, plus the searches' room for the
  need-known table's single-precision rounding (``strict_bound.UPPER_SLACK``). With
  penalties from a supersolution, each deal's bound is at most ``W(start)`` (the pathwise
  sum of rewards less penalties telescopes to at most ``W(start)``), so the mean is too,
  whatever the deals; a search that outgrew its state budget reports that ceiling itself;
- **certified at 95% confidence, distribution-free**: Anderson's bound, the largest mean of
  any distribution on [0, b] whose CDF stays within the one-sided Dvoretzky-Kiefer-Wolfowitz
  band (Massart's constant) of the sample's, with ``b`` that hard ceiling;
- **at 95% one-sided, normal approximation**: mean + 1.645 standard errors;
- **the two-sided 95% interval's upper end** (mean + 1.96 standard errors: 97.5% one-sided),
  what the README stated until issue 50;
- **estimated**: the sample mean.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from pathlib import Path
from typing import Any, Final

import numpy as np
from scipy import stats

from agents.atomic import atomic_write_json
from agents.gitinfo import code_stamp
from lab.experiments.strict_bound import UPPER_SLACK

CONFIDENCE: Final = 0.95


def anderson_upper(values: np.ndarray, ceiling: float, confidence: float = CONFIDENCE) -> float:
    """Anderson's distribution-free upper confidence bound on the mean of values in [0,
    ``ceiling``]: the sample's CDF lowered by the one-sided DKW width, integrated."""
    xs = np.sort(np.asarray(values, dtype=float))
    if xs.size == 0 or xs[0] < 0 or xs[-1] > ceiling:
        raise ValueError(f"values must lie in [0, {ceiling}]")
    n = xs.size
    width = math.sqrt(math.log(1 / (1 - confidence)) / (2 * n))
    steps = np.diff(np.append(xs, ceiling))
    lowered = np.maximum(0.0, np.arange(1, n + 1) / n - width)
    return float(ceiling - np.sum(steps * lowered))


def levels(per_deal: np.ndarray, start_value: float, slack: float = UPPER_SLACK) -> dict[str, Any]:
    """Every level of the ceiling (the module docstring says which is which)."""
    n = per_deal.size
    mean = float(per_deal.mean())
    se = float(per_deal.std(ddof=1)) / math.sqrt(n)
    ceiling = start_value + slack
    if per_deal.max() > ceiling:
        raise ValueError(f"a deal's bound {per_deal.max()} is above W(start) + slack {ceiling}")
    return {
        "deals": n,
        "estimate": mean,
        "standard_error": se,
        "normal_one_sided_95": mean + float(stats.norm.ppf(CONFIDENCE)) * se,
        "normal_two_sided_95_upper": mean + float(stats.norm.ppf(0.975)) * se,
        "distribution_free_95": anderson_upper(per_deal, ceiling),
        "w_start": start_value,
        "slack": slack,
        "hard_ceiling": ceiling,
        "certified_without_statistics": ceiling,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bound", type=Path, required=True, help="a bound record (per_deal)")
    parser.add_argument("--json", type=Path, required=True, help="the record to write")
    args = parser.parse_args(argv)
    stamp = code_stamp(args.json)
    bound = json.loads(args.bound.read_text(encoding="utf-8"))
    doc = {
        "bound": str(args.bound),
        "seed": bound["seed"],
        "game": bound.get("game"),
        **levels(np.asarray(bound["per_deal"], dtype=float), float(bound["start_value"])),
        "command": shlex.join(
            [".venv/bin/python", "-m", "lab.experiments.ceiling", *(argv or sys.argv[1:])]
        ),
        **stamp,
    }
    atomic_write_json(args.json, doc)
    print(json.dumps({k: v for k, v in doc.items() if isinstance(v, float)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
