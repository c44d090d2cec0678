"""numpy's semantics on traced Tensors: broadcasting, basic and strided indexing, newaxis,
``**`` either way round, numpy's ufuncs and functions, and the reductions and constructors
a tensor-network code writes. Each snippet runs on numpy arrays and, traced, on the
reference evaluator; the values must agree (and gradients, where listed, with finite
differences)."""
import numpy as np
import pytest

import tessel
from tessel import ops

rng = np.random.default_rng(7)
A = rng.standard_normal((3, 4))
B = rng.standard_normal((4,))
C = rng.standard_normal((2, 3, 4))
P = rng.uniform(0.5, 2.0, (3, 4))     # positive, for powers and logs
S = rng.standard_normal((4, 4))

# (name, function of numpy arrays or Tensors, inputs). The same function is evaluated
# by numpy on the arrays and traced on their shapes.
SNIPPETS = [
    ("broadcast (3,4)+(4,)", lambda a, b: a + b, [A, B]),
    ("broadcast (4,)*(3,4)", lambda b, a: b * a, [B, A]),
    ("broadcast (2,3,4)-(3,4)", lambda c, a: c - a, [C, A]),
    ("broadcast (3,1)/(1,4)", lambda a: a[:, :1] / a[:1, :], [P]),
    ("newaxis outer product", lambda a, b: a[:, :, None] * b[None, None, :], [A, B]),
    ("compare with broadcast", lambda a, b: (a > b) * 1.0, [A, B]),
    ("where with broadcast", lambda a, b: np.where(a > 0, a, b), [A, B]),
    ("strided rows", lambda a: a[::2], [A]),
    ("strided columns", lambda a: a[:, 1::2], [A]),
    ("strided 3-d", lambda c: c[:, ::2, ::3], [C]),
    ("ellipsis and int", lambda c: c[..., 1], [C]),
    ("negative index and slice", lambda c: c[-1, 1:, :-1], [C]),
    ("power int", lambda a: a ** 3, [A]),
    ("power half", lambda p: p ** 0.5, [P]),
    ("power float", lambda p: p ** 1.7, [P]),
    ("power tensor", lambda p, q: p ** q, [P, P.T.reshape(3, 4)]),
    ("rpow", lambda a: 2.0 ** a, [A]),
    ("reciprocal power", lambda p: p ** -1, [P]),
    ("np.sin", lambda a: np.sin(a), [A]),
    ("np.exp(-x) broadcast", lambda a, b: np.exp(-a) + b, [A, B]),
    ("np.sum axis", lambda c: np.sum(c, axis=(0, 2)), [C]),
    ("np.sum keepdims normalise", lambda a: a / np.sum(np.abs(a), axis=1, keepdims=True), [A]),
    ("np.mean", lambda c: np.mean(c, axis=1), [C]),
    ("np.max and min", lambda a: np.max(a, axis=0) - np.min(a, axis=0), [A]),
    ("np.prod", lambda p: np.prod(p, axis=1), [P]),
    ("np.prod all, odd length", lambda a: np.prod(a[:, :3]), [A]),
    ("logsumexp", None, [A]),
    ("np.einsum contraction", lambda a, c: np.einsum("ij,kij->k", a, c), [A, C]),
    ("np.einsum network", lambda s: np.einsum("ij,jk,ki->", s, s, s), [S]),
    ("matmul operator", lambda a, s: a @ s, [A, S]),
    ("matmul matrix @ vector, vector @ matrix, vector @ vector",
     lambda s, v: (s @ v) + (v @ s) + (v @ v), [S, S[0]]),
    ("np.trace", lambda s: np.trace(s), [S]),
    ("np.trace offset", lambda s: np.trace(s, 1), [S]),
    ("np.diag of a matrix", lambda s: np.diag(s, -1), [S]),
    ("np.diag of a vector", lambda b: np.diag(b, 1), [B]),
    ("identity via eye", None, [S]),
    ("transfer-matrix normalisation", lambda s: (s @ s) / np.max(np.abs(s @ s)), [S]),
    ("np.maximum", lambda a, b: np.maximum(a, b), [A, B]),
    ("np.reshape / np.transpose", lambda c: np.transpose(np.reshape(c, (6, 4))), [C]),
    ("np.square and np.sqrt", lambda p: np.sqrt(np.square(p)), [P]),
    ("np.add.reduce", lambda a: np.add.reduce(a, axis=1), [A]),
]
SPECIAL = {
    "logsumexp": (lambda a: ops.logsumexp(a, axis=1),
                  lambda a: np.log(np.sum(np.exp(a), axis=1))),
    "identity via eye": (lambda s: s @ ops.eye(4) - s, lambda s: s @ np.eye(4) - s),
}


@pytest.mark.parametrize("name,fn,inputs", SNIPPETS, ids=[s[0] for s in SNIPPETS])
def test_snippet_matches_numpy(name, fn, inputs):
    traced_fn, numpy_fn = SPECIAL[name] if name in SPECIAL else (fn, fn)
    p = tessel.trace(traced_fn, *[x.shape for x in inputs])
    got = list(tessel.evaluate_reference(p, inputs).values())[0]
    want = np.asarray(numpy_fn(*inputs), dtype=float)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)
    # The engine (prepare's default clean-up) agrees with the reference bitwise or to rounding.
    eng = list(tessel.Engine(1).run(tessel.prepare(p), inputs).values())[0]
    np.testing.assert_allclose(eng, want, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("fn,x", [
    (lambda a: ops.sum((a + np.arange(4.0)) ** 2.5), P),
    (lambda a: ops.sum(a[:, ::2] * a[None, 0, 1::2]), A),
    (lambda a: ops.logsumexp(a, axis=0).sum(), A),
    (lambda a: ops.prod(a, axis=1).sum(), P),
    (lambda a: ops.trace(a @ a.T), A),
    (lambda a: np.sum(np.sin(a) / np.mean(a, axis=0, keepdims=True)), P),
])
def test_gradients_through_numpy_semantics_match_finite_differences(fn, x):
    g = tessel.grad(tessel.trace(fn, x.shape), keep_outputs=False)
    ad = list(tessel.evaluate_reference(g, [x]).values())[0]
    p = tessel.trace(fn, x.shape)
    f = lambda y: float(list(tessel.evaluate_reference(p, [y]).values())[0])
    h = 1e-5
    d = rng.standard_normal(x.shape)
    fd = (f(x - 2 * h * d) - 8 * f(x - h * d) + 8 * f(x + h * d) - f(x + 2 * h * d)) / (12 * h)
    assert abs(fd - float(np.sum(ad * d))) <= 1e-8 * max(1.0, abs(fd))


def test_broadcasting_is_visible_in_the_ir_and_errors_name_both_shapes():
    p = tessel.trace(lambda a, b: a + b, (3, 4), (4,))
    assert "broadcast_in_dim %b {shape = [3, 4], dims = [1]}" in str(p)
    with pytest.raises(tessel.ShapeError, match=r"add: shapes f64\[3,4\] and f64\[3\] cannot be "
                                                r"broadcast together.*test_numpy_semantics.py:\d+"):
        tessel.trace(lambda a, b: a + b, (3, 4), (3,))


def test_numpy_functions_without_a_traced_form_name_what_to_write():
    with pytest.raises(TypeError, match=r"numpy.cumsum is not traced.*tessel.ops"):
        tessel.trace(lambda a: np.cumsum(a), (3,))
    with pytest.raises(TypeError, match=r"out= is not supported"):
        tessel.trace(lambda a: np.sin(a, out=np.zeros(3)), (3,))
    with pytest.raises(tessel.Error, match=r"advanced indexing.*one-hot"):
        tessel.trace(lambda a: a[np.array([0, 2])], (3,))
