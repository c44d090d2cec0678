"""JAX peer (CPU, x64): the TRG of docs/trg.md as jax.jit(jax.value_and_grad(f))
over β, with a custom_vjp SVD implementing the Lorentzian-broadened reverse rule of docs/trg.md §5
(ε = 1e-12, ε² in the denominator); the seeds' grad micro-benchmark; svd/svdvals 256×256.

    python trg_jax.py trg     --beta 0.4 --chi 16 --steps 20 --repeat 10
    python trg_jax.py compile --beta 0.4 --chi 16 --steps 20 --repeat 3   # AOT lower / compile
    python trg_jax.py grad    --n 1000 --repeat 2000                      # jit(grad(Σ sin(x)·x²))
    python trg_jax.py svd     --n 256 --repeat 30 [--matrix M.npy]

Every timed call waits for its result (jax.block_until_ready); the first call (trace + lower +
XLA compile + first run) is reported apart from the steady state. Thread count: the harness sets
XLA_FLAGS and OPENBLAS_NUM_THREADS in this program's environment; the BLAS/LAPACK libraries
actually loaded (JAX's CPU LAPACK kernels come through scipy's or jaxlib's LAPACK) are listed
by threadpoolctl after the runs.

The rank schedule (2, 4, 4, 16, ... for chi = 16) is static in a jitted program: it is measured
by the numpy forward (count of singular values > 1e-12, docs/trg.md §2.4) before tracing, outside
every timed region.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import trg_numpy  # noqa: E402


@jax.custom_vjp
def svd(a):
    """Full SVD a = u·diag(s)·vt (LAPACK gesdd on CPU), s descending."""
    return jnp.linalg.svd(a, full_matrices=False)


def _svd_fwd(a):
    u, s, vt = jnp.linalg.svd(a, full_matrices=False)
    return (u, s, vt), (u, s, vt)


def _svd_bwd(res, cts):
    """docs/trg.md §5: d_ij = s_j² − s_i², F_ij = d_ij/(d_ij² + ε²) (0 on ties and the diagonal),
    s⁺ = s/(s² + ε²), J = F∘(UᵀŪ), K = F∘(VᵀV̄),
    Ā = U[(J+Jᵀ)S + S(K+Kᵀ) + diag(s̄)]Vᵀ + (I−UUᵀ)Ū S⁺ Vᵀ + U S⁺ V̄ᵀ (I−VVᵀ)."""
    u, s, vt = res
    gu, gs, gvt = cts
    v, gv = vt.T, gvt.T
    eps2 = common.EPS * common.EPS
    # d_ij = s_j² − s_i² written as (s_j − s_i)(s_j + s_i): exactly 0 on the diagonal and on
    # exact ties. The literal form s2[None,:] − s2[:,None] is NOT safe under jit: XLA's CPU
    # backend may contract s_j·s_j − s_i² into an FMA, leaving d_ii ~ 1e-17 and then
    # F_ii = d/(d² + 1e-24) ~ 1e7 (we measured d lnZ/dβ = 4e144 that way).
    d = (s[None, :] - s[:, None]) * (s[None, :] + s[:, None])
    f = d / (d * d + eps2)
    splus = s / (s * s + eps2)
    j = f * (u.T @ gu)
    k = f * (v.T @ gv)
    inner = (j + j.T) * s[None, :] + s[:, None] * (k + k.T) + jnp.diag(gs)
    ga = u @ inner @ vt
    gus = gu * splus[None, :]
    ga = ga + (gus - u @ (u.T @ gus)) @ vt
    gvs = gv * splus[None, :]
    ga = ga + u @ (gvs.T - (gvs.T @ v) @ vt)
    return (ga,)


svd.defvjp(_svd_fwd, _svd_bwd)


def make_lnz(ranks: list[int]):
    """β ↦ lnZ/N with a static rank schedule. m_n = max|T| is a stop-gradient constant
    (docs/trg.md §2.1, §5: lnZ does not depend on m_n, so value and first derivative are
    the same; tessel differentiates through m_n for the second derivative's sake)."""
    steps = len(ranks)

    def lnz_fn(beta):
        c, s = jnp.sqrt(jnp.cosh(beta)), jnp.sqrt(jnp.sinh(beta))
        w = jnp.stack([jnp.stack([c, s]), jnp.stack([c, -s])])
        t = jnp.einsum("ai,aj,ak,al->ijkl", w, w, w, w)
        lnz = jnp.zeros((), dtype=jnp.float64)
        for n, k in enumerate(ranks):
            d = t.shape[0]
            m = jax.lax.stop_gradient(jnp.max(jnp.abs(t)))
            t = t / m
            lnz = lnz + jnp.log(m) / 2.0 ** n
            ma = t.transpose(2, 1, 0, 3).reshape(d * d, d * d)
            mb = t.transpose(3, 2, 1, 0).reshape(d * d, d * d)
            ua, sa, vta = svd(ma)
            ub, sb, vtb = svd(mb)
            ra, rb = jnp.sqrt(sa[:k]), jnp.sqrt(sb[:k])
            s1 = (ua[:, :k] * ra).reshape(d, d, k)
            s3 = (vta[:k, :].T * ra).reshape(d, d, k)
            s2 = (ub[:, :k] * rb).reshape(d, d, k)
            s4 = (vtb[:k, :].T * rb).reshape(d, d, k)
            x = jnp.tensordot(s1, s2, axes=([1], [0]))       # [w, r, b, u]
            y = jnp.tensordot(s3, s4, axes=([1], [0]))       # [b, l, w, d]
            t = jnp.tensordot(x, y, axes=([0, 2], [2, 0]))   # [r, u, l, d]
        return lnz + jnp.log(jnp.einsum("ijij->", t)) / 2.0 ** steps

    return lnz_fn


def ready(x):
    return jax.block_until_ready(x)


def versions() -> dict:
    import jaxlib
    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "numpy": np.__version__,
            "backend": jax.default_backend()}


def cmd_trg(a) -> None:
    _, ranks = trg_numpy.trg_forward(a.beta, a.chi, a.steps)
    beta = jnp.asarray(a.beta, dtype=jnp.float64)
    f = make_lnz(ranks)
    jobs = [("trg_value", jax.jit(f))]
    if not a.value_only:
        jobs.append(("trg_value_and_grad", jax.jit(jax.value_and_grad(f))))
    for workload, fn in jobs:
        load = common.loadavg()
        first, steady, res = common.time_calls(lambda: ready(fn(beta)), a.repeat)
        if workload == "trg_value":
            extra = {"lnZ_per_site": float(res)}
        else:
            extra = {"lnZ_per_site": float(res[0]), "dlnZ_dbeta": float(res[1])}
        common.emit(common.record("jax", workload, first, steady, load, beta=a.beta, chi=a.chi,
                                  steps=a.steps, ranks=ranks, order="pairwise",
                                  first_includes="trace + lower + XLA compile + first run",
                                  versions=versions(), **extra))


def cmd_compile(a) -> None:
    """AOT: trace+lower and XLA compile of value_and_grad, each on a fresh function object
    (no tracing or compilation cache hit), `repeat` times; plus the first run of the compiled
    executable."""
    _, ranks = trg_numpy.trg_forward(a.beta, a.chi, a.steps)
    beta = jnp.asarray(a.beta, dtype=jnp.float64)
    load = common.loadavg()
    lower_ms, compile_ms, first_run_ms = [], [], []
    for _ in range(a.repeat + 1):
        fresh = jax.jit(jax.value_and_grad(make_lnz(ranks)))
        t0 = time.perf_counter()
        lowered = fresh.lower(beta)
        t1 = time.perf_counter()
        compiled = lowered.compile()
        t2 = time.perf_counter()
        ready(compiled(beta))
        t3 = time.perf_counter()
        lower_ms.append((t1 - t0) * 1e3)
        compile_ms.append((t2 - t1) * 1e3)
        first_run_ms.append((t3 - t2) * 1e3)
    # The first iteration also pays for importing/initialising JAX's tracing machinery: report
    # it apart as "first", the others as the steady state.
    for what, xs in (("jax_trace_lower", lower_ms), ("jax_xla_compile", compile_ms),
                     ("jax_first_run_compiled", first_run_ms)):
        common.emit(common.record("jax", f"compile_{what}", xs[0], xs[1:], load, beta=a.beta,
                                  chi=a.chi, steps=a.steps, ranks=ranks,
                                  what="value_and_grad, AOT on a fresh jax.jit object",
                                  versions=versions()))


def cmd_grad(a) -> None:
    if a.x:
        x = jnp.asarray(np.load(a.x))
    else:
        x = jnp.asarray(np.random.default_rng(0).uniform(-1.0, 1.0, size=a.n))
    g = jax.jit(jax.grad(lambda v: jnp.sum(jnp.sin(v) * v * v)))
    load = common.loadavg()
    first, steady, res = common.time_calls(lambda: ready(g(x)), a.repeat)
    ref = np.sin(np.asarray(x)) * 2 * np.asarray(x) + np.cos(np.asarray(x)) * np.asarray(x) ** 2
    err = float(np.max(np.abs(np.asarray(res) - ref)))
    common.emit(common.record("jax", f"grad_sin_x2_{x.shape[0]}", first, steady, load, n=x.shape[0],
                              max_abs_err_vs_closed_form=err, versions=versions()))


def cmd_svd(a) -> None:
    if a.matrix:
        m = jnp.asarray(np.load(a.matrix))
    else:
        m = jnp.asarray(np.random.default_rng(42).uniform(-1.0, 1.0, size=(a.n, a.n)))
    fs = jax.jit(lambda x: jnp.linalg.svd(x, full_matrices=False))
    fv = jax.jit(lambda x: jnp.linalg.svd(x, compute_uv=False))
    for what, fn in (("svd", fs), ("svdvals", fv)):
        load = common.loadavg()
        first, steady, _ = common.time_calls(lambda: ready(fn(m)), a.repeat)
        common.emit(common.record("jax", f"{what}_{m.shape[0]}", first, steady, load,
                                  shape=list(m.shape), matrix=a.matrix or "uniform(-1,1) seed 42",
                                  versions=versions()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("trg", "compile"):
        p = sub.add_parser(name)
        p.add_argument("--beta", type=float, default=0.4)
        p.add_argument("--chi", type=int, default=16)
        p.add_argument("--steps", type=int, default=20)
        p.add_argument("--repeat", type=int, default=10 if name == "trg" else 3)
        if name == "trg":
            p.add_argument("--value-only", action="store_true", help="skip value_and_grad")
    g = sub.add_parser("grad")
    g.add_argument("--n", type=int, default=1000)
    g.add_argument("--repeat", type=int, default=2000)
    g.add_argument("--x", help=".npy input vector (default: uniform(-1,1), seed 0)")
    s = sub.add_parser("svd")
    s.add_argument("--n", type=int, default=256)
    s.add_argument("--matrix")
    s.add_argument("--repeat", type=int, default=30)
    a = ap.parse_args()
    {"trg": cmd_trg, "compile": cmd_compile, "grad": cmd_grad, "svd": cmd_svd}[a.cmd](a)


if __name__ == "__main__":
    main()
