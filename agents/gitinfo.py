"""Where a result came from: the commit of the code, whether the tree had changes, the time.

Light on purpose (git and the standard library only): every layer records provenance, from the look
log of the evaluation (:mod:`lab.looks`) to the run directories (:mod:`agents.learning.provenance`).
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Final

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
"""The checkout the package runs from (an editable install); its ``docs/`` holds records."""
UNKNOWN: Final = "unknown"


def _git(*args: str, root: Path = REPO_ROOT) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def git_commit() -> str:
    """``git rev-parse HEAD`` of the checkout, or ``"unknown"`` outside one."""
    out = _git("rev-parse", "HEAD")
    return out.strip() if out and out.strip() else UNKNOWN


def git_dirty(ignore: Path | Sequence[Path] | None = None, root: Path = REPO_ROOT) -> bool | None:
    """Whether the checkout's tracked files differ from its commit (None outside a checkout).
    Untracked files (run directories, caches) do not count, nor ``ignore``: the records a
    command is filling in (its earlier entries changed them)."""
    ignored = [ignore] if isinstance(ignore, Path) else list(ignore or ())
    exclude: list[str] = []
    for path in ignored:
        with contextlib.suppress(ValueError):  # not in the checkout: it cannot make it dirty
            exclude.append(f":(exclude){path.resolve().relative_to(root.resolve())}")
    if exclude:
        exclude = ["--", ".", *exclude]
    out = _git("status", "--porcelain", "--untracked-files=no", *exclude, root=root)
    return None if out is None else bool(out.strip())


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def code_stamp(ignore: Path | Sequence[Path] | None = None) -> dict[str, str | bool | None]:
    """What a record keeps of the code that made it, taken when the command starts: the
    commit, whether tracked files differed from it (``ignore``: the record itself), the time."""
    return {"commit": git_commit(), "dirty": git_dirty(ignore), "date": utc_now()}
