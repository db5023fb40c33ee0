"""Golden playthroughs (OpenSpiel style): replay every recorded game and diff every step.

The files in ``tests/golden/`` are written by ``tests/regen_golden.py``; after an
intended change of the rules or of the observation/info contract, regenerate them
with ``python tests/regen_golden.py`` and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import load_file

from coldiron_env.env import ColdIronEnv

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
SCRIPT = Path(__file__).resolve().parent.parent / "tests" / "regen_golden.py"
FILES = sorted(GOLDEN_DIR.glob("*.json"))
OUTCOMES = {"won", "slain", "deck_exhausted", "midnight", "illegal"}


def jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def first_difference(expected: Any, got: Any, where: str) -> str | None:
    """Path and values of the first difference between two JSON values, or None."""
    if isinstance(expected, dict) and isinstance(got, dict):
        for key in sorted(set(expected) | set(got)):
            if key not in got:
                return f"{where}.{key}: missing (expected {expected[key]!r})"
            if key not in expected:
                return f"{where}.{key}: unexpected key (got {got[key]!r})"
            diff = first_difference(expected[key], got[key], f"{where}.{key}")
            if diff:
                return diff
        return None
    if isinstance(expected, list) and isinstance(got, list):
        if len(expected) != len(got):
            return f"{where}: length {len(got)}, expected {len(expected)}"
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            diff = first_difference(e, g, f"{where}[{i}]")
            if diff:
                return diff
        return None
    if type(expected) is not type(got) and not (
        isinstance(expected, (int, float)) and isinstance(got, (int, float))
    ):
        return f"{where}: type {type(got).__name__}, expected {type(expected).__name__}"
    if expected != got:
        return f"{where}: got {got!r}, expected {expected!r}"
    return None


def test_golden_files_exist() -> None:
    assert len(FILES) >= 24, (
        f"expected a few dozen golden games in {GOLDEN_DIR}, found {len(FILES)}"
    )


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_replay_golden_game(path: Path) -> None:
    record = load(path)
    assert record["format"] == 1, f"{path.name}: unknown format {record['format']}"
    env = ColdIronEnv(**record["env_kwargs"])
    obs, info = env.reset(options={"deck": record["deck"]})
    got = {"obs": jsonable(obs), "info": jsonable(info)}
    diff = first_difference(record["reset"], got, "reset")
    assert diff is None, f"{path.name}: reset differs: {diff}"
    for i, step in enumerate(record["steps"]):
        obs, reward, terminated, truncated, info = env.step(step["action"])
        got = {
            "action": step["action"],
            "obs": jsonable(obs),
            "reward": float(reward),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "info": jsonable(info),
        }
        diff = first_difference(step, got, f"step {i}")
        assert diff is None, (
            f"{path.name}: first difference at step {i} (action {step['action']}): {diff}"
        )
    assert record["steps"][-1]["terminated"], f"{path.name}: the recorded game does not end"
    assert info["outcome"] == record["outcome"], f"{path.name}: outcome"


@pytest.mark.parametrize(
    "path", [p for p in FILES if load(p)["seed"] is not None], ids=lambda p: p.stem
)
def test_golden_seed_gives_the_recorded_deal(path: Path) -> None:
    record = load(path)
    env = ColdIronEnv(**record["env_kwargs"])
    env.reset(seed=record["seed"])
    from coldiron_env.cards import deck_codes

    assert deck_codes(env.game.deck) == record["deck"], (
        f"{path.name}: reset(seed={record['seed']}) deals another deck than recorded "
        "(the dealer changed: regenerate the golden files if that was intended)"
    )


def test_golden_set_covers_outcomes_variants_and_phases() -> None:
    records = [load(p) for p in FILES]
    outcomes = {r["outcome"] for r in records}
    assert outcomes == OUTCOMES, f"golden set lacks outcome(s) {sorted(OUTCOMES - outcomes)}"
    kwargs = [r["env_kwargs"] for r in records]
    assert any(k.get("bonus_always") for k in kwargs)
    assert any(k.get("bonus_joker_grants_more") for k in kwargs)
    assert any(k.get("observation_mode") == "dict" for k in kwargs)
    assert any(k.get("recall") for k in kwargs)
    phases = {s["info"]["phase"] for r in records for s in r["steps"]}
    assert phases == {"turn", "iron", "bonus", "over"}
    taken = [s for r in records for s in r["steps"] if s["action"] == 18]
    declined = [
        s
        for r in records
        for prev, s in zip(r["steps"], r["steps"][1:], strict=False)
        if s["action"] == 17 and prev["info"]["phase"] == "bonus"
    ]
    assert taken and declined, "golden set must take and decline a Joker's bonus"


def test_regen_check_mode_reports_up_to_date() -> None:
    module = load_file(SCRIPT, "regen_golden")
    assert module.main(["--check"]) == 0, "golden files are stale: run tests/regen_golden.py"


def test_diff_names_the_first_difference() -> None:
    a = {"info": {"hurt": 1, "hand": ["5H"]}, "obs": [0.0, 1.0]}
    b = {"info": {"hurt": 2, "hand": ["5H"]}, "obs": [0.0, 0.5]}
    assert first_difference(a, b, "step 3") == "step 3.info.hurt: got 2, expected 1"
    assert first_difference(a, a, "x") is None
    assert "missing" in (first_difference(a, {"obs": [0.0, 1.0]}, "s") or "")
