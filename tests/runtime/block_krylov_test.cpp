// The steps of topkSvd's block Krylov iteration (runtime/BlockKrylovSvd.h), one at a
// time: each leaves what its contract says (an orthonormal basis of the right space,
// the Krylov block and Gram matrix as defined, exact triplets once the basis is all of
// ℝᵐ, a probe that sees a multiplet the basis missed, gesdd's triplets on fallback).
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <doctest/doctest.h>
#include <lapacke.h>

#include "runtime/BlockKrylovSvd.h"

using tessel::rt::TopkSvdConfig;
using tessel::rt::topkSvdConfig;
using tessel::rt::svd_detail::BlockKrylovSvd;

namespace {

using Mat = std::vector<double>; // row-major unless named column-major

/// A row-major m×n matrix with singular values d: Q₁·diag(d)·Q₂ᵀ, Q₁ and Q₂ the
/// orthogonal factors of Householder QRs of Gaussian matrices.
Mat withSpectrum(int64_t m, int64_t n, const std::vector<double> &d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  auto orthogonal = [&](int64_t N) {
    Mat q(static_cast<size_t>(N * N)), tau(static_cast<size_t>(N));
    for (double &x : q) x = g(rng);
    const auto n32 = static_cast<lapack_int>(N);
    REQUIRE(LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, n32, n32, q.data(), n32, tau.data()) == 0);
    REQUIRE(LAPACKE_dorgqr(LAPACK_ROW_MAJOR, n32, n32, n32, q.data(), n32, tau.data()) == 0);
    return q;
  };
  const Mat P = orthogonal(m), Q = orthogonal(n);
  Mat A(static_cast<size_t>(m * n), 0.0);
  for (size_t t = 0; t < d.size(); ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) A[i * n + j] += P[i * m + t] * d[t] * Q[j * n + t];
  return A;
}

/// max |QᵀQ − I| of the column-major m×c Q.
double offOrthonormal(const double *Q, int64_t m, int64_t c) {
  double e = 0;
  for (int64_t i = 0; i < c; ++i)
    for (int64_t j = 0; j < c; ++j) {
      double s = 0;
      for (int64_t r = 0; r < m; ++r) s += Q[i * m + r] * Q[j * m + r];
      e = std::max(e, std::fabs(s - (i == j ? 1.0 : 0.0)));
    }
  return e;
}

/// ‖(I − Q·Qᵀ)·X‖_F / ‖X‖_F for the column-major m×c Q and m×w X.
double outsideSpan(const double *Q, int64_t m, int64_t c, const Mat &X, int64_t w) {
  double out = 0, all = 0;
  for (int64_t j = 0; j < w; ++j) {
    std::vector<double> r(X.begin() + j * m, X.begin() + (j + 1) * m);
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t i = 0; i < c; ++i) {
        double h = 0;
        for (int64_t t = 0; t < m; ++t) h += Q[i * m + t] * r[static_cast<size_t>(t)];
        for (int64_t t = 0; t < m; ++t) r[static_cast<size_t>(t)] -= h * Q[i * m + t];
      }
    for (int64_t t = 0; t < m; ++t) {
      out += r[static_cast<size_t>(t)] * r[static_cast<size_t>(t)];
      all += X[j * m + t] * X[j * m + t];
    }
  }
  return std::sqrt(out / all);
}

/// Qᵢᵀ·x for column i of the column-major m×· Q and x of length m.
double dotColumn(const double *Q, int64_t m, int64_t i, const double *x) {
  double h = 0;
  for (int64_t r = 0; r < m; ++r) h += Q[i * m + r] * x[r];
  return h;
}

/// Column-major m×w A·X for the column-major n×w X (A row-major m×n).
Mat mulA(const Mat &A, int64_t m, int64_t n, const double *X, int64_t w) {
  Mat Y(static_cast<size_t>(m * w), 0.0);
  for (int64_t j = 0; j < w; ++j)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t c = 0; c < n; ++c) Y[j * m + i] += A[i * n + c] * X[j * n + c];
  return Y;
}

/// A's singular values by LAPACK (descending).
std::vector<double> singularValues(Mat A, int64_t m, int64_t n) {
  std::vector<double> s(static_cast<size_t>(std::min(m, n))), sup(s.size());
  REQUIRE(LAPACKE_dgesvd(LAPACK_ROW_MAJOR, 'N', 'N', static_cast<lapack_int>(m), static_cast<lapack_int>(n),
                         A.data(), static_cast<lapack_int>(n), s.data(), nullptr, 1, nullptr, 1, sup.data()) == 0);
  return s;
}

std::vector<double> geometric(int64_t K, double first, double ratio) {
  std::vector<double> d(static_cast<size_t>(K));
  for (int64_t i = 0; i < K; ++i) d[static_cast<size_t>(i)] = first * std::pow(ratio, static_cast<double>(i));
  return d;
}

/// A with the spectrum d, topkSvd's config for k (and the block size, 0: the default),
/// its workspace and the iteration on it.
struct Problem {
  Mat A;
  TopkSvdConfig c;
  std::vector<double> work;
  BlockKrylovSvd b;
  Problem(int64_t m, int64_t n, int64_t k, int64_t block, const std::vector<double> &d, uint64_t seed)
      : A(withSpectrum(m, n, d, seed)), c(topkSvdConfig(m, n, k, block)),
        work(static_cast<size_t>(c.workElems)), b(c, A.data(), work.data(), -1) {}
};

} // namespace

TEST_CASE("block Krylov step firstBlock: an orthonormal basis of A·Ω") {
  const int64_t m = 60, n = 40;
  Problem P(m, n, 6, 0, geometric(40, 2.0, 0.7), 1);
  const Mat &A = P.A;
  const TopkSvdConfig &c = P.c;
  BlockKrylovSvd &b = P.b;
  REQUIRE(b.alpha() == 1.0);
  const int64_t p = c.b0;
  REQUIRE(b.firstBlock(p) == 0);
  CHECK(offOrthonormal(b.basis(), m, p) <= 1e-14);
  CHECK(outsideSpan(b.basis(), m, p, mulA(A, m, n, c.sketch->data(), p), p) <= 1e-14);
  CHECK(b.outcome().drawn == 0);
}

TEST_CASE("block Krylov steps growGram and nextBlock: Zs = Aᵀ·Qb, Gm = Zsᵀ·Zs, Y = A·Zs ⟂ Qb") {
  const int64_t m = 50, n = 45;
  Problem P(m, n, 4, 0, geometric(45, 1.0, 0.8), 2);
  const Mat &A = P.A;
  const TopkSvdConfig &c = P.c;
  BlockKrylovSvd &b = P.b;
  const int64_t p = c.b0;
  REQUIRE(b.firstBlock(p) == 0);
  b.growGram(0, p);
  double err = 0;
  for (int64_t j = 0; j < p; ++j)
    for (int64_t col = 0; col < n; ++col) {
      double z = 0;
      for (int64_t r = 0; r < m; ++r) z += A[r * n + col] * b.basis()[j * m + r];
      err = std::max(err, std::fabs(z - b.krylov()[j * n + col]));
    }
  CHECK(err <= 1e-14);
  err = 0;
  for (int64_t j = 0; j < p; ++j)
    for (int64_t i = 0; i <= j; ++i) {
      double g = 0;
      for (int64_t r = 0; r < n; ++r) g += b.krylov()[i * n + r] * b.krylov()[j * n + r];
      err = std::max(err, std::fabs(g - b.gram()[j * c.bmax + i]));
    }
  CHECK(err <= 1e-14);
  // The next block is A·Zs with its part in span(Qb) taken out (twice): what is left is
  // orthogonal to Qb, and Y + Qb·Qbᵀ·A·Zs is A·Zs.
  b.nextBlock(p, p);
  const Mat AZ = mulA(A, m, n, b.krylov(), p);
  double along = 0, norm = 0, rest = 0;
  for (int64_t j = 0; j < p; ++j) {
    for (int64_t i = 0; i < p; ++i) along = std::max(along, std::fabs(dotColumn(b.basis(), m, i, b.block() + j * m)));
    for (int64_t r = 0; r < m; ++r) norm = std::max(norm, std::fabs(AZ[j * m + r]));
  }
  Mat Yexpected = AZ;
  for (int64_t j = 0; j < p; ++j)
    for (int64_t i = 0; i < p; ++i) {
      const double h = dotColumn(b.basis(), m, i, AZ.data() + j * m);
      for (int64_t r = 0; r < m; ++r) Yexpected[j * m + r] -= h * b.basis()[i * m + r];
    }
  for (int64_t t = 0; t < m * p; ++t) rest = std::max(rest, std::fabs(Yexpected[t] - b.block()[t]));
  CHECK(along <= 1e-14 * norm);
  CHECK(rest <= 1e-14 * norm);
}

TEST_CASE("block Krylov step extend: the basis grows orthonormal; a closed Krylov space draws Gaussian columns") {
  // Rank 3 and a first block of 4 columns: A·Ω has only 3 independent columns, so
  // extend replaces the fourth by a Gaussian one, and the basis still holds A's range.
  const int64_t m = 30, n = 24;
  std::vector<double> d(24, 0.0);
  d[0] = 3, d[1] = 2, d[2] = 1;
  const Mat A = withSpectrum(m, n, d, 3);
  const TopkSvdConfig c = topkSvdConfig(m, n, 2, 4);
  REQUIRE(c.b0 == 4);
  std::vector<double> work(static_cast<size_t>(c.workElems));
  BlockKrylovSvd b(c, A.data(), work.data(), -1);
  REQUIRE(b.firstBlock(4) == 0);
  CHECK(b.outcome().drawn >= 1);
  CHECK(offOrthonormal(b.basis(), m, 4) <= 1e-14);
  Mat columnsOfA(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) columnsOfA[j * m + i] = A[i * n + j];
  CHECK(outsideSpan(b.basis(), m, 4, columnsOfA, n) <= 1e-13);
  // A second block on a full-rank A: Qb[:, :8] orthonormal.
  const Mat F = withSpectrum(m, n, geometric(24, 1.0, 0.75), 4);
  BlockKrylovSvd f(c, F.data(), work.data(), -1);
  REQUIRE(f.firstBlock(4) == 0);
  f.growGram(0, 4);
  f.nextBlock(4, 4);
  REQUIRE(f.extend(4, 4) == 0);
  CHECK(offOrthonormal(f.basis(), m, 8) <= 1e-14);
  CHECK(f.outcome().drawn == 0);
}

TEST_CASE("block Krylov steps ritzEstimate and rayleighRitz: with the basis all of ℝᵐ, the SVD's triplets") {
  const int64_t m = 10, n = 14, k = 3;
  const std::vector<double> d = geometric(10, 5.0, 0.6);
  Problem P(m, n, k, 5, d, 5);
  const Mat &A = P.A;
  const TopkSvdConfig &c = P.c;
  BlockKrylovSvd &b = P.b;
  REQUIRE(b.firstBlock(5) == 0);
  b.growGram(0, 5);
  b.nextBlock(5, 5);
  REQUIRE(b.extend(5, 5) == 0);
  b.growGram(5, 5);
  b.nextBlock(10, 5);
  double scale = 0;
  const double est = b.ritzEstimate(10, 5, 0.0, scale);
  CHECK(std::fabs(scale - d[0]) <= 1e-13 * d[0]);
  CHECK(est >= 0);
  CHECK(est <= c.tol * scale); // nothing of A·Zs is outside a basis of all of ℝᵐ
  const double res = b.rayleighRitz(10);
  CHECK(res >= 0);
  CHECK(res <= c.tol * d[0]);
  const std::vector<double> s = singularValues(A, m, n);
  for (int64_t i = 0; i < k; ++i) CHECK(std::fabs(b.values()[i] - s[static_cast<size_t>(i)]) <= 1e-14 * s[0]);
  CHECK(offOrthonormal(b.leftVectors(), m, k) <= 1e-14);
  CHECK(offOrthonormal(b.rightVectors(), n, k) <= 1e-14);
  CHECK(b.outcome().rayleighRitz == 1);
}

TEST_CASE("block Krylov step missedTriplet: sees a multiplet larger than the block, passes a separated spectrum") {
  // Five equal singular values and blocks of 2 columns: the Krylov space holds 2 of the
  // five directions, the k = 6 triplets it finds are true triplets of A, and only the
  // probe can tell that three copies of σ = 1 are missing (then: gesdd).
  const int64_t m = 40, n = 40, k = 6;
  std::vector<double> d = geometric(40, 0.5, 0.8);
  std::fill(d.begin(), d.begin() + 5, 1.0);
  const Mat A = withSpectrum(m, n, d, 6);
  const TopkSvdConfig c = topkSvdConfig(m, n, k, 2);
  std::vector<double> work(static_cast<size_t>(c.workElems));
  std::vector<double> U(static_cast<size_t>(m * k)), s(static_cast<size_t>(k)), Vt(static_cast<size_t>(k * n));
  BlockKrylovSvd b(c, A.data(), work.data(), -1);
  const auto out = b.run(U.data(), s.data(), Vt.data(), 0);
  CHECK(out.missed);
  CHECK(out.fallback);
  CHECK(out.probe >= 0.9);
  for (int64_t i = 0; i < 5; ++i) CHECK(std::fabs(s[static_cast<size_t>(i)] - 1.0) <= 1e-14);
  CHECK(std::fabs(s[5] - d[5]) <= 1e-14);

  // A separated spectrum: the probe's estimate of σ_max(A − U·S·Vᵀ) = σ₇ is below s₆ and
  // at most σ₇ (a power step from below).
  const std::vector<double> e = geometric(40, 1.0, 0.7);
  const Mat B = withSpectrum(m, n, e, 7);
  BlockKrylovSvd g(c, B.data(), work.data(), -1);
  const auto ok = g.run(U.data(), s.data(), Vt.data(), 0);
  REQUIRE_FALSE(ok.fallback);
  CHECK_FALSE(ok.missed);
  CHECK(ok.probe > 0.3 * e[6]);
  CHECK(ok.probe <= e[6] * (1 + 1e-12));
  CHECK_FALSE(g.missedTriplet(e[0])); // the step again, on the triplets run() kept
}

TEST_CASE("block Krylov step fallback: gesdd's leading triplets") {
  const int64_t m = 20, n = 16, k = 4;
  const std::vector<double> d = geometric(16, 2.0, 0.5);
  Problem P(m, n, k, 0, d, 8);
  const Mat &A = P.A;
  std::vector<double> U(static_cast<size_t>(m * k)), s(static_cast<size_t>(k)), Vt(static_cast<size_t>(k * n));
  const auto out = P.b.fallback(U.data(), s.data(), Vt.data());
  CHECK(out.fallback);
  CHECK(out.lapackInfo == 0);
  for (int64_t i = 0; i < k; ++i) {
    CHECK(std::fabs(s[static_cast<size_t>(i)] - d[static_cast<size_t>(i)]) <= 1e-14 * d[0]);
    // A·vᵢ = σᵢ·uᵢ
    double r = 0;
    for (int64_t row = 0; row < m; ++row) {
      double av = 0;
      for (int64_t col = 0; col < n; ++col) av += A[row * n + col] * Vt[i * n + col];
      r = std::max(r, std::fabs(av - s[static_cast<size_t>(i)] * U[row * k + i]));
    }
    CHECK(r <= 1e-14 * d[0]);
  }
}

TEST_CASE("block Krylov: a scale outside [2^-300, 2^300] runs on 2^-e·A and gives A's singular values") {
  const int64_t m = 30, n = 30, k = 3;
  std::vector<double> d = geometric(30, 1.0, 0.7);
  Mat A = withSpectrum(m, n, d, 9);
  for (double &x : A) x = std::ldexp(x, -900);
  const TopkSvdConfig c = topkSvdConfig(m, n, k);
  std::vector<double> work(static_cast<size_t>(c.workElems));
  std::vector<double> U(static_cast<size_t>(m * k)), s(static_cast<size_t>(k)), Vt(static_cast<size_t>(k * n));
  BlockKrylovSvd b(c, A.data(), work.data(), -1);
  CHECK(b.alpha() > 0x1p800);
  const auto out = b.run(U.data(), s.data(), Vt.data(), 0);
  CHECK_FALSE(out.fallback);
  for (int64_t i = 0; i < k; ++i)
    CHECK(std::fabs(std::ldexp(s[static_cast<size_t>(i)], 900) - d[static_cast<size_t>(i)]) <= 1e-13);
}
