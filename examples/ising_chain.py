#!/usr/bin/env python3
"""The 1D Ising chain (J = 1, h = 0) by its transfer matrix, as one loop in the IR.

Each step multiplies the boundary vector by M = [[e^β, e^−β], [e^−β, e^β]] and normalises
it, keeping the logarithms; lnZ/N is their mean. The loop is `tessel.scan`: one `scan` op
whatever the number of steps, so tracing, the two gradients (energy, then specific heat)
and prepare cost the same at 3,000 or 30,000 steps. Checked against the exact
lnZ/N = ln(2 cosh β), d/dβ = tanh β, d²/dβ² = sech² β (the start vector (½, ½) is M's
leading eigenvector, so these hold at any length).

    python examples/ising_chain.py [--steps 3000] [--beta 0.7]
"""
import argparse
import math
import time

import numpy as np

import tessel
from tessel import ops


def chain_program(steps: int) -> tessel.Program:
    """lnZ/N of a chain of `steps` sites (input %beta, output %lnz)."""
    def lnz(beta):
        def step(carry, _):
            v, logs = carry
            M = ops.exp(beta * np.array([[1.0, -1.0], [-1.0, 1.0]]))
            w = M @ v
            s = ops.sum(w)
            return (w / s, logs + ops.log(s)), None
        (_, logs), _ = tessel.scan(step, (ops.full((2,), 0.5), ops.constant(0.0)), length=steps)
        return {"lnz": logs / steps}
    return tessel.trace(lnz, (), names=["beta"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--beta", type=float, default=0.7)
    args = ap.parse_args()

    t0 = time.perf_counter()
    p = chain_program(args.steps)
    d1 = tessel.grad(p, keep_outputs=False)
    d2 = tessel.grad(d1, keep_outputs=False)
    t1 = time.perf_counter()
    plans = [tessel.prepare(q) for q in (p, d1, d2)]
    t2 = time.perf_counter()
    engine = tessel.Engine(1)
    exact = [math.log(2 * math.cosh(args.beta)), math.tanh(args.beta),
             1 / math.cosh(args.beta) ** 2]
    print(f"1D Ising chain, {args.steps} steps, beta = {args.beta}")
    print(f"trace + grad + grad: {(t1 - t0) * 1e3:.2f} ms; prepare (3 programs): "
          f"{(t2 - t1) * 1e3:.2f} ms; the second derivative has {d2.op_counts['scan']} scan ops "
          f"in {len(str(d2).splitlines())} lines of IR")
    for label, q, plan, want in zip(("lnZ/N", "d(lnZ/N)/dbeta", "d2(lnZ/N)/dbeta2"),
                                    (p, d1, d2), plans, exact):
        t3 = time.perf_counter()
        (value,) = engine.run(plan, {"beta": args.beta}).values()
        ms = (time.perf_counter() - t3) * 1e3
        print(f"{label:18s} {float(value): .15f}   exact {want: .15f}   "
              f"rel. error {abs(float(value) - want) / abs(want):.1e}   run {ms:.1f} ms")


if __name__ == "__main__":
    main()
