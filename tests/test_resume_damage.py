"""``--resume`` on a run directory someone else has touched: a user's files are never
deleted, a dropped ``checkpoint`` link is mended rather than its folder removed, and a
missing or damaged record is refused naming the file (no traceback, nothing written)."""

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
    prepare_run_dir,
    relink_checkpoint,
    tidy_checkpoints,
    train,
)

SLOT_OLD = "checkpoint-000000000100-0123abcd"
SLOT_NEW = "checkpoint-000000000200-89abcdef"


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


def slot(root: Path, name: str, steps: int) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "model.zip").write_bytes(b"not a zip: a resume that gets this far refuses it")
    (folder / STATE_FILE).write_text(json.dumps({"timesteps": steps}))
    return folder


def test_tidying_removes_only_what_training_made(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    slot(tmp_path, SLOT_OLD, 100)
    slot(tmp_path, SLOT_NEW, 200)
    os.symlink(SLOT_NEW, tmp_path / "checkpoint")
    made = [".staging-" + SLOT_OLD, ".staging-link-0123abcd"]
    for name in made:
        (tmp_path / name).mkdir()
    (tmp_path / ".meta.json.k2j_x9a1.tmp").write_text("{")  # atomic_target's temporary
    mine = ["checkpoint-my-backup", "checkpoint-notes.txt", ".notes.tmp", "checkpoint-7"]
    (tmp_path / mine[0]).mkdir()
    for name in mine[1:]:
        (tmp_path / name).write_text("mine")
    removed = tidy_checkpoints(run)
    assert removed == sorted([SLOT_OLD, *made, ".meta.json.k2j_x9a1.tmp"])
    assert all((tmp_path / name).exists() for name in [*mine, SLOT_NEW, "checkpoint"])


def test_a_dropped_link_is_mended_and_no_checkpoint_is_removed(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    slot(tmp_path, SLOT_OLD, 100)
    slot(tmp_path, SLOT_NEW, 200)
    (tmp_path / "checkpoint-000000000300-00000000").mkdir()  # incomplete: never linked to
    assert tidy_checkpoints(run) == [], "nothing removed while the link is missing"
    assert relink_checkpoint(run) == SLOT_NEW
    assert (tmp_path / "checkpoint").resolve() == (tmp_path / SLOT_NEW).resolve()
    assert relink_checkpoint(run) is None, "a sound link is left alone"
    (tmp_path / "checkpoint").unlink()
    os.symlink("checkpoint-gone", tmp_path / "checkpoint")  # broken
    assert relink_checkpoint(run) == SLOT_NEW
    assert json.loads((tmp_path / "checkpoint" / STATE_FILE).read_text())["timesteps"] == 200


def _stopped_run(tmp_path: Path) -> RunDir:
    """A run directory as a stop leaves it (the checkpoint's model is never read here)."""
    run = prepare_run_dir(tiny(), tmp_path / "run", None)
    slot(run.root, SLOT_NEW, 200)
    os.symlink(SLOT_NEW, run.root / "checkpoint")
    (run.root / "meta.json").write_text(json.dumps({"status": "interrupted", "seed": 0}))
    (run.checkpoint / STATE_FILE).write_text(json.dumps({"timesteps": 64}))  # RL to go on
    return run


@pytest.mark.parametrize(
    ("damage", "named", "says"),
    [
        (lambda r: (r.root / "meta.json").unlink(), "meta.json", "missing"),
        (lambda r: (r.root / "meta.json").write_text('{"status": "interr'), "meta.json", "JSON"),
        (lambda r: (r.root / "meta.json").write_bytes(b"\x90\x00PK"), "meta.json", "JSON"),
        (lambda r: (r.root / "meta.json").write_text("[1, 2]"), "meta.json", "dict"),
        (
            lambda r: (r.checkpoint / STATE_FILE).write_text('{"timesteps": "abc"}'),
            STATE_FILE,
            "'abc'",
        ),
        (lambda r: (r.root / "evaluations.json").write_text('{"evaluat'), "evaluations", "JSON"),
        (lambda r: (r.root / "expert_iteration.json").write_text('{"rounds": ['), "expert", "JSON"),
        (
            lambda r: (r.checkpoint / "model.zip").write_bytes(b"PK\x03\x04 cut"),
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
    before = {p.name: p.read_bytes() for p in run.root.iterdir() if p.is_file()}
    with pytest.raises(TrainingError) as err:
        train(tiny(), resume=run.root, log=lambda _m: None)
    assert named in str(err.value) and says in str(err.value)
    after = {p.name: p.read_bytes() for p in run.root.iterdir() if p.is_file()}
    assert after == before, "nothing written"


def test_without_symbolic_links_old_checkpoints_are_still_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where links cannot be made, ``checkpoint`` is a real folder and the one before it is
    renamed aside: tidying removes those, as it removes unlinked slots with links."""
    from agents.learning import training

    class Model:
        num_timesteps = 0

        def save(self, target: Any) -> None:
            target.write(b"model")

        def get_vec_normalize_env(self) -> None:
            return None

    def no_links(*_args: Any) -> None:
        raise OSError("no symbolic links here")

    monkeypatch.setattr(training.os, "symlink", no_links)
    run = RunDir(tmp_path)
    model = Model()
    for steps in (64, 128, 192):
        model.num_timesteps = steps
        training.save_checkpoint(model, run, tiny())  # type: ignore[arg-type]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]
    assert json.loads((tmp_path / "checkpoint" / STATE_FILE).read_text())["timesteps"] == 192
