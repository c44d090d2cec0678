// The complement's guards computed by the forward svd_topk (passes/SvdTopkGuards.h).
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "ir/Builder.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Checkpoint.h"
#include "passes/Grad.h"
#include "passes/Jvp.h"
#include "passes/SvdTopkGuards.h"
#include "runtime/Runtime.h"
#include "pass_testutil.h"

using namespace tessel;
using namespace tessel::ir;
using namespace tessel::passes;
using namespace passtest;

namespace {

/// L = Σ W ∘ (U_k·diag(s_k)·Vt_k), the rank-k reconstruction of A weighted by a fixed
/// random W: a gauge-invariant loss whose gradient needs the coupling of the k kept
/// triplets to the discarded subspace.
Program truncatedLoss(int64_t n, int64_t k) {
  Program p;
  Builder b(p);
  ValueId A = p.addInput("A", Type({n, n}));
  auto usv = b.svdTopk(A, k, 1e-9);
  ValueId us = b.mul(usv[0], b.broadcastInDim(usv[1], {n, k}, {1}));
  ValueId rec = b.dotGeneral(us, usv[2], {}, {}, {1}, {0});
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  Tensor W = Tensor::zeros(Type({n, n}));
  for (double &w : W.data) w = u(rng);
  p.setName(b.reduceSum(b.mul(rec, b.constant(W)), {0, 1}), "L");
  p.addOutput(p.lookup("L"));
  return p;
}

/// A = Q1·diag(0.8^i)·Q2ᵀ with Q1, Q2 orthogonal (Gram–Schmidt of Gaussian columns).
Tensor geometricMatrix(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  auto orthogonal = [&] {
    std::vector<double> Q(size_t(n * n));
    for (double &x : Q) x = g(rng);
    for (int64_t j = 0; j < n; ++j) { // columns
      for (int pass = 0; pass < 2; ++pass)
        for (int64_t c = 0; c < j; ++c) {
          double d = 0;
          for (int64_t i = 0; i < n; ++i) d += Q[size_t(i * n + c)] * Q[size_t(i * n + j)];
          for (int64_t i = 0; i < n; ++i) Q[size_t(i * n + j)] -= d * Q[size_t(i * n + c)];
        }
      double nn = 0;
      for (int64_t i = 0; i < n; ++i) nn += Q[size_t(i * n + j)] * Q[size_t(i * n + j)];
      for (int64_t i = 0; i < n; ++i) Q[size_t(i * n + j)] /= std::sqrt(nn);
    }
    return Q;
  };
  std::vector<double> Q1 = orthogonal(), Q2 = orthogonal();
  Tensor A = Tensor::zeros(Type({n, n}));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t q = 0; q < n; ++q)
        A.data[size_t(i * n + j)] +=
            Q1[size_t(i * n + q)] * std::pow(0.8, double(q)) * Q2[size_t(j * n + q)];
  return A;
}

std::vector<Tensor> runEngine(const Program &p, const std::vector<Tensor> &in) {
  rt::Engine e(1);
  return e.run(*rt::prepare(p), in);
}

} // namespace

TEST_CASE("svd-topk-guards: the forward computes k + g triplets, the complement takes g as "
          "its guards, and the gradient is unchanged") {
  const int64_t n = 48, k = 6, g = 4; // g = min(48 − 6, max(4, 6/2))
  Program p = truncatedLoss(n, k);
  GradOptions go;
  go.wrt = {"A"};
  Program grd = grad(p, go);
  Program q = grd;
  SvdTopkGuardsStats st;
  REQUIRE(runSvdTopkGuards(q, SvdTopkGuardsOptions{}, &st));
  INFO(printProgram(q));
  CHECK(verify(q).empty());
  CHECK(st.widened == 1);
  CHECK(st.guards == g);
  for (const Op &op : q.ops) {
    if (op.kind == OpKind::SvdTopk) CHECK(op.attrs.getI64("k") == k + g);
    if (op.kind == OpKind::SvdTopkComplement) {
      CHECK(op.attrs.getI64("guards") == g);
      CHECK(q.type(op.operands[1]) == Type({n, k + g}));
    }
  }
  // The forward's other readers see the leading k triplets through slices.
  CHECK(countOps(q, OpKind::Slice) == countOps(grd, OpKind::Slice) + 3);

  const std::vector<Tensor> in = {geometricMatrix(n, 7)};
  auto before = rt::truncatedSvdStats();
  const auto want = runEngine(grd, in);
  auto mid = rt::truncatedSvdStats();
  const auto got = runEngine(q, in);
  auto after = rt::truncatedSvdStats();
  // Before: the forward's top-k and the complement's top-g; after: the forward's only.
  CHECK(mid.topkCalls - before.topkCalls == 2);
  CHECK(after.topkCalls - mid.topkCalls == 1);
  CHECK(after.complementFallbacks == before.complementFallbacks);
  const auto ref = rt::evaluateReference(grd, in); // the full-SVD definition
  REQUIRE(got.size() == want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    double scale = 0, dWant = 0, dRef = 0;
    for (size_t i = 0; i < got[o].data.size(); ++i) {
      scale = std::max(scale, std::fabs(ref[o].data[i]));
      dWant = std::max(dWant, std::fabs(got[o].data[i] - want[o].data[i]));
      dRef = std::max(dRef, std::fabs(got[o].data[i] - ref[o].data[i]));
    }
    INFO("output " << o);
    CHECK(dWant <= 1e-10 * scale);
    CHECK(dRef <= 1e-10 * scale);
  }
}

TEST_CASE("svd-topk-guards: what stays") {
  Program p = truncatedLoss(48, 6);
  // A value program has no complement.
  Program v = p;
  CHECK_FALSE(runSvdTopkGuards(v, SvdTopkGuardsOptions{}));
  // After a checkpoint policy cloned the forward's svd_topk, a widened forward would not
  // be the clone's: the pass leaves such programs alone.
  GradOptions go;
  go.wrt = {"A"};
  go.keepOutputs = true;
  Program g = grad(p, go);
  CheckpointOptions co;
  co.policy = RematPolicy::Recompute;
  REQUIRE(runCheckpoint(g, co));
  Program before = g;
  CHECK_FALSE(runSvdTopkGuards(g, SvdTopkGuardsOptions{}));
  CHECK(printProgram(g) == printProgram(before));
  // Store clones only broadcasts and slices: the svd_topk is not cloned, and the pass
  // applies.
  Program st = grad(p, go);
  co.policy = RematPolicy::Store;
  runCheckpoint(st, co);
  CHECK(runSvdTopkGuards(st, SvdTopkGuardsOptions{}));
  CHECK(verify(st).empty());
  // A complement that already has its guards.
  Program h = grad(p, go);
  REQUIRE(runSvdTopkGuards(h, SvdTopkGuardsOptions{}));
  Program again = h;
  CHECK_FALSE(runSvdTopkGuards(again, SvdTopkGuardsOptions{}));
}

TEST_CASE("svd_topk_complement: guards must leave the differentiated triplets kept") {
  Program p;
  Builder b(p);
  ValueId A = p.addInput("A", Type({20, 20}));
  ValueId U = p.addInput("U", Type({20, 6})), s = p.addInput("s", Type({6}));
  ValueId Vt = p.addInput("Vt", Type({6, 20}));
  ValueId gU = p.addInput("gU", Type({20, 4})), gVt = p.addInput("gVt", Type({4, 20}));
  CHECK_NOTHROW(b.svdTopkComplement(A, U, s, Vt, gU, gVt, 1e-12, 2));
  CHECK_THROWS_WITH(b.svdTopkComplement(A, U, s, Vt, gU, gVt, 1e-12, 3),
                    doctest::Contains("guards = 3 must be in [0, k − r] = [0, 2]"));
  CHECK_THROWS_WITH(b.svdTopkComplement(A, U, s, Vt, gU, gVt, 1e-12, -1),
                    doctest::Contains("guards = -1 must be in"));
}

TEST_CASE("svd-topk-guards then jvp: every complement solve of the second-order program "
          "deflates with the forward's guards, and the Hessian-vector product is unchanged") {
  const int64_t n = 48, k = 6, g = 4;
  GradOptions go;
  go.wrt = {"A"};
  go.keepOutputs = true;
  const Program grd = grad(truncatedLoss(n, k), go);
  Program guarded = grd;
  REQUIRE(runSvdTopkGuards(guarded, SvdTopkGuardsOptions{}));
  JvpOptions jo;
  jo.wrt = {"A"};
  const Program plain = jvp(grd, jo), q = jvp(guarded, jo);
  INFO(printProgram(q));
  CHECK(verify(q).empty());
  // The reverse rule's solve, its tangent, and svd_topk's own tangent: three solves, each
  // with the forward's guards.
  CHECK(countOps(plain, OpKind::SvdTopkComplement) == 3);
  CHECK(countOps(q, OpKind::SvdTopkComplement) == 3);
  for (const Op &op : q.ops)
    if (op.kind == OpKind::SvdTopkComplement) {
      CHECK(op.attrs.getI64("guards") == g);
      CHECK(q.type(op.operands[1]) == Type({n, k + g}));
    }

  const Tensor A = geometricMatrix(n, 7);
  Tensor tA = Tensor::zeros(Type({n, n}));
  std::mt19937_64 rng(11);
  std::normal_distribution<double> gauss;
  for (double &x : tA.data) x = gauss(rng);
  auto before = rt::truncatedSvdStats();
  const auto want = runEngine(plain, {A, tA});
  auto mid = rt::truncatedSvdStats();
  const auto got = runEngine(q, {A, tA});
  auto after = rt::truncatedSvdStats();
  // Without guards: the forward's top-k and a top-g per solve; with them, the forward's.
  CHECK(mid.topkCalls - before.topkCalls == 4);
  CHECK(after.topkCalls - mid.topkCalls == 1);
  CHECK(after.complementFallbacks == before.complementFallbacks);
  REQUIRE(got.size() == 4); // L, ∂L/∂A, their tangents
  // H·Ȧ against a 5-point difference of the gradient program (the same loss, no jvp).
  const double h = 3e-5;
  auto at = [&](double t) {
    Tensor At = A;
    for (size_t i = 0; i < A.data.size(); ++i) At.data[i] += t * tA.data[i];
    return runEngine(grd, {At})[1];
  };
  const Tensor g1 = at(h), gm1 = at(-h), g2 = at(2 * h), gm2 = at(-2 * h);
  double scale = 0, dPlain = 0, dFd = 0;
  for (size_t i = 0; i < got[3].data.size(); ++i) {
    const double fd = (8 * (g1.data[i] - gm1.data[i]) - (g2.data[i] - gm2.data[i])) / (12 * h);
    scale = std::max(scale, std::fabs(fd));
    dPlain = std::max(dPlain, std::fabs(got[3].data[i] - want[3].data[i]));
    dFd = std::max(dFd, std::fabs(got[3].data[i] - fd));
  }
  INFO("max |H·Ȧ| = " << scale << ", against no guards " << dPlain << ", against the difference " << dFd);
  CHECK(scale > 1);
  CHECK(dPlain <= 1e-10 * scale);
  CHECK(dFd <= 1e-9 * scale);
  CHECK(std::fabs(got[0].data[0] - want[0].data[0]) <= 1e-13 * std::fabs(want[0].data[0]));
}

TEST_CASE("svd_topk with guards: the rules hold the guards constant, a cotangent on them is "
          "an error") {
  const int64_t n = 24, k = 5, g = 3;
  // L = Σ W ∘ (U·diag(s)·Vt) over the leading `use` triplets of svd_topk{k + g, guards = g}.
  auto loss = [&](int64_t use, int64_t guards) {
    Program p;
    Builder b(p);
    ValueId A = p.addInput("A", Type({n, n}));
    auto usv = b.svdTopk(A, k + guards, 1e-9);
    p.ops.back().attrs.set("guards", Attr::i64(guards));
    ValueId U = b.slice(usv[0], {0, 0}, {n, use}), s = b.slice(usv[1], {0}, {use});
    ValueId Vt = b.slice(usv[2], {0, 0}, {use, n});
    ValueId rec = b.dotGeneral(b.mul(U, b.broadcastInDim(s, {n, use}, {1})), Vt, {}, {}, {1}, {0});
    Tensor W = Tensor::zeros(Type({n, n}));
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<double> u(-1, 1);
    for (double &w : W.data) w = u(rng);
    p.setName(b.reduceSum(b.mul(rec, b.constant(W)), {0, 1}), "L");
    p.addOutput(p.lookup("L"));
    return p;
  };
  GradOptions go;
  go.wrt = {"A"};
  go.keepOutputs = true;
  const Tensor A = geometricMatrix(n, 9);
  const auto want = runEngine(grad(loss(k, 0), go), {A}); // svd_topk{k}
  const Program gg = grad(loss(k, g), go);
  CHECK(verify(gg).empty());
  REQUIRE(countOps(gg, OpKind::SvdTopkComplement) == 1);
  for (const Op &op : gg.ops)
    if (op.kind == OpKind::SvdTopkComplement) CHECK(op.attrs.getI64("guards") == g);
  // The solve deflates with the forward's guards: no top-g SVD of its own.
  auto before = rt::truncatedSvdStats();
  const auto got = runEngine(gg, {A});
  CHECK(rt::truncatedSvdStats().topkCalls - before.topkCalls == 1);
  double scale = 0, d = 0;
  for (size_t i = 0; i < got[1].data.size(); ++i) {
    scale = std::max(scale, std::fabs(want[1].data[i]));
    d = std::max(d, std::fabs(got[1].data[i] - want[1].data[i]));
  }
  CHECK(scale > 0.1);
  CHECK(d <= 1e-10 * scale);
  CHECK_THROWS_WITH(grad(loss(k + 1, g), go), doctest::Contains("a cotangent reaches its last 1 triplet(s)"));
  // Forward mode: the same reader of a guard is an error, not a zero tangent.
  JvpOptions jo;
  CHECK_THROWS_WITH(jvp(loss(k + 1, g), jo), doctest::Contains("'slice' reads its guard triplets"));
  CHECK_NOTHROW(jvp(loss(k, g), jo));
  // The shape rule: at least one kept triplet.
  Program p;
  Builder b(p);
  ValueId A2 = p.addInput("A", Type({6, 6}));
  b.svdTopk(A2, 2);
  Op bad = p.ops.back();
  bad.attrs.set("guards", Attr::i64(2));
  p.ops.back() = bad;
  const auto errs = verify(p);
  REQUIRE_FALSE(errs.empty());
  CHECK(errs[0].find("guards = 2 must be in [0, k − 1] = [0, 1]") != std::string::npos);
}
