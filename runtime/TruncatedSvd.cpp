//===- runtime/TruncatedSvd.cpp - Top-k SVD (randomized block Krylov) -----------===//
//
// See TruncatedSvd.h for the algorithm. Internally the tall matrices of topkSvd are
// column-major (LAPACK's QR wants them so); the row-major operand A (m×n) is the
// column-major Aᵀ (n×m, leading dimension n). The complement of its pullback
// (svdComplement) is in runtime/SvdComplement.cpp; what both use, TruncatedSvdInternal.h.
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
#include <type_traits>
#include <vector>

#include <cblas.h>
#include <lapacke.h>

#include "ir/ShapeRules.h"
#include "runtime/Multivector.h"
#include "runtime/Runtime.h"
#include "runtime/TruncatedSvdInternal.h"

namespace tessel::rt {

namespace svd_detail {

std::atomic<int64_t> gTopkCalls{0}, gTopkIterations{0}, gTopkFallbacks{0};
std::atomic<int64_t> gComplementCalls{0}, gComplementIterations{0}, gComplementFallbacks{0};
std::atomic<int64_t> gComplementBroadened{0};

} // namespace svd_detail


namespace {

/// splitmix64 (Steele, Lea, Flood 2014): a counter-based stream, the same on every
/// machine and thread.
uint64_t splitmix(uint64_t &x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// Columns c0..c1 of a column-major n×· Gaussian matrix (Box–Muller), each column from
/// its own stream so that a grown sketch keeps its first columns.
void gaussianColumns(double *V, int64_t n, int64_t c0, int64_t c1, uint64_t seed) {
  const double twoPi = 6.283185307179586476925286766559;
  for (int64_t c = c0; c < c1; ++c) {
    uint64_t x = seed ^ (static_cast<uint64_t>(c) * 0xD1B54A32D192ED03ULL);
    for (int64_t i = 0; i < n; i += 2) {
      double u1 = (static_cast<double>(splitmix(x) >> 11) + 0.5) * 0x1.0p-53;
      double u2 = (static_cast<double>(splitmix(x) >> 11) + 0.5) * 0x1.0p-53;
      double rad = std::sqrt(-2.0 * std::log(u1));
      V[c * n + i] = rad * std::cos(twoPi * u2);
      if (i + 1 < n) V[c * n + i + 1] = rad * std::sin(twoPi * u2);
    }
  }
}

/// The seed of topkSvd's Gaussian sketch: a function of the problem's sizes only.
uint64_t topkSeed(int64_t m, int64_t n, int64_t k) {
  return 0x7e55e1ULL ^ (static_cast<uint64_t>(m) << 40) ^ (static_cast<uint64_t>(n) << 20) ^
         static_cast<uint64_t>(k);
}

int64_t gesddLwork(int64_t rows, int64_t cols) {
  double wq = 0, dummy = 0;
  lapack_int idummy = 0;
  const int64_t mn = std::min(rows, cols);
  lapack_int info = LAPACKE_dgesdd_work(LAPACK_COL_MAJOR, 'S', static_cast<lapack_int>(rows),
                                        static_cast<lapack_int>(cols), &dummy,
                                        static_cast<lapack_int>(rows), &dummy, &dummy,
                                        static_cast<lapack_int>(rows), &dummy,
                                        static_cast<lapack_int>(mn), &wq, -1, &idummy);
  return info == 0 ? std::max<int64_t>(1, static_cast<int64_t>(wq)) : 1;
}

int64_t qrLwork(int64_t m, int64_t b) {
  double wq1 = 0, wq2 = 0, dummy = 0;
  LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, static_cast<lapack_int>(m), static_cast<lapack_int>(b),
                      &dummy, static_cast<lapack_int>(m), &dummy, &wq1, -1);
  LAPACKE_dorgqr_work(LAPACK_COL_MAJOR, static_cast<lapack_int>(m), static_cast<lapack_int>(b),
                      static_cast<lapack_int>(b), &dummy, static_cast<lapack_int>(m), &dummy, &wq2,
                      -1);
  return std::max<int64_t>(1, static_cast<int64_t>(std::max(wq1, wq2)));
}

int64_t iworkDoubles(int64_t K) {
  return (8 * K * static_cast<int64_t>(sizeof(lapack_int)) + 7) / 8;
}

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

} // namespace

namespace svd_detail {

double gesddFlops(int64_t m, int64_t n) {
  const double big = static_cast<double>(std::max(m, n)), K = static_cast<double>(std::min(m, n));
  return std::min(14 * big * K * K + 8 * K * K * K, 6 * big * K * K + 20 * K * K * K);
}

FullSvd fullSvd(const double *A, int64_t m, int64_t n) {
  const int64_t K = std::min(m, n);
  FullSvd f;
  std::vector<double> a(A, A + m * n);
  // gesdd scales a tiny matrix itself, but a subnormal one has lost bits it cannot get
  // back and fails to converge (info > 0): factor 2⁻ᵉ·A (exact) and scale s back.
  double mx = 0;
  for (double x : a) mx = std::max(mx, std::fabs(x));
  const double alpha = svdWorkingScale(mx);
  if (alpha != 1)
    for (double &x : a) x *= alpha;
  f.U.assign(static_cast<size_t>(m * K), 0.0);
  f.s.assign(static_cast<size_t>(K), 0.0);
  f.Vt.assign(static_cast<size_t>(K * n), 0.0);
  const int64_t lwork = gesddLwork(n, m);
  std::vector<double> work(static_cast<size_t>(lwork + iworkDoubles(K)));
  auto *iwork = reinterpret_cast<lapack_int *>(work.data() + lwork);
  f.info = LAPACKE_dgesdd_work(LAPACK_COL_MAJOR, 'S', static_cast<lapack_int>(n),
                               static_cast<lapack_int>(m), a.data(), static_cast<lapack_int>(n),
                               f.s.data(), f.Vt.data(), static_cast<lapack_int>(n), f.U.data(),
                               static_cast<lapack_int>(K), work.data(),
                               static_cast<lapack_int>(lwork), iwork);
  if (alpha != 1)
    for (double &x : f.s) x /= alpha;
  return f;
}

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A,
          int64_t lda, const double *B, int64_t ldb, double beta, double *C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0 ? 0.0 : beta * C[i * ldc + j];
    return;
  }
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), alpha, A,
              static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C,
              static_cast<blasint>(ldc));
}

double powerOfTwoScale(double x, double lo, double hi) {
  if (!(x > 0) || !std::isfinite(x) || (x >= lo && x <= hi)) return 1.0;
  return std::ldexp(1.0, std::clamp(-std::ilogb(x), -1000, 1000));
}

} // namespace svd_detail

double svdWorkingScale(double maxAbs) { return powerOfTwoScale(maxAbs, 0x1p-300, 0x1p300); }

//===----------------------------------------------------------------------===//
// topkSvd

namespace {
TopkSvdConfig computeTopkSvdConfig(int64_t m, int64_t n, int64_t k, int64_t block);
} // namespace

TopkSvdConfig topkSvdConfig(int64_t m, int64_t n, int64_t k, int64_t block) {
  // Memoised: the workspace queries (one gesdd query per basis size up to the cap, ~100
  // for k = 16) and the sketch are the same for every instruction of one shape, and a
  // module has many (the forward and backward halves of each step class). The config is
  // immutable (its sketch a shared const vector); the cache is bounded.
  static std::mutex mu;
  static std::map<std::array<int64_t, 4>, TopkSvdConfig> cache;
  const std::array<int64_t, 4> key{m, n, k, block};
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  TopkSvdConfig c = computeTopkSvdConfig(m, n, k, block);
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= 256) cache.clear();
  cache.emplace(key, c);
  return c;
}

namespace {
TopkSvdConfig computeTopkSvdConfig(int64_t m, int64_t n, int64_t k, int64_t block) {
  TopkSvdConfig c;
  c.m = m;
  c.n = n;
  c.k = k;
  const int64_t K = std::min(m, n);
  if (k <= 0 || K == 0) return c;
  c.b0 = std::min(K, block > 0 ? block : std::max<int64_t>(std::min<int64_t>(k, 8), k / 6));
  c.bmax = std::min(K, 6 * k + c.b0);
  c.tol = 8 * kEps * std::sqrt(static_cast<double>(std::max(m, n)));
  // The budget in blocks: half a gesdd's flops, at the cost of a block's two products.
  const double blockFlops = 4.0 * static_cast<double>(m * n) * static_cast<double>(c.b0);
  c.maxIter = static_cast<int>(std::clamp(gesddFlops(m, n) / (2 * blockFlops), 4.0, 400.0));
  const int64_t cm = c.bmax, p = c.b0;
  // gesdd's workspace is not monotone in the column count (a tall enough matrix takes
  // its QR-first path): the largest over every basis size up to the cap (workspace
  // queries only).
  c.lworkSvd = gesddLwork(cm, cm);
  for (int64_t cc = 1; cc <= cm; ++cc) c.lworkSvd = std::max(c.lworkSvd, gesddLwork(n, cc));
  c.lworkQr = qrLwork(m, p);
  {
    double wq = 0, dummy = 0;
    lapack_int iq = 0;
    LAPACKE_dsyevd_work(LAPACK_COL_MAJOR, 'V', 'U', static_cast<lapack_int>(cm), &dummy,
                        static_cast<lapack_int>(cm), &dummy, &wq, -1, &iq, -1);
    c.lworkEig = std::max<int64_t>(1, static_cast<int64_t>(wq));
    c.liworkEig = std::max<int64_t>(1, static_cast<int64_t>(iq));
  }
  // Columns [0, p): the start Ω; [p, 2p): the probe's start (each column its own stream,
  // so the start is the same as when it was drawn alone).
  std::vector<double> omega(static_cast<size_t>(2 * n * p));
  gaussianColumns(omega.data(), n, 0, 2 * p, topkSeed(m, n, k));
  c.sketch = std::make_shared<const std::vector<double>>(std::move(omega));
  c.workElems = topkSvdWorkspace(c).end;
  return c;
}
} // namespace

TopkSvdWorkspace topkSvdWorkspace(const TopkSvdConfig &c) {
  const int64_t m = c.m, n = c.n, k = c.k, cm = c.bmax, p = c.b0;
  const int64_t p4 = (p + 3) / 4 * 4, rowBlock = std::max(m, n) * p4;
  TopkSvdWorkspace L{};
  int64_t at = 0;
  auto take = [&](int64_t &field, int64_t elems) {
    field = at;
    at += elems;
  };
  take(L.Qb, m * cm);
  take(L.Zs, n * cm);
  take(L.P, n * cm);
  take(L.Vs, n * cm);
  take(L.Vk, n * k);
  take(L.Uk, m * k);
  take(L.W, m * k);
  take(L.Y, m * p);
  take(L.H, cm * p4);
  take(L.Gm, cm * cm);
  take(L.Ev, cm * cm);
  take(L.Rb, cm * cm);
  take(L.Zr, cm * cm);
  take(L.VTs, cm * cm);
  take(L.G, 2 * cm * cm + cm);
  take(L.lam, cm);
  take(L.sv, cm);
  take(L.tau, cm);
  take(L.y0, p);
  take(L.bad, p);
  take(L.Xr, rowBlock);
  take(L.Yr, rowBlock);
  take(L.lw, c.lworkSvd);
  take(L.iwork, iworkDoubles(cm));
  take(L.qw, c.lworkQr);
  take(L.ew, c.lworkEig);
  take(L.eiw, (c.liworkEig * static_cast<int64_t>(sizeof(lapack_int)) + 7) / 8);
  L.end = at;
  return L;
}

TopkSvdOutcome topkSvd(const TopkSvdConfig &c, const double *A, double *Uout, double *sout,
                       double *Vtout, double *work, double scaleFloor, double aMaxAbs) {
  TopkSvdOutcome out;
  const int64_t m = c.m, n = c.n, k = c.k, cm = c.bmax, p = c.b0, K = std::min(m, n);
  if (k <= 0) return out;
  gTopkCalls.fetch_add(1, std::memory_order_relaxed);
  const TopkSvdWorkspace L = topkSvdWorkspace(c);
  double *Qb = work + L.Qb, *Zs = work + L.Zs, *P = work + L.P, *Vs = work + L.Vs, *Vk = work + L.Vk;
  double *Uk = work + L.Uk, *W = work + L.W, *Y = work + L.Y, *H = work + L.H;
  double *Gm = work + L.Gm, *Ev = work + L.Ev, *Rb = work + L.Rb, *Zr = work + L.Zr;
  double *VTs = work + L.VTs, *G = work + L.G, *lam = work + L.lam, *sv = work + L.sv;
  double *tau = work + L.tau, *y0 = work + L.y0, *bad = work + L.bad, *Xr = work + L.Xr, *Yr = work + L.Yr;
  double *lw = work + L.lw, *qw = work + L.qw, *ew = work + L.ew;
  auto *iwork = reinterpret_cast<lapack_int *>(work + L.iwork);
  auto *eiw = reinterpret_cast<lapack_int *>(work + L.eiw);
  const uint64_t seed = topkSeed(m, n, k);
  const auto M = static_cast<blasint>(m), N = static_cast<blasint>(n);
  // The scale: the Krylov recurrence and the Gram matrix square σ₁, so for σ₁ outside
  // about [1e-150, 1e150] they would underflow or overflow (below, the stop test's sums
  // of squares read 0 and wrong triplets passed it). Where max|A_ij| is outside
  // [2⁻³⁰⁰, 2³⁰⁰], every product with A is one with α·A, α = 2⁻ᵉ (exact; the block is
  // scaled before the product, so a subnormal A loses no more bits than it has), and
  // the singular values are divided by α at the end; elsewhere α = 1 and nothing changes.
  if (aMaxAbs < 0) {
    aMaxAbs = 0;
    for (int64_t i = 0; i < m * n; ++i) aMaxAbs = std::max(aMaxAbs, std::fabs(A[i]));
  }
  const double alpha = svdWorkingScale(aMaxAbs);
  auto scaleRows = [&](double *X, int64_t rows, int64_t pw) {
    if (alpha != 1)
      for (int64_t i = 0; i < rows * pw; ++i) X[i] *= alpha;
  };

  auto fallback = [&]() {
    FullSvd f = fullSvd(A, m, n);
    out.lapackInfo = f.info;
    out.fallback = true;
    out.residual = 0;
    gTopkFallbacks.fetch_add(1, std::memory_order_relaxed);
    if (f.info != 0) return out;
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(Uout + i * k, f.U.data() + i * K, static_cast<size_t>(k) * sizeof(double));
    std::memcpy(sout, f.s.data(), static_cast<size_t>(k) * sizeof(double));
    std::memcpy(Vtout, f.Vt.data(), static_cast<size_t>(k * n) * sizeof(double));
    return out;
  };
  // The products with A and with the basis go through runtime/Multivector.h: blocks of
  // a few columns, column-major here, row-major there with the columns padded by zeros
  // to p4 (a multiple of 4), in Xr, Yr and H.
  auto toRows = [](const double *cols, int64_t rows, int64_t w, int64_t pw, double *out) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < w; ++j) out[i * pw + j] = cols[j * rows + i];
      for (int64_t j = w; j < pw; ++j) out[i * pw + j] = 0.0;
    }
  };
  auto toCols = [](const double *in, int64_t rows, int64_t w, int64_t pw, double *cols) {
    for (int64_t j = 0; j < w; ++j)
      for (int64_t i = 0; i < rows; ++i) cols[j * rows + i] = in[i * pw + j];
  };
  // Y[:, :w] −= Qb[:, :cc]·(Qb[:, :cc]ᵀ·Y[:, :w]), `passes` times (block classical
  // Gram–Schmidt). Qb (m×cc column-major) is the row-major cc×m Qbᵀ.
  auto project = [&](int64_t cc, int64_t w, int passes) {
    if (cc == 0 || passes == 0) return;
    const int64_t pw = (w + 3) / 4 * 4;
    toRows(Y, m, w, pw, Xr);
    for (int pass = 0; pass < passes; ++pass) {
      matMultivector(Qb, cc, m, Xr, pw, H);  // H = Qbᵀ·Y (cc×pw)
      matTMultivector(Qb, cc, m, H, pw, Yr); // Qb·H (m×pw)
      for (int64_t i = 0; i < m * pw; ++i) Xr[i] -= Yr[i];
    }
    toCols(Xr, m, w, pw, Y);
  };
  // Householder QR of Y[:, :w] into Q (m×w, orthonormal); false when a column of R is
  // at most `rel` times ref[j] (1 without ref): a column dependent on the others or on
  // Qb at that level, flagged in bad[j].
  auto qr = [&](double *Q, int64_t w, const double *ref, double rel, lapack_int &info) {
    std::memcpy(Q, Y, static_cast<size_t>(m * w) * sizeof(double));
    info = LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, M, static_cast<lapack_int>(w), Q, M, tau, qw,
                               static_cast<lapack_int>(c.lworkQr));
    if (info != 0) return false;
    bool any = false;
    for (int64_t j = 0; j < w; ++j) {
      bad[j] = std::fabs(Q[j * m + j]) > rel * (ref != nullptr ? ref[j] : 1.0) ? 0 : 1;
      any = any || bad[j] != 0;
    }
    if (any) return false;
    info = LAPACKE_dorgqr_work(LAPACK_COL_MAJOR, M, static_cast<lapack_int>(w),
                               static_cast<lapack_int>(w), Q, M, tau, qw,
                               static_cast<lapack_int>(c.lworkQr));
    return info == 0;
  };
  // Qb[:, cc : cc + w] = an orthonormal basis of Y[:, :w] ⟂ Qb[:, :cc] (Y already projected
  // twice; y0 = its column norms before). The QR of a block whose columns are nearly
  // dependent among themselves (Krylov blocks are) multiplies what is left of Qb in them
  // by that dependence, so the orthonormal block is projected once more and factored
  // again (BCGS2: Barlow and Smoktunowicz, Numer. Math. 123, 395 (2013)). A column left
  // with at most 8ε of its norm before (an invariant subspace: A of rank below the basis)
  // is replaced by a Gaussian one, so the basis grows by directions orthogonal to it.
  // The bar is that low because a remainder of a few ε·√n is not always noise: in a
  // numerically low-rank A (a tail at the rounding level) it is the correction of the
  // leading left vectors, which the first block A·Ω fixes only to ε·‖ω‖/|vᵀω|, and
  // without it the Rayleigh–Ritz residuals stay near the tolerance (itself 8ε·√n). A
  // noise column kept is harmless: the second projection makes it a direction
  // orthogonal to the basis like a Gaussian one.
  constexpr lapack_int kNoBasis = std::numeric_limits<lapack_int>::min();
  constexpr double kDependent = 8 * kEps;
  auto extend = [&](int64_t cc, int64_t w) -> lapack_int {
    double *Q = Qb + cc * m;
    lapack_int info = 0;
    for (int attempt = 0; attempt < 4; ++attempt) {
      if (qr(Q, w, y0, kDependent, info)) {
        if (cc == 0) return 0;
        std::memcpy(Y, Q, static_cast<size_t>(m * w) * sizeof(double));
        project(cc, w, 1);
        if (qr(Q, w, nullptr, 0.5, info)) return 0;
      }
      if (info != 0) return info;
      for (int64_t j = 0; j < w; ++j) {
        if (bad[j] != 0)
          gaussianColumns(Y, m, j, j + 1,
                          seed ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(++out.drawn)));
        y0[j] = cblas_dnrm2(M, Y + j * m, 1);
      }
      project(cc, w, 2);
    }
    return kNoBasis;
  };
  // Rayleigh–Ritz on the basis Qb[:, :cc]: B = Qbᵀ·A = Zsᵀ with Zs = Aᵀ·Qb (n×cc), from
  // Zs = P·R (CholeskyQR2 of the column-scaled Zs) and the gesdd of the cc×cc
  // R = Zr·diag(σ)·VTs, or a gesdd of Zs where CholeskyQR2's checks fail. U = Qb·VTsᵀ,
  // V = P·Zr (m×k, n×k), then the true residuals ‖A·vᵢ − σᵢ·uᵢ‖ by one product of k
  // columns. Returns the largest, or −1 after a LAPACK failure (in out.lapackInfo).
  auto rayleighRitz = [&](int64_t cc) -> double {
    const auto C = static_cast<lapack_int>(cc);
    lapack_int info = 0;
    ++out.rayleighRitz;
    if (cholQr2(Zs, n, cc, P, Rb, G)) {
      ++out.cholQr;
      info = LAPACKE_dgesdd_work(LAPACK_COL_MAJOR, 'S', C, C, Rb, C, sv, Zr, C, VTs, C, lw,
                                 static_cast<lapack_int>(c.lworkSvd), iwork);
      if (info == 0)
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, N, static_cast<blasint>(k), C, 1.0,
                    P, N, Zr, C, 0.0, Vk, N);
    } else {
      std::memcpy(P, Zs, static_cast<size_t>(n * cc) * sizeof(double));
      info = LAPACKE_dgesdd_work(LAPACK_COL_MAJOR, 'S', N, C, P, N, sv, Vs, N, VTs, C, lw,
                                 static_cast<lapack_int>(c.lworkSvd), iwork);
      if (info == 0) std::memcpy(Vk, Vs, static_cast<size_t>(n * k) * sizeof(double));
    }
    if (info != 0) {
      out.lapackInfo = info;
      return -1;
    }
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, M, static_cast<blasint>(k), C, 1.0, Qb, M,
                VTs, C, 0.0, Uk, M);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, M, static_cast<blasint>(k), N, alpha, A, N,
                Vk, N, 0.0, W, M);
    double res = 0;
    for (int64_t i = 0; i < k; ++i) {
      double ss = 0;
      const double *w = W + i * m, *u = Uk + i * m;
      for (int64_t r = 0; r < m; ++r) {
        const double d = w[r] - sv[i] * u[r];
        ss += d * d;
      }
      res = std::max(res, std::sqrt(ss));
    }
    return res;
  };

  // Yc (m×w) = A·X with X n×w, and Zc (n×w) = Aᵀ·Q with Q m×w.
  auto mulA = [&](const double *X, int64_t w, double *Yc) {
    const int64_t pw = (w + 3) / 4 * 4;
    toRows(X, n, w, pw, Xr);
    scaleRows(Xr, n, pw);
    matMultivector(A, m, n, Xr, pw, Yr);
    toCols(Yr, m, w, pw, Yc);
  };
  auto mulAt = [&](const double *Q, int64_t w, double *Zc) {
    const int64_t pw = (w + 3) / 4 * 4;
    toRows(Q, m, w, pw, Xr);
    scaleRows(Xr, m, pw);
    matTMultivector(A, m, n, Xr, pw, Yr);
    toCols(Yr, n, w, pw, Zc);
  };
  // X (len×w, column-major) −= B·(Bᵀ·X) twice, B = the len×k column-major Uk or Vk.
  auto projectOut = [&](const double *B, int64_t len, double *X, int64_t w) {
    const auto L = static_cast<blasint>(len), Kk = static_cast<blasint>(k),
               Wb = static_cast<blasint>(w);
    for (int pass = 0; pass < 2; ++pass) {
      cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, Kk, Wb, L, 1.0, B, L, X, L, 0.0, H, Kk);
      cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, L, Wb, Kk, -1.0, B, L, H, Kk, 1.0, X, L);
    }
  };
  // The probe after a passing Rayleigh–Ritz step (Uk, sv, Vk hold the k triplets): a
  // block Krylov space holds at most p directions of an exactly degenerate multiplet
  // (A·Aᵀ is a multiple of the identity on it), so a multiplet of more than p copies
  // among the k leaves the others out, and the triplets found in their place are true
  // triplets of A with small residuals that no residual test can reject. An independent
  // Gaussian block x ⟂ V (the sketch's columns p … 2p−1) and one power step of
  // A⊥ = A − U·S·Vᵀ, y = A⊥·x, z = A⊥ᵀ·y, give ‖A⊥·z‖/‖z‖ <= σ_max(A⊥) (up to ε·√n·σ₁:
  // y and z are projected off U and V, so the rounding of the products does not reach
  // back into the kept triplets); a value above s_k by more than the tolerance is a
  // triplet the basis missed. Three products of p columns; true means fall back. Not
  // needed when the basis is all of ℝᵐ or the k triplets are all of A's.
  auto missedTriplet = [&](double s1) {
    double *X = P, *Z = Vs, *AZ = Qb; // free after the Rayleigh–Ritz step
    std::memcpy(X, c.sketch->data() + n * p, static_cast<size_t>(n * p) * sizeof(double));
    projectOut(Vk, n, X, p);
    mulA(X, p, Y);
    projectOut(Uk, m, Y, p);
    mulAt(Y, p, Z);
    projectOut(Vk, n, Z, p);
    mulA(Z, p, AZ);
    projectOut(Uk, m, AZ, p);
    double est = 0;
    for (int64_t j = 0; j < p; ++j) {
      const double zn = cblas_dnrm2(N, Z + j * n, 1);
      if (zn > 0) est = std::max(est, cblas_dnrm2(M, AZ + j * m, 1) / zn);
    }
    out.probe = est / alpha;
    return est > sv[k - 1] + c.tol * s1;
  };

  // The first block: Qb[:, :p] = orth(A·Ω).
  int64_t w = std::min(p, K);
  mulA(c.sketch->data(), w, Y);
  for (int64_t j = 0; j < w; ++j) y0[j] = cblas_dnrm2(M, Y + j * m, 1);
  scaleFloor *= alpha;
  if (lapack_int info = extend(0, w); info != 0) {
    if (info == kNoBasis) return fallback();
    out.lapackInfo = info;
    return out;
  }
  int64_t cc = w;
  for (int it = 1;; ++it) {
    const int64_t c0 = cc - w; // the newest block is Qb[:, c0 : cc]
    // Zs[:, c0 : cc] = Aᵀ·Qb[:, c0 : cc]; the Gram matrix's new columns Zsᵀ·Zs[:, c0 : cc].
    mulAt(Qb + c0 * m, w, Zs + c0 * n);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, static_cast<blasint>(cc),
                static_cast<blasint>(w), N, 1.0, Zs, N, Zs + c0 * n, N, 0.0, Gm + c0 * cm,
                static_cast<blasint>(cm));
    out.iterations = it;
    out.sketch = cc;
    gTopkIterations.fetch_add(1, std::memory_order_relaxed);
    // The next block: Y = A·Zs[:, c0 : cc] ⟂ Qb. Its projected part (Y after `project`, until `extend`) is all of
    // (I − Qb·Qbᵀ)·A·Zs, so for a Ritz vector v = Zs·z/σ (z an eigenvector of the Gram
    // matrix Zsᵀ·Zs = B·Bᵀ) the residual A·v − σ·u = Y·z[c0 : cc]/σ costs no product.
    mulA(Zs + c0 * n, w, Y);
    for (int64_t j = 0; j < w; ++j) y0[j] = cblas_dnrm2(M, Y + j * m, 1);
    project(cc, w, 2);
    double est = 0, scale = 0;
    if (cc >= k) {
      // The estimate, from the Gram matrix's eigenpairs (σ² to ε·σ₁², enough to decide
      // when to do the Rayleigh–Ritz step, whose true residuals decide the stop).
      for (int64_t j = 0; j < cc; ++j)
        std::memcpy(Ev + j * cc, Gm + j * cm, static_cast<size_t>(j + 1) * sizeof(double));
      lapack_int info = LAPACKE_dsyevd_work(LAPACK_COL_MAJOR, 'V', 'U', static_cast<lapack_int>(cc),
                                            Ev, static_cast<lapack_int>(cc), lam, ew,
                                            static_cast<lapack_int>(c.lworkEig), eiw,
                                            static_cast<lapack_int>(c.liworkEig));
      if (info != 0) {
        out.lapackInfo = info;
        return out;
      }
      scale = std::max(std::sqrt(std::max(lam[cc - 1], 0.0)), scaleFloor);
      const double tiny = c.tol * scale > 0 ? c.tol * scale : std::numeric_limits<double>::min();
      // H (w×k) = z[c0 : cc]/σ for the k largest; W = Y·H. A Ritz value at most tol·scale
      // (A of rank below k) has no Ritz vector to speak of: it counts as converged here,
      // and the true residual decides.
      for (int64_t i = 0; i < k; ++i) {
        const double sig = std::sqrt(std::max(lam[cc - 1 - i], 0.0));
        for (int64_t r = 0; r < w; ++r)
          H[i * w + r] = sig > tiny ? Ev[(cc - 1 - i) * cc + c0 + r] / sig : 0.0;
      }
      cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, M, static_cast<blasint>(k),
                  static_cast<blasint>(w), 1.0, Y, M, H, static_cast<blasint>(w), 0.0, W, M);
      for (int64_t i = 0; i < k; ++i) est = std::max(est, cblas_dnrm2(M, W + i * m, 1));
    }
    // The Rayleigh–Ritz step when the estimates pass, when the basis is all of K (then
    // it is a full SVD), and before giving up at the cap or the budget (an estimate from
    // the Gram matrix can stay above the tolerance for Ritz values near √ε·σ₁ whose
    // true residuals are below it).
    const int64_t wn = std::min({w, K - cc, cm - cc});
    const bool last = wn <= 0 || it >= c.maxIter;
    if (cc >= k && (est <= c.tol * scale || cc == K || last)) {
      const double res = rayleighRitz(cc);
      if (res < 0) return out;
      const double s1 = std::max(sv[0], scaleFloor);
      if (res <= c.tol * s1) {
        if (cc < m && k < K && missedTriplet(s1)) {
          out.missed = true;
          return fallback();
        }
        out.residual = s1 > 0 ? res / s1 : 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < k; ++j) Uout[i * k + j] = Uk[j * m + i];
        for (int64_t i = 0; i < k; ++i) sout[i] = sv[i] / alpha;
        std::memcpy(Vtout, Vk, static_cast<size_t>(k * n) * sizeof(double));
        return out;
      }
    }
    if (last) return fallback();
    if (lapack_int info = extend(cc, wn); info != 0) {
      if (info == kNoBasis) return fallback();
      out.lapackInfo = info;
      return out;
    }
    cc += wn;
    w = wn;
  }
}

TruncatedSvdStats truncatedSvdStats() {
  TruncatedSvdStats s;
  s.topkCalls = gTopkCalls.load(std::memory_order_relaxed);
  s.topkIterations = gTopkIterations.load(std::memory_order_relaxed);
  s.topkFallbacks = gTopkFallbacks.load(std::memory_order_relaxed);
  s.complementCalls = gComplementCalls.load(std::memory_order_relaxed);
  s.complementIterations = gComplementIterations.load(std::memory_order_relaxed);
  s.complementFallbacks = gComplementFallbacks.load(std::memory_order_relaxed);
  s.complementBroadened = gComplementBroadened.load(std::memory_order_relaxed);
  return s;
}

} // namespace tessel::rt
