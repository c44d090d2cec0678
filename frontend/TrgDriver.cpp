//===- frontend/TrgDriver.cpp - Staged and whole-graph TRG drivers ----------------===//
#include "frontend/TrgDriver.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>
#include <type_traits>
#include <utility>

#include "frontend/TrgSweep.h"
#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "runtime/Stats.h"
#include "passes/Grad.h"

namespace tessel::frontend {
namespace {

using Clock = std::chrono::steady_clock;
using rt::msSince;
using ir::text::formatDouble;

} // namespace

//===--- Impl ----------------------------------------------------------------------===//

struct TrgDriver::Impl {
  TrgOptions o;
  /// The inputs of init (and of the whole program): model.parameters().
  std::vector<std::string> params;
  /// What the first-order programs differentiate by: params, but β alone for the Ising
  /// model at h = 0 with svd_topk. There ∂/∂h = 0 exactly by the Z2 symmetry, and
  /// svd_topk (a randomized Krylov method stopped at a residual tolerance, with its
  /// complement solve) breaks that symmetry at its tolerance; below T_c the odd (field)
  /// direction is relevant and the chain doubles that error every step (3e-10 after 24
  /// steps at β = 0.5, χ = 16; after 60 the chain has flowed to one ordered state and
  /// returns β·m₀). LAPACK's full SVD keeps it to rounding (docs/trg.md §8.1).
  std::vector<std::string> gradParams;
  /// The compiled programs, the pass manager and the engine.
  std::unique_ptr<TrgPrograms> progs;
  /// The schedule and the staged value sweep.
  std::unique_ptr<TrgSweep> sw;
  /// Whole mode with a derived schedule: the staged value driver that derives it.
  std::unique_ptr<TrgDriver> planner;
  int64_t lastPeakBytes = 0;

  // Whole programs.
  int wholeValue = -1, wholeGrad = -1, wholeSecond = -1;
  /// The staged module of one schedule (frontend::buildTrgModule) with its derivatives:
  /// value+grad (`grad`) and the Hessian rows (`second`), indices into `progs`.
  struct StagedModule {
    std::vector<int64_t> ranks; ///< with the limit closure's D' last (closureRank > 0)
    int64_t closureRank = 0;
    int grad = -1, second = -1;
  };
  std::vector<StagedModule> modules;

  explicit Impl(TrgOptions opts) : o(std::move(opts)) {
    validateTrgOptions(o);
    if (o.field == 0) o.field = 0; // -0 is h = 0 (and prints as 0)
    params = o.model.parameters();
    gradParams = params;
    if (o.model.hasField() && o.field == 0 && trgSvdUsed(o) == TrgSvd::Truncated)
      gradParams.resize(1); // β
    progs = std::make_unique<TrgPrograms>(o);
    sw = std::make_unique<TrgSweep>(o, *progs);
    if (o.mode == TrgMode::Staged) compileStaged();
    else compileWhole();
    if (o.second && o.mode == TrgMode::Whole) compileSecond();
  }

  void compileStaged() {
    sw->compile();
    // A derived schedule is known only at a β: its module is compiled there.
    if (!sw->autoRanks) {
      if (o.grad) stagedModule(false);
      if (o.second) stagedModule(true);
    }
  }

  /// The staged module of the current schedule (docs/trg.md §6.1), differentiated by the
  /// compiler: `second` = false: value+grad, grad{wrt=params, aux=skept} with the bond
  /// gauge, the checkpoint policy at the call and scan boundaries and the complement's
  /// guards; true: the Hessian rows, grad{keep-outputs=false} then grad{vjp} over it
  /// (inputs: the parameters and one seed per parameter; outputs: the gradient, then
  /// Σ_j seed_j ∂²(lnZ/N)/∂p_j∂p). The pipeline runs before and after each grad.
  /// Compiled once per schedule; returns its index in `progs`.
  int stagedModule(bool second) {
    std::vector<int64_t> r = sw->ranks;
    if (sw->closureRank) r.push_back(sw->closureRank);
    size_t mi = 0;
    while (mi < modules.size() && !(modules[mi].ranks == r && modules[mi].closureRank == sw->closureRank)) ++mi;
    if (mi == modules.size()) modules.push_back({r, sw->closureRank, -1, -1});
    if (const int done = second ? modules[mi].second : modules[mi].grad; done >= 0) return done;
    progs->noteGroup("staged module");
    TrgStepOptions so;
    so.svdEps = o.svdEps;
    so.outputKeptSingularValues = !second;
    so.limitClosure = sw->closureRank > 0;
    so.initScale = false; // added on the host, as in the value sweep
    auto t0 = Clock::now();
    ir::Program p = buildTrgModule(r, so, o.model);
    const double traceMs = msSince(t0);
    double passMs = progs->runPasses(p);
    if (!second) {
      passes::GradOptions go;
      go.wrt = gradParams;
      go.keepOutputs = true;
      go.bondGauge = true; // first order only: not differentiated again
      go.aux = {"skept"};
      go.callRemat = o.checkpoint;
      go.svdTopkGuards = progs->guardsWanted();
      passMs += progs->runGrad(p, go);
    } else {
      // The policy at the call boundaries of both grads: with store the second grad
      // reads the first one's residuals instead of recomputing its forward halves
      // (χ = 16, 20 steps: 613 ms per Hessian row against 1754 ms with recompute).
      passes::GradOptions g1;
      g1.wrt = params;
      g1.keepOutputs = false;
      g1.callRemat = o.checkpoint;
      passMs += progs->runGrad(p, g1) + progs->runPasses(p);
      passes::GradOptions g2;
      g2.wrt = params;
      g2.vjp = true;
      g2.callRemat = o.checkpoint;
      passMs += progs->runGrad(p, g2);
    }
    size_t traced = p.ops.size();
    for (const ir::Program &f : p.functions) traced += f.ops.size();
    passMs += progs->runPasses(p);
    const int idx = progs->add("staged module", second ? "second" : "value+grad", std::move(p), traced, traceMs, passMs);
    (second ? modules[mi].second : modules[mi].grad) = idx;
    return idx;
  }

  void compileWhole() {
    TrgStepOptions so;
    so.svdEps = o.svdEps;
    so.outputKeptSingularValues = true;
    progs->noteGroup("whole");
    auto t0 = Clock::now();
    so.limitClosure = o.stepsAuto;
    ir::Program p = buildTrgWhole(sw->ranks, so, o.model);
    double traceMs = msSince(t0);
    size_t traced = p.ops.size();
    double passMs = progs->runPasses(p);
    if (o.grad) {
      // value_and_grad of lnz with %skept auxiliary (no cotangent): outputs (lnz, skept,
      // grad_beta[, grad_h]).
      passes::GradOptions go;
      go.wrt = gradParams;
      go.aux = {p.outputName(1)}; // %skept (under the name the tracer gave it)
      go.keepOutputs = true;
      go.bondGauge = true;
      ir::Program g = p;
      double gradMs = progs->runGrad(g, go, /*firstOrder=*/true, o.checkpoint);
      size_t gTraced = g.ops.size();
      double gMs = progs->runPasses(g);
      wholeValue = progs->add("whole", "value", std::move(p), traced, traceMs, passMs);
      wholeGrad = progs->add("whole", "value+grad", std::move(g), gTraced, 0, gradMs + gMs);
    } else {
      wholeValue = progs->add("whole", "value", std::move(p), traced, traceMs, passMs);
    }
    sw->allRanks = sw->ranks;
  }

  /// The Hessian rows of lnZ/N = VJPs of grad(whole) (whole mode): inputs (params...,
  /// seed...), outputs (∂lnz/∂p..., Σ_j seed_j ∂²lnz/∂p_j∂p ...).
  void compileSecond() {
    TrgStepOptions so;
    so.svdEps = o.svdEps;
    progs->noteGroup("second");
    auto t0 = Clock::now();
    so.limitClosure = o.stepsAuto;
    ir::Program p = buildTrgWhole(sw->ranks, so, o.model);
    double traceMs = msSince(t0);
    double passMs = progs->runPasses(p);
    auto t1 = Clock::now();
    passes::GradOptions g1;
    g1.wrt = params;
    g1.keepOutputs = false;
    ir::Program d1 = p;
    progs->runGrad(d1, g1);
    progs->runPasses(d1);
    passes::GradOptions g2;
    g2.wrt = params;
    g2.vjp = true;
    g2.keepOutputs = true;
    ir::Program d2 = d1;
    progs->runGrad(d2, g2); // outputs (d lnz..., seed · d² lnz...)
    size_t traced = d2.ops.size();
    double gMs = msSince(t1);
    double pMs = progs->runPasses(d2);
    wholeSecond = progs->add("second", "second", std::move(d2), traced, traceMs, passMs + gMs + pMs);
  }

  /// Runs one evaluation with a fresh ledger and keeps its planned peak.
  template <typename F> TrgResult evaluate(F &&f) {
    progs->beginEvaluation();
    TrgResult r = f();
    lastPeakBytes = progs->evaluationPeakBytes();
    return r;
  }

  void checkBeta(double beta) const {
    if (!std::isfinite(beta) || beta <= 0)
      throw Error("error: trg: beta must be finite and > 0, got " + formatDouble(beta));
  }

  static ir::Tensor scalar(double v) { return ir::Tensor::scalar(v); }


  /// Second order in the field's direction through the leading pair of kept singular
  /// values closer than kTrgMinPairGap (below T_c: the two ordered states) is rounding
  /// divided by the gap squared: ∂²/∂β∂h and ∂²/∂h² are then refused (left empty, with
  /// the reason), and the first derivatives are those of the first-order sweep.
  void refuseFieldSecondOrder(TrgResult &r) {
    if (!o.model.hasField() || !(r.d2lnZdbetadh || r.d2lnZdh2)) return;
    const auto [gap, step] = sw->smallestKeptGap(r.beta);
    if (!(gap < kTrgMinPairGap)) return;
    r.d2lnZdbetadh.reset();
    r.d2lnZdh2.reset();
    // The first derivatives of the second-order sweep come from VJPs built for being
    // differentiated again (the general rule), which divide that pair's rounding by its
    // gap: take them from the first-order sweep, whose rule has no such division (the
    // bond gauge, docs/trg.md §5).
    const TrgResult g = o.mode == TrgMode::Staged ? gradStaged(r.beta) : gradWhole(r.beta);
    r.dlnZ = g.dlnZ;
    r.dlnZdh = g.dlnZdh;
    r.refused = "d2/dbeta dh and d2/dh2 refused: the two leading singular values of step " +
                std::to_string(step) + " are " +
                (gap > 0 ? formatDouble(gap) + " of s0 apart" : std::string("equal")) + " (< " +
                formatDouble(kTrgMinPairGap) +
                " of s0: the two ordered states below T_c), and second derivatives in h through "
                "that pair are rounding divided by the gap squared (docs/trg.md section 8.1); a "
                "field h != 0 that splits the pair, or a smaller lattice (--steps N), gives them";
  }

  /// The Hessian rows second() computes: β's, and h's with TrgOptions::susceptibility.
  size_t hessianRows() const { return o.susceptibility ? 2 : 1; }

  /// Before a derivative sweep at β: the value sweep decides the schedule there (once
  /// per β), and the classes it needs are compiled.
  void planFor(double beta) {
    if (!sw->planned() || (sw->plannedBeta && *sw->plannedBeta == beta)) return;
    if (o.mode == TrgMode::Staged) {
      sw->value(beta);
      return;
    }
    planWhole(beta);
  }

  /// Whole mode with a derived schedule or --steps auto: a staged value sweep (of its own
  /// value programs) decides, and the whole programs are compiled anew when it differs.
  void planWhole(double beta) {
    if (!planner) {
      TrgOptions po = o;
      po.mode = TrgMode::Staged;
      po.grad = po.second = po.susceptibility = false;
      po.pipeline = trgPipeline(o);
      po.passOptions = {};
      planner = std::make_unique<TrgDriver>(po);
    }
    auto t0 = Clock::now();
    planner->value(beta);
    if (planner->ranks() != sw->ranks) {
      sw->ranks = planner->ranks();
      sw->setDims();
      compileWhole();
      if (o.second) compileSecond();
    }
    sw->planExtraMs = msSince(t0);
    sw->plannedBeta = beta;
  }

  TrgResult valueWhole(double beta) {
    planFor(beta);
    TrgResult r = sw->newResult(beta);
    auto out = progs->run(wholeValue, sw->paramInputs(beta), "whole program", beta);
    for (size_t n = 0; n < sw->ranks.size(); ++n) sw->checkKept(n, out[1].data.data() + 2 * n, r);
    sw->checkFinite("lnZ/N", out[0].data[0], beta);
    r.lnZ = out[0].data[0];
    return r;
  }

  /// value+grad: the staged module's first derivative (stagedModule(false)) at β. Its
  /// forward (svd_topk with the complement's guards) can put a kept singular value that
  /// the value sweep found > tol at the noise level on the other side; with a derived
  /// schedule that step then keeps one value fewer, as the value sweep would have.
  TrgResult gradStaged(double beta) {
    planFor(beta);
    for (;;) {
      TrgResult r = sw->newResult(beta);
      const int idx = stagedModule(false);
      progs->moduleProgress("value+grad", progs->at(idx).program);
      std::vector<ir::Tensor> out = progs->run(idx, sw->paramInputs(beta), "value+grad (staged module)", beta);
      const size_t rows = sw->ranks.size() + (sw->closureRank ? 1 : 0);
      const double *kept = out[1].data.data();
      size_t low = rows;
      for (size_t n = 0; n < rows && low == rows; ++n)
        if (!(kept[2 * n] > o.rankTol && kept[2 * n + 1] > o.rankTol)) low = n;
      if (low < rows && sw->autoRanks && sw->keptOf(low) > 1) {
        sw->lowerRank(low);
        continue;
      }
      for (size_t n = 0; n < rows; ++n) sw->checkKept(n, kept + 2 * n, r);
      // The initial tensor's scale on the host, as in the value sweep.
      r.lnZ = out[0].data[0] + sw->logScale(beta).value;
      sw->checkFinite("lnZ/N", r.lnZ, beta);
      std::vector<double> gs;
      for (size_t j = 0; j < gradParams.size(); ++j) gs.push_back(out[2 + j].data[0]);
      sw->setDerivatives(r, gs.data(), nullptr, 0, true, gradParams.size() > 1);
      return r;
    }
  }

  /// second(): the value sweep (the schedule at β, lnZ/N, the rank check), then per
  /// Hessian row the staged module's VJP of its gradient with that row's seed
  /// (stagedModule(true)): grad of grad through the calls and scans.
  TrgResult secondStaged(double beta) {
    TrgResult r = sw->value(beta);
    const int idx = stagedModule(true);
    hessianRowsOf(idx, "second (staged module)", /*hostScale=*/true, r);
    return r;
  }

  /// Runs second-order program `idx` (inputs: the parameters and one seed per parameter;
  /// outputs: the gradient, then the seeded Hessian row) once per Hessian row and stores
  /// the derivatives in `r` (`hostScale`: add the initial tensor's scale on the host).
  void hessianRowsOf(int idx, const char *where, bool hostScale, TrgResult &r) {
    const size_t np = params.size();
    for (size_t row = 0; row < hessianRows(); ++row) {
      progs->moduleProgress("second", progs->at(idx).program);
      std::vector<ir::Tensor> in = sw->paramInputs(r.beta);
      for (size_t j = 0; j < np; ++j) in.push_back(scalar(j == row ? 1.0 : 0.0));
      auto out = progs->run(idx, in, where, r.beta);
      std::vector<double> g(np), h(np);
      for (size_t j = 0; j < np; ++j) {
        g[j] = out[j].data[0];
        h[j] = out[np + j].data[0];
      }
      sw->setDerivatives(r, g.data(), h.data(), row, hostScale, true);
    }
  }

  TrgResult gradWhole(double beta) {
    planFor(beta);
    TrgResult r = sw->newResult(beta);
    const size_t N = sw->ranks.size();
    auto out = progs->run(wholeGrad, sw->paramInputs(beta), "whole program", beta);
    for (size_t n = 0; n < N; ++n) sw->checkKept(n, out[1].data.data() + 2 * n, r);
    sw->checkFinite("lnZ/N", out[0].data[0], beta);
    r.lnZ = out[0].data[0];
    // The whole program includes the initial tensor's scale: no host terms.
    std::vector<double> gs;
    for (size_t j = 0; j < gradParams.size(); ++j) gs.push_back(out[2 + j].data[0]);
    sw->setDerivatives(r, gs.data(), nullptr, 0, false, gradParams.size() > 1);
    return r;
  }

  /// second() in whole mode: the value program (for the rank check), then per Hessian row
  /// the VJP of grad(whole) with that row's seed.
  TrgResult secondWhole(double beta) {
    TrgResult r = valueWhole(beta); // plans the schedule at β
    hessianRowsOf(wholeSecond, "whole program", /*hostScale=*/false, r);
    return r;
  }
};

//===--- TrgDriver -------------------------------------------------------------===//

TrgDriver::TrgDriver(TrgOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}
TrgDriver::~TrgDriver() = default;

const TrgOptions &TrgDriver::options() const { return impl_->o; }
const std::vector<int64_t> &TrgDriver::ranks() const { return impl_->sw->allRanks; }
bool TrgDriver::stepsConverged() const { return impl_->sw->converged; }
void TrgDriver::setProgress(TrgProgressCallback cb) { impl_->progs->setProgress(std::move(cb)); }
double TrgDriver::planExtraMs() const { return impl_->sw->planExtraMs; }
const std::vector<TrgProgramInfo> &TrgDriver::programs() const { return impl_->progs->all(); }

rt::TruncatedSvdStats TrgDriver::svdStats() const {
  rt::TruncatedSvdStats t = impl_->progs->svdStats();
  // Whole mode's schedule comes from a staged planner driver: its SVDs count too.
  if (impl_->planner) {
    const rt::TruncatedSvdStats s = impl_->planner->svdStats();
    t.topkCalls += s.topkCalls, t.topkIterations += s.topkIterations, t.topkFallbacks += s.topkFallbacks;
    t.complementCalls += s.complementCalls, t.complementIterations += s.complementIterations;
    t.complementFallbacks += s.complementFallbacks, t.complementBroadened += s.complementBroadened;
  }
  return t;
}

TrgResult TrgDriver::value(double beta) {
  impl_->checkBeta(beta);
  return impl_->evaluate([&] {
    return impl_->o.mode == TrgMode::Staged ? impl_->sw->value(beta) : impl_->valueWhole(beta);
  });
}

TrgResult TrgDriver::valueAndGrad(double beta) {
  impl_->checkBeta(beta);
  if (!impl_->o.grad)
    throw Error("error: trg: valueAndGrad needs the gradient programs (TrgOptions::grad)");
  return impl_->evaluate([&] {
    return impl_->o.mode == TrgMode::Staged ? impl_->gradStaged(beta) : impl_->gradWhole(beta);
  });
}

TrgResult TrgDriver::second(double beta) {
  impl_->checkBeta(beta);
  if (!impl_->o.second)
    throw Error("error: trg: second needs the second-order program (TrgOptions::second)");
  TrgResult r = impl_->evaluate([&] {
    return impl_->o.mode == TrgMode::Staged ? impl_->secondStaged(beta) : impl_->secondWhole(beta);
  });
  impl_->refuseFieldSecondOrder(r);
  return r;
}

int64_t TrgDriver::plannedPeakBytes() const { return impl_->lastPeakBytes; }

std::vector<TrgGroupInfo> TrgDriver::groups() const {
  return impl_->progs->groups([this](const std::string &g) { return impl_->sw->usesOf(g); });
}
double TrgDriver::compileMs() const { return impl_->progs->compileMs(); }
double TrgDriver::prepareMs() const { return impl_->progs->prepareMs(); }
size_t TrgDriver::totalOps() const { return impl_->progs->totalOps(); }
void TrgDriver::setProfiling(bool on) { impl_->progs->setProfiling(on); }
std::string TrgDriver::profileReport(size_t top) const { return impl_->progs->profileReport(top); }
std::string TrgDriver::blas() { return rt::blasInfo(); }

} // namespace tessel::frontend
