"""Runs survive a hard kill: ``kill -9`` of a training process, then ``--resume``.

A child process trains a tiny run and pauses at a chosen moment (it writes a marker file,
then sleeps); this process sends it a real SIGKILL there, runs ``scripts/train.py
--resume``, and checks the finished run: the step count, the expert-iteration rounds and
the evaluation history are whole and consistent, nothing in the run directory is
half-written, and the model loads (its SHA-256 as recorded) and evaluates. The moments:
while learning, right after an evaluation (which the checkpoint does not yet hold), around a
checkpoint's rename into place (its folder written whole but not renamed; renamed, the older
one not yet removed), and during expert iteration (while labelling; between a round's record
and its model).
"""

from __future__ import annotations

import csv
import json
import os
import pickle
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from agents.evaluation.arena import agent_seeds, deal_decks, evaluate_agent
from agents.learning.sb3_agent import load_sb3_agent

ROOT = Path(__file__).resolve().parent.parent
WAIT_SECONDS = 180  # a loaded CI machine starts torch slowly

DRIVER = r"""
import os, sys, time
from pathlib import Path
import yaml
from agents.learning import expert_iteration, training
from agents.learning.config import config_from_dict

config, out, moment, marker = sys.argv[1:5]
cfg = config_from_dict(yaml.safe_load(Path(config).read_text()))
calls = {}

def pause(name, nth=1):
    calls[name] = calls.get(name, 0) + 1
    if name == moment and calls[name] == nth:
        Path(marker).write_text(name)
        time.sleep(600)  # killed here

evaluate, rename = training.RunCallback.evaluate, training.os.rename
write_bytes = expert_iteration.atomic_write_bytes
label = expert_iteration.Labellers.label

def evaluated(self):
    record = evaluate(self)
    pause("after-evaluation", 3)
    return record

def renaming(src, dst):
    if Path(src).name.startswith(".partial-"):
        pause("checkpoint-written", 3)
        rename(src, dst)
        pause("checkpoint-renamed", 3)
    else:
        rename(src, dst)

def writing(path, data):
    if Path(path).name == "model.zip":
        pause("round-recorded", 2)
    return write_bytes(path, data)

def labelling(self, *args, **kwargs):
    pause("labelling", 2)
    return label(self, *args, **kwargs)

training.RunCallback.evaluate = evaluated
training.os.rename = renaming
expert_iteration.atomic_write_bytes = writing
expert_iteration.Labellers.label = labelling
if moment == "learning":
    class Marker(training.BaseCallback):
        def _on_step(self):
            if self.model.num_timesteps >= 600:
                Path(marker).write_text("learning")
                time.sleep(0.02)  # the kill lands while learning
            return True
    training.train(cfg, Path(out), extra_callbacks=[Marker()], log=lambda m: None)
else:
    training.train(cfg, Path(out), log=lambda m: None)
"""

STEPS = 1024
ROUNDS = 3


def tiny_config(rounds: int) -> dict[str, Any]:
    return {
        "name": "hard-kill",
        "seed": 5,
        "env": {"counting": True},
        "algorithm": {"name": "maskable_ppo",
                      "hyperparameters": {"n_steps": 16, "batch_size": 64, "n_epochs": 1}},
        "policy": {"net_arch": [16]},
        "training": {"total_timesteps": STEPS, "n_envs": 8, "vec_env": "native",
                     "progress_bar": False},
        "evaluation": {"freq": 256, "episodes": 8, "seed": 4},
        "checkpoint": {"freq": 256},
        "expert_iteration": {"rounds": rounds, "episodes": 4, "budget": "planner-small",
                             "epochs": 1},
    }  # fmt: skip


def kill_at(moment: str, tmp_path: Path, rounds: int = 0) -> Path:
    """Train in a child process, SIGKILL it at ``moment``; return the run directory."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(tiny_config(rounds)))
    out, marker = tmp_path / "run", tmp_path / "marker"
    child = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(config), str(out), moment, str(marker)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + WAIT_SECONDS
    while not marker.exists():
        if child.poll() is not None:
            pytest.fail(f"the run ended before {moment}: {child.stderr.read()[-2000:]}")  # type: ignore[union-attr]
        if time.monotonic() > deadline:
            child.kill()
            pytest.fail(f"the run never reached {moment}")
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL
    return out


def resume(out: Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "train.py"), "--resume", str(out),
         "--no-progress-bar"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def check_whole(out: Path, rounds: int, resumed: bool = True) -> None:
    """Every file of the finished run is complete and readable, and the records agree."""
    leftovers = [p.name for p in out.iterdir() if p.name.startswith(".")]
    assert not leftovers, leftovers
    (checkpoint,) = (out / "checkpoints").iterdir()  # the newest only, whole
    assert checkpoint.name.isdigit() and (checkpoint / "state.json").is_file(), checkpoint
    for path in out.rglob("*"):
        if not path.is_file():
            continue
        if path.suffix == ".json":
            json.loads(path.read_text())
        elif path.suffix == ".zip":
            with zipfile.ZipFile(path) as archive:
                assert archive.testzip() is None, path
        elif path.suffix == ".pkl":
            with path.open("rb") as fh:
                pickle.load(fh)
        elif path.suffix == ".csv":
            rows = list(csv.reader(path.open()))
            assert rows and all(len(r) == len(rows[0]) for r in rows), path
        elif path.suffix == ".yaml":
            yaml.safe_load(path.read_text())
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "completed" and meta["timesteps"] == STEPS
    assert bool(meta.get("resumes")) == resumed
    history = json.loads((out / "evaluations.json").read_text())["evaluations"]
    steps = [h["timesteps"] for h in history]
    assert steps == sorted(set(steps)), f"evaluations out of order or repeated: {steps}"
    assert steps[0] == 0 and steps[-1] == STEPS
    state = json.loads((checkpoint / "state.json").read_text())
    assert state["timesteps"] == STEPS
    if rounds:
        done = json.loads((out / "expert_iteration.json").read_text())["rounds"]
        assert [r["round"] for r in done] == list(range(rounds))
    agent = load_sb3_agent(out)  # SHA-256 of every file as meta.json records
    result = evaluate_agent(agent, deal_decks(1, 20), agent_seeds(1, 20))
    assert result.episodes == 20 and result.outcomes["illegal"] == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "moment", ["learning", "after-evaluation", "checkpoint-written", "checkpoint-renamed"]
)
def test_a_hard_kill_during_rl_then_resume_finishes_the_run(moment: str, tmp_path: Path) -> None:
    out = kill_at(moment, tmp_path)
    newest = max((out / "checkpoints").glob("[0-9]*"), key=lambda p: int(p.name))
    before = json.loads((newest / "state.json").read_text())["timesteps"]
    history = json.loads((out / "evaluations.json").read_text())["evaluations"]
    proc = resume(out)
    assert f"resuming {out} at {before} timesteps" in proc.stdout
    if moment == "after-evaluation":  # its evaluation is newer than the checkpoint
        assert history[-1]["timesteps"] > before
        assert "dropped (their model was not checkpointed)" in proc.stdout
    if moment.startswith("checkpoint-"):  # the unrenamed folder, or the older checkpoint
        assert "removed what a hard stop left behind: checkpoints/" in proc.stdout
    after = json.loads((out / "evaluations.json").read_text())["evaluations"]
    kept = [h for h in history if h["timesteps"] <= before]
    assert after[: len(kept)] == kept, "the evaluations the checkpoint holds are kept as they were"
    check_whole(out, 0)


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["labelling", "round-recorded"])
def test_a_hard_kill_during_expert_iteration_then_resume_finishes_the_rounds(
    moment: str, tmp_path: Path
) -> None:
    out = kill_at(moment, tmp_path, rounds=ROUNDS)
    recorded = json.loads((out / "expert_iteration.json").read_text())["rounds"]
    assert len(recorded) == (2 if moment == "round-recorded" else 1)
    proc = resume(out)
    if moment == "round-recorded":  # round 2's record was written, its model was not
        assert "round 2 was recorded but its model was not written" in proc.stdout
    check_whole(out, ROUNDS)
    first = json.loads((out / "expert_iteration.json").read_text())["rounds"][0]
    assert first == recorded[0], "the first round's record is kept as it was"


@pytest.mark.slow
def test_a_run_killed_before_its_first_checkpoint_starts_over(tmp_path: Path) -> None:
    """A run directory whose meta.json says ``running`` but holds no checkpoint (a kill
    between the two writes, or before the first checkpoint): --resume starts it over."""
    from agents.learning.config import config_from_dict
    from agents.learning.training import prepare_run_dir, train

    cfg = config_from_dict(tiny_config(0))
    run = prepare_run_dir(cfg, tmp_path / "run", None)
    (run.root / "meta.json").write_text(json.dumps({"status": "running", "seed": 5}))
    (run.root / "checkpoints" / ".partial-deadbeef").mkdir(parents=True)  # half-written
    logs: list[str] = []
    result = train(cfg, resume=run.root, log=logs.append)
    assert not result.interrupted and result.timesteps == STEPS
    assert any("stopped before training began" in m for m in logs)
    check_whole(run.root, 0, resumed=False)
