//===- passes/SvdTransposeFold.h - svd of a transposed tensor -> permuted factors ---===//
//
// TRG builds each SVD operand as reshape(transpose(T, perm), [m, n]). When the row
// axes perm[0:p] of the transpose are, as a set, the leading (or the trailing) axes of
// T, the operand is a contiguous reshape X2 of T (or its transpose) with rows and
// columns permuted: M = P_r·X2·P_c or M = P_r·X2ᵀ·P_c. Singular values do not see
// permutations, and the singular vectors of M are those of X2 with their rows
// permuted:
//
//   X2 = U2·diag(s)·Vt2  =>  M = (P_r·U2)·diag(s)·(Vt2·P_c)      (or, for X2ᵀ, with
//                                                                 U2 and Vt2ᵀ swapped)
//
// So the pass computes the svd (or svd_topk) of X2, a reshape that costs nothing, and
// moves the permutation to the factors: a transpose of U2's m×k and Vt2's k×n elements
// in place of the operand's m·n. It rewrites only when that moves fewer elements,
// (m + n)·k < m·n, which holds for svd_topk with k well below min(m, n) (TRG: Mb of a
// χ → χ step is a reshape of the axis reversal of T, 1024×1024 at χ = 32) and never for
// a full svd (k = min(m, n)). The results are the same triplets up to rounding and the signs of
// the singular vectors (the kernel sees the rows and columns in another order).
//
// The transpose and reshape must have no other use (else the copy stays and the pass
// only adds work), neither may be a program output, and all three ops must be forward
// ops or all remat ops. Run it after truncate-svd (which must see the svd's slices) and
// before grad: the gradient then flows to T through the free reshape.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

#include "ir/Program.h"

namespace tessel::passes {

struct SvdTransposeFoldOptions {};

struct SvdTransposeFoldStats {
  int64_t folded = 0;        ///< svd / svd_topk ops that now read a reshape of the tensor
  int64_t elementsSaved = 0; ///< Σ (m·n − (m + n)·k): elements no longer copied per run
};

/// Runs the rewrite on `p`. Returns true if an svd or svd_topk was rewritten.
bool runSvdTransposeFold(ir::Program &p, const SvdTransposeFoldOptions &opts,
                         SvdTransposeFoldStats *stats = nullptr);

} // namespace tessel::passes
