// The products of a large matrix with a few vectors (runtime/Multivector.h) against a
// long-double triple loop, over shapes that exercise every path: row counts not a
// multiple of 4, column blocks cut short, chunks of 8 and of 4, widths that go to BLAS,
// empty operands; and that a result element does not depend on the other columns.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "runtime/Multivector.h"

namespace {

std::vector<double> gaussian(int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  std::vector<double> v(static_cast<size_t>(count));
  for (double &x : v) x = nd(rng);
  return v;
}

/// max |got − exact| / (Σ|terms|), the error of a sum relative to its condition.
double relError(const std::vector<double> &got, const std::vector<long double> &exact,
                const std::vector<long double> &absSum) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const long double scale = absSum[i] > 0 ? absSum[i] : 1;
    worst = std::max(worst, static_cast<double>(std::fabs(got[i] - exact[i]) / scale));
  }
  return worst;
}

} // namespace

TEST_CASE("multivector: A·X and Aᵀ·Y equal a long-double triple loop to rounding") {
  struct Shape {
    int64_t m, n, p;
  };
  // 1024x1024x8: the χ = 32 Krylov blocks; 37 rows (a tail of 1), 700 columns (a short
  // last column block); p = 4, 12, 16, 32, 64: chunks of 4 and 8, every column block
  // size; p = 3, 10: BLAS; zero extents.
  const Shape shapes[] = {{1024, 1024, 8}, {37, 700, 12}, {700, 37, 4},  {5, 3, 16},
                          {130, 257, 32},  {64, 65, 64},  {33, 40, 3},   {40, 33, 10},
                          {1, 1, 4},       {0, 5, 4},     {5, 0, 8},     {6, 7, 0}};
  for (const Shape &s : shapes) {
    INFO("m = " << s.m << ", n = " << s.n << ", p = " << s.p);
    const std::vector<double> A = gaussian(s.m * s.n, 1), X = gaussian(s.n * s.p, 2),
                              Y = gaussian(s.m * s.p, 3);
    std::vector<double> AX(static_cast<size_t>(s.m * s.p), -7.0),
        AtY(static_cast<size_t>(s.n * s.p), -7.0);
    tessel::rt::matMultivector(A.data(), s.m, s.n, X.data(), s.p, AX.data());
    tessel::rt::matTMultivector(A.data(), s.m, s.n, Y.data(), s.p, AtY.data());
    std::vector<long double> ax(AX.size(), 0), axAbs(AX.size(), 0), aty(AtY.size(), 0),
        atyAbs(AtY.size(), 0);
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j)
        for (int64_t c = 0; c < s.p; ++c) {
          const long double a = A[i * s.n + j];
          ax[i * s.p + c] += a * X[j * s.p + c];
          axAbs[i * s.p + c] += std::fabs(a * X[j * s.p + c]);
          aty[j * s.p + c] += a * Y[i * s.p + c];
          atyAbs[j * s.p + c] += std::fabs(a * Y[i * s.p + c]);
        }
    // A sum of n terms in double: |error| <= n·ε·Σ|terms| (Higham, Accuracy and
    // Stability of Numerical Algorithms, 2nd ed., eq. 3.5); zero extents give zeros.
    const double eps = 0x1p-52;
    CHECK(relError(AX, ax, axAbs) <= static_cast<double>(s.n + 1) * eps);
    CHECK(relError(AtY, aty, atyAbs) <= static_cast<double>(s.m + 1) * eps);
  }
}

TEST_CASE("multivector: a column's result does not depend on the other columns") {
  // The Krylov kernels pad blocks with zero columns and the CG solve multiplies only its
  // unconverged columns: the same column must give the same bits in every company.
  const int64_t m = 301, n = 517;
  const std::vector<double> A = gaussian(m * n, 4), X8 = gaussian(n * 8, 5), Y8 = gaussian(m * 8, 6);
  std::vector<double> X4(static_cast<size_t>(n * 4)), Y4(static_cast<size_t>(m * 4));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < 4; ++c) X4[j * 4 + c] = c < 2 ? X8[j * 8 + 5 + c] : 0.0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < 4; ++c) Y4[i * 4 + c] = c < 2 ? Y8[i * 8 + 5 + c] : 0.0;
  std::vector<double> ax8(m * 8), ax4(m * 4), aty8(n * 8), aty4(n * 4);
  tessel::rt::matMultivector(A.data(), m, n, X8.data(), 8, ax8.data());
  tessel::rt::matMultivector(A.data(), m, n, X4.data(), 4, ax4.data());
  tessel::rt::matTMultivector(A.data(), m, n, Y8.data(), 8, aty8.data());
  tessel::rt::matTMultivector(A.data(), m, n, Y4.data(), 4, aty4.data());
  int64_t differ = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < 2; ++c) differ += ax8[i * 8 + 5 + c] != ax4[i * 4 + c];
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < 2; ++c) differ += aty8[j * 8 + 5 + c] != aty4[j * 4 + c];
  // The streaming path guarantees it; BLAS (a CPU without AVX2) need not.
  if (std::string(tessel::rt::multivectorIsa()) == "avx2+fma") CHECK(differ == 0);
  for (int64_t i = 0; i < m; ++i) CHECK(ax4[i * 4 + 3] == 0.0);
}
