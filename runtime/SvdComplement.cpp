//===- runtime/SvdComplement.cpp - The complement of svd_topk's pullback --------===//
//
// See TruncatedSvd.h for the algorithm (svdComplement: the coupling of the kept
// triplets to the discarded subspace, a tail solve by CG/COCG with guards). Row-major
// throughout. What it shares with topkSvd (runtime/TruncatedSvd.cpp) is in
// TruncatedSvdInternal.h.
//
//===----------------------------------------------------------------------===//
#include "runtime/TruncatedSvd.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <cblas.h>
#include <lapacke.h>

#include "ir/ShapeRules.h"
#include "runtime/Multivector.h"
#include "runtime/Runtime.h"
#include "runtime/TruncatedSvdInternal.h"

namespace tessel::rt {


namespace {

/// The full rule's broadened reciprocal, dimensionless: for y = x/s₀,
/// ℓ(y) = y/(y² + ε²) computed as 1/(y + ε·(ε/y)) (nothing squared: no underflow of ε²
/// or y², so ε down to 0 and any scale give the same ℓ), 0 at y = 0. A cotangent term
/// num·L(x) is (num/s₀)·ℓ(x/s₀): 1/s₀ alone would overflow for a subnormal s₀
/// (passes/VjpSvd.cpp builds the same expression in IR).
double broadenedRecip(double y, double eps) {
  if (y == 0) return 0;
  return 1.0 / (y + eps * (eps / y));
}

/// The products of the tail solve with α·A₂, A₂ = A minus the kept triplets (and the
/// guards once known). A dense A: the formed α·A₂ (m×n row-major), multiplied by the
/// streaming loops of runtime/Multivector.h and two GEMMs. An implicit A (a
/// LinearOperator): factor by factor, A·(α·X) − Σ (U·α·S)·(Vt·X) over each deflated set,
/// never forming A₂ (runtime/EinsumOperator.h). As a LinearOperator it is what the
/// guards' topkSvd factors.
class TailProducts final : public LinearOperator {
public:
  TailProducts(const double *Ap, int64_t m, int64_t n) : LinearOperator(m, n), Ap_(Ap) {}
  TailProducts(const LinearOperator &A, double alpha, double maxAbs)
      : LinearOperator(A.rows(), A.cols()), A_(&A), alpha_(alpha), maxAbs_(maxAbs) {}

  /// Implicit A: subtract Us·Vt (Us m×count, already scaled by α·s; Vt count×n) too.
  void deflate(const double *Us, const double *Vt, int64_t count) {
    if (count > 0) sets_.push_back({Us, Vt, count});
  }
  /// Implicit A: A₂ is exactly 0 (every triplet kept).
  void setZero() { zero_ = true; }

  void apply(const double *X, int64_t p, double *Y) const override {
    const int64_t m = rows(), n = cols();
    if (Ap_ != nullptr) return matMultivector(Ap_, m, n, X, p, Y);
    if (zero_) return void(std::fill(Y, Y + m * p, 0.0));
    scaled_.assign(X, X + n * p);
    for (double &x : scaled_) x *= alpha_;
    A_->apply(scaled_.data(), p, Y);
    for (const Set &d : sets_) {
      small_.resize(static_cast<size_t>(d.count * p));
      gemm(false, false, d.count, p, n, 1.0, d.Vt, n, X, p, 0.0, small_.data(), p);
      gemm(false, false, m, p, d.count, -1.0, d.Us, d.count, small_.data(), p, 1.0, Y, p);
    }
  }
  void applyTransposed(const double *Y, int64_t p, double *Z) const override {
    const int64_t m = rows(), n = cols();
    if (Ap_ != nullptr) return matTMultivector(Ap_, m, n, Y, p, Z);
    if (zero_) return void(std::fill(Z, Z + n * p, 0.0));
    scaled_.assign(Y, Y + m * p);
    for (double &x : scaled_) x *= alpha_;
    A_->applyTransposed(scaled_.data(), p, Z);
    for (const Set &d : sets_) {
      small_.resize(static_cast<size_t>(d.count * p));
      gemm(true, false, d.count, p, m, 1.0, d.Us, d.count, Y, p, 0.0, small_.data(), p);
      gemm(true, false, n, p, d.count, -1.0, d.Vt, n, small_.data(), p, 1.0, Z, p);
    }
  }
  double maxAbsBound() const override { return alpha_ * maxAbs_; }

  /// Qy (q×n) = Wᵀ·α·A₂ for W m×q.
  void rowsTimes(const double *W, int64_t q, double *Qy) const {
    const int64_t m = rows(), n = cols();
    if (Ap_ != nullptr) return gemm(true, false, q, n, m, 1.0, W, q, Ap_, n, 0.0, Qy, n);
    wide_.resize(static_cast<size_t>(n * q));
    applyTransposed(W, q, wide_.data());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < q; ++j) Qy[j * n + i] = wide_[static_cast<size_t>(i * q + j)];
  }
  /// Qx (m×q) = c·α·A₂·Wyᵀ for Wy q×n.
  void timesRowsT(const double *Wy, int64_t q, double c, double *Qx) const {
    const int64_t m = rows(), n = cols();
    if (Ap_ != nullptr) return gemm(false, true, m, q, n, c, Ap_, n, Wy, n, 0.0, Qx, q);
    wide_.resize(static_cast<size_t>(n * q));
    for (int64_t j = 0; j < q; ++j)
      for (int64_t i = 0; i < n; ++i) wide_[static_cast<size_t>(i * q + j)] = Wy[j * n + i];
    apply(wide_.data(), q, Qx);
    for (int64_t i = 0; i < m * q; ++i) Qx[i] *= c;
  }

private:
  struct Set {
    const double *Us, *Vt;
    int64_t count;
  };
  const double *Ap_ = nullptr;
  const LinearOperator *A_ = nullptr;
  double alpha_ = 1, maxAbs_ = 0;
  bool zero_ = false;
  std::vector<Set> sets_;
  mutable std::vector<double> scaled_, small_, wide_;
};

/// The tail solve of svdComplement for the r columns at once, by conjugate gradients on
/// the normal form (z_j²·I − A₂·A₂ᵀ)·x_j = z_j·F_j + A₂·G_j, then y_j = (G_j + A₂ᵀ·x_j)/z_j,
/// adding Re x to X (m×r) and Re y to Yt (r×n). T = double: z_j = s_j (exact
/// reciprocals, plain CG). T = complex: z_j = s_j + i·δ, whose real parts are exactly the
/// full rule's Lorentzian Re 1/(x + iδ) = x/(x² + δ²) for every tail triplet and for the
/// null space; the matrix is complex symmetric, solved by COCG (van der Vorst, Melissen,
/// IEEE Trans. Magn. 26, 706 (1990): CG with the unconjugated bilinear form).
/// Complex m-side blocks are std::complex row-major (a real m×2r), and so is the n×a
/// block A₂ᵀ·Pa of an iteration; the final n-side blocks are real (w·r)×n with the real
/// and imaginary parts of row j in rows w·j and w·j + 1. All products with A₂ are real.
/// Returns nullptr or why it gave up.
template <class T>
const char *solveTail(const SvdComplementConfig &c, const TailProducts &Ap, const double *F,
                      const double *Gt, const double *s, double delta, double *X, double *Yt,
                      double *work, int &iterations) {
  constexpr bool cplx = !std::is_same_v<T, double>;
  constexpr int64_t w = cplx ? 2 : 1;
  const int64_t m = c.m, n = c.n, r = c.r;
  // Pa, Qx (m×ap) and Qy (n×w·ap) hold the active columns padded by zeros to ap, a whole
  // number of the products' 4-double vectors (runtime/Multivector.h); ap <= r + 3.
  const int64_t rp = r + 3;
  T *Wx = reinterpret_cast<T *>(work), *Rx = Wx + m * r, *Px = Rx + m * r, *Qx = Px + m * r,
    *Pa = Qx + m * rp, *rho = Pa + m * rp, *alpha = rho + r, *rhoNew = alpha + r, *z = rhoNew + r;
  double *Qy = reinterpret_cast<double *>(z + r), *Wy = Qy + w * rp * n, *fn = Wy + w * r * n,
         *rn = fn + r, *done = rn + r;
  auto *act = reinterpret_cast<int64_t *>(done + r); // r indices
  auto asReal = [](T *p) { return reinterpret_cast<double *>(p); };
  auto abs2 = [](T v) {
    if constexpr (cplx) return std::norm(v);
    else return v * v;
  };
  for (int64_t j = 0; j < r; ++j) {
    if constexpr (cplx) z[j] = T(s[j], delta);
    else z[j] = s[j];
  }
  // Rx = z_j·F + A₂·Gtᵀ (Gtᵀ, n×r, in Qy's storage; A₂·Gtᵀ into Qx's, as a real m×r).
  // The products with A₂ of the solve itself are runtime/Multivector.h's: a few columns
  // each, for which a BLAS call would spend as long packing A₂ as multiplying.
  double *AG = asReal(Qx);
  for (int64_t j = 0; j < r; ++j)
    for (int64_t i = 0; i < n; ++i) Qy[i * r + j] = Gt[j * n + i];
  Ap.apply(Qy, r, AG);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < r; ++j) Rx[i * r + j] = z[j] * F[i * r + j] + AG[i * r + j];
  for (int64_t j = 0; j < r; ++j) rho[j] = 0, fn[j] = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < r; ++j) {
      rho[j] += Rx[i * r + j] * Rx[i * r + j];
      fn[j] += abs2(Rx[i * r + j]);
    }
  std::fill(Wx, Wx + m * r, T(0));
  std::copy(Rx, Rx + m * r, Px);
  for (int64_t j = 0; j < r; ++j) done[j] = fn[j] == 0 ? 1 : 0;
  int it = 0;
  for (;;) {
    int64_t a = 0;
    for (int64_t j = 0; j < r; ++j)
      if (done[j] == 0) act[a++] = j;
    if (a == 0) break;
    if (it >= c.maxIter) {
      iterations = it;
      return "conjugate gradients did not converge within the budget";
    }
    ++it;
    gComplementIterations.fetch_add(1, std::memory_order_relaxed);
    // Only the a columns not yet converged are multiplied (columns converge at their own
    // rates, those of the largest s_j first; a product with A₂ costs about its number
    // of columns): Pa = P[:, act] (m×a), Qy = A₂ᵀ·Pa (n×a), Qx = (z_j²·I − A₂·A₂ᵀ)·Pa.
    const int64_t ap = (w * a + 3) / 4 * 4 / w;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t q = 0; q < a; ++q) Pa[i * ap + q] = Px[i * r + act[q]];
      for (int64_t q = a; q < ap; ++q) Pa[i * ap + q] = T(0);
    }
    Ap.applyTransposed(asReal(Pa), w * ap, Qy);
    Ap.apply(Qy, w * ap, asReal(Qx));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t q = 0; q < a; ++q)
        Qx[i * ap + q] = z[act[q]] * z[act[q]] * Pa[i * ap + q] - Qx[i * ap + q];
    for (int64_t q = 0; q < a; ++q) alpha[q] = 0; // pᵀ·q per column (unconjugated)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t q = 0; q < a; ++q) alpha[q] += Pa[i * ap + q] * Qx[i * ap + q];
    for (int64_t q = 0; q < a; ++q) {
      // Real: the matrix is positive definite when the guards lie below every s_j.
      // Complex: COCG breaks down on a (near-)isotropic direction.
      bool ok;
      if constexpr (cplx) ok = std::isfinite(std::abs(alpha[q])) && std::abs(alpha[q]) > 0;
      else ok = alpha[q] > 0;
      if (!ok) {
        iterations = it;
        return cplx ? "the broadened tail system broke down (a discarded singular value at the cut)"
                    : "the tail system is not positive definite (a discarded singular value at the cut)";
      }
      alpha[q] = rho[act[q]] / alpha[q];
    }
    std::fill(rhoNew, rhoNew + a, T(0));
    for (int64_t q = 0; q < a; ++q) rn[q] = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t q = 0; q < a; ++q) {
        const int64_t j = act[q];
        Wx[i * r + j] += alpha[q] * Pa[i * ap + q];
        const T v = Rx[i * r + j] -= alpha[q] * Qx[i * ap + q];
        rhoNew[q] += v * v;
        rn[q] += abs2(v);
      }
    for (int64_t q = 0; q < a; ++q) {
      const int64_t j = act[q];
      alpha[q] = rho[j] != T(0) ? rhoNew[q] / rho[j] : T(0); // β
      rho[j] = rhoNew[q];
      if (std::sqrt(rn[q]) <= c.tol * std::sqrt(fn[j])) done[j] = 1;
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t q = 0; q < a; ++q) {
        const int64_t j = act[q];
        Px[i * r + j] = Rx[i * r + j] + alpha[q] * Px[i * r + j];
      }
  }
  iterations = it;
  // y = (G + A₂ᵀ·x)/z_j, as rows: Qy = xᵀ·A₂, Wy = (Gt + Qy)/z_j. A₂ᵀ·x is a product with
  // the final x, not the sum Σ αᵢ·A₂ᵀpᵢ the iterations could have accumulated: that sum
  // drifts from it by the recurrence's rounding (unbounded near a COCG breakdown), and
  // the residual check below could not see the drift.
  Ap.rowsTimes(asReal(Wx), w * r, Qy);
  for (int64_t j = 0; j < r; ++j) {
    const double *qr = Qy + w * j * n;
    double *yr = Wy + w * j * n;
    if constexpr (cplx) {
      const double *qi = qr + n;
      double *yi = yr + n;
      const T inv = 1.0 / z[j];
      for (int64_t i = 0; i < n; ++i) {
        const T y = T(Gt[j * n + i] + qr[i], qi[i]) * inv;
        yr[i] = y.real();
        yi[i] = y.imag();
      }
    } else {
      for (int64_t i = 0; i < n; ++i) yr[i] = (Gt[j * n + i] + qr[i]) / s[j];
    }
  }
  // The true residuals of both equations, x·z_j − A₂·y − F and y·z_j − A₂ᵀ·x − G, against
  // the tolerance (with a margin for the recurrence's rounding) relative to ‖F_j‖ + ‖G_j‖.
  // The second reuses A₂ᵀ·x from above: it measures the rounding of the division, and the
  // first, with y built from that A₂ᵀ·x, is the normal form's true residual over z_j.
  Ap.timesRowsT(Wy, w * r, -1.0, asReal(Qx));
  for (int64_t j = 0; j < r; ++j) {
    double res = 0, rhs = 0;
    for (int64_t i = 0; i < m; ++i) {
      res += abs2(Qx[i * r + j] + z[j] * Wx[i * r + j] - F[i * r + j]);
      rhs += F[i * r + j] * F[i * r + j];
    }
    for (int64_t i = 0; i < n; ++i) {
      T y, q;
      if constexpr (cplx) {
        y = T(Wy[2 * j * n + i], Wy[(2 * j + 1) * n + i]);
        q = T(Qy[2 * j * n + i], Qy[(2 * j + 1) * n + i]);
      } else {
        y = Wy[j * n + i];
        q = Qy[j * n + i];
      }
      res += abs2(z[j] * y - q - Gt[j * n + i]);
      rhs += Gt[j * n + i] * Gt[j * n + i];
    }
    if (std::sqrt(res) > 16 * c.tol * std::sqrt(rhs))
      return "the true residual of the tail solve is above the tolerance";
  }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < r; ++j) {
      if constexpr (cplx) X[i * r + j] += Wx[i * r + j].real();
      else X[i * r + j] += Wx[i * r + j];
    }
  for (int64_t j = 0; j < r; ++j)
    for (int64_t i = 0; i < n; ++i) Yt[j * n + i] += Wy[w * j * n + i];
  return nullptr;
}

/// Doubles of workspace solveTail<T> needs.
int64_t solveTailWork(int64_t m, int64_t n, int64_t r, bool cplx) {
  const int64_t w = cplx ? 2 : 1;
  const int64_t rp = r + 3; // the padded active columns (solveTail)
  return w * (3 * m * r + 2 * m * rp + 4 * r) + w * (rp + r) * n + 4 * r;
}


/// Columns k … rows−1 of the full orthogonal factor of the Householder QR of the
/// column-major rows×k W: an orthonormal basis of span(W)⊥, column-major rows×rows
/// (the first k columns span W). LAPACK dgeqrf and dorgqr; info != 0 on failure.
std::vector<double> complementBasis(std::vector<double> W, int64_t rows, int64_t k, int &info) {
  std::vector<double> Q(static_cast<size_t>(rows * rows), 0.0), tau(static_cast<size_t>(std::max<int64_t>(k, 1)));
  std::copy(W.begin(), W.end(), Q.begin());
  const auto R = static_cast<lapack_int>(rows), K = static_cast<lapack_int>(k);
  info = k > 0 ? LAPACKE_dgeqrf(LAPACK_COL_MAJOR, R, K, Q.data(), R, tau.data()) : 0;
  if (info == 0) info = LAPACKE_dorgqr(LAPACK_COL_MAJOR, R, R, K, Q.data(), R, tau.data());
  return Q;
}

/// The triplets of A that svd_topk discarded, relative to the kept ones given (U m×·
/// with leading dimension ldu, Vt ·×n, their first k): the SVD of Q⊥ᵀ·A·P⊥ with Q⊥,
/// P⊥ orthonormal bases of span(U)⊥ and span(V)⊥, mapped back: Ud m×t, sd t, Vdt t×n,
/// t = min(m, n) − k, row-major. These are the full SVD's trailing triplets when U and
/// V are A's leading ones; where a multiplet straddles the cut (a zero singular value
/// of a rank-deficient A kept), they stay orthogonal to the kept vectors, which the full
/// SVD's own basis of the multiplet need not be.
struct Discarded {
  std::vector<double> U, s, Vt;
  int info = 0;
};
Discarded discardedTriplets(const double *A, int64_t m, int64_t n, const double *U, int64_t ldu,
                            const double *Vt, int64_t k) {
  Discarded d;
  const int64_t t = std::min(m, n) - k;
  if (t <= 0) return d; // every triplet kept: nothing discarded (the null-space terms read F, Gt)
  std::vector<double> Wu(static_cast<size_t>(m * k)), Wv(Vt, Vt + k * n); // column-major m×k, n×k
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j) Wu[static_cast<size_t>(j * m + i)] = U[i * ldu + j];
  const std::vector<double> Q = complementBasis(std::move(Wu), m, k, d.info);
  if (d.info != 0) return d;
  const std::vector<double> P = complementBasis(std::move(Wv), n, k, d.info);
  if (d.info != 0) return d;
  // Q⊥ᵀ as a row-major (m−k)×m matrix is Q + k·m (column-major columns k …); P⊥ᵀ likewise.
  std::vector<double> C(static_cast<size_t>(m * (n - k))), B(static_cast<size_t>((m - k) * (n - k)));
  gemm(false, true, m, n - k, n, 1.0, A, n, P.data() + k * n, n, 0.0, C.data(), n - k);
  gemm(false, false, m - k, n - k, m, 1.0, Q.data() + k * m, m, C.data(), n - k, 0.0, B.data(), n - k);
  FullSvd f = fullSvd(B.data(), m - k, n - k);
  d.info = f.info;
  if (f.info != 0) return d;
  d.U.assign(static_cast<size_t>(m * t), 0.0);
  d.Vt.assign(static_cast<size_t>(t * n), 0.0);
  d.s = f.s;
  gemm(true, false, m, t, m - k, 1.0, Q.data() + k * m, m, f.U.data(), t, 0.0, d.U.data(), t);
  gemm(false, false, t, n, n - k, 1.0, f.Vt.data(), n - k, P.data() + k * n, n, 0.0, d.Vt.data(), n);
  return d;
}

} // namespace

//===----------------------------------------------------------------------===//
// svdComplement

SvdComplementConfig svdComplementConfig(int64_t m, int64_t n, int64_t k, int64_t r,
                                        int64_t given, bool implicitA) {
  SvdComplementConfig c;
  c.implicitA = implicitA;
  c.m = m;
  c.n = n;
  c.k = k;
  c.r = r;
  c.givenGuards = given > 0;
  c.guards = c.givenGuards ? given : ir::svdTopkComplementGuards(m, n, k);
  // Without given guards: a top-g SVD of A⊥ (residuals against s₀ of A).
  if (c.guards > 0 && !c.givenGuards) c.guard = topkSvdConfig(m, n, c.guards);
  c.tol = 8 * kEps * std::sqrt(static_cast<double>(std::max(m, n)));
  const double iterFlops = 4.0 * static_cast<double>(m * n) * static_cast<double>(std::max<int64_t>(r, 1));
  c.maxIter = static_cast<int>(std::clamp(gesddFlops(m, n) / (2 * iterFlops), 8.0, 400.0));
  const int64_t g = c.guards;
  // Aperp m×n (not for an implicit A); guards Ug m×g, sg g, Vgt g×n; F m×r; Gt r×n; small k×r, g×r blocks; U·S
  // m×k (m×(k+g) with given guards); the guard topkSvd's workspace, or the tail solve's
  // (complex: the larger).
  c.workElems = (implicitA ? 0 : m * n) + g * (m + n + 1) + r * m + r * n + 4 * std::max(k, g) * r +
                m * (c.givenGuards ? k + g : k) + k +
                std::max(c.guard.workElems, solveTailWork(m, n, r, true));
  return c;
}

namespace {
/// svdComplement on a dense A (Aop null) or an implicit one (A null).
SvdComplementOutcome complement(const SvdComplementConfig &c, double eps, const double *A,
                                const LinearOperator *Aop, const double *U, const double *s,
                                const double *Vt, const double *gU, const double *gVt, double *X,
                                double *Yt, double *work) {
  SvdComplementOutcome out;
  const int64_t m = c.m, n = c.n, k = c.k, r = c.r, g = c.guards, K = std::min(m, n);
  const int64_t ldu = c.givenGuards ? k + g : k; // U's columns: kept, then given guards
  if (r == 0) return out;
  gComplementCalls.fetch_add(1, std::memory_order_relaxed);
  double *Ap = work, *Ug = Ap + (Aop != nullptr ? 0 : m * n), *sg = Ug + m * g, *Vgt = sg + g;
  double *F = Vgt + g * n, *Gt = F + m * r;
  const int64_t kg = std::max(k, g);
  double *T1 = Gt + r * n, *T2 = T1 + kg * r, *T3 = T2 + kg * r, *T4 = T3 + kg * r;
  double *Us = T4 + kg * r;                          // U·S, m×k (m×(k+g) with given guards)
  double *sc = Us + m * (c.givenGuards ? k + g : k); // α·s (k)
  double *gw = sc + k; // the guards' topkSvd, then the tail solve
  const double s0 = s[0] != 0 ? s[0] : 1.0;
  // The scale: the CG's inner products go as the fourth power of A's scale, so for s₀
  // outside [2⁻⁵⁰, 2⁵⁰] the solve works on α·A⊥ and α·s with α = 2⁻ᵉ (exact), whose
  // solution is X/α, Y/α (the cotangents stay as they are), and multiplies by α at the
  // end; the full rule (fallback) works unscaled.
  const double alpha = powerOfTwoScale(s0, 0x1p-50, 0x1p50);
  const double s0c = alpha * s0;
  for (int64_t j = 0; j < k; ++j) sc[j] = alpha * s[j];

  // F = (I − UUᵀ)·Ū (m×r), Gt = ((I − VVᵀ)·V̄)ᵀ = V̄t − (V̄t·Vtᵀ)·Vt (r×n). Where the
  // kept vectors span a whole side (k = m, or k = n) its complement is {0} and the
  // projection is exactly 0: computed, it would leave rounding of Ū along U, which the
  // solve then divides by s² (a square matrix with every triplet kept gave X ≈ 1e-13
  // instead of 0, amplified by the second-order rule).
  auto projectCotangents = [&] {
    gemm(true, false, k, r, m, 1.0, U, ldu, gU, r, 0.0, T1, r);
    std::memcpy(F, gU, static_cast<size_t>(m * r) * sizeof(double));
    gemm(false, false, m, r, k, -1.0, U, ldu, T1, r, 1.0, F, r);
    gemm(false, true, r, k, n, 1.0, gVt, n, Vt, n, 0.0, T2, k);
    std::memcpy(Gt, gVt, static_cast<size_t>(r * n) * sizeof(double));
    gemm(false, false, r, n, k, -1.0, T2, k, Vt, n, 1.0, Gt, n);
    if (k >= m) std::memset(F, 0, static_cast<size_t>(m * r) * sizeof(double));
    if (k >= n) std::memset(Gt, 0, static_cast<size_t>(r * n) * sizeof(double));
  };
  projectCotangents();

  auto fullRule = [&](const char *why) {
    // The full rule's rows i >= k of its core matrix and its projector terms, from the
    // discarded triplets (an SVD of A on the complements of the kept vectors):
    // X = U_⊥·x + (F − U_⊥·a)·diag(L(s)), Yt = yᵀ·Vt_⊥ + diag(L(s))·(Gt − bᵀ·Vt_⊥).
    out.fallback = true;
    out.fallbackReason = why;
    gComplementFallbacks.fetch_add(1, std::memory_order_relaxed);
    std::vector<double> formed;
    if (Aop != nullptr) {
      formed.resize(static_cast<size_t>(m * n));
      Aop->materialize(formed.data());
    }
    Discarded f = discardedTriplets(Aop != nullptr ? formed.data() : A, m, n, U, ldu, Vt, k);
    out.lapackInfo = f.info;
    if (f.info != 0) return;
    projectCotangents(); // the guards may have been taken out of F and Gt
    const int64_t t = K - k; // discarded triplets
    std::vector<double> a(static_cast<size_t>(std::max<int64_t>(t, 1) * r)), bb(a.size()),
        x(a.size()), y(a.size());
    if (t > 0) {
      gemm(true, false, t, r, m, 1.0, f.U.data(), t, F, r, 0.0, a.data(), r);
      gemm(false, true, t, r, n, 1.0, f.Vt.data(), n, Gt, n, 0.0, bb.data(), r);
      for (int64_t i = 0; i < t; ++i)
        for (int64_t j = 0; j < r; ++j) {
          const double sp = 0.5 * (a[i * r + j] + bb[i * r + j]) / s0,
                       sm = 0.5 * (a[i * r + j] - bb[i * r + j]) / s0;
          const double lm = broadenedRecip((s[j] - f.s[i]) / s0, eps),
                       lp = broadenedRecip((s[j] + f.s[i]) / s0, eps);
          x[i * r + j] = sp * lm + sm * lp;
          y[i * r + j] = sp * lm - sm * lp;
        }
    }
    // Null-space parts: F minus its components along all of U_full (the kept ones are
    // already out), times L(s_j); likewise for Gt.
    std::memcpy(X, F, static_cast<size_t>(m * r) * sizeof(double));
    std::memcpy(Yt, Gt, static_cast<size_t>(r * n) * sizeof(double));
    if (t > 0) {
      gemm(false, false, m, r, t, -1.0, f.U.data(), t, a.data(), r, 1.0, X, r);
      gemm(true, false, r, n, t, -1.0, bb.data(), r, f.Vt.data(), n, 1.0, Yt, n);
    }
    for (int64_t j = 0; j < r; ++j) {
      const double ls = broadenedRecip(s[j] / s0, eps);
      for (int64_t i = 0; i < m; ++i) X[i * r + j] = m > K ? X[i * r + j] / s0 * ls : 0.0;
      for (int64_t i = 0; i < n; ++i) Yt[j * n + i] = n > K ? Yt[j * n + i] / s0 * ls : 0.0;
    }
    if (t > 0) {
      gemm(false, false, m, r, t, 1.0, f.U.data(), t, x.data(), r, 1.0, X, r);
      gemm(true, false, r, n, t, 1.0, y.data(), r, f.Vt.data(), n, 1.0, Yt, n);
    }
  };

  // α·A⊥ = α·A − U·diag(α·s)·Vt (scaled first, so a tiny or subnormal A loses nothing
  // in the products); with given guards directly α·A₂ = α·A⊥ − Ug·diag(α·sg)·Vgt, by one
  // product over all k + g triplets.
  const int64_t kd = c.givenGuards ? k + g : k;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < kd; ++j) Us[i * kd + j] = U[i * ldu + j] * (alpha * s[j]);
  // An implicit A keeps A and these factors apart (TailProducts).
  std::optional<TailProducts> tail;
  if (Aop == nullptr) {
    if (alpha != 1)
      for (int64_t i = 0; i < m * n; ++i) Ap[i] = alpha * A[i];
    else
      std::memcpy(Ap, A, static_cast<size_t>(m * n) * sizeof(double));
    gemm(false, false, m, n, kd, -1.0, Us, kd, Vt, n, 1.0, Ap, n);
    tail.emplace(Ap, m, n);
  } else {
    tail.emplace(*Aop, alpha, Aop->maxAbsBound());
    tail->deflate(Us, Vt, kd);
  }
  // Every triplet kept (k = min(m, n)): A⊥ is exactly 0, not the rounding of A − U·S·Vt,
  // which would couple the side with no complement to the other.
  if (k >= K) {
    if (Aop == nullptr) std::memset(Ap, 0, static_cast<size_t>(m * n) * sizeof(double));
    else tail->setZero();
  }

  std::memset(X, 0, static_cast<size_t>(m * r) * sizeof(double));
  std::memset(Yt, 0, static_cast<size_t>(r * n) * sizeof(double));
  double tailBound = 0; // an upper bound of σ_max(A₂) (the last guard)
  if (g > 0 && c.givenGuards) {
    // The forward's triplets k … k+g−1 of A are the top g of A⊥.
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(Ug + i * g, U + i * ldu + k, static_cast<size_t>(g) * sizeof(double));
    for (int64_t i = 0; i < g; ++i) sg[i] = alpha * s[k + i];
    std::memcpy(Vgt, Vt + k * n, static_cast<size_t>(g * n) * sizeof(double));
  } else if (g > 0) {
    out.guard = Aop == nullptr ? topkSvd(c.guard, Ap, Ug, sg, Vgt, gw, s0c)
                               : topkSvd(c.guard, *tail, Ug, sg, Vgt, gw, s0c);
    if (out.guard.lapackInfo != 0) {
      out.lapackInfo = out.guard.lapackInfo;
      return out;
    }
  }
  if (g > 0) {
    tailBound = sg[g - 1];
    // Explicit coupling of the guards: a = Ugᵀ·F, b = Vgt·Gtᵀ (g×r).
    gemm(true, false, g, r, m, 1.0, Ug, g, F, r, 0.0, T1, r);
    gemm(false, true, g, r, n, 1.0, Vgt, n, Gt, n, 0.0, T2, r);
    for (int64_t i = 0; i < g; ++i)
      for (int64_t j = 0; j < r; ++j) {
        const double sp = 0.5 * (T1[i * r + j] + T2[i * r + j]) / s0c,
                     sm = 0.5 * (T1[i * r + j] - T2[i * r + j]) / s0c;
        const double lm = broadenedRecip((sc[j] - sg[i]) / s0c, eps),
                     lp = broadenedRecip((sc[j] + sg[i]) / s0c, eps);
        T3[i * r + j] = sp * lm + sm * lp;
        T4[i * r + j] = sp * lm - sm * lp;
      }
    gemm(false, false, m, r, g, 1.0, Ug, g, T3, r, 0.0, X, r);
    gemm(true, false, r, n, g, 1.0, T4, r, Vgt, n, 0.0, Yt, n);
    // Take the guards out of the right-hand sides and of the operator (given ones are
    // out of it already).
    gemm(false, false, m, r, g, -1.0, Ug, g, T1, r, 1.0, F, r);
    gemm(true, false, r, n, g, -1.0, T2, r, Vgt, n, 1.0, Gt, n);
    if (!c.givenGuards) {
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < g; ++j) Ug[i * g + j] *= sg[j];
      if (Aop == nullptr) gemm(false, false, m, n, g, -1.0, Ug, g, Vgt, n, 1.0, Ap, n);
      else tail->deflate(Ug, Vgt, g);
    }
  }
  // The tail beyond the guards (and the null space of a non-square A): exact reciprocals
  // 1/(s_j ∓ σ) and 1/s_j where the full rule has L(x) = x/(x² + δ²), δ = ε·s₀, are
  // relatively (δ/x)² apart; where every such x is at least 10⁵·δ (a difference
  // <= 1e-10) the tail is solved in real arithmetic, otherwise with the complex shift
  // s_j + iδ, whose real part is the Lorentzian itself.
  if (g < K - k && !(sc[r - 1] > tailBound)) {
    fullRule("the guards do not reach below the cut");
    return out;
  }
  const double delta = eps * s0c;
  const double minGap = std::max(1e5 * delta, std::numeric_limits<double>::min());
  const double below = g < K - k ? tailBound : 0.0;
  out.broadenedTail = !(sc[r - 1] - below >= minGap);
  if (out.broadenedTail) gComplementBroadened.fetch_add(1, std::memory_order_relaxed);
  // The solve is linear in the cotangents, but CG's inner products square them: the
  // right-hand sides (and the guards' part of X, Yt, which the solve adds to) are
  // brought to unit scale by γ = 2⁻ᵉ (exact) and the result divided by γ.
  double cmax = 0;
  for (int64_t i = 0; i < m * r; ++i) cmax = std::max(cmax, std::fabs(F[i]));
  for (int64_t i = 0; i < r * n; ++i) cmax = std::max(cmax, std::fabs(Gt[i]));
  const double gamma = powerOfTwoScale(cmax, 0x1p-50, 0x1p50);
  if (gamma != 1) {
    for (double *B : {F, X})
      for (int64_t i = 0; i < m * r; ++i) B[i] *= gamma;
    for (double *B : {Gt, Yt})
      for (int64_t i = 0; i < r * n; ++i) B[i] *= gamma;
  }
  const char *why = out.broadenedTail
                        ? solveTail<std::complex<double>>(c, *tail, F, Gt, sc, delta, X, Yt, gw, out.iterations)
                        : solveTail<double>(c, *tail, F, Gt, sc, delta, X, Yt, gw, out.iterations);
  if (why != nullptr) {
    fullRule(why); // from the unscaled cotangents again
  } else if (alpha != 1 || gamma != 1) {
    const double back = alpha / gamma;
    for (int64_t i = 0; i < m * r; ++i) X[i] *= back;
    for (int64_t i = 0; i < r * n; ++i) Yt[i] *= back;
  }
  return out;
}
} // namespace

SvdComplementOutcome svdComplement(const SvdComplementConfig &c, double eps, const double *A,
                                   const double *U, const double *s, const double *Vt,
                                   const double *gU, const double *gVt, double *X, double *Yt,
                                   double *work) {
  return complement(c, eps, A, nullptr, U, s, Vt, gU, gVt, X, Yt, work);
}

SvdComplementOutcome svdComplement(const SvdComplementConfig &c, double eps,
                                   const LinearOperator &A, const double *U, const double *s,
                                   const double *Vt, const double *gU, const double *gVt,
                                   double *X, double *Yt, double *work) {
  if (A.rows() != c.m || A.cols() != c.n || !c.implicitA)
    throw std::logic_error("svdComplement: a " + std::to_string(A.rows()) + "x" + std::to_string(A.cols()) +
                           " operator for a config of " + std::to_string(c.m) + "x" + std::to_string(c.n) +
                           (c.implicitA ? "" : " sized for a dense A"));
  return complement(c, eps, nullptr, &A, U, s, Vt, gU, gVt, X, Yt, work);
}

} // namespace tessel::rt
