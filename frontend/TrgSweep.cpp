//===- frontend/TrgSweep.cpp - The staged TRG value sweep and its schedule ------===//
#include "frontend/TrgSweep.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"

namespace tessel::frontend {
namespace {

using Clock = std::chrono::steady_clock;
using rt::msSince;
using ir::text::formatDouble;

std::string classGroup(int64_t din, int64_t dout, int64_t cutValuesTo = 0) {
  return "step " + std::to_string(din) + "->" + std::to_string(dout) +
         (cutValuesTo > dout ? " (cut values to " + std::to_string(cutValuesTo) + ")" : "");
}

/// ln ‖T‖ (Frobenius), invariant under the bond gauge; with BTRG's weights `w` (wh, wv)
/// that of T with √w absorbed into its legs (the same network without weights).
double lnNorm(const ir::Tensor &T, const std::vector<ir::Tensor> &w) {
  return w.empty() ? trgLnNorm(T) : trgLnNorm(T, &w[0], &w[1]);
}

/// A chain of the planning sweep: the run itself, or a companion at a parameter
/// shifted by `delta` (β or h). With b = 2^sitesLog2 tensors per step (2; HOTRG 4),
/// γ_n = ln‖T_{n+1}‖ − b·ln‖T_n‖ + b·ln m_n is the gauge-invariant growth
/// ln‖step(T_n/‖T_n‖)‖ (a step is homogeneous of degree b); the infinite lattice's
/// estimate after step n is E_n = ln‖T_0‖ + Σ_{k<n} γ_k/b^{k+1} + γ_n/((b − 1)·b^n)
/// (docs/trg.md §3.1), so E_n − E_{n−1} = (γ_n − γ_{n−1})/((b − 1)·b^n).
struct PlanChain {
  int sitesLog2 = 1;
  double beta = 0, h = 0, delta = 0;
  /// What the initial tensor's scale adds: to lnZ/N (the run), to the derivative in
  /// the shifted parameter (a companion).
  double offset = 0;
  ir::Tensor T, prevT;         ///< T_{n+1}, T_n
  std::vector<ir::Tensor> w, prevW; ///< BTRG: their bond weights (wh, wv); TRG: none
  double nu = 0, prevNu = 0;   ///< ln‖T_{n+1}‖, ln‖T_n‖
  double lnz = 0, prevLnz = 0; ///< Σ_{k≤n} ln m_k/b^k, and Σ_{k<n}
  double logm = 0;             ///< ln m_n
  double gamma = 0, prevGamma = 0;           ///< γ_n, γ_{n−1}
  double gammaSize = 0, prevGammaSize = 0;   ///< Σ of |terms| of γ (for its rounding)
  void advance(size_t n, double lm, ir::Tensor next, std::vector<ir::Tensor> nextW) {
    prevNu = nu;
    nu = lnNorm(next, nextW);
    prevGamma = gamma;
    prevGammaSize = gammaSize;
    const double b = std::ldexp(1.0, sitesLog2);
    gamma = nu - b * prevNu + b * lm;
    gammaSize = std::fabs(nu) + b * std::fabs(prevNu) + b * std::fabs(lm);
    prevLnz = lnz;
    lnz += lm * weight(n);
    logm = lm;
    prevT = std::move(T);
    T = std::move(next);
    prevW = std::move(w);
    w = std::move(nextW);
  }
  /// b^-n: the weight of step n's ln m_n in lnZ/N.
  double weight(size_t n) const { return std::ldexp(1.0, -static_cast<int>(n) * sitesLog2); }
  /// 1/((b − 1)·b^n): the weight of γ_n in E_n.
  double gammaWeight(size_t n) const {
    return sitesLog2 == 1 ? weight(n) : weight(n) / (std::ldexp(1.0, sitesLog2) - 1);
  }
  /// E_n: Σ_{k<n} ln m_k/b^k + (b·ln m_n + ln‖T_{n+1}‖ − ln‖T_n‖)/((b − 1)·b^n), what
  /// the limit closure on T_n gives.
  double estimate(size_t n) const {
    return prevLnz + (std::ldexp(1.0, sitesLog2) * logm + nu - prevNu) * gammaWeight(n);
  }
};

/// --steps auto: whether step n (≥ 1) left the estimate E of the run, and the finite
/// difference (E_c − E)/δ of each companion, unchanged to kTrgStepsAutoTol. The change
/// (γ_n − γ_{n−1})/((b − 1)·b^n) is formed from the γ's, not from the sums, so that its
/// rounding falls with b^-n; a companion's change must also be resolvable above that
/// rounding.
bool stepConverged(size_t n, const std::vector<PlanChain> &ch) {
  const double w = ch[0].gammaWeight(n);
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

} // namespace

TrgSweep::TrgSweep(const TrgOptions &opts, TrgPrograms &programs) : o(opts), progs(programs) {
  autoRanks = o.ranks.empty();
  ranks = !autoRanks ? o.ranks
                     : trgDefaultRanks(o.chi, o.stepsAuto ? std::min(o.steps, 12) : o.steps,
                                       o.model.states(), o.algorithm);
  setDims();
  if (autoRanks && o.stepsAuto) closureRank = structuralRank(ranks.size()); // the limit closure's
  allRanks = ranks;
  if (closureRank) allRanks.push_back(closureRank);
}

void TrgSweep::compile() {
  progs.noteGroup("init");
  init.value = progs.compileValue("init", [&] { return buildTrgInit(o.model); });
  ensureStaged();
}

void TrgSweep::setDims() {
  dims.assign(1, o.model.states());
  for (int64_t r : ranks) dims.push_back(r);
}

/// The structural D' of step n + 1 (docs/trg.md §2.4) given dims[0..n].
int64_t TrgSweep::structuralRank(size_t n) const {
  const int64_t bound = o.algorithm == TrgAlgorithm::Hotrg ? INT64_MAX
                        : n == 0                           ? dims[0]
                                                           : squareSaturated(dims[n - 1]);
  return std::min({squareSaturated(dims[n]), o.chi, bound});
}

/// Per group, how many steps of the current schedule use it.
int TrgSweep::usesOf(const std::string &g) const {
  if (planned() && !plannedBeta) return 0; // the schedule is derived at each β
  if (g == "init" || g == "whole" || g == "second" || g == "staged module") return 1;
  if (g.rfind("closure", 0) == 0) return 1;
  int k = 0;
  for (size_t n = 0; n < ranks.size(); ++n) k += classGroup(dims[n], dims[n + 1], cutOf(n)) == g;
  return k;
}

std::string TrgSweep::closureGroup(int64_t D, int64_t Dp) const {
  return Dp ? "limit closure " + std::to_string(D) + "->" + std::to_string(Dp)
            : "closure " + std::to_string(D);
}

/// The closure of the current schedule (compiled when first needed).
TrgSweep::StagedClass &TrgSweep::closure() { return closureClass(dims.back(), closureRank); }

TrgStepOptions TrgSweep::stepOptions() const {
  TrgStepOptions so;
  so.algorithm = o.algorithm;
  so.btrgK = o.btrgK;
  so.svdEps = o.svdEps;
  so.outputKeptSingularValues = true;
  // The steps say whether their cut splits a multiplet (a derived schedule then keeps
  // the values above it; a given one is flagged).
  so.outputCutSingularValues = o.multipletTol > 0;
  return so;
}

/// The value program of step class (D, D'), compiled when first needed.
TrgSweep::StagedClass &TrgSweep::stepClass(int64_t D, int64_t Dp, int64_t cutValuesTo) {
  if (cutValuesTo <= Dp) cutValuesTo = 0;
  StagedClass &sc = stepClasses[{D, Dp, cutValuesTo}];
  if (sc.value >= 0) return sc;
  const std::string g = classGroup(D, Dp, cutValuesTo);
  progs.noteGroup(g);
  TrgStepOptions so = stepOptions();
  so.cutValuesTo = cutValuesTo;
  so.outputLeadingPair = pairOutputs();
  sc.value = progs.compileValue(g, [&] { return buildTrgStep(D, Dp, so); });
  return sc;
}

TrgSweep::StagedClass &TrgSweep::closureClass(int64_t D, int64_t Dp) {
  StagedClass &c = closures[{D, Dp}];
  if (c.value >= 0) return c;
  const std::string g = closureGroup(D, Dp);
  progs.noteGroup(g);
  TrgStepOptions so = stepOptions();
  so.outputCutSingularValues = false; // its step was checked as a step of the sweep
  so.outputLeadingPair = pairOutputs() && Dp > 0;
  c.value = progs.compileValue(g, [&] { return Dp ? buildTrgLimitClosure(D, Dp, so) : buildTrgClosure(D, so); });
  return c;
}

/// Compiles the value programs the current schedule needs and has not compiled (the
/// derivatives' module is TrgDriver's).
void TrgSweep::ensureStaged() {
  for (size_t n = 0; n < ranks.size(); ++n) stepClass(dims[n], dims[n + 1], cutOf(n));
  closureClass(dims.back(), closureRank);
  allRanks = ranks;
  if (closureRank) allRanks.push_back(closureRank);
}

/// The probe of class (D, D'): its D' leading singular values, as the run computes them.
int TrgSweep::probeOf(int64_t D, int64_t Dp) {
  auto [it, fresh] = probes.try_emplace({D, Dp}, -1);
  if (!fresh) return it->second;
  TrgStepOptions so = stepOptions();
  so.outputCutSingularValues = false;
  so.outputLeadingSingularValues = true;
  auto t0 = Clock::now();
  ir::Program p = buildTrgStep(D, Dp, so);
  const double traceMs = msSince(t0);
  const size_t traced = p.ops.size();
  const double passMs = progs.runPasses(p);
  progs.noteGroup("spectrum probe");
  it->second = progs.add("spectrum probe", "value", std::move(p), traced, traceMs, passMs);
  return it->second;
}

/// Refuses a kept singular value ≤ rankTol of step n + 1 (n = ranks.size(): the limit
/// closure's step).
void TrgSweep::checkKept(size_t n, const double *s, TrgResult &r) const {
  const int64_t D = dims[std::min(n, ranks.size())],
                Dp = n < ranks.size() ? dims[n + 1] : closureRank;
  r.keptSingularValues.push_back({s[0], s[1]});
  for (int k = 0; k < 2; ++k)
    if (!(s[k] > o.rankTol)) {
      const char *m = k == 0 ? "a" : "b";
      throw Error("error: trg: step " + std::to_string(n + 1) + " (" + std::to_string(D) +
                  "->" + std::to_string(Dp) + ", beta = " + formatDouble(r.beta) +
                  "): the smallest kept singular value s" + m + "[" + std::to_string(Dp - 1) +
                  "] = " + formatDouble(s[k]) +
                  (o.algorithm == TrgAlgorithm::Hotrg ? " of the environment E" + std::string(m) +
                                                            " (half-step " + (k == 0 ? "1" : "2") + ")"
                                                      : " of M" + std::string(m)) +
                  " is <= tol = " +
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

void TrgSweep::checkFinite(const char *what, double v, double beta) const {
  if (!std::isfinite(v))
    throw Error(std::string("error: trg: ") + what + " is not finite (" + formatDouble(v) +
                ") at beta = " + formatDouble(beta));
}

/// The inputs of init and the whole program: β (and h).
std::vector<ir::Tensor> TrgSweep::paramInputs(double beta) const {
  return trgParameterInputs(o.model, beta, o.field);
}

TrgLogScale TrgSweep::logScale(double beta) const { return trgInitLogScale(o.model, beta, o.field); }

std::vector<ir::Tensor> TrgSweep::initialWeights() const {
  if (o.algorithm != TrgAlgorithm::Btrg) return {};
  const int64_t d = o.model.states();
  ir::Tensor ones(ir::Type({d}), std::vector<double>(static_cast<size_t>(d), 1.0));
  return {ones, ones};
}

std::vector<ir::Tensor> TrgSweep::weightsOut(std::vector<ir::Tensor> &out) const {
  if (o.algorithm != TrgAlgorithm::Btrg) return {};
  const size_t n = out.size();
  return {std::move(out[n - 2]), std::move(out[n - 1])};
}

TrgResult TrgSweep::newResult(double beta) const {
  TrgResult r;
  r.beta = beta;
  r.field = o.field;
  return r;
}

void TrgSweep::notePair(size_t n, const std::vector<double> &v, std::pair<double, size_t> &gap) {
  for (size_t k = 0; k + 1 < v.size(); k += 2) {
    const double g = (v[k] - v[k + 1]) / v[k];
    if (g < gap.first) gap = {g, n + 1};
  }
}

/// The smallest gap s_0 − s_1 of the two leading singular values of any step's Ma or Mb
/// at β (both kept), relative to s_0, and the step (1-based): a sweep of the probe
/// programs (each also advances the chain), the limit closure's step included. Below
/// T_c that pair is the two ordered states (even and odd under the spin flip, which the
/// field couples); above T_c the leading value is single. Multiplets further down
/// (the lattice's own symmetries) have one charge and are not coupled by h.
std::pair<double, size_t> TrgSweep::smallestKeptGap(double beta) {
  // Once per β and schedule: a timed second() at one β repeats the same sweep.
  if (gapCache && gapCache->beta == beta && gapCache->ranks == allRanks) return gapCache->gap;
  if (init.value < 0) init.value = progs.compileValue("init", [&] { return buildTrgInit(o.model); });
  std::vector<ir::Tensor> sweep = progs.call(init.value, "init", beta, paramInputs(beta));
  ir::Tensor T = std::move(sweep[0]);
  std::vector<ir::Tensor> w = initialWeights();
  std::pair<double, size_t> best{INFINITY, 0};
  const size_t last = ranks.size() + (closureRank ? 1 : 0);
  for (size_t n = 0; n < last; ++n) {
    const int64_t D = dims[std::min(n, ranks.size())], Dp = n < ranks.size() ? dims[n + 1] : closureRank;
    std::vector<ir::Tensor> out = progs.call(probeOf(D, Dp), stepName(n), beta, T, std::vector<ir::Tensor>(w));
    for (size_t k : {size_t(3), size_t(4)}) {
      const std::vector<double> &sv = out[k].data;
      if (sv.size() < 2) continue;
      const double gap = (sv[0] - sv[1]) / sv[0];
      if (gap < best.first) best = {gap, n + 1};
    }
    T = std::move(out[1]);
    w = weightsOut(out);
  }
  gapCache = GapCache{beta, allRanks, best};
  return best;
}

/// Keeps one singular value fewer in step n + 1 (n = ranks.size(): the limit closure's
/// step) and lowers the later steps to what that allows (min(D², χ, rank bound)).
void TrgSweep::lowerRank(size_t n) {
  splitsBeta.reset(); // the value sweep's cuts were those of the schedule before
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

/// The value sweep, which also decides the schedule where it is not given: step n + 1
/// runs class (D, D') with the structural D'; when a kept singular value is ≤ rankTol
/// the probe of that class counts those > rankTol among its D' leading ones, and the
/// step runs again with that many; when its cut splits a degenerate multiplet
/// (%scut), with the values above the multiplet, and the next steps of that structural
/// D' start there (docs/trg.md §2.4). So the run's own SVDs decide, and a β whose
/// structural schedule holds pays nothing for it. With --steps auto
/// it coarse-grains until the infinite-lattice estimate stops changing (§3.1).
TrgResult TrgSweep::value(double beta, std::vector<TrgCftRow> *cft) {
  TrgResult r = newResult(beta);
  // Planned once per β: a repeated run at the same β keeps the schedule.
  const bool plan = planned() && !(plannedBeta && *plannedBeta == beta);
  if (plan) {
    planExtraMs = 0;
    plannedBeta.reset();
    ranks.clear();
    cutTo.clear();
    closureRank = 0;
    setDims();
  }
  // The run at (β, h), and with --steps auto and derivatives a companion per parameter
  // whose derivative is reported (β; h where h ≠ 0), at p + δ: the change of its
  // finite difference says when the derivative's tail has converged too (§3.1).
  std::vector<PlanChain> ch(1);
  ch[0].sitesLog2 = trgStepSitesLog2(o.algorithm);
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
    c.T = std::move(progs.call(init.value, "init", c.beta,
                         trgParameterInputs(o.model, c.beta, c.h))[0]);
    c.w = initialWeights();
    c.nu = lnNorm(c.T, c.w);
  }
  int still = 0;
  if (plan) converged = !o.stepsAuto;
  std::pair<double, size_t> gap{INFINITY, 0}; // pairOutputs(): smallestKeptGap's
  // The cuts of the schedule planned at this β were checked by its planning run (the
  // limit closure's step too, whose program does not compute %scut): kept on a repeat.
  const bool checkCuts = plan || !planned();
  if (checkCuts) {
    splits.clear();
    splitsBeta.reset(); // set when the sweep completes
  }
  // A D' lowered for a multiplet (from S, to m): the next steps whose structural D' is
  // S run with m and compute the values down to s[S] too (near the fixed point the
  // spectrum repeats from step to step, so a run of such steps pays one probe, not one
  // per step); where their cut at S would split nothing, they run again with S.
  int64_t multipletFrom = 0, multipletTo = 0;
  const bool cuts = stepOptions().outputCutSingularValues;
  for (size_t n = 0;; ++n) {
    if (plan) {
      if (n == static_cast<size_t>(o.steps)) break;
      const int64_t structural = structuralRank(n);
      const bool start = cuts && multipletTo && structural == multipletFrom;
      ranks.push_back(start ? multipletTo : structural);
      dims.push_back(ranks.back());
      cutTo.push_back(start ? structural : 0);
    } else if (n == ranks.size()) {
      break;
    }
    progs.stepDone("value", n + 1, plan ? static_cast<size_t>(o.steps) : ranks.size(), plan && o.stepsAuto);
    std::vector<ir::Tensor> out =
        progs.call(stepClass(dims[n], dims[n + 1], cutOf(n)).value, stepName(n), beta, ch[0].T,
                   std::vector<ir::Tensor>(ch[0].w));
    // Keep only what the step's own SVDs put above tol; near tol, values at the
    // noise level can differ between the probe's svd_topk{D'} and the step's own
    // svd_topk{keep}, so this repeats until the kept values hold. Then keep no part
    // of a degenerate multiplet that the cut splits (its values above the cut).
    auto t0 = Clock::now();
    bool replanned = false, raised = false;
    while (plan) {
      int64_t keep;
      bool multiplet = false;
      const size_t width = cuts ? out[3].data.size() / 2 : 0; // s[0], s[D'..E] per matrix
      const bool aboveTol = out[2].data[0] > o.rankTol && out[2].data[1] > o.rankTol;
      int64_t carried = 0; // a carried-over D' runs with what the structural one would keep
      if (aboveTol && cutOf(n) && !raised)
        carried = keptBelow(cutOf(n), out[2].data.data(), out[3].data.data(), width, n);
      if (!aboveTol)
        keep = std::min(countKept(n, beta, ch[0].T, ch[0].w), dims[n + 1] - 1);
      else if (carried > 0 && carried != dims[n + 1])
        keep = carried, raised = true;
      else if (const unsigned split = carried == 0 && cuts ? cutSplitsMultiplet(out[2].data.data(), out[3].data.data(), width) : 0u)
        keep = multipletStart(n, split, beta, ch[0].T, ch[0].w), multiplet = true;
      else
        break;
      if (keep < 1) break; // checkKept names the value; a multiplet too deep stays split
      if (multiplet) multipletFrom = structuralRank(n), multipletTo = keep;
      ranks[n] = dims[n + 1] = keep;
      cutTo[n] = 0;
      out = progs.call(stepClass(dims[n], keep).value, stepName(n), beta, ch[0].T,
                       std::vector<ir::Tensor>(ch[0].w));
      replanned = true;
    }
    if (replanned) planExtraMs += msSince(t0);
    checkKept(n, out[2].data.data(), r);
    if (cuts && checkCuts) noteSplit(n, out[2].data.data(), out[3].data.data(), out[3].data.size() / 2);
    if (pairOutputs()) notePair(n, out[cuts ? 4 : 3].data, gap);
    for (size_t j = 0; j < ch.size(); ++j) {
      PlanChain &c = ch[j];
      auto t1 = Clock::now();
      if (j > 0)
        out = progs.call(stepClass(dims[n], dims[n + 1], cutOf(n)).value, stepName(n), c.beta, c.T,
                         std::vector<ir::Tensor>(c.w));
      std::vector<ir::Tensor> w = weightsOut(out);
      c.advance(n, out[0].data[0], std::move(out[1]), std::move(w));
      if (j > 0) planExtraMs += msSince(t1);
    }
    if (cft) {
      const PlanChain &c = ch[0]; // c.prevT: the input of this step, T_n
      cft->push_back(c.prevW.empty() ? trgCftData(n, c.prevT)
                                     : trgCftData(n, c.prevT, &c.prevW[0], &c.prevW[1]));
    }
    r.logm.push_back(ch[0].logm);
    if (plan && o.stepsAuto) {
      still = n > 0 && stepConverged(n, ch) ? still + 1 : 0;
      if (still >= kTrgStepsAutoStill || n + 1 == static_cast<size_t>(o.steps)) {
        // Step n becomes the limit closure's step, on its input T_n.
        converged = still >= kTrgStepsAutoStill;
        closureRank = ranks.back();
        ranks.pop_back();
        cutTo.pop_back();
        dims.pop_back();
        r.logm.pop_back();
        r.keptSingularValues.pop_back(); // checked again as the closure's below
        break;
      }
    }
  }
  if (plan) {
    auto t0 = Clock::now();
    const size_t before = progs.size();
    ensureStaged();
    if (progs.size() > before) planExtraMs += msSince(t0);
    plannedBeta = beta;
  }
  PlanChain &c = ch[0];
  ir::Tensor &TN = plan && o.stepsAuto ? c.prevT : c.T;
  std::vector<ir::Tensor> &WN = plan && o.stepsAuto ? c.prevW : c.w;
  double lnz = plan && o.stepsAuto ? c.prevLnz : c.lnz;
  std::vector<ir::Tensor> cl =
      progs.call(closure().value, "closure", beta, std::move(TN), std::move(WN));
  if (closureRank) checkKept(ranks.size(), cl[1].data.data(), r);
  if (pairOutputs()) {
    if (closureRank) notePair(ranks.size(), cl[2].data, gap);
    gapCache = GapCache{beta, allRanks, gap};
  }
  lnz += cl[0].data[0] * c.weight(ranks.size());
  lnz += logScale(beta).value;
  checkFinite("lnZ/N", lnz, beta);
  r.lnZ = lnz;
  if (checkCuts) splitsBeta = beta;
  if (splitsBeta == beta) r.multipletSplits = splits;
  return r;
}

/// Records step n + 1 in `splits` where its cut splits a multiplet (kept = %skept, cut =
/// %scut with `width` values per matrix).
void TrgSweep::noteSplit(size_t n, const double *kept, const double *cut, size_t width) {
  const unsigned split = cutSplitsMultiplet(kept, cut, width);
  if (!split) return;
  const size_t k = split & 1u ? 0 : 1;
  splits.push_back({n + 1, dims[n], dims[n + 1], split, kept[k], cut[k * width + 1], cut[k * width]});
}

/// How many of the D' leading singular values of step n + 1's two SVDs (on its input
/// T) exceed rankTol; throws when none does.
int64_t TrgSweep::countKept(size_t n, double beta, ir::Tensor &T, const std::vector<ir::Tensor> &w) {
  std::vector<ir::Tensor> sv =
      progs.call(probeOf(dims[n], dims[n + 1]), stepName(n), beta, T, std::vector<ir::Tensor>(w));
  int64_t keep = dims[n + 1];
  for (size_t k : {size_t(3), size_t(4)}) {
    int64_t c = 0;
    for (double v : sv[k].data) c += v > o.rankTol;
    keep = std::min(keep, c);
  }
  if (keep < 1)
    throw Error("error: trg: step " + std::to_string(n + 1) + " (" + std::to_string(dims[n]) +
                "->?, beta = " + formatDouble(beta) + "): no singular value of Ma and Mb is > tol = " +
                formatDouble(o.rankTol) + (o.algorithm == TrgAlgorithm::Hotrg ? " (the environments of its two half-steps)" : "") +
                " (the largest are " + formatDouble(sv[3].data[0]) +
                " and " + formatDouble(sv[4].data[0]) + ")");
  return keep;
}

/// Which of Ma (bit 0) and Mb (bit 1) the step's cut splits a degenerate multiplet of:
/// s[D'-1] − s[D'] ≤ trgMultipletTol(o)·s[D'-1], where s[D'-1] ≥ kTrgMultipletFloor·s[0]
/// (kept = %skept, cut = %scut with `width` values per matrix). Nothing is cut where
/// s[D'] = 0; multipletTol = 0 cuts wherever χ says.
unsigned TrgSweep::cutSplitsMultiplet(const double *kept, const double *cut, size_t width) const {
  unsigned split = 0;
  for (unsigned k = 0; k < 2; ++k)
    if (splitsAt(cut[k * width], kept[k], cut[k * width + 1])) split |= 1u << k;
  return split;
}

/// Whether a cut between the values `last` (kept) and `next` (cut) of a spectrum led by
/// s0 splits a multiplet (the rule of cutSplitsMultiplet).
bool TrgSweep::splitsAt(double s0, double last, double next) const {
  return o.multipletTol > 0 && next > 0 && last >= kTrgMultipletFloor * s0 && tied(last, next);
}

/// Whether adjacent singular values above ≥ below are one multiplet's:
/// above − below ≤ trgMultipletTol(o)·above.
bool TrgSweep::tied(double above, double below) const { return above - below <= trgMultipletTol(o) * above; }

/// For step n + 1 run with a carried-over D' below its structural S (%scut = s[0],
/// s[D'], …, s[S] per matrix, `width` values; kept = %skept): the D' the rule would keep
/// starting from S, where these values decide it: S where its cut splits nothing (and
/// keeps no value ≤ rankTol), else the start of the multiplet it splits, or S again
/// where that start keeps half of S or fewer. 0 where they do not decide: the multiplet
/// reaches below D' (the probe's count decides), or a value ≤ rankTol lies above S.
int64_t TrgSweep::keptBelow(int64_t S, const double *kept, const double *cut, size_t width,
                            size_t n) const {
  const int64_t Dp = dims[n + 1];
  int64_t keep = S;
  for (size_t k = 0; k < 2; ++k) {
    const double *s = cut + k * width;            // s[0], then s[Dp + i] at s[1 + i]
    auto at = [&](int64_t i) { return i == Dp - 1 ? kept[k] : s[1 + (i - Dp)]; };
    if (!(at(S - 1) > o.rankTol)) return 0;
    if (!splitsAt(s[0], at(S - 1), at(S))) continue;
    int64_t m = S - 1;
    while (m >= Dp && tied(at(m - 1), at(m))) --m;
    if (m < Dp) return 0;
    keep = std::min(keep, m);
  }
  return 2 * keep > S ? keep : S;
}

/// Step n + 1's D' lowered to the start of the multiplet its cut splits in the matrices
/// of `split` (cutSplitsMultiplet): the probe's D' leading values, counted down from
/// s[D'-1] while a gap is ≤ trgMultipletTol(o)·s[m-1] (the smaller start where both split).
/// 0 where that start keeps half of D' or fewer: a bond cut that far down is not the
/// χ the run asked for (Potts with χ < q: the (q − 1)-fold multiplet after s[0]), so
/// the cut stays where it is.
int64_t TrgSweep::multipletStart(size_t n, unsigned split, double beta, ir::Tensor &T,
                                 const std::vector<ir::Tensor> &w) {
  std::vector<ir::Tensor> sv =
      progs.call(probeOf(dims[n], dims[n + 1]), stepName(n), beta, T, std::vector<ir::Tensor>(w));
  int64_t keep = dims[n + 1];
  for (unsigned k = 0; k < 2; ++k) {
    if (!(split >> k & 1u)) continue;
    const std::vector<double> &s = sv[3 + k].data;
    int64_t m = static_cast<int64_t>(s.size()) - 1;
    while (m > 0 && tied(s[m - 1], s[m])) --m;
    keep = std::min(keep, m);
  }
  return 2 * keep > dims[n + 1] ? keep : 0;
}

int64_t TrgSweep::cutOf(size_t n) const {
  return cutTo.size() == ranks.size() && n < cutTo.size() && cutTo[n] > dims[n + 1] ? cutTo[n] : 0;
}

/// D' of step n + 1 of the current schedule (n = ranks.size(): the limit closure's).
int64_t TrgSweep::keptOf(size_t n) const { return n < ranks.size() ? dims[n + 1] : closureRank; }

void TrgSweep::setDerivatives(TrgResult &r, const double *g, const double *h, size_t row,
                              bool scale, bool withH) const {
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

} // namespace tessel::frontend
