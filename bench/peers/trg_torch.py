"""PyTorch peer (CPU, eager autograd, float64): the TRG of docs/trg.md with a
custom torch.autograd.Function SVD implementing the Lorentzian-broadened reverse rule of
docs/trg.md §5 (ε = 1e-12, ε² in the denominator); svd/svdvals 256×256.

    python trg_torch.py trg --beta 0.4 --chi 16 --steps 20 --repeat 10 [--threads 1]
    python trg_torch.py svd --n 256 --repeat 30 [--matrix M.npy]

torch.set_num_threads(--threads) is called before anything runs (default 1). PyTorch is eager,
so the rank schedule is computed at run time exactly as docs/trg.md §2.4 says (count of singular
values > 1e-12), and there is no compile step: the first call is timed apart all the same.
A timed call returns Python floats (.item()), i.e. results in host memory.
"""
from __future__ import annotations

import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


class LorentzSVD(torch.autograd.Function):
    """Full SVD a = u·diag(s)·vh (torch.linalg.svd, LAPACK gesdd on CPU) with the reverse rule
    of docs/trg.md §5."""

    @staticmethod
    def forward(ctx, a):
        u, s, vh = torch.linalg.svd(a, full_matrices=False)
        ctx.save_for_backward(u, s, vh)
        return u, s, vh

    @staticmethod
    def backward(ctx, gu, gs, gvh):
        u, s, vh = ctx.saved_tensors
        if gu is None:
            gu = torch.zeros_like(u)
        if gs is None:
            gs = torch.zeros_like(s)
        if gvh is None:
            gvh = torch.zeros_like(vh)
        v, gv = vh.T, gvh.T
        eps2 = common.EPS * common.EPS
        # d_ij = s_j² − s_i² as (s_j − s_i)(s_j + s_i): exactly 0 on the diagonal and on ties.
        d = (s[None, :] - s[:, None]) * (s[None, :] + s[:, None])
        f = d / (d * d + eps2)
        splus = s / (s * s + eps2)
        j = f * (u.T @ gu)
        k = f * (v.T @ gv)
        inner = (j + j.T) * s[None, :] + s[:, None] * (k + k.T) + torch.diag(gs)
        ga = u @ inner @ vh
        gus = gu * splus[None, :]
        ga = ga + (gus - u @ (u.T @ gus)) @ vh
        gvs = gv * splus[None, :]
        ga = ga + u @ (gvs.T - (gvs.T @ v) @ vh)
        return ga


def lnz_fn(beta: torch.Tensor, chi: int, steps: int, ranks_out: list | None = None):
    c, s = torch.sqrt(torch.cosh(beta)), torch.sqrt(torch.sinh(beta))
    w = torch.stack([torch.stack([c, s]), torch.stack([c, -s])])
    t = torch.einsum("ai,aj,ak,al->ijkl", w, w, w, w)
    lnz = torch.zeros((), dtype=torch.float64)
    for n in range(steps):
        d = t.shape[0]
        m = torch.max(torch.abs(t)).detach()     # stop-gradient: same value and first derivative (docs/trg.md §2.1)
        t = t / m
        lnz = lnz + torch.log(m) / 2.0 ** n
        ma = t.permute(2, 1, 0, 3).reshape(d * d, d * d)
        mb = t.permute(3, 2, 1, 0).reshape(d * d, d * d)
        ua, sa, vha = LorentzSVD.apply(ma)
        ub, sb, vhb = LorentzSVD.apply(mb)
        k = min(d * d, chi, int((sa > common.TOL).sum()), int((sb > common.TOL).sum()))
        if ranks_out is not None:
            ranks_out.append(k)
        ra, rb = torch.sqrt(sa[:k]), torch.sqrt(sb[:k])
        s1 = (ua[:, :k] * ra).reshape(d, d, k)
        s3 = (vha[:k, :].T * ra).reshape(d, d, k)
        s2 = (ub[:, :k] * rb).reshape(d, d, k)
        s4 = (vhb[:k, :].T * rb).reshape(d, d, k)
        x = torch.tensordot(s1, s2, dims=([1], [0]))       # [w, r, b, u]
        y = torch.tensordot(s3, s4, dims=([1], [0]))       # [b, l, w, d]
        t = torch.tensordot(x, y, dims=([0, 2], [2, 0]))   # [r, u, l, d]
    return lnz + torch.log(torch.einsum("ijij->", t)) / 2.0 ** steps


def versions() -> dict:
    """torch's BLAS/LAPACK is MKL linked into libtorch (threadpoolctl does not list it); its
    thread count is torch.get_num_threads()."""
    import re
    cfg = torch.__config__.show()
    info = dict(re.findall(r"\b(BLAS_INFO|LAPACK_INFO)=([^,\s]+)", cfg))
    return {"torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "torch_blas": info.get("BLAS_INFO", "?"), "torch_lapack": info.get("LAPACK_INFO", "?"),
            "mkl_available": bool(torch.backends.mkl.is_available())}


def cmd_trg(a) -> None:
    ranks: list = []
    lnz_fn(torch.tensor(a.beta, dtype=torch.float64), a.chi, a.steps, ranks)

    def value():
        with torch.no_grad():
            return lnz_fn(torch.tensor(a.beta, dtype=torch.float64), a.chi, a.steps).item()

    def value_and_grad():
        b = torch.tensor(a.beta, dtype=torch.float64, requires_grad=True)
        v = lnz_fn(b, a.chi, a.steps)
        (g,) = torch.autograd.grad(v, b)
        return v.item(), g.item()

    jobs = [("trg_value", value)] + ([] if a.value_only else [("trg_value_and_grad", value_and_grad)])
    for workload, fn in jobs:
        load = common.loadavg()
        first, steady, res = common.time_calls(fn, a.repeat)
        extra = ({"lnZ_per_site": res} if workload == "trg_value"
                 else {"lnZ_per_site": res[0], "dlnZ_dbeta": res[1]})
        common.emit(common.record("torch", workload, first, steady, load, beta=a.beta, chi=a.chi,
                                  steps=a.steps, ranks=ranks, order="pairwise",
                                  first_includes="first eager run (no compile step)",
                                  versions=versions(), **extra))


def cmd_svd(a) -> None:
    if a.matrix:
        import numpy as np
        m = torch.from_numpy(np.load(a.matrix))
    else:
        g = torch.Generator().manual_seed(42)
        m = torch.rand((a.n, a.n), dtype=torch.float64, generator=g) * 2 - 1
    for what, fn in (("svd", lambda: torch.linalg.svd(m, full_matrices=False)),
                     ("svdvals", lambda: torch.linalg.svdvals(m))):
        load = common.loadavg()
        first, steady, _ = common.time_calls(fn, a.repeat)
        common.emit(common.record("torch", f"{what}_{m.shape[0]}", first, steady, load,
                                  shape=list(m.shape), versions=versions()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("trg")
    t.add_argument("--beta", type=float, default=0.4)
    t.add_argument("--chi", type=int, default=16)
    t.add_argument("--steps", type=int, default=20)
    t.add_argument("--repeat", type=int, default=10)
    t.add_argument("--value-only", action="store_true", help="skip value_and_grad")
    s = sub.add_parser("svd")
    s.add_argument("--n", type=int, default=256)
    s.add_argument("--matrix")
    s.add_argument("--repeat", type=int, default=30)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(a.threads)
    {"trg": cmd_trg, "svd": cmd_svd}[a.cmd](a)


if __name__ == "__main__":
    main()
