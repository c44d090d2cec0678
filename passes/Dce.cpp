//===- passes/Dce.cpp - Dead code elimination (see Dce.h) ----------------------===//
#include "passes/Dce.h"

#include <vector>

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

} // namespace

bool runDce(Program &p, const DceOptions &, DceStats *stats) {
  bool changed = false;
  for (Program &f : p.functions) changed |= dceFunction(f, stats);
  changed |= dceFunction(p, stats);
  const size_t deadFunctions = removeDeadFunctions(p);
  if (stats) stats->removedFunctions += static_cast<int64_t>(deadFunctions);
  return changed || deadFunctions > 0;
}

} // namespace tessel::passes
