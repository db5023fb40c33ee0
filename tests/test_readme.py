"""The README's figures come from the evidence files in docs/ (no hand-copied drift)."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIN_SEEDS = 3


def _table_after(marker: str) -> list[list[str]]:
    """The cells of the markdown table that follows ``<!-- marker -->`` in the README."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index(f"<!-- {marker} -->") + 1
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows[2:]  # no header, no rule


def _percents(cell: str) -> list[float]:
    return [float(x) for x in re.findall(r"(\d+\.\d+)%", cell)]


def test_seeds_table_reports_every_config_from_docs_seeds_json() -> None:
    doc = json.loads((ROOT / "docs" / "seeds.json").read_text(encoding="utf-8"))
    aggregates = {a["name"]: a for a in doc["seed_aggregates"]}
    configs = {p.stem for p in (ROOT / "configs").glob("*.yaml") if not p.stem.startswith("tune_")}
    rows = {re.sub(r"`([^`]+)`.*", r"\1", r[0]): r for r in _table_after("seeds-table")}
    missing = sorted(configs - set(rows))
    assert not missing, f"configs without a row in the README seeds table: {missing}"
    for name in configs:
        agg = aggregates[name]
        assert len(agg["seeds"]) >= MIN_SEEDS, f"{name}: only {len(agg['seeds'])} seeds"
        row = rows[name]
        assert _percents(row[3]) == [round(100 * agg["mean_win_rate"], 2)], name
        assert _percents(row[4]) == [round(100 * agg["ci_low"], 2), round(100 * agg["ci_high"], 2)]
        per_seed = [float(x) for x in row[5].split(",")]
        assert per_seed == [round(100 * r, 2) for r in agg["win_rates"]], name
        pooled = [agg["pooled_wins"] / agg["pooled_episodes"], agg["pooled_ci_low"]]
        assert _percents(row[6]) == [round(100 * x, 2) for x in [*pooled, agg["pooled_ci_high"]]]
        assert row[2] == ", ".join(str(seed) for seed in agg["seeds"]), name
    heuristic = next(a for a in doc["agents"] if a["agent"] == "heuristic")
    assert _percents(rows["heuristic"][3]) == [round(100 * heuristic["win_rate"], 2)]
