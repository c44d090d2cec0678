"""Staging in the IR from Python: tessel.function (call), tessel.scan and tessel.fori_loop
(scan), through grad to second order, on the engine's module interpreter and the reference."""
import numpy as np
import pytest

import tessel
from tessel import ops

from conftest import run


def ising_chain(steps):
    """lnZ/N of the 1D Ising chain (J = 1, h = 0) by its 2x2 transfer matrix applied
    `steps` times to v = (1/2, 1/2), normalised each step: (1/2, 1/2) is the leading
    eigenvector of T = [[e^b, e^-b], [e^-b, e^b]] (eigenvalue 2 cosh b) with norm 1, so
    lnZ/N = ln(2 cosh b) exactly at any length."""
    def chain(beta):
        def transfer(carry, _):
            v, acc, b = carry
            e, f = ops.exp(b), ops.exp(-b)
            w0 = e * v[0] + f * v[1]
            w1 = f * v[0] + e * v[1]
            s = w0 + w1
            v = ops.concatenate([ops.reshape(w0 / s, (1,)), ops.reshape(w1 / s, (1,))])
            return (v, acc + ops.log(s), b), None
        (v, acc, b), _ = tessel.scan(transfer, (ops.full((2,), 0.5), ops.constant(0.0), beta),
                                     length=steps)
        return {"lnz": acc / steps}
    return tessel.trace(chain, ())


@pytest.mark.parametrize("steps", [3000, 30000])
def test_ising_chain_second_derivative_is_exact_and_the_program_does_not_grow(steps):
    p = ising_chain(steps)
    d1 = tessel.grad(p, keep_outputs=False)
    d2 = tessel.grad(d1, keep_outputs=False)
    # The loop is an op: the second-derivative module has as many lines at 30,000 steps
    # as at 7.
    short = tessel.grad(tessel.grad(ising_chain(7), keep_outputs=False), keep_outputs=False)
    assert str(d2).count("\n") == str(short).count("\n") < 1000
    assert str(d2).count("scan @") == 4
    for beta in (0.1, 0.44, 1.3):
        exact = [np.log(2 * np.cosh(beta)), np.tanh(beta), 1 / np.cosh(beta) ** 2]
        # The sum of `steps` logarithms, each rounded alike, drifts by up to steps·ε.
        drift = steps * np.finfo(float).eps
        for prog, want, rtol in zip((p, d1, d2), exact, (1e-13 + drift, 1e-12 + drift, 1e-10)):
            got = run(prog, {"beta": beta})
            (value,) = got.values()
            np.testing.assert_allclose(value, want, rtol=rtol)
            if steps == 3000:
                ref = tessel.evaluate_reference(prog, {"beta": beta})
                np.testing.assert_array_equal(value, list(ref.values())[0])


def test_function_is_traced_once_per_shapes_and_called_at_each_use():
    calls = []

    @tessel.function
    def layer(x, w):
        calls.append(x.shape)
        return ops.tanh(x @ w), ops.sum(w * w)

    def net(x, w1, w2):
        h, r1 = layer(x, w1)
        h, r2 = layer(h, w2)  # same shapes: the same function
        return ops.sum(h * h) + r1 + r2

    shapes = [(3, 4), (4, 4), (4, 4)]
    p = tessel.trace(net, *shapes)
    assert len(calls) == 1
    text = str(p)
    assert text.count("call @layer(") == 2 and text.count("program @layer(") == 1
    rng = np.random.default_rng(3)
    x, w1, w2 = (rng.normal(size=s) for s in shapes)

    def numpy_net(x, w1, w2):
        h = np.tanh(x @ w1)
        h = np.tanh(h @ w2)
        return (h * h).sum() + (w1 * w1).sum() + (w2 * w2).sum()

    (value,) = run(p, [x, w1, w2]).values()
    np.testing.assert_allclose(value, numpy_net(x, w1, w2), rtol=1e-13)
    # With respect to every input both call sites differentiate both operands: one
    # forward/backward pair of functions serves them.
    g = tessel.grad(p, keep_outputs=False)
    assert str(g).count("program @layer_fwd(") == 1 and str(g).count("program @layer_bwd(") == 1
    assert str(g).count("call @layer_fwd(") == 2 and str(g).count("call @layer_bwd(") == 2
    grad_w1 = run(g, [x, w1, w2])["grad_w1"]
    # Central differences of the numpy function.
    fd = np.zeros_like(w1)
    h = 1e-6
    for idx in np.ndindex(*w1.shape):
        dp, dm = w1.copy(), w1.copy()
        dp[idx] += h
        dm[idx] -= h
        fd[idx] = (numpy_net(x, dp, w2) - numpy_net(x, dm, w2)) / (2 * h)
    np.testing.assert_allclose(grad_w1, fd, rtol=1e-7, atol=1e-8)


def test_scan_stacks_ys_in_both_directions_and_fori_loop_counts():
    xs_value = np.arange(1.0, 6.0)

    def cumsum(xs, reverse):
        def body(c, x):
            c = c + x
            return c, c * 1.0
        total, ys = tessel.scan(body, ops.constant(0.0), xs, reverse=reverse)
        return {"total": total, "ys": ys}

    for reverse, want in ((False, np.cumsum(xs_value)), (True, np.cumsum(xs_value[::-1])[::-1])):
        p = tessel.trace(lambda xs: cumsum(xs, reverse), (5,), names=["xs"])
        out = run(p, [xs_value])
        np.testing.assert_array_equal(out["ys"], want)
        assert out["total"] == 15.0

    def poly(x):
        # sum_{i=0}^{9} i·x^2 = 45·x^2
        return tessel.fori_loop(0, 10, lambda i, acc: acc + i * x * x, ops.constant(0.0) * x)

    p = tessel.trace(poly, ())
    g = tessel.grad(p)
    out = run(g, {"x": 1.5})
    np.testing.assert_allclose(list(out.values()), [45 * 2.25, 90 * 1.5], rtol=1e-14)


def test_staging_errors_name_the_problem():
    def grows(c):
        return tessel.scan(lambda c, _: (ops.concatenate([c, c]), None), c, length=3)[0]

    with pytest.raises(tessel.Error, match=r"changes carry 0 from shape \(2,\) to \(4,\)"):
        tessel.trace(grows, (2,))

    def mismatched(xs, ys):
        return tessel.scan(lambda c, x: (c, x[0] + x[1]), ops.constant(0.0), (xs, ys))[1]

    with pytest.raises(tessel.Error, match="leading extent must be the length 3"):
        tessel.trace(mismatched, (3,), (4,))

    with pytest.raises(tessel.Error, match=r"length must be an int in \[1, 2\^30\]"):
        tessel.trace(lambda c: tessel.scan(lambda c, _: (c, None), c, length=0)[0], ())

    with pytest.raises(tessel.Error, match="upper"):
        tessel.trace(lambda c: tessel.fori_loop(3, 3, lambda i, c: c, c), ())


def test_fori_loop_keeps_the_index_as_a_carry():
    # A million iterations: the program holds no index vector, and its text is as long as
    # for ten.
    def count(n):
        return lambda x: tessel.fori_loop(0, n, lambda i, acc: acc + x, ops.constant(0.0) * x)

    small, large = (str(tessel.trace(count(n), ())) for n in (10, 10 ** 6))
    assert len(large) - len(small) < 16  # only the length's digits differ
    with pytest.raises(tessel.Error, match="at most 2\\^30"):
        tessel.trace(count(2 ** 31), ())
    with pytest.raises(tessel.Error, match="no leading axis"):
        tessel.trace(lambda a: tessel.scan(lambda c, x: (c, x), a, a)[0], ())
