#!/usr/bin/python3
"""Fixture for tests/test_contrastive.cpp: InfoNCE values and gradients from PyTorch, written the way
sentence-transformers writes its losses (ST itself is not packaged for Debian, so its code is mirrored here):

  MultipleNegativesRankingLoss           scores = cos_sim(a, cat(p, n...)) * scale; CrossEntropyLoss(scores, arange(B))
  MultipleNegativesSymmetricRankingLoss  (CE(scores) + CE(scores[:, :B].T)) / 2
  MatryoshkaLoss                         sum over dims of the inner loss on x[..., :dim] re-normalised (unit weights)
  duplicate masking                      not in ST's MNRL: columns j != i carrying row i's text id filled with -inf
                                         before the CE (as CachedGISTEmbedLoss masks its false negatives)

cos_sim is ST's util.cos_sim: torch.nn.functional.normalize (eps 1e-12) on both sides, then a matrix product.
Everything in float64; gradients by torch.autograd.

tests/data/contrastive/fixture.json
  anchors [B][d], candidates [B(1+K)][d] (positives, then hard-negative column k for every anchor),
  anchor_ids [B], candidate_ids [B(1+K)], and cases: {name, scale, symmetric, matryoshka_dims, masked,
  loss, grad_anchors, grad_candidates}.

Needs Debian's python3-torch:  /usr/bin/python3 tests/oracles/gen_contrastive_fixtures.py
"""
import json
import os

import torch
import torch.nn.functional as F

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "contrastive")


def cos_sim(a, b):  # sentence_transformers.util.cos_sim
    a_norm = F.normalize(a, p=2, dim=1)
    b_norm = F.normalize(b, p=2, dim=1)
    return torch.mm(a_norm, b_norm.transpose(0, 1))


def duplicate_mask(ids, batch):
    """[B, len(ids)] True where column j != i holds row i's text."""
    same = ids[:batch].unsqueeze(1) == ids.unsqueeze(0)
    same[torch.arange(batch), torch.arange(batch)] = False
    return same


def mnrl(anchor, candidates, scale, symmetric, anchor_ids=None, candidate_ids=None):
    ce = torch.nn.CrossEntropyLoss()
    scores = cos_sim(anchor, candidates) * scale
    labels = torch.tensor(range(len(scores)), dtype=torch.long)
    forward_scores = scores
    if candidate_ids is not None:
        forward_scores = scores.masked_fill(duplicate_mask(candidate_ids, len(anchor)), float("-inf"))
    forward_loss = ce(forward_scores, labels)
    if not symmetric:
        return forward_loss
    backward_scores = scores[:, 0:len(anchor)].transpose(0, 1)
    if anchor_ids is not None:
        backward_scores = backward_scores.masked_fill(duplicate_mask(anchor_ids, len(anchor)), float("-inf"))
    backward_loss = ce(backward_scores, labels)
    return (forward_loss + backward_loss) / 2


def matryoshka(anchor, candidates, dims, **kw):
    loss = 0.0
    for dim in sorted(dims, reverse=True):
        loss = loss + mnrl(F.normalize(anchor[..., :dim], p=2, dim=-1),
                           F.normalize(candidates[..., :dim], p=2, dim=-1), **kw)
    return loss


def main():
    g = torch.Generator().manual_seed(20250612)
    B, K, d = 6, 2, 16
    anchors = torch.randn(B, d, generator=g, dtype=torch.float64) * 1.5
    anchors[3] = anchors[0]  # anchors 0 and 3 are one text
    anchors[4] = anchors[1] + 0.3 * torch.randn(d, generator=g, dtype=torch.float64)
    positives = anchors + 0.9 * torch.randn(B, d, generator=g, dtype=torch.float64)
    negatives = [anchors + 1.4 * torch.randn(B, d, generator=g, dtype=torch.float64) for _ in range(K)]
    # Row 4's positive repeats row 1's positive text (and so its embedding); so does the hard negative n^2_0.
    positives[4] = positives[1]
    negatives[1][0] = positives[1]
    candidates = torch.cat([positives] + negatives)
    anchor_ids = torch.tensor([10, 11, 12, 10, 14, 15])
    candidate_ids = torch.arange(100, 100 + B * (1 + K))
    candidate_ids[4] = candidate_ids[1]
    candidate_ids[B * 2 + 0] = candidate_ids[1]

    cases = []
    for name, scale, symmetric, dims, masked in [
        ("mnrl", 20.0, False, [], False),
        ("mnrl_scale_7", 7.0, False, [], False),
        ("symmetric", 20.0, True, [], False),
        ("masked", 20.0, False, [], True),
        ("symmetric_masked", 20.0, True, [], True),
        ("matryoshka", 20.0, False, [16, 8, 3], False),
        ("matryoshka_symmetric_masked", 10.0, True, [12, 5], True),
    ]:
        a = anchors.clone().requires_grad_()
        c = candidates.clone().requires_grad_()
        kw = dict(scale=scale, symmetric=symmetric,
                  anchor_ids=anchor_ids if masked else None, candidate_ids=candidate_ids if masked else None)
        loss = matryoshka(a, c, dims, **kw) if dims else mnrl(a, c, **kw)
        loss.backward()
        cases.append(dict(name=name, scale=scale, symmetric=symmetric, matryoshka_dims=dims, masked=masked,
                          loss=loss.item(), grad_anchors=a.grad.tolist(), grad_candidates=c.grad.tolist()))

    os.makedirs(ROOT, exist_ok=True)
    out = dict(anchors=anchors.tolist(), candidates=candidates.tolist(), anchor_ids=anchor_ids.tolist(),
               candidate_ids=candidate_ids.tolist(), cases=cases)
    with open(os.path.join(ROOT, "fixture.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    for c in cases:
        print(f"{c['name']:30s} {c['loss']:.12f}")


if __name__ == "__main__":
    main()
