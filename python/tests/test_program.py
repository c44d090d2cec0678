"""tessel.Program: the text and JSON forms, DOT, the verifier, located errors."""
import io

import pytest

import tessel

TEXT = """program @f(%x: f64[2,3], %y: f64[3]) {
  %0 = broadcast_in_dim %y {shape = [2, 3], dims = [1]} : f64[2,3]
  %1 = mul %x, %0 : f64[2,3]
  %s = reduce_sum %1 {axes = [0, 1]} : f64[]
  return %s
}
"""


def test_parse_print_round_trip():
    p = tessel.Program.parse(TEXT, "f.tir")
    assert str(p) == TEXT
    assert str(tessel.Program.parse(str(p))) == TEXT
    assert p.name == "f"
    assert [(v.name, v.shape, v.dtype) for v in p.inputs] == [("x", (2, 3), "float64"), ("y", (3,), "float64")]
    assert [(v.name, v.shape) for v in p.outputs] == [("s", ())]
    assert repr(p.inputs[0]) == "%x: f64[2,3]"
    assert p.num_ops == 3
    assert p.op_counts == {"broadcast_in_dim": 1, "mul": 1, "reduce_sum": 1}
    assert repr(p) == "<tessel.Program @f: 2 inputs, 3 ops, 1 outputs>"
    p.verify()  # programs are verified when made; verify() says so again


def test_json_round_trip():
    p = tessel.Program.parse(TEXT)
    j = p.to_json()
    assert j.lstrip().startswith("{")
    assert str(tessel.Program.from_json(j)) == TEXT
    assert str(tessel.Program.parse(j)) == TEXT  # parse() takes JSON too
    assert '"op": "reduce_sum"' in j or '"reduce_sum"' in j


def test_load_text_and_json(tmp_path):
    p = tessel.Program.parse(TEXT)
    (tmp_path / "f.tir").write_text(TEXT)
    (tmp_path / "f.json").write_text(p.to_json())
    assert str(tessel.Program.load(str(tmp_path / "f.tir"))) == TEXT
    assert str(tessel.Program.load(str(tmp_path / "f.json"))) == TEXT
    with pytest.raises(tessel.Error, match="cannot open"):
        tessel.Program.load(str(tmp_path / "missing.tir"))


def test_dot():
    dot = tessel.Program.parse(TEXT).to_dot()
    assert dot.startswith("digraph")
    assert "reduce_sum" in dot


def test_parse_error_is_located_with_a_caret():
    bad = TEXT.replace("mul %x, %0", "mul %x, %nope")
    with pytest.raises(tessel.ParseError) as e:
        tessel.Program.parse(bad, "bad.tir")
    err = e.value
    assert isinstance(err, tessel.Error)
    assert (err.file, err.line) == ("bad.tir", 3)
    msg = str(err)
    first, source, caret = msg.split("\n")[:3]
    assert first.startswith(f"bad.tir:3:{err.col}: error:")
    assert "%nope" in first
    assert source == "  %1 = mul %x, %nope : f64[2,3]"
    assert caret == " " * (err.col - 1) + "^"
    assert source[err.col - 1:].startswith("%nope")


def test_shape_mismatch_is_a_verify_error_naming_the_op_and_both_shapes():
    bad = TEXT.replace("%1 = mul %x, %0 : f64[2,3]", "%1 = mul %x, %y : f64[2,3]")
    with pytest.raises(tessel.Error) as e:
        tessel.Program.parse(bad, "bad.tir")
    msg = str(e.value)
    assert "mul" in msg and "f64[2,3]" in msg and "f64[3]" in msg


def test_malformed_json_is_located():
    with pytest.raises(tessel.ParseError) as e:
        tessel.Program.from_json('{"name": "f", "inputs": [}', "p.json")
    assert e.value.file == "p.json" and e.value.line == 1


def test_describe_passes_and_blas():
    text = tessel.describe_passes()
    for name in ("grad", "checkpoint", "order", "cse", "dce"):
        assert name in text
    assert "OpenBLAS" in tessel.blas_info() or "BLAS" in tessel.blas_info()


def test_load_a_directory(tmp_path):
    with pytest.raises(tessel.Error, match="is a directory"):
        tessel.Program.load(str(tmp_path))


def test_type_stubs_are_valid_python():
    import ast
    import os
    stub = os.path.join(os.path.dirname(tessel._tessel.__file__), "_tessel.pyi")
    tree = ast.parse(open(stub, encoding="utf-8").read())
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    assert {"Program", "Tensor", "Engine", "Plan", "Value"} <= set(classes)
    methods = {f.name for f in classes["Tensor"].body if isinstance(f, ast.FunctionDef)}
    assert {"sum", "reshape", "transpose", "T", "__getitem__", "__len__", "__iter__", "__add__"} <= methods
    assert os.path.exists(os.path.join(os.path.dirname(stub), "py.typed"))
