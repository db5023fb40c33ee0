"""What the commands of ``scripts/`` share: their parser, their exit statuses, their refusals."""

from __future__ import annotations

import argparse
import sys
from typing import Final

EXIT_ERROR: Final = 2  # a refused input (argparse's own status for a bad flag)
EXIT_INTERRUPTED: Final = 130  # stopped by Ctrl-C or SIGTERM, what was done kept


def command_parser(doc: str | None) -> argparse.ArgumentParser:
    """A command's parser, its help the command's docstring as written."""
    return argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def refuse(reason: object) -> int:
    """Say ``error: REASON`` on stderr; returns :data:`EXIT_ERROR` for the command to exit with."""
    print(f"error: {reason}", file=sys.stderr, flush=True)
    return EXIT_ERROR
