//===- passes/VjpCall.cpp - The VJP rules of call and scan ---------------------===//
//
// Before the reverse sweep, grad makes every differentiated call and scan run the
// forward half of its callee's gradient (passes/Grad.cpp, storeCallResiduals): the
// callee differentiated once per set of differentiated operands and of outputs with a
// cotangent (memoised: three call sites of one callee, one pair), then split by
// passes::splitGradient with the remat policy GradOptions::callRemat. The forward half
// returns the callee's outputs and the residuals its backward half reads: with
// "recompute" only the callee's inputs (the backward half recomputes the rest, JAX's
// remat of a call), with "store" every value the backward reads, with "save-svd" the
// inputs and the svd results. The residuals are new results of the op; a scan stacks
// them per iteration (a carry the iteration got is a residual of its own; an x is the
// scan's operand).
//
// The rules then call the backward half: for a call, on the residuals and the
// cotangents of the outputs that have one; for a scan, in a reverse scan over an
// adapter that carries the carries' cotangents and slices the residuals, the xs and
// the ys' cotangents, stacking the xs' cotangents. Outputs without a cotangent (a call
// result or a stacked output nothing differentiates, an auxiliary output) get no
// cotangent input: no zeros flow back through them. Second order is grad of this
// module: the halves are ordinary functions.
//
//===----------------------------------------------------------------------===//
#include "passes/VjpRules.h"

#include "ir/OpAttrs.h"
#include "ir/Diagnostics.h"

namespace tessel::passes::vjp {

namespace {

/// The cotangent `ct`, or zeros of `v`'s type when it is kNone.
ValueId orZeros(Builder &b, ValueId ct, ValueId v) {
  return ct != kNone ? ct : splat(b, 0.0, shapeOf(b, v));
}

ModuleGrad &moduleOf(const VjpCall &c) {
  if (!c.module)
    throw Error(std::string("grad: ") + ir::opName(c.op.kind) +
                " needs its module (differentiate the module, not one function of it)");
  return *c.module;
}

/// The rule of a call that runs the forward half of its callee's gradient (a store
/// policy): the backward half on the residuals the call returned.
OperandCotangents vjpSplitCall(const VjpCall &c, const ModuleGrad::SplitCallee &s) {
  llvm::SmallVector<ValueId, 8> args;
  for (size_t r = 0; r < s.fromOperand.size(); ++r)
    args.push_back(s.fromOperand[r] >= 0 ? c.op.operands[static_cast<size_t>(s.fromOperand[r])]
                                         : c.op.results[static_cast<size_t>(s.fromResult[r])]);
  for (size_t o = 0; o < s.primal; ++o)
    if (s.cotangents[o]) args.push_back(orZeros(c.b, c.cotangents[o], c.op.results[o]));
  llvm::SmallVector<ValueId, 1> grads = c.b.call(s.backward, args);
  OperandCotangents out(c.op.operands.size(), kNone);
  size_t g = 0;
  for (size_t i = 0; i < c.op.operands.size(); ++i)
    if (s.wrt[i]) {
      if (c.needed[i]) out[i] = grads[g];
      ++g;
    }
  return out;
}

/// The rule of a scan whose body is the forward half of a gradient (a store policy):
/// a reverse scan of the backward half over the stacked residuals.
OperandCotangents vjpSplitScan(const VjpCall &c, const ModuleGrad::SplitCallee &s) {
  ModuleGrad &m = moduleOf(c);
  const size_t k = static_cast<size_t>(ir::attr<ir::OpKind::Scan, "carries">(c.op));
  const size_t nres = s.fromResult.size();
  const ir::Program *bwd = nullptr;
  for (const ir::Program &f : m.functions())
    if (f.name == s.backward) bwd = &f;
  // adapter(c̄..., r_i..., ȳ_i...) = call @bwd(r_i..., c̄..., ȳ_i...)
  ir::Program adapter;
  adapter.name = s.backward + "_scan";
  {
    llvm::SmallVector<ValueId, 8> ctc, res, cty;
    for (size_t i = 0; i < k; ++i)
      ctc.push_back(adapter.addInput("ct_c" + std::to_string(i), bwd->type(bwd->inputs[nres + i])));
    for (size_t r = 0; r < nres; ++r)
      res.push_back(adapter.addInput("r" + std::to_string(r), bwd->type(bwd->inputs[r])));
    for (size_t j = nres + k; j < bwd->inputs.size(); ++j)
      cty.push_back(adapter.addInput("ct_y" + std::to_string(j - nres - k), bwd->type(bwd->inputs[j])));
    Builder ab(adapter);
    ab.setCallees(m.functions());
    ab.setLoc("reverse scan of @" + s.callee);
    llvm::SmallVector<ValueId, 16> args(res.begin(), res.end());
    args.append(ctc.begin(), ctc.end());
    args.append(cty.begin(), cty.end());
    llvm::SmallVector<ValueId, 1> grads = ab.call(s.backward, args);
    // The backward half gives the cotangents of the carries grad differentiates (those a
    // differentiated operand reaches); the others carry zeros, so the loop's state keeps
    // one cotangent per carry.
    size_t g = 0;
    for (size_t i = 0; i < k; ++i)
      adapter.addOutput(s.wrt[i] ? grads[g++] : splat(ab, 0.0, shapeOf(ab, ctc[i])));
    for (; g < grads.size(); ++g) adapter.addOutput(grads[g]);
  }
  const std::string adapterName = m.addFunction(std::move(adapter));
  llvm::SmallVector<ValueId, 8> init, xsIn;
  for (size_t i = 0; i < k; ++i) init.push_back(orZeros(c.b, c.cotangents[i], c.op.results[i]));
  for (size_t r = 0; r < nres; ++r)
    xsIn.push_back(s.fromOperand[r] >= 0 ? c.op.operands[static_cast<size_t>(s.fromOperand[r])]
                                         : c.op.results[static_cast<size_t>(s.fromResult[r])]);
  for (size_t o = k; o < s.primal; ++o)
    if (s.cotangents[o]) xsIn.push_back(orZeros(c.b, c.cotangents[o], c.op.results[o]));
  const bool reverse = ir::attr<ir::OpKind::Scan, "reverse">(c.op) != 0;
  llvm::SmallVector<ValueId, 1> r = c.b.scan(adapterName, init, xsIn, ir::attr<ir::OpKind::Scan, "length">(c.op), !reverse);
  // The final carries' cotangents (one per carry), then the stacked cotangents of the
  // differentiated xs.
  OperandCotangents out(c.op.operands.size(), kNone);
  size_t g = k;
  for (size_t i = 0; i < c.op.operands.size(); ++i) {
    if (i < k) {
      if (s.wrt[i] && c.needed[i]) out[i] = r[i];
    } else if (s.wrt[i]) {
      if (c.needed[i]) out[i] = r[g];
      ++g;
    }
  }
  return out;
}

} // namespace

OperandCotangents vjpCall(const VjpCall &c) {
  const ModuleGrad::SplitCallee *s = moduleOf(c).splitCallee(ir::calleeOf(c.op));
  if (!s) throw Error("internal: grad: call of @" + ir::calleeOf(c.op) + " was not split before the sweep");
  return vjpSplitCall(c, *s);
}

OperandCotangents vjpScan(const VjpCall &c) {
  const ModuleGrad::SplitCallee *s = moduleOf(c).splitCallee(ir::calleeOf(c.op));
  if (!s) throw Error("internal: grad: scan over @" + ir::calleeOf(c.op) + " was not split before the sweep");
  return vjpSplitScan(c, *s);
}

} // namespace tessel::passes::vjp
