"""Forward mode from Python: tessel.jvp against analytic derivatives and finite differences,
against tessel.vjp (the transpose, to rounding), and tessel.hessian (forward over reverse)
against exact second derivatives: the 1D Ising chain's sech²β and a two-input function."""
import math

import numpy as np
import pytest

import tessel
from tessel import ops

from conftest import run


def test_jvp_of_sin_x_squared_is_the_analytic_derivative():
    prog = tessel.trace(lambda x: ops.sum(ops.sin(x) * x * x), (3,), names=["x"])
    j = tessel.jvp(prog, "x")
    assert [v.name for v in j.inputs] == ["x", "t_x"]
    assert [v.name for v in j.outputs] == ["out0", "jvp_out0"]
    x = np.array([-1.3, 0.4, 2.1])
    t = np.array([0.5, -2.0, 1.0])
    out = run(j, {"x": x, "t_x": t})
    assert out["out0"] == pytest.approx(np.sum(np.sin(x) * x * x), rel=1e-15)
    want = np.sum((np.cos(x) * x * x + 2 * x * np.sin(x)) * t)
    assert out["jvp_out0"] == pytest.approx(want, rel=1e-14)


def network(a, b):
    """A small tensor network: a contraction, an SVD's leading singular vectors read in a
    basis-independent form, an eigh and a QR."""
    m = ops.einsum("ij,jk->ik", a, b)
    u, s, vt = ops.svd(m)
    p = ops.einsum("ik,jk->ij", u[:, :2], u[:, :2])  # projector on the leading space
    w, v = ops.eigh(m + ops.transpose(m, (1, 0)))
    q, r = ops.qr(m)
    return {"p": p, "s": s, "w": w, "q_r": q * ops.sum(r)}


def test_jvp_is_the_transpose_of_vjp_and_matches_finite_differences():
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    ta, tb = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    prog = tessel.trace(network, (4, 4), (4, 4), names=["a", "b"])
    j = tessel.jvp(prog, keep_outputs=False)
    tangents = run(j, {"a": a, "b": b, "t_a": ta, "t_b": tb})
    names = [v.name for v in prog.outputs]
    assert sorted(tangents) == sorted("jvp_" + n for n in names)
    cts = {n: rng.standard_normal(run(prog, {"a": a, "b": b})[n].shape) for n in names}
    v = tessel.vjp(prog, keep_outputs=False)
    g = run(v, {"a": a, "b": b, **{"ct_" + n: c for n, c in cts.items()}})
    forward = sum(np.sum(cts[n] * tangents["jvp_" + n]) for n in names)
    reverse = np.sum(g["grad_a"] * ta) + np.sum(g["grad_b"] * tb)
    assert forward == pytest.approx(reverse, rel=1e-12)

    def along(h):
        out = run(prog, {"a": a + h * ta, "b": b + h * tb})
        return sum(np.sum(cts[n] * out[n]) for n in names)

    h = 1e-4
    fd = (-along(2 * h) + 8 * along(h) - 8 * along(-h) + along(-2 * h)) / (12 * h)
    assert forward == pytest.approx(fd, rel=1e-8)


def ising_chain(beta):
    """lnZ/N of the 1D Ising chain: the log of the transfer matrix's largest eigenvalue,
    2·cosh β (T = [[e^β, e^-β], [e^-β, e^β]])."""
    t = ops.exp(beta) * ops.eye(2) + ops.exp(-beta) * ops.constant(np.array([[0.0, 1.0], [1.0, 0.0]]))
    w, _ = ops.eigh(t)
    return ops.log(w[1])


def test_hessian_of_the_1d_ising_chain_is_sech2_beta():
    prog = tessel.trace(ising_chain, (), names=["beta"])
    h = tessel.hessian(prog, "beta")
    assert [v.name for v in h.outputs] == ["d2_beta"]
    for beta in (0.1, 0.44, 1.3):
        got = run(h, {"beta": beta})["d2_beta"]
        assert got == pytest.approx(1 / math.cosh(beta) ** 2, rel=1e-13)
        # the same number as grad of grad (reverse over reverse)
        g2 = tessel.grad(tessel.grad(prog, keep_outputs=False), keep_outputs=False)
        assert run(g2, {"beta": beta})["grad2_beta"] == pytest.approx(got, rel=1e-13)


def test_hessian_of_two_inputs_names_every_entry():
    prog = tessel.trace(lambda a, b: ops.sin(a) * b * b * b + a * a * b, (), (), names=["a", "b"])
    h = tessel.hessian(prog)
    assert [v.name for v in h.outputs] == ["d2_a_a", "d2_a_b", "d2_b_a", "d2_b_b"]
    a, b = 0.7, -1.2
    out = run(h, {"a": a, "b": b})
    assert out["d2_a_a"] == pytest.approx(-math.sin(a) * b ** 3 + 2 * b, rel=1e-14)
    assert out["d2_a_b"] == pytest.approx(3 * math.cos(a) * b * b + 2 * a, rel=1e-14)
    assert out["d2_b_a"] == pytest.approx(out["d2_a_b"], rel=1e-14)
    assert out["d2_b_b"] == pytest.approx(6 * math.sin(a) * b, rel=1e-14)
    # rows and columns in wrt's order
    h_ba = tessel.hessian(prog, "b,a")
    assert [v.name for v in h_ba.outputs] == ["d2_b_b", "d2_b_a", "d2_a_b", "d2_a_a"]
    assert run(h_ba, {"a": a, "b": b})["d2_b_b"] == pytest.approx(out["d2_b_b"], rel=1e-15)


def test_jvp_through_a_scan_and_a_function():
    @tessel.function
    def step(c, x):
        return ops.tanh(c * x + c)

    def f(c0, xs):
        c = tessel.fori_loop(0, 3, lambda i, c: step(c, xs), c0)
        return ops.sum(c)

    prog = tessel.trace(f, (3,), (3,), names=["c0", "xs"])
    j = tessel.jvp(prog, "c0", keep_outputs=False)
    rng = np.random.default_rng(3)
    c0, xs, t = rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal(3)
    got = run(j, {"c0": c0, "xs": xs, "t_c0": t})["jvp_out0"]

    def value(c):
        return run(prog, {"c0": c, "xs": xs})["out0"]

    h = 1e-4
    fd = (-value(c0 + 2 * h * t) + 8 * value(c0 + h * t) - 8 * value(c0 - h * t) + value(c0 - 2 * h * t)) / (12 * h)
    assert got == pytest.approx(fd, rel=1e-9)


def test_errors():
    prog = tessel.trace(lambda x: ops.sum(x * x), (3,), names=["x"])
    with pytest.raises(tessel.Error, match=r"jvp: wrt: program @\w+ has no input named '%y' \(inputs: %x\)"):
        tessel.jvp(prog, "y")
    with pytest.raises(tessel.Error, match=r"hessian: input '%x' has shape f64\[3\]; hessian takes scalar inputs"):
        tessel.hessian(prog)


def test_op_table_lists_each_ops_jvp_rule():
    table = {op["name"]: op for op in tessel.op_table()}
    assert table["mul"]["jvp"] == "ẏ = ȧ·b + a·ḃ"
    assert "svd_topk_complement" in table["svd_topk"]["jvp"]
    assert all(op["jvp"] for op in table.values())


def test_grad_of_grad_through_svd_topk_equals_the_full_svds_and_finite_differences():
    # The sum of the two leading singular values of M + c·N: its second derivative couples
    # them to the six svd_topk discards (svd_topk_complement), by reverse over reverse
    # (that op's VJP) and by forward over reverse (its JVP).
    rng = np.random.default_rng(3)
    m, n = rng.standard_normal((8, 8)), rng.standard_normal((8, 8))

    def loss(topk):
        def f(c):
            a = ops.constant(m) + c * ops.constant(n)
            s = ops.svd_topk(a, 2)[1] if topk else ops.svd(a)[1][:2]
            return ops.sum(s)
        return tessel.trace(f, (), names=["c"])

    def numpy_loss(c):
        return np.sum(np.linalg.svd(m + c * n, compute_uv=False)[:2])

    c, h = 0.3, 1e-3
    fd = (-numpy_loss(c + 2 * h) + 16 * numpy_loss(c + h) - 30 * numpy_loss(c)
          + 16 * numpy_loss(c - h) - numpy_loss(c - 2 * h)) / (12 * h * h)
    topk = loss(True)
    rev_rev = run(tessel.grad(tessel.grad(topk, keep_outputs=False), keep_outputs=False), {"c": c})["grad2_c"]
    fwd_rev = run(tessel.hessian(topk, "c"), {"c": c})["d2_c"]
    full = run(tessel.grad(tessel.grad(loss(False), keep_outputs=False), keep_outputs=False), {"c": c})["grad2_c"]
    assert abs(rev_rev) > 0.1
    assert rev_rev == pytest.approx(fd, rel=1e-6)
    assert rev_rev == pytest.approx(fwd_rev, rel=1e-10)
    assert rev_rev == pytest.approx(full, rel=1e-10)
