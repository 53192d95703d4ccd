#!/usr/bin/python3
"""Fixture for tests/test_sts.cpp: Spearman's rho and average ranks, computed by SciPy.

tests/data/eval/spearman.json   a list of cases {name, x, y, rho, ranks_x, ranks_y}:
                                rho = scipy.stats.spearmanr(x, y).statistic (null where SciPy gives NaN),
                                ranks_* = scipy.stats.rankdata(*, method="average").
Cases: STS-like data (float32 cosines against gold scores on a 0.2 grid, many ties), integer labels tied on both
sides, continuous values without ties, two pairs, signed zeros (a tie), and a constant side (NaN).

Needs Debian's python3-numpy and python3-scipy:  /usr/bin/python3 tests/oracles/gen_eval_fixtures.py
"""
import json
import math
import os
import warnings

import numpy as np
import scipy
import scipy.stats

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "eval")


def cases(rng):
    gold = np.round(rng.uniform(0, 5, size=400) / 0.2) * 0.2
    cos = (gold / 5 + rng.normal(scale=0.3, size=400)).astype(np.float32).astype(np.float64)
    yield "sts_like_ties_in_gold", cos, gold
    labels = rng.integers(0, 5, size=40).astype(float)
    yield "integer_ties_both_sides", labels, rng.integers(0, 4, size=40).astype(float)
    x = rng.normal(size=200)
    yield "continuous_no_ties", x, 0.5 * x + rng.normal(size=200)
    yield "two_pairs", np.array([0.3, -1.0]), np.array([2.0, 2.5])
    yield "signed_zero_is_a_tie", np.array([0.0, -0.0, 1.0, -1.0, 0.0]), np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    yield "hand_ties", np.array([1.0, 2.0, 2.0, 3.0, 3.0, 3.0]), np.array([6.0, 5.0, 5.0, 4.0, 1.0, 1.0])
    yield "constant_side", np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.5, 0.5])


def main():
    rng = np.random.default_rng(20260512)
    out = []
    for name, x, y in cases(rng):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", scipy.stats.ConstantInputWarning)
            rho = float(scipy.stats.spearmanr(x, y).statistic)
        out.append({
            "name": name,
            "x": [float(v) for v in x],
            "y": [float(v) for v in y],
            "rho": None if math.isnan(rho) else rho,
            "ranks_x": [float(v) for v in scipy.stats.rankdata(x, method="average")],
            "ranks_y": [float(v) for v in scipy.stats.rankdata(y, method="average")],
        })
    os.makedirs(ROOT, exist_ok=True)
    with open(os.path.join(ROOT, "spearman.json"), "w") as f:
        json.dump({"scipy": scipy.__version__, "numpy": np.__version__, "cases": out}, f, allow_nan=False)
        f.write("\n")


if __name__ == "__main__":
    main()
