//===- runtime/TruncatedSvd.cpp - Top-k SVD (randomized block Krylov) -----------===//
//
// See TruncatedSvd.h for the algorithm. This file sizes topkSvd (its config, memoised,
// and its workspace layout) and keeps the shared helpers and counters; the iteration
// itself, step by step, is runtime/BlockKrylovSvd.{h,cpp}. The complement of its
// pullback (svdComplement) is in runtime/SvdComplement.cpp; what they share,
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
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <cblas.h>
#include <lapacke.h>

#include "ir/ShapeRules.h"
#include "runtime/BlockKrylovSvd.h"
#include "runtime/Runtime.h"
#include "runtime/TruncatedSvdInternal.h"

namespace tessel::rt {

namespace svd_detail {

std::atomic<int64_t> gTopkCalls{0}, gTopkIterations{0}, gTopkFallbacks{0};
std::atomic<int64_t> gComplementCalls{0}, gComplementIterations{0}, gComplementFallbacks{0};
std::atomic<int64_t> gComplementBroadened{0};

} // namespace svd_detail


namespace {

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

} // namespace

namespace svd_detail {

namespace {
/// splitmix64 (Steele, Lea, Flood 2014): a counter-based stream, the same on every
/// machine and thread.
uint64_t splitmix(uint64_t &x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

} // namespace

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

uint64_t topkSeed(int64_t m, int64_t n, int64_t k) {
  return 0x7e55e1ULL ^ (static_cast<uint64_t>(m) << 40) ^ (static_cast<uint64_t>(n) << 20) ^
         static_cast<uint64_t>(k);
}

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
  if (c.k <= 0) return {};
  gTopkCalls.fetch_add(1, std::memory_order_relaxed);
  return svd_detail::BlockKrylovSvd(c, A, work, aMaxAbs).run(Uout, sout, Vtout, scaleFloor);
}

TopkSvdOutcome topkSvd(const TopkSvdConfig &c, const LinearOperator &op, double *Uout, double *sout,
                       double *Vtout, double *work, double scaleFloor) {
  if (op.rows() != c.m || op.cols() != c.n)
    throw std::logic_error("topkSvd: a " + std::to_string(op.rows()) + "x" + std::to_string(op.cols()) +
                           " operator for a config of " + std::to_string(c.m) + "x" + std::to_string(c.n));
  if (c.k <= 0) return {};
  gTopkCalls.fetch_add(1, std::memory_order_relaxed);
  return svd_detail::BlockKrylovSvd(c, op, work).run(Uout, sout, Vtout, scaleFloor);
}

void LinearOperator::materialize(double *out) const {
  // A·E for blocks E of the identity's columns: Y (m×b) holds columns j0 … j0+b−1 of A.
  const int64_t m = m_, n = n_, b = std::min<int64_t>(n, 64);
  std::vector<double> E(static_cast<size_t>(n * b)), Y(static_cast<size_t>(m * b));
  for (int64_t j0 = 0; j0 < n; j0 += b) {
    const int64_t w = std::min(b, n - j0);
    std::fill(E.begin(), E.end(), 0.0);
    for (int64_t j = 0; j < w; ++j) E[static_cast<size_t>((j0 + j) * b + j)] = 1.0;
    apply(E.data(), b, Y.data());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < w; ++j) out[i * n + j0 + j] = Y[static_cast<size_t>(i * b + j)];
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
