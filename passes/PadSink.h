//===- passes/PadSink.h - Sink zero pads, hoist slices ----------------------------===//
//
// The VJP of a slice is a pad by zeros (passes/VjpRules.cpp), so every truncation in
// a program (TRG keeps χ of D² singular vectors) turns into a cotangent that is mostly
// zeros, and the ops that consume it (the 256×256 products UᵀŪ and VᵀV̄ of the svd
// reverse rule, docs/trg.md §5) spend most of their time multiplying zeros. This pass moves
// each zero pad past its consumers so that they compute only the unpadded block, the
// way XLA's algebraic simplifier and JAX's symbolic zeros avoid the same work.
//
// Phase 1, pad sinking (one forward sweep; P = pad(y, low, high), zeros outside y):
//
//   transpose(P)                       -> pad(transpose(y))       (low/high permuted)
//   neg|sqrt|sin|abs|sign (P)          -> pad(f(y))                (f(0) = 0)
//   mul(P, x), mul(x, P)               -> pad(mul(y, slice(x)))    (slice = P's interior)
//   add|sub|maximum(P1, P2), equal low/high -> pad(f(y1, y2))
//   broadcast_in_dim(P)                -> pad(broadcast_in_dim(y)) (padded dims not expanded)
//   reduce_sum(P)                      -> pad(reduce_sum(y))       (padding on kept dims)
//   slice(P)                           -> pad(slice(y)), y, or a zero broadcast
//   dot_general(P, x), dot_general(x, P):
//       padded free dim       -> the result is padded there;
//       padded batch dim      -> x is sliced on its matching batch dim, the result padded;
//       padded contracting dim -> x is sliced on its matching contracting dim (the zero
//                                 terms of the sum are dropped).
//
// Phase 2, slice hoisting (repeated until nothing changes): an op whose every use is a
// slice with the same bounds, and which is not an output, computes only that block:
//
//   slice(f(a, b, ...))      -> f(slice(a), slice(b), ...)   (elementwise, compare, select)
//   slice(transpose(a))      -> transpose(slice(a))
//   slice(broadcast_in_dim(a)) -> broadcast_in_dim(slice(a))
//
// so that the F matrix of the svd rule (d_ij/(d_ij² + ε²), all elementwise) is computed
// only for the columns the sunk products read.
//
// Exactness: for finite values the rewritten program computes the same numbers, except
// that (a) the sign of a zero may differ (neg(+0) = -0 where the pad gives +0, as in
// Fold.h) and (b) sums from which zero terms were dropped (reduce_sum, contracting dims)
// may group the remaining terms differently (last-bit rounding). A non-finite value in
// an operand multiplied by the padded zeros no longer turns into NaN (inf·0): in the
// padded region of the result, and, for a padded contracting dimension, in the result
// entries whose sums included such a product. Where it meets nonzero data it still does.
//
// Rematerialisation: a rewrite looks through a producer only when both ops are remat
// ops (Op::remat) or neither is (as Fold.h), and the ops it creates take the consumer's
// loc and remat flag (ir::Builder::setOrigin), so a recomputed op never starts reading a
// forward value that was not saved.
//
// A value that is an output is replaced only when the replacement can take over its name
// (passes/Rewrite.h). Dead ops (no output depends on them) are neither rewritten nor
// counted as uses; ops the rewrites leave without uses are erased, other dead code is
// left to dce. A second run finds nothing to do.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

#include "ir/Program.h"

namespace tessel::passes {

struct PadSinkOptions {};

struct PadSinkStats {
  int64_t sunk = 0;    ///< ops rewritten to compute on the interior of a pad
  int64_t hoisted = 0; ///< ops rewritten to compute only the block a slice reads
  int64_t erased = 0;  ///< ops erased (replaced ones and those left without uses)
};

/// Runs both phases on `p`. Returns true if anything was rewritten.
bool runPadSink(ir::Program &p, const PadSinkOptions &opts, PadSinkStats *stats = nullptr);

} // namespace tessel::passes
