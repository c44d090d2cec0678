#!/usr/bin/env python3
"""An independent numpy TRG of the q-state Potts model with tessel's multiplet-aware cut.

The reference for tests/frontend/trg_models.cpp ("the derived schedule cuts no degenerate
multiplet"): lnZ/N of a periodic lattice of 2^steps sites and the schedule D'_1..D'_N, from
numpy.linalg.svd (LAPACK gesdd) and numpy.einsum, sharing no code with tessel. The model and
the wiring are those of docs/trg.md §1, §2 and §8.2; the rank rule is §2.4's:

    D' = min(D², χ, #{s > 1e-12} of Ma and of Mb), then, while the cut splits a multiplet
    (s[D'-1] >= 1e-7 s[0] and s[D'-1] - s[D'] <= 1e-6 s[D'-1], of Ma or Mb), the start of
    that multiplet, where that keeps more than half of D'.

Usage: scripts/potts_multiplet_reference.py [--q 3] [--chi 24] [--steps 24] [--beta 0.98]
Prints the schedule and lnZ/N. At the defaults (about 15 minutes: numpy's SVDs with vectors of
576x576 matrices) it printed 3,9,9,24,23,24,24,24,24,23,23,24,24,24,24,24,22,22,22,22,22,22,22,22
and lnZ/N = 2.032543470837834.
"""
import argparse

import numpy as np

RANK_TOL = 1e-12
MULTIPLET_TOL = 1e-6
MULTIPLET_FLOOR = 1e-7


def initial_tensor(q, beta):
    """T0 = einsum(ai,aj,ak,al) of W, Q = W·Wᵀ the bond weight with e^β taken out."""
    lam = np.array([1 + (q - 1) * np.exp(-beta)] + [1 - np.exp(-beta)] * (q - 1))
    basis = np.column_stack([np.ones(q)] + [np.eye(q)[:, i] for i in range(q - 1)])
    w = np.linalg.qr(basis)[0] * np.sqrt(lam)
    return np.einsum("ai,aj,ak,al->ijkl", w, w, w, w)


def splits(s, k):
    return s[k - 1] >= MULTIPLET_FLOOR * s[0] and s[k - 1] - s[k] <= MULTIPLET_TOL * s[k - 1]


def multiplet_start(s, k):
    m = k - 1
    while m > 0 and s[m - 1] - s[m] <= MULTIPLET_TOL * s[m - 1]:
        m -= 1
    return m


def run(q, chi, steps, beta):
    t = initial_tensor(q, beta)
    lnz, ranks = 0.0, []
    for n in range(steps):
        m = np.abs(t).max()
        t = t / m
        lnz += np.log(m) / 2**n
        d = t.shape[0]
        ma = t.transpose(2, 1, 0, 3).reshape(d * d, d * d)
        mb = t.transpose(3, 2, 1, 0).reshape(d * d, d * d)
        ua, sa, va = np.linalg.svd(ma)
        ub, sb, vb = np.linalg.svd(mb)
        k = min(chi, d * d, int((sa > RANK_TOL).sum()), int((sb > RANK_TOL).sum()))
        if k < d * d:
            starts = [multiplet_start(s, k) for s in (sa, sb) if splits(s, k)]
            if starts and 2 * min(starts) > k:
                k = min(starts)
        ranks.append(k)
        s1 = (ua[:, :k] * np.sqrt(sa[:k])).reshape(d, d, k)
        s3 = (va[:k].T * np.sqrt(sa[:k])).reshape(d, d, k)
        s2 = (ub[:, :k] * np.sqrt(sb[:k])).reshape(d, d, k)
        s4 = (vb[:k].T * np.sqrt(sb[:k])).reshape(d, d, k)
        t = np.einsum("war,abu,bgl,gwd->ruld", s1, s2, s3, s4, optimize=True)
    trace = np.einsum("ijij->", t)
    return ranks, lnz + np.log(trace) / 2**steps + 2 * beta


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--q", type=int, default=3)
    ap.add_argument("--chi", type=int, default=24)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--beta", type=float, default=0.98)
    a = ap.parse_args()
    ranks, lnz = run(a.q, a.chi, a.steps, a.beta)
    print(",".join(map(str, ranks)))
    print(f"lnZ/N = {lnz!r}")


if __name__ == "__main__":
    main()
