//===- passes/Dce.cpp - Dead code elimination (see Dce.h) ----------------------===//
#include "passes/Dce.h"

#include <algorithm>
#include <vector>

#include "ir/OpAttrs.h"
#include "passes/Inline.h"
#include "passes/Rewrite.h"

namespace tessel::passes {

using namespace tessel::ir;

namespace {

bool dceFunction(Program &p, DceStats *stats) {
  const size_t valuesBefore = p.values.size();
  const size_t removed = eraseDeadOps(p);
  const size_t dropped = valuesBefore - p.values.size();
  if (stats) {
    stats->removedOps += int64_t(removed);
    stats->removedValues += int64_t(dropped);
  }
  return removed > 0 || dropped > 0;
}

/// Drops the outputs of function `fi` of module `m` that no call reads, when every use
/// of the function is a call (a scan body keeps its signature: its carries are typed by
/// it): the calls lose those results. Returns the number of outputs dropped.
size_t dropUnreadOutputs(Program &m, size_t fi) {
  Program &f = m.functions[fi];
  std::vector<bool> read(f.outputs.size(), false);
  bool called = false;
  auto uses = [&](const Op &op) { return hasCallee(op.kind) && ir::calleeOf(op) == f.name; };
  auto visit = [&](const Program &g) {
    if (std::none_of(g.ops.begin(), g.ops.end(), uses)) return true;
    std::vector<bool> used(g.values.size(), false);
    for (const Op &op : g.ops)
      for (ValueId v : op.operands) used[v] = true;
    for (ValueId v : g.outputs) used[v] = true;
    for (const Op &op : g.ops) {
      if (!uses(op)) continue;
      if (op.kind != OpKind::Call) return false;
      called = true;
      for (size_t k = 0; k < op.results.size() && k < read.size(); ++k) read[k] = read[k] || used[op.results[k]];
    }
    return true;
  };
  for (const Program &g : m.functions)
    if (!visit(g)) return 0;
  if (!visit(m) || !called) return 0;
  size_t dropped = 0;
  for (bool r : read) dropped += !r;
  if (dropped == 0) return 0;
  std::vector<ValueId> outs;
  for (size_t k = 0; k < f.outputs.size(); ++k)
    if (read[k]) outs.push_back(f.outputs[k]);
  f.outputs = std::move(outs);
  f.gradSignature.reset(); // its outputs are no longer the gradient's
  auto rewrite = [&](Program &g) {
    bool any = false;
    for (Op &op : g.ops) {
      if (op.kind != OpKind::Call || ir::calleeOf(op) != f.name) continue;
      llvm::SmallVector<ValueId, 4> kept;
      for (size_t k = 0; k < op.results.size(); ++k)
        if (read[k]) kept.push_back(op.results[k]);
      op.results.assign(kept.begin(), kept.end());
      any = true;
    }
    // The dropped results are no op's now: compact them away.
    if (any) eraseOpsAndCompact(g, std::vector<bool>(g.ops.size(), false));
  };
  for (size_t gi = fi + 1; gi < m.functions.size(); ++gi) rewrite(m.functions[gi]);
  rewrite(m);
  return dropped;
}

} // namespace

bool runDce(Program &p, const DceOptions &, DceStats *stats) {
  bool changed = false;
  for (Program &f : p.functions) changed |= dceFunction(f, stats);
  changed |= dceFunction(p, stats);
  // Outputs of a function no call reads (the primal outputs of a gradient's forward
  // half whose caller keeps only the gradient, say): dropped with the ops only they
  // need; callers first, since a caller's dropped op may leave a callee's output unread.
  for (bool again = !p.functions.empty(); again;) {
    again = false;
    for (size_t fi = p.functions.size(); fi-- > 0;)
      if (dropUnreadOutputs(p, fi) > 0) {
        again = changed = true;
        dceFunction(p.functions[fi], stats);
        for (size_t gi = fi + 1; gi < p.functions.size(); ++gi) dceFunction(p.functions[gi], stats);
        dceFunction(p, stats);
      }
  }
  const size_t deadFunctions = removeDeadFunctions(p);
  if (stats) stats->removedFunctions += static_cast<int64_t>(deadFunctions);
  return changed || deadFunctions > 0;
}

} // namespace tessel::passes
