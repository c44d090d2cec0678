//===- passes/SvdTopkGuards.h - guards of svd_topk_complement from the forward ---===//
//
// The reverse rule of svd_topk{k} couples the differentiated triplets to the discarded
// subspace with svd_topk_complement, which first computes the g singular triplets of
// A just below the cut (its guards, g = ir::svdTopkComplementGuards(m, n, k)) by a
// top-g SVD of A − U·diag(s)·Vt: a second Krylov iteration over A in the backward.
// In a gradient program this pass lets the forward compute them instead: svd_topk{k}
// becomes svd_topk{k + g, guards = g}, its other uses read slices of the leading k
// triplets, and the complement reads all k + g with guards = g. Converging g more triplets in the
// forward costs less than the complement's own top-g SVD (χ = 32 TRG step: 31 -> 38 ms
// in the forward against 22-36 ms per complement), and the guards are the same
// triplets up to rounding and signs, so the gradient agrees to the solver's tolerance.
//
// Run it after grad and before checkpoint: it leaves a program alone when a checkpoint
// policy has cloned an svd_topk (the clone would stay narrow, with other triplets and
// signs than the widened forward's). Value programs have no complement and do not
// change. A gradient program's primal outputs then come from svd_topk{k + g}: equal to
// the value program's to rounding (lnZ/N to ~1e-15), not bitwise.
//
// Such a program can be differentiated again by jvp (forward over reverse): the rules of
// svd_topk and svd_topk_complement hold the guards constant (they enter the solution only
// through the broadening of the triplets nearest the cut), so every complement solve of
// the second-order program deflates with the forward's guards (passes/JvpLinalg.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

#include "ir/Program.h"

namespace tessel::passes {

struct SvdTopkGuardsOptions {};

struct SvdTopkGuardsStats {
  int64_t widened = 0; ///< svd_topk ops that now compute their complements' guards
  int64_t guards = 0;  ///< Σ g over them
};

/// Runs the rewrite on `p`. Returns true if an svd_topk was widened.
bool runSvdTopkGuards(ir::Program &p, const SvdTopkGuardsOptions &opts,
                      SvdTopkGuardsStats *stats = nullptr);

} // namespace tessel::passes
