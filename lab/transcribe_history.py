"""Transcribe the figure tables of an earlier commit's README and docs into a JSON record.

    .venv/bin/python -m lab.transcribe_history --commit 8ad2cac \
        --out lab/docs/history/tables-8ad2cac.json

Figures of runs whose directories were not kept (the earlier configs' seeds, the learning
experiments, older ladders) exist only as the tables written at the time. This copies every
markdown table of the given files at ``--commit`` into one JSON file, cell for cell, with
the commit and file it came from, so that the docs can keep showing them (rendered from this
record by ``lab/tables.py``, checked by lab/tests/test_tables.py) as what they are: history,
transcribed, not recomputed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from agents.atomic import atomic_write_json
from lab import RECORDS, ROOT  # noqa: F401

# the files as they were named at the commits transcribed (bound.md and experiments.md, ladder.md
# have since moved to lab/docs/)
FILES = ("README.md", "docs/experiments.md", "docs/ladder.md", "docs/models.md", "docs/tuning.md")


def tables_of(text: str) -> list[list[list[str]]]:
    """Every markdown table of ``text``: rows of cells (header first, the rule dropped)."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):
                current.append(cells)
        elif current:
            tables.append(current)
            current = []
    return tables


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commit", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    record: dict[str, object] = {"commit": args.commit, "command": " ".join(sys.argv), "files": {}}
    files: dict[str, list[list[list[str]]]] = {}
    for name in FILES:
        text = subprocess.run(
            ["git", "show", f"{args.commit}:{name}"], cwd=ROOT, capture_output=True,
            text=True, check=True,
        ).stdout  # fmt: skip
        files[name] = tables_of(text)
    record["files"] = files
    atomic_write_json(args.out, record)
    print(f"wrote {args.out}: {sum(len(t) for t in files.values())} tables")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
