"""tessel.trg(algorithm="hotrg") against a higher-order TRG written here in numpy (its own
eigendecompositions and einsums, nothing of tessel's), and against Onsager."""
import numpy as np
import pytest

import tessel


def numpy_hotrg(beta, chi, steps):
    """lnZ/N of the Ising model on a 2**steps x 2**steps torus by HOTRG (Xie et al., PRB 86,
    045139 (2012)): per axis, stack two tensors, cut the doubled legs with the leading
    eigenvectors of their environment M M^T, turn the tensor by 90 degrees."""
    c, s = np.sqrt(np.cosh(beta)), np.sqrt(np.sinh(beta))
    W = np.array([[c, s], [c, -s]])
    T = np.einsum("ai,aj,ak,al->ijkl", W, W, W, W)  # legs right, up, left, down
    lnz = 0.0
    for n in range(steps):
        m = np.abs(T).max()
        T = T / m
        lnz += np.log(m) / 4 ** n
        for _ in range(2):
            Dx, Dy = T.shape[0], T.shape[1]
            # M[r_top, r_bottom, u, l_top, l_bottom, d]: the top tensor's d meets the
            # bottom one's u.
            M = np.einsum("aulk,bkmd->abulmd", T, T).reshape(Dx * Dx, -1)
            w, V = np.linalg.eigh(M @ M.T)
            r = min(chi, Dx * Dx, int((w > 1e-12 * w[-1]).sum()))
            P = V[:, ::-1][:, :r].reshape(Dx, Dx, r)
            # Pairwise, O(D^7) (numpy's greedy path with its memory limit is O(D^9) here).
            left = np.einsum("abr,aulk->brulk", P, T)
            right = np.einsum("bkmd,lmn->bkdln", T, P)
            T = np.einsum("brulk,bkdln->rund", left, right)
            T = T.transpose(1, 2, 3, 0)
    return lnz + np.log(np.einsum("ijij->", T)) / 4 ** steps


@pytest.mark.parametrize("beta,steps", [(0.3, 3), (0.44, 3), (0.44, 5), (0.6, 5)])
def test_hotrg_equals_an_independent_numpy_hotrg(beta, steps):
    r = tessel.trg(beta, algorithm="hotrg", chi=8, steps=steps, svd="full")
    want = numpy_hotrg(beta, 8, steps)
    assert r["steps"] == steps
    assert r["sites"] == 4.0 ** steps
    assert r["lnZ_per_site"] == pytest.approx(want, rel=1e-12, abs=0)


def test_hotrg_at_tc_beats_trg_and_has_derivatives():
    bc = tessel.ISING_BETA_C
    exact = tessel.onsager(bc)["lnZ_per_site"]
    h = tessel.trg(bc, algorithm="hotrg", chi=8, grad=True)
    t = tessel.trg(bc, algorithm="trg", chi=8)
    assert h["algorithm"] == "hotrg"
    assert h["steps_converged"]
    eh = abs(h["lnZ_per_site"] - exact) / exact
    et = abs(t["lnZ_per_site"] - exact) / exact
    assert eh < et / 3  # chi = 8: HOTRG 1.4e-5, TRG 6.9e-5
    assert h["dlnZ_dbeta"] == pytest.approx(np.sqrt(2), rel=3e-3)


def test_hotrg_infinite_lattice_equals_a_long_numpy_torus():
    # Off T_c (correlation length of a few sites) a torus of 4^20 sites is the infinite
    # lattice to rounding: the limit closure with b = 4 and the 4^-n weights must give it.
    r = tessel.trg(0.3, algorithm="hotrg", chi=8, svd="full")
    assert r["lattice"] == "infinite" and r["steps_converged"]
    assert r["lnZ_per_site"] == pytest.approx(numpy_hotrg(0.3, 8, 20), rel=1e-13, abs=0)


def test_btrg_k_with_another_algorithm_is_an_error():
    for algorithm in ("hotrg", "trg"):
        with pytest.raises(tessel.Error, match=r"btrg_k: the bond-weight exponent is BTRG's; it "
                                               r"changes nothing with algorithm " + algorithm):
            tessel.trg(0.4, algorithm=algorithm, btrg_k=0.3, chi=4, steps=2)
    assert tessel.trg(0.4, algorithm="btrg", btrg_k=0.0, chi=4, steps=2)["btrg_k"] == 0.0


def test_hotrg_cft_plateau_spans_two_steps():
    # A HOTRG step doubles the linear size: the plateau window of two steps spans the
    # factor 2 of TRG's three (docs/trg.md §10). Measured: steps 4-5, c = 0.49686.
    r = tessel.trg(tessel.ISING_BETA_C, chi=16, steps=8, algorithm="hotrg", cft=True)
    p = r["cft_plateau"]
    assert p is not None and p["last_step"] - p["first_step"] == 1
    assert abs(p["c"] - 0.5) < 0.005 and abs(p["x"][0] - 0.125) < 0.001
