//===- passes/SplitGradient.cpp - A forward and a backward program (splitVjp) --===//
//
// splitVjp and splitGradient (passes/Checkpoint.h): a gradient program split into a
// forward program that returns the residuals of a remat policy and a backward program
// that reads them, for staged execution (the split-vjp pass, passes/SplitVjp.h, applies
// it to every function of a module).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <sstream>

#include "ir/Diagnostics.h"
#include "ir/Printer.h"
#include "ir/TextUtil.h"
#include "ir/Verifier.h"
#include "passes/Checkpoint.h"
#include "passes/Grad.h"
#include "passes/Inline.h"
#include "passes/Remat.h"

namespace tessel::passes {

using ir::Op;
using ir::Program;
using ir::ValueId;
using namespace remat_detail; // passes/Remat.h

int64_t ForwardBackward::residualBytes() const {
  int64_t b = 0;
  for (const Residual &r : residuals) b += r.bytes;
  return b;
}

std::vector<ir::Tensor>
ForwardBackward::backwardInputs(const std::vector<ir::Tensor> &forwardInputs,
                                const std::vector<ir::Tensor> &forwardOutputs,
                                const std::vector<ir::Tensor> &cotangents) const {
  if (forwardInputs.size() != forward.inputs.size())
    throw Error("error: backwardInputs: " + std::to_string(forwardInputs.size()) +
                " forward inputs given, " + ir::text::atName(forward.name) + " has " +
                std::to_string(forward.inputs.size()));
  if (forwardOutputs.size() != forward.outputs.size())
    throw Error("error: backwardInputs: " + std::to_string(forwardOutputs.size()) +
                " forward outputs given, " + ir::text::atName(forward.name) + " has " +
                std::to_string(forward.outputs.size()));
  if (cotangents.size() != numCotangents)
    throw Error("error: backwardInputs: " + std::to_string(cotangents.size()) +
                " cotangents given, " + ir::text::atName(backward.name) + " takes " +
                std::to_string(numCotangents));
  std::vector<ir::Tensor> in;
  in.reserve(residuals.size() + cotangents.size());
  for (const Residual &r : residuals)
    in.push_back(r.forwardInput >= 0 ? forwardInputs[r.forwardInput]
                                     : forwardOutputs[r.forwardOutput]);
  for (const ir::Tensor &t : cotangents) in.push_back(t);
  return in;
}

std::string ForwardBackward::describeResiduals() const {
  std::ostringstream os;
  os << "residuals of " << ir::text::atName(forward.name) << " under policy " << rematPolicyName(policy) << ": "
     << residuals.size() << " values, " << residualBytes() << " bytes";
  if (recomputedOps) os << ", " << recomputedOps << " ops recomputed in the backward";
  os << "\n";
  size_t wn = 4, wt = 4, wb = 5;
  for (const Residual &r : residuals) {
    wn = std::max(wn, r.name.size() + 1);
    wt = std::max(wt, r.type.str().size());
    wb = std::max(wb, std::to_string(r.bytes).size());
  }
  auto pad = [](std::string s, size_t w, bool right = false) {
    if (s.size() >= w) return s;
    return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
  };
  os << "  " << pad("name", wn) << "  " << pad("type", wt) << "  " << pad("bytes", wb, true)
     << "  origin\n";
  for (const Residual &r : residuals)
    os << "  " << pad("%" + r.name, wn) << "  " << pad(r.type.str(), wt) << "  "
       << pad(std::to_string(r.bytes), wb, true) << "  " << r.origin << "\n";
  return os.str();
}
/// Appends `op` (of program `src`, which is discarded after) to `dst` reading
/// `operands`, with its attributes, location, position and result names moved over;
/// records the new results in `map` (indexed by `src` value ids).
static void appendMoved(ir::Program &dst, ir::Program &src, Op &op,
                        llvm::ArrayRef<ValueId> operands, std::vector<ValueId> &map) {
  llvm::SmallVector<ir::Type, 3> types;
  for (ValueId v : op.results) types.push_back(src.values[v].type);
  auto out = dst.appendOp(op.kind, operands, std::move(op.attrs), types, std::move(op.loc), op.remat);
  dst.ops.back().pos = op.pos;
  for (size_t k = 0; k < out.size(); ++k) {
    map[op.results[k]] = out[k];
    const std::string &nm = src.values[op.results[k]].name;
    if (!ir::isAnonymousName(nm)) dst.setName(out[k], nm);
  }
}


ForwardBackward splitVjp(const Program &fwd, const GradOptions &opts, RematPolicy policy) {
  GradOptions go = opts;
  go.keepOutputs = true;
  return splitGradient(grad(fwd, go), fwd.outputs.size(), fwd.inputs.size(), policy);
}

ForwardBackward splitGradient(const Program &g, size_t numPrimal, size_t numPrimalInputs,
                              RematPolicy policy, bool asCallee) {
  if (g.outputs.size() < numPrimal || g.inputs.size() < numPrimalInputs)
    throw Error("internal: gradient program " + ir::text::atName(g.name) + " does not keep the primal outputs");

  RematConfig cfg;
  cfg.policy = policy;
  cfg.regions = 1;
  cfg.numPrimal = numPrimal;
  cfg.keepPrimalOutputs = false;
  cfg.materializeOutputs = true;
  RematResult r = rematerialize(g, cfg);
  // Each op of h goes to one half, moved (h is not read after the halves are built).
  Program &h = r.prog;

  ForwardBackward fb;
  fb.policy = policy;
  fb.numPrimalOutputs = numPrimal;
  fb.numCotangents = h.inputs.size() - numPrimalInputs;
  fb.recomputedOps = r.clones;
  std::vector<ValueId> res = residualValues(h, r.isForward, numPrimal, numPrimalInputs, true);

  // Forward program: the forward ops, the original outputs, then the residuals that
  // are neither inputs nor original outputs.
  // Names no function of the module has (a module's entry split again).
  auto freshName = [&](const std::string &base) {
    std::string n = base;
    for (int k = 1; g.functionIndex(n) >= 0; ++k) n = base + "_" + std::to_string(k);
    return n;
  };
  Program &F = fb.forward, &B = fb.backward;
  F.name = freshName(h.name + "_fwd");
  const size_t forwardOps = static_cast<size_t>(
      std::count_if(r.isForward.begin(), r.isForward.end(), [](char f) { return f != 0; }));
  F.ops.reserve(forwardOps);
  B.ops.reserve(h.ops.size() - forwardOps);
  F.functions = g.functions; // both halves of a module's entry call its functions
  std::vector<ValueId> toF(h.values.size(), ir::kNoValue);
  for (size_t k = 0; k < numPrimalInputs; ++k) {
    ValueId in = h.inputs[k];
    toF[in] = F.addInput(h.values[in].name, h.values[in].type);
  }
  for (size_t i = 0; i < h.ops.size(); ++i) {
    if (!r.isForward[i]) continue;
    Op &op = h.ops[i];
    llvm::SmallVector<ValueId, 4> ops;
    for (ValueId u : op.operands) ops.push_back(toF[u]);
    appendMoved(F, h, op, ops, toF);
  }
  for (size_t o = 0; o < numPrimal; ++o) F.addOutput(toF[h.outputs[o]]);
  for (size_t k = 0; k < res.size(); ++k) {
    ValueId v = res[k];
    ValueId fv = toF[v];
    Residual rr;
    rr.type = h.values[v].type;
    rr.bytes = rr.type.bytes();
    int32_t d = h.values[v].def;
    if (d < 0) {
      rr.forwardInput = F.inputIndex(F.values[fv].name);
    } else {
      for (size_t o = 0; o < numPrimal; ++o)
        if (F.outputs[o] == fv) {
          rr.forwardOutput = static_cast<int>(o);
          break;
        }
      // A residual is a backward input, which needs a name (a primal output may be
      // anonymous too).
      if (ir::isAnonymousName(F.values[fv].name)) F.setName(fv, "res" + std::to_string(k));
      if (rr.forwardOutput < 0) {
        rr.forwardOutput = static_cast<int>(F.outputs.size());
        F.addOutput(fv);
      }
    }
    rr.name = F.values[fv].name;
    fb.residuals.push_back(std::move(rr));
  }
  // Origins, described with the forward program's names.
  for (size_t k = 0; k < res.size() && !asCallee; ++k) {
    Residual &rr = fb.residuals[k];
    int32_t d = h.values[res[k]].def;
    if (d < 0) {
      rr.originOp = "input";
      rr.origin = "input %" + rr.name;
      continue;
    }
    ValueId fv = toF[res[k]];
    rr.originOp = ir::opName(F.ops[F.values[fv].def].kind);
    rr.origin = describeOrigin(F, fv);
  }

  // Backward program: residuals, then the cotangents; the backward ops and clones.
  B.name = freshName(h.name + "_bwd");
  B.functions = g.functions;
  std::vector<ValueId> toB(h.values.size(), ir::kNoValue);
  for (size_t k = 0; k < res.size(); ++k)
    toB[res[k]] = B.addInput(fb.residuals[k].name, fb.residuals[k].type);
  for (size_t k = numPrimalInputs; k < h.inputs.size(); ++k) {
    ValueId in = h.inputs[k];
    toB[in] = B.addInput(h.values[in].name, h.values[in].type);
  }
  for (size_t i = 0; i < h.ops.size(); ++i) {
    if (r.isForward[i]) continue;
    Op &op = h.ops[i];
    llvm::SmallVector<ValueId, 4> ops;
    for (ValueId u : op.operands) {
      if (toB[u] == ir::kNoValue)
        throw Error("internal: splitVjp: backward op " + std::string(ir::opName(op.kind)) +
                    " reads a forward value that is not a residual");
      ops.push_back(toB[u]);
    }
    appendMoved(B, h, op, ops, toB);
  }
  for (size_t o = numPrimal; o < h.outputs.size(); ++o) B.addOutput(toB[h.outputs[o]]);

  removeDeadFunctions(F);
  removeDeadFunctions(B);
  if (!asCallee) {
    ir::verifyOrThrow(F);
    ir::verifyOrThrow(B);
  }
  return fb;
}

} // namespace tessel::passes
