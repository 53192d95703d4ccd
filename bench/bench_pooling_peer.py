#!/usr/bin/env python3
"""The peers of build/bench_pooling: PyLate's Ward token pooling
(ColBERT.pool_embeddings_hierarchical: cosine distances, scipy.cluster.hierarchy.linkage(method="ward"),
fcluster(maxclust), cluster means) and that SciPy linkage + fcluster alone, on the documents bench_pooling --save
wrote, one thread, one protected token, the same pool factor. Also checks that the clusters agree with spread's
(labels.npy): each document's partition of its pooled tokens, up to the numbering of the clusters.

    bench_pooling_peer.py DIR --tokens 180 [--pool-factor 4] [--repeats 30]

Prints the timings, then one JSON line {"pylate_median_ms", "scipy_median_ms", "documents", "same_partition"}.
"""
import argparse
import json
import os
import statistics
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--tokens", type=int, required=True)
    p.add_argument("--pool-factor", type=int, default=4)
    p.add_argument("--repeats", type=int, default=30)
    a = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import numpy as np
    import torch
    from pylate.models import ColBERT
    from scipy.cluster import hierarchy
    torch.set_num_threads(1)
    flat = np.load(os.path.join(a.dir, "docs.npy"))
    labels = np.load(os.path.join(a.dir, "labels.npy")).reshape(-1, a.tokens)
    docs = [torch.from_numpy(d.copy()) for d in flat.reshape(-1, a.tokens, flat.shape[1])]

    def pylate():  # the method uses no state of the model: called on the class with self = None
        return ColBERT.pool_embeddings_hierarchical(None, docs, pool_factor=a.pool_factor, protected_tokens=1)

    def scipy_labels():
        out = []
        for d in docs:
            x = d[1:].numpy()
            condensed = (1 - x @ x.T)[np.triu_indices(len(x), k=1)]
            z = hierarchy.linkage(condensed, method="ward")
            out.append(hierarchy.fcluster(z, t=max(len(x) // a.pool_factor, 1), criterion="maxclust"))
        return out

    def median_ms(f):
        f()
        times = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            f()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)

    t_pylate, t_scipy = median_ms(pylate), median_ms(scipy_labels)
    same = 0
    for theirs, mine in zip(scipy_labels(), labels):
        pairs = set(zip(theirs.tolist(), mine[1:].tolist()))  # a bijection between the two numberings iff equal
        same += len(pairs) == len(set(theirs.tolist())) == len(set(mine[1:].tolist()))
    print(f"PyLate pool_embeddings_hierarchical: median {t_pylate:.2f} ms per {len(docs)}-document call")
    print(f"SciPy linkage(ward) + fcluster alone: median {t_scipy:.2f} ms")
    print(f"same clusters as spread: {same} of {len(docs)} documents")
    print(json.dumps({"pylate_median_ms": round(t_pylate, 3), "scipy_median_ms": round(t_scipy, 3),
                      "documents": len(docs), "same_partition": same}))


if __name__ == "__main__":
    main()
