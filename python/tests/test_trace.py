"""The tracing front end: one function per op of the op table, operators, located errors."""
import numpy as np
import pytest

import tessel
from tessel import ops

from conftest import run

rng = np.random.default_rng(7)
A = rng.uniform(0.5, 1.5, size=(3, 4))
B = rng.uniform(0.5, 1.5, size=(3, 4))
V = rng.uniform(-2, 2, size=(4,))


def evaluate(fn, *arrays, width=1):
    """fn traced on the arrays' shapes, run on the engine and on the reference evaluator
    (which must agree); returns the outputs as a list."""
    p = tessel.trace(fn, *[np.shape(a) for a in arrays])
    out = run(p, list(arrays), width=width)
    ref = tessel.evaluate_reference(p, list(arrays))
    for k in out:
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-13, atol=1e-13)
    return list(out.values())


# (ops function, inputs, numpy equivalent)
CASES = {
    "constant": (lambda a: a + ops.constant([[1.0, 2, 3, 4]] * 3), [A], lambda a: a + [[1.0, 2, 3, 4]] * 3),
    "iota": (lambda a: a * ops.iota((3, 4), 1), [A], lambda a: a * np.arange(4.0)),
    "neg": (ops.neg, [A], np.negative),
    "exp": (ops.exp, [A], np.exp),
    "log": (ops.log, [A], np.log),
    "sqrt": (ops.sqrt, [A], np.sqrt),
    "sin": (ops.sin, [V], np.sin),
    "cos": (ops.cos, [V], np.cos),
    "tanh": (ops.tanh, [V], np.tanh),
    "abs": (ops.abs, [V], np.abs),
    "sign": (ops.sign, [V], np.sign),
    "add": (ops.add, [A, B], np.add),
    "sub": (ops.sub, [A, B], np.subtract),
    "mul": (ops.mul, [A, B], np.multiply),
    "div": (ops.div, [A, B], np.divide),
    "maximum": (ops.maximum, [A, B], np.maximum),
    "compare": (lambda a, b: ops.compare(a, b, "LT"), [A, B], lambda a, b: (a < b).astype(float)),
    "select": (lambda a, b: ops.select(ops.compare(a, b, "GT"), a, b), [A, B], np.maximum),
    "reduce_sum": (lambda a: ops.reduce_sum(a, [1]), [A], lambda a: a.sum(axis=1)),
    "reduce_max": (lambda a: ops.reduce_max(a, [0]), [A], lambda a: a.max(axis=0)),
    "broadcast_in_dim": (lambda v: ops.broadcast_in_dim(v, (3, 4), [1]), [V], lambda v: np.broadcast_to(v, (3, 4))),
    "reshape": (lambda a: ops.reshape(a, (2, 6)), [A], lambda a: a.reshape(2, 6)),
    "transpose": (lambda a: ops.transpose(a, (1, 0)), [A], lambda a: a.T),
    "slice": (lambda a: ops.slice(a, (1, 0), (3, 2)), [A], lambda a: a[1:3, 0:2]),
    "pad": (lambda a: ops.pad(a, (1, 0), (0, 2)), [A], lambda a: np.pad(a, ((1, 0), (0, 2)))),
    "dot_general": (lambda a, b: ops.dot_general(a, b, lhs_contract=[1], rhs_contract=[1]), [A, B],
                    lambda a, b: a @ b.T),
    "einsum": (lambda a, b, v: ops.einsum("ij,kj,j->ik", a, b, v), [A, B, V],
               lambda a, b, v: np.einsum("ij,kj,j->ik", a, b, v)),
    "svd": (lambda a: ops.svd(a)[1], [A], lambda a: np.linalg.svd(a, compute_uv=False)),
    "svd_topk": (lambda a: ops.svd_topk(a, 2)[1], [A], lambda a: np.linalg.svd(a, compute_uv=False)[:2]),
    "eigh": (lambda a: ops.eigh(a @ a.T)[0], [A], lambda a: np.linalg.eigvalsh(a @ a.T)),
    "qr": (lambda a: ops.qr(a)[1], [A], lambda a: np.linalg.qr(a)[1]),
    "triangular_solve": (lambda a, b: ops.triangular_solve(a @ a.T, b, lower=False), [A, B],
                         lambda a, b: np.linalg.solve(np.triu(a @ a.T), b)),
    "sylvester_solve": (lambda a, b: ops.sylvester_solve(a @ a.T, b.T @ b + ops.eye(4), a), [A, B],
                        lambda a, b: np.linalg.solve(np.kron(a @ a.T, np.eye(4)) + np.kron(np.eye(3), b.T @ b + np.eye(4)),
                                                     a.ravel()).reshape(3, 4)),
    "stop_gradient": (ops.stop_gradient, [A], lambda a: a),
    "call": (lambda a, b: ops.call(lambda x, y: ops.tanh(x) * y, a, b), [A, B],
             lambda a, b: np.tanh(a) * b),
    # cumulative product of the rows, scaled by a captured tensor each step
    "scan": (lambda a, v: ops.scan(lambda c, row: (c * row, c * row * v), ops.ones(4), a)[1],
             [A, V], lambda a, v: np.cumprod(a, axis=0) * v),
}


def test_every_op_of_the_op_table_has_a_function():
    names = [o["name"] for o in tessel.op_table()]
    assert "svd_topk_complement" in names and "einsum" in names
    for name in names:
        assert callable(getattr(ops, name)), name
        assert getattr(ops, name).__doc__, name
        assert name in ops.__all__
    # every op except the complement (checked by its own test) is checked against numpy
    assert set(names) - set(CASES) == {"svd_topk_complement"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_against_numpy(name):
    fn, arrays, ref = CASES[name]
    (got,) = evaluate(fn, *arrays)
    np.testing.assert_allclose(got, ref(*arrays), rtol=1e-13, atol=1e-14)


def fix_signs(cols, rows):
    """Negates each column of `cols` whose largest-magnitude entry is negative, and that row
    of `rows`: one sign convention for the engine's factors (LAPACK) and the reference
    evaluator's (Eigen)."""
    flip = np.where(cols[np.argmax(np.abs(cols), axis=0), np.arange(cols.shape[1])] < 0, -1.0, 1.0)
    return cols * flip, rows * flip[:, None]


def test_svd_factors_reconstruct():
    p = tessel.trace(lambda a: ops.svd(a), A.shape)
    u, s, vt = run(p, [A]).values()
    ru, rs, rvt = tessel.evaluate_reference(p, [A]).values()
    np.testing.assert_allclose(s, rs, rtol=1e-14)
    for x, y in zip(fix_signs(u, vt), fix_signs(ru, rvt)):
        np.testing.assert_allclose(x, y, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose((u * s) @ vt, A, rtol=1e-13)
    np.testing.assert_allclose((ru * rs) @ rvt, A, rtol=1e-13)
    # svd_topk's singular vectors may differ in sign from gesdd's (the reference's)
    p = tessel.trace(lambda a: ops.svd_topk(a, 3), A.shape)
    u, s, vt = run(p, [A]).values()
    np.testing.assert_allclose((u * s) @ vt, A, rtol=1e-12)


def test_svd_topk_complement_is_orthogonal_to_the_kept_triplets():
    m = rng.standard_normal((8, 6))
    ub = rng.standard_normal((8, 2))
    vtb = rng.standard_normal((2, 6))

    def f(a, ubar, vtbar):
        u, s, vt = ops.svd_topk(a, 3)
        x, yt = ops.svd_topk_complement(a, u, s, vt, ubar, vtbar)
        return {"x": x, "yt": yt, "u": u, "vt": vt, "s": s}

    out = run(tessel.trace(f, m.shape, ub.shape, vtb.shape), [m, ub, vtb])
    x, yt, u, vt, s = out["x"], out["yt"], out["u"], out["vt"], out["s"]
    assert x.shape == (8, 2) and yt.shape == (2, 6)
    np.testing.assert_allclose(u.T @ x, 0, atol=1e-12)
    np.testing.assert_allclose(yt @ vt.T, 0, atol=1e-12)
    # X·S − A⊥·Y = (I − UUᵀ)·Ū with A⊥ = A − U diag(s) Vt, S = diag(s[:2])
    a_perp = m - (u * s) @ vt
    lhs = x * s[:2] - a_perp @ yt.T
    np.testing.assert_allclose(lhs, ub - u @ (u.T @ ub), atol=1e-9)


def test_operators_and_numbers():
    def f(a, b):
        return {"r": (2.0 * a - b / 4 + 1) ** 3, "c": (a > b) + (a <= 1.0), "m": -abs(a) @ b.T, "n": a ** 0}
    r, c, m, n = evaluate(f, A, B)
    np.testing.assert_allclose(r, (2 * A - B / 4 + 1) ** 3, rtol=1e-13)
    np.testing.assert_array_equal(c, (A > B).astype(float) + (A <= 1.0))
    np.testing.assert_allclose(m, -np.abs(A) @ B.T, rtol=1e-13)
    np.testing.assert_array_equal(n, np.ones_like(A))
    # numpy scalars and arrays on the left defer to the Tensor
    (x,) = evaluate(lambda a: np.float64(3.0) * a + np.ones((3, 4)), A)
    np.testing.assert_allclose(x, 3 * A + 1)


def test_methods_indexing_and_numpy_spellings():
    def f(a, v):
        return {
            "i": a[1, 1:3],
            "e": a[..., -1],
            "s": a.sum(axis=0) + a.max(1).sum(),
            "t": a.T.reshape(-1),
            "w": ops.where(a > 1.0, a, 0.0),
            "b": ops.broadcast_to(v, (3, 4)) * a,
            "k": ops.concatenate([a, a[:1]], axis=0),
            "h": ops.cosh(v) - ops.sinh(v),
        }
    i, e, s, t, w, b, k, h = evaluate(f, A, V)
    np.testing.assert_array_equal(i, A[1, 1:3])
    np.testing.assert_array_equal(e, A[..., -1])
    np.testing.assert_allclose(s, A.sum(axis=0) + A.max(1).sum(), rtol=1e-14)
    np.testing.assert_array_equal(t, A.T.reshape(-1))
    np.testing.assert_array_equal(w, np.where(A > 1.0, A, 0.0))
    np.testing.assert_allclose(b, V * A, rtol=1e-15)
    np.testing.assert_array_equal(k, np.concatenate([A, A[:1]]))
    np.testing.assert_allclose(h, np.exp(-V), rtol=1e-13)


def test_names_and_locations():
    def lnz(beta, field):
        return {"value": (beta * field).named("product").sum()}
    p = tessel.trace(lnz, (), (3,))
    text = str(p)
    assert text.startswith("program @lnz(%beta: f64[], %field: f64[3])")
    assert "%product = mul" in text
    assert 'loc("test_trace.py:' in text and ' in lnz")' in text
    assert [o.name for o in p.outputs] == ["value"]
    assert p.compile_ms > 0
    q = tessel.trace(lambda a, b: a + b, 2, 2, names=["u", "w"], name="pair")
    assert str(q).startswith("program @pair(%u: f64[2], %w: f64[2])")


def test_shape_error_names_the_op_both_shapes_and_the_python_line():
    def f(a, v):
        return a * v  # line of the error

    with pytest.raises(tessel.ShapeError) as e:
        tessel.trace(f, (3, 4), (5,))
    msg = str(e.value)
    assert "mul" in msg and "f64[3,4]" in msg and "f64[5]" in msg
    assert "cannot be broadcast together" in msg
    assert "test_trace.py:" in msg and "in f" in msg


@pytest.mark.parametrize("fn,shapes,match", [
    (lambda a: ops.reshape(a, (5, 5)), [(3, 4)], "reshape"),
    (lambda a: ops.reshape(a, (-1, 5)), [(3, 4)], "cannot infer -1"),
    (lambda a: ops.transpose(a, (0, 0)), [(3, 4)], "transpose"),
    (lambda a: ops.slice(a, (0, 0), (4, 4)), [(3, 4)], "slice"),
    (lambda a: ops.einsum("ij,jk->ik", a, a), [(3, 4)], "einsum"),
    (lambda a: ops.svd_topk(a, 7), [(3, 4)], "svd_topk"),
    (lambda a: ops.sum(a, axis=2), [(3, 4)], "axis 2 is out of range"),
    (lambda a: a[0, 0, 0], [(3, 4)], "3 indices for a tensor of rank 2"),
    (lambda a: a[::-1], [(3, 4)], "negative step -1"),
    (lambda a: a[[0, 2]], [(3, 4)], "advanced indexing"),
    (lambda a: ops.add(a, a[:, :3]), [(3, 4)], "cannot be broadcast together"),
    (lambda a: ops.compare(a, a, "SIDEWAYS"), [(3, 4)], "compare"),
])
def test_bad_ops_raise_errors_naming_them(fn, shapes, match):
    with pytest.raises(tessel.Error, match=match):
        tessel.trace(fn, *shapes)


def test_misuse_of_traced_tensors():
    with pytest.raises(tessel.Error, match="no value while tracing"):
        tessel.trace(lambda a: a if a > 0 else -a, (2,))
    with pytest.raises(tessel.Error, match="no value while tracing"):
        tessel.trace(lambda a: float(a.sum()), (2,))
    with pytest.raises(tessel.Error, match="returned no outputs"):
        tessel.trace(lambda a: {}, (2,))
    with pytest.raises(tessel.Error, match="not a Tensor"):
        tessel.trace(lambda a: (a, 3.0), (2,))
    kept = []
    tessel.trace(lambda a: kept.append(a) or a, (2,))
    with pytest.raises(tessel.Error, match="trace that has finished"):
        _ = kept[0] + 1.0
    with pytest.raises(tessel.Error, match="outside tessel.trace"):
        ops.constant(1.0)
    with pytest.raises(tessel.Error, match="two different traces"):
        other = []
        tessel.trace(lambda a: other.append(a) or a, (2,))
        tessel.trace(lambda b: b + other[0], (2,))
    with pytest.raises(tessel.Error, match="expected real numbers"):
        tessel.trace(lambda a: a + np.array([1j, 2j]), (2,))


def test_tensors_kept_after_the_trace_stay_readable_but_take_no_ops():
    kept = []
    tessel.trace(lambda x: kept.append(x) or ops.sum(x), (3,))
    t = kept[0]
    assert t.shape == (3,) and t.ndim == 1 and t.size == 3 and t.name == "x"
    assert repr(t) == "Tensor(%x: f64[3])"
    for use in (lambda: ops.sum(t), lambda: t[0], lambda: t.T, lambda: t * 2.0, lambda: -t):
        with pytest.raises(tessel.Error, match="trace that has finished .*@<lambda>|trace that has finished"):
            use()


def test_none_and_arrays_as_operands():
    with pytest.raises(tessel.Error, match="expected real numbers"):
        tessel.trace(lambda x: ops.slice(None, [0], [1]), (3,))
    with pytest.raises(tessel.Error, match="expected real numbers"):
        tessel.trace(lambda x: ops.dot_general(x, None, lhs_contract=[0], rhs_contract=[0]), (3,))
    # an array where a Tensor is expected is a constant
    (y,) = evaluate(lambda x: ops.dot_general(x, np.arange(3.0), lhs_contract=[0], rhs_contract=[0]), V[:3])
    assert y == pytest.approx(V[:3] @ np.arange(3.0))


def test_equality_operators_compare_elementwise():
    x = np.array([0.0, 1.0, 2.0])
    (a, b) = evaluate(lambda x: (ops.where(x == 0.0, 1.0, x), (x != 1.0) * 1.0), x)
    np.testing.assert_array_equal(a, [1.0, 1.0, 2.0])
    np.testing.assert_array_equal(b, [1.0, 0.0, 1.0])
    kept = []
    tessel.trace(lambda x: kept.append((x == None, x != "a", {x: 1})) or x * 1.0, (2,))  # noqa: E711
    assert kept[0][0] is False and kept[0][1] is True  # identity for non-numbers; hashable


@pytest.mark.parametrize("fn,match", [
    (lambda x: {"y": x, "z": -x}, "is the input 'x' itself"),
    (lambda x: {"a": -x, "b": None}, "not a Tensor"),
    (lambda x: (lambda n: {"a": n, "b": n})(-x), "same tensor as output 'b' and as output 'a'"),
    (lambda x: (x, x), "same tensor"),
    (lambda x: {"x": -x}, "name of an input"),
])
def test_output_names_are_checked(fn, match):
    with pytest.raises(tessel.Error, match=match):
        tessel.trace(fn, (3,))


def test_output_names():
    p = tessel.trace(lambda x: {"x": x, "neg": -x}, (3,))
    assert [o.name for o in p.outputs] == ["x", "neg"] and [i.name for i in p.inputs] == ["x"]
    p = tessel.trace(lambda x: (x, (-x).named("m")), (3,))
    assert [o.name for o in p.outputs] == ["x", "m"]


def test_tracing_in_threads():
    import threading
    errors, programs = [], {}

    def work(k):
        try:
            for _ in range(20):
                p = tessel.trace(lambda x: x + ops.full((4,), float(k)) + ops.zeros(4), (4,))
                programs[k] = run(p, [np.zeros(4)])["out0"]
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k in range(4):
        np.testing.assert_array_equal(programs[k], np.full(4, float(k)))


@pytest.mark.parametrize("fn,shapes,match", [
    (lambda a: ops.add(a, ops.zeros(4)), [(3,)], r"add.*f64\[3\].*f64\[4\].*test_trace.py:\d+ in <lambda>"),
    (lambda a: ops.reshape(a, (4,)), [(3,)], r"reshape.*test_trace.py:\d+"),
    (lambda a: ops.iota([2 ** 64], 0), [(3,)], "out of the int64 range"),
    (lambda a: ops.iota((3, 4), 5), [(3,)], "dim 5 is out of range"),
    (lambda a: ops.matmul(a, a), [(2, 3, 4)], "matrices or vectors"),
    (lambda a: ops.constant(np.array([1 + 2j])), [(3,)], "expected real numbers"),
    (lambda a: ops.constant(["1", "2"]), [(3,)], "expected real numbers"),
    (lambda a: a + np.datetime64(1, "s"), [(3,)], "expected real numbers"),
])
def test_more_errors(fn, shapes, match):
    with pytest.raises(tessel.Error, match=match):
        tessel.trace(fn, *shapes)


def test_input_shapes_are_checked():
    with pytest.raises(tessel.ShapeError, match="rank 9 is above"):
        tessel.trace(lambda a: a, (1,) * 9)
    with pytest.raises(tessel.Error, match="out of the int64 range"):
        tessel.trace(lambda a: a, (2 ** 63,))
    with pytest.raises(tessel.Error, match="sequence of ints"):
        tessel.trace(lambda a: a, (np.bool_(True),))
    with pytest.raises(tessel.ShapeError, match="negative"):
        tessel.trace(lambda a: a, (-1,))


def test_numpy_shapes_and_transposes():
    z = np.zeros((2, 3, 4))

    def f(a):
        return {"t0": a.transpose(0, 2, 1), "t": a.transpose(), "z": ops.zeros(4) + ops.ones(4) + ops.full(4, 2.0),
                "b": ops.broadcast_to(a[0, 0], 4) if False else ops.broadcast_to(a[0, 0, 0], 4)}
    t0, t, zz, b = evaluate(f, z)
    assert t0.shape == (2, 4, 3) and t.shape == (4, 3, 2)
    np.testing.assert_array_equal(zz, np.full(4, 3.0))
    assert b.shape == (4,)
    with pytest.raises(tessel.Error, match="transpose"):
        tessel.trace(lambda a: a.transpose(0), (2, 3, 4))


def test_len_iteration_and_concatenate_errors():
    (total,) = evaluate(lambda a: builtins_sum(list(a)) + len(a), A)
    np.testing.assert_allclose(total, A.sum(axis=0) + 3, rtol=1e-15)
    with pytest.raises(TypeError, match="rank-0"):
        tessel.trace(lambda a: len(a.sum()), (3,))
    with pytest.raises(tessel.Error, match=r"concatenate: shapes \(3, 2\) and \(4, 3\) differ outside axis 0"):
        tessel.trace(lambda a, b: ops.concatenate([a, b]), (3, 2), (4, 3))


def builtins_sum(xs):
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    return total


def test_trace_keeps_a_given_name_and_refuses_digit_only_output_names():
    # A given program name is used as it is (quoted in the IR when not bare); a lambda's
    # default "<lambda>" becomes "main".
    p = tessel.trace(lambda x: ops.sum(x), (2,), name="a b")
    assert p.name == "a b"
    assert str(p).startswith('program @"a b"(')
    assert tessel.Program.parse(str(p)).name == "a b"
    assert tessel.trace(lambda x: ops.sum(x), (2,)).name == "main"
    with pytest.raises(tessel.Error, match="name must be a non-empty string"):
        tessel.trace(lambda x: ops.sum(x), (2,), name="")
    # An all-digit output name is the IR's spelling of an unnamed value: refused, not
    # silently renamed "out0".
    with pytest.raises(tessel.Error, match=r"output name '12' of main is all digits.*e\.g\. 'out12'"):
        tessel.trace(lambda x: {"12": ops.sum(x)}, (2,))
    p = tessel.trace(lambda x: {"a b": ops.sum(x), "x2": ops.sum(x * x)}, (2,))
    assert [o.name for o in p.outputs] == ["a b", "x2"]
