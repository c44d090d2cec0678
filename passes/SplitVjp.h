//===- passes/SplitVjp.h - A gradient program as forward and backward functions -===//
//
// `split-vjp` turns a gradient program (grad with keep-outputs, optionally vjp) into a
// module of two functions and an entry that calls them:
//
//   program @<name>_fwd(primal inputs) { ...the forward... return outputs, residuals }
//   program @<name>_bwd(residuals, cotangents) { ...the backward... return gradients }
//   entry program @<name>(inputs) grad(...) {
//     %o..., %r... = call @<name>_fwd(primal inputs)
//     %g... = call @<name>_bwd(residuals, cotangents)
//     return %o..., %g...
//   }
//
// the split of passes::splitGradient (passes/Checkpoint.h) with the remat `policy`: the
// residuals are what the backward reads from the forward (store), or only the inputs of
// the forward and, with save-svd, the svd results, everything else recomputed in the
// backward. The entry keeps the program's signature and output names, so the module
// computes what the program did; with the store policy the ops are the program's own,
// in the same order, and the results are bitwise equal. A staged driver runs the two
// functions at different times (the forward of every step, then the backward of every
// step in reverse) and holds the residuals between them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Program.h"
#include "passes/Checkpoint.h"

namespace tessel::passes {

struct SplitVjpOptions {
  RematPolicy policy = RematPolicy::Store;
};

/// Splits the gradient program `p` as above (its functions, if any, stay in the module).
/// Returns true. Throws tessel::Error for a program that is not a gradient program with
/// its primal outputs (build it with grad{keep-outputs=true}).
bool runSplitVjp(ir::Program &p, const SplitVjpOptions &opts);

} // namespace tessel::passes
