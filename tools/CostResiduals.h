//===- tools/CostResiduals.h - `tessel cost --residuals` -------------------------===//
//
// The residual report of `tessel cost FILE --residuals`: for each checkpoint policy
// (store, save-svd, recompute, or those given with --policy) the program is run
// through the pipeline
//
//     grad{wrt=..,vjp=..},checkpoint{policy=P,regions=R},order{strategy=S}
//
// (the same passes `tessel opt` runs; the pipeline is printed so the result can be
// reproduced), and the report lists every saved residual (name, type, bytes, origin
// op) of the checkpointed program, the number of recomputed ops, and the peak live
// bytes of the prepared plan (runtime/Runtime.h peakLiveBytes(prepare(p))).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "ir/Program.h"
#include "passes/Order.h"

namespace tessel::tools {

struct ResidualArgs {
  bool enabled = false;              ///< --residuals
  std::vector<std::string> policies; ///< --policy (empty = all three)
  std::vector<std::string> wrt;      ///< --wrt (empty = all inputs)
  bool vjp = false;                  ///< --vjp
  std::string regions = "auto";      ///< --regions
};

/// Adds --residuals, --policy, --wrt, --vjp and --regions to `cmd` (`a` must outlive
/// parsing).
void addResidualFlags(CLI::App &cmd, ResidualArgs &a);

/// The report (text, or one JSON document). Throws tessel::Error for a bad policy or
/// regions value, and whatever grad/prepare throw (e.g. a non-scalar output without
/// --vjp), naming the pass.
std::string residualsReport(const ir::Program &p, const ResidualArgs &a,
                            passes::OrderStrategy strategy, bool json);

} // namespace tessel::tools
