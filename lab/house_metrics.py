"""The house's figures: the product's lines by folder (issue 50), and issue 20's production
lines, files per rule variant and expert-iteration trace, measured and written to a record.

    .venv/bin/python -m lab.house_metrics --json lab/records/house.json --label after
    .venv/bin/python -m lab.house_metrics --product --at 31d5f10   # the product's lines only
    .venv/bin/python -m lab.house_metrics --product --json lab/records/product_lines.json \\
        --label after                                              # ... kept in a record

- **The product** (``--product``, any commit with ``--at``): ``wc -l`` of the Python a user
  installs and runs, by folder (:func:`classify`: ``coldiron_env``, ``agents`` and the
  user-facing ``scripts``), with the integrations (OpenSpiel, RLlib, rl-zoo3, ONNX) and
  ``scripts/benchmark.py`` counted apart, as issue 50 counted them; the lab, the tests and
  their tools are not the product, wherever a commit kept them.

- **Lines**: ``wc -l`` of the production Python (``coldiron_env``, ``agents``, ``scripts``),
  and the same with the files that the other open issues added counted apart
  (:data:`COUNTED_APART`: the bound, OpenSpiel, RLlib, rl-zoo3, ONNX).
- **Rule variants**: the production files naming each rule variant (a field of
  ``RuleOptions`` other than the curriculum's ``turns`` / ``suits_required``).
- **The expert-iteration trace**: a tiny training run (the default config with a few
  steps, one labelling process) with ``play_out`` replaced by a recorder, which keeps the
  Python stack the first time the planner's rollouts run: the project's frames from
  ``train`` to ``play_out``. Its ``calls`` is the number of arrows in that chain.
- **Growth since the issue** (``--since COMMIT``): for each commit on the main line after
  ``COMMIT`` (``git log --first-parent``; a merge counts its branch once), the net change in
  the lines counted without the other issues' files, summed by the issue that made it
  (:data:`ATTRIBUTION`, else the ``Issue N:`` its subject starts with; neither:
  ``unattributed``).

The record keeps one entry per ``--label`` (a later run with the same label replaces it).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
import traceback
from collections import Counter
from pathlib import Path
from typing import Any, Final

from agents.atomic import atomic_write_json
from agents.gitinfo import git_commit, git_dirty
from coldiron_env.options import VARIANT_KEYS
from lab import ROOT

PRODUCTION: Final = ("coldiron_env", "agents", "scripts")
COUNTED_APART: Final[dict[str, tuple[str, ...]]] = {  # where issue 20's commits kept them
    "the bound (issue 19)": (
        "agents/evaluation/bound.py",
        "agents/evaluation/bound_fit.py",
        "agents/evaluation/need_game.py",
        "scripts/bound.py",
        "scripts/experiments/bound_search.py",
        "scripts/experiments/bound_checks.py",
        "scripts/experiments/strict_bound.py",
        "scripts/experiments/capacity_w.py",
        "scripts/experiments/relaxed_players.py",
        "scripts/experiments/strict_players.py",
    ),
    "new search players (issue 19)": (
        "agents/players/policy_net.py",
        "agents/players/threads.py",
        "scripts/experiments/search_probes.py",
        "scripts/experiments/lookahead.py",
        "scripts/experiments/truncated.py",
        "scripts/experiments/value_calibration.py",
    ),
    "OpenSpiel": (
        "coldiron_env/openspiel.py",
        "agents/players/mcts.py",
        "agents/integrations/mcts.py",
        "scripts/openspiel_playthrough.py",
    ),
    "RLlib": ("agents/integrations/rllib.py", "scripts/rllib_train.py"),
    "rl-zoo3 (masked PPO)": (
        "agents/integrations/zoo.py",
        "scripts/zoo.py",
        "scripts/zoo_report.py",
    ),
    "ONNX": (
        "agents/integrations/onnx_export.py",
        "agents/integrations/onnx_policy.py",
        "scripts/export.py",
    ),
}
FILED_AT: Final = "8ad2cac4e8130784314aa67ff3ea07176130b85d"
"""The commit issue 20 was filed at (agents/learning: 5,383 lines, as the issue says)."""
SHORT_SHA: Final = 7
"""Hex digits that name a commit in :data:`ATTRIBUTION` and in the record."""
ISSUE_18: Final = (
    "issue 18 (held out in fact: training streams, the report seed, tables from records)"
)
ISSUE_19: Final = "issue 19 (bound, search, expert iteration)"
ISSUE_20: Final = "issue 20 (the leaner house)"
ISSUE_21: Final = "issue 21 (the mask in the observation, curricula)"
ATTRIBUTION: Final[dict[str, str]] = {
    sha: issue
    for issue, shas in (
        (ISSUE_18, "a8743da 5fcf816 01b8b81"),
        (ISSUE_21, "d6490bb 3ce3baf"),
        (ISSUE_19, "138e8c2 ee054fa 15dfece 4126bc8 f8d9416 b1659bb cd0a10e 8092092 a6e421b "
                   "e6aa70c e05f254 38b37e5 11047d6 9527267 a17425a 2972956 b0ea060 a4339bb "
                   "aa161fc 3842826 007378d 8e38456"),
        (ISSUE_20, "5f31dc2 5b652e6 ff2c123 a3fe483 a4b9674 1d272d6 cdf179c 6344e8e 277740e"),
        ("issue 51", "a3ca368"),  # its subject says "(issue 51)"; the solver's move rode along
    )
    for sha in shas.split()
}  # fmt: skip
"""The issue whose work each commit on the main line after :data:`FILED_AT` up to the first
measurement with ``--since`` is, read from its subject and its diff (most subjects do not
name their issue). A later commit that changes the count and is not listed is attributed by
the ``Issue N`` its subject starts with (tests/test_house_metrics.py: none is left
unattributed, and no listed commit contradicts the issue its subject names)."""
ISSUES: Final = {"18": ISSUE_18, "19": ISSUE_19, "20": ISSUE_20, "21": ISSUE_21}
SUBJECT_ISSUE: Final = re.compile(r"Issue (\d+)\b")
UNATTRIBUTED: Final = "unattributed"
TRACE_START: Final = "train"
TRACE_END: Final = "play_out"
TRACE_EPISODES: Final = 16  # enough deals that some game reaches the turn the planner plans from


def _git_lines(*args: str) -> list[str]:
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def issue_of(sha: str, subject: str) -> str:
    """The issue a main-line commit is attributed to (:data:`ATTRIBUTION`, else its subject)."""
    named = SUBJECT_ISSUE.match(subject)
    number = named.group(1) if named else None
    by_subject = UNATTRIBUTED if number is None else ISSUES.get(number, f"issue {number}")
    return ATTRIBUTION.get(sha[:SHORT_SHA], by_subject)


def growth_since(since: str, until: str = "HEAD") -> dict[str, Any]:
    """The net change from ``since`` to ``until`` in the lines counted without the other
    issues' files, commit by commit on the main line and summed by the issue that made it."""
    apart = {f for files in COUNTED_APART.values() for f in files}
    commits: list[dict[str, Any]] = []
    by_issue: Counter[str] = Counter()
    walk = ("log", "--first-parent", "--reverse", "--format=%H %s", f"{since}..{until}")
    for sha, _, subject in (line.partition(" ") for line in _git_lines(*walk)):
        net = 0
        diff = ("diff-tree", "-r", "--numstat", "--no-renames", f"{sha}^1", sha, "--")
        for row in _git_lines(*diff, *PRODUCTION):
            added, removed, path = row.split("\t", 2)
            if path.endswith(".py") and path not in apart and added != "-":
                net += int(added) - int(removed)
        if net:
            issue = issue_of(sha, subject)
            commits.append({"commit": sha[:SHORT_SHA], "issue": issue, "net_lines": net})
            by_issue[issue] += net
    return {"since": since[:SHORT_SHA], "by_issue": dict(by_issue), "commits": commits}


INTEGRATIONS: Final = (
    "agents/integrations/", "coldiron_env/openspiel.py", "agents/players/mcts.py",
    "scripts/export.py", "scripts/zoo.py", "scripts/zoo_report.py", "scripts/rllib_train.py",
    "scripts/openspiel_playthrough.py",
)  # fmt: skip
"""Other RL code's adapters (issue 50's 3,166 lines at 31d5f10), wherever a commit kept them."""
NOT_PRODUCT: Final = (
    "lab/", "tests/", "scripts/experiments/", "agents/evaluation/bound.py",
    "agents/evaluation/bound_fit.py", "agents/evaluation/need_game.py",
    "agents/evaluation/looks.py", "agents/tables.py", "agents/pins.py",
    "agents/experiment_log.py", "scripts/bound.py", "scripts/tables.py",
    "scripts/pin_models.py", "scripts/log_experiment.py", "scripts/transcribe_history.py",
    "scripts/regen_golden.py",
)  # fmt: skip
"""The research, the bookkeeping and the tests' tools, where 31d5f10 kept them in the product's
folders (since issue 50: ``lab/`` and ``tests/``)."""
APART: Final = ("scripts/benchmark.py",)
"""User-facing, but left out of issue 50's count of the product (15,670 at 31d5f10)."""


def classify(path: str) -> str | None:
    """``product``, ``integrations``, ``apart`` (the benchmark) or None (not the product)."""
    if not path.endswith(".py") or not path.startswith(PRODUCTION) or path.startswith(NOT_PRODUCT):
        return None
    if path.startswith(INTEGRATIONS):
        return "integrations"
    return "apart" if path in APART else "product"


def product_lines(commit: str | None = None) -> dict[str, Any]:
    """The product's lines by folder at ``commit`` (its git tree), or in the working tree."""
    if commit is None:
        paths = [str(p.relative_to(ROOT)) for p in python_files()]
        text = {path: (ROOT / path).read_text() for path in paths}
    else:
        paths = _git_lines("ls-tree", "-r", "--name-only", commit, "--", *PRODUCTION)
        text = {p: "\n".join(_git_lines("show", f"{commit}:{p}")) for p in paths if classify(p)}
    counts: dict[str, Counter[str]] = {"product": Counter(), "integrations": Counter(),
                                       "apart": Counter()}  # fmt: skip
    for path in paths:
        kind = classify(path)
        if kind is not None:
            folder = path.rsplit("/", 1)[0]
            counts[kind][folder] += len(text[path].splitlines())
    product = sum(counts["product"].values())
    return {
        "commit": commit or git_commit(),
        "product": product,
        "product_by_folder": dict(sorted(counts["product"].items())),
        "benchmark": sum(counts["apart"].values()),
        "product_with_benchmark": product + sum(counts["apart"].values()),
        "integrations": sum(counts["integrations"].values()),
        "integrations_by_folder": dict(sorted(counts["integrations"].items())),
    }


def python_files() -> list[Path]:
    return sorted(p for d in PRODUCTION for p in (ROOT / d).rglob("*.py"))


def lines_of(path: Path) -> int:
    return len(path.read_text().splitlines())


def line_counts() -> dict[str, Any]:
    files = python_files()
    per_file = {str(p.relative_to(ROOT)): lines_of(p) for p in files}
    apart = {
        group: sum(per_file.get(f, 0) for f in group_files)
        for group, group_files in COUNTED_APART.items()
    }
    total = sum(per_file.values())
    return {
        "production_lines": total,
        "counted_apart": apart,
        "production_lines_without_other_issues": total - sum(apart.values()),
        "per_package": {
            d: sum(n for f, n in per_file.items() if f.startswith(d + "/")) for d in PRODUCTION
        },
        "agents_learning": sum(n for f, n in per_file.items() if f.startswith("agents/learning/")),
    }


def rule_variant_files() -> dict[str, dict[str, int]]:
    """Per rule variant: the production files naming it, and how many times each does."""
    found: dict[str, dict[str, int]] = {}
    for name in VARIANT_KEYS:
        found[name] = {}
        for path in python_files():
            count = path.read_text().count(name)
            if count:
                found[name][str(path.relative_to(ROOT))] = count
    return found


def expert_iteration_trace() -> list[str]:
    """The project's frames from ``train`` to ``play_out`` in a tiny run (see the docstring)."""
    from agents.learning import training
    from agents.learning.config import config_from_dict, load_config
    from agents.players import rollouts

    data = load_config(ROOT / "configs" / "maskable_ppo.yaml").to_dict()
    data["algorithm"]["hyperparameters"].update(n_steps=32, batch_size=32)
    data["training"].update(total_timesteps=64, n_envs=2, progress_bar=False, vec_env="dummy")
    data["training"]["torch_threads"] = 1
    data["evaluation"].update(freq=64, episodes=4)
    # a network that plays long enough games for the planner to plan (from turn 18)
    data["imitation"].update(episodes=300, epochs=4, dagger_rounds=0)
    data["expert_iteration"].update(
        rounds=1, episodes=TRACE_EPISODES, budget="planner-small", workers=1
    )
    cfg = config_from_dict(data)

    seen: list[list[str]] = []
    original = rollouts.play_out

    def recorder(*args: Any, **kwargs: Any) -> Any:
        if not seen:
            stack = traceback.extract_stack()[:-1]
            seen.append(
                [
                    f"{Path(f.filename).resolve().relative_to(ROOT)}:{f.name}"
                    for f in stack
                    if Path(f.filename).resolve().is_relative_to(ROOT)
                    and not Path(f.filename).resolve().is_relative_to(ROOT / ".venv")
                ]
            )
        return original(*args, **kwargs)

    rollouts.play_out = recorder
    try:
        with tempfile.TemporaryDirectory(prefix="coldiron-trace-") as out:
            training.train(cfg, out=Path(out))
    finally:
        rollouts.play_out = original
    if not seen:
        raise RuntimeError("play_out was never called from Python: the trace is not measurable")
    frames = seen[0]
    starts = [i for i, f in enumerate(frames) if f.endswith(f":{TRACE_START}")]
    if not starts:
        raise RuntimeError(f"no {TRACE_START!r} frame on the stack: {frames}")
    return [*frames[starts[0] :], f"agents/players/rollouts.py:{TRACE_END}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="the record to write")
    parser.add_argument("--label", help="this measurement's name in the record")
    parser.add_argument("--product", action="store_true", help="print the product's lines only")
    parser.add_argument("--at", metavar="COMMIT", help="--product: at this commit's tree")
    parser.add_argument("--no-trace", action="store_true", help="skip the tiny training run")
    parser.add_argument(
        "--since",
        help=f"also the growth since this commit, by issue (issue 20's: {FILED_AT[:SHORT_SHA]})",
    )
    argv_used = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv_used)
    if args.product:
        counted = product_lines(args.at)
        print(json.dumps(counted, indent=2))
        if args.json is not None:  # one entry per --label, as the house record keeps its own
            doc = json.loads(args.json.read_text()) if args.json.exists() else {"entries": {}}
            counted["command"] = shlex.join([".venv/bin/python", "-m", "lab.house_metrics",
                                             *argv_used])  # fmt: skip
            doc["entries"][args.label or counted["commit"]] = counted
            atomic_write_json(args.json, doc)
        return 0
    if args.json is None or args.label is None:
        parser.error("--json and --label (or --product)")

    entry: dict[str, Any] = {"commit": git_commit(), "dirty": git_dirty(), **line_counts()}
    entry["product_lines"] = product_lines()
    variants = rule_variant_files()
    entry["rule_variants"] = {
        name: {"files": len(found), "mentions": sum(found.values()), "where": found}
        for name, found in variants.items()
    }
    if not args.no_trace:
        chain = expert_iteration_trace()
        entry["expert_iteration_trace"] = {"calls": len(chain) - 1, "chain": chain}
    if args.since:
        entry["growth"] = growth_since(args.since)
    doc = json.loads(args.json.read_text()) if args.json.exists() else {"entries": {}}
    doc["command"] = "python -m lab.house_metrics --json FILE --label LABEL"
    entry["command"] = shlex.join([".venv/bin/python", "-m", "lab.house_metrics", *argv_used])
    doc["entries"][args.label] = entry
    atomic_write_json(args.json, doc)
    print(json.dumps({k: v for k, v in entry.items() if k != "rule_variants"}, indent=2))
    for name, v in entry["rule_variants"].items():
        print(f"{name}: {v['files']} files, {v['mentions']} mentions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
