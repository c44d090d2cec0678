// Core IR: op table, shape rules, builder, verifier.
#include <doctest/doctest.h>

#include <string>

#include "ir/Builder.h"
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
  REQUIRE(svd.attrs.size() == 1);
  CHECK(svd.attrs[0].name == "eps");
  REQUIRE(svd.attrs[0].defaultValue.has_value());
  CHECK(svd.attrs[0].defaultValue->getF64() == 1e-12);
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
