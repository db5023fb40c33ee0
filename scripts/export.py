"""Export a trained policy as ONNX: runs under onnxruntime and numpy, without torch or SB3.

    .venv/bin/python scripts/export.py --agent trained --out runs/onnx/trained.onnx
    .venv/bin/python scripts/evaluate.py --agent runs/onnx/trained.onnx --agent trained \\
        --episodes 1000 --deals validation --seed 0

The file takes ``observation`` (float32, [batch, n]) and ``action_mask`` (int8,
[batch, 19]) and gives ``action`` (int64, [batch]): the model's best legal action. Its
``metadata_props`` hold ``env_kwargs`` (JSON), the env options its observation needs.
``--agent`` is a shipped model (trained, distilled), a run directory or a ``.zip`` of
MaskablePPO, PPO, A2C, DQN or QR-DQN (not RecurrentPPO: the graph has no memory). The
file is written atomically, after a check that onnxruntime picks the model's action on
random observations and masks.

``--benchmark FILE.json`` then times the SB3 agent and the ONNX file on the same
``--benchmark-episodes`` validation deals (whole games and inference alone, one decision
at a time and in batches) and records whether they played the same games.
See ``agents/integrations/onnx_policy.py`` and docs/other-rl-code.md.
"""

from __future__ import annotations

import argparse
import sys

from agents.atomic import atomic_write_json
from agents.evaluation.arena import validation_decks
from agents.integrations.onnx_export import CHECK_ROWS, benchmark, check_out_path, export_onnx
from agents.registry import PLAY_TORCH_THREADS, SHIPPED_MODELS, set_torch_threads

EXIT_ERROR = 2
BENCHMARK_EPISODES = 1000
BENCHMARK_SEED = 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--agent",
        required=True,
        metavar="NAME|RUN_DIR|MODEL.zip",
        help=f"the trained model to export (shipped: {', '.join(SHIPPED_MODELS)}; or a "
        "run directory or .zip)",
    )
    parser.add_argument("--out", required=True, metavar="FILE.onnx", help="the file to write")
    parser.add_argument(
        "--check-rows",
        type=int,
        default=CHECK_ROWS,
        metavar="N",
        help=f"random observations the file is checked on against the model (default "
        f"{CHECK_ROWS}; 0: no check)",
    )
    parser.add_argument(
        "--benchmark",
        metavar="FILE.json",
        help="also time the SB3 agent against the ONNX file and write the record here",
    )
    parser.add_argument(
        "--benchmark-episodes",
        type=int,
        default=BENCHMARK_EPISODES,
        metavar="N",
        help=f"validation deals of the benchmark (default {BENCHMARK_EPISODES})",
    )
    parser.add_argument(
        "--benchmark-seed",
        type=int,
        default=BENCHMARK_SEED,
        metavar="SEED",
        help=f"seed of the benchmark's validation deals (default {BENCHMARK_SEED})",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.check_rows < 0:
            raise ValueError(f"--check-rows must be 0 or more, got {args.check_rows}")
        if args.benchmark_episodes <= 0:
            raise ValueError(
                f"--benchmark-episodes must be positive, got {args.benchmark_episodes}"
            )
        check_out_path(args.out)
        if args.benchmark is not None and not args.benchmark.endswith(".json"):
            raise ValueError(f"--benchmark {args.benchmark!r}: the record must be a .json file")
        if args.benchmark is not None:  # its deals, before anything is written
            try:
                validation_decks(args.benchmark_seed, 1)
            except ValueError as err:
                raise ValueError(f"--benchmark-seed {args.benchmark_seed}: {err}") from None
        set_torch_threads(PLAY_TORCH_THREADS)
        result = export_onnx(args.agent, args.out, check_rows=args.check_rows)
    except ImportError as err:
        print(f"error: export needs torch and onnx (pip install -e '.[train,onnx]'): {err}",
              file=sys.stderr)  # fmt: skip
        return EXIT_ERROR
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as err:
        print(f"error: cannot write {args.out}: {err.strerror or err}", file=sys.stderr)
        return EXIT_ERROR
    print(
        f"wrote {result.path} ({result.algorithm}, observation of {result.observation_size}, "
        f"env_kwargs {result.env_kwargs}); same action as the model on "
        f"{result.checked_rows - result.near_ties} of {result.checked_rows} random rows "
        f"({result.near_ties} near-ties not compared)"
    )
    if args.benchmark is None:
        return 0
    try:
        record = benchmark(args.agent, result.path, args.benchmark_episodes, args.benchmark_seed)
        record["export"] = result.to_dict()
        atomic_write_json(args.benchmark, record)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as err:
        print(f"error: cannot write {args.benchmark}: {err.strerror or err}", file=sys.stderr)
        return EXIT_ERROR
    for label, timings in record["inference_only"].items():
        print(f"  {label}: {timings}")
    print(f"  agreement: {record['agreement']}")
    print(f"json: {args.benchmark}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
