"""The ops of tessel's op table, as functions on traced Tensors (numpy-like signatures).

Use them inside a function given to :func:`tessel.trace`. There is one function per op
of the op table (``tessel.op_table()``, ``tessel ops`` on the command line), spelled as
the op (``reduce_sum``, ``dot_general``, ``svd_topk``, ...), plus numpy spellings built
from them (``sum``, ``max``, ``where``, ``matmul``, ``broadcast_to``, ``concatenate``,
``zeros``, ...). All tensors are float64 with static shapes; axes may be negative.

Broadcasting follows numpy: shapes aligned at the right, an extent 1 (or a missing one)
stretches; it is recorded as ``broadcast_in_dim`` ops, visible in the IR. Incompatible
shapes raise :class:`tessel.ShapeError` naming the op and both shapes. Numbers and arrays
given where a Tensor is expected become constants. numpy's own functions and ufuncs on a
Tensor (``np.sin(t)``, ``np.sum(t, axis=0)``, ``np.einsum``) record the same ops, or raise
a TypeError naming the :mod:`tessel.ops` function to use.

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
    "svd_topk_complement", "eigh", "qr", "triangular_solve", "sylvester_solve", "stop_gradient", "call", "scan",
    # numpy spellings and compositions
    "negative", "subtract", "multiply", "divide", "sum", "max", "where", "broadcast_to",
    "matmul", "concatenate", "full", "zeros", "ones", "cosh", "sinh", "square",
    "min", "mean", "prod", "logsumexp", "eye", "trace", "diag", "power",
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
    # The innermost trace being built (a function's or a loop body's, inside which the
    # tensors of the traces around it are captured); else the tensors' own.
    if _active():
        return _active()[-1]
    for x in xs:
        if isinstance(x, Tensor):
            return x._trace
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


def _caller_loc() -> str:
    """"file.py:LINE in FUNC" of the first frame outside the tessel package (as the ops'
    locations the C++ tracer records)."""
    import os
    import sys
    pkg = os.path.dirname(os.path.abspath(__file__))
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(pkg):
        f = f.f_back
    if f is None:
        return ""
    return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno} in {f.f_code.co_name}"


def _broadcast_shape(what: str, *shapes: Sequence[int]) -> tuple[int, ...]:
    """numpy's broadcast of ``shapes``: aligned at the right, each extent equal or 1."""
    n = builtins.max((len(s) for s in shapes), default=0)
    out = []
    for i in range(n):
        ext = {s[i - (n - len(s))] for s in shapes if i >= n - len(s)} - {1}
        if len(ext) > 1:
            shown = " and ".join("f64[" + ",".join(str(d) for d in s) + "]" for s in shapes)
            raise _tessel.ShapeError(
                f"{what}: shapes {shown} cannot be broadcast together (numpy's rule: aligned at "
                f"the right, each pair of extents equal or one of them 1) (at {_caller_loc()})")
        out.append(ext.pop() if ext else 1)
    return tuple(out)


def _broadcast(t: Tensor, shape: Sequence[int]) -> Tensor:
    """t broadcast to ``shape`` (numpy's rule); rank 0 is left to the op (it broadcasts)."""
    if tuple(t.shape) == tuple(shape) or t.ndim == 0:
        return t
    return broadcast_in_dim(t, shape, list(range(len(shape) - t.ndim, len(shape))))


def _same_shape(a: TensorLike, b: TensorLike, what: str = "operands") -> tuple[Tensor, Tensor]:
    """Both as Tensors of one trace, broadcast to one shape by numpy's rule."""
    tr = _trace_of(a, b)
    ta, tb = _tensor(a, tr), _tensor(b, tr)
    shape = _broadcast_shape(what, ta.shape, tb.shape)
    ta, tb = _broadcast(ta, shape), _broadcast(tb, shape)
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
    """a + b (numpy broadcasting). Op ``add``."""
    ta, tb = _same_shape(a, b, "add")
    return _op1("add", [ta, tb])


def sub(a: TensorLike, b: TensorLike) -> Tensor:
    """a − b (numpy broadcasting). Op ``sub``."""
    ta, tb = _same_shape(a, b, "sub")
    return _op1("sub", [ta, tb])


def mul(a: TensorLike, b: TensorLike) -> Tensor:
    """a · b elementwise (numpy broadcasting). Op ``mul``."""
    ta, tb = _same_shape(a, b, "mul")
    return _op1("mul", [ta, tb])


def div(a: TensorLike, b: TensorLike) -> Tensor:
    """a / b (IEEE: ±inf or NaN where b = 0; numpy broadcasting). Op ``div``."""
    ta, tb = _same_shape(a, b, "div")
    return _op1("div", [ta, tb])


subtract, multiply, divide = sub, mul, div


def square(x: Tensor) -> Tensor:
    """x · x."""
    return mul(x, x)


def maximum(a: TensorLike, b: TensorLike) -> Tensor:
    """max(a, b) elementwise; NaN if either is NaN; a tie splits the cotangent equally.
    Op ``maximum``."""
    ta, tb = _same_shape(a, b, "maximum")
    return _op1("maximum", [ta, tb])


def compare(a: TensorLike, b: TensorLike, direction: str) -> Tensor:
    """1.0 where ``a direction b`` holds, else 0.0; direction EQ, NE, LT, LE, GT or GE.
    Op ``compare`` (no derivative flows through it)."""
    ta, tb = _same_shape(a, b, "compare")
    return _op1("compare", [ta, tb], direction=direction)


def select(pred: TensorLike, a: TensorLike, b: TensorLike) -> Tensor:
    """a where pred ≠ 0, else b (numpy broadcasting of the three). An exact 0
    cotangent goes to the branch not taken. Op ``select``."""
    tr = _trace_of(pred, a, b)
    ts = [_tensor(x, tr) for x in (pred, a, b)]
    shape = _broadcast_shape("select", *(t.shape for t in ts))
    ts = [_broadcast(t, shape) for t in ts]
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


def _keep(a: Tensor, r: Tensor, axes: list[int], keepdims: bool) -> Tensor:
    """numpy's keepdims: the reduced axes back as extents 1."""
    if not keepdims:
        return r
    return reshape(r, [1 if d in axes else n for d, n in enumerate(a.shape)])


def sum(a: TensorLike, axis: Axes = None, keepdims: bool = False) -> Tensor:
    """Sum over ``axis`` (an int, a sequence, or None = all: a scalar f64[])."""
    a = _tensor(a, _trace_of(a))
    axes = _axes(a, axis)
    return _keep(a, reduce_sum(a, axes), axes, keepdims)


def max(a: TensorLike, axis: Axes = None, keepdims: bool = False) -> Tensor:
    """Maximum over ``axis`` (an int, a sequence, or None = all: a scalar f64[])."""
    a = _tensor(a, _trace_of(a))
    axes = _axes(a, axis)
    return _keep(a, reduce_max(a, axes), axes, keepdims)


def min(a: TensorLike, axis: Axes = None, keepdims: bool = False) -> Tensor:
    """Minimum over ``axis``: −max(−a) (NaN if any is NaN; ties split the cotangent)."""
    return neg(max(neg(_tensor(a, _trace_of(a))), axis, keepdims))


def mean(a: TensorLike, axis: Axes = None, keepdims: bool = False) -> Tensor:
    """Mean over ``axis``: the sum divided by the number of elements reduced."""
    a = _tensor(a, _trace_of(a))
    n = math.prod(a.shape[d] for d in _axes(a, axis))
    return sum(a, axis, keepdims) / float(n)


def prod(a: TensorLike, axis: Axes = None, keepdims: bool = False) -> Tensor:
    """Product over ``axis``, exact (multiplications of halves, ⌈log₂ n⌉ levels per axis;
    no log/exp, so zeros and signs are right and the derivative is the product of the
    others). An empty product is 1."""
    a = _tensor(a, _trace_of(a))
    axes = _axes(a, axis)
    r = a
    for d in sorted(axes, reverse=True):
        while r.shape[d] > 1:
            n = r.shape[d]
            half = n // 2
            lo = [0] * r.ndim
            hi = list(r.shape)
            hi[d] = half
            first = slice(r, lo, hi)
            lo2 = [0] * r.ndim
            lo2[d] = half
            hi2 = list(r.shape)
            hi2[d] = 2 * half
            r2 = mul(first, slice(r, lo2, hi2))
            if n % 2:
                lo3 = [0] * r.ndim
                lo3[d] = n - 1
                last = slice(r, lo3, list(r.shape))
                r2 = concatenate([r2, last], d) if half > 1 else mul(r2, last)
            r = r2
        if r.shape[d] == 0:
            shape = list(r.shape)
            shape[d] = 1
            r = full(shape, 1.0)
    keep_shape = [1 if d in axes else n for d, n in enumerate(a.shape)]
    r = reshape(r, keep_shape) if list(r.shape) != keep_shape else r
    return r if keepdims else reshape(r, [n for d, n in enumerate(a.shape) if d not in axes])


def logsumexp(a: TensorLike, axis: Axes = None, keepdims: bool = False) -> Tensor:
    """ln Σ e^a over ``axis``, stable: m + ln Σ e^(a − m) with m = max a held constant
    (stop_gradient; the result and its derivative, softmax(a), do not depend on m). A
    slice of all −inf gives −inf."""
    a = _tensor(a, _trace_of(a))
    axes = _axes(a, axis)
    m = stop_gradient(max(a, axes, keepdims=True))
    # An all −inf slice: shift by 0 instead of −inf (e^(−inf − 0) = 0, ln 0 = −inf).
    m = where(compare(m, -math.inf, "EQ"), 0.0, m)
    r = log(sum(exp(a - m), axes, keepdims=True)) + m
    return _keep(a, reshape(r, [n for d, n in enumerate(a.shape) if d not in axes]), axes, keepdims)


def eye(n: int, m: Optional[int] = None, k: int = 0) -> Tensor:
    """f64[n, m] with ones on diagonal k (numpy.eye), a constant."""
    return constant(np.eye(int(n), None if m is None else int(m), int(k)))


def trace(a: Tensor, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
    """Σ_i a[..., i, i + offset, ...] over axes axis1, axis2 (numpy.trace): the sum of
    a times an identity mask, so its derivative is the mask."""
    ax1, ax2 = _axes(a, [axis1, axis2])
    if ax1 == ax2:
        raise Error(f"trace: axis1 and axis2 are both {ax1}")
    mask = eye(a.shape[ax1], a.shape[ax2], offset)
    dims = [ax1, ax2] if ax1 < ax2 else [ax2, ax1]
    if ax1 > ax2:
        mask = transpose(mask)
    return reduce_sum(a * broadcast_in_dim(mask, a.shape, dims), dims)


def diag(v: Tensor, k: int = 0) -> Tensor:
    """numpy.diag: a 1-d v gives the square matrix with v on diagonal k; a 2-d v gives its
    diagonal k (as trace's mask, summed over the columns)."""
    if v.ndim == 1:
        n = v.shape[0] + builtins.abs(int(k))
        mask = eye(n, n, int(k))
        if k >= 0:
            vv = pad(v, [0], [int(k)])
            return broadcast_in_dim(vv, [n, n], [0]) * mask
        vv = pad(v, [0], [-int(k)])  # entry (i, i + k) is v[i + k]: indexed by the column
        return broadcast_in_dim(vv, [n, n], [1]) * mask
    if v.ndim == 2:
        rows, cols = v.shape
        mask = eye(rows, cols, int(k))
        d = reduce_sum(v * mask, [1])  # row i holds v[i, i + k]
        length = builtins.max(0, builtins.min(rows, cols - int(k)) if k >= 0 else builtins.min(rows + int(k), cols))
        start = 0 if k >= 0 else -int(k)
        return slice(d, [start], [start + length])
    raise Error(f"diag: expects a 1-d or 2-d tensor, got shape {v.shape}")


def power(x: TensorLike, y: TensorLike) -> Tensor:
    """x ** y elementwise (numpy broadcasting). An integer y in [0, 64] is products of x
    (exact, any sign of x); y = 0.5 is sqrt(x); y = −1 is 1/x; otherwise exp(y·ln x): NaN
    for x < 0 as numpy gives, with the derivatives y·x^(y−1) and x^y·ln x."""
    tr = _trace_of(x, y)
    if isinstance(y, (int, np.integer)) and not isinstance(y, bool) and 0 <= int(y) <= 64:
        t = _tensor(x, tr)
        n = int(y)
        if n == 0:
            return full(t.shape, 1.0) if t.ndim else constant(1.0)
        result, base = None, t
        while n:
            if n & 1:
                result = base if result is None else mul(result, base)
            n >>= 1
            if n:
                base = mul(base, base)
        return result
    if isinstance(y, (float, np.floating)) and float(y) == 0.5:
        return sqrt(_tensor(x, tr))
    if isinstance(y, (int, float, np.number)) and not isinstance(y, bool) and float(y) == -1.0:
        return div(1.0, _tensor(x, tr))
    tx, ty = _same_shape(x, y, "power")
    return exp(mul(ty, log(tx)))


def _tensor_pow(self: Tensor, exponent: Any) -> Any:
    """x ** y; see :func:`power`."""
    if not _is_operand(exponent):
        return NotImplemented
    return power(self, exponent)


def _tensor_rpow(self: Tensor, base: Any) -> Any:
    """b ** x; see :func:`power`."""
    if not _is_operand(base):
        return NotImplemented
    return power(base, self)


def _is_operand(x: Any) -> bool:
    """A Tensor, a real number or an array: what an operator takes."""
    return isinstance(x, (Tensor, int, float, np.number, np.ndarray, list, tuple)) and not isinstance(x, bool)


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
    """Matrix product as ``a @ b``, numpy's rule for matrices and vectors: a [m,k] or [k]
    against b [k,n] or [k] (a's last axis with b's first); results [m,n], [n], [m] or [].
    Batches: use ``einsum`` or ``dot_general``."""
    tr, (ta, tb) = _operands([a, b])
    if ta.ndim not in (1, 2) or tb.ndim not in (1, 2):
        raise Error(f"matmul: expected matrices or vectors, got shapes {ta.shape} and "
                    f"{tb.shape} (use einsum or dot_general for batches)")
    return dot_general(ta, tb, lhs_contract=[ta.ndim - 1], rhs_contract=[0])


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


def eigh(a: Tensor, eps: float = 1e-12, uplo: Optional[str] = None) -> tuple[Tensor, Tensor]:
    """Symmetric eigendecomposition S = V·diag(w)·Vᵀ of a [n,n]: returns w [n] ascending and
    V [n,n] whose columns are orthonormal eigenvectors (numpy.linalg.eigh's order and
    layout; the signs of the columns are LAPACK dsyevd's). ``uplo=None`` decomposes the
    symmetric part S = (a + aᵀ)/2 (JAX's default), so the gradient is symmetric;
    ``uplo="L"`` or ``"U"`` reads that triangle only, as numpy does (np.linalg.eigh on a
    traced Tensor uses "L"). Op ``eigh``; an operand that is not square is an error
    naming its shape.

    The reverse rule (passes/VjpEigh.cpp; Giles 2008, §3.1) broadens 1/(w_j − w_i) to
    x/(x² + (eps·max|w|)²) and treats gaps within dsyevd's rounding (8·n·2⁻⁵³·max|w|) as
    ties. At a tie it is exact for a loss that reads a degenerate eigenspace only as a
    whole: symmetric functions of the eigenvalues, projectors on whole degenerate spaces
    (or on leading blocks that do not cut one). It is not for V·diag(g(w))·Vᵀ with
    g' ≠ 0 on a degenerate space, whose derivative needs g' between the tied
    eigenvectors; nor, for the same reason, is the second derivative at a tie (the
    gradient of Σ g(w_i) is g'(S)). Away from ties both orders are exact."""
    tr, ts = _operands([a])
    x = ts[0]
    if uplo is not None:
        if uplo not in ("L", "U") or x.ndim != 2 or x.shape[0] != x.shape[1]:
            raise Error(f"eigh: uplo must be 'L' or 'U' for a square matrix, got {uplo!r} and "
                        f"shape {tuple(x.shape)}")
        n = x.shape[0]
        rows, cols = iota([n, n], 0), iota([n, n], 1)
        keep = compare(rows, cols, "GE" if uplo == "L" else "LE")
        x = select(keep, x, transpose(x))
    w, v = tr.op("eigh", [x], {"eps": float(eps)})
    return w, v


def qr(a: Tensor) -> tuple[Tensor, Tensor]:
    """Thin QR a [m,n] = q [m,k]·r [k,n], k = min(m, n) (numpy.linalg.qr's "reduced"
    mode, also through ``np.linalg.qr`` on a traced Tensor): q with orthonormal columns, r
    upper triangular (trapezoidal when m < n), Householder (LAPACK dgeqrf, dorgqr; r's
    diagonal may be negative, as numpy's). The reverse rule covers tall, square and wide
    a (passes/VjpQr.cpp); it needs r nonsingular (a of full rank): a zero on r's diagonal
    is an error naming the op at run time. Op ``qr``."""
    tr, ts = _operands([a])
    q, r = tr.op("qr", ts, {})
    return q, r


def triangular_solve(a: Tensor, b: TensorLike, left_side: bool = True, lower: bool = True,
                     transpose_a: bool = False) -> Tensor:
    """x with op(a)·x = b (``left_side``; b [n,m]) or x·op(a) = b (b [m,n]), a [n,n]
    triangular, op(a) = aᵀ if ``transpose_a``; only the triangle ``lower`` names is read
    (XLA's TriangularSolve; scipy.linalg.solve_triangular(a, b, lower=, trans=) is
    ``left_side=True``). A zero on that diagonal is an error at run time; shapes that do
    not fit are a ShapeError naming both. Op ``triangular_solve``."""
    tr, ts = _operands([a, b])
    return tr.op("triangular_solve", ts, {"left_side": int(bool(left_side)), "lower": int(bool(lower)),
                                          "transpose_a": int(bool(transpose_a))})[0]


def sylvester_solve(a: Tensor, b: TensorLike, c: TensorLike) -> Tensor:
    """X[n,m] with S_a·X + X·S_b = c for a[n,n], b[m,m], c[n,m], S the symmetric parts
    (a + aᵀ)/2 and (b + bᵀ)/2: scipy.linalg.solve_sylvester(S_a, S_b, c), through the
    eigendecompositions of S_a and S_b (LAPACK dsyevd). Its derivatives are solves of the
    same equation, with no eigenvector of a or b in them: finite where a or b has (near)
    ties. Shapes that do not fit are a ShapeError naming all three; an eigenvalue of S_a
    meeting one of −S_b (a singular equation, to rounding) is an error at run time. Op
    ``sylvester_solve``."""
    tr, ts = _operands([a, b, c])
    return tr.op("sylvester_solve", ts, {})[0]


def svd_topk(a: Tensor, k: int, eps: float = 1e-12) -> tuple[Tensor, Tensor, Tensor]:
    """The k leading singular triplets U[m,k], s[k], Vt[k,n] of a[m,n], computed without
    a full SVD (randomized block Krylov to a residual stop, else dgesdd); derivatives of
    first and second order (jvp of grad, grad of grad) without a full SVD (Francuz,
    Schuch, Vanhecke, PRR 7, 013237 (2025)). Op ``svd_topk``."""
    tr, ts = _operands([a])
    u, s, vt = tr.op("svd_topk", ts, {"k": k, "eps": float(eps)})
    return u, s, vt


def svd_topk_complement(a: Tensor, u: Tensor, s: Tensor, vt: Tensor, u_bar: Tensor,
                        vt_bar: Tensor, eps: float = 1e-12) -> tuple[Tensor, Tensor]:
    """The coupling of svd_topk's kept triplets to the discarded subspace in its pullback:
    X[m,r] ⟂ U and Yt[r,n] (Y ⟂ V) solving X·S − A⊥·Y = (I − UUᵀ)·Ū and
    Y·S − A⊥ᵀ·X = (I − VVᵀ)·V̄, S = diag(s[:r]), A⊥ = A − U·diag(s)·Vt. Operands: a
    [m,n], its svd_topk u, s, vt, and cotangents u_bar [m,r], vt_bar [r,n]. Op
    ``svd_topk_complement`` (the VJP of svd_topk uses it); its JVP and VJP are solves
    with the same operator (passes/JvpLinalg.cpp, passes/VjpSvd.cpp)."""
    tr, ts = _operands([a, u, s, vt, u_bar, vt_bar])
    x, yt = tr.op("svd_topk_complement", ts, {"eps": float(eps)})
    return x, yt


# --- Tensor methods -------------------------------------------------------------------

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


def _tensor_mean(self: Tensor, axis: Axes = None, keepdims: bool = False) -> Tensor:
    """Mean over ``axis``; see :func:`mean`."""
    return mean(self, axis, keepdims)


def _tensor_min(self: Tensor, axis: Axes = None, keepdims: bool = False) -> Tensor:
    """Minimum over ``axis``; see :func:`min`."""
    return min(self, axis, keepdims)


def _tensor_prod(self: Tensor, axis: Axes = None, keepdims: bool = False) -> Tensor:
    """Product over ``axis``; see :func:`prod`."""
    return prod(self, axis, keepdims)


# numpy's protocols (python/tessel/_numpy.py) and indexing (python/tessel/_indexing.py),
# imported last: they use the functions above.
from ._indexing import _getitem, _strided  # noqa: E402,F401
from ._numpy import _array_function, _array_ufunc  # noqa: E402,F401


def call(f: Any, *args: Tensor) -> Any:
    """The ``call`` op: ``f`` staged as a function of the module (:func:`tessel.function`;
    traced once per input shapes) and called on ``args``. Returns its results in the
    structure ``f`` returns."""
    from ._staging import Function, function
    return (f if isinstance(f, Function) else function(f))(*args)


def scan(f: Any, init: Any, xs: Any = None, length: Optional[int] = None,
         reverse: bool = False) -> Any:
    """The ``scan`` op: :func:`tessel.scan` (JAX's ``lax.scan``)."""
    from ._staging import scan as staged_scan
    return staged_scan(f, init, xs, length, reverse)
