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

#include "frontend/TrgPrograms.h"
#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "runtime/Stats.h"
#include "passes/Grad.h"

namespace tessel::frontend {
namespace {

using Clock = std::chrono::steady_clock;
using rt::msSince;
using ir::text::formatDouble;

std::string classGroup(int64_t din, int64_t dout) {
  return "step " + std::to_string(din) + "->" + std::to_string(dout);
}

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
  std::vector<int64_t> ranks;
  std::vector<int64_t> dims; // dims[n] = D of the input of step n+1; dims[N] = final D
  /// The compiled programs, the pass manager and the engine.
  std::unique_ptr<TrgPrograms> progs;
  /// Whole mode with a derived schedule: the staged value driver that derives it.
  std::unique_ptr<TrgDriver> planner;
  int64_t lastPeakBytes = 0;

  // Whole programs.
  int wholeValue = -1, wholeGrad = -1, wholeSecond = -1;
  /// The value program of one staged piece (init, a step class D -> D', the closure):
  /// an index into `progs`, -1 where not compiled. The value sweep chains them.
  struct StagedClass {
    int value = -1;
  };
  /// The staged module of one schedule (frontend::buildTrgModule) with its derivatives:
  /// value+grad (`grad`) and the Hessian rows (`second`), indices into `progs`.
  struct StagedModule {
    std::vector<int64_t> ranks; ///< with the limit closure's D' last (closureRank > 0)
    int64_t closureRank = 0;
    int grad = -1, second = -1;
  };
  std::vector<StagedModule> modules;
  StagedClass init;
  std::map<std::pair<int64_t, int64_t>, StagedClass> stepClasses;
  /// Per final bond dimension D: the closure (the trace, or the limit closure with
  /// stepsAuto).
  std::map<std::pair<int64_t, int64_t>, StagedClass> closures;
  /// With stepsAuto: the D' of the limit closure's step (0: the trace closure).
  int64_t closureRank = 0;
  /// ranks, and with stepsAuto the limit closure's D' after them (TrgDriver::ranks()).
  std::vector<int64_t> allRanks;
  /// Per (D, D'): the probe that outputs the D' leading singular values of the step's
  /// SVDs (spectrum-derived schedule).
  std::map<std::pair<int64_t, int64_t>, int> probes;
  /// The β whose schedule `ranks` holds (spectrum-derived schedules, --steps auto).
  std::optional<double> plannedBeta;
  /// Whether the schedule is derived from the spectrum at each β (no --ranks given).
  bool autoRanks = false;
  /// Extra time of the last plan: probe runs and compiles of new classes (ms).
  double planExtraMs = 0;
  /// Whether the last --steps auto plan met its stop criterion within o.steps steps.
  bool converged = true;

  explicit Impl(TrgOptions opts) : o(std::move(opts)) {
    validateTrgOptions(o);
    if (o.field == 0) o.field = 0; // -0 is h = 0 (and prints as 0)
    params = o.model.parameters();
    gradParams = params;
    if (o.model.hasField() && o.field == 0 && trgSvdUsed(o) == TrgSvd::Truncated)
      gradParams.resize(1); // β
    autoRanks = o.ranks.empty();
    // The initial schedule: the one given, or the structural one (docs/trg.md §2.4), which
    // the spectrum confirms at ordinary β; with --steps auto its first steps hold every
    // class of a run (from step ~5 on all are χ -> χ).
    ranks = !autoRanks ? o.ranks
                       : trgDefaultRanks(o.chi, o.stepsAuto ? std::min(o.steps, 12) : o.steps,
                                         o.model.states());
    setDims();
    if (autoRanks && o.stepsAuto) closureRank = structuralRank(ranks.size()); // the limit closure's
    progs = std::make_unique<TrgPrograms>(o);
    if (o.mode == TrgMode::Staged) compileStaged();
    else compileWhole();
    if (o.second && o.mode == TrgMode::Whole) compileSecond();
  }

  void setDims() {
    dims.assign(1, o.model.states());
    for (int64_t r : ranks) dims.push_back(r);
  }

  /// The structural D' of step n + 1 (docs/trg.md §2.4) given dims[0..n].
  int64_t structuralRank(size_t n) const {
    const int64_t bound = n == 0 ? dims[0] : squareSaturated(dims[n - 1]);
    return std::min({squareSaturated(dims[n]), o.chi, bound});
  }

  /// Per group, how many steps of the current schedule use it.
  int usesOf(const std::string &g) const {
    if (planned() && !plannedBeta) return 0; // the schedule is derived at each β
    if (g == "init" || g == "whole" || g == "second" || g == "staged module") return 1;
    if (g.rfind("closure", 0) == 0) return 1;
    int k = 0;
    for (size_t n = 0; n < ranks.size(); ++n) k += classGroup(dims[n], dims[n + 1]) == g;
    return k;
  }

  std::string closureGroup(int64_t D, int64_t Dp) const {
    return Dp ? "limit closure " + std::to_string(D) + "->" + std::to_string(Dp)
              : "closure " + std::to_string(D);
  }
  /// The closure of the current schedule (compiled when first needed).
  StagedClass &closure() { return closureClass(dims.back(), closureRank); }
  TrgStepOptions stepOptions() const {
    TrgStepOptions so;
    so.svdEps = o.svdEps;
    so.outputKeptSingularValues = true;
    return so;
  }

  /// The value program of step class (D, D'), compiled when first needed.
  StagedClass &stepClass(int64_t D, int64_t Dp) {
    StagedClass &sc = stepClasses[{D, Dp}];
    if (sc.value >= 0) return sc;
    const std::string g = classGroup(D, Dp);
    progs->noteGroup(g);
    const TrgStepOptions so = stepOptions();
    sc.value = progs->compileValue(g, [&] { return buildTrgStep(D, Dp, so); });
    return sc;
  }

  StagedClass &closureClass(int64_t D, int64_t Dp) {
    StagedClass &c = closures[{D, Dp}];
    if (c.value >= 0) return c;
    const std::string g = closureGroup(D, Dp);
    progs->noteGroup(g);
    const TrgStepOptions so = stepOptions();
    c.value = progs->compileValue(g, [&] { return Dp ? buildTrgLimitClosure(D, Dp, so) : buildTrgClosure(D); });
    return c;
  }

  /// Compiles what the current schedule needs and has not been compiled: the value
  /// programs, and with a given schedule the staged module's derivatives.
  void ensureStaged() {
    for (size_t n = 0; n < ranks.size(); ++n) stepClass(dims[n], dims[n + 1]);
    closureClass(dims.back(), closureRank);
    allRanks = ranks;
    if (closureRank) allRanks.push_back(closureRank);
  }

  void compileStaged() {
    progs->noteGroup("init");
    init.value = progs->compileValue("init", [&] { return buildTrgInit(o.model); });
    ensureStaged();
    // A derived schedule is known only at a β: its module is compiled there.
    if (!autoRanks) {
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
    std::vector<int64_t> r = ranks;
    if (closureRank) r.push_back(closureRank);
    size_t mi = 0;
    while (mi < modules.size() && !(modules[mi].ranks == r && modules[mi].closureRank == closureRank)) ++mi;
    if (mi == modules.size()) modules.push_back({r, closureRank, -1, -1});
    if (const int done = second ? modules[mi].second : modules[mi].grad; done >= 0) return done;
    progs->noteGroup("staged module");
    TrgStepOptions so;
    so.svdEps = o.svdEps;
    so.outputKeptSingularValues = !second;
    so.limitClosure = closureRank > 0;
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

  /// The probe of class (D, D'): its D' leading singular values, as the run computes them.
  int probeOf(int64_t D, int64_t Dp) {
    auto [it, fresh] = probes.try_emplace({D, Dp}, -1);
    if (!fresh) return it->second;
    TrgStepOptions so = stepOptions();
    so.outputLeadingSingularValues = true;
    auto t0 = Clock::now();
    ir::Program p = buildTrgStep(D, Dp, so);
    const double traceMs = msSince(t0);
    const size_t traced = p.ops.size();
    const double passMs = progs->runPasses(p);
    progs->noteGroup("spectrum probe");
    it->second = progs->add("spectrum probe", "value", std::move(p), traced, traceMs, passMs);
    return it->second;
  }

  void compileWhole() {
    TrgStepOptions so;
    so.svdEps = o.svdEps;
    so.outputKeptSingularValues = true;
    progs->noteGroup("whole");
    auto t0 = Clock::now();
    so.limitClosure = o.stepsAuto;
    ir::Program p = buildTrgWhole(ranks, so, o.model);
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
    allRanks = ranks;
  }

  /// The Hessian rows of lnZ/N = VJPs of grad(whole) (whole mode): inputs (params...,
  /// seed...), outputs (∂lnz/∂p..., Σ_j seed_j ∂²lnz/∂p_j∂p ...).
  void compileSecond() {
    TrgStepOptions so;
    so.svdEps = o.svdEps;
    progs->noteGroup("second");
    auto t0 = Clock::now();
    so.limitClosure = o.stepsAuto;
    ir::Program p = buildTrgWhole(ranks, so, o.model);
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

  std::string stepName(size_t n) const { return "step " + std::to_string(n + 1); }

  void checkBeta(double beta) const {
    if (!std::isfinite(beta) || beta <= 0)
      throw Error("error: trg: beta must be finite and > 0, got " + formatDouble(beta));
  }

  /// Refuses a kept singular value ≤ rankTol of step n + 1 (n = ranks.size(): the limit
  /// closure's step).
  void checkKept(size_t n, const double *s, TrgResult &r) const {
    const int64_t D = dims[std::min(n, ranks.size())],
                  Dp = n < ranks.size() ? dims[n + 1] : closureRank;
    r.keptSingularValues.push_back({s[0], s[1]});
    for (int k = 0; k < 2; ++k)
      if (!(s[k] > o.rankTol)) {
        const char *m = k == 0 ? "a" : "b";
        throw Error("error: trg: step " + std::to_string(n + 1) + " (" + std::to_string(D) +
                    "->" + std::to_string(Dp) + ", beta = " + formatDouble(r.beta) +
                    "): the smallest kept singular value s" + m + "[" + std::to_string(Dp - 1) +
                    "] = " + formatDouble(s[k]) + " of M" + m + " is <= tol = " +
                    formatDouble(o.rankTol) +
                    "; it is a zero of the spectrum to rounding and its derivative would be infinite. " +
                    (autoRanks ? "The schedule was derived from the value sweep's SVDs, whose "
                                 "kept values were > tol: this run's SVDs (another program) "
                                 "differ there at the noise level"
                               : "Keep fewer singular values in this step with --ranks (D' < " +
                                     std::to_string(Dp) +
                                     "), or leave --ranks out: the schedule is then derived "
                                     "from the spectrum"));
      }
  }

  void checkFinite(const char *what, double v, double beta) const {
    if (!std::isfinite(v))
      throw Error(std::string("error: trg: ") + what + " is not finite (" + formatDouble(v) +
                  ") at beta = " + formatDouble(beta));
  }

  static ir::Tensor scalar(double v) { return ir::Tensor::scalar(v); }

  /// The inputs of init and the whole program: β (and h).
  std::vector<ir::Tensor> paramInputs(double beta) const {
    return trgParameterInputs(o.model, beta, o.field);
  }

  TrgLogScale logScale(double beta) const { return trgInitLogScale(o.model, beta, o.field); }

  TrgResult newResult(double beta) const {
    TrgResult r;
    r.beta = beta;
    r.field = o.field;
    return r;
  }

  /// Stores the first derivatives g (in the order of `params`; `withH`: g holds ∂/∂h
  /// after ∂/∂β) and, with h, one row of the Hessian (`row` 0: β's, 1: h's; entries in
  /// the order of `params`). `scale`: add the initial tensor's scale (the staged programs
  /// leave it out; the whole program includes it).
  void setDerivatives(TrgResult &r, const double *g, const double *h, size_t row, bool scale,
                      bool withH) const {
    TrgLogScale sc;
    if (scale) sc = logScale(r.beta);
    auto put = [&](std::optional<double> &at, double v, const char *what) {
      checkFinite(what, v, r.beta);
      at = v;
    };
    const bool field = o.model.hasField();
    put(r.dlnZ, g[0] + sc.dbeta, "d(lnZ/N)/dbeta");
    if (field && withH) put(r.dlnZdh, g[1] + sc.dh, "d(lnZ/N)/dh");
    if (!h) return;
    if (row == 0) {
      put(r.d2lnZ, h[0] + sc.dbeta2, "d2(lnZ/N)/dbeta2");
      if (field) put(r.d2lnZdbetadh, h[1] + sc.dbetadh, "d2(lnZ/N)/dbeta dh");
    } else {
      put(r.d2lnZdh2, h[1] + sc.dh2, "d2(lnZ/N)/dh2");
    }
  }

  /// The smallest gap s_0 − s_1 of the two leading singular values of any step's Ma or Mb
  /// at β (both kept), relative to s_0, and the step (1-based): a sweep of the probe
  /// programs (each also advances the chain), the limit closure's step included. Below
  /// T_c that pair is the two ordered states (even and odd under the spin flip, which the
  /// field couples); above T_c the leading value is single. Multiplets further down
  /// (the lattice's own symmetries) have one charge and are not coupled by h.
  std::pair<double, size_t> smallestKeptGap(double beta) {
    // Once per β and schedule: a timed second() at one β repeats the same sweep.
    if (gapCache && gapCache->beta == beta && gapCache->ranks == allRanks) return gapCache->gap;
    if (init.value < 0) init.value = progs->compileValue("init", [&] { return buildTrgInit(o.model); });
    std::vector<ir::Tensor> sweep = progs->call(init.value, "init", beta, paramInputs(beta));
    ir::Tensor T = std::move(sweep[0]);
    std::pair<double, size_t> best{INFINITY, 0};
    const size_t last = ranks.size() + (closureRank ? 1 : 0);
    for (size_t n = 0; n < last; ++n) {
      const int64_t D = dims[std::min(n, ranks.size())], Dp = n < ranks.size() ? dims[n + 1] : closureRank;
      std::vector<ir::Tensor> out = progs->call(probeOf(D, Dp), stepName(n), beta, T);
      for (size_t k : {size_t(3), size_t(4)}) {
        const std::vector<double> &sv = out[k].data;
        if (sv.size() < 2) continue;
        const double gap = (sv[0] - sv[1]) / sv[0];
        if (gap < best.first) best = {gap, n + 1};
      }
      T = std::move(out[1]);
    }
    gapCache = GapCache{beta, allRanks, best};
    return best;
  }
  struct GapCache {
    double beta;
    std::vector<int64_t> ranks;
    std::pair<double, size_t> gap;
  };
  std::optional<GapCache> gapCache;

  /// Second order in the field's direction through the leading pair of kept singular
  /// values closer than kTrgMinPairGap (below T_c: the two ordered states) is rounding
  /// divided by the gap squared: ∂²/∂β∂h and ∂²/∂h² are then refused (left empty, with
  /// the reason), and the first derivatives are those of the first-order sweep.
  void refuseFieldSecondOrder(TrgResult &r) {
    if (!o.model.hasField() || !(r.d2lnZdbetadh || r.d2lnZdh2)) return;
    const auto [gap, step] = smallestKeptGap(r.beta);
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

  /// Keeps one singular value fewer in step n + 1 (n = ranks.size(): the limit closure's
  /// step) and lowers the later steps to what that allows (min(D², χ, rank bound)).
  void lowerRank(size_t n) {
    if (n == ranks.size()) {
      --closureRank;
    } else {
      --ranks[n];
      --dims[n + 1];
      for (size_t m = n + 1; m < ranks.size(); ++m) dims[m + 1] = ranks[m] = std::min(ranks[m], structuralRank(m));
      if (closureRank) closureRank = std::min(closureRank, structuralRank(ranks.size()));
    }
    allRanks = ranks;
    if (closureRank) allRanks.push_back(closureRank);
  }

  /// Whether the schedule (and with --steps auto the number of steps) is decided per β
  /// by a value sweep: no --ranks given (--steps auto needs that).
  bool planned() const { return autoRanks; }

  /// The value sweep, which also decides the schedule where it is not given: step n + 1
  /// runs class (D, D') with the structural D'; when a kept singular value is ≤ rankTol
  /// the probe of that class counts those > rankTol among its D' leading ones, and the
  /// step runs again with that many (docs/trg.md §2.4). So the run's own SVDs decide,
  /// and a β whose structural schedule holds pays nothing for it. With --steps auto
  /// it coarse-grains until the infinite-lattice estimate stops changing (§3.1).
  TrgResult valueStaged(double beta) {
    TrgResult r = newResult(beta);
    // Planned once per β: a repeated run at the same β keeps the schedule.
    const bool plan = planned() && !(plannedBeta && *plannedBeta == beta);
    if (plan) {
      planExtraMs = 0;
      plannedBeta.reset();
      ranks.clear();
      closureRank = 0;
      setDims();
    }
    // The run at (β, h), and with --steps auto and derivatives a companion per parameter
    // whose derivative is reported (β; h where h ≠ 0), at p + δ: the change of its
    // finite difference says when the derivative's tail has converged too (§3.1).
    std::vector<PlanChain> ch(1);
    ch[0].beta = beta;
    ch[0].h = o.field;
    const TrgLogScale scale = logScale(beta);
    ch[0].offset = scale.value;
    if (plan && o.stepsAuto && o.grad) {
      PlanChain c = ch[0];
      c.delta = 0x1p-20 * beta;
      c.beta += c.delta;
      c.offset = scale.dbeta;
      ch.push_back(c);
      if (o.model.hasField() && o.field != 0) {
        c = ch[0];
        c.delta = 0x1p-20 * std::fabs(o.field);
        c.h += c.delta;
        c.offset = scale.dh;
        ch.push_back(c);
      }
    }
    for (PlanChain &c : ch) {
      c.T = std::move(progs->call(init.value, "init", c.beta,
                           trgParameterInputs(o.model, c.beta, c.h))[0]);
      c.nu = lnNorm(c.T);
    }
    int still = 0;
    if (plan) converged = !o.stepsAuto;
    for (size_t n = 0;; ++n) {
      if (plan) {
        if (n == static_cast<size_t>(o.steps)) break;
        ranks.push_back(structuralRank(n));
        dims.push_back(ranks.back());
      } else if (n == ranks.size()) {
        break;
      }
      progs->stepDone("value", n + 1, plan ? static_cast<size_t>(o.steps) : ranks.size(), plan && o.stepsAuto);
      std::vector<ir::Tensor> out =
          progs->call(stepClass(dims[n], dims[n + 1]).value, stepName(n), beta, ch[0].T);
      // Keep only what the step's own SVDs put above tol; near tol, values at the
      // noise level can differ between the probe's svd_topk{D'} and the step's own
      // svd_topk{keep}, so this repeats until the kept values hold.
      auto t0 = Clock::now();
      while (plan && !(out[2].data[0] > o.rankTol && out[2].data[1] > o.rankTol)) {
        const int64_t keep = std::min(countKept(n, beta, ch[0].T), dims[n + 1] - 1);
        if (keep < 1) break; // checkKept names the value
        ranks[n] = dims[n + 1] = keep;
        out = progs->call(stepClass(dims[n], keep).value, stepName(n), beta, ch[0].T);
        planExtraMs += msSince(t0);
      }
      checkKept(n, out[2].data.data(), r);
      for (size_t j = 0; j < ch.size(); ++j) {
        PlanChain &c = ch[j];
        auto t1 = Clock::now();
        if (j > 0) out = progs->call(stepClass(dims[n], dims[n + 1]).value, stepName(n), c.beta, c.T);
        c.advance(n, out[0].data[0], std::move(out[1]));
        if (j > 0) planExtraMs += msSince(t1);
      }
      r.logm.push_back(ch[0].logm);
      if (plan && o.stepsAuto) {
        still = n > 0 && stepConverged(n, ch) ? still + 1 : 0;
        if (still >= kTrgStepsAutoStill || n + 1 == static_cast<size_t>(o.steps)) {
          // Step n becomes the limit closure's step, on its input T_n.
          converged = still >= kTrgStepsAutoStill;
          closureRank = ranks.back();
          ranks.pop_back();
          dims.pop_back();
          r.logm.pop_back();
          r.keptSingularValues.pop_back(); // checked again as the closure's below
          break;
        }
      }
    }
    if (plan) {
      auto t0 = Clock::now();
      const size_t before = progs->size();
      ensureStaged();
      if (progs->size() > before) planExtraMs += msSince(t0);
      plannedBeta = beta;
    }
    PlanChain &c = ch[0];
    ir::Tensor &TN = plan && o.stepsAuto ? c.prevT : c.T;
    double lnz = plan && o.stepsAuto ? c.prevLnz : c.lnz;
    std::vector<ir::Tensor> cl = progs->call(closure().value, "closure", beta, std::move(TN));
    if (closureRank) checkKept(ranks.size(), cl[1].data.data(), r);
    lnz += cl[0].data[0] * std::ldexp(1.0, -static_cast<int>(ranks.size()));
    lnz += logScale(beta).value;
    checkFinite("lnZ/N", lnz, beta);
    r.lnZ = lnz;
    return r;
  }

  /// ln ‖T‖ (Frobenius), invariant under the bond gauge.
  static double lnNorm(const ir::Tensor &T) {
    double s = 0;
    for (double v : T.data) s += v * v;
    return 0.5 * std::log(s);
  }

  /// A chain of the planning sweep: the run itself, or a companion at a parameter
  /// shifted by `delta` (β or h). γ_n = ln‖T_{n+1}‖ − 2·ln‖T_n‖ + 2·ln m_n is the
  /// gauge-invariant growth ln‖step(T_n/‖T_n‖)‖; the infinite lattice's estimate after
  /// step n is E_n = ln‖T_0‖ + Σ_{k<n} γ_k/2^{k+1} + γ_n/2^n (docs/trg.md §3.1), so
  /// E_n − E_{n−1} = (γ_n − γ_{n−1})/2^n.
  struct PlanChain {
    double beta = 0, h = 0, delta = 0;
    /// What the initial tensor's scale adds: to lnZ/N (the run), to the derivative in
    /// the shifted parameter (a companion).
    double offset = 0;
    ir::Tensor T, prevT;         ///< T_{n+1}, T_n
    double nu = 0, prevNu = 0;   ///< ln‖T_{n+1}‖, ln‖T_n‖
    double lnz = 0, prevLnz = 0; ///< Σ_{k≤n} ln m_k/2^k, and Σ_{k<n}
    double logm = 0;             ///< ln m_n
    double gamma = 0, prevGamma = 0;           ///< γ_n, γ_{n−1}
    double gammaSize = 0, prevGammaSize = 0;   ///< Σ of |terms| of γ (for its rounding)
    void advance(size_t n, double lm, ir::Tensor next) {
      prevNu = nu;
      nu = lnNorm(next);
      prevGamma = gamma;
      prevGammaSize = gammaSize;
      gamma = nu - 2 * prevNu + 2 * lm;
      gammaSize = std::fabs(nu) + 2 * std::fabs(prevNu) + 2 * std::fabs(lm);
      prevLnz = lnz;
      lnz += lm * std::ldexp(1.0, -static_cast<int>(n));
      logm = lm;
      prevT = std::move(T);
      T = std::move(next);
    }
    /// E_n: Σ_{k<n} ln m_k/2^k + (2·ln m_n + ln‖T_{n+1}‖ − ln‖T_n‖)/2^n, what the limit
    /// closure on T_n gives.
    double estimate(size_t n) const {
      return prevLnz + (2 * logm + nu - prevNu) * std::ldexp(1.0, -static_cast<int>(n));
    }
  };

  /// --steps auto: whether step n (≥ 1) left the estimate E of the run, and the finite
  /// difference (E_c − E)/δ of each companion, unchanged to kTrgStepsAutoTol. The change
  /// (γ_n − γ_{n−1})/2^n is formed from the γ's, not from the sums, so that its rounding
  /// falls with 2^-n; a companion's change must also be resolvable above that rounding.
  bool stepConverged(size_t n, const std::vector<PlanChain> &ch) const {
    const double w = std::ldexp(1.0, -static_cast<int>(n));
    const double eps = std::numeric_limits<double>::epsilon();
    const PlanChain &r = ch[0];
    const double e = r.estimate(n), de = w * (r.gamma - r.prevGamma);
    const double lnz = e + r.offset; // lnZ/N, for its scale
    if (!(std::fabs(de) <= kTrgStepsAutoTol * std::fabs(lnz))) return false;
    for (size_t j = 1; j < ch.size(); ++j) {
      const PlanChain &c = ch[j];
      const double g = (c.estimate(n) - e) / c.delta + c.offset; // the derivative, for its scale
      const double change = (w * (c.gamma - c.prevGamma) - de) / c.delta;
      const double noise =
          w * 2 * eps * (c.gammaSize + c.prevGammaSize + r.gammaSize + r.prevGammaSize) / c.delta;
      const double bar = kTrgStepsAutoTol * std::fabs(g);
      if (!(noise <= bar && std::fabs(change) <= bar)) return false;
    }
    return true;
  }


  /// How many of the D' leading singular values of step n + 1's two SVDs (on its input
  /// T) exceed rankTol; throws when none does.
  int64_t countKept(size_t n, double beta, ir::Tensor &T) {
    std::vector<ir::Tensor> sv = progs->call(probeOf(dims[n], dims[n + 1]), stepName(n), beta, T);
    int64_t keep = dims[n + 1];
    for (size_t k : {size_t(3), size_t(4)}) {
      int64_t c = 0;
      for (double v : sv[k].data) c += v > o.rankTol;
      keep = std::min(keep, c);
    }
    if (keep < 1)
      throw Error("error: trg: step " + std::to_string(n + 1) + " (" + std::to_string(dims[n]) +
                  "->?, beta = " + formatDouble(beta) + "): no singular value of Ma and Mb is > tol = " +
                  formatDouble(o.rankTol) + " (the largest are " + formatDouble(sv[3].data[0]) +
                  " and " + formatDouble(sv[4].data[0]) + ")");
    return keep;
  }

  /// Before a derivative sweep at β: the value sweep decides the schedule there (once
  /// per β), and the classes it needs are compiled.
  void planFor(double beta) {
    if (!planned() || (plannedBeta && *plannedBeta == beta)) return;
    if (o.mode == TrgMode::Staged) {
      valueStaged(beta);
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
    if (planner->ranks() != ranks) {
      ranks = planner->ranks();
      setDims();
      compileWhole();
      if (o.second) compileSecond();
    }
    planExtraMs = msSince(t0);
    plannedBeta = beta;
  }

  TrgResult valueWhole(double beta) {
    planFor(beta);
    TrgResult r = newResult(beta);
    auto out = progs->run(wholeValue, paramInputs(beta), "whole program", beta);
    for (size_t n = 0; n < ranks.size(); ++n) checkKept(n, out[1].data.data() + 2 * n, r);
    checkFinite("lnZ/N", out[0].data[0], beta);
    r.lnZ = out[0].data[0];
    return r;
  }

  /// D' of step n + 1 of the current schedule (n = ranks.size(): the limit closure's).
  int64_t keptOf(size_t n) const { return n < ranks.size() ? dims[n + 1] : closureRank; }

  /// value+grad: the staged module's first derivative (stagedModule(false)) at β. Its
  /// forward (svd_topk with the complement's guards) can put a kept singular value that
  /// the value sweep found > tol at the noise level on the other side; with a derived
  /// schedule that step then keeps one value fewer, as the value sweep would have.
  TrgResult gradStaged(double beta) {
    planFor(beta);
    for (;;) {
      TrgResult r = newResult(beta);
      const int idx = stagedModule(false);
      progs->moduleProgress("value+grad", progs->at(idx).program);
      std::vector<ir::Tensor> out = progs->run(idx, paramInputs(beta), "value+grad (staged module)", beta);
      const size_t rows = ranks.size() + (closureRank ? 1 : 0);
      const double *kept = out[1].data.data();
      size_t low = rows;
      for (size_t n = 0; n < rows && low == rows; ++n)
        if (!(kept[2 * n] > o.rankTol && kept[2 * n + 1] > o.rankTol)) low = n;
      if (low < rows && autoRanks && keptOf(low) > 1) {
        lowerRank(low);
        continue;
      }
      for (size_t n = 0; n < rows; ++n) checkKept(n, kept + 2 * n, r);
      // The initial tensor's scale on the host, as in the value sweep.
      r.lnZ = out[0].data[0] + logScale(beta).value;
      checkFinite("lnZ/N", r.lnZ, beta);
      std::vector<double> gs;
      for (size_t j = 0; j < gradParams.size(); ++j) gs.push_back(out[2 + j].data[0]);
      setDerivatives(r, gs.data(), nullptr, 0, true, gradParams.size() > 1);
      return r;
    }
  }

  /// second(): the value sweep (the schedule at β, lnZ/N, the rank check), then per
  /// Hessian row the staged module's VJP of its gradient with that row's seed
  /// (stagedModule(true)): grad of grad through the calls and scans.
  TrgResult secondStaged(double beta) {
    TrgResult r = valueStaged(beta);
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
      std::vector<ir::Tensor> in = paramInputs(r.beta);
      for (size_t j = 0; j < np; ++j) in.push_back(scalar(j == row ? 1.0 : 0.0));
      auto out = progs->run(idx, in, where, r.beta);
      std::vector<double> g(np), h(np);
      for (size_t j = 0; j < np; ++j) {
        g[j] = out[j].data[0];
        h[j] = out[np + j].data[0];
      }
      setDerivatives(r, g.data(), h.data(), row, hostScale, true);
    }
  }

  TrgResult gradWhole(double beta) {
    planFor(beta);
    TrgResult r = newResult(beta);
    const size_t N = ranks.size();
    auto out = progs->run(wholeGrad, paramInputs(beta), "whole program", beta);
    for (size_t n = 0; n < N; ++n) checkKept(n, out[1].data.data() + 2 * n, r);
    checkFinite("lnZ/N", out[0].data[0], beta);
    r.lnZ = out[0].data[0];
    // The whole program includes the initial tensor's scale: no host terms.
    std::vector<double> gs;
    for (size_t j = 0; j < gradParams.size(); ++j) gs.push_back(out[2 + j].data[0]);
    setDerivatives(r, gs.data(), nullptr, 0, false, gradParams.size() > 1);
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
const std::vector<int64_t> &TrgDriver::ranks() const { return impl_->allRanks; }
bool TrgDriver::stepsConverged() const { return impl_->converged; }
void TrgDriver::setProgress(TrgProgressCallback cb) { impl_->progs->setProgress(std::move(cb)); }
double TrgDriver::planExtraMs() const { return impl_->planExtraMs; }
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
    return impl_->o.mode == TrgMode::Staged ? impl_->valueStaged(beta) : impl_->valueWhole(beta);
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
  return impl_->progs->groups([this](const std::string &g) { return impl_->usesOf(g); });
}
double TrgDriver::compileMs() const { return impl_->progs->compileMs(); }
double TrgDriver::prepareMs() const { return impl_->progs->prepareMs(); }
size_t TrgDriver::totalOps() const { return impl_->progs->totalOps(); }
void TrgDriver::setProfiling(bool on) { impl_->progs->setProfiling(on); }
std::string TrgDriver::profileReport(size_t top) const { return impl_->progs->profileReport(top); }
std::string TrgDriver::blas() { return rt::blasInfo(); }

} // namespace tessel::frontend
