"""An evaluation as a page to look at: ``scripts/evaluate.py ... --html DIR``.

``DIR/index.html`` is self-contained (no network, no CDN): the results table with Wilson
intervals and the paired comparisons, the chart (SVG, drawn by the page), the deals where two
agents' outcomes differ, and a replay of every game of every agent, one at a time or two side
by side. Each game is replayed here by the rules engine from its deal and the actions played
(:func:`agents.web.views.replay`), so the page shows the states the engine had; a searching
player's estimates (its planned decisions' win chances) are kept at the steps it planned. The
games travel gzip-compressed in chunks of :data:`CHUNK` deals, opened when a deal is shown
(the browser's ``DecompressionStream``), so a report of 10,000 deals opens at once.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any, Final

from agents.atomic import atomic_write_text
from agents.evaluation.arena import AgentResult
from agents.web.views import META, replay
from coldiron_env.game import OUTCOMES
from coldiron_env.options import RuleOptions

CHUNK: Final = 100  # deals a compressed chunk holds
STATIC: Final = files("agents.web") / "static"
REPORT_FILE: Final = "index.html"


def estimates(states: Sequence[list[Any]], records: Sequence[Any]) -> dict[int, list[list[Any]]]:
    """A searching player's planned decisions by the step they were made at: each record (a
    :class:`~agents.players.planner.DecisionRecord`) matched, in order, to the next step of its
    turn and phase whose action is its choice."""
    out: dict[int, list[list[Any]]] = {}
    step = 0
    for record in records:
        key = (record.choice, record.turn, record.phase)
        while step < len(states) and (states[step][0], states[step][1], states[step][4]) != key:
            step += 1
        if step == len(states):
            break
        weighed = {**record.dropped, **record.win_chances}  # every candidate it rolled out
        out[step] = [[a, round(p, 3)] for a, p in sorted(weighed.items())]
        step += 1
    return out


def chunks(results: Sequence[AgentResult], rules: RuleOptions) -> list[str]:
    """Every agent's games, replayed, deal by deal, gzip-compressed and base64-encoded in
    chunks of :data:`CHUNK` deals: ``{deal: {agent: {"s": states, "e": estimates}}}``."""
    deals = len(results[0].games)
    out = []
    for first in range(0, deals, CHUNK):
        chunk: dict[int, dict[str, Any]] = {}
        for deal in range(first, min(first + CHUNK, deals)):
            chunk[deal] = {}
            for result in results:
                game = result.games[deal]
                states = replay(game.deck, game.actions, rules)
                shown: dict[str, Any] = {"s": states}
                if result.decisions:
                    shown["e"] = estimates(states, result.decisions[deal])
                chunk[deal][result.agent] = shown
        packed = gzip.compress(json.dumps(chunk, separators=(",", ":")).encode(), mtime=0)
        out.append(base64.b64encode(packed).decode("ascii"))
    return out


def summary(
    results: Sequence[AgentResult], paired: list[dict[str, Any]], about: dict[str, Any]
) -> dict[str, Any]:
    """What the page shows before any deal is opened: the results, the pairs, each agent's
    outcome on each deal (one character a deal, its index in ``OUTCOMES``)."""
    agents = []
    for result in results:
        row = {k: v for k, v in result.to_dict().items() if k != "won_bits"}
        row["by_deal"] = "".join(str(OUTCOMES.index(g.outcome)) for g in result.games)
        row["searches"] = bool(result.decisions)
        agents.append(row)
    return {**about, "meta": META, "agents": agents, "paired": paired, "chunk": CHUNK}


def write_report(
    out: Path,
    results: Sequence[AgentResult],
    paired: list[dict[str, Any]],
    about: dict[str, Any],
    rules: RuleOptions,
) -> Path:
    """Write ``out/index.html`` (atomically) from results that kept their games; its path."""
    if not results or any(len(r.games) != r.episodes for r in results):
        raise ValueError("a report needs every agent's games (evaluate with keep=True)")
    page = (STATIC / "report.html").read_text(encoding="utf-8")
    data = json.dumps(summary(results, paired, about), separators=(",", ":"))
    parts = {
        "/*STYLE*/": (STATIC / "viewer.css").read_text(encoding="utf-8"),
        "/*VIEWER*/": (STATIC / "viewer.js").read_text(encoding="utf-8"),
        "/*APP*/": (STATIC / "report.js").read_text(encoding="utf-8"),
        "/*SUMMARY*/": data.replace("</", "<\\/"),  # no "</script>" inside the script
        "/*CHUNKS*/": json.dumps(chunks(results, rules)),
    }
    for marker, text in parts.items():
        page = page.replace(marker, text)
    path = out / REPORT_FILE
    atomic_write_text(path, page)
    return path
