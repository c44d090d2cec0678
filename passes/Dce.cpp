//===- passes/Dce.cpp - Dead code elimination (see Dce.h) ----------------------===//
#include "passes/Dce.h"

#include <vector>

#include "passes/Rewrite.h"

namespace tessel::passes {

using namespace tessel::ir;

bool runDce(Program &p, const DceOptions &, DceStats *stats) {
  const size_t valuesBefore = p.values.size();
  const size_t removed = eraseDeadOps(p);
  const size_t dropped = valuesBefore - p.values.size();
  if (stats) {
    stats->removedOps += int64_t(removed);
    stats->removedValues += int64_t(dropped);
  }
  return removed > 0 || dropped > 0;
}

} // namespace tessel::passes
