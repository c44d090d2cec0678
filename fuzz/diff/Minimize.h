//===- fuzz/diff/Minimize.h - Shrinking a failing case ----------------------------===//
//
// Greedy delta debugging over the parts of a case, repeated until no single step
// keeps the failure (the same oracle failing) or the time budget is spent:
//
//   * drop one pass of the pipeline;
//   * drop one output;
//   * remove all dead code at once (a failure may need dead ops, as a pass that
//     mishandles them does);
//   * cut one op out: its results become new inputs holding the values the op computed
//     at the case's inputs (so everything downstream sees the same numbers);
//   * bypass one op: its result is replaced by an operand of the same type;
//   * drop an input no op or output reads.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "fuzz/diff/DiffFuzz.h"

namespace tessel::difffuzz {

struct MinimizeStats {
  int attempts = 0; ///< candidate cases checked
  int accepted = 0; ///< steps that kept the failure
};

/// The smallest case found that still fails `oracle` (`c` itself if nothing smaller
/// does), within about `seconds`.
Case minimize(const Case &c, const std::string &oracle, Checker &checker, double seconds,
              MinimizeStats *stats = nullptr);

} // namespace tessel::difffuzz
