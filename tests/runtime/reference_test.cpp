// Reference evaluator: every op against hand-computed values.
#include <cmath>
#include <limits>

#include <doctest/doctest.h>

#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "runtime/Runtime.h"

using namespace tessel;
using ir::Builder;
using ir::OpKind;
using ir::Program;
using ir::Tensor;
using ir::Type;

namespace {

Tensor T(std::initializer_list<int64_t> shape, std::vector<double> data) {
  return Tensor(Type(llvm::ArrayRef<int64_t>(shape.begin(), shape.size())), std::move(data));
}

/// Builds a one-op program over inputs of the given types and evaluates it.
template <typename F>
std::vector<Tensor> evalOne(std::vector<Tensor> inputs, F &&build) {
  Program p;
  Builder b(p);
  std::vector<ir::ValueId> ins;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(p.addInput("x" + std::to_string(i), inputs[i].type));
  for (ir::ValueId v : build(b, ins)) p.addOutput(v);
  return rt::evaluateReference(p, inputs);
}

void checkData(const Tensor &t, std::vector<double> expect) {
  REQUIRE(t.data.size() == expect.size());
  for (size_t i = 0; i < expect.size(); ++i) CHECK(t.data[i] == doctest::Approx(expect[i]).epsilon(1e-15));
}

} // namespace

TEST_CASE("reference: unary and binary elementwise") {
  auto x = T({4}, {-2.0, 0.0, 0.5, 4.0});
  auto y = T({4}, {1.0, -3.0, 0.5, 2.0});
  auto one = [&](OpKind k) {
    return evalOne({x}, [&](Builder &b, auto in) { return std::vector{b.unary(k, in[0])}; })[0];
  };
  checkData(one(OpKind::Neg), {2.0, -0.0, -0.5, -4.0});
  checkData(one(OpKind::Abs), {2.0, 0.0, 0.5, 4.0});
  checkData(one(OpKind::Sign), {-1.0, 0.0, 1.0, 1.0});
  checkData(one(OpKind::Exp), {std::exp(-2.0), 1.0, std::exp(0.5), std::exp(4.0)});
  checkData(one(OpKind::Sin), {std::sin(-2.0), 0.0, std::sin(0.5), std::sin(4.0)});
  checkData(one(OpKind::Cos), {std::cos(-2.0), 1.0, std::cos(0.5), std::cos(4.0)});
  checkData(one(OpKind::StopGradient), {-2.0, 0.0, 0.5, 4.0});
  auto pos = T({3}, {1.0, 4.0, 0.25});
  auto lg = evalOne({pos}, [&](Builder &b, auto in) { return std::vector{b.unary(OpKind::Log, in[0])}; });
  checkData(lg[0], {0.0, std::log(4.0), std::log(0.25)});
  auto sq = evalOne({pos}, [&](Builder &b, auto in) { return std::vector{b.unary(OpKind::Sqrt, in[0])}; });
  checkData(sq[0], {1.0, 2.0, 0.5});

  auto two = [&](OpKind k) {
    return evalOne({x, y}, [&](Builder &b, auto in) { return std::vector{b.binary(k, in[0], in[1])}; })[0];
  };
  checkData(two(OpKind::Add), {-1.0, -3.0, 1.0, 6.0});
  checkData(two(OpKind::Sub), {-3.0, 3.0, 0.0, 2.0});
  checkData(two(OpKind::Mul), {-2.0, -0.0, 0.25, 8.0});
  checkData(two(OpKind::Div), {-2.0, -0.0, 1.0, 2.0});
  checkData(two(OpKind::Maximum), {1.0, 0.0, 0.5, 4.0});
}

TEST_CASE("reference: compare directions and select") {
  auto x = T({3}, {1.0, 2.0, 3.0});
  auto y = T({3}, {2.0, 2.0, 2.0});
  auto cmp = [&](const char *dir) {
    return evalOne({x, y}, [&](Builder &b, auto in) { return std::vector{b.compare(in[0], in[1], dir)}; })[0];
  };
  checkData(cmp("EQ"), {0, 1, 0});
  checkData(cmp("NE"), {1, 0, 1});
  checkData(cmp("LT"), {1, 0, 0});
  checkData(cmp("LE"), {1, 1, 0});
  checkData(cmp("GT"), {0, 0, 1});
  checkData(cmp("GE"), {0, 1, 1});
  auto pred = T({3}, {1.0, 0.0, -0.5});
  auto r = evalOne({pred, x, y}, [&](Builder &b, auto in) {
    return std::vector{b.select(in[0], in[1], in[2])};
  });
  checkData(r[0], {1.0, 2.0, 3.0});
}

TEST_CASE("reference: reductions in a fixed order, NaN propagates through max") {
  auto x = T({2, 3}, {1, 2, 3, 4, 5, 6});
  auto r = evalOne({x}, [&](Builder &b, auto in) {
    return std::vector{b.reduceSum(in[0], {0}), b.reduceSum(in[0], {1}), b.reduceSum(in[0], {0, 1}),
                       b.reduceMax(in[0], {0}), b.reduceMax(in[0], {1}), b.reduceSum(in[0], {})};
  });
  checkData(r[0], {5, 7, 9});
  checkData(r[1], {6, 15});
  CHECK(r[2].type.rank() == 0);
  checkData(r[2], {21});
  checkData(r[3], {4, 5, 6});
  checkData(r[4], {3, 6});
  checkData(r[5], {1, 2, 3, 4, 5, 6});
  auto n = T({3}, {1.0, std::numeric_limits<double>::quiet_NaN(), 2.0});
  auto m = evalOne({n}, [&](Builder &b, auto in) { return std::vector{b.reduceMax(in[0], {0})}; });
  CHECK(std::isnan(m[0].data[0]));
}

TEST_CASE("reference: shape ops") {
  auto x = T({2, 3}, {1, 2, 3, 4, 5, 6});
  auto r = evalOne({x}, [&](Builder &b, auto in) {
    return std::vector{b.transpose(in[0], {1, 0}), b.reshape(in[0], {3, 2}),
                       b.slice(in[0], {0, 1}, {2, 3}), b.pad(in[0], {1, 0}, {0, 1}),
                       b.broadcastInDim(in[0], {2, 2, 3}, {0, 2})};
  });
  checkData(r[0], {1, 4, 2, 5, 3, 6});
  checkData(r[1], {1, 2, 3, 4, 5, 6});
  CHECK(r[1].type == Type({3, 2}));
  checkData(r[2], {2, 3, 5, 6});
  checkData(r[3], {0, 0, 0, 0, 1, 2, 3, 0, 4, 5, 6, 0});
  checkData(r[4], {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6});
  auto s = T({}, {2.5});
  auto c = T({3, 1}, {1, 2, 3});
  auto r2 = evalOne({s, c}, [&](Builder &b, auto in) {
    return std::vector{b.broadcastScalar(in[0], {2, 2}), b.broadcastInDim(in[1], {3, 2}, {0, 1}),
                       b.iota({2, 3}, 1), b.iota({2, 3}, 0)};
  });
  checkData(r2[0], {2.5, 2.5, 2.5, 2.5});
  checkData(r2[1], {1, 1, 2, 2, 3, 3});
  checkData(r2[2], {0, 1, 2, 0, 1, 2});
  checkData(r2[3], {0, 0, 0, 1, 1, 1});
}

TEST_CASE("reference: dot_general with batch and several contracting dims") {
  auto a = T({2, 3}, {1, 2, 3, 4, 5, 6});
  auto bm = T({3, 2}, {7, 8, 9, 10, 11, 12});
  auto r = evalOne({a, bm}, [&](Builder &b, auto in) {
    return std::vector{b.dotGeneral(in[0], in[1], {}, {}, {1}, {0}),
                       // contract lhs dim 0 with rhs dim 1: a^T b^T -> [3,3]
                       b.dotGeneral(in[0], in[1], {}, {}, {0}, {1}),
                       // full contraction of a with b^T: sum_ij a_ij b_ji
                       b.dotGeneral(in[0], in[1], {}, {}, {0, 1}, {1, 0})};
  });
  checkData(r[0], {58, 64, 139, 154});
  // (a^T b^T)[i,j] = sum_k a[k,i] b[j,k]
  checkData(r[1], {1 * 7 + 4 * 8, 1 * 9 + 4 * 10, 1 * 11 + 4 * 12, 2 * 7 + 5 * 8, 2 * 9 + 5 * 10,
                   2 * 11 + 5 * 12, 3 * 7 + 6 * 8, 3 * 9 + 6 * 10, 3 * 11 + 6 * 12});
  checkData(r[2], {58 + 154});
  // Batched: x[b,i,k] y[k,b,j] -> [b,i,j]
  auto x = T({2, 1, 2}, {1, 2, 3, 4});
  auto y = T({2, 2, 1}, {5, 6, 7, 8});
  auto rb = evalOne({x, y}, [&](Builder &b, auto in) {
    return std::vector{b.dotGeneral(in[0], in[1], {0}, {1}, {2}, {0})};
  });
  CHECK(rb[0].type == Type({2, 1, 1}));
  // batch 0: x[0,0,:]=(1,2), y[:,0,0]=(5,7) -> 19; batch 1: (3,4).(6,8) = 50
  checkData(rb[0], {19, 50});
}

TEST_CASE("reference: einsum n-ary, traces, diagonals and scalar outputs") {
  auto a = T({2, 2}, {1, 2, 3, 4});
  auto bm = T({2, 2}, {5, 6, 7, 8});
  auto c = T({2, 2}, {1, -1, 2, 0});
  auto r = evalOne({a, bm, c}, [&](Builder &b, auto in) {
    return std::vector{b.einsum("ii->", {in[0]}), b.einsum("ii->i", {in[0]}),
                       b.einsum("ij,jk->ik", {in[0], in[1]}), b.einsum("ij,ij->", {in[0], in[1]}),
                       b.einsum("ij,jk,kl->il", {in[0], in[1], in[2]}), b.einsum("ij->ji", {in[0]}),
                       b.einsum("ij,kl->ijkl", {in[0], in[1]})};
  });
  checkData(r[0], {5});
  checkData(r[1], {1, 4});
  checkData(r[2], {19, 22, 43, 50});
  checkData(r[3], {5 + 12 + 21 + 32});
  // (ab)c = [[19,22],[43,50]] [[1,-1],[2,0]]
  checkData(r[4], {19 + 44, -19, 43 + 100, -43});
  checkData(r[5], {1, 3, 2, 4});
  CHECK(r[6].type == Type({2, 2, 2, 2}));
  CHECK(r[6].data[1 * 8 + 0 * 4 + 1 * 2 + 1] == 3.0 * 8.0);
}

TEST_CASE("reference: svd reconstructs, descending s, orthonormal factors") {
  auto a = T({3, 2}, {3, 1, 1, 3, 2, -2});
  auto r = evalOne({a}, [&](Builder &b, auto in) {
    auto usv = b.svd(in[0]);
    return std::vector<ir::ValueId>(usv.begin(), usv.end());
  });
  REQUIRE(r.size() == 3);
  CHECK(r[0].type == Type({3, 2}));
  CHECK(r[1].type == Type({2}));
  CHECK(r[2].type == Type({2, 2}));
  CHECK(r[1].data[0] >= r[1].data[1]);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      double acc = 0;
      for (int k = 0; k < 2; ++k) acc += r[0].data[i * 2 + k] * r[1].data[k] * r[2].data[k * 2 + j];
      CHECK(acc == doctest::Approx(a.data[i * 2 + j]).epsilon(1e-14));
    }
  // Singular values of [[3,1],[1,3],[2,-2]]: A^T A = [[14,2],[2,14]] -> 16, 12.
  CHECK(r[1].data[0] == doctest::Approx(4.0).epsilon(1e-14));
  CHECK(r[1].data[1] == doctest::Approx(std::sqrt(12.0)).epsilon(1e-14));
}

TEST_CASE("reference: input errors name the input") {
  Program p;
  Builder b(p);
  auto x = p.addInput("T", Type({2, 2}));
  p.addOutput(b.neg(x));
  CHECK_THROWS_WITH_AS(rt::evaluateReference(p, {}), doctest::Contains("1 input(s) (%T)"), Error);
  CHECK_THROWS_WITH_AS(rt::evaluateReference(p, {T({4}, {1, 2, 3, 4})}),
                       doctest::Contains("input %T (#0): expected f64[2,2], got f64[4]"), Error);
}

TEST_CASE("reference: svd of NaN input is an error naming the op") {
  Program p;
  Builder b(p);
  auto x = p.addInput("M", Type({2, 2}));
  b.setLoc("test svd");
  auto usv = b.svd(x);
  p.addOutput(usv[1]);
  auto nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH_AS(rt::evaluateReference(p, {T({2, 2}, {1, nan, 0, 1})}),
                       doctest::Contains("svd"), Error);
  CHECK_THROWS_WITH_AS(rt::evaluateReference(p, {T({2, 2}, {1, nan, 0, 1})}),
                       doctest::Contains("test svd"), Error);
}

TEST_CASE("reference: sylvester_solve by its linear system and, past 2048 unknowns, by eigenbases") {
  // A = diag(1, 2, 3) + its antisymmetric part (not read), B = [[2, 1], [1, 2]] (eigenvalues
  // 1 and 3): the residual S_A·X + X·S_B − C is rounding, and the two methods agree.
  auto out = evalOne({T({3, 3}, {1, 0.5, 0, -0.5, 2, 0, 0, 0, 3}), T({2, 2}, {2, 1, 1, 2}),
                      T({3, 2}, {1, -2, 3, 0.5, -1, 4})},
                     [](Builder &b, const std::vector<ir::ValueId> &x) {
                       return std::vector<ir::ValueId>{b.sylvesterSolve(x[0], x[1], x[2])};
                     });
  const std::vector<double> &X = out[0].data, c = {1, -2, 3, 0.5, -1, 4};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      const double r = (i + 1) * X[size_t(i * 2 + j)] + 2 * X[size_t(i * 2 + j)] + X[size_t(i * 2 + 1 - j)];
      CHECK(r == doctest::Approx(c[size_t(i * 2 + j)]).epsilon(1e-14));
    }
  // 48 × 48 unknowns (eigenbases) against the engine's dsyevd path, on A = 3·I + R/8 and
  // B = 2·I + R'/8 with random R, R'.
  const int64_t n = 48;
  std::vector<double> a(n * n), bb(n * n), cc(n * n);
  for (int64_t k = 0; k < n * n; ++k) {
    a[size_t(k)] = (k % n == k / n ? 3.0 : 0.0) + std::sin(0.7 * double(k)) / 8;
    bb[size_t(k)] = (k % n == k / n ? 2.0 : 0.0) + std::cos(1.3 * double(k)) / 8;
    cc[size_t(k)] = std::sin(0.1 * double(k) + 1);
  }
  Program p;
  Builder b(p);
  ir::ValueId A = p.addInput("a", Type({n, n})), B = p.addInput("b", Type({n, n})), C = p.addInput("c", Type({n, n}));
  p.addOutput(b.sylvesterSolve(A, B, C));
  const std::vector<Tensor> in = {T({n, n}, a), T({n, n}, bb), T({n, n}, cc)};
  const Tensor ref = rt::evaluateReference(p, in)[0];
  rt::Engine engine(1);
  const Tensor got = engine.run(*rt::prepare(p), in)[0];
  double worst = 0, scale = 0;
  for (size_t k = 0; k < ref.data.size(); ++k) {
    worst = std::max(worst, std::fabs(ref.data[k] - got.data[k]));
    scale = std::max(scale, std::fabs(ref.data[k]));
  }
  CHECK(scale > 0.01);
  CHECK(worst <= 1e-13 * scale);
}
