"""The ceiling's levels (lab/experiments/ceiling.py): Anderson's bound against cases worked by
hand and by simulation, and the record against what the command computes from its bound."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lab import ROOT
from lab.experiments.ceiling import anderson_upper, levels


def test_anderson_moves_the_dkw_width_of_the_lowest_mass_to_the_ceiling() -> None:
    """n equal values c: the bound is c + width * (b - c), width = sqrt(ln(1/0.05) / 2n)."""
    n, c, b = 200, 0.5, 0.9
    width = np.sqrt(np.log(20) / (2 * n))
    assert anderson_upper(np.full(n, c), b) == pytest.approx(c + width * (b - c))
    assert anderson_upper(np.full(n, b), b) == pytest.approx(b)  # nothing to move
    with pytest.raises(ValueError, match="lie in"):
        anderson_upper(np.array([0.2, 1.2]), 1.0)


def test_anderson_covers_the_mean_at_least_95_times_in_100() -> None:
    """On skewed samples in [0, 1] the bound falls below the true mean in at most 5% of
    draws (it is conservative: far fewer), while the normal one-sided bound is not held to
    that."""
    rng = np.random.default_rng(0)
    true_mean = 2 / 7  # Beta(2, 5)
    misses = sum(anderson_upper(rng.beta(2, 5, 200), 1.0) < true_mean for _ in range(400))
    assert misses <= 20


def test_the_levels_are_ordered_and_the_record_is_what_the_command_computes() -> None:
    record = json.loads((ROOT / "lab" / "records" / "ceiling_levels.json").read_text())
    bound = json.loads((ROOT / record["bound"]).read_text())
    again = levels(np.asarray(bound["per_deal"]), bound["start_value"], record["slack"])
    for key, value in again.items():
        assert record[key] == pytest.approx(value), key
    assert (
        again["estimate"]
        < again["normal_one_sided_95"]
        < again["normal_two_sided_95_upper"]
        < again["distribution_free_95"]
        < again["certified_without_statistics"]
    )
    with pytest.raises(ValueError, match="above W"):
        levels(np.asarray(bound["per_deal"]), bound["start_value"] - 0.1)
