"""Smoke test of ``scripts/benchmark.py`` with its tiny ``--quick`` budget (no speed asserted)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from helpers import load_file

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "benchmark.py"


def load_benchmark() -> ModuleType:
    return load_file(SCRIPT, "coldiron_benchmark")


def test_batched_policy_picks_uniformly_among_legal_actions() -> None:
    bench = load_benchmark()
    masks = np.zeros((3000, 5), dtype=np.int8)
    masks[:1000, [1, 3]] = 1
    masks[1000:2000, :] = 1
    masks[2000:, 4] = 1
    policy = bench.BatchedRandomLegal(5, seed=0)
    counts = np.zeros((3, 5))
    for _ in range(20):
        actions = policy.act(masks)
        assert masks[np.arange(3000), actions].all()
        for group in range(3):
            counts[group] += np.bincount(actions[group * 1000 : (group + 1) * 1000], minlength=5)
    np.testing.assert_allclose(counts[0][[1, 3]] / 20000, [0.5, 0.5], atol=0.02)
    np.testing.assert_allclose(counts[1] / 20000, [0.2] * 5, atol=0.02)
    assert counts[2][4] == 20000
    single = bench.RandomLegal(5, seed=0)
    picks = {single.act(masks[0]) for _ in range(200)}
    assert picks == {1, 3}
    assert {single.act(None) for _ in range(500)} == set(range(5))


@pytest.mark.slow
def test_quick_benchmark_prints_the_table_and_writes_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = load_benchmark()
    out = tmp_path / "figures" / "bench.json"
    assert bench.main(["--quick", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    figures = json.loads(out.read_text())
    names = [row["name"] for row in figures["throughput"]]
    backends = ["numba"] if bench.NUMBA_AVAILABLE else ["python"]
    sizes = bench.QUICK.native_sizes
    assert names == [
        "Blackjack-v1",
        "ColdIron single (flat)",
        "ColdIron single (recall)",
        "SyncVectorEnv x8",
        *(f"native {b} x{n:,}" for b in backends for n in sizes),
        f"native {backends[0]} x{sizes[len(sizes) // 2]:,} (counting)",
    ]
    for row in figures["throughput"]:
        assert row["steps"] > 0 and row["episodes"] > 0, row
        assert row["steps_per_s"] > 0 and row["bytes_per_env"] > 0, row
        assert row["name"] in printed
    assert figures["throughput"][0]["ratio"] == pytest.approx(1.0)
    assert [t["name"].split(" x")[0] for t in figures["training"]] == [
        "default config",
        "MaskablePPO + native vector env",
        "MaskablePPO + DummyVecEnv",
    ]
    for row in figures["training"]:
        assert row["timesteps"] > 0 and 0 < row["env_share"] < 1, row
    compiled_rows = list(bench.LABEL_PROCESSES) if bench.NUMBA_AVAILABLE else []
    assert [row["processes"] for row in figures["labelling"]] == [1, *compiled_rows]
    for row in figures["labelling"]:
        assert row["deals"] == bench.QUICK.label_deals and row["decisions"] > row["deals"], row
        assert row["wall_seconds"] > 0 and row["name"] in printed, row
    # the 4,096-env target is not held to --quick's 256 envs (it printed a false "NOT met")
    assert set(figures["targets"]) == {
        "single_vs_blackjack",
        "training_env_share",
        "default_config_steps_per_s",
    }
    assert "target single_vs_blackjack" in printed and "_256_vs_blackjack" not in printed
    assert not list(out.parent.glob("*.tmp"))  # the write was atomic


@pytest.mark.parametrize(
    ("args", "named"),
    [(["--seed", "-5"], "--seed must be >= 0, got -5"), (["--json", "."], "is a directory")],
)
def test_bad_arguments_are_refused_before_anything_runs(
    args: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = load_benchmark()
    with pytest.raises(SystemExit) as stop:
        bench.main([*args, "--quick"])
    assert stop.value.code == 2 and named in capsys.readouterr().err
