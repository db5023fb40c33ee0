"""Statistics for reporting win rates honestly: the Wilson score interval, paired comparisons.

Written here, not taken from ``scipy.stats`` (``binomtest``, ``proportion_ci``): scipy is only in
the ``train`` extra, and every record's intervals use z = 1.96 exactly (scipy's the exact quantile,
1.95996...).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

Z_95: Final = 1.96  # two-sided 95% normal quantile, rounded as is customary
SIGNIFICANCE: Final = 0.05
DISAGREEMENT: Final = (
    "the interval and the exact test disagree on these few deals: trust the p-value"
)
"""What :func:`disagreement` warns (a table's footnote says it once)."""


def disagreement(pair: Mapping[str, Any]) -> str:
    """A warning when a :func:`mcnemar` pair's normal 95% interval of the difference and
    its exact test disagree (few discordant deals): "" where they agree."""
    low, high = pair["difference_ci95"]
    if (low > 0 or high < 0) == (pair["p_two_sided"] < SIGNIFICANCE):
        return ""
    return f" ({DISAGREEMENT})"


def wilson_interval(successes: int, trials: int) -> tuple[float, float]:
    """Wilson score 95% interval ``(low, high)`` for ``successes`` out of ``trials``: inside
    [0, 1] and sensible at 0 or ``trials`` successes (rare wins), unlike the normal interval.
    ``ValueError`` for a bool, a count out of range or no trials."""
    if isinstance(successes, bool) or isinstance(trials, bool):
        raise ValueError("successes and trials must be integers, not bools")
    if trials <= 0:
        raise ValueError(f"trials must be positive, got {trials}")
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must be in 0..{trials}, got {successes}")
    p, z2 = successes / trials, Z_95 * Z_95
    denom = 1.0 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denom
    half = Z_95 * math.sqrt(p * (1.0 - p) / trials + z2 / (4 * trials * trials)) / denom
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return low, high


P_FLOOR: Final = "< 1e-300"
"""How a p-value too small for a float (it underflows to 0) is written."""


def p_text(p: float, digits: int = 2) -> str:
    """A p-value for people: ``digits`` significant digits, :data:`P_FLOOR` for 0."""
    return f"{p:.{digits}g}" if p > 0 else P_FLOOR


def mcnemar(base: Sequence[bool], other: Sequence[bool]) -> dict[str, Any]:
    """Paired comparison on the same deals: discordant counts, the difference with its
    normal 95% interval, and the exact two-sided p-value (a binomial test at 1/2)."""
    only_other = sum(1 for b, o in zip(base, other, strict=True) if o and not b)
    only_base = sum(1 for b, o in zip(base, other, strict=True) if b and not o)
    n = only_other + only_base
    tail = sum(math.comb(n, i) for i in range(min(only_other, only_base) + 1)) / 2**n
    diff = (only_other - only_base) / len(base)
    se = math.sqrt(n / len(base) - diff * diff) / math.sqrt(len(base)) if n else 0.0
    return {
        "deals": len(base),
        "only_other_wins": only_other,
        "only_base_wins": only_base,
        "difference": diff,
        "difference_ci95": [diff - Z_95 * se, diff + Z_95 * se],
        "p_two_sided": min(1.0, 2 * tail),
    }
