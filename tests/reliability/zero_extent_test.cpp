// Zero extents: the IR allows them (ir/Type.h: "every extent >= 0"; parser and
// JSON reader accept them; shape rules apply unchanged; negative extents are errors).
// This checks that every stage agrees: each op kind on zero-sized operands verifies,
// round-trips through text and JSON, and runs on the engine (widths 1 and 3) with the
// reference's results: empty results stay empty, a sum over an empty axis is 0, a max
// over an empty axis is -inf (the identities of the reductions, as in XLA), a product
// contracting an empty dimension is all zeros, and svd of a 0 x n matrix has k = 0.
#include <cmath>
#include <limits>

#include <doctest/doctest.h>

#include "ir/Builder.h"
#include "ir/Json.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "runtime/Runtime.h"

using namespace tessel;
using ir::Tensor;
using ir::Type;

TEST_CASE("reliability: zero extents are legal in every stage and follow the identities") {
  ir::Program p;
  ir::Builder b(p);
  auto e = p.addInput("e", Type({0, 3}));   // empty matrix
  auto m = p.addInput("m", Type({2, 0}));   // contracts over an empty dimension
  auto k = p.addInput("k", Type({0, 4}));
  auto ex = b.unary(ir::OpKind::Exp, b.neg(e));                      // [0,3]
  auto sum0 = b.reduceSum(e, {0});                                    // [3] of 0
  auto max0 = b.reduceMax(e, {0});                                    // [3] of -inf
  auto prod = b.dotGeneral(m, k, {}, {}, {1}, {0});                   // [2,4] of 0
  auto tr = b.transpose(b.reshape(ex, {3, 0}), {1, 0});               // [0,3]
  auto sl = b.slice(b.iota({4, 2}, 0), {1, 0}, {1, 2});                // [0,2]
  auto pd = b.pad(sl, {2, 0}, {0, 1});                                 // [2,3] of 0
  auto bc = b.broadcastInDim(b.reduceSum(e, {0, 1}), {5, 0}, {});     // [5,0]
  auto usv = b.svd(e);                                                 // [0,0], [0], [0,3]
  auto c = b.constant(Tensor(Type({0}), {}));
  p.addOutput(ex);
  p.addOutput(sum0);
  p.addOutput(max0);
  p.addOutput(prod);
  p.addOutput(tr);
  p.addOutput(pd);
  p.addOutput(bc);
  p.addOutput(usv[0]);
  p.addOutput(usv[1]);
  p.addOutput(usv[2]);
  p.addOutput(c);
  REQUIRE(ir::verify(p).empty());

  // Text and JSON agree and read back.
  std::string text = ir::printProgram(p);
  CHECK(ir::printProgram(ir::parseProgram(text, "zero.tir")) == text);
  CHECK(ir::printProgram(ir::programFromJson(ir::programToJson(p), "zero.json")) == text);
  CHECK(text.find("f64[0,3]") != std::string::npos);

  std::vector<Tensor> in = {Tensor::zeros(Type({0, 3})), Tensor::zeros(Type({2, 0})),
                            Tensor::zeros(Type({0, 4}))};
  auto ref = rt::evaluateReference(p, in);
  const double ninf = -std::numeric_limits<double>::infinity();
  CHECK(ref[0].type == Type({0, 3}));
  CHECK(ref[1].data == std::vector<double>{0, 0, 0});
  CHECK(ref[2].data == std::vector<double>{ninf, ninf, ninf});
  CHECK(ref[3].data == std::vector<double>(8, 0.0));
  CHECK(ref[4].type == Type({0, 3}));
  CHECK(ref[5].data == std::vector<double>(6, 0.0));
  CHECK(ref[6].type == Type({5, 0}));
  CHECK(ref[7].type == Type({0, 0}));
  CHECK(ref[8].type == Type({0}));
  CHECK(ref[9].type == Type({0, 3}));
  auto plan = rt::prepare(p);
  for (int width : {1, 3}) {
    CAPTURE(width);
    rt::Engine eng(width);
    // Run twice: the second run reuses the cached (empty) arena.
    for (int rep = 0; rep < 2; ++rep) {
      auto got = eng.run(*plan, in);
      REQUIRE(got.size() == ref.size());
      for (size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i);
        CHECK(got[i].type == ref[i].type);
        CHECK(got[i].data == ref[i].data);
      }
    }
  }
  // Negative extents are never legal, in any reader.
  CHECK_THROWS_AS(ir::parseType("f64[0,-1]"), Error);
  CHECK_THROWS_WITH_AS(b.reshape(e, {-1, 0}), doctest::Contains("negative dimension"), ShapeError);
}
