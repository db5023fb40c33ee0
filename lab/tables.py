"""The tables of the README and docs/, rendered from the committed JSON records.

    .venv/bin/python -m lab.tables           # rewrite the tables that differ
    .venv/bin/python -m lab.tables --check   # exit 1 if any table differs from its record

A table sits in a markdown file between ``<!-- table:NAME -->`` and ``<!-- /table -->``;
:func:`render` makes it from its record, so no figure is copied by hand.
``lab/tables.py`` rewrites every table (``--check``: report drift, change nothing)
and tests/test_tables.py fails when a table differs from its record. A file quoted in a
code block after ``<!-- include:PATH -->`` is kept equal to that file the same way (the
README's ONNX example). Names:

- ``results``: the README's players on the report seed (``docs/ladder/ladder.json``), each
  paired with ``heuristic`` deal by deal (from the per-deal wins the record keeps);
- ``ladder``: every row of that ladder, with its outcomes;
- ``benchmark``: ``docs/benchmark.json`` (``scripts/benchmark.py --json``);
- ``main-job``: the main job's run (``docs/records/main_job.json``, ``scripts/main.py
  --record``);
- ``looks``: the look log (``lab/records/report_looks.jsonl``);
- ``experiments``: the experiment log (``lab/records/experiments.json``);
- ``works-with``: the other RL code Cold Iron was run in (``docs/records/works_with.json``),
  each figure read from the record the row names;
- ``record:PATH``: a record that is a table itself (``header``, ``rows``, its source);
- ``probes:PATH``: a ``lab/experiments/search_probes.py`` record (players on the same
  validation deals, paired, with their cost);
- ``history:FILE#N``: table ``N`` of ``FILE`` as it was at the commit of
  ``lab/docs/history/tables-<commit>.json`` (``lab/transcribe_history.py``): figures of
  runs whose directories were not kept, shown as what they are.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import numpy as np

from agents.atomic import atomic_write_text
from agents.evaluation.arena import markdown_table
from agents.evaluation.plots import pyplot
from agents.evaluation.stats import mcnemar, wilson_interval
from agents.registry import MODELS_DIR
from lab import RECORDS, ROOT, unpack_wins
from lab.looks import LOOK_LOG, REPORT_SEED, read_looks

DOCS: Final = ROOT / "docs"
LADDER_JSON: Final = DOCS / "ladder" / "ladder.json"
BENCHMARK_JSON: Final = DOCS / "benchmark.json"
MAIN_JOB_JSON: Final = DOCS / "records" / "main_job.json"
WORKS_WITH_JSON: Final = DOCS / "records" / "works_with.json"
ONNX_SPEED_JSON: Final = DOCS / "records" / "onnx_speed.json"
RLLIB_SPEED_DIR: Final = DOCS / "records" / "rllib_speed"
HOUSE_JSON: Final = RECORDS / "house.json"
HOUSE_TARGET_LINES: Final = 11_500
"""Issue 20's point 7: production lines without the other open issues' files, at most."""
HISTORY_JSON: Final = ROOT / "lab" / "docs" / "history" / "tables-8ad2cac.json"
SEEDS_2026_JSON: Final = ROOT / "lab" / "docs" / "history" / "seeds-2026.json"
SEEDS_2026_TABLE: Final = 4
"""The seeds table's index among the README's tables at the transcribed commit."""
BLOCK: Final = re.compile(r"<!-- table:(?P<name>[^ ]+) -->\n(?P<body>.*?)<!-- /table -->", re.S)
INCLUDE: Final = re.compile(
    r"<!-- include:(?P<path>[^ ]+) -->\n```(?P<lang>[a-z]*)\n(?P<body>.*?)```", re.S
)
"""A file quoted whole in a code block (``<!-- include:PATH -->``), kept equal to it."""
PERCENT: Final = 100.0
BASELINE: Final = "heuristic"

RESULT_ROWS: Final = (
    ("random", "`random` (uniform over the legal actions)", "--agent random"),
    ("threaten", "`threaten` (always Threaten, take every bonus)", "--agent threaten"),
    ("heuristic", "`heuristic` (hand-written, perfect memory)", "--agent heuristic"),
    ("trained", "**`trained`** (the default config, seed 0, trained at commit d741df9)",
     "--agent trained"),
    ("distilled", "`distilled` (the default recipe with a 512 x 512 network + {rounds} rounds "
     "labelled by search with the network's rollouts)", "--agent distilled"),
    ("tabula-rasa", "`tabula-rasa` (no teacher: masked PPO from scratch + {rounds} rounds "
     "labelled by a search over its own rollouts)", "--agent tabula-rasa"),
    ("planner-small", "`planner-small` (rollouts of `heuristic`, 256 orders a decision)",
     "--agent planner-small"),
    ("planner", "`planner` (rollouts of `heuristic`, 1,024 orders a decision)", "--agent planner"),
    ("planner-trained", "`planner-trained` (the planner over `trained`)",
     "--agent planner-trained"),
    ("strongest", "`strongest` (the planner over `distilled`, its rollouts played by it)",
     "--agent strongest"),
)  # fmt: skip
"""The README's results rows: ladder label, what it is (``{rounds}``: the shipped model's
rounds of expert iteration, :func:`shipped_rounds`), how ``evaluate.py`` names it."""


def result_text(label: str, what: str) -> str:
    """A :data:`RESULT_ROWS` description as the README shows it (its rounds filled in)."""
    return what.format(rounds=shipped_rounds(label)) if "{rounds}" in what else what


def shipped_rounds(name: str) -> int:
    """The rounds of expert iteration the shipped model ``name`` was distilled with, as its
    run directory records them (``expert_iteration.json``, or an older run's ``meta.json``),
    and those of the run it continued where their record ships beside them
    (``start_expert_iteration.json``)."""
    folder = MODELS_DIR / name
    record = folder / "expert_iteration.json"
    rounds = len(_load(record if record.is_file() else folder / "meta.json")["rounds"])
    start = folder / "start_expert_iteration.json"
    return rounds + (len(_load(start)["rounds"]) if start.is_file() else 0)


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _pct(x: float) -> str:
    return f"{PERCENT * x:.2f}%"


def _interval(low: float, high: float) -> str:
    return f"[{_pct(low)}, {_pct(high)}]"


def _short_label(label: str) -> str:
    """A shipped model's ladder label (its folder's name, as ``--runs agents/models/NAME``)."""
    return label.rsplit("/", 1)[-1]


def ladder_rows(path: Path | None = None) -> dict[str, dict[str, Any]]:
    rows = _load(LADDER_JSON if path is None else path)["rows"]
    return {_short_label(r["label"]): r for r in rows if r["kind"] != "bound"}


def paired_cell(base: dict[str, Any], other: dict[str, Any]) -> str:
    """``other`` against ``base`` on the same deals: difference [95%], McNemar p."""
    if "won_bits" not in base or "won_bits" not in other or base is other:
        return ""
    n = base["episodes"]
    return _paired_text(
        mcnemar(unpack_wins(base["won_bits"], n), unpack_wins(other["won_bits"], n))
    )


def _paired_text(pair: dict[str, Any]) -> str:
    """A McNemar comparison as ``difference [95%], p = ...`` in points."""
    low, high = pair["difference_ci95"]
    return (
        f"{PERCENT * pair['difference']:+.2f} [{PERCENT * low:+.2f}, {PERCENT * high:+.2f}], "
        f"p = {pair['p_two_sided']:.1g}"
    )


# --------------------------------------------------------------------------- the tables
def results() -> str:
    doc = _load(LADDER_JSON)
    rows = ladder_rows()
    base = rows[BASELINE]
    out = []
    for label, what, spec in RESULT_ROWS:
        row = rows[label]
        out.append(
            [
                result_text(label, what),
                _pct(row["win_rate"]),
                _interval(row["ci_low"], row["ci_high"]),
                paired_cell(base, row),
                f"`evaluate.py {spec}`",
            ]
        )
    header = ["player", "win rate", "95% interval",
              f"paired with `{BASELINE}` (points, 95%; McNemar)", "how"]  # fmt: skip
    note = (
        f"\n{doc['episodes']:,} deals of report seed {doc['seed']}; in bold, the network the "
        "default config trains (the best player is the strongest search, `strongest`).\n"
    )
    return markdown_table(header, out) + note


CEILING_RECORDS: Final = (
    RECORDS / "bound_report_need.json",
    RECORDS / "strict_bound_report.json",
)
"""Information-relaxation bounds on the report seed (``lab/experiments/bound.py`` on the relaxed
game, ``lab/experiments/strict_bound.py --prune`` on the strict one): the lowest is
the certified ceiling."""
CEILING_PNG: Final = DOCS / "ceiling.png"
CITED_RECORDS: Final[tuple[Path, ...]] = ()
"""Records the README's prose cites besides the tables' (the real game's lower estimate)."""


def _ceilings() -> list[tuple[Path, dict[str, Any]]]:
    """The report seed's bounds, lowest first."""
    found = [(p, _load(p)) for p in CEILING_RECORDS if p.exists()]
    found = [(p, d) for p, d in found if d["deals"] == "evaluation" and not d.get("lower_estimate")]
    return sorted(found, key=lambda pd: pd[1]["mean"])


def _bound_label(doc: dict[str, Any]) -> str:
    if "value_function" in doc:
        return f"information-relaxation bound, relaxed game ({doc['value_function']['name']})"
    return "information-relaxation bound, strict game (the need-known game's value)"


def _shown(path: Path) -> str:
    """A record's path as the docs name it (relative to the repository when inside it)."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def _best_player() -> tuple[str, dict[str, Any]]:
    rows = ladder_rows()
    label = max((lab for lab, _, _ in RESULT_ROWS), key=lambda lab: rows[lab]["win_rate"])
    return label, rows[label]


CEILING_LEVELS: Final = RECORDS / "ceiling_levels.json"
"""The ceiling's levels (``lab/experiments/ceiling.py``): certified, at 95%, estimated."""


def ceiling_words() -> str:
    """The ceiling said as it is: which figure is certified, at what confidence, and which is
    only estimated (``lab/records/ceiling_levels.json``)."""
    c = _load(CEILING_LEVELS)
    return (
        f"certified without statistics: at most {_pct(c['certified_without_statistics'])} "
        f"(the value W of the bound's supersolution at the start of the game, {_pct(c['w_start'])}"
        f", with {c['slack']:g} of room for its single-precision rounding: no deal's bound is "
        f"above it); certified at 95% confidence, distribution-free: at most "
        f"{_pct(c['distribution_free_95'])} (Anderson's bound on the mean of {c['deals']} "
        f"deals' bounds, each in [0, {_pct(c['hard_ceiling'])}]); at 95% one-sided under a "
        f"normal approximation: {_pct(c['normal_one_sided_95'])}; estimated: "
        f"{_pct(c['estimate'])} (the mean of the {c['deals']} deals' bounds; its two-sided 95% "
        f"interval ends at {_pct(c['normal_two_sided_95_upper'])})"
    )


def ceiling() -> str:
    """The ceiling's levels as a table: which figure is certified, at what confidence, and
    which is estimated."""
    c = _load(CEILING_LEVELS)
    rows = [
        ["certified, no statistics", _pct(c["certified_without_statistics"]),
         f"W at the start of the game ({_pct(c['w_start'])}) with {c['slack']:g} of room for "
         "its single-precision rounding: every deal's bound is at most it"],
        ["certified at 95% confidence, distribution-free", _pct(c["distribution_free_95"]),
         f"Anderson's bound on the mean of {c['deals']} deals' bounds in [0, "
         f"{_pct(c['hard_ceiling'])}]"],
        ["95% one-sided, normal approximation", _pct(c["normal_one_sided_95"]),
         "mean + 1.645 standard errors"],
        ["the two-sided 95% interval's upper end", _pct(c["normal_two_sided_95_upper"]),
         "mean + 1.96 standard errors (97.5% one-sided)"],
        ["estimated", _pct(c["estimate"]), f"the mean of the {c['deals']} deals' bounds"],
    ]  # fmt: skip
    return markdown_table(["the ceiling", "at most", "what it is"], rows) + (
        f"\nFrom `{_shown(CEILING_LEVELS)}`: `{c['command']}`.\n"
    )


def headline() -> str:
    """The README's answer: the best player, and the ceiling at each of its levels."""
    path, bound = _ceilings()[0]
    label, best = _best_player()
    return (
        f"**The best player here wins {_pct(best['win_rate'])} of deals (`{label}`, "
        f"{_interval(best['ci_low'], best['ci_high'])} on {best['episodes']:,} deals); no "
        f"player who sees only what a player sees can beat the ceiling, "
        f"{_pct(_load(CEILING_LEVELS)['distribution_free_95'])} certified at 95% confidence.** "
        f"The ceiling is an information-relaxation bound: the mean over all deals of a per-deal "
        f"bound is at least every such player's win rate, by construction; on "
        f"{bound['episodes']:,} deals of report seed {bound['seed']}, {ceiling_words()}. From "
        f"`{_shown(path)}`, `{_shown(CEILING_LEVELS)}` and `{_shown(LADDER_JSON)}`.\n"
    )


def ceiling_chart(path: Path = CEILING_PNG) -> None:
    """The ladder's players and the ceiling at its levels, with the gap between the best
    player and the certified ceiling shaded (a PNG; needs matplotlib)."""
    plt = pyplot()
    rows = ladder_rows()
    levels = _load(CEILING_LEVELS)
    labels = sorted((lab for lab, _, _ in RESULT_ROWS), key=lambda lab: rows[lab]["win_rate"])
    rates = [PERCENT * rows[lab]["win_rate"] for lab in labels]
    lows = [PERCENT * (rows[lab]["win_rate"] - rows[lab]["ci_low"]) for lab in labels]
    highs = [PERCENT * (rows[lab]["ci_high"] - rows[lab]["win_rate"]) for lab in labels]
    best = max(rates)
    certified = PERCENT * levels["distribution_free_95"]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    y = np.arange(len(labels))
    ax.barh(y, rates, xerr=[lows, highs], color="#4C72B0", capsize=2)
    ax.axvspan(best, certified, color="#DD8452", alpha=0.25, label="not yet known")
    ax.axvline(
        PERCENT * levels["estimate"], color="#C44E52", lw=1, ls=":",
        label=f"ceiling estimated: {PERCENT * levels['estimate']:.2f}%",
    )  # fmt: skip
    ax.axvline(
        certified, color="#C44E52", lw=2,
        label=f"ceiling certified at 95% (distribution-free): {certified:.2f}%",
    )  # fmt: skip
    no_statistics = PERCENT * levels["certified_without_statistics"]
    ax.axvline(
        no_statistics, color="#8172B3", lw=2, ls="--",
        label=f"ceiling certified without statistics: {no_statistics:.2f}%",
    )  # fmt: skip
    ax.axvline(PERCENT, color="#55A868", lw=2, ls="--", label="clairvoyant 100%")
    ax.set_yticks(y, [f"{lab} ({_pct(rows[lab]['win_rate'])})" for lab in labels])
    ax.set_xlim(0, PERCENT + 2)
    ax.set_xlabel(f"win rate, % (report seed {levels['seed']})")
    ax.set_title("How well can Cold Iron be played?")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)


def ladder() -> str:
    doc = _load(LADDER_JSON)
    outcomes = ["won", "slain", "deck_exhausted", "midnight", "illegal"]
    out = []
    for r in doc["rows"]:
        if r["kind"] == "bound":
            cells = [f"{k} {v}" for k, v in r["outcomes"].items()] + [""] * 2
        else:
            cells = [str(r["outcomes"][o]) for o in outcomes]
        out.append(
            [r["label"], str(r["episodes"]), _pct(r["win_rate"]),
             _interval(r["ci_low"], r["ci_high"]), *cells, f"{r['seconds_per_game']:.4f}"]
        )  # fmt: skip
    sources = []
    for path, bound in _ceilings():
        if bound["seed"] != doc["seed"]:
            continue  # the ladder's first deals are the same deals
        seconds = bound["seconds"]
        total = sum(seconds) if isinstance(seconds, list) else seconds * bound["workers"]
        out.append(
            [_bound_label(bound), str(bound["episodes"]), _pct(bound["mean"]),
             _interval(bound["ci_low"], bound["ci_high"]), "the mean over deals of each "
             "deal's bound (normal interval)", *[""] * (len(outcomes) - 1),
             f"{total / bound['episodes']:.4f}"]
        )  # fmt: skip
        sources.append(f"`{_shown(path)}` (`{bound['command']}`)")
    header = ["player", "deals", "win rate", "95% interval", *outcomes, "s/game"]
    return markdown_table(header, out) + (
        f"\nDeals: report seed {doc['seed']}; `{doc['command']}`; the information-relaxation "
        f"bounds from {'; '.join(sources)}.\n"
    )


def _benchmark_script() -> Any:
    """``scripts/benchmark.py`` as a module: the docs show the text it prints."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("benchmark", ROOT / "scripts" / "benchmark.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def benchmark() -> str:
    doc = _load(BENCHMARK_JSON)
    machine = doc.get("machine", {})
    said = (
        f"\n{machine.get('cpus', '?')} cores; load average {machine.get('load_before', '?')} "
        f"before, {machine.get('load_after', '?')} after; {machine.get('note', '')}\n"
        if machine
        else ""
    )
    script = _benchmark_script()
    goals = f"\n{script.targets_text(doc['targets'])}" if doc.get("targets") else ""
    return f"```text\n{script.benchmark_text(doc)}\n{goals}\n```\n{said}"


def seeds_2026() -> str:
    """Every config's three seeds on the deals of seed 2026 (the record of that evaluation)."""
    doc = _load(SEEDS_2026_JSON)
    transcribed = _load(HISTORY_JSON)["files"]["README.md"][SEEDS_2026_TABLE]
    algorithm = {re.sub(r"`([^`]+)`.*", r"\1", row[0]): row[1] for row in transcribed[1:]}
    rows = []
    for agg in doc["seed_aggregates"]:
        name = agg["name"]
        pooled = agg["pooled_wins"] / agg["pooled_episodes"]
        rows.append(
            [
                f"`{name}`",
                algorithm[name],
                ", ".join(str(s) for s in agg["seeds"]),
                f"**{_pct(agg['mean_win_rate'])}**",
                _interval(agg["ci_low"], agg["ci_high"]),
                ", ".join(f"{PERCENT * r:.2f}" for r in agg["win_rates"]),
                f"{_pct(pooled)} {_interval(agg['pooled_ci_low'], agg['pooled_ci_high'])}",
            ]
        )
    base = next(a for a in doc["agents"] if a["agent"] == BASELINE)
    rows.append(
        [f"`{BASELINE}` (reference)", "hand-written", "—", _pct(base["win_rate"]),
         _interval(base["ci_low"], base["ci_high"]), "—", "—"]
    )  # fmt: skip
    header = ["config", "algorithm", "seeds", "mean win rate", "95% CI (t over seeds)",
              "per seed (%)", "pooled (Wilson)"]  # fmt: skip
    return markdown_table(header, rows) + f"\n{doc['episodes']:,} deals of seed {doc['seed']}.\n"


def main_job(path: str | None = None) -> str:
    """A record of ``lab/main_job.py``: the README's main job, or ``job:PATH``'s."""
    doc = _load(MAIN_JOB_JSON if path is None else ROOT / path)
    header = ["what", "measured"]
    rows = [[k, str(v)] for k, v in doc["summary"].items()]
    return markdown_table(header, rows) + f"\n`{doc['command']}` ({doc['machine']})\n"


def looks() -> str:
    header = ["date (UTC)", "commit", "deals", "players", "why"]
    rows = []
    for entry in read_looks():
        commit = entry["commit"][:7] + (" (changes)" if entry.get("dirty") else "")
        players = ", ".join(_short_label(a) for a in entry["agents"])
        rows.append(
            [entry["date"][:16].replace("T", " "), commit, f"{entry['episodes']:,}", players,
             entry["why"].replace("|", "/")]
        )  # fmt: skip
    return markdown_table(header, rows) + f"\nFrom `{LOOK_LOG.relative_to(ROOT)}`.\n"


def experiments() -> str:
    """The experiment log (``lab/records/experiments.json``, ``lab/experiment_log.py``)."""
    from lab.experiment_log import read_log

    rows = []
    for e in read_log():
        run = e.get("run") or {}
        made = ""
        if run:
            made = (
                f"`{run['config']}` seed {run['seed']}: {run['timesteps'] or 0:,} RL steps"
                + (
                    f", {run['rounds']} round{'s' * (run['rounds'] != 1)}"
                    if run.get("rounds")
                    else ""
                )
                + (f"; {run['wall_seconds']:,.0f} s" if run.get("wall_seconds") else "")
            )
        results = "; ".join(
            f"{_pct(v['win_rate'])} {_interval(v['ci_low'], v['ci_high'])} on {v['episodes']:,} "
            f"{v['deals']} deals (seed {v['seed']})"
            for v in e["evaluations"]
        )
        rows.append([e["id"], e["what"], made, results, e["verdict"]])
    header = ["run", "what", "made", "won", "verdict"]
    return markdown_table(header, rows) + "\nFrom `lab/records/experiments.json`.\n"


def clone_variants() -> str:
    """One round of expert iteration's cloning, by variant (``lab/experiments/
    clone_variants.py``, ``lab/records/clone_variants.json``)."""
    doc = _load(RECORDS / "clone_variants.json")
    rows = []
    for r in doc["results"]:
        n = round(r["validation_wins"] / r["validation_win_rate"])
        low, high = wilson_interval(r["validation_wins"], n)
        rows.append(
            [r["variant"], f"{100 * r['switch_recall']:.1f}%", f"{100 * r['collateral']:.2f}%",
             f"{_pct(r['validation_win_rate'])} {_interval(low, high)}"]
        )  # fmt: skip
    header = ["cloning", "planner's changes learned", "kept decisions changed",
              "validation win rate [95%]"]  # fmt: skip
    return markdown_table(header, rows) + (
        f"\nStart `{doc['start']}`; labels {doc['deals']['labels']}; "
        f"{doc['deals']['validation']}; `{doc['command']}`.\n"
    )


def bounds() -> str:
    """Every bound computed (``lab/experiments/bound.py --json``: ``docs/records/bound*.json``)."""
    rows = []
    for path in sorted(RECORDS.glob("bound*.json")):
        doc = _load(path)
        if "mean" not in doc:
            continue
        rise = doc.get("drift", {})
        rows.append(
            [
                doc["value_function"]["name"],
                f"{doc['episodes']:,} {doc['deals']} deals (seed {doc['seed']})",
                f"{_pct(doc['mean'])} {_interval(doc['ci_low'], doc['ci_high'])}",
                f"{rise.get('mean_positive_drift', 0.0):+.4f} at "
                f"{_pct(rise.get('share_positive', 0.0))}"
                if rise.get("decision_points")
                else f"none by construction (W at the start {_pct(rise['start_value'])})"
                if "start_value" in rise
                else "not measured"
                if rise.get("not_measured")
                else "none (W = 0)",
                f"{doc['seconds']:,.0f} s on {doc['workers']} processes",
                f"`{path.name}`",
            ]
        )
    header = ["W", "deals", "bound [95%]", "mean positive drift, at share of positions",
              "time", "record"]  # fmt: skip
    return markdown_table(header, rows)


def strict_bound() -> str:
    """The bound on games between the relaxed and the strict relaxed game, and lower
    estimates of the strict game's (``lab/experiments/strict_bound.py``)."""
    rows = []
    for path in sorted(RECORDS.glob("strict_bound*.json")):
        doc = _load(path)
        lower = doc.get("lower_estimate", False)
        rows.append(
            [
                doc["game"],
                "a lower estimate, not a bound" if lower else "a bound",
                f"{doc['episodes']:,} {doc['deals']} deals (seed {doc['seed']})",
                f"{_pct(doc['mean'])} {_interval(doc['ci_low'], doc['ci_high'])}",
                f"{int(np.median(doc['states'])):,}",
                f"{float(np.median(doc['seconds'])):.1f} s",
                f"`{path.name}`",
            ]
        )
    header = ["game solved", "what it is", "deals", "mean [95%]", "states a deal (median)",
              "time a deal (median)", "record"]  # fmt: skip
    return markdown_table(header, rows)


def bound_checks() -> str:
    """The need-known bound's validity on real players' games
    (``lab/experiments/bound_checks.py``: ``lab/records/bound_checks.json``)."""
    doc = _load(RECORDS / "bound_checks.json")
    rows = [
        [f"`{r['player']}`", f"{r['games']:,}", f"{r['real_wins']:,}",
         f"{r['twin_wins']:,}" if "twin_wins" in r else "not recorded",
         f"{r['mean_z']:+.4f} [{r['z_ci95'][0]:+.4f}, {r['z_ci95'][1]:+.4f}]",
         f"{r['z_in_standard_errors']:+.2f}", str(r["deals_bound_below_result"]),
         f"{r['min_slack']:.4f}", "yes" if r["twin_wins_whenever_real_wins"] else "no"]
        for r in doc["rows"]
    ]  # fmt: skip
    header = ["player", "games", "won", "its relaxed twin won", "mean penalty sum Z [95%]",
              "Z in standard errors",
              "deals whose bound is below the player's R - Z", "smallest bound - (R - Z)",
              "relaxed twin wins whenever the game is won"]  # fmt: skip
    return (
        markdown_table(header, rows) + f"\nFrom `lab/records/bound_checks.json`: {doc['deals']}.\n"
    )


def bound_cost() -> str:
    """The exact search of the real game, with (turn, Hurt) dominance: its size per deal."""
    rows = []
    for name in ("bound_cost.json", "bound_cost_large.json"):
        doc = _load(RECORDS / name)
        for r in doc["rows"]:
            rows.append(
                [
                    r["penalties"],
                    str(r["deal"]),
                    f"{r['explored']:,}" + ("" if r["finished"] else " (budget spent)"),
                    f"{r['seconds']:,.1f}",
                    "yes" if r["finished"] else "no",
                    f"`{name}`",
                ]
            )
    header = ["penalties", "deal", "states explored", "seconds", "finished", "record"]
    return markdown_table(header, rows)


def history(ref: str) -> str:
    """Table ``N`` of ``FILE`` (``ref`` = ``FILE#N``) as transcribed at its commit."""
    file, _, index = ref.rpartition("#")
    doc = _load(HISTORY_JSON)
    table = doc["files"][file][int(index)]
    note = f"\nTranscribed from `{file}` at commit {doc['commit']} (`{HISTORY_JSON.name}`).\n"
    return markdown_table(table[0], table[1:]) + note


def _reaches(spec: dict[str, Any]) -> str:
    """A works-with row's figure, read from the record it names (``record`` FILE, ``key`` a
    dotted path, ``match`` picking a list's element by its fields): a result with a win
    rate is shown with its interval and deals; any other value through ``format`` (with
    ``{value}``). The row's own words go ``before`` and ``after`` it."""
    before, after = spec.get("before", ""), spec.get("after", "")
    figure = ""
    if "record" in spec:
        doc = _load(ROOT / spec["record"])
        value: Any = doc
        for part in filter(None, spec.get("key", "").split(".")):
            value = value[int(part)] if isinstance(value, list) else value[part]
        if "match" in spec:
            found = [v for v in value if all(v.get(k) == x for k, x in spec["match"].items())]
            if len(found) != 1:
                raise KeyError(f"{spec['record']}: {len(found)} entries match {spec['match']}")
            value = found[0]
        if isinstance(value, dict) and "win_rate" in value:
            seed = value.get("seed", doc.get("seed"))
            if seed is None and spec.get("seed") == "report":  # a record of the report seed's
                seed = REPORT_SEED
            deals = value.get("deals", doc.get("deals", ""))
            kind = "validation " if "validation" in str(deals).lower() else ""
            figure = (
                f"{_pct(value['win_rate'])} {_interval(value['ci_low'], value['ci_high'])} on "
                f"{value['episodes']:,} {kind}deals of seed {seed}"
            )
        else:
            figure = spec["format"].format(value=value)
    return f"{before}{figure}{after}".strip()


def onnx() -> str:
    """An exported policy under onnxruntime against the SB3 agent it came from
    (``scripts/export.py --benchmark``: ``docs/records/onnx_speed.json``)."""
    doc = _load(ONNX_SPEED_JSON)
    games, inference, agree = doc["games"], doc["inference_only"], doc["agreement"]
    deals = doc["deals"]

    def us(x: float) -> str:
        return f"{x:,.1f} us"

    rows = [
        ["decisions with the same action",
         f"{agree['decisions_with_the_same_action']:,} of {agree['decisions_compared']:,}", ""],
        ["deals won", str(games["sb3"]["one_at_a_time"]["wins"]),
         str(games["onnx"]["one_at_a_time"]["wins"])],
        ["a decision, inference only, batch of 1",
         us(inference["sb3"]["batch_1_microseconds_per_decision"]),
         us(inference["onnx"]["batch_1_microseconds_per_decision"])],
        ["a decision, inference only, batch of 256",
         us(inference["sb3"]["batch_256_microseconds_per_decision"]),
         us(inference["onnx"]["batch_256_microseconds_per_decision"])],
        ["a decision in whole games, one env",
         us(games["sb3"]["one_at_a_time"]["microseconds_per_decision"]),
         us(games["onnx"]["one_at_a_time"]["microseconds_per_decision"])],
        ["a decision in whole games, lockstep",
         us(games["sb3"]["lockstep"]["microseconds_per_decision"]),
         us(games["onnx"]["lockstep"]["microseconds_per_decision"])],
    ]  # fmt: skip
    header = [f"`{doc['agent']}` on {deals['episodes']:,} {deals['set']} deals (seed "
              f"{deals['seed']})", "Stable-Baselines3", "onnxruntime"]  # fmt: skip
    machine = doc["machine"]
    return markdown_table(header, rows) + (
        f"\nFrom `{ONNX_SPEED_JSON.relative_to(ROOT)}` ({machine['cpus']} cores, one "
        f"thread each; {machine['note']}).\n"
    )


def rllib_speed() -> str:
    """RLlib PPO's speed on this machine by env runners and envs per runner
    (``scripts/rllib_train.py --record``: ``docs/records/rllib_speed/*.json``)."""
    rows = []
    for path in sorted(RLLIB_SPEED_DIR.glob("*.json")):
        doc = _load(path)
        envs = doc["settings"]["env_runners"]["num_envs_per_env_runner"]
        rows.append(
            [
                str(doc["num_env_runners"]),
                str(envs),
                str(doc["torch_threads"]),
                doc["address"],
                f"{doc['env_steps']:,}",
                f"{doc['steps_per_second']:,.0f}",
                f"`{path.name}`",
            ]
        )
    header = ["env runners", "envs a runner", "torch threads", "Ray", "env steps", "steps/s",
              "record"]  # fmt: skip
    return markdown_table(header, rows) + (
        f"\nFrom `{RLLIB_SPEED_DIR.relative_to(ROOT)}/`: short runs on 2 shared cores "
        "(each record keeps its load average; times are approximate).\n"
    )


def works_with() -> str:
    """Other RL code Cold Iron runs in: library, version tried, command, what it reaches
    (read from the records named: one spec or a list, joined), and the test that runs it in
    CI."""
    doc = _load(WORKS_WITH_JSON)

    def reaches(spec: dict[str, Any] | list[dict[str, Any]]) -> str:
        return "; ".join(_reaches(s) for s in (spec if isinstance(spec, list) else [spec]))

    out = [
        [row["library"], row["version"], f"`{row['command']}`", reaches(row["reaches"]),
         row["ci"]]
        for row in doc["rows"]
    ]  # fmt: skip
    header = ["library", "version tried", "command", "what it reaches", "in CI"]
    return markdown_table(header, out) + f"\nFrom `{WORKS_WITH_JSON.relative_to(ROOT)}`.\n"


WEB_PAGES_JSON: Final = DOCS / "records" / "web_pages.json"


def web_pages() -> str:
    """The report's size and how fast Chromium opens it (``lab/web_pages.py``)."""
    doc = _load(WEB_PAGES_JSON)
    rows = [
        ["agents", ", ".join(f"`{a}`" for a in doc["agents"])],
        ["deals", f"{doc['episodes']:,} evaluation deals of seed {doc['seed']}"],
        ["`index.html`", f"{doc['report_bytes'] / 1e6:.1f} MB"],
        ["evaluation, then the report written", f"{doc['evaluation_seconds']:.0f} s, then "
         f"{doc['report_seconds']:.0f} s (every game replayed by the engine)"],
        ["opened in Chromium, the tables drawn", f"{doc['open_seconds']:.2f} s"],
        ["a deal's replay shown (its chunk unzipped)", f"{doc['shown']['seconds']:.2f} s"],
    ]  # fmt: skip
    return markdown_table(["report", "measured"], rows) + (
        f"\nFrom `{_shown(WEB_PAGES_JSON)}` ({doc['machine']}): `{doc['command']}`.\n"
    )


PRODUCT_LINES_JSON: Final = RECORDS / "product_lines.json"
PRODUCT_FOLDERS: Final = (
    "coldiron_env", "agents/players", "agents/evaluation", "agents/learning", "agents/web",
    "agents", "scripts",
)  # fmt: skip


def product_lines() -> str:
    """Issue 50's count of the product by folder, per measurement (``lab/house_metrics.py``)."""
    doc = _load(PRODUCT_LINES_JSON)
    header = ["measured", "commit", *(f"`{f}/`" for f in PRODUCT_FOLDERS), "product",
              "with `scripts/benchmark.py`", "integrations"]  # fmt: skip
    rows = [
        [label, f"`{e['commit'][:7]}`",
         *(f"{e['product_by_folder'].get(f, 0):,}" for f in PRODUCT_FOLDERS),
         f"**{e['product']:,}**", f"{e['product_with_benchmark']:,}", f"{e['integrations']:,}"]
        for label, e in doc["entries"].items()
    ]  # fmt: skip
    last = list(doc["entries"].values())[-1]
    return markdown_table(header, rows) + (
        f"\nFrom `{_shown(PRODUCT_LINES_JSON)}`: `{last['command']}` (`agents/` alone: the "
        "registry, the ladder, atomic writes, the git stamp).\n"
    )


def house() -> str:
    """Issue 20's figures per measurement: lines, files per rule variant, the trace."""
    doc = _load(HOUSE_JSON)
    entries = doc["entries"]
    variants = sorted({name for e in entries.values() for name in e["rule_variants"]})
    header = ["measured", "commit", "production lines", "without the other issues' files",
              "agents/learning", *(f"files naming `{v}`" for v in variants),
              "expert-iteration trace (calls)"]  # fmt: skip
    out = [
        [label, f"`{e['commit'][:7]}`", f"{e['production_lines']:,}",
         f"{e['production_lines_without_other_issues']:,}", f"{e['agents_learning']:,}",
         *(str(e["rule_variants"].get(v, {"files": 0})["files"]) for v in variants),
         str(e["expert_iteration_trace"]["calls"]) if "expert_iteration_trace" in e else "-"]
        for label, e in entries.items()
    ]  # fmt: skip
    last = list(entries.values())[-1]
    chain = last.get("expert_iteration_trace", {}).get("chain", [])
    trace = " -> ".join(f"`{frame.rsplit(':', 1)[1]}`" for frame in chain)
    return (
        markdown_table(header, out)
        + f"\nThe last measurement's trace: {trace}.\n\nFrom `{_shown(HOUSE_JSON)}`: "
        + f"`{doc['command']}`.\n"
    )


def house_growth() -> str:
    """The last measurement's growth since issue 20 was filed, by the issue that made it."""
    doc = _load(HOUSE_JSON)
    measured = [(label, e) for label, e in doc["entries"].items() if "growth" in e]
    if not measured:
        raise ValueError(f"{_shown(HOUSE_JSON)}: no measurement with --since (no growth)")
    label, entry = measured[-1]
    growth = entry["growth"]
    rows = [
        [issue, f"{net:+,}", str(sum(c["issue"] == issue for c in growth["commits"]))]
        for issue, net in growth["by_issue"].items()
    ]
    rows.append(["all", f"{sum(growth['by_issue'].values()):+,}", str(len(growth["commits"]))])
    header = ["made by", "net lines (without the other issues' files)",
              "commits that changed the count"]  # fmt: skip
    lines = entry["production_lines_without_other_issues"]
    at_filing = lines - sum(growth["by_issue"].values())
    own = sum(net for issue, net in growth["by_issue"].items() if issue.startswith("issue 20 "))
    features = at_filing + own
    return markdown_table(header, rows) + (
        f"\nFrom `{growth['since']}` to `{entry['commit'][:7]}` (measurement {label!r}) in "
        f"`{_shown(HOUSE_JSON)}`: `{entry['command']}`.\n\n"
        f"Against the issue's own baseline: the features it counted took {at_filing:,} lines "
        f"so counted when it was filed (the last row's {lines:,} less the {lines - at_filing:,} "
        f"of growth) and take {features:,} with issue 20's own change, "
        f"{features - HOUSE_TARGET_LINES:,} over the {HOUSE_TARGET_LINES:,} it asked.\n"
    )


TABLES: Final[dict[str, Callable[[], str]]] = {
    "headline": headline,
    "ceiling": ceiling,
    "results": results,
    "ladder": ladder,
    "benchmark": benchmark,
    "main-job": main_job,
    "seeds-2026": seeds_2026,
    "experiments": experiments,
    "clone-variants": clone_variants,
    "bounds": bounds,
    "bound-cost": bound_cost,
    "bound-checks": bound_checks,
    "strict-bound": strict_bound,
    "looks": looks,
    "works-with": works_with,
    "onnx": onnx,
    "rllib-speed": rllib_speed,
    "house": house,
    "product-lines": product_lines,
    "web-pages": web_pages,
    "house-growth": house_growth,
}


def record(path: str) -> str:
    """A record that is itself a table (``header``, ``rows``, and ``source`` or ``command``)."""
    doc = _load(ROOT / path)
    said = doc.get("source") or f"`{doc['command']}`"
    return markdown_table(doc["header"], doc["rows"]) + f"\nFrom `{path}`: {said}.\n"


def probes(argument: str) -> str:
    """A record of ``lab/experiments/search_probes.py``: each player on the same
    validation deals, paired with the record's first, and its cost. ``PATH;BASE;OTHER...``:
    only the players named, each paired with ``BASE`` (from the per-deal wins)."""
    path, *chosen = argument.split(";")
    doc = _load(ROOT / path)
    agents = doc["agents"]
    missing = [spec for spec in chosen if spec not in agents]
    if missing:
        raise KeyError(f"{path} holds no player {', '.join(map(repr, missing))}")
    against = chosen[0] if chosen else next(iter(agents))
    n = doc["episodes"]
    rows = []
    for spec in chosen or agents:
        entry = agents[spec]
        if not chosen:
            pair = entry.get("paired")
        elif spec != against:
            pair = mcnemar(unpack_wins(agents[against]["wins"], n), unpack_wins(entry["wins"], n))
        else:
            pair = None
        cell = "" if pair is None else _paired_text(pair)
        rows.append(
            [f"`{spec}`", _pct(entry["win_rate"]), _interval(entry["ci_low"], entry["ci_high"]),
             cell, f"{entry['cpu_seconds_per_game']:.3f}", f"{entry['cpu_ms_per_decision']:.2f}"]
        )  # fmt: skip
    header = ["player", "win rate", "95% interval", f"paired with `{against}` (points, 95%)",
              "CPU s a game", "CPU ms a decision"]  # fmt: skip
    return markdown_table(header, rows) + (
        f"\n{n:,} validation deals of seed {doc['seed']}; from `{path}`: `{doc['command']}`.\n"
    )


def calibration(path: str) -> str:
    """A record of ``lab/experiments/value_calibration.py``: a network's value head against
    the win chance its rollouts measure, by bins of the value."""
    doc = _load(ROOT / path)

    def edge(x: float | None, missing: str) -> str:
        return missing if x is None else f"{x:g}"

    def r(x: float | None) -> str:
        return "undefined (a constant series)" if x is None else f"{x:.2f}"

    rows = [
        [f"[{edge(b['value_from'], '-inf')}, {edge(b['value_to'], 'inf')})", f"{b['positions']:,}",
         f"{b['mean_value']:.3f}", f"{b['mean_rollout_chance']:.3f}"]
        for b in doc["bins"]
    ]  # fmt: skip
    rows.append(
        ["all", f"{doc['positions']:,}", f"{doc['mean_value']:.3f}",
         f"{doc['mean_rollout_chance']:.3f}"]
    )  # fmt: skip
    header = ["value", "positions", "mean value", "rollout win chance"]
    return markdown_table(header, rows) + (
        f"\n`{doc['model']}`'s positions from turn {doc['from_turn']} of its games on "
        f"{doc['episodes']:,} validation deals of seed {doc['seed']}, each rollout chance from "
        f"{doc['orders']} orders; correlation {r(doc['pearson'])} (Spearman "
        f"{r(doc['spearman'])}), root-mean-square gap {doc['rms_gap']:.3f} against the "
        f"rollouts' own sampling error {doc['rms_sampling_error']:.3f}; the value clipped to "
        f"[0, 1] as truncated rollouts score: correlation {r(doc['pearson_clipped'])}, gap "
        f"{doc['rms_gap_clipped']:.3f}; {doc['mean_decisions_left']:.1f} decisions left in "
        f"the network's game at such a position, that one included; "
        f"{doc['cpu_seconds']:,.0f} CPU-s; from `{path}`: `{doc['command']}`.\n"
    )


def learners(path: str) -> str:
    """A ``lab/learners.py report`` record: every recipe at one budget over its seeds."""
    doc = _load(ROOT / path)
    base = doc["baseline"]
    header = ["learner", "start", "masks", "seeds", "win rate (mean, t 95%)", "per seed",
              "pooled (Wilson 95%)", "minus `heuristic` (t 95%)", "env steps/s",
              "minutes a run"]  # fmt: skip
    rows = []
    for r in sorted(doc["rows"], key=lambda r: -r["win_rate_t95"][0]):
        mean, low, high = r["win_rate_t95"]
        d_mean, d_low, d_high = r["difference_t95"]
        rows.append(
            [f"`{r['learner']}`", r["variant"], "yes" if r["masks"] else "no",
             str(r["seeds"]),
             f"{_pct(mean)} {_interval(max(low, 0.0), high)}",
             " ".join(f"{PERCENT * run['win_rate']:.2f}" for run in r["runs"]),
             f"{_pct(r['pooled_wins'] / (doc['episodes'] * r['seeds']))} "
             f"{_interval(*r['pooled_wilson95'])}",
             f"{PERCENT * d_mean:+.2f} [{PERCENT * d_low:+.2f}, {PERCENT * d_high:+.2f}]",
             f"{r['steps_per_second']:,.0f}", f"{r['mean_seconds'] / 60:.1f}"]
        )  # fmt: skip
    cpu_hours = sum(run["seconds"] for r in doc["rows"] for run in r["runs"]) / 3600
    return markdown_table(header, rows) + (
        f"\n{doc['budget_env_steps']:,} env steps a run; {doc['episodes']:,} deals of "
        f"{doc['deals']} seed {doc['seed']} for every run, where `heuristic` wins "
        f"{_pct(base['win_rate'])} {_interval(*base['interval_95'])}; {doc['cpu']}, one torch "
        f"thread a run, two runs at a time; {cpu_hours:.1f} CPU-hours of training in all "
        f"(validations left out). From `{path}`: `{doc['command']}`.\n"
    )


RENDERERS: Final[dict[str, Callable[[str], str]]] = {
    "job": main_job,
    "learners": learners,
    "probes": probes,
    "calibration": calibration,
    "history": history,
    "record": record,
}
"""Tables named ``KIND:ARGUMENT``: their renderer, given the argument."""


def render(name: str) -> str:
    """The markdown of table ``name``."""
    kind, _, argument = name.partition(":")
    if argument and kind in RENDERERS:
        return RENDERERS[kind](argument)
    if name not in TABLES:
        forms = ", ".join(f"{kind}:..." for kind in RENDERERS)
        raise KeyError(f"no table named {name!r}; known: {sorted(TABLES)} and {forms}")
    return TABLES[name]()


def markdown_files() -> list[Path]:
    """The README and every ``.md`` file under docs/ and lab/."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md")), *sorted((ROOT / "lab").rglob("*.md"))]


def refresh(path: Path, check: bool = False) -> list[str]:
    """Re-render every table of ``path``; returns the names that differed (written unless
    ``check``)."""
    text = path.read_text(encoding="utf-8")
    changed: list[str] = []

    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        body = render(name)
        if body != match["body"]:
            changed.append(name)
        return f"<!-- table:{name} -->\n{body}<!-- /table -->"

    def include(match: re.Match[str]) -> str:
        name = match["path"]
        body = (ROOT / name).read_text(encoding="utf-8")
        if body != match["body"]:
            changed.append(f"include:{name}")
        return f"<!-- include:{name} -->\n```{match['lang']}\n{body}```"

    new = INCLUDE.sub(include, BLOCK.sub(replace, text))
    if changed and not check:
        atomic_write_text(path, new)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 on drift")
    args = parser.parse_args(argv)
    drift = 0
    for path in markdown_files():
        changed = refresh(path, check=args.check)
        for name in changed:
            verb = "differs" if args.check else "rewritten"
            print(f"{path.relative_to(ROOT)}: table {name} {verb}")
        drift += len(changed)
    if not args.check:
        ceiling_chart()
    return 1 if args.check and drift else 0


if __name__ == "__main__":
    raise SystemExit(main())
