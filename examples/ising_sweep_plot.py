"""Energy and specific heat of the 2D Ising model over a β sweep, TRG against Onsager.

    python examples/ising_sweep_plot.py [--betas 0.30:0.60:16] [--chi 16] [--steps 20]
                                        [--out ising_sweep.svg]

tessel.trg computes, per β, lnZ/N and its first and second derivatives in β by reverse
mode through every SVD: the energy per site u = −d(lnZ/N)/dβ (units of J) and the
specific heat c = β² d²(lnZ/N)/dβ² (units of k_B). The plot shows them over Onsager's
exact curves (L. Onsager, Phys. Rev. 65, 117 (1944)), with β_c = ln(1 + √2)/2 marked:
c diverges there logarithmically, which a finite χ rounds off. Needs matplotlib.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import tessel


def parse_range(text):
    """A:B:N -> N values from A to B inclusive."""
    try:
        a, b, n = text.split(":")
        return np.linspace(float(a), float(b), int(n))
    except ValueError:
        raise SystemExit(f"--betas: expected A:B:N (N values from A to B), got {text!r}")


def sweep(betas, chi, steps, width=1):
    """The TRG reports (dicts, as tessel trg --json) of every β, second order included."""
    return tessel.trg(betas, chi=chi, steps=steps, second=True, width=width)


def exact_curves(lo, hi, n=400):
    """Onsager's u(β) and c(β) on a grid from lo to hi (β_c itself left out)."""
    grid = np.linspace(lo, hi, n)
    grid = grid[np.abs(grid - tessel.ISING_BETA_C) > 1e-9]
    ex = [tessel.onsager(b) for b in grid]
    return grid, np.array([e["energy_per_site"] for e in ex]), np.array([e["specific_heat"] for e in ex])


def plot(reports, out, chi, steps):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    betas = np.array([r["beta"] for r in reports])
    energy = np.array([r["energy_per_site"] for r in reports])
    heat = np.array([r["specific_heat"] for r in reports])
    pad = 0.05 * (betas.max() - betas.min() or 1.0)
    grid, u_exact, c_exact = exact_curves(max(betas.min() - pad, 1e-3), betas.max() + pad)

    fig, (ax_u, ax_c) = plt.subplots(1, 2, figsize=(9.5, 3.8), constrained_layout=True)
    for ax in (ax_u, ax_c):
        ax.axvline(tessel.ISING_BETA_C, color="0.7", lw=0.8, ls="--")
        ax.set_xlabel("β = 1/T  (J = 1)")
    ax_u.plot(grid, u_exact, color="0.2", lw=1.2, label="Onsager (exact)")
    ax_u.plot(betas, energy, "o", color="C0", ms=4, label=f"TRG χ = {chi}, −d(lnZ/N)/dβ")
    ax_u.set_ylabel("energy per site u  (J)")
    ax_u.legend(frameon=False, fontsize=8)
    ax_c.plot(grid, c_exact, color="0.2", lw=1.2, label="Onsager (exact)")
    ax_c.plot(betas, heat, "o", color="C3", ms=4, label=f"TRG χ = {chi}, β² d²(lnZ/N)/dβ²")
    ax_c.set_ylabel("specific heat c  (k_B)")
    ax_c.set_ylim(0, max(np.nanmax(heat), 1.0) * 1.25)
    ax_c.legend(frameon=False, fontsize=8, loc="upper left")
    ax_c.text(tessel.ISING_BETA_C, ax_c.get_ylim()[1] * 0.97, " β_c", va="top", fontsize=8, color="0.4")
    fig.suptitle(f"2D Ising model: TRG (tessel, {2 ** steps} sites, reverse-mode AD) vs Onsager",
                 fontsize=10)
    fig.savefig(out)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--betas", default="0.30:0.60:16", help="A:B:N, N values of β from A to B")
    ap.add_argument("--chi", type=int, default=16, help="bond dimension χ")
    ap.add_argument("--steps", type=int, default=20, help="TRG steps (2^steps sites)")
    ap.add_argument("--width", type=int, default=1, help="engine width (threads)")
    ap.add_argument("--out", default="ising_sweep.svg", help="the figure (.svg, .png or .pdf)")
    a = ap.parse_args()

    betas = parse_range(a.betas)
    t0 = time.perf_counter()
    reports = sweep(betas, a.chi, a.steps, a.width)
    seconds = time.perf_counter() - t0
    print(f"{'beta':>8} {'u (TRG)':>14} {'u (exact)':>14} {'c (TRG)':>12} {'c (exact)':>12}")
    for r in reports:
        ue, ce = r["exact_energy_per_site"], r["exact_specific_heat"]
        print(f"{r['beta']:8.4f} {r['energy_per_site']:14.9f} "
              f"{ue if ue is not None else float('nan'):14.9f} {r['specific_heat']:12.6f} "
              f"{ce if ce is not None else float('nan'):12.6f}")
    plot(reports, a.out, a.chi, a.steps)
    print(f"{len(reports)} beta values in {seconds:.1f} s (chi = {a.chi}, {a.steps} steps); wrote {a.out}")


if __name__ == "__main__":
    main()
