//===- passes/Remat.h - What the checkpoint pass and the split share (internal) -===//
//
// Internal to passes/Checkpoint.cpp (the remat policies, the checkpoint pass) and
// passes/SplitGradient.cpp (splitVjp, splitGradient): the rematerialisation of a
// gradient program under a policy, and the residuals its backward reads.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/Program.h"
#include "passes/Checkpoint.h"

namespace tessel::passes::remat_detail {

struct RematConfig {
  RematPolicy policy = RematPolicy::Recompute;
  int64_t regions = 1;           ///< 0 = auto
  size_t numPrimal = 0;          ///< leading outputs that are primal
  bool keepPrimalOutputs = true; ///< primal outputs are saveable
  /// Gradient outputs that name an unsaved forward value get a clone (split mode);
  /// otherwise they keep naming the original (it is an output, live anyway).
  bool materializeOutputs = false;
};

struct RematResult {
  ir::Program prog;
  std::vector<char> isForward; ///< per op of prog: an original forward op
  int64_t clones = 0;
  int64_t regions = 0;
  int64_t forwardOps = 0;
  int64_t backwardOps = 0;
};

/// The gradient program `g` (its first cfg.numPrimal outputs primal) rewritten under
/// cfg.policy: the forward values the policy does not save are recomputed by clones of
/// their forward ops where the backward reads them (in cfg.regions regions, 0 = auto).
RematResult rematerialize(const ir::Program &g, const RematConfig &cfg);

/// Values of `h` (inputs and forward results) read by backward ops or, when
/// `gradOutputs`, named by gradient outputs; inputs first (input order), then op
/// results in definition order. Inputs at index >= numPrimalInputs are excluded.
std::vector<ir::ValueId> residualValues(const ir::Program &h, const std::vector<char> &isForward,
                                        size_t numPrimal, size_t numPrimalInputs, bool gradOutputs);

/// The op that defines `v` (ir::describeOp), or "input %v".
std::string describeOrigin(const ir::Program &p, ir::ValueId v);

} // namespace tessel::passes::remat_detail
