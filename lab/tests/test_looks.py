"""The report seed's look log (``lab/looks.py``): a look is logged before it is made, by the
lab's command, and the product logs nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPORT_SEED as PRODUCT_TESTS_SEED

from lab import ROOT
from lab.looks import LOOK_LOG_VARIABLE, REPORT_SEED, command_deals, main, read_looks, record_look


def test_the_product_tests_hold_the_same_report_seed() -> None:
    assert PRODUCT_TESTS_SEED == REPORT_SEED


def test_a_look_at_the_report_seed_is_logged_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A look at the report seed appends one entry and says where; any other seed, nothing."""
    log = tmp_path / "looks.jsonl"
    monkeypatch.setenv(LOOK_LOG_VARIABLE, str(log))
    assert record_look(REPORT_SEED + 1, 10, ["heuristic"], None, ["x"]) is None
    assert not log.exists() and "report seed" not in capsys.readouterr().err
    entry = record_look(REPORT_SEED, 10, ["heuristic"], "a test", ["evaluate.py", "--seed", "1"])
    assert entry is not None and read_looks(log) == [entry]
    assert entry["command"] == "evaluate.py --seed 1" and entry["why"] == "a test"
    err = capsys.readouterr().err
    assert "report seed" in err and str(log) in err and "why: a test" in err


def test_the_command_reads_the_deals_a_product_command_plays() -> None:
    seed, episodes, agents = command_deals(
        ["scripts/evaluate.py", "--agent", "a", "--agent", "b", f"--seed={REPORT_SEED}"]
    )
    assert (seed, episodes, agents) == (REPORT_SEED, 10_000, ["a", "b"])
    assert command_deals(["x", "--seed", str(REPORT_SEED), "--deals", "validation"])[0] is None
    assert command_deals(["x", "--add-row", "mcts", "--episodes", "7"])[1:] == (7, ["mcts"])


def test_the_look_command_logs_then_runs_and_refuses_other_seeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "looks.jsonl"
    monkeypatch.setenv(LOOK_LOG_VARIABLE, str(log))
    out = tmp_path / "e.json"
    evaluate = [sys.executable, str(ROOT / "scripts" / "evaluate.py"), "--agent", "threaten"]
    code = main(["--why", "a test", "--", *evaluate, "--episodes", "20", "--seed",
                 str(REPORT_SEED), "--json", str(out)])  # fmt: skip
    assert code == 0 and json.loads(out.read_text())["seed"] == REPORT_SEED
    (entry,) = read_looks(log)
    assert entry["episodes"] == 20 and entry["agents"] == ["threaten"]
    with pytest.raises(SystemExit):
        main(["--why", "x", "--", *evaluate, "--seed", "3"])  # not a look: run it directly
    assert len(read_looks(log)) == 1


def test_the_product_logs_no_look_of_its_own(tmp_path: Path) -> None:
    """``scripts/evaluate.py`` on the report seed, run by hand, writes only its --json."""
    before = (ROOT / "lab" / "records" / "report_looks.jsonl").read_bytes()
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "evaluate.py"), "--agent", "threaten",
         "--episodes", "5", "--seed", str(REPORT_SEED)],
        capture_output=True, text=True, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert list(tmp_path.iterdir()) == []
    assert (ROOT / "lab" / "records" / "report_looks.jsonl").read_bytes() == before
