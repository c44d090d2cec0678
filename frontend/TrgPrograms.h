//===- frontend/TrgPrograms.h - The compiled programs of a TRG run -------------===//
//
// What a TRG driver compiles and how it runs it, apart from what it computes: the
// pass manager with the user's pipeline, each program traced, passed, prepared and
// timed (TrgProgramInfo), the engine (or the reference evaluator) that runs them with
// errors that name the step and β, the ledger of the tensors held between runs (the
// planned peak), progress for the runs of a staged module, and the per-program engine
// profiles. TrgDriver (frontend/TrgDriver.cpp) decides which programs and in what
// order; this class knows nothing of the TRG's schedule.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "frontend/LiveBytes.h"
#include "frontend/TrgDriver.h"
#include "passes/Grad.h"
#include "passes/Jvp.h"
#include "runtime/Stats.h"

namespace tessel::frontend {

class TrgPrograms {
public:
  /// Parses the pipeline (trgPipeline(o)), rejects --passes / --disable-pass naming
  /// grad or checkpoint (trg runs them itself), and makes the engine of width o.width
  /// (none with o.reference). `o` must outlive this object.
  explicit TrgPrograms(const TrgOptions &o);

  /// Runs the pipeline on `p` in place; returns the wall time in ms. `input`: Verified
  /// when `p` is the output of an earlier run (run*), which verified it.
  /// `secondOrder`: for a program that is differentiated twice, without svd-topk-guards
  /// (its guards come from its first grad, runGrad).
  double runPasses(ir::Program &p, passes::InputState input = passes::InputState::Unverified,
                   bool secondOrder = false);

  /// Turns `p` into its gradient program in place by running grad{go} through the
  /// pass manager as a required pass (so the print, dump and report flags show it, and
  /// --bisect-limit never skips it); returns the wall time in ms. `guardsPass`: then the
  /// pipeline's svd-topk-guards, unless --disable-pass names it (it rewrites the forward
  /// for the backward, so it must see both in one program, before a checkpoint policy
  /// clones forward ops); then checkpoint{policy} unless `policy` is store.
  double runGrad(ir::Program &p, const passes::GradOptions &go, bool guardsPass = false,
                 passes::RematPolicy policy = passes::RematPolicy::Store,
                 passes::InputState input = passes::InputState::Unverified);

  /// Turns `p` into its jvp{jo} in place (the `jvp` pass, as a required pass, then
  /// the pipeline's passes run by the caller); returns the wall time in ms.
  double runJvp(ir::Program &p, const passes::JvpOptions &jo,
                passes::InputState input = passes::InputState::Unverified);

  /// Inlines the module `p` (the `inline` pass, as a required pass: whole mode's
  /// programs); returns the wall time in ms.
  double runInline(ir::Program &p);

  /// Whether the pipeline has svd-topk-guards and --disable-pass does not name it.
  bool guardsWanted() const;

  /// Registers a finished program: prepares it (timed; an error names the group, role
  /// and program) and stores it; returns its index.
  int add(std::string group, std::string role, ir::Program p, size_t tracedOps, double traceMs,
          double passesMs);

  /// Traces with `build` (a callable returning an ir::Program), runs the passes and
  /// adds the result as `group`'s value program (noteGroup is the caller's).
  template <class Build> int compileValue(const std::string &group, Build build) {
    const auto t0 = std::chrono::steady_clock::now();
    ir::Program p = build();
    const double traceMs = rt::msSince(t0);
    const size_t traced = p.ops.size();
    const double passMs = runPasses(p);
    return add(group, "value", std::move(p), traced, traceMs, passMs);
  }

  /// Records `g` in the order groups are reported (once).
  void noteGroup(const std::string &g);
  const std::vector<std::string> &groupOrder() const { return groupOrder_; }

  const std::vector<TrgProgramInfo> &all() const { return progs_; }
  const TrgProgramInfo &at(int idx) const { return progs_[static_cast<size_t>(idx)]; }
  TrgProgramInfo &at(int idx) { return progs_[static_cast<size_t>(idx)]; }
  size_t size() const { return progs_.size(); }

  /// Runs program `idx` on `in`; `where` names the step (or part of the sweep) for
  /// errors: a kernel failure or a --check-nan/--check-inf stop becomes "error: trg:
  /// <where> (<group>, <role>), beta = B: <the engine's message naming the op>". The run
  /// is recorded in the ledger.
  std::vector<ir::Tensor> run(int idx, const std::vector<ir::Tensor> &in, const std::string &where,
                              double beta);

  /// A kept tensor that a run either borrows (give = false: lent and moved back) or
  /// takes (give = true: its last reader).
  struct Pass {
    ir::Tensor &t;
    bool give;
  };

  /// run() on arguments given as they are held: a tensor the caller keeps (an lvalue)
  /// is lent for the run, moved in and back, so it is neither copied nor counted twice
  /// by the ledger; a temporary or std::move'd tensor (or a std::vector of them, spliced
  /// in) is given to the run; a Pass says which at run time.
  template <typename... A>
  std::vector<ir::Tensor> call(int idx, const std::string &where, double beta, A &&...args) {
    std::vector<ir::Tensor> in;
    in.reserve(sizeof...(A));
    std::vector<std::pair<size_t, ir::Tensor *>> lent;
    auto put = [&](auto &&a) {
      if constexpr (std::is_same_v<std::decay_t<decltype(a)>, Pass>) {
        if (!a.give) lent.emplace_back(in.size(), &a.t);
        in.push_back(std::move(a.t));
      } else if constexpr (std::is_same_v<std::decay_t<decltype(a)>, std::vector<ir::Tensor>>) {
        static_assert(!std::is_lvalue_reference_v<decltype(a)>, "a vector of inputs is given");
        for (ir::Tensor &t : a) in.push_back(std::move(t));
      } else {
        if constexpr (std::is_lvalue_reference_v<decltype(a)>) lent.emplace_back(in.size(), &a);
        in.push_back(std::move(a));
      }
    };
    (put(std::forward<A>(args)), ...);
    struct GiveBack {
      std::vector<ir::Tensor> &in;
      std::vector<std::pair<size_t, ir::Tensor *>> &lent;
      ~GiveBack() {
        for (auto &[i, t] : lent) *t = std::move(in[i]);
      }
    } giveBack{in, lent};
    return run(idx, in, where, beta);
  }

  /// Progress (TrgDriver::setProgress): the callback, and one step reported to it.
  void setProgress(TrgProgressCallback cb) { progress_ = std::move(cb); }
  void stepDone(const char *phase, size_t step, size_t steps, bool atMost = false) {
    if (progress_) progress_(TrgProgressStep{phase, step, steps, atMost});
  }
  /// Before a run of staged module `p` (`run`: "value+grad" or "second"): reports each
  /// call and scan iteration of its entry as a step of its sweep (forward, backward,
  /// the reverse of the backward) through the module interpreter's hook.
  void moduleProgress(const char *run, const ir::Program &p);

  /// Starts an evaluation: forgets the ledger's runs.
  void beginEvaluation() { ledger_.clear(); }
  /// The planned peak bytes of the runs since beginEvaluation (frontend/LiveBytes.h).
  int64_t evaluationPeakBytes() const { return ledger_.peakBytes(); }

  /// TrgDriver's reports: per group (with `usesOf(group)` steps), totals, profiles and
  /// the truncated-SVD counters of every plan.
  template <class Uses> std::vector<TrgGroupInfo> groups(Uses usesOf) const {
    std::vector<TrgGroupInfo> gs;
    for (const std::string &g : groupOrder_) gs.push_back(groupInfo(g, usesOf(g)));
    return gs;
  }
  double compileMs() const;
  double prepareMs() const;
  size_t totalOps() const;
  void setProfiling(bool on);
  std::string profileReport(size_t top) const;
  rt::TruncatedSvdStats svdStats() const;

private:
  TrgGroupInfo groupInfo(const std::string &g, int uses) const;
  int64_t engineResidentBytes() const;
  /// With profiling on: program idx's engine (made when it first runs).
  rt::Engine &profEngine(int idx);

  const TrgOptions &o_;
  std::unique_ptr<passes::PassManager> pm_;
  std::unique_ptr<rt::Engine> engine_;
  /// With profiling on: one engine per program (the engine keeps per-plan counters
  /// only for the few plans it has cached, and the TRG sweeps use ~20 plans).
  std::vector<std::unique_ptr<rt::Engine>> profEngines_;
  bool profiling_ = false;
  std::vector<int64_t> profRuns_; ///< per program: runs while profiling
  /// The last module progress hook (moduleProgress), for engines made after it.
  std::function<void(const ir::Op &, int64_t)> moduleHook_;
  std::vector<TrgProgramInfo> progs_;
  std::vector<std::string> groupOrder_;
  TrgProgressCallback progress_;
  LiveBytesLedger ledger_;
};

} // namespace tessel::frontend
