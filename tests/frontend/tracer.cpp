//===- tests/frontend/tracer.cpp - The tracing Tensor API ------------------------===//
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>

#include "frontend/Tracer.h"
#include "ir/Diagnostics.h"
#include "ir/Verifier.h"
#include "runtime/Runtime.h"

using namespace tessel;
using namespace tessel::frontend;

namespace {
int countOps(const ir::Program &p, ir::OpKind k) {
  int n = 0;
  for (const auto &op : p.ops) n += op.kind == k;
  return n;
}
std::string shapeErrorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const ShapeError &e) {
    return e.what();
  }
  return "<no ShapeError>";
}
} // namespace

TEST_CASE("tracer: expressions build typed ops and evaluate") {
  Tracer tr("f");
  Tensor x = tr.input("x", {2, 3});
  Tensor y = ((x * x).sum() + 1.0).named("y");
  CHECK(y.type() == ir::Type({}));
  Tensor z = (2.0 * x - x / 4.0).transpose({1, 0});
  CHECK(z.shape() == ir::Shape{3, 2});
  Tensor r = z.reshape({6}).slice({1}, {4}).pad({2}, {1});
  CHECK(r.shape() == ir::Shape{6});
  tr.output(y);
  tr.output(r, "r");
  ir::Program p = tr.take();
  CHECK(ir::verify(p).empty());
  CHECK(p.name == "f");
  CHECK(p.outputName(0) == "y");
  CHECK(p.outputName(1) == "r");
  // Scalars broadcast with broadcast_in_dim, never implicitly.
  CHECK(countOps(p, ir::OpKind::BroadcastInDim) == 2); // 2.0 * x and x / 4.0

  ir::Tensor xin(ir::Type({2, 3}), {1, 2, 3, 4, 5, 6});
  auto out = rt::evaluateReference(p, {xin});
  CHECK(out[0].data[0] == 1 + 4 + 9 + 16 + 25 + 36 + 1.0);
  // z = 1.75 x^T = [[1,4],[2,5],[3,6]]*1.75, flattened [1,4,2,5,3,6]*1.75; slice 1..4 ->
  // [4,2,5]*1.75; pad 2 low, 1 high.
  std::vector<double> want = {0, 0, 7, 3.5, 8.75, 0};
  CHECK(out[1].data == want);
}

TEST_CASE("tracer: unary math, cosh/sinh, maximum, compare, select") {
  Tracer tr("g");
  Tensor a = tr.input("a", {3});
  tr.output(cosh(a));
  tr.output(sinh(a));
  tr.output(maximum(a, tr.scalar(0.5)));
  tr.output(select(compare(a, tr.scalar(0.0), "GT"), a.sqrt(), -a));
  tr.output(a.abs().log() + a.sin() * a.cos() + a.sign() + a.exp());
  tr.output(a.stopGradient().max());
  ir::Program p = tr.take();
  REQUIRE(ir::verify(p).empty());
  ir::Tensor in(ir::Type({3}), {-0.7, 0.25, 1.5});
  auto out = rt::evaluateReference(p, {in});
  for (int i = 0; i < 3; ++i) {
    double v = in.data[i];
    CHECK(out[0].data[i] == doctest::Approx(std::cosh(v)).epsilon(1e-15));
    CHECK(out[1].data[i] == doctest::Approx(std::sinh(v)).epsilon(1e-14));
    CHECK(out[2].data[i] == std::max(v, 0.5));
    CHECK(out[3].data[i] == (v > 0 ? std::sqrt(v) : -v));
    double w = std::log(std::fabs(v)) + std::sin(v) * std::cos(v) + (v > 0 ? 1 : -1) + std::exp(v);
    CHECK(out[4].data[i] == doctest::Approx(w).epsilon(1e-15));
  }
  CHECK(out[5].data[0] == 1.5);
}

TEST_CASE("tracer: einsum, matmul, svd, concatenate") {
  Tracer tr("h");
  Tensor A = tr.input("A", {3, 2});
  Tensor B = tr.input("B", {2, 4});
  Tensor C = matmul(A, B);
  Tensor E = einsum("ij,jk->ik", {A, B});
  auto [U, s, Vt] = svd(C);
  CHECK(U.shape() == ir::Shape{3, 3});
  CHECK(s.shape() == ir::Shape{3});
  CHECK(Vt.shape() == ir::Shape{3, 4});
  Tensor cat = concatenate({A, A * 10.0, A.slice({0, 0}, {3, 1})}, 1);
  CHECK(cat.shape() == ir::Shape{3, 5});
  tr.output(C);
  tr.output(E);
  tr.output(s);
  tr.output(cat);
  ir::Program p = tr.take();
  REQUIRE(ir::verify(p).empty());
  ir::Tensor a(ir::Type({3, 2}), {1, 2, 3, 4, 5, 6});
  ir::Tensor b(ir::Type({2, 4}), {1, 0, 2, -1, 0, 1, 1, 3});
  auto out = rt::evaluateReference(p, {a, b});
  CHECK(out[0].data == out[1].data);
  CHECK(out[0].data[0] == 1.0);  // 1*1 + 2*0
  CHECK(out[0].data[3] == 5.0);  // 1*-1 + 2*3
  // Singular values descending, non-negative; Σ s² = ||C||_F².
  double fro = 0, ss = 0;
  for (double v : out[0].data) fro += v * v;
  for (double v : out[2].data) ss += v * v;
  CHECK(out[2].data[0] >= out[2].data[1]);
  CHECK(out[2].data[1] >= out[2].data[2]);
  CHECK(ss == doctest::Approx(fro).epsilon(1e-13));
  std::vector<double> want = {1, 2, 10, 20, 1, 3, 4, 30, 40, 3, 5, 6, 50, 60, 5};
  CHECK(out[3].data == want); // exact: pads and adds of zeros
}

TEST_CASE("tracer: shape errors name the op, both shapes and the location") {
  Tracer tr("bad");
  Tensor a = tr.input("a", {2, 2});
  Tensor b = tr.input("b", {4});
  std::string msg = shapeErrorOf([&] { (void)(a + b); });
  CHECK(msg.find("add") != std::string::npos);
  CHECK(msg.find("f64[2,2]") != std::string::npos);
  CHECK(msg.find("f64[4]") != std::string::npos);

  tr.setLoc("trg 16->16: svd Ma");
  msg = shapeErrorOf([&] { (void)svd(b); });
  CHECK(msg.find("svd") != std::string::npos);
  CHECK(msg.find("f64[4]") != std::string::npos);
  CHECK(msg.find("(at trg 16->16: svd Ma)") != std::string::npos);

  msg = shapeErrorOf([&] { (void)einsum("ij,jk->ik", {a, b.reshape({4, 1})}); });
  CHECK(msg.find("einsum") != std::string::npos);
  CHECK(msg.find("f64[4,1]") != std::string::npos);
  msg = shapeErrorOf([&] { (void)matmul(a, b); });
  CHECK(msg.find("f64[2,2]") != std::string::npos);
  CHECK(msg.find("f64[4]") != std::string::npos);
  msg = shapeErrorOf([&] { (void)a.reshape({3}); });
  CHECK(msg.find("reshape") != std::string::npos);
  CHECK(msg.find("f64[3]") != std::string::npos);
  msg = shapeErrorOf([&] { (void)concatenate({a, b.reshape({1, 4})}, 0); });
  CHECK(msg.find("f64[1,4]") != std::string::npos);
  msg = shapeErrorOf([&] { (void)Tensor().exp(); });
  CHECK(msg.find("invalid") != std::string::npos);

  Tracer other("other");
  Tensor c = other.input("c", {2, 2});
  msg = shapeErrorOf([&] { (void)(a * c); });
  CHECK(msg.find("different programs") != std::string::npos);
  CHECK_THROWS_AS(tr.output(c), Error);
}
