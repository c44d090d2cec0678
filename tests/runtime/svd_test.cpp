// The engine's SVD kernel: A = U diag(s) Vt, orthonormal columns of U and rows of Vt,
// s descending and >= 0, on random, rank-deficient and degenerate matrices, square
// and rectangular; deterministic across widths and runs.
#include <cmath>
#include <random>

#include <doctest/doctest.h>

#include "ir/Builder.h"
#include "runtime/Runtime.h"
#include "tests/runtime/rt_testutil.h"

using namespace tessel;
using ir::Tensor;
using ir::Type;
using namespace rttest;

namespace {

/// A random m×n matrix of rank r: sum of r random outer products.
Tensor lowRank(int64_t m, int64_t n, int64_t r, std::mt19937_64 &rng) {
  Tensor u = randomTensor(Type({m, r}), rng), v = randomTensor(Type({r, n}), rng);
  return Tensor(Type({m, n}), matmul(u.data, v.data, m, r, n));
}

/// Q·diag(d)·Qᵀ-like matrix with prescribed (repeated) singular values: Householder
/// reflections H = I - 2 w wᵀ / |w|² are orthogonal, so H1 diag(d) H2 has singular
/// values |d|.
Tensor withSingularValues(int64_t n, const std::vector<double> &d, std::mt19937_64 &rng) {
  auto householder = [&]() {
    Tensor w = randomTensor(Type({n}), rng);
    double nn = 0;
    for (double x : w.data) nn += x * x;
    std::vector<double> h(static_cast<size_t>(n * n));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) h[i * n + j] = (i == j) - 2 * w.data[i] * w.data[j] / nn;
    return h;
  };
  std::vector<double> D(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) D[i * n + i] = d[i];
  auto h1 = householder(), h2 = householder();
  return Tensor(Type({n, n}), matmul(matmul(h1, D, n, n, n), h2, n, n, n));
}

void checkSvd(const Tensor &A, const std::vector<Tensor> &usv, double tol) {
  int64_t m = A.type.shape[0], n = A.type.shape[1], k = std::min(m, n);
  const Tensor &U = usv[0], &s = usv[1], &Vt = usv[2];
  REQUIRE(U.type == Type({m, k}));
  REQUIRE(s.type == Type({k}));
  REQUIRE(Vt.type == Type({k, n}));
  double scale = 0;
  for (double x : A.data) scale = std::max(scale, std::fabs(x));
  scale = std::max(scale, 1.0);
  // Reconstruction.
  std::vector<double> us(U.data);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j) us[i * k + j] *= s.data[j];
  auto rec = matmul(us, Vt.data, m, k, n);
  double err = 0;
  for (size_t i = 0; i < rec.size(); ++i) err = std::max(err, std::fabs(rec[i] - A.data[i]));
  CHECK(err <= tol * scale);
  // Descending, non-negative.
  for (int64_t j = 0; j < k; ++j) {
    CHECK(s.data[j] >= 0.0);
    if (j) CHECK(s.data[j] <= s.data[j - 1]);
  }
  // UᵀU = I and Vt Vtᵀ = I.
  double orth = 0;
  for (int64_t a = 0; a < k; ++a)
    for (int64_t b = 0; b < k; ++b) {
      double uu = 0, vv = 0;
      for (int64_t i = 0; i < m; ++i) uu += U.data[i * k + a] * U.data[i * k + b];
      for (int64_t j = 0; j < n; ++j) vv += Vt.data[a * n + j] * Vt.data[b * n + j];
      orth = std::max({orth, std::fabs(uu - (a == b)), std::fabs(vv - (a == b))});
    }
  CHECK(orth <= tol);
}

std::vector<Tensor> engineSvd(const Tensor &A, int width) {
  ir::Program p;
  ir::Builder b(p);
  auto a = p.addInput("A", A.type);
  // Through an op so the kernel factors an arena buffer in place; also the copy path
  // when the input is read directly (second svd).
  auto usv = b.svd(b.mul(a, b.full(A.type, 1.0)));
  auto usv2 = b.svd(a);
  for (auto v : usv) p.addOutput(v);
  for (auto v : usv2) p.addOutput(v);
  rt::Engine e(width);
  auto out = e.run(*rt::prepare(p), {A});
  for (int i = 0; i < 3; ++i) CHECK(bitwiseEqual(out[i], out[3 + i]));
  out.resize(3);
  return out;
}

} // namespace

TEST_CASE("svd kernel: random, rectangular, rank-deficient, degenerate, zero") {
  std::mt19937_64 rng(4242);
  struct Case {
    const char *what;
    Tensor A;
  };
  std::vector<Case> cases;
  cases.push_back({"random 40x40", randomTensor(Type({40, 40}), rng)});
  cases.push_back({"random 50x20", randomTensor(Type({50, 20}), rng)});
  cases.push_back({"random 20x50", randomTensor(Type({20, 50}), rng)});
  cases.push_back({"row 1x9", randomTensor(Type({1, 9}), rng)});
  cases.push_back({"column 9x1", randomTensor(Type({9, 1}), rng)});
  cases.push_back({"rank 3 of 30x25", lowRank(30, 25, 3, rng)});
  cases.push_back({"rank 1 of 16x16", lowRank(16, 16, 1, rng)});
  cases.push_back({"orthogonal (all s = 1)", withSingularValues(24, std::vector<double>(24, 1.0), rng)});
  {
    std::vector<double> d = {3, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0};
    cases.push_back({"multiplets and zeros", withSingularValues(12, d, rng)});
  }
  cases.push_back({"zero 7x5", Tensor::zeros(Type({7, 5}))});
  for (const Case &c : cases) {
    INFO(c.what);
    auto w1 = engineSvd(c.A, 1);
    checkSvd(c.A, w1, 1e-13);
    auto w2 = engineSvd(c.A, 2);
    for (int i = 0; i < 3; ++i) CHECK(bitwiseEqual(w1[i], w2[i]));
  }
  // Known singular values.
  {
    std::vector<double> d = {5, 4, 4, 0.5, 1e-9, 0};
    Tensor A = withSingularValues(6, d, rng);
    auto r = engineSvd(A, 1);
    for (int i = 0; i < 6; ++i) CHECK(r[1].data[i] == doctest::Approx(d[i]).epsilon(1e-13).scale(5));
  }
  // Rank-deficient: the trailing singular values are zero to rounding.
  {
    Tensor A = lowRank(20, 20, 4, rng);
    auto r = engineSvd(A, 1);
    CHECK(r[1].data[3] > 1e-3);
    for (int i = 4; i < 20; ++i) CHECK(r[1].data[i] <= 1e-13 * r[1].data[0]);
  }
}

TEST_CASE("svd kernel: empty matrices give empty factors") {
  ir::Program p;
  ir::Builder b(p);
  auto a = p.addInput("A", Type({0, 4}));
  auto usv = b.svd(a);
  for (auto v : usv) p.addOutput(v);
  rt::Engine e(2);
  auto out = e.run(*rt::prepare(p), {Tensor::zeros(Type({0, 4}))});
  CHECK(out[0].type == Type({0, 0}));
  CHECK(out[1].type == Type({0}));
  CHECK(out[2].type == Type({0, 4}));
}

TEST_CASE("svd kernel: singular values only when U and Vt are unused (jobz = N)") {
  std::mt19937_64 rng(99);
  for (auto shape : {std::vector<int64_t>{40, 40}, std::vector<int64_t>{30, 12}, std::vector<int64_t>{7, 20}}) {
    ir::Program p;
    ir::Builder b(p);
    auto a = p.addInput("A", Type(shape));
    auto usv = b.svd(a);
    p.addOutput(b.reduceSum(usv[1], {0})); // s only
    p.addOutput(usv[1]);
    auto plan = rt::prepare(p);
    CHECK(rt::describePlan(*plan).find("singular values only") != std::string::npos);
    Tensor A = randomTensor(Type(shape), rng);
    auto ref = rt::evaluateReference(p, {A}); // full SVD
    rt::Engine e1(1), e2(2);
    auto r1 = e1.run(*plan, {A}), r2 = e2.run(*plan, {A});
    for (size_t i = 0; i < ref.size(); ++i) {
      CHECK(maxRelDiff(r1[i], ref[i]) <= 1e-13);
      CHECK(bitwiseEqual(r1[i], r2[i]));
    }
    for (size_t j = 1; j < r1[1].data.size(); ++j) CHECK(r1[1].data[j] <= r1[1].data[j - 1]);
  }
  // U used: the full SVD.
  ir::Program p;
  ir::Builder b(p);
  auto a = p.addInput("A", Type({8, 8}));
  auto usv = b.svd(a);
  p.addOutput(usv[1]);
  p.addOutput(b.reduceSum(usv[0], {0, 1}));
  CHECK(rt::describePlan(*rt::prepare(p)).find("singular values only") == std::string::npos);
}
