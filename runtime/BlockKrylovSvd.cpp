//===- runtime/BlockKrylovSvd.cpp - topkSvd's block Krylov SVD, by step (see .h) ===//
#include "runtime/BlockKrylovSvd.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <cblas.h>

#include "runtime/Multivector.h"
#include "runtime/TruncatedSvdInternal.h"

namespace tessel::rt::svd_detail {

namespace {

/// Column-major Q (m×b) with orthonormal columns and W = Q·R, by CholeskyQR2 on the
/// column-scaled W (Yamamoto, Nakatsukasa, Yanagisawa, Fukaya, ETNA 44, 306 (2015)):
/// Q = W·D⁻¹ (D = the column norms), then up to twice G = QᵀQ = RᵢᵀRᵢ (dpotrf),
/// Q ← Q·Rᵢ⁻¹, and R = R₂·R₁·D (b×b upper triangular, column-major, when R is given).
/// All BLAS-3, a fraction of Householder QR's time for the tall blocks of topkSvd.
/// One pass leaves QᵀQ − I of order ε·κ(Q)²; when the first Gram matrix is already
/// within ‖G − I‖_F ≤ 0.1 (κ(Q) ≤ 1.11) that is rounding and the second pass is
/// skipped; otherwise the second pass restores orthogonality to rounding as long as
/// the first left κ small, which ‖R₂ − I‖_F ≤ 0.1 checks. Returns false when it did
/// not (W too ill-conditioned even after scaling), a column norm is not a normal
/// positive number, a Cholesky factorisation fails or anything is NaN; the caller then
/// uses Householder QR. `G` has 2·b² + b doubles.
bool cholQr2(const double *W, int64_t m, int64_t b, double *Q, double *R, double *G) {
  const auto M = static_cast<blasint>(m), B = static_cast<blasint>(b);
  double *G1 = G, *G2 = G + b * b, *d = G2 + b * b;
  for (int64_t j = 0; j < b; ++j) {
    d[j] = cblas_dnrm2(M, W + j * m, 1);
    if (!(d[j] >= std::numeric_limits<double>::min()) || !std::isfinite(d[j])) return false;
    const double inv = 1.0 / d[j]; // finite: d >= DBL_MIN
    for (int64_t i = 0; i < m; ++i) Q[j * m + i] = W[j * m + i] * inv;
  }
  // ‖Ri − I‖_F² over the upper triangle (NaN if anything is NaN).
  auto offIdentity2 = [&](const double *Ri) {
    double acc = 0;
    for (int64_t j = 0; j < b; ++j)
      for (int64_t i = 0; i <= j; ++i) {
        const double e = Ri[j * b + i] - (i == j ? 1.0 : 0.0);
        acc += (i == j ? 1.0 : 2.0) * e * e;
      }
    return acc;
  };
  bool twoPasses = false;
  for (double *Ri : {G1, G2}) {
    std::fill(Ri, Ri + b * b, 0.0);
    cblas_dsyrk(CblasColMajor, CblasUpper, CblasTrans, B, M, 1.0, Q, M, 0.0, Ri, B);
    const bool nearIdentity = Ri == G1 && offIdentity2(Ri) <= 0.01;
    if (LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'U', B, Ri, B) != 0) return false;
    cblas_dtrsm(CblasColMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, M, B, 1.0, Ri,
                B, Q, M);
    if (nearIdentity) break;
    twoPasses = Ri == G2;
  }
  if (twoPasses && !(offIdentity2(G2) <= 0.01)) return false;
  if (R != nullptr) {
    for (int64_t j = 0; j < b; ++j)
      for (int64_t i = 0; i < b; ++i) R[j * b + i] = i <= j ? G1[j * b + i] * d[j] : 0.0;
    if (twoPasses)
      cblas_dtrmm(CblasColMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, B, B, 1.0, G2,
                  B, R, B);
  }
  return true;
}

// The products with A and with the basis go through runtime/Multivector.h: blocks of a
// few columns, column-major here, row-major there with the columns padded by zeros to
// pw (a multiple of 4), in Xr, Yr and H.
void toRows(const double *cols, int64_t rows, int64_t w, int64_t pw, double *out) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < w; ++j) out[i * pw + j] = cols[j * rows + i];
    for (int64_t j = w; j < pw; ++j) out[i * pw + j] = 0.0;
  }
}
void toCols(const double *in, int64_t rows, int64_t w, int64_t pw, double *cols) {
  for (int64_t j = 0; j < w; ++j)
    for (int64_t i = 0; i < rows; ++i) cols[j * rows + i] = in[i * pw + j];
}
int64_t padded(int64_t w) { return (w + 3) / 4 * 4; }

/// A column that projecting leaves with at most this fraction of its norm before is
/// replaced (see extend).
constexpr double kDependent = 8 * kEps;

} // namespace

BlockKrylovSvd::BlockKrylovSvd(const TopkSvdConfig &c, const double *A, double *work, double aMaxAbs)
    : c_(c), A_(A), m_(c.m), n_(c.n), k_(c.k), cm_(c.bmax), p_(c.b0), K_(std::min(c.m, c.n)),
      seed_(topkSeed(c.m, c.n, c.k)) {
  carve(work);
  // The scale: the Krylov recurrence and the Gram matrix square σ₁, so for σ₁ outside
  // about [1e-150, 1e150] they would underflow or overflow (below, the stop test's sums
  // of squares read 0 and wrong triplets passed it). Where max|A_ij| is outside
  // [2⁻³⁰⁰, 2³⁰⁰], every product with A is one with α·A, α = 2⁻ᵉ (exact; the block is
  // scaled before the product, so a subnormal A loses no more bits than it has), and
  // the singular values are divided by α at the end; elsewhere α = 1 and nothing changes.
  if (aMaxAbs < 0) {
    aMaxAbs = 0;
    for (int64_t i = 0; i < m_ * n_; ++i) aMaxAbs = std::max(aMaxAbs, std::fabs(A[i]));
  }
  alpha_ = svdWorkingScale(aMaxAbs);
}

BlockKrylovSvd::BlockKrylovSvd(const TopkSvdConfig &c, const LinearOperator &op, double *work)
    : c_(c), A_(nullptr), op_(&op), m_(c.m), n_(c.n), k_(c.k), cm_(c.bmax), p_(c.b0),
      K_(std::min(c.m, c.n)), seed_(topkSeed(c.m, c.n, c.k)) {
  carve(work);
  alpha_ = svdWorkingScale(op.maxAbsBound());
}

void BlockKrylovSvd::carve(double *work) {
  const TopkSvdWorkspace L = topkSvdWorkspace(c_);
  Qb_ = work + L.Qb, Zs_ = work + L.Zs, P_ = work + L.P, Vs_ = work + L.Vs, Vk_ = work + L.Vk;
  Uk_ = work + L.Uk, W_ = work + L.W, Y_ = work + L.Y, H_ = work + L.H;
  Gm_ = work + L.Gm, Ev_ = work + L.Ev, Rb_ = work + L.Rb, Zr_ = work + L.Zr;
  VTs_ = work + L.VTs, G_ = work + L.G, lam_ = work + L.lam, sv_ = work + L.sv;
  tau_ = work + L.tau, y0_ = work + L.y0, bad_ = work + L.bad, Xr_ = work + L.Xr, Yr_ = work + L.Yr;
  lw_ = work + L.lw, qw_ = work + L.qw, ew_ = work + L.ew;
  iwork_ = reinterpret_cast<lapack_int *>(work + L.iwork);
  eiw_ = reinterpret_cast<lapack_int *>(work + L.eiw);
}

void BlockKrylovSvd::scaleRows(double *X, int64_t rows, int64_t pw) const {
  if (alpha_ != 1)
    for (int64_t i = 0; i < rows * pw; ++i) X[i] *= alpha_;
}

TopkSvdOutcome BlockKrylovSvd::fallback(double *Uout, double *sout, double *Vtout) {
  std::vector<double> formed;
  if (A_ == nullptr) {
    formed.resize(static_cast<size_t>(m_ * n_));
    op_->materialize(formed.data());
  }
  FullSvd f = fullSvd(A_ != nullptr ? A_ : formed.data(), m_, n_);
  out_.lapackInfo = f.info;
  out_.fallback = true;
  out_.residual = 0;
  gTopkFallbacks.fetch_add(1, std::memory_order_relaxed);
  if (f.info != 0) return out_;
  for (int64_t i = 0; i < m_; ++i)
    std::memcpy(Uout + i * k_, f.U.data() + i * K_, static_cast<size_t>(k_) * sizeof(double));
  std::memcpy(sout, f.s.data(), static_cast<size_t>(k_) * sizeof(double));
  std::memcpy(Vtout, f.Vt.data(), static_cast<size_t>(k_ * n_) * sizeof(double));
  return out_;
}

// Qb (m×cc column-major) is the row-major cc×m Qbᵀ.
void BlockKrylovSvd::project(int64_t cc, int64_t w, int passes) {
  if (cc == 0 || passes == 0) return;
  const int64_t pw = padded(w);
  toRows(Y_, m_, w, pw, Xr_);
  for (int pass = 0; pass < passes; ++pass) {
    matMultivector(Qb_, cc, m_, Xr_, pw, H_);  // H = Qbᵀ·Y (cc×pw)
    matTMultivector(Qb_, cc, m_, H_, pw, Yr_); // Qb·H (m×pw)
    for (int64_t i = 0; i < m_ * pw; ++i) Xr_[i] -= Yr_[i];
  }
  toCols(Xr_, m_, w, pw, Y_);
}

// Householder QR of Y[:, :w] into Q (m×w, orthonormal); false when a column of R is at
// most `rel` times ref[j] (1 without ref): a column dependent on the others or on Qb at
// that level, flagged in bad[j].
bool BlockKrylovSvd::qr(double *Q, int64_t w, const double *ref, double rel, lapack_int &info) {
  const auto M = static_cast<lapack_int>(m_);
  std::memcpy(Q, Y_, static_cast<size_t>(m_ * w) * sizeof(double));
  info = LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, M, static_cast<lapack_int>(w), Q, M, tau_, qw_,
                             static_cast<lapack_int>(c_.lworkQr));
  if (info != 0) return false;
  bool any = false;
  for (int64_t j = 0; j < w; ++j) {
    bad_[j] = std::fabs(Q[j * m_ + j]) > rel * (ref != nullptr ? ref[j] : 1.0) ? 0 : 1;
    any = any || bad_[j] != 0;
  }
  if (any) return false;
  info = LAPACKE_dorgqr_work(LAPACK_COL_MAJOR, M, static_cast<lapack_int>(w),
                             static_cast<lapack_int>(w), Q, M, tau_, qw_,
                             static_cast<lapack_int>(c_.lworkQr));
  return info == 0;
}

// Y already projected twice; y0 = its column norms before. The QR of a block whose
// columns are nearly dependent among themselves (Krylov blocks are) multiplies what is
// left of Qb in them by that dependence, so the orthonormal block is projected once more
// and factored again (BCGS2: Barlow and Smoktunowicz, Numer. Math. 123, 395 (2013)). A
// column left with at most 8ε of its norm before (an invariant subspace: A of rank below
// the basis) is replaced by a Gaussian one, so the basis grows by directions orthogonal
// to it. The bar is that low because a remainder of a few ε·√n is not always noise: in
// a numerically low-rank A (a tail at the rounding level) it is the correction of the
// leading left vectors, which the first block A·Ω fixes only to ε·‖ω‖/|vᵀω|, and
// without it the Rayleigh–Ritz residuals stay near the tolerance (itself 8ε·√n). A
// noise column kept is harmless: the second projection makes it a direction orthogonal
// to the basis like a Gaussian one.
lapack_int BlockKrylovSvd::extend(int64_t cc, int64_t w) {
  double *Q = Qb_ + cc * m_;
  lapack_int info = 0;
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (qr(Q, w, y0_, kDependent, info)) {
      if (cc == 0) return 0;
      std::memcpy(Y_, Q, static_cast<size_t>(m_ * w) * sizeof(double));
      project(cc, w, 1);
      if (qr(Q, w, nullptr, 0.5, info)) return 0;
    }
    if (info != 0) return info;
    for (int64_t j = 0; j < w; ++j) {
      if (bad_[j] != 0)
        gaussianColumns(Y_, m_, j, j + 1,
                        seed_ ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(++out_.drawn)));
      y0_[j] = cblas_dnrm2(static_cast<blasint>(m_), Y_ + j * m_, 1);
    }
    project(cc, w, 2);
  }
  return kNoBasis;
}

// B = Qbᵀ·A = Zsᵀ with Zs = Aᵀ·Qb (n×cc), from Zs = P·R (CholeskyQR2 of the
// column-scaled Zs) and the gesdd of the cc×cc R = Zr·diag(σ)·VTs, or a gesdd of Zs
// where CholeskyQR2's checks fail. U = Qb·VTsᵀ, V = P·Zr (m×k, n×k), then the true
// residuals ‖A·vᵢ − σᵢ·uᵢ‖ by one product of k columns.
double BlockKrylovSvd::rayleighRitz(int64_t cc) {
  const auto C = static_cast<lapack_int>(cc);
  const auto M = static_cast<blasint>(m_), N = static_cast<blasint>(n_);
  lapack_int info = 0;
  ++out_.rayleighRitz;
  if (cholQr2(Zs_, n_, cc, P_, Rb_, G_)) {
    ++out_.cholQr;
    info = LAPACKE_dgesdd_work(LAPACK_COL_MAJOR, 'S', C, C, Rb_, C, sv_, Zr_, C, VTs_, C, lw_,
                               static_cast<lapack_int>(c_.lworkSvd), iwork_);
    if (info == 0)
      cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, N, static_cast<blasint>(k_), C, 1.0,
                  P_, N, Zr_, C, 0.0, Vk_, N);
  } else {
    std::memcpy(P_, Zs_, static_cast<size_t>(n_ * cc) * sizeof(double));
    info = LAPACKE_dgesdd_work(LAPACK_COL_MAJOR, 'S', N, C, P_, N, sv_, Vs_, N, VTs_, C, lw_,
                               static_cast<lapack_int>(c_.lworkSvd), iwork_);
    if (info == 0) std::memcpy(Vk_, Vs_, static_cast<size_t>(n_ * k_) * sizeof(double));
  }
  if (info != 0) {
    out_.lapackInfo = info;
    return -1;
  }
  cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, M, static_cast<blasint>(k_), C, 1.0, Qb_, M,
              VTs_, C, 0.0, Uk_, M);
  if (A_ != nullptr) {
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, M, static_cast<blasint>(k_), N, alpha_, A_,
                N, Vk_, N, 0.0, W_, M);
  } else {
    // W = α·A·Vk a block of at most p columns at a time (the size of Xr, Yr).
    for (int64_t j = 0; j < k_; j += p_) product(false, Vk_ + j * n_, std::min(p_, k_ - j), W_ + j * m_);
  }
  double res = 0;
  for (int64_t i = 0; i < k_; ++i) {
    double ss = 0;
    const double *w = W_ + i * m_, *u = Uk_ + i * m_;
    for (int64_t r = 0; r < m_; ++r) {
      const double d = w[r] - sv_[i] * u[r];
      ss += d * d;
    }
    res = std::max(res, std::sqrt(ss));
  }
  return res;
}

// Yc (m×w) = α·A·X with X n×w, and Zc (n×w) = α·Aᵀ·Q with Q m×w.
void BlockKrylovSvd::product(bool transposed, const double *X, int64_t w, double *out) {
  // The streaming loops want a multiple of 4 columns; an operator gets exactly w.
  const int64_t pw = op_ != nullptr ? w : padded(w), rows = transposed ? m_ : n_;
  toRows(X, rows, w, pw, Xr_);
  scaleRows(Xr_, rows, pw);
  if (op_ != nullptr) {
    if (transposed) op_->applyTransposed(Xr_, pw, Yr_);
    else op_->apply(Xr_, pw, Yr_);
  } else if (transposed) {
    matTMultivector(A_, m_, n_, Xr_, pw, Yr_);
  } else {
    matMultivector(A_, m_, n_, Xr_, pw, Yr_);
  }
  toCols(Yr_, transposed ? n_ : m_, w, pw, out);
}
void BlockKrylovSvd::mulA(const double *X, int64_t w, double *Yc) { product(false, X, w, Yc); }
void BlockKrylovSvd::mulAt(const double *Q, int64_t w, double *Zc) { product(true, Q, w, Zc); }

// X (len×w, column-major) −= B·(Bᵀ·X) twice, B = the len×k column-major Uk or Vk.
void BlockKrylovSvd::projectOut(const double *B, int64_t len, double *X, int64_t w) {
  const auto L = static_cast<blasint>(len), Kk = static_cast<blasint>(k_), Wb = static_cast<blasint>(w);
  for (int pass = 0; pass < 2; ++pass) {
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, Kk, Wb, L, 1.0, B, L, X, L, 0.0, H_, Kk);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, L, Wb, Kk, -1.0, B, L, H_, Kk, 1.0, X, L);
  }
}

// A block Krylov space holds at most p directions of an exactly degenerate multiplet
// (A·Aᵀ is a multiple of the identity on it), so a multiplet of more than p copies among
// the k leaves the others out, and the triplets found in their place are true triplets
// of A with small residuals that no residual test can reject. An independent Gaussian
// block x ⟂ V (the sketch's columns p … 2p−1) and one power step of A⊥ = A − U·S·Vᵀ,
// y = A⊥·x, z = A⊥ᵀ·y, give ‖A⊥·z‖/‖z‖ <= σ_max(A⊥) (up to ε·√n·σ₁: y and z are
// projected off U and V, so the rounding of the products does not reach back into the
// kept triplets); a value above s_k by more than the tolerance is a triplet the basis
// missed. Three products of p columns. Not needed when the basis is all of ℝᵐ or the k
// triplets are all of A's (run() does not call it then).
bool BlockKrylovSvd::missedTriplet(double s1) {
  double *X = P_, *Z = Vs_, *AZ = Qb_; // free after the Rayleigh–Ritz step
  std::memcpy(X, c_.sketch->data() + n_ * p_, static_cast<size_t>(n_ * p_) * sizeof(double));
  projectOut(Vk_, n_, X, p_);
  mulA(X, p_, Y_);
  projectOut(Uk_, m_, Y_, p_);
  mulAt(Y_, p_, Z);
  projectOut(Vk_, n_, Z, p_);
  mulA(Z, p_, AZ);
  projectOut(Uk_, m_, AZ, p_);
  double est = 0;
  for (int64_t j = 0; j < p_; ++j) {
    const double zn = cblas_dnrm2(static_cast<blasint>(n_), Z + j * n_, 1);
    if (zn > 0) est = std::max(est, cblas_dnrm2(static_cast<blasint>(m_), AZ + j * m_, 1) / zn);
  }
  out_.probe = est / alpha_;
  return est > sv_[k_ - 1] + c_.tol * s1;
}

lapack_int BlockKrylovSvd::firstBlock(int64_t w) {
  mulA(c_.sketch->data(), w, Y_);
  for (int64_t j = 0; j < w; ++j) y0_[j] = cblas_dnrm2(static_cast<blasint>(m_), Y_ + j * m_, 1);
  return extend(0, w);
}

void BlockKrylovSvd::growGram(int64_t c0, int64_t w) {
  const int64_t cc = c0 + w;
  mulAt(Qb_ + c0 * m_, w, Zs_ + c0 * n_);
  cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, static_cast<blasint>(cc),
              static_cast<blasint>(w), static_cast<blasint>(n_), 1.0, Zs_, static_cast<blasint>(n_),
              Zs_ + c0 * n_, static_cast<blasint>(n_), 0.0, Gm_ + c0 * cm_, static_cast<blasint>(cm_));
}

// Its projected part (Y after `project`, until `extend`) is all of (I − Qb·Qbᵀ)·A·Zs, so
// for a Ritz vector v = Zs·z/σ (z an eigenvector of the Gram matrix Zsᵀ·Zs = B·Bᵀ) the
// residual A·v − σ·u = Y·z[c0 : cc]/σ costs no product (ritzEstimate).
void BlockKrylovSvd::nextBlock(int64_t cc, int64_t w) {
  mulA(Zs_ + (cc - w) * n_, w, Y_);
  for (int64_t j = 0; j < w; ++j) y0_[j] = cblas_dnrm2(static_cast<blasint>(m_), Y_ + j * m_, 1);
  project(cc, w, 2);
}

// From the Gram matrix's eigenpairs (σ² to ε·σ₁², enough to decide when to do the
// Rayleigh–Ritz step, whose true residuals decide the stop).
double BlockKrylovSvd::ritzEstimate(int64_t cc, int64_t w, double scaleFloor, double &scale) {
  const int64_t c0 = cc - w;
  const auto M = static_cast<blasint>(m_);
  for (int64_t j = 0; j < cc; ++j)
    std::memcpy(Ev_ + j * cc, Gm_ + j * cm_, static_cast<size_t>(j + 1) * sizeof(double));
  lapack_int info = LAPACKE_dsyevd_work(LAPACK_COL_MAJOR, 'V', 'U', static_cast<lapack_int>(cc), Ev_,
                                        static_cast<lapack_int>(cc), lam_, ew_,
                                        static_cast<lapack_int>(c_.lworkEig), eiw_,
                                        static_cast<lapack_int>(c_.liworkEig));
  if (info != 0) {
    out_.lapackInfo = info;
    return -1;
  }
  scale = std::max(std::sqrt(std::max(lam_[cc - 1], 0.0)), scaleFloor);
  const double tiny = c_.tol * scale > 0 ? c_.tol * scale : std::numeric_limits<double>::min();
  // H (w×k) = z[c0 : cc]/σ for the k largest; W = Y·H. A Ritz value at most tol·scale
  // (A of rank below k) has no Ritz vector to speak of: it counts as converged here, and
  // the true residual decides.
  for (int64_t i = 0; i < k_; ++i) {
    const double sig = std::sqrt(std::max(lam_[cc - 1 - i], 0.0));
    for (int64_t r = 0; r < w; ++r) H_[i * w + r] = sig > tiny ? Ev_[(cc - 1 - i) * cc + c0 + r] / sig : 0.0;
  }
  cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, M, static_cast<blasint>(k_),
              static_cast<blasint>(w), 1.0, Y_, M, H_, static_cast<blasint>(w), 0.0, W_, M);
  double est = 0;
  for (int64_t i = 0; i < k_; ++i) est = std::max(est, cblas_dnrm2(M, W_ + i * m_, 1));
  return est;
}

TopkSvdOutcome BlockKrylovSvd::run(double *Uout, double *sout, double *Vtout, double scaleFloor) {
  int64_t w = std::min(p_, K_);
  scaleFloor *= alpha_;
  if (lapack_int info = firstBlock(w); info != 0) {
    if (info == kNoBasis) return fallback(Uout, sout, Vtout);
    out_.lapackInfo = info;
    return out_;
  }
  int64_t cc = w;
  for (int it = 1;; ++it) {
    growGram(cc - w, w);
    out_.iterations = it;
    out_.sketch = cc;
    gTopkIterations.fetch_add(1, std::memory_order_relaxed);
    nextBlock(cc, w);
    double est = 0, scale = 0;
    if (cc >= k_ && (est = ritzEstimate(cc, w, scaleFloor, scale)) < 0) return out_;
    // The Rayleigh–Ritz step when the estimates pass, when the basis is all of K (then
    // it is a full SVD), and before giving up at the cap or the budget (an estimate from
    // the Gram matrix can stay above the tolerance for Ritz values near √ε·σ₁ whose true
    // residuals are below it).
    const int64_t wn = std::min({w, K_ - cc, cm_ - cc});
    const bool last = wn <= 0 || it >= c_.maxIter;
    if (cc >= k_ && (est <= c_.tol * scale || cc == K_ || last)) {
      const double res = rayleighRitz(cc);
      if (res < 0) return out_;
      const double s1 = std::max(sv_[0], scaleFloor);
      if (res <= c_.tol * s1) {
        if (cc < m_ && k_ < K_ && missedTriplet(s1)) {
          out_.missed = true;
          return fallback(Uout, sout, Vtout);
        }
        out_.residual = s1 > 0 ? res / s1 : 0;
        for (int64_t i = 0; i < m_; ++i)
          for (int64_t j = 0; j < k_; ++j) Uout[i * k_ + j] = Uk_[j * m_ + i];
        for (int64_t i = 0; i < k_; ++i) sout[i] = sv_[i] / alpha_;
        std::memcpy(Vtout, Vk_, static_cast<size_t>(k_ * n_) * sizeof(double));
        return out_;
      }
    }
    if (last) return fallback(Uout, sout, Vtout);
    if (lapack_int info = extend(cc, wn); info != 0) {
      if (info == kNoBasis) return fallback(Uout, sout, Vtout);
      out_.lapackInfo = info;
      return out_;
    }
    cc += wn;
    w = wn;
  }
}

} // namespace tessel::rt::svd_detail
