//===- passes/Cse.h - Common subexpression elimination --------------------------===//
//
// Two ops are the same expression when they have the same kind, the same operands
// (after earlier merges), and bitwise-equal attributes: f64 attributes and tensor
// constants compare by their bit patterns (so 0.0 and -0.0 differ, and two NaN
// constants with the same payload are equal), tensor constants also by type. Every op
// of the table is pure and deterministic (svd included: same LAPACK call, same bits),
// so any such pair may be merged; the later op is removed and its uses read the
// earlier op's results.
//
// Rematerialisation contract (with the checkpoint pass, passes/Checkpoint.h): a remat
// op (Op::remat) is a recomputation that must stay separate from the forward,
// otherwise the forward value would stay alive until the backward and the recompute
// policy would save nothing. The flag is part of what makes two ops the same
// expression, so CSE never merges a remat op with one that is not (in either
// direction); two remat ops may merge with each other. Passes that create ops in place
// of an op (e.g. the order pass lowering an einsum) take its flag with
// ir::Builder::setOrigin.
//
// Output names are kept (passes/Rewrite.h): a duplicate whose result is an output is
// merged only if the surviving value can take over the output's name (it is then
// renamed); two ops that both define outputs are left alone.
//
// The op order is unchanged; values are compacted afterwards.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>

#include "ir/Program.h"

namespace tessel::passes {

struct CseOptions {};

struct CseStats {
  int64_t mergedOps = 0; ///< ops removed because an equal earlier op exists
};

/// Runs CSE on `p`. Returns true if any op was merged.
bool runCse(ir::Program &p, const CseOptions &opts, CseStats *stats = nullptr);

} // namespace tessel::passes
