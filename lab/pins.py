"""Pins of the shipped models: the SHA-256 of every file, and the games each one plays.

    .venv/bin/python -m lab.pins           # check: every shipped model as pinned
    .venv/bin/python -m lab.pins --write   # after reshipping a model on purpose

Two guards against a swapped or retrained model passing for the shipped one:

- each shipped folder's ``meta.json`` records the SHA-256 of every other file in it
  (``sha256``); :func:`agents.learning.sb3_agent.load_sb3_agent` refuses a file that
  differs, naming it;
- ``tests/pins/shipped_models.json`` records those hashes, the SHA-256 of ``meta.json``
  itself (``meta_sha256``: its provenance cannot change unnoticed either) and each shipped
  model's outcome counts on :data:`PIN_DEALS` fixed validation deals (validation seed
  :data:`PIN_SEED`); tests/test_shipped_models.py checks the hashes and plays the deals
  again, and ``lab/pins.py`` checks both.

``lab/pins.py --write`` records both after a model is (re)shipped on purpose.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Final

from agents.atomic import atomic_write_json
from agents.evaluation.arena import evaluate
from agents.gitinfo import git_commit, utc_now
from agents.learning.provenance import META_FILE, SHA256_KEY, file_hashes, sha256_file
from agents.registry import SHIPPED_MODELS, make_agent, set_torch_threads
from lab import RECORDS, ROOT  # noqa: F401

PIN_SEED: Final = 900
"""Validation seed of the pinned deals (a deal stream no report or choice uses)."""
PIN_DEALS: Final = 1_000
PINS_FILE: Final = ROOT / "tests" / "pins" / "shipped_models.json"


def shipped_files(folder: Path) -> list[str]:
    """Every file a shipped model's folder holds but its ``meta.json``."""
    return sorted(p.name for p in folder.iterdir() if p.is_file() and p.name != META_FILE)


def pin_hashes(name: str) -> dict[str, str]:
    """Record in ``meta.json`` the SHA-256 of every file of shipped model ``name``."""
    folder = SHIPPED_MODELS[name]
    meta_path = folder / META_FILE
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta[SHA256_KEY] = file_hashes(folder, shipped_files(folder))
    atomic_write_json(meta_path, meta)
    return dict(meta[SHA256_KEY])


def meta_hash(name: str) -> str:
    """The SHA-256 of shipped model ``name``'s ``meta.json``."""
    return sha256_file(SHIPPED_MODELS[name] / META_FILE)


def outcome_counts(name: str, episodes: int = PIN_DEALS, seed: int = PIN_SEED) -> dict[str, int]:
    """The outcome counts of ``name`` on the first ``episodes`` validation deals of ``seed``."""
    (result,) = evaluate([(name, make_agent(name))], episodes, seed, validation=True)
    return dict(result.outcomes)


def write_pins() -> dict[str, Any]:
    """Hash every shipped model's files and record its outcome counts (the pins file)."""
    doc: dict[str, Any] = {
        "deals": f"the first {PIN_DEALS} validation deals of seed {PIN_SEED}: "
        "reset(seed=stream_seed(DealStream.VALIDATION, seed, k))",
        "command": ".venv/bin/python -m lab.pins --write",
        "commit": git_commit(),
        "time": utc_now(),
        "models": {},
    }
    for name in sorted(SHIPPED_MODELS):
        hashes = pin_hashes(name)
        doc["models"][name] = {
            "sha256": hashes,
            "meta_sha256": meta_hash(name),
            "outcomes": outcome_counts(name),
        }
    atomic_write_json(PINS_FILE, doc)
    return doc


def read_pins() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(PINS_FILE.read_text(encoding="utf-8"))
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="record the pins anew")
    args = parser.parse_args(argv)
    set_torch_threads()
    if args.write:
        doc = write_pins()
        for name, pin in doc["models"].items():
            print(f"{name}: {pin['outcomes']}")
        print(f"wrote {PINS_FILE}")
        return 0
    failed = 0
    for name, pin in read_pins()["models"].items():
        if meta_hash(name) != pin["meta_sha256"]:
            print(f"{name}: meta.json changed since it was pinned", file=sys.stderr)
            failed += 1
            continue
        try:
            counts = outcome_counts(name)
        except ValueError as err:  # a changed file: refused on load
            print(f"{name}: {err}", file=sys.stderr)
            failed += 1
            continue
        same = counts == pin["outcomes"]
        failed += not same
        pinned = pin["outcomes"]
        print(f"{name}: " + ("as pinned" if same else f"{counts}, pinned {pinned}"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
