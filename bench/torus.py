"""Accuracy per second on a finite torus at T_c: tessel's TRG, BTRG and HOTRG against quimb's HOTRG.

    bench/.venv/bin/python bench/torus.py [--tessel build/tools/tessel] [--sides 32,64]
                                          [--chis 8,16,32] [--hotrg-chis 8,16,32]
                                          [--quimb-chis 8,16] [--repeat 3]
                                          [--grad] [--grad-sides 16] [--grad-chis 8,16]

quimb contracts a finite lattice site by site, so the comparison is on the same finite torus
(side × side sites, periodic, β = β_c), where Kaufman's solution is exact (bench/exact_torus.py):
`tessel trg --steps 2·log2(side)` (2k TRG steps coarse-grain the 2^k × 2^k torus; a test checks
2×2 and 4×4 against Kaufman to 1e-14), `tessel trg --algorithm hotrg --steps log2(side)` (a HOTRG
step covers 2×2 sites) and quimb's `contract_hotrg` (bench/peers/hotrg_quimb.py): a HOTRG on
one tensor per site, whose cuts are oblique projectors from the two regions a bond joins
where tessel's are Xie et al.'s isometries from one environment (docs/trg.md §11).
Width 1, OPENBLAS_NUM_THREADS=1. tessel: the median of --repeat steady runs (`--repeat`, after a
warm-up); quimb: the faster of two contractions (each takes seconds). A contender whose lnZ/N is
off Kaufman's by more than 1e-3 relative is reported as failing its check, not timed. Writes
bench/torus.json, which bench/report.py puts into BENCHMARKS.md.

--grad adds value and gradient, d(lnZ/N)/dβ (minus the energy per site): tessel's `--grad`
(its steady median) against quimb's HOTRG differentiated through its jax backend
(jax.jit(jax.value_and_grad), the faster of two runs after the compile, whose time is reported
apart), on --grad-sides and --grad-chis; the derivative is checked against Kaufman's (a central
difference of his exact lnZ/N, h = 1e-5: ~1e-11) to 1e-2 relative.
"""
from __future__ import annotations

import os

# One BLAS thread for quimb too (set before numpy loads), as trgcli sets for tessel.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import trgcli  # noqa: E402
from exact_torus import kaufman_lnz_per_site  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "peers"))
import hotrg_quimb  # noqa: E402

BETA_C = "0.44068679350977147"
CHECK_REL = 1e-3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tessel", default=os.path.join(ROOT, "build", "tools", "tessel"))
    ap.add_argument("--sides", default="32,64", help="torus sides, powers of 2")
    ap.add_argument("--chis", default="8,16,32", help="tessel's bond dimensions")
    ap.add_argument("--hotrg-chis", default="8,16,32", help="tessel's HOTRG bond dimensions (O(χ⁷))")
    ap.add_argument("--quimb-chis", default="8,16", help="quimb's (its HOTRG is O(χ⁷) per site)")
    ap.add_argument("--repeat", type=int, default=3, help="tessel's steady runs per configuration")
    ap.add_argument("--grad", action="store_true", help="also value and gradient (quimb through jax)")
    ap.add_argument("--grad-sides", default="16", help="torus sides of the --grad rows (quimb's jit compile grows with the sites)")
    ap.add_argument("--grad-chis", default="8,16", help="bond dimensions of the --grad rows")
    ap.add_argument("--out", default=HERE)
    a = ap.parse_args()
    t0 = time.time()
    beta = float(BETA_C)
    rows = []

    def add(side: int, contender: str, chi: int, lnz: float, seconds: float, load) -> None:
        exact = kaufman_lnz_per_site(beta, side, side)
        err = abs(lnz - exact) / abs(exact)
        ok = err <= CHECK_REL
        rows.append({"side": side, "contender": contender, "chi": chi, "lnZ_per_site": lnz,
                     "exact": exact, "rel_err": err, "check": "ok" if ok else "failed",
                     "ms": seconds * 1000 if ok else None, "loadavg": load})
        print(f"{side}x{side} {contender} chi {chi}: {seconds * 1000:.1f} ms, rel. err {err:.2e}"
              f"{'' if ok else ' (FAILS its check)'}", flush=True)

    for side in [int(s) for s in a.sides.split(",")]:
        steps = 2 * round(math.log2(side))
        if 2 ** (steps // 2) != side:
            raise SystemExit(f"torus: side {side} is not a power of 2")
        for chi in [int(c) for c in a.chis.split(",")]:
            for algorithm in ("trg", "btrg"):
                rec = trgcli.run(a.tessel, ["--beta", BETA_C, "--chi", str(chi), "--steps", str(steps),
                                            "--algorithm", algorithm, "--repeat", str(a.repeat)])
                add(side, f"tessel {algorithm}", chi, rec["lnZ_per_site"],
                    trgcli.median_ms(rec, "value") / 1000, rec["loadavg"]["before"])
        for chi in [int(c) for c in a.hotrg_chis.split(",") if c]:
            rec = trgcli.run(a.tessel, ["--beta", BETA_C, "--chi", str(chi), "--steps", str(steps // 2),
                                        "--algorithm", "hotrg", "--repeat", str(a.repeat)])
            add(side, "tessel hotrg", chi, rec["lnZ_per_site"],
                trgcli.median_ms(rec, "value") / 1000, rec["loadavg"]["before"])
        if not hotrg_quimb.available():
            print("torus: quimb not installed (bench/install-peers.sh), its rows are left out", flush=True)
            continue
        for chi in [int(c) for c in a.quimb_chis.split(",")]:
            runs = [hotrg_quimb.lnz_per_site(beta, side, chi) for _ in range(2)]
            load = [round(x, 2) for x in os.getloadavg()]
            add(side, "quimb hotrg", chi, runs[0][0], min(s for _, s in runs), load)
    grad_rows = []

    def add_grad(side: int, contender: str, chi: int, lnz: float, dlnz: float, seconds: float,
                 compile_s, load) -> None:
        exact = kaufman_lnz_per_site(beta, side, side)
        h = 1e-5
        dexact = (kaufman_lnz_per_site(beta + h, side, side) - kaufman_lnz_per_site(beta - h, side, side)) / (2 * h)
        err, derr = abs(lnz - exact) / abs(exact), abs(dlnz - dexact) / abs(dexact)
        ok = err <= CHECK_REL and derr <= 1e-2
        grad_rows.append({"side": side, "contender": contender, "chi": chi, "lnZ_per_site": lnz,
                          "dlnZ_dbeta": dlnz, "exact_dlnZ_dbeta": dexact, "rel_err": err,
                          "rel_err_dbeta": derr, "check": "ok" if ok else "failed",
                          "ms": seconds * 1000 if ok else None,
                          "compile_s": compile_s, "loadavg": load})
        print(f"{side}x{side} {contender} chi {chi} value+grad: {seconds * 1000:.1f} ms"
              f"{'' if compile_s is None else f' (+{compile_s:.1f} s compile)'}, rel. err {err:.2e},"
              f" d/dbeta {derr:.2e}{'' if ok else ' (FAILS its check)'}", flush=True)

    for side in [int(s) for s in a.grad_sides.split(",")] if a.grad else []:
        steps = 2 * round(math.log2(side))
        for chi in [int(c) for c in a.grad_chis.split(",")]:
            for algorithm, n in (("trg", steps), ("btrg", steps), ("hotrg", steps // 2)):
                rec = trgcli.run(a.tessel, ["--beta", BETA_C, "--chi", str(chi), "--steps", str(n), "--grad",
                                            "--algorithm", algorithm, "--repeat", str(a.repeat)])
                add_grad(side, f"tessel {algorithm}", chi, rec["lnZ_per_site"], rec["dlnZ_dbeta"],
                         trgcli.median_ms(rec, "value_and_grad") / 1000, None, rec["loadavg"]["before"])
            if not hotrg_quimb.grad_available():
                print("torus: quimb or jax not installed (bench/install-peers.sh), no quimb gradient", flush=True)
                continue
            lnz, dlnz, compile_s, seconds = hotrg_quimb.lnz_and_dbeta(beta, side, chi)
            add_grad(side, "quimb hotrg (jax)", chi, lnz, dlnz, seconds, compile_s,
                     [round(x, 2) for x in os.getloadavg()])
    res = {"generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "minutes": round((time.time() - t0) / 60, 1), "beta": beta, "width": 1,
           "repeat": a.repeat, "quimb": hotrg_quimb.version() if hotrg_quimb.available() else None,
           "rows": rows, "grad_rows": grad_rows}
    with open(os.path.join(a.out, "torus.json"), "w", encoding="utf-8") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    print("torus: wrote torus.json")


if __name__ == "__main__":
    main()
