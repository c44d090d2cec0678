"""The ops of tessel's op table, as functions on traced Tensors (numpy-like signatures).

Use them inside a function given to :func:`tessel.trace`. There is one function per op
of the op table (``tessel.op_table()``, ``tessel ops`` on the command line), spelled as
the op (``reduce_sum``, ``dot_general``, ``svd_topk``, ...), plus numpy spellings built
from them (``sum``, ``max``, ``where``, ``matmul``, ``broadcast_to``, ``concatenate``,
``zeros``, ...). All tensors are float64 with static shapes; axes may be negative.

Broadcasting: a Python or numpy number (or a rank-0 Tensor) broadcasts to the other
operand's shape; any other shape difference raises :class:`tessel.ShapeError` naming the
op and both shapes (use :func:`broadcast_to` to broadcast explicitly). Arrays given where
a Tensor is expected become constants.

Each op records the Python line that made it as its location (``file.py:LINE in FUNC``),
shown in the printed IR and in every error about the op.
"""
from __future__ import annotations

import builtins
import math
import threading
from collections.abc import Sequence
from typing import Any, Optional, Union

import numpy as np

from . import _tessel
from ._tessel import Error, Tensor

__all__ = [
    # one per op of the op table
    "constant", "iota", "neg", "exp", "log", "sqrt", "sin", "cos", "tanh", "abs", "sign", "add",
    "sub",
    "mul", "div", "maximum", "compare", "select", "reduce_sum", "reduce_max", "broadcast_in_dim",
    "reshape", "transpose", "slice", "pad", "dot_general", "einsum", "svd", "svd_topk",
    "svd_topk_complement", "stop_gradient",
    # numpy spellings and compositions
    "negative", "subtract", "multiply", "divide", "sum", "max", "where", "broadcast_to",
    "matmul", "concatenate", "full", "zeros", "ones", "cosh", "sinh", "square",
]

TensorLike = Union[Tensor, float, int, np.ndarray]
Axes = Union[None, int, Sequence[int]]

# The traces being built by this thread (innermost last): ops without Tensor operands
# (constant, iota, full) append to the innermost one.
_local = threading.local()


def _active() -> list[Any]:
    if not hasattr(_local, "traces"):
        _local.traces = []
    return _local.traces


def _push(tr: Any) -> None:
    _active().append(tr)


def _pop() -> None:
    _active().pop()


def _trace_of(*xs: Any) -> Any:
    for x in xs:
        if isinstance(x, Tensor):
            return x._trace
    if _active():
        return _active()[-1]
    raise Error("tessel.ops: called outside tessel.trace (no Tensor operand and no trace "
                "being built)")


def _tensor(x: TensorLike, tr: Any) -> Tensor:
    """x as a Tensor of trace tr (numbers and arrays become constants)."""
    if isinstance(x, Tensor):
        return x
    return tr.constant(x)


def _operands(operands: Sequence[TensorLike]) -> tuple[Any, list[Tensor]]:
    """The trace and the operands as its Tensors (numbers and arrays become constants)."""
    tr = _trace_of(*operands)
    return tr, [_tensor(x, tr) for x in operands]


def _op1(name: str, operands: Sequence[TensorLike], **attrs: Any) -> Tensor:
    tr, ts = _operands(operands)
    (r,) = tr.op(name, ts, attrs)
    return r


def _shape(shape: Union[int, Sequence[int]]) -> list[int]:
    """A shape given as an int or a sequence of ints (as numpy accepts)."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, (bool, np.bool_)):
        return [int(shape)]
    return list(shape)


def _axes(a: Tensor, axis: Axes) -> list[int]:
    if axis is None:
        return list(range(a.ndim))
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    out = []
    for ax in axes:
        ax = int(ax)
        if not -a.ndim <= ax < a.ndim:
            raise Error(f"axis {ax} is out of range for a tensor of rank {a.ndim} (shape {a.shape})")
        out.append(ax % a.ndim)
    return out


def _same_shape(a: TensorLike, b: TensorLike) -> tuple[Tensor, Tensor]:
    """Both as Tensors of one trace; a rank-0 one broadcast to the other's shape."""
    tr = _trace_of(a, b)
    ta, tb = _tensor(a, tr), _tensor(b, tr)
    if ta.ndim == 0 and tb.ndim > 0:
        ta = broadcast_in_dim(ta, tb.shape, [])
    elif tb.ndim == 0 and ta.ndim > 0:
        tb = broadcast_in_dim(tb, ta.shape, [])
    return ta, tb


# --- Constants ------------------------------------------------------------------------

def constant(value: Any) -> Tensor:
    """A constant: ``value`` (number, nested list or array of real numbers) as float64,
    stored in the program. Op ``constant``."""
    return _trace_of().constant(value)


def iota(shape: Union[int, Sequence[int]], dim: int) -> Tensor:
    """f64[shape] whose element is its index along ``dim`` (negative: from the end).
    Op ``iota``."""
    shape = _shape(shape)
    if not -len(shape) <= int(dim) < len(shape):
        raise Error(f"iota: dim {dim} is out of range for shape {tuple(shape)}")
    return _op1("iota", [], shape=shape, dim=int(dim) % len(shape))


def full(shape: Union[int, Sequence[int]], value: float) -> Tensor:
    """f64[shape] filled with ``value`` (a constant)."""
    return constant(np.full(tuple(_shape(shape)), value))


def zeros(shape: Union[int, Sequence[int]]) -> Tensor:
    """f64[shape] of zeros."""
    return full(shape, 0.0)


def ones(shape: Union[int, Sequence[int]]) -> Tensor:
    """f64[shape] of ones."""
    return full(shape, 1.0)


# --- Elementwise ----------------------------------------------------------------------

def _unary(name: str, doc: str):
    def f(x: Tensor) -> Tensor:
        return _op1(name, [_tensor(x, _trace_of(x))])
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc + f" Same shape as x. Op ``{name}``."
    return f


neg = _unary("neg", "−x.")
exp = _unary("exp", "eˣ (SLEEF, ≤ 1 ulp from glibc).")
log = _unary("log", "ln x: NaN for x < 0, −inf at 0.")
sqrt = _unary("sqrt", "√x: NaN for x < 0.")
sin = _unary("sin", "sin x (radians).")
cos = _unary("cos", "cos x (radians).")
tanh = _unary("tanh", "tanh x (SLEEF, ≤ 1 ulp; ±1 for |x| ≥ 19.1); its derivative is 1 − tanh² x.")
abs = _unary("abs", "|x|; its derivative at 0 is 0.")
sign = _unary("sign", "−1, 0 or 1 by the sign of x (NaN stays NaN).")
stop_gradient = _unary("stop_gradient", "x, through which no cotangent flows (an AD barrier).")
negative = neg


def add(a: TensorLike, b: TensorLike) -> Tensor:
    """a + b (a rank-0 operand broadcasts). Op ``add``."""
    ta, tb = _same_shape(a, b)
    return _op1("add", [ta, tb])


def sub(a: TensorLike, b: TensorLike) -> Tensor:
    """a − b (a rank-0 operand broadcasts). Op ``sub``."""
    ta, tb = _same_shape(a, b)
    return _op1("sub", [ta, tb])


def mul(a: TensorLike, b: TensorLike) -> Tensor:
    """a · b elementwise (a rank-0 operand broadcasts). Op ``mul``."""
    ta, tb = _same_shape(a, b)
    return _op1("mul", [ta, tb])


def div(a: TensorLike, b: TensorLike) -> Tensor:
    """a / b (IEEE: ±inf or NaN where b = 0; a rank-0 operand broadcasts). Op ``div``."""
    ta, tb = _same_shape(a, b)
    return _op1("div", [ta, tb])


subtract, multiply, divide = sub, mul, div


def square(x: Tensor) -> Tensor:
    """x · x."""
    return mul(x, x)


def maximum(a: TensorLike, b: TensorLike) -> Tensor:
    """max(a, b) elementwise; NaN if either is NaN; a tie splits the cotangent equally.
    Op ``maximum``."""
    ta, tb = _same_shape(a, b)
    return _op1("maximum", [ta, tb])


def compare(a: TensorLike, b: TensorLike, direction: str) -> Tensor:
    """1.0 where ``a direction b`` holds, else 0.0; direction EQ, NE, LT, LE, GT or GE.
    Op ``compare`` (no derivative flows through it)."""
    ta, tb = _same_shape(a, b)
    return _op1("compare", [ta, tb], direction=direction)


def select(pred: TensorLike, a: TensorLike, b: TensorLike) -> Tensor:
    """a where pred ≠ 0, else b (all one shape; rank-0 operands broadcast). An exact 0
    cotangent goes to the branch not taken. Op ``select``."""
    tr = _trace_of(pred, a, b)
    ts = [_tensor(x, tr) for x in (pred, a, b)]
    shape = next((t.shape for t in ts if t.ndim > 0), ())
    ts = [broadcast_in_dim(t, shape, []) if t.ndim == 0 and shape else t for t in ts]
    return _op1("select", ts)


where = select


def cosh(x: Tensor) -> Tensor:
    """cosh x = (eˣ + e⁻ˣ)/2."""
    return (exp(x) + exp(-x)) * 0.5


def sinh(x: Tensor) -> Tensor:
    """sinh x = (eˣ − e⁻ˣ)/2."""
    return (exp(x) - exp(-x)) * 0.5


# --- Reductions -----------------------------------------------------------------------

def reduce_sum(a: Tensor, axes: Sequence[int]) -> Tensor:
    """Sum over ``axes`` (removed from the shape), in row-major order. Op ``reduce_sum``."""
    return _op1("reduce_sum", [a], axes=_axes(a, axes))


def reduce_max(a: Tensor, axes: Sequence[int]) -> Tensor:
    """Maximum over ``axes`` (removed); −inf over no elements, NaN if any is NaN; ties
    split the cotangent equally. Op ``reduce_max``."""
    return _op1("reduce_max", [a], axes=_axes(a, axes))


def sum(a: Tensor, axis: Axes = None) -> Tensor:
    """Sum over ``axis`` (an int, a sequence, or None = all: a scalar f64[])."""
    return reduce_sum(a, _axes(a, axis))


def max(a: Tensor, axis: Axes = None) -> Tensor:
    """Maximum over ``axis`` (an int, a sequence, or None = all: a scalar f64[])."""
    return reduce_max(a, _axes(a, axis))


# --- Shapes ---------------------------------------------------------------------------

def broadcast_in_dim(a: Tensor, shape: Sequence[int], dims: Sequence[int]) -> Tensor:
    """StableHLO broadcast_in_dim: operand dimension d becomes result dimension dims[d]
    (same extent, or 1 expanded); the other result dimensions repeat it. Op
    ``broadcast_in_dim``."""
    return _op1("broadcast_in_dim", [a], shape=list(shape), dims=list(dims))


def broadcast_to(a: TensorLike, shape: Union[int, Sequence[int]]) -> Tensor:
    """numpy broadcasting of ``a`` to ``shape`` (dimensions aligned at the right)."""
    t = _tensor(a, _trace_of(a))
    shape = _shape(shape)
    if t.ndim > len(shape):
        raise Error(f"broadcast_to: cannot broadcast shape {t.shape} to {tuple(shape)}")
    return broadcast_in_dim(t, shape, list(range(len(shape) - t.ndim, len(shape))))


def reshape(a: Tensor, shape: Union[int, Sequence[int]]) -> Tensor:
    """The same elements, row-major, in ``shape`` (one entry may be −1: inferred). Op
    ``reshape``."""
    shape = [shape] if isinstance(shape, (int, np.integer)) else [int(d) for d in shape]
    if shape.count(-1) > 1:
        raise Error(f"reshape: more than one -1 in {tuple(shape)}")
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        if known == 0 or a.size % known:
            raise Error(f"reshape: cannot infer -1 in {tuple(shape)} for {a.size} elements "
                        f"(shape {a.shape})")
        shape[shape.index(-1)] = a.size // known
    return _op1("reshape", [a], shape=shape)


def transpose(a: Tensor, perm: Optional[Sequence[int]] = None) -> Tensor:
    """Result dimension d is operand dimension perm[d] (default: reversed, as numpy).
    Op ``transpose``."""
    p = list(range(a.ndim))[::-1] if perm is None else _axes(a, perm)
    return _op1("transpose", [a], perm=p)


def slice(a: Tensor, start: Sequence[int], limit: Sequence[int]) -> Tensor:
    """The block start[d] ≤ i_d < limit[d] (unit stride). Op ``slice``."""
    return _op1("slice", [a], start=list(start), limit=list(limit))


def pad(a: Tensor, low: Sequence[int], high: Sequence[int]) -> Tensor:
    """Zero padding: low[d] zeros before and high[d] after dimension d. Op ``pad``."""
    return _op1("pad", [a], low=list(low), high=list(high))


def concatenate(parts: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Joins tensors along ``axis`` (equal in the other dimensions), as zero pads and
    adds: each result element is one operand element plus zeros."""
    parts = list(parts)
    if not parts:
        raise Error("concatenate: needs at least one tensor")
    ax = _axes(parts[0], axis)[0]
    for p in parts[1:]:
        if p.ndim != parts[0].ndim or any(d != e for k, (d, e) in enumerate(zip(p.shape, parts[0].shape))
                                          if k != ax):
            raise Error(f"concatenate: shapes {parts[0].shape} and {p.shape} differ outside axis {ax}")
    total = builtins.sum(p.shape[ax] for p in parts)
    out, offset = None, 0
    for p in parts:
        low = [0] * p.ndim
        high = [0] * p.ndim
        low[ax], high[ax] = offset, total - offset - p.shape[ax]
        offset += p.shape[ax]
        padded = pad(p, low, high)
        out = padded if out is None else add(out, padded)
    return out


# --- Contractions and factorizations --------------------------------------------------

def dot_general(a: Tensor, b: Tensor, *, lhs_contract: Sequence[int], rhs_contract: Sequence[int],
                lhs_batch: Sequence[int] = (), rhs_batch: Sequence[int] = ()) -> Tensor:
    """Batched contraction (StableHLO dot_general): sums a's lhs_contract[k] against b's
    rhs_contract[k], pairs lhs_batch[k] with rhs_batch[k]; result [batch..., a free...,
    b free...]. Op ``dot_general`` (cblas_dgemm at run time)."""
    return _op1("dot_general", [a, b], lhs_batch=list(lhs_batch), rhs_batch=list(rhs_batch),
                lhs_contract=list(lhs_contract), rhs_contract=list(rhs_contract))


def matmul(a: TensorLike, b: TensorLike) -> Tensor:
    """Matrix product of a [m,k] and b [k,n], as ``a @ b`` (two matrices only: use
    ``einsum`` or ``dot_general`` for batches and vectors)."""
    tr, (ta, tb) = _operands([a, b])
    if ta.ndim != 2 or tb.ndim != 2:
        raise Error(f"matmul: expected two matrices, got shapes {ta.shape} and {tb.shape} "
                    "(use einsum or dot_general for batches and vectors)")
    return dot_general(ta, tb, lhs_contract=[1], rhs_contract=[0])


def einsum(spec: str, *operands: Tensor) -> Tensor:
    """Sum over the labels not in the output of the product of the operands, e.g.
    ``einsum("war,abu,bgl,gwd->ruld", S1, S2, S3, S4)`` (explicit ``->``; a label repeated
    within one operand takes its diagonal). Op ``einsum``, lowered to dot_general by the
    ``order`` pass (chain, pairwise, greedy or optimal contraction path)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return _op1("einsum", list(operands), spec=spec)


def svd(a: Tensor, eps: float = 1e-12) -> tuple[Tensor, Tensor, Tensor]:
    """Thin SVD a[m,n] = U[m,k] · diag(s[k]) · Vt[k,n], k = min(m, n), s descending
    (LAPACK dgesdd). ``eps``: Lorentzian broadening of the reverse rule, relative to s₁
    (docs/trg.md §5; degenerate singular values keep a finite derivative). Op ``svd``."""
    tr, ts = _operands([a])
    u, s, vt = tr.op("svd", ts, {"eps": float(eps)})
    return u, s, vt


def svd_topk(a: Tensor, k: int, eps: float = 1e-12) -> tuple[Tensor, Tensor, Tensor]:
    """The k leading singular triplets U[m,k], s[k], Vt[k,n] of a[m,n], computed without
    a full SVD (randomized block Krylov to a residual stop, else dgesdd); first
    derivatives without a full SVD (Francuz, Schuch, Vanhecke, PRR 7, 013237 (2025)).
    Op ``svd_topk``."""
    tr, ts = _operands([a])
    u, s, vt = tr.op("svd_topk", ts, {"k": k, "eps": float(eps)})
    return u, s, vt


def svd_topk_complement(a: Tensor, u: Tensor, s: Tensor, vt: Tensor, u_bar: Tensor,
                        vt_bar: Tensor, eps: float = 1e-12) -> tuple[Tensor, Tensor]:
    """The coupling of svd_topk's kept triplets to the discarded subspace in its pullback:
    X[m,r] ⟂ U and Yt[r,n] (Y ⟂ V) solving X·S − A⊥·Y = (I − UUᵀ)·Ū and
    Y·S − A⊥ᵀ·X = (I − VVᵀ)·V̄, S = diag(s[:r]), A⊥ = A − U·diag(s)·Vt. Operands: a
    [m,n], its svd_topk u, s, vt, and cotangents u_bar [m,r], vt_bar [r,n]. Op
    ``svd_topk_complement`` (the VJP of svd_topk uses it)."""
    tr, ts = _operands([a, u, s, vt, u_bar, vt_bar])
    x, yt = tr.op("svd_topk_complement", ts, {"eps": float(eps)})
    return x, yt


# --- Tensor methods -------------------------------------------------------------------

def _getitem(a: Tensor, key: Any) -> Tensor:
    """Basic indexing: ints (drop the dimension), slices with step 1, and Ellipsis."""
    key = key if isinstance(key, tuple) else (key,)
    if builtins.sum(k is Ellipsis for k in key) > 1:
        raise Error("indexing: at most one Ellipsis")
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (builtins.slice(None),) * (a.ndim - len(key) + 1) + key[i + 1:]
    if len(key) > a.ndim:
        raise Error(f"indexing: {len(key)} indices for a tensor of rank {a.ndim} (shape {a.shape})")
    start, limit, keep = [], [], []
    for d, n in enumerate(a.shape):
        k = key[d] if d < len(key) else builtins.slice(None)
        if isinstance(k, builtins.slice):
            lo, hi, step = k.indices(n)
            if step != 1:
                raise Error(f"indexing: only unit steps are supported, got step {step} on axis {d}")
            start.append(lo)
            limit.append(builtins.max(lo, hi))
            keep.append(builtins.max(hi - lo, 0))
        elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            i = int(k)
            if not -n <= i < n:
                raise Error(f"indexing: index {i} is out of range for axis {d} of size {n}")
            i %= n
            start.append(i)
            limit.append(i + 1)
        else:
            raise Error(f"indexing: unsupported index {k!r} (ints, slices and ... only)")
    out = slice(a, start, limit)
    return reshape(out, keep) if list(out.shape) != keep else out


def _tensor_sum(self: Tensor, axis: Axes = None) -> Tensor:
    """Sum over ``axis`` (None: all); see :func:`sum`."""
    return sum(self, axis)


def _tensor_max(self: Tensor, axis: Axes = None) -> Tensor:
    """Maximum over ``axis`` (None: all); see :func:`max`."""
    return max(self, axis)


def _tensor_reshape(self: Tensor, *shape: Any) -> Tensor:
    """``t.reshape(2, 3)`` or ``t.reshape((2, 3))``; see :func:`reshape`."""
    return reshape(self, shape[0] if len(shape) == 1 else shape)


def _tensor_transpose(self: Tensor, *perm: Any) -> Tensor:
    """``t.transpose()`` (reversed), ``t.transpose(1, 0)`` or ``t.transpose((1, 0))``."""
    if not perm:
        return transpose(self)
    if len(perm) == 1 and not isinstance(perm[0], (int, np.integer)):
        return transpose(self, perm[0])
    return transpose(self, perm)


def _tensor_T(self: Tensor) -> Tensor:
    """The transpose with the axes reversed (numpy's ``.T``)."""
    return transpose(self)


def _tensor_exp(self: Tensor) -> Tensor:
    """eˣ; see :func:`exp`."""
    return exp(self)


def _tensor_log(self: Tensor) -> Tensor:
    """ln x; see :func:`log`."""
    return log(self)


def _tensor_sqrt(self: Tensor) -> Tensor:
    """√x; see :func:`sqrt`."""
    return sqrt(self)


def _tensor_sin(self: Tensor) -> Tensor:
    """sin x; see :func:`sin`."""
    return sin(self)


def _tensor_cos(self: Tensor) -> Tensor:
    """cos x; see :func:`cos`."""
    return cos(self)


def _tensor_tanh(self: Tensor) -> Tensor:
    """tanh x; see :func:`tanh`."""
    return tanh(self)


def _tensor_len(self: Tensor) -> int:
    """The first extent (as numpy); a scalar has none."""
    if self.ndim == 0:
        raise TypeError("len() of a rank-0 tessel Tensor")
    return self.shape[0]


def _tensor_iter(self: Tensor):
    """The slices t[0], t[1], ... along the first axis (as numpy)."""
    if self.ndim == 0:
        raise TypeError("iteration over a rank-0 tessel Tensor")
    return (_getitem(self, i) for i in range(self.shape[0]))


# Tensor's methods sum, max, reshape, transpose, T, exp, log, sqrt, sin, cos, indexing,
# len and iteration call the functions above (declared in python/src/tracing.cpp, so
# they have signatures in the type stubs).
