//===- passes/SplitVjp.cpp - A gradient program as forward and backward functions ===//
#include "passes/SplitVjp.h"

#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "ir/Verifier.h"

namespace tessel::passes {

using ir::Program;
using ir::ValueId;

bool runSplitVjp(Program &p, const SplitVjpOptions &opts) {
  if (!p.gradSignature || p.gradSignature->primalOutputs == 0)
    throw Error("split-vjp: program " + ir::text::atName(p.name) +
                " is not a gradient program with its primal outputs (run grad{keep-outputs=true} "
                "first)");
  const ir::GradSignature sig = *p.gradSignature;
  const size_t numPrimalInputs = p.inputs.size() - sig.cotangents;
  ForwardBackward fb = splitGradient(p, sig.primalOutputs, numPrimalInputs, opts.policy);

  Program m;
  m.name = p.name;
  m.functions = std::move(p.functions);
  auto fresh = [&](const std::string &base) {
    std::string name = base;
    for (int k = 1; name == m.name || m.functionIndex(name) >= 0; ++k) name = base + "_" + std::to_string(k);
    return name;
  };
  fb.forward.functions.clear();
  fb.backward.functions.clear();
  fb.forward.name = fresh(p.name + "_fwd");
  m.functions.push_back(std::move(fb.forward));
  const std::string fwd = m.functions.back().name;
  fb.backward.name = fresh(p.name + "_bwd");
  m.functions.push_back(std::move(fb.backward));
  const std::string bwd = m.functions.back().name;

  std::vector<ValueId> in;
  for (ValueId v : p.inputs) in.push_back(m.addInput(p.value(v).name, p.type(v)));
  ir::Builder b(m);
  b.setLoc("split-vjp");
  llvm::SmallVector<ValueId, 8> primal(in.begin(), in.begin() + static_cast<ptrdiff_t>(numPrimalInputs));
  llvm::SmallVector<ValueId, 1> fo = b.call(fwd, primal);
  llvm::SmallVector<ValueId, 8> bwdArgs;
  for (const Residual &r : fb.residuals)
    bwdArgs.push_back(r.forwardInput >= 0 ? in[static_cast<size_t>(r.forwardInput)]
                                          : fo[static_cast<size_t>(r.forwardOutput)]);
  bwdArgs.append(in.begin() + static_cast<ptrdiff_t>(numPrimalInputs), in.end());
  llvm::SmallVector<ValueId, 1> go = b.call(bwd, bwdArgs);
  std::vector<ValueId> outs(fo.begin(), fo.begin() + static_cast<ptrdiff_t>(sig.primalOutputs));
  outs.insert(outs.end(), go.begin(), go.end());
  // Outputs keep what they were: an input returned as it is stays that input, and an output
  // that repeats an earlier one's value repeats that value (not another call result), so
  // the outputs keep their names and a later pass that selects outputs by name (grad's aux)
  // selects the same ones.
  for (size_t i = 0; i < outs.size(); ++i) {
    const ValueId v = p.outputs[i];
    if (const int k = p.inputIndex(v); k >= 0) {
      outs[i] = in[static_cast<size_t>(k)];
      continue;
    }
    for (size_t j = 0; j < i; ++j)
      if (p.outputs[j] == v) {
        outs[i] = outs[j];
        break;
      }
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    const std::string name = p.outputName(i);
    if (!ir::isAnonymousName(p.value(p.outputs[i]).name) && ir::isAnonymousName(m.value(outs[i]).name) &&
        m.lookup(name) == ir::kNoValue)
      m.setName(outs[i], name);
    m.addOutput(outs[i]);
  }
  m.gradSignature = sig;
  ir::verifyOrThrow(m);
  p = std::move(m);
  return true;
}

} // namespace tessel::passes
