//===- runtime/PlanBuilders.h - Kernel plans from shapes (prepare, internal) ---===//
//
// What the lowering rules (runtime/Lowering.cpp) build their kernel plans with: a
// strided copy's plan and chunks, dot_general's layout as one batched GEMM and that
// GEMM's chunks. Each is a function of shapes and strides only (never of the width).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

#include <llvm/ADT/ArrayRef.h>

#include "ir/Program.h"
#include "runtime/Plan.h"

namespace tessel::rt::prep {

/// Drops extent-1 dims of (shape, stride) and merges neighbours that are contiguous
/// in the source. Always leaves at least one dimension.
void coalesce(std::vector<int64_t> &shape, std::vector<int64_t> &stride);

/// The plan of a copy reading shape[d] elements at stride[d] (in elements of the
/// source, from `base`) into a dense row-major result: extent-1 dims dropped and
/// contiguous neighbours merged; a tile mode where the last output dim reads with a
/// stride and another dim contiguously.
CopyPlan makeCopy(std::vector<int64_t> shape, std::vector<int64_t> stride, int64_t base);

/// ⌈total / per⌉ (1 for an empty total).
int32_t chunksFor(int64_t total, int64_t per);

/// Chunks of a copy (fixed by the shapes, never by the width).
int32_t copyChunks(const CopyPlan &c);

/// True if `order` (a list of dims of a tensor of `shape`) lists every dim of extent
/// > 1 in increasing order, i.e. the tensor read in that order is its memory order.
bool isMemoryOrder(const std::vector<int64_t> &order, llvm::ArrayRef<int64_t> shape);

/// dot_general as one batched GEMM C[b] = op(A[b])·op(B[b]): its batch, free and
/// contracted dims per side, the contracted pairs in the order (as given, by lhs dim,
/// by rhs dim) that leaves the fewest operand elements to transpose, and whether each
/// operand is in GEMM form as it is (lOk, rOk; transposed or not: transA, transB).
struct GemmForm {
  std::vector<int64_t> lb, lf, lc, rb, rf, rc;
  bool lOk = false, rOk = false, transA = false, transB = false;
  int64_t cost = -1; ///< operand elements to transpose
  /// The dim order an lhs (rhs) not in GEMM form is transposed to: batch, free,
  /// contracted (batch, contracted, free).
  std::vector<int64_t> lhsOrder() const;
  std::vector<int64_t> rhsOrder() const;
};
GemmForm gemmForm(const ir::Type &lhs, const ir::Type &rhs, const std::vector<int64_t> &lhsBatch,
                  const std::vector<int64_t> &rhsBatch, const std::vector<int64_t> &lhsContract,
                  const std::vector<int64_t> &rhsContract);

/// The GEMM's sizes, transposes, leading dimensions and batch strides from `f` (after
/// any operand transposed into GEMM form has its trans flag cleared).
void fillGemmShape(GemmPlan &g, const ir::Type &lhs, const ir::Type &rhs, const GemmForm &f);

/// Chunks of a GEMM, fixed by its shape: whole batches per chunk for small products,
/// else tiles of C per batch, at most flops / kGemmChunkFlops of them (and at most
/// kGemmMaxChunks). Full-width row strips come first, halved while a strip keeps at
/// least kGemmMinStripRows rows: each call packs all of op(B) once, and that costs
/// less than the repacking of both operands by a grid (1024³ on one thread: 8 strips
/// 36 ms, 16 tiles of 256² 42 ms, one call 32 ms), so such a product stops at the
/// strips. Only when the strips are fewer than 4 does the tile's longer side keep
/// halving, as long as it is at least 32.
/// Tile sides are multiples of 8 (whole register tiles); the last tile of a row or
/// column takes the remainder.
int32_t chunkGemm(GemmPlan &g);

} // namespace tessel::rt::prep
