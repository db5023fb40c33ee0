"""Bar chart of win rates with their 95% intervals (PNG, matplotlib's Agg backend)."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Final

from agents.atomic import atomic_target
from agents.evaluation.arena import AgentResult

TITLE_CHARS_PER_INCH: Final = 9
"""Characters of the chart's title a line per inch of figure (wrapped, not clipped)."""

PERCENT = 100.0


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the Agg backend (files only, no display), imported on use."""
    import matplotlib  # noqa: PLC0415 (optional dependency, loaded on use)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 (after choosing the Agg backend)

    return plt


def plot_win_rates(
    results: Sequence[AgentResult], path: str | os.PathLike[str], title: str | None = None
) -> Path:
    """Write a bar chart of ``results`` (win rate %, Wilson 95% error bars) to ``path``.

    The file is written atomically. Returns the path written.
    """
    if not results:
        raise ValueError("no results to plot")
    plt = pyplot()

    names = [r.agent for r in results]
    rates = [PERCENT * r.win_rate for r in results]
    lows = [PERCENT * (r.win_rate - r.interval[0]) for r in results]
    highs = [PERCENT * (r.interval[1] - r.win_rate) for r in results]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.4 * len(results) + 2.0), 4.0))
    try:
        xs = range(len(results))
        ax.bar(xs, rates, yerr=[lows, highs], capsize=6, color="#4C72B0", edgecolor="black")
        for x, rate, high in zip(xs, rates, highs, strict=True):
            ax.annotate(
                f"{rate:.2f}%",
                (x, rate + high),
                textcoords="offset points",
                xytext=(0, 3),
                ha="center",
                fontsize=9,
            )
        ax.set_xticks(list(xs), names, rotation=15 if len(results) > 4 else 0)
        ax.set_ylabel("win rate (%)")
        episodes = {r.episodes for r in results}
        count = f"{episodes.pop()} deals" if len(episodes) == 1 else "deals"
        text = title or f"Cold Iron win rate on {count} (Wilson 95% interval)"
        chars = int(TITLE_CHARS_PER_INCH * fig.get_figwidth())  # a caller's newlines kept
        wrapped = "\n".join(textwrap.fill(line, width=chars) for line in text.splitlines())
        ax.set_title(wrapped, fontsize="medium")
        ax.set_ylim(0, max(max(r + h for r, h in zip(rates, highs, strict=True)) * 1.2, 1.0))
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        target = Path(path)
        with atomic_target(target, suffix=".png") as tmp:
            fig.savefig(tmp, format="png", dpi=120)
    finally:
        plt.close(fig)
    return target
