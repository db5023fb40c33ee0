"""Bar charts of win rates with their 95% intervals (PNG, matplotlib's Agg backend)."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from agents.atomic import atomic_target
from agents.evaluation.arena import AgentResult

TITLE_CHARS_PER_INCH: Final = 9  # title characters a line per inch of figure (then wrapped)
CHART_MARGIN: Final = 1.15  # the x axis reaches this factor past the highest interval
KIND_COLOURS: Final = {"agent": "#4C72B0", "planner": "#DD8452", "baseline-subset": "#8C8C8C",
                       "bound": "#55A868"}  # fmt: skip
PERCENT: Final = 100.0


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the Agg backend (files only, no display), imported on use."""
    import matplotlib  # noqa: PLC0415 (optional dependency, loaded on use)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 (after choosing the Agg backend)

    return plt


def plot_win_rates(
    results: Sequence[AgentResult], path: str | os.PathLike[str], title: str | None = None
) -> Path:
    """Write a bar chart of ``results``, the first on top (win rate %, Wilson 95% error bars,
    coloured by the result's kind), to ``path`` atomically; returns the path."""
    if not results:
        raise ValueError("no results to plot")
    plt = pyplot()
    rates = [PERCENT * r.win_rate for r in results]
    below = [rate - PERCENT * r.interval[0] for rate, r in zip(rates, results, strict=True)]
    above = [PERCENT * r.interval[1] - rate for rate, r in zip(rates, results, strict=True)]
    fig, ax = plt.subplots(figsize=(8.0, 0.55 * len(results) + 1.5))
    ys = list(range(len(results)))[::-1]
    colours = [KIND_COLOURS[r.kind] for r in results]
    ax.barh(ys, rates, xerr=[below, above], capsize=4, color=colours, edgecolor="black")
    for y, rate, high in zip(ys, rates, above, strict=True):
        ax.annotate(
            f"{rate:.2f}%", (rate + high, y), xytext=(4, 0), textcoords="offset points",
            va="center", fontsize=8,
        )  # fmt: skip
    ax.set_yticks(ys, [f"{r.agent}\n({r.episodes} deals)" for r in results], fontsize=8)
    ax.set_xlabel("win rate (%), Wilson 95% interval")
    reach = max(rate + high for rate, high in zip(rates, above, strict=True))
    ax.set_xlim(0, min(PERCENT, reach * CHART_MARGIN + 1))
    episodes = {r.episodes for r in results}
    count = f"{episodes.pop()} deals" if len(episodes) == 1 else "deals"
    text = title or f"Cold Iron win rate on {count} (Wilson 95% interval)"
    chars = int(TITLE_CHARS_PER_INCH * fig.get_figwidth())  # a caller's newlines kept
    ax.set_title("\n".join(textwrap.fill(line, chars) for line in text.splitlines()))
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return save_png(fig, path, dpi=110)


def save_png(fig: Any, path: str | os.PathLike[str], **savefig: Any) -> Path:
    """Write ``fig`` to ``path`` as a PNG atomically, then close it; returns the path."""
    try:
        with atomic_target(path, suffix=".png") as tmp:
            fig.savefig(tmp, format="png", **savefig)
    finally:
        pyplot().close(fig)
    return Path(path)
