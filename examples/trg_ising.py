"""TRG of the 2D Ising model, written in Python with tessel.ops, traced, differentiated, run.

    python examples/trg_ising.py [--beta 0.3] [--chi 16] [--steps 20] [--width 1]

The Levin–Nave TRG (M. Levin, C. P. Nave, PRL 99, 120601 (2007)) as a user writes it:
the initial tensor of the square-lattice Ising model (J = 1), `steps` coarse-graining
steps (two SVDs each, truncated to D' = min(D², χ) triplets), and the closure of the
periodic lattice of 2^steps sites. Written staged, as `tessel trg` runs it: each step class
D -> D' is a function of the module (`tessel.function`, traced once), called once per step,
and the run of repeated χ -> χ steps is one loop (`tessel.scan`) of calls, so the program is
as small at 20 steps as at 60. tessel traces it into a module β -> lnZ/N, the grad
transform differentiates it through the calls and the loop (reverse mode through every SVD;
a reverse loop over each step's backward half), the passes order the contractions in every
function, and the engine runs it. Printed: lnZ/N and d(lnZ/N)/dβ (= −energy per site,
units of J) beside tessel's own TRG (tessel.trg, the staged programs of the library) and
Onsager's exact infinite-lattice values.
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

import tessel
from tessel import ops

# Lorentzian broadening of the SVD reverse rule, relative to the largest singular value
# (tessel's TRG default; degenerate singular values keep a finite derivative).
SVD_EPS = 1e-9


def initial_tensor(beta):
    """T0[i,j,k,l] = Σ_a W[a,i] W[a,j] W[a,k] W[a,l] with e^{βσσ'} = cosh β · Σ_i W[σ,i] W[σ',i]:
    W = [[1, √tanh β], [1, −√tanh β]], the tensor divided by cosh² β (added back to lnZ/N at
    the end as 2 ln cosh β), so that no β overflows and nothing cancels at small β."""
    s = ops.sqrt(ops.tanh(beta))
    W = np.array([[1.0, 0.0], [1.0, 0.0]]) + s * np.array([[0.0, 1.0], [0.0, -1.0]])
    return ops.einsum("ai,aj,ak,al->ijkl", W, W, W, W)


def log_cosh(x):
    """ln cosh x for x > 0 without overflow: x + ln((1 + e^{−2x})/2)."""
    return x + ops.log((ops.exp(-2.0 * x) + 1.0) * 0.5)


def half_tensor(X, s_sqrt, D, Dp):
    """S[p,q,k] = X[p·D+q, k] · sqrt(s[k])."""
    return X.reshape(D, D, Dp) * ops.broadcast_in_dim(s_sqrt, (D, D, Dp), [2])


def trg_step(T, Dp):
    """One Levin–Nave step T[D,D,D,D] -> (ln m, T'[D',D',D',D']), m = max|T|."""
    D = T.shape[0]
    m = ops.max(ops.abs(T))
    T = T / m
    Ma = ops.transpose(T, (2, 1, 0, 3)).reshape(D * D, D * D)
    Mb = ops.transpose(T, (3, 2, 1, 0)).reshape(D * D, D * D)
    Ua, sa, Vta = ops.svd(Ma, eps=SVD_EPS)
    Ub, sb, Vtb = ops.svd(Mb, eps=SVD_EPS)
    sqa, sqb = ops.sqrt(sa[:Dp]), ops.sqrt(sb[:Dp])
    S1 = half_tensor(Ua[:, :Dp], sqa, D, Dp)
    S3 = half_tensor(Vta[:Dp, :].T, sqa, D, Dp)
    S2 = half_tensor(Ub[:, :Dp], sqb, D, Dp)
    S4 = half_tensor(Vtb[:Dp, :].T, sqb, D, Dp)
    return ops.log(m), ops.einsum("war,abu,bgl,gwd->ruld", S1, S2, S3, S4)


def closure(T):
    """ln Σ_ij T[i,j,i,j]: the last tensor of the periodic lattice, traced."""
    return ops.log(ops.einsum("ijij->", T))


def rank_schedule(chi, steps):
    """D' of each step: min(D², χ, r), r = D² of the step before last (the exact rank the
    lattice allows; 2 for the first step)."""
    ranks, D_prev, D = [], 0, 2
    for n in range(steps):
        Dp = min(D * D, chi, 2 if n == 0 else D_prev * D_prev)
        ranks.append(Dp)
        D_prev, D = D, Dp
    return ranks


def step_runs(ranks):
    """The schedule as runs of equal step classes: [((D, D'), count), ...] in order."""
    runs, D = [], 2
    for Dp in ranks:
        if runs and runs[-1][0] == (D, Dp):
            runs[-1][1] += 1
        else:
            runs.append([(D, Dp), 1])
        D = Dp
    return [(cls, count) for cls, count in runs]


def chain_step(D, Dp):
    """The staged step of class D -> D' (a function of the module, traced once):
    (T, lnz, w) -> (T', lnz + w·ln m, w/2), w = 2^-n the weight of step n's ln m."""
    def step(T, lnz, w):
        logm, Tn = trg_step(T, Dp)
        return Tn, lnz + logm * w, w * 0.5
    return tessel.function(step, name=f"trg_step_{D}_{Dp}")


def make_lnz(chi, steps):
    runs = step_runs(rank_schedule(chi, steps))
    steps_of = {cls: chain_step(*cls) for cls, _ in runs}

    def lnz(beta):
        T = initial_tensor(beta)
        carry = (T, ops.constant(0.0), ops.constant(1.0))
        for cls, count in runs:
            step = steps_of[cls]
            if count == 1:
                carry = step(*carry)  # one call
            else:
                def repeated(c, _, step=step):
                    return step(*c), None
                carry, _ = tessel.scan(repeated, carry, length=count)  # one loop of calls
        T, total, w = carry
        total = total + closure(T) * w
        return {"lnz": total + 2.0 * log_cosh(beta)}
    return lnz


def run(beta=0.3, chi=16, steps=20, width=1):
    """Traces, differentiates, prepares and runs; returns the values and the stage times."""
    program = tessel.trace(make_lnz(chi, steps), (), names=["beta"], name="trg")
    # The pipeline of `tessel trg`, before and after the grad transform: truncate-svd turns
    # each svd whose factors are used only through their leading D' triplets into svd_topk
    # (computes only those), svd-transpose-fold runs the svd_topk of Mb (an axis reversal
    # of T) on T's own layout, and ordering the contractions before grad lets the VJP reuse
    # the forward's pairwise intermediates (the VJP of one unordered 4-operand einsum is
    # four 4-operand einsums: here 5x slower).
    program = tessel.opt(
        program, "truncate-svd,svd-transpose-fold,order{strategy=pairwise},pad-sink,cse,dce")
    grad = tessel.grad(program, wrt="beta")                        # outputs lnz, grad_beta
    # svd-topk-guards: each svd_topk computes the guards its backward complement needs.
    grad = tessel.opt(grad, "svd-topk-guards,order{strategy=pairwise},pad-sink,cse,dce")
    plan = tessel.prepare(grad)
    engine = tessel.Engine(width=width)
    t0 = time.perf_counter()
    out = engine.run(plan, {"beta": beta})
    first_ms = (time.perf_counter() - t0) * 1e3
    return {
        "lnZ_per_site": float(out["lnz"]),
        "dlnZ_dbeta": float(out["grad_beta"]),
        "ops_traced": program.num_ops,  # the entry's, after the first pipeline
        "op_counts": program.op_counts,
        "ops": grad.num_ops,
        "compile_ms": grad.compile_ms,
        "prepare_ms": plan.prepare_ms,
        "run_ms": first_ms,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--beta", type=float, default=0.3, help="inverse temperature β = 1/T (J = 1)")
    ap.add_argument("--chi", type=int, default=16, help="bond dimension χ")
    ap.add_argument("--steps", type=int, default=20, help="TRG steps (2^steps sites)")
    ap.add_argument("--width", type=int, default=1, help="engine width (threads)")
    a = ap.parse_args()

    mine = run(a.beta, a.chi, a.steps, a.width)
    lib = tessel.trg(a.beta, chi=a.chi, steps=a.steps, grad=True)
    exact = tessel.onsager(a.beta)
    print(f"TRG written with tessel.ops: chi = {a.chi}, steps = {a.steps} "
          f"(2^{a.steps} sites, periodic), beta = {a.beta:g}, width = {a.width}")
    counts = mine["op_counts"]
    print(f"  program      entry of {mine['ops_traced']} ops ({counts.get('call', 0)} calls, "
          f"{counts.get('scan', 0)} scan) traced and optimised, {mine['ops']} after grad and passes")
    print(f"  stages       compile {mine['compile_ms']:.1f} ms | prepare {mine['prepare_ms']:.1f} ms"
          f" | run {mine['run_ms']:.1f} ms (first run, value and gradient)")
    print(f"  {'':16} {'this program':>20} {'tessel.trg':>20} {'Onsager (exact)':>20}")
    for key, label in (("lnZ_per_site", "lnZ/N"), ("dlnZ_dbeta", "d(lnZ/N)/dbeta")):
        ex = exact[key]
        print(f"  {label:16} {mine[key]:20.15f} {lib[key]:20.15f} "
              f"{ex if ex is not None else math.nan:20.15f}")
    print(f"  difference   lnZ/N {mine['lnZ_per_site'] - lib['lnZ_per_site']:+.2e}, "
          f"d/dbeta {(mine['dlnZ_dbeta'] - lib['dlnZ_dbeta']) / abs(lib['dlnZ_dbeta']):+.2e} relative")


if __name__ == "__main__":
    main()
