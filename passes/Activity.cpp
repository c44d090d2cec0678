//===- passes/Activity.cpp - Activity analysis and function names for grad/jvp ===//
#include "passes/Activity.h"

#include "passes/VjpRules.h"

namespace tessel::passes {

std::vector<char> activeValues(const ir::Program &p, const std::vector<ir::ValueId> &seeds) {
  std::vector<char> active(p.values.size(), 0);
  for (ir::ValueId v : seeds) active[v] = 1;
  for (const ir::Op &op : p.ops) {
    bool any = false;
    for (size_t j = 0; j < op.operands.size() && !any; ++j)
      any = active[op.operands[j]] && vjp::isDifferentiableOperand(op.kind, static_cast<unsigned>(j));
    if (any)
      for (ir::ValueId r : op.results) active[r] = 1;
  }
  return active;
}

std::vector<char> activeFromInputs(const ir::Program &p, const std::vector<bool> &marked) {
  std::vector<ir::ValueId> seeds;
  for (size_t i = 0; i < p.inputs.size() && i < marked.size(); ++i)
    if (marked[i]) seeds.push_back(p.inputs[i]);
  return activeValues(p, seeds);
}

void activeCarries(const ir::Program &body, size_t carries, std::vector<bool> &marked) {
  for (bool grew = true; grew;) {
    grew = false;
    const std::vector<char> act = activeFromInputs(body, marked);
    for (size_t j = 0; j < carries && j < body.outputs.size() && j < marked.size(); ++j)
      if (!marked[j] && act[body.outputs[j]]) marked[j] = grew = true;
  }
}

std::string freshFunctionName(const std::vector<ir::Program> &fns, const std::string &entry,
                              const std::string &base) {
  auto taken = [&](const std::string &n) {
    if (n == entry) return true;
    for (const ir::Program &f : fns)
      if (f.name == n) return true;
    return false;
  };
  std::string cand = base;
  for (int i = 1; taken(cand); ++i) cand = base + "_" + std::to_string(i);
  return cand;
}

} // namespace tessel::passes
