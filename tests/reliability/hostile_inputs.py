#!/usr/bin/env python3
"""Table-driven hostile-input suite for the tessel driver.

Every case writes its input files into a fresh directory, runs one `tessel` command and
requires all of:
  * exit status exactly 1 (a diagnosed user error: not 0, not 2 = internal error, not a
    signal, not the timeout);
  * stderr matching the case's regular expression, which pins the diagnostic to its
    place: `file:line:col: error:` for the text parser, `file: /json/pointer: error:`
    or `file:line:col:` for the JSON reader, `input %name: file.npy:` for .npy inputs;
    or, for a case whose expectation is Exact(text), stderr equal to that text;
  * every line of stderr starting `error: ` or `<where>: error: ` (the first line), and
    at most MAX_STDERR bytes of it, whatever the size of the input (a diagnostic quotes a
    window of a long line and clips a long name);
  * no sanitizer report and no "internal error" on stderr (under the asan preset a
    leak makes LeakSanitizer change the exit status, which fails the first check);
  * completion within TIMEOUT seconds (a hang fails);
  * unless the binary is sanitized: at most MEM_LIMIT bytes of address space
    (RLIMIT_AS), so a case that "declares" terabytes proves nothing was allocated.

Also re-runs every expected-error golden file of tests/lit/ir (err-*.tir) with the
same strict checks (lit's `not` accepts any non-zero status, including a crash).

Usage: hostile_inputs.py --tessel BUILD/tools/tessel [-k SUBSTRING] [-v]
"""
import argparse
import os
import re
import resource
import shutil
import struct
import subprocess
import sys
import tempfile

TIMEOUT = 30
MEM_LIMIT = 4 << 30
MAX_STDERR = 1024
ERROR_TAG = re.compile(r"^(error: |[^\n]*?: error: )")
SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/

FORBIDDEN = re.compile(r"internal error|AddressSanitizer|LeakSanitizer|runtime error:|"
                       r"ThreadSanitizer|Segmentation fault|terminate called|Aborted")


def npy(shape, descr="<f8", data=b"", fortran=False, version=(1, 0), header=None):
    """A .npy file with a hand-written header (no numpy needed)."""
    d = header if header is not None else "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", shape)
    lenbytes = 2 if version[0] == 1 else 4
    tot = 8 + lenbytes + len(d) + 1
    d += " " * ((tot + 63) // 64 * 64 - tot) + "\n"
    fmt = "<H" if lenbytes == 2 else "<I"
    return b"\x93NUMPY" + bytes(version) + struct.pack(fmt, len(d)) + d.encode() + data


def f8(*xs):
    return struct.pack("<%dd" % len(xs), *xs)


def tir(body, sig="%x: f64[2]"):
    return "program @f(%s) {\n%s}\n" % (sig, body)


# The program `tessel run` cases feed: one input %x: f64[2,3].
NEG23 = tir("  %y = neg %x : f64[2,3] loc(\"negate x\")\n  return %y\n", "%x: f64[2,3]")


def json_prog(inputs, ops, outputs, extra=""):
    return ('{"version": 1, "kind": "tessel.program", "name": "j", "inputs": %s, "ops": %s, '
            '"outputs": %s%s}\n' % (inputs, ops, outputs, extra))


def json_kind(kind):
    """A program whose "kind" is the JSON text `kind`."""
    return '{"version": 1, "kind": %s, "name": "j", "inputs": [], "ops": [], "outputs": []}\n' % kind


X2 = '[{"name": "x", "type": "f64[2]"}]'
X22 = '[{"name": "x", "type": "f64[2,2]"}]'


def op(name, operands, results, attrs="{}"):
    res = ", ".join('{"name": "%s", "type": "%s"}' % r for r in results)
    ops = ", ".join('"%s"' % o for o in operands)
    return '{"op": "%s", "operands": [%s], "results": [%s], "attrs": %s}' % (name, ops, res, attrs)


SVD22 = [("u", "f64[2,2]"), ("s", "f64[2]"), ("v", "f64[2,2]")]


# One line of 900 KB with an error near its end ('x' in a dense literal), and the same
# for JSON (a trailing ',' in a 300,000-element data array).
LONG_TIR_LINE = "  %y = constant {value = dense<[" + "1, " * 300000 + "x]> : f64[300001]} : f64[300001]"
LONG_JSON_LINE = json_prog("[]", "[" + op("constant", [], [("c", "f64[300000]")],
                                          '{"value": {"type": "f64[300000]", "data": [' + "1.5," * 300000 + "]}}") +
                           "]", '["c"]').rstrip("\n")


class Exact(str):
    """The whole expected stderr of a case (its trailing newline aside)."""


class Case:
    def __init__(self, cid, area, what, argv, expect, files=None, stdin=b""):
        self.id, self.area, self.what = cid, area, what
        self.argv, self.expect, self.files, self.stdin = argv, expect, files or {}, stdin


def V(cid, area, what, text, expect, name="case.tir"):
    """`tessel verify FILE` on one file."""
    return Case(cid, area, what, ["verify", name], expect, {name: text})


def R(cid, what, npy_bytes, expect, prog=NEG23, extra=()):
    """`tessel run prog.tir --input x=x.npy`."""
    return Case(cid, "npy", what, ["run", "prog.tir", "--input", "x=x.npy", *extra], expect,
                {"prog.tir": prog, "x.npy": npy_bytes})


CASES = [
    # --- IR text parser + verifier --------------------------------------------------
    V("text-self-cycle", "text", "a value used by the op that defines it (a 1-cycle)",
      tir("  %y = neg %y : f64[2]\n  return %y\n"),
      r"case\.tir:2:12: error: use of undefined value %y"),
    V("text-duplicate-input", "text", "two inputs with the same name",
      "program @f(%x: f64[2], %x: f64[2]) {\n  return %x\n}\n",
      r"case\.tir:1:24: error: redefinition of value %x \(first defined at line 1, column 12\)"),
    V("text-result-shadows-input", "text", "an op result reusing an input's name",
      tir("  %x = neg %x : f64[2]\n  return %x\n"),
      r"case\.tir:2:3: error: redefinition of value %x"),
    V("text-duplicate-attribute", "text", "an attribute given twice",
      tir("  %y = transpose %x {perm = [1, 0], perm = [0, 1]} : f64[2,2]\n  return %y\n", "%x: f64[2,2]"),
      r"case\.tir:2:37: error: duplicate attribute 'perm'"),
    V("text-i64-attr-float", "text", "integer attribute given a float",
      tir("  %y = iota {shape = [3], dim = 0.5} : f64[3]\n  return %y\n", ""),
      r"case\.tir:2:33: error: attribute 'dim' of 'iota' must be an i64 \(integer\), got the float 0\.5"),
    V("text-i64-attr-nan", "text", "nan where an integer list is expected",
      tir("  %y = iota {shape = [nan], dim = 0} : f64[3]\n  return %y\n", ""),
      r"case\.tir:2:23: error: .*integer"),
    V("text-str-attr-int", "text", "string attribute given an integer",
      tir("  %y = compare %x, %x {direction = 1} : f64[2]\n  return %y\n"),
      r"case\.tir:2:36: error: attribute 'direction' of 'compare' must be a string, got the integer 1"),
    V("text-tensor-attr-list", "text", "tensor attribute given a bare list",
      tir("  %y = constant {value = [1, 2]} : f64[2]\n  return %y\n", ""),
      r"case\.tir:2:26: error: attribute 'value' of 'constant' must be a tensor"),
    V("text-i64s-float-element", "text", "a float inside an integer list",
      tir("  %y = transpose %x {perm = [1.5, 0]} : f64[2,2]\n  return %y\n", "%x: f64[2,2]"),
      r"case\.tir:2:30: error: element of attribute 'perm' of 'transpose' must be an integer, got 1\.5"),
    V("text-f64-literal-overflow", "text", "a float literal beyond the range of double (would be inf)",
      tir("  %u, %s, %v = svd %x {eps = 1e999} : f64[2,2], f64[2], f64[2,2]\n  return %s\n", "%x: f64[2,2]"),
      r"case\.tir:2:30: error: float literal 1e999 is out of the range of f64"),
    V("text-svd-eps-inf", "text", "inf where a finite f64 attribute is required",
      tir("  %u, %s, %v = svd %x {eps = inf} : f64[2,2], f64[2], f64[2,2]\n  return %s\n", "%x: f64[2,2]"),
      r"case\.tir:2:30: error: attribute 'eps' of 'svd' must be finite, got inf"),
    V("text-svd-eps-negative", "text", "negative svd broadening",
      tir("  %u, %s, %v = svd %x {eps = -1.0} : f64[2,2], f64[2], f64[2,2]\n  return %s\n", "%x: f64[2,2]"),
      r"case\.tir:2:16: error: svd: eps must be finite and >= 0"),
    V("text-svd-topk-guards-all", "text", "svd_topk whose guards leave no kept triplet",
      tir("  %u, %s, %v = svd_topk %x {k = 2, guards = 2} : f64[2,2], f64[2], f64[2,2]\n  return %s\n",
          "%x: f64[2,2]"),
      r"case\.tir:2:16: error: svd_topk: guards = 2 must be in \[0, k − 1\] = \[0, 1\]"),
    Case("jvp-reads-svd-topk-guards", "passes", "jvp of a program that reads an svd_topk's guard triplets",
         ["opt", "case.tir", "--passes=jvp"],
         r"error: jvp: svd_topk has guards = 1: 'reduce_sum' reads its guard triplets",
         {"case.tir": tir("  %u, %s, %v = svd_topk %x {k = 2, guards = 1} : f64[3,2], f64[2], f64[2,3]\n"
                          "  %l = reduce_sum %s {axes = [0]} : f64[]\n  return %l\n", "%x: f64[3,3]")}),
    V("text-int-literal-overflow", "text", "an extent beyond int64",
      "program @f(%x: f64[99999999999999999999]) {\n  return %x\n}\n",
      r"case\.tir:1:20: error: integer literal 99999999999999999999 is out of the range of a 64-bit integer"),
    V("text-reshape-huge-attr", "text", "reshape to a shape whose byte size overflows int64",
      tir("  %y = reshape %x {shape = [4611686018427387904, 4]} : f64[2]\n  return %y\n"),
      r"case\.tir:2:8: error: reshape: result shape \[4611686018427387904, 4\] is too large"),
    V("text-iota-huge-attr", "text", "iota of 2^62 x 4 elements (declared type small)",
      tir("  %y = iota {shape = [4611686018427387904, 4], dim = 0} : f64[2]\n  return %y\n", ""),
      r"case\.tir:2:8: error: iota: result shape \[4611686018427387904, 4\] is too large"),
    V("text-pad-overflow", "text", "padding that overflows an extent",
      tir("  %y = pad %x {low = [9223372036854775807], high = [1]} : f64[2]\n  return %y\n"),
      r"case\.tir:2:8: error: pad: padding low \[9223372036854775807\] high \[1\] overflows dimension 0"),
    V("text-dot-general-huge-result", "text", "a product whose result has 2^62 elements",
      tir("  %y = dot_general %a, %b {lhs_batch = [], rhs_batch = [], lhs_contract = [1], "
          "rhs_contract = [0]} : f64[2]\n  return %y\n", "%a: f64[2147483648,1], %b: f64[1,2147483648]"),
      r"case\.tir:2:8: error: dot_general: result shape \[2147483648, 2147483648\] is too large"),
    V("text-rank9-result", "text", "an op whose result has rank 9",
      tir("  %y = reshape %x {shape = [1,1,1,1,1,1,1,1,1]} : f64[1]\n  return %y\n", "%x: f64[1]"),
      r"case\.tir:2:8: error: reshape: result rank 9 exceeds the limit of 8"),
    V("text-reshape-minus-one", "text", "numpy-style -1 in a reshape",
      tir("  %y = reshape %x {shape = [-1, 2]} : f64[2,2]\n  return %y\n", "%x: f64[4]"),
      r"case\.tir:2:8: error: reshape: negative dimension in result shape \[-1, 2\]"),
    V("text-negative-axis", "text", "negative reduction axis",
      tir("  %y = reduce_sum %x {axes = [-1]} : f64[2]\n  return %y\n", "%x: f64[2,2]"),
      r"case\.tir:2:8: error: reduce_sum: axes \[-1\] out of range for operand f64\[2,2\]"),
    V("text-einsum-no-arrow", "text", "implicit-output einsum spec",
      tir("  %y = einsum %x {spec = \"ij\"} : f64[2,2]\n  return %y\n", "%x: f64[2,2]"),
      r"case\.tir:2:8: error: einsum: einsum spec 'ij' needs an explicit '->' output"),
    V("text-compare-direction", "text", "unknown comparison direction",
      tir("  %y = compare %x, %x {direction = \"XX\"} : f64[2]\n  return %y\n"),
      r"case\.tir:2:8: error: compare: direction 'XX' is not one of EQ, NE, LT, LE, GT, GE"),
    V("text-dense-huge-type", "text", "a 1-element literal declared as 10^12 elements",
      tir("  %y = constant {value = dense<[1]> : f64[1000000000000]} : f64[1000000000000]\n  return %y\n", ""),
      r"case\.tir:2:32: error: dense literal has 1 elements along dimension 0, but type "
      r"f64\[1000000000000\] needs 1000000000000"),
    V("text-deep-brackets", "text", "200,000 nested '[' in a dense literal (no stack overflow)",
      tir("  %y = constant {value = dense<" + "[" * 200000 + "1" + "]" * 200000 +
          "> : f64[1]} : f64[1]\n  return %y\n", ""),
      Exact("case.tir:2:40: error: dense literal nested deeper than 8 levels (the maximum rank is 8)\n"
            "  %y = constant {value = dense<" + "[" * 89 + "...\n" + " " * 39 + "^")),
    V("text-nul-byte", "text", "a NUL byte inside an op",
      tir("  %y = neg\0 %x : f64[2]\n  return %y\n"),
      r"case\.tir:2:11: error: unexpected character .*\n  %y = neg\? %x : f64\[2\]\n {10}\^"),
    V("text-utf8-bom-inside", "text", "a UTF-8 byte-order mark inside the file (one at the start is skipped)",
      tir("  \ufeffreturn %x\n"),
      r"case\.tir:2:3: error: unexpected character"),
    V("text-unterminated-loc", "text", "unterminated loc string",
      tir("  %y = neg %x : f64[2] loc(\"abc\n  return %y\n"),
      r"case\.tir:2:28: error: unterminated string literal"),
    V("text-huge-identifier", "text", "an undefined operand with a 4 MB name (message and echo clipped)",
      tir("  %y = neg %" + "a" * (4 << 20) + " : f64[2]\n  return %y\n"),
      Exact("case.tir:2:12: error: use of undefined value %" + "a" * 64 + "...(4194304 bytes)\n"
            "  %y = neg %" + "a" * 108 + "...\n" + " " * 11 + "^")),
    V("text-missing-program-at", "text", "program name without '@'",
      "program f(%x: f64[2]) {\n  return %x\n}\n",
      r"case\.tir:1:9: error: "),
    V("text-c128-dtype", "text", "the reserved complex dtype",
      "program @f(%x: c128[2]) {\n  return %x\n}\n",
      r"case\.tir:1:16: error: unsupported element type 'c128' \(only f64 is supported\)"),
    V("text-zero-dim-shape-rule", "text", "zero extents are legal, shape rules still apply to them",
      tir("  %y = dot_general %a, %b {lhs_batch = [], rhs_batch = [], lhs_contract = [1], "
          "rhs_contract = [0]} : f64[0,3]\n  return %y\n", "%a: f64[0,2], %b: f64[3,3]"),
      r"case\.tir:2:8: error: dot_general: size mismatch: lhs f64\[0,2\] dim 1 is 2 but rhs f64\[3,3\] dim 0 is 3"),
    V("text-svd-eps-tiny-negative", "text", "a negative svd broadening too small for %f (printed exactly)",
      tir("  %u, %s, %v = svd %x {eps = -1e-20} : f64[2,2], f64[2], f64[2,2]\n  return %s\n", "%x: f64[2,2]"),
      Exact("case.tir:2:16: error: svd: eps must be finite and >= 0, got -1e-20\n"
            "  %u, %s, %v = svd %x {eps = -1e-20} : f64[2,2], f64[2], f64[2,2]\n" + " " * 15 + "^")),
    V("text-einsum-two-arrows", "text", "an einsum spec with a second '->' (not a repeated index)",
      tir("  %y = einsum %a {spec = \"i->i->i\"} : f64[2]\n  return %y\n", "%a: f64[2]"),
      Exact("case.tir:2:8: error: einsum: einsum spec 'i->i->i' has more than one '->' (a spec names one "
            "output, as in 'ij,jk->ik')\n  %y = einsum %a {spec = \"i->i->i\"} : f64[2]\n" + " " * 7 + "^")),
    V("text-long-line-window", "text", "an error near the end of a 900 KB line (the echo is its last 120 bytes)",
      tir(LONG_TIR_LINE + "\n  return %y\n", ""),
      Exact("case.tir:2:%d: error: expected a number, ',', '[' or ']' in dense literal, got 'x'\n...%s\n%s^" % (
          LONG_TIR_LINE.index("x") + 1, LONG_TIR_LINE[-120:], " " * (3 + 120 - len(LONG_TIR_LINE) + LONG_TIR_LINE.index("x"))))),

    # --- modules: call and scan ----------------------------------------------------
    V("module-mutual-recursion", "text", "two functions calling each other",
      "program @f(%x: f64[]) {\n  %0 = call @g(%x) : f64[]\n  return %0\n}\n\n"
      "entry program @g(%x: f64[]) {\n  %0 = call @f(%x) : f64[]\n  return %0\n}\n",
      r"case\.tir:2:13: error: no function @g above the calling function"),
    V("module-two-entries", "text", "two programs marked entry",
      "entry program @f(%x: f64[]) {\n  return %x\n}\nentry program @g(%x: f64[]) {\n  return %x\n}\n",
      r"case\.tir:4:1: error: unexpected 'entry' after the entry program"),
    V("module-scan-length-2^31", "text", "a scan of length 2^31",
      "program @b(%c: f64[]) {\n  return %c\n}\n\nentry program @m(%c: f64[]) {\n"
      "  %0 = scan @b(%c) {length = 2147483648, carries = 1} : f64[]\n  return %0\n}\n",
      r"case\.tir:6:8: error: scan: length = 2147483648 must be in \[1, 2\^30\]"),
    Case("module-scan-stack-too-big", "text", "a scan whose stacked output needs 8 TiB",
         ["run", "case.tir", "-i", "a=1"],
         r"error: prepare: %c, %ys = scan @b\(%a\) at case\.tir:7:13: result %ys f64\[1073741824,1024\] needs 8796093022208 bytes",
         {"case.tir": "program @b(%c: f64[]) {\n  %x = broadcast_in_dim %c {shape = [1024], dims = []} : f64[1024]\n"
                      "  return %c, %x\n}\n\nentry program @m(%a: f64[]) {\n"
                      "  %c, %ys = scan @b(%a) {length = 1073741824, carries = 1} : f64[], f64[1073741824,1024]\n"
                      "  return %ys\n}\n"}),
    Case("module-inline-too-big", "cli", "inlining a scan of 2^30 iterations",
         ["opt", "case.tir", "--passes=inline"],
         r"error: inline: module @m unrolls to 1073741824 ops, more than the 20000000",
         {"case.tir": "program @b(%c: f64[]) {\n  %0 = neg %c : f64[]\n  return %0\n}\n\nentry program @m(%c: f64[]) {\n"
                      "  %0 = scan @b(%c) {length = 1073741824, carries = 1} : f64[]\n  return %0\n}\n"}),
    # --- JSON reader ----------------------------------------------------------------
    V("json-truncated", "json", "JSON cut in the middle of the ops array",
      json_prog(X2, "[" + op("neg", ["x"], [("y", "f64[2]")]), '["y"]')[:120],
      r"case\.json:1:121: error: invalid JSON: syntax error .*unexpected end of input", "case.json"),
    V("json-root-array", "json", "a JSON array instead of a program object",
      "[1, 2, 3]\n", r"case\.json: /: error: expected an object, got array", "case.json"),
    V("json-two-op-cycle", "json", "two ops using each other's results",
      json_prog(X2, "[" + op("add", ["x", "b"], [("a", "f64[2]")]) + ", " +
                op("neg", ["a"], [("b", "f64[2]")]) + "]", '["b"]'),
      r"case\.json: /ops/0/operands/1: error: undefined value %b", "case.json"),
    V("json-duplicate-result", "json", "two ops defining the same value name",
      json_prog(X2, "[" + op("neg", ["x"], [("y", "f64[2]")]) + ", " +
                op("exp", ["x"], [("y", "f64[2]")]) + "]", '["y"]'),
      r"case\.json: /ops/1/results/0/name: error: redefinition of value %y", "case.json"),
    V("json-duplicate-key", "json", "an attribute key given twice in one object",
      json_prog(X22, "[" + op("svd", ["x"], SVD22, '{"eps": 1e-12, "eps": 0.5}') + "]", '["s"]'),
      r"case\.json: /ops/0/attrs: error: duplicate key \"eps\"", "case.json"),
    V("json-duplicate-top-key", "json", "the program name given twice",
      json_prog("[]", "[]", "[]", ', "name": "other"'),
      r"case\.json: /: error: duplicate key \"name\"", "case.json"),
    V("json-unknown-attr", "json", "an attribute the op does not have",
      json_prog(X22, "[" + op("reduce_sum", ["x"], [("y", "f64[2]")], '{"axis": [0]}') + "]", '["y"]'),
      r"case\.json: /ops/0/attrs/axis: error: unknown attribute 'axis' for op 'reduce_sum'", "case.json"),
    V("json-attr-wrong-type", "json", "an integer-list attribute given a string",
      json_prog(X22, "[" + op("transpose", ["x"], [("y", "f64[2,2]")], '{"perm": "1,0"}') + "]", '["y"]'),
      r"case\.json: /ops/0/attrs/perm: error: attribute 'perm' of 'transpose' must be an i64 list like \[0, 1\], got a string",
      "case.json"),
    V("json-eps-nan", "json", "\"nan\" for an f64 attribute",
      json_prog(X22, "[" + op("svd", ["x"], SVD22, '{"eps": "nan"}') + "]", '["s"]'),
      r"case\.json: /ops/0/attrs/eps: error: attribute 'eps' of 'svd' must be finite, got nan", "case.json"),
    V("json-number-overflow", "json", "1e400 (beyond double) for an f64 attribute",
      json_prog(X22, "[" + op("svd", ["x"], SVD22, '{"eps": 1e400}') + "]", '["s"]'),
      r"case\.json:1:\d+: error: invalid JSON: number overflow parsing '1e400'", "case.json"),
    V("json-integer-overflow", "json", "2^64 for an integer attribute",
      json_prog("[]", "[" + op("iota", [], [("y", "f64[3]")], '{"shape": [3], "dim": 18446744073709551616}') + "]",
                '["y"]'),
      r"case\.json: /ops/0/attrs/dim: error: attribute 'dim' of 'iota' must be an i64 \(integer\), got the float", "case.json"),
    V("json-tensor-NaN-spelling", "json", "\"NaN\" (not the schema's \"nan\") in constant data",
      json_prog("[]", "[" + op("constant", [], [("c", "f64[2]")],
                                '{"value": {"type": "f64[2]", "data": [1, "NaN"]}}') + "]", '["c"]'),
      r"case\.json: /ops/0/attrs/value/data/1: error: expected a number \(or \"nan\", \"inf\", \"-inf\"\), got \"NaN\"",
      "case.json"),
    V("json-tensor-huge-type", "json", "one data element for a 10^12-element constant",
      json_prog("[]", "[" + op("constant", [], [("c", "f64[1000000000000]")],
                                '{"value": {"type": "f64[1000000000000]", "data": [1]}}') + "]", '["c"]'),
      r"case\.json: /ops/0/attrs/value/data: error: type f64\[1000000000000\] has 1000000000000 elements, "
      r"but data has 1", "case.json"),
    V("json-negative-dim", "json", "a negative extent in an input type",
      json_prog('[{"name": "x", "type": "f64[-1]"}]', "[]", '["x"]'),
      r"case\.json: /inputs/0/type: error: bad type \"f64\[-1\]\"", "case.json"),
    V("json-rank9", "json", "an input of rank 9",
      json_prog('[{"name": "x", "type": "f64[1,1,1,1,1,1,1,1,1]"}]', "[]", '["x"]'),
      r"case\.json: /inputs/0/type: error: bad type", "case.json"),
    V("json-version-2", "json", "a future schema version",
      '{"version": 2, "kind": "tessel.program", "name": "j", "inputs": [], "ops": [], "outputs": []}\n',
      r"case\.json: /version: error: unsupported version 2", "case.json"),
    V("json-op-not-string", "json", "an op name that is a number",
      json_prog(X2, '[{"op": 5, "operands": ["x"], "results": []}]', "[]"),
      r"case\.json: /ops/0/op: error: expected a string, got number", "case.json"),
    V("json-missing-outputs", "json", "no outputs field",
      '{"version": 1, "kind": "tessel.program", "name": "j", "inputs": [], "ops": []}\n',
      r"case\.json: /: error: missing field \"outputs\"", "case.json"),
    V("json-deep-nesting", "json", "100,000 nested arrays (no stack overflow)",
      "[" * 100000 + "]" * 100000 + "\n",
      Exact("case.json:1:65: error: JSON nested deeper than 64 levels (a program needs 6: the "
            "program, its ops, an op, its attrs, a tensor, its data)\n"
            "..." + "[" * 120 + "...\n" + " " * 63 + "^"), "case.json"),
    V("json-invalid-utf8", "json", "a Latin-1 byte inside a JSON string",
      json_prog('[{"name": "cafX", "type": "f64[2]"}]', "[]", "[]").encode().replace(b"cafX", b"caf\xe9"),
      r"case\.json:1:\d+: error: invalid JSON: .*UTF-8", "case.json"),
    V("json-empty-file", "json", "an empty .json file",
      "", r"case\.json:1:1: error: invalid JSON: empty input", "case.json"),
    V("json-kind-deep-100k", "json", "\"kind\" nested 100,000 deep (crashed formatting the message)",
      json_kind("[" * 100000 + "]" * 100000),
      Exact("case.json:1:87: error: JSON nested deeper than 64 levels (a program needs 6: the program, "
            "its ops, an op, its attrs, a tensor, its data)\n..." + "[" * 120 + "...\n" + " " * 63 + "^"),
      "case.json"),
    V("json-kind-deep-50k", "json", "\"kind\" nested 50,000 deep (was a 100 KB message)",
      json_kind("[" * 50000 + "]" * 50000), r"^case\.json:1:87: error: JSON nested deeper than 64 levels",
      "case.json"),
    V("json-kind-nested-list", "json", "\"kind\" a short nested list (quoted in the message)",
      json_kind("[[[[1, 2, 3]]]]"),
      Exact('case.json: /kind: error: expected "tessel.program", got [[[[1,2,3]]]]'), "case.json"),
    V("json-kind-huge-string", "json", "\"kind\" a 1 MB string (quoted clipped)",
      json_kind('"' + "x" * 1000000 + '"'),
      Exact('case.json: /kind: error: expected "tessel.program", got "' + "x" * 63 + "...(1000002 bytes)"),
      "case.json"),
    V("json-huge-undefined-name", "json", "an output naming an undefined 1 MB value name",
      json_prog("[]", "[]", '["' + "b" * 1000000 + '"]'),
      Exact("case.json: /outputs/0: error: undefined value %" + "b" * 64 + "...(1000000 bytes)"), "case.json"),
    V("json-unterminated-huge-string", "json", "a 1 MB string cut by a newline (nlohmann quotes the token read)",
      json_kind('"' + "x" * 1000000 + "\n"),
      r"^case\.json:1:1000025: error: invalid JSON: syntax error while parsing value - invalid string: "
      r"control character U\+000A \(LF\) must be escaped to \\u000A or \\n; last read: '\"x{63}\.\.\.\(1000009 bytes\)'\n"
      r"\.\.\.x{120}\n {123}\^$", "case.json"),
    V("json-long-line-window", "json", "a syntax error near the end of a one-line 1.2 MB JSON file",
      LONG_JSON_LINE + "\n",
      Exact("case.json:1:%d: error: invalid JSON: syntax error while parsing value - unexpected ']'; "
            "expected '[', '{', or a literal\n...%s\n%s^" % (
                LONG_JSON_LINE.index(",]") + 2, LONG_JSON_LINE[-120:],
                " " * (3 + 120 - len(LONG_JSON_LINE) + LONG_JSON_LINE.index(",]") + 1))), "case.json"),
    V("json-number-huge-literal", "json", "a 100,000-digit number (beyond double; quoted clipped)",
      json_prog("[]", "[]", "[]", ', "x": 1' + "0" * 100000),
      r"^case\.json:1:\d+: error: invalid JSON: number overflow parsing '10{63}\.\.\.\(100001 bytes\)' "
      r"\(out of the range of f64\)\n", "case.json"),

    # --- .npy inputs (tessel run) ---------------------------------------------------
    R("npy-empty-file", "a zero-byte .npy", b"",
      r"error: input %x: x\.npy: not a \.npy file"),
    R("npy-wrong-magic", "a PNG header instead of \\x93NUMPY", b"\x89PNG\r\n\x1a\n" + b"\0" * 64,
      r"error: input %x: x\.npy: not a \.npy file \(missing the \\x93NUMPY magic\)"),
    R("npy-truncated-header", "magic and version but the header cut short", npy("(2, 3)")[:40],
      r"error: input %x: x\.npy: truncated \.npy header"),
    R("npy-header-length-4GB", "a version-2 header length of 4 GB", b"\x93NUMPY\x02\x00\xf0\xff\xff\xff{",
      r"error: input %x: x\.npy: \.npy header of 4294967280 bytes \(at most 1048576; numpy writes a "
      r"few hundred\)"),
    # The header dict as numpy writes it, nothing else (each was accepted before).
    R("npy-shape-key-twice", "two 'shape' keys were read as their concatenation",
      npy(None, data=f8(*range(6)), header="{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'shape': (3,), }"),
      r"error: input %x: x\.npy: malformed \.npy header: key 'shape' given twice"),
    R("npy-header-nul", "a NUL byte in the header was accepted",
      npy(None, data=f8(*range(6)), header="{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }\0"),
      r"error: input %x: x\.npy: malformed \.npy header: a NUL byte at offset"),
    R("npy-shape-not-tuple", "shape (6) (an int, not a tuple) was accepted",
      npy("(6)", data=f8(*range(6))),
      r"error: input %x: x\.npy: malformed \.npy header: shape \(6\) is not a tuple; a 1-d shape is "
      r"written \(6,\)", NEG23.replace("f64[2,3]", "f64[6]")),
    R("npy-shape-leading-zero", "shape (02, 3) was accepted",
      npy("(02, 3)", data=f8(*range(6))),
      r"error: input %x: x\.npy: malformed \.npy header: bad shape entry '02' \(a non-negative integer "
      r"without sign or leading zeros\)"),
    R("npy-shape-signed", "-0 and +2 were reported as \"bad shape entry ''\"",
      npy("(+2, 3)", data=f8(*range(6))),
      r"error: input %x: x\.npy: malformed \.npy header: bad shape entry '\+2'"),
    Case("npy-dev-zero", "npy", "--input x=/dev/zero grew to the memory cap",
         ["run", "prog.tir", "--input", "x=/dev/zero"],
         r"error: input %x: /dev/zero: not a \.npy file \(missing the \\x93NUMPY magic\)",
         {"prog.tir": NEG23}),
    Case("verify-dev-zero", "cli", "verify /dev/zero grew to the memory cap (bad_alloc, exit 2)",
         ["verify", "/dev/zero"],
         r"error: '/dev/zero' is longer than \d+ bytes, more than (tessel reads from a stream of "
         r"unknown size \(1 GiB\)|half of the address-space limit|half of the cgroup's memory limit)"),
    R("npy-version-9", "an unknown format version", npy("(2, 3)", data=f8(*range(6)), version=(9, 0)),
      r"error: input %x: x\.npy: unsupported \.npy version 9\.0"),
    R("npy-unterminated-dict", "a header dict without its closing brace",
      npy(None, header="{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), "),
      r"error: input %x: x\.npy: malformed \.npy header"),
    R("npy-float32", "float32 data", npy("(2, 3)", "<f4", struct.pack("<6f", *range(6))),
      r"error: input %x: x\.npy: unsupported dtype '<f4'; tessel reads little-endian float64"),
    R("npy-big-endian", "big-endian float64", npy("(2, 3)", ">f8", struct.pack(">6d", *range(6))),
      r"error: input %x: x\.npy: unsupported big-endian float64"),
    R("npy-int64", "integer data", npy("(2, 3)", "<i8", struct.pack("<6q", *range(6))),
      r"error: input %x: x\.npy: unsupported dtype '<i8'"),
    R("npy-object-pickle", "an object (pickle) array", npy("(2, 3)", "|O", b"\x80\x04N."),
      r"error: input %x: x\.npy: unsupported dtype '\|O'"),
    R("npy-fortran-order", "a Fortran-order array", npy("(2, 3)", data=f8(*range(6)), fortran=True),
      r"error: input %x: x\.npy: fortran_order is True"),
    R("npy-rank9", "a rank-9 array", npy("(1, 1, 1, 1, 1, 1, 1, 1, 1)", data=f8(1)),
      r"error: input %x: x\.npy: rank 9 exceeds the limit of 8"),
    R("npy-huge-shape", "a header declaring 2^62 elements", npy("(2147483648, 2147483648)"),
      r"error: input %x: x\.npy: shape \[2147483648,2147483648\] is too large"),
    R("npy-terabyte-shape-no-data", "a header declaring 10^12 elements (8 TB) over 48 bytes",
      npy("(1000000, 1000000)", data=f8(*range(6))),
      r"error: input %x: x\.npy: truncated data: shape \[1000000,1000000\] needs 8000000000000 bytes, file has 48"),
    R("npy-negative-dim", "a negative extent", npy("(-2, 3)", data=f8(*range(6))),
      r"error: input %x: x\.npy: malformed \.npy header: bad shape entry"),
    R("npy-truncated-data", "5 of 6 elements", npy("(2, 3)", data=f8(*range(5))),
      r"error: input %x: x\.npy: truncated data: shape \[2,3\] needs 48 bytes, file has 40"),
    R("npy-trailing-bytes", "7 doubles for a 2x3 array", npy("(2, 3)", data=f8(*range(7))),
      r"error: input %x: x\.npy: file has 8 bytes after the data of shape \[2,3\]"),
    R("npy-wrong-shape", "a 3x2 array for the f64[2,3] input", npy("(3, 2)", data=f8(*range(6))),
      r"error: input %x: expected f64\[2,3\], got f64\[3,2\] from 'x\.npy'"),
    R("npy-scalar-for-matrix", "a 0-d array for the f64[2,3] input", npy("()", data=f8(1)),
      r"error: input %x: expected f64\[2,3\], got f64\[\] from 'x\.npy'"),
    R("npy-zero-size-for-matrix", "an empty (0,3) array for the f64[2,3] input", npy("(0, 3)"),
      r"error: input %x: expected f64\[2,3\], got f64\[0,3\] from 'x\.npy'"),

    # --- the command line -----------------------------------------------------------
    Case("bench-plaquette-chi-text", "cli", "bench plaquette --chi with a word among the sizes",
         ["bench", "plaquette", "--chi", "16,big"],
         Exact("error: bench plaquette: --chi takes integers in [2, 96], got 'big'")),
    Case("bench-plaquette-chi-huge", "cli", "bench plaquette --chi 1e9 (chi^4 doubles overflow)",
         ["bench", "plaquette", "--chi", "1e9"],
         Exact("error: bench plaquette: --chi takes integers in [2, 96], got '1e9'")),
    Case("cli-missing-file", "cli", "a program file that does not exist",
         ["verify", "nope.tir"], r"error: cannot open 'nope\.tir'"),
    Case("cli-directory-as-program", "cli", "a directory given as the program file",
         ["verify", "adir"], r"error: cannot read 'adir': it is a directory", {"adir/keep": ""}),
    Case("cli-directory-as-npy", "cli", "a directory given as an .npy input",
         ["run", "prog.tir", "--input", "x=d.npy"], r"error: input %x: d\.npy: .*is a directory",
         {"prog.tir": NEG23, "d.npy/keep": ""}),
    Case("cli-empty-stdin-run", "cli", "tessel run on empty standard input",
         ["run", "-"], r"<stdin>:1:1: error: empty input"),
    Case("cli-json-format-on-text", "cli", "--input-format json on a text program",
         ["verify", "--input-format", "json", "prog.tir"],
         r"prog\.tir:1:1: error: invalid JSON: syntax error", {"prog.tir": NEG23}),
    Case("cli-run-iota-tables-40GB", "cli", "ten 4 GB iotas: tables built at prepare were not counted "
         "(arena 0 bytes, then bad_alloc)", ["run", "big.tir", "--passes", "", "--input", "x=[1,2]"],
         r"error: prepare: the iota tables of program @f \(built at prepare\) need [0-9.]+ GiB up to "
         r"%i\d = iota at big\.tir:\d+:\d+, more than (this machine's|the address-space limit|the cgroup's memory limit)",
         {"big.tir": tir("".join("  %%i%d = iota {shape = [500000000], dim = 0} : f64[500000000]\n" % k
                                 for k in range(10)) + "  return %x\n")}),
    Case("cli-run-terabyte-iota", "cli", "running a program whose iota is 8 TB (no allocation attempt)",
         ["run", "big.tir"],
         r"error: prepare: %y = iota loc\(\"8 TB\"\) at big\.tir:2:8: result %y f64\[1000000,1000000\] needs "
         r"8000000000000 bytes, more than (this machine's [0-9.]+ GiB of memory|the address-space "
         r"limit \(ulimit -v\) of 4 GiB, [0-9.]+ GiB of it free|the cgroup's memory limit)",
         {"big.tir": tir("  %y = iota {shape = [1000000, 1000000], dim = 0} : f64[1000000,1000000] "
                         "loc(\"8 TB\")\n  return %y\n", "")}),
    Case("cli-run-terabyte-input", "cli", "a program input declared as 8 TB, given inline",
         ["run", "big.tir", "--input", "x=[1]"],
         r"error: (prepare: )?input %x.*f64\[1000000,1000000\]",
         {"big.tir": tir("  return %x\n", "%x: f64[1000000,1000000]")}),
    Case("cli-inline-rank9", "cli", "an inline input nested 9 deep",
         ["run", "prog.tir", "--input", "x=[[[[[[[[[1]]]]]]]]]"],
         Exact("error: input %x: nested list deeper than 8 levels (the maximum rank is 8)"),
         {"prog.tir": NEG23}),
    Case("cli-inline-deep-ragged", "cli", "an inline input [1, <60,000 nested lists>] (no deep walk or dump)",
         ["run", "prog.tir", "--input", "x=[1," + "[" * 60000 + "]" * 60000 + "]"],
         Exact("error: input %x: nested list deeper than 8 levels (the maximum rank is 8)"), {"prog.tir": NEG23}),
    Case("cli-gradcheck-inline-deep", "cli", "a gradcheck inline input nested 60,000 deep",
         ["gradcheck", "prog.tir", "--input", "x=" + "[" * 60000 + "1" + "]" * 60000],
         Exact("error: --input x: nested list deeper than 8 levels (the maximum rank is 8)"), {"prog.tir": NEG23}),
    Case("cli-gradcheck-eps-negative", "cli", "gradcheck --eps=-1e-20 (CLI11 printed the range of double)",
         ["gradcheck", "prog.tir", "--eps=-1e-20"],
         Exact("error: --eps: must be > 0, got -1e-20\nRun 'tessel gradcheck --help' for the options."), {"prog.tir": NEG23}),
    Case("cli-elide-constants-negative", "cli", "verify --elide-constants=-1",
         ["verify", "prog.tir", "--elide-constants=-1"],
         Exact("error: --elide-constants: must be >= 0, got -1\nRun 'tessel verify --help' for the options."),
         {"prog.tir": NEG23}),
    Case("cli-pass-list-comma", "cli", "grad{wrt=x0,x1}: a list inside one option value uses ';'",
         ["opt", "prog.tir", "--passes=grad{wrt=x0,x1}"],
         Exact("error: --passes: pass 'grad' has no option 'x1' (options: wrt, vjp, keep-outputs, svd-blocks, "
               "bond-gauge, remat, svd-topk-guards, aux); "
               "',' separates options, the items of a list inside one option value are separated by ';', "
               "as in grad{wrt=x0;x1}"),
         {"prog.tir": tir("  %y = mul %x0, %x1 : f64[]\n  return %y\n", "%x0: f64[], %x1: f64[]")}),

    # --- tessel trg and emit --------------------------------------------------------
    Case("trg-beta-range-huge", "trg", "a sweep of 10^12 beta values (filled memory, then bad_alloc)",
         ["trg", "--beta-range", "0.1:0.2:1000000000000"],
         Exact("error: --beta-range: N = 1000000000000 beta values is more than 100000 (each value is a "
               "full TRG run; split the sweep into several calls)")),
    Case("trg-beta-range-one-point", "trg", "A:B:1 with A != B silently ran only A",
         ["trg", "--beta-range", "0.3:0.6:1"],
         Exact("error: --beta-range: N = 1 gives one value, but A = 0.3 and B = 0.6 differ (use N >= 2 "
               "for a sweep from A to B, or --beta 0.3)")),
    Case("trg-beta-subnormal", "trg", "--beta 1e-320 is a number (was 'is not a number')",
         ["trg", "--beta", "1e-320", "--chi", "4", "--steps", "2", "--ranks", "2,4", "--repeat", "0"],
         Exact("error: trg: step 1 (2->2, beta = 1e-320): the smallest kept singular value sa[1] = 1.414e-320 of Ma "
               "is <= tol = 1e-12; it is a zero of the spectrum to rounding and its derivative would be infinite. Keep fewer "
               "singular values in this step with --ranks (D' < 2), or leave --ranks out: the schedule "
               "is then derived from the spectrum")),
    # Diagnostics stay a few lines whatever the input (MAX_STDERR): long lists and specs
    # are clipped where the message is made, long flag values by the last guard.
    V("diag-axes-300k", "text", "a 300,000-entry axes list was echoed whole (3 MB)",
      tir("  %%y = reduce_sum %%x {axes = [%s]} : f64[]\n  return %%y\n" % ", ".join(["0"] * 300000)),
      r"^case\.tir:2:8: error: reduce_sum: axes \[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, \.\.\.\] "
      r"\(300000 entries\) repeats axis 0\n"),
    V("diag-perm-100k", "text", "a 100,000-entry perm was echoed whole",
      tir("  %%y = transpose %%x {perm = [%s]} : f64[2,2]\n  return %%y\n" % ", ".join(["0"] * 100000),
          "%x: f64[2,2]"),
      r"transpose: perm \[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, \.\.\.\] \(100000 entries\) has "
      r"100000 entries for operand f64\[2,2\]"),
    V("diag-einsum-1mb", "text", "a 1 MB einsum spec was echoed whole",
      tir('  %%y = einsum %%x {spec = "%s->"} : f64[]\n  return %%y\n' % ("a" * 1000000)),
      r"einsum: operand 0 has type f64\[2\] but subscripts 'a{64}\.\.\.\(1000000 bytes\)' name "
      r"1000000 dimensions"),
    V("diag-einsum-non-ascii", "text", "a non-ASCII label gave a lone byte",
      tir('  %y = einsum %x {spec = "\u00e9->"} : f64[]\n  return %y\n'),
      r"einsum: einsum spec '\u00e9->': \"\u00e9\" is not an index letter \(a-z, A-Z; einsum labels "
      r"are ASCII letters, 52 at most\)"),
    Case("diag-grad-wrt-100k", "cli", "grad{wrt=<100 KB>} was echoed twice (200 KB)",
         ["opt", "prog.tir", "--passes=grad{wrt=%s}" % ("w" * 100000)],
         r"error: grad: wrt: program @f has no input named '%w{64}\.\.\.\(100000 bytes\)' "
         r"\(inputs: %x\)\nnote: while running pass 'grad' \(1 of 1\): grad\{wrt=w+ "
         r"\.\.\.\(\d+-byte line clipped\)\.\.\. w+,vjp=false", {"prog.tir": NEG23}),
    Case("diag-model-100k", "trg", "--model <100 KB> was echoed whole",
         ["trg", "--model", "w" * 100000],
         r"error: --model: unknown model 'w{64}\.\.\.\(100000 bytes\)' \(allowed: ising, potts\)"),
    Case("diag-disable-pass-100k", "cli", "--disable-pass <100 KB> was echoed whole",
         ["opt", "prog.tir", "--passes=cse", "--disable-pass", "w" * 100000],
         r"error: --disable-pass: unknown pass 'w{64}\.\.\.\(100000 bytes\)' \(known passes: ",
         {"prog.tir": NEG23}),
    Case("diag-print-ir-after-100k", "cli", "--print-ir-after <100 KB> was echoed whole",
         ["opt", "prog.tir", "--passes=cse", "--print-ir-after", "w" * 100000],
         r"error: --print-ir-after: unknown pass 'w{64}\.\.\.\(100000 bytes\)'", {"prog.tir": NEG23}),
    Case("diag-input-name-100k", "cli", "--input <100 KB>=1 was echoed whole",
         ["run", "prog.tir", "--input", "w" * 100000 + "=1"],
         r"error: --input w{64}\.\.\.\(100000 bytes\): program @f has no input "
         r"%w{64}\.\.\.\(100000 bytes\) \(inputs: %x\)", {"prog.tir": NEG23}),
    Case("diag-gradcheck-wrt-100k", "cli", "gradcheck --wrt <100 KB> was echoed whole",
         ["gradcheck", "prog.tir", "--wrt", "w" * 100000],
         r"error: gradcheck: --wrt: program @f has no input named '%w{64}\.\.\.\(100000 bytes\)'",
         {"prog.tir": NEG23}),
    Case("json-dump-invalid-utf8-name", "json", "dump --format json wrote U+FFFD for a byte 0xFF",
         ["dump", "prog.tir", "--format", "json"],
         Exact("error: JSON: the program name @\"p\\xff\" is not valid UTF-8 (byte 1), which a JSON "
               "string cannot hold; rename it, or use the text form (tessel dump --format text), "
               "which can"),
         {"prog.tir": 'program @"p\\xff"(%x: f64[2]) {\n  %y = neg %x : f64[2]\n  return %y\n}\n'}),
    Case("trg-output-unwritable", "trg", "-o into a directory that does not exist",
         ["trg", "--beta", "0.4", "--chi", "4", "--steps", "2", "--json", "-o", "no/such/dir/out.jsonl"],
         Exact("error: -o: cannot open 'no/such/dir/out.jsonl' for writing: No such file or directory")),
    Case("json-number-underflow", "json", "1e-400 read as 0 where the text form rejects it",
         ["verify", "u.json"],
         r"^u\.json:1:\d+: error: invalid JSON: number '1e-400' is out of the range of f64 \(it would "
         r"read as 0\)",
         {"u.json": json_prog(X2, '[{"op": "constant", "operands": [], "results": [{"name": "c", "type": '
                                  '"f64[2]"}], "attrs": {"value": {"type": "f64[2]", "data": [1e-400, 2]}}}]',
                              '["c"]')}),
    # Control bytes in a flag's value are shown as \xNN, never written raw to a terminal.
    Case("trg-algorithm-escape-sequence", "cli", "an ANSI escape sequence in --algorithm reached the terminal",
         ["trg", "--algorithm", "a\x1b[31mb\rc\x7f", "--beta", "0.4"],
         r"error: --algorithm: unknown algorithm 'a\\x1b\[31mb\\x0dc\\x7f'"),
    Case("trg-ranks-escape-sequence", "cli", "a control byte in --ranks was echoed raw",
         ["trg", "--ranks", "2,4\x1b[2J", "--beta", "0.4"],
         r"error: --ranks: '4\\x1b\[2J' is not a rank"),
    Case("trg-algorithm-8bit-csi", "cli", "an 8-bit CSI (0x9b, and U+009B) in --algorithm reached the terminal",
         ["trg", "--algorithm", b"a\x9b31m\xc2\x9b2mb", "--beta", "0.4"],
         r"error: --algorithm: unknown algorithm 'a\\x9b31m\\u009b2mb'"),
    Case("cli-unknown-flag-escape-sequence", "cli", "CLI11's own message quoted a control byte raw",
         ["trg", "--be\x1bta", "0.4"], r"^error: .*\\x1b"),
    Case("trg-ranks-huge-count", "trg", "--ranks 4x(10^11) would allocate 10^11 ranks",
         ["trg", "--ranks", "4x99999999999", "--beta", "0.4"],
         r"error: --ranks: more than 1023 entries \(one per step; no run has more than 1023 steps\)"),
    Case("trg-ranks-too-long-hotrg", "trg", "a too-long --ranks was blamed on --steps, which was not given",
         ["trg", "--algorithm", "hotrg", "--ranks", "4x600", "--beta", "0.4"],
         r"error: --ranks has 600 entries \(one per step\), more than the 511 steps a run can have with "
         r"--algorithm hotrg"),
    Case("trg-chi-int64-overflow", "trg", "--chi 99999999999999999999 ran with chi = 2^63 - 1",
         ["trg", "--chi", "99999999999999999999", "--beta", "0.4"],
         Exact("error: --chi: 99999999999999999999 is out of the range of a 64-bit integer\n"
               "Run 'tessel trg --help' for the options.")),
    Case("run-uint-overflow", "cli", "--profile-top 2^64 saturated",
         ["run", "prog.tir", "--input", "x=[[1,2,3],[4,5,6]]", "--profile-top=18446744073709551616"],
         Exact("error: --profile-top: 18446744073709551616 is out of the range of a 64-bit integer\n"
               "Run 'tessel run --help' for the options."), {"prog.tir": NEG23}),
    Case("trg-beta-range-near-max", "trg", "--beta-range 0.3:1e308:3 ended at inf (A + (B-A)*i overflowed)",
         ["trg", "--beta-range", "0.3:1e308:3", "--chi", "4", "--steps", "2", "--repeat", "0", "--json"],
         r"error: trg: lnZ/N is not finite \(inf\) at beta = 1e\+308\n"),
    Case("trg-beta-underflow", "trg", "--beta 1e-400 reads as 0",
         ["trg", "--beta", "1e-400"],
         Exact("error: --beta: '1e-400' is out of the range of f64 (it would read as 0)")),
    Case("trg-ranks-zero", "trg", "a rank 0 in --ranks (lacked 'error:')",
         ["trg", "--ranks", "0,4", "--steps", "2", "--chi", "4", "--repeat", "0"],
         Exact("error: --ranks: rank 0 of step 1 is out of range: D = 2 allows D' in [1, 4] (min(D^2, chi = 4))")),
    Case("emit-huge-step", "trg", "emit trg-step --din 100000 (a builder shape error, lacked 'error:')",
         ["emit", "trg-step", "--din", "100000", "--dout", "4"],
         Exact("error: emit trg-step: input %T: type f64[100000,100000,100000,100000] is too large: its byte "
               "size overflows 64 bits")),
    Case("emit-din-square-overflow", "trg", "emit trg-step --din 4e9 (din^2 overflows int64)",
         ["emit", "trg-step", "--din", "4000000000", "--dout", "4"],
         Exact("error: emit trg-step: input %T: type f64[4000000000,4000000000,4000000000,4000000000] is too "
               "large: its byte size overflows 64 bits")),
    Case("emit-trg-chi-max", "trg", "emit trg with chi = 2^63 - 1 (rank squares saturate)",
         ["emit", "trg", "--chi", "9223372036854775807", "--steps", "30"],
         Exact("error: emit trg: einsum: result shape [65536, 65536, 65536, 65536] is too large: its byte size "
               "overflows 64 bits (at trg step 8 (256->65536): plaquette einsum)")),
    Case("cli-inline-overflow", "cli", "an inline input 1e999 (would be inf)",
         ["run", "prog.tir", "--input", "x=[[1,2,3],[4,5,1e999]]"],
         r"error: input %x: .*1e999.* is neither valid inline JSON", {"prog.tir": NEG23}),
    Case("cli-inline-nan-string", "cli", "\"nan\" as an inline element",
         ["run", "prog.tir", "--input", "x=[[1,2,3],[4,5,\"nan\"]]"],
         r"error: input %x: expected a number, got \"nan\"", {"prog.tir": NEG23}),
    Case("cli-width-huge", "cli", "--width 100000",
         ["run", "prog.tir", "--input", "x=[[1,2,3],[4,5,6]]", "--width", "100000"],
         r"error: --width must be between 1 and 256, got 100000", {"prog.tir": NEG23}),
    Case("cli-output-dir-unwritable", "cli", "--output-dir inside a regular file",
         ["run", "prog.tir", "--input", "x=[[1,2,3],[4,5,6]]", "--output-dir", "afile/out"],
         r"error: .*afile/out", {"prog.tir": NEG23, "afile": "not a directory"}),
    Case("cli-unknown-flag", "cli", "a flag that does not exist",
         ["verify", "--bogus", "prog.tir"], r"^error: The following argument was not expected: --bogus",
         {"prog.tir": NEG23}),
    Case("cli-check-nan-sqrt", "cli", "--check-nan on sqrt of a negative input",
         ["run", "prog.tir", "--input", "x=[[1,4,-9],[16,25,36]]", "--check-nan"],
         r"error: --check-nan: %r = sqrt %x loc\(\"root\"\) at prog\.tir:2:8: result %r f64\[2,3\] is NaN at \[0,2\]; "
         r"operands: %x finite",
         {"prog.tir": tir("  %r = sqrt %x : f64[2,3] loc(\"root\")\n  %y = mul %r, %r : f64[2,3]\n  return %y\n",
                          "%x: f64[2,3]")}),
    Case("cli-check-nan-input-nan", "cli", "--check-nan when the input itself holds NaN",
         ["run", "prog.tir", "--input", "x=x.npy", "--check-nan"],
         r"error: --check-nan: %y = neg %x loc\(\"negate x\"\) at prog\.tir:2:8: result %y f64\[2,3\] is NaN at \[1,1\]; "
         r"operands: %x has NaN",
         {"prog.tir": NEG23, "x.npy": npy("(2, 3)", data=f8(1, 2, 3, 4, float("nan"), 6))}),
    Case("cli-check-nan-in-place", "cli", "--check-nan names a finite operand that the op overwrites in place",
         ["run", "prog.tir", "--input", "x=[[1,4,-9],[16,25,36]]", "--check-nan"],
         r"error: --check-nan: %l = log %t loc\(\"log of 2x\"\) at prog\.tir:3:8: result %l f64\[2,3\] is NaN at \[0,2\]; "
         r"operands: %t finite",
         {"prog.tir": tir("  %t = add %x, %x : f64[2,3]\n  %l = log %t : f64[2,3] loc(\"log of 2x\")\n"
                          "  %y = mul %l, %l : f64[2,3]\n  return %y\n", "%x: f64[2,3]")}),
]


def sanitized(binary):
    with open(binary, "rb") as f:
        data = f.read()
    return b"__asan_init" in data or b"__tsan_init" in data or b"__ubsan_handle" in data


def run_case(tessel, case, limit_memory, verbose):
    d = tempfile.mkdtemp(prefix="tessel-hostile-")
    try:
        for name, content in case.files.items():
            path = os.path.join(d, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(content if isinstance(content, bytes) else content.encode("utf-8"))

        def limits():
            if limit_memory:
                resource.setrlimit(resource.RLIMIT_AS, (MEM_LIMIT, MEM_LIMIT))

        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        try:
            p = subprocess.run([tessel, *case.argv], cwd=d, input=case.stdin, capture_output=True,
                               timeout=TIMEOUT, preexec_fn=limits, env=env)
        except subprocess.TimeoutExpired:
            return "hung (no exit within %d s)" % TIMEOUT
        err = p.stderr.decode("utf-8", "replace")
        problems = []
        if p.returncode != 1:
            problems.append("exit status %d (want 1%s)" % (
                p.returncode, ", killed by signal %d" % -p.returncode if p.returncode < 0 else ""))
        if FORBIDDEN.search(err):
            problems.append("stderr reports a crash, sanitizer finding or internal error")
        if isinstance(case.expect, Exact):
            if err.rstrip("\n") != case.expect:
                problems.append("stderr is not exactly:\n    " + case.expect.replace("\n", "\n    "))
        elif not re.search(case.expect, err):
            problems.append("stderr does not match /%s/" % case.expect)
        if not ERROR_TAG.match(err):
            problems.append("stderr does not start with 'error: ' or '<where>: error: '")
        if re.search(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]", p.stderr) or "\ufffd" in err:
            problems.append("stderr holds a raw control byte (a terminal would act on it)")
        if len(p.stderr) > MAX_STDERR:
            problems.append("stderr has %d bytes (at most %d: a diagnostic stays readable)" % (
                len(p.stderr), MAX_STDERR))
        if problems or verbose:
            return "; ".join(problems) + "\n    stderr: " + err[:1500].replace("\n", "\n            ") \
                if problems else ("ok\n    " + err[:600].replace("\n", "\n    "))
        return None
    finally:
        shutil.rmtree(d, ignore_errors=True)


def golden_error_cases():
    """tests/lit/ir/err-*.tir: re-run strictly (exit 1, file:line:col)."""
    out = []
    lit_ir = os.path.join(SRC, "lit", "ir")
    for name in sorted(os.listdir(lit_ir)):
        if name.startswith("err-") and name.endswith(".tir"):
            with open(os.path.join(lit_ir, name), "rb") as f:
                data = f.read()
            out.append(Case("golden-" + name[:-4], "golden", "tests/lit/ir/" + name, ["verify", name],
                            re.escape(name) + r":\d+:\d+: error: ", {name: data}))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tessel", required=True)
    ap.add_argument("-k", default="", help="run only cases whose id contains this")
    ap.add_argument("-v", action="store_true", help="print every case's stderr")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    tessel = os.path.abspath(a.tessel)
    ids = [c.id for c in CASES]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        print("duplicate case ids: %s" % sorted(dup))
        return 1
    cases = [c for c in CASES + golden_error_cases() if a.k in c.id]
    if a.list:
        for c in cases:
            print("%-32s %-7s %s" % (c.id, c.area, c.what))
        return 0
    limit = not sanitized(tessel)
    failed = 0
    by_area = {}
    for c in cases:
        res = run_case(tessel, c, limit, a.v)
        by_area[c.area] = by_area.get(c.area, 0) + 1
        if res is None:
            continue
        ok = res.startswith("ok")
        failed += not ok
        print("%s %s: %s" % ("PASS" if ok else "FAIL", c.id, res))
    summary = ", ".join("%s %d" % kv for kv in sorted(by_area.items()))
    print("hostile inputs: %d cases (%s), %d failed%s" % (
        len(cases), summary, failed, "" if limit else " [sanitized binary: no RLIMIT_AS]"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
