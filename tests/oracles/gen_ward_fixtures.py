#!/usr/bin/python3
"""Fixtures for tests/test_ward.cpp: Ward trees and flat clusters computed by SciPy (docs/design.md §6.3).

tests/data/ward/<case>.npy   the token vectors of one case (m x 8, float64), the rows Y that are clustered
tests/data/ward/expected.json per case and distance mode (cosine: clamp(1 - <y_i, y_j>, 0, 2); euclidean:
                              sqrt(clamp(2 - 2 <y_i, y_j>, 0, 4))):
    Z          scipy.cluster.hierarchy.linkage(D, 'ward') on the condensed distances, rows [a, b, height, size]
    maxclust   {k: labels} for several k < m: fcluster(Z, k, 'maxclust') - 1 as SciPy >= 1.15 computes it
    distance   [{tau, labels}]: fcluster(Z, tau, 'distance') - 1
    condensed  the distances themselves (small cases only)

Cases, n in {2, 3, 17, 180, 300}:
    clustered  tokens around a few directions plus noise (no ties)
    lattice    unit vectors with four entries +-1/2 and four zeros, drawn from a small pool: duplicate vectors
               (height-0 merges) and many equal distances and heights (ties everywhere)
    equilateral (n = 3) three orthogonal vectors: every distance 1, the chain's tie rules decide everything
    chain_tie  (n = 4) a chain that reaches a tie between its previous element and a lower index
Every coordinate is a multiple of 2^-20, so every inner product is exact in float64 whatever the summation order
or fused multiply-adds: the C++ distances equal NumPy's bit for bit and ties stay ties.

SciPy <= 1.14's maxclust never tried the lowest merge (scipy#12651, fixed by scipy#21121): for k = m - 1 it
merged past the first height. docs/design.md §6.3 follows the fix, which is fcluster at the height of merge m - k under
the 'distance' criterion; this script computes it that way and checks it against fcluster(.., 'maxclust') wherever the
installed SciPy agrees.

Needs Debian's python3-numpy and python3-scipy:  /usr/bin/python3 tests/oracles/gen_ward_fixtures.py
"""
import json
import os

import numpy as np
import scipy
from scipy.cluster.hierarchy import fcluster, linkage

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "ward"))
DIM = 8
GRID = 2.0**-20
SCIPY_MAXCLUST_FIXED = tuple(int(p) for p in scipy.__version__.split(".")[:2]) >= (1, 15)


def on_grid(x):
    return np.round(x / GRID) * GRID


def clustered(rng, n):
    centres = rng.normal(size=(max(1, n // 6), DIM))
    x = centres[rng.integers(0, len(centres), n)] + 0.35 * rng.normal(size=(n, DIM))
    return on_grid(x / np.linalg.norm(x, axis=1, keepdims=True))


def lattice_vector(rng):
    v = np.zeros(DIM)
    v[rng.choice(DIM, 4, replace=False)] = rng.choice([-0.5, 0.5], 4)
    return v


def lattice(rng, n, pool_size):
    pool = np.array([lattice_vector(rng) for _ in range(pool_size)])
    return pool[rng.integers(0, pool_size, n)]


def chain_tie():
    """The chain 0 -> 3 -> 2 meets a tie at 2 (distance 1/4 to 3 and to 1): SciPy keeps the previous element, 3;
    taking the lowest index, 1, gives another tree. Needed because the random cases never hit this rule."""
    h = 0.5
    return np.array([[h, 0, 0, 0, 0, h, h, h], [0, h, h, h, h, 0, 0, 0], [h, h, h, h, 0, 0, 0, 0],
                     [h, h, h, 0, 0, 0, 0, h]])


def cases(rng):
    eye = np.eye(DIM)
    yield "clustered_2", clustered(rng, 2)
    yield "duplicate_2", np.repeat(lattice(rng, 1, 1), 2, axis=0)
    yield "clustered_3", clustered(rng, 3)
    yield "equilateral_3", eye[:3]
    yield "chain_tie_4", chain_tie()
    yield "clustered_17", clustered(rng, 17)
    yield "lattice_17", lattice(rng, 17, 6)
    yield "clustered_180", clustered(rng, 180)
    yield "lattice_180", lattice(rng, 180, 24)
    yield "clustered_300", clustered(rng, 300)
    yield "lattice_300", lattice(rng, 300, 40)


def condensed_distances(y, mode):
    g = y @ y.T
    d = np.clip(1.0 - g, 0.0, 2.0) if mode == "cosine" else np.sqrt(np.clip(2.0 - 2.0 * g, 0.0, 4.0))
    return d[np.triu_indices(len(y), 1)]


def labels(t):
    return [int(v) - 1 for v in t]


def maxclust(z, m, k):
    """fcluster(Z, k, 'maxclust') with SciPy >= 1.15's rule: every merge up to the height of merge m - k."""
    fixed = fcluster(z, z[m - k - 1, 2], "distance")
    if k < m - 1 or SCIPY_MAXCLUST_FIXED:
        assert np.array_equal(fixed, fcluster(z, k, "maxclust")), (m, k)
    return labels(fixed)


def expected(y, mode):
    m = len(y)
    d = condensed_distances(y, mode)
    z = linkage(d, "ward")
    ks = sorted({k for k in (1, 2, 3, m // 4, m // 3, m // 2, m - 1) if 1 <= k < m})
    # 0, the largest tie group of positive heights (a cut inside ties), the median, the 90% quantile, the root
    heights, counts = np.unique(z[:, 2], return_counts=True)
    counts[heights == 0] = 0
    taus = sorted({0.0, float(heights[np.argmax(counts)]), float(np.median(z[:, 2])),
                   float(np.quantile(z[:, 2], 0.9)), float(z[-1, 2])})
    out = {
        "Z": [[int(a), int(b), float(h), int(s)] for a, b, h, s in z],
        "maxclust": {str(k): maxclust(z, m, k) for k in ks},
        "distance": [{"tau": t, "labels": labels(fcluster(z, t, "distance"))} for t in taus],
    }
    if m <= 17:
        out["condensed"] = [float(v) for v in d]
    return out


def main():
    os.makedirs(ROOT, exist_ok=True)
    rng = np.random.default_rng(13)
    result = {"scipy": scipy.__version__, "cases": []}
    for name, y in cases(rng):
        y = np.ascontiguousarray(y, dtype=np.float64)
        np.save(os.path.join(ROOT, name + ".npy"), y)
        case = {"name": name, "file": name + ".npy", "n": len(y)}
        for mode in ("cosine", "euclidean"):
            case[mode] = expected(y, mode)
        result["cases"].append(case)
    with open(os.path.join(ROOT, "expected.json"), "w") as f:
        json.dump(result, f, separators=(",", ":"))
        f.write("\n")
    # The fixtures must exercise what the tests claim: ties that leave fewer than k clusters, height-0 merges.
    fewer = sum(len(set(lab)) < int(k) for c in result["cases"] for mode in ("cosine", "euclidean")
                for k, lab in c[mode]["maxclust"].items())
    zero = sum(row[2] == 0 for c in result["cases"] for row in c["cosine"]["Z"])
    assert fewer > 0 and zero > 0, (fewer, zero)
    print(f"wrote {len(result['cases'])} cases to {ROOT} (scipy {scipy.__version__}; "
          f"{fewer} cuts with fewer than k clusters, {zero} zero-height merges)")


if __name__ == "__main__":
    main()
