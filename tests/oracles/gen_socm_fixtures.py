#!/usr/bin/python3
"""Fixtures for tests/test_socm.cpp and tests/test_npy.cpp, written by NumPy and checked by an independent reference.

tests/data/socm/lists/   six token lists (one .npy per text, d = 6): random, float32 with n < d (saved as format
                         2.0), a single token, a scaled duplicate, n > rank (rank 2), a wide spread (tr Sigma > 2).
tests/data/socm/expected.json
                         per pair and summarised: d_mu, d_sigma, socm (exact, docs/design.md §7.3) and the
                         paper_compatible d_sigma (eps I added as tohoku-nlp/socm-text-embedding does), all by brute
                         force on d x d covariance matrices with 50-digit mpmath eigendecompositions; mean_cos and
                         concentration with NumPy; quantiles with numpy.percentile (linear).
tests/data/socm/npy/     small arrays for the reader: float32/float64 in formats 1.0 and 2.0, and files it must
                         reject (Fortran order, int32, 3-D, 1-D, big-endian, truncated, not .npy).

Needs Debian's python3-numpy and python3-mpmath:  /usr/bin/python3 tests/oracles/gen_socm_fixtures.py
"""
import itertools
import json
import os

import mpmath as mp
import numpy as np

mp.mp.dps = 50
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "socm")
EPS_PAPER = mp.mpf("1e-9")


def token_lists(rng):
    d = 6
    t0 = rng.normal(size=(9, d)) * 0.4 + rng.normal(size=d)
    t1 = (rng.normal(size=(4, d)) * 0.3 + rng.normal(size=d)).astype(np.float32)
    t2 = rng.normal(size=(1, d))
    t3 = 2.5 * t0
    basis = rng.normal(size=(2, d))
    t4 = rng.normal(size=d) + rng.normal(size=(10, 2)) @ basis * 0.5
    t5 = rng.normal(size=(7, d)) * 2.0 + rng.normal(size=d) * 0.5
    return [t0, t1, t2, t3, t4, t5]


def stats(x):
    """Normalised mean and biased covariance, in mpmath, of an n x d float64 array."""
    x = mp.matrix(x.tolist())
    n, d = x.rows, x.cols
    mu = [mp.fsum(x[j, c] for j in range(n)) / n for c in range(d)]
    scale = 1 / (mp.sqrt(mp.fsum(m * m for m in mu)) + mp.mpf("1e-12"))
    xs = x * scale
    mu = [m * scale for m in mu]
    sigma = mp.matrix(d, d)
    for a in range(d):
        for b in range(d):
            sigma[a, b] = mp.fsum((xs[j, a] - mu[a]) * (xs[j, b] - mu[b]) for j in range(n)) / n
    return mu, sigma


def psd_sqrt(m):
    evals, evecs = mp.eigsy(m)
    d = m.rows
    root = mp.matrix(d, d)
    for k in range(d):
        r = mp.sqrt(max(evals[k], 0))
        for a in range(d):
            for b in range(d):
                root[a, b] += evecs[a, k] * r * evecs[b, k]
    return root


def trace(m):
    return mp.fsum(m[i, i] for i in range(m.rows))


def trace_sqrt(m):
    evals, _ = mp.eigsy(m)
    return mp.fsum(mp.sqrt(max(e, 0)) for e in evals)


def pair(s1, s2):
    (mu1, sig1), (mu2, sig2) = s1, s2
    d = sig1.rows
    d_mu = mp.fsum((a - b) ** 2 for a, b in zip(mu1, mu2)) / 4
    root1 = psd_sqrt(sig1)
    d_sigma = max(trace(sig1) + trace(sig2) - 2 * trace_sqrt(root1 * sig2 * root1), 0) / 4
    # The reference code: sqrt of (Sigma1 + eps I), then sqrt of (mid + eps I); traces of the plain matrices.
    root1p = psd_sqrt(sig1 + EPS_PAPER * mp.eye(d))
    mid = root1p * sig2 * root1p
    d_sigma_paper = max(trace(sig1) + trace(sig2) - 2 * trace_sqrt(mid + EPS_PAPER * mp.eye(d)), 0) / 4
    socm, socm_paper = (1 - d_mu) * d_sigma, (1 - d_mu) * d_sigma_paper
    return float(d_mu), float(d_sigma), float(socm), float(d_sigma_paper), float(socm_paper)


def mean_cos(x):
    u = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    incl = float(np.sum(u.mean(axis=0) ** 2))
    n = x.shape[0]
    excl = (n * incl - 1) / (n - 1) if n >= 2 else None
    return incl, excl


def concentration(x):
    mu = x.mean(axis=0)
    return float(np.mean(np.sum((x - mu) ** 2, axis=1)) / np.sum(mu**2))


def quantiles(v):
    return {f"p{p:02d}": float(np.percentile(v, p)) for p in (5, 25, 50, 75, 95)}


def write_lists(lists):
    out = os.path.join(ROOT, "lists")
    os.makedirs(out, exist_ok=True)
    for i, x in enumerate(lists):
        path = os.path.join(out, f"t{i}.npy")
        if x.dtype == np.float32:  # the float32 list also exercises format 2.0
            with open(path, "wb") as f:
                np.lib.format.write_array(f, x, version=(2, 0))
        else:
            np.save(path, x)


def expected(lists):
    as64 = [np.asarray(x, dtype=np.float64) for x in lists]
    st = [stats(x) for x in as64]
    pairs = []
    for i, j in itertools.combinations(range(len(as64)), 2):
        d_mu, d_sigma, socm, d_sigma_paper, socm_paper = pair(st[i], st[j])
        pairs.append({"i": i, "j": j, "d_mu": d_mu, "d_sigma": d_sigma, "socm": socm,
                      "d_sigma_paper": d_sigma_paper, "socm_paper": socm_paper})
    col = {k: np.array([p[k] for p in pairs]) for k in ("d_mu", "d_sigma", "socm", "d_sigma_paper", "socm_paper")}
    cos = [mean_cos(x) for x in as64]
    excl = [c[1] for c in cos if c[1] is not None]
    return {
        "pairs": pairs,
        "texts": len(as64),
        "tokens_mean": float(np.mean([x.shape[0] for x in as64])),
        "socm": {"mean": float(col["socm"].mean()), **quantiles(col["socm"])},
        "d_mu": {"mean": float(col["d_mu"].mean()), **quantiles(col["d_mu"])},
        "d_sigma": {"mean": float(col["d_sigma"].mean()), **quantiles(col["d_sigma"])},
        "paper": {"socm_mean": float(col["socm_paper"].mean()), "d_sigma_mean": float(col["d_sigma_paper"].mean())},
        "mean_cos_incl": float(np.mean([c[0] for c in cos])),
        "mean_cos_excl": float(np.mean(excl)),
        "concentration": float(np.mean([concentration(x) for x in as64])),
    }


def write_npy_cases():
    out = os.path.join(ROOT, "npy")
    os.makedirs(out, exist_ok=True)
    a = np.arange(12, dtype=np.float64).reshape(3, 4) / 8  # a[i, j] = (4 i + j) / 8, exact in float32 too
    np.save(os.path.join(out, "f8.npy"), a)
    np.save(os.path.join(out, "f4.npy"), a.astype(np.float32))
    with open(os.path.join(out, "f8_v2.npy"), "wb") as f:
        np.lib.format.write_array(f, a, version=(2, 0))
    np.save(os.path.join(out, "f8_empty.npy"), np.zeros((0, 4)))
    np.save(os.path.join(out, "bad_fortran.npy"), np.asfortranarray(a))
    np.save(os.path.join(out, "bad_int32.npy"), np.arange(12, dtype=np.int32).reshape(3, 4))
    np.save(os.path.join(out, "bad_3d.npy"), np.zeros((2, 2, 3)))
    np.save(os.path.join(out, "bad_1d.npy"), np.zeros(4))
    np.save(os.path.join(out, "bad_big_endian.npy"), a.astype(">f8"))
    with open(os.path.join(out, "f8.npy"), "rb") as f:
        raw = f.read()
    with open(os.path.join(out, "bad_truncated.npy"), "wb") as f:
        f.write(raw[:-8])
    with open(os.path.join(out, "bad_not_npy.npy"), "wb") as f:
        f.write(b"this is not a numpy file\n")


def main():
    lists = token_lists(np.random.default_rng(20260427))
    write_lists(lists)
    with open(os.path.join(ROOT, "expected.json"), "w") as f:
        json.dump(expected(lists), f, indent=1)
        f.write("\n")
    write_npy_cases()


if __name__ == "__main__":
    main()
