// Algebraic folds (passes/Fold.h).
#include <doctest/doctest.h>

#include <cstring>
#include <random>

#include "ir/Builder.h"
#include "ir/Verifier.h"
#include "passes/Cse.h"
#include "passes/Fold.h"
#include "runtime/Runtime.h"
#include "pass_testutil.h"

using namespace tessel;
using namespace tessel::ir;
using namespace tessel::passes;
using namespace passtest;

namespace {

/// Outputs of a and b agree bitwise on random inputs (no zeros, so the sign-of-zero
/// caveat of Fold.h does not apply).
void checkSameOutputs(const Program &a, const Program &b) {
  std::vector<Tensor> ins = nonzeroRandomInputs(a, 9);
  auto x = rt::evaluateReference(a, ins), y = rt::evaluateReference(b, ins);
  REQUIRE(x.size() == y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    REQUIRE(x[i].type == y[i].type);
    CHECK(std::memcmp(x[i].data.data(), y[i].data.data(), x[i].data.size() * 8) == 0);
  }
}

/// Folds a copy of p, checks it verifies and computes the same outputs.
Program folded(const Program &p, bool expectChange = true) {
  Program q = p;
  CHECK(runFold(q, FoldOptions{}) == expectChange);
  CHECK(verify(q).empty());
  checkSameOutputs(p, q);
  return q;
}

} // namespace

TEST_CASE("fold: transposes compose and vanish when the result is the identity") {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({2, 3, 4}));
  ValueId t = b.transpose(b.transpose(x, {1, 2, 0}), {2, 0, 1}); // identity
  ValueId u = b.transpose(b.transpose(x, {1, 0, 2}), {0, 2, 1}); // composes to [1,2,0]
  ValueId w = b.transpose(x, {0, 1, 2});                          // identity
  p.addOutput(b.add(b.neg(t), w));
  p.addOutput(b.neg(u));
  Program q = folded(p);
  REQUIRE(countOps(q, OpKind::Transpose) == 1);
  for (const Op &op : q.ops)
    if (op.kind == OpKind::Transpose) CHECK(op.attrs.getI64s("perm") == I64List{1, 2, 0});
  CHECK(q.ops.size() == 4); // neg, add, transpose, neg
}

TEST_CASE("fold: reshape chains and reshapes/broadcasts to the same shape") {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({4, 6}));
  ValueId r = b.reshape(b.reshape(b.reshape(x, {24}), {2, 12}), {6, 4});
  ValueId same = b.reshape(x, {4, 6});
  ValueId bsame = b.broadcastInDim(x, {4, 6}, {0, 1});
  ValueId rs = b.reduceSum(x, {});
  ValueId sl = b.slice(x, {0, 0}, {4, 6});
  ValueId pd = b.pad(x, {0, 0}, {0, 0});
  p.addOutput(b.neg(r));
  p.addOutput(b.add(b.add(same, bsame), b.add(rs, b.add(sl, pd))));
  Program q = folded(p);
  CHECK(countOps(q, OpKind::Reshape) == 1);
  CHECK(countOps(q, OpKind::BroadcastInDim) == 0);
  CHECK(countOps(q, OpKind::ReduceSum) == 0);
  CHECK(countOps(q, OpKind::Slice) == 0);
  CHECK(countOps(q, OpKind::Pad) == 0);
  for (const Op &op : q.ops)
    if (op.kind == OpKind::Reshape) CHECK(op.operands[0] == q.inputs[0]);
}

TEST_CASE("fold: multiply by one, add zero, negations") {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({3}));
  ValueId one = b.full(Type({3}), 1.0);
  ValueId oneB = b.broadcastScalar(b.scalar(1.0), {3});
  ValueId zero = b.full(Type({3}), 0.0);
  ValueId mzero = b.full(Type({3}), -0.0);
  ValueId two = b.full(Type({3}), 2.0);
  ValueId a = b.mul(b.mul(x, one), oneB);      // -> x
  ValueId c = b.div(b.add(zero, a), one);      // -> x
  ValueId d = b.sub(b.add(c, mzero), zero);    // -> x
  ValueId e = b.neg(b.neg(d));                 // -> x
  ValueId f = b.sub(zero, e);                  // -> neg x
  ValueId g = b.mul(f, two);                   // stays
  p.addOutput(b.unary(OpKind::Exp, g));
  Program q = folded(p);
  CHECK(countOps(q, OpKind::Add) == 0);
  CHECK(countOps(q, OpKind::Sub) == 0);
  CHECK(countOps(q, OpKind::Div) == 0);
  CHECK(countOps(q, OpKind::Mul) == 1);
  REQUIRE(countOps(q, OpKind::Neg) == 1);
  for (const Op &op : q.ops)
    if (op.kind == OpKind::Neg) CHECK(op.operands[0] == q.inputs[0]);
  // Only the constant 2 is still used.
  CHECK(countOps(q, OpKind::Constant) == 1);
}

TEST_CASE("fold: small broadcasts of a scalar constant become constants") {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({4, 4}));
  ValueId big = p.addInput("big", Type({32, 32}));
  ValueId c = b.broadcastScalar(b.scalar(3.0), {4, 4});
  ValueId cbig = b.broadcastScalar(b.scalar(3.0), {32, 32}); // 1024 > 256: kept
  p.addOutput(b.mul(x, c));
  p.addOutput(b.mul(big, cbig));
  Program q = folded(p);
  CHECK(countOps(q, OpKind::BroadcastInDim) == 1);
  bool found = false;
  for (const Op &op : q.ops)
    if (op.kind == OpKind::Constant && op.attrs.getTensor("value").type == Type({4, 4})) {
      found = true;
      for (double v : op.attrs.getTensor("value").data) CHECK(v == 3.0);
    }
  CHECK(found);
}

TEST_CASE("fold: output names are kept; nothing to do returns false") {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({3}));
  ValueId e = b.unary(OpKind::Exp, x);
  ValueId out = b.mul(e, b.full(Type({3}), 1.0));
  p.setName(out, "y");
  p.addOutput(out);
  ValueId direct = b.mul(x, b.full(Type({3}), 1.0)); // would be the input itself: kept
  p.setName(direct, "z");
  p.addOutput(direct);
  Program q = folded(p);
  CHECK(q.outputName(0) == "y");
  CHECK(q.outputName(1) == "z");
  CHECK(q.outputs[0] != q.inputs[0]);
  CHECK(q.ops[q.value(q.outputs[0]).def].kind == OpKind::Exp);
  CHECK(countOps(q, OpKind::Mul) == 1);

  Program r;
  Builder rb(r);
  ValueId y = r.addInput("y", Type({2}));
  r.addOutput(rb.mul(y, rb.full(Type({2}), 2.0)));
  folded(r, false);
}

TEST_CASE("fold: never looks through a forward op from a remat op (or back)") {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({2, 3}));
  ValueId t = b.transpose(x, {1, 0});   // forward (saved by the policy, say)
  ValueId n = b.neg(x);
  b.setLoc("bwd");
  b.setRemat(true);
  ValueId tt = b.transpose(t, {1, 0});  // would fold to x: a forward value, not saved
  ValueId nn = b.neg(n);
  // remat∘remat composes to the identity: rr becomes t, which the remat chain read anyway.
  ValueId rr = b.transpose(b.transpose(t, {1, 0}), {1, 0});
  b.setLoc("");
  p.addOutput(b.add(tt, nn));
  p.addOutput(b.add(rr, b.neg(b.neg(t)))); // forward∘forward: folds
  Program q = folded(p);
  for (const Op &op : q.ops) {
    if (!op.remat) continue;
    CHECK(op.operands[0] != q.inputs[0]); // no remat op reads x directly
  }
  int rematTransposes = 0, negs = 0;
  for (const Op &op : q.ops) {
    rematTransposes += op.kind == OpKind::Transpose && op.remat;
    negs += op.kind == OpKind::Neg;
  }
  CHECK(rematTransposes == 1); // tt only
  CHECK(negs == 2);            // n and nn; neg(neg(t)) folded to t
}
