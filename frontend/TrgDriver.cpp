//===- frontend/TrgDriver.cpp - Staged and whole-graph TRG drivers ----------------===//
//
// The driver decides which programs a run needs and runs them: the value sweep and the
// schedule are TrgSweep's (frontend/TrgSweep.h), compiling, preparing and running are
// TrgPrograms' (frontend/TrgPrograms.h), and every derivative is the compiler's: the
// staged module of the schedule differentiated by the grad pass (whole mode: inlined
// first). No derivative is formed on the host.
//
//===----------------------------------------------------------------------===//
#include "frontend/TrgDriver.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cmath>
#include <utility>

#include "frontend/TrgSweep.h"
#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "passes/Grad.h"
#include "runtime/Stats.h"

namespace tessel::frontend {

using Clock = std::chrono::steady_clock;
using rt::msSince;
using ir::text::formatDouble;

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

  /// What a program of the staged module computes: lnZ/N (whole mode; the staged value
  /// is the sweep), value+grad, or the Hessian rows.
  enum class Kind { Value, Grad, Second };
  /// The programs of one schedule, indices into `progs` (-1: not compiled).
  struct Compiled {
    std::vector<int64_t> ranks; ///< the steps' D' (with a limit closure, its D' last)
    bool limitClosure = false;
    int value = -1, grad = -1, second = -1;
  };
  std::vector<Compiled> compiled;

  explicit Impl(TrgOptions opts) : o(std::move(opts)) {
    validateTrgOptions(o);
    if (o.field == 0) o.field = 0; // -0 is h = 0 (and prints as 0)
    params = o.model.parameters();
    gradParams = params;
    if (o.model.hasField() && o.field == 0 && o.svd == TrgSvd::Truncated)
      gradParams.resize(1); // β
    progs = std::make_unique<TrgPrograms>(o);
    sw = std::make_unique<TrgSweep>(o, *progs);
    if (whole()) {
      // The schedule's ranks end with the limit closure's step (--steps auto).
      sw->closureRank = 0;
      sw->allRanks = sw->ranks;
      compileWhole();
      return;
    }
    sw->compile();
    // A derived schedule is known only at a β: its module is compiled there.
    if (!sw->autoRanks) {
      if (o.grad) moduleProgram(Kind::Grad);
      if (o.second) moduleProgram(Kind::Second);
    }
  }

  bool whole() const { return o.mode == TrgMode::Whole; }

  /// Whole mode's programs for the current schedule.
  void compileWhole() {
    moduleProgram(Kind::Value);
    if (o.grad) moduleProgram(Kind::Grad);
    if (o.second) moduleProgram(Kind::Second);
  }

  /// The program of `kind` for the current schedule, compiled once per schedule from the
  /// staged module (frontend::buildTrgModule; docs/trg.md §6.1); whole mode inlines it
  /// first (the `inline` pass: one program, the initial scale included; value+grad
  /// starts from the value program), staged mode differentiates through its calls and
  /// scans. Grad: value+grad, grad{wrt=params,
  /// aux=skept} with the bond gauge; staged: the checkpoint policy at the call and scan
  /// boundaries and the complement's guards, whole: svd-topk-guards and the checkpoint
  /// pass. Second: the Hessian rows, grad{keep-outputs=false} then jvp (forward over
  /// reverse; TrgOptions::secondForwardOverReverse) or grad{vjp} (inputs: the parameters
  /// and one seed per parameter; outputs: the gradient, then Σ_j seed_j
  /// ∂²(lnZ/N)/∂p_j∂p). The pipeline runs before and after each transform.
  int moduleProgram(Kind kind) {
    std::vector<int64_t> r = sw->ranks;
    if (sw->closureRank) r.push_back(sw->closureRank);
    const bool limitClosure = whole() ? o.stepsAuto : sw->closureRank > 0;
    size_t ci = 0;
    while (ci < compiled.size() && !(compiled[ci].ranks == r && compiled[ci].limitClosure == limitClosure)) ++ci;
    if (ci == compiled.size()) compiled.push_back({r, limitClosure});
    int &idx = kind == Kind::Value ? compiled[ci].value : kind == Kind::Grad ? compiled[ci].grad : compiled[ci].second;
    if (idx >= 0) return idx;
    const std::string group = !whole() ? "staged module" : kind == Kind::Second ? "second" : "whole";
    progs->noteGroup(group);
    TrgStepOptions so = sw->stepOptions(); // the value sweep's algorithm, k and ε
    so.outputKeptSingularValues = kind != Kind::Second;
    so.outputCutSingularValues = false; // the value sweep's check, which derives the schedule
    so.limitClosure = limitClosure;
    so.initScale = whole(); // staged: added on the host, as in the value sweep
    auto opsOf = [](const ir::Program &q) {
      size_t n = q.ops.size();
      for (const ir::Program &f : q.functions) n += f.ops.size();
      return n;
    };
    ir::Program p;
    double traceMs = 0, passMs = 0;
    // Each run below starts from the output of a run before it (or a prepared program),
    // which the verifier checked: only the traced module is verified on input.
    constexpr passes::InputState Verified = passes::InputState::Verified;
    size_t traced = 0; // TrgProgramInfo::tracedOps: after tracing (and inline), or grad
    if (whole() && kind == Kind::Grad && compiled[ci].value >= 0) {
      p = progs->at(compiled[ci].value).program(); // value_and_grad of the value program
    } else {
      auto t0 = Clock::now();
      p = buildTrgModule(r, so, o.model);
      traceMs = msSince(t0);
      if (whole()) passMs += progs->runInline(p);
      traced = opsOf(p);
      passMs += progs->runPasses(p, whole() ? Verified : passes::InputState::Unverified, kind == Kind::Second);
    }
    if (kind == Kind::Grad) {
      passes::GradOptions go;
      go.wrt = gradParams;
      go.keepOutputs = true;
      go.bondGauge = true; // first order only: not differentiated again
      go.aux = {"skept"};
      go.callRemat = o.checkpoint;
      go.svdTopkGuards = !whole() && progs->guardsWanted();
      passMs += progs->runGrad(p, go, whole(), whole() ? o.checkpoint : passes::RematPolicy::Store, Verified);
    } else if (kind == Kind::Second) {
      // The policy at the call boundaries of both grads: with store the second grad
      // reads the first one's residuals instead of recomputing its forward halves
      // (χ = 16, 20 steps: 613 ms per Hessian row against 1754 ms with recompute).
      // Forward over reverse: the first grad's complement solves take their guards from
      // the forward, as at first order, and so do the jvp's (its rules hold the guards
      // constant; passes/JvpLinalg.cpp); reverse over reverse has no rule for them.
      const bool guards = o.secondForwardOverReverse && progs->guardsWanted();
      passes::GradOptions g1;
      g1.wrt = params;
      g1.keepOutputs = false;
      g1.callRemat = o.checkpoint;
      g1.svdTopkGuards = guards && !whole();
      passMs += progs->runGrad(p, g1, guards && whole(), passes::RematPolicy::Store, Verified);
      passMs += progs->runPasses(p, Verified, true);
      if (o.secondForwardOverReverse) {
        // jvp of the gradient: inputs (p..., t_p...), outputs (∂lnz/∂p...,
        // Σ_j t_j ∂²lnz/∂p_j∂p ...), the tangents carried through the forward and reverse
        // sweeps alongside them.
        passes::JvpOptions jo;
        jo.wrt = params;
        jo.keepOutputs = true;
        passMs += progs->runJvp(p, jo, Verified);
      } else {
        passes::GradOptions g2 = g1;
        g2.vjp = true;
        g2.keepOutputs = true; // outputs (∂lnz/∂p..., Σ_j seed_j ∂²lnz/∂p_j∂p ...)
        passMs += progs->runGrad(p, g2, false, passes::RematPolicy::Store, Verified);
      }
    }
    if (kind != Kind::Value) {
      traced = opsOf(p);
      passMs += progs->runPasses(p, Verified, kind == Kind::Second);
    }
    const char *role = kind == Kind::Value ? "value" : kind == Kind::Grad ? "value+grad" : "second";
    return idx = progs->add(group, role, std::move(p), traced, traceMs, passMs);
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
    const TrgResult g = valueAndGrad(r.beta);
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

  /// At h = 0, ∂/∂h and ∂²/∂β∂h are 0 by the spin-flip symmetry, and the computed ones
  /// measure the rounding of the odd sector (kTrgOddTol): above kTrgOddTol of the β
  /// derivative of the same order they are left empty, with the value named. ∂²/∂h²
  /// is even and stays (forward-over-reverse and reverse-over-reverse agree on it to
  /// 2e-10 where they disagree on ∂²/∂β∂h in sign; docs/trg.md §8.1).
  void checkOddAtZeroField(TrgResult &r) const {
    if (!o.model.hasField() || o.field != 0) return;
    auto tooLarge = [](const std::optional<double> &odd, const std::optional<double> &even) {
      return odd && even && !(std::fabs(*odd) <= kTrgOddTol * std::fabs(*even));
    };
    auto why = [](const std::optional<double> &odd, const std::optional<double> &even, const char *what,
                  const std::string &scaling) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.3g (%.3g of ", *odd, std::fabs(*odd / *even));
      return std::string("0 by the spin-flip symmetry at h = 0; AD gives ") + buf + what + ", above " +
             formatDouble(kTrgOddTol) +
             "): rounding of the spin-flip-odd sector, which each step near T_c multiplies by " + scaling +
             " (docs/trg.md section 8.1)";
    };
    // b: the length scale of a step (√2 for TRG and BTRG, 2 for HOTRG).
    const std::string b = o.sitesLog2() == 2 ? "2" : "sqrt(2)";
    if (tooLarge(r.dlnZdh, r.dlnZ)) {
      r.dhRefused = "d/dh refused: " + why(r.dlnZdh, r.dlnZ, "d/dbeta",
                                           "up to the magnetic scaling factor " + b + "^(15/8)");
      r.dlnZdh.reset();
    }
    if (tooLarge(r.d2lnZdbetadh, r.d2lnZ)) {
      r.refused = "d2/dbeta dh refused: " +
                  why(r.d2lnZdbetadh, r.d2lnZ, "d2/dbeta2", "up to " + b + "^(15/8 + 1) (magnetic and thermal)") +
                  (o.susceptibility ? "; d2/dh2 is even in h and computed" : "");
      r.d2lnZdbetadh.reset();
    }
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
  /// value programs) decides, and the whole programs of a schedule it has not met are compiled.
  void planWhole(double beta) {
    if (!planner) {
      TrgOptions po = o;
      po.mode = TrgMode::Staged;
      po.grad = po.second = po.susceptibility = false;
      po.pipeline = trgPipeline(o);
      po.passOptions = TrgOptions{}.passOptions; // no instrumentation: its programs are not the run's
      po.passOptions.verifyEach = o.passOptions.verifyEach;
      planner = std::make_unique<TrgDriver>(po);
    }
    auto t0 = Clock::now();
    planner->value(beta);
    if (planner->ranks() != sw->ranks) {
      sw->allRanks = sw->ranks = planner->ranks();
      sw->setDims();
      compileWhole();
    }
    sw->planExtraMs = msSince(t0);
    sw->plannedBeta = beta;
  }

  /// The multiplet splits of the last value sweep where it ran at β (the staged sweep's,
  /// or whole mode's planner's); empty where none ran there.
  std::vector<TrgMultipletSplit> sweepSplitsAt(double beta) const {
    const TrgSweep &s = planner ? *planner->impl_->sw : *sw;
    return s.splitsBeta && *s.splitsBeta == beta ? s.splits : std::vector<TrgMultipletSplit>{};
  }

  TrgResult valueWhole(double beta) {
    planFor(beta);
    TrgResult r = sw->newResult(beta);
    r.multipletSplits = sweepSplitsAt(beta);
    auto out = progs->run(moduleProgram(Kind::Value), sw->paramInputs(beta), "whole program", beta);
    for (size_t n = 0; n < sw->ranks.size(); ++n) sw->checkKept(n, out[1].data.data() + 2 * n, r);
    sw->checkFinite("lnZ/N", out[0].data[0], beta);
    r.lnZ = out[0].data[0];
    return r;
  }

  /// value+grad at β: moduleProgram(Grad). Staged, its forward (svd_topk with the
  /// complement's guards) can put a kept singular value that the value sweep found > tol
  /// at the noise level on the other side; with a derived schedule that step then keeps
  /// one value fewer, as the value sweep would have. Where the same step fails again
  /// the next run drops twice as many (1, 2, 4, …): deep in a critical run the flow has
  /// left the fixed point, the rounding of the two forwards has grown into different
  /// tensors there, and a spectrum that collapses within a step can put several values
  /// below tol at once (HOTRG at β_c, χ = 16, step 29: 16 -> 9 in 3 reruns, not 7). The
  /// step may then drop up to twice as many values as it needed to (at a step whose
  /// weight in lnZ/N is ~2^-50 or 4^-29 there); one rerun, the common case, drops one.
  TrgResult valueAndGrad(double beta) {
    planFor(beta);
    size_t lastLow = SIZE_MAX;
    int64_t drop = 1;
    for (;;) {
      TrgResult r = sw->newResult(beta);
      r.multipletSplits = sweepSplitsAt(beta);
      const int idx = moduleProgram(Kind::Grad);
      progs->moduleProgress("value+grad", progs->at(idx).program());
      std::vector<ir::Tensor> out = progs->run(idx, sw->paramInputs(beta),
                                               whole() ? "whole program" : "value+grad (staged module)", beta);
      const size_t rows = sw->ranks.size() + (sw->closureRank ? 1 : 0);
      const double *kept = out[1].data.data();
      size_t low = rows;
      for (size_t n = 0; n < rows && low == rows; ++n)
        if (!(kept[2 * n] > o.rankTol && kept[2 * n + 1] > o.rankTol)) low = n;
      if (low < rows && !whole() && sw->autoRanks && sw->keptOf(low) > 1) {
        drop = low == lastLow ? 2 * drop : 1;
        lastLow = low;
        for (int64_t i = 0; i < drop && sw->keptOf(low) > 1; ++i) sw->lowerRank(low);
        continue;
      }
      for (size_t n = 0; n < rows; ++n) sw->checkKept(n, kept + 2 * n, r);
      // Staged: the initial tensor's scale on the host, as in the value sweep.
      r.lnZ = out[0].data[0] + (whole() ? 0.0 : sw->logScale(beta).value);
      sw->checkFinite("lnZ/N", r.lnZ, beta);
      std::vector<double> gs;
      for (size_t j = 0; j < gradParams.size(); ++j) gs.push_back(out[2 + j].data[0]);
      sw->setDerivatives(r, gs.data(), nullptr, 0, !whole(), gradParams.size() > 1);
      return r;
    }
  }

  /// second(): the value (staged: the sweep, which plans the schedule at β; whole: the
  /// value program), then per Hessian row the VJP of the gradient with that row's seed
  /// (moduleProgram(Second): grad of grad, through the calls and scans when staged).
  TrgResult second(double beta) {
    TrgResult r = whole() ? valueWhole(beta) : sw->value(beta);
    const int idx = moduleProgram(Kind::Second);
    const size_t np = params.size();
    for (size_t row = 0; row < hessianRows(); ++row) {
      progs->moduleProgress("second", progs->at(idx).program());
      std::vector<ir::Tensor> in = sw->paramInputs(r.beta);
      for (size_t j = 0; j < np; ++j) in.push_back(ir::Tensor::scalar(j == row ? 1.0 : 0.0));
      auto out = progs->run(idx, in, whole() ? "whole program" : "second (staged module)", r.beta);
      std::vector<double> g(np), h(np);
      for (size_t j = 0; j < np; ++j) {
        g[j] = out[j].data[0];
        h[j] = out[np + j].data[0];
      }
      sw->setDerivatives(r, g.data(), h.data(), row, !whole(), true);
    }
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
  if (impl_->planner) t += impl_->planner->svdStats();
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
  TrgResult r = impl_->evaluate([&] {
    return impl_->valueAndGrad(beta);
  });
  impl_->checkOddAtZeroField(r);
  return r;
}

TrgResult TrgDriver::second(double beta) {
  impl_->checkBeta(beta);
  if (!impl_->o.second)
    throw Error("error: trg: second needs the second-order program (TrgOptions::second)");
  TrgResult r = impl_->evaluate([&] {
    return impl_->second(beta);
  });
  impl_->refuseFieldSecondOrder(r);
  impl_->checkOddAtZeroField(r);
  return r;
}

std::vector<TrgCftRow> TrgDriver::cftData(double beta) {
  impl_->checkBeta(beta);
  if (!impl_->o.cft) throw Error("error: trg: cftData needs TrgOptions::cft");
  std::vector<TrgCftRow> rows;
  impl_->evaluate([&] { return impl_->sw->value(beta, &rows); });
  return rows;
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
