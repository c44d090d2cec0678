//===- runtime/EinsumOperator.h - A reshaped einsum as an implicit matrix --------===//
//
// The matrix A = reshape(einsum(S₁, …, Sₙ)) whose output labels split into row labels
// and column labels (each row-major), known only by its products: A·X contracts the
// block X (its labels the column labels and a batch label for the p columns) with the
// operands one at a time, Aᵀ·Y the block Y with them in another order, each step one
// GEMM on operands permuted to GEMM form. So the coarse tensor of a TRG step,
// T'[r,u,l,d] = Σ S1[w,a,r]·S2[a,b,u]·S3[b,g,l]·S4[g,w,d] (docs/trg.md §2.6), reshaped
// to the next step's Ma' (rows l,u; columns r,d), is multiplied by p vectors in
// O(χ⁴·p) flops and O(χ³·p) memory instead of being formed in O(χ⁶) flops and O(χ⁴)
// memory (Morita, Igarashi, Zhao, Kawashima, PRE 97, 033310 (2018), for the forward
// TRG step). topkSvd (runtime/TruncatedSvd.h) takes it as a LinearOperator.
//
// Labels are single characters; '#' is the batch label and may not be an operand's.
// Every label is an axis of exactly one operand and the output, or of exactly two
// operands and not the output (a contraction); traces, hyperedges and labels summed
// inside one operand are refused (tessel::Error), as are orders that are not a
// permutation of the operands. The operands' permuted copies are made once, at
// construction (their total size); the products allocate nothing after their first
// call with a given p.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/TruncatedSvd.h"

namespace tessel::rt {

/// One operand: row-major data (not copied: it must outlive the operator), one label
/// per axis.
struct EinsumOperand {
  const double *data = nullptr;
  std::string labels;
  std::vector<int64_t> shape;
};

class EinsumOperator final : public LinearOperator {
public:
  /// A[rowLabels, colLabels] = einsum(operands); `applyOrder` and `transposedOrder`
  /// are the orders (operand indices, each a permutation) in which A·X and Aᵀ·Y
  /// contract the operands into the block; empty: the cheapest by flops
  /// (cheapestOrder).
  EinsumOperator(std::vector<EinsumOperand> operands, std::string rowLabels,
                 std::string colLabels, std::vector<int> applyOrder = {},
                 std::vector<int> transposedOrder = {});

  void apply(const double *X, int64_t p, double *Y) const override;
  void applyTransposed(const double *Y, int64_t p, double *Z) const override;
  /// Π ‖S_i‖_F over the operands: a bound of max|A_ij| (each entry is a sum of
  /// products, bounded by Cauchy–Schwarz along every contracted label).
  double maxAbsBound() const override { return normBound_; }

  /// Multiply-adds of one product with p columns in `order`, starting from the block
  /// with labels `from` (+ the batch label).
  int64_t flops(const std::vector<int> &order, const std::string &from, int64_t p) const;
  /// The order of least flops (ties: the first in lexicographic order) for a block
  /// labelled `from` (the column labels for A·X, the row labels for Aᵀ·Y).
  std::vector<int> cheapestOrder(const std::string &from, int64_t p) const;
  const std::vector<int> &applyOrder() const { return applySeq_.order; }
  const std::vector<int> &transposedOrder() const { return transSeq_.order; }

private:
  /// One pairwise contraction of a product, one GEMM: the running block (labels `in`),
  /// where its summed labels come first, on the right of the operand permuted to
  /// (free, summed) (`right`: out = operand's free + block's free); otherwise permuted
  /// to (free, summed) if it is not so already, on the left of the operand permuted to
  /// (summed, free) (out = block's free + operand's free).
  struct Step {
    int operand = 0;
    bool right = false;
    std::string in, blockForm, out;
    int64_t summed = 1, freeOperand = 1;
    std::vector<double> operandForm; ///< the operand in its GEMM form, row-major
  };
  struct Sequence {
    std::vector<int> order;
    std::vector<Step> steps;
    std::string start, end; ///< the block's labels before and after (each + '#')
  };
  Sequence plan(const std::vector<int> &order, const std::string &from, const std::string &to) const;
  void run(const Sequence &s, const double *in, int64_t p, double *out) const;
  int64_t extent(const std::string &labels, int64_t p) const;

  std::vector<EinsumOperand> operands_;
  std::string rows_, cols_;
  std::vector<int64_t> dim_; ///< extent per label (indexed by unsigned char)
  double normBound_ = 0;
  Sequence applySeq_, transSeq_;
  mutable std::vector<double> bufA_, bufB_; ///< the running block and its permuted copy
};

/// dst[permuted] = src: `src` row-major with labels `from` (extents from `extentOf`),
/// written row-major in the label order `to` (a permutation of `from`).
void permuteLabeled(const double *src, const std::string &from, const std::string &to,
                    const std::vector<int64_t> &extentOf, double *dst);

} // namespace tessel::rt
