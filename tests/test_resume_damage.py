"""``--resume`` on a run directory someone else has touched: a user's files are never
deleted, only the newest complete checkpoint is kept, a run of the older layout (a
``checkpoint`` folder or link) resumes, and a missing or damaged record is refused naming the
file (no traceback, nothing written)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from agents.learning.config import config_from_dict
from agents.learning.provenance import TrainingError
from agents.learning.training import (
    STATE_FILE,
    RunDir,
    latest_checkpoint,
    prepare_run_dir,
    save_checkpoint,
    tidy_checkpoints,
    train,
)


def tiny() -> Any:
    return config_from_dict(
        {
            "algorithm": {
                "name": "maskable_ppo",
                "hyperparameters": {"n_steps": 16, "batch_size": 64, "n_epochs": 1},
            },
            "policy": {"net_arch": [16]},
            "training": {"total_timesteps": 1024, "n_envs": 4, "progress_bar": False},
        }
    )


def checkpoint(folder: Path, steps: int) -> Path:
    folder.mkdir(parents=True)
    (folder / "model.zip").write_bytes(b"not a zip: a resume that gets this far refuses it")
    (folder / STATE_FILE).write_text(json.dumps({"timesteps": steps}))
    return folder


class Model:
    """What ``save_checkpoint`` asks of a model."""

    num_timesteps = 0

    def save(self, target: Any) -> None:
        target.write(b"model")

    def get_vec_normalize_env(self) -> None:
        return None


def test_saving_keeps_only_the_newest_checkpoint(tmp_path: Path) -> None:
    run, model = RunDir(tmp_path), Model()
    for steps in (64, 128, 192):
        model.num_timesteps = steps
        save_checkpoint(model, run, tiny())  # type: ignore[arg-type]
    assert [p.name for p in run.checkpoints.iterdir()] == ["000003"]
    ck = latest_checkpoint(run)
    assert ck is not None and json.loads((ck / STATE_FILE).read_text())["timesteps"] == 192


def test_tidying_removes_only_what_training_made(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    checkpoint(run.checkpoints / "000001", 100)
    newest = checkpoint(run.checkpoints / "000002", 200)
    (run.checkpoints / ".partial-0123abcd").mkdir()  # a kill while writing a checkpoint
    (tmp_path / ".meta.json.k2j_x9a1.tmp").write_text("{")  # atomic_target's temporary
    mine = ["checkpoint-backup", "checkpoints/my-copy", "checkpoints/.partial-notes", ".notes.tmp"]
    for name in mine:
        (tmp_path / name).mkdir()
    removed = tidy_checkpoints(run)
    made = ["checkpoints/000001", "checkpoints/.partial-0123abcd", ".meta.json.k2j_x9a1.tmp"]
    assert removed == sorted(made)
    assert all((tmp_path / name).exists() for name in mine) and newest.is_dir()
    assert latest_checkpoint(run) == newest


def test_a_run_of_the_older_layout_resumes_from_its_checkpoint_link(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    old = checkpoint(tmp_path / "checkpoint-000000000200-89abcdef", 200)
    os.symlink(old.name, tmp_path / "checkpoint")
    assert latest_checkpoint(run) == tmp_path / "checkpoint"
    model = Model()
    model.num_timesteps = 300
    new = save_checkpoint(model, run, tiny())  # type: ignore[arg-type]
    assert latest_checkpoint(run) == new == run.checkpoints / "000001"
    assert old.is_dir(), "the older layout's checkpoint is left as it was"


def _stopped_run(tmp_path: Path) -> RunDir:
    """A run directory as a stop leaves it (the checkpoint's model is never read here)."""
    run = prepare_run_dir(tiny(), tmp_path / "run", None)
    checkpoint(run.checkpoints / "000001", 64)  # RL to go on
    (run.root / "meta.json").write_text(json.dumps({"status": "interrupted", "seed": 0}))
    return run


def files(run: RunDir) -> dict[str, bytes]:
    return {
        str(p.relative_to(run.root)): p.read_bytes() for p in run.root.rglob("*") if p.is_file()
    }


def newest(run: RunDir) -> Path:
    ck = latest_checkpoint(run)
    assert ck is not None
    return ck


@pytest.mark.parametrize(
    ("damage", "named", "says"),
    [
        (lambda r: (r.root / "meta.json").unlink(), "meta.json", "missing"),
        (lambda r: (r.root / "meta.json").write_text('{"status": "interr'), "meta.json", "JSON"),
        (lambda r: (r.root / "meta.json").write_bytes(b"\x90\x00PK"), "meta.json", "JSON"),
        (lambda r: (r.root / "meta.json").write_text("[1, 2]"), "meta.json", "dict"),
        (
            lambda r: (newest(r) / STATE_FILE).write_text('{"timesteps": "abc"}'),
            STATE_FILE,
            "'abc'",
        ),
        (lambda r: (r.root / "evaluations.json").write_text('{"evaluat'), "evaluations", "JSON"),
        (lambda r: (r.root / "expert_iteration.json").write_text('{"rounds": ['), "expert", "JSON"),
        (
            lambda r: (newest(r) / "model.zip").write_bytes(b"PK\x03\x04 cut"),
            "model.zip",
            "cannot",
        ),
    ],
    ids=[
        "meta-missing",
        "meta-truncated",
        "meta-binary",
        "meta-a-list",
        "state-not-a-count",
        "evaluations",
        "expert-rounds",
        "model-cut-short",
    ],
)
def test_a_missing_or_damaged_record_is_refused_naming_it_before_anything_is_written(
    tmp_path: Path, damage: Any, named: str, says: str
) -> None:
    run = _stopped_run(tmp_path)
    damage(run)
    before = files(run)
    with pytest.raises(TrainingError) as err:
        train(tiny(), resume=run.root, log=lambda _m: None)
    assert named in str(err.value) and says in str(err.value)
    assert files(run) == before, "nothing written"
