"""The experiment log reads an agent's figures from either kind of evaluation record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.experiment_log import evaluation_arg, evaluation_of, log_experiment, read_log

RESULT = {"win_rate": 0.25, "ci_low": 0.2, "ci_high": 0.3, "episodes": 400}


def test_evaluation_of_reads_lists_keyed_probes_and_ladder_rows(tmp_path: Path) -> None:
    listed = tmp_path / "evaluation.json"
    listed.write_text(json.dumps({"seed": 7, "agents": [{"agent": "heuristic", **RESULT}]}))
    keyed = tmp_path / "probes.json"
    name = "search:distilled:network:1024:18"
    doc = {"seed": 501, "deals": "validation", "agents": {name: {"agent": name, **RESULT}}}
    keyed.write_text(json.dumps(doc))

    ladder = tmp_path / "ladder.json"
    rows = [{"label": "strongest", **RESULT}]
    ladder.write_text(json.dumps({"seed": 9, "deals": 400, "rows": rows}))

    assert evaluation_of(ladder, "strongest")["episodes"] == RESULT["episodes"]
    from_list = evaluation_of(listed, "heuristic")
    from_keys = evaluation_of(keyed, name)
    assert (from_list["deals"], from_list["seed"]) == ("evaluation", 7)
    assert (from_keys["deals"], from_keys["seed"]) == ("validation", 501)
    assert from_keys["win_rate"] == RESULT["win_rate"]
    with pytest.raises(ValueError, match=r"no agent 'planner'.*heuristic"):
        evaluation_of(listed, "planner")


def test_evaluation_arg_keeps_the_colons_of_an_agent_name() -> None:
    assert evaluation_arg("docs/r.json:search:distilled:network:1024:18") == (
        Path("docs/r.json"),
        "search:distilled:network:1024:18",
    )
    with pytest.raises(ValueError, match=r"FILE\.json:AGENT"):
        evaluation_arg("docs/r.json")


def test_logging_an_id_again_replaces_its_entry(tmp_path: Path) -> None:
    log = tmp_path / "experiments.json"
    log.write_text(json.dumps({"experiments": []}))
    log_experiment("x", "first", "kept", "cmd", path=log)
    log_experiment("y", "other", "kept", "cmd", path=log)
    log_experiment("x", "second", "dropped", "cmd", path=log)
    assert [(e["id"], e["what"]) for e in read_log(log)] == [("y", "other"), ("x", "second")]
