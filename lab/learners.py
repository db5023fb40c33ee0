"""Which learner for Cold Iron: every shipped recipe at one budget of env steps, 3 seeds each.

    .venv/bin/python -m lab.learners train --budget 2000000 --seeds 0 1 2 \\
        --runs /work/runs/learners-2m --workers 2
    .venv/bin/python -m lab.looks --why "issue 52: the learners' table" -- \\
        .venv/bin/python -m lab.learners report --runs /work/runs/learners-2m \\
        --budget 2000000 --seed 20261130 --episodes 10000 --json docs/records/learners.json

``train`` runs every learner of :data:`LEARNERS` that has not finished (a run a stop cut
short starts again, so that its wall time is its own): each SB3 recipe is its shipped config
with the budget, the seed, one torch thread, no expert iteration (labelled by a search: not
an RL budget), its validation every tenth of the budget, and either no imitation of the
heuristic ("scratch": the env's reward alone) or its imitation warm start as the config
ships it ("imitation"); RLlib's PPO and rl-zoo3's ``ppo_mask`` (no imitation in either) are
run by the product's own commands, their checkpoints scored on the same validation deals.

``plot --json RECORD --png docs/learners.png`` draws the curves from the record.

``report`` plays every run's final network on the evaluation deals of ``--seed`` beside
``heuristic`` and writes the record the table in docs/training.md and the curves
(``--plot``) come from: per learner the mean win rate over seeds with its Student-t
interval, the pooled Wilson interval, the paired difference from ``heuristic`` (per seed,
then Student-t over seeds), env steps per second of training and wall time; per run its
validation curve against env steps and against training seconds (evaluation time left out).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import yaml

from agents.atomic import atomic_write_json
from agents.evaluation.arena import evaluate
from agents.evaluation.stats import mcnemar
from agents.gitinfo import code_stamp
from agents.learning.algorithms import ALGORITHMS
from agents.learning.multiseed import SeedRun, aggregate, t_critical
from lab import unpack_wins
from lab.main_job import cpu_name as model_name

ROOT: Final = Path(__file__).resolve().parents[1]
PYTHON: Final = sys.executable
RLLIB_PYTHON: Final = os.environ.get("COLDIRON_RLLIB_PYTHON", str(ROOT / ".venv-rllib/bin/python"))
"""Ray pins its own Gymnasium: RLlib runs in a venv of its own (scripts/rllib_train.py)."""
CURVE_POINTS: Final = 10  # validations per run, every tenth of the budget
VALIDATION_DEALS: Final = 2000  # of validation seed 0, the SB3 configs' own
BASELINE: Final = "heuristic"
IMITATION: Final = "imitation"
SCRATCH: Final = "scratch"
PERCENT: Final = 100.0


@dataclass(frozen=True)
class Learner:
    """One row: a recipe (``kind`` sb3: a config of configs/; rllib; zoo) and a variant."""

    name: str
    kind: str
    recipe: str
    variant: str

    def run_dir(self, runs: Path, seed: int) -> Path:
        return runs / f"{self.name}-{self.variant}-s{seed}"

    @property
    def masks(self) -> bool:
        """Whether it learns with the action mask (RLlib's and rl-zoo3's PPO do; an SB3 config
        does if its algorithm does: the others are masked only when they play)."""
        if self.kind != "sb3":
            return True
        cfg = yaml.safe_load((ROOT / self.recipe).read_text(encoding="utf-8"))
        return ALGORITHMS[cfg["algorithm"]["name"]].supports_masks


SB3_RECIPES: Final = ("maskable_ppo", "maskable_ppo_wide", "ppo", "a2c", "dqn", "qrdqn",
                      "recurrent_ppo")  # fmt: skip
LEARNERS: Final = (
    *(Learner(r, "sb3", f"configs/{r}.yaml", SCRATCH) for r in SB3_RECIPES),
    Learner("maskable_ppo_scratch", "sb3", "configs/maskable_ppo_scratch.yaml", SCRATCH),
    Learner("rllib_ppo", "rllib", "configs/rllib/ppo.yaml", SCRATCH),
    Learner("zoo_ppo_mask", "zoo", "configs/rl_zoo3/ppo_mask.yml", SCRATCH),
    *(Learner(r, "sb3", f"configs/{r}.yaml", IMITATION) for r in SB3_RECIPES),  # as shipped
)
"""The rows: every recipe from scratch, and the seven SB3 configs also as they ship, with
their imitation of ``heuristic`` (RLlib's PPO and rl-zoo3's ``ppo_mask`` have none)."""


def sb3_config(learner: Learner, budget: int, seed: int) -> dict[str, Any]:
    """The shipped config as this row runs it (the module doc says what changes)."""
    cfg: dict[str, Any] = yaml.safe_load((ROOT / learner.recipe).read_text(encoding="utf-8"))
    cfg["name"] = f"{learner.name}-{learner.variant}"
    cfg["seed"] = seed
    cfg["training"].update(total_timesteps=budget, torch_threads=1, progress_bar=False)
    cfg["evaluation"].update(freq=budget // CURVE_POINTS, episodes=VALIDATION_DEALS, seed=0)
    cfg["checkpoint"]["freq"] = budget // 2
    if "expert_iteration" in cfg:
        cfg["expert_iteration"]["rounds"] = 0
    cfg.setdefault("imitation", {})["enabled"] = learner.variant == IMITATION
    return cfg


def command(learner: Learner, runs: Path, budget: int, seed: int) -> list[str]:
    """The product's command that trains this run."""
    out = learner.run_dir(runs, seed)
    if learner.kind == "sb3":
        config = runs / "configs" / f"{out.name}.yaml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(yaml.safe_dump(sb3_config(learner, budget, seed), sort_keys=False))
        return [PYTHON, "scripts/train.py", "--config", str(config), "--out", str(out),
                "--no-progress-bar"]  # fmt: skip
    if learner.kind == "rllib":
        return [RLLIB_PYTHON, "scripts/rllib_train.py", "--steps", str(budget), "--seed",
                str(seed), "--out", str(out / "checkpoint"), "--record", str(out / "record.json"),
                "--config", learner.recipe, "--checkpoint-every", str(budget // CURVE_POINTS),
                "--validation", str(VALIDATION_DEALS)]  # fmt: skip
    return [PYTHON, "scripts/zoo.py", "train", "--algo", "ppo_mask", "--env",
            "coldiron/ColdIron-v0", "--gym-packages", "coldiron_env", "-conf", learner.recipe,
            "-f", str(out / "logs"), "-n", str(budget), "--seed", str(seed), "--save-freq",
            str(budget // CURVE_POINTS), "--record", str(out / "record.json"),
            "--eval-freq", "-1"]  # fmt: skip


def finished(learner: Learner, runs: Path, seed: int) -> bool:
    out = learner.run_dir(runs, seed)
    if learner.kind == "sb3":
        meta = out / "meta.json"
        return meta.is_file() and json.loads(meta.read_text())["status"] == "completed"
    record = out / "record.json"
    return record.is_file() and not json.loads(record.read_text()).get("interrupted", False)


def train_one(learner: Learner, runs: Path, budget: int, seed: int) -> tuple[str, int, float]:
    """Train one run (its log beside it); (run name, exit status, wall seconds)."""
    out = learner.run_dir(runs, seed)
    if out.exists() and not finished(learner, runs, seed):  # its wall time must be its own:
        shutil.rmtree(out)  # a run a stop cut starts again
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = command(learner, runs, budget, seed)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    start = time.perf_counter()
    with open(runs / f"{out.name}.log", "a", encoding="utf-8") as log:
        log.write(f"$ {shlex.join(argv)}\n")
        log.flush()
        done = subprocess.run(
            argv, check=False, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env
        )
    return out.name, done.returncode, time.perf_counter() - start


def train_main(args: argparse.Namespace) -> int:
    # seed by seed: a stop leaves every learner with as many seeds as it can
    todo = [(lr, s) for s in args.seeds for lr in LEARNERS if not finished(lr, args.runs, s)]
    todo = [(lr, s) for lr, s in todo if not args.only or lr.name in args.only]
    print(f"{len(todo)} runs to train, {args.workers} at a time, into {args.runs}", flush=True)
    failed = 0
    with ThreadPoolExecutor(args.workers) as pool:
        jobs = [pool.submit(train_one, lr, args.runs, args.budget, s) for lr, s in todo]
        for job in jobs:
            name, code, seconds = job.result()
            failed += code != 0
            print(f"{name}: exit {code} after {seconds:.0f} s", flush=True)
    return 1 if failed else 0


# ---------------------------------------------------------------- the report
def _seconds_between(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def sb3_run(out: Path) -> tuple[Path, dict[str, Any]]:
    """The final model and the run's figures: steps, seconds, the validation curve."""
    meta = json.loads((out / "meta.json").read_text())
    history = json.loads((out / "evaluations.json").read_text())["evaluations"]
    curve, evaluating = [], 0.0
    for point in history:
        evaluating += point["eval_seconds"]
        seconds = _seconds_between(meta["start_time"], point["time"]) - evaluating
        curve.append({"env_steps": point["timesteps"], "seconds": round(max(seconds, 0.0), 1),
                      "win_rate": point["win_rate"]})  # fmt: skip
    wall = _seconds_between(meta["start_time"], meta["end_time"]) - evaluating
    figures = {"env_steps": meta["timesteps"], "seconds": round(wall, 1), "curve": curve}
    return out / "model.zip", figures


def rllib_run(out: Path) -> tuple[Path, dict[str, Any]]:
    record = json.loads((out / "record.json").read_text())
    curve = [{"env_steps": 0, "seconds": 0.0, "win_rate": 0.0}]  # an untrained masked policy
    curve += [{k: p[k] for k in ("env_steps", "seconds", "win_rate")} for p in record["curve"]]
    figures = {"env_steps": record["env_steps"], "seconds": record["wall_seconds"], "curve": curve}
    return out / "checkpoint", figures


def zoo_run(out: Path) -> tuple[Path, dict[str, Any]]:
    """rl-zoo3's checkpoints scored here on the validation deals (their file times give the
    training seconds: rl-zoo3 evaluates nothing while it trains with ``--eval-freq -1``)."""
    from agents.integrations.zoo_files import zoo_run_of
    from agents.learning.sb3_agent import load_sb3_agent

    record = json.loads((out / "record.json").read_text())
    final = Path(record["model"])
    run = zoo_run_of(final)
    assert run is not None, f"{final}: not an rl-zoo3 run"
    seconds = record["training_seconds"]
    begun = datetime.fromisoformat(record["time"]).timestamp() - seconds  # learn() began
    points = sorted(final.parent.glob("rl_model_*_steps.zip"), key=lambda p: p.stat().st_mtime)
    curve = []
    for path in points:
        agent = load_sb3_agent(path, algorithm=run[0], env_kwargs=run[1])
        (result,) = evaluate([("x", agent)], VALIDATION_DEALS, 0, validation=True)
        steps = int(path.stem.split("_")[2])
        curve.append({"env_steps": steps, "seconds": round(path.stat().st_mtime - begun, 1),
                      "win_rate": result.win_rate})  # fmt: skip
    figures = {"env_steps": record["timesteps"], "seconds": seconds, "curve": curve}
    return final, figures


READERS: Final = {"sb3": sb3_run, "rllib": rllib_run, "zoo": zoo_run}


def cpu_name() -> str:
    """The CPU's model name (as the main job's record names it), its cores and its widest
    vector unit (machines of our kind differ several-fold in floating point)."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    flags = next((ln for ln in info.splitlines() if ln.startswith("flags")), "")
    unit = "AVX-512" if " avx512f" in flags else "AVX2" if " avx2" in flags else "no AVX2"
    return f"{model_name()}, {os.cpu_count()} cores, {unit}"


def t_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and Student-t 95% interval over seeds."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, mean, mean
    sd = (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5
    half = t_critical(n - 1) * sd / n**0.5
    return mean, mean - half, mean + half


def report_main(args: argparse.Namespace) -> int:
    from agents.registry import make_agent, set_torch_threads

    set_torch_threads()
    (base,) = evaluate([(BASELINE, make_agent(BASELINE))], args.episodes, args.seed)
    rows = []
    for learner in LEARNERS:
        runs = []
        for seed in args.seeds:
            out = learner.run_dir(args.runs, seed)
            if not finished(learner, args.runs, seed):
                print(f"{out.name}: not finished, left out", file=sys.stderr)
                continue
            model, figures = READERS[learner.kind](out)
            if learner.kind == "rllib":  # Ray lives in its own venv: its evaluate.py plays it
                won = evaluate_elsewhere(RLLIB_PYTHON, model, args.episodes, args.seed)
            else:
                agent = make_agent(str(model))
                (result,) = evaluate([(out.name, agent)], args.episodes, args.seed)
                won = list(result.won)
            pair = mcnemar(base.won, won)
            runs.append({"seed": seed, "run": out.name, "wins": sum(won),
                         "win_rate": sum(won) / len(won), "paired": pair, **figures})  # fmt: skip
            print(f"{out.name}: {sum(won) / len(won):.2%}", flush=True)
        if runs:
            rows.append(row(learner, runs, args.episodes))
    doc = {
        "what": "every shipped recipe at one budget of env steps, 3 seeds (lab/learners.py)",
        "budget_env_steps": args.budget,
        "seed": args.seed,
        "deals": "evaluation",
        "episodes": args.episodes,
        "validation_deals": {"seed": 0, "episodes": VALIDATION_DEALS},
        "cpu": cpu_name(),
        "baseline": {
            "label": BASELINE,
            "wins": base.wins,
            "win_rate": base.win_rate,
            "interval_95": list(base.interval),
        },
        "rows": rows,
        "command": shlex.join([".venv/bin/python", "-m", "lab.learners", *sys.argv[1:]]),
        **code_stamp([args.json]),
    }
    atomic_write_json(args.json, doc)
    print(f"wrote {args.json}")
    return 0


def evaluate_elsewhere(python: str, model: Path, episodes: int, seed: int) -> list[bool]:
    """Per-deal wins of ``model`` played by ``scripts/evaluate.py`` under another interpreter."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "evaluation.json"
        argv = [python, "scripts/evaluate.py", "--agent", str(model), "--episodes",
                str(episodes), "--seed", str(seed), "--json", str(out)]  # fmt: skip
        subprocess.run(argv, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        (entry,) = json.loads(out.read_text())["agents"]
    return unpack_wins(entry["won_bits"], episodes)


def row(learner: Learner, runs: list[dict[str, Any]], episodes: int) -> dict[str, Any]:
    """A learner's figures over its seeds: the win rates as ``evaluate.py`` aggregates seeds
    (``multiseed.aggregate``), the paired differences (which may be negative) by
    :func:`t_interval`."""
    agg = aggregate([SeedRun(r["run"], r["seed"], r["wins"], episodes) for r in runs])
    t95 = [agg.mean, agg.t_low, agg.t_high] if agg.t_low is not None else [agg.mean] * 3
    seconds = [r["seconds"] for r in runs]
    steps = [r["env_steps"] for r in runs]
    return {
        "learner": learner.name,
        "kind": learner.kind,
        "recipe": learner.recipe,
        "variant": learner.variant,
        "masks": learner.masks,
        "seeds": len(runs),
        "win_rate_t95": t95,
        "pooled_wins": agg.pooled_wins,
        "pooled_wilson95": [agg.pooled_low, agg.pooled_high],
        "difference_t95": t_interval([r["paired"]["difference"] for r in runs]),
        "steps_per_second": sum(steps) / sum(seconds),
        "mean_seconds": sum(seconds) / len(seconds),
        "runs": runs,
    }


def plot_curves(doc: dict[str, Any], path: Path) -> Path:
    """Validation win rate against env steps and against training seconds: per learner the
    mean over seeds (points matched by their order: every seed validates at the same steps)
    and the band from its lowest to its highest seed."""
    from agents.evaluation.plots import pyplot, save_png

    plt = pyplot()
    fig, (by_steps, by_time) = plt.subplots(1, 2, figsize=(12.0, 5.0), sharey=True)
    names = list(dict.fromkeys(r["learner"] for r in doc["rows"]))  # a colour a recipe
    for row_ in doc["rows"]:
        curves = [r["curve"] for r in row_["runs"]]
        n = min(len(c) for c in curves)
        rate = [[PERCENT * c[k]["win_rate"] for c in curves] for k in range(n)]
        mean = [sum(v) / len(v) for v in rate]
        low, high = [min(v) for v in rate], [max(v) for v in rate]
        label = f"{row_['learner']} ({row_['variant']})"
        style = {"color": f"C{names.index(row_['learner']) % 10}",
                 "linestyle": "--" if row_["variant"] == IMITATION else "-"}  # fmt: skip
        for ax, key in ((by_steps, "env_steps"), (by_time, "seconds")):
            xs = [sum(c[k][key] for c in curves) / len(curves) for k in range(n)]
            if key == "seconds":
                xs = [x / 60 for x in xs]
            ax.plot(xs, mean, label=label, **style)
            ax.fill_between(xs, low, high, alpha=0.15, color=style["color"])
    baseline = PERCENT * doc["baseline"]["win_rate"]
    for ax in (by_steps, by_time):
        ax.axhline(baseline, color="black", linewidth=0.8, linestyle=":")
        ax.grid(alpha=0.3)
    by_steps.set_xlabel("env steps")
    by_time.set_xlabel("training minutes (validations left out)")
    by_steps.set_ylabel(f"win rate on {doc['validation_deals']['episodes']:,} validation deals (%)")
    by_steps.text(0, baseline, " heuristic (report deals)", va="bottom", fontsize=8)
    by_time.legend(fontsize=7, loc="upper right")
    seeds = max(r["seeds"] for r in doc["rows"])
    fig.suptitle(f"Every recipe at {doc['budget_env_steps']:,} env steps: mean over {seeds} "
                 f"seeds, band from lowest to highest ({doc['cpu']}, one torch thread a run, "
                 "two runs at a time)", fontsize=10)  # fmt: skip
    fig.tight_layout()
    return save_png(fig, path, dpi=100)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=("train", "report", "plot"))
    parser.add_argument("--runs", type=Path, help="train, report: the runs' folder")
    parser.add_argument("--budget", type=int, default=500_000, help="env steps a run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--workers", type=int, default=2, help="runs at a time (train)")
    parser.add_argument("--only", nargs="*", help="train these learners only (names)")
    parser.add_argument("--seed", type=int, default=0, help="report: the evaluation deals' seed")
    parser.add_argument("--episodes", type=int, default=10_000, help="report: deals")
    parser.add_argument("--json", type=Path, help="report: the record to write; plot: to read")
    parser.add_argument("--png", type=Path, help="plot: the curves' picture to write")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.what != "plot" and args.runs is None:
        print(f"error: {args.what} needs --runs DIR", file=sys.stderr)
        return 2
    if args.what == "train":
        return train_main(args)
    if args.json is None:
        print(f"error: {args.what} needs --json FILE", file=sys.stderr)
        return 2
    if args.what == "plot":
        if args.png is None:
            print("error: plot needs --png FILE", file=sys.stderr)
            return 2
        print(f"wrote {plot_curves(json.loads(args.json.read_text()), args.png)}")
        return 0
    return report_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
