"""The grad transform, vjp and pass pipelines from Python, checked by finite differences."""
import io

import numpy as np
import pytest

import tessel
from tessel import ops

from conftest import central_difference, run


def f_sin(x):
    return ops.sum(ops.sin(x) * x * x)


def test_grad_of_sum_sin_x_squared_is_exact():
    x = np.linspace(0, 3, 1000)
    g = tessel.grad(tessel.trace(f_sin, (1000,)), wrt="x")
    assert [o.name for o in g.outputs] == ["out0", "grad_x"]
    out = run(g, {"x": x})
    np.testing.assert_allclose(out["out0"], np.sum(np.sin(x) * x * x), rtol=1e-14)
    np.testing.assert_allclose(out["grad_x"], np.cos(x) * x * x + 2 * x * np.sin(x), rtol=1e-13, atol=1e-15)
    only = tessel.grad(tessel.trace(f_sin, (1000,)), wrt="x", keep_outputs=False)
    assert [o.name for o in only.outputs] == ["grad_x"]


def loss_through_svd(a, w):
    """A basis-independent loss of the leading singular triplets of a."""
    u, s, vt = ops.svd(a)
    k = 3
    return ops.sum(s[:k] * s[:k]) + ops.sum((u[:, :k] * ops.broadcast_to(s[:k], (6, k))) @ vt[:k, :] * w)


def test_grad_through_svd_against_finite_differences():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 5))
    w = rng.standard_normal((6, 5))
    p = tessel.trace(loss_through_svd, a.shape, w.shape)
    g = run(tessel.grad(p, wrt="a"), {"a": a, "w": w})["grad_a"]
    fd = central_difference(lambda m: float(run(p, {"a": m, "w": w})["out0"]), a, h=1e-5)
    np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-8)


def test_vjp_against_the_jacobian():
    rng = np.random.default_rng(5)
    x = rng.uniform(0.5, 1.5, size=(4,))
    ct = rng.standard_normal((4, 4))

    def f(x):
        return {"y": ops.einsum("i,j->ij", ops.exp(x), ops.log(x))}

    p = tessel.trace(f, (4,))
    v = tessel.vjp(p, wrt="x")
    assert [i.name for i in v.inputs] == ["x", "ct_y"]
    out = run(v, {"x": x, "ct_y": ct})
    np.testing.assert_allclose(out["y"], np.outer(np.exp(x), np.log(x)), rtol=1e-14)
    jac = np.einsum("ij,ik->ijk", np.exp(x)[:, None] * np.log(x)[None, :], np.eye(4)) + \
        np.einsum("ij,jk->ijk", np.exp(x)[:, None] / x[None, :], np.eye(4))
    np.testing.assert_allclose(out["grad_x"], np.einsum("ij,ijk->k", ct, jac), rtol=1e-13)


def test_second_derivative_by_grad_of_grad():
    def f(b):
        return ops.exp(b * b) * ops.sin(b)
    g = tessel.grad(tessel.trace(f, ()), wrt="b", keep_outputs=False)
    gg = tessel.grad(g, wrt="b", keep_outputs=False)
    b = 0.7
    assert [o.name for o in gg.outputs] == ["grad2_b"]  # the order of the derivative
    d1 = float(run(g, {"b": b})["grad_b"])
    d2 = float(run(gg, {"b": b})[gg.outputs[0]])  # a program's Value keys the result too
    e, s, c = np.exp(b * b), np.sin(b), np.cos(b)
    assert d1 == pytest.approx(e * (2 * b * s + c), rel=1e-14)
    assert d2 == pytest.approx(e * ((2 + 4 * b * b) * s + 4 * b * c - s), rel=1e-13)


def test_grad_errors():
    p = tessel.trace(lambda x: {"y": x * 2.0}, (3,))
    with pytest.raises(tessel.Error, match="scalar"):
        tessel.grad(p)
    with pytest.raises(tessel.Error, match="nope"):
        tessel.grad(tessel.trace(f_sin, (3,)), wrt="nope")


def test_opt_pipeline_and_instrumentation():
    g = tessel.grad(tessel.trace(f_sin, (8,)), wrt="x")
    log = io.StringIO()
    o = tessel.opt(g, "cse,dce", print_ir_after_all=True, time_passes=True, file=log)
    text = log.getvalue()
    assert "IR Dump After cse" in text or "After cse" in text
    assert "dce" in text
    assert o.num_ops <= g.num_ops
    assert o.compile_ms >= g.compile_ms
    x = np.linspace(0, 1, 8)
    np.testing.assert_allclose(run(o, {"x": x})["grad_x"], run(g, {"x": x})["grad_x"], rtol=1e-15)
    # einsums: the order pass lowers them
    e = tessel.trace(lambda a, b, c: ops.einsum("ij,jk,kl->il", a, b, c), (2, 3), (3, 4), (4, 5))
    lowered = tessel.opt(e, "order{strategy=pairwise},cse,dce")
    assert "einsum" not in lowered.op_counts and "dot_general" in lowered.op_counts


def test_opt_errors_name_the_pass():
    p = tessel.trace(f_sin, (8,))
    with pytest.raises(tessel.Error, match="unknown pass 'nosuchpass'"):
        tessel.opt(p, "cse,nosuchpass")
    with pytest.raises(tessel.Error, match="strategy"):
        tessel.opt(p, "order{strategy=fastest}")


def test_grad_of_a_value_and_grad_program_says_how():
    g = tessel.grad(tessel.trace(lambda b: ops.exp(b) * b, ()))  # keeps the value: 2 outputs
    with pytest.raises(tessel.Error, match=r"2 outputs \(%out0, %grad_b\).*keep_outputs=False"):
        tessel.grad(g)
    g3 = tessel.grad(tessel.grad(tessel.grad(tessel.trace(lambda b: ops.exp(b) * b, ()),
                                             keep_outputs=False), keep_outputs=False),
                     keep_outputs=False)
    assert [o.name for o in g3.outputs] == ["grad3_b"]
    b = 0.4
    assert float(run(g3, {"b": b})["grad3_b"]) == pytest.approx(np.exp(b) * (b + 3), rel=1e-14)
