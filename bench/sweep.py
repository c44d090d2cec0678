#!/usr/bin/env python3
"""A β sweep on one process against the same sweep over MPI ranks: wall time of the whole job.

    python3 bench/sweep.py [--tessel build/tools/tessel] [--ranks 2] [--rounds 3]
                           [--betas 0.3:0.55:16] [--chi 16]

Runs `tessel trg --beta-range BETAS --chi CHI --grad --width 1 --csv` (the default --repeat 10:
each β is timed as the main job times it) as 1 rank and as `mpirun -n RANKS`, alternating
(serial, MPI, serial, MPI, ...), ROUNDS times each, OPENBLAS_NUM_THREADS=1. Records the wall
time of each job from start to exit (mpirun's start-up included), the 1-minute load average
before each, and checks that every job printed the same CSV (the values are bitwise the serial
run's). Writes bench/sweep.json, which bench/report.py puts into BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def load1() -> float | None:
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return float(f.read().split()[0])
    except OSError:
        return None


def timed(cmd: list[str], env: dict) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        sys.exit(f"sweep.py: {' '.join(cmd)} exited {out.returncode}:\n{out.stderr}")
    return wall, out.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tessel", default=os.path.join(ROOT, "build", "tools", "tessel"))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--betas", default="0.3:0.55:16")
    ap.add_argument("--chi", type=int, default=16)
    ap.add_argument("--out", default=os.path.join(HERE, "sweep.json"))
    a = ap.parse_args()
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        sys.exit("sweep.py: mpirun not found (scripts/setup.sh installs openmpi-bin)")
    trg = [a.tessel, "trg", "--beta-range", a.betas, "--chi", str(a.chi), "--grad", "--width", "1",
           "--no-progress", "--csv"]
    mpi = [mpirun, "-n", str(a.ranks)] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    if a.ranks > (os.cpu_count() or 1):
        mpi.append("--oversubscribe")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    runs = {"serial": [], "mpi": []}
    reference = None
    t_start = time.time()
    for r in range(a.rounds):
        for kind, cmd in (("serial", trg), ("mpi", mpi + trg)):
            before = load1()
            wall, out = timed(cmd, env)
            if reference is None:
                reference = out
            elif out != reference:
                sys.exit(f"sweep.py: the {kind} run of round {r + 1} printed a different CSV")
            runs[kind].append({"wall_s": round(wall, 4), "load1_before": before})
            print(f"round {r + 1} {kind:6s} {wall:8.3f} s  load {before}", flush=True)
    med = {k: statistics.median(x["wall_s"] for x in v) for k, v in runs.items()}
    mins = {k: min(x["wall_s"] for x in v) for k, v in runs.items()}
    res = {
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "minutes": round((time.time() - t_start) / 60, 1),
        "command": " ".join(trg[1:]),
        "ranks": a.ranks, "width": 1, "cores": os.cpu_count(), "rounds": a.rounds,
        "runs": runs,
        "median_s": med, "min_s": mins,
        "ratio_median": med["mpi"] / med["serial"],
        "ratio_min": mins["mpi"] / mins["serial"],
        "identical_csv": True,
    }
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    print(f"median serial {med['serial']:.3f} s, {a.ranks} ranks {med['mpi']:.3f} s: "
          f"ratio {res['ratio_median']:.3f} (min {res['ratio_min']:.3f}); wrote {a.out}")


if __name__ == "__main__":
    main()
