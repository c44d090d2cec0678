"""How tessel's TRG cost grows with the bond dimension χ, truncated SVD against full.

    bench/.venv/bin/python bench/scaling.py [--tessel build/tools/tessel] [--chis 8,16,24,32,48,64]
                                            [--full-max 48] [--full-grad-max 32] [--grad-max 64]

For each χ it runs `tessel trg --beta 0.4 --chi χ --json` once per SVD method (`--svd truncated`
and `--svd full`), width 1, OPENBLAS_NUM_THREADS=1, with `--grad` where the budget allows, and
records the median of `--repeat` runs of the value and of value+grad. The time per χ → χ step
is (time at 8 steps − time at 6 steps) / 2, so the cheap first steps (D < χ) and the closure
cancel out: with the default schedule (2, 4, 4, 16, 16, χ, χ, ... for χ > 16) steps 7 and 8 are
χ → χ steps for every χ >= 24 (for χ = 16 from step 5, for χ = 8 from step 4).
The fitted exponent is the least-squares slope of log(time per step) against log χ over
χ >= 16. Cells beyond --full-max / --full-grad-max / --grad-max are not run (a full SVD of the
4096×4096 matrix of χ = 64 takes about a minute, and a step has two). Writes bench/scaling.json
and bench/scaling.svg, which bench/report.py puts into BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

import trgcli

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run_trg(tessel: str, chi: int, steps: int, svd: str, grad: bool, repeat: int) -> dict:
    return trgcli.run(tessel, ["--beta", "0.4", "--chi", str(chi), "--steps", str(steps), "--svd", svd,
                               "--repeat", str(repeat)] + (["--grad"] if grad else []))


median_ms = trgcli.median_ms


def fit_exponent(points: list[tuple[int, float]]) -> float | None:
    pts = [(math.log(c), math.log(t)) for c, t in points if c >= 16 and t and t > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx > 0 else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tessel", default=os.path.join(ROOT, "build", "tools", "tessel"))
    ap.add_argument("--chis", default="8,16,24,32,48,64")
    ap.add_argument("--full-max", type=int, default=48, help="largest χ run with --svd full")
    ap.add_argument("--full-grad-max", type=int, default=32,
                    help="largest χ run with --svd full --grad")
    ap.add_argument("--grad-max", type=int, default=64, help="largest χ run with --grad")
    ap.add_argument("--repeat", type=int, default=3, help="steady runs per configuration (χ <= 32; 1 above)")
    ap.add_argument("--out", default=HERE)
    a = ap.parse_args()
    chis = [int(c) for c in a.chis.split(",")]
    t0 = time.time()
    rows = []
    for chi in chis:
        steps = 8
        repeat = a.repeat if chi <= 32 else 1
        for svd in ("truncated", "full"):
            if svd == "full" and chi > a.full_max:
                rows.append({"chi": chi, "svd": svd, "skipped": f"full SVD above chi = {a.full_max}"})
                continue
            grad = chi <= (a.full_grad_max if svd == "full" else a.grad_max)
            per = {}
            for s in (steps, steps - 2):
                per[s] = run_trg(a.tessel, chi, s, svd, grad, repeat)
                print(f"chi {chi} {svd} steps {s}: value {median_ms(per[s], 'value')} ms"
                      + (f", value+grad {median_ms(per[s], 'value_and_grad')} ms" if grad else ""),
                      file=sys.stderr, flush=True)
            row = {"chi": chi, "svd": svd, "steps": steps, "repeat": repeat,
                   "ranks": per[steps].get("ranks"), "lnZ_per_site": per[steps].get("lnZ_per_site"),
                   "loadavg": per[steps].get("loadavg"), "svd_topk": per[steps].get("svd_topk")}
            for key in ("value", "value_and_grad"):
                hi, lo = median_ms(per[steps], key), median_ms(per[steps - 2], key)
                row[f"{key}_ms"] = hi
                row[f"{key}_per_step_ms"] = (hi - lo) / 2 if hi is not None and lo is not None else None
            rows.append(row)
    fits = {}
    for svd in ("truncated", "full"):
        for key in ("value", "value_and_grad"):
            pts = [(r["chi"], r.get(f"{key}_per_step_ms")) for r in rows if r["svd"] == svd]
            fits[f"{svd} {key}"] = fit_exponent(pts)
    blas = ""
    try:
        blas = subprocess.run([a.tessel, "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    result = {"generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0)),
              "minutes": round((time.time() - t0) / 60, 1), "beta": 0.4, "width": 1,
              "tessel": blas, "rows": rows, "exponents": fits}
    with open(os.path.join(a.out, "scaling.json"), "w") as f:
        json.dump(result, f, indent=1)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(5.6, 4))
        for svd, color in (("truncated", "C0"), ("full", "C1")):
            for key, style in (("value", "-o"), ("value_and_grad", "--s")):
                pts = [(r["chi"], r.get(f"{key}_per_step_ms")) for r in rows
                       if r["svd"] == svd and r.get(f"{key}_per_step_ms")]
                if not pts:
                    continue
                e = fits.get(f"{svd} {key}")
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, color=color,
                        label=f"{svd}, {key.replace('_and_', '+')}"
                              + (f" (χ^{e:.1f})" if e else ""))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(chis)
        ax.set_xticklabels([str(c) for c in chis])
        ax.set_xlabel("bond dimension χ")
        ax.set_ylabel("ms per χ → χ step (width 1)")
        ax.set_title("TRG, β = 0.4: truncated vs full SVD", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(a.out, "scaling.svg"))
    except ImportError:
        print("scaling: matplotlib missing, no plot", file=sys.stderr)
    print(json.dumps(fits))


if __name__ == "__main__":
    main()
