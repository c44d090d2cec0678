"""Staging in the IR: functions called from a trace, and counted loops.

``tessel.function`` traces a Python function once per input shapes into a function of
the module being traced and records a ``call`` op at each use; ``tessel.scan`` and
``tessel.fori_loop`` (JAX's signatures) trace the loop body once and record one ``scan``
op, however many iterations it runs. ``tessel.grad`` differentiates through both (the
callee's VJP function; a reverse scan over the body's VJP, with the carries stored per
iteration), to any order, and the program stays as small as the body: a 3,000-step
chain is one op.

Shapes are static: a function is traced again for other input shapes, a loop's length is
a Python int. A body may use the tensors of the traces around it (as JAX closes over
tracers): each becomes an input of the body (``%captured.<k>``) that the call passes, or a
carry of the loop that the body returns unchanged.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Optional, Union

import numpy as np

from . import _tessel
from ._tessel import Error, Tensor


def _flatten(tree: Any, what: str) -> tuple[list[Tensor], Callable[[list[Any]], Any]]:
    """The Tensors of ``tree`` (a Tensor, None, or a tuple/list of Tensors) and a function
    rebuilding a tree of the same structure from a list of values."""
    if tree is None:
        return [], lambda values: None
    if isinstance(tree, Tensor):
        return [tree], lambda values: values[0]
    if isinstance(tree, (tuple, list)):
        for i, t in enumerate(tree):
            if not isinstance(t, Tensor):
                raise Error(f"{what}: item {i} is {type(t).__name__}, not a Tensor (carries, xs "
                            "and ys are Tensors or tuples/lists of them)")
        kind = type(tree)
        return list(tree), lambda values: kind(values)
    raise Error(f"{what}: {type(tree).__name__} is not a Tensor or a tuple/list of Tensors")


def _trace_of(tensors: Sequence[Tensor], what: str) -> Any:
    """The trace the op goes into: the innermost one being built, else the tensors' own."""
    from . import ops
    if ops._active():
        return ops._active()[-1]
    traces = {id(t._trace): t._trace for t in tensors}
    if len(traces) > 1:
        raise Error(f"{what}: the tensors come from different traces")
    if traces:
        return next(iter(traces.values()))
    raise Error(f"{what}: called outside tessel.trace")


def _trace_body(fn: Callable[..., Any], name: str, shapes: Sequence[Sequence[int]],
                names: Sequence[str], build_args: Callable[[list[Tensor]], tuple]) -> tuple[Any, Any]:
    """Traces ``fn(*build_args(inputs))`` in a new trace @name; returns (the trace, what
    ``fn`` returned)."""
    from . import ops
    tr = _tessel._Trace(name, ops._active()[-1] if ops._active() else None)
    args = [tr.input(n, list(s)) for n, s in zip(names, shapes)]
    ops._push(tr)
    try:
        result = fn(*build_args(args))
    finally:
        ops._pop()
    return tr, result


def _finish(tr: Any, outputs: Sequence[Tensor], what: str) -> Any:
    """Ends the body's trace with these outputs (in order)."""
    used: set[int] = set()
    for i, t in enumerate(outputs):
        if not isinstance(t, Tensor):
            raise Error(f"{what}: output {i} is {type(t).__name__}, not a Tensor")
        # An output that is an input, or a value returned twice, gets a value of its own:
        # outputs are named by their SSA values.
        if t._is_input or t._id in used:
            t = tr.op("reshape", [t], {"shape": list(t.shape)})[0]
        used.add(t._id)
        tr.output(t, "")
    return tr.finish()


class Function:
    """A Python function staged as a function of the module: traced once per input shapes
    (``tessel.function``), called by a ``call`` op.

    Calling it inside a trace with Tensors records ``call @name(args)`` and returns its
    results in the structure ``fn`` returned (a Tensor, or a tuple/list of them).
    Outside a trace it cannot run: trace the caller.
    """

    def __init__(self, fn: Callable[..., Any], name: Optional[str] = None):
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "f")
        if not self.name.isidentifier():
            self.name = "f"
        self._cache: dict[tuple, tuple[Any, Any]] = {}
        functools.update_wrapper(self, fn)

    def program(self, *shapes: Sequence[int]) -> Any:
        """The traced function for inputs of these shapes (a tessel.Program)."""
        return self._traced(tuple(tuple(int(d) for d in s) for s in shapes))[0]

    def _traced(self, shapes: tuple) -> tuple[Any, Any, list[Tensor]]:
        """(program, result rebuilder, captured tensors of the enclosing trace)."""
        if shapes not in self._cache:
            import inspect
            try:
                params = [p.name for p in inspect.signature(self.fn).parameters.values()]
            except (TypeError, ValueError):
                params = []
            names = [params[i] if i < len(params) and params[i].isidentifier() else f"x{i}"
                     for i in range(len(shapes))]
            tr, result = _trace_body(self.fn, self.name, shapes, names, lambda a: tuple(a))
            outs, rebuild = _flatten(result, f"tessel.function {self.name}")
            if not outs:
                raise Error(f"tessel.function {self.name}: returns no Tensor")
            captured = tr.captured()
            program = _finish(tr, outs, f"tessel.function {self.name}")
            if captured:  # depends on the enclosing trace: traced again at each use
                return program, rebuild, captured
            self._cache[shapes] = (program, rebuild, [])
        return self._cache[shapes]

    def __call__(self, *args: Any) -> Any:
        for i, a in enumerate(args):
            if not isinstance(a, Tensor):
                raise Error(f"tessel.function {self.name}: argument {i} is {type(a).__name__}; "
                            "a staged function takes Tensors (pass numbers as tessel.ops.constant)")
        tr = _trace_of(args, f"tessel.function {self.name}")
        program, rebuild, captured = self._traced(tuple(tuple(a.shape) for a in args))
        callee = tr.add_function(program)
        return rebuild(tr.op("call", list(args) + captured, {"callee": callee}))


def function(fn: Optional[Callable[..., Any]] = None, *, name: Optional[str] = None) -> Any:
    """Stages ``fn`` as a function of the module (a decorator; JAX users: a ``jit`` whose
    call stays a call in the traced program).

    Args:
        fn: a function of Tensors returning a Tensor or a tuple/list of Tensors. Tensors
            of the enclosing trace it uses are captured (extra inputs the call passes); it
            is then traced again at each use. A function that calls itself is recursion,
            which a module cannot hold: Python's RecursionError.
        name: the function's name in the module (default ``fn.__name__``).

    Returns:
        A :class:`Function`: called with Tensors inside a trace it records
        ``call @name(...)``; it is traced once per tuple of input shapes.
    """
    if fn is None:
        return lambda f: Function(f, name)
    return Function(fn, name)


def scan(f: Callable[[Any, Any], tuple[Any, Any]], init: Any, xs: Any = None,
         length: Optional[int] = None, reverse: bool = False) -> tuple[Any, Any]:
    """A counted loop with a carried state, JAX's ``lax.scan``: one ``scan`` op.

    ``f(carry, x) -> (carry, y)`` is traced once, for one iteration; the loop runs it
    ``length`` times, x_i being slice i of each of ``xs`` along the leading axis, and
    stacks the y_i along a new leading axis.

    Args:
        f: the body. carry is a Tensor or a tuple/list of Tensors (the structure of
            ``init``), x likewise (of ``xs``, or None); it returns the new carry (same
            structure and shapes) and y (a Tensor, a tuple/list of them, or None).
        init: the initial carry.
        xs: Tensors of leading extent ``length`` (or None).
        length: the trip count; needed when ``xs`` is None, else checked against it.
        reverse: run i = length-1 down to 0 (y_i is still stored at index i).

    Returns:
        (final carry, stacked ys), each in the structure ``f`` returned.

    Raises:
        Error: a carry changes shape, xs disagree on their length, length < 1.
    """
    carries, build_carry = _flatten(init, "tessel.scan: init")
    xs_list, build_x = _flatten(xs, "tessel.scan: xs")
    for i, x in enumerate(xs_list):
        if not x.shape:
            raise Error(f"tessel.scan: xs item {i} is a scalar: it has no leading axis to scan over")
    if length is None:
        if not xs_list:
            raise Error("tessel.scan: give xs or length (the number of iterations)")
        length = xs_list[0].shape[0]
    if (not isinstance(length, (int, np.integer)) or isinstance(length, bool) or length < 1
            or length > 2 ** 30):
        raise Error(f"tessel.scan: length must be an int in [1, 2^30], got {length!r:.40}")
    length = int(length)
    for i, x in enumerate(xs_list):
        if not x.shape or x.shape[0] != length:
            raise Error(f"tessel.scan: xs item {i} has shape {tuple(x.shape)}; its leading "
                        f"extent must be the length {length}")
    tr = _trace_of(carries + xs_list, "tessel.scan")
    name = getattr(f, "__name__", "body")
    if not name.isidentifier():
        name = "body"
    shapes = [tuple(c.shape) for c in carries] + [tuple(x.shape[1:]) for x in xs_list]
    names = [f"c{i}" for i in range(len(carries))] + [f"x{i}" for i in range(len(xs_list))]
    k = len(carries)
    body_tr, result = _trace_body(
        f, name, shapes, names,
        lambda a: (build_carry(a[:k]), build_x(a[k:])))
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise Error(f"tessel.scan: the body {name} must return (carry, y), got "
                    f"{type(result).__name__}")
    new_carry, ys = result
    new_list, _ = _flatten(new_carry, f"tessel.scan: the carry {name} returns")
    if len(new_list) != k:
        raise Error(f"tessel.scan: the body {name} returns {len(new_list)} carries for the "
                    f"{k} of init")
    for i, (a, b) in enumerate(zip(carries, new_list)):
        if tuple(a.shape) != tuple(b.shape):
            raise Error(f"tessel.scan: the body {name} changes carry {i} from shape "
                        f"{tuple(a.shape)} to {tuple(b.shape)} (carries keep their shapes)")
    ys_list, build_y = _flatten(ys, f"tessel.scan: the ys {name} returns")
    if not new_list and not ys_list:
        raise Error(f"tessel.scan: the body {name} returns neither a carry nor a y")
    # Tensors of the enclosing traces the body used: carries it returns unchanged.
    captured = body_tr.captured()
    nc = len(captured)
    if nc:
        body_tr.move_captured_inputs(k)
    program = _finish(body_tr, new_list + body_tr.captured_inputs() + ys_list,
                      f"tessel.scan {name}")
    callee = tr.add_function(program)
    results = tr.op("scan", carries + captured + xs_list,
                    {"callee": callee, "length": length, "carries": k + nc,
                     "reverse": int(bool(reverse))})
    return build_carry(results[:k]), build_y(results[k + nc:])


def fori_loop(lower: int, upper: int, body_fun: Callable[[Any, Any], Any], init_val: Any) -> Any:
    """``for i in range(lower, upper): val = body_fun(i, val)``, JAX's ``lax.fori_loop``:
    one ``scan`` op over i given as an f64 scalar Tensor.

    Args:
        lower, upper: Python ints, upper > lower.
        body_fun: ``(i, val) -> val`` (val a Tensor or a tuple/list of Tensors).
        init_val: the initial val.

    Returns:
        The final val.
    """
    from . import ops
    for what, v in (("lower", lower), ("upper", upper)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise Error(f"tessel.fori_loop: {what} must be a Python int (the trip count is "
                        f"static), got {type(v).__name__}")
    if upper <= lower:
        raise Error(f"tessel.fori_loop: upper ({upper}) must be greater than lower ({lower})")
    if upper - lower > 2 ** 30:
        raise Error(f"tessel.fori_loop: {upper - lower} iterations; a loop runs at most 2^30")
    carries, build = _flatten(init_val, "tessel.fori_loop: init_val")
    tr = _trace_of(carries, "tessel.fori_loop")
    ops._push(tr)
    try:
        start = ops.constant(float(lower))
    finally:
        ops._pop()

    # The index is a carry (i, then i + 1), not a vector of every index: the program
    # stays one op whatever the trip count.
    def step(carry: Any, _: Any) -> tuple[Any, None]:
        *val, i = carry
        new = body_fun(i, build(list(val)))
        new_list, _ = _flatten(new, "tessel.fori_loop: the body's result")
        return (*new_list, i + 1.0), None

    step.__name__ = getattr(body_fun, "__name__", "body")
    if not step.__name__.isidentifier():
        step.__name__ = "body"
    final, _ = scan(step, (*carries, start), None, length=int(upper - lower))
    return build(list(final[:-1]))
