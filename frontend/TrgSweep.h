//===- frontend/TrgSweep.h - The staged TRG value sweep and its schedule --------===//
//
// The schedule of a TRG run (the D' of every step, and with --steps auto the number of
// steps and the limit closure's D') and the staged value sweep that decides it where it
// is not given: init, one value program per step class D -> D' (compiled when first
// met), the closure; a kept singular value ≤ rankTol makes the step keep fewer (the
// probe of that class counts the values above tol, docs/trg.md §2.4), so does a cut
// that splits a degenerate multiplet (the step keeps the values above it), and --steps auto
// stops when the infinite-lattice estimate stops changing (§3.1). The checks every run
// of the schedule makes (kept singular values, finite results) are here too, so that
// each derivative sweep of TrgDriver makes the same ones.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <map>
#include <tuple>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "frontend/TrgPrograms.h"

namespace tessel::frontend {

struct TrgSweep {
  /// The initial schedule: o.ranks, or the structural one (docs/trg.md §2.4), which the
  /// spectrum confirms at ordinary β (with --steps auto: its first 12 steps, which hold
  /// every class of a run). Compiles nothing.
  TrgSweep(const TrgOptions &o, TrgPrograms &progs);

  const TrgOptions &o;
  TrgPrograms &progs;

  std::vector<int64_t> ranks; ///< ranks[n] = D' of step n + 1
  std::vector<int64_t> dims;  ///< dims[n] = D of the input of step n + 1; dims[N] = final D
  /// With --steps auto: the D' of the limit closure's step (0: the trace closure).
  int64_t closureRank = 0;
  /// ranks, and with --steps auto the limit closure's D' after them (TrgDriver::ranks()).
  std::vector<int64_t> allRanks;
  /// Whether the schedule is derived from the spectrum at each β (no --ranks given).
  bool autoRanks = false;
  /// The β whose schedule `ranks` holds (a derived schedule).
  std::optional<double> plannedBeta;
  /// Extra time of the last plan: probe runs and compiles of new classes (ms).
  double planExtraMs = 0;
  /// Whether the last --steps auto plan met its stop criterion within o.steps steps.
  bool converged = true;
  /// The steps whose cut splits a multiplet in the last value sweep, and its β.
  std::vector<TrgMultipletSplit> splits;
  std::optional<double> splitsBeta;

  /// The value program of one staged piece (init, a step class D -> D', the closure):
  /// an index into `progs`, -1 where not compiled.
  struct StagedClass {
    int value = -1;
  };
  StagedClass init;
  /// Per (D, D', E): E > D' where the value program's %scut also holds s[D'+1..E]
  /// (cutTo), else 0.
  std::map<std::tuple<int64_t, int64_t, int64_t>, StagedClass> stepClasses;
  /// Per step of a derived schedule: the E of its value program (0: none; cutOf).
  std::vector<int64_t> cutTo;
  /// Per (final D, limit closure's D' or 0): the closure.
  std::map<std::pair<int64_t, int64_t>, StagedClass> closures;
  /// Per (D, D'): the probe that outputs the D' leading singular values of the step's
  /// SVDs.
  std::map<std::pair<int64_t, int64_t>, int> probes;

  /// Compiles init and the value programs of the current schedule.
  void compile();
  /// lnZ/N at β by the value sweep; plans the schedule at β first where it is derived
  /// (once per β). Throws tessel::Error naming the step for a kept singular value ≤ tol.
  /// `cft`: also the CFT data of every tensor of the sweep (T_0 … T_{N−1}).
  TrgResult value(double beta, std::vector<TrgCftRow> *cft = nullptr);

  /// Whether the schedule (and with --steps auto the number of steps) is decided per β.
  bool planned() const { return autoRanks; }
  /// Per group, how many steps of the current schedule use it.
  int usesOf(const std::string &g) const;
  /// D' of step n + 1 (n = ranks.size(): the limit closure's).
  int64_t keptOf(size_t n) const;
  /// Keeps one singular value fewer in step n + 1 and lowers the later steps to what
  /// that allows.
  void lowerRank(size_t n);
  void setDims();
  /// Compiles the value programs the current schedule needs and has not compiled.
  void ensureStaged();

  /// Refuses a kept singular value ≤ rankTol of step n + 1 (`s`: the smallest kept of Ma
  /// and Mb), recording the pair in r.keptSingularValues.
  void checkKept(size_t n, const double *s, TrgResult &r) const;
  /// Throws "error: trg: <what> is not finite (v) at beta = B" for a non-finite v.
  void checkFinite(const char *what, double v, double beta) const;
  /// The smallest relative gap (s0 − s1)/s0 of the two leading singular values of any
  /// step's Ma or Mb at β, and its step (1-based); cached per β and schedule. A value
  /// sweep at β with the same schedule records it (second-order runs in a field,
  /// pairOutputs()); otherwise a sweep of the probe programs computes it.
  std::pair<double, size_t> smallestKeptGap(double beta);

  /// Stores the first derivatives g (in the order of the parameters; `withH`: g holds
  /// ∂/∂h after ∂/∂β) and, with h, one row of the Hessian (`row` 0: β's, 1: h's).
  /// `scale`: add the initial tensor's scale (the staged programs leave it out; the
  /// whole program includes it). Throws for a non-finite derivative.
  void setDerivatives(TrgResult &r, const double *g, const double *h, size_t row, bool scale,
                      bool withH) const;

  /// The inputs of init and the whole program: β (and h).
  std::vector<ir::Tensor> paramInputs(double beta) const;
  /// ln of the initial tensor's factor and its derivatives (trgInitLogScale).
  TrgLogScale logScale(double beta) const;
  TrgResult newResult(double beta) const;
  /// BTRG: the bond weights of the initial tensor (ones, f64[d] twice); TRG: none.
  std::vector<ir::Tensor> initialWeights() const;
  /// BTRG: moves a step program's last two outputs (the new bond weights) out of `out`;
  /// TRG: none.
  std::vector<ir::Tensor> weightsOut(std::vector<ir::Tensor> &out) const;
  static std::string stepName(size_t n) { return "step " + std::to_string(n + 1); }
  /// The options of the value sweep's step and closure programs (algorithm, BTRG's k, ε,
  /// %skept); the staged module starts from them.
  TrgStepOptions stepOptions() const;

private:
  /// Whether the value sweep's programs output %spair (a field and second derivatives:
  /// smallestKeptGap then reads the sweep's own SVDs instead of sweeping again).
  bool pairOutputs() const { return o.model.hasField() && (o.second || o.susceptibility); }
  /// Lowers `gap` to step n + 1's relative gaps of its two leading pairs (`v`: %spair).
  static void notePair(size_t n, const std::vector<double> &v, std::pair<double, size_t> &gap);
  int64_t structuralRank(size_t n) const;
  std::string closureGroup(int64_t D, int64_t Dp) const;
  StagedClass &closure();
  StagedClass &stepClass(int64_t D, int64_t Dp, int64_t cutValuesTo = 0);
  /// The E of step n + 1's value program (0 where the schedule was not derived).
  int64_t cutOf(size_t n) const;
  StagedClass &closureClass(int64_t D, int64_t Dp);
  int probeOf(int64_t D, int64_t Dp);
  /// T: the step's input, w: its bond weights (BTRG; empty for TRG).
  int64_t countKept(size_t n, double beta, ir::Tensor &T, const std::vector<ir::Tensor> &w);
  unsigned cutSplitsMultiplet(const double *kept, const double *cut, size_t width) const;
  void noteSplit(size_t n, const double *kept, const double *cut, size_t width);
  bool splitsAt(double s0, double last, double next) const;
  bool tied(double above, double below) const;
  int64_t keptBelow(int64_t S, const double *kept, const double *cut, size_t width, size_t n) const;
  int64_t multipletStart(size_t n, unsigned split, double beta, ir::Tensor &T,
                         const std::vector<ir::Tensor> &w);

  struct GapCache {
    double beta;
    std::vector<int64_t> ranks;
    std::pair<double, size_t> gap;
  };
  std::optional<GapCache> gapCache;
};

} // namespace tessel::frontend
