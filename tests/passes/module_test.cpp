// Modules: calls and scans through grad (orders 1 and 2), inline, dce, the reference
// evaluator and the engine, against exact values.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "ir/Builder.h"
#include "ir/Json.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Dce.h"
#include "passes/Grad.h"
#include "passes/Inline.h"
#include "passes/SplitVjp.h"
#include "runtime/Runtime.h"

using namespace tessel;
using namespace tessel::ir;

namespace {

/// The 1D Ising chain by its transfer matrix T = [[e^β, e^-β], [e^-β, e^β]] applied
/// `steps` times to v = (½, ½), normalised each step, as a scan: lnZ/N = Σ ln‖Tv‖₁ / N.
/// (½, ½) is T's leading eigenvector (eigenvalue 2 cosh β) of norm 1, so every step adds exactly
/// ln(2 cosh β): lnZ/N = ln(2 cosh β), d/dβ = tanh β, d²/dβ² = sech² β, for any steps.
Program isingChain(int64_t steps) {
  const std::string text = R"(program @step(%v: f64[2], %acc: f64[], %beta: f64[]) {
  %e = exp %beta : f64[]
  %n = neg %beta : f64[]
  %f = exp %n : f64[]
  %v0 = slice %v {start = [0], limit = [1]} : f64[1]
  %v1 = slice %v {start = [1], limit = [2]} : f64[1]
  %eb = broadcast_in_dim %e {shape = [1], dims = []} : f64[1]
  %fb = broadcast_in_dim %f {shape = [1], dims = []} : f64[1]
  %a0 = mul %eb, %v0 : f64[1]
  %a1 = mul %fb, %v1 : f64[1]
  %w0 = add %a0, %a1 : f64[1]
  %b0 = mul %fb, %v0 : f64[1]
  %b1 = mul %eb, %v1 : f64[1]
  %w1 = add %b0, %b1 : f64[1]
  %p0 = pad %w0 {low = [0], high = [1]} : f64[2]
  %p1 = pad %w1 {low = [1], high = [0]} : f64[2]
  %w = add %p0, %p1 : f64[2]
  %s = reduce_sum %w {axes = [0]} : f64[]
  %sb = broadcast_in_dim %s {shape = [2], dims = []} : f64[2]
  %vn = div %w, %sb : f64[2]
  %ls = log %s : f64[]
  %acc2 = add %acc, %ls : f64[]
  return %vn, %acc2, %beta
}

entry program @chain(%beta: f64[]) {
  %one = constant {value = dense<0.5> : f64[]} : f64[]
  %zero = constant {value = dense<0> : f64[]} : f64[]
  %v = broadcast_in_dim %one {shape = [2], dims = []} : f64[2]
  %vN, %acc, %b = scan @step(%v, %zero, %beta) {length = STEPS, carries = 3} : f64[2], f64[], f64[]
  %n = constant {value = dense<STEPS> : f64[]} : f64[]
  %lnz = div %acc, %n : f64[]
  return %lnz
}
)";
  std::string t = text;
  for (size_t at; (at = t.find("STEPS")) != std::string::npos;) t.replace(at, 5, std::to_string(steps));
  return parseProgram(t, "chain.tir");
}

double scalarOf(const Program &p, double beta, bool engine = false) {
  std::vector<Tensor> in = {Tensor::scalar(beta)};
  if (!engine) return rt::evaluateReference(p, in).back().data[0];
  rt::Engine e(1);
  return e.run(*rt::prepare(p), in).back().data[0];
}

bool bitwiseEqual(const std::vector<Tensor> &a, const std::vector<Tensor> &b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].type != b[i].type ||
        std::memcmp(a[i].data.data(), b[i].data.data(), a[i].data.size() * sizeof(double)) != 0)
      return false;
  return true;
}

} // namespace

TEST_CASE("module: the 1D Ising chain as a scan gives ln(2 cosh β) and its two derivatives") {
  const Program chain = isingChain(3000);
  passes::GradOptions o;
  o.keepOutputs = false;
  const Program d1 = passes::grad(chain, o);
  const Program d2 = passes::grad(d1, o);
  // Grad of grad stays a module of a few functions: its size does not grow with the
  // trip count (the loop is an op).
  CHECK(d2.functions.size() < 16);
  size_t ops = d2.ops.size();
  for (const Program &f : d2.functions) ops += f.ops.size();
  CHECK(ops < 600);
  for (double beta : {0.1, 0.44, 1.3}) {
    CAPTURE(beta);
    CHECK(scalarOf(chain, beta) == doctest::Approx(std::log(2 * std::cosh(beta))).epsilon(1e-13));
    CHECK(scalarOf(d1, beta) == doctest::Approx(std::tanh(beta)).epsilon(1e-12));
    const double sech = 1 / std::cosh(beta);
    CHECK(scalarOf(d2, beta) == doctest::Approx(sech * sech).epsilon(1e-10));
  }
  // The engine (the module interpreter): the same numbers, the second derivative too.
  for (double beta : {0.1, 0.44}) {
    CHECK(scalarOf(d1, beta, true) == doctest::Approx(std::tanh(beta)).epsilon(1e-12));
    const double sech = 1 / std::cosh(beta);
    CHECK(scalarOf(d2, beta, true) == doctest::Approx(sech * sech).epsilon(1e-10));
  }
}

TEST_CASE("module: staged and inlined forms are bitwise equal (reference and engine), "
          "orders 0 to 2") {
  Program p = isingChain(7);
  passes::GradOptions o;
  o.keepOutputs = false;
  std::vector<Program> forms = {p, passes::grad(p, o)};
  forms.push_back(passes::grad(forms[1], o));
  for (const Program &staged : forms) {
    REQUIRE(verify(staged).empty());
    Program flat = staged;
    REQUIRE(passes::runInline(flat));
    CHECK(flat.functions.empty());
    REQUIRE(verify(flat).empty());
    const std::vector<Tensor> in = {Tensor::scalar(0.37)};
    const auto a = rt::evaluateReference(staged, in);
    CHECK(bitwiseEqual(a, rt::evaluateReference(flat, in)));
    for (int w : {1, 2}) {
      rt::Engine e(w);
      CHECK(bitwiseEqual(a, e.run(*rt::prepare(flat), in)));
      // The module interpreter: segments on the engine, calls and scans between them.
      CHECK(bitwiseEqual(a, e.run(*rt::prepare(staged), in)));
    }
    // Text and JSON round trips of the module.
    const std::string text = printProgram(staged);
    CHECK(printProgram(parseProgram(text, "m.tir")) == text);
    CHECK(printProgram(programFromJson(programToJson(staged), "m.json")) == text);
  }
}

TEST_CASE("module: grad makes one forward/backward pair per callee and set of inputs; dce "
          "drops dead functions") {
  Program p = parseProgram(R"(program @f(%a: f64[3], %w: f64[3]) {
  %s = sin %a : f64[3]
  %y = mul %s, %w : f64[3]
  return %y
}

program @unused(%a: f64[3]) {
  return %a
}

entry program @main(%x: f64[3], %y: f64[3]) {
  %r1 = call @f(%x, %y) : f64[3]
  %r2 = call @f(%r1, %y) : f64[3]
  %r3 = call @f(%r2, %y) : f64[3]
  %l = reduce_sum %r3 {axes = [0]} : f64[]
  return %l
}
)",
                           "m.tir");
  passes::GradOptions o;
  o.wrt = {"x"};
  Program g = passes::grad(p, o);
  int halves = 0;
  for (const Program &f : g.functions) halves += f.name.rfind("f_fwd", 0) == 0 || f.name.rfind("f_bwd", 0) == 0;
  CHECK(halves == 2); // three call sites, the same wrt set (a only: %y is not active): one pair
  // d/dx of sin(sin(sin(x)·y)·y)·y summed, at x = 0.3, y = 0.8, by hand.
  const double x = 0.3, y = 0.8;
  const double u1 = std::sin(x) * y, u2 = std::sin(u1) * y;
  const double d = std::cos(u2) * y * std::cos(u1) * y * std::cos(x) * y;
  auto out = rt::evaluateReference(g, {Tensor(Type({3}), {x, x, x}), Tensor(Type({3}), {y, y, y})});
  CHECK(out[1].data[0] == doctest::Approx(d).epsilon(1e-14));
  CHECK(passes::removeDeadFunctions(p) == 1);
  CHECK(p.functions.size() == 1);
  CHECK(verify(p).empty());
}

TEST_CASE("module: the remat policies at call and scan boundaries give the same derivatives, "
          "orders 1 and 2") {
  // recompute: each iteration's VJP recomputes the body's forward from the stored
  // carries; store / save-svd: the forward scan runs the forward half of the body's
  // gradient and stacks its residuals, the reverse scan runs the backward half.
  const Program chain = isingChain(200);
  for (passes::RematPolicy first : {passes::RematPolicy::Recompute, passes::RematPolicy::Store,
                                    passes::RematPolicy::SaveSvd})
    for (passes::RematPolicy second : {passes::RematPolicy::Recompute, passes::RematPolicy::Store}) {
      CAPTURE(static_cast<int>(first));
      CAPTURE(static_cast<int>(second));
      passes::GradOptions o;
      o.keepOutputs = false;
      o.callRemat = first;
      const Program d1 = passes::grad(chain, o);
      REQUIRE(verify(d1).empty());
      o.callRemat = second;
      const Program d2 = passes::grad(d1, o);
      REQUIRE(verify(d2).empty());
      if (first != passes::RematPolicy::Recompute) {
        // The forward scan runs the forward half, which returns residuals.
        bool split = false;
        for (const Program &f : d1.functions) split |= f.name == "step_fwd";
        CHECK(split);
      }
      for (double beta : {0.2, 0.9}) {
        CAPTURE(beta);
        const double sech = 1 / std::cosh(beta);
        CHECK(scalarOf(d1, beta) == doctest::Approx(std::tanh(beta)).epsilon(1e-12));
        CHECK(scalarOf(d2, beta) == doctest::Approx(sech * sech).epsilon(1e-10));
        CHECK(scalarOf(d1, beta, true) == scalarOf(d1, beta));
        CHECK(scalarOf(d2, beta, true) == doctest::Approx(sech * sech).epsilon(1e-10));
      }
    }
  // A call under store: the forward call returns the residuals, the backward call
  // reads them; d/dx of Σ sin(sin(x)·y)·y by hand.
  Program p = parseProgram(R"(program @f(%a: f64[3], %w: f64[3]) {
  %s = sin %a : f64[3]
  %y = mul %s, %w : f64[3]
  return %y
}

entry program @main(%x: f64[3], %y: f64[3]) {
  %r1 = call @f(%x, %y) : f64[3]
  %r2 = call @f(%r1, %y) : f64[3]
  %l = reduce_sum %r2 {axes = [0]} : f64[]
  return %l
}
)",
                           "m.tir");
  passes::GradOptions o;
  o.wrt = {"x"};
  o.callRemat = passes::RematPolicy::Store;
  const Program g = passes::grad(p, o);
  REQUIRE(verify(g).empty());
  CHECK(g.function("f_fwd") != nullptr);
  CHECK(g.function("f_bwd") != nullptr);
  const double x = 0.3, y = 0.8, u1 = std::sin(x) * y;
  const double d = std::cos(u1) * y * std::cos(x) * y;
  const std::vector<Tensor> in = {Tensor(Type({3}), {x, x, x}), Tensor(Type({3}), {y, y, y})};
  CHECK(rt::evaluateReference(g, in)[1].data[0] == doctest::Approx(d).epsilon(1e-14));
  rt::Engine e(2);
  CHECK(bitwiseEqual(rt::evaluateReference(g, in), e.run(*rt::prepare(g), in)));
}

TEST_CASE("module: dce drops a function's outputs that no call reads, with their ops") {
  Program p = parseProgram(R"(program @f(%a: f64[3]) {
  %s = sin %a : f64[3]
  %c = cos %a : f64[3]
  %e = exp %c : f64[3]
  return %s, %e
}

program @body(%c: f64[3]) {
  %n = sin %c : f64[3]
  %m = cos %c : f64[3]
  return %n, %m
}

entry program @main(%x: f64[3]) {
  %u, %v = call @f(%x) : f64[3], f64[3]
  %c, %ys = scan @body(%x) {length = 2, carries = 1} : f64[3], f64[2,3]
  %l = reduce_sum %u {axes = [0]} : f64[]
  %k = reduce_sum %c {axes = [0]} : f64[]
  %r = add %l, %k : f64[]
  return %r
}
)",
                           "m.tir");
  const std::vector<Tensor> in = {Tensor(Type({3}), {0.1, 0.2, 0.3})};
  const auto before = rt::evaluateReference(p, in);
  REQUIRE(passes::runDce(p, {}));
  REQUIRE(verify(p).empty());
  const Program *f = p.function("f");
  REQUIRE(f != nullptr);
  CHECK(f->outputs.size() == 1); // %e was read by no call: gone, with cos and exp
  CHECK(f->ops.size() == 1);
  CHECK(p.function("body")->outputs.size() == 2); // a scan body keeps its signature
  CHECK(bitwiseEqual(before, rt::evaluateReference(p, in)));
}

TEST_CASE("module: inline refuses a module that unrolls past the op limit") {
  Program p = isingChain(1 << 30);
  CHECK(passes::inlinedOpCount(p) > passes::kMaxInlinedOps);
  CHECK_THROWS_WITH_AS(passes::runInline(p), doctest::Contains("unrolls to"), Error);
}

TEST_CASE("module: split-vjp gives forward and backward functions whose results are the "
          "gradient program's, bitwise") {
  // The chain's gradient with its value (keep-outputs), staged as a loop: split-vjp
  // puts the scan in the forward function and the reverse scan in the backward one.
  passes::GradOptions o;
  Program g = passes::grad(isingChain(9), o);
  Program split = g;
  REQUIRE(passes::runSplitVjp(split, {}));
  CHECK(verify(split).empty());
  CHECK(split.function("chain_fwd") != nullptr);
  CHECK(split.function("chain_bwd") != nullptr);
  CHECK(split.ops.size() == 2);
  const std::vector<Tensor> in = {Tensor::scalar(0.61)};
  CHECK(bitwiseEqual(rt::evaluateReference(g, in), rt::evaluateReference(split, in)));
  rt::Engine e(2);
  CHECK(bitwiseEqual(e.run(*rt::prepare(g), in), e.run(*rt::prepare(split), in)));
  Program notGrad = isingChain(3);
  CHECK_THROWS_WITH_AS(passes::runSplitVjp(notGrad, {}), doctest::Contains("not a gradient program"), Error);
}

TEST_CASE("module: prepare refuses a scan whose stacked output cannot fit, naming the op") {
  Program p = parseProgram(R"(program @body(%c: f64[]) {
  %b = broadcast_in_dim %c {shape = [1024], dims = []} : f64[1024]
  return %c, %b
}

entry program @main(%a: f64[]) {
  %c, %ys = scan @body(%a) {length = 1073741824, carries = 1} : f64[], f64[1073741824,1024]
  return %ys
}
)",
                           "big.tir");
  CHECK_THROWS_WITH_AS(rt::prepare(p), doctest::Contains("result %ys f64[1073741824,1024] needs 8796093022208 bytes"),
                       Error);
}

TEST_CASE("module: grad differentiates only the carries a differentiated input reaches") {
  // Carry %c passes through every iteration untouched and feeds an svd_topk: no
  // derivative of lnz depends on it, so grad must not differentiate it (the svd_topk's
  // reverse rule, whose own derivative is not implemented, stays out of the gradient, and
  // grad of grad works). lnz = 4·β·Σ(rank-1 part of c) = 4·β·3: d/dβ = 12, d²/dβ² = 0.
  const Program p = parseProgram(R"(program @step(%c: f64[2,3], %acc: f64[], %beta: f64[]) {
  %u, %s, %vt = svd_topk %c {k = 1} : f64[2,1], f64[1], f64[1,3]
  %sb = broadcast_in_dim %s {shape = [2, 1], dims = [1]} : f64[2,1]
  %us = mul %u, %sb : f64[2,1]
  %r = dot_general %us, %vt {lhs_batch = [], rhs_batch = [], lhs_contract = [1], rhs_contract = [0]} : f64[2,3]
  %t = reduce_sum %r {axes = [0, 1]} : f64[]
  %bt = mul %beta, %t : f64[]
  %acc2 = add %acc, %bt : f64[]
  return %c, %acc2, %beta
}

entry program @chain(%beta: f64[]) {
  %c0 = constant {value = dense<[[3, 0, 0], [0, 1, 0]]> : f64[2,3]} : f64[2,3]
  %zero = constant {value = dense<0> : f64[]} : f64[]
  %c, %lnz, %b = scan @step(%c0, %zero, %beta) {length = 4, carries = 3} : f64[2,3], f64[], f64[]
  return %lnz
}
)",
                                 "passthrough.tir");
  passes::GradOptions o;
  o.keepOutputs = false;
  const Program d1 = passes::grad(p, o);
  // The body's backward half returns the cotangents of %acc and %beta only.
  bool found = false;
  for (const Program &f : d1.functions)
    if (f.name == "step_bwd") {
      found = true;
      CHECK(f.outputs.size() == 2);
      for (const Op &op : f.ops) CHECK(op.kind != OpKind::SvdTopkComplement);
    }
  CHECK(found);
  const Program d2 = passes::grad(d1, o);
  for (double beta : {0.3, 1.7}) {
    CAPTURE(beta);
    CHECK(scalarOf(p, beta) == doctest::Approx(12 * beta).epsilon(1e-14));
    CHECK(scalarOf(d1, beta) == doctest::Approx(12).epsilon(1e-14));
    CHECK(scalarOf(d1, beta, true) == doctest::Approx(12).epsilon(1e-14));
    CHECK(scalarOf(d2, beta) == 0.0);
  }
}
