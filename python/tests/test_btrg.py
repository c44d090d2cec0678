"""tessel.trg(algorithm="btrg") against a bond-weighted TRG written here in numpy (its own
SVDs and einsums, nothing of tessel's), and against Onsager."""
import numpy as np
import pytest

import tessel


def numpy_btrg(beta, chi, steps, k=-0.5):
    """lnZ/N of the Ising model on a torus of 2**steps sites by BTRG (Adachi, Okubo, Todo,
    PRB 105, L060402 (2022)): T = U s^((1-k)/2) . s^k . s^((1-k)/2) V, the weight s^k on
    the new bond, the old weights on the four internal bonds of the plaquette."""
    c, s = np.sqrt(np.cosh(beta)), np.sqrt(np.sinh(beta))
    W = np.array([[c, s], [c, -s]])
    T = np.einsum("ai,aj,ak,al->ijkl", W, W, W, W)
    wh = wv = np.ones(2)
    lnz = 0.0
    for n in range(steps):
        m = np.abs(T).max()
        T = T / m
        lnz += np.log(m) / 2 ** n
        D = T.shape[0]
        Ua, sa, Vat = np.linalg.svd(T.transpose(2, 1, 0, 3).reshape(D * D, D * D))
        Ub, sb, Vbt = np.linalg.svd(T.transpose(3, 2, 1, 0).reshape(D * D, D * D))
        r = min(chi, D * D, int((sa > 1e-12).sum()), int((sb > 1e-12).sum()))
        e = (1 - k) / 2
        inner = wh[:, None, None] * wv[None, :, None]  # a 0-2 leg and a 1-3 leg
        S1 = (Ua[:, :r] * sa[:r] ** e).reshape(D, D, r) * inner
        S3 = (Vat[:r].T * sa[:r] ** e).reshape(D, D, r) * inner
        S2 = (Ub[:, :r] * sb[:r] ** e).reshape(D, D, r)
        S4 = (Vbt[:r].T * sb[:r] ** e).reshape(D, D, r)
        T = np.einsum("war,abu,bgl,gwd->ruld", S1, S2, S3, S4, optimize=True)
        wh, wv = sa[:r] ** k, sb[:r] ** k
    return lnz + np.log(np.einsum("ijij,i,j->", T, wh, wv)) / 2 ** steps


@pytest.mark.parametrize("beta,steps", [(0.3, 8), (0.44, 8), (0.44, 16), (0.6, 16)])
def test_btrg_equals_an_independent_numpy_btrg(beta, steps):
    r = tessel.trg(beta, algorithm="btrg", chi=16, steps=steps, svd="full")
    want = numpy_btrg(beta, 16, steps)
    assert abs(r["lnZ_per_site"] - want) < 2e-15 * want
    assert r["algorithm"] == "btrg" and r["btrg_k"] == -0.5


def test_btrg_k_zero_is_trg_and_the_default_is_trg():
    a = tessel.trg(0.44, chi=8, steps=10, grad=True)
    b = tessel.trg(0.44, chi=8, steps=10, grad=True, algorithm="btrg", btrg_k=0)
    assert a["algorithm"] == "trg" and a["btrg_k"] is None
    assert a["lnZ_per_site"] == b["lnZ_per_site"] and a["dlnZ_dbeta"] == b["dlnZ_dbeta"]


def test_btrg_at_tc_is_ten_times_closer_to_onsager():
    exact = tessel.onsager(tessel.ISING_BETA_C)["lnZ_per_site"]
    trg = tessel.trg(tessel.ISING_BETA_C, chi=16)
    btrg = tessel.trg(tessel.ISING_BETA_C, chi=16, algorithm="btrg", grad=True)
    err = abs(btrg["lnZ_per_site"] - exact) / exact
    assert err < 4e-7
    assert abs(trg["lnZ_per_site"] - exact) / exact > 10 * err
    # the energy at T_c (-sqrt 2) as well: measured 1.3e-3 (TRG) and 1.2e-4 (BTRG) off
    assert abs(btrg["energy_per_site"] + np.sqrt(2)) < 2e-4
    assert abs(trg_energy_at_tc() + np.sqrt(2)) > 5 * abs(btrg["energy_per_site"] + np.sqrt(2))


def trg_energy_at_tc():
    return tessel.trg(tessel.ISING_BETA_C, chi=16, grad=True)["energy_per_site"]


def test_btrg_bad_options_name_the_python_argument():
    with pytest.raises(tessel.Error, match=r"btrg_k: the bond-weight exponent k must be in \[-1, 1\)"):
        tessel.trg(0.4, algorithm="btrg", btrg_k=1.0)
    with pytest.raises(tessel.Error, match=r"algorithm: unknown algorithm 'hotrg3' \(allowed: trg, btrg, hotrg\)"):
        tessel.trg(0.4, algorithm="hotrg3")
    with pytest.raises(tessel.Error, match="btrg_k must be a number"):
        tessel.trg(0.4, algorithm="btrg", btrg_k="half")


def test_cft_data_at_tc():
    # Ising at beta_c, BTRG chi = 16, 12 steps: steps 6 to 10 give c 0.497 ... 0.506 and
    # x = 0.1246 ... 0.1258, 0.99 ... 1.01 (docs/trg.md §10).
    r = tessel.trg(tessel.ISING_BETA_C, chi=16, steps=12, algorithm="btrg", cft=True)
    rows = r["cft"]
    assert [row["step"] for row in rows] == list(range(12))
    window = [row for row in rows if 6 <= row["step"] <= 10]
    for row in window:
        assert abs(row["c"] - 0.5) < 0.01
        assert abs(row["x"][0] - 0.125) < 0.002
        assert abs(row["x"][1] - 1.0) < 0.015
    # The plateau, found without being told where (measured: steps 9-11, c = 0.49688).
    p = r["cft_plateau"]
    assert p["last_step"] - p["first_step"] == 2 and p["first_step"] >= 6
    assert abs(p["c"] - 0.5) < 0.01 and abs(p["x"][0] - 0.125) < 0.002
    assert tessel.trg(0.3, chi=8, steps=4)["cft"] is None
    assert tessel.trg(0.3, chi=8, steps=10, cft=True)["cft_plateau"] is None  # no critical point
    with pytest.raises(tessel.Error, match="--mode staged|mode staged"):
        tessel.trg(0.3, chi=8, steps=4, cft=True, mode="whole")
