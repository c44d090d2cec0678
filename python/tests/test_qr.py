"""The qr, triangular_solve and sylvester_solve ops from Python: values against numpy and scipy's
definition, and the reverse rules against 5-point finite differences for tall, square
and wide matrices, every triangular_solve flag, extreme scales and second order."""
import numpy as np
import pytest

import tessel
from tessel import ops

from conftest import central_difference, run


def rel_err(got, want):
    return np.max(np.abs(got - want)) / np.max(np.abs(want))


SHAPES = [(6, 3), (4, 4), (3, 6)]


@pytest.mark.parametrize("shape", SHAPES)
def test_qr_matches_numpy(shape):
    a = np.random.default_rng(1).standard_normal(shape)
    out = run(tessel.trace(lambda m: ops.qr(m), shape), {"m": a})
    q, r = out["out0"], out["out1"]
    q_np, r_np = np.linalg.qr(a)
    assert rel_err(q, q_np) < 1e-13 and rel_err(r, r_np) < 1e-13  # LAPACK's signs, as numpy's
    np.testing.assert_allclose(q @ r, a, atol=1e-14 * np.max(np.abs(a)) * 10)
    np.testing.assert_allclose(q.T @ q, np.eye(min(shape)), atol=1e-14)
    assert np.all(np.tril(r, -1) == 0)
    # np.linalg.qr on a traced Tensor records the same op
    p = tessel.trace(lambda m: np.linalg.qr(m)[1], shape)
    assert p.op_counts["qr"] == 1


def qr_loss(m, b, c):
    q, r = ops.qr(m)
    return ops.sum(q * b) + ops.sum(ops.sin(r) * c)


@pytest.mark.parametrize("shape", SHAPES)
def test_qr_gradient(shape):
    rng = np.random.default_rng(2)
    a = rng.standard_normal(shape)
    k = min(shape)
    b, c = rng.standard_normal((shape[0], k)), rng.standard_normal((k, shape[1]))
    p = tessel.trace(qr_loss, shape, b.shape, c.shape)
    g = run(tessel.grad(p, wrt="m"), {"m": a, "b": b, "c": c})["grad_m"]
    fd = central_difference(lambda m: float(run(p, {"m": m, "b": b, "c": c})["out0"]), a, h=1e-4)
    assert rel_err(g, fd) <= 1e-8


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("scale", [1e150, 1e-150])
def test_qr_gradient_at_extreme_scales(shape, scale):
    # L(c·A) reads Q and R/c: its gradient at c·A is the gradient at A over c.
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape)
    k = min(shape)
    b, c = rng.standard_normal((shape[0], k)), rng.standard_normal((k, shape[1]))

    def loss(m, b, c, s=scale):
        q, r = ops.qr(m)
        return ops.sum(q * b) + ops.sum(ops.sin(r * (1.0 / s)) * c)

    p = tessel.trace(loss, shape, b.shape, c.shape)
    g = run(tessel.grad(p, wrt="m"), {"m": a * scale, "b": b, "c": c})["grad_m"]
    p1 = tessel.trace(lambda m, b, c: loss(m, b, c, 1.0), shape, b.shape, c.shape)
    g1 = run(tessel.grad(p1, wrt="m"), {"m": a, "b": b, "c": c})["grad_m"]
    assert np.all(np.isfinite(g))
    assert rel_err(g * scale, g1) <= 1e-13
    fd = central_difference(lambda m: float(run(p, {"m": m, "b": b, "c": c})["out0"]), a * scale,
                            h=1e-4 * scale)
    assert rel_err(g, fd) <= 1e-8


@pytest.mark.parametrize("shape", SHAPES)
def test_qr_second_derivative(shape):
    rng = np.random.default_rng(4)
    a, d = rng.standard_normal(shape), rng.standard_normal(shape)
    k = min(shape)
    b, c = rng.standard_normal((shape[0], k)), rng.standard_normal((k, shape[1]))

    def along(t, a, d, b, c):
        return qr_loss(a + ops.broadcast_to(t, shape) * d, b, c)

    p = tessel.trace(along, (), shape, shape, b.shape, c.shape)
    g1 = tessel.grad(p, wrt="t", keep_outputs=False)
    g2 = tessel.grad(g1, wrt="t", keep_outputs=False)
    inputs = {"a": a, "d": d, "b": b, "c": c}
    first = lambda t: float(run(g1, {"t": np.array(t), **inputs})["grad_t"])
    second = float(run(g2, {"t": np.array(0.0), **inputs})["grad2_t"])
    h = 1e-4
    fd = (-first(2 * h) + 8 * first(h) - 8 * first(-h) + first(-2 * h)) / (12 * h)
    assert abs(second - fd) <= 1e-6 * abs(fd)


def test_qr_zero_cotangent_contributes_exactly_zero():
    a = np.random.default_rng(5).standard_normal((5, 3))
    ct_r = np.random.default_rng(6).standard_normal((3, 3))
    both = tessel.vjp(tessel.trace(lambda m: ops.qr(m), a.shape), wrt="m")
    only_r = tessel.vjp(tessel.trace(lambda m: ops.qr(m)[1], a.shape), wrt="m")
    g_both = run(both, {"m": a, "ct_out0": np.zeros((5, 3)), "ct_out1": ct_r})["grad_m"]
    g_r = run(only_r, {"m": a, "ct_out0": ct_r})["grad_m"]
    np.testing.assert_array_equal(g_both, g_r)


def reference_solve(a, b, left, lower, trans):
    t = np.tril(a) if lower else np.triu(a)
    t = t.T if trans else t
    return np.linalg.solve(t, b) if left else np.linalg.solve(t.T, b.T).T


FLAGS = [(left, lower, trans) for left in (True, False) for lower in (True, False) for trans in (False, True)]


@pytest.mark.parametrize("left,lower,trans", FLAGS)
def test_triangular_solve_values_and_gradients(left, lower, trans):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((4, 4)) + 4 * np.eye(4)
    b = rng.standard_normal((4, 3) if left else (3, 4))
    w = rng.standard_normal(b.shape)

    def loss(a, b, w):
        x = ops.triangular_solve(a, b, left_side=left, lower=lower, transpose_a=trans)
        return {"x": x, "loss": ops.sum(ops.sin(x) * w)}

    p = tessel.trace(loss, a.shape, b.shape, w.shape)
    out = run(p, {"a": a, "b": b, "w": w})
    assert rel_err(out["x"], reference_solve(a, b, left, lower, trans)) < 1e-14
    scalar = tessel.trace(lambda a, b, w: loss(a, b, w)["loss"], a.shape, b.shape, w.shape)
    g = run(tessel.grad(scalar, wrt=["a", "b"]), {"a": a, "b": b, "w": w})
    f = lambda **kv: float(run(scalar, {"a": a, "b": b, "w": w, **kv})["out0"])
    fd_a = central_difference(lambda m: f(a=m), a, h=1e-5)
    fd_b = central_difference(lambda m: f(b=m), b, h=1e-5)
    assert rel_err(g["grad_a"], fd_a) <= 1e-8
    assert rel_err(g["grad_b"], fd_b) <= 1e-8
    # only the triangle the op reads gets a cotangent
    untouched = np.triu(g["grad_a"], 1) if lower else np.tril(g["grad_a"], -1)
    assert np.all(untouched == 0)


def test_triangular_solve_errors():
    with pytest.raises(tessel.ShapeError, match=r"B's rows \(3\) must match A's order \(4\)"):
        tessel.trace(lambda a, b: ops.triangular_solve(a, b), (4, 4), (3, 2))
    p = tessel.trace(lambda a, b: ops.triangular_solve(a, b), (2, 2), (2, 1))
    with pytest.raises(tessel.Error, match=r"has a zero on its diagonal \(A\[1\]\[1\]\): the triangular system is singular"):
        run(p, {"a": np.array([[1.0, 0.0], [2.0, 0.0]]), "b": np.ones((2, 1))})


def sylvester_reference(a, b, c):
    """S_a·X + X·S_b = c as one linear system (row-major vec): np.linalg.solve, no
    eigendecomposition."""
    sa, sb = (a + a.T) / 2, (b + b.T) / 2
    n, m = c.shape
    k = np.kron(sa, np.eye(m)) + np.kron(np.eye(n), sb.T)
    return np.linalg.solve(k, c.ravel()).reshape(n, m)


def test_sylvester_solve_values_and_gradients_also_at_a_tie():
    # A's symmetric part with an exact double eigenvalue (2, 2, 5): its eigenvectors are not
    # unique, and a derivative through them (eigh's) would divide by the tie; the solve's
    # derivative is another solve and stays finite and equal to finite differences.
    rng = np.random.default_rng(5)
    q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    a = q @ np.diag([2.0, 2.0, 5.0]) @ q.T
    a = a + np.array([[0, 0.3, 0], [-0.3, 0, 0], [0, 0, 0]])  # an antisymmetric part, not read
    b = rng.standard_normal((2, 2)) + 3 * np.eye(2)
    c, w = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))

    def loss(a, b, c, w):
        return ops.sum(ops.sin(ops.sylvester_solve(a, b, c)) * w)

    p = tessel.trace(lambda a, b, c: ops.sylvester_solve(a, b, c), a.shape, b.shape, c.shape)
    assert rel_err(run(p, {"a": a, "b": b, "c": c})["out0"], sylvester_reference(a, b, c)) < 1e-14
    scalar = tessel.trace(loss, a.shape, b.shape, c.shape, w.shape, names=["a", "b", "c", "w"])
    g = run(tessel.grad(scalar, wrt=["a", "b", "c"]), {"a": a, "b": b, "c": c, "w": w})
    f = lambda **kv: float(run(scalar, {"a": a, "b": b, "c": c, "w": w, **kv})["out0"])
    for name, x in (("a", a), ("b", b), ("c", c)):
        fd = central_difference(lambda m: f(**{name: m}), x, h=1e-5)
        assert rel_err(g["grad_" + name], fd) <= 1e-8, name
    assert np.allclose(g["grad_a"], g["grad_a"].T, atol=0)  # the op reads A's symmetric part
    # Second order through the tie: grad of grad along a direction, against differences.
    t = rng.standard_normal(a.shape)
    t = (t + t.T) / 2
    along = tessel.trace(lambda s: loss(ops.constant(a) + s * ops.constant(t), ops.constant(b), ops.constant(c),
                                        ops.constant(w)), (), names=["s"])
    g2 = run(tessel.grad(tessel.grad(along, keep_outputs=False), keep_outputs=False), {"s": 0.0})["grad2_s"]
    h = 1e-3
    fs = [float(run(along, {"s": s})["out0"]) for s in (-2 * h, -h, 0.0, h, 2 * h)]
    fd2 = (-fs[0] + 16 * fs[1] - 30 * fs[2] + 16 * fs[3] - fs[4]) / (12 * h * h)
    assert abs(g2) > 1e-3
    assert g2 == pytest.approx(fd2, rel=1e-6)


def test_sylvester_solve_errors():
    with pytest.raises(tessel.ShapeError, match=r"sylvester_solve: C must be f64\[3,2\]"):
        tessel.trace(lambda a, b, c: ops.sylvester_solve(a, b, c), (3, 3), (2, 2), (2, 3))
    p = tessel.trace(lambda a, b, c: ops.sylvester_solve(a, b, c), (2, 2), (1, 1), (2, 1))
    with pytest.raises(tessel.Error, match=r"the equation is singular: an eigenvalue of A's symmetric part meets one of −B's"):
        run(p, {"a": np.diag([1.0, -1.0]), "b": np.ones((1, 1)), "c": np.ones((2, 1))})
    with pytest.raises(tessel.Error, match=r"B f64\[1,1\] holds NaN or inf; LAPACK dsyevd not called"):
        run(p, {"a": np.eye(2), "b": np.full((1, 1), np.nan), "c": np.ones((2, 1))})
