// The truncated-SVD kernels (runtime/TruncatedSvd.h): topkSvd's triplets against
// LAPACK's on matrices with prescribed spectra (geometric decay, a multiplet split by
// the cut, a flat spectrum that must fall back), and svd_topk_complement against the
// reference evaluator's full-SVD definition; the counters count what happened.
#include <cmath>
#include <random>
#include <tuple>
#include <utility>

#include <doctest/doctest.h>
#include <lapacke.h>

#include "ir/Builder.h"
#include "runtime/Runtime.h"
#include "runtime/TruncatedSvd.h"
#include "tests/runtime/rt_testutil.h"

using namespace tessel;
using ir::Tensor;
using ir::Type;
using namespace rttest;

namespace {

/// An m×n matrix with singular values d (size min(m, n)): P·diag(d)·Q with P, Q
/// products of two Householder reflections each (orthogonal).
Tensor withSpectrum(int64_t m, int64_t n, const std::vector<double> &d, std::mt19937_64 &rng) {
  auto reflections = [&](int64_t N) {
    std::vector<double> h(static_cast<size_t>(N * N), 0.0);
    for (int64_t i = 0; i < N; ++i) h[i * N + i] = 1;
    for (int t = 0; t < 2; ++t) {
      Tensor w = randomTensor(Type({N}), rng);
      double nn = 0;
      for (double x : w.data) nn += x * x;
      std::vector<double> r(static_cast<size_t>(N * N));
      for (int64_t i = 0; i < N; ++i)
        for (int64_t j = 0; j < N; ++j) r[i * N + j] = (i == j) - 2 * w.data[i] * w.data[j] / nn;
      h = matmul(h, r, N, N, N);
    }
    return h;
  };
  std::vector<double> D(static_cast<size_t>(m * n), 0.0);
  for (size_t i = 0; i < d.size(); ++i) D[i * static_cast<size_t>(n) + i] = d[i];
  return Tensor(Type({m, n}), matmul(matmul(reflections(m), D, m, m, n), reflections(n), m, n, n));
}

struct Topk {
  std::vector<double> U, s, Vt;
  rt::TopkSvdOutcome out;
};

Topk runTopk(const Tensor &A, int64_t k) {
  const int64_t m = A.type.shape[0], n = A.type.shape[1];
  rt::TopkSvdConfig c = rt::topkSvdConfig(m, n, k);
  std::vector<double> work(static_cast<size_t>(c.workElems));
  Topk t;
  t.U.resize(static_cast<size_t>(m * k));
  t.s.resize(static_cast<size_t>(k));
  t.Vt.resize(static_cast<size_t>(k * n));
  t.out = rt::topkSvd(c, A.data.data(), t.U.data(), t.s.data(), t.Vt.data(), work.data());
  return t;
}

/// max_i ‖A·v_i − s_i·u_i‖ / s_0 and max_i ‖Aᵀ·u_i − s_i·v_i‖ / s_0.
std::pair<double, double> residuals(const Tensor &A, const Topk &t, int64_t k) {
  const int64_t m = A.type.shape[0], n = A.type.shape[1];
  double r1 = 0, r2 = 0;
  for (int64_t i = 0; i < k; ++i) {
    double a = 0, b = 0;
    for (int64_t r = 0; r < m; ++r) {
      double av = 0;
      for (int64_t c = 0; c < n; ++c) av += A.data[r * n + c] * t.Vt[i * n + c];
      a += (av - t.s[i] * t.U[r * k + i]) * (av - t.s[i] * t.U[r * k + i]);
    }
    for (int64_t c = 0; c < n; ++c) {
      double au = 0;
      for (int64_t r = 0; r < m; ++r) au += A.data[r * n + c] * t.U[r * k + i];
      b += (au - t.s[i] * t.Vt[i * n + c]) * (au - t.s[i] * t.Vt[i * n + c]);
    }
    r1 = std::max(r1, std::sqrt(a));
    r2 = std::max(r2, std::sqrt(b));
  }
  return {r1 / t.s[0], r2 / t.s[0]};
}

/// max |UᵀU − I| and max |Vt·Vtᵀ − I| of the k computed triplets.
std::pair<double, double> orthonormality(const Topk &t, int64_t m, int64_t n, int64_t k) {
  double eu = 0, ev = 0;
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j) {
      double gu = 0, gv = 0;
      for (int64_t r = 0; r < m; ++r) gu += t.U[r * k + i] * t.U[r * k + j];
      for (int64_t c = 0; c < n; ++c) gv += t.Vt[i * n + c] * t.Vt[j * n + c];
      eu = std::max(eu, std::fabs(gu - (i == j)));
      ev = std::max(ev, std::fabs(gv - (i == j)));
    }
  return {eu, ev};
}

} // namespace

TEST_CASE("svd_topk kernel: k leading triplets to the residual tolerance, deterministic") {
  std::mt19937_64 rng(11);
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{200, 200, 10}, {300, 180, 12},
                         {160, 320, 8}}) {
    CAPTURE(m);
    CAPTURE(n);
    const int64_t K = std::min(m, n);
    std::vector<double> d(static_cast<size_t>(K));
    for (int64_t i = 0; i < K; ++i) d[i] = 3.0 * std::pow(0.8, static_cast<double>(i));
    Tensor A = withSpectrum(m, n, d, rng);
    Topk t = runTopk(A, k);
    CHECK(t.out.lapackInfo == 0);
    CHECK_FALSE(t.out.fallback);
    for (int64_t i = 0; i < k; ++i) CHECK(std::fabs(t.s[i] - d[i]) <= 1e-13 * d[0]);
    auto [r1, r2] = residuals(A, t, k);
    const double tol = rt::topkSvdConfig(m, n, k).tol;
    CHECK(r1 <= 2 * tol);
    CHECK(r2 <= 2 * tol);
    MESSAGE(m << "x" << n << " k=" << k << ": " << t.out.iterations << " blocks, basis "
              << t.out.sketch << ", residuals " << r1 << ", " << r2);
    auto [eu, ev] = orthonormality(t, m, n, k);
    CHECK(eu <= 1e-14);
    CHECK(ev <= 1e-14);
    // The Gram matrix's estimate calls the Rayleigh–Ritz step once, when the true
    // residuals are below the tolerance, and CholeskyQR2 factors the basis there; the
    // Krylov space never closes (A has full rank).
    CHECK(t.out.rayleighRitz == 1);
    CHECK(t.out.cholQr == 1);
    CHECK(t.out.drawn == 0);
    Topk again = runTopk(A, k);
    CHECK(again.U == t.U);
    CHECK(again.s == t.s);
    CHECK(again.Vt == t.Vt);
  }
}

TEST_CASE("svd_topk kernel: rank-deficient A (the Krylov space closes; zero singular values among the k)") {
  // Once the basis holds A's range, the next block is rounding: its columns are
  // replaced by Gaussian ones (counted in `drawn`), and the basis keeps growing
  // orthogonal to itself. With rank < k the last k − rank triplets are zero singular
  // values whose vectors span null spaces: the triplets, their residuals and their
  // orthonormality are still those of a full SVD.
  std::mt19937_64 rng(13);
  for (int64_t rank : {3, 6, 12, 16, 30}) {
    CAPTURE(rank);
    std::vector<double> d(120, 0.0);
    for (int64_t i = 0; i < rank; ++i) d[i] = std::pow(0.5, static_cast<double>(i));
    Tensor A = withSpectrum(120, 150, d, rng);
    Topk t = runTopk(A, 10);
    CHECK(t.out.lapackInfo == 0);
    CHECK_FALSE(t.out.fallback);
    for (int64_t i = 0; i < 10; ++i) CHECK(std::fabs(t.s[i] - d[i]) <= 1e-13);
    auto [r1, r2] = residuals(A, t, 10);
    CHECK(r1 <= 2 * rt::topkSvdConfig(120, 150, 10).tol);
    CHECK(r2 <= 2 * rt::topkSvdConfig(120, 150, 10).tol);
    auto [eu, ev] = orthonormality(t, 120, 150, 10);
    CHECK(eu <= 1e-14);
    CHECK(ev <= 1e-14);
    MESSAGE("rank " << rank << ": " << t.out.iterations << " blocks, basis " << t.out.sketch
                    << ", " << t.out.drawn << " Gaussian columns drawn");
    // Blocks of p = 8: with rank 3 or 6 the first block A·Ω already holds the range.
    if (rank < 8) CHECK(t.out.drawn > 0);
  }
}

TEST_CASE("svd_topk kernel: numerically low rank (a tail at the rounding level) converges without gesdd") {
  // A few leading singular values (a multiplet of 1, 2 or 10) over a tail of 1e-16 …
  // 1e-13: the first block A·Ω fixes the leading left vectors only to ε·‖Ω‖/|vᵀω|, and
  // the next block's remainder that corrects them is a few ε·√n of its norm, the size
  // of the residual tolerance itself. Kept as a direction, it lets the Rayleigh–Ritz
  // step reach the tolerance; dropped as rounding, the leading residual stayed at about
  // twice the tolerance and every such matrix went to gesdd.
  std::mt19937_64 rng(16);
  const int64_t n = 120;
  for (int64_t mult : {1, 2, 10}) {
    for (double tail : {1e-16, 1e-14, 1e-13}) {
      CAPTURE(mult);
      CAPTURE(tail);
      std::vector<double> d(n);
      for (int64_t i = 0; i < n; ++i)
        d[i] = i < mult ? 1.0 : tail * std::pow(0.95, static_cast<double>(i));
      Tensor A = withSpectrum(n, n, d, rng);
      for (int64_t k : {4, 10}) {
        CAPTURE(k);
        Topk t = runTopk(A, k);
        CHECK(t.out.lapackInfo == 0);
        CHECK_FALSE(t.out.fallback);
        for (int64_t i = 0; i < k; ++i) CHECK(std::fabs(t.s[i] - d[i]) <= 1e-13);
        auto [r1, r2] = residuals(A, t, k);
        const double tol = rt::topkSvdConfig(n, n, k).tol;
        CHECK(r1 <= 2 * tol);
        CHECK(r2 <= 2 * tol);
        auto [eu, ev] = orthonormality(t, n, n, k);
        CHECK(eu <= 1e-14);
        CHECK(ev <= 1e-14);
        // The whole multiplet kept: Aᵀ·Qb has the 10 columns of the range and columns
        // at the tail's level, too ill-conditioned for CholeskyQR2 even column-scaled,
        // so the Rayleigh–Ritz step takes its gesdd branch.
        if (mult == 10 && k == 10) CHECK(t.out.cholQr < t.out.rayleighRitz);
      }
    }
  }
}

TEST_CASE("svd_topk kernel: a multiplet of more than p copies among the k is not lost (the probe)") {
  // M copies of 1, the rest of the k from 0.8 down, a tail at 0.2 … 0.1. A block
  // Krylov space holds at most p = 8 directions of an exactly degenerate multiplet (only
  // rounding adds more, over many blocks), so with M > 8 the basis can lack copies and
  // the Rayleigh–Ritz step then returns smaller true triplets in their place, with
  // residuals far below the tolerance: at 64×300 and 300×64, k = M = 24, 16 of the 24
  // copies came back with the residual test passed. The probe (one power step of
  // A − U·S·Vᵀ from an independent block) sees a singular value above s_k there and
  // sends the call to gesdd. Whatever path a case takes (here also the budget's
  // fallbacks of this slowly decaying tail), the k values are A's.
  std::mt19937_64 rng(17);
  int misses = 0;
  for (auto [m, n] : {std::pair<int64_t, int64_t>{200, 200}, {64, 300}, {300, 64}}) {
    for (auto [k, M] : {std::pair<int64_t, int64_t>{10, 4}, {10, 8}, {10, 10}, {16, 9}, {16, 12},
                        {24, 8}, {24, 16}, {24, 24}}) {
      CAPTURE(m);
      CAPTURE(n);
      CAPTURE(k);
      CAPTURE(M);
      const int64_t K = std::min(m, n);
      std::vector<double> d(static_cast<size_t>(K));
      for (int64_t i = 0; i < K; ++i)
        d[i] = i < M   ? 1.0
               : i < k ? 0.8 * std::pow(0.97, static_cast<double>(i - M))
                       : 0.2 * (1.0 - 0.5 * static_cast<double>(i - k) / static_cast<double>(K));
      Tensor A = withSpectrum(m, n, d, rng);
      const rt::TruncatedSvdStats before = rt::truncatedSvdStats();
      Topk t = runTopk(A, k);
      const rt::TruncatedSvdStats after = rt::truncatedSvdStats();
      REQUIRE(rt::topkSvdConfig(m, n, k).b0 == 8);
      CHECK(t.out.lapackInfo == 0);
      for (int64_t i = 0; i < k; ++i) CHECK(std::fabs(t.s[i] - d[i]) <= 1e-13);
      auto [r1, r2] = residuals(A, t, k);
      CHECK(r1 <= 2 * rt::topkSvdConfig(m, n, k).tol);
      CHECK(r2 <= 2 * rt::topkSvdConfig(m, n, k).tol);
      if (M <= 8) CHECK_FALSE(t.out.missed);
      if (t.out.missed) {
        ++misses;
        CHECK(t.out.fallback);
        CHECK(t.out.probe > d[static_cast<size_t>(k)] * 4); // a copy of 1 against the tail's 0.2
        CHECK(after.topkFallbacks - before.topkFallbacks == 1);
      } else if (!t.out.fallback && t.out.probe > 0) {
        // A probe that found nothing measured σ_max(A − U·S·Vᵀ) = d[k] from below.
        CHECK(t.out.probe <= d[static_cast<size_t>(k)] * (1 + 1e-12));
        CHECK(t.out.probe >= 0.5 * d[static_cast<size_t>(k)]);
      }
      if (k == 24 && M == 24 && m != n) CHECK(t.out.missed);
    }
  }
  CHECK(misses == 2);
}

TEST_CASE("svd_topk kernel: any scale of A from 1e-280 to 1e280 (products scaled by a power of 2)") {
  // The Krylov recurrence and its Gram matrix square σ₁: unscaled, below σ₁ ~ 1e-154
  // they underflowed and wrong triplets passed the stop test (the sums of squares read
  // 0); above ~1e155 the Gram matrix overflowed into a LAPACK failure. c·A must give
  // c·s and the same vectors' quality at every c; at c = 1 nothing is scaled.
  std::mt19937_64 rng(19);
  const int64_t m = 200, n = 160, k = 10;
  std::vector<double> d(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) d[i] = std::pow(0.8, static_cast<double>(i));
  const Tensor A0 = withSpectrum(m, n, d, rng);
  const Topk ref = runTopk(A0, k);
  for (double c : {1e-280, 1e-200, 1e-170, 1e-160, 1e-100, 1.0, 1e100, 1e155, 1e200, 1e280}) {
    CAPTURE(c);
    Tensor A = A0;
    for (double &x : A.data) x *= c;
    Topk t = runTopk(A, k);
    CHECK(t.out.lapackInfo == 0);
    CHECK_FALSE(t.out.fallback);
    for (int64_t i = 0; i < k; ++i) CHECK(std::fabs(t.s[i] / c - d[i]) <= 1e-13);
    // The residuals of the triplets against A0 (s/c): scale-free, no underflow in the check.
    Topk unscaled = t;
    for (double &x : unscaled.s) x /= c;
    auto [r1, r2] = residuals(A0, unscaled, k);
    CHECK(r1 <= 2 * rt::topkSvdConfig(m, n, k).tol);
    CHECK(r2 <= 2 * rt::topkSvdConfig(m, n, k).tol);
    auto [eu, ev] = orthonormality(t, m, n, k);
    CHECK(eu <= 1e-14);
    CHECK(ev <= 1e-14);
    if (c == 1e100 || c == 1e-100) {
      // Inside [2⁻³⁰⁰, 2³⁰⁰] nothing is scaled: c is not a power of 2, but the path (blocks,
      // basis) is that of c = 1.
      CHECK(t.out.iterations == ref.out.iterations);
      CHECK(t.out.sketch == ref.out.sketch);
    }
  }
}

TEST_CASE("svd_topk kernel: a basis that reaches min(m, n) is exact (33x56, k = 10, slow decay)") {
  // A slowly decaying spectrum makes the Krylov basis grow to all 33 columns, where
  // the Rayleigh–Ritz step is a full SVD (gesdd's workspace is not monotone in the
  // column count: the config sizes it for every basis).
  std::mt19937_64 rng(15);
  std::vector<double> d(33);
  for (int64_t i = 0; i < 33; ++i) d[i] = 1.0 - 0.01 * static_cast<double>(i);
  Tensor A = withSpectrum(33, 56, d, rng);
  Topk t = runTopk(A, 10);
  CHECK(t.out.lapackInfo == 0);
  CHECK_FALSE(t.out.fallback);
  for (int64_t i = 0; i < 10; ++i) CHECK(std::fabs(t.s[i] - d[i]) <= 1e-13);
  auto [r1, r2] = residuals(A, t, 10);
  CHECK(r1 <= 2 * rt::topkSvdConfig(33, 56, 10).tol);
  CHECK(r2 <= 2 * rt::topkSvdConfig(33, 56, 10).tol);
  MESSAGE("33x56 k=10: basis " << t.out.sketch << ", " << t.out.iterations << " blocks");
}

TEST_CASE("svd_topk kernel: gesdd's workspace covers every basis the Rayleigh–Ritz step can factor") {
  // gesdd's workspace is not monotone in the column count: at 200x200, k = 17 (p = 8,
  // bases up to 110 columns) the 200x96 … 200x109 factors take the QR-first path and
  // need more than the 200x110 one.
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{200, 200, 17}, {300, 180, 12},
                         {160, 320, 8}, {1024, 1024, 48}}) {
    CAPTURE(m);
    CAPTURE(k);
    const rt::TopkSvdConfig c = rt::topkSvdConfig(m, n, k);
    for (int64_t cc = c.b0; cc <= c.bmax; ++cc) {
      double wq = 0, dummy = 0;
      lapack_int iw = 0;
      REQUIRE(LAPACKE_dgesdd_work(LAPACK_COL_MAJOR, 'S', static_cast<lapack_int>(n),
                                  static_cast<lapack_int>(cc), &dummy, static_cast<lapack_int>(n),
                                  &dummy, &dummy, static_cast<lapack_int>(n), &dummy,
                                  static_cast<lapack_int>(cc), &wq, -1, &iw) == 0);
      CAPTURE(cc);
      CHECK(static_cast<double>(c.lworkSvd) >= wq);
    }
  }
}

TEST_CASE("svd_topk kernel: a multiplet split by the cut keeps the exact singular values") {
  std::mt19937_64 rng(12);
  const int64_t n = 120, k = 10;
  std::vector<double> d(n);
  for (int64_t i = 0; i < n; ++i) d[i] = std::pow(0.75, static_cast<double>(i));
  for (int64_t i = k - 2; i < k + 2; ++i) d[i] = d[k - 2]; // four equal values, two kept
  Tensor A = withSpectrum(n, n, d, rng);
  Topk t = runTopk(A, k);
  CHECK_FALSE(t.out.fallback);
  for (int64_t i = 0; i < k; ++i) CHECK(std::fabs(t.s[i] - d[i]) <= 1e-13);
  auto [r1, r2] = residuals(A, t, k);
  CHECK(r1 <= 2 * rt::topkSvdConfig(n, n, k).tol);
  CHECK(r2 <= 2 * rt::topkSvdConfig(n, n, k).tol);
}

TEST_CASE("svd_topk kernel: a flat spectrum falls back to gesdd, counted, with the same values") {
  std::mt19937_64 rng(13);
  const int64_t n = 160, k = 8;
  std::vector<double> d(n);
  for (int64_t i = 0; i < n; ++i) d[i] = 1.0 - 1e-4 * static_cast<double>(i);
  Tensor A = withSpectrum(n, n, d, rng);
  const rt::TruncatedSvdStats before = rt::truncatedSvdStats();
  Topk t = runTopk(A, k);
  const rt::TruncatedSvdStats after = rt::truncatedSvdStats();
  CHECK(t.out.fallback);
  CHECK(after.topkFallbacks - before.topkFallbacks == 1);
  CHECK(after.topkCalls - before.topkCalls == 1);
  for (int64_t i = 0; i < k; ++i) CHECK(std::fabs(t.s[i] - d[i]) <= 1e-13);
  auto [r1, r2] = residuals(A, t, k);
  CHECK(r1 <= 1e-13);
  CHECK(r2 <= 1e-13);
}

namespace {

/// The program (A, U, s, Vt, gU, gVt) -> (X, Yt) of one svd_topk_complement with r
/// cotangent columns, and its inputs: A, the kernel's top-(k + given) SVD of A (the
/// last `given` triplets are the guards), and Gaussian cotangents.
struct ComplementCase {
  ir::Program p;
  std::vector<Tensor> in;
};
ComplementCase complementCase(const Tensor &A, int64_t k, int64_t r, std::mt19937_64 &rng,
                              int64_t given, double eps) {
  const int64_t m = A.type.shape[0], n = A.type.shape[1], w = k + given;
  Topk t = runTopk(A, w);
  ComplementCase c;
  ir::Builder b(c.p);
  auto a = c.p.addInput("A", A.type);
  auto u = c.p.addInput("U", Type({m, w}));
  auto s = c.p.addInput("s", Type({w}));
  auto vt = c.p.addInput("Vt", Type({w, n}));
  auto gu = c.p.addInput("gU", Type({m, r}));
  auto gvt = c.p.addInput("gVt", Type({r, n}));
  auto xy = b.svdTopkComplement(a, u, s, vt, gu, gvt, eps, given);
  c.p.addOutput(xy[0]);
  c.p.addOutput(xy[1]);
  c.in = {A,
          Tensor(Type({m, w}), t.U),
          Tensor(Type({w}), t.s),
          Tensor(Type({w, n}), t.Vt),
          randomTensor(Type({m, r}), rng),
          randomTensor(Type({r, n}), rng)};
  return c;
}

/// complementCase's program by the engine and by the reference (the definition through
/// a full SVD); returns the largest difference relative to the largest reference entry,
/// over the first `columns` cotangent columns (X's columns, Yt's rows; all if negative).
double complementVsReference(const Tensor &A, int64_t k, int64_t r, std::mt19937_64 &rng,
                             int64_t given = 0, double eps = 1e-9, int64_t columns = -1) {
  ComplementCase cc = complementCase(A, k, r, rng, given, eps);
  const ir::Program &p = cc.p;
  const std::vector<Tensor> &in = cc.in;
  auto ref = rt::evaluateReference(p, in);
  rt::Engine e(1);
  auto got = e.run(*rt::prepare(p), in);
  const int64_t m = A.type.shape[0], n = A.type.shape[1], upTo = columns < 0 ? r : columns;
  double scale = 0, diff = 0;
  auto compare = [&](size_t o, int64_t at) {
    scale = std::max(scale, std::fabs(ref[o].data[at]));
    diff = std::max(diff, std::fabs(ref[o].data[at] - got[o].data[at]));
  };
  for (int64_t j = 0; j < upTo; ++j) {
    for (int64_t i = 0; i < m; ++i) compare(0, i * r + j);
    for (int64_t i = 0; i < n; ++i) compare(1, j * n + i);
  }
  return diff / scale;
}

} // namespace

TEST_CASE("svd_topk_complement kernel: equals the full rule's coupling to the discarded subspace") {
  std::mt19937_64 rng(14);
  SUBCASE("geometric spectrum, square and rectangular (null spaces)") {
    for (auto [m, n] : {std::pair<int64_t, int64_t>{100, 100}, {120, 70}, {60, 110}}) {
      const int64_t K = std::min(m, n);
      std::vector<double> d(static_cast<size_t>(K));
      for (int64_t i = 0; i < K; ++i) d[i] = std::pow(0.85, static_cast<double>(i));
      auto before = rt::truncatedSvdStats();
      CHECK(complementVsReference(withSpectrum(m, n, d, rng), 8, 8, rng) <= 1e-11);
      CHECK(complementVsReference(withSpectrum(m, n, d, rng), 8, 3, rng) <= 1e-11);
      CHECK(rt::truncatedSvdStats().complementFallbacks == before.complementFallbacks);
    }
  }
  SUBCASE("a close pair at the cut (gap 1e-4) is coupled explicitly with broadening") {
    std::vector<double> d(90);
    for (int64_t i = 0; i < 90; ++i) d[i] = std::pow(0.8, static_cast<double>(i));
    d[8] = d[7] * (1 - 1e-4);
    auto before = rt::truncatedSvdStats();
    CHECK(complementVsReference(withSpectrum(90, 90, d, rng), 8, 8, rng) <= 1e-10);
    CHECK(rt::truncatedSvdStats().complementFallbacks == before.complementFallbacks);
  }
  SUBCASE("guards given by the forward (svd_topk of k + g): the same coupling, no top-g SVD") {
    for (auto [m, n] : {std::pair<int64_t, int64_t>{100, 100}, {120, 70}, {60, 110}}) {
      CAPTURE(m);
      CAPTURE(n);
      const int64_t K = std::min(m, n);
      std::vector<double> d(static_cast<size_t>(K));
      for (int64_t i = 0; i < K; ++i) d[i] = std::pow(0.85, static_cast<double>(i));
      d[8] = d[7] * (1 - 1e-4); // a close pair at the cut, split between kept and guards
      const Tensor A = withSpectrum(m, n, d, rng);
      auto before = rt::truncatedSvdStats();
      CHECK(complementVsReference(A, 8, 8, rng, 4) <= 1e-10);
      CHECK(complementVsReference(A, 8, 3, rng, 4) <= 1e-10);
      auto after = rt::truncatedSvdStats();
      CHECK(after.complementFallbacks == before.complementFallbacks);
      // Only the two svd_topk{12} of the test ran a Krylov iteration: the complements
      // computed no guards.
      CHECK(after.topkCalls == before.topkCalls + 2);
    }
  }
  SUBCASE("a multiplet just below the cut, wider than the guards: CG needs one step per cluster") {
    std::vector<double> d(90);
    for (int64_t i = 0; i < 90; ++i) d[i] = std::pow(0.8, static_cast<double>(i));
    for (int64_t i = 8; i < 25; ++i) d[i] = 0.99 * d[7]; // 8 guards, 9 equal ones left
    auto before = rt::truncatedSvdStats();
    CHECK(complementVsReference(withSpectrum(90, 90, d, rng), 8, 8, rng) <= 1e-10);
    CHECK(rt::truncatedSvdStats().complementFallbacks == before.complementFallbacks);
  }
  SUBCASE("many distinct values just below the cut: CG's budget runs out, the full rule is used") {
    std::vector<double> d(90);
    for (int64_t i = 0; i < 90; ++i)
      d[i] = i < 8 ? std::pow(0.8, static_cast<double>(i)) : 0.8 * (0.999 - 1e-4 * static_cast<double>(i)) * std::pow(0.8, 6.0);
    auto before = rt::truncatedSvdStats();
    CHECK(complementVsReference(withSpectrum(90, 90, d, rng), 8, 8, rng) <= 1e-10);
    CHECK(rt::truncatedSvdStats().complementFallbacks == before.complementFallbacks + 1);
  }
  SUBCASE("gaps within 1e5 of the broadening: the tail takes the complex shift s_j + i*eps*s_0, "
          "whose real part is the full rule's Lorentzian") {
    // eps = 1e-5, spectrum 0.7^i: every gap of the tail (s_7 - s_12 = 0.068 and below)
    // is < 1e5*eps*s_0 = 1. Exact reciprocals would differ from the Lorentzian by
    // (eps*s_0/x)^2 ~ 1e-8 here, three orders above the tolerance asserted.
    for (auto [m, n] : {std::pair<int64_t, int64_t>{90, 90}, {120, 70}, {60, 110}}) {
      CAPTURE(m);
      CAPTURE(n);
      const int64_t K = std::min(m, n);
      std::vector<double> d(static_cast<size_t>(K));
      for (int64_t i = 0; i < K; ++i) d[i] = std::pow(0.7, static_cast<double>(i));
      const Tensor A = withSpectrum(m, n, d, rng);
      auto before = rt::truncatedSvdStats();
      CHECK(complementVsReference(A, 8, 8, rng, 0, 1e-5) <= 1e-11);
      CHECK(complementVsReference(A, 8, 8, rng, 4, 1e-5) <= 1e-11);
      auto after = rt::truncatedSvdStats();
      CHECK(after.complementFallbacks == before.complementFallbacks);
      CHECK(after.complementBroadened == before.complementBroadened + 2);
    }
  }
  SUBCASE("kept values at 1e-7 of s_0 (spectrum 0.1^i, eps = 1e-9): the complex shift, "
          "agreeing to the problem's conditioning") {
    // A backward-stable solve (the reference's full SVD included) perturbs A by ~eps_mach
    // * s_0, which moves column j of the answer by ~eps_mach * s_0 / s_j relative: 2e-9
    // for s_7 = 1e-7. Exact reciprocals would be off by (1e-9/1e-7)^2 = 1e-4.
    std::vector<double> d(90);
    for (int64_t i = 0; i < 90; ++i) d[i] = std::pow(0.1, static_cast<double>(i));
    const Tensor A = withSpectrum(90, 90, d, rng);
    auto before = rt::truncatedSvdStats();
    CHECK(complementVsReference(A, 8, 8, rng) <= 1e-7);
    auto after = rt::truncatedSvdStats();
    CHECK(after.complementFallbacks == before.complementFallbacks);
    CHECK(after.complementBroadened == before.complementBroadened + 1);
  }
  SUBCASE("a kept singular value of zero (rank 3, k = 5) takes the full rule's broadened 1/s") {
    // The kept s₃, s₄ and every discarded σ are rounding (~1e-17), so the columns of s₃
    // and s₄ are L(s_j − σ_i) of rounding: what each SVD library's rounding makes them.
    // The columns of the three nonzero values are defined and must agree.
    std::vector<double> d(40, 0.0);
    d[0] = 1;
    d[1] = 0.5;
    d[2] = 0.25;
    auto before = rt::truncatedSvdStats();
    CHECK(complementVsReference(withSpectrum(40, 40, d, rng), 5, 5, rng, 0, 1e-9, 3) <= 1e-10);
    CHECK(rt::truncatedSvdStats().complementFallbacks == before.complementFallbacks + 1);
    // Every triplet kept (k = min(m, n)): nothing is discarded (the full rule, should the
    // kernel fall back, has no discarded triplets to factor); what remains is the
    // null-space part of the longer side (a square A has none: X and Y are rounding
    // around 0 there, which no relative comparison can judge).
    for (auto [m, n] : {std::pair<int64_t, int64_t>{14, 12}, {12, 14}}) {
      CAPTURE(m);
      CAPTURE(n);
      std::vector<double> e(static_cast<size_t>(std::min(m, n)), 0.0);
      e[0] = 1, e[1] = 0.5, e[2] = 0.25;
      CHECK(complementVsReference(withSpectrum(m, n, e, rng), std::min(m, n), 3, rng, 0, 1e-9, 3) <= 1e-10);
    }
  }
}

TEST_CASE("svd_topk_complement kernel: NaN or inf in A is an error, in a cotangent makes X and Y NaN") {
  std::mt19937_64 rng(18);
  const int64_t m = 80, n = 60, k = 6, r = 6;
  std::vector<double> d(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) d[i] = std::pow(0.7, static_cast<double>(i));
  const ComplementCase cc = complementCase(withSpectrum(m, n, d, rng), k, r, rng, 0, 1e-9);
  const std::vector<Tensor> &in = cc.in;
  auto plan = rt::prepare(cc.p);
  rt::Engine e(1);
  {
    // The finite run first: the same plan gives finite values.
    auto got = e.run(*plan, in);
    for (const Tensor &o : got)
      for (double x : o.data) REQUIRE(std::isfinite(x));
  }
  {
    auto bad = in;
    bad[4].data[17] = std::numeric_limits<double>::quiet_NaN();
    const rt::TruncatedSvdStats before = rt::truncatedSvdStats();
    auto got = e.run(*plan, bad);
    const rt::TruncatedSvdStats after = rt::truncatedSvdStats();
    for (const Tensor &o : got)
      for (double x : o.data) CHECK(std::isnan(x));
    CHECK(after.complementCalls == before.complementCalls); // no solve, no fallback
    CHECK(after.complementFallbacks == before.complementFallbacks);
    bad = in;
    bad[5].data[3] = std::numeric_limits<double>::infinity();
    got = e.run(*plan, bad);
    for (const Tensor &o : got)
      for (double x : o.data) CHECK(std::isnan(x));
  }
  {
    auto bad = in;
    bad[0].data[123] = -std::numeric_limits<double>::infinity();
    std::string what;
    try {
      e.run(*plan, bad);
    } catch (const Error &err) {
      what = err.what();
    }
    CHECK(what.find("svd_topk_complement") != std::string::npos);
    CHECK(what.find("input matrix f64[80,60] contains NaN or inf") != std::string::npos);
  }
}

TEST_CASE("svd_topk_complement kernel: the same X and Y at any scale of A (1e-200 to 1e200)") {
  // X·S − A⊥·Y = F, Y·S − A⊥ᵀ·X = G with c·A (so c·S, c·A⊥) and the same cotangents
  // gives X/c, Y/c: the same iterations and c·X, c·Y equal to c = 1's. Unscaled, the
  // CG's inner products (fourth power of c) left all c outside [1e-75, 1e76] to a full
  // gesdd under a misleading reason ("not positive definite").
  std::mt19937_64 rng(20);
  const int64_t m = 120, n = 100, k = 8, r = 8;
  std::vector<double> d(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) d[i] = std::pow(0.8, static_cast<double>(i));
  const Tensor A0 = withSpectrum(m, n, d, rng);
  const Tensor gU = randomTensor(Type({m, r}), rng), gVt = randomTensor(Type({r, n}), rng);
  for (int64_t given : {0, 4}) {
    CAPTURE(given);
    auto solve = [&](double c, rt::SvdComplementOutcome &o) {
      Tensor A = A0;
      for (double &x : A.data) x *= c;
      Topk t = runTopk(A, k + given);
      rt::SvdComplementConfig cfg = rt::svdComplementConfig(m, n, k, r, given);
      std::vector<double> work(static_cast<size_t>(cfg.workElems)), X(static_cast<size_t>(m * r)),
          Yt(static_cast<size_t>(r * n));
      o = rt::svdComplement(cfg, 1e-9, A.data.data(), t.U.data(), t.s.data(), t.Vt.data(),
                            gU.data.data(), gVt.data.data(), X.data(), Yt.data(), work.data());
      X.insert(X.end(), Yt.begin(), Yt.end());
      return X;
    };
    rt::SvdComplementOutcome o1;
    const std::vector<double> ref = solve(1.0, o1);
    REQUIRE_FALSE(o1.fallback);
    double scale = 0;
    for (double x : ref) scale = std::max(scale, std::fabs(x));
    for (double c : {1e-200, 1e-80, 1e-20, 1e20, 1e80, 1e200}) {
      CAPTURE(c);
      rt::SvdComplementOutcome o;
      const std::vector<double> got = solve(c, o);
      CHECK(o.lapackInfo == 0);
      if (o.fallback) MESSAGE(std::string(o.fallbackReason));
      CHECK_FALSE(o.fallback);
      CHECK(o.iterations == o1.iterations);
      double diff = 0;
      for (size_t i = 0; i < ref.size(); ++i) diff = std::max(diff, std::fabs(c * got[i] - ref[i]));
      CHECK(diff <= 1e-12 * scale);
    }
  }
}

namespace {

/// (I − B·Bᵀ)·C with column c divided by s_c: B rows×k, C rows×r, both row-major.
std::vector<double> projectedOverS(const std::vector<double> &B, const std::vector<double> &C, int64_t rows,
                                   int64_t k, int64_t r, const std::vector<double> &s) {
  std::vector<double> T(static_cast<size_t>(k * r)), out(C);
  for (int64_t j = 0; j < k; ++j)
    for (int64_t c = 0; c < r; ++c)
      for (int64_t l = 0; l < rows; ++l) T[j * r + c] += B[l * k + j] * C[l * r + c];
  for (int64_t l = 0; l < rows; ++l)
    for (int64_t c = 0; c < r; ++c) {
      for (int64_t j = 0; j < k; ++j) out[l * r + c] -= B[l * k + j] * T[j * r + c];
      out[l * r + c] /= s[c];
    }
  return out;
}

std::vector<double> transposed(const std::vector<double> &M, int64_t rows, int64_t cols) {
  std::vector<double> t(M.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = M[i * cols + j];
  return t;
}

} // namespace

TEST_CASE("svd_topk_complement kernel: a side the kept vectors span has no complement: X or Y exactly 0") {
  // k = m: U is square, (I − UUᵀ)·Ū = 0, so X = 0 exactly (not rounding of Ū along U
  // divided by s²); likewise Yt for k = n. The other side still couples to the rest.
  std::mt19937_64 rng(21);
  for (const auto &shape : {std::pair<int64_t, int64_t>{5, 5}, {5, 9}, {9, 5}}) {
    const int64_t m = shape.first, n = shape.second;
    CAPTURE(m);
    CAPTURE(n);
    const int64_t k = std::min(m, n), r = k;
    Tensor A = randomTensor(Type({m, n}), rng);
    for (double &x : A.data) x *= 0x1p-10; // small singular values: rounding / s² shows
    const Tensor gU = randomTensor(Type({m, r}), rng), gVt = randomTensor(Type({r, n}), rng);
    Topk t = runTopk(A, k);
    rt::SvdComplementConfig cfg = rt::svdComplementConfig(m, n, k, r, 0);
    std::vector<double> work(static_cast<size_t>(cfg.workElems)), X(static_cast<size_t>(m * r), 1.0),
        Yt(static_cast<size_t>(r * n), 1.0);
    const rt::SvdComplementOutcome o =
        rt::svdComplement(cfg, 1e-12, A.data.data(), t.U.data(), t.s.data(), t.Vt.data(), gU.data.data(),
                          gVt.data.data(), X.data(), Yt.data(), work.data());
    CHECK_FALSE(o.fallback);
    CHECK(o.lapackInfo == 0);
    // The spanned side is exactly 0. Its complement being empty, A⊥ = 0 and the other side
    // is its projected cotangent over s: (I − UUᵀ)·Ū / s_c for X, ((I − VVᵀ)·V̄)ᵀ / s_c
    // for Yt.
    auto near = [](const std::vector<double> &got, const std::vector<double> &want) {
      double err = 0, scale = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        err = std::max(err, std::fabs(got[i] - want[i]));
        scale = std::max(scale, std::fabs(want[i]));
      }
      return err <= 1e-9 * scale;
    };
    if (k == m)
      for (double x : X) CHECK(x == 0.0);
    else
      CHECK(near(X, projectedOverS(t.U, gU.data, m, k, r, t.s)));
    if (k == n)
      for (double y : Yt) CHECK(y == 0.0);
    else
      CHECK(near(transposed(Yt, r, n),
                 projectedOverS(transposed(t.Vt, k, n), transposed(gVt.data, r, n), n, k, r, t.s)));
  }
}

TEST_CASE("truncated svd: the workspace layout sizes and carves the same arrays") {
  // (m, n, k): square, tall, wide, k = 1, and a block that is not a multiple of 4.
  for (const auto &shape : {std::tuple<int64_t, int64_t, int64_t>{256, 256, 16}, {300, 40, 7}, {40, 300, 7},
                             {64, 64, 1}, {1024, 1024, 48}}) {
    const int64_t m = std::get<0>(shape), n = std::get<1>(shape), k = std::get<2>(shape);
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    const rt::TopkSvdConfig c = rt::topkSvdConfig(m, n, k);
    const rt::TopkSvdWorkspace L = rt::topkSvdWorkspace(c);
    CHECK(L.end == c.workElems);
    const int64_t cm = c.bmax, p = c.b0, p4 = (p + 3) / 4 * 4, rb = std::max(m, n) * p4;
    // Each array starts where the one before it ends: in order, disjoint, nothing between.
    const std::pair<int64_t, int64_t> arrays[] = {
        {L.Qb, m * cm}, {L.Zs, n * cm}, {L.P, n * cm}, {L.Vs, n * cm}, {L.Vk, n * k},
        {L.Uk, m * k}, {L.W, m * k}, {L.Y, m * p}, {L.H, cm * p4}, {L.Gm, cm * cm},
        {L.Ev, cm * cm}, {L.Rb, cm * cm}, {L.Zr, cm * cm}, {L.VTs, cm * cm},
        {L.G, 2 * cm * cm + cm}, {L.lam, cm}, {L.sv, cm}, {L.tau, cm}, {L.y0, p}, {L.bad, p},
        {L.Xr, rb}, {L.Yr, rb}, {L.lw, c.lworkSvd}};
    int64_t at = 0;
    for (const auto &[offset, elems] : arrays) {
      CHECK(offset == at);
      at += elems;
    }
    CHECK(L.iwork == at);
    CHECK(L.qw > L.iwork);
    CHECK(L.ew == L.qw + c.lworkQr);
    CHECK(L.eiw == L.ew + c.lworkEig);
    CHECK(L.end >= L.eiw + c.liworkEig / 2); // lapack_int of 4 or 8 bytes, in doubles
  }
}
