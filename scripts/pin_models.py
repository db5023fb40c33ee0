"""Pin the shipped models: SHA-256 of their files in their meta.json, and their games.

    .venv/bin/python scripts/pin_models.py           # check: every shipped model as pinned
    .venv/bin/python scripts/pin_models.py --write   # after reshipping a model on purpose

See ``agents/pins.py``. Exit status 0 when every pin holds (or was written), 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys

from agents.pins import PINS_FILE, meta_hash, outcome_counts, read_pins, write_pins
from agents.registry import set_torch_threads


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
