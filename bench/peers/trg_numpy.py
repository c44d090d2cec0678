"""numpy peer: the TRG forward of docs/trg.md (value only), the SVD floor, and
the 256×256 svd/svdvals micro-benchmarks.

    python trg_numpy.py trg   --beta 0.4 --chi 16 --steps 20 --repeat 10 [--dump-svd-inputs DIR]
    python trg_numpy.py floor --dir DIR --repeat 10       # the 32 gesdd calls on dumped matrices
    python trg_numpy.py svd   --n 256 --repeat 30 [--matrix M.npy]   # svd and svdvals
    python trg_numpy.py checkpoints [--beta 0.4] [--check tests/data/trg_beta0.4_checkpoints.json]

numpy.linalg.svd calls LAPACK dgesdd (divide and conquer) through the BLAS numpy loaded; that
library and its thread count are reported with every record (threadpoolctl).

The TRG is written from docs/trg.md alone: normalise by max|T|, Ma = T.transpose(2,1,0,3), Mb =
T.transpose(3,2,1,0) reshaped to D²×D², full SVDs, D' = min(D², chi, #{s > 1e-12}) for both,
half-tensors U·sqrt(s) and V·sqrt(s), pairwise plaquette contraction, closure Σ T[i,j,i,j].
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def initial_tensor(beta: float) -> np.ndarray:
    c, s = math.sqrt(math.cosh(beta)), math.sqrt(math.sinh(beta))
    w = np.array([[c, s], [c, -s]])
    return np.einsum("ai,aj,ak,al->ijkl", w, w, w, w)


def randomized_svd(m: np.ndarray, k: int):
    """The k leading triplets as a numpy user who truncates would compute them: randomized
    block subspace iteration with Rayleigh-Ritz (Halko, Martinsson, Tropp 2011, Alg. 4.4 and
    5.1), sketch 2k, stopped like tessel's svd_topk when every ||A v_i - s_i u_i|| <= 8 eps
    sqrt(max(m, n)) s_1 (at most 60 iterations)."""
    rows, cols = m.shape
    b = min(rows, cols, 2 * k)
    tol = 8 * np.finfo(float).eps * math.sqrt(max(rows, cols))
    w = m @ np.random.default_rng(1).standard_normal((cols, b))
    for _ in range(60):
        q, _r = np.linalg.qr(w)
        ut, s, vt = np.linalg.svd(q.T @ m, full_matrices=False)
        u = q @ ut
        w = m @ vt.T
        res = np.linalg.norm(w[:, :k] - u[:, :k] * s[:k], axis=0).max()
        if res <= tol * s[0]:
            break
    return u[:, :k], s[:k], vt[:k]


def svds_svd(m: np.ndarray, k: int):
    """The k leading triplets by scipy.sparse.linalg.svds (ARPACK, tol = 0: machine
    precision), sorted descending."""
    from scipy.sparse.linalg import svds
    u, s, vt = svds(m, k=k, tol=0, random_state=1)
    order = np.argsort(s)[::-1]
    return u[:, order], s[order], vt[order]


def truncating(method: str):
    """An svd(m, k) that computes the k leading triplets with `method` where a truncating
    user would (k <= half of min(m, n) and min(m, n) >= 32, tessel's truncate-svd rule),
    else numpy's full SVD."""
    def svd(m, k):
        if method == "full" or min(m.shape) < 32 or 2 * k > min(m.shape):
            return np.linalg.svd(m, full_matrices=False)
        return (randomized_svd if method == "randomized" else svds_svd)(m, k)
    return svd


def trg_forward(beta: float, chi: int, steps: int, svd_sink: list | None = None,
                svd=np.linalg.svd, trace: dict | None = None,
                truncated=None) -> tuple[float, list[int]]:
    """lnZ/N and the rank schedule. `svd_sink`, if given, receives every SVD input matrix
    (copies) in call order: Ma then Mb of each step. `trace`, if given, receives the per-step
    checkpoint scalars: "maxabs" (m_n) and "top4_sa" (the 4 largest singular values of Ma).
    `truncated`, if given, is an svd(m, k) computing the k = min(d², χ) leading triplets
    (the rank rule then counts among those)."""
    t = initial_tensor(beta)
    lnz = 0.0
    ranks = []
    for n in range(steps):
        d = t.shape[0]
        m = np.max(np.abs(t))
        t = t / m
        lnz += math.log(m) / 2.0 ** n
        ma = t.transpose(2, 1, 0, 3).reshape(d * d, d * d)
        mb = t.transpose(3, 2, 1, 0).reshape(d * d, d * d)
        if svd_sink is not None:
            svd_sink.append(np.ascontiguousarray(ma).copy())
            svd_sink.append(np.ascontiguousarray(mb).copy())
        if truncated is not None:
            ua, sa, vta = truncated(ma, min(d * d, chi))
            ub, sb, vtb = truncated(mb, min(d * d, chi))
        else:
            ua, sa, vta = svd(ma)
            ub, sb, vtb = svd(mb)
        if trace is not None:
            trace.setdefault("maxabs", []).append(float(m))
            trace.setdefault("top4_sa", []).append([float(v) for v in sa[:4]])
        k = min(d * d, chi, int(np.sum(sa > common.TOL)), int(np.sum(sb > common.TOL)))
        ranks.append(k)
        ra, rb = np.sqrt(sa[:k]), np.sqrt(sb[:k])
        s1 = (ua[:, :k] * ra).reshape(d, d, k)
        s3 = (vta[:k, :].T * ra).reshape(d, d, k)
        s2 = (ub[:, :k] * rb).reshape(d, d, k)
        s4 = (vtb[:k, :].T * rb).reshape(d, d, k)
        # Pairwise order of docs/trg.md §2.6: X[w,r,b,u], Y[b,l,w,d], then sum over w, b.
        x = np.tensordot(s1, s2, axes=([1], [0]))            # [w, r, b, u]
        y = np.tensordot(s3, s4, axes=([1], [0]))            # [b, l, w, d]
        t = np.tensordot(x, y, axes=([0, 2], [2, 0]))        # [r, u, l, d]
    lnz += math.log(np.einsum("ijij->", t)) / 2.0 ** steps
    return lnz, ranks


def cmd_trg(a) -> None:
    load = common.loadavg()
    sink: list = []
    lnz, ranks = trg_forward(a.beta, a.chi, a.steps, svd_sink=sink)
    if a.dump_svd_inputs:
        os.makedirs(a.dump_svd_inputs, exist_ok=True)
        big = [m for m in sink if m.shape == (a.chi * a.chi, a.chi * a.chi)]
        for i, mat in enumerate(big):
            np.save(os.path.join(a.dump_svd_inputs, f"svd_{i:02d}.npy"), mat)
        print(f"trg_numpy: dumped {len(big)} {a.chi * a.chi}x{a.chi * a.chi} SVD inputs to "
              f"{a.dump_svd_inputs}", file=sys.stderr)
    trunc = None if a.svd == "full" else truncating(a.svd)
    first, steady, res = common.time_calls(
        lambda: trg_forward(a.beta, a.chi, a.steps, truncated=trunc), a.repeat)
    extra = {} if a.svd == "full" else {"svd": a.svd}
    common.emit(common.record(
        "numpy", "trg_value", first, steady, load, beta=a.beta, chi=a.chi, steps=a.steps,
        lnZ_per_site=res[0], ranks=ranks, order="pairwise", versions={"numpy": np.__version__},
        **extra))


def cmd_checkpoints(a) -> None:
    """The per-step checkpoint scalars of one forward (the layout of
    tests/data/trg_beta0.4_checkpoints.json), or with --check FILE their deviations from FILE.
    Singular values are compared relative to the step's largest one (the smallest of the four
    can be rounding noise, ~1e-17); m_n and lnZ/N relative to themselves. From step 14 on
    (β = 0.4, χ = 16) the second and third singular values of Ma are nearly degenerate and the
    χ cuts before them keep different members of near-degenerate multiplets on different LAPACK
    builds, so those singular values move by up to ~1e-4 while m_n and lnZ/N do not: they are
    judged only through step --sv-steps (default 13) and printed for every step."""
    trace: dict = {}
    lnz, ranks = trg_forward(a.beta, a.chi, a.steps, trace=trace)
    if not a.check:
        print(json.dumps({"beta": a.beta, "chi": a.chi, "steps": a.steps, "lnZ_per_site": lnz,
                          "ranks": ranks, "maxabs_divided_out_per_step": trace["maxabs"],
                          "top4_singular_values_Ma_per_step": trace["top4_sa"]}, indent=1))
        return
    with open(a.check, encoding="utf-8") as f:
        ref = json.load(f)
    if (ref["beta"], ref["chi"], ref["steps"]) != (a.beta, a.chi, a.steps):
        sys.exit(f"trg_numpy checkpoints: {a.check} is for beta={ref['beta']}, chi={ref['chi']}, "
                 f"steps={ref['steps']}; pass the same --beta/--chi/--steps")
    dev_lnz = abs(lnz - ref["lnZ_per_site"]) / abs(ref["lnZ_per_site"])
    ref_m = ref["maxabs_divided_out_per_step"]
    dev_m = [abs(x - y) / abs(y) for x, y in zip(trace["maxabs"], ref_m)]
    dev_s = [max(abs(x - y) for x, y in zip(xs, ys)) / ys[0]
             for xs, ys in zip(trace["top4_sa"], ref["top4_singular_values_Ma_per_step"])]
    print(f"{a.check}: numpy {np.__version__} forward, beta = {a.beta}, chi = {a.chi}, "
          f"{a.steps} steps (BLAS: {common.blas_summary(common.blas_info())})")
    print(f"  ranks                       {'equal' if ranks == ref['ranks'] else 'DIFFERENT'}")
    print(f"  lnZ_per_site                relative deviation {dev_lnz:.2e} ({lnz!r})")
    for name, devs in (("maxabs_divided_out", dev_m), ("top4_singular_values_Ma", dev_s)):
        worst = max(range(len(devs)), key=devs.__getitem__)
        print(f"  {name:<27} max relative deviation {devs[worst]:.2e} (step {worst + 1}); "
              f"per step: {' '.join(f'{d:.0e}' for d in devs)}")
    bad = (ranks != ref["ranks"] or len(dev_m) != len(ref_m)
           or max([dev_lnz] + dev_m + dev_s[:a.sv_steps]) > a.tol)
    print(f"  judged: ranks, lnZ/N, m_n of every step, singular values of steps 1-{a.sv_steps}")
    print(f"  tolerance {a.tol:g}: {'FAIL' if bad else 'ok'}")
    sys.exit(1 if bad else 0)


def svd_floor(mats: list) -> float:
    acc = 0.0
    for mat in mats:
        u, s, vt = np.linalg.svd(mat, full_matrices=False)
        acc += s[0]
    return acc


def cmd_floor(a) -> None:
    names = sorted(f for f in os.listdir(a.dir) if f.endswith(".npy"))
    mats = [np.load(os.path.join(a.dir, f)) for f in names]
    if not mats:
        sys.exit(f"trg_numpy floor: no .npy files in {a.dir}")
    load = common.loadavg()
    first, steady, _ = common.time_calls(lambda: svd_floor(mats), a.repeat)
    common.emit(common.record(
        "numpy", f"svd_floor_{len(mats)}", first, steady, load, count=len(mats),
        shape=list(mats[0].shape), source=a.dir, versions={"numpy": np.__version__}))


def cmd_svd(a) -> None:
    if a.matrix:
        m = np.load(a.matrix)
    else:
        m = np.random.default_rng(42).uniform(-1.0, 1.0, size=(a.n, a.n))
    for what, fn in (("svd", lambda: np.linalg.svd(m, full_matrices=False)),
                     ("svdvals", lambda: np.linalg.svd(m, compute_uv=False))):
        load = common.loadavg()
        first, steady, _ = common.time_calls(fn, a.repeat)
        common.emit(common.record("numpy", f"{what}_{m.shape[0]}", first, steady, load,
                                  shape=list(m.shape), matrix=a.matrix or "uniform(-1,1) seed 42",
                                  versions={"numpy": np.__version__}))


def numpy_simd() -> str:
    """numpy's SIMD level: the baseline it was built for and the extensions this CPU has
    that its dispatched loops (sin, cos, multiply, ...) may use."""
    try:
        from numpy._core import _multiarray_umath as m  # numpy >= 2
    except ImportError:
        from numpy.core import _multiarray_umath as m  # type: ignore[no-redef]
    have = [k for k in m.__cpu_dispatch__ if m.__cpu_features__.get(k)]
    return f"baseline {' '.join(m.__cpu_baseline__)}; dispatch {' '.join(have) or 'none'}"


def cmd_grad(a) -> None:
    """The gradient of Σ sin(x)·x² as a numpy user writes it: the closed form
    2x·sin x + x²·cos x, one ufunc at a time (each a pass over the data)."""
    x = np.load(a.x) if a.x else np.random.default_rng(0).uniform(-1.0, 1.0, size=a.n)

    def grad():
        return 2.0 * x * np.sin(x) + x * x * np.cos(x)

    load = common.loadavg()
    first, steady, res = common.time_calls(grad, a.repeat)
    common.emit(common.record("numpy", f"grad_sin_x2_{x.shape[0]}", first, steady, load,
                              n=x.shape[0], simd=numpy_simd(),
                              versions={"numpy": np.__version__}))


def cmd_split(a) -> None:
    """Where numpy's forward spends its time, alternated in one process and measured in CPU
    time (time.process_time; single-threaded BLAS), which the machine's other load barely
    affects: the whole forward, the SVDs inside it (all, and the chi²×chi² ones), and the same
    big SVDs alone on the dumped matrices (the floor)."""
    names = sorted(f for f in os.listdir(a.dir) if f.endswith(".npy"))
    mats = [np.load(os.path.join(a.dir, f)) for f in names]
    big = (a.chi * a.chi, a.chi * a.chi)
    acc = {"all": 0.0, "big": 0.0}

    def timed_svd(m, *args, **kw):
        c = time.process_time()
        r = np.linalg.svd(m, *args, **kw)
        dt = time.process_time() - c
        acc["all"] += dt
        if m.shape == big:
            acc["big"] += dt
        return r

    load = common.loadavg()
    rows = {"trg": [], "svd_all_inside": [], "svd_big_inside": [], "floor": []}
    for i in range(a.repeat + 1):
        acc["all"] = acc["big"] = 0.0
        c = time.process_time()
        trg_forward(a.beta, a.chi, a.steps, svd=timed_svd)
        t_trg = time.process_time() - c
        c = time.process_time()
        svd_floor(mats)
        t_floor = time.process_time() - c
        if i == 0:
            continue  # warm-up
        rows["trg"].append(t_trg * 1e3)
        rows["svd_all_inside"].append(acc["all"] * 1e3)
        rows["svd_big_inside"].append(acc["big"] * 1e3)
        rows["floor"].append(t_floor * 1e3)
    common.emit(common.record(
        "numpy", "trg_cpu_split", None, rows["trg"], load, beta=a.beta, chi=a.chi,
        steps=a.steps, clock="process_time (CPU ms)",
        split={k: common.summarize(v) for k, v in rows.items()},
        versions={"numpy": np.__version__}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("trg", help="TRG forward (value only)")
    t.add_argument("--beta", type=float, default=0.4)
    t.add_argument("--chi", type=int, default=16)
    t.add_argument("--steps", type=int, default=20)
    t.add_argument("--repeat", type=int, default=10)
    t.add_argument("--svd", choices=["full", "randomized", "svds"], default="full",
                   help="full: np.linalg.svd, then the slice; randomized: randomized subspace "
                        "iteration of the chi leading triplets (sketch 2 chi, residual stop); "
                        "svds: scipy.sparse.linalg.svds (ARPACK)")
    t.add_argument("--dump-svd-inputs", metavar="DIR",
                   help="save the chi²×chi² SVD input matrices as DIR/svd_NN.npy (call order)")
    f = sub.add_parser("floor", help="time np.linalg.svd (gesdd) on every DIR/*.npy, in order")
    f.add_argument("--dir", required=True)
    f.add_argument("--repeat", type=int, default=10)
    s = sub.add_parser("svd", help="svd and svdvals of one n×n matrix")
    s.add_argument("--n", type=int, default=256)
    s.add_argument("--matrix", help=".npy file (default: uniform(-1,1), seed 42)")
    s.add_argument("--repeat", type=int, default=30)
    g = sub.add_parser("grad", help="the gradient of sum(sin(x) x^2) as a ufunc chain")
    g.add_argument("--n", type=int, default=1000)
    g.add_argument("--x", help=".npy input vector (default: uniform(-1,1), seed 0)")
    g.add_argument("--repeat", type=int, default=2000)
    sp = sub.add_parser("split", help="CPU-time split of the forward: SVDs inside vs the rest "
                                      "vs the floor on DIR/*.npy, alternated in one process")
    sp.add_argument("--dir", required=True)
    sp.add_argument("--beta", type=float, default=0.4)
    sp.add_argument("--chi", type=int, default=16)
    sp.add_argument("--steps", type=int, default=20)
    sp.add_argument("--repeat", type=int, default=10)
    c = sub.add_parser("checkpoints", help="per-step checkpoint scalars (m_n, top-4 singular "
                                           "values of Ma, ranks, lnZ/N) as JSON, or --check FILE")
    c.add_argument("--beta", type=float, default=0.4)
    c.add_argument("--chi", type=int, default=16)
    c.add_argument("--steps", type=int, default=20)
    c.add_argument("--check", metavar="FILE",
                   help="compare with FILE (e.g. tests/data/trg_beta0.4_checkpoints.json)")
    c.add_argument("--tol", type=float, default=1e-10,
                   help="largest relative deviation --check accepts (default 1e-10)")
    c.add_argument("--sv-steps", type=int, default=13,
                   help="--check judges the singular values of steps 1..N only (default 13)")
    a = ap.parse_args()
    {"trg": cmd_trg, "floor": cmd_floor, "svd": cmd_svd, "split": cmd_split,
     "checkpoints": cmd_checkpoints, "grad": cmd_grad}[a.cmd](a)


if __name__ == "__main__":
    main()
