"""Render every table of the README and docs/ from the committed JSON records.

    .venv/bin/python scripts/tables.py           # rewrite the tables that differ
    .venv/bin/python scripts/tables.py --check   # exit 1 if any table differs from its record

A table is the text between ``<!-- table:NAME -->`` and ``<!-- /table -->`` (names and
records: ``agents/tables.py``). Run it after a command rewrites a record; it also draws
the README's chart of the ladder and the ceiling (``docs/ceiling.png``).
"""

from __future__ import annotations

import argparse

from agents.gitinfo import REPO_ROOT
from agents.tables import ceiling_chart, markdown_files, refresh


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 on drift")
    args = parser.parse_args(argv)
    drift = 0
    for path in markdown_files():
        changed = refresh(path, check=args.check)
        for name in changed:
            verb = "differs" if args.check else "rewritten"
            print(f"{path.relative_to(REPO_ROOT)}: table {name} {verb}")
        drift += len(changed)
    if not args.check:
        ceiling_chart()
    return 1 if args.check and drift else 0


if __name__ == "__main__":
    raise SystemExit(main())
