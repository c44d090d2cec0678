"""Every public entry point that passes a number on to the library, called with 0, -1,
2**63 and 10**100 (and the float extremes where a float is taken): each call returns or
raises a Python exception with a message; none crashes the interpreter, returns bytes
from the heap or runs unbounded."""
import json

import numpy as np
import pytest

import tessel
from tessel import ops

HOSTILE = [0, -1, 2**63, 10**100, -2**63 - 1]
FLOATS = [1e308, -1e308, float("nan"), float("inf"), 5e-324]
# What a refused number may raise: our own Error (ShapeError is one), or Python's own
# type/value/overflow errors for a value that is not an int64 at all.
REFUSED = (tessel.Error, TypeError, ValueError, OverflowError)


def _program():
    return tessel.trace(lambda x: ops.sum(ops.sin(x) * x), (3,))


@pytest.mark.parametrize("n", HOSTILE + [1025, 2048, 10**8])
def test_to_json_indent_bounded_as_the_cli(n):
    p = _program()
    if -1 <= n <= 16:
        text = p.to_json(indent=n)
        assert "\x00" not in text
        assert tessel.Program.from_json(text).to_json(indent=n) == text
    else:
        with pytest.raises(REFUSED) as e:
            p.to_json(indent=n)
        if isinstance(e.value, tessel.Error):
            assert "between -1 (one line) and 16" in str(e.value)


def test_to_json_indent_edges_round_trip():
    p = _program()
    for n in (-1, 16):
        text = p.to_json(indent=n)
        assert json.loads(text)["kind"] == "tessel.program"
        assert str(tessel.Program.from_json(text)) == str(p)


CALLS = {
    "Engine(width)": lambda n: tessel.Engine(n),
    "Engine.profile_report(top)": lambda n: tessel.Engine(1).profile_report(tessel.prepare(_program()), top=n),
    "trace(shape)": lambda n: tessel.trace(lambda x: ops.sum(x), (2, n)),
    "ops.iota(shape)": lambda n: tessel.trace(lambda x: ops.sum(x) + ops.sum(ops.iota([n], 0)), (2,)),
    "ops.iota(dim)": lambda n: tessel.trace(lambda x: ops.sum(x) + ops.sum(ops.iota([3], n)), (2,)),
    "ops.full(value)": lambda n: tessel.trace(lambda x: ops.sum(x) + ops.sum(ops.full([2], n)), (2,)),
    "ops.sum(axis)": lambda n: tessel.trace(lambda x: ops.sum(x, axis=n), (2,)),
    "ops.reshape(shape)": lambda n: tessel.trace(lambda x: ops.sum(ops.reshape(x, [n, -1])), (4,)),
    "ops.transpose(perm)": lambda n: tessel.trace(lambda x: ops.sum(ops.transpose(x, [n, 0])), (2, 2)),
    "ops.slice(start)": lambda n: tessel.trace(lambda x: ops.sum(ops.slice(x, [n], [2])), (2,)),
    "ops.pad(high)": lambda n: tessel.trace(lambda x: ops.sum(ops.pad(x, [0], [n])), (2,)),
    "ops.concatenate(axis)": lambda n: tessel.trace(lambda x: ops.sum(ops.concatenate([x, x], n)), (2,)),
    "ops.broadcast_to(shape)": lambda n: tessel.trace(lambda x: ops.sum(ops.broadcast_to(x, [n, 2])), (2,)),
    "ops.dot_general(contract)": lambda n: tessel.trace(
        lambda x: ops.sum(ops.dot_general(x, x, lhs_contract=[n], rhs_contract=[0])), (2, 2)),
    "ops.svd_topk(k)": lambda n: tessel.trace(lambda x: ops.sum(ops.svd_topk(x, n)[1]), (4, 4)),
    "ops.svd(eps)": lambda n: tessel.trace(lambda x: ops.sum(ops.svd(x, eps=n)[1]), (4, 4)),
    "Tensor[index]": lambda n: tessel.trace(lambda x: ops.sum(x[n]), (2,)),
    "Tensor[0:stop]": lambda n: tessel.trace(lambda x: ops.sum(x[0:n]), (2,)),
    "Tensor * n": lambda n: tessel.trace(lambda x: ops.sum(x * n), (2,)),
    "grad(wrt)": lambda n: tessel.grad(_program(), wrt=n),
    "onsager(beta)": lambda n: tessel.onsager(n),
    "trg(beta)": lambda n: tessel.trg(n, chi=4, steps=2),
    "trg(chi)": lambda n: tessel.trg(0.3, chi=n, steps=2),
    "trg(steps)": lambda n: tessel.trg(0.3, chi=4, steps=n),
    "trg(repeat)": lambda n: tessel.trg(0.3, chi=4, steps=2, repeat=n),
    "trg(width)": lambda n: tessel.trg(0.3, chi=4, steps=2, width=n),
    "trg(q)": lambda n: tessel.trg(0.3, model="potts", q=n, chi=4, steps=2),
    "trg(field)": lambda n: tessel.trg(0.3, chi=4, steps=2, field=n),
    "trg(eps)": lambda n: tessel.trg(0.3, chi=4, steps=2, eps=n),
    "trg(ranks)": lambda n: tessel.trg(0.3, chi=4, ranks=[n, n]),
}


@pytest.mark.parametrize("n", HOSTILE + FLOATS, ids=repr)
@pytest.mark.parametrize("call", sorted(CALLS))
def test_hostile_number_returns_or_raises(call, n):
    try:
        r = CALLS[call](n)
    except REFUSED as e:
        assert str(e), f"{call}({n!r}) raised {type(e).__name__} without a message"
        return
    # Accepted: then the value is meaningful, never garbage.
    if isinstance(r, dict) and "lnZ_per_site" in r:
        assert np.isfinite(r["lnZ_per_site"])
    elif isinstance(r, dict):  # onsager
        assert r["lnZ_per_site"] is None or not np.isnan(r["lnZ_per_site"])


def test_trg_integer_options_name_the_option():
    with pytest.raises(tessel.Error, match=r"chi = 100000000000\.\.\.\(101 digits\) is out of range"):
        tessel.trg(0.3, chi=10**100, steps=2)
    with pytest.raises(tessel.Error, match=r"repeat must be an integer in \[0, 1000000\], got 2147483648"):
        tessel.trg(0.3, chi=4, steps=2, repeat=2**31)
    with pytest.raises(tessel.Error, match=r"ranks entry must be an integer, got 2.5"):
        tessel.trg(0.3, chi=4, ranks=[2.5, 2])
    with pytest.raises(tessel.Error, match=r"wrt must be an input name"):
        tessel.grad(_program(), wrt=3)
