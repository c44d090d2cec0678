//===- passes/VjpCall.cpp - The VJP rules of call and scan ---------------------===//
//
// A call's cotangents come from a call of the callee's VJP function, which grad makes
// once per callee and set of differentiated operands (ModuleGrad::vjpFunction) and
// which recomputes the callee's forward: the remat policy "recompute" on every call,
// the one JAX applies to a `remat`-wrapped function.
//
// A scan is differentiated as JAX's scan transpose, storing the carries: before the
// reverse sweep, grad makes each differentiated scan run a body that also returns the
// carries it was given (stacked per iteration: K·length carry tensors, the only
// residuals), so the rule finds them among the op's results. The reverse loop runs the
// other way over an adapter of the body's VJP function,
//
//   adapter(c̄..., c_i..., x_i..., ȳ_i...) = call @body_vjp(c_i..., x_i..., c̄..., ȳ_i...)
//
// carrying the carries' cotangents and stacking the xs' cotangents. Each iteration
// recomputes its forward from its stored carries (the body's VJP function does), so
// the memory is the carries, not every intermediate of every iteration.
//
// Under grad{remat=store} (or save-svd) grad has first made each such call or scan run
// the forward half of its callee's gradient (passes/Grad.cpp, storeCallResiduals), whose
// residuals are new results of the op (stacked per iteration for a scan): the rules then
// call the backward half on them, and nothing is recomputed.
//
// Outputs whose cotangent is zero (a call result, a stacked output no one
// differentiates) get no cotangent input in the VJP function, which is made for that
// set: no zeros flow back, and the ops only they need are not differentiated.
//
//===----------------------------------------------------------------------===//
#include "passes/VjpRules.h"

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
  const size_t k = static_cast<size_t>(c.op.attrs.getI64("carries"));
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
    for (ValueId g : ab.call(s.backward, args)) adapter.addOutput(g);
  }
  const std::string adapterName = m.addFunction(std::move(adapter));
  llvm::SmallVector<ValueId, 8> init, xsIn;
  for (size_t i = 0; i < k; ++i) init.push_back(orZeros(c.b, c.cotangents[i], c.op.results[i]));
  for (size_t r = 0; r < nres; ++r) xsIn.push_back(c.op.results[static_cast<size_t>(s.fromResult[r])]);
  for (size_t o = k; o < s.primal; ++o)
    if (s.cotangents[o]) xsIn.push_back(orZeros(c.b, c.cotangents[o], c.op.results[o]));
  const bool reverse = c.op.attrs.getI64("reverse") != 0;
  llvm::SmallVector<ValueId, 1> r = c.b.scan(adapterName, init, xsIn, c.op.attrs.getI64("length"), !reverse);
  OperandCotangents out(c.op.operands.size(), kNone);
  size_t g = 0;
  for (size_t i = 0; i < c.op.operands.size(); ++i)
    if (s.wrt[i]) {
      if (c.needed[i]) out[i] = r[g];
      ++g;
    }
  return out;
}

} // namespace

OperandCotangents vjpCall(const VjpCall &c) {
  ModuleGrad &m = moduleOf(c);
  if (const ModuleGrad::SplitCallee *s = m.splitCallee(c.op.attrs.getStr("callee"))) return vjpSplitCall(c, *s);
  llvm::SmallVector<bool, 8> withCt;
  for (ValueId ct : c.cotangents) withCt.push_back(ct != kNone);
  const std::string vjp = m.vjpFunction(c.op.attrs.getStr("callee"), c.needed, withCt);
  llvm::SmallVector<ValueId, 8> args(c.op.operands.begin(), c.op.operands.end());
  for (ValueId ct : c.cotangents)
    if (ct != kNone) args.push_back(ct);
  llvm::SmallVector<ValueId, 1> grads = c.b.call(vjp, args);
  OperandCotangents out(c.op.operands.size(), kNone);
  size_t g = 0;
  for (size_t i = 0; i < c.op.operands.size(); ++i)
    if (c.needed[i]) out[i] = grads[g++];
  return out;
}

OperandCotangents vjpScan(const VjpCall &c) {
  ModuleGrad &m = moduleOf(c);
  if (const ModuleGrad::SplitCallee *s = m.splitCallee(c.op.attrs.getStr("callee"))) return vjpSplitScan(c, *s);
  const ModuleGrad::ScanResiduals *res = m.scanResiduals(c.op.attrs.getStr("callee"));
  if (!res)
    throw Error("grad: scan over @" + c.op.attrs.getStr("callee") +
                " has no stored carries (internal: grad prepares every differentiated scan)");
  const size_t k = res->carries, ny = res->ys;
  const size_t nx = c.op.operands.size() - k;
  const int64_t length = c.op.attrs.getI64("length");
  const bool reverse = c.op.attrs.getI64("reverse") != 0;

  // The body's VJP for every carry and for the xs that need a cotangent.
  llvm::SmallVector<bool, 8> wrt(k, true);
  for (size_t j = 0; j < nx; ++j) wrt.push_back(c.needed[k + j]);
  // Every carry's cotangent is carried; a stacked output without one gets no input.
  llvm::SmallVector<bool, 8> withCt(k, true);
  for (size_t y = 0; y < ny; ++y) withCt.push_back(c.cotangents[k + y] != kNone);
  const std::string bodyVjp = m.vjpFunction(res->body, wrt, withCt);

  // adapter(c̄..., c_i..., x_i..., ȳ_i...) -> (c̄'..., x̄_i...)
  ir::Program adapter;
  adapter.name = bodyVjp + "_scan";
  {
    const ir::Program *body = nullptr;
    for (const ir::Program &f : m.functions())
      if (f.name == res->body) body = &f;
    llvm::SmallVector<ir::Type, 8> carryTypes, xTypes, yTypes;
    for (size_t i = 0; i < k; ++i) carryTypes.push_back(body->type(body->inputs[i]));
    for (size_t j = 0; j < nx; ++j) xTypes.push_back(body->type(body->inputs[k + j]));
    for (size_t y = 0; y < ny; ++y) yTypes.push_back(body->type(body->outputs[k + y]));
    llvm::SmallVector<ValueId, 8> ctc, cs, xs, cty;
    for (size_t i = 0; i < k; ++i) ctc.push_back(adapter.addInput("ct_c" + std::to_string(i), carryTypes[i]));
    for (size_t i = 0; i < k; ++i) cs.push_back(adapter.addInput("c" + std::to_string(i), carryTypes[i]));
    for (size_t j = 0; j < nx; ++j) xs.push_back(adapter.addInput("x" + std::to_string(j), xTypes[j]));
    for (size_t y = 0; y < ny; ++y)
      if (withCt[k + y]) cty.push_back(adapter.addInput("ct_y" + std::to_string(y), yTypes[y]));
    Builder ab(adapter);
    ab.setCallees(m.functions());
    ab.setLoc("reverse scan of @" + res->body);
    llvm::SmallVector<ValueId, 16> args(cs.begin(), cs.end());
    args.append(xs.begin(), xs.end());
    args.append(ctc.begin(), ctc.end());
    args.append(cty.begin(), cty.end());
    for (ValueId g : ab.call(bodyVjp, args)) adapter.addOutput(g);
  }
  const std::string adapterName = m.addFunction(std::move(adapter));

  // Initial carries: the cotangents of the final carries; xs: the stored carries, the
  // forward xs and the cotangents of the stacked ys.
  llvm::SmallVector<ValueId, 8> init, xsIn;
  for (size_t i = 0; i < k; ++i) init.push_back(orZeros(c.b, c.cotangents[i], c.op.results[i]));
  for (size_t i = 0; i < k; ++i) xsIn.push_back(c.op.results[k + ny + i]);
  for (size_t j = 0; j < nx; ++j) xsIn.push_back(c.op.operands[k + j]);
  for (size_t y = 0; y < ny; ++y)
    if (withCt[k + y]) xsIn.push_back(c.cotangents[k + y]);
  llvm::SmallVector<ValueId, 1> r = c.b.scan(adapterName, init, xsIn, length, !reverse);

  OperandCotangents out(c.op.operands.size(), kNone);
  for (size_t i = 0; i < k; ++i)
    if (c.needed[i]) out[i] = r[i];
  size_t g = k;
  for (size_t j = 0; j < nx; ++j)
    if (c.needed[k + j]) out[k + j] = r[g++];
  return out;
}

} // namespace tessel::passes::vjp
