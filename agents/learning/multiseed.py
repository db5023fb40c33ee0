"""Several seeds of one config: parse ``--seeds``, train one run per seed, aggregate win rates.

One training run is one sample of what a config gives. ``scripts/train.py --seeds 0-4``
trains ``OUT/seed-0`` .. ``OUT/seed-4`` (:func:`train_seeds`); ``scripts/evaluate.py`` given
run directories of one config (seed aside) reports their mean across seeds
(:func:`seed_aggregates`). :func:`aggregate` gives two intervals, for different questions:

* **Across seeds (the headline):** the mean of the per-seed win rates with a Student-t 95%
  interval ``mean ± t(0.975, n-1) * s / sqrt(n)``, clipped to [0, 1]. It answers "what win
  rate does training this config with a new seed give?", so it includes the seed-to-seed
  variance, usually the larger part. It needs 2 seeds and is wide with few (3 seeds: ``t =
  4.30``); it assumes roughly normal per-seed rates (each measured on thousands of deals).
  When every seed scores the same it has zero width: the pooled interval then says more.
* **Pooled Wilson (for reference):** all wins over all episodes. It treats every episode as
  independent, so it describes only *these* models on *these* deals, ignoring seed-to-seed
  variance and the correlation of seeds playing the same deals: never use it to claim one
  config beats another.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agents.evaluation.stats import Z_95, wilson_interval

CONFIDENCE: Final = 0.95
SEED_DIR_PREFIX: Final = "seed-"
CONFIG_FILE: Final = "config.yaml"  # as agents.learning.sb3_agent.CONFIG_FILE
META_FILE: Final = "meta.json"  # as agents.learning.training.META_FILE
EVAL_JSON: Final = "evaluations.json"  # as agents.learning.training.EVAL_JSON
MAX_SEEDS: Final = 1000
"""A guard against typos such as ``0-10000``."""
_SEEDS = re.compile(r"(-?\d+)(?:\s*-\s*(-?\d+))?")


# ---------------------------------------------------------------- --seeds
def parse_seeds(text: str) -> list[int]:
    """Seeds from ``"0-4"`` (inclusive range), ``"0,2,5"`` or a mix (``"0-2,7"``); a
    ``ValueError`` naming the bad part (empty, not an integer, negative, reversed, repeated,
    more than :data:`MAX_SEEDS`)."""
    if not text.strip():
        raise ValueError("--seeds: expected seeds such as 0-4 or 0,2,5, got an empty value")
    seeds: list[int] = []
    for item in (part.strip() for part in text.split(",")):
        match = _SEEDS.fullmatch(item)  # a single seed is the range A-A
        a, b = (int(match[1]), int(match[2] or match[1])) if match else (0, -1)
        problem = (
            "empty item between commas" if not item
            else f"{item!r} is not a seed or a range A-B" if not match
            else f"seeds must be >= 0, got {a}" if a < 0
            else f"range {item!r} goes backwards" if b < a
            else f"more than {MAX_SEEDS} seeds" if len(seeds) + b - a >= MAX_SEEDS
            else next((f"seed {s} is given twice" for s in range(a, b + 1) if s in seeds), None)
        )  # fmt: skip
        if problem:
            raise ValueError(f"--seeds {text!r}: {problem}")
        seeds.extend(range(a, b + 1))
    return seeds


# ---------------------------------------------------------------- statistics
def t_critical(df: int, confidence: float = CONFIDENCE) -> float:
    """The two-sided Student-t critical value (``t(0.975, df)`` for 95%), from SciPy."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be a positive integer, got {df!r}")
    from scipy.stats import t as student_t  # noqa: PLC0415 (about 1 s to import: on use)

    return float(student_t.ppf((1.0 + confidence) / 2.0, df))


@dataclass(frozen=True)
class SeedRun:
    """One seed's evaluation: ``wins`` out of ``episodes``."""

    label: str
    seed: int | None
    wins: int
    episodes: int

    @property
    def win_rate(self) -> float:
        return self.wins / self.episodes


@dataclass(frozen=True)
class SeedAggregate:
    """The win rate of one config across seeds (see the module docstring for the intervals)."""

    name: str
    runs: tuple[SeedRun, ...]
    mean: float
    std: float | None
    t_low: float | None
    t_high: float | None
    pooled_wins: int
    pooled_episodes: int
    pooled_low: float
    pooled_high: float

    @property
    def n_seeds(self) -> int:
        return len(self.runs)

    @property
    def pooled_rate(self) -> float:
        return self.pooled_wins / self.pooled_episodes

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seeds": [r.seed for r in self.runs],
            "runs": [r.label for r in self.runs],
            "win_rates": [r.win_rate for r in self.runs],
            "mean_win_rate": self.mean,
            "std_across_seeds": self.std,
            "ci_low": self.t_low,
            "ci_high": self.t_high,
            "interval": f"Student-t {CONFIDENCE:.0%} across seeds (mean of per-seed rates)",
            "pooled_wins": self.pooled_wins,
            "pooled_episodes": self.pooled_episodes,
            "pooled_ci_low": self.pooled_low,
            "pooled_ci_high": self.pooled_high,
            "pooled_interval": f"Wilson {CONFIDENCE:.0%} over all episodes (z = {Z_95})",
        }


def aggregate(runs: Sequence[SeedRun], name: str = "") -> SeedAggregate:
    """Mean win rate across ``runs`` with the across-seed t interval (None for one run) and
    the pooled Wilson one."""
    if not runs:
        raise ValueError("no runs to aggregate")
    for r in runs:
        if r.episodes <= 0 or not 0 <= r.wins <= r.episodes:
            raise ValueError(f"{r.label}: {r.wins} wins out of {r.episodes} episodes is impossible")
    rates = [r.win_rate for r in runs]
    n = len(rates)
    mean = sum(rates) / n
    std = t_low = t_high = None
    if n >= 2:
        std = math.sqrt(sum((p - mean) ** 2 for p in rates) / (n - 1))
        half = t_critical(n - 1) * std / math.sqrt(n)
        t_low, t_high = max(0.0, mean - half), min(1.0, mean + half)
    wins = sum(r.wins for r in runs)
    episodes = sum(r.episodes for r in runs)
    low, high = wilson_interval(wins, episodes)
    return SeedAggregate(name, tuple(runs), mean, std, t_low, t_high, wins, episodes, low, high)


def format_aggregates(aggregates: Sequence[SeedAggregate]) -> str:
    """A plain-text table: mean across seeds [t 95%], per-seed rates, pooled [Wilson 95%]."""
    from agents.evaluation.arena import text_table  # noqa: PLC0415 (the arena imports numpy)

    headers = ["config", "seeds", "mean win rate", "95% CI (t, seeds)", "per seed",
               "pooled (Wilson)"]  # fmt: skip
    rows = [
        [a.name, str(a.n_seeds), f"{100 * a.mean:.2f}%",
         "n/a (1 seed)" if a.t_low is None or a.t_high is None
         else f"[{100 * a.t_low:.2f}%, {100 * a.t_high:.2f}%]",
         " ".join(f"{100 * r.win_rate:.1f}" for r in a.runs),
         f"{100 * a.pooled_rate:.2f}% [{100 * a.pooled_low:.2f}%, {100 * a.pooled_high:.2f}%]"]
        for a in aggregates
    ]  # fmt: skip
    return text_table(headers, rows)


# ---------------------------------------------------------------- run directories
def _read_config(run_dir: Path) -> dict[str, Any]:
    import yaml  # noqa: PLC0415 (an optional dependency, loaded on use)

    path = run_dir / CONFIG_FILE
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: cannot read the run's config: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a run config (a mapping)")
    return data


def is_run_dir(spec: str | Path) -> bool:
    return (Path(spec) / CONFIG_FILE).is_file()


def config_key(run_dir: str | Path) -> str:
    """The run's config without its seed and name-independent of key order: equal for seeds
    of the same config. (``training.progress_bar`` is ignored too.)"""
    data = _read_config(Path(run_dir))
    data.pop("seed", None)
    if isinstance(data.get("training"), dict):
        data["training"].pop("progress_bar", None)
    return json.dumps(data, sort_keys=True, default=str)


def run_seed(run_dir: str | Path) -> int | None:
    seed = _read_config(Path(run_dir)).get("seed")
    return seed if isinstance(seed, int) else None


def _config_groups(specs: Sequence[str]) -> list[list[int]]:
    by_key: dict[str, list[int]] = {}
    for i, spec in enumerate(specs):
        if is_run_dir(spec):
            by_key.setdefault(config_key(spec), []).append(i)
    return [idx for idx in by_key.values() if len(idx) >= 2]


def _has_twins(specs: Sequence[str], idx: Sequence[int]) -> bool:
    seeds = [run_seed(specs[i]) for i in idx]
    return len(set(seeds)) < len(seeds)


def twin_seed_groups(specs: Sequence[str]) -> list[list[str]]:
    """Groups of run directories of one config in which a seed repeats (not aggregated)."""
    return [[specs[i] for i in idx] for idx in _config_groups(specs) if _has_twins(specs, idx)]


def run_status(run_dir: str | Path) -> str | None:
    """The ``meta.json`` status of a run directory (``completed``, ``interrupted``...)."""
    path = Path(run_dir) / META_FILE
    try:
        status = json.loads(path.read_text(encoding="utf-8")).get("status")
    except (OSError, ValueError, AttributeError):
        return None
    return status if isinstance(status, str) else None


def unfinished_runs(specs: Sequence[str]) -> list[tuple[str, str | None]]:
    """``(run directory, status)`` of each run directory in ``specs`` that did not complete
    (its model is that of an interrupted or still-running training)."""
    return [
        (spec, status)
        for spec in specs
        if is_run_dir(spec) and (status := run_status(spec)) != "completed"
    ]


def group_name(specs: Sequence[str]) -> str:
    """A label for a group of run directories: their config name, else their common parent."""
    name = _read_config(Path(specs[0])).get("name")
    if isinstance(name, str) and name:
        return name
    parents = {str(Path(s).resolve().parent) for s in specs}
    return Path(parents.pop()).name if len(parents) == 1 else Path(specs[0]).name


def seed_aggregates(
    specs: Sequence[str], results: Sequence[tuple[int, int]]
) -> list[SeedAggregate]:
    """Aggregate the evaluation ``results`` (``(wins, episodes)`` per spec) of run directories
    that are seeds of the same config (groups of >= 2 with distinct seeds: a run and its
    retraining with the same seed are not seeds of it, :func:`twin_seed_groups`), what
    ``scripts/evaluate.py`` reports after its table."""
    if len(specs) != len(results):
        raise ValueError(f"{len(specs)} agents but {len(results)} results")
    out = []
    for idx in (i for i in _config_groups(specs) if not _has_twins(specs, i)):
        runs = [SeedRun(specs[i], run_seed(specs[i]), results[i][0], results[i][1]) for i in idx]
        out.append(aggregate(runs, group_name([specs[i] for i in idx])))
    return out


def run_label(spec: str, name: str) -> str:
    """How a run is named in tables: ``name``, or ``PARENT/seed-N`` for a ``--seeds`` run
    (``seed-0`` alone would not say which config)."""
    path = Path(spec)
    if path.name.startswith(SEED_DIR_PREFIX) and path.parent.name and is_run_dir(path):
        return f"{path.parent.name}/{path.name}"
    return name


def expand_seed_root(spec: str) -> list[str]:
    """``spec`` itself, or the ``seed-N`` run directories of a ``--seeds`` output folder."""
    root = Path(spec)
    if is_run_dir(root) or not root.is_dir():
        return [spec]
    runs = [p for p in root.glob(f"{SEED_DIR_PREFIX}*") if is_run_dir(p)]
    runs.sort(key=lambda p: int(n) if (n := p.name[len(SEED_DIR_PREFIX) :]).isdigit() else -1)
    return [str(p) for p in runs] or [spec]


# ---------------------------------------------------------------- training
def train_seeds(
    cfg: Any,
    seeds: Sequence[int],
    out_root: Path,
    *,
    config_file: str | None = None,
    log: Callable[[str], None] = print,
) -> list[Any]:
    """Train ``cfg`` once per seed into ``out_root/seed-N``; the ``TrainResult`` list.
    Rerunning continues: a completed seed is skipped (its result read back), an interrupted
    one resumed. Ctrl-C saves the seed under way and stops (its result ``interrupted``)."""
    from agents.learning.config import apply_overrides  # noqa: PLC0415 (heavy imports on use)
    from agents.learning.provenance import TrainingError  # noqa: PLC0415
    from agents.learning.training import TrainResult, train  # noqa: PLC0415

    if not seeds:
        raise ValueError("no seeds to train")
    out_root.mkdir(parents=True, exist_ok=True)
    results: list[Any] = []
    for i, seed in enumerate(seeds):
        seed_cfg = apply_overrides(cfg, seed=seed, file=f"{config_file} (--seeds)")
        run_dir = out_root / f"{SEED_DIR_PREFIX}{seed}"
        status = run_status(run_dir)
        log(f"seed {seed} ({i + 1}/{len(seeds)}): {run_dir}")
        if status == "completed":
            _check_same(run_dir, seed_cfg)
            meta = json.loads((run_dir / META_FILE).read_text(encoding="utf-8"))
            history = json.loads((run_dir / EVAL_JSON).read_text(encoding="utf-8"))["evaluations"]
            log(f"seed {seed}: already completed, skipped")
            result: Any = TrainResult(run_dir, int(meta.get("timesteps", 0)), False, 0.0, history)
        elif status is not None:
            _check_same(run_dir, seed_cfg)
            result = train(seed_cfg, resume=run_dir, log=log)
        elif run_dir.exists() and any(run_dir.iterdir()):
            raise TrainingError(f"{run_dir}: exists but is not a run directory (no {META_FILE})")
        else:
            result = train(seed_cfg, run_dir, config_file=config_file, log=log)
        results.append(result)
        if result.interrupted:
            break
    return results


def _check_same(run_dir: Path, cfg: Any) -> None:
    from agents.learning.config import config_changes, describe_changes, load_config  # noqa: PLC0415
    from agents.learning.provenance import TrainingError  # noqa: PLC0415

    changes = config_changes(load_config(run_dir / CONFIG_FILE).to_dict(), cfg.to_dict())
    changes.pop("training.progress_bar", None)
    if changes:
        raise TrainingError(
            f"{run_dir}: holds a run of another config ({describe_changes(changes)}); "
            "use another --out"
        )


def aggregate_results(results: Sequence[Any], name: str = "") -> SeedAggregate | None:
    """The across-seed aggregate of ``train_seeds`` results (their last evaluations)."""
    runs = []
    for r in results:
        if r.history:
            last = r.history[-1]
            runs.append(
                SeedRun(str(r.run_dir), run_seed(r.run_dir), last["wins"], last["episodes"])
            )
    return aggregate(runs, name) if runs else None
