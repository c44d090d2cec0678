// Text (.tir), JSON and DOT forms: printing, parsing, round trips, diagnostics.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "ir/Builder.h"
#include "ir/Json.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/TextUtil.h"
#include "ir/Verifier.h"

using namespace tessel;
using namespace tessel::ir;

namespace {

/// A small program holding one op of `kind` (plus the inputs it needs), output = all
/// results. Every op of the table must have a case: a new op without one fails here.
Program exampleFor(OpKind kind) {
  Program p;
  p.name = std::string("ex_") + opName(kind);
  Builder b(p);
  b.setLoc(std::string("example ") + opName(kind));
  auto in = [&](const char *n, std::vector<int64_t> s) { return p.addInput(n, Type(s)); };
  llvm::SmallVector<ValueId, 1> rs;
  switch (kind) {
  case OpKind::Constant:
    rs = {b.constant(Tensor(Type({2, 3}), {1, -2.5, 0.1, 1e-12, 3e300, -0.0}))};
    break;
  case OpKind::Iota: rs = {b.iota({3, 4}, 1)}; break;
  case OpKind::Neg: case OpKind::Exp: case OpKind::Log: case OpKind::Sqrt:
  case OpKind::Sin: case OpKind::Cos: case OpKind::Tanh: case OpKind::Abs:
  case OpKind::Sign: case OpKind::StopGradient:
    rs = {b.unary(kind, in("x", {2, 3}))};
    break;
  case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div:
  case OpKind::Maximum:
    rs = {b.binary(kind, in("x", {2, 3}), in("y", {2, 3}))};
    break;
  case OpKind::Compare: rs = {b.compare(in("x", {2, 3}), in("y", {2, 3}), "GE")}; break;
  case OpKind::Select:
    rs = {b.select(in("pred", {4}), in("x", {4}), in("y", {4}))};
    break;
  case OpKind::ReduceSum: rs = {b.reduceSum(in("x", {2, 3, 4}), {0, 2})}; break;
  case OpKind::ReduceMax: rs = {b.reduceMax(in("x", {2, 3, 4}), {0, 1, 2})}; break;
  case OpKind::BroadcastInDim: rs = {b.broadcastInDim(in("v", {3}), {2, 3}, {1})}; break;
  case OpKind::Reshape: rs = {b.reshape(in("x", {2, 3, 4}), {6, 4})}; break;
  case OpKind::Transpose: rs = {b.transpose(in("x", {2, 3, 4}), {2, 0, 1})}; break;
  case OpKind::Slice: rs = {b.slice(in("x", {4, 5}), {1, 0}, {3, 5})}; break;
  case OpKind::Pad: rs = {b.pad(in("x", {2, 2}), {1, 0}, {0, 2})}; break;
  case OpKind::DotGeneral:
    rs = {b.dotGeneral(in("x", {7, 2, 3}), in("y", {3, 7, 4}), {0}, {1}, {2}, {0})};
    break;
  case OpKind::Einsum:
    rs = {b.einsum("wak,abu,k->wbu", {in("A", {2, 3, 4}), in("B", {3, 5, 6}), in("c", {4})})};
    break;
  case OpKind::Svd: rs = b.svd(in("M", {6, 4}), 1e-10); break;
  case OpKind::SvdTopk: rs = b.svdTopk(in("M", {6, 4}), 2, 1e-10); break;
  case OpKind::SvdTopkComplement:
    rs = b.svdTopkComplement(in("A", {6, 4}), in("U", {6, 3}), in("s", {3}), in("Vt", {3, 4}),
                             in("gU", {6, 2}), in("gVt", {2, 4}), 1e-9);
    break;
  case OpKind::Eigh: rs = b.eigh(in("S", {5, 5}), 1e-10); break;
  case OpKind::Qr: rs = b.qr(in("M", {6, 4})); break;
  case OpKind::TriangularSolve:
    rs = {b.triangularSolve(in("L", {3, 3}), in("B", {2, 3}), false, true, true)};
    break;
  case OpKind::SylvesterSolve: rs = {b.sylvesterSolve(in("A", {3, 3}), in("B", {2, 2}), in("C", {3, 2}))}; break;
  case OpKind::Call: {
    Program f;
    f.name = "f";
    ValueId x = f.addInput("x", Type({2, 3}));
    Builder fb(f);
    f.addOutput(fb.unary(OpKind::Sin, x));
    f.addOutput(fb.reduceSum(fb.mul(x, x), {0, 1}));
    p.functions.push_back(std::move(f));
    rs = b.call("f", {in("x", {2, 3})});
    break;
  }
  case OpKind::Scan: {
    Program body;
    body.name = "body";
    ValueId c = body.addInput("c", Type({2}));
    ValueId x = body.addInput("x", Type({}));
    Builder bb(body);
    ValueId next = bb.mul(c, bb.broadcastScalar(x, {2}));
    body.addOutput(next);
    body.addOutput(bb.reduceSum(next, {0}));
    p.functions.push_back(std::move(body));
    rs = b.scan("body", {in("c", {2})}, {in("xs", {5})}, 5, true);
    break;
  }
  }
  if (rs.empty()) FAIL("no example program for op '" << opName(kind) << "'");
  for (ValueId r : rs) p.addOutput(r);
  return p;
}

/// The parse error message of `text`, or "<no error>".
std::string parseError(const std::string &text, const std::string &file = "t.tir") {
  try {
    parseProgram(text, file);
  } catch (const ParseError &e) {
    return e.what();
  }
  return "<no error>";
}

/// First line of a diagnostic: "file:line:col: error: message".
std::string firstLine(const std::string &s) { return s.substr(0, s.find('\n')); }

bool sameBits(double a, double b) {
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

} // namespace

TEST_CASE("text: every op of the table prints, parses back, verifies and round-trips "
          "through JSON") {
  for (OpKind k : allOpKinds()) {
    CAPTURE(opName(k));
    Program p = exampleFor(k);
    REQUIRE(verify(p).empty());
    std::string text = printProgram(p);
    CAPTURE(text);
    CHECK(text.find(std::string(" = ") + opName(k) + " ") != std::string::npos);
    CHECK(text.find("loc(\"example ") != std::string::npos);
    Program q = parseProgram(text, "ex.tir");
    CHECK(verify(q).empty());
    CHECK(printProgram(q) == text);
    // Structural equality of what was parsed (the ops of the entry, which a module
    // prints after its functions).
    REQUIRE(q.ops.size() == p.ops.size());
    REQUIRE(q.functions.size() == p.functions.size());
    const size_t header = p.functions.empty()
                              ? 1
                              : 1 + static_cast<size_t>(std::count(
                                        text.begin(), text.begin() + static_cast<ptrdiff_t>(text.find("entry program")), '\n'));
    for (size_t i = 0; i < p.ops.size(); ++i) {
      CHECK(q.ops[i].kind == p.ops[i].kind);
      CHECK(q.ops[i].attrs == p.ops[i].attrs);
      CHECK(q.ops[i].loc == p.ops[i].loc);
      CHECK(q.ops[i].pos.line == header + 1 + i);
    }
    CHECK(q.outputs.size() == p.outputs.size());
    // JSON: text -> JSON -> text is the identity, and JSON -> JSON too.
    std::string json = programToJson(q);
    Program r = programFromJson(json, "ex.json");
    CHECK(printProgram(r) == text);
    CHECK(programToJson(r) == json);
    // DOT mentions the op.
    CHECK(printDot(q).find(std::string("label=\"") + opName(k)) != std::string::npos);
  }
}

TEST_CASE("text: canonical form of a hand-built program (golden)") {
  Program p;
  p.name = "step";
  Builder b(p);
  ValueId T = p.addInput("T", Type({4, 4, 4, 4}));
  p.addInput("beta", Type({}));
  ValueId a = b.unary(OpKind::Abs, T);
  ValueId m = b.reduceMax(a, {0, 1, 2, 3});
  p.setName(m, "m");
  ValueId Ma = b.reshape(T, {16, 16});
  p.setName(Ma, "Ma");
  b.setLoc("step: svd Ma");
  auto usv = b.svd(Ma);
  p.setName(usv[0], "U");
  p.setName(usv[1], "s");
  p.setName(usv[2], "Vt");
  b.setLoc("");
  ValueId c = b.constant(Tensor(Type({2, 2}), {1, 2, 3, 4}));
  p.setName(c, "c");
  ValueId k = b.compare(m, m, "GT");
  p.addOutput(m);
  p.addOutput(usv[1]);
  p.addOutput(k);
  p.addOutput(c);
  const char *expected =
      "program @step(%T: f64[4,4,4,4], %beta: f64[]) {\n"
      "  %0 = abs %T : f64[4,4,4,4]\n"
      "  %m = reduce_max %0 {axes = [0, 1, 2, 3]} : f64[]\n"
      "  %Ma = reshape %T {shape = [16, 16]} : f64[16,16]\n"
      "  %U, %s, %Vt = svd %Ma {eps = 1e-12, gauge = \"none\"} : f64[16,16], f64[16], f64[16,16] "
      "loc(\"step: svd Ma\")\n"
      "  %c = constant {value = dense<[[1, 2], [3, 4]]> : f64[2,2]} : f64[2,2]\n"
      "  %1 = compare %m, %m {direction = \"GT\"} : f64[]\n"
      "  return %m, %s, %1, %c\n"
      "}\n";
  CHECK(printProgram(p) == expected);
  CHECK(valueRef(p, a) == "%0");
  CHECK(valueRef(p, k) == "%1");
  CHECK(valueRef(p, T) == "%T");

  PrintOptions noLoc;
  noLoc.printLocations = false;
  CHECK(printProgram(p, noLoc).find("loc(") == std::string::npos);
}

TEST_CASE("text: anonymous values are renumbered in order of definition; names kept") {
  const char *in = "// leading comment\n"
                   "program @f(%x: f64[2]) {   // header\n"
                   "  %7 = neg %x : f64[2]\n"
                   "  %3 = exp %7 : f64[2] // trailing comment\n"
                   "  %\"my value\" = add %3, %7 : f64[2]\n"
                   "  %a.b_2 = mul %\"my value\", %x : f64[2]\n"
                   "  return %a.b_2, %3\n"
                   "}\n"
                   "// trailing\n";
  Program p = parseProgram(in, "f.tir");
  CHECK(printProgram(p) == "program @f(%x: f64[2]) {\n"
                           "  %0 = neg %x : f64[2]\n"
                           "  %1 = exp %0 : f64[2]\n"
                           "  %\"my value\" = add %1, %0 : f64[2]\n"
                           "  %a.b_2 = mul %\"my value\", %x : f64[2]\n"
                           "  return %a.b_2, %1\n"
                           "}\n");
  CHECK(p.values[p.ops[0].results[0]].name.empty());
  CHECK(p.lookup("my value") == p.ops[2].results[0]);
  CHECK(p.ops[1].pos.line == 4);
  CHECK(p.ops[1].pos.col == 8);
  CHECK(p.ops[1].pos.file == "f.tir");
  // Free layout: several ops on one line, line breaks inside an op.
  Program q = parseProgram("program @f(%x: f64[2]) { %7 = neg %x : f64[2] %3 = exp\n %7\n :\n "
                           "f64[2] return %3 }");
  CHECK(printProgram(q) == "program @f(%x: f64[2]) {\n"
                           "  %0 = neg %x : f64[2]\n"
                           "  %1 = exp %0 : f64[2]\n"
                           "  return %1\n"
                           "}\n");
}

TEST_CASE("text: doubles round-trip bit-exactly; nan/inf only in constants") {
  std::vector<double> vals = {0.1,
                              1.0 / 3.0,
                              -0.0,
                              5e-324,
                              std::numeric_limits<double>::max(),
                              std::numeric_limits<double>::min(),
                              -1e-12,
                              123456789012345678.0,
                              std::numeric_limits<double>::infinity(),
                              -std::numeric_limits<double>::infinity(),
                              std::numeric_limits<double>::quiet_NaN(),
                              2.0};
  Program p;
  Builder b(p);
  ValueId c = b.constant(Tensor(Type({3, 4}), vals));
  ValueId M = p.addInput("M", Type({3, 4}));
  auto usv = b.svd(M, 0.1 + 0.2); // 0.30000000000000004
  p.addOutput(c);
  p.addOutput(usv[1]);
  std::string text = printProgram(p);
  CHECK(text.find("dense<[[0.1, 0.3333333333333333, -0, 5e-324], "
                  "[1.7976931348623157e+308, 2.2250738585072014e-308, -1e-12, "
                  "123456789012345680], [inf, -inf, nan, 2]]> : f64[3,4]") != std::string::npos);
  CHECK(text.find("{eps = 0.30000000000000004, gauge = \"none\"}") != std::string::npos);
  Program q = parseProgram(text);
  CHECK(printProgram(q) == text);
  const Tensor &t = q.ops[0].attrs.getTensor("value");
  REQUIRE(t.data.size() == vals.size());
  for (size_t i = 0; i < vals.size(); ++i) {
    CAPTURE(i);
    if (std::isnan(vals[i])) CHECK(std::isnan(t.data[i]));
    else CHECK(sameBits(t.data[i], vals[i]));
  }
  CHECK(sameBits(q.ops[1].attrs.getF64("eps"), 0.1 + 0.2));
  // JSON keeps them too.
  Program r = programFromJson(programToJson(q));
  CHECK(printProgram(r) == text);
  // Integral f64 attributes print as floats.
  Program s;
  Builder bs(s);
  bs.svd(s.addInput("M", Type({2, 2})), 1.0);
  CHECK(printProgram(s).find("{eps = 1.0, gauge = \"none\"}") != std::string::npos);
  // Scalar and empty constants.
  Program e;
  Builder be(e);
  e.addOutput(be.scalar(-2.5));
  e.addOutput(be.constant(Tensor(Type({0, 3}), {})));
  e.addOutput(be.constant(Tensor(Type({2, 0}), {})));
  std::string et = printProgram(e);
  CHECK(et.find("dense<-2.5> : f64[]") != std::string::npos);
  CHECK(et.find("dense<[]> : f64[0,3]") != std::string::npos);
  CHECK(et.find("dense<[[], []]> : f64[2,0]") != std::string::npos);
  CHECK(printProgram(parseProgram(et)) == et);
}

TEST_CASE("text: strings and names are quoted with escapes and read back") {
  Program p;
  p.name = "weird name";
  Builder b(p);
  ValueId x = p.addInput("x y", Type({2}));
  b.setLoc("tab\there \"quoted\" back\\slash\nnewline \x01 é");
  ValueId n = b.neg(x);
  p.setName(n, "ω");
  p.addOutput(n);
  std::string text = printProgram(p);
  CHECK(text == "program @\"weird name\"(%\"x y\": f64[2]) {\n"
                "  %\"ω\" = neg %\"x y\" : f64[2] loc(\"tab\\there \\\"quoted\\\" "
                "back\\\\slash\\nnewline \\x01 é\")\n"
                "  return %\"ω\"\n"
                "}\n");
  Program q = parseProgram(text);
  CHECK(q.name == p.name);
  CHECK(q.ops[0].loc == p.ops[0].loc);
  CHECK(q.values[q.ops[0].results[0]].name == "ω");
  CHECK(printProgram(q) == text);
  CHECK(printProgram(programFromJson(programToJson(q))) == text);
}

TEST_CASE("text: large constants are summarised only on request, and then not parsable") {
  Program p;
  Builder b(p);
  std::vector<double> data(100);
  for (int i = 0; i < 100; ++i) data[i] = i - 50;
  p.addOutput(b.constant(Tensor(Type({10, 10}), data)));
  std::string full = printProgram(p);
  CHECK(full.find("elements") == std::string::npos);
  PrintOptions o;
  o.elideConstantsAbove = 99;
  std::string elided = printProgram(p, o);
  CHECK(elided.find("{value = dense<100 elements, min -50, max 49, sum -50> : f64[10,10]}") !=
        std::string::npos);
  o.elideConstantsAbove = 100;
  CHECK(printProgram(p, o) == full);
  std::string err = parseError(elided);
  CAPTURE(err);
  CHECK(firstLine(err).find("t.tir:2:32: error: cannot read an elided constant") == 0);
}

TEST_CASE("parser: diagnostics give file:line:col, the source line and a caret") {
  const std::string head = "program @f(%x: f64[2,2], %v: f64[2]) {\n";
  struct Case {
    std::string text;
    std::string first; // expected first line of the diagnostic
  };
  std::vector<Case> cases = {
      {"", "t.tir:1:1: error: empty input: expected 'program @name(...) { ... }'"},
      {"  // only a comment\n",
       "t.tir:2:1: error: empty input: expected 'program @name(...) { ... }'"},
      {"prog @f() {}", "t.tir:1:1: error: expected 'program' at the start of the file, got 'prog'"},
      {head + "  %0 = frobnicate %x : f64[2,2]\n  return %0\n}\n",
       "t.tir:2:8: error: unknown op 'frobnicate'"},
      {head + "  %0 = ad %x, %x : f64[2,2]\n  return %0\n}\n",
       "t.tir:2:8: error: unknown op 'ad'; did you mean 'add'?"},
      {head + "  %0 = add %x, %y : f64[2,2]\n  return %0\n}\n",
       "t.tir:2:16: error: use of undefined value %y"},
      {head + "  %0 = neg %1 : f64[2,2]\n  %1 = neg %x : f64[2,2]\n  return %0\n}\n",
       "t.tir:2:12: error: use of undefined value %1"},
      {head + "  %0 = neg %x : f64[2,2]\n  %0 = neg %x : f64[2,2]\n  return %0\n}\n",
       "t.tir:3:3: error: redefinition of value %0 (first defined at line 2, column 3)"},
      {head + "  %x = neg %x : f64[2,2]\n  return %x\n}\n",
       "t.tir:2:3: error: redefinition of value %x (first defined at line 1, column 12)"},
      {head + "  %0 = add %x : f64[2,2]\n  return %0\n}\n",
       "t.tir:2:8: error: 'add' takes 2 operands, got 1"},
      {head + "  %0 = neg %x, %x : f64[2,2]\n  return %0\n}\n",
       "t.tir:2:8: error: 'neg' takes 1 operand, got 2"},
      {head + "  %0 = einsum {spec = \"->\"} : f64[]\n  return %0\n}\n",
       "t.tir:2:8: error: 'einsum' takes at least one operand, got none"},
      {head + "  %u, %s = svd %x : f64[2,2], f64[2]\n  return %u\n}\n",
       "t.tir:2:3: error: 'svd' defines 3 results, but 2 values are named"},
      {head + "  %a, %b = neg %x : f64[2,2]\n  return %a\n}\n",
       "t.tir:2:3: error: 'neg' defines 1 result, but 2 values are named"},
      {head + "  %u, %s, %vt = svd %x : f64[2,2], f64[2]\n  return %u\n}\n",
       "t.tir:2:26: error: 'svd' has 3 results, but 2 types are given"},
      {head + "  %0 = neg %x : f64[2,2\n  return %0\n}\n",
       "t.tir:3:3: error: expected ',' or ']' in type, got 'return'"},
      {head + "  %0 = neg %x : f32[2,2]\n  return %0\n}\n",
       "t.tir:2:17: error: unsupported element type 'f32' (only f64 is supported)"},
      {head + "  %0 = neg %x : f64(2,2)\n  return %0\n}\n",
       "t.tir:2:20: error: expected '[' after 'f64' (a type is written f64[d0,d1,...], a scalar "
       "f64[]), got '('"},
      {head + "  %0 = neg %x : tensor<2x2xf64>\n  return %0\n}\n",
       "t.tir:2:17: error: expected a type like f64[4,4] for a result of 'neg', got 'tensor'"},
      {head + "  %0 = neg %x : f64[2,2.5]\n  return %0\n}\n",
       "t.tir:2:23: error: dimension must be an integer, got 2.5"},
      {"program @f(%x: f64[1,1,1,1,1,1,1,1,1]) {\n  return %x\n}\n",
       "t.tir:1:16: error: type has more than 8 dimensions; the maximum rank is 8"},
      {"program @f(%x: f64[2,-3]) {\n  return %x\n}\n",
       "t.tir:1:22: error: negative dimension -3 in type"},
      {"program @f(%x: f64[4294967296,4294967296,4294967296]) {\n  return %x\n}\n",
       "t.tir:1:16: error: type f64[4294967296,4294967296,4294967296] is too large: its element "
       "count overflows a 64-bit byte size"},
      {"program @f(%x: f64[99999999999999999999]) {\n  return %x\n}\n",
       "t.tir:1:20: error: integer literal 99999999999999999999 is out of the range of a 64-bit "
       "integer"},
      {head + "  %0 = reduce_sum %x {axis = [0]} : f64[2]\n  return %0\n}\n",
       "t.tir:2:23: error: unknown attribute 'axis' for op 'reduce_sum' (known: axes)"},
      {head + "  %0 = neg %x {axes = [0]} : f64[2,2]\n  return %0\n}\n",
       "t.tir:2:16: error: unknown attribute 'axes' for op 'neg' (it takes no attributes)"},
      {head + "  %0 = reduce_sum %x {axes = 0} : f64[2]\n  return %0\n}\n",
       "t.tir:2:30: error: attribute 'axes' of 'reduce_sum' must be an i64 list like [0, 1], got "
       "the integer 0"},
      {head + "  %0 = reduce_sum %x {axes = [0.5]} : f64[2]\n  return %0\n}\n",
       "t.tir:2:31: error: element of attribute 'axes' of 'reduce_sum' must be an integer, got 0.5"},
      {head + "  %0 = compare %x, %x {direction = GT} : f64[2,2]\n  return %0\n}\n",
       "t.tir:2:36: error: attribute 'direction' of 'compare' must be a string, got 'GT'"},
      {head + "  %u, %s, %vt = svd %x {eps = \"small\"} : f64[2,2], f64[2], f64[2,2]\n  return "
              "%u\n}\n",
       "t.tir:2:31: error: attribute 'eps' of 'svd' must be an f64 (finite number), got a string"},
      {head + "  %u, %s, %vt = svd %x {eps = inf} : f64[2,2], f64[2], f64[2,2]\n  return %u\n}\n",
       "t.tir:2:31: error: attribute 'eps' of 'svd' must be finite, got inf (nan and inf are "
       "allowed only inside dense<...> constants)"},
      {head + "  %u, %s, %vt = svd %x {eps = 1e999} : f64[2,2], f64[2], f64[2,2]\n  return "
              "%u\n}\n",
       "t.tir:2:31: error: float literal 1e999 is out of the range of f64"},
      {head + "  %0 = reduce_sum %x {axes = [0], axes = [1]} : f64[]\n  return %0\n}\n",
       "t.tir:2:35: error: duplicate attribute 'axes'"},
      {head + "  %0 = reshape %x : f64[4]\n  return %0\n}\n",
       "t.tir:2:19: error: op 'reshape' is missing required attribute 'shape' (i64s)"},
      {head + "  %0 = add %x, %v : f64[2,2]\n  return %0\n}\n",
       "t.tir:2:8: error: add: operand shapes differ: f64[2,2] vs f64[2] (operand 1; broadcast "
       "explicitly with broadcast_in_dim)"},
      {head + "  %0 = neg %x : f64[4]\n  return %0\n}\n",
       "t.tir:2:8: error: 'neg': result %0 is declared as f64[4], but the op's shape rule gives "
       "f64[2,2]"},
      {head + "  %c = constant {value = dense<[[1, 2], [3]]> : f64[2,2]} : f64[2,2]\n  return "
              "%c\n}\n",
       "t.tir:2:41: error: dense literal has 1 elements along dimension 1, but type f64[2,2] "
       "needs 2"},
      {head + "  %c = constant {value = dense<[1, 2, 3]> : f64[2]} : f64[2]\n  return %c\n}\n",
       "t.tir:2:39: error: dense literal has more than 2 elements along dimension 0 (type "
       "f64[2])"},
      {head + "  %c = constant {value = dense<[1, 2]> : f64[2]} : f64[3]\n  return %c\n}\n",
       "t.tir:2:8: error: 'constant': result %c is declared as f64[3], but the op's shape rule "
       "gives f64[2]"},
      {head + "  %c = constant {value = dense<[1, nan]> : f64[2]} : f64[2]\n  return %0\n}\n",
       "t.tir:3:10: error: use of undefined value %0"},
      {head + "  %0 = neg %x : f64[2,2]\n  %1 = exp %0 : f64[2,2]\n",
       "t.tir:3:25: error: unexpected end of file: the program body opened at line 1 has no "
       "'return' and no closing '}' (the file is truncated?)"},
      {head + "  %0 = neg %x : f64[2,2]\n  %1 = exp %0 :",
       "t.tir:3:16: error: unexpected end of file: expected a type like f64[4,4] for a result of "
       "'exp' (the file is truncated?)"},
      {head + "  return %x\n",
       "t.tir:2:12: error: unexpected end of file: expected '}' closing the program body opened "
       "at line 1 (the file is truncated?)"},
      {head + "  %0 = neg %x : f64[2,2] loc(\"abc\n  return %0\n}\n",
       "t.tir:2:30: error: unterminated string literal (missing closing '\"')"},
      {head + "  %0 = neg %x : f64[2,2] loc(\"a\\qb\")\n  return %0\n}\n",
       "t.tir:2:32: error: invalid escape sequence '\\q' (allowed: \\\" \\\\ \\n \\t \\r \\xHH)"},
      {head + "  return %x\n}\n}\n",
       "t.tir:4:1: error: unexpected '}' after the end of the program (one program per file, "
       "or a module: functions, then 'entry program @main(...)')"},
      {head + "  return %x\n}\nprogram @g() {\n  return\n}\n",
       "t.tir:4:1: error: a module of 2 functions names its entry: write 'entry program @g(...)' "
       "for the last one"},
      {head + "  return %x\n}\nentry program @g(%y: f64[2,2]) {\n  %r = call @h(%y) : f64[2,2]\n  return %r\n}\n",
       "t.tir:5:13: error: no function @h above the calling function (above it: @f; a function "
       "may call only the functions defined above it in the module, so there is no recursion)"},
      {head + "  %r = call @f(%x, %v) : f64[2,2]\n  return %r\n}\n",
       "t.tir:2:13: error: @f calls itself: a function may call only the functions defined above "
       "it in the module (no recursion)"},
      {head + "  return %x\n}\nentry program @g(%y: f64[2,2]) {\n  %r = call @f(%y) : f64[2,2]\n  return %r\n}\n",
       "t.tir:5:8: error: call: 1 operand for @f(%x: f64[2,2], %v: f64[2]) -> (f64[2,2]), which "
       "takes 2"},
      {head + "  return %x\n}\nentry program @g(%y: f64[2,2]) {\n  %r = call @f(%y, %y) : f64[2,2]\n  return %r\n}\n",
       "t.tir:5:8: error: call: operand 1 has type f64[2,2] but @f(%x: f64[2,2], %v: f64[2]) -> "
       "(f64[2,2]) takes f64[2] there"},
      {head + "  return %x\n}\nentry program @g(%y: f64[2,2], %v: f64[2]) {\n  %r = scan @f(%y, %v) {length = 2, carries = 2} : f64[2,2]\n  return %r\n}\n",
       "t.tir:5:8: error: scan: the body @f(%x: f64[2,2], %v: f64[2]) -> (f64[2,2]) returns 1 "
       "output, fewer than its 2 carries"},
      {head + "  return %x\n}\nentry program @g(%y: f64[2,2], %v: f64[3,2]) {\n  %r = scan @f(%y, %v) {length = 0, carries = 1} : f64[2,2]\n  return %r\n}\n",
       "t.tir:5:8: error: scan: length = 0 must be in [1, 2^30]"},
      {head + "  %r = neg %x : f64[2,2]\n  return %r\n}\nentry program @g(%y: f64[2,2], %v: f64[3,2]) {\n  %r = neg @f(%y) : f64[2,2]\n  return %r\n}\n",
       "t.tir:6:12: error: 'neg' runs no function: only call and scan name one (@f)"},
      {head + "  %0 = neg %x : f64[2,2] # comment\n  return %0\n}\n",
       "t.tir:2:26: error: unexpected character '#'"},
      {head + "  %0 = neg %x : f64[2,2]\n}\n",
       "t.tir:3:1: error: expected 'return' before '}' closing the program"},
      {"program @f(%12: f64[2]) {\n  return %12\n}\n",
       "t.tir:1:12: error: program input %12 needs a name that is not a number"},
      {head + "  %0 = neg %x : f64[2,2] 12abc\n  return %0\n}\n",
       "t.tir:2:26: error: invalid number literal '12a'"},
  };
  for (const Case &c : cases) {
    CAPTURE(c.text);
    std::string err = parseError(c.text);
    CHECK(firstLine(err) == c.first);
  }

  // The full diagnostic: message, source line, caret under the column.
  std::string err = parseError(head + "  %0 = add %x, %y : f64[2,2]\n  return %0\n}\n");
  CHECK(err == "t.tir:2:16: error: use of undefined value %y\n"
               "  %0 = add %x, %y : f64[2,2]\n"
               "               ^");
  // The error carries the position.
  try {
    parseProgram(head + "  %0 = add %x, %y : f64[2,2]\n  return %0\n}\n", "pos.tir");
    FAIL("expected a ParseError");
  } catch (const ParseError &e) {
    CHECK(e.pos().file == "pos.tir");
    CHECK(e.pos().line == 2);
    CHECK(e.pos().col == 16);
  }
}

TEST_CASE("parser: non-UTF-8 bytes are reported at their line:col") {
  std::string text = "program @f(%x: f64[2]) {\n  %0 = neg %x : f64[2] loc(\"caf\xC3\xA9\")\n"
                     "  %1 = neg %0 : f64[2] loc(\"bad \xFF byte\")\n  return %1\n}\n";
  std::string err = parseError(text);
  CHECK(firstLine(err) ==
        "t.tir:3:33: error: invalid UTF-8 byte 0xFF; .tir files must be UTF-8 text");
  // The echoed source line stays valid UTF-8, with '?' for the bad byte.
  CHECK(err.find("  %1 = neg %0 : f64[2] loc(\"bad ? byte\")\n") != std::string::npos);
  // Overlong encoding, lone continuation byte, truncated sequence, surrogate.
  CHECK(firstLine(parseError("// \xC0\xAF\n")) ==
        "t.tir:1:4: error: invalid UTF-8 byte 0xC0; .tir files must be UTF-8 text");
  CHECK(firstLine(parseError("\n\n  \x80")) ==
        "t.tir:3:3: error: invalid UTF-8 byte 0x80; .tir files must be UTF-8 text");
  CHECK(firstLine(parseError("// \xE2\x82")) ==
        "t.tir:1:4: error: invalid UTF-8 byte 0xE2; .tir files must be UTF-8 text");
  CHECK(firstLine(parseError("// \xED\xA0\x80")) ==
        "t.tir:1:4: error: invalid UTF-8 byte 0xED; .tir files must be UTF-8 text");
  // Valid multi-byte text in comments and strings is fine.
  CHECK(parseError("// χ and β: ok 😀\nprogram @f() {\n  return\n}\n") == "<no error>");
}

TEST_CASE("diagnostics: a long source line is echoed as a window around the caret") {
  SourcePos pos{"t.tir", 1, 0};
  // Short lines are echoed whole, tabs kept in the caret's indentation.
  pos.col = 4;
  CHECK(formatDiagnostic(pos, "m", "\tab c") == "t.tir:1:4: error: m\n\tab c\n\t  ^");
  // A 1000-byte line: 60 bytes before the caret, 60 from it, "..." at each cut.
  std::string line(1000, 'a');
  line[500] = 'X';
  pos.col = 501;
  CHECK(formatDiagnostic(pos, "m", line) ==
        "t.tir:1:501: error: m\n..." + std::string(60, 'a') + "X" + std::string(59, 'a') +
            "...\n" + std::string(63, ' ') + "^");
  // Near either end the window keeps its width and loses the "..." on that side.
  pos.col = 3;
  CHECK(formatDiagnostic(pos, "m", line) ==
        "t.tir:1:3: error: m\n" + std::string(120, 'a') + "...\n  ^");
  pos.col = 1001; // just past the end
  CHECK(formatDiagnostic(pos, "m", line) ==
        "t.tir:1:1001: error: m\n..." + std::string(120, 'a') + "\n" + std::string(123, ' ') + "^");
  // A cut never splits a UTF-8 sequence: "β" (2 bytes) straddling the left cut is dropped.
  std::string greek = std::string(439, 'a') + "\xCE\xB2" + std::string(559, 'a');
  pos.col = 501; // the window would start at byte 440, the second byte of "β"
  std::string out = formatDiagnostic(pos, "m", greek);
  CHECK(out.find("\n..." + std::string(119, 'a') + "...\n") != std::string::npos);
  CHECK(text::findInvalidUtf8(out) == std::nullopt);
}

TEST_CASE("text helpers: clipped names and the JSON nesting scan") {
  CHECK(text::clipForMessage("short") == "short");
  CHECK(text::clipForMessage(std::string(100, 'n'), 8) == "nnnnnnnn...(100 bytes)");
  // The cut backs up to the start of a UTF-8 sequence.
  CHECK(text::clipForMessage("abcdefg\xCE\xB2xyz", 8) == "abcdefg...(12 bytes)");
  CHECK(text::findJsonNestingBeyond("[[1], {\"a\": [2]}]", 3) == std::nullopt);
  CHECK(text::findJsonNestingBeyond("[[1], {\"a\": [[2]]}]", 3) == 13u);
  // Brackets inside strings (escaped quotes included) do not count.
  CHECK(text::findJsonNestingBeyond("[\"[[[\\\"[[[\", [1]]", 2) == std::nullopt);
  CHECK(text::findJsonNestingBeyond(std::string(100000, '['), 64) == 64u);
  // The last guard of a diagnostic shows control bytes (not newline and tab) as \xNN.
  CHECK(text::clipLongLines("error: 'a\x1b[31mb\rc\x7f'\n\tnext") == "error: 'a\\x1b[31mb\\x0dc\\x7f'\n\tnext");
  CHECK(text::clipLongLines(std::string("x\0y", 3)) == "x\\x00y");
  // A lone 0x9B (8-bit CSI) and U+009B (C2 9B) are controls too; other UTF-8 stays.
  CHECK(text::clipLongLines("a\x9b" "1m\xc2\x9b" "2m \xce\xb2") == "a\\x9b1m\\u009b2m \xce\xb2");
  CHECK(text::echoSourceLine("a\x1b[1mb\xc2\x9b\tc\n", 0) == "a?[1mb?\tc");
}

TEST_CASE("parser: parseType") {
  CHECK(parseType("f64[16,16]") == Type({16, 16}));
  CHECK(parseType("f64[]") == Type({}));
  CHECK(parseType(" f64[ 2 , 0 ] ") == Type({2, 0}));
  CHECK_THROWS_AS(parseType("f64[2"), Error);
  CHECK_THROWS_AS(parseType("f64[2] x"), Error);
  CHECK_THROWS_AS(parseType("f64[-1]"), Error);
  CHECK_THROWS_AS(parseType(""), Error);
}

TEST_CASE("json: schema, round trips and errors with JSON pointers") {
  Program p = exampleFor(OpKind::Svd);
  std::string json = programToJson(p);
  CHECK(json.find("\"version\": 1") != std::string::npos);
  CHECK(json.find("\"kind\": \"tessel.program\"") != std::string::npos);
  CHECK(json.find("\"attrs\": {\n    \"eps\": 1e-10") != std::string::npos);
  CHECK(json.find("\"loc\": \"example svd\"") != std::string::npos);
  Program c = exampleFor(OpKind::Constant);
  std::string cj = programToJson(c, -1);
  CHECK(cj.find("\"value\":{\"type\":\"f64[2,3]\",\"data\":[1.0,-2.5,0.1,1e-12,3e+300,-0.0]}") !=
        std::string::npos);

  auto jsonError = [](const std::string &text) -> std::string {
    try {
      programFromJson(text, "p.json");
    } catch (const Error &e) {
      return e.what();
    }
    return "<no error>";
  };
  const std::string okHead = R"({"version": 1, "kind": "tessel.program", "name": "f",
 "inputs": [{"name": "x", "type": "f64[2]"}], )";
  CHECK(jsonError(okHead + R"("ops": [], "outputs": ["x"]})") == "<no error>");
  CHECK(jsonError(okHead + R"("ops": [{"op": "neg", "operands": ["y"], "results": [{"name": "0",
    "type": "f64[2]"}]}], "outputs": ["0"]})") == "p.json: /ops/0/operands/0: error: undefined value %y");
  CHECK(jsonError(okHead + R"("ops": [{"op": "negate", "operands": ["x"], "results": []}],
    "outputs": []})") == "p.json: /ops/0/op: error: unknown op 'negate'");
  CHECK(jsonError(okHead + R"("ops": [{"op": "neg", "operands": ["x"], "results": [{"name": "0",
    "type": "f64[3]"}]}], "outputs": []})") ==
        "p.json: /ops/0/results/0/type: error: 'neg': result %0 is declared as f64[3], but the "
        "op's shape rule gives f64[2]");
  CHECK(jsonError(okHead + R"("ops": [{"op": "neg", "operands": ["x"], "results": [{"name": "0",
    "type": "f64[2"}]}], "outputs": []})") ==
        "p.json: /ops/0/results/0/type: error: bad type \"f64[2\": unexpected end of file: "
        "expected ',' or ']' in type (the file is truncated?) (column 6)");
  CHECK(jsonError(okHead + R"("ops": [{"op": "reduce_sum", "operands": ["x"], "attrs": {"axes":
    [0.5]}, "results": [{"name": "0", "type": "f64[]"}]}], "outputs": []})") ==
        "p.json: /ops/0/attrs/axes/0: error: element of attribute 'axes' of 'reduce_sum' must be "
        "an integer, got 0.5");
  CHECK(jsonError(okHead + R"("ops": [], "outputs": ["x"], "extra": 1})") ==
        "p.json: /extra: error: unknown field \"extra\"");
  CHECK(jsonError(R"({"version": 2, "kind": "tessel.program"})") ==
        "p.json: /version: error: unsupported version 2 (this tessel reads version 1)");
  CHECK(jsonError(R"([1, 2])") == "p.json: /: error: expected an object, got array");
  // Syntax errors: line:col, source line and caret.
  CHECK(jsonError("{\"version\": 1,\n  \"kind\": tessel}") ==
        "p.json:2:12: error: invalid JSON: syntax error while parsing value - invalid literal; "
        "last read: '\"kind\": te'\n"
        "  \"kind\": tessel}\n"
        "           ^");
  CHECK(firstLine(jsonError("{\"version\": 1,\n")) ==
        "p.json:2:1: error: invalid JSON: syntax error while parsing object key - unexpected "
        "end of input; expected string literal");
  CHECK(firstLine(jsonError("  \n")) == "p.json:2:1: error: invalid JSON: empty input");
}

TEST_CASE("dot: nodes for inputs, ops and outputs; edges labelled with values") {
  Program p = exampleFor(OpKind::Svd);
  std::string dot = printDot(p);
  CHECK(dot.rfind("digraph \"ex_svd\" {\n", 0) == 0);
  CHECK(dot.find("in0 [shape=invhouse") != std::string::npos);
  CHECK(dot.find("op0 [shape=box, label=\"svd\\neps = 1e-10\\ngauge = \\\"none\\\"\\nexample svd\"]") !=
        std::string::npos);
  CHECK(dot.find("in0 -> op0 [label=\"%M : f64[6,4]\"];") != std::string::npos);
  CHECK(dot.find("op0 -> out1 [label=\"%1 : f64[4]\"];") != std::string::npos);
  CHECK(dot.find("out2 [shape=house") != std::string::npos);
  CHECK(dot.substr(dot.size() - 2) == "}\n");
}

TEST_CASE("parser: every truncation and random byte damage gives a ParseError, never a crash") {
  Program p = exampleFor(OpKind::Svd);
  Builder b(p);
  p.addOutput(b.constant(Tensor(Type({2, 2}), {1, -2, 0.5, 1e-3})));
  p.addOutput(b.compare(p.inputs[0], p.inputs[0], "LT"));
  std::string text = printProgram(p);
  size_t errors = 0;
  for (size_t n = 0; n < text.size(); ++n) {
    if (n == text.size() - 1) continue;
    std::string cut = text.substr(0, n);
    try {
      parseProgram(cut, "cut.tir");
    } catch (const ParseError &e) {
      ++errors;
      CHECK(e.pos().known());
      CHECK(std::string(e.what()).find("cut.tir:") == 0);
    }
  }
  // Every prefix fails except the one that only drops the final newline.
  CHECK(errors == text.size() - 1);
  CHECK(printProgram(parseProgram(text.substr(0, text.size() - 1))) == text);
  std::mt19937 rng(12345);
  const char bytes[] = {'%', '{', '}', '[', ']', ',', ':', '=', '"', '-', '1', 'x', ' ', '\n',
                        '<', '>', '\xff', '\\', '@', '('};
  int parsed = 0, failed = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string t = text;
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % t.size();
      switch (rng() % 3) {
      case 0: t[at] = bytes[rng() % sizeof bytes]; break;
      case 1: t.erase(at, 1 + rng() % 4); break;
      default: t.insert(at, 1, bytes[rng() % sizeof bytes]); break;
      }
      if (t.empty()) t.assign(1, 'x');
    }
    try {
      Program q = parseProgram(t, "fuzz.tir");
      ++parsed;
      // Whatever parses must be valid and print canonically.
      CHECK(verify(q).empty());
      std::string once = printProgram(q);
      CHECK(printProgram(parseProgram(once)) == once);
    } catch (const ParseError &e) {
      ++failed;
      CHECK(e.pos().known());
    }
  }
  CHECK(parsed + failed == 3000);
  CHECK(failed > 2000); // most damage is detected
}

TEST_CASE("json: random damage gives a tessel::Error, never a crash") {
  Program p = exampleFor(OpKind::Einsum);
  Builder b(p);
  p.addOutput(b.constant(Tensor(Type({2}), {1, -2})));
  std::string json = programToJson(p);
  std::mt19937 rng(777);
  const char bytes[] = {'{', '}', '[', ']', ',', ':', '"', '-', '1', 'e', ' ', 'n', '\xff', '0'};
  int parsed = 0, failed = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    std::string t = json;
    size_t at = rng() % t.size();
    switch (rng() % 3) {
    case 0: t[at] = bytes[rng() % sizeof bytes]; break;
    case 1: t.erase(at, 1 + rng() % 6); break;
    default: t.insert(at, 1, bytes[rng() % sizeof bytes]); break;
    }
    try {
      Program q = programFromJson(t, "fuzz.json");
      ++parsed;
      CHECK(verify(q).empty());
    } catch (const Error &e) {
      ++failed;
      CHECK(std::string(e.what()).find("fuzz.json") == 0);
    }
  }
  CHECK(parsed + failed == 1500);
  CHECK(failed > 1000);
}
