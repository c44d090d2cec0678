#!/usr/bin/env python3
"""An independent numpy TRG of the Ising model in a field, with tessel's rank rule.

The reference for tests/frontend/trg_models.cpp ("in a field the derived schedule cuts no
pair the field splits"): lnZ/N of a periodic lattice of 2^steps sites, the schedule
D'_1..D'_N, and d2(lnZ/N)/dbeta2 as a 5-point difference of lnZ/N on that schedule, from
numpy.linalg.svd (LAPACK gesdd) and numpy.einsum (scripts/trg_reference.py), sharing no code
with tessel. Z = sum exp(beta sum_<ij> s_i s_j + beta h sum_i s_i) (docs/trg.md §8.1); the
initial tensor is built here from the bond matrix exp(beta s s') = W W^T,
W = [[sqrt(cosh b), sqrt(sinh b)], [sqrt(cosh b), -sqrt(sinh b)]] (any W with that product
gives the same lnZ/N: the SVDs are covariant under an orthogonal change of the bond basis).
The wiring of a step is docs/trg.md §2; the rank rule is §2.4's:

    D' = min(D^2, chi, #{s > 1e-12} of Ma and of Mb), then, while the cut splits a
    multiplet (s[D'-1] >= 1e-7 s[0], s[D'] > 0 and s[D'-1] - s[D'] <= tol s[D'-1], of Ma
    or Mb; tol = 1e-6, and 1e-3 in a field), the start of that multiplet, where that keeps
    more than half of D'.

Usage: OPENBLAS_NUM_THREADS=1 scripts/ising_field_reference.py [--chi 16] [--steps 16]
       [--beta 0.43] [--field 0.01] [--diff 2e-4] [--tol T]
Prints the schedule, lnZ/N and the 5-point second difference. At the defaults (about a
minute, one BLAS thread) it printed 2,4,4,16,16,16,16,16,16,16,16,16,15,15,15,15,
lnZ/N = 0.9173615989916334 and d2(lnZ/N)/dbeta2 = 9.45132091316932 (step 2e-4; with more
BLAS threads the difference moves by ~4e-10, and its rounding alone is up to ~3e-9). With
--tol 1e-6 (the rule without the field's tolerance) it keeps 16 throughout and lnZ/N and
the difference depend on the SVD routine (the kink): 0.9173615997107788 and 9.4472 with one
thread, 0.9173615996905633 and 9.4447 with more.
"""
import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from trg_reference import FIELD_PAIR_TOL, MULTIPLET_TOL, run as trg


def initial_tensor(beta, h):
    c, s = np.sqrt(np.cosh(beta)), np.sqrt(np.sinh(beta))
    w = np.array([[c, s], [c, -s]])  # rows: spin +1, -1
    site = np.exp(beta * h * np.array([1.0, -1.0]))
    return np.einsum("a,ai,aj,ak,al->ijkl", site, w, w, w, w)


def run(chi, steps, beta, h, tol, ranks=None):
    """(schedule, lnZ/N); `ranks` pins the schedule instead of deriving it."""
    return trg(initial_tensor(beta, h), chi, steps, tol, ranks)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chi", type=int, default=16)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--beta", type=float, default=0.43)
    ap.add_argument("--field", type=float, default=0.01)
    ap.add_argument("--diff", type=float, default=2e-4,
                    help="step of the 5-point difference in beta")
    ap.add_argument("--tol", type=float, default=None,
                    help="the rule's relative gap (default: 1e-3 in a field, else 1e-6)")
    a = ap.parse_args()
    tol = a.tol
    if tol is None:
        tol = max(MULTIPLET_TOL, FIELD_PAIR_TOL) if a.field != 0 else MULTIPLET_TOL
    ranks, lnz = run(a.chi, a.steps, a.beta, a.field, tol)
    f = [run(a.chi, a.steps, a.beta + j * a.diff, a.field, tol, ranks)[1]
         for j in (-2, -1, 0, 1, 2)]
    d2 = (-f[0] + 16 * f[1] - 30 * f[2] + 16 * f[3] - f[4]) / (12 * a.diff**2)
    print(",".join(map(str, ranks)))
    print(f"lnZ/N = {lnz!r}")
    print(f"d2(lnZ/N)/dbeta2 = {d2!r} (5-point difference, step {a.diff:g}, on this schedule)")


if __name__ == "__main__":
    main()
