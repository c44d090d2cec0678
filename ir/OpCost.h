//===- ir/OpCost.h - Flops and bytes of one op (the cost table) ----------------===//
//
// One cost rule per op of ops.def, in a table in its order (checked at compile time),
// computed from the op's operand and result types and its attributes, as XLA's
// HloCostAnalysis does. Used by reports (`tessel cost`'s per-kind totals).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Program.h"

namespace tessel::ir {

/// What one op computes and touches.
struct OpCost {
  /// Floating-point operations, counting a multiply-add as 2 and a transcendental
  /// function (exp, log, sqrt, sin, cos) as 1:
  ///   elementwise ops  one per result element;
  ///   reduce_sum/max   one per operand element;
  ///   dot_general      2·B·M·N·K (B batch, M and N free, K contracted extents);
  ///   einsum           opt_einsum's naive count (no contraction path): the product
  ///                    of all label extents times (operands − 1, at least 1), plus
  ///                    one when a label occurs more than once;
  ///   svd              the Golub–Kahan–Reinsch or R-SVD count for Σ, U₁ and V,
  ///                    whichever is smaller: min(14·m·k² + 8·k³, 6·m·k² + 20·k³),
  ///                    m = max(rows, cols), k = min (Golub & Van Loan, Matrix
  ///                    Computations, 3rd ed., §5.4.5, the table of SVD work);
  ///   shape ops, constant, iota, stop_gradient  0;
  ///   call, scan       0 here: the callee's ops are ops of the callee (`tessel cost`
  ///                    counts them there, once per call and scan iteration).
  double flops = 0;
  /// Bytes read and written: every operand and every result once (f64: 8 bytes per
  /// element), as if nothing were aliased or fused.
  double bytes = 0;
};

/// The cost of `op` of `p` (which must verify). Doubles, so that huge shapes
/// cannot overflow.
OpCost opCost(const Program &p, const Op &op);

} // namespace tessel::ir
