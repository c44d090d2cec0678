"""HOTRG of the 2D Ising model in about 40 lines of tessel.ops, traced and differentiated.

    python examples/hotrg_ising.py [--beta 0.4] [--chi 8] [--steps 16]

Higher-order TRG (Z. Y. Xie et al., PRB 86, 045139 (2012)): two tensors are contracted
along one axis, the doubled bond is truncated to χ with the isometry of the leading
eigenvectors of its environment M·Mᵀ, and the axes alternate. Written with numpy's
spellings on traced Tensors (einsum, reshape, slicing, .max(), **) and staged (the step is
a function of the module, traced once per tensor shape; the χ -> χ steps are one loop),
it gives lnZ/N and, by the grad transform through every eigendecomposition,
d(lnZ/N)/dβ = −energy per site (units of J), printed beside Onsager's exact values
(docs/python.md walks through it).
"""
from __future__ import annotations

import argparse

import numpy as np

import tessel
from tessel import ops


def initial_tensor(beta):
    """T[l, r, u, d] of the Ising model over cosh² β per site: W = [[1, √t], [1, −√t]]."""
    s = ops.sqrt(ops.tanh(beta))
    W = np.array([[1.0, 0.0], [1.0, 0.0]]) + s * np.array([[0.0, 1.0], [0.0, -1.0]])
    return ops.einsum("al,ar,au,ad->lrud", W, W, W, W)


def hotrg_step(T, chi):
    """Contracts T with the tensor below it (T's d with its u), truncates the doubled
    horizontal bond with the isometry U of its environment M·Mᵀ, and rotates the result
    (x ↔ y) so that the next step contracts along the other axis."""
    D, Dv = T.shape[0], T.shape[2]                                 # horizontal, vertical
    M = ops.einsum("abuk,cdke->acbdue", T, T)                      # l1 l2 r1 r2 u d
    E = M.reshape(D * D, -1)
    w, V = ops.eigh(E @ E.T, eps=1e-9)                              # environment of (l1 l2)
    Dp = min(D * D, chi)
    U = V[:, D * D - Dp:].reshape(D, D, Dp)                        # the Dp largest eigenvalues
    Tn = ops.einsum("acx,acbdue,bdy->xyue", U, M, U)
    m = ops.max(ops.abs(Tn))
    return ops.log(m), ops.transpose(Tn / m, (2, 3, 0, 1))        # rotate: (u, d, l, r)


def make_lnz(chi, steps):
    def step(T, lnz, w):                             # (T, lnz, w) -> (T', lnz + w·ln m, w/2)
        logm, Tn = hotrg_step(T, chi)
        return Tn, lnz + logm * w, w * 0.5
    staged = tessel.function(step, name="hotrg_step")  # traced once per shape, called per step

    def lnz(beta):
        carry, n = (initial_tensor(beta), ops.constant(0.0), ops.constant(0.5)), 0
        while n < steps and tuple(carry[0].shape) != (chi,) * 4:   # the bonds grow to χ
            carry, n = staged(*carry), n + 1
        if n < steps:                                # the χ -> χ steps: one loop of calls
            carry, _ = tessel.scan(lambda c, _: (staged(*c), None), carry, length=steps - n)
        T, total, w = carry                          # step n weighs ln m by 2^-(n+1)
        total = total + ops.log(ops.einsum("lluu->", T)) * (2.0 * w)
        lncosh = beta + ops.log((ops.exp(-2.0 * beta) + 1.0) * 0.5)
        return {"lnz": total + 2.0 * lncosh}          # cosh² β per site, taken out above
    return lnz


def run(beta=0.4, chi=8, steps=16):
    """lnZ/N and d(lnZ/N)/dβ of the 2^steps-site torus at β."""
    program = tessel.trace(make_lnz(chi, steps), (), names=["beta"], name="hotrg")
    grad = tessel.grad(program, wrt="beta")         # outputs lnz, grad_beta
    out = tessel.Engine(1).run(tessel.prepare(grad), {"beta": beta})
    return {"lnZ_per_site": float(out["lnz"]), "dlnZ_dbeta": float(out["grad_beta"]),
            "ops": grad.num_ops, "compile_ms": grad.compile_ms}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--beta", type=float, default=0.4, help="inverse temperature β = 1/T (J = 1)")
    ap.add_argument("--chi", type=int, default=8, help="bond dimension χ")
    ap.add_argument("--steps", type=int, default=16, help="HOTRG steps (2^steps sites)")
    a = ap.parse_args()
    r = run(a.beta, a.chi, a.steps)
    ex = tessel.onsager(a.beta)
    print(f"HOTRG chi={a.chi} steps={a.steps} beta={a.beta}: {r['ops']} ops, "
          f"traced + differentiated in {r['compile_ms']:.1f} ms")
    print(f"  lnZ/N           {r['lnZ_per_site']:.15f}  exact {ex['lnZ_per_site']:.15f}")
    print(f"  d(lnZ/N)/dbeta  {r['dlnZ_dbeta']:.15f}  exact {ex['dlnZ_dbeta']:.15f}")


if __name__ == "__main__":
    main()
