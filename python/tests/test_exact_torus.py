"""Kaufman's exact finite torus (bench/exact_torus.py), the benchmarks' reference for a finite
lattice: against the sum over every configuration, and tessel's TRG where it is exact.
"""
import math
import os
import sys

import numpy as np
import pytest

import tessel

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from exact_torus import kaufman_lnz_per_site  # noqa: E402

BETA_C = 0.44068679350977147


def brute_force_lnz_per_site(beta: float, m: int, n: int) -> float:
    """ln Σ over all 2^(mn) configurations of exp(β Σ_<ij> σ_i σ_j), per site (periodic)."""
    N = m * n
    bits = np.arange(1 << N, dtype=np.int64)[:, None] >> np.arange(N)[None, :]
    s = (2 * (bits & 1) - 1).reshape(-1, m, n)
    e = (s * np.roll(s, 1, axis=1) + s * np.roll(s, 1, axis=2)).sum(axis=(1, 2)).astype(float)
    top = beta * e.max()
    return (top + math.log(np.exp(beta * e - top).sum())) / N


@pytest.mark.parametrize("m,n", [(4, 4), (3, 4), (4, 3), (2, 5)])
@pytest.mark.parametrize("beta", [0.2, BETA_C, 0.9])
def test_kaufman_equals_the_sum_over_configurations(m, n, beta):
    assert kaufman_lnz_per_site(beta, m, n) == pytest.approx(brute_force_lnz_per_site(beta, m, n),
                                                             rel=1e-14)


def test_kaufman_tends_to_onsager():
    # The finite-size shift falls as 1/N at T_c (about 0.64/N), as ln 2/N below T_c (the two
    # ordered states), exponentially above T_c.
    for beta in (0.3, BETA_C, 0.6):
        exact = tessel.onsager(beta)["lnZ_per_site"]
        assert abs(kaufman_lnz_per_site(beta, 1024, 1024) - exact) < 1e-6 * exact
    assert abs(kaufman_lnz_per_site(0.3, 256, 256) - tessel.onsager(0.3)["lnZ_per_site"]) < 1e-14


@pytest.mark.parametrize("beta", [0.3, BETA_C, 0.6])
def test_trg_on_small_tori_is_kaufman(beta):
    # 2 and 4 TRG steps are the 2×2 and 4×4 tori; at χ = 16 nothing is truncated.
    for steps, side in ((2, 2), (4, 4)):
        r = tessel.trg(beta, chi=16, steps=steps)
        assert r["lnZ_per_site"] == pytest.approx(kaufman_lnz_per_site(beta, side, side), rel=1e-14)


def test_kaufman_rejects_what_it_cannot_compute():
    with pytest.raises(ValueError):
        kaufman_lnz_per_site(0.0, 4, 4)
    with pytest.raises(ValueError):
        kaufman_lnz_per_site(0.4, 0, 4)
