"""The eigh op from Python: values against numpy.linalg.eigh, numpy's dispatch and its
triangle convention, and the reverse rule against 5-point finite differences on random,
degenerate, rank-deficient and extreme-scale matrices, to second order."""
import numpy as np
import pytest

import tessel
from tessel import ops

from conftest import central_difference, run


def rel_err(got, want):
    return np.max(np.abs(got - want)) / np.max(np.abs(want))


def random_symmetric(n, seed):
    a = np.random.default_rng(seed).standard_normal((n, n))
    return (a + a.T) / 2


def with_spectrum(w, seed):
    """Q·diag(w)·Qᵀ for a random orthogonal Q (repeated entries of w: a degenerate
    eigenspace)."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((len(w), len(w))))
    s = q @ np.diag(w) @ q.T
    return (s + s.T) / 2


def eigh_of(a):
    prog = tessel.trace(lambda m: ops.eigh(m), a.shape)
    out = run(prog, {"m": a})
    return out["out0"], out["out1"]


def test_values_match_numpy_and_reconstruct():
    a = random_symmetric(7, 1)
    w, v = eigh_of(a)
    w_np, v_np = np.linalg.eigh(a)
    assert np.all(np.diff(w) >= 0)  # ascending, numpy's order
    assert rel_err(w, w_np) < 1e-14
    # the same eigenvectors up to their signs
    np.testing.assert_allclose(np.abs(np.sum(v * v_np, axis=0)), 1.0, rtol=1e-13)
    np.testing.assert_allclose(v @ np.diag(w) @ v.T, a, atol=1e-13 * np.max(np.abs(a)))
    np.testing.assert_allclose(v.T @ v, np.eye(7), atol=1e-14)


def test_the_symmetric_part_and_numpys_lower_triangle():
    a = np.random.default_rng(2).standard_normal((5, 5))  # not symmetric
    w, _ = eigh_of(a)
    assert rel_err(w, np.linalg.eigvalsh((a + a.T) / 2)) < 1e-14
    # np.linalg.eigh on a traced Tensor reads the lower triangle, as numpy does
    prog = tessel.trace(lambda m: np.linalg.eigh(m)[0], a.shape)
    assert rel_err(run(prog, {"m": a})["out0"], np.linalg.eigh(a)[0]) < 1e-14
    prog_u = tessel.trace(lambda m: ops.eigh(m, uplo="U")[0], a.shape)
    assert rel_err(run(prog_u, {"m": a})["out0"], np.linalg.eigh(a, UPLO="U")[0]) < 1e-14


def test_errors_name_the_shapes():
    with pytest.raises(tessel.ShapeError, match=r"eigh: operand must be a square matrix, got f64\[2,3\]"):
        tessel.trace(lambda m: ops.eigh(m)[0], (2, 3))
    with pytest.raises(tessel.Error, match="uplo must be 'L' or 'U'"):
        tessel.trace(lambda m: ops.eigh(m, uplo="X")[0], (2, 2))


def matrix_function_loss(m, b, c):
    """A loss of the eigenvalues and of V·diag(w·sin w)·Vᵀ against b (a matrix function),
    plus the projector on the two largest eigenvalues' space against c."""
    w, v = ops.eigh(m)
    n = v.shape[0]
    f = ops.matmul(v * ops.broadcast_to(w * ops.sin(w), (n, n)), ops.transpose(v))
    top = v[:, n - 2:]
    return ops.sum(w * w) + ops.sum(f * b) + ops.sum(ops.matmul(top, ops.transpose(top)) * c)


def degenerate_space_loss(m, b, c, k=3):
    """A loss the rule differentiates exactly at a tie among the k lowest eigenvalues: a
    symmetric function of the eigenvalues, the projector on the k lowest eigenvectors'
    space (all of a degenerate eigenspace) against b, and the projector on the two
    largest against c. (A matrix function V·diag(g(w))·Vᵀ with g' ≠ 0 on a degenerate
    space is smooth too, but its derivative there needs g'(w) between eigenvectors of
    the space, which the cotangents w̄, V̄ do not carry at a tie: write g(S) with ops.)"""
    w, v = ops.eigh(m)
    n = v.shape[0]
    low, top = v[:, :k], v[:, n - 2:]
    return (ops.sum(ops.sin(w)) + ops.sum(w * w) + ops.sum(ops.matmul(low, ops.transpose(low)) * b)
            + ops.sum(ops.matmul(top, ops.transpose(top)) * c))


def check_gradient(a, loss=matrix_function_loss, tol=1e-8, seed=3):
    n = a.shape[0]
    rng = np.random.default_rng(seed)
    b, c = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    p = tessel.trace(loss, (n, n), (n, n), (n, n))
    g = run(tessel.grad(p, wrt="m"), {"m": a, "b": b, "c": c})["grad_m"]
    fd = central_difference(lambda m: float(run(p, {"m": m, "b": b, "c": c})["out0"]), a, h=1e-4)
    assert rel_err(g, fd) <= tol
    return g


def test_gradient_random_matrix():
    check_gradient(random_symmetric(6, 4))


def test_gradient_symmetric_whatever_the_operand():
    a = np.random.default_rng(5).standard_normal((5, 5))
    g = check_gradient(a)
    np.testing.assert_allclose(g, g.T, atol=1e-15 * np.max(np.abs(g)))


def test_gradient_at_a_degenerate_eigenvalue():
    # a triple eigenvalue 1 (the two largest, 2 and 3, stay separated from it)
    check_gradient(with_spectrum(np.array([1.0, 1.0, 1.0, 2.0, 3.0]), 6), degenerate_space_loss)


def test_gradient_rank_deficient():
    x = np.random.default_rng(7).standard_normal((6, 2))
    a = x @ x.T  # rank 2: eigenvalue 0 four times
    check_gradient(a)


@pytest.mark.parametrize("scale", [1e150, 1e-150])
@pytest.mark.parametrize("spectrum", [[0.5, 1.0, 1.5, 2.0], [0.5, 0.5, 0.5, 2.0]])
def test_gradient_extreme_scales(scale, spectrum):
    # L(c·A) = L₁(A) for a loss that reads w/c: its gradient at c·A is L₁'s at A divided
    # by c (eigh works at the matrix's own scale, so nothing over- or underflows), and
    # equals the finite differences there. Distinct, and a triple eigenvalue.
    a = with_spectrum(np.array(spectrum), 8)
    n = a.shape[0]
    rng = np.random.default_rng(9)
    b, c = rng.standard_normal((n, n)), rng.standard_normal((n, n))

    def loss(m, b, c, scale=scale):
        w, v = ops.eigh(m)
        ws = w * (1.0 / scale)
        low, top = v[:, :3], v[:, n - 1:]
        return (ops.sum(ops.sin(ws)) + ops.sum(ws * ws) + ops.sum(ops.matmul(low, ops.transpose(low)) * b)
                + ops.sum(ops.matmul(top, ops.transpose(top)) * c))

    p = tessel.trace(loss, (n, n), (n, n), (n, n))
    g = run(tessel.grad(p, wrt="m"), {"m": a * scale, "b": b, "c": c})["grad_m"]
    fd = central_difference(lambda m: float(run(p, {"m": m, "b": b, "c": c})["out0"]), a * scale,
                            h=1e-4 * scale)
    assert np.all(np.isfinite(g))
    assert rel_err(g, fd) <= 1e-8
    p1 = tessel.trace(lambda m, b, c: loss(m, b, c, 1.0), (n, n), (n, n), (n, n))
    g1 = run(tessel.grad(p1, wrt="m"), {"m": a, "b": b, "c": c})["grad_m"]
    assert rel_err(g * scale, g1) <= 1e-13


@pytest.mark.parametrize("spectrum", [None, [1.0, 1.001, 2.0, 3.0, 3.5]])
def test_second_derivative(spectrum):
    # d²/dt² L(A + t·D) at t = 0 by grad of grad, against a 5-point difference of the
    # first derivative (the AD one): a random matrix and a close pair (gap 1e-3), for a
    # loss of the eigenvalues and of the projectors on the two lowest and on the largest.
    # (At an exact tie the gradient of Σ sin w_i is the matrix function cos S, whose
    # derivative needs the divided difference −sin w between the tied eigenvectors: the
    # cotangents do not carry it, and that block of the Hessian is missed: −14.744 for
    # −14.774 on the spectrum [1, 1, 2, 3, 3.5]; see ops.eigh.)
    a = random_symmetric(5, 10) if spectrum is None else with_spectrum(np.array(spectrum), 11)
    rng = np.random.default_rng(12)
    d, b, c = random_symmetric(5, 13), rng.standard_normal((5, 5)), rng.standard_normal((5, 5))

    def along(t, a, d, b, c):
        m = a + ops.broadcast_to(t, (5, 5)) * d
        w, v = ops.eigh(m)
        low, top = v[:, :2], v[:, 4:]
        return (ops.sum(ops.sin(w)) + ops.sum(ops.matmul(low, ops.transpose(low)) * b)
                + ops.sum(ops.matmul(top, ops.transpose(top)) * c))

    p = tessel.trace(along, (), (5, 5), (5, 5), (5, 5), (5, 5))
    g1 = tessel.grad(p, wrt="t", keep_outputs=False)
    g2 = tessel.grad(g1, wrt="t", keep_outputs=False)
    inputs = {"a": a, "d": d, "b": b, "c": c}

    def first(t):
        return float(run(g1, {"t": np.array(t), **inputs})["grad_t"])

    second = float(run(g2, {"t": np.array(0.0), **inputs})["grad2_t"])
    h = 1e-4
    fd = (-first(2 * h) + 8 * first(h) - 8 * first(-h) + first(-2 * h)) / (12 * h)
    assert abs(second - fd) <= 1e-6 * abs(fd)


def test_a_zero_cotangent_contributes_exactly_zero():
    a = random_symmetric(4, 14)
    ct_w = np.random.default_rng(15).standard_normal(4)
    both = tessel.vjp(tessel.trace(lambda m: ops.eigh(m), a.shape), wrt="m")
    only_w = tessel.vjp(tessel.trace(lambda m: ops.eigh(m)[0], a.shape), wrt="m")
    g_both = run(both, {"m": a, "ct_out0": ct_w, "ct_out1": np.zeros((4, 4))})["grad_m"]
    g_w = run(only_w, {"m": a, "ct_out0": ct_w})["grad_m"]
    np.testing.assert_array_equal(g_both, g_w)
