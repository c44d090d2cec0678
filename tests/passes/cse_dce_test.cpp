// CSE and DCE (passes/Cse.h, passes/Dce.h).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "ir/Builder.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Cse.h"
#include "passes/Dce.h"
#include "runtime/Runtime.h"
#include "pass_testutil.h"

using namespace tessel;
using namespace tessel::ir;
using namespace tessel::passes;
using passtest::countOps;

namespace {

std::vector<Tensor> randomInputs(const Program &p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<Tensor> ins;
  for (ValueId v : p.inputs) {
    Tensor t = Tensor::zeros(p.type(v));
    for (double &x : t.data) x = u(rng);
    ins.push_back(std::move(t));
  }
  return ins;
}

/// The outputs of `a` and `b` on the same random inputs are bitwise identical.
void checkSameOutputs(const Program &a, const Program &b) {
  auto ins = randomInputs(a, 42);
  auto x = rt::evaluateReference(a, ins), y = rt::evaluateReference(b, ins);
  REQUIRE(x.size() == y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    REQUIRE(x[i].type == y[i].type);
    CHECK(std::memcmp(x[i].data.data(), y[i].data.data(), x[i].data.size() * 8) == 0);
  }
}

} // namespace

TEST_CASE("cse: merges duplicate ops transitively and keeps the numbers") {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({3, 4}));
  ValueId t1 = b.transpose(x, {1, 0});
  ValueId t2 = b.transpose(x, {1, 0});
  ValueId e1 = b.unary(OpKind::Exp, t1);
  ValueId e2 = b.unary(OpKind::Exp, t2); // equal to e1 once t2 is merged into t1
  ValueId s = b.add(e1, e2);
  ValueId other = b.transpose(b.transpose(x, {1, 0}), {1, 0}); // perm differs from none
  p.addOutput(s);
  p.addOutput(other);
  Program q = p;
  CseStats st;
  CHECK(runCse(q, CseOptions{}, &st));
  CHECK(st.mergedOps == 3); // t2, e2, and the third transpose(x, [1,0])
  CHECK(verify(q).empty());
  CHECK(countOps(q, OpKind::Transpose) == 2);
  CHECK(countOps(q, OpKind::Exp) == 1);
  CHECK(q.values.size() == q.inputs.size() + q.ops.size());
  checkSameOutputs(p, q);
  // A second run finds nothing.
  CHECK_FALSE(runCse(q, CseOptions{}));
}

TEST_CASE("cse: attributes and constants compare bitwise") {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({2, 2}));
  ValueId c1 = b.full(Type({2, 2}), 0.5);
  ValueId c2 = b.full(Type({2, 2}), 0.5);   // same bits: merged
  ValueId c3 = b.full(Type({4}), 0.5);      // other shape: kept
  ValueId z1 = b.full(Type({2, 2}), 0.0);
  ValueId z2 = b.full(Type({2, 2}), -0.0);  // differs in the sign bit: kept
  ValueId n1 = b.full(Type({2, 2}), std::nan(""));
  ValueId n2 = b.full(Type({2, 2}), std::nan("")); // same NaN bits: merged
  ValueId r = b.add(b.add(b.mul(x, c1), b.mul(x, c2)), b.add(z1, z2));
  ValueId sel = b.select(b.compare(x, x, "GT"), n1, n2);
  ValueId lt = b.compare(x, c1, "LT");
  ValueId gt = b.compare(x, c1, "GT"); // direction differs: kept
  p.addOutput(r);
  p.addOutput(c3);
  p.addOutput(sel);
  p.addOutput(b.add(lt, gt));
  Program q = p;
  CHECK(runCse(q, CseOptions{}));
  CHECK(verify(q).empty());
  // c2 and n2 merge, and then mul(x, c2) duplicates mul(x, c1).
  CHECK(countOps(q, OpKind::Constant) == 5);
  CHECK(countOps(q, OpKind::Mul) == 1);
  CHECK(countOps(q, OpKind::Compare) == 3);
}

TEST_CASE("cse: svd merges with all three results; remat ops stay apart from the forward") {
  Program p;
  Builder b(p);
  ValueId a = p.addInput("a", Type({4, 3}));
  auto f = b.svd(a);
  b.setLoc("trg step");
  b.setRemat(true);
  auto r1 = b.svd(a); // recomputation: must not merge into f
  auto r2 = b.svd(a); // a second recomputation may merge with r1
  b.setLoc("");
  auto g = b.svd(a); // plain duplicate of f
  p.addOutput(b.add(f[1], g[1]));
  p.addOutput(b.add(r1[0], r2[0]));
  p.addOutput(b.add(g[2], r2[2]));
  Program q = p;
  CseStats st;
  CHECK(runCse(q, CseOptions{}, &st));
  CHECK(st.mergedOps == 2);
  CHECK(verify(q).empty());
  REQUIRE(countOps(q, OpKind::Svd) == 2);
  int remat = 0;
  for (const Op &op : q.ops)
    if (op.kind == OpKind::Svd) remat += op.remat;
  CHECK(remat == 1);
  checkSameOutputs(p, q);
}

TEST_CASE("cse: a location is only a location (a loc that reads \"remat:\" merges)") {
  Program p = ir::parseProgram(R"(program @f(%a: f64[3]) {
  %x = neg %a : f64[3]
  %y = neg %a : f64[3] loc("remat: not a flag")
  %z = neg %a : f64[3] remat
  %s = add %x, %y : f64[3]
  return %s, %z
})");
  Program q = p;
  CHECK(runCse(q, CseOptions{}, nullptr));
  CHECK(countOps(q, OpKind::Neg) == 2); // %y merged into %x; the remat %z stays
  checkSameOutputs(p, q);
}

TEST_CASE("cse: output names survive") {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({3}));
  ValueId e1 = b.unary(OpKind::Exp, x);
  ValueId e2 = b.unary(OpKind::Exp, x);
  ValueId e3 = b.unary(OpKind::Exp, x);
  p.setName(e2, "first");
  p.setName(e3, "second");
  ValueId keep = b.neg(e1);
  p.addOutput(keep);
  p.addOutput(e2); // e1 is anonymous and not an output: takes the name "first"
  p.addOutput(e3); // e1 now defines output "first": "second" must stay apart
  Program q = p;
  CHECK(runCse(q, CseOptions{}));
  CHECK(verify(q).empty());
  CHECK(countOps(q, OpKind::Exp) == 2);
  CHECK(q.outputName(1) == "first");
  CHECK(q.outputName(2) == "second");
  CHECK(q.outputs[1] != q.outputs[2]);
  checkSameOutputs(p, q);
}

TEST_CASE("dce: removes unused ops, compacts values, keeps every output and input") {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({4, 4}));
  ValueId unusedIn = p.addInput("unused", Type({2}));
  ValueId dead1 = b.unary(OpKind::Exp, x);
  b.neg(dead1);                             // dead chain
  auto usv = b.svd(x);                      // only s is used: the svd stays whole
  ValueId zeroGrad = b.full(Type({2}), 0.0); // a zero gradient: an output, kept
  ValueId bz = b.broadcastScalar(b.scalar(0.0), {4, 4});
  p.setName(zeroGrad, "grad_unused");
  p.addOutput(usv[1]);
  p.addOutput(zeroGrad);
  p.addOutput(usv[1]); // duplicate output
  p.addOutput(x);      // an input as output
  p.addOutput(bz);
  const std::string before = printProgram(p);
  Program q = p;
  DceStats st;
  CHECK(runDce(q, DceOptions{}, &st));
  CHECK(st.removedOps == 2);
  CHECK(st.removedValues == 2);
  CHECK(verify(q).empty());
  CHECK(q.inputs.size() == 2);
  CHECK(q.value(q.inputs[1]).name == "unused");
  CHECK(q.outputs.size() == 5);
  CHECK(q.outputName(1) == "grad_unused");
  CHECK(q.outputs[0] == q.outputs[2]);
  CHECK(countOps(q, OpKind::Svd) == 1);
  CHECK(countOps(q, OpKind::Exp) == 0);
  CHECK(countOps(q, OpKind::Neg) == 0);
  CHECK(countOps(q, OpKind::BroadcastInDim) == 1);
  CHECK(q.values.size() == 2 + 3 + 1 + 2); // inputs, svd results, zero, scalar + broadcast
  for (size_t i = 0; i < q.ops.size(); ++i)
    for (ValueId r : q.ops[i].results) CHECK(q.value(r).def == int32_t(i));
  checkSameOutputs(p, q);
  (void)unusedIn;
  // Nothing left to do.
  CHECK_FALSE(runDce(q, DceOptions{}));
  CHECK(printProgram(p) == before);
}
