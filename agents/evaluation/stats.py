"""Statistics for reporting win rates honestly: the Wilson score interval."""

from __future__ import annotations

import math
from typing import Final

Z_95: Final = 1.96
"""Two-sided 95% normal quantile, rounded as is customary."""


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval ``(low, high)`` for ``successes`` out of ``trials``.

    Unlike the normal (Wald) interval it stays inside [0, 1] and is sensible at
    0 or ``trials`` successes, which matters for rare wins. Raises
    ``ValueError`` for a negative count, more successes than trials, no trials
    or a non-positive ``z``.
    """
    if isinstance(successes, bool) or isinstance(trials, bool):
        raise ValueError("successes and trials must be integers, not bools")
    if trials <= 0:
        raise ValueError(f"trials must be positive, got {trials}")
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must be in 0..{trials}, got {successes}")
    if not z > 0:
        raise ValueError(f"z must be positive, got {z}")
    p = successes / trials
    z2 = z * z
    denom = 1.0 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denom
    half = z * math.sqrt(p * (1.0 - p) / trials + z2 / (4 * trials * trials)) / denom
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return low, high


def intervals_disjoint(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """True when the two intervals do not overlap."""
    return a[1] < b[0] or b[1] < a[0]
