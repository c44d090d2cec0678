// The complement's guards computed by the forward svd_topk (passes/SvdTopkGuards.h).
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "ir/Builder.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Checkpoint.h"
#include "passes/Grad.h"
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
