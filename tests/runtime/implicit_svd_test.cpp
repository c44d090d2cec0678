// topkSvd over an implicit matrix (rt::LinearOperator, runtime/TruncatedSvd.h): an
// operator that multiplies exactly as the dense kernel does gives the dense kernel's
// triplets bit for bit (the iteration, the probe, the fallback on the materialised
// matrix); and the next TRG step's matrix, known only through the four half-tensors
// of the plaquette (docs/trg.md §2.6), gives the triplets of the formed matrix.
#include <cmath>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>

#include <cblas.h>
#include <doctest/doctest.h>
#include <lapacke.h>

#include "runtime/EinsumOperator.h"
#include "runtime/Multivector.h"
#include "runtime/Runtime.h"
#include "runtime/TruncatedSvd.h"
#include "tests/runtime/rt_testutil.h"

using namespace tessel;
using ir::Tensor;
using ir::Type;
using namespace rttest;

namespace {

struct Triplets {
  std::vector<double> U, s, Vt;
  rt::TopkSvdOutcome out;
};

/// topkSvd of the dense row-major m×n `A`, or of `op` when given.
Triplets topk(int64_t m, int64_t n, int64_t k, const double *A, const rt::LinearOperator *op) {
  rt::TopkSvdConfig c = rt::topkSvdConfig(m, n, k);
  std::vector<double> work(static_cast<size_t>(c.workElems));
  Triplets t;
  t.U.resize(static_cast<size_t>(m * k));
  t.s.resize(static_cast<size_t>(k));
  t.Vt.resize(static_cast<size_t>(k * n));
  t.out = op ? rt::topkSvd(c, *op, t.U.data(), t.s.data(), t.Vt.data(), work.data())
             : rt::topkSvd(c, A, t.U.data(), t.s.data(), t.Vt.data(), work.data());
  return t;
}

/// A dense matrix behind the operator interface, multiplied as the dense kernel
/// multiplies it (runtime/Multivector.h).
class DenseOperator final : public rt::LinearOperator {
public:
  DenseOperator(const std::vector<double> &A, int64_t m, int64_t n)
      : LinearOperator(m, n), A_(A) {}
  void apply(const double *X, int64_t p, double *Y) const override {
    ++products;
    rt::matMultivector(A_.data(), rows(), cols(), X, p, Y);
  }
  void applyTransposed(const double *Y, int64_t p, double *Z) const override {
    ++products;
    rt::matTMultivector(A_.data(), rows(), cols(), Y, p, Z);
  }
  double maxAbsBound() const override {
    double m = 0;
    for (double x : A_) m = std::max(m, std::fabs(x));
    return m;
  }
  mutable int products = 0;

private:
  const std::vector<double> &A_;
};

/// The four half-tensors of a TRG plaquette, S1[w,a,r], S2[a,b,u], S3[b,g,l],
/// S4[g,w,d] (D, D, D'), and the next step's Ma' of their coarse tensor
/// T'[r,u,l,d] = Σ S1·S2·S3·S4 (rows (l, u), columns (r, d), docs/trg.md §2.2), formed
/// here by loops (the reference: no code shared with the operator).
struct Plaquette {
  int64_t D, Dp;
  std::vector<std::vector<double>> S; // S1..S4, row-major (D, D, D')
  double at(int s, int64_t i, int64_t j, int64_t k) const {
    return S[static_cast<size_t>(s)][static_cast<size_t>((i * D + j) * Dp + k)];
  }
  std::vector<double> formed() const {
    // P[w,r,b,u] = Σ_a S1[w,a,r]·S2[a,b,u];  Q[b,l,w,d] = Σ_g S3[b,g,l]·S4[g,w,d].
    std::vector<double> P(static_cast<size_t>(D * Dp * D * Dp)), Q(P.size());
    for (int64_t w = 0; w < D; ++w)
      for (int64_t r = 0; r < Dp; ++r)
        for (int64_t b = 0; b < D; ++b)
          for (int64_t u = 0; u < Dp; ++u) {
            double x = 0;
            for (int64_t a = 0; a < D; ++a) x += at(0, w, a, r) * at(1, a, b, u);
            P[static_cast<size_t>(((w * Dp + r) * D + b) * Dp + u)] = x;
          }
    for (int64_t b = 0; b < D; ++b)
      for (int64_t l = 0; l < Dp; ++l)
        for (int64_t w = 0; w < D; ++w)
          for (int64_t d = 0; d < Dp; ++d) {
            double y = 0;
            for (int64_t g = 0; g < D; ++g) y += at(2, b, g, l) * at(3, g, w, d);
            Q[static_cast<size_t>(((b * Dp + l) * D + w) * Dp + d)] = y;
          }
    const int64_t n = Dp * Dp;
    std::vector<double> A(static_cast<size_t>(n * n), 0.0);
    for (int64_t l = 0; l < Dp; ++l)
      for (int64_t u = 0; u < Dp; ++u)
        for (int64_t r = 0; r < Dp; ++r)
          for (int64_t d = 0; d < Dp; ++d) {
            double t = 0;
            for (int64_t w = 0; w < D; ++w)
              for (int64_t b = 0; b < D; ++b)
                t += P[static_cast<size_t>(((w * Dp + r) * D + b) * Dp + u)] *
                     Q[static_cast<size_t>(((b * Dp + l) * D + w) * Dp + d)];
            A[static_cast<size_t>((l * Dp + u) * n + r * Dp + d)] = t;
          }
    return A;
  }
  rt::EinsumOperator op() const {
    std::vector<rt::EinsumOperand> ops;
    const char *labels[] = {"war", "abu", "bgl", "gwd"};
    for (int s = 0; s < 4; ++s) ops.push_back({S[static_cast<size_t>(s)].data(), labels[s], {D, D, Dp}});
    return rt::EinsumOperator(std::move(ops), "lu", "rd");
  }
};

/// Half-tensors S1..S4 (D, D, D') whose new-bond index k carries the weight 0.7^k, as
/// a TRG step's U·√s does: the coarse tensor's spectrum decays.
Plaquette randomPlaquette(int64_t D, int64_t Dp, std::mt19937_64 &rng) {
  Plaquette P{D, Dp, {}};
  for (int s = 0; s < 4; ++s) {
    Tensor t = randomTensor(Type({D, D, Dp}), rng);
    for (size_t i = 0; i < t.data.size(); ++i)
      t.data[i] *= std::pow(0.7, static_cast<double>(static_cast<int64_t>(i) % Dp));
    P.S.push_back(t.data);
  }
  return P;
}

} // namespace

TEST_CASE("svd_topk over an operator: the dense kernel's triplets bit for bit, fallback included") {
  std::mt19937_64 rng(41);
  // A decaying spectrum (the iteration and its probe) and a nearly flat one (the gesdd
  // fallback on the materialised matrix, which is A exactly: a product with a column of
  // the identity adds exact zeros).
  for (bool flat : {false, true}) {
    CAPTURE(flat);
    const int64_t m = 180, n = 150, k = 10;
    Tensor A = randomTensor(Type({m, n}), rng);
    if (!flat)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) A.data[i * n + j] *= std::pow(0.9, static_cast<double>(j));
    std::vector<double> Aflat = A.data;
    if (flat) {
      // Orthonormal columns scaled by d_j = 1 − 1e-4·j: the singular values d, too
      // close together for the Krylov budget (as in truncated_svd_test.cpp).
      std::vector<double> Q(A.data);
      std::vector<double> tau(static_cast<size_t>(n));
      REQUIRE(LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, static_cast<int>(m), static_cast<int>(n), Q.data(),
                             static_cast<int>(n), tau.data()) == 0);
      REQUIRE(LAPACKE_dorgqr(LAPACK_ROW_MAJOR, static_cast<int>(m), static_cast<int>(n),
                             static_cast<int>(n), Q.data(), static_cast<int>(n), tau.data()) == 0);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) Q[i * n + j] *= 1.0 - 1e-4 * static_cast<double>(j);
      Aflat = Q;
    }
    const Triplets dense = topk(m, n, k, Aflat.data(), nullptr);
    DenseOperator op(Aflat, m, n);
    const Triplets viaOp = topk(m, n, k, nullptr, &op);
    CHECK(dense.out.fallback == flat);
    CHECK(viaOp.out.fallback == flat);
    CHECK(viaOp.out.iterations == dense.out.iterations);
    CHECK(viaOp.U == dense.U);
    CHECK(viaOp.s == dense.s);
    CHECK(viaOp.Vt == dense.Vt);
    CHECK(op.products > 0);
    if (flat)
      for (int64_t j = 0; j < k; ++j) CHECK(std::fabs(viaOp.s[j] - (1.0 - 1e-4 * static_cast<double>(j))) <= 1e-14);
  }
}

TEST_CASE("svd_topk over an operator: any scale (the working scale from maxAbsBound)") {
  std::mt19937_64 rng(43);
  const int64_t m = 120, n = 100, k = 8;
  Tensor A0 = randomTensor(Type({m, n}), rng);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) A0.data[i * n + j] *= std::pow(0.85, static_cast<double>(j));
  const Triplets ref = topk(m, n, k, A0.data.data(), nullptr);
  for (double c : {1e-300, 1e-200, 1e200, 1e300}) {
    CAPTURE(c);
    std::vector<double> A = A0.data;
    for (double &x : A) x *= c;
    DenseOperator op(A, m, n);
    const Triplets t = topk(m, n, k, nullptr, &op);
    CHECK(t.out.lapackInfo == 0);
    CHECK_FALSE(t.out.fallback);
    for (int64_t i = 0; i < k; ++i) CHECK(std::fabs(t.s[i] / c - ref.s[i]) <= 1e-13 * ref.s[0]);
  }
}

TEST_CASE("svd_topk over the plaquette: the formed matrix's triplets, never forming it") {
  std::mt19937_64 rng(47);
  for (const std::tuple<int64_t, int64_t, int64_t> &c :
       {std::tuple<int64_t, int64_t, int64_t>{6, 8, 8}, {8, 12, 12}, {12, 16, 16}}) {
    const int64_t D = std::get<0>(c), Dp = std::get<1>(c), k = std::get<2>(c);
    CAPTURE(D);
    CAPTURE(Dp);
    const Plaquette plaquette = randomPlaquette(D, Dp, rng);
    const rt::EinsumOperator op = plaquette.op();
    const int64_t n = Dp * Dp;
    const std::vector<double> A = plaquette.formed();
    // materialize() (the fallback's matrix) is the formed one to rounding.
    std::vector<double> M(A.size());
    op.materialize(M.data());
    double amax = 0, diff = 0;
    for (size_t i = 0; i < A.size(); ++i) {
      amax = std::max(amax, std::fabs(A[i]));
      diff = std::max(diff, std::fabs(M[i] - A[i]));
    }
    CHECK(diff <= 1e-14 * amax);
    const Triplets dense = topk(n, n, k, A.data(), nullptr), implicit = topk(n, n, k, nullptr, &op);
    CHECK_FALSE(dense.out.fallback);
    CHECK_FALSE(implicit.out.fallback);
    CHECK(implicit.out.lapackInfo == 0);
    for (int64_t i = 0; i < k; ++i) CHECK(std::fabs(implicit.s[i] - dense.s[i]) <= 1e-13 * dense.s[0]);
    // The same singular vectors up to sign, where the values are apart (no multiplet
    // in a random plaquette): |u_iᵀu_i'| = 1 and the true residuals of the formed A.
    for (int64_t i = 0; i < k; ++i) {
      double du = 0, resid = 0;
      for (int64_t r = 0; r < n; ++r) du += implicit.U[r * k + i] * dense.U[r * k + i];
      for (int64_t r = 0; r < n; ++r) {
        double av = 0;
        for (int64_t c = 0; c < n; ++c) av += A[r * n + c] * implicit.Vt[i * n + c];
        resid += (av - implicit.s[i] * implicit.U[r * k + i]) * (av - implicit.s[i] * implicit.U[r * k + i]);
      }
      CHECK(std::fabs(std::fabs(du) - 1.0) <= 1e-9);
      CHECK(std::sqrt(resid) <= 2 * rt::topkSvdConfig(n, n, k).tol * dense.s[0]);
    }
    MESSAGE("D=" << D << " D'=" << Dp << " k=" << k << ": " << implicit.out.iterations
                 << " blocks, basis " << implicit.out.sketch);
  }
}

TEST_CASE("einsum operator: the cheapest contraction orders of the plaquette, and refused specs") {
  std::mt19937_64 rng(53);
  const int64_t D = 5, Dp = 7, p = 8;
  const Plaquette P = randomPlaquette(D, Dp, rng);
  const rt::EinsumOperator op = P.op();
  CHECK(op.rows() == Dp * Dp);
  CHECK(op.cols() == Dp * Dp);
  // A·X from X[r,d,#]: S1 (Σ_r), then S4 (Σ_{w,d}), S3 (Σ_g), S2 (Σ_{a,b}), or the
  // mirror image; each O(χ⁴·p): D²·D'²·p + 2·D³·D'·p + D²·D'²·p multiply-adds.
  const int64_t expected = 2 * D * D * Dp * Dp * p + 2 * D * D * D * Dp * p;
  CHECK(op.flops(op.applyOrder(), "rd", p) == expected);
  CHECK(op.flops(op.transposedOrder(), "lu", p) == expected);
  // Starting with an operand that shares no label with the block is an outer product.
  CHECK(op.flops({1, 0, 2, 3}, "rd", p) > 4 * expected);
  // Both products agree with the formed matrix for every order.
  const std::vector<double> A = P.formed();
  const int64_t n = Dp * Dp;
  Tensor X = randomTensor(Type({n, p}), rng);
  std::vector<double> Y(static_cast<size_t>(n * p)), Z(Y.size());
  for (const std::vector<int> &order : {std::vector<int>{0, 3, 2, 1}, {2, 1, 0, 3}, {1, 0, 3, 2}}) {
    std::vector<rt::EinsumOperand> ops;
    const char *labels[] = {"war", "abu", "bgl", "gwd"};
    for (int s = 0; s < 4; ++s) ops.push_back({P.S[static_cast<size_t>(s)].data(), labels[s], {D, D, Dp}});
    const rt::EinsumOperator o(std::move(ops), "lu", "rd", order, order);
    o.apply(X.data.data(), p, Y.data());
    o.applyTransposed(X.data.data(), p, Z.data());
    double ey = 0, ez = 0, amax = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < p; ++c) {
        double y = 0, z = 0;
        for (int64_t j = 0; j < n; ++j) {
          y += A[static_cast<size_t>(i * n + j)] * X.data[static_cast<size_t>(j * p + c)];
          z += A[static_cast<size_t>(j * n + i)] * X.data[static_cast<size_t>(j * p + c)];
        }
        ey = std::max(ey, std::fabs(y - Y[static_cast<size_t>(i * p + c)]));
        ez = std::max(ez, std::fabs(z - Z[static_cast<size_t>(i * p + c)]));
        amax = std::max({amax, std::fabs(y), std::fabs(z)});
      }
    CHECK(ey <= 1e-13 * amax);
    CHECK(ez <= 1e-13 * amax);
  }
  // max|A_ij| <= the bound.
  double amax = 0;
  for (double a : A) amax = std::max(amax, std::fabs(a));
  CHECK(amax <= op.maxAbsBound());
  // Refused: a trace, the batch label, a label of three operands, an output label of
  // two operands, a label summed inside one operand, extents that disagree, an order
  // that is not a permutation.
  const std::vector<double> buf(1000, 1.0);
  auto make = [&](std::vector<std::pair<std::string, std::vector<int64_t>>> spec, std::string rows,
                  std::string cols, std::vector<int> order = {}) {
    std::vector<rt::EinsumOperand> ops;
    for (auto &[l, sh] : spec) ops.push_back({buf.data(), l, sh});
    return rt::EinsumOperator(std::move(ops), rows, cols, order, order);
  };
  auto message = [](auto &&f) -> std::string {
    try {
      f();
    } catch (const Error &e) {
      return e.what();
    }
    return "";
  };
  CHECK(message([&] { make({{"aa", {2, 2}}}, "", "a"); }).find("trace") != std::string::npos);
  CHECK(message([&] { make({{"a#", {2, 2}}, {"b", {2}}}, "a", "b"); }).find("batch") != std::string::npos);
  CHECK(message([&] { make({{"ab", {2, 2}}, {"bc", {2, 2}}, {"bd", {2, 2}}}, "ac", "d"); })
            .find("more than two") != std::string::npos);
  CHECK(message([&] { make({{"ab", {2, 2}}, {"bc", {2, 2}}}, "ab", "c"); })
            .find("of two operands is an output label") != std::string::npos);
  CHECK(message([&] { make({{"abc", {2, 2, 2}}}, "a", "b"); }).find("summed inside one operand") !=
        std::string::npos);
  CHECK(message([&] { make({{"ab", {2, 3}}, {"bc", {2, 2}}}, "a", "c"); }).find("extents 3 and 2") !=
        std::string::npos);
  CHECK(message([&] { make({{"ab", {2, 2}}, {"bc", {2, 2}}}, "a", "c", {0, 0}); })
            .find("not a permutation") != std::string::npos);
  CHECK(message([&] { make({{"ab", {2, 2}}, {"bc", {2, 2}}}, "a", "c"); }).empty());
}

TEST_CASE("einsum operator: permuteLabeled moves every element (tiled planes and whole rows)") {
  std::mt19937_64 rng(59);
  std::vector<int64_t> ext(256, 0);
  ext['i'] = 3, ext['j'] = 11, ext['k'] = 9, ext['l'] = 5;
  const std::string from = "ijkl";
  Tensor src = randomTensor(Type({3, 11, 9, 5}), rng);
  for (const char *to : {"ijkl", "lkji", "jilk", "kijl", "ljik", "iljk"}) {
    CAPTURE(to);
    std::vector<double> dst(src.data.size());
    rt::permuteLabeled(src.data.data(), from, to, ext, dst.data());
    int64_t wrong = 0;
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 11; ++j)
        for (int64_t k = 0; k < 9; ++k)
          for (int64_t l = 0; l < 5; ++l) {
            int64_t at = 0;
            for (char c : std::string(to)) {
              const int64_t x = c == 'i' ? i : c == 'j' ? j : c == 'k' ? k : l;
              at = at * ext[static_cast<unsigned char>(c)] + x;
            }
            wrong += dst[static_cast<size_t>(at)] != src.data[static_cast<size_t>(((i * 11 + j) * 9 + k) * 5 + l)];
          }
    CHECK(wrong == 0);
  }
}

namespace {

/// An m×n matrix with singular values d: Q₁·diag(d)·Q₂ᵀ, Q₁, Q₂ orthonormal (QR of
/// Gaussian matrices).
std::vector<double> spectrumMatrix(int64_t m, int64_t n, const std::vector<double> &d, std::mt19937_64 &rng) {
  auto orthonormal = [&](int64_t rows, int64_t cols) {
    Tensor g = randomTensor(Type({rows, cols}), rng);
    std::vector<double> tau(static_cast<size_t>(cols));
    REQUIRE(LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, static_cast<int>(rows), static_cast<int>(cols), g.data.data(),
                           static_cast<int>(cols), tau.data()) == 0);
    REQUIRE(LAPACKE_dorgqr(LAPACK_ROW_MAJOR, static_cast<int>(rows), static_cast<int>(cols),
                           static_cast<int>(cols), g.data.data(), static_cast<int>(cols), tau.data()) == 0);
    return g.data;
  };
  const int64_t K = std::min(m, n);
  const std::vector<double> Q1 = orthonormal(m, K), Q2 = orthonormal(n, K);
  std::vector<double> A(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double a = 0;
      for (int64_t t = 0; t < K; ++t) a += Q1[static_cast<size_t>(i * K + t)] * d[static_cast<size_t>(t)] * Q2[static_cast<size_t>(j * K + t)];
      A[static_cast<size_t>(i * n + j)] = a;
    }
  return A;
}

struct Complement {
  std::vector<double> X, Yt;
  rt::SvdComplementOutcome out;
};

/// svd_topk_complement of A's top-k (k + given) triplets with r Gaussian cotangents, on
/// the dense A and on `op` (the same matrix implicit): max|X − X'| and max|Yt − Yt'|
/// relative to the largest entry, and both outcomes.
struct ComplementPair {
  Complement dense, implicit;
  double diff = 0;
};
ComplementPair complementBothWays(const std::vector<double> &A, int64_t m, int64_t n, int64_t k, int64_t r,
                                  int64_t given, double eps, const rt::LinearOperator &op, std::mt19937_64 &rng) {
  const int64_t w = k + given;
  Triplets t = topk(m, n, w, A.data(), nullptr);
  const Tensor gU = randomTensor(Type({m, r}), rng), gVt = randomTensor(Type({r, n}), rng);
  ComplementPair p;
  for (bool implicit : {false, true}) {
    const rt::SvdComplementConfig c = rt::svdComplementConfig(m, n, k, r, given, implicit);
    std::vector<double> work(static_cast<size_t>(c.workElems));
    Complement &o = implicit ? p.implicit : p.dense;
    o.X.resize(static_cast<size_t>(m * r));
    o.Yt.resize(static_cast<size_t>(r * n));
    o.out = implicit ? rt::svdComplement(c, eps, op, t.U.data(), t.s.data(), t.Vt.data(), gU.data.data(),
                                         gVt.data.data(), o.X.data(), o.Yt.data(), work.data())
                     : rt::svdComplement(c, eps, A.data(), t.U.data(), t.s.data(), t.Vt.data(), gU.data.data(),
                                         gVt.data.data(), o.X.data(), o.Yt.data(), work.data());
  }
  double big = 0, d = 0;
  for (size_t i = 0; i < p.dense.X.size(); ++i) {
    big = std::max(big, std::fabs(p.dense.X[i]));
    d = std::max(d, std::fabs(p.dense.X[i] - p.implicit.X[i]));
  }
  for (size_t i = 0; i < p.dense.Yt.size(); ++i) {
    big = std::max(big, std::fabs(p.dense.Yt[i]));
    d = std::max(d, std::fabs(p.dense.Yt[i] - p.implicit.Yt[i]));
  }
  p.diff = big > 0 ? d / big : d;
  return p;
}

} // namespace

TEST_CASE("svd_topk_complement over an operator: the dense kernel's X and Y on every path") {
  std::mt19937_64 rng(61);
  const int64_t m = 90, n = 80;
  auto geometric = [&](double q) {
    std::vector<double> d(80);
    for (int64_t i = 0; i < 80; ++i) d[static_cast<size_t>(i)] = std::pow(q, static_cast<double>(i));
    return d;
  };
  SUBCASE("real tail: guards computed by a top-g SVD of the implicit A-perp, then CG") {
    const std::vector<double> A = spectrumMatrix(m, n, geometric(0.85), rng);
    DenseOperator op(A, m, n);
    const ComplementPair p = complementBothWays(A, m, n, 8, 8, 0, 1e-9, op, rng);
    CHECK_FALSE(p.dense.out.fallback);
    CHECK_FALSE(p.implicit.out.fallback);
    CHECK_FALSE(p.implicit.out.broadenedTail);
    CHECK(p.implicit.out.guard.iterations > 0);
    CHECK(p.diff <= 1e-11);
  }
  SUBCASE("guards given by the forward") {
    const std::vector<double> A = spectrumMatrix(m, n, geometric(0.85), rng);
    DenseOperator op(A, m, n);
    const ComplementPair p = complementBothWays(A, m, n, 8, 5, 4, 1e-9, op, rng);
    CHECK_FALSE(p.implicit.out.fallback);
    CHECK(p.implicit.out.guard.iterations == 0);
    CHECK(p.diff <= 1e-11);
  }
  SUBCASE("the complex shift (eps = 1e-5: every gap within 1e5 of the broadening)") {
    const std::vector<double> A = spectrumMatrix(m, n, geometric(0.7), rng);
    DenseOperator op(A, m, n);
    const ComplementPair p = complementBothWays(A, m, n, 8, 8, 0, 1e-5, op, rng);
    CHECK(p.dense.out.broadenedTail);
    CHECK(p.implicit.out.broadenedTail);
    CHECK_FALSE(p.implicit.out.fallback);
    CHECK(p.diff <= 1e-11);
  }
  SUBCASE("CG's budget runs out: the full rule on the materialised A") {
    std::vector<double> d(80);
    for (int64_t i = 0; i < 80; ++i)
      d[static_cast<size_t>(i)] = i < 8 ? std::pow(0.8, static_cast<double>(i))
                                        : 0.8 * (0.999 - 1e-4 * static_cast<double>(i)) * std::pow(0.8, 6.0);
    const std::vector<double> A = spectrumMatrix(m, n, d, rng);
    DenseOperator op(A, m, n);
    const ComplementPair p = complementBothWays(A, m, n, 8, 8, 0, 1e-9, op, rng);
    CHECK(p.dense.out.fallback);
    CHECK(p.implicit.out.fallback);
    CHECK(p.diff <= 1e-10);
  }
  SUBCASE("the plaquette: the formed matrix's complement, never forming it") {
    const Plaquette P = randomPlaquette(8, 12, rng);
    const rt::EinsumOperator op = P.op();
    const std::vector<double> A = P.formed();
    const ComplementPair p = complementBothWays(A, 144, 144, 12, 12, 0, 1e-9, op, rng);
    CHECK(p.dense.out.fallback == p.implicit.out.fallback);
    CHECK_FALSE(p.implicit.out.fallback);
    CHECK(p.diff <= 1e-10);
    MESSAGE("plaquette complement: " << p.implicit.out.iterations << " CG iterations (dense "
                                     << p.dense.out.iterations << "), difference " << p.diff);
  }
}

TEST_CASE("svd_topk over an operator: an operator of another size than the config is refused") {
  std::mt19937_64 rng(67);
  const Tensor A = randomTensor(Type({20, 30}), rng);
  DenseOperator op(A.data, 20, 30);
  const rt::TopkSvdConfig c = rt::topkSvdConfig(30, 20, 4);
  std::vector<double> work(static_cast<size_t>(c.workElems)), U(120), s(4), Vt(80);
  CHECK_THROWS_AS(rt::topkSvd(c, op, U.data(), s.data(), Vt.data(), work.data()), std::logic_error);
  const rt::SvdComplementConfig dense = rt::svdComplementConfig(20, 30, 4, 4);
  std::vector<double> w2(static_cast<size_t>(dense.workElems)), X(80), Yt(120);
  CHECK_THROWS_AS(rt::svdComplement(dense, 1e-9, op, U.data(), s.data(), Vt.data(), U.data(), Vt.data(),
                                    X.data(), Yt.data(), w2.data()),
                  std::logic_error);
}
