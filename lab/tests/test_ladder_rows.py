"""The committed ladder's upkeep (``lab/ladder_rows.py``): a row added on the ladder's own
deals, paired with ``heuristic`` replayed there, or a row renamed; and the report seed's looks
(``lab/looks.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agents import ladder as ladder_module
from agents.evaluation.arena import AgentResult, agent_seeds, decks_of, evaluate_agent
from lab import ladder_rows as rows

DECK_SEED = 4242


@pytest.mark.parametrize("bad", ["strongest", "=strongest-z2", "strongest="])
def test_rename_row_refuses_an_argument_that_is_not_old_equals_new(
    bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ladder = str(tmp_path / "ladder.json")
    code = rows.main(["--rename-row", bad, "--ladder", ladder, "--out-dir", str(tmp_path)])
    assert code == rows.EXIT_ERROR
    assert "OLD=NEW" in capsys.readouterr().err
    assert not (tmp_path / "ladder.json").exists()


def test_an_added_row_plays_its_ladders_own_deals_and_refuses_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--add-row`` on a validation ladder is dealt that seed's validation decks (what is
    dealt, not the arguments passed), and refuses another deal set, seed or deal count."""
    from agents.evaluation.arena import validation_decks

    path = small_ladder(tmp_path / "out", 6, validation=True)
    dealt: list[list[list[int]]] = []
    play = ladder_module.evaluate_agent

    def spy(agent: Any, decks: Any, *args: Any, **kwargs: Any) -> AgentResult:
        dealt.append([list(map(int, d)) for d in decks])
        return play(agent, decks, *args, **kwargs)

    monkeypatch.setattr(ladder_module, "evaluate_agent", spy)
    wanted = validation_decks(DECK_SEED, 6).tolist()
    out = tmp_path / "added"
    args = ["--workers", "1", "--add-row", "planner", "--add-deals", "4", "--ladder", str(path)]
    assert rows.main([*args, "--out-dir", str(out)]) == 0
    assert dealt and all(decks == wanted[: len(decks)] for decks in dealt)
    assert json.loads((out / "ladder.json").read_text())["deals"] == "validation"
    assert rows.main([*args, "--out-dir", str(out), "--deals", "evaluation"]) == rows.EXIT_ERROR
    assert "validation deals" in capsys.readouterr().err
    for other, needle in ((["--seed", "78"], "--seed 78: "), (["--episodes", "9"], "--episodes 9")):
        dealt.clear()
        assert rows.main([*args, "--out-dir", str(out), *other]) == rows.EXIT_ERROR
        assert needle in capsys.readouterr().err and not dealt  # not ignored: refused
    own = ["--seed", str(DECK_SEED), "--episodes", "6"]
    assert rows.main([*args, "--out-dir", str(tmp_path / "again"), *own]) == 0


def small_ladder(tmp_path: Path, episodes: int, validation: bool = False) -> Path:
    """A ladder.json of ``heuristic`` and ``threaten`` on ``episodes`` deals."""
    decks = decks_of(DECK_SEED, episodes, validation)
    seeds = agent_seeds(DECK_SEED, episodes)
    from agents.registry import make_agent

    rows = [evaluate_agent(make_agent(n), decks, seeds, label=n) for n in ("heuristic", "threaten")]
    settings = ladder_module.LadderSettings(
        seed=DECK_SEED,
        episodes=episodes,
        validation=validation,
        planner_episodes=episodes,
    )
    ladder_module.write_outputs(
        tmp_path, ladder_module.Ladder(rows=rows), settings, "small ladder (test)"
    )
    return tmp_path / "ladder.json"


def test_add_row_pairs_the_new_player_with_heuristic_on_the_first_deals(tmp_path: Path) -> None:
    path = small_ladder(tmp_path, 60)
    result, settings, command = rows.load_ladder(path)
    before = [r.to_dict() for r in result.rows]
    base, row, pair = rows.add_row(result, settings, "random", 30)
    assert [r.to_dict() for r in result.rows[:2]] == before, "old rows changed"
    assert row.kind == "agent"  # drawn as a player that does not search, not as a planner
    assert base.agent == "heuristic (first 30)" and base.episodes == row.episodes == 30
    full = next(r for r in result.rows if r.agent == "heuristic")
    assert base.won == full.won[:30]
    only_base = sum(b and not o for b, o in zip(base.won, row.won, strict=True))
    assert pair["only_base_wins"] == only_base
    out = tmp_path / "new"
    ladder_module.write_outputs(out, result, settings, command)
    written = json.loads((out / "ladder.json").read_text())
    assert [r["label"] for r in written["rows"]][-2:] == ["heuristic (first 30)", "random"]
    assert written["command"] == "small ladder (test)"
    with pytest.raises(ValueError, match="already"):
        rows.add_row(result, settings, "random", 30)
    with pytest.raises(ValueError, match="deals"):
        rows.add_row(result, settings, "threaten-x", 61)
    _, searched, _ = rows.add_row(result, settings, "planner-small", 3)
    assert searched.kind == "planner"
    from agents.evaluation.stats import DISAGREEMENT, mcnemar

    few = mcnemar([False] * 5 + [True] * 45, [True] * 50)  # interval clear of 0, p = 0.06
    result.comparisons = {"few": {**few, "disjoint": False, "deals_for_disjoint": 1.0,
                                  "seconds_per_decision": 0.0}}  # fmt: skip
    ladder_module.write_outputs(tmp_path / "marked", result, settings, command)
    table = (tmp_path / "marked" / "ladder.md").read_text()
    assert "| 0.0625 * |" in table and f"\\* {DISAGREEMENT}." in table


def test_the_clairvoyant_bound_row_is_at_least_every_players_wins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--add-bound N``: the solver's verdicts on the ladder's first N deals; it wins every
    deal a player won (it sees more), and an ``unknown`` verdict counts as won."""
    path = small_ladder(tmp_path, 8)
    out = tmp_path / "bound"
    args = ["--add-bound", "6", "--workers", "2", "--ladder", str(path), "--out-dir", str(out)]
    assert rows.main(args) == 0
    written = json.loads((out / "ladder.json").read_text())
    bound = written["rows"][-1]
    assert (bound["label"], bound["kind"], bound["episodes"]) == (rows.SOLVER_LABEL, "bound", 6)
    assert set(bound["outcomes"]) == {"winnable", "unwinnable", "unknown"}
    assert bound["wins"] == bound["outcomes"]["winnable"] + bound["outcomes"]["unknown"]
    result, _, _ = rows.load_ladder(out / "ladder.json")
    by = {r.agent: r for r in result.rows}
    clairvoyant = by[rows.SOLVER_LABEL].won
    assert all(c or not h for c, h in zip(clairvoyant, by["heuristic"].won[:6], strict=True))
    assert "| clairvoyant bound | 6 (first 6) |" in (out / "ladder.md").read_text()
    capped = rows.solver_row(rows.load_ladder(path)[1], 3, max_nodes=1)
    assert capped.outcomes["unknown"] > 0 and capped.wins >= capped.outcomes["unknown"]
    too_many = ["--add-bound", "99", *args[2:-1], str(tmp_path / "again")]
    assert rows.main(too_many) == rows.EXIT_ERROR
    assert "--add-bound must be in 1..8" in capsys.readouterr().err


def test_add_row_refuses_a_ladder_whose_heuristic_row_does_not_replay(tmp_path: Path) -> None:
    path = small_ladder(tmp_path, 40)
    doc = json.loads(path.read_text())
    heuristic = next(r for r in doc["rows"] if r["label"] == "heuristic")
    heuristic["won_bits"] = "ff" * 5  # every deal "won": not what heuristic does
    path.write_text(json.dumps(doc))
    result, settings, _ = rows.load_ladder(path)
    with pytest.raises(RuntimeError, match="changed"):
        rows.add_row(result, settings, "random", 20)


def test_rename_row_keeps_the_row_and_its_comparison_under_the_new_name(tmp_path: Path) -> None:
    path = small_ladder(tmp_path, 40)
    result, settings, command = rows.load_ladder(path)
    rows.add_row(result, settings, "random", 20)
    played = next(r for r in result.rows if r.agent == "random").to_dict()
    renamed = rows.rename_row(result, "random", "planner-small")
    assert renamed.to_dict() == {**played, "agent": "planner-small"}
    assert "planner-small" in result.comparisons and "random" not in result.comparisons
    with pytest.raises(ValueError, match="no row 'random'"):
        rows.rename_row(result, "random", "threaten")
    with pytest.raises(ValueError, match="already has a row 'threaten'"):
        rows.rename_row(result, "planner-small", "threaten")
    with pytest.raises(ValueError, match="unknown agent"):
        rows.rename_row(result, "planner-small", "no-such-player")
    out = tmp_path / "new"
    ladder_module.write_outputs(out, result, settings, command)
    written = json.loads((out / "ladder.json").read_text())
    assert [r["label"] for r in written["rows"]][-1] == "planner-small"


def test_the_upkeep_keeps_the_keys_the_product_does_not_write(tmp_path: Path) -> None:
    """A rename (nothing played) rewrites the ladder; the old file's keys the product's writer
    does not know (a commit bracket, the solver's deals) come through, its own keys updated."""
    path = small_ladder(tmp_path, 20)
    doc = json.loads(path.read_text())
    bracket = {"note": "x", "first_committed": "a" * 40, "last_changed": "b" * 40}
    path.write_text(json.dumps({**doc, "commit_unrecorded": bracket, "solver_episodes": 7}))
    out = tmp_path / "out"
    assert (
        rows.main(["--rename-row", "threaten=random", "--ladder", str(path), "--out-dir", str(out)])
        == 0
    )
    written = json.loads((out / "ladder.json").read_text())
    assert written["commit_unrecorded"] == bracket and written["solver_episodes"] == 7
    assert [r["label"] for r in written["rows"]] == ["heuristic", "random"]
    assert written["notes"] and "renamed random" in written["notes"][-1]


def test_drop_row_takes_the_row_and_its_comparison_off_and_keeps_heuristic(
    tmp_path: Path,
) -> None:
    path = small_ladder(tmp_path, 40)
    result, settings, _ = rows.load_ladder(path)
    rows.add_row(result, settings, "random", 20)
    before = [r.agent for r in result.rows]
    assert rows.drop_row(result, "random").agent == "random"
    assert [r.agent for r in result.rows] == [a for a in before if a != "random"]
    assert "random" not in result.comparisons
    with pytest.raises(ValueError, match="no row 'random'"):
        rows.drop_row(result, "random")
    with pytest.raises(ValueError, match="paired with"):
        rows.drop_row(result, "heuristic")
    out = tmp_path / "out"
    assert rows.main(["--drop-row", "threaten", "--ladder", str(path), "--out-dir", str(out)]) == 0
    written = json.loads((out / "ladder.json").read_text())
    assert "threaten" not in [r["label"] for r in written["rows"]]
    assert "dropped by" in written["notes"][-1]
