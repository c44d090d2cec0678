//===- passes/Fold.h - Algebraic simplifications ---------------------------------===//
//
// Local rewrites, applied in one forward sweep (so chains fold completely):
//
//   transpose(x, identity)                 -> x
//   transpose(transpose(x, p), q)          -> transpose(x, r),  r[i] = p[q[i]]  (-> x if r = id)
//   reshape(x) to x's own shape            -> x
//   reshape(reshape(x))                    -> reshape(x)
//   broadcast_in_dim(x) to x's own shape   -> x
//   reduce_sum / reduce_max over no axes   -> x
//   slice covering all of x, pad by zeros  -> x
//   mul(x, one), mul(one, x), div(x, one)  -> x
//   add(x, zero), add(zero, x), sub(x, zero) -> x
//   sub(zero, x)                           -> neg(x)
//   neg(neg(x))                            -> x
//   broadcast_in_dim(c) of a constant c with one element, result with at most
//   FoldOptions::maxBroadcastConstant elements -> a constant
//
// "one"/"zero" is a constant whose every element is 1.0 / ±0.0, or a broadcast of
// one. The rewrites are exact in IEEE arithmetic except for the sign of a zero:
// x + (+0.0) turns -0.0 into +0.0 and 0 - x gives +0.0 for x = +0.0 where neg gives
// -0.0; the folded program may differ there (only there). NaN and inf propagate as
// before (x * 1 and x / 1 are x for every x).
//
// Folds that look through the op defining an operand (transpose∘transpose,
// reshape∘reshape, neg∘neg) apply only when both ops are remat ops (Op::remat,
// passes/Cse.h) or neither is, so a recomputed op never ends up reading a forward
// value the checkpoint policy did not save.
//
// A value that is an output is only replaced when the replacement can take over the
// output's name (passes/Rewrite.h). Ops left without uses by a rewrite are erased
// (other dead ops are DCE's job); values are compacted. Locations of rewritten ops
// are kept.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

#include "ir/Program.h"

namespace tessel::passes {

struct FoldOptions {
  /// Largest constant (elements) a broadcast of a scalar constant is folded into.
  int64_t maxBroadcastConstant = 256;
};

struct FoldStats {
  int64_t folded = 0; ///< rewrites applied (replacements and in-place rewrites)
  int64_t erased = 0; ///< ops erased (replaced ones and those left without uses)
};

/// Runs the folds on `p`. Returns true if anything was rewritten.
bool runFold(ir::Program &p, const FoldOptions &opts, FoldStats *stats = nullptr);

} // namespace tessel::passes
