"""Provenance of a saved model: the commit, the library versions, the time, the meta file.

Every run directory (``scripts/train.py``, ``scripts/distill.py``) records them in its
``meta.json`` so that a figure can be traced to the code and libraries that made it.
"""

from __future__ import annotations

import hashlib
import json
import platform
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Final

import gymnasium as gym
import numpy as np
import sb3_contrib
import stable_baselines3
import torch

import coldiron_env
from agents.gitinfo import git_commit, git_dirty

META_FILE: Final = "meta.json"
SHA256_KEY: Final = "sha256"
"""``meta.json``'s map of file name -> SHA-256 of the files a run directory holds."""


def provenance() -> dict[str, object]:
    """What ``meta.json`` records of the code that made a run: the package version, the
    commit, whether tracked files differed from it (``git_dirty``), the library versions."""
    versions = {"coldiron": coldiron_env.__version__, "python": platform.python_version()}
    for module in (torch, stable_baselines3, sb3_contrib, gym, np):
        versions[module.__name__] = module.__version__
    return {
        "package_version": coldiron_env.__version__,
        "git_commit": git_commit(),
        "git_dirty": git_dirty(),
        "versions": versions,
    }


class TrainingError(RuntimeError):
    """A run that cannot start or continue (a bad run directory, a record of other settings)."""


class FileChanged(ValueError):
    """A file that differs from the SHA-256 its ``meta.json`` records (the message names it)."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_hashes(folder: Path, names: Iterable[str]) -> dict[str, str]:
    """``{name: sha256}`` of those of ``names`` that exist in ``folder``."""
    return {name: sha256_file(folder / name) for name in names if (folder / name).is_file()}


def check_hashes(folder: Path, names: Collection[str] | None = None) -> None:
    """Refuse (:class:`FileChanged`, naming it) a file of ``folder`` (of ``names``, if given)
    missing or differing from the SHA-256 its ``meta.json`` records, if it records any."""
    meta_path = folder / META_FILE
    if not meta_path.is_file():
        return
    try:
        recorded = json.loads(meta_path.read_text(encoding="utf-8")).get(SHA256_KEY) or {}
    except (OSError, ValueError, AttributeError) as exc:
        raise FileChanged(f"{meta_path}: cannot read the recorded hashes: {exc}") from None
    for name, expected in sorted(recorded.items()):
        if names is not None and name not in names:
            continue
        path = folder / name
        if not path.is_file():
            raise FileChanged(f"{path}: missing, but {meta_path} records its SHA-256")
        actual = sha256_file(path)
        if actual != expected:
            raise FileChanged(
                f"{path}: changed since {meta_path} recorded it (SHA-256 {actual[:12]}..., "
                f"recorded {expected[:12]}...): a swapped or retrained model; restore the file "
                "or record the new one with its provenance"
            )
