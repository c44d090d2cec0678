//===- passes/RunPipeline.h - What runs before prepare, for the CLI and Python -===//
//
// `tessel run`, `tessel prepare` and `tessel.prepare` make a program ready for the
// engine the same way, here: einsums lowered by the order pass (strategy `order`), then
// the clean-up pipeline (default kRunPipeline), as XLA's compiler simplifies every
// program it is given. One path, so the CLI and Python prepare the same plan.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "ir/Program.h"
#include "passes/PassManager.h"

namespace tessel::passes {

/// The default clean-up before prepare: the algebraic folds the grad transform invites
/// (x·1, x + 0, …: passes/Fold.h), then CSE and DCE. Exact except for the sign of a zero
/// in x + 0 and 0 − x.
inline constexpr const char *kRunPipeline = "fold,cse,dce";

/// What prepareForRun did: the order pass's note ("" when there was no einsum) and the
/// pipeline's line ("passes fold,cse,dce: 12 -> 9 ops, 0.021 ms"; "" for an empty one).
struct RunPreparation {
  std::string note, passesLine;
};

/// Lowers `p`'s einsums (in every function of a module) (lowerEinsumsForRuntime, `order`: auto, chain, pairwise, greedy,
/// optimal or none) and runs `pipeline` (a pass pipeline, "" = none) on it. Throws
/// tessel::Error for an unknown pass or strategy, or an einsum with order "none"; `flag`
/// names the pipeline's origin in errors ("--passes", "passes"); `instrumentation` is
/// the pass manager's (the --print-ir-*, --dump-dir, ... flags of `tessel run`).
RunPreparation prepareForRun(ir::Program &p, const std::string &order, const std::string &pipeline,
                             const char *flag = "--passes", const PassManagerOptions &instrumentation = {});

} // namespace tessel::passes
