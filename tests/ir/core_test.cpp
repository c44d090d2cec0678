// Core IR: op table, shape rules, the op check, builder, verifier.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ir/Builder.h"
#include "ir/Json.h"
#include "ir/OpAttrs.h"
#include "ir/OpCost.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/ShapeRules.h"
#include "ir/Verifier.h"

using namespace tessel;
using namespace tessel::ir;

TEST_CASE("op table: every op has a unique name, a shape rule and parseable attribute specs") {
  CHECK(allOpKinds().size() == static_cast<size_t>(kNumOpKinds));
  for (OpKind k : allOpKinds()) {
    CAPTURE(opName(k));
    CHECK(hasShapeRule(k));
    auto back = opKindByName(opName(k));
    REQUIRE(back.has_value());
    CHECK(*back == k);
  }
  CHECK_FALSE(opKindByName("matmul").has_value());
  const OpInfo &svd = opInfo(OpKind::Svd);
  CHECK(svd.numResults == 3);
  REQUIRE(svd.attrs.size() == 2);
  CHECK(svd.attrs[0].name == "eps");
  REQUIRE(svd.attrs[0].defaultValue.has_value());
  CHECK(svd.attrs[0].defaultValue->getF64() == 1e-12);
  CHECK(svd.attrs[1].name == "gauge");
  REQUIRE(svd.attrs[1].defaultValue.has_value());
  CHECK(svd.attrs[1].defaultValue->getStr() == "none");
}

TEST_CASE("op table: the traits column says which ops are elementwise, cheap and kept by "
          "save-svd; cheap implies elementwise; callee comes from the attributes") {
  std::string elementwise, cheap, saved, callee;
  for (OpKind k : allOpKinds()) {
    CAPTURE(opName(k));
    if (isCheapElementwise(k)) CHECK(isElementwise(k));
    if (isElementwise(k)) {
      elementwise += std::string(opName(k)) + " ";
      CHECK(opInfo(k).numResults == 1); // one result of the operands' shape
    }
    if (isCheapElementwise(k)) cheap += std::string(opName(k)) + " ";
    if (isSavedBySaveSvd(k)) saved += std::string(opName(k)) + " ";
    if (hasCallee(k)) callee += std::string(opName(k)) + " ";
  }
  CHECK(elementwise == "neg exp log sqrt sin cos tanh abs sign add sub mul div maximum compare select ");
  CHECK(cheap == "neg abs sign add sub mul maximum compare select ");
  CHECK(saved == "svd svd_topk eigh qr call scan ");
  CHECK(callee == "call scan ");
  CHECK(opTraitsText(OpKind::Mul) == "elementwise, cheap");
  CHECK(opTraitsText(OpKind::Reshape).empty());
}

TEST_CASE("op attrs: ir::attr reads an attribute by its ops.def name with its ops.def type") {
  ir::Program p = ir::parseProgram(R"(program @a(%x: f64[4,6]) {
  %u, %s, %vt = svd_topk %x {k = 3, eps = 1e-09, gauge = "bond"} : f64[4,3], f64[3], f64[3,6]
  %t = transpose %x {perm = [1, 0]} : f64[6,4]
  %c = compare %s, %s {direction = "LT"} : f64[3]
  return %u, %t, %c
}
)");
  const ir::Op &svd = p.ops[0], &tr = p.ops[1], &cmp = p.ops[2];
  static_assert(std::is_same_v<decltype(ir::attr<ir::OpKind::SvdTopk, "k">(svd)), int64_t>);
  static_assert(std::is_same_v<decltype(ir::attr<ir::OpKind::SvdTopk, "eps">(svd)), double>);
  static_assert(std::is_same_v<decltype(ir::attr<ir::OpKind::SvdTopk, "gauge">(svd)), const std::string &>);
  static_assert(std::is_same_v<decltype(ir::attr<ir::OpKind::Transpose, "perm">(tr)), const ir::I64List &>);
  CHECK(ir::attr<ir::OpKind::SvdTopk, "k">(svd) == 3);
  CHECK(ir::attr<ir::OpKind::SvdTopk, "eps">(svd) == 1e-9);
  CHECK(ir::attr<ir::OpKind::SvdTopk, "gauge">(svd) == "bond");
  CHECK(ir::attr<ir::OpKind::Transpose, "perm">(tr) == ir::I64List{1, 0});
  CHECK(ir::attr<ir::OpKind::Compare, "direction">(cmp) == "LT");
  // Of an op of another kind: an internal error naming both (never a wrong value).
  auto permOfSvd = [&] { return ir::attr<ir::OpKind::Transpose, "perm">(svd).size(); };
  CHECK_THROWS_AS(permOfSvd(), std::logic_error); // an internal error (exit 2), not the input's
  CHECK_THROWS_WITH(permOfSvd(), "attribute 'perm' of transpose read from a svd_topk op");
  // The compile-time parse of the ops.def column.
  static_assert(ir::detail::specKind("k:i64,eps:f64=1e-12,gauge:str=none", "gauge") ==
                static_cast<int>(ir::AttrKind::Str));
  static_assert(ir::detail::specKind("k:i64,eps:f64=1e-12", "epsilon") == -1);
  static_assert(ir::detail::specKind("", "k") == -1);
}

TEST_CASE("shape rules: results and errors naming the op and both shapes") {
  Program p;
  Builder b(p);
  ValueId a = p.addInput("a", Type({4, 6}));
  ValueId c = p.addInput("c", Type({6, 5}));
  ValueId t = p.addInput("t", Type({2, 3, 4, 5}));

  ValueId d = b.dotGeneral(a, c, {}, {}, {1}, {0});
  CHECK(p.type(d) == Type({4, 5}));
  auto usv = b.svd(a);
  CHECK(p.type(usv[0]) == Type({4, 4}));
  CHECK(p.type(usv[1]) == Type({4}));
  CHECK(p.type(usv[2]) == Type({4, 6}));
  CHECK(p.type(b.transpose(t, {3, 2, 1, 0})) == Type({5, 4, 3, 2}));
  CHECK(p.type(b.reduceSum(t, {1, 3})) == Type({2, 4}));
  CHECK(p.type(b.reduceMax(t, {0, 1, 2, 3})) == Type({}));
  CHECK(p.type(b.slice(a, {1, 0}, {3, 4})) == Type({2, 4}));
  CHECK(p.type(b.pad(a, {1, 0}, {0, 2})) == Type({5, 8}));
  CHECK(p.type(b.broadcastInDim(b.scalar(2.0), {3, 3}, {})) == Type({3, 3}));
  CHECK(p.type(b.einsum("ij,jk->ki", {a, c})) == Type({5, 4}));
  CHECK(p.type(b.einsum("abcd->", {t})) == Type({}));

  // Batched dot_general: batch dims first, then lhs free, then rhs free.
  ValueId x = p.addInput("x", Type({7, 2, 3}));
  ValueId y = p.addInput("y", Type({3, 7, 4}));
  CHECK(p.type(b.dotGeneral(x, y, {0}, {1}, {2}, {0})) == Type({7, 2, 4}));

  auto message = [&](auto &&fn) {
    try {
      fn();
    } catch (const ShapeError &e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  CHECK(message([&] { b.add(a, c); }) ==
        "add: operand shapes differ: f64[4,6] vs f64[6,5] (operand 1; broadcast explicitly "
        "with broadcast_in_dim)");
  CHECK(message([&] { b.dotGeneral(a, a, {}, {}, {1}, {0}); })
            .find("dot_general: size mismatch: lhs f64[4,6] dim 1 is 6 but rhs f64[4,6] dim 0 is 4") == 0);
  CHECK(message([&] { b.reshape(a, {5, 5}); }) ==
        "reshape: cannot reshape f64[4,6] (24 elements) to f64[5,5] (25 elements)");
  CHECK(message([&] { b.svd(t); }) == "svd: operand must be a matrix, got f64[2,3,4,5]");
  CHECK(message([&] { b.einsum("ij,jk->ik", {a, a}); })
            .find("einsum: index 'j' has size 6 elsewhere but size 4") == 0);
  CHECK(message([&] { b.einsum("ij->q", {a}); }).find("output index 'q' appears in no operand") !=
        std::string::npos);
  CHECK(message([&] { b.transpose(t, {0, 1, 1, 2}); }).find("transpose: perm") == 0);
  CHECK(message([&] { b.slice(a, {0, 0}, {5, 1}); }).find("out of bounds") != std::string::npos);
  CHECK(message([&] { b.create(OpKind::Add, {a}); }) == "'add' takes 2 operands, got 1");
  CHECK(message([&] { b.create(OpKind::Neg, {a}, {{"axes", Attr::i64s({0})}}); }) ==
        "unknown attribute 'axes' for op 'neg' (it takes no attributes)");
  CHECK(message([&] { b.create(OpKind::Reshape, {a}); }) ==
        "op 'reshape' is missing required attribute 'shape' (i64s)");
  CHECK(message([&] { b.create(OpKind::Compare, {a, a}, {{"direction", Attr::str("LTE")}}); })
            .find("compare: direction 'LTE'") == 0);
  CHECK(message([&] { b.reshape(a, {1, 1, 1, 1, 1, 1, 1, 4, 6}); })
            .find("exceeds the limit of 8") != std::string::npos);
  CHECK(verify(p).empty());
}

namespace {

/// A program of one op appended as given (no check), its results the outputs.
Program oneOp(std::vector<Type> inputs, OpKind kind, AttrList attrs, std::vector<Type> results) {
  Program p;
  p.name = "f";
  llvm::SmallVector<ValueId, 4> operands;
  for (size_t i = 0; i < inputs.size(); ++i)
    operands.push_back(p.addInput(std::string(1, static_cast<char>('a' + i)), inputs[i]));
  for (ValueId r : p.appendOp(kind, operands, std::move(attrs), results)) p.addOutput(r);
  return p;
}

/// The first line of the tessel::Error `fn` throws, or "<no error>".
template <typename Fn> std::string firstLineOfError(Fn &&fn) {
  try {
    fn();
  } catch (const Error &e) {
    std::string s = e.what();
    return s.substr(0, s.find('\n'));
  }
  return "<no error>";
}

} // namespace

TEST_CASE("op check: the text reader, the JSON reader and the verifier say the same of a bad op") {
  struct Case {
    Program p;
    std::string message; // from all three
    std::string caretAt; // the text the text reader's caret points at, on the op's line
    std::string pointer; // the JSON reader's pointer
  };
  const Type m22({2, 2}), v2({2});
  const AttrList eps = {{"eps", Attr::f64(1e-12)}, {"gauge", Attr::str("none")}};
  std::vector<Case> cases = {
      {oneOp({m22}, OpKind::Transpose, {{"perm", Attr::i64s({1, 1})}}, {m22}),
       "transpose: perm [1, 1] repeats axis 1", "transpose", "/ops/0"},
      {oneOp({m22}, OpKind::ReduceSum, {{"axes", Attr::i64s({2})}}, {v2}),
       "reduce_sum: axes [2] out of range for operand f64[2,2]", "reduce_sum", "/ops/0"},
      {oneOp({Type({2, 3, 4})}, OpKind::Svd, eps, {m22, v2, m22}),
       "svd: operand must be a matrix, got f64[2,3,4]", "svd", "/ops/0"},
      {oneOp({v2, v2}, OpKind::Compare, {{"direction", Attr::str("XX")}}, {v2}),
       "compare: direction 'XX' is not one of EQ, NE, LT, LE, GT, GE", "compare", "/ops/0"},
      {oneOp({m22}, OpKind::Einsum, {{"spec", Attr::str("ij")}}, {m22}),
       "einsum: einsum spec 'ij' needs an explicit '->' output", "einsum", "/ops/0"},
      {oneOp({m22}, OpKind::Svd, {{"eps", Attr::f64(INFINITY)}, {"gauge", Attr::str("none")}}, {m22, v2, m22}),
       "attribute 'eps' of 'svd' must be finite, got inf (nan and inf are allowed only inside "
       "dense<...> constants)",
       "inf", "/ops/0/attrs/eps"},
      {oneOp({}, OpKind::Iota, {{"shape", Attr::i64s({3})}, {"dim", Attr::f64(0.5)}}, {Type({3})}),
       "attribute 'dim' of 'iota' must be an i64 (integer), got the float 0.5", "0.5",
       "/ops/0/attrs/dim"},
      {oneOp({m22}, OpKind::Transpose, {{"perm", Attr::str("1,0")}}, {m22}),
       "attribute 'perm' of 'transpose' must be an i64 list like [0, 1], got a string", "\"1,0\"",
       "/ops/0/attrs/perm"},
      {oneOp({m22}, OpKind::Neg, {{"axes", Attr::i64s({0})}}, {m22}),
       "unknown attribute 'axes' for op 'neg' (it takes no attributes)", "axes",
       "/ops/0/attrs/axes"},
      {oneOp({m22}, OpKind::Reshape, {}, {Type({4})}),
       "op 'reshape' is missing required attribute 'shape' (i64s)", ": f64[4]", "/ops/0/attrs"},
      {oneOp({m22}, OpKind::Add, {}, {m22}), "'add' takes 2 operands, got 1", "add",
       "/ops/0/operands"},
      {oneOp({m22}, OpKind::Svd, eps, {m22, v2}), "'svd' defines 3 results, but 2 values are named",
       "%0", "/ops/0/results"},
      {oneOp({m22}, OpKind::Neg, {}, {Type({3})}),
       "'neg': result %0 is declared as f64[3], but the op's shape rule gives f64[2,2]", "neg",
       "/ops/0/results/0/type"},
  };
  for (const Case &c : cases) {
    std::string text = printProgram(c.p);
    CAPTURE(text);
    std::string line = text.substr(text.find('\n') + 1);
    line = line.substr(0, line.find('\n'));
    REQUIRE(line.find(c.caretAt) != std::string::npos);
    std::string col = std::to_string(line.find(c.caretAt) + 1);
    CHECK(firstLineOfError([&] { parseProgram(text, "t.tir"); }) ==
          "t.tir:2:" + col + ": error: " + c.message);
    CHECK(firstLineOfError([&] { programFromJson(programToJson(c.p), "p.json"); }) ==
          "p.json: " + c.pointer + ": error: " + c.message);
    std::vector<std::string> errs = verify(c.p);
    REQUIRE(errs.size() == 1);
    CHECK(errs[0] == describeOp(c.p, c.p.ops[0]) + ": " + c.message);
  }
  // A reader names a result as its source does, even an anonymous one that printing
  // would renumber.
  CHECK(firstLineOfError([] {
          parseProgram("program @f(%a: f64[2]) {\n  %41 = neg %a : f64[3]\n  return %41\n}\n",
                       "t.tir");
        }) == "t.tir:2:9: error: 'neg': result %41 is declared as f64[3], but the op's shape "
              "rule gives f64[2]");
  CHECK(firstLineOfError([] {
          programFromJson(R"({"version": 1, "kind": "tessel.program", "name": "f",
            "inputs": [{"name": "a", "type": "f64[2]"}], "ops": [{"op": "neg", "operands": ["a"],
            "results": [{"name": "41", "type": "f64[3]"}]}], "outputs": ["41"]})",
                          "p.json");
        }) == "p.json: /ops/0/results/0/type: error: 'neg': result %41 is declared as f64[3], "
              "but the op's shape rule gives f64[2]");
}

TEST_CASE("verifier: use before definition, wrong result type, duplicate names") {
  Program p;
  Builder b(p);
  ValueId a = p.addInput("a", Type({2, 2}));
  ValueId n = b.neg(a);
  ValueId e = b.unary(OpKind::Exp, n);
  p.addOutput(e);
  REQUIRE(verify(p).empty());

  Program bad = p;
  std::swap(bad.ops[0], bad.ops[1]); // exp now reads %0 before neg defines it
  bad.recomputeDefs();
  auto errs = verify(bad);
  REQUIRE(!errs.empty());
  CHECK(errs[0].find("%0 = exp %1") == 0); // the op in the text form's words (exp now first)
  CHECK(errs[0].find("is not defined before use") != std::string::npos);

  Program wrong = p;
  wrong.values[wrong.ops[1].results[0]].type = Type({3});
  errs = verify(wrong);
  REQUIRE(errs.size() == 1);
  CHECK(errs[0].find("'exp': result %1 is declared as f64[3], but the op's shape rule gives "
                     "f64[2,2]") != std::string::npos);

  Program dup = p;
  dup.values[dup.ops[0].results[0]].name = "a";
  errs = verify(dup);
  REQUIRE(errs.size() == 1);
  CHECK(errs[0] == "value name '%a' is defined more than once");
  CHECK_THROWS_AS(verifyOrThrow(dup), VerifyError);
}

TEST_CASE("program: names are unique, lookup follows renames") {
  Program p;
  Builder b(p);
  ValueId a = p.addInput("T", Type({2}));
  ValueId x = b.neg(a);
  CHECK(p.setName(x, "T") == "T_1");
  CHECK(p.lookup("T") == a);
  CHECK(p.lookup("T_1") == x);
  CHECK(p.lookup("missing") == kNoValue);
  CHECK_THROWS_AS(p.addInput("T", Type({2})), Error);
  CHECK_THROWS_AS(p.addInput("12", Type({2})), Error);
}

TEST_CASE("op cost: flops and bytes of each op from its types") {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({3, 4})), y = p.addInput("y", Type({4, 5}));
  ValueId e = b.unary(OpKind::Exp, x);
  ValueId d = b.dotGeneral(x, y, {}, {}, {1}, {0});  // [3,5], K = 4
  ValueId ein = b.einsum("ij,jk->ik", {x, y});
  ValueId rx = b.reduceSum(x, {1});
  ValueId outer = b.einsum("i,k->ik", {rx, b.reduceSum(y, {0})});
  auto usv = b.svd(b.dotGeneral(y, y, {}, {}, {1}, {1})); // 4x4
  auto tall = b.svd(y);                                  // 4x5: m = 5, k = 4
  ValueId t = b.transpose(x, {1, 0});
  auto wv = b.eigh(b.dotGeneral(y, y, {}, {}, {1}, {1})); // 4x4
  auto qr = b.qr(y);                                       // 4x5: k = 4
  ValueId ts = b.triangularSolve(b.dotGeneral(y, y, {}, {}, {1}, {1}), b.transpose(x, {1, 0}), true, true,
                                 false); // n = 4, B 4x3
  ValueId syl = b.sylvesterSolve(b.dotGeneral(y, y, {}, {}, {1}, {1}), b.dotGeneral(x, x, {}, {}, {1}, {1}),
                                 b.transpose(x, {1, 0})); // n = 4, m = 3, C 4x3
  for (ValueId v : {e, d, ein, outer, usv[1], tall[1], t, wv[0], qr[0], ts, syl}) p.addOutput(v);
  auto cost = [&](ValueId v) { return opCost(p, p.ops[p.values[v].def]); };
  CHECK(cost(e).flops == 12);
  CHECK(cost(e).bytes == 2 * 12 * 8);
  CHECK(cost(d).flops == 2 * 3 * 5 * 4);
  CHECK(cost(d).bytes == (12 + 20 + 15) * 8);
  CHECK(cost(ein).flops == 3 * 4 * 5 * 2); // opt_einsum naive: one term + inner product
  CHECK(cost(outer).flops == 3 * 5 * 1);   // no label shared: no inner product
  CHECK(cost(rx).flops == 12);             // reduce_sum: one per operand element
  CHECK(cost(usv[1]).flops == 14 * 64 + 8 * 64);            // square: Golub-Reinsch, 22 k^3
  CHECK(cost(tall[1]).flops == std::min(14.0 * 5 * 16 + 8 * 64, 6.0 * 5 * 16 + 20 * 64));
  CHECK(cost(t).flops == 0);
  CHECK(cost(t).bytes == 2 * 12 * 8);
  CHECK(cost(wv[0]).flops == 9 * 64);                        // eigh with vectors: 9 n^3
  CHECK(cost(wv[0]).bytes == (16 + 4 + 16) * 8);             // A in, w and V out
  CHECK(cost(qr[0]).flops == 2 * 5 * 16 + 2 * 4 * 16 - 4.0 * 64 / 3); // dgeqrf + dorgqr, LAWN 41
  CHECK(cost(ts).flops == 16 * 3);                                     // n² per right-hand side
  CHECK(cost(syl).flops == 9 * (64 + 27) + 4 * 4 * 3 * (4 + 3)); // two dsyevd and four products
  CHECK(cost(syl).bytes == (16 + 9 + 12 + 12) * 8);               // A, B, C in, X out
}

TEST_CASE("diagnostics: a context goes in front of an error's text, one 'error:' tag in all") {
  const Error inner("error: LAPACK dgesdd failed");
  CHECK(errorText(inner) == "LAPACK dgesdd failed");
  CHECK(errorText(std::runtime_error("no tag")) == "no tag");
  const Error outer = withContext(inner, "trg: step 3 (step 16->16, value), beta = 0.4");
  CHECK(std::string(outer.what()) == "error: trg: step 3 (step 16->16, value), beta = 0.4: LAPACK dgesdd failed");
  CHECK(std::string(withContext(outer, "rank 1 of 2").what()) ==
        "error: rank 1 of 2: trg: step 3 (step 16->16, value), beta = 0.4: LAPACK dgesdd failed");
}
