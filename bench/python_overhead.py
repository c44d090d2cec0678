#!/usr/bin/env python3
"""What calling the engine from Python costs: tessel's Engine.run against the C++ engine
inside it, and against jax.jit(jax.grad(f)), on the seeds' micro benchmark.

    PYTHONPATH=build/python bench/.venv/bin/python bench/python_overhead.py [--n 1000]
        [--calls 20000] [--rounds 5]

f(x) = Σ sin(x)·x², n = 1000: the gradient program is traced with tessel.ops, transformed
(grad, keep-outputs=false; cse, dce) and prepared once; then each round makes CALLS calls of
`engine.run(plan, {"x": x})` (width 1), timing each call with perf_counter_ns, and reads
`engine.last_run_ms`, the C++ engine's own time of the same run (Engine::run, no Python).
The overhead of one call is its Python time minus its engine time (paired). In the same
process and rounds (alternated), CALLS calls of `jax.jit(jax.grad(f))(x).block_until_ready()`
(XLA on the CPU, one thread) when jax imports. OPENBLAS_NUM_THREADS=1; the 1-minute load
average is recorded before each round. Writes bench/python_overhead.json, which
bench/report.py puts into BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time

from sweep import load1  # bench/sweep.py: the 1-minute load average

HERE = os.path.dirname(os.path.abspath(__file__))


def summary(us: list[float]) -> dict:
    s = sorted(us)
    return {"min": s[0], "median": statistics.median(s), "p90": s[int(0.9 * (len(s) - 1))], "n": len(s)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(HERE, "python_overhead.json"))
    a = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

    import numpy as np
    import tessel
    from tessel import ops

    t_start = time.time()
    x = np.random.default_rng(0).uniform(-1, 1, a.n)

    def f(x):
        return ops.sum(ops.sin(x) * x * x)

    program = tessel.opt(tessel.grad(tessel.trace(f, (a.n,)), wrt="x", keep_outputs=False), "cse,dce")
    plan = tessel.prepare(program)
    engine = tessel.Engine(1)
    inputs = {"x": x}
    expect = np.cos(x) * x * x + 2 * x * np.sin(x)
    assert np.allclose(engine.run(plan, inputs)["grad_x"], expect, rtol=1e-13, atol=1e-15)

    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)
        jgrad = jax.jit(jax.grad(lambda v: jnp.sum(jnp.sin(v) * v * v)))
        xj = jnp.asarray(x)
        assert np.allclose(np.asarray(jgrad(xj).block_until_ready()), expect, rtol=1e-13, atol=1e-15)
        jax_version = jax.__version__
    except ImportError:
        jgrad, jax_version = None, None

    py_us, cpp_us, over_us, jax_us, loads = [], [], [], [], []
    clock = time.perf_counter_ns
    for _ in range(a.rounds):
        loads.append(load1())
        for _ in range(200):  # warm-up
            engine.run(plan, inputs)
        for _ in range(a.calls):
            t0 = clock()
            engine.run(plan, inputs)
            dt = (clock() - t0) / 1e3
            run = engine.last_run_ms * 1e3
            py_us.append(dt)
            cpp_us.append(run)
            over_us.append(dt - run)
        if jgrad is not None:
            for _ in range(200):
                jgrad(xj).block_until_ready()
            for _ in range(a.calls):
                t0 = clock()
                jgrad(xj).block_until_ready()
                jax_us.append((clock() - t0) / 1e3)

    res = {
        "generated": datetime.date.today().isoformat(),
        "minutes": round((time.time() - t_start) / 60, 1),
        "n": a.n, "calls": a.calls, "rounds": a.rounds, "width": 1,
        "python": sys.version.split()[0], "numpy": np.__version__, "jax": jax_version,
        "tessel_python_call_us": summary(py_us),
        "tessel_engine_us": summary(cpp_us),
        "overhead_us": summary(over_us),
        "jax_call_us": summary(jax_us) if jax_us else None,
        "load1_before_rounds": loads,
        "blas": tessel.blas_info(),
    }
    if jax_us:
        res["ratio_tessel_python_over_jax"] = {
            "min": res["tessel_python_call_us"]["min"] / res["jax_call_us"]["min"],
            "median": res["tessel_python_call_us"]["median"] / res["jax_call_us"]["median"]}
    with open(a.out, "w", encoding="utf-8") as fh:
        json.dump(res, fh, indent=1)
        fh.write("\n")
    fmt = lambda s: f"min {s['min']:.2f} median {s['median']:.2f} p90 {s['p90']:.2f} µs"  # noqa: E731
    print(f"grad of sum(sin(x) x^2), n = {a.n}, width 1, {a.rounds} rounds x {a.calls} calls, "
          f"load before rounds {loads}")
    print(f"  tessel engine.run from Python  {fmt(res['tessel_python_call_us'])}")
    print(f"  the C++ engine inside it       {fmt(res['tessel_engine_us'])}")
    print(f"  overhead per call              {fmt(res['overhead_us'])}")
    if jax_us:
        print(f"  jax.jit(jax.grad(f)) {jax_version:8}  {fmt(res['jax_call_us'])}")
        r = res["ratio_tessel_python_over_jax"]
        print(f"  tessel (Python) / JAX          min {r['min']:.3f} median {r['median']:.3f}")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
