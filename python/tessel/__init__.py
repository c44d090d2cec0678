"""tessel: a compiler for differentiable tensor-network programs, from Python.

The stages are explicit, each timed and inspectable, as on the command line::

    import numpy as np
    import tessel
    from tessel import ops

    def f(x):                                   # x: f64[1000]
        return ops.sum(ops.sin(x) * x * x)

    program = tessel.trace(f, (1000,))          # compile: trace -> typed SSA IR
    g = tessel.grad(program, wrt="x")           # the grad transform (outputs f, df/dx)
    g = tessel.opt(g, "fold,cse,dce")           # pass pipeline, as `tessel opt --passes`
    plan = tessel.prepare(g)                    # prepare: flat op list + buffer plan
    engine = tessel.Engine(width=2)             # run: an engine of fixed width
    out = engine.run(plan, {"x": np.linspace(0, 1, 1000)})
    out["grad_x"]                               # numpy float64 array, shape (1000,)
    program.compile_ms, plan.prepare_ms, engine.last_run_ms

and the flagship job, TRG of the 2D Ising model compared with Onsager's solution::

    tessel.trg(beta=0.3, grad=True)["dlnZ_dbeta"]

Everything is float64; shapes are static tuples of ints, row-major. Errors are
``tessel.Error`` subclasses carrying the same diagnostics as the command line.
"""
from __future__ import annotations

import inspect
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Callable, Optional, Union

import numpy as np

from . import _tessel
from ._tessel import Engine, Error, ParseError, Plan, Program, ShapeError, Tensor, Value, VerifyError

__version__: str = _tessel.__version__

#: β_c = ln(1 + √2)/2 of the square-lattice Ising model (J = 1, k_B = 1).
ISING_BETA_C: float = _tessel.ISING_BETA_C

__all__ = [
    "Engine", "Error", "Function", "ISING_BETA_C", "ParseError", "Plan", "Program", "ShapeError",
    "Tensor", "Value", "VerifyError", "blas_info", "describe_passes", "evaluate_reference",
    "fori_loop", "function", "grad", "hessian", "jvp", "onsager", "op_table", "ops", "opt", "prepare",
    "scan", "trace", "trg", "vjp",
]

_tessel._set_package_dir(os.path.dirname(os.path.abspath(__file__)) + os.sep)

from . import ops  # noqa: E402  (attaches the Tensor methods; needs _tessel first)
from ._staging import Function, fori_loop, function, scan  # noqa: E402

ShapeLike = Union[int, Sequence[int], np.ndarray]


def _input_names(fn: Callable[..., Any], count: int, names: Optional[Sequence[str]]) -> list[str]:
    if names is not None:
        names = list(names)
        if len(names) != count:
            raise Error(f"trace: {count} shape(s) but {len(names)} name(s)")
        return names
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    if len(params) >= count:
        return [p.name for p in params[:count]]
    return [f"x{i}" for i in range(count)]


def _shape_of(s: ShapeLike) -> tuple[int, ...]:
    if isinstance(s, np.ndarray):
        return tuple(int(d) for d in s.shape)
    if isinstance(s, (int, np.integer)) and not isinstance(s, bool):
        return (int(s),)
    return tuple(s)


def trace(fn: Callable[..., Any], *shapes: ShapeLike, name: Optional[str] = None,
          names: Optional[Sequence[str]] = None) -> Program:
    """Traces ``fn`` into a program: one f64 input per shape, the ops ``fn`` applies.

    Args:
        fn: a function of Tensors written with ``tessel.ops`` and Tensor operators. It
            returns a Tensor, a tuple/list of Tensors, or a dict {output name: Tensor}.
        shapes: one per input, in ``fn``'s parameter order: a tuple of ints (``()`` for a
            scalar), an int (rank 1), or a numpy array (its shape).
        name: the program's name (default: ``fn.__name__``).
        names: the inputs' names (default: ``fn``'s parameter names).

    Returns:
        The verified Program; ``compile_ms`` is the trace's time. Every op's location is
        the Python line that made it (``file.py:LINE in FUNC``).

    Raises:
        ShapeError: an op's shapes do not fit (names the op, both shapes and the line).
        Error: ``fn`` returned no Tensor, or something that is not one.
    """
    if name is not None:
        # Given: used as it is (the IR quotes a name that is not bare, @"a b").
        if not isinstance(name, str) or not name:
            raise Error(f"trace: name must be a non-empty string, got {name!r:.80}")
        prog_name = name
    else:
        prog_name = getattr(fn, "__name__", "main")
        if not prog_name.isidentifier():
            prog_name = "main"  # a lambda's "<lambda>"
    input_names = _input_names(fn, len(shapes), names)
    tr = _tessel._Trace(prog_name)
    args = [tr.input(n, _shape_of(s)) for n, s in zip(input_names, shapes)]
    ops._push(tr)
    try:
        result = fn(*args)
    finally:
        ops._pop()
    if isinstance(result, Tensor):
        items: list[tuple[str, Any]] = [("", result)]
    elif isinstance(result, Mapping):
        items = [(str(k), v) for k, v in result.items()]
    elif isinstance(result, (tuple, list)):
        items = [("", v) for v in result]
    else:
        raise Error(f"trace: {prog_name} returned {type(result).__name__}; expected a Tensor, "
                    "a tuple/list of Tensors or a dict of them")
    if not items:
        raise Error(f"trace: {prog_name} returned no outputs")
    # Outputs are named by their SSA values: a name given to an output names its value.
    seen: dict[int, str] = {}
    for index, (out_name, value) in enumerate(items):
        label = repr(out_name) if out_name else f"number {index}"
        if not isinstance(value, Tensor):
            raise Error(f"trace: output {label} of {prog_name} is {type(value).__name__}, "
                        "not a Tensor")
        if value._id in seen:
            raise Error(f"trace: {prog_name} returns the same tensor as output {label} and as "
                        f"output {seen[value._id]} (outputs are named by their SSA values: "
                        "return it once)")
        seen[value._id] = label
        if out_name and value._is_input and value.name != out_name:
            raise Error(f"trace: output {label} of {prog_name} is the input {value.name!r} "
                        "itself; return it under its own name, or return a new value")
        if out_name.isdigit():
            raise Error(f"trace: output name {out_name!r} of {prog_name} is all digits, which the "
                        f"IR keeps for unnamed values (%{out_name}); give it a name with a letter, "
                        f"e.g. 'out{out_name}'")
        if out_name and out_name in input_names and value.name != out_name:
            raise Error(f"trace: output name {out_name!r} of {prog_name} is the name of an input")
        tr.output(value, out_name)
    return tr.finish()


def _names(wrt: Union[None, str, Sequence[str]]) -> list[str]:
    if wrt is None:
        return []
    if isinstance(wrt, str):
        return [w.strip() for w in wrt.split(",") if w.strip()]
    if not isinstance(wrt, (list, tuple)) or not all(isinstance(w, str) for w in wrt):
        raise Error(f"wrt must be an input name, a comma-separated string or a list of names, "
                    f"got {wrt!r:.80}")
    return list(wrt)


def grad(program: Program, wrt: Union[None, str, Sequence[str]] = None, *,
         keep_outputs: bool = True, svd_blocks: bool = True) -> Program:
    """Reverse-mode gradient of a program with one scalar output (the grad transform).

    Args:
        program: the primal program; its one output must be a scalar f64[].
        wrt: input names ("x", "x,y" or a list); None = every input.
        keep_outputs: keep the primal output first (value and gradient, as the pass
            ``grad{...}`` of ``tessel opt``); False = only the gradients.
        svd_blocks: the block form of the svd reverse rule when only leading triplets
            carry cotangents (same gradient up to rounding; docs/trg.md §5).

    Returns:
        A program with the same inputs and outputs [value,] ``grad_<input>`` (the input's
        shape). Each op's VJP rule is listed by ``tessel ops`` / ``op_table()``.

    Raises:
        Error: an unknown wrt name, or an output that is not one scalar (use ``vjp``).
    """
    return _tessel.grad(program, _names(wrt), False, keep_outputs, svd_blocks)


def vjp(program: Program, wrt: Union[None, str, Sequence[str]] = None, *,
        keep_outputs: bool = True, svd_blocks: bool = True) -> Program:
    """Vector-Jacobian product: adds one cotangent input ``ct_<output>`` per output (of the
    output's shape) and outputs Σ_o ⟨ct_o, ∂out_o/∂wrt⟩ as ``grad_<input>``.

    Arguments, result and errors as :func:`grad`, for programs with any outputs.
    """
    return _tessel.grad(program, _names(wrt), True, keep_outputs, svd_blocks)


def jvp(program: Program, wrt: Union[None, str, Sequence[str]] = None, *,
        keep_outputs: bool = True) -> Program:
    """Jacobian-vector product by forward mode (the jvp transform; JAX's ``jax.jvp``).

    Args:
        program: any program (module or plain); outputs of any shape.
        wrt: the inputs that get a tangent ("x", "x,y" or a list); None = every input.
        keep_outputs: keep the primal outputs first; False = only the tangents.

    Returns:
        A program whose inputs are the program's, then one tangent ``t_<input>`` per wrt
        input (its shape; in the order of the program's inputs), and whose outputs are
        [the program's,] one tangent ``jvp_<output>`` per output (its shape):
        Σ_w ∂out/∂w · t_w. Each op's JVP rule is listed by ``tessel ops`` /
        ``op_table()`` (the "jvp" entry); the rules share grad's conventions, so
        ``jvp`` and ``vjp`` of a program are transposes of each other to rounding.
        Differentiating the result again works (``jvp(grad(p, keep_outputs=False))``
        is the Hessian-vector product; :func:`hessian`).

    Raises:
        Error: an unknown or repeated wrt name; an op without a forward rule,
            naming the op.
    """
    return _tessel.jvp(program, _names(wrt), keep_outputs)


def hessian(program: Program, wrt: Union[None, str, Sequence[str]] = None) -> Program:
    """Hessian of a program's one scalar output in a few scalar inputs, by
    forward-over-reverse: ``jvp`` of ``grad(keep_outputs=False)``, one Hessian-vector
    product per input (each costs about one forward-plus-reverse sweep carrying a tangent,
    where reverse-over-reverse differentiates the whole reverse sweep again).

    Args:
        program: a program with one scalar output f64[] (the loss).
        wrt: the scalar inputs ("beta", "beta,h" or a list); None = every input.

    Returns:
        A program with the same inputs whose outputs are ``d2_<a>_<b>`` = ∂²out/∂a∂b for
        every pair of wrt inputs (row a, column b; ``d2_<a>`` for one input), computed by a
        function ``@hvp`` (the Hessian-vector product) called once per input.

    Raises:
        Error: those of :func:`grad` and :func:`jvp`, and a wrt input that is not a scalar
            (use ``jvp(grad(p, keep_outputs=False))`` for a Hessian-vector product).
    """
    return _tessel.hessian(program, _names(wrt))


def opt(program: Program, pipeline: str, *, print_ir_after_all: bool = False,
        print_ir_before: Sequence[str] = (), print_ir_after: Sequence[str] = (),
        print_ir_after_change: bool = False, print_changed_diff: bool = False,
        time_passes: bool = False, statistics: bool = False, verify_each: bool = True,
        disable: Sequence[str] = (), bisect_limit: int = -1, dump_dir: str = "",
        file: Any = None) -> Program:
    """Runs a pass pipeline, as ``tessel opt --passes=PIPELINE``, and returns the result.

    Args:
        pipeline: e.g. ``"grad{wrt=beta},checkpoint{policy=recompute},order{strategy=pairwise},cse,dce"``
            (passes and options: :func:`describe_passes`).
        print_ir_after_all, print_ir_before, print_ir_after, print_ir_after_change,
        print_changed_diff, time_passes, statistics, verify_each, disable, bisect_limit,
        dump_dir: the instrumentation flags of ``tessel opt`` (``--print-ir-after-all``,
            ``--print-ir-before=P``, ..., ``--disable-pass=P``, ``--bisect-limit=N``,
            ``--dump-dir=DIR``).
        file: where the instrumentation text goes (default ``sys.stderr``).

    Raises:
        Error: an unknown pass or option (listing the known ones), or a pass's error naming
            the pass; VerifyError naming the pass after which verification failed. The
            instrumentation printed before the error is written first.
    """
    o = _tessel._PassOptions()
    o.verify_each = verify_each
    o.print_ir_before = list(print_ir_before)
    o.print_ir_after = list(print_ir_after)
    o.print_ir_after_all = print_ir_after_all
    o.print_ir_after_change = print_ir_after_change
    o.print_changed_diff = print_changed_diff
    o.time_passes = time_passes
    o.statistics = statistics
    o.disabled_passes = list(disable)
    o.bisect_limit = bisect_limit
    o.dump_dir = dump_dir
    out = file if file is not None else sys.stderr
    return _tessel.opt(program, pipeline, o, out.write)


def prepare(program: Program, *, order: str = "auto", passes: str = "fold,cse,dce",
            check_nan: bool = False, check_inf: bool = False, reuse_buffers: bool = True,
            fuse: bool = True) -> Plan:
    """Lowers a program to a Plan: flat instruction list, kernel plans and buffer plan.

    The same path as ``tessel run`` and ``tessel prepare``: einsums lowered by ``order``,
    then the ``passes`` pipeline, then prepare; so a program gives the same plan from
    Python and from the command line.

    Args:
        order: how einsum ops are lowered first (``auto``, ``chain``, ``pairwise``,
            ``greedy``, ``optimal``), or ``none`` to refuse them.
        passes: the pass pipeline run before prepare (default ``fold,cse,dce``: the
            algebraic folds the grad transform leaves, CSE, DCE; exact but for the sign of
            a zero in x + 0 and 0 − x); ``""`` prepares the program exactly as given.
        check_nan: after every op, check its results; the first NaN stops a run with an
            Error naming the op, its location, the element and which operands held NaN.
        check_inf: as check_nan, but ±inf stops too.
        reuse_buffers: reuse arena memory once a value is dead (False: one buffer each).
        fuse: loop fusion: chains of elementwise ops whose intermediates nothing else
            reads run as one loop without buffers for the intermediates (``fused`` in
            ``str(plan)``; bitwise the same results). Off with a value check.

    Returns:
        A Plan (``prepare_ms``, ``peak_live_bytes``, ``arena_bytes``, ``str(plan)`` lists
        it). Plans do not depend on the engine width: any Engine runs them, with bitwise
        identical results.

    Raises:
        Error: an einsum with ``order="none"``, or a LAPACK workspace query failure.
    """
    _check_str("order", order)
    if order not in ("auto", "chain", "pairwise", "greedy", "optimal", "none"):
        raise Error(f"prepare: unknown order '{order}' (allowed: auto, chain, pairwise, greedy, "
                    "optimal, none)")
    if not isinstance(program, Program):
        raise Error(f"prepare: expected a tessel.Program, got {type(program).__name__}")
    _check_str("passes", passes)
    check = 2 if check_inf else 1 if check_nan else 0
    return _tessel.prepare(program, order, passes, check, bool(reuse_buffers), bool(fuse))


def evaluate_reference(program: Program, inputs: Union[Mapping[str, Any], Sequence[Any]]) -> dict[str, np.ndarray]:
    """Runs a program op by op on the reference evaluator (no plan, no threads, no BLAS;
    einsum evaluated naively; svd, eigh and qr by Eigen, not the engine's LAPACK): for
    checking the engine. Inputs and result as Engine.run. The signs of singular and eigen
    vectors (and Q's columns) are Eigen's and may differ from the engine's: compare
    factors after fixing one sign convention on both, or through what does not depend
    on them (U·diag(s)·Vt, projectors, singular values)."""
    return _tessel.evaluate_reference(program, inputs)


def onsager(beta: float) -> dict[str, Optional[float]]:
    """Onsager's exact solution of the square-lattice Ising model (J = 1, no field), per site.

    Returns ``lnZ_per_site``, ``dlnZ_dbeta``, ``energy_per_site`` (= −dlnZ/dβ, units of J),
    ``d2lnZ_dbeta2`` and ``specific_heat`` (c = β² d²lnZ/dβ², units of k_B). At β_c
    exactly (``ISING_BETA_C``) the energy is its finite limit −√2 and the second
    derivative and c, which diverge there, are None. Source: L. Onsager, Phys.
    Rev. 65, 117 (1944), evaluated with complete elliptic integrals.

    Raises:
        Error: β not finite or ≤ 0.
    """
    return _tessel.onsager(float(beta))


def trg(beta: Union[float, Sequence[float], np.ndarray], *, model: str = "ising",
        q: Optional[int] = None, field: float = 0.0, susceptibility: bool = False,
        chi: int = 16, steps: Union[None, int, str] = None, grad: bool = False, second: bool = False,
        second_mode: str = "forward-over-reverse", mode: str = "staged", algorithm: str = "trg", btrg_k: Optional[float] = None, cft: bool = False,
        checkpoint: str = "store", order: str = "pairwise", svd: str = "truncated",
        width: int = 1, ranks: Union[None, str, Sequence[int]] = None, repeat: int = 0,
        eps: float = _tessel.TRG_SVD_EPS, check_nan: bool = False,
        check_inf: bool = False,
        progress: Union[bool, Callable[..., Any]] = False) -> Union[dict[str, Any], list[dict[str, Any]]]:
    """TRG (Levin–Nave), bond-weighted or higher-order TRG of the 2D Ising model (or the q-state Potts
    model), as ``tessel trg ... --json``.

    Compiles and prepares the programs once, then per β computes lnZ/N (and with
    ``grad`` d(lnZ/N)/dβ, with ``second`` also d²(lnZ/N)/dβ²) on the infinite lattice
    (``steps="auto"``) or a periodic lattice of 2^steps sites (HOTRG: 4^steps), beside the exact values
    where they are known (Onsager: Ising at h = 0; Potts with q = 2; the Potts energy at
    β_c for q = 3, 4). J = 1, k_B = 1, β = 1/T, h in units of J.

    Args:
        beta: one β > 0, or a sequence/array of them.
        model: ``"ising"`` (spins ±1 in the field ``field``) or ``"potts"`` (``q`` states,
            Z = Σ exp(β Σ δ(σ_i, σ_j)); q = 2 is Ising at β/2: lnZ/N + β).
        field: h of the Ising model. With ``grad`` the report has ``dlnZ_dh`` and the
            magnetization m = (1/β)·∂(lnZ/N)/∂h, with ``second`` also ``d2lnZ_dbeta_dh``;
            ``susceptibility`` adds ``d2lnZ_dh2`` and χ_m = (1/β)·∂²(lnZ/N)/∂h² (one more
            reverse sweep; implies ``second``). A derivative in h that comes out as
            rounding is None, with the reason in ``refused`` (at h = 0 near T_c: ∂/∂h and
            ∂²/∂β∂h, 0 by symmetry, above 1e-10 of the β derivative; docs/trg.md §8.1).
        chi: bond dimension χ (≥ 2).
        steps: None or ``"auto"`` (the default: the infinite lattice; coarse-grain until lnZ/N
            stops changing in double precision, at most 80 steps, then sum the fixed
            point's remaining steps in closed form; the report's ``steps`` says how many
            ran and ``steps_converged`` whether the criterion was met) or an int N ≥ 1 (a
            periodic lattice of 2^N sites (HOTRG: 4^N), as ``tessel trg --steps N``). With ``ranks``
            given, None means its length and ``"auto"`` is an error.
        grad, second: also the first / first and second derivative in β (reverse mode
            through every SVD; the second derivative is forward over reverse, the jvp of
            the gradient, also through the truncated SVD).
        second_mode: ``"forward-over-reverse"`` (the default) or ``"reverse-over-reverse"``
            (the VJP of the gradient, also through the truncated SVD): the same numbers to rounding,
            as ``tessel trg --second-mode``.
        mode: ``staged`` (one program per step class) or ``whole`` (one program).
        algorithm: ``"trg"`` (Levin–Nave, PRL 99, 120601 (2007)) or ``"btrg"`` (bond-weighted
            TRG, Adachi, Okubo, Todo, PRB 105, L060402 (2022): each SVD splits as
            U·s^((1−k)/2), s^((1−k)/2)·V† with the weight s^k on the new bond; the same
            cost per step, 10–40× smaller error of lnZ/N at T_c; docs/trg.md §9) or
            ``"hotrg"`` (higher-order TRG, Xie et al., PRB 86, 045139 (2012): each step
            contracts along both axes and cuts each doubled bond with the isometry of its
            environment, O(χ⁷); a step covers 4 sites, so ``steps=N`` is a torus of 4^N
            sites; 8× smaller error than TRG at T_c, χ = 16; docs/trg.md §11).
        btrg_k: BTRG's bond-weight exponent k in [−1, 1) (None: −½; 0 is TRG, bitwise); an
            error with another algorithm, where it would change nothing.
        cft: also ``cft``, one dict per step's tensor T_n: ``step``, ``D``, the central charge
            ``c`` and the lowest scaling dimensions ``x`` (Gu, Wen, PRB 80, 155131 (2009):
            the transfer matrices of cylinders 1 and 2 tensors around; docs/trg.md §10). At a
            critical β they hold the CFT's values in a window of steps (Ising: c = ½,
            x = ⅛, 1; 3-state Potts: c = ⅘, x = 2/15 twice), which ``cft_plateau`` picks:
            ``first_step``, ``last_step``, the means ``c``, ``x`` and spreads ``c_spread``,
            ``x_spread`` of the 3 steps (HOTRG: 2; a factor 2 in linear size either way)
            whose c and x_1 change least at a nontrivial fixed point, or None when they do
            not hold still. One untimed value sweep more;
            staged mode.
        checkpoint: residual policy of the backward programs (``store``, ``recompute``,
            ``save-svd``). order: contraction order of the plaquette einsum.
        svd: ``truncated`` (svd_topk: only the kept triplets) or ``full`` (LAPACK gesdd).
            ``second`` differentiates svd_topk twice (the report's ``svd`` field says which
            ran).
        width: engine width (threads). ranks: the truncation schedule (D' per step; the
            number of steps is then its length; a list, or a string in the report's
            words, ``"2,4,4,16x17"``, as ``tessel trg --ranks`` takes it), or None /
            ``"auto"`` (the default: at each β the value sweep keeps min(D², χ, rank
            bound) per step, and fewer where its own SVDs have singular values ≤ 1e-12 or
            where the cut would split a degenerate multiplet, or with a field a pair the
            field splits (relative gap ≤ 1e-3): docs/trg.md §2.4). A given
            schedule runs as given; the report's ``multiplet_splits`` names each step
            whose cut splits a multiplet (``step``, ``D``, ``D_prime``, ``matrices``, the
            ``kept`` and ``cut`` values s[D'-1], s[D'] and ``s0``), whose results then
            depend on the SVD routine there (found by the value sweep: empty where none
            ran at that schedule, e.g. ``grad=True`` with ``repeat=0`` or ``mode="whole"``
            and a given schedule).
        repeat: timed runs after one warm-up (0 = the first run only).
        eps: Lorentzian broadening of the svd reverse rule (relative).
        check_nan, check_inf: stop at the first NaN (or NaN/inf) with the op named.
        progress: ``True`` shows a progress bar per sweep (tqdm if it is installed,
            otherwise a line on stderr), a callable is called before every TRG step as
            ``progress(beta, phase, step, steps, at_most)`` (``phase`` e.g.
            ``"value+grad: backward"``; ``at_most``: ``steps`` is a bound, ``steps="auto"``
            decides on the way). Ctrl-C interrupts the call within one step either way
            (KeyboardInterrupt).

    Returns:
        For one β a dict, for several a list of dicts, with the fields of
        ``tessel trg --json`` (docs/cli.md, "`tessel trg --json` (JSON Lines)"): ``lnZ_per_site``, ``dlnZ_dbeta``,
        ``energy_per_site``, ``d2lnZ_dbeta2``, ``specific_heat`` and their ``exact_*``,
        ``model``, ``q``, ``field``, ``dlnZ_dh``, ``magnetization``, ``d2lnZ_dbeta_dh``,
        ``d2lnZ_dh2``, ``susceptibility``, ``refused``, ``multiplet_splits``,
        ``timing_ms`` (compile, prepare, value/value_and_grad/second), ``memory``,
        ``ranks``, ``svd_topk`` counters, ``blas``, ``loadavg``; null fields as None.
        The ``svd_topk`` counters and the peak-RSS window are the process's: two
        ``trg`` calls running at once (two threads) count each other's work there.

    Raises:
        Error: a bad option (naming it and the allowed values) or β ≤ 0, before anything
            runs; or a β that failed (e.g. a kept singular value below the rank tolerance,
            naming the step): as ``tessel trg``, a sweep goes on after a failed β, and the
            error raised at its end names every failed β with its error and holds the
            completed reports in ``.reports`` (a list in β order, None where β failed).
    """
    scalar = np.ndim(beta) == 0
    b = np.asarray(beta)
    if b.dtype.kind not in "iuf" or b.ndim > 1 or b.size == 0:
        raise Error(f"trg: beta must be a number or a non-empty 1-d sequence of numbers, got {beta!r}")
    betas = [float(x) for x in np.atleast_1d(b.astype(np.float64))]
    for name, v in (("chi", chi), ("width", width), ("repeat", repeat)):
        _check_int(name, v)
    steps_given = steps is not None
    if steps is None:
        steps = "auto"
    steps_auto = isinstance(steps, str)
    if steps_auto and steps != "auto":
        raise Error(f"trg: steps must be an int >= 1 or 'auto', got {steps!r}")
    if not steps_auto:
        _check_int("steps", steps)
    for name, v in (("mode", mode), ("checkpoint", checkpoint), ("order", order), ("svd", svd),
                    ("algorithm", algorithm), ("second_mode", second_mode)):
        _check_str(name, v)
    if btrg_k is not None and (isinstance(btrg_k, bool) or
                               not isinstance(btrg_k, (int, float, np.integer, np.floating))):
        raise Error(f"trg: btrg_k must be a number, got {btrg_k!r}")
    _check_str("model", model)
    if q is not None:
        _check_int("q", q)
        if not -2**31 <= q < 2**31:
            raise Error(f"trg: q = {q} is out of range")
        q = int(q)
    if isinstance(field, bool) or not isinstance(field, (int, float, np.integer, np.floating)):
        raise Error(f"trg: field must be a number, got {field!r}")
    try:
        field = float(field)
    except OverflowError:
        raise Error(f"trg: field must be finite, got {field!r}") from None
    for name, v in (("grad", grad), ("second", second), ("susceptibility", susceptibility),
                    ("cft", cft)):
        if not isinstance(v, (bool, np.bool_)):
            raise Error(f"trg: {name} must be True or False, got {v!r}")
    bad_ranks = (f"trg: ranks must be a list of ints, a string like '2,4,4,16x17', 'auto' or None, "
                 f"got {ranks!r}")
    if isinstance(ranks, (bytes, bytearray, np.bytes_)):
        raise Error(bad_ranks)
    if isinstance(ranks, str):
        ranks = ranks.strip()
        if ranks != "auto":
            try:
                ranks = _tessel._parse_trg_ranks(ranks)  # the report's words: "2,4,4,16x17"
            except Error as e:
                raise Error(f"{e} (or 'auto' / None: the schedule derived at each beta)") from None
    auto = isinstance(ranks, str)
    if not (ranks is None or auto):
        if isinstance(ranks, (int, float, np.number)):
            raise Error(bad_ranks)
        for r in ranks:
            _check_int("ranks entry", r)
    explicit = None if (ranks is None or auto) else [int(r) for r in ranks]
    if explicit is not None and steps_auto:
        if steps_given:
            raise Error("trg: ranks gives the number of steps (one rank per step); with a given "
                        "schedule use steps=N, not steps='auto'")
        steps_auto, steps = False, len(explicit)  # the schedule gives the number of steps
    check = 2 if check_inf else 1 if check_nan else 0
    if progress is True:
        callback = _progress_display()
    elif progress is False or progress is None:
        callback = None
    elif callable(progress):
        callback = progress
    else:
        raise Error(f"trg: progress must be True, False or a callable, got {progress!r}")
    try:
        reports = _tessel.trg(betas, model, q, float(field), bool(susceptibility), chi,
                              0 if steps_auto else steps, steps_auto, grad, second, second_mode, mode,
                              algorithm, None if btrg_k is None else float(btrg_k), bool(cft),
                              checkpoint, order, svd, width,
                              explicit,
                              repeat, float(eps), check, callback)
    except Error as e:
        raise type(e)(_python_option_names(str(e))) from None
    finally:
        if callback is not None and hasattr(callback, "close"):
            callback.close()
    # A failed β comes back as its error message; the others as their reports.
    failed = [(x, r) for x, r in zip(betas, reports) if isinstance(r, str)]
    if failed:
        if len(betas) == 1:
            error = Error(_python_option_names(failed[0][1].removeprefix("error: ")))
        else:
            error = Error(f"trg: {len(failed)} of {len(betas)} beta values failed "
                          f"(the other results are in this error's .reports):\n" +
                          "\n".join(f"  beta = {x!r}: {_python_option_names(r.removeprefix('error: '))}"
                                    for x, r in failed))
        error.reports = [None if isinstance(r, str) else r for r in reports]
        raise error
    return reports[0] if scalar else reports


class _progress_display:
    """``trg(progress=True)``: a tqdm bar per sweep if tqdm is installed, else a line on stderr."""

    def __init__(self) -> None:
        try:
            from tqdm.auto import tqdm  # optional
        except ImportError:
            tqdm = None
        self._tqdm, self._bar, self._key = tqdm, None, None

    def __call__(self, beta: float, phase: str, step: int, steps: int, at_most: bool) -> None:
        key = (beta, phase)
        if self._tqdm is not None:
            if key != self._key:
                self.close()
                self._bar = self._tqdm(total=steps, desc=f"beta {beta:g}: {phase}", leave=False)
                self._key = key
            self._bar.update(1)
            return
        self._key = key
        if not sys.stderr.isatty():
            return  # no control codes in a log file
        bound = f"at most {steps}" if at_most else str(steps)
        sys.stderr.write(f"\r\033[Ktessel.trg: beta {beta:g}: {phase} step {step}/{bound}")
        sys.stderr.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self._tqdm is None and self._key is not None and sys.stderr.isatty():
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


# The library reports option errors with the command line's flag names; trg's keyword
# arguments are the same names with '_' for '-' (--btrg-k is btrg_k).
_FLAG = re.compile(r"--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)\b")


def _python_option_names(message: str) -> str:
    return _FLAG.sub(lambda m: m.group(1).replace("-", "_"), message).replace("ranks auto", 'ranks="auto"')


def _check_int(name: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise Error(f"{name} must be an integer, got {v!r}")
    if not -2**63 <= int(v) < 2**63:
        shown = repr(v) if len(repr(v)) <= 24 else f"{repr(v)[:12]}...({len(repr(v))} digits)"
        raise Error(f"{name} = {shown} is out of range (a 64-bit integer)")


def _check_str(name: str, v: Any) -> None:
    if not isinstance(v, str):
        raise Error(f"{name} must be a string, got {v!r}")


def op_table() -> list[dict[str, Any]]:
    """The op table (ir/ops.def): per op ``name``, ``operands`` (-1 = variadic),
    ``results``, ``attrs`` [(name, kind, default or None)], ``traits`` (``elementwise``,
    ``cheap``, ``save-svd``; ir/ops.def says what each means), ``summary`` and ``has_vjp``.
    ``tessel.ops`` has one function of the same name per op."""
    return _tessel.op_table()


def describe_passes() -> str:
    """Every registered pass with its options (``tessel opt --list-passes``)."""
    return _tessel.describe_passes()


def blas_info() -> str:
    """The BLAS/LAPACK library tessel loaded (OpenBLAS's config) and its thread count."""
    return _tessel.blas_info()
