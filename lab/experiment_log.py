"""The experiment log: every long run, with what it measured, in one committed JSON file.

    .venv/bin/python -m lab.experiment_log --id e19-1 --what "the default, seed 1" \\

``lab/experiment_log.py`` appends an entry read from the run's own records (its
``meta.json`` for the config, steps, rounds and wall time; an evaluation JSON written by
``scripts/evaluate.py --json`` or ``scripts/main.py`` for the win rate, its interval and the
deals), plus what the run was for and what came of it (including failures).
lab/docs/experiments.md shows the log as the ``experiments`` table (``lab/tables.py``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Final

from agents.atomic import atomic_write_json
from agents.gitinfo import git_commit, utc_now
from lab import RECORDS, ROOT  # noqa: F401

EXPERIMENTS_JSON: Final = RECORDS / "experiments.json"


def read_log(path: Path = EXPERIMENTS_JSON) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    entries: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["experiments"]
    return entries


def evaluation_of(path: Path, agent: str) -> dict[str, Any]:
    """``agent``'s result in an evaluation JSON (``evaluate.py --json``, ``evaluation.json``:
    a list of agents; ``search_probes.py --json``: agents keyed by name; ``ladder.py``'s
    ``ladder.json`` and ``--record``: a list of labelled rows)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    found = doc["agents"] if "agents" in doc else doc["rows"]
    results = list(found.values()) if isinstance(found, dict) else found
    for result in results:
        if result.get("agent", result.get("label")) == agent:
            validation = "VALIDATION" in str(doc.get("deals", "")).upper()  # a ladder: a count
            deals = "validation" if validation else "evaluation"
            return {
                "agent": agent,
                "win_rate": result["win_rate"],
                "ci_low": result["ci_low"],
                "ci_high": result["ci_high"],
                "episodes": result["episodes"],
                "seed": doc["seed"],
                "deals": deals,
                "file": str(path),
            }
    names = [r.get("agent", r.get("label")) for r in results]
    raise ValueError(f"{path}: no agent {agent!r} (it holds {names})")


def evaluation_arg(text: str) -> tuple[Path, str]:
    """``FILE.json:AGENT`` as (file, agent); the agent's name may hold colons
    (``search:distilled:network:1024:18``)."""
    file, sep, agent = text.partition(".json:")
    if not sep or not file or not agent:
        raise ValueError(f"--evaluation {text!r}: expected FILE.json:AGENT")
    return Path(file + ".json"), agent


def run_of(run_dir: Path) -> dict[str, Any]:
    """What a run directory's ``meta.json`` says of the run."""
    meta = json.loads((run_dir / "meta.json").read_text(encoding="utf-8"))
    return {
        "run": str(run_dir),
        "config": meta.get("config_file") or meta.get("start"),
        "seed": meta.get("seed", (meta.get("settings") or {}).get("seed")),
        "timesteps": meta.get("timesteps"),
        "rounds": meta.get("expert_iteration_rounds", meta.get("rounds_done")),
        "wall_seconds": meta.get("wall_seconds"),
        "status": meta.get("status"),
        "commit": meta.get("git_commit"),
    }


def log_experiment(
    ident: str,
    what: str,
    verdict: str,
    command: str,
    run_dir: Path | None = None,
    evaluations: list[tuple[Path, str]] = (),  # type: ignore[assignment]
    path: Path = EXPERIMENTS_JSON,
) -> dict[str, Any]:
    """Append (or replace, by ``ident``) one experiment's entry."""
    entry: dict[str, Any] = {
        "id": ident,
        "date": utc_now(),
        "commit": git_commit(),
        "what": what,
        "command": command,
        "run": run_of(run_dir) if run_dir is not None else None,
        "evaluations": [evaluation_of(p, agent) for p, agent in evaluations],
        "verdict": verdict,
    }
    entries = [e for e in read_log(path) if e["id"] != ident] + [entry]
    atomic_write_json(path, {"experiments": entries})
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--id", required=True, help="a short name; logging it again replaces it")
    parser.add_argument("--what", required=True, help="what the run tried")
    parser.add_argument("--verdict", required=True, help="what came of it (failures too)")
    parser.add_argument("--command", required=True, help="the command that made the run")
    parser.add_argument("--run", type=Path, help="its run directory (meta.json is read)")
    parser.add_argument(
        "--evaluation",
        action="append",
        default=[],
        metavar="FILE.json:AGENT",
        help="an evaluation JSON and the agent's label in it (repeatable)",
    )
    args = parser.parse_args(argv)
    try:
        evaluations = [evaluation_arg(item) for item in args.evaluation]
    except ValueError as error:
        parser.error(str(error))
    entry = log_experiment(args.id, args.what, args.verdict, args.command, args.run, evaluations)
    print(f"logged {entry['id']}: {len(entry['evaluations'])} evaluation(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
