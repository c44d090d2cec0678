//===- runtime/BlockKrylovSvd.h - topkSvd's randomized block Krylov SVD, by step ===//
//
// The k leading singular triplets of a row-major m×n A by randomized block
// Golub–Kahan–Lanczos with full reorthogonalisation and Rayleigh–Ritz (the algorithm
// and its sources: runtime/TruncatedSvd.h), with the stop on the true residuals
// ‖A·vᵢ − σᵢ·uᵢ‖ ≤ tol·σ₁ and a probe for triplets the basis missed. topkSvd
// (runtime/TruncatedSvd.h) constructs one and calls run(); the tests call the steps one
// by one. Internal to the truncated-SVD kernels.
//
// One iteration, with the basis Qb (m×cc, orthonormal columns) and its newest block of
// w columns:
//   firstBlock      Qb[:, :w] = orth(A·Ω), Ω the config's Gaussian sketch;
//   growGram        Zs[:, new] = Aᵀ·Qb[:, new] and the Gram matrix's new columns Zsᵀ·Zs;
//   nextBlock       Y = A·Zs[:, new], projected twice off Qb;
//   ritzEstimate    the largest residual of the k leading Ritz pairs, from the Gram
//                   matrix's eigenpairs and Y (no product with A);
//   rayleighRitz    the k triplets from the basis and their true residuals;
//   missedTriplet   the probe after a passing Rayleigh–Ritz step;
//   extend          Qb grows by an orthonormal basis of Y (BCGS2; a column of an
//                   invariant subspace replaced by a Gaussian one);
//   fallback        a full gesdd of A (budget spent, basis closed, or a missed triplet).
//
// Internally the tall matrices are column-major (LAPACK's QR wants them so); the
// row-major A is the column-major Aᵀ (n×m, leading dimension n). A is either that
// array or a LinearOperator: only the products, the true residuals' product and the
// fallback read it. Every array lives in
// the caller's workspace at the offsets of topkSvdWorkspace.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <limits>

#include <lapacke.h>

#include "runtime/TruncatedSvd.h"

namespace tessel::rt::svd_detail {

class BlockKrylovSvd {
public:
  /// `work` has c.workElems doubles; `aMaxAbs` = max|A_ij| (negative: computed here),
  /// which sets the working scale α (svdWorkingScale).
  BlockKrylovSvd(const TopkSvdConfig &c, const double *A, double *work, double aMaxAbs);
  /// The same on an implicit A, known by its products (LinearOperator).
  BlockKrylovSvd(const TopkSvdConfig &c, const LinearOperator &op, double *work);

  /// Every step to the stop: U row-major m×k, s[k] descending, Vt row-major k×n (as
  /// topkSvd). `scaleFloor` raises σ₁ in the tolerance (a deflated matrix's caller
  /// passes the original's scale).
  TopkSvdOutcome run(double *U, double *s, double *Vt, double scaleFloor);

  /// extend()'s result when no basis could be found (4 attempts with Gaussian columns).
  static constexpr lapack_int kNoBasis = std::numeric_limits<lapack_int>::min();

  // The steps (see the top of the file), public for the tests.

  /// Qb[:, :w] = orth(A·Ω[:, :w]); 0, kNoBasis or a LAPACK info.
  lapack_int firstBlock(int64_t w);
  /// Zs[:, c0 : c0 + w] = Aᵀ·Qb[:, c0 : c0 + w] and Gm[:c0 + w, c0 : c0 + w] = Zsᵀ·Zs[:, c0 : c0 + w].
  void growGram(int64_t c0, int64_t w);
  /// Y[:, :w] = A·Zs[:, cc − w : cc] ⟂ Qb[:, :cc] (y0 its column norms before projecting).
  void nextBlock(int64_t cc, int64_t w);
  /// Y[:, :w] −= Qb[:, :cc]·(Qb[:, :cc]ᵀ·Y[:, :w]), `passes` times (block Gram–Schmidt).
  void project(int64_t cc, int64_t w, int passes);
  /// Qb[:, cc : cc + w] = an orthonormal basis of Y[:, :w] ⟂ Qb[:, :cc]; 0, kNoBasis or
  /// a LAPACK info.
  lapack_int extend(int64_t cc, int64_t w);
  /// The largest estimated residual of the k leading Ritz pairs of the basis Qb[:, :cc]
  /// whose newest block has w columns (needs cc >= k); `scale` = max(σ₁ estimate,
  /// scaleFloor), both of α·A (run() passes the floor times α). −1 after a LAPACK
  /// failure (in outcome().lapackInfo).
  double ritzEstimate(int64_t cc, int64_t w, double scaleFloor, double &scale);
  /// Rayleigh–Ritz on Qb[:, :cc]: sv, Uk, Vk hold the k leading triplets of α·A; returns
  /// their largest true residual, or −1 after a LAPACK failure.
  double rayleighRitz(int64_t cc);
  /// The probe after a passing rayleighRitz: true when σ_max(A − U·S·Vᵀ) exceeds s_k by
  /// more than tol·s1 (a triplet the basis missed). Sets outcome().probe.
  bool missedTriplet(double s1);
  /// The k leading triplets by a full gesdd of A into U, s, Vt (row-major).
  TopkSvdOutcome fallback(double *U, double *s, double *Vt);

  // What the steps leave, column-major.
  const double *basis() const { return Qb_; }         ///< Qb, m×bmax (leading dimension m)
  const double *block() const { return Y_; }          ///< Y, m×b0
  const double *krylov() const { return Zs_; }        ///< Zs = α·Aᵀ·Qb, n×bmax
  const double *gram() const { return Gm_; }          ///< Zsᵀ·Zs, bmax×bmax (upper triangle)
  const double *leftVectors() const { return Uk_; }   ///< Uk, m×k (of the last Rayleigh–Ritz)
  const double *rightVectors() const { return Vk_; }  ///< Vk, n×k
  const double *values() const { return sv_; }        ///< sv, σ of α·A, descending
  double alpha() const { return alpha_; }             ///< the working scale
  const TopkSvdOutcome &outcome() const { return out_; }

private:
  bool qr(double *Q, int64_t w, const double *ref, double rel, lapack_int &info);
  void product(bool transposed, const double *X, int64_t w, double *out);
  void mulA(const double *X, int64_t w, double *Yc);
  void mulAt(const double *Q, int64_t w, double *Zc);
  void projectOut(const double *B, int64_t len, double *X, int64_t w);
  void scaleRows(double *X, int64_t rows, int64_t pw) const;

  void carve(double *work);

  const TopkSvdConfig &c_;
  const double *A_;                    ///< the dense A, or null
  const LinearOperator *op_ = nullptr; ///< the implicit A, or null
  int64_t m_, n_, k_, cm_, p_, K_;
  uint64_t seed_;
  double alpha_ = 1;
  TopkSvdOutcome out_;
  double *Qb_, *Zs_, *P_, *Vs_, *Vk_, *Uk_, *W_, *Y_, *H_, *Gm_, *Ev_, *Rb_, *Zr_, *VTs_, *G_;
  double *lam_, *sv_, *tau_, *y0_, *bad_, *Xr_, *Yr_, *lw_, *qw_, *ew_;
  lapack_int *iwork_, *eiw_;
};

} // namespace tessel::rt::svd_detail
