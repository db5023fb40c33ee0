"""scripts/ladder.py on a tiny budget: the table, the JSON and the PNG, and its statistics
(agents/ladder.py)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from agents.cli import EXIT_ERROR
from agents.evaluation.arena import AgentResult
from agents.evaluation.stats import mcnemar
from agents.ladder import deals_for_disjoint

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import ladder  # noqa: E402


def run_ladder(tmp_path: Path, *extra: str) -> dict[str, Any]:
    (tmp_path / "no-such-run").mkdir(parents=True, exist_ok=True)  # a folder without a model
    code = ladder.main(
        [
            "--episodes",
            "6",
            "--planner-episodes",
            "3",
            "--planner",
            "planner-small",
            "--workers",
            "1",
            "--runs",
            str(tmp_path / "no-such-run"),
            "--out-dir",
            str(tmp_path / "out"),
            *extra,
        ]
    )
    assert code == 0
    data: dict[str, Any] = json.loads((tmp_path / "out" / "ladder.json").read_text())
    return data


def test_ladder_writes_table_json_and_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    data = run_ladder(tmp_path)
    rows = data["rows"]
    assert isinstance(rows, list)
    labels = [r["label"] for r in rows]
    assert labels == [
        "random",
        "threaten",
        "heuristic",
        "heuristic (first 3)",
        "planner-small",
    ]
    by_label = {r["label"]: r for r in rows}
    assert by_label["random"]["episodes"] == 6
    assert by_label["planner-small"]["episodes"] == 3
    for row in rows:
        assert 0.0 <= row["ci_low"] <= row["win_rate"] <= row["ci_high"] <= 1.0
        assert sum(row["outcomes"].values()) == row["episodes"]
        assert row["seconds_per_game"] > 0
    assert "planner-small" in data["paired"]
    assert any("skipped run" in n for n in data["notes"])
    from agents.gitinfo import git_commit  # the code that played it, kept in its notes

    assert any(n.startswith(f"ladder played at commit {git_commit()}") for n in data["notes"])
    md = (tmp_path / "out" / "ladder.md").read_text()
    assert "| planner-small | 3 (first 3) |" in md
    assert "python scripts/ladder.py" in md
    assert (tmp_path / "out" / "ladder.png").read_bytes()[:4] == b"\x89PNG"


def test_workers_do_not_change_the_results(tmp_path: Path) -> None:
    one = run_ladder(tmp_path / "a")
    two = run_ladder(tmp_path / "b", "--workers", "2")
    strip = [{k: v for k, v in r.items() if not k.startswith("seconds")} for r in one["rows"]]
    assert strip == [
        {k: v for k, v in r.items() if not k.startswith("seconds")} for r in two["rows"]
    ]


def test_bad_arguments_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for bad, named in (
        (["--runs", str(tmp_path / "typo")], "--runs"),
        (["--out-dir", str(ROOT / "README.md")], "--out-dir"),
        (["--planner", "heuristic"], "--planner heuristic: not a search player"),
    ):
        args = ["--episodes", "3", "--planner-episodes", "1", "--out-dir", str(tmp_path)]
        assert ladder.main([*args, *bad]) == EXIT_ERROR
        assert named in capsys.readouterr().err

    code = ladder.main(["--episodes", "3", "--planner-episodes", "5", "--out-dir", str(tmp_path)])
    assert code == EXIT_ERROR
    assert "--planner-episodes" in capsys.readouterr().err
    code = ladder.main(
        ["--episodes", "3", "--planner-episodes", "1", "--planner", "nobody", "--out-dir", "x"]
    )
    assert code == EXIT_ERROR
    assert "nobody" in capsys.readouterr().err


def test_mcnemar_counts_discordant_deals() -> None:
    base = [True, False, False, True, False]
    other = [True, True, True, False, False]
    result = mcnemar(base, other)
    assert result["only_other_wins"] == 2
    assert result["only_base_wins"] == 1
    assert result["difference"] == pytest.approx(0.2)
    assert result["p_two_sided"] == pytest.approx(1.0)  # 2 vs 1: no evidence
    strong = mcnemar([False] * 20, [True] * 10 + [False] * 10)
    assert strong["p_two_sided"] == pytest.approx(2 / 2**10)
    from agents.evaluation.stats import P_FLOOR, p_text

    vast = mcnemar([False] * 2000, [True] * 2000)  # 2**-2000 underflows a float
    assert vast["p_two_sided"] == 0.0 and p_text(vast["p_two_sided"]) == P_FLOOR
    assert p_text(strong["p_two_sided"]) == "0.002"


def test_deals_for_disjoint() -> None:
    assert deals_for_disjoint(0.2, 0.1) == math.inf
    n = deals_for_disjoint(0.176, 0.21)
    assert 1500 < n < 3000


ROW_KEYS = {
    "label", "kind", "episodes", "wins", "win_rate", "ci_low", "ci_high", "outcomes",
    "mean_turns", "mean_steps", "seconds", "seconds_per_game", "seconds_per_decision", "note",
    "won_bits",
}  # fmt: skip
"""The fields of a row of ladder.json (docs/ladder/ladder.json has them)."""


def test_ladder_json_rows_keep_their_fields(tmp_path: Path) -> None:
    data = run_ladder(tmp_path)
    assert set(data) >= {"seed", "episodes", "planner_episodes", "rows"}
    for row in data["rows"]:
        assert set(row) == ROW_KEYS, row["label"]
        per_decision = row["seconds_per_decision"]
        assert (per_decision is not None) == (row["kind"] == "planner"), row["label"]


def test_agent_result_extends_in_deal_order() -> None:
    first, second = AgentResult("x"), AgentResult("x")
    first.add("won", 20, 30)
    first.add("slain", 10, 12)
    second.add("won", 24, 40)
    second.seconds = 1.5
    first.extend(second)
    assert first.won == [True, False, True]
    assert (first.episodes, first.wins, first.total_turns, first.total_steps) == (3, 2, 54, 82)
    assert first.outcomes["slain"] == 1 and first.seconds == 1.5
    assert first.seconds_per_decision == pytest.approx(1.5 / 82)
    bound = AgentResult(
        "b", episodes=3, outcomes={"winnable": 1}, kind="bound", won=[True, False, True]
    )
    assert bound.wins == 2  # a bound's wins are its per-deal verdicts, not an outcome tally


def test_a_ladder_without_out_dir_is_refused_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ladder writes only where its command line says (a default folder wrote runs/ladder)."""
    monkeypatch.chdir(tmp_path)
    args = ["--episodes", "4", "--seed", "7", "--planner-episodes", "1"]
    with pytest.raises(SystemExit) as stop:
        ladder.main([*args, "--workers", "1"])
    assert stop.value.code == 2 and "--out-dir" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_validation_ladder_deals_the_validation_decks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--deals validation``: what every row is dealt (not the arguments passed) is the seed's
    validation deals."""
    import agents.ladder as ladder_module
    from agents.evaluation.arena import deal_decks, validation_decks

    dealt: list[list[list[int]]] = []
    play = ladder_module.evaluate_agent

    def spy(agent: Any, decks: Any, *args: Any, **kwargs: Any) -> AgentResult:
        dealt.append([list(map(int, d)) for d in decks])
        return play(agent, decks, *args, **kwargs)

    monkeypatch.setattr(ladder_module, "evaluate_agent", spy)
    seed = 77
    data = run_ladder(tmp_path, "--seed", str(seed), "--deals", "validation")
    assert data["deals"] == "validation"
    wanted = validation_decks(seed, 6).tolist()
    assert dealt and all(decks == wanted[: len(decks)] for decks in dealt)
    assert all(decks != deal_decks(seed, 6).tolist()[: len(decks)] for decks in dealt)
    assert "validation_decks" in (tmp_path / "out" / "ladder.md").read_text()


def test_the_planner_rows_take_the_players_that_search() -> None:
    """``--planner`` ranks a player on the planners' share of the deals: one that searches."""
    from agents.registry import make_agent

    for name in ("planner-small", "strongest"):
        assert make_agent(name).searches, name
    for name in ("heuristic", "random", "trained"):
        assert not make_agent(name).searches, name
    pytest.importorskip("pyspiel")
    assert make_agent("mcts").searches
