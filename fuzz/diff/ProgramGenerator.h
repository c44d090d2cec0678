//===- fuzz/diff/ProgramGenerator.h - Random well-typed programs -----------------===//
//
// The program half of the differential fuzzer (fuzz/README.md): from a seed, a random
// straight-line program over the whole op table, built with ir::Builder (so every op
// is checked by its shape rule as it is made), and one input tensor per input.
//
// Every op kind of ir/ops.def has a generator case in a table kept in ops.def order,
// checked at compile time like the project's other per-op tables: a new op does not
// compile until the fuzzer can generate it.
//
// The programs are meant to be compared across evaluators whose arithmetic differs in
// rounding only (the engine's BLAS products and lowered einsums against the reference
// evaluator's loops), so the generator keeps every output a continuous, well
// conditioned function of the data the evaluators may round differently:
//
//   * exact values: a value computed by elementwise ops, reductions, copies and
//     constants only is bitwise the same in every evaluator and after every pass
//     (the runtime documents its reduction order as the reference's). The ops that
//     are discontinuous or have a kink (abs, sign, compare, maximum, reduce_max, and
//     select's predicate) read exact values only, so a rounding difference never
//     flips a branch. Products (dot_general, einsum) and svd results are not exact;
//   * magnitudes: each value carries an upper bound of |value| (and a positive lower
//     bound where it has one); log, sqrt and div get operands bounded away from 0,
//     exp gets operands of at most a few units, and a value whose bound grows past
//     1e3 is scaled back;
//   * svd: singular vectors are defined up to sign and rotations inside degenerate
//     subspaces, so U and Vt are only used in basis-independent forms: s itself and
//     U·diag(s·h(s))·Vt with h even (1, cos s, 1 + s², exp(−s²)), a smooth function
//     of the matrix. In programs meant to be differentiated, the svd's operand also
//     gets a fresh continuous random matrix added (distinct, nonzero singular values:
//     the reverse rule's reciprocal gaps stay well conditioned), and truncated
//     reconstructions U[:, :r]·diag(s[:r])·Vt[:r, :] appear as well. svd_topk_complement
//     (not differentiated: it has no VJP rule) gets cotangents that turn with the kept
//     triplets, Ū = G·V_r and V̄t = U_rᵀ·G', and is read out as X·Vt_r + U_r·Yt;
//   * non-finite values: in a few programs some inputs hold NaN or ±inf, and no product
//     (mul, div, dot_general, einsum) mixes a value that may be non-finite with an inexact
//     one: an inexact value that is 0 in exact arithmetic comes out as rounding of either
//     sign, and times inf that picks +inf, −inf or NaN;
//   * ties on purpose: "quantized" programs draw inputs from {-1, -0.5, 0, 0.5, 1},
//     so maximum and reduce_max meet equal values, compare EQ holds somewhere, abs
//     and sign meet zeros; constants include all-ones and all-zeros tensors (the
//     fold pass's identities) and size-1 and zero extents appear.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/Program.h"

namespace tessel::difffuzz {

struct GeneratorOptions {
  /// Number of ops to choose (each may bring a few helper ops: operands made
  /// positive, broadcast partners, the svd's reconstruction).
  int size = 12;
};

struct GeneratedProgram {
  ir::Program program;
  std::vector<ir::Tensor> inputs; ///< one per program input, in order
  /// Meant to be differentiated: svd operands are generic (see the top of the file).
  /// Pipelines contain grad only for such programs.
  bool differentiable = false;
  /// Some inputs take few distinct values (ties), so finite differences across the
  /// program's kinks are meaningless when it has any (see hasKinks).
  bool quantized = false;
  /// Some inputs hold a NaN or an infinity (and reduce_max may reduce over nothing,
  /// giving -inf): the evaluators must agree on where non-finite values go and on
  /// the errors they raise (svd of a non-finite matrix).
  bool nonFinite = false;
};

/// The program and inputs of `seed`. Deterministic: the same seed and options give
/// the same program, bit for bit. Throws tessel::Error only for a bug (an op the
/// generator built that its shape rule rejects).
GeneratedProgram generateProgram(uint64_t seed, const GeneratorOptions &opts = {});

/// True when `p` has an op whose value or derivative jumps somewhere: abs, sign,
/// compare, select, maximum or reduce_max.
bool hasKinks(const ir::Program &p);

} // namespace tessel::difffuzz
