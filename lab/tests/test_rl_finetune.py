"""PPO again on a trained network (lab/experiments/rl_finetune.py): what it deals, what it
writes, what it refuses."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import load_file, network_weights, read_audit, streams_of

pytest.importorskip("sb3_contrib")


from agents.evaluation.arena import deal_decks
from agents.learning.config import load_config
from agents.learning.provenance import META_FILE, file_hashes
from agents.learning.sb3_agent import CONFIG_FILE, MODEL_FILE, SB3Agent
from agents.registry import SHIPPED_MODELS, make_agent
from coldiron_env.dealer import DealStream

ROOT = Path(__file__).resolve().parents[2]
finetune = load_file(ROOT / "lab" / "experiments" / "rl_finetune.py", "_script_rl_finetune")
SEED = 3
LEARNING_RATE = 1e-4


@pytest.mark.slow
def test_a_run_deals_training_deals_and_writes_a_loadable_run(audit: Path, tmp_path: Path) -> None:
    out = tmp_path / "again"
    argv = ["--start", "trained", "--seed", str(SEED), "--steps", "1",
            "--learning-rate", str(LEARNING_RATE), "--out", str(out)]  # fmt: skip
    assert finetune.main(argv) == 0

    records = read_audit(audit)
    assert records, "nothing was dealt: the run did not run"
    assert set(streams_of(records)) == {DealStream.TRAINING}
    n_envs = load_config(SHIPPED_MODELS["trained"] / CONFIG_FILE).training.n_envs
    # SB3 seeds the VecEnv with the run's seed: a plain VecEnv would deal env i the first
    # deal of evaluation seed SEED + i.
    plain = {tuple(deal_decks(SEED + i, 1)[0].tolist()) for i in range(n_envs)}
    assert not plain & {deck for _, deck in records}

    meta = json.loads((out / META_FILE).read_text())
    assert (meta["status"], meta["seed"], meta["start"]) == ("completed", SEED, "trained")
    assert meta["steps_trained"] >= n_envs  # at least one rollout, whatever --steps says
    assert meta["sha256"] == file_hashes(out, [MODEL_FILE, CONFIG_FILE])
    start_meta = (SHIPPED_MODELS["trained"] / META_FILE).read_text()
    assert (out / "start_meta.json").read_text() == start_meta
    cfg = load_config(out / CONFIG_FILE)
    assert cfg.seed == SEED
    assert cfg.algorithm.hyperparameters["learning_rate"] == LEARNING_RATE

    again = make_agent(str(out))  # evaluate.py, ladder.py and play.py load it so
    assert isinstance(again, SB3Agent)
    assert again.model.learning_rate == LEARNING_RATE
    start = make_agent("trained")
    assert isinstance(start, SB3Agent)
    assert not np.array_equal(network_weights(again), network_weights(start)), (
        "training changed nothing"
    )


def test_a_used_out_or_a_tampered_start_is_refused(tmp_path: Path) -> None:
    used = tmp_path / "used"
    used.mkdir()
    (used / "note").write_text("keep")
    with pytest.raises(SystemExit, match="used: exists and is not empty"):
        finetune.main(["--seed", "1", "--steps", "1", "--out", str(used)])
    assert (used / "note").read_text() == "keep"

    start = tmp_path / "start"
    shutil.copytree(SHIPPED_MODELS["trained"], start)
    config = start / CONFIG_FILE
    config.write_text(config.read_text().replace("seed: 0", "seed: 1", 1))
    out = tmp_path / "out"
    with pytest.raises(SystemExit, match=f"--start {re.escape(str(start))}: .*{CONFIG_FILE}"):
        finetune.main(["--start", str(start), "--seed", "1", "--steps", "1", "--out", str(out)])
    assert not out.exists(), "nothing is written before the check"
