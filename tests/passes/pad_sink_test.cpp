// Zero-pad sinking and slice hoisting (passes/PadSink.h).
#include <doctest/doctest.h>

#include "ir/Builder.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/PadSink.h"
#include "runtime/Runtime.h"
#include "pass_testutil.h"

using namespace tessel;
using namespace tessel::ir;
using namespace tessel::passes;
using namespace passtest;

namespace {

/// The type of the first op of kind `k` (the test programs have one).
Type resultOf(const Program &p, OpKind k) {
  for (const Op &op : p.ops)
    if (op.kind == k) return p.type(op.results[0]);
  FAIL("no op of kind " << opName(k));
  return Type({});
}

/// Runs the pass on a copy of p, checks it verifies and that the outputs are equal
/// on random inputs (the reference evaluator sums in order, so dropping zero terms
/// changes nothing; == also equates -0 and +0, the one documented difference).
Program sunk(const Program &p, bool expectChange = true, PadSinkStats *stats = nullptr) {
  Program q = p;
  CHECK(runPadSink(q, PadSinkOptions{}, stats) == expectChange);
  INFO(printProgram(q));
  CHECK(verify(q).empty());
  std::vector<Tensor> ins = nonzeroRandomInputs(p, 5);
  auto x = rt::evaluateReference(p, ins), y = rt::evaluateReference(q, ins);
  REQUIRE(x.size() == y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    REQUIRE(x[i].type == y[i].type);
    for (size_t j = 0; j < x[i].data.size(); ++j) {
      INFO("output " << i << " element " << j);
      CHECK(x[i].data[j] == y[i].data[j]);
    }
  }
  return q;
}

} // namespace

TEST_CASE("pad-sink: dot_general with a padded free dimension computes the small product") {
  // (UᵀŪ) with Ū = pad(Ū_k): the svd reverse rule after a truncating slice.
  Program p;
  Builder b(p);
  ValueId U = p.addInput("U", Type({6, 6}));
  ValueId g = p.addInput("g", Type({6, 2}));
  ValueId G = b.pad(g, {0, 0}, {0, 4});
  p.setName(b.dotGeneral(U, G, {}, {}, {0}, {0}), "y");
  p.addOutput(p.lookup("y"));
  PadSinkStats st;
  Program q = sunk(p, true, &st);
  CHECK(resultOf(q, OpKind::DotGeneral) == Type({6, 2}));
  CHECK(countOps(q, OpKind::Pad) == 1);
  CHECK(st.sunk == 1);
  // The output keeps its name, now on the pad.
  CHECK(q.outputName(0) == "y");
  CHECK(q.ops.back().kind == OpKind::Pad);
}

TEST_CASE("pad-sink: dot_general with padded contracting and batch dimensions") {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({3, 4, 5}));
  ValueId y = p.addInput("y", Type({3, 2, 7}));
  // Batch dim 0 padded 3 -> 5 on the rhs side needs x with 5 batches: pad x too (free
  // and batch), and pad y's contracting dim 2 -> 5 (low 1, high 2).
  ValueId yp = b.pad(y, {0, 1, 0}, {0, 2, 0}); // [3,5,7], contract dim 1
  p.addOutput(b.dotGeneral(x, yp, {0}, {0}, {2}, {1})); // [3,4,7]
  ValueId xb = b.pad(x, {1, 0, 0}, {1, 0, 0}); // [5,4,5], batch dim padded
  ValueId z = p.addInput("z", Type({5, 5, 2}));
  p.addOutput(b.dotGeneral(xb, z, {0}, {0}, {2}, {1})); // [5,4,2]
  Program q = sunk(p);
  int small = 0;
  for (const Op &op : q.ops)
    if (op.kind == OpKind::DotGeneral) {
      const Type &t = q.type(op.results[0]);
      small += t == Type({3, 4, 7}) || t == Type({3, 4, 2});
      // The contracting length of the first product is y's interior (2), not 5.
      if (t == Type({3, 4, 7})) CHECK(q.type(op.operands[1]) == Type({3, 2, 7}));
    }
  CHECK(small == 2);
}

TEST_CASE("pad-sink: transpose, f(0) = 0 unary ops, mul, reduce_sum and broadcast") {
  Program p;
  Builder b(p);
  ValueId y = p.addInput("y", Type({2, 3}));
  ValueId x = p.addInput("x", Type({5, 3}));
  ValueId P = b.pad(y, {1, 0}, {2, 0}); // [5,3], rows 1..2 hold y
  ValueId t = b.transpose(b.unary(OpKind::Sin, b.neg(P)), {1, 0}); // [3,5]
  p.addOutput(b.mul(x, b.transpose(t, {1, 0})));                   // [5,3]
  p.addOutput(b.reduceSum(P, {1}));                                // [5]
  p.addOutput(b.reduceSum(P, {0}));                                // [3]: no pad left
  p.addOutput(b.broadcastInDim(P, {4, 5, 3}, {1, 2}));             // [4,5,3]
  Program q = sunk(p);
  // Every op but the pads computes on y's 2 rows.
  for (const Op &op : q.ops) {
    if (op.kind == OpKind::Mul) CHECK(q.type(op.results[0]) == Type({2, 3}));
    if (op.kind == OpKind::Neg || op.kind == OpKind::Sin)
      CHECK(q.type(op.results[0]) == Type({2, 3}));
    if (op.kind == OpKind::BroadcastInDim) CHECK(q.type(op.results[0]) == Type({4, 2, 3}));
    if (op.kind == OpKind::ReduceSum) CHECK(q.type(op.operands[0]) == Type({2, 3}));
  }
  // x is sliced to the interior for the mul.
  CHECK(countOps(q, OpKind::Slice) == 1);
}

TEST_CASE("pad-sink: add of pads with equal padding sinks, with different padding stays") {
  Program p;
  Builder b(p);
  ValueId a = p.addInput("a", Type({2, 2}));
  ValueId c = p.addInput("c", Type({2, 2}));
  ValueId A = b.pad(a, {0, 0}, {0, 3}), C = b.pad(c, {0, 0}, {0, 3});
  p.addOutput(b.add(A, C)); // -> pad(add(a, c))
  ValueId At = b.transpose(A, {1, 0}); // [5,2] padded rows
  ValueId B = b.pad(c, {0, 0}, {3, 0}); // [5,2] padded rows too, same: sinks
  p.addOutput(b.sub(At, B));
  ValueId D = b.pad(c, {3, 0}, {0, 0}); // different padding: no rewrite of this add
  p.addOutput(b.add(At, D));
  Program q = sunk(p);
  int smallAdds = 0, bigAdds = 0;
  for (const Op &op : q.ops)
    if (op.kind == OpKind::Add || op.kind == OpKind::Sub)
      (q.type(op.results[0]).numel() == 4 ? smallAdds : bigAdds)++;
  CHECK(smallAdds == 2);
  CHECK(bigAdds == 1);
}

TEST_CASE("pad-sink: slice of a pad: inside the data, across its edge, inside the zeros") {
  Program p;
  Builder b(p);
  ValueId y = p.addInput("y", Type({4}));
  ValueId P = b.pad(y, {2}, {3}); // [9]: 0 0 y0 y1 y2 y3 0 0 0
  p.addOutput(b.slice(P, {3}, {5}));   // y1 y2 -> slice of y
  p.addOutput(b.slice(P, {1}, {4}));   // 0 y0 y1 -> pad(slice y)
  p.addOutput(b.slice(P, {6}, {9}));   // zeros -> broadcast of 0
  p.addOutput(b.neg(b.slice(P, {2}, {6}))); // all of y: neg(y)
  Program q = sunk(p);
  CHECK(countOps(q, OpKind::Pad) == 1);
  CHECK(countOps(q, OpKind::Slice) == 2);
  for (const Op &op : q.ops)
    if (op.kind == OpKind::Neg) CHECK(op.operands[0] == q.inputs[0]);
  CHECK(q.type(q.outputs[2]) == Type({3}));
}

TEST_CASE("pad-sink: slices are hoisted through elementwise chains and broadcasts") {
  // F = (bcast(s², cols) − bcast(s², rows)) / (d² + ε²) masked, times a padded Ū:
  // after the pass the F chain is computed only for the r kept columns.
  Program p;
  Builder b(p);
  ValueId s = p.addInput("s", Type({6}));
  ValueId g = p.addInput("g", Type({6, 2}));
  ValueId s2 = b.mul(s, s);
  ValueId d = b.sub(b.broadcastInDim(s2, {6, 6}, {1}), b.broadcastInDim(s2, {6, 6}, {0}));
  ValueId den = b.add(b.mul(d, d), b.broadcastScalar(b.scalar(1e-24), {6, 6}));
  ValueId F = b.mul(b.div(d, den), b.compare(d, b.broadcastScalar(b.scalar(0.0), {6, 6}), "NE"));
  ValueId J = b.mul(F, b.pad(g, {0, 0}, {0, 4}));
  p.addOutput(b.add(J, b.transpose(J, {1, 0})));
  PadSinkStats st;
  Program q = sunk(p, true, &st);
  CHECK(st.hoisted == 10); // measured: the slice moves up the F chain in 10 rewrites
  int inspected = 0;
  for (const Op &op : q.ops)
    if (op.kind == OpKind::Div || op.kind == OpKind::Sub || op.kind == OpKind::Compare) {
      CHECK(q.type(op.results[0]) == Type({6, 2}));
      ++inspected;
    }
  CHECK(inspected == 3); // the chain is still there, only narrower
}

TEST_CASE("pad-sink: no rewrite across the remat boundary, none without pads") {
  Program p;
  Builder b(p);
  ValueId U = p.addInput("U", Type({4, 4}));
  ValueId g = p.addInput("g", Type({4, 1}));
  b.setLoc("trg step: truncate");
  b.setRemat(true);
  ValueId G = b.pad(g, {0, 0}, {0, 3});
  b.setLoc("vjp trg step: svd");
  p.addOutput(b.dotGeneral(U, G, {}, {}, {0}, {0}));
  sunk(p, /*expectChange=*/false);

  Program r;
  Builder c(r);
  ValueId x = r.addInput("x", Type({3, 3}));
  r.addOutput(c.mul(c.transpose(x, {1, 0}), x));
  sunk(r, /*expectChange=*/false);
}

TEST_CASE("pad-sink: one run reaches the fixed point; dead code is left to dce") {
  // The bypassed pad and the dead abs/sqrt chain still read %v0: it stays for them, and
  // a second run finds nothing (the dead ops are not counted as uses of %v0).
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({3, 2}));
  ValueId v0 = b.mul(x, x);
  ValueId v1 = b.pad(v0, {0, 0}, {1, 2});
  b.unary(OpKind::Sqrt, b.unary(OpKind::Abs, v1)); // dead
  p.addOutput(b.slice(v1, {0, 1}, {2, 3}));
  Program q = sunk(p);
  CHECK(countOps(q, OpKind::Sqrt) == 1);
  Program r = q;
  CHECK_FALSE(runPadSink(r, PadSinkOptions{}));
  CHECK(printProgram(r) == printProgram(q));
}

TEST_CASE("pad-sink: a hoisted chain stays whole for a dead reader of its last op") {
  // The slice moves up through neg and compare; a dead broadcast still reads the full
  // neg, which therefore stays, and so must the full compare it reads (found by the
  // differential fuzzer: the full compare was erased under the neg kept for the dead op).
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({2, 3}));
  ValueId n = b.neg(b.compare(x, x, "NE"));
  b.broadcastInDim(n, {2, 3}, {0, 1}); // dead
  p.addOutput(b.unary(OpKind::Exp, b.slice(n, {0, 1}, {1, 3})));
  Program q = sunk(p);
  CHECK(countOps(q, OpKind::Compare) == 2); // the hoisted [1,2] one and the full one
  CHECK(resultOf(q, OpKind::Exp) == Type({1, 2}));
}

TEST_CASE("pad-sink: two outputs that fold to one value keep their own names") {
  // Both slices become neg(x); the second cannot also be that value (an output has one
  // name), so it stays a slice of the pad.
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({2}));
  ValueId n = b.neg(b.pad(x, {1}, {1}));
  p.addOutput(b.slice(n, {1}, {3}));
  ValueId s2 = b.slice(n, {1}, {3});
  p.setName(s2, "b");
  p.addOutput(s2);
  Program q = sunk(p);
  CHECK(q.outputName(0) == "out0");
  CHECK(q.outputName(1) == "b");
  CHECK(q.outputs[0] != q.outputs[1]);
}
