"""Shared helpers of tessel's benchmark peers (bench/peers/*.py).

Every peer program prints JSON Lines on stdout, one object per measured workload, with:

    peer, workload, first_ms, samples_ms (steady runs after one warm-up, in run order),
    stats {min, median, p90, max}, threads, blas [...], loadavg {before, after}, versions,
    plus workload-specific results (lnZ_per_site, dlnZ_dbeta, ...).

Timing rules (docs/benchmarking.md): inputs are made outside the timed region, the
first call is timed alone and never enters the steady state, one untimed warm-up follows it, and
a call is timed until its results are in host memory (block_until_ready for JAX, .item()/numpy
conversion for PyTorch).
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Callable, Sequence

# TRG parameters of docs/trg.md.
TOL = 1e-12          # rank cut on the normalised tensor (docs/trg.md §2.4)
EPS = 1e-12          # Lorentzian broadening of the SVD reverse rule (docs/trg.md §5); uses eps**2


def loadavg() -> str:
    """The 1/5/15-minute load averages from /proc/loadavg ("?" where unreadable)."""
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def quantile(sorted_xs: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile of an ascending sequence (numpy's default method)."""
    if not sorted_xs:
        return math.nan
    pos = q * (len(sorted_xs) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def summarize(xs: Sequence[float]) -> dict:
    s = sorted(xs)
    return {"min": s[0], "median": quantile(s, 0.5), "p90": quantile(s, 0.9), "max": s[-1],
            "n": len(s)} if s else {"min": None, "median": None, "p90": None, "max": None, "n": 0}


def time_calls(call: Callable[[], object], repeat: int) -> tuple[float, list[float], object]:
    """Times `call` (which must return only once its results are in host memory): the first
    call alone, then one untimed warm-up, then `repeat` timed calls. Returns (first_ms,
    steady_ms, result of the first call)."""
    t0 = time.perf_counter()
    first_result = call()
    first = (time.perf_counter() - t0) * 1e3
    call()  # warm-up
    steady = []
    cpu = []
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(repeat):
        c1, t0 = time.process_time(), time.perf_counter()
        call()
        steady.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c1) * 1e3)
    wall = time.perf_counter() - w0
    global last_cpu_per_wall, last_cpu_ms
    last_cpu_per_wall = (time.process_time() - c0) / wall if repeat and wall > 0 else None
    last_cpu_ms = cpu
    return first, steady, first_result


# CPU time of the whole process (all threads) / wall time over the last time_calls' steady runs:
# ≈ 1 for a single-threaded contender; up to the core count when it runs threads in parallel.
last_cpu_per_wall = None
# CPU time (all threads) of each steady call, ms: for a single-threaded contender this is the
# work itself, much less sensitive than wall time to other processes on a shared machine.
last_cpu_ms: list = []


def blas_info() -> list[dict]:
    """The BLAS/LAPACK libraries loaded in this process and their thread counts, from
    threadpoolctl (empty list with a note if threadpoolctl is not installed)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return [{"note": "threadpoolctl not installed"}]
    out = []
    for d in threadpool_info():
        out.append({k: d.get(k) for k in ("internal_api", "user_api", "num_threads", "version",
                                           "architecture", "threading_layer", "filepath")
                    if d.get(k) is not None})
    return out


def blas_summary(blas: list[dict]) -> str:
    """One short line: 'openblas 0.3.x SkylakeX x1 (numpy.libs), ...'."""
    parts = []
    for d in blas:
        if "note" in d:
            parts.append(d["note"])
            continue
        where = os.path.basename(os.path.dirname(d.get("filepath", ""))) or "?"
        parts.append(f"{d.get('internal_api', '?')} {d.get('version', '')} "
                     f"{d.get('architecture', '')} x{d.get('num_threads', '?')} ({where})"
                     .replace("  ", " "))
    return ", ".join(parts) if parts else "none reported"


def threads_env() -> dict:
    keys = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "XLA_FLAGS",
            "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    return {k: os.environ[k] for k in keys if k in os.environ}


def emit(record: dict) -> None:
    """Prints one JSON Lines record (non-finite floats become null) and flushes."""
    def clean(x):
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x
    print(json.dumps(clean(record)), flush=True)


def record(peer: str, workload: str, first_ms: float, steady: list[float], load_before: str,
           **extra) -> dict:
    r = {"peer": peer, "workload": workload, "first_ms": first_ms, "samples_ms": steady,
         "stats": summarize(steady), "loadavg": {"before": load_before, "after": loadavg()},
         "blas": blas_info(), "env": threads_env(), "python": sys.version.split()[0],
         "steady_cpu_per_wall": last_cpu_per_wall,
         "cpu_stats": summarize(last_cpu_ms) if last_cpu_ms else None}
    r.update(extra)
    return r

