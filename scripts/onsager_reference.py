#!/usr/bin/env python3
"""Onsager's exact solution of the 2D Ising model, in arbitrary precision: regenerates or checks
tests/data/onsager.json independently of tessel's own frontend/Onsager.cpp.

    pip install mpmath        # the only dependency (not needed by the tests)

    scripts/onsager_reference.py                               # print the JSON (default betas)
    scripts/onsager_reference.py --beta 0.3,0.4                # ... for these betas
    scripts/onsager_reference.py --check tests/data/onsager.json

Square lattice, infinite volume, J = 1, no field, k_B = 1, β = 1/T, per site (docs/trg.md §7):

    x = 2β, t = tanh x, k = 2 sinh x / cosh² x, k'² = 1 − k² = ((sinh² x − 1) / cosh² x)²
    lnZ/N         = ln(2 cosh x) + (1/π) ∫_0^{π/2} ln[(1 + sqrt(1 − k² sin²θ)) / 2] dθ
    d(lnZ/N)/dβ   = −u = coth(x)·[1 + (2/π)(2t² − 1)·K(k)]
    c             = (4/π)(β coth x)²·{ K(k) − E(k) − (1 − t²)·[π/2 + (2t² − 1)·K(k)] }
    d²(lnZ/N)/dβ² = c / β²,   β_c = ½ ln(1 + √2)

K and E are the complete elliptic integrals of modulus k (mpmath takes the parameter m = k²,
computed here as 1 − k'² so that nothing cancels near β_c). Everything is evaluated with
--dps significant digits (default 40) and rounded to double only for output.

--check FILE recomputes every row of FILE at its betas and prints, per column, the largest
relative deviation |file − exact| / |exact|; it also checks the two closed forms against
numerical derivatives (mpmath.diff) of the integral formula. Exit status 1 when a deviation
exceeds --tol (default 1e-13), 0 otherwise.

Reference: L. Onsager, Phys. Rev. 65, 117 (1944).
"""
from __future__ import annotations

import argparse
import json
import sys

try:
    from mpmath import mp
except ImportError:  # pragma: no cover
    sys.exit("onsager_reference.py needs mpmath: pip install mpmath")

DEFAULT_BETAS = [0.1, 0.2, 0.25, 0.3, 0.35, 0.4, 0.42, 0.43, 0.4407, 0.45, 0.46, 0.5, 0.55,
                 0.6, 0.7, 0.8, 1.0]
COLUMNS = ["lnZ_per_site", "dlnZ_dbeta", "energy_per_site", "d2lnZ_dbeta2", "specific_heat"]
DESCRIPTION = ("Exact (Onsager) values for the 2D square-lattice Ising model, J=1, no field, "
               "infinite lattice, per site (formulas: docs/trg.md section 7). dlnZ_dbeta = "
               "-energy; specific_heat = beta^2 * d2lnZ_dbeta2. Provenance and check: "
               "tests/data/README.md.")


def moduli(beta):
    x = 2 * beta
    ch, sh = mp.cosh(x), mp.sinh(x)
    k = 2 * sh / ch ** 2
    kp2 = ((sh ** 2 - 1) / ch ** 2) ** 2
    return x, k, kp2


def lnz_per_site(beta):
    """The integral formula. The integrand has a near-kink of width ~k' at θ = π/2, which
    tanh-sinh quadrature resolves at that endpoint."""
    beta = mp.mpf(beta)
    x, k, _ = moduli(beta)
    k2 = k ** 2
    integrand = lambda th: mp.log((1 + mp.sqrt(1 - k2 * mp.sin(th) ** 2)) / 2)  # noqa: E731
    integral = mp.quad(integrand, [0, mp.pi / 4, mp.pi / 2], maxdegree=12)
    return mp.log(2 * mp.cosh(x)) + integral / mp.pi


def exact_row(beta) -> dict:
    """All columns of one row, as mpf."""
    b = mp.mpf(beta)
    x, _, kp2 = moduli(b)
    t = mp.tanh(x)
    m = 1 - kp2                      # parameter m = k² of mpmath's ellipk / ellipe
    K, E = mp.ellipk(m), mp.ellipe(m)
    coth = 1 / t
    dlnz = coth * (1 + (2 / mp.pi) * (2 * t ** 2 - 1) * K)
    c = (4 / mp.pi) * (b * coth) ** 2 * (K - E - (1 - t ** 2) * (mp.pi / 2 + (2 * t ** 2 - 1) * K))
    return {"beta": b, "lnZ_per_site": lnz_per_site(b), "dlnZ_dbeta": dlnz,
            "energy_per_site": -dlnz, "d2lnZ_dbeta2": c / b ** 2, "specific_heat": c}


def beta_c():
    return mp.log(1 + mp.sqrt(2)) / 2


def as_json(betas: list[float]) -> str:
    rows = []
    for beta in betas:
        r = exact_row(beta)
        rows.append({"beta": beta, **{col: float(r[col]) for col in COLUMNS}})
    doc = {"description": DESCRIPTION, "beta_c": float(beta_c()), "rows": rows}
    return json.dumps(doc, indent=1, ensure_ascii=False)


def check(path: str, tol: float) -> int:
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    worst = {col: (0.0, None) for col in COLUMNS}
    over = []   # (beta, column, file value, exact value, deviation) above tol
    for row in doc["rows"]:
        r = exact_row(row["beta"])
        for col in COLUMNS:
            want = r[col]
            dev = float(abs(mp.mpf(row[col]) - want) / abs(want))
            if worst[col][1] is None or dev > worst[col][0]:
                worst[col] = (dev, row["beta"])
            if dev > tol:
                over.append((row["beta"], col, row[col], want, dev))
    print(f"{path}: {len(doc['rows'])} rows, recomputed with {mp.dps} digits")
    bc = beta_c()
    bc_dev = float(abs(mp.mpf(doc["beta_c"]) - bc) / bc)
    failed = bc_dev > tol
    print(f"  {'beta_c':<17} relative deviation {bc_dev:.2e}{'  > tol' if bc_dev > tol else ''}")
    for col in COLUMNS:
        dev, at = worst[col]
        failed |= dev > tol
        print(f"  {col:<17} max relative deviation {dev:.2e} (at beta = {at})"
              f"{'  > tol' if dev > tol else ''}")
    for beta, col, got, want, dev in over:
        print(f"  above tol: beta = {beta} {col}: file {got!r}, exact {mp.nstr(want, 20)} "
              f"(double {float(want)!r}), relative deviation {dev:.2e}")
    # The closed forms against numerical derivatives of the integral (at a few betas off β_c).
    diff_dev = 0.0
    for beta in (0.2, 0.35, 0.6):
        r = exact_row(beta)
        d1 = mp.diff(lnz_per_site, mp.mpf(beta), 1)
        d2 = mp.diff(lnz_per_site, mp.mpf(beta), 2)
        diff_dev = max(diff_dev, float(abs(d1 - r["dlnZ_dbeta"]) / abs(r["dlnZ_dbeta"])),
                       float(abs(d2 - r["d2lnZ_dbeta2"]) / abs(r["d2lnZ_dbeta2"])))
    bad = diff_dev > tol
    failed |= bad
    print(f"  closed forms vs mpmath.diff of the integral (beta = 0.2, 0.35, 0.6): max relative "
          f"deviation {diff_dev:.2e}{'  > tol' if bad else ''}")
    print(f"  tolerance {tol:g}: {'FAIL' if failed else 'ok'}")
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--beta", help="comma-separated betas (default: the 17 rows of "
                                   "tests/data/onsager.json)")
    ap.add_argument("--check", metavar="FILE", help="compare FILE's rows with the exact values")
    ap.add_argument("--tol", type=float, default=1e-13,
                    help="largest allowed relative deviation for --check (default 1e-13)")
    ap.add_argument("--dps", type=int, default=40, help="decimal digits of precision (default 40)")
    a = ap.parse_args()
    mp.dps = a.dps
    if a.check:
        return check(a.check, a.tol)
    betas = [float(b) for b in a.beta.split(",")] if a.beta else DEFAULT_BETAS
    if any(not (b > 0) for b in betas):
        ap.error("every beta must be > 0")
    print(as_json(betas))
    return 0


if __name__ == "__main__":
    sys.exit(main())
