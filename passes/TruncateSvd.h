//===- passes/TruncateSvd.h - svd used through its leading triplets -> svd_topk ---===//
//
// A program that slices the first k singular triplets off a full SVD (TRG's
// truncation to the bond dimension χ) pays for all min(m, n) of them. This pass finds
// every svd whose results are used only by slices that stay within the first k
// triplets (U[:, a:b], s[a:b], Vt[a:b, :] with b <= k; no result is a program output)
// and replaces it by svd_topk{k} (ir/ops.def), which computes only those: the slices
// read the same values (up to rounding and the signs of singular vectors), and the
// grad transform then uses svd_topk's rule, which needs no full SVD either.
//
// An svd is rewritten only when k <= max-k-percent % of min(m, n) and min(m, n) >=
// min-size: for small or barely truncated matrices LAPACK's full SVD is as fast.
// Run it before grad: the gradient of an svd already taken stays the full rule.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

#include "ir/Program.h"

namespace tessel::passes {

struct TruncateSvdOptions {
  /// Rewrite only when k <= maxKPercent/100 · min(m, n).
  int64_t maxKPercent = 50;
  /// Rewrite only when min(m, n) >= minSize.
  int64_t minSize = 32;
};

struct TruncateSvdStats {
  int64_t rewritten = 0;     ///< svd ops replaced by svd_topk
  int64_t tripletsKept = 0;  ///< Σ k over the rewritten ops
  int64_t tripletsTotal = 0; ///< Σ min(m, n) over the rewritten ops
};

/// Runs the rewrite on `p`. Returns true if an svd was replaced.
bool runTruncateSvd(ir::Program &p, const TruncateSvdOptions &opts,
                    TruncateSvdStats *stats = nullptr);

} // namespace tessel::passes
