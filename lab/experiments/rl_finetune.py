"""PPO again after expert iteration: does RL improve a network the planner has taught?

    .venv/bin/python -m lab.experiments.rl_finetune --start distilled --seed 8 \\
        --steps 12000000 --learning-rate 3e-5 --out runs/rl-after-distilled

The start network (a shipped name or a run directory) is loaded with its own config
(``config.yaml``: the observation, the PPO settings) and trained ``--steps`` more steps of
masked PPO at a constant ``--learning-rate`` on the native vector env, its deals from the
training stream of ``--seed`` (the run's own seed: no other run uses it). ``--out`` is a
run directory (the start's ``config.yaml`` with ``seed`` set, ``model.zip``, ``meta.json``
with the provenance and the hashes) that evaluate.py, ladder.py and play.py load.
A stop (Ctrl-C) saves what was trained so far, marked ``interrupted``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agents.atomic import atomic_save, atomic_write_json, atomic_write_text  # noqa: E402
from agents.gitinfo import utc_now  # noqa: E402
from agents.learning.config import config_from_dict, dump_config, load_config  # noqa: E402
from agents.learning.provenance import (  # noqa: E402
    META_FILE,
    check_hashes,
    file_hashes,
    provenance,
)
from agents.learning.sb3_agent import CONFIG_FILE, MODEL_FILE  # noqa: E402
from agents.learning.training import check_device, make_training_env  # noqa: E402
from agents.registry import SHIPPED_MODELS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--start", default="distilled", help="a shipped name or a run directory")
    parser.add_argument("--seed", type=int, required=True, help="training-stream seed")
    parser.add_argument("--steps", type=int, default=12_000_000)
    parser.add_argument("--learning-rate", type=float, default=3e-5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    start = SHIPPED_MODELS.get(args.start, Path(args.start))
    if args.out.exists() and any(args.out.iterdir()):
        raise SystemExit(f"{args.out}: exists and is not empty")
    try:
        check_hashes(start, [MODEL_FILE, CONFIG_FILE])  # a shipped model's pins, as loading checks
        data = load_config(start / CONFIG_FILE).to_dict()
    except (OSError, ValueError) as err:
        raise SystemExit(f"--start {args.start}: {err}") from None
    data["seed"] = args.seed
    data["training"]["total_timesteps"] = args.steps
    data["algorithm"]["hyperparameters"]["learning_rate"] = args.learning_rate
    cfg = config_from_dict(data, str(start / CONFIG_FILE))
    spec = cfg.algorithm.spec
    import torch

    torch.set_num_threads(cfg.training.torch_threads)
    check_device(cfg.training.device, str(start / CONFIG_FILE))
    venv = make_training_env(cfg)
    model = spec.load_class().load(
        start / MODEL_FILE,
        env=venv,
        device=cfg.training.device,
        custom_objects={
            "learning_rate": args.learning_rate,
            "lr_schedule": lambda _: args.learning_rate,
        },
    )
    model.set_random_seed(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    began, status, before = time.perf_counter(), "completed", model.num_timesteps
    try:
        model.learn(total_timesteps=args.steps, reset_num_timesteps=False, progress_bar=False)
    except KeyboardInterrupt:
        status = "interrupted"
    atomic_save(args.out / MODEL_FILE, model.save)
    atomic_write_text(args.out / CONFIG_FILE, dump_config(cfg))
    atomic_write_json(
        args.out / META_FILE,
        {
            "start": args.start,
            "seed": args.seed,
            "steps": args.steps,
            "learning_rate": args.learning_rate,
            "timesteps": int(model.num_timesteps),  # the start's included
            "steps_trained": int(model.num_timesteps - before),
            "status": status,
            "end_time": utc_now(),
            "wall_seconds": round(time.perf_counter() - began, 1),
            "command": sys.argv,
            **provenance(),
            "sha256": file_hashes(args.out, [MODEL_FILE, CONFIG_FILE]),
        },
    )
    atomic_write_text(args.out / "start_meta.json", (start / META_FILE).read_text())
    seconds = time.perf_counter() - began
    print(f"{status}: {model.num_timesteps - before:,} steps trained in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
