"""Accuracy per second at T_c: TRG, bond-weighted TRG and higher-order TRG, χ = 8 … 32.

    bench/.venv/bin/python bench/accuracy.py [--tessel build/tools/tessel] [--chis 8,16,24,32]
                                             [--repeat 3] [--grad-max 32]
                                             [--hotrg-chis 8,16,24] [--hotrg-grad-max 16]

For each χ it runs `tessel trg --beta β_c --chi χ --algorithm A --json` (the infinite lattice,
`--steps auto`) for A = trg and btrg, alternated (trg, btrg, btrg, trg over two rounds, so a
drift of the machine's load hits both), width 1, OPENBLAS_NUM_THREADS=1: the value alone, then
with `--grad` (χ ≤ --grad-max). HOTRG (O(χ⁷) per step) runs after them at --hotrg-chis, twice,
with `--grad` up to --hotrg-grad-max. It records the relative error of lnZ/N against Onsager's, the
energy's error, the steps the run took and the median of `--repeat` steady runs (the smaller of
the two rounds' medians). quimb's HOTRG contracts finite lattices only; bench/torus.py compares
it on a finite torus (docs/trg.md §9 also has an independent numpy BTRG check). Writes
bench/accuracy.json and bench/accuracy.svg, which bench/report.py puts into BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import time

import trgcli

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BETA_C = "0.44068679350977147"


def run_trg(tessel: str, chi: int, algorithm: str, grad: bool, repeat: int) -> dict:
    return trgcli.run(tessel, ["--beta", BETA_C, "--chi", str(chi), "--algorithm", algorithm,
                               "--repeat", str(repeat)] + (["--grad"] if grad else []))


median_ms = trgcli.median_ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tessel", default=os.path.join(ROOT, "build", "tools", "tessel"))
    ap.add_argument("--chis", default="8,16,24,32")
    ap.add_argument("--repeat", type=int, default=3, help="steady runs per configuration")
    ap.add_argument("--grad-max", type=int, default=32, help="largest χ run with --grad")
    ap.add_argument("--hotrg-chis", default="8,16,24", help="HOTRG's bond dimensions")
    ap.add_argument("--hotrg-grad-max", type=int, default=16, help="largest χ HOTRG runs with --grad")
    ap.add_argument("--out", default=HERE)
    a = ap.parse_args()
    t0 = time.time()
    rows = []
    plan = [(int(c), ("trg", "btrg", "btrg", "trg"), a.grad_max) for c in a.chis.split(",") if c]
    plan += [(int(c), ("hotrg", "hotrg"), a.hotrg_grad_max) for c in a.hotrg_chis.split(",") if c]
    for chi, order, grad_max in plan:
        for grad in (False, True):
            if grad and chi > grad_max:
                continue
            best: dict[str, dict] = {}
            for algorithm in order:
                rec = run_trg(a.tessel, chi, algorithm, grad, a.repeat)
                key = "value_and_grad" if grad else "value"
                ms = median_ms(rec, key)
                if algorithm not in best or ms < best[algorithm]["ms"]:
                    best[algorithm] = {"ms": ms, "rec": rec}
            for algorithm, b in best.items():
                r = b["rec"]
                exact = r["exact_lnZ_per_site"]
                row = {"chi": chi, "algorithm": algorithm, "grad": grad, "ms": b["ms"],
                       "steps": r["steps"], "steps_converged": r["steps_converged"],
                       "lnZ_rel_err": abs(r["lnZ_per_site"] - exact) / abs(exact),
                       "loadavg": r["loadavg"]["before"]}
                if grad:
                    row["energy_abs_err"] = abs(r["energy_per_site"] - r["exact_energy_per_site"])
                rows.append(row)
                print(f"chi {chi} {algorithm}{' --grad' if grad else ''}: {b['ms']:.1f} ms, "
                      f"{r['steps']} steps, lnZ/N rel. err {row['lnZ_rel_err']:.2e}", flush=True)
    res = {"generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "minutes": round((time.time() - t0) / 60, 1), "beta": float(BETA_C), "width": 1,
           "repeat": a.repeat, "rows": rows}
    with open(os.path.join(a.out, "accuracy.json"), "w", encoding="utf-8") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("accuracy: matplotlib not installed, no plot")
        return
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for algorithm, color in (("trg", "C0"), ("btrg", "C3"), ("hotrg", "C2")):
        for grad, style in ((False, "o-"), (True, "s--")):
            pts = sorted((r["ms"] / 1000, r["lnZ_rel_err"], r["chi"]) for r in rows
                         if r["algorithm"] == algorithm and r["grad"] == grad)
            if not pts:
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, color=color,
                    label=f"{algorithm.upper()} {'value+grad' if grad else 'value'}")
            if not grad:
                for s, e, chi in pts:
                    ax.annotate(f"χ={chi}", (s, e), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("time to the infinite lattice at T_c, s (median, width 1)")
    ax.set_ylabel("relative error of lnZ/N")
    ax.set_title("tessel trg at β_c: accuracy per second")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "accuracy.svg"))
    print("accuracy: wrote accuracy.json and accuracy.svg")


if __name__ == "__main__":
    main()
