"""#75: power conditional on the observed per-seed spread (`seed_sd_interval`, `power_range`) and no verdict from an
interval of zero width (`zero_width`, `resolve`)."""
import math

import numpy as np
import pytest

from treepe_nb.evidence import paired_evidence, paired_power, power_range, resolve, seed_sd_interval, seeds_for_power, zero_width


def test_seed_sd_interval_is_the_chi_square_interval():
    lo, hi = seed_sd_interval(2.0, 6)                              # 5 degrees of freedom: chi2 0.975 = 12.8325, 0.025 = 0.8312
    assert lo == pytest.approx(2.0 * math.sqrt(5 / 12.8325), rel=1e-4)
    assert hi == pytest.approx(2.0 * math.sqrt(5 / 0.831212), rel=1e-4)
    with pytest.raises(ValueError, match="seeds must be an integer >= 2"):
        seed_sd_interval(1.0, 1)
    with pytest.raises(ValueError, match="seed_sd must be finite"):
        seed_sd_interval(-1.0, 5)


def test_seed_sd_interval_covers_the_true_spread():
    sds = np.random.default_rng(3).normal(0.0, 0.02, (3000, 4)).std(1, ddof=1)
    covered = np.mean([lo <= 0.02 <= hi for lo, hi in (seed_sd_interval(float(s), 4) for s in sds)])
    assert abs(covered - 0.95) < 0.015


def test_power_range_brackets_the_power_and_uses_the_spread_seeds():
    r = power_range(0.02, 0.0121, 6, example_sd=0.35, examples=448)
    assert r["low"] < r["power"] < r["high"]
    assert r["power"] == paired_power(0.02, 0.0121, 6, example_sd=0.35, examples=448)
    assert r["low"] == paired_power(0.02, r["sd_high"], 6, example_sd=0.35, examples=448)
    wide = power_range(0.02, 0.0121, 6, spread_seeds=3)            # a spread from 3 seeds is less certain
    assert wide["sd_high"] > r["sd_high"] and wide["low"] < r["low"]
    assert seeds_for_power(0.02, r["sd_high"]) > seeds_for_power(0.02, 0.0121)


def test_zero_width_is_no_verdict():
    assert zero_width((0.0107, 0.0107)) and not zero_width((0.01, 0.02)) and not zero_width((math.nan, math.nan))
    assert resolve((0.002, 0.02), (0.0107, 0.0107)) == "unresolved"
    assert resolve((0.002, 0.02), (0.0107, 0.0108)) == "positive"
    greedy = [[1] * 200 + [0] * 79 for _ in range(3)]
    beam = [[1] * 203 + [0] * 76 for _ in range(3)]                  # +3 of 279 on every seed
    ev = paired_evidence({"beam": beam, "greedy": greedy}, lambda m: m["beam"] - m["greedy"])
    assert ev["zero_width"] and ev["verdict"] == "unresolved"
