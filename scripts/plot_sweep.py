#!/usr/bin/env python3
"""Plots a β sweep of `tessel trg --csv` against Onsager's exact solution.

    tessel trg --beta-range 0.2:0.7:26 --second --repeat 0 --csv > sweep.csv
    mpirun -n 2 tessel trg --beta-range 0.2:0.7:26 --second --repeat 0 --csv > sweep.csv
    scripts/plot_sweep.py sweep.csv -o sweep.svg [--title TEXT]

Needs numpy and matplotlib (Debian: python3-numpy, python3-matplotlib; scripts/setup.sh
installs them). Top row: lnZ/N, the energy per site u = −d(lnZ/N)/dβ and the specific heat
c = β² d²(lnZ/N)/dβ² (per site, k_B = 1, J = 1) against β, the TRG's points over Onsager's
exact curves; bottom row: |TRG − exact| of each on a log scale. β_c = ½ ln(1 + √2) is marked.
Columns the run did not compute (nan: no --grad, no --second) leave their panels empty; rows of
failed β values ('# beta = ... failed' comments) are skipped.

Other models (`--field`, `--model potts`; the model is read from the '# tessel trg:' line): the
exact curves are drawn only where they hold, the Ising model at h = 0 and the q = 2 Potts model
(Ising at β/2: lnZ/N + β, u/2 − 1, the same c), and the dashed line marks the
model's β_c (ln(1 + √q) for Potts). A run in a field h ≠ 0 adds a row with the magnetization
m = (1/β) ∂(lnZ/N)/∂h, beside Yang's spontaneous magnetization m₀ = (1 − sinh⁻⁴ 2β)^{1/8}
(h → 0⁺, β > β_c), and the susceptibility χ_m (with --susceptibility); at h = 0 there is no
such row (m = 0 there by symmetry).

The exact curves are computed here, independently of tessel (square lattice, infinite volume,
L. Onsager, Phys. Rev. 65, 117 (1944)), with x = 2β, t = tanh x, k = 2 sinh x / cosh² x:

    lnZ/N = ln(2 cosh x) + (1/π) ∫_0^{π/2} ln[(1 + sqrt(1 − k² sin²θ)) / 2] dθ
    u     = −coth(x)·[1 + (2/π)(2t² − 1)·K(k)]
    c     = (4/π)(β coth x)²·{ K(k) − E(k) − (1 − t²)·[π/2 + (2t² − 1)·K(k)] }

K and E (complete elliptic integrals of modulus k) by the arithmetic-geometric mean, the θ
integral by 200-point Gauss–Legendre quadrature. Against tests/data/onsager.json (40-digit
values) they agree to 1e-13 relative except very near β_c, where the integrand's logarithmic
singularity and the cancellation in c cost digits (β = 0.4407, 1.3e-5 from β_c: lnZ/N 8e-11,
u 4e-12, c 2e-8), far below the TRG's own errors there.
"""
from __future__ import annotations

import argparse
import math
import sys

import numpy as np

BETA_C = 0.5 * math.log(1.0 + math.sqrt(2.0))


def elliptic_ke(k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """K(k) and E(k) of modulus k in [0, 1) by the AGM (Abramowitz & Stegun 17.6)."""
    a = np.ones_like(k)
    b = np.sqrt((1.0 - k) * (1.0 + k))
    c = k.copy()
    power, csum = 0.5, 0.5 * c * c
    for _ in range(40):
        a, b, c = 0.5 * (a + b), np.sqrt(a * b), 0.5 * (a - b)
        power *= 2.0
        csum = csum + power * c * c
        if np.all(np.abs(c) < 1e-17):
            break
    kk = math.pi / (2.0 * a)
    return kk, kk * (1.0 - csum)


def onsager(beta: np.ndarray) -> dict[str, np.ndarray]:
    """Onsager's lnZ/N, energy per site and specific heat at each β (β != β_c)."""
    x = 2.0 * beta
    t = np.tanh(x)
    k = np.minimum(2.0 * np.sinh(x) / np.cosh(x) ** 2, 1.0 - 1e-16)
    nodes, weights = np.polynomial.legendre.leggauss(200)
    theta = (nodes + 1.0) * (math.pi / 4.0)  # [-1, 1] -> [0, π/2]
    s2 = np.sin(theta) ** 2
    integrand = np.log((1.0 + np.sqrt(1.0 - np.outer(k * k, s2))) / 2.0)
    integral = (integrand @ weights) * (math.pi / 4.0)
    lnz = np.log(2.0 * np.cosh(x)) + integral / math.pi
    kk, ee = elliptic_ke(k)
    coth = 1.0 / t
    u = -coth * (1.0 + (2.0 / math.pi) * (2.0 * t * t - 1.0) * kk)
    c = (4.0 / math.pi) * (beta * coth) ** 2 * (
        kk - ee - (1.0 - t * t) * (math.pi / 2.0 + (2.0 * t * t - 1.0) * kk))
    return {"lnZ": lnz, "energy": u, "heat": c}


def yang_m0(beta: np.ndarray) -> np.ndarray:
    """Yang's spontaneous magnetization (C. N. Yang, Phys. Rev. 85, 808 (1952)); 0 for β ≤ β_c."""
    with np.errstate(divide="ignore", invalid="ignore"):
        m = (1.0 - np.sinh(2.0 * beta) ** -4.0) ** 0.125
    return np.where(beta > BETA_C, m, 0.0)


def model_of(config: str) -> tuple[str, int, float]:
    """("ising", 2, h) or ("potts", q, 0) from the '# tessel trg: ising, h = 0, ...' line."""
    parts = [p.strip() for p in config.removeprefix("tessel trg:").split(",")]
    if parts and parts[0] == "potts" and len(parts) > 1 and parts[1].startswith("q = "):
        return "potts", int(parts[1][4:]), 0.0
    if parts and parts[0] == "ising" and len(parts) > 1 and parts[1].startswith("h = "):
        return "ising", 2, float(parts[1][4:])
    return "ising", 2, 0.0


def read_sweep(path: str) -> tuple[str, dict[str, np.ndarray]]:
    """The '# tessel trg: ...' configuration line and the columns of a --csv file."""
    config, header, rows = "", None, []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            if line.startswith("#"):
                if line.startswith("# tessel trg:"):
                    config = line[2:]
                continue
            if header is None:
                header = line.split(",")
                if "beta" not in header:
                    sys.exit(f"{path}:{n}: error: expected the header of `tessel trg --csv`, got '{line}'")
                continue
            cells = line.split(",")
            if len(cells) != len(header):
                sys.exit(f"{path}:{n}: error: {len(cells)} columns, the header has {len(header)}")
            try:
                rows.append([float(c) for c in cells])
            except ValueError as e:
                sys.exit(f"{path}:{n}: error: {e}")
    if header is None or not rows:
        sys.exit(f"{path}: error: no rows (expected the output of `tessel trg --csv`)")
    data = np.array(rows)
    return config, {name: data[:, i] for i, name in enumerate(header)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="output of tessel trg --csv")
    ap.add_argument("-o", "--output", default="sweep.svg", help="image to write (.svg, .png, .pdf)")
    ap.add_argument("--title", default=None, help="figure title (default: the run's configuration)")
    args = ap.parse_args()

    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable SVG
    import matplotlib.pyplot as plt

    config, col = read_sweep(args.csv)
    model, q, field = model_of(config)
    beta = col["beta"]
    lo, hi = float(beta.min()), float(beta.max())
    pad = 0.02 * max(hi - lo, 0.05)
    # Exact curves: Ising at h = 0, and Potts q = 2 = Ising at β/2 (lnZ/N + β, u − 1, c alike).
    scale = 0.5 if model == "potts" else 1.0
    has_exact = (model == "ising" and field == 0) or (model == "potts" and q == 2)
    beta_c = math.log(1.0 + math.sqrt(q)) if model == "potts" else BETA_C
    fine = np.linspace(max(lo - pad, 1e-3), hi + pad, 801)
    fine = fine[np.abs(scale * fine - BETA_C) > 1e-4]

    def exact_at(b: np.ndarray) -> dict[str, np.ndarray]:
        e = onsager(scale * b)
        if model == "potts":
            return {"lnZ": e["lnZ"] + b, "energy": 0.5 * e["energy"] - 1.0, "heat": e["heat"]}
        return e

    exact = exact_at(fine) if has_exact else None
    at = exact_at(beta) if has_exact else None
    panels = [
        ("lnZ/N", col["lnZ_per_site"], "lnZ"),
        ("energy per site u", col["energy_per_site"], "energy"),
        ("specific heat c", col["specific_heat"], "heat"),
    ]
    # The magnetization and susceptibility rows only in a field: at h = 0 the Z2 symmetry
    # makes m = 0 exactly, which is not Yang's m₀ (the h → 0⁺ limit) and would look wrong.
    field_cols = (model == "ising" and field != 0 and "magnetization" in col
                  and np.isfinite(col["magnetization"]).any())
    if field_cols:
        panels += [("magnetization m", col["magnetization"], "m"),
                   ("susceptibility χ_m", col.get("susceptibility", np.full_like(beta, np.nan)), None)]
    rows = 2 if len(panels) == 3 else 4
    fig, axes = plt.subplots(rows, 3, figsize=(13, 3.5 * rows), sharex=True,
                             gridspec_kw={"height_ratios": [3, 2] * (rows // 2)})
    for j, (name, trg, key) in enumerate(panels):
        top, bottom = axes[2 * (j // 3)][j % 3], axes[2 * (j // 3) + 1][j % 3]
        curve, ref = None, None
        if key == "m":
            curve, ref = yang_m0(fine), yang_m0(beta)
            top.plot(fine, curve, "-", color="0.3", lw=1.2, label="Yang m₀ (h → 0⁺)")
        elif key is not None and exact is not None:
            curve, ref = exact[key], at[key]
            top.plot(fine, curve, "-", color="0.3", lw=1.2, label="Onsager (exact)")
        ok = np.isfinite(trg)
        if ok.any():
            top.plot(beta[ok], trg[ok], "o", ms=4, color="C0", label="tessel TRG")
            if ref is not None:
                err = np.abs(trg[ok] - ref[ok])
                bottom.semilogy(beta[ok], np.maximum(err, 1e-17), "o-", ms=3, lw=0.8, color="C3")
        else:
            top.text(0.5, 0.1, "not computed in this run", transform=top.transAxes, ha="center")
        if ref is None:
            bottom.text(0.5, 0.5, "no exact values", transform=bottom.transAxes, ha="center")
        for ax in (top, bottom):
            ax.axvline(beta_c, color="0.6", ls="--", lw=0.8)
        top.set_title(name)
        bottom.set_xlabel("β = 1/T")
        bottom.set_ylabel("|TRG − m₀|" if key == "m" else "|TRG − exact|")
        if j % 3 == 0:
            top.legend(loc="best", fontsize=8)
            top.annotate("β_c", (beta_c, 0.97), xycoords=("data", "axes fraction"),
                         ha="left", va="top", fontsize=8, color="0.4")
    for j in range(len(panels), 3 * (rows // 2)):
        axes[2 * (j // 3)][j % 3].axis("off")
        axes[2 * (j // 3) + 1][j % 3].axis("off")
    fig.suptitle(args.title if args.title is not None else config, fontsize=9)
    fig.tight_layout()
    fig.savefig(args.output, metadata={"Date": None} if args.output.endswith(".svg") else None)
    print(f"plot_sweep: wrote {args.output} ({len(beta)} beta values)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
