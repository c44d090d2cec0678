// The TRG step programs (frontend/Trg.h, einsum lowered by the order pass) on the
// engine: equal to the reference evaluator, bitwise identical for widths 1, 2, 4.
#include <cmath>
#include <map>
#include <random>
#include <string>

#include <doctest/doctest.h>
#include <lapacke.h>

#include "frontend/Trg.h"
#include "passes/Checkpoint.h"
#include "passes/Grad.h"
#include "passes/Order.h"
#include "runtime/Plan.h"
#include "runtime/Runtime.h"
#include "tests/runtime/rt_testutil.h"

using namespace tessel;
using ir::Tensor;
using ir::Type;
using namespace rttest;

namespace {

ir::Program loweredStep(int64_t din, int64_t dout) {
  ir::Program p = frontend::buildTrgStep(din, dout);
  passes::runOrder(p, passes::OrderOptions{});
  return p;
}

/// The physical T entering step 5 (D = 16) at β, by running init and steps 1-4
/// (schedule 2, 4, 4, 16) on a width-1 engine.
Tensor physicalT16(double beta) {
  rt::Engine e(1);
  ir::Program init = frontend::buildTrgInit();
  passes::runOrder(init, passes::OrderOptions{});
  Tensor T = e.run(*rt::prepare(init), {Tensor::scalar(beta), Tensor::scalar(0.0)})[0];
  int64_t d = 2;
  for (int64_t dn : {2, 4, 4, 16}) {
    auto out = e.run(*rt::prepare(loweredStep(d, dn)), {T});
    T = out[1];
    d = dn;
  }
  return T;
}

/// What two TRG step results must share whatever basis each SVD library chose for the
/// new bonds (a sign per singular triplet, a rotation inside a degenerate multiplet, on
/// each leg of the coarse tensor): for a tensor, its norm, the singular values of its
/// four unfoldings (one leg × the other three: each leg's transform is orthogonal) and
/// its trace over the leg pairs (0, 2) and (1, 3) of one SVD's two halves; a scalar as
/// it is. Returns the largest difference relative to b's norm (or value).
double gaugeInvariantDiff(const Tensor &a, const Tensor &b) {
  if (a.type != b.type) return INFINITY;
  if (a.type.rank() != 4) return maxRelDiff(a, b);
  const int64_t d = a.type.shape[0];
  auto invariants = [&](const Tensor &t) {
    std::vector<double> v;
    double norm2 = 0;
    for (double x : t.data) norm2 += x * x;
    v.push_back(std::sqrt(norm2));
    for (int leg = 0; leg < 4; ++leg) {
      // Leg `leg` first, the others in order: a d × d³ matrix.
      std::vector<double> m(static_cast<size_t>(d * d * d * d));
      for (int64_t i = 0; i < d * d * d * d; ++i) {
        int64_t idx[4] = {i / (d * d * d), i / (d * d) % d, i / d % d, i % d};
        int64_t col = 0;
        for (int l = 0; l < 4; ++l)
          if (l != leg) col = col * d + idx[l];
        m[static_cast<size_t>(idx[leg] * d * d * d + col)] = t.data[static_cast<size_t>(i)];
      }
      std::vector<double> sv(static_cast<size_t>(d)), sup(static_cast<size_t>(d));
      const auto D = static_cast<lapack_int>(d);
      REQUIRE(LAPACKE_dgesvd(LAPACK_ROW_MAJOR, 'N', 'N', D, D * D * D, m.data(), D * D * D, sv.data(), nullptr, 1,
                             nullptr, 1, sup.data()) == 0);
      v.insert(v.end(), sv.begin(), sv.end());
    }
    double trace = 0;
    for (int64_t x = 0; x < d; ++x)
      for (int64_t y = 0; y < d; ++y) trace += t.data[static_cast<size_t>(((x * d + y) * d + x) * d + y)];
    v.push_back(trace);
    return v;
  };
  const std::vector<double> va = invariants(a), vb = invariants(b);
  double diff = 0;
  for (size_t i = 0; i < va.size(); ++i) diff = std::max(diff, std::fabs(va[i] - vb[i]));
  return diff / vb[0];
}

} // namespace

// The reference evaluator's SVD is Eigen's, the engine's LAPACK's: their coarse tensors
// agree up to the basis of each new bond, so the comparison is of gauge invariants.
TEST_CASE("trg step classes on the engine equal the reference (1e-13) for widths 1/2/4") {
  std::mt19937_64 rng(2024);
  struct Cls {
    int64_t din, dout;
  };
  for (Cls c : {Cls{2, 2}, Cls{2, 4}, Cls{4, 4}, Cls{4, 16}}) {
    INFO("step " << c.din << " -> " << c.dout);
    ir::Program p = loweredStep(c.din, c.dout);
    Tensor T = randomTensor(Type({c.din, c.din, c.din, c.din}), rng);
    auto ref = rt::evaluateReference(p, {T});
    auto plan = rt::prepare(p);
    std::vector<Tensor> w1;
    for (int w : {1, 2, 4}) {
      rt::Engine e(w);
      auto got = e.run(*plan, {T});
      REQUIRE(got.size() == ref.size());
      for (size_t i = 0; i < ref.size(); ++i) {
        CHECK(gaugeInvariantDiff(got[i], ref[i]) <= 1e-13);
        if (!w1.empty()) CHECK(bitwiseEqual(got[i], w1[i]));
      }
      if (w1.empty()) w1 = got;
    }
  }
}

TEST_CASE("trg step 16 -> 16 on the physical tensor: widths 1/2/4 bitwise, reference 1e-13") {
  Tensor T = physicalT16(0.4);
  REQUIRE(T.type == Type({16, 16, 16, 16}));
  ir::Program p = loweredStep(16, 16);
  auto plan = rt::prepare(p);
  rt::Engine e1(1), e2(2), e4(4);
  auto r1 = e1.run(*plan, {T});
  auto ref = rt::evaluateReference(p, {T});
  for (size_t i = 0; i < ref.size(); ++i) CHECK(gaugeInvariantDiff(r1[i], ref[i]) <= 1e-13);
  for (int rep = 0; rep < 3; ++rep) {
    auto r2 = e2.run(*plan, {T});
    auto r4 = e4.run(*plan, {T});
    for (size_t i = 0; i < r1.size(); ++i) {
      CHECK(bitwiseEqual(r2[i], r1[i]));
      CHECK(bitwiseEqual(r4[i], r1[i]));
    }
  }
  // Plan facts the TRG step relies on: the two SVDs are independent and factor their
  // operand in place (no copy of Ma/Mb).
  std::string d = rt::describePlan(*plan);
  size_t a = d.find("svd svd %Ua"), b = d.find("svd svd %Ub");
  REQUIRE(a != std::string::npos);
  REQUIRE(b != std::string::npos);
  CHECK(d.substr(a, d.find('\n', a) - a).find("in-place") != std::string::npos);
  CHECK(d.substr(b, d.find('\n', b) - b).find("in-place") != std::string::npos);
}

TEST_CASE("whole 20-step TRG program on the engine: lnZ/N at beta=0.4 to 1e-13, widths bitwise") {
  // tests/data/trg_beta0.4_checkpoints.json: lnZ_per_site.
  const double expect = 0.8793630603068517;
  ir::Program p = frontend::buildTrgWhole(frontend::trgDefaultRanks(16, 20));
  passes::runOrder(p, passes::OrderOptions{});
  auto plan = rt::prepare(p);
  rt::Engine e1(1), e2(2);
  auto r1 = e1.run(*plan, {Tensor::scalar(0.4), Tensor::scalar(0.0)});
  auto r2 = e2.run(*plan, {Tensor::scalar(0.4), Tensor::scalar(0.0)});
  REQUIRE(r1[0].data.size() == 1);
  CHECK(std::fabs(r1[0].data[0] - expect) <= 1e-13 * expect);
  CHECK(bitwiseEqual(r1[0], r2[0]));
}

TEST_CASE("plan of the 20-step TRG value+grad: arena close to peak, step SVD pairs independent") {
  ir::Program p = frontend::buildTrgWhole(frontend::trgDefaultRanks(16, 20));
  passes::GradOptions go;
  go.wrt = {"beta"};
  p = passes::grad(p, go);
  passes::runOrder(p, passes::OrderOptions{});
  auto plan = rt::prepare(p);
  int64_t peak = rt::peakLiveBytes(*plan), arena = rt::arenaBytes(*plan);
  MESSAGE("value+grad plan: " << rt::planSize(*plan) << " instructions, peak live " << peak
                              << " bytes, arena " << arena << " bytes");
  CHECK(arena >= peak / 2);
  CHECK(arena <= peak + peak / 4);
  // The Ma/Mb SVDs of every forward step: neither waits for the other, directly or
  // through an edge added for buffer reuse.
  const rt::Plan &P = *plan;
  Reachability reach(P);
  checkSlotsDoNotRace(P, reach);
  std::vector<size_t> svds;
  for (size_t i = 0; i < P.insts.size(); ++i)
    if (P.insts[i].kernel() == rt::Kernel::Svd) svds.push_back(i);
  REQUIRE(svds.size() == 40); // 20 steps x (Ma, Mb)
  for (size_t k = 0; k + 1 < svds.size(); k += 2) {
    size_t a = svds[k], b = svds[k + 1];
    INFO("svd pair #" << a << " #" << b);
    CHECK(!reach.dependsOn(b, a));
    CHECK(!reach.dependsOn(a, b));
  }
}

TEST_CASE("plans of whole-program TRG derivatives share arena memory only between ordered buffers") {
  // The gradient under each checkpoint policy and the second derivative grad(grad):
  // programs with many independent branches, where buffer assignment adds
  // write-after-read edges to share memory. Every two overlapping slots must be
  // ordered in the final schedule, and the result must not depend on the width.
  auto lowered = [](ir::Program p) {
    passes::runOrder(p, passes::OrderOptions{});
    return p;
  };
  const ir::Program value = frontend::buildTrgWhole(frontend::trgDefaultRanks(4, 8));
  passes::GradOptions go;
  go.wrt = {"beta"};
  std::vector<std::pair<std::string, ir::Program>> programs;
  for (passes::RematPolicy policy :
       {passes::RematPolicy::Store, passes::RematPolicy::Recompute, passes::RematPolicy::SaveSvd}) {
    ir::Program g = passes::grad(value, go);
    if (policy != passes::RematPolicy::Store) {
      passes::CheckpointOptions co;
      co.policy = policy;
      passes::runCheckpoint(g, co);
    }
    programs.emplace_back(std::string("grad, policy ") + passes::rematPolicyName(policy), lowered(std::move(g)));
  }
  passes::GradOptions first = go;
  first.keepOutputs = false;
  programs.emplace_back("grad(grad)", lowered(passes::grad(lowered(passes::grad(value, first)), go)));
  // 20 steps: more instructions than ancestor sets are used for (list-order placement).
  const ir::Program value20 = frontend::buildTrgWhole(frontend::trgDefaultRanks(4, 20));
  programs.emplace_back("grad(grad), 20 steps", lowered(passes::grad(lowered(passes::grad(value20, first)), go)));
  for (const auto &[what, p] : programs) {
    INFO(what);
    auto plan = rt::prepare(p);
    CHECK(plan->usedAncestors == (what != "grad(grad), 20 steps"));
    const Reachability reach(*plan);
    const size_t pairs = checkSlotsDoNotRace(*plan, reach);
    MESSAGE(what << ": " << plan->insts.size() << " instructions, " << pairs << " slot pairs sharing memory");
    CHECK(pairs > 0);
    // The forward Ma and Mb SVDs of every step (by location, the first of each; a
    // recomputed copy comes later) stay independent: buffer reuse added no edge
    // between them.
    std::map<std::string, std::vector<size_t>> ma, mb;
    for (size_t i = 0; i < plan->insts.size(); ++i) {
      if (plan->insts[i].kernel() != rt::Kernel::Svd) continue;
      const std::string &loc = p.ops[static_cast<size_t>(plan->insts[i].srcOp)].loc;
      const size_t at = loc.rfind(": svd M");
      REQUIRE(at != std::string::npos);
      (loc.back() == 'a' ? ma : mb)[loc.substr(0, at)].push_back(i);
    }
    CHECK(ma.size() == (what == "grad(grad), 20 steps" ? 20u : 8u));
    for (const auto &[step, as] : ma) {
      REQUIRE(!mb[step].empty());
      const size_t a = as.front(), b = mb[step].front();
      INFO(step << ": svd #" << a << " and #" << b);
      CHECK(!reach.dependsOn(a, b));
      CHECK(!reach.dependsOn(b, a));
    }
    rt::Engine e1(1), e2(2), e4(4);
    auto r1 = e1.run(*plan, {Tensor::scalar(0.4), Tensor::scalar(0.0)});
    auto r2 = e2.run(*plan, {Tensor::scalar(0.4), Tensor::scalar(0.0)});
    auto r4 = e4.run(*plan, {Tensor::scalar(0.4), Tensor::scalar(0.0)});
    REQUIRE(r1.size() == r2.size());
    for (size_t k = 0; k < r1.size(); ++k) {
      CHECK(bitwiseEqual(r1[k], r2[k]));
      CHECK(bitwiseEqual(r1[k], r4[k]));
    }
  }
}
