#!/usr/bin/env python3
"""An independent numpy TRG of the q-state Potts model with tessel's multiplet-aware cut.

The reference for tests/frontend/trg_models.cpp ("the derived schedule cuts no degenerate
multiplet"): lnZ/N of a periodic lattice of 2^steps sites and the schedule D'_1..D'_N, from
numpy.linalg.svd (LAPACK gesdd) and numpy.einsum (scripts/trg_reference.py), sharing no code
with tessel. The model and the wiring are those of docs/trg.md §1, §2 and §8.2; the rank rule
is §2.4's:

    D' = min(D², χ, #{s > 1e-12} of Ma and of Mb), then, while the cut splits a multiplet
    (s[D'-1] >= 1e-7 s[0] and s[D'-1] - s[D'] <= 1e-6 s[D'-1], of Ma or Mb), the start of
    that multiplet, where that keeps more than half of D'.

Usage: scripts/potts_multiplet_reference.py [--q 3] [--chi 24] [--steps 24] [--beta 0.98]
Prints the schedule and lnZ/N. At the defaults (about 15 minutes: numpy's SVDs with vectors of
576x576 matrices) it printed 3,9,9,24,23,24,24,24,24,23,23,24,24,24,24,24,22,22,22,22,22,22,22,22
and lnZ/N = 2.0325434708378327 (2.032543470837834 while the step divided by max|T|).
"""
import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from trg_reference import MULTIPLET_TOL, run as trg


def initial_tensor(q, beta):
    """T0 = einsum(ai,aj,ak,al) of W, Q = W·Wᵀ the bond weight with e^β taken out."""
    lam = np.array([1 + (q - 1) * np.exp(-beta)] + [1 - np.exp(-beta)] * (q - 1))
    basis = np.column_stack([np.ones(q)] + [np.eye(q)[:, i] for i in range(q - 1)])
    w = np.linalg.qr(basis)[0] * np.sqrt(lam)
    return np.einsum("ai,aj,ak,al->ijkl", w, w, w, w)


def run(q, chi, steps, beta):
    ranks, lnz = trg(initial_tensor(q, beta), chi, steps, MULTIPLET_TOL)
    return ranks, lnz + 2 * beta


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
