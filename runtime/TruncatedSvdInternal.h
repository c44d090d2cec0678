//===- runtime/TruncatedSvdInternal.h - What the truncated-SVD kernels share ---===//
//
// Internal to runtime/TruncatedSvd.cpp (topkSvd), runtime/BlockKrylovSvd.cpp (its
// steps) and runtime/SvdComplement.cpp (svdComplement): the machine epsilon, the
// Gaussian sketch, the kernels' call counters (truncatedSvdStats),
// the row-major GEMM wrapper, the full SVD both fall back to, gesdd's flop count (their
// iteration budgets) and the power-of-two working scale.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <vector>

namespace tessel::rt::svd_detail {

inline constexpr double kEps = std::numeric_limits<double>::epsilon();

extern std::atomic<int64_t> gTopkCalls, gTopkIterations, gTopkFallbacks;
extern std::atomic<int64_t> gComplementCalls, gComplementIterations, gComplementFallbacks;
extern std::atomic<int64_t> gComplementBroadened;

/// Columns c0..c1 of a column-major n×· Gaussian matrix (Box–Muller over splitmix64),
/// each column from its own stream so that a grown sketch keeps its first columns.
void gaussianColumns(double *V, int64_t n, int64_t c0, int64_t c1, uint64_t seed);

/// The seed of topkSvd's Gaussian sketch: a function of the problem's sizes only.
uint64_t topkSeed(int64_t m, int64_t n, int64_t k);

/// Flops of a gesdd with vectors on an m×n matrix (the cost model of ir/OpCost.cpp).
double gesddFlops(int64_t m, int64_t n);

/// Full thin SVD of the row-major m×n A (copied) into heap arrays: U m×K, s K, Vt K×n,
/// row-major (gesdd of the column-major Aᵀ, as the svd kernel).
struct FullSvd {
  std::vector<double> U, s, Vt;
  int info = 0;
};
FullSvd fullSvd(const double *A, int64_t m, int64_t n);

/// Row-major C = alpha·op(A)·op(B) + beta·C.
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A,
          int64_t lda, const double *B, int64_t ldb, double beta, double *C, int64_t ldc);

/// 1 where x is within [lo, hi], zero or not finite; otherwise the power of two 2⁻ᵉ that
/// brings x near 1, its exponent clamped to ±1000 so that it is itself a normal double
/// (a subnormal x, down to 2⁻¹⁰⁷⁴, still lands within 2⁻⁷⁴ of 1).
double powerOfTwoScale(double x, double lo, double hi);

} // namespace tessel::rt::svd_detail

namespace tessel::rt {
// The kernel files use these by their short names (this header is theirs alone).
using svd_detail::FullSvd;
using svd_detail::fullSvd;
using svd_detail::gComplementBroadened;
using svd_detail::gComplementCalls;
using svd_detail::gComplementFallbacks;
using svd_detail::gComplementIterations;
using svd_detail::gaussianColumns;
using svd_detail::gemm;
using svd_detail::gesddFlops;
using svd_detail::gTopkCalls;
using svd_detail::gTopkFallbacks;
using svd_detail::gTopkIterations;
using svd_detail::kEps;
using svd_detail::powerOfTwoScale;
using svd_detail::topkSeed;
} // namespace tessel::rt
