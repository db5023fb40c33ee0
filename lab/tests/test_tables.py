"""Every table of the README and docs/ is its committed record, rendered (lab/tables.py)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from agents.evaluation.stats import mcnemar, wilson_interval
from lab import ROOT, tables


@pytest.mark.parametrize("path", tables.markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_table_is_its_record(path: Path) -> None:
    drift = tables.refresh(path, check=True)
    assert not drift, f"{path}: {drift} differ from their records: run lab/tables.py"


def test_every_named_table_is_shown_somewhere() -> None:
    shown = {
        match["name"]
        for path in tables.markdown_files()
        for match in tables.BLOCK.finditer(path.read_text(encoding="utf-8"))
    }
    assert set(tables.TABLES) <= shown, set(tables.TABLES) - shown


def test_a_changed_record_is_a_drifted_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ladder = tmp_path / "ladder.json"
    shutil.copy(tables.LADDER_JSON, ladder)
    doc = json.loads(ladder.read_text())
    row = next(r for r in doc["rows"] if r["label"].endswith("trained"))
    row["win_rate"] += 0.0001
    ladder.write_text(json.dumps(doc))
    monkeypatch.setattr(tables, "LADDER_JSON", ladder)
    assert "results" in tables.refresh(ROOT / "README.md", check=True)


def test_the_headline_follows_the_ceiling_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's answer names the bound's record and its levels: a changed level is a
    drifted answer."""
    _, doc = tables._ceilings()[0]
    assert doc["deals"] == "evaluation" and doc["episodes"] >= 200
    assert not doc.get("lower_estimate")
    levels = tmp_path / "levels.json"
    changed = json.loads(tables.CEILING_LEVELS.read_text())
    changed["distribution_free_95"] -= 0.0001
    levels.write_text(json.dumps(changed))
    monkeypatch.setattr(tables, "CEILING_LEVELS", levels)
    assert "headline" in tables.refresh(ROOT / "README.md", check=True)


def _row(text: str, start: str) -> list[str]:
    line = next(x for x in text.splitlines() if x.startswith(f"| {start}"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_the_readme_results_are_the_ladder_record_recomputed() -> None:
    """Independently of the renderer: each row's rate and interval from its wins and deals,
    the pairing from the per-deal wins."""
    doc = json.loads(tables.LADDER_JSON.read_text())
    readme = (ROOT / "README.md").read_text()
    rows = {r["label"].rsplit("/", 1)[-1]: r for r in doc["rows"] if r["kind"] != "bound"}
    heuristic = rows["heuristic"]
    for label, what, _ in tables.RESULT_ROWS:
        record = rows[label]
        cells = _row(readme, tables.result_text(label, what))
        wins, n = record["outcomes"]["won"], record["episodes"]
        low, high = wilson_interval(wins, n)
        assert cells[1] == f"{100 * wins / n:.2f}%"
        assert cells[2] == f"[{100 * low:.2f}%, {100 * high:.2f}%]"
        if label != "heuristic":
            from lab import unpack_wins

            base_won = unpack_wins(heuristic["won_bits"], n)
            pair = mcnemar(base_won, unpack_wins(record["won_bits"], n))
            assert cells[3].startswith(f"{100 * pair['difference']:+.2f} ")


def test_the_readme_prose_has_no_figure_without_a_record() -> None:
    """A percentage written in the README's prose must be a value some committed record
    holds (rounded as shown); tables are checked above."""
    values: set[str] = set()

    def collect(x: object) -> None:
        if isinstance(x, dict):
            for v in x.values():
                collect(v)
        elif isinstance(x, list):
            for v in x:
                collect(v)
        elif isinstance(x, float):
            values.update({f"{100 * x:.2f}%", f"{100 * x:.1f}%", f"{x:.2f}%"})
        elif isinstance(x, str):
            values.update(re.findall(r"\d+\.\d+%", x))

    records = (
        tables.LADDER_JSON,
        tables.MAIN_JOB_JSON,
        tables.CEILING_LEVELS,
        *tables.CEILING_RECORDS,
    )
    for record in (*records, *tables.CITED_RECORDS):
        collect(json.loads(record.read_text()))
    readme = (ROOT / "README.md").read_text()
    for cited in tables.CITED_RECORDS:  # each named where its figures are written
        assert str(cited.relative_to(ROOT)) in readme, cited
    text = re.sub(r"<!-- table:.*?<!-- /table -->", "", readme, flags=re.S)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    orphans = sorted(set(re.findall(r"\d+\.\d+%", text)) - values)
    assert not orphans, f"README figures with no record: {orphans}"


def test_every_config_of_its_time_has_its_three_seeds_in_the_history_table() -> None:
    """The configs shipped when the seeds were evaluated (commit 8ad2cac), each with three."""
    import subprocess

    doc = json.loads(tables.SEEDS_2026_JSON.read_text())
    listed = subprocess.run(
        ["git", "ls-tree", "--name-only", "8ad2cac", "configs/"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if listed.returncode != 0:
        pytest.skip("a shallow clone: commit 8ad2cac is not here")
    names = [Path(n) for n in listed.stdout.split()]
    configs = {p.stem for p in names if p.suffix == ".yaml" and not p.stem.startswith("tune_")}
    shown = {a["name"]: a for a in doc["seed_aggregates"]}
    assert configs <= set(shown), configs - set(shown)
    assert all(len(shown[c]["seeds"]) >= 3 for c in configs)
    table = tables.render("seeds-2026")
    assert all(f"`{c}`" in table for c in configs)


def test_the_works_with_rows_name_real_tests_and_copy_no_figure() -> None:
    """Each row's CI column names test files that exist; its own words carry no figure
    (every figure is read from the record it names)."""
    import json
    import re

    doc = json.loads((ROOT / "docs" / "records" / "works_with.json").read_text())
    assert doc["rows"]
    for row in doc["rows"]:
        for name in re.findall(r"tests/[\w/]+\.py", row["ci"]):
            assert (ROOT / name).is_file(), (row["library"], name)
        specs = row["reaches"] if isinstance(row["reaches"], list) else [row["reaches"]]
        for spec in specs:
            words = spec.get("before", "") + spec.get("after", "")
            assert not re.search(r"\d+(\.\d+)?%", words), (row["library"], words)
            if "record" in spec:
                assert (ROOT / spec["record"]).is_file(), row["library"]


def test_an_included_file_that_changes_is_drift(tmp_path: Path) -> None:
    """A README code block quoting a file (``<!-- include:PATH -->``) must equal the file."""
    readme = (ROOT / "README.md").read_text()
    assert "<!-- include:docs/examples/onnx_play.py -->" in readme
    copy = tmp_path / "README.md"
    copy.write_text(readme.replace("policy.run(", "policy.run2(", 1))
    assert "include:docs/examples/onnx_play.py" in tables.refresh(copy, check=True)


def _names_a_commit(data: object) -> bool:
    if isinstance(data, dict):
        return "commit" in data or "git_commit" in data or any(map(_names_a_commit, data.values()))
    if isinstance(data, list):
        return any(map(_names_a_commit, data))
    return False


def test_every_record_names_the_commit_it_ran_at_or_says_it_cannot() -> None:
    """A record's command stamps its commit (agents.gitinfo.code_stamp); a record written before
    the stamps existed says so, with git's first and last commits of its file instead."""
    records = sorted(
        {*ROOT.glob("docs/**/*.json"), *ROOT.glob("lab/**/*.json"), *ROOT.glob("tests/pins/*.json")}
    )
    assert len(records) > 40, "the records are where this test looks"
    for path in records:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or _names_a_commit(data):
            continue
        bracket = data.get("commit_unrecorded")
        assert isinstance(bracket, dict), f"{path}: names no commit (stamp it: code_stamp)"
        for key in ("first_committed", "last_changed"):
            assert re.fullmatch(r"[0-9a-f]{40}", bracket[key]), (path, key)


def test_a_probes_table_of_chosen_players_pairs_them_as_the_record_does() -> None:
    """``probes:PATH;BASE;OTHER``: the players named, paired with BASE from their per-deal wins;
    with BASE the record's first player, each row is the full table's (paired when run)."""
    path = "lab/records/search_probes_501.json"
    players = list(json.loads((ROOT / path).read_text(encoding="utf-8"))["agents"])
    first, others = players[0], players[1:4]
    full = tables.render(f"probes:{path}").splitlines()
    chosen = tables.render(f"probes:{path};{first};{';'.join(others)}").splitlines()
    for spec in others:
        row = next(line for line in chosen if line.startswith(f"| `{spec}` |"))
        assert row in full and row.split(" | ")[3], spec  # a paired cell, as recorded
    assert len([line for line in chosen if line.startswith("| `")]) == 1 + len(others)
    with pytest.raises(KeyError, match="no player 'nobody'"):
        tables.render(f"probes:{path};{first};nobody")


def test_the_product_tests_heuristic_pin_is_the_record_it_was_copied_from() -> None:
    """tests/pins/heuristic.json holds the heuristic's wins of lab/records/search_probes_501.json
    (the product's tests read no lab record): the two must not drift apart."""
    pin = json.loads((ROOT / "tests" / "pins" / "heuristic.json").read_text())
    row = json.loads((ROOT / "lab" / "records" / "search_probes_501.json").read_text())
    heuristic = row["agents"]["heuristic"]
    assert (pin["episodes"], pin["won"], pin["wins"]) == (
        heuristic["episodes"],
        heuristic["won"],
        heuristic["wins"],
    )
    assert pin["commit"] == heuristic["commit"]


def test_a_shipped_models_rounds_count_the_run_it_continued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    leg = tmp_path / "leg"
    leg.mkdir()
    (leg / "expert_iteration.json").write_text(json.dumps({"rounds": [{}, {}]}))
    monkeypatch.setattr(tables, "MODELS_DIR", tmp_path)
    assert tables.shipped_rounds("leg") == 2
    (leg / "start_expert_iteration.json").write_text(json.dumps({"rounds": [{}] * 5}))
    assert tables.shipped_rounds("leg") == 7
