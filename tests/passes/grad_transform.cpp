// Grad transform: structure of the result and the documented conventions, checked
// against exact (hand-derived) values.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>

#include "grad_testutil.h"
#include "ir/Parser.h"
#include "passes/VjpRules.h"

using namespace gradtest;
using namespace tessel::ir;
using tessel::passes::grad;
using tessel::passes::GradOptions;

namespace {

GradOptions opts(std::vector<std::string> wrt, bool vjp = false, bool keep = false) {
  GradOptions o;
  o.wrt = std::move(wrt);
  o.vjp = vjp;
  o.keepOutputs = keep;
  return o;
}

size_t countOps(const Program &p, OpKind k) {
  size_t n = 0;
  for (const Op &op : p.ops) n += op.kind == k;
  return n;
}

} // namespace

TEST_CASE("grad: f(x) = Σ sin(x)·x·x, value and gradient (x used three times)") {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({5}));
  ValueId f = b.reduceSum(b.mul(b.mul(b.unary(OpKind::Sin, x), x), x), {0});
  p.setName(f, "f");
  p.addOutput(f);
  Program g = grad(p, opts({"x"}, false, true));
  verifyOrThrow(g);
  REQUIRE(g.outputs.size() == 2);
  CHECK(g.outputName(0) == "f");
  CHECK(g.outputName(1) == "grad_x");
  Tensor xv(Type({5}), {-1.3, -0.2, 0.0, 0.7, 2.1});
  auto out = rt::evaluateReference(g, {xv});
  double fx = 0;
  for (int i = 0; i < 5; ++i) {
    double t = xv.data[i];
    fx += std::sin(t) * t * t;
    // d/dx (x² sin x) = 2x sin x + x² cos x
    CHECK(out[1].data[i] == doctest::Approx(2 * t * std::sin(t) + t * t * std::cos(t)).epsilon(1e-14));
  }
  CHECK(out[0].data[0] == doctest::Approx(fx).epsilon(1e-14));
  // The result round-trips through the text form.
  Program back = parseProgram(printProgram(g));
  CHECK(printProgram(back) == printProgram(g));
}

TEST_CASE("grad: second derivative of x³ through grad of grad") {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({}));
  p.addOutput(b.mul(b.mul(x, x), x));
  Program g1 = grad(p, opts({"x"}));
  Program g2 = grad(g1, opts({"x"}));
  Program g3 = grad(g2, opts({"x"}));
  verifyOrThrow(g3);
  for (double xv : {-2.0, 0.5, 3.0}) {
    CHECK(rt::evaluateReference(g1, {Tensor::scalar(xv)})[0].data[0] == doctest::Approx(3 * xv * xv));
    CHECK(rt::evaluateReference(g2, {Tensor::scalar(xv)})[0].data[0] == doctest::Approx(6 * xv));
    CHECK(rt::evaluateReference(g3, {Tensor::scalar(xv)})[0].data[0] == doctest::Approx(6.0));
  }
  // Names: the second gradient does not clash with the first.
  Program g2keep = grad(g1, opts({"x"}, false, true));
  CHECK(g2keep.outputName(0) == "grad_x");
  CHECK(g2keep.outputName(1) != "grad_x");
}

TEST_CASE("grad: inputs the outputs do not depend on get zeros; no backward work for them") {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({2, 3}));
  ValueId y = p.addInput("y", Type({4}));
  ValueId z = p.addInput("z", Type({2, 3}));
  // y feeds an op whose result no output uses; z only reaches the output through
  // stop_gradient and compare.
  b.unary(OpKind::Exp, y);
  ValueId s = b.add(b.stopGradient(b.mul(z, z)), b.compare(z, x, "GT"));
  p.addOutput(b.reduceSum(b.mul(b.unary(OpKind::Sin, x), s), {0, 1}));
  Program g = grad(p, opts({"x", "y", "z"}));
  verifyOrThrow(g);
  REQUIRE(g.outputs.size() == 3);
  CHECK(g.outputName(1) == "grad_y");
  CHECK(g.outputName(2) == "grad_z");
  CHECK(g.type(g.outputs[1]) == Type({4}));
  // Dead forward op (exp y) is dropped; one cos for the backward of sin, nothing else.
  CHECK(countOps(g, OpKind::Exp) == 0);
  CHECK(countOps(g, OpKind::Cos) == 1);
  Tensor xv(Type({2, 3}), {0.1, -0.4, 0.9, 1.2, -2.0, 0.3});
  Tensor yv(Type({4}), {1, 2, 3, 4});
  Tensor zv(Type({2, 3}), {0.5, 0.5, 0.5, -0.5, -0.5, -0.5});
  auto out = rt::evaluateReference(g, {xv, yv, zv});
  for (int i = 0; i < 6; ++i) {
    double sv = zv.data[i] * zv.data[i] + (zv.data[i] > xv.data[i] ? 1.0 : 0.0);
    CHECK(out[0].data[i] == doctest::Approx(std::cos(xv.data[i]) * sv).epsilon(1e-14));
    CHECK(out[2].data[i] == 0.0);
  }
  for (double v : out[1].data) CHECK(v == 0.0);
}

TEST_CASE("grad: only values on a path from wrt inputs to outputs get backward ops") {
  // c = exp(w) is expensive-looking but w is not differentiated: no cotangent for it.
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({3}));
  ValueId w = p.addInput("w", Type({3}));
  ValueId c = b.unary(OpKind::Exp, b.unary(OpKind::Sin, w));
  p.addOutput(b.reduceSum(b.mul(c, x), {0}));
  Program g = grad(p, opts({"x"}));
  verifyOrThrow(g);
  // Forward: sin, exp, mul, reduce_sum (dropped: only the gradient is output);
  // backward: broadcast of the seed, mul by c. No cos (the VJP of sin) anywhere.
  CHECK(countOps(g, OpKind::Cos) == 0);
  CHECK(countOps(g, OpKind::ReduceSum) == 0);
  CHECK(countOps(g, OpKind::Mul) == 1);
}

TEST_CASE("grad: stop_gradient blocks; select routes by the predicate") {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({4}));
  // f = Σ stop_gradient(exp x)·sin x + select(x > 0, x², 3x)
  ValueId three = b.broadcastScalar(b.scalar(3.0), {4});
  ValueId sel = b.select(b.compare(x, b.broadcastScalar(b.scalar(0.0), {4}), "GT"), b.mul(x, x),
                         b.mul(three, x));
  ValueId e = b.add(b.mul(b.stopGradient(b.unary(OpKind::Exp, x)), b.unary(OpKind::Sin, x)), sel);
  p.addOutput(b.reduceSum(e, {0}));
  Tensor xv(Type({4}), {-1.5, -0.25, 0.5, 2.0});
  auto gr = evalGrad(p, {"x"}, {xv});
  for (int i = 0; i < 4; ++i) {
    double t = xv.data[i];
    double expect = std::exp(t) * std::cos(t) + (t > 0 ? 2 * t : 3.0);
    CHECK(gr[0].data[i] == doctest::Approx(expect).epsilon(1e-14));
  }
}

TEST_CASE("grad: an exactly zero cotangent contributes exactly 0, even where f' is infinite") {
  SUBCASE("L = (sqrt(Σ x²))² at x = 0: gradient 0 (0·∞ of sqrt at 0)") {
    Program p;
    Builder b(p);
    ValueId x = p.addInput("x", Type({3}));
    ValueId r = b.unary(OpKind::Sqrt, b.reduceSum(b.mul(x, x), {0}));
    p.addOutput(b.mul(r, r));
    auto gr = evalGrad(p, {"x"}, {Tensor(Type({3}), {0, 0, 0})});
    for (double v : gr[0].data) CHECK(v == 0.0);
    // Away from 0 the rule is the ordinary one: ∇L = 2x.
    gr = evalGrad(p, {"x"}, {Tensor(Type({3}), {1, -2, 3})});
    CHECK(gr[0].data == std::vector<double>{2, -4, 6});
  }
  SUBCASE("f = select(x < 1, x, sqrt x) at x = 0: f' = 1 (the branch not taken gets 0)") {
    Program p;
    Builder b(p);
    ValueId x = p.addInput("x", Type({}));
    p.addOutput(b.select(b.compare(x, b.scalar(1.0), "LT"), x, b.unary(OpKind::Sqrt, x)));
    CHECK(evalGrad(p, {"x"}, {Tensor::scalar(0.0)})[0].data[0] == 1.0);
  }
  SUBCASE("f = select(x > 0, 0, exp x) at x = 1e10: f' = 0 (exp overflows to inf)") {
    Program p;
    Builder b(p);
    ValueId x = p.addInput("x", Type({}));
    p.addOutput(b.select(b.compare(x, b.scalar(0.0), "GT"), b.scalar(0.0), b.unary(OpKind::Exp, x)));
    CHECK(evalGrad(p, {"x"}, {Tensor::scalar(1e10)})[0].data[0] == 0.0);
  }
  SUBCASE("log and div at 0 behind a select; a nonzero cotangent still gives inf") {
    Program p;
    Builder b(p);
    ValueId x = p.addInput("x", Type({2}));
    ValueId one = b.broadcastScalar(b.scalar(1.0), {2});
    ValueId pick = b.compare(x, b.broadcastScalar(b.scalar(0.5), {2}), "GT");
    // Element 0 (x = 0): log x and 1/x are not picked; element 1 (x = 1): they are.
    ValueId f = b.add(b.select(pick, b.unary(OpKind::Log, x), x), b.select(pick, b.div(one, x), x));
    p.addOutput(b.reduceSum(f, {0}));
    auto gr = evalGrad(p, {"x"}, {Tensor(Type({2}), {0, 1})});
    CHECK(gr[0].data[0] == 2.0);             // 1 + 1 from the picked x branches
    CHECK(gr[0].data[1] == 1.0 - 1.0);       // 1/x − 1/x² at x = 1
    // L = Σ log x at x = 0: the cotangent is 1 there, so the gradient is +inf, not 0.
    Program q;
    Builder c(q);
    ValueId y = q.addInput("x", Type({1}));
    q.addOutput(c.reduceSum(c.unary(OpKind::Log, y), {0}));
    CHECK(std::isinf(evalGrad(q, {"x"}, {Tensor(Type({1}), {0})})[0].data[0]));
  }
}

TEST_CASE("grad: entries off an einsum's diagonal get an exact 0, also next to inf") {
  // L = trace(x)·Σy: ∂L/∂x is Σy on the diagonal and 0 off it, which the einsum never
  // reads, even when Σy is inf (found by the differential fuzzer: it was inf·0 = NaN,
  // unlike the same gradient after the order pass lowered the einsum).
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({2, 2}));
  ValueId y = p.addInput("y", Type({3}));
  p.addOutput(b.einsum("ii,j->", {x, y}));
  const double inf = INFINITY;
  auto gr = evalGrad(p, {"x"}, {Tensor(Type({2, 2}), {1, 2, 3, 4}), Tensor(Type({3}), {1, inf, 2})});
  CHECK(gr[0].data == std::vector<double>{inf, 0, 0, inf});
  gr = evalGrad(p, {"x"}, {Tensor(Type({2, 2}), {1, 2, 3, 4}), Tensor(Type({3}), {1, 2, 3})});
  CHECK(gr[0].data == std::vector<double>{6, 0, 0, 6});
}

TEST_CASE("grad: ties in reduce_max and maximum split the cotangent equally") {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({2, 4}));
  ValueId y = p.addInput("y", Type({2, 4}));
  // f = Σ_i max_j x_ij + Σ max(x, y)
  ValueId f = b.add(b.reduceSum(b.reduceMax(x, {1}), {0}),
                    b.reduceSum(b.binary(OpKind::Maximum, x, y), {0, 1}));
  p.addOutput(f);
  // Row 0: max 2 attained three times; row 1: a unique max. y ties x at two places.
  Tensor xv(Type({2, 4}), {2, 1, 2, 2, /**/ -1, 5, 0, 4});
  Tensor yv(Type({2, 4}), {2, 3, 0, 0, /**/ -1, 0, 1, 9});
  auto gr = evalGrad(p, {"x", "y"}, {xv, yv});
  std::vector<double> gx = {1.0 / 3 + 0.5, 0, 1.0 / 3 + 1, 1.0 / 3 + 1, /**/ 0.5, 1 + 1, 0, 0};
  std::vector<double> gy = {0.5, 1, 0, 0, /**/ 0.5, 0, 1, 1};
  for (int i = 0; i < 8; ++i) {
    CAPTURE(i);
    CHECK(gr[0].data[i] == doctest::Approx(gx[i]).epsilon(1e-15));
    CHECK(gr[1].data[i] == doctest::Approx(gy[i]).epsilon(1e-15));
  }
}

TEST_CASE("grad: vjp adds one cotangent input per output and sums over outputs") {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({2, 2}));
  ValueId u = b.mul(x, x);
  p.setName(u, "u");
  p.addOutput(u);
  p.addOutput(b.reduceSum(x, {0})); // anonymous: out1
  Program g = grad(p, opts({"x"}, true));
  verifyOrThrow(g);
  REQUIRE(g.inputs.size() == 3);
  CHECK(g.value(g.inputs[1]).name == "ct_u");
  CHECK(g.value(g.inputs[2]).name == "ct_out1");
  CHECK(g.type(g.inputs[2]) == Type({2}));
  Tensor xv(Type({2, 2}), {1, 2, 3, 4});
  Tensor cu(Type({2, 2}), {1, -1, 0.5, 2});
  Tensor c1(Type({2}), {10, 20});
  auto out = rt::evaluateReference(g, {xv, cu, c1});
  // x̄_ij = 2 x_ij cu_ij + c1_j
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      CHECK(out[0].data[2 * i + j] == doctest::Approx(2 * xv.data[2 * i + j] * cu.data[2 * i + j] + c1.data[j]));
}

TEST_CASE("grad: identity gradients get their own named value") {
  // f(x, y) = x + y: both gradients are the seed itself; vjp of the identity.
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({}));
  ValueId y = p.addInput("y", Type({}));
  p.addOutput(b.add(x, y));
  Program g = grad(p, opts({}));
  verifyOrThrow(g);
  CHECK(g.outputName(0) == "grad_x");
  CHECK(g.outputName(1) == "grad_y");
  auto out = rt::evaluateReference(g, {Tensor::scalar(1), Tensor::scalar(2)});
  CHECK(out[0].data[0] == 1.0);
  CHECK(out[1].data[0] == 1.0);

  Program q;
  ValueId z = q.addInput("z", Type({3}));
  q.addOutput(z);
  Program h = grad(q, opts({"z"}, true, true));
  verifyOrThrow(h);
  CHECK(h.outputName(0) == "z");
  CHECK(h.outputName(1) == "grad_z");
  Tensor zv(Type({3}), {1, 2, 3}), cz(Type({3}), {4, 5, 6});
  CHECK(rt::evaluateReference(h, {zv, cz})[1].data == cz.data);
}

TEST_CASE("grad: errors name the output shape, the input, the op") {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({2, 3}));
  ValueId y = b.mul(x, x);
  p.setName(y, "y");
  p.addOutput(y);
  CHECK_THROWS_WITH_AS(grad(p, opts({"x"})),
                       doctest::Contains("output '%y' has shape f64[2,3]"), tessel::Error);
  CHECK_THROWS_WITH_AS(grad(p, opts({"q"}, true)),
                       doctest::Contains("no input named '%q' (inputs: %x)"), tessel::Error);
  CHECK_THROWS_WITH_AS(grad(p, opts({"x", "x"}, true)), doctest::Contains("listed twice"),
                       tessel::Error);
  p.addOutput(b.reduceSum(y, {0, 1}));
  CHECK_THROWS_WITH_AS(grad(p, opts({"x"})), doctest::Contains("has 2 outputs"), tessel::Error);
  // A missing rule is reported at transform time, naming the op (only if reached).
  auto saved = tessel::passes::vjp::setVjpRuleForTesting(OpKind::Sin, nullptr);
  Program q;
  Builder c(q);
  ValueId t = q.addInput("t", Type({}));
  q.addOutput(c.mul(c.unary(OpKind::Sin, t), t));
  CHECK_THROWS_WITH_AS(grad(q, opts({"t"})), "grad: no VJP rule for op 'sin'", tessel::Error);
  Program r;
  Builder d(r);
  ValueId u = r.addInput("u", Type({}));
  ValueId k = r.addInput("k", Type({}));
  r.addOutput(d.mul(d.unary(OpKind::Sin, k), u));
  CHECK_NOTHROW(grad(r, opts({"u"}))); // sin k is not on a path from u
  tessel::passes::vjp::setVjpRuleForTesting(OpKind::Sin, saved);
  CHECK_NOTHROW(grad(q, opts({"t"})));
}

TEST_CASE("grad: the transform is linear in the program (1,000- and 2,000-op chains)") {
  // A chain of elementwise/shape/contraction ops on 8×8 matrices. The gradient of twice
  // the chain has twice the ops (no op of the backward depends on the chain's length):
  // what keeps the transform's time linear. Its time is printed, not asserted (a shared
  // machine's timing is not a test).
  auto chain = [](size_t n) {
    Program p;
    Builder b(p);
    ValueId x = p.addInput("x", Type({8, 8}));
    ValueId w = p.addInput("w", Type({8, 8}));
    ValueId v = x;
    while (p.ops.size() < n) {
      v = b.unary(OpKind::Sin, v);
      v = b.dotGeneral(v, w, {}, {}, {1}, {0});
      v = b.transpose(v, {1, 0});
      v = b.mul(v, x);
      v = b.add(v, w);
    }
    p.addOutput(b.reduceSum(v, {0, 1}));
    return p;
  };
  std::vector<size_t> forward, backward;
  for (size_t n : {1000, 2000}) {
    const Program p = chain(n);
    auto t0 = std::chrono::steady_clock::now();
    Program g = grad(p, opts({"x", "w"}, false, true));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE("grad of a ", p.ops.size(), "-op program: ", g.ops.size(), " ops in ", ms, " ms");
    verifyOrThrow(g);
    forward.push_back(p.ops.size());
    backward.push_back(g.ops.size() - p.ops.size());
  }
  // Each block of 5 forward ops adds 10 ops to the backward (their VJPs): 2 per
  // forward op, at both lengths.
  CHECK(backward[0] <= 2 * forward[0]);
  CHECK(backward[1] - backward[0] == 2 * (forward[1] - forward[0]));
}
