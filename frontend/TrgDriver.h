//===- frontend/TrgDriver.h - Staged and whole-graph TRG drivers -------------===//
//
// Compiles and prepares the TRG programs of frontend/Trg.h once, then evaluates
// lnZ/N, d(lnZ/N)/dβ and d²(lnZ/N)/dβ² at any β (docs/trg.md §2–6):
//
//   staged (default)  the value sweep chains one program per step class D -> D' (and
//                     init, closure), compiled and prepared once, reused for every step
//                     of that class; it also decides a derived schedule. The derivatives
//                     run the staged module of the schedule (frontend::buildTrgModule:
//                     init, a function per step class, a scan per run of equal classes,
//                     the closure), differentiated by the grad pass through its calls and
//                     scans: value+grad = grad{wrt=params, aux=skept} with the checkpoint
//                     policy at the call boundaries (each call runs the forward half of
//                     its callee's gradient, which returns the residuals the backward
//                     half reads); second order = grad of grad. No AD on the host.
//   whole             the same staged module inlined (the `inline` pass): one program
//                     β -> lnZ/N for all steps; its gradient is the grad pass on that
//                     program (+ the checkpoint pass's policy).
//
// Both modes add ln of the initial tensor's factor (trgInitLogScale) as the value sweep
// does: staged on the host, whole in the program. The two modes agree to ~1e-12.
//
// Compile = trace (frontend builders) + passes (the pipeline, default
// `order{strategy=S},pad-sink,cse,dce`, applied to every program before grad and to
// every program after); prepare = rt::prepare. Both happen in the constructor and are
// timed per program; a run compiles only a step class its derived schedule meets for the
// first time (below). grad and checkpoint run through the same
// PassManager as the pipeline, as required passes (passes/PassManager.h), so its print,
// dump, statistics and timing flags show them and --bisect-limit never skips them.
//
// Rank schedule: TrgOptions::ranks, or derived at each β by the value sweep from its own
// SVDs (the structural trgDefaultRanks where every kept value is > rankTol and no cut
// splits a degenerate multiplet, fewer where not; docs/trg.md §2.4), which with
// TrgOptions::stepsAuto also decides the number of
// steps (the infinite lattice, §3.1). Every run checks the smallest kept singular values
// of each step (output %skept) and throws tessel::Error naming the step and the value
// when one is ≤ rankTol (its reverse rule would divide by ~0: docs/trg.md §2.4, §5).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frontend/Trg.h"
#include "frontend/TrgCft.h"
#include "passes/Checkpoint.h"
#include "passes/Order.h"
#include "passes/PassManager.h"
#include "runtime/Runtime.h"

namespace tessel::frontend {

enum class TrgMode { Staged, Whole };

/// "staged", "whole".
const char *trgModeName(TrgMode m);
/// Parses a mode; throws tessel::Error "--mode: unknown mode 'x' (allowed: staged, whole)".
TrgMode parseTrgMode(const std::string &s);

/// How the step SVDs are computed: Full = LAPACK's full SVD, then the slice of the
/// leading D' triplets; Truncated = the truncate-svd pass turns them into svd_topk,
/// which computes only those (and differentiates without a full SVD).
enum class TrgSvd { Full, Truncated };
const char *trgSvdName(TrgSvd s);
/// Throws tessel::Error "--svd: unknown method 'x' (allowed: full, truncated)".
TrgSvd parseTrgSvd(const std::string &s);

/// The default pass pipeline of every TRG program: the registered pipeline "trg"
/// (TrgSvd::Truncated: truncate-svd,svd-transpose-fold,svd-topk-guards,order,pad-sink,
/// cse,dce) or "trg-full-svd" (order,pad-sink,cse,dce), its order pass with strategy <s>.
std::string defaultTrgPipeline(passes::OrderStrategy order, TrgSvd svd = TrgSvd::Truncated);

struct TrgOptions {
  /// The lattice model (Ising, the default, or q-state Potts).
  TrgModel model;
  /// The coarse-graining algorithm (TRG, BTRG with exponent btrgK, HOTRG; docs/trg.md
  /// §9, §11).
  TrgAlgorithm algorithm = TrgAlgorithm::Trg;
  /// trgStepSitesLog2(algorithm): steps stand for 2^(steps·this) sites.
  int sitesLog2() const { return trgStepSitesLog2(algorithm); }
  double btrgK = kBtrgDefaultK;
  /// The magnetic field h of the Ising model (units of J; the programs' input %h).
  double field = 0;
  /// Also compute ∂²(lnZ/N)/∂h² (χ_m) in second(): one more reverse sweep (the row of the
  /// Hessian for h); needs `second` and a model with a field.
  bool susceptibility = false;
  int64_t chi = 16;
  /// Steps of a finite lattice of 2^steps sites (HOTRG: 4^steps); with stepsAuto the
  /// most steps.
  int steps = 20;
  /// Coarse-grain until the infinite lattice's lnZ/N stops changing (docs/trg.md §3.1):
  /// the run ends with the limit closure (2·ln m_N + ln‖T_{N+1}‖ − ln‖T_N‖; HOTRG §11)
  /// instead of the torus's trace, and stops after the step at which the estimate
  /// Σ_{n<N} ln m_n/2^n + that closure/2^N (HOTRG: 4^n, 4^N) has
  /// changed by ≤ kTrgStepsAutoTol relative kTrgStepsAutoStill times in a row (at most
  /// `steps` steps). Needs a derived schedule (ranks empty).
  bool stepsAuto = false;
  /// Truncation schedule (ranks[n] = D' of step n+1). Empty: derived from the spectrum
  /// at each β by the value sweep (docs/trg.md §2.4): the structural
  /// trgDefaultRanks, except where a kept singular value is ≤ rankTol; then that step
  /// keeps those > rankTol among the D' its own SVD computes; and where the cut splits a
  /// degenerate multiplet (trgMultipletTol), that step keeps the values above it.
  std::vector<int64_t> ranks;
  TrgMode mode = TrgMode::Staged;
  /// Residual policy of the backward programs (docs/trg.md §6).
  passes::RematPolicy checkpoint = passes::RematPolicy::Store;
  /// Contraction order of the plaquette einsum (used by the default pipeline). Pairwise
  /// (docs/trg.md §2.6, O(D²χ⁴)) costs 1.8x fewer flops than chain for 16 -> 16 (37.7M vs
  /// 69.2M, `tessel cost`) with a 16x smaller largest intermediate, and equals optimal.
  passes::OrderStrategy order = passes::OrderStrategy::Pairwise;
  /// Engine width (threads).
  int width = 1;
  /// Build the value+grad programs (valueAndGrad()).
  bool grad = false;
  /// Build the second-order program (second()).
  bool second = false;
  /// How second() differentiates the gradient: forward-over-reverse (jvp of
  /// grad{keep-outputs=false}, one tangent per Hessian row) or reverse-over-reverse
  /// (grad{vjp} of it, one cotangent per row). The same numbers to rounding.
  bool secondForwardOverReverse = true;
  /// Report the CFT data of each step's tensor (cftData(); docs/trg.md §10). Staged mode.
  bool cft = false;
  /// Lorentzian broadening of the svd reverse rule.
  double svdEps = kTrgSvdEps;
  /// Step SVDs (the default pipeline's truncate-svd). Second derivatives go through
  /// svd_topk either way: forward over reverse by the jvp of its VJP's svd_topk_complement,
  /// reverse over reverse by that op's VJP.
  TrgSvd svd = TrgSvd::Truncated;
  /// Kept singular values must exceed this (relative to s[0], as the step divides them).
  double rankTol = kTrgRankTol;
  /// A derived schedule cuts no multiplet whose gap at the cut is ≤ this·s[D'-1]
  /// (kTrgMultipletTol; in a field at least fieldPairTol·s[D'-1], trgMultipletTol; 0: cut
  /// wherever χ says), unless keeping it whole would keep half
  /// of D' or fewer; the value sweep reports every step that splits one, a given
  /// schedule's too (TrgResult::multipletSplits).
  double multipletTol = kTrgMultipletTol;
  /// In a field (h ≠ 0), the rule's relative gap is max(multipletTol, this)
  /// (kTrgFieldPairTol): the pairs a field splits. Applies only where multipletTol > 0.
  double fieldPairTol = kTrgFieldPairTol;
  /// Pass pipeline applied to every program; empty = defaultTrgPipeline(order).
  std::string pipeline;
  /// Pass-manager instrumentation (--print-ir-*, --time-passes, ...). Each program is
  /// verified once, when it is prepared (rt::prepare), not after every pass: verifyEach
  /// is off unless asked for (--verify-each), as LLVM's opt verifies at the end unless
  /// -verify-each. It costs 1.5 ms of the 11.4 ms that compile + prepare of `tessel trg
  /// --grad` take at χ = 16 (docs/trg.md §6.1); a program that fails verification at
  /// prepare says to run with it to find the pass that broke it.
  passes::PassManagerOptions passOptions = [] {
    passes::PassManagerOptions o;
    o.verifyEach = false;
    return o;
  }();
  /// Run with rt::evaluateReference instead of prepare + engine (slow; tests).
  bool reference = false;
  /// Prepare every program with this rt::PrepareOptions::valueCheck: after each op the
  /// engine checks its results, and the first NaN (or NaN/inf) stops the run with
  /// tessel::Error "trg: step N (group, role), beta = B: --check-nan: <op> (loc) ...:
  /// result ... is NaN at [i,j]; operands: %a finite, ...". Engine only (ignored with
  /// `reference`).
  rt::ValueCheck valueCheck = rt::ValueCheck::Off;
  /// rt::PrepareOptions::fuseElementwise of every program (`--no-fusion` turns it off).
  bool fuseElementwise = true;
};

/// The pipeline every program of the run gets: o.pipeline, or the default for
/// o.order and o.svd.
std::string trgPipeline(const TrgOptions &o);

/// The most TRG steps a run takes: 2^steps sites must be a finite double (HOTRG, whose
/// steps cover 4^steps sites: half of it).
inline constexpr int kTrgMaxSteps = 1023;
/// --steps auto: the most steps (its estimate has converged by ~55 steps at every β
/// measured, docs/trg.md §3.1), the relative change that counts as none (2^-53, one
/// rounding of lnZ/N), and how many steps in a row must show no change.
inline constexpr int kTrgStepsAutoMax = 80;
inline constexpr double kTrgStepsAutoTol = 0x1p-53;
inline constexpr int kTrgStepsAutoStill = 2;
/// Second derivatives in the field h pass through the singular vectors of the leading
/// pair of each step's SVDs (below T_c the two ordered states, which h couples), and
/// their rounding (~ε·s₀) is divided by the pair's gap squared: below this gap (relative
/// to s₀; ε/gap² ≈ 5e-7) TrgDriver::second leaves ∂²/∂β∂h and ∂²/∂h² empty and says why
/// (TrgResult::refused). At β = 0.5, χ = 16 the pair reaches it at step 4 or 5.
inline constexpr double kTrgMinPairGap = 2e-5;

/// At h = 0 the Ising model's lnZ/N is even in h (the spin-flip symmetry): ∂/∂h and
/// ∂²/∂β∂h are 0, and what AD returns for them is the rounding of the spin-flip-odd
/// sector. Near T_c every step multiplies that rounding by the magnetic scaling factor
/// (b^{y_h}, y_h = 15/8; b^{y_h + y_t} for ∂²/∂β∂h), so it can reach 1e-4. Where it is
/// above kTrgOddTol of the β derivative of the same order (∂/∂β, ∂²/∂β²), the value is
/// not reported (TrgResult::dhRefused, TrgResult::refused; docs/trg.md §8.1).
inline constexpr double kTrgOddTol = 1e-10;

/// Throws tessel::Error naming the flag and the allowed values for an invalid option
/// (chi < 2, steps outside [1, kTrgMaxSteps], width < 1, bad ranks, a field that is not
/// finite or given to the Potts model, q outside [2, kTrgMaxPottsQ], ...).
void validateTrgOptions(const TrgOptions &o);

/// The relative gap within which the value sweep counts adjacent singular values as one
/// multiplet (docs/trg.md §2.4): multipletTol, and in a field (h ≠ 0) at least
/// fieldPairTol; 0 where multipletTol = 0 (the rule off).
double trgMultipletTol(const TrgOptions &o);

/// The schedule of docs/trg.md §2.4 from values: the one a run without a given schedule
/// (TrgOptions::ranks empty) derives in its value sweep at `beta` (steps N, the
/// pipeline's SVDs: `pipeline` empty = the default). Step n+1 keeps min(D², χ, rank
/// bound), or where one of its kept singular values is ≤ tol, those of its own SVDs that
/// are > tol, or where its cut splits a degenerate multiplet, the values above it.
/// Throws tessel::Error for β ≤ 0 or bad χ/steps.
std::vector<int64_t> deriveTrgRanks(double beta, int64_t chi, int steps,
                                    double tol = kTrgRankTol, const std::string &pipeline = "",
                                    const TrgModel &model = {}, double field = 0);

/// The SVD inputs (Ma, Mb) of every step of one forward pass at `beta` with the
/// schedule `ranks` (as the programs feed them to gesdd), for benchmarks of the SVD
/// floor. Element n is step n+1. Throws tessel::Error like deriveTrgRanks.
std::vector<std::array<ir::Tensor, 2>> trgSvdInputs(double beta, const std::vector<int64_t> &ranks,
                                                    const std::string &pipeline = "",
                                                    const TrgModel &model = {}, double field = 0);

/// The inputs of the init and whole programs of `model`: β, and h with a field.
std::vector<ir::Tensor> trgParameterInputs(const TrgModel &model, double beta, double field);

/// One compiled (and prepared) program.
struct TrgProgramInfo {
  std::string group; ///< "init", "step 16->16", "closure 16", "staged module", "whole"
  std::string role;  ///< "value", "value+grad", "second"
  size_t tracedOps = 0; ///< ops after tracing (whole mode: and inline; a derivative: after grad/checkpoint), every function's
  size_t ops = 0;       ///< ops after the passes
  double traceMs = 0, passesMs = 0, prepareMs = 0;
  std::shared_ptr<const rt::Plan> plan; ///< null in reference mode
  ir::Program unprepared;               ///< the program in reference mode (else the plan holds it)
  /// The program after the passes: the plan's, or the one the reference evaluator runs.
  const ir::Program &program() const;
};

/// Compile figures of one group (a step class, init, closure or the whole program).
struct TrgGroupInfo {
  std::string group;
  /// Steps of this class in the last evaluation's schedule (1 for init/closure/whole); 0
  /// before the first evaluation of a derived schedule.
  int uses = 0;
  size_t ops = 0;
  double compileMs = 0, prepareMs = 0;
  /// Largest peak live bytes (rt::peakLiveBytes) of the group's prepared programs
  /// (value, vjp forward, vjp backward, ...); 0 in reference mode.
  int64_t peakLiveBytes = 0;
};

/// A step whose cut splits a degenerate multiplet (docs/trg.md §2.4): which of the
/// multiplet's vectors it keeps is the SVD routine's choice, so the results depend on the
/// routine at that level. `--ranks` schedules are run as given and flagged; a derived one
/// splits only where keeping the values above the multiplet would keep half of D' or fewer.
struct TrgMultipletSplit {
  size_t step = 0;        ///< 1-based
  int64_t D = 0, Dp = 0;  ///< the step's bond dimensions D -> D'
  unsigned matrices = 0;  ///< which SVDs it splits: bit 0 Ma, bit 1 Mb (HOTRG: its two environments)
  /// Of the first matrix split: s[D'-1] (the last kept), s[D'] (the first cut) and s[0]
  /// (singular values of the normalised T; HOTRG: of its half-steps' environments).
  double kept = 0, cut = 0, s0 = 0;
};

/// Results of one evaluation at one β (and field h). Derivatives in h only for a model
/// with a field; m = (1/β)·∂(lnZ/N)/∂h, χ_m = (1/β)·∂²(lnZ/N)/∂h² (docs/trg.md §8.1).
struct TrgResult {
  double beta = 0;
  double field = 0;              ///< h
  double lnZ = 0;                ///< lnZ/N
  std::optional<double> dlnZ;    ///< ∂(lnZ/N)/∂β
  std::optional<double> d2lnZ;   ///< ∂²(lnZ/N)/∂β²
  std::optional<double> dlnZdh;      ///< ∂(lnZ/N)/∂h (valueAndGrad, second)
  std::optional<double> d2lnZdbetadh; ///< ∂²(lnZ/N)/∂β∂h (second)
  std::optional<double> d2lnZdh2;     ///< ∂²(lnZ/N)/∂h² (second with susceptibility)
  /// Why ∂²/∂β∂h and ∂²/∂h² are empty although second() ran (a kept pair of singular
  /// values closer than kTrgMinPairGap), or ∂²/∂β∂h alone (at h = 0, above kTrgOddTol);
  /// docs/trg.md §8.1; empty otherwise.
  std::string refused;
  /// Why ∂/∂h is empty although the run computed it (at h = 0, above kTrgOddTol of
  /// ∂/∂β); empty otherwise.
  std::string dhRefused;
  std::vector<double> logm;      ///< ln m_n per step (m_n = sa[0] divided out; HOTRG: max|T|)
  std::vector<std::array<double, 2>> keptSingularValues; ///< (sa[D'-1], sb[D'-1]) per step
  /// The steps whose cut splits a degenerate multiplet, from the value sweep at this β
  /// (its value programs compute s[D']); empty where none does or where no value sweep
  /// ran at this schedule (a first-order run with a given schedule and no value run, whole
  /// mode with a given schedule, a value+grad run that lowered a step, multipletTol = 0).
  std::vector<TrgMultipletSplit> multipletSplits;
};

/// One step of a staged sweep, for progress reports: the sweep ("value", "value+grad:
/// forward", "second: backward", ...), this step's number (1-based, in the sweep's
/// order) and the sweep's steps (with `atMost`: a bound, --steps auto decides on the way).
struct TrgProgressStep {
  const char *phase;
  size_t step, steps;
  bool atMost;
};
using TrgProgressCallback = std::function<void(const TrgProgressStep &)>;

class TrgDriver {
public:
  /// Validates the options, then traces, optimises and prepares every program the
  /// options ask for. Throws tessel::Error for bad options or a failing pass.
  explicit TrgDriver(TrgOptions opts);
  ~TrgDriver();
  TrgDriver(const TrgDriver &) = delete;
  TrgDriver &operator=(const TrgDriver &) = delete;

  const TrgOptions &options() const;
  /// The schedule of the last evaluation (ranks[n] = D' of step n+1; its length is the
  /// number of steps); before any, the one the constructor compiled.
  const std::vector<int64_t> &ranks() const;
  /// Calls `cb` before each step of every staged sweep (not in whole mode): the value
  /// sweep's steps, and each call and scan iteration of a staged module's run ("value+grad:
  /// forward", "value+grad: backward", "second: ..."), on the calling thread; an exception it throws ends the evaluation (how the Python binding stops
  /// on Ctrl-C). Empty: no calls.
  void setProgress(TrgProgressCallback cb);
  /// --steps auto: whether the last evaluation's estimate met the stop criterion within
  /// TrgOptions::steps steps (always true without --steps auto).
  bool stepsConverged() const;
  /// The time the last evaluation's planning (derived schedule) added: probe runs and
  /// compiles of classes the constructor had not compiled (ms; 0 when the structural
  /// schedule held).
  double planExtraMs() const;

  /// lnZ/N (forward only). Throws tessel::Error for β ≤ 0 or not finite, for a kept
  /// singular value ≤ rankTol (naming the step), or a non-finite result.
  TrgResult value(double beta);
  /// lnZ/N and d(lnZ/N)/dβ (needs TrgOptions::grad).
  TrgResult valueAndGrad(double beta);
  /// lnZ/N, d(lnZ/N)/dβ and d²(lnZ/N)/dβ² (needs TrgOptions::second). Staged: the value
  /// sweep (the schedule at β, the rank check), then per Hessian row the staged module's
  /// jvp of grad (or grad of grad: TrgOptions::secondForwardOverReverse); whole: the
  /// value program, then jvp(grad(whole)) (grad(grad(whole))).
  TrgResult second(double beta);

  /// The CFT data of every tensor of the value sweep at β (T_0 … T_{N−1}; docs/trg.md
  /// §10, frontend/TrgCft.h): one more value sweep, untimed. Needs TrgOptions::cft
  /// (staged mode).
  std::vector<TrgCftRow> cftData(double beta);

  /// Planned peak bytes of the last value(), valueAndGrad() or second(): the largest,
  /// over its engine runs, of the tensors passed between runs that are still to be read
  /// (residuals, the next step's input, cotangents), the run's outputs and the engine
  /// arenas (frontend/LiveBytes.h). Compare with the measured peak resident set size
  /// above the process's size before the run. 0 in reference mode or before any run.
  int64_t plannedPeakBytes() const;

  /// What the truncated-SVD kernels did in this driver's programs over all their runs
  /// (rt::planSvdStats summed): its own counts, whatever other drivers run at the same
  /// time in other threads.
  rt::TruncatedSvdStats svdStats() const;

  /// Every compiled program, in compile order.
  const std::vector<TrgProgramInfo> &programs() const;
  /// Per group (init, each step class, closure / whole, second), in compile order.
  std::vector<TrgGroupInfo> groups() const;
  /// Total trace + passes time (ms) and total prepare time (ms).
  double compileMs() const;
  double prepareMs() const;
  /// Total ops of all compiled programs.
  size_t totalOps() const;
  /// Engine profiling (rt::Engine::setProfiling) for the following runs: adds two
  /// clock reads per chunk, and runs each program on an engine of its own (same
  /// width) so that every program keeps its counters. No effect in reference mode.
  void setProfiling(bool on);
  /// Per program (group, role) that ran while profiling: the engine's per-instruction
  /// table, at most `top` lines each, programs in compile order.
  std::string profileReport(size_t top = 10) const;
  /// The BLAS library and thread count (rt::blasInfo()).
  static std::string blas();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace tessel::frontend
