//===- passes/Dce.cpp - Dead code elimination (see Dce.h) ----------------------===//
#include "passes/Dce.h"

#include <vector>

#include "passes/Rewrite.h"

namespace tessel::passes {

using namespace tessel::ir;

bool runDce(Program &p, const DceOptions &, DceStats *stats) {
  std::vector<bool> live(p.values.size(), false);
  for (ValueId v : p.outputs) live[v] = true;
  std::vector<bool> dead(p.ops.size(), false);
  for (size_t i = p.ops.size(); i-- > 0;) {
    const Op &op = p.ops[i];
    bool used = false;
    for (ValueId r : op.results) used |= live[r];
    if (!used) {
      dead[i] = true;
      continue;
    }
    for (ValueId v : op.operands) live[v] = true;
  }
  const size_t valuesBefore = p.values.size();
  const size_t removed = eraseOpsAndCompact(p, dead);
  const size_t dropped = valuesBefore - p.values.size();
  if (stats) {
    stats->removedOps += int64_t(removed);
    stats->removedValues += int64_t(dropped);
  }
  return removed > 0 || dropped > 0;
}

} // namespace tessel::passes
