"""Provenance of a saved model: the commit, the library versions, the time, the meta file.

Every run directory (``scripts/train.py``, ``scripts/distill.py``) records them in its
``meta.json`` so that a figure can be traced to the code and libraries that made it.
"""

from __future__ import annotations

import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Final

import gymnasium as gym
import numpy as np
import sb3_contrib
import stable_baselines3
import torch

import coldiron_env

META_FILE: Final = "meta.json"


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(coldiron_env.__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and commit else "unknown"


def library_versions() -> dict[str, str]:
    return {
        "coldiron": coldiron_env.__version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "stable_baselines3": stable_baselines3.__version__,
        "sb3_contrib": sb3_contrib.__version__,
        "gymnasium": gym.__version__,
        "numpy": np.__version__,
    }


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
