"""numpy peer: the TRG forward of ../../../shared/docs/trg.md (value only), the SVD floor, and
the 256×256 svd/svdvals micro-benchmarks.

    python trg_numpy.py trg   --beta 0.4 --chi 16 --steps 20 --repeat 10 [--dump-svd-inputs DIR]
    python trg_numpy.py floor --dir DIR --repeat 10       # the 32 gesdd calls on dumped matrices
    python trg_numpy.py svd   --n 256 --repeat 30 [--matrix M.npy]   # svd and svdvals

numpy.linalg.svd calls LAPACK dgesdd (divide and conquer) through the BLAS numpy loaded; that
library and its thread count are reported with every record (threadpoolctl).

The TRG is written from trg.md alone: normalise by max|T|, Ma = T.transpose(2,1,0,3), Mb =
T.transpose(3,2,1,0) reshaped to D²×D², full SVDs, D' = min(D², chi, #{s > 1e-12}) for both,
half-tensors U·sqrt(s) and V·sqrt(s), pairwise plaquette contraction, closure Σ T[i,j,i,j].
"""
from __future__ import annotations

import argparse
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


def trg_forward(beta: float, chi: int, steps: int, svd_sink: list | None = None,
                svd=np.linalg.svd) -> tuple[float, list[int]]:
    """lnZ/N and the rank schedule. `svd_sink`, if given, receives every SVD input matrix
    (copies) in call order: Ma then Mb of each step."""
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
        ua, sa, vta = svd(ma)
        ub, sb, vtb = svd(mb)
        k = min(d * d, chi, int(np.sum(sa > common.TOL)), int(np.sum(sb > common.TOL)))
        ranks.append(k)
        ra, rb = np.sqrt(sa[:k]), np.sqrt(sb[:k])
        s1 = (ua[:, :k] * ra).reshape(d, d, k)
        s3 = (vta[:k, :].T * ra).reshape(d, d, k)
        s2 = (ub[:, :k] * rb).reshape(d, d, k)
        s4 = (vtb[:k, :].T * rb).reshape(d, d, k)
        # Pairwise order of trg.md §2.6: X[w,r,b,u], Y[b,l,w,d], then sum over w, b.
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
    first, steady, res = common.time_calls(lambda: trg_forward(a.beta, a.chi, a.steps), a.repeat)
    common.emit(common.record(
        "numpy", "trg_value", first, steady, load, beta=a.beta, chi=a.chi, steps=a.steps,
        lnZ_per_site=res[0], ranks=ranks, order="pairwise", versions={"numpy": np.__version__}))


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
    t.add_argument("--dump-svd-inputs", metavar="DIR",
                   help="save the chi²×chi² SVD input matrices as DIR/svd_NN.npy (call order)")
    f = sub.add_parser("floor", help="time np.linalg.svd (gesdd) on every DIR/*.npy, in order")
    f.add_argument("--dir", required=True)
    f.add_argument("--repeat", type=int, default=10)
    s = sub.add_parser("svd", help="svd and svdvals of one n×n matrix")
    s.add_argument("--n", type=int, default=256)
    s.add_argument("--matrix", help=".npy file (default: uniform(-1,1), seed 42)")
    s.add_argument("--repeat", type=int, default=30)
    sp = sub.add_parser("split", help="CPU-time split of the forward: SVDs inside vs the rest "
                                      "vs the floor on DIR/*.npy, alternated in one process")
    sp.add_argument("--dir", required=True)
    sp.add_argument("--beta", type=float, default=0.4)
    sp.add_argument("--chi", type=int, default=16)
    sp.add_argument("--steps", type=int, default=20)
    sp.add_argument("--repeat", type=int, default=10)
    a = ap.parse_args()
    {"trg": cmd_trg, "floor": cmd_floor, "svd": cmd_svd, "split": cmd_split}[a.cmd](a)


if __name__ == "__main__":
    main()
