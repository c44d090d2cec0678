"""numpy's basic indexing of traced Tensors (``t[1:, ::2, None]``), as slice, pad and
reshape ops; Tensor's ``__getitem__`` (python/src/tracing.cpp) calls :func:`_getitem`
through :mod:`tessel.ops`.
"""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from ._tessel import Error, Tensor
from .ops import pad, reshape, slice


def _strided(a: Tensor, d: int, lo: int, count: int, step: int) -> Tensor:
    """Elements lo, lo + step, … (count of them) of axis d, for step > 1: slice, pad the
    tail to a multiple of step, reshape (count, step) and keep column 0 (ops the IR has;
    the gradient scatters back through the same ops)."""
    n = a.shape[d]
    end = builtins.min(n, lo + count * step)
    start, limit = [0] * a.ndim, list(a.shape)
    start[d], limit[d] = lo, end
    t = slice(a, start, limit)
    extra = count * step - (end - lo)
    if extra:
        low, high = [0] * a.ndim, [0] * a.ndim
        high[d] = extra
        t = pad(t, low, high)
    shape = list(t.shape)
    t = reshape(t, shape[:d] + [count, step] + shape[d + 1:])
    start, limit = [0] * t.ndim, list(t.shape)
    limit[d + 1] = 1
    t = slice(t, start, limit)
    return reshape(t, shape[:d] + [count] + shape[d + 1:])


def _getitem(a: Tensor, key: Any) -> Tensor:
    """numpy's basic indexing: ints (drop the axis), slices with a positive step (step 1 is
    one slice op; a larger step adds pad, reshape and slice), Ellipsis and None/newaxis
    (a new axis of extent 1). Integer or boolean arrays (numpy's advanced indexing) are
    refused with what to write instead; so are negative steps."""
    key = key if isinstance(key, tuple) else (key,)
    for k in key:
        if isinstance(k, (list, np.ndarray, Tensor)) or isinstance(k, bool):
            raise Error(f"indexing: {type(k).__name__} indices (numpy's advanced indexing, a "
                        "gather) are not supported; use slices, or tessel.ops.dot_general / einsum "
                        "with a one-hot constant to pick rows")
    if builtins.sum(k is Ellipsis for k in key) > 1:
        raise Error("indexing: at most one Ellipsis")
    real = builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    if real > a.ndim:
        raise Error(f"indexing: {real} indices for a tensor of rank {a.ndim} (shape {a.shape})")
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (builtins.slice(None),) * (a.ndim - real) + key[i + 1:]
    else:
        key = key + (builtins.slice(None),) * (a.ndim - real)
    start, limit, shape, strides = [], [], [], []  # shape: the result's, None marks kept 1s
    d = 0
    for k in key:
        if k is None:
            shape.append(1)
            continue
        n = a.shape[d]
        if isinstance(k, builtins.slice):
            lo, hi, step = k.indices(n)
            if step < 0:
                raise Error(f"indexing: negative step {step} on axis {d} (reversal) is not "
                            "supported; index with a positive step")
            count = len(range(lo, hi, step))
            start.append(lo if count else 0)
            limit.append(lo + 1 + (count - 1) * step if count else 0)
            if step > 1 and count > 1:
                strides.append((d, step, count))
            shape.append(count)
        elif isinstance(k, (int, np.integer)):
            i = int(k)
            if not -n <= i < n:
                raise Error(f"indexing: index {i} is out of range for axis {d} of size {n}")
            i %= n
            start.append(i)
            limit.append(i + 1)
        else:
            raise Error(f"indexing: unsupported index {k!r} (ints, slices, ..., None)")
        d += 1
    out = slice(a, start, limit) if (start != [0] * a.ndim or limit != list(a.shape)) else a
    for axis, step, count in strides:  # the block holds lo .. lo + (count−1)·step
        out = _strided(out, axis, 0, count, step)
    return reshape(out, shape) if list(out.shape) != shape else out
