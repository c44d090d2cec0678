"""numpy's protocols for traced Tensors: ``__array_ufunc__`` and ``__array_function__``.

np.sin(t), t * np.float64(2), np.sum(t, axis=0), np.einsum("ij->", t): numpy hands the
call to the Tensor (whose methods, declared in python/src/tracing.cpp, call these), which
records the same ops as :mod:`tessel.ops`; what has no op is a TypeError naming what to
write instead (never a silent conversion to an array).
"""
from __future__ import annotations

from typing import Any

from .ops import (_tensor, _trace_of, abs, add, compare, concatenate, cos, cosh, diag, div, eigh, einsum, qr,
                  exp, log, matmul, max, maximum, mean, min, mul, neg, power, prod, reshape, select,
                  sin, sinh, sqrt, square, sub, sum, tanh, trace, transpose, broadcast_to, sign)

_UFUNCS = {
    "add": lambda a, b: add(a, b), "subtract": lambda a, b: sub(a, b),
    "multiply": lambda a, b: mul(a, b), "true_divide": lambda a, b: div(a, b),
    "divide": lambda a, b: div(a, b), "negative": lambda a: neg(_tensor(a, _trace_of(a))),
    "positive": lambda a: _tensor(a, _trace_of(a)), "power": lambda a, b: power(a, b),
    "square": lambda a: square(_tensor(a, _trace_of(a))), "maximum": lambda a, b: maximum(a, b),
    "minimum": lambda a, b: neg(maximum(neg(_tensor(a, _trace_of(a, b))), neg(_tensor(b, _trace_of(a, b))))),
    "exp": lambda a: exp(a), "log": lambda a: log(a), "sqrt": lambda a: sqrt(a),
    "sin": lambda a: sin(a), "cos": lambda a: cos(a), "tanh": lambda a: tanh(a),
    "absolute": lambda a: abs(a), "fabs": lambda a: abs(a), "sign": lambda a: sign(a),
    "cosh": lambda a: cosh(a), "sinh": lambda a: sinh(a), "matmul": lambda a, b: matmul(a, b),
    "equal": lambda a, b: compare(a, b, "EQ"), "not_equal": lambda a, b: compare(a, b, "NE"),
    "less": lambda a, b: compare(a, b, "LT"), "less_equal": lambda a, b: compare(a, b, "LE"),
    "greater": lambda a, b: compare(a, b, "GT"), "greater_equal": lambda a, b: compare(a, b, "GE"),
}

_REDUCE_UFUNCS = {"add": sum, "maximum": max, "minimum": min, "multiply": prod}


def _array_ufunc(self: Tensor, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    name = ufunc.__name__
    if kwargs.get("out") is not None:
        raise TypeError(f"numpy.{name} on a traced tessel Tensor: out= is not supported "
                        "(a traced value is immutable; use the result)")
    kwargs.pop("out", None)
    if method == "reduce" and name in _REDUCE_UFUNCS:
        axis = kwargs.pop("axis", 0)
        keepdims = kwargs.pop("keepdims", False)
        if kwargs:
            raise TypeError(f"numpy.{name}.reduce on a traced tessel Tensor: unsupported "
                            f"arguments {sorted(kwargs)}")
        return _REDUCE_UFUNCS[name](inputs[0], axis, keepdims)
    if method != "__call__" or name not in _UFUNCS or kwargs:
        raise TypeError(f"numpy.{name}{'' if method == '__call__' else '.' + method} is not "
                        "traced for tessel Tensors; write it with tessel.ops (e.g. tessel.ops.exp, "
                        "tessel.ops.sum, tessel.ops.where)")
    return _UFUNCS[name](*inputs)


def _kw(kwargs: dict, allowed: tuple[str, ...], name: str) -> dict:
    bad = [k for k, v in kwargs.items() if k not in allowed and v is not None]
    if bad:
        raise TypeError(f"numpy.{name} on a traced tessel Tensor: unsupported arguments {bad}")
    return {k: v for k, v in kwargs.items() if k in allowed}


_FUNCTIONS = {
    "sum": lambda a, axis=None, keepdims=False, **k: sum(a, axis, keepdims),
    "max": lambda a, axis=None, keepdims=False, **k: max(a, axis, keepdims),
    "amax": lambda a, axis=None, keepdims=False, **k: max(a, axis, keepdims),
    "min": lambda a, axis=None, keepdims=False, **k: min(a, axis, keepdims),
    "amin": lambda a, axis=None, keepdims=False, **k: min(a, axis, keepdims),
    "mean": lambda a, axis=None, keepdims=False, **k: mean(a, axis, keepdims),
    "prod": lambda a, axis=None, keepdims=False, **k: prod(a, axis, keepdims),
    "reshape": lambda a, newshape=None, shape=None, **k: reshape(a, shape if shape is not None else newshape),
    "transpose": lambda a, axes=None: transpose(a, axes),
    "matmul": lambda a, b: matmul(a, b), "dot": lambda a, b: matmul(a, b),
    "einsum": lambda spec, *ops, **k: einsum(spec, *ops),
    "concatenate": lambda parts, axis=0, **k: concatenate(parts, axis),
    "where": lambda c, a, b: select(c, a, b), "trace": lambda a, offset=0, axis1=0, axis2=1, **k: trace(a, offset, axis1, axis2),
    "diag": lambda v, k=0: diag(v, k), "broadcast_to": lambda a, shape, **k: broadcast_to(a, shape),
    "square": lambda a, **k: square(a), "exp": lambda a, **k: exp(a), "log": lambda a, **k: log(a),
    "sqrt": lambda a, **k: sqrt(a), "tanh": lambda a, **k: tanh(a), "abs": lambda a, **k: abs(a),
    "eigh": lambda a, UPLO="L": eigh(a, uplo=UPLO),
    "qr": lambda a, mode="reduced": _qr_reduced(a, mode),
    "shape": lambda a: a.shape, "ndim": lambda a: a.ndim, "size": lambda a, axis=None: a.size if axis is None else a.shape[axis],
}


def _qr_reduced(a: Any, mode: str) -> Any:
    if mode != "reduced":
        raise TypeError(f"numpy.linalg.qr on a traced tessel Tensor: mode={mode!r} is not supported "
                        "(tessel.ops.qr is the reduced form)")
    return qr(a)


def _array_function(self: Tensor, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
    name = func.__name__
    if name in _FUNCTIONS:
        return _FUNCTIONS[name](*args, **_kw(dict(kwargs), ("axis", "keepdims", "axes", "newshape",
                                                               "shape", "offset", "axis1", "axis2", "k", "UPLO", "mode"),
                                            name))
    raise TypeError(f"numpy.{name} is not traced for tessel Tensors; write it with tessel.ops "
                    f"(tessel.ops.{name} if it exists; see tessel.ops.__all__)")
