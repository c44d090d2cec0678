//===- tests/frontend/trg_driver.cpp - The TRG drivers: the reference numbers ---===//
//
// The seed configuration (chi = 16, 20 steps) runs once (three betas, values only);
// derivative and equivalence tests use chi = 8, 10 steps (64x64 SVDs).
//
//===----------------------------------------------------------------------===//
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "frontend/Onsager.h"
#include "frontend/TrgDriver.h"
#include "frontend/TrgMeasure.h"
#include "ir/Diagnostics.h"
#include "../passes/pass_testutil.h"

using namespace tessel;
using namespace tessel::frontend;

namespace {

TrgOptions smallOptions() {
  TrgOptions o;
  o.chi = 8;
  o.steps = 10;
  return o;
}

/// Calls f(program info, function, role) for every compiled program and, for a staged
/// module, every function of it: role "value" for a value program, "vjp forward" /
/// "vjp backward" for the forward / backward half of a differentiated function
/// (<name>_fwd, <name>_bwd), the program's own role otherwise.
template <class F> void forEachFunction(const TrgDriver &d, F &&f) {
  for (const TrgProgramInfo &pi : d.programs()) {
    f(pi, pi.program(), pi.role);
    for (const ir::Program &fn : pi.program().functions) {
      const llvm::StringRef n(fn.name);
      f(pi, fn, n.endswith("_fwd") ? std::string("vjp forward")
                : n.endswith("_bwd") ? std::string("vjp backward")
                                     : pi.role);
    }
  }
}

/// chi = 8, 20 steps, value, gradient and second derivative.
TrgOptions secondOrderOptions() {
  TrgOptions o = smallOptions();
  o.steps = 20;
  o.grad = true;
  o.second = true;
  return o;
}

/// chi = 8, value and gradient, --steps auto (the infinite lattice).
TrgOptions infiniteLatticeOptions() {
  TrgOptions o;
  o.chi = 8;
  o.grad = true;
  o.stepsAuto = true;
  o.steps = kTrgStepsAutoMax;
  return o;
}

const char *modeName(TrgMode m) { return m == TrgMode::Staged ? "staged" : "whole"; }

bool bitwiseEqual(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

} // namespace

TEST_CASE("trg driver: seed values at chi=16, 20 steps and the beta=0.4 checkpoints") {
  TrgOptions o; // chi 16, 20 steps, staged, pairwise
  TrgDriver d(o);
  std::vector<int64_t> want = {2, 4, 4};
  for (int i = 0; i < 17; ++i) want.push_back(16);
  CHECK(d.ranks() == want);

  // The seed values of lnZ/N (tests/data/README.md) to 1e-13.
  const std::pair<double, double> seeds[] = {
      {0.3, 0.790559063800966}, {0.4, 0.879363060306851}, {0.5, 1.025792858455947}};
  for (auto [beta, lnz] : seeds) {
    TrgResult r = d.value(beta);
    INFO("beta = " << beta << " lnZ/N = " << r.lnZ);
    CHECK(std::fabs(r.lnZ - lnz) < 1e-13);
    REQUIRE(r.logm.size() == 20);
    REQUIRE(r.keptSingularValues.size() == 20);
    for (auto s : r.keptSingularValues) {
      CHECK(s[0] > 1e-12);
      CHECK(s[1] > 1e-12);
    }
    if (beta != 0.4) continue;
    std::ifstream in(std::string(TESSEL_TEST_DATA_DIR) + "/trg_beta0.4_checkpoints.json");
    REQUIRE(in.good());
    auto j = nlohmann::json::parse(in);
    CHECK(std::fabs(r.lnZ - j["lnZ_per_site"].get<double>()) < 1e-13);
    CHECK(j["ranks"].get<std::vector<int64_t>>() == d.ranks());
    auto m = j["maxabs_divided_out_per_step"].get<std::vector<double>>();
    auto sv = j["top4_singular_values_Ma_per_step"].get<std::vector<std::vector<double>>>();
    REQUIRE(m.size() == 20);
    REQUIRE(sv.size() == 20);
    // The checkpoint divides T_n by its largest entry m_n before the step; tessel divides by
    // the largest singular value of Ma (docs/trg.md §2.1). The two chains differ by a
    // factor r_n (T_n = r_n·T_n^seed), and the checkpoint's σ_n (Ma's largest singular
    // value after its normalisation) gives both: tessel's m_n = r_n·m_n^seed·σ_n and
    // r_{n+1} = 1/σ_n² (a step is homogeneous of degree 2), so m_n = m_n^seed·σ_n/σ_{n−1}².
    // The initial tensor has its factor cosh^2 beta taken out (trgInitLogScale), so m_0 is
    // the checkpoint's over cosh^2 beta.
    // They agree to ~3e-14 through step 15. From step 12 on the chi cut splits a nearly
    // degenerate pair (relative gap 2e-4), and later steps keep pairs 2e-3 apart: rounding
    // rotates the kept vectors inside them, T' carries that rotation on its legs, and from
    // step 16 the checkpoint's chain and tessel's are different tensors with the same lnZ/N
    // (to 1e-15): the prediction is off by 2.9e-8, 1.5e-8, 1.8e-7, 7e-6 and 1.4e-5 in steps
    // 16 to 20, as the file's singular values past step 13 are off between LAPACK builds
    // (tests/data/README.md); the bounds there grow with the steps.
    for (size_t n = 0; n < 20; ++n) {
      INFO("step " << n + 1);
      const double want = n == 0 ? m[0] * sv[0][0] * std::exp(-trgInitLogScale({}, beta).value)
                                 : m[n] * sv[n][0] / (sv[n - 1][0] * sv[n - 1][0]);
      const double tol = n < 15 ? 1e-13 : n < 17 ? 1e-6 : n < 18 ? 1e-5 : 1e-4;
      CHECK(std::fabs(std::exp(r.logm[n]) - want) < tol * want);
    }
  }
}

TEST_CASE("trg driver: d/dbeta matches a 5-point finite difference; d2 matches FD of d/dbeta") {
  for (TrgSvd svd : {TrgSvd::Full, TrgSvd::Truncated})
  for (double beta : {0.3, 0.5}) {
    TrgOptions o = smallOptions();
    o.grad = true;
    o.second = true;
    o.svd = svd;
    TrgDriver d(o);
    INFO("svd " << trgSvdName(svd) << ", beta = " << beta);
    const double h = 1e-5;
    double f[5];
    for (int i = 0; i < 5; ++i) f[i] = d.value(beta + (i - 2) * h).lnZ;
    double fd = (f[0] - 8 * f[1] + 8 * f[3] - f[4]) / (12 * h);
    TrgResult g = d.valueAndGrad(beta);
    REQUIRE(g.dlnZ);
    // The full path's programs compute lnZ/N alike; svd_topk's Krylov runs on a widened
    // block in the gradient program (the complement's guards): equal to rounding.
    if (svd == TrgSvd::Full) CHECK(g.lnZ == d.value(beta).lnZ);
    else CHECK(std::fabs(g.lnZ - d.value(beta).lnZ) <= 1e-14 * std::fabs(g.lnZ));
    CHECK(std::fabs(*g.dlnZ - fd) < 1e-9);
    // Second order: grad of grad vs a 5-point FD of the AD first derivative.
    const double h2 = 1e-4;
    double g5[5];
    for (int i = 0; i < 5; ++i) g5[i] = *d.valueAndGrad(beta + (i - 2) * h2).dlnZ;
    double fd2 = (g5[0] - 8 * g5[1] + 8 * g5[3] - g5[4]) / (12 * h2);
    TrgResult s = d.second(beta);
    REQUIRE(s.d2lnZ);
    CHECK(std::fabs(*s.dlnZ - *g.dlnZ) < 1e-12);
    CHECK(std::fabs(*s.d2lnZ - fd2) < 1e-6);
    // The approximant is close to the exact (Onsager) curve already at chi = 8 and 10 steps
    // (a 32x32 torus): measured -1.19e-4 at beta = 0.3 and +1.05e-4 at beta = 0.5.
    CHECK(std::fabs(*g.dlnZ - onsager(beta).dlnZ) < 2.5e-4);
  }
}

TEST_CASE("trg driver: d2 at chi = 8 over 20 steps (near-degenerate late steps) matches FD") {
  // Late steps split nearly degenerate multiplets at the chi cut. A block form of the svd
  // rule that summed the kept r×r corner of J + Jᵀ in two separate products gave d2 =
  // 5.140 (staged) and 5.359 (whole) here against FD 5.379 (its first order was fine).
  TrgOptions o = secondOrderOptions();
  for (TrgMode mode : {TrgMode::Staged, TrgMode::Whole}) {
    o.mode = mode;
    TrgDriver d(o);
    const double beta = 0.4, h = 1e-3;
    double g[5];
    for (int i = 0; i < 5; ++i) g[i] = *d.valueAndGrad(beta + (i - 2) * h).dlnZ;
    const double fd2 = (g[0] - 8 * g[1] + 8 * g[3] - g[4]) / (12 * h);
    TrgResult s = d.second(beta);
    INFO("mode " << modeName(mode) << " d2 " << *s.d2lnZ << " fd " << fd2);
    CHECK(std::fabs(*s.d2lnZ - 5.37901692) < 2e-7);
    CHECK(std::fabs(*s.d2lnZ - fd2) < 1e-6);
  }
}

TEST_CASE("trg driver: d2 in the ordered phase at chi = 16, 20 steps matches FD of d/dbeta to 1e-8") {
  // Below T_c the leading singular values pair up (the two ordered states), and the gaps
  // of those pairs shrink with every step to the noise floor (~1e-11 relative). A rule that
  // broadened the whole 1/(s_j² − s_i²) dropped the finite part a − b at such pairs
  // (d2 off by 2.9e-3 at beta = 0.5). Default eps, staged mode.
  TrgOptions o;
  o.grad = true;
  o.second = true;
  TrgDriver d(o);
  for (double beta : {0.45, 0.5, 0.6}) {
    // Measured 2.4e-11, 1.3e-10, 1.2e-10 (the difference's own rounding is ~1e-10).
    const double h = 3e-5 * beta;
    double g[5];
    for (int i = 0; i < 5; ++i) g[i] = *d.valueAndGrad(beta + (i - 2) * h).dlnZ;
    const double fd2 = (g[0] - 8 * g[1] + 8 * g[3] - g[4]) / (12 * h);
    TrgResult s = d.second(beta);
    REQUIRE(s.d2lnZ);
    INFO("beta " << beta << " d2 " << *s.d2lnZ << " fd " << fd2);
    CHECK(std::fabs(*s.d2lnZ - fd2) <= 1e-8 * std::fabs(fd2));
    // And the specific heat is Onsager's within the chi = 16 truncation error.
    CHECK(std::fabs(*s.d2lnZ - onsager(beta).d2lnZ) <= 2e-3 * onsager(beta).d2lnZ);
  }
}

TEST_CASE("trg driver: d2 deep in the ordered phase (beta = 2, 3; chi = 8) is Onsager's to 1e-7") {
  // c = beta^2 d2 is 2.89e-5 at beta = 2 and 2.17e-8 at beta = 3, while d/dbeta ~ 2: a finite
  // difference of the first derivative cannot resolve 1e-7 here (its rounding alone is ~5e-7
  // at beta = 2 and ~3e-4 at beta = 3), but chi = 8 is converged far below that, so Onsager's
  // exact value is the reference. With stop_gradient(max|T|) every derivative went through
  // the closure's trace and d2 came out -3e-4 (beta = 2) and +63% (beta = 3) off.
  TrgOptions o = secondOrderOptions();
  for (TrgMode mode : {TrgMode::Staged, TrgMode::Whole}) {
    o.mode = mode;
    TrgDriver d(o);
    for (double beta : {2.0, 3.0}) {
      TrgResult s = d.second(beta);
      REQUIRE(s.d2lnZ);
      const OnsagerValues ex = onsager(beta);
      INFO("mode " << modeName(mode) << " beta " << beta << " d2 " << *s.d2lnZ << " exact "
                   << ex.d2lnZ);
      CHECK(std::fabs(*s.d2lnZ - ex.d2lnZ) <= 1e-7 * ex.d2lnZ);
      CHECK(std::fabs(*s.dlnZ - ex.dlnZ) <= 1e-13 * ex.dlnZ);
    }
  }
}

TEST_CASE("trg driver: d2 does not drift with the number of steps (beta = 2, chi = 2)") {
  // At chi = 2 the fixed point is reached after a few steps; from then on each step adds
  // nothing to d2. Held constant, the normalisation pushed the whole derivative into the
  // closure, where d2 is a difference of two O(2^N) squares: 1e-7 relative off after 12
  // steps, 2.5e-4 after 20, 2.6e-3 after 24 (docs/trg.md §2.1).
  TrgOptions o;
  o.chi = 2;
  o.grad = true;
  o.second = true;
  double d2[3];
  const int steps[3] = {12, 20, 24};
  for (int i = 0; i < 3; ++i) {
    o.steps = steps[i];
    TrgDriver d(o);
    d2[i] = *d.second(2.0).d2lnZ;
  }
  INFO("d2 after 12, 20, 24 steps: " << d2[0] << " " << d2[1] << " " << d2[2]);
  CHECK(std::fabs(d2[1] - d2[0]) <= 1e-9 * d2[0]);
  CHECK(std::fabs(d2[2] - d2[0]) <= 1e-9 * d2[0]);
  // The chi = 2 truncation error of d2 at beta = 2 (measured -1.14e-7).
  CHECK(std::fabs(d2[0] - onsager(2.0).d2lnZ) <= 2e-7 * onsager(2.0).d2lnZ);
}

TEST_CASE("trg driver: first-order backward programs use the block svd rule at chi = 16") {
  // 16->16 step: two 256x256 SVDs keeping 16. The block form's largest product is
  // Ā = [left | U_16]·[Vt_16 ; right], 256x256x32; the full rule would multiply 256x256
  // by 256x256 (U·inner, ·Vt, UᵀŪ, VᵀV̄).
  TrgOptions o; // chi 16, 20 steps
  o.grad = true;
  o.ranks = trgDefaultRanks(16, 20); // a given schedule: its module compiles at once
  o.reference = true;                // compile only
  TrgDriver d(o);
  bool found = false;
  forEachFunction(d, [&](const TrgProgramInfo &, const ir::Program &f, const std::string &) {
    if (f.name != "trg_step_16_16_bwd") return;
    found = true;
    CHECK(passtest::largestProduct(f, "svd") == 256 * 256 * 32);
  });
  CHECK(found);
}

TEST_CASE("trg driver: staged and whole second order agree") {
  TrgOptions o = smallOptions();
  o.second = true;
  TrgDriver staged(o);
  o.mode = TrgMode::Whole;
  TrgDriver whole(o);
  for (double beta : {0.3, 0.44}) {
    TrgResult a = staged.second(beta), b = whole.second(beta);
    INFO("beta = " << beta << " d2 staged " << *a.d2lnZ << " whole " << *b.d2lnZ);
    CHECK(a.lnZ == staged.value(beta).lnZ);
    CHECK(std::fabs(*a.dlnZ - *b.dlnZ) < 1e-12);
    // Different association of the same sums: ~1e-13 relative observed.
    CHECK(std::fabs(*a.d2lnZ - *b.d2lnZ) < 1e-11 * std::fabs(*b.d2lnZ));
  }
}

TEST_CASE("trg driver: second order by forward-over-reverse equals reverse-over-reverse") {
  // jvp of grad against grad of grad (TrgOptions::secondForwardOverReverse), staged and
  // whole, at χ = 16, through T_c, and in a field (the Hessian rows of β and h); through
  // svd_topk (reverse over reverse by svd_topk_complement's VJP), and staged also on the
  // full SVD.
  for (auto [mode, svd] : {std::pair{TrgMode::Staged, TrgSvd::Truncated}, std::pair{TrgMode::Whole, TrgSvd::Truncated},
                           std::pair{TrgMode::Staged, TrgSvd::Full}}) {
    for (double h : {0.0, 0.02}) {
      TrgOptions o;
      o.chi = 16;
      o.svd = svd;
      o.steps = mode == TrgMode::Whole ? 8 : 16;
      o.second = true;
      o.mode = mode;
      o.field = h;
      o.susceptibility = h != 0;
      TrgDriver fwd(o);
      o.secondForwardOverReverse = false;
      TrgDriver rev(o);
      for (double beta : {0.3, 0.4406867935097715, 0.5}) {
        INFO("mode " << std::string(trgModeName(mode)) << " svd " << std::string(trgSvdName(svd)) << " h = " << h
                     << " beta = " << beta);
        TrgResult a = fwd.second(beta), b = rev.second(beta);
        REQUIRE(a.d2lnZ);
        REQUIRE(b.d2lnZ);
        INFO("d2 " << *a.d2lnZ << " vs " << *b.d2lnZ);
        INFO("d/dbeta " << *a.dlnZ << " vs " << *b.dlnZ << ", " << (*a.dlnZ - *b.dlnZ));
        // The first derivatives: the same program on the full SVD; through svd_topk the
        // complement solves of forward over reverse deflate with the forward's guards, those
        // of reverse over reverse compute their own: a few ulps apart (2.5e-16 observed).
        if (svd == TrgSvd::Full) CHECK(*a.dlnZ == *b.dlnZ);
        else CHECK(std::fabs(*a.dlnZ - *b.dlnZ) <= 1e-15 * std::fabs(*b.dlnZ));
        CHECK(std::fabs(*a.d2lnZ - *b.d2lnZ) <= 1e-10 * std::fabs(*b.d2lnZ));
        if (h != 0) {
          REQUIRE(a.d2lnZdh2);
          REQUIRE(b.d2lnZdh2);
          CHECK(std::fabs(*a.d2lnZdh2 - *b.d2lnZdh2) <= 1e-10 * std::fabs(*b.d2lnZdh2));
          CHECK(std::fabs(*a.d2lnZdbetadh - *b.d2lnZdbetadh) <= 1e-10 * std::fabs(*b.d2lnZdbetadh));
        }
      }
    }
  }
}

TEST_CASE("trg driver: staged and whole mode agree to 1e-12") {
  TrgOptions o = smallOptions();
  o.grad = true;
  TrgDriver staged(o);
  o.mode = TrgMode::Whole;
  TrgDriver whole(o);
  for (double beta : {0.3, 0.45}) {
    TrgResult a = staged.valueAndGrad(beta), b = whole.valueAndGrad(beta);
    CHECK(std::fabs(a.lnZ - b.lnZ) < 1e-12);
    CHECK(std::fabs(*a.dlnZ - *b.dlnZ) < 1e-12);
    CHECK(std::fabs(staged.value(beta).lnZ - whole.value(beta).lnZ) < 1e-12);
    REQUIRE(b.keptSingularValues.size() == a.keptSingularValues.size());
    for (size_t n = 0; n < a.keptSingularValues.size(); ++n)
      CHECK(std::fabs(a.keptSingularValues[n][0] - b.keptSingularValues[n][0]) < 1e-12);
  }
}

TEST_CASE("trg driver: store, recompute and save-svd give bitwise identical gradients") {
  for (TrgMode mode : {TrgMode::Staged, TrgMode::Whole}) {
    INFO("mode " << trgModeName(mode));
    std::vector<double> d1;
    for (passes::RematPolicy pol : {passes::RematPolicy::Store, passes::RematPolicy::Recompute,
                                    passes::RematPolicy::SaveSvd}) {
      TrgOptions o = smallOptions();
      o.steps = mode == TrgMode::Whole ? 6 : 10;
      o.grad = true;
      o.mode = mode;
      o.checkpoint = pol;
      TrgDriver d(o);
      d1.push_back(*d.valueAndGrad(0.4).dlnZ);
      // save-svd never recomputes an SVD, full (svd) or truncated (svd_topk); recompute
      // recomputes both kinds. Staged: the backward halves of the module's functions
      // (the residuals between the sweeps are what the forward halves return).
      int backwardSvds = 0, topk = 0;
      forEachFunction(d, [&](const TrgProgramInfo &p, const ir::Program &f, const std::string &role) {
        for (const ir::Op &op : f.ops) {
          const bool isSvd = op.kind == ir::OpKind::Svd || op.kind == ir::OpKind::SvdTopk;
          const bool backward = role == "vjp backward" || (p.role == "value+grad" && op.remat);
          backwardSvds += isSvd && backward;
          topk += op.kind == ir::OpKind::SvdTopk;
        }
      });
      INFO("policy " << passes::rematPolicyName(pol));
      if (pol != passes::RematPolicy::Recompute) CHECK(backwardSvds == 0);
      else CHECK(backwardSvds > 0);
      CHECK(topk > 0); // the truncated SVD is in these programs (chi = 8: 64x64, k = 8)
    }
    CHECK(bitwiseEqual(d1[0], d1[1]));
    CHECK(bitwiseEqual(d1[0], d1[2]));
  }
}

TEST_CASE("trg driver: the planned peak holds the residuals of every step until the backward") {
  // Staged value+grad: at the end of the forward sweep the module holds the residuals
  // of every step (what the forward halves return, stacked by the scans), so the
  // planned peak is at least their sum; recompute keeps only each T_n (and the carried
  // scalars), store the SVD factors too.
  std::map<passes::RematPolicy, int64_t> planned, residuals;
  for (passes::RematPolicy pol : {passes::RematPolicy::Store, passes::RematPolicy::Recompute,
                                  passes::RematPolicy::SaveSvd}) {
    TrgOptions o = smallOptions();
    o.grad = true;
    o.checkpoint = pol;
    TrgDriver d(o);
    d.value(0.4);
    const int64_t valuePeak = d.plannedPeakBytes();
    d.valueAndGrad(0.4);
    planned[pol] = d.plannedPeakBytes();
    // The residuals: results of the entry's forward calls and scans (stacked per
    // iteration by the scans) that its backward ops (loc "vjp ...") read.
    int64_t held = 0;
    for (const auto &p : d.programs()) {
      if (p.role != "value+grad") continue;
      std::vector<char> readByBackward(p.program().values.size(), 0);
      for (const ir::Op &op : p.program().ops)
        if (op.loc.rfind("vjp", 0) == 0)
          for (ir::ValueId v : op.operands) readByBackward[v] = 1;
      for (const ir::Op &op : p.program().ops)
        if (ir::hasCallee(op.kind) && op.loc.rfind("vjp", 0) != 0)
          for (ir::ValueId r : op.results)
            if (readByBackward[r]) held += p.program().type(r).bytes();
    }
    residuals[pol] = held;
    INFO("policy " << std::string(passes::rematPolicyName(pol)) << ": residuals " << held << " bytes, value peak "
                   << valuePeak << ", value+grad peak " << planned[pol]);
    CHECK(valuePeak > 0);
    CHECK(planned[pol] >= held);
    CHECK(planned[pol] > valuePeak);
    CHECK(held > 0);
  }
  CHECK(residuals[passes::RematPolicy::Recompute] < residuals[passes::RematPolicy::SaveSvd]);
  CHECK(residuals[passes::RematPolicy::SaveSvd] < residuals[passes::RematPolicy::Store]);
  // Store's residuals dominate its peak (chi = 8: the engine's arena is comparable to
  // recompute's and save-svd's).
  CHECK(planned[passes::RematPolicy::SaveSvd] < planned[passes::RematPolicy::Store]);
}

TEST_CASE("trg driver: chain and pairwise agree to 1e-13; width 1 and 2 are bitwise equal") {
  TrgOptions o = smallOptions();
  o.grad = true;
  o.order = passes::OrderStrategy::Chain;
  TrgDriver chain(o);
  o.order = passes::OrderStrategy::Pairwise;
  TrgDriver pairwise(o);
  TrgResult a = chain.valueAndGrad(0.35), b = pairwise.valueAndGrad(0.35);
  CHECK(std::fabs(a.lnZ - b.lnZ) < 1e-13);
  CHECK(std::fabs(*a.dlnZ - *b.dlnZ) < 1e-11);

  o.order = passes::OrderStrategy::Chain;
  o.width = 2;
  TrgDriver wide(o);
  TrgResult c = wide.valueAndGrad(0.35);
  CHECK(bitwiseEqual(a.lnZ, c.lnZ));
  CHECK(bitwiseEqual(*a.dlnZ, *c.dlnZ));
  CHECK(bitwiseEqual(chain.value(0.35).lnZ, wide.value(0.35).lnZ));
}

TEST_CASE("trg driver: the engine agrees with the reference evaluator") {
  TrgOptions o;
  o.chi = 4;
  o.steps = 5;
  o.grad = true;
  TrgDriver eng(o);
  o.reference = true;
  TrgDriver ref(o);
  TrgResult a = eng.valueAndGrad(0.4), b = ref.valueAndGrad(0.4);
  CHECK(std::fabs(a.lnZ - b.lnZ) < 1e-14);
  CHECK(std::fabs(*a.dlnZ - *b.dlnZ) < 1e-12);
}

TEST_CASE("trg driver: a kept exact zero singular value stops the run, naming the step") {
  TrgOptions o;
  o.chi = 16;
  o.steps = 2;
  o.ranks = {4, 4}; // step 1 keeps 4 singular values of a rank-2 matrix
  TrgDriver d(o);
  CHECK_THROWS_WITH_AS(d.value(0.4), doctest::Contains("step 1 (2->4"), Error);
  CHECK_THROWS_WITH_AS(d.value(0.4), doctest::Contains("<= tol = 1e-12"), Error);
  o.mode = TrgMode::Whole;
  TrgDriver w(o);
  CHECK_THROWS_WITH_AS(w.value(0.4), doctest::Contains("step 1 (2->4"), Error);
  // Bad options name the flag.
  TrgOptions bad;
  bad.chi = 1;
  CHECK_THROWS_WITH_AS(TrgDriver{bad}, doctest::Contains("--chi"), Error);
  bad = TrgOptions();
  bad.steps = 0;
  CHECK_THROWS_WITH_AS(TrgDriver{bad}, doctest::Contains("--steps"), Error);
  bad = TrgOptions();
  bad.width = 0;
  CHECK_THROWS_WITH_AS(TrgDriver{bad}, doctest::Contains("--width"), Error);
  bad = TrgOptions();
  bad.steps = 2;
  bad.ranks = {2, 4, 4};
  CHECK_THROWS_WITH_AS(TrgDriver{bad}, doctest::Contains("--ranks"), Error);
  TrgDriver ok(smallOptions());
  CHECK_THROWS_AS(ok.value(0.0), Error);
  CHECK_THROWS_AS(ok.value(-1.0), Error);
  CHECK_THROWS_AS(ok.valueAndGrad(0.3), Error); // built without gradients
  CHECK_THROWS_WITH_AS(parseTrgMode("fast"), doctest::Contains("allowed: staged, whole"), Error);
}

TEST_CASE("trg driver: a schedule as the report prints it reads back as the same ranks") {
  const std::vector<int64_t> r = {4, 10, 10, 10, 10, 9, 9, 9, 2, 2};
  CHECK(formatTrgRanks(r) == "4,10x4,9x3,2,2");
  CHECK(parseTrgRanks(formatTrgRanks(r), "--ranks") == r);
  CHECK(parseTrgRanks(formatTrgRanks(trgDefaultRanks(16, 20)), "--ranks") == trgDefaultRanks(16, 20));
  CHECK(parseTrgRanks(" 2, 16x2", "--ranks") == std::vector<int64_t>{2, 16, 16});
  CHECK_THROWS_WITH_AS(parseTrgRanks("2,,4", "--ranks"), "error: --ranks: '' is not a rank (an integer, or "
                       "<rank>x<count>: 2,4,4,16x17 is 20 steps)", Error);
  for (const char *bad : {"4x", "x4", "4x2x2", "4.5", "four", ""})
    CHECK_THROWS_WITH_AS(parseTrgRanks(bad, "--ranks"), doctest::Contains("is not a rank"), Error);
  CHECK_THROWS_WITH_AS(parseTrgRanks("4x-1", "--ranks"), doctest::Contains("the count must be >= 1"), Error);
  CHECK_THROWS_WITH_AS(parseTrgRanks("2,99999999999999999999", "--ranks"),
                       "error: --ranks: '99999999999999999999' is out of the range of a 64-bit integer", Error);
  CHECK_THROWS_WITH_AS(parseTrgRanks("+5", "--ranks"), doctest::Contains("is not a rank"), Error);
  CHECK_THROWS_WITH_AS(parseTrgRanks("2,4x1023", "--ranks"), doctest::Contains("more than 1023 entries"), Error);
  CHECK(parseTrgRanks("2,4x1022", "--ranks").size() == 1023);
}

TEST_CASE("trg driver: the schedule from singular values (docs/trg.md §2.4)") {
  // At moderate beta the value-derived schedule is the default rule's.
  for (double beta : {0.3, 0.5})
    CHECK(deriveTrgRanks(beta, 16, 6) == trgDefaultRanks(16, 6));
  CHECK(deriveTrgRanks(0.4, 3, 5) == trgDefaultRanks(3, 5));
  // At low temperature the spectrum of step 4 falls below tol: the structural schedule,
  // given, stops with an error naming the step and how to fix it; the derived one (no
  // schedule given, the default) keeps fewer values and runs.
  TrgOptions o;
  o.steps = 6;
  o.ranks = trgDefaultRanks(16, 6);
  TrgDriver rule(o);
  CHECK_THROWS_WITH_AS(rule.value(2.0), doctest::Contains("step 4 (4->16"), Error);
  CHECK_THROWS_WITH_AS(rule.value(2.0), doctest::Contains("or leave --ranks out"), Error);
  o.ranks = deriveTrgRanks(2.0, 16, 6);
  CHECK(o.ranks[3] < 16);
  o.ranks.clear();
  o.grad = true;
  TrgDriver derived(o);
  TrgResult r = derived.valueAndGrad(2.0);
  // Six steps are a torus of 2^6 = 64 sites deep in the ordered phase: Z is twice the
  // contribution of one ordered state, so lnZ/N = Onsager's + ln 2 / 64 (measured to 3e-17),
  // and the energy is Onsager's (measured exactly).
  const OnsagerValues ex = onsager(2.0);
  CHECK(std::fabs(r.lnZ - (ex.lnZ + std::log(2.0) / 64)) < 1e-13);
  REQUIRE(r.dlnZ);
  CHECK(std::fabs(*r.dlnZ - ex.dlnZ) < 1e-13);
  for (auto s : r.keptSingularValues) CHECK(std::min(s[0], s[1]) > 1e-12);
  CHECK(derived.ranks() == deriveTrgRanks(2.0, 16, 6));
  CHECK_THROWS_AS(deriveTrgRanks(0.0, 16, 6), Error);
}

TEST_CASE("trg driver: the truncated SVD path equals the full one (lnZ/N to 1e-12, d/dbeta to 1e-10)") {
  // Across the transition: beta_c = 0.4407; at beta = 0.3 and chi = 24 the cut splits
  // a near-degenerate multiplet (relative gap ~2e-7) in the late steps.
  for (int64_t chi : {16, 24}) {
    TrgOptions o;
    o.chi = chi;
    o.grad = true;
    o.svd = TrgSvd::Full;
    TrgDriver full(o);
    o.svd = TrgSvd::Truncated;
    TrgDriver truncated(o);
    for (double beta : {0.3, 0.4, 0.4407, 0.45, 0.5, 0.6}) {
      auto before = rt::truncatedSvdStats();
      TrgResult f = full.valueAndGrad(beta), t = truncated.valueAndGrad(beta);
      REQUIRE(f.dlnZ);
      REQUIRE(t.dlnZ);
      const double fd = *f.dlnZ, td = *t.dlnZ;
      auto after = rt::truncatedSvdStats();
      INFO("chi = " << chi << ", beta = " << beta << ": lnZ/N " << f.lnZ << " vs " << t.lnZ
                    << ", d/dbeta " << fd << " vs " << td);
      CHECK(std::fabs(f.lnZ - t.lnZ) <= 1e-12);
      CHECK(std::fabs(fd - td) <= 1e-10 * std::fabs(fd));
      // The truncated path ran: two top-k SVDs per truncating step (plus the guards of
      // the backward), one complement solve per top-k SVD of the forward.
      CHECK(after.complementCalls - before.complementCalls >= 2 * 16);
      // Neither kernel needed gesdd: the gap at every cut, also where the spectrum
      // falls to ~1e-4 of s_0 (high temperature: the complex-shifted tail), was wide
      // enough.
      CHECK(after.topkFallbacks == before.topkFallbacks);
      CHECK(after.complementFallbacks == before.complementFallbacks);
      MESSAGE("chi " << chi << " beta " << beta << ": |dlnZ| " << std::fabs(f.lnZ - t.lnZ)
                     << ", rel d/dbeta " << std::fabs(fd - td) / std::fabs(fd)
                     << ", broadened tails " << after.complementBroadened - before.complementBroadened);
    }
  }
}

TEST_CASE("trg driver: second order through svd_topk equals the full path's (1e-9)") {
  // --second by forward over reverse: the jvp of svd_topk's reverse rule, whose
  // complement solve differentiates to another complement solve, against dgesdd of the
  // whole matrix; at χ = 16 across the transition, at χ = 24 at β_c and in the ordered
  // phase (fewer steps: the full path's 576×576 SVDs dominate the test's time).
  for (int64_t chi : {16, 24}) {
    TrgOptions o;
    o.chi = chi;
    o.second = true;
    if (chi == 24) {
      o.stepsAuto = false;
      o.steps = 8;
    }
    o.svd = TrgSvd::Full;
    TrgDriver full(o);
    o.svd = TrgSvd::Truncated;
    TrgDriver truncated(o);
    const std::vector<double> betas =
        chi == 16 ? std::vector<double>{0.3, 0.4, 0.4407, 0.45, 0.5, 0.6} : std::vector<double>{0.4407, 0.5};
    for (double beta : betas) {
      auto before = rt::truncatedSvdStats();
      TrgResult f = full.second(beta), t = truncated.second(beta);
      auto after = rt::truncatedSvdStats();
      REQUIRE(f.d2lnZ);
      REQUIRE(t.d2lnZ);
      INFO("chi = " << chi << ", beta = " << beta << ": d2 " << *f.d2lnZ << " vs " << *t.d2lnZ);
      CHECK(std::fabs(*f.d2lnZ - *t.d2lnZ) <= 1e-9 * std::fabs(*f.d2lnZ));
      CHECK(std::fabs(*f.dlnZ - *t.dlnZ) <= 1e-10 * std::fabs(*f.dlnZ));
      CHECK(after.complementCalls - before.complementCalls >= 16); // the truncated path ran
      MESSAGE("chi " << chi << " beta " << beta << ": rel d2 " << std::fabs(*f.d2lnZ - *t.d2lnZ) / std::fabs(*f.d2lnZ));
    }
  }
}

TEST_CASE("trg driver: --grad widens each step's svd_topk by its complement's guards") {
  // chi = 8: the 64x64 matrices keep k = 8 triplets; the complement's guards are
  // g = max(4, k/2) = 4, so the vjp forward computes svd_topk{12} and the backward's
  // complements take guards = 4. The value sweep's programs compute svd_topk{9}: the
  // largest cut value too, which says whether the cut splits a multiplet; with
  // --disable-pass=svd-topk-guards nothing widens. d/dbeta agrees to the solver's
  // tolerance either way.
  double dWide = 0, dNarrow = 0;
  for (bool disable : {false, true}) {
    CAPTURE(disable);
    TrgOptions o = smallOptions();
    o.grad = true;
    if (disable) o.passOptions.disabledPasses = {"svd-topk-guards"};
    TrgDriver d(o);
    d.valueAndGrad(0.4); // compiles the staged module of the schedule at 0.4
    int wide = 0, narrow = 0, given = 0, complements = 0;
    forEachFunction(d, [&](const TrgProgramInfo &, const ir::Program &f, const std::string &role) {
      for (const ir::Op &op : f.ops) {
        if (op.kind == ir::OpKind::SvdTopk) {
          const int64_t k = op.attrs.getI64("k");
          if (role == "value") CHECK(k == 9);
          (k == 12 ? wide : narrow) += role == "vjp forward";
        }
        if (op.kind == ir::OpKind::SvdTopkComplement) {
          ++complements;
          given += op.attrs.getI64("guards") == 4;
        }
      }
    });
    CHECK(complements > 0);
    CHECK(wide == (disable ? 0 : complements));
    CHECK(given == (disable ? 0 : complements));
    CHECK(narrow == (disable ? complements : 0));
    (disable ? dNarrow : dWide) = *d.valueAndGrad(0.4).dlnZ;
  }
  CHECK(std::fabs(dWide - dNarrow) <= 1e-12 * std::fabs(dNarrow));
}

TEST_CASE("trg driver: --steps auto is the infinite lattice (docs/trg.md §3.1)") {
  // Deep in the ordered phase the truncation error at chi = 8 is far below 1e-13, so the
  // infinite lattice is Onsager's to rounding; a torus of 2^N sites adds its two ground
  // states' ln 2 / 2^N (docs/trg.md §3).
  TrgOptions o = infiniteLatticeOptions();
  TrgDriver inf(o);
  const TrgResult r = inf.valueAndGrad(2.0);
  CHECK(inf.stepsConverged());
  // One kept pair per step, the limit closure's step last.
  CHECK(r.keptSingularValues.size() == inf.ranks().size());
  CHECK(inf.value(2.0).keptSingularValues.size() == inf.ranks().size());
  const OnsagerValues ex = onsager(2.0);
  INFO("lnZ/N " << r.lnZ << " vs Onsager " << ex.lnZ << "; steps " << inf.ranks().size());
  CHECK(std::fabs(r.lnZ - ex.lnZ) < 2e-15 * ex.lnZ);
  CHECK(std::fabs(*r.dlnZ - ex.dlnZ) < 1e-13);
  TrgOptions t = o;
  t.stepsAuto = false;
  t.steps = 20;
  const double torus = TrgDriver(t).value(2.0).lnZ;
  CHECK(std::fabs(torus - r.lnZ - std::log(2.0) / (1 << 20)) < 1e-14);
  // beta = 400: every step is at the ordered fixed point; lnZ/N = 2 beta exactly.
  const TrgResult cold = inf.valueAndGrad(400.0);
  CHECK(cold.lnZ == 800.0);
  CHECK(*cold.dlnZ == 2.0);
  // Next to T_c (the slowest convergence): the value and derivative equal a 60-step
  // torus's (its finite-size shift there is ~2^-30 relative) to 1e-13.
  const TrgResult c = inf.valueAndGrad(0.44);
  t.steps = 60;
  const TrgResult ct = TrgDriver(t).valueAndGrad(0.44);
  CHECK(std::fabs(c.lnZ - ct.lnZ) < 1e-14);
  CHECK(std::fabs(*c.dlnZ - *ct.dlnZ) < 1e-13 * *ct.dlnZ);
  CHECK(inf.ranks().size() > 20);
}

TEST_CASE("trg driver: the derived schedule follows the run's own SVDs (Potts q = 3 at beta_c)") {
  // With the truncated SVD a probe of full SVDs kept a value that svd_topk put at 4e-18 by
  // step 29 (chi = 24, 30 steps); the run's own programs derive the schedule now.
  TrgOptions o;
  o.model = parseTrgModel("potts", 3);
  o.chi = 24;
  o.steps = 30;
  o.grad = true;
  TrgDriver d(o);
  const TrgResult r = d.valueAndGrad(pottsBetaC(3));
  for (auto s : r.keptSingularValues) CHECK(std::min(s[0], s[1]) > 1e-12);
  // The energy at beta_c against Baxter's u_c = -(1 + 1/sqrt 3): chi = 24 leaves 1.07e-2
  // there (measured; TRG converges slowly in chi at a critical point).
  CHECK(std::fabs(-*r.dlnZ - *pottsCriticalEnergy(3)) < 1.5e-2);
  // The report's exact column holds u_c at beta_c typed with 16 digits, nothing elsewhere.
  TrgBetaMeasurement m;
  m.beta = 1.005052538742381;
  trgExactValues(m, o.model, 0);
  REQUIRE(m.exactDlnZ);
  CHECK(*m.exactDlnZ == 1 + 1 / std::sqrt(3.0));
  CHECK(!m.exactLnZ);
  CHECK(!m.exactD2lnZ);
  m = TrgBetaMeasurement{};
  m.beta = 1.0;
  trgExactValues(m, o.model, 0);
  CHECK(!m.exactDlnZ);
}

TEST_CASE("trg driver: high temperature keeps the relative digits of the derivatives") {
  // The Ising T0 has cosh^2 beta taken out (tanh beta in W): d(lnZ/N)/dbeta is
  // 2 tanh beta from the log scale plus terms of order beta, no cancellation. With an
  // e^(2 beta) taken out it was 2 + (-2 + 2 beta): 8e-8 relative at beta = 1e-10, and 0
  // instead of 2 beta below 1e-16. Onsager's high-temperature series is the reference.
  TrgOptions o = infiniteLatticeOptions();
  o.second = true;
  TrgDriver drv(o);
  for (double beta : {1e-300, 1e-20, 1e-10, 1e-5, 0.01}) {
    CAPTURE(beta);
    const TrgResult r = drv.second(beta);
    const OnsagerValues ex = onsager(beta);
    // Relative where d/dbeta is tiny; at beta = 0.01 the chain's own rounding (~1e-14 on
    // terms of order 1) is the floor.
    const double floor = beta > 1e-3 ? 2e-14 : 0.0;
    CHECK(std::fabs(r.lnZ - ex.lnZ) <= 1e-15 * ex.lnZ);
    REQUIRE(r.dlnZ);
    CHECK(std::fabs(*r.dlnZ - ex.dlnZ) <= 1e-13 * ex.dlnZ + floor);
    REQUIRE(r.d2lnZ);
    CHECK(std::fabs(*r.d2lnZ - ex.d2lnZ) <= 1e-10 * ex.d2lnZ);
  }
}

TEST_CASE("trg driver: the default pipelines are the registered trg and trg-full-svd, with --order's strategy") {
  using frontend::defaultTrgPipeline;
  using frontend::TrgSvd;
  // What tessel trg runs by default is what --passes=trg names (the same pipeline once parsed).
  CHECK(passes::Pipeline::parse(defaultTrgPipeline(passes::OrderStrategy::Pairwise, TrgSvd::Truncated)) ==
        passes::Pipeline::parse("trg"));
  CHECK(passes::Pipeline::parse(defaultTrgPipeline(passes::OrderStrategy::Pairwise, TrgSvd::Full)) ==
        passes::Pipeline::parse("trg-full-svd"));
  CHECK(trgPipeline(TrgOptions{}) == defaultTrgPipeline(passes::OrderStrategy::Pairwise, TrgSvd::Truncated));
  CHECK(defaultTrgPipeline(passes::OrderStrategy::Greedy, TrgSvd::Truncated) ==
        "truncate-svd{max-k-percent=50,min-size=32},svd-transpose-fold,svd-topk-guards,order{strategy=greedy},pad-sink,cse,dce");
  CHECK(defaultTrgPipeline(passes::OrderStrategy::Optimal, TrgSvd::Full) ==
        "order{strategy=optimal},pad-sink,cse,dce");
}
