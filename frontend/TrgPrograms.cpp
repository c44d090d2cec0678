//===- frontend/TrgPrograms.cpp - The compiled programs of a TRG run -----------===//
#include "frontend/TrgPrograms.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "ir/OpAttrs.h"
#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "ir/Verifier.h"
#include "passes/Instrumentation.h"

namespace tessel::frontend {
namespace {

using Clock = std::chrono::steady_clock;
using rt::msSince;

/// trg builds its derivative programs by running the registry's `grad` (and, in whole
/// mode, `checkpoint`; for --second, `jvp`) passes itself; the user's pipeline runs on
/// every program after them. Rejects a --passes or --disable-pass that names them (or
/// `hessian`, which is grad and jvp in one).
void checkTrgPipelineFlags(const passes::Pipeline &user, const passes::PassManagerOptions &pm) {
  auto builtByTrg = [](const std::string &n) {
    return n == "grad" || n == "checkpoint" || n == "jvp" || n == "hessian";
  };
  for (const passes::PassInvocation &inv : user.passes)
    if (builtByTrg(inv.name()))
      throw Error("error: trg: --passes: pass '" + inv.name() +
                  "' cannot be in trg's pipeline: trg runs grad (and checkpoint, per "
                  "--checkpoint, and jvp for --second) itself to build the derivative programs, "
                  "and --passes runs on every program after them; --print-ir-after=grad shows the "
                  "gradient programs");
  for (const std::string &n : pm.disabledPasses)
    if (builtByTrg(n) && n != "hessian")
      throw Error("error: trg: --disable-pass=" + n + ": " + n +
                  " is required by trg (it builds the derivative programs" +
                  (n == "checkpoint" ? std::string("; --checkpoint store applies no policy") : "") +
                  ")");
}

/// The pipeline `grad{...}` for `go`.
passes::Pipeline gradPipeline(const passes::GradOptions &go) {
  passes::Pipeline pl;
  passes::PassInvocation g(*passes::lookupPass("grad"));
  auto joined = [](const std::vector<std::string> &v) {
    std::string s;
    for (const std::string &w : v) s += (s.empty() ? "" : ";") + w;
    return s;
  };
  g.set("wrt", joined(go.wrt));
  g.set("vjp", go.vjp ? "true" : "false");
  g.set("keep-outputs", go.keepOutputs ? "true" : "false");
  g.set("svd-blocks", go.svdBlocks ? "true" : "false");
  g.set("bond-gauge", go.bondGauge ? "true" : "false");
  g.set("remat", passes::rematPolicyName(go.callRemat));
  g.set("svd-topk-guards", go.svdTopkGuards ? "true" : "false");
  g.set("aux", joined(go.aux));
  pl.passes.push_back(std::move(g));
  return pl;
}

bool disabled(const TrgOptions &o, const char *pass) {
  const auto &off = o.passOptions.disabledPasses;
  return std::find(off.begin(), off.end(), pass) != off.end();
}

} // namespace

TrgPrograms::TrgPrograms(const TrgOptions &o) : o_(o) {
  passes::Pipeline user = passes::Pipeline::parse(trgPipeline(o), "--passes");
  checkTrgPipelineFlags(user, o.passOptions);
  pm_ = std::make_unique<passes::PassManager>(std::move(user), o.passOptions);
  if (!o.reference) engine_ = std::make_unique<rt::Engine>(o.width);
}

double TrgPrograms::runPasses(ir::Program &p, passes::InputState input, bool secondOrder) {
  auto t0 = Clock::now();
  if (!secondOrder) {
    pm_->run(p, input);
  } else {
    // The guards of a program differentiated twice come from its first grad (runGrad):
    // the pipeline's svd-topk-guards does not run on it again.
    pm_->run(p, pm_->pipeline().without("svd-topk-guards"), passes::PassRequirement::Optional, input);
  }
  return msSince(t0);
}

double TrgPrograms::runGrad(ir::Program &p, const passes::GradOptions &go, bool guardsPass,
                            passes::RematPolicy policy, passes::InputState input) {
  passes::Pipeline pl = gradPipeline(go);
  if (guardsPass && !disabled(o_, "svd-topk-guards"))
    for (const passes::PassInvocation &inv : pm_->pipeline().passes)
      if (inv.name() == "svd-topk-guards") pl.passes.push_back(inv);
  if (policy != passes::RematPolicy::Store) {
    passes::PassInvocation c(*passes::lookupPass("checkpoint"));
    c.set("policy", passes::rematPolicyName(policy));
    pl.passes.push_back(std::move(c));
  }
  auto t0 = Clock::now();
  pm_->run(p, pl, passes::PassRequirement::Required, input);
  return msSince(t0);
}

double TrgPrograms::runJvp(ir::Program &p, const passes::JvpOptions &jo, passes::InputState input) {
  passes::Pipeline pl;
  passes::PassInvocation j(*passes::lookupPass("jvp"));
  std::string wrt;
  for (const std::string &w : jo.wrt) wrt += (wrt.empty() ? "" : ";") + w;
  j.set("wrt", wrt);
  j.set("keep-outputs", jo.keepOutputs ? "true" : "false");
  pl.passes.push_back(std::move(j));
  auto t0 = Clock::now();
  pm_->run(p, pl, passes::PassRequirement::Required, input);
  return msSince(t0);
}

double TrgPrograms::runInline(ir::Program &p) {
  passes::Pipeline pl;
  pl.passes.emplace_back(*passes::lookupPass("inline"));
  auto t0 = Clock::now();
  pm_->run(p, pl, passes::PassRequirement::Required);
  return msSince(t0);
}

bool TrgPrograms::guardsWanted() const {
  if (disabled(o_, "svd-topk-guards")) return false;
  for (const passes::PassInvocation &inv : pm_->pipeline().passes)
    if (inv.name() == "svd-topk-guards") return true;
  return false;
}

void TrgPrograms::noteGroup(const std::string &g) {
  if (std::find(groupOrder_.begin(), groupOrder_.end(), g) == groupOrder_.end()) groupOrder_.push_back(g);
}

const ir::Program &TrgProgramInfo::program() const {
  return plan ? rt::planProgram(*plan) : unprepared;
}

int TrgPrograms::add(std::string group, std::string role, ir::Program p, size_t tracedOps,
                     double traceMs, double passesMs) {
  TrgProgramInfo info;
  info.group = std::move(group);
  info.role = std::move(role);
  info.tracedOps = tracedOps;
  info.ops = p.ops.size();
  for (const ir::Program &f : p.functions) info.ops += f.ops.size(); // a module: every function's
  info.traceMs = traceMs;
  info.passesMs = passesMs;
  // What an error names (the plan takes the program over).
  const std::string name = p.name;
  const bool einsum = std::any_of(p.ops.begin(), p.ops.end(),
                                  [](const ir::Op &op) { return op.kind == ir::OpKind::Einsum; });
  try {
    if (!o_.reference) {
      auto t0 = Clock::now();
      rt::PrepareOptions po;
      po.valueCheck = o_.valueCheck;
      po.fuseElementwise = o_.fuseElementwise;
      info.plan = rt::prepare(std::move(p), po);
      info.prepareMs = msSince(t0);
      // --dump-dir: the plan beside the program's last IR dump.
      if (const std::string dir = pm_->lastDumpDir(); !dir.empty())
        passes::writeFileOrThrow(dir + "/plan.txt", rt::describePlan(*info.plan), "--dump-dir");
    } else {
      ir::verifyOrThrow(p); // the reference evaluator does not verify: this is the one check
      info.unprepared = std::move(p);
    }
  } catch (const Error &e) {
    const std::string msg = errorText(e);
    // An einsum left in the program means the pipeline lost its order pass; a program
    // that does not verify, a pass that broke it (verified once, here, by default).
    const bool unverified = dynamic_cast<const VerifyError *>(&e) && !o_.passOptions.verifyEach;
    throw Error("error: trg: " + info.group + " (" + info.role + "), program " +
                ir::text::atName(name) + ": " + msg +
                (einsum && !o_.reference ? "\nnote: in tessel trg the pipeline (--passes, --disable-pass, "
                                           "--bisect-limit) must run the order pass on every program"
                                         : "") +
                (unverified ? "\nnote: run with --verify-each to find the pass that broke it" : ""));
  }
  progs_.push_back(std::move(info));
  return static_cast<int>(progs_.size()) - 1;
}

std::vector<ir::Tensor> TrgPrograms::run(int idx, const std::vector<ir::Tensor> &in,
                                         const std::string &where, double beta) {
  const TrgProgramInfo &pi = at(idx);
  try {
    if (o_.reference) return rt::evaluateReference(pi.unprepared, in);
    std::vector<ir::Tensor> out =
        profiling_ ? profEngine(idx).run(*pi.plan, in) : engine_->run(*pi.plan, in);
    if (profiling_) {
      if (profRuns_.size() <= static_cast<size_t>(idx)) profRuns_.resize(static_cast<size_t>(idx) + 1, 0);
      ++profRuns_[static_cast<size_t>(idx)];
    }
    // A module's plan: its interpreter's host tensors beside the engine's arena.
    ledger_.record(in, out, engineResidentBytes() + rt::moduleTensorBytes(*pi.plan));
    return out;
  } catch (const Error &e) {
    throw withContext(e, "trg: " + where + " (" + pi.group + ", " + pi.role +
                             "), beta = " + ir::text::formatDouble(beta));
  }
}

int64_t TrgPrograms::engineResidentBytes() const {
  int64_t b = engine_ ? engine_->residentBytes() : 0;
  for (const auto &e : profEngines_) b += e->residentBytes();
  return b;
}

void TrgPrograms::moduleProgress(const char *run, const ir::Program &p) {
  if (!progress_ || !engine_) return;
  struct Phase {
    std::string name;
    size_t steps = 0, done = 0;
  };
  auto phaseOf = [run](const ir::Op &op) {
    const llvm::StringRef loc(op.loc);
    const bool first = std::string(run) == "value+grad";
    if (loc.startswith("vjp vjp")) return std::string(run) + ": reverse of the backward";
    if (loc.startswith("vjp")) return std::string(run) + (first ? ": backward" : ": backward and its reverse");
    return std::string(run) + ": forward";
  };
  auto phases = std::make_shared<std::map<std::string, Phase>>();
  for (const ir::Op &op : p.ops)
    if (ir::hasCallee(op.kind)) {
      Phase &ph = (*phases)[phaseOf(op)];
      ph.name = phaseOf(op);
      ph.steps += op.kind == ir::OpKind::Scan ? static_cast<size_t>(ir::attr<ir::OpKind::Scan, "length">(op)) : 1;
    }
  auto hook = [this, phases, phaseOf](const ir::Op &op, int64_t) {
    Phase &ph = (*phases)[phaseOf(op)];
    stepDone(ph.name.c_str(), ++ph.done, ph.steps);
  };
  moduleHook_ = hook;
  engine_->setModuleStepHook(hook);
  for (auto &e : profEngines_) e->setModuleStepHook(hook);
}

TrgGroupInfo TrgPrograms::groupInfo(const std::string &g, int uses) const {
  TrgGroupInfo gi;
  gi.group = g;
  gi.uses = uses;
  for (const TrgProgramInfo &p : progs_)
    if (p.group == g) {
      gi.ops += p.ops;
      gi.compileMs += p.traceMs + p.passesMs;
      gi.prepareMs += p.prepareMs;
      if (p.plan) gi.peakLiveBytes = std::max(gi.peakLiveBytes, rt::peakLiveBytes(*p.plan));
    }
  return gi;
}

double TrgPrograms::compileMs() const {
  double s = 0;
  for (const TrgProgramInfo &p : progs_) s += p.traceMs + p.passesMs;
  return s;
}

double TrgPrograms::prepareMs() const {
  double s = 0;
  for (const TrgProgramInfo &p : progs_) s += p.prepareMs;
  return s;
}

size_t TrgPrograms::totalOps() const {
  size_t s = 0;
  for (const TrgProgramInfo &p : progs_) s += p.ops;
  return s;
}

rt::TruncatedSvdStats TrgPrograms::svdStats() const {
  rt::TruncatedSvdStats t;
  for (const TrgProgramInfo &p : progs_)
    if (p.plan) t += rt::planSvdStats(*p.plan);
  return t;
}

void TrgPrograms::setProfiling(bool on) {
  if (!engine_) return;
  profiling_ = on;
  for (auto &e : profEngines_) e->setProfiling(on);
}

rt::Engine &TrgPrograms::profEngine(int idx) {
  // Programs compiled after profiling was turned on (a derived schedule's classes, the
  // staged module, the probes) get theirs when they first run.
  while (profEngines_.size() <= static_cast<size_t>(idx)) {
    profEngines_.push_back(std::make_unique<rt::Engine>(o_.width));
    profEngines_.back()->setProfiling(true);
    if (progress_) profEngines_.back()->setModuleStepHook(moduleHook_);
  }
  return *profEngines_[static_cast<size_t>(idx)];
}

std::string TrgPrograms::profileReport(size_t top) const {
  if (!engine_ || profEngines_.empty()) return "";
  // The engine's table starts with "profile: N runs, X ms per run ..." (a module's: one
  // such table per segment that ran); rank programs by total time (Σ N·X), print a
  // summary line each (runs: this driver's runs of the program), then the tables of the
  // top three.
  struct Entry {
    const TrgProgramInfo *p;
    std::string table;
    long runs = 0;
    double perRun = 0;
  };
  std::vector<Entry> es;
  double total = 0;
  for (size_t i = 0; i < progs_.size() && i < profEngines_.size(); ++i) {
    const TrgProgramInfo &p = progs_[i];
    if (!p.plan) continue;
    Entry e{&p, profEngines_[i]->profileReport(*p.plan, top)};
    if (e.table.empty()) continue;
    double ms = 0;
    for (size_t at = e.table.find("profile: "); at != std::string::npos;
         at = e.table.find("profile: ", at + 1)) {
      long n = 0;
      double x = 0;
      if (std::sscanf(e.table.c_str() + at, "profile: %ld runs, %lf ms per run", &n, &x) == 2)
        ms += static_cast<double>(n) * x;
    }
    e.runs = static_cast<long>(i < profRuns_.size() ? profRuns_[i] : 0);
    e.perRun = e.runs > 0 ? ms / static_cast<double>(e.runs) : 0.0;
    total += ms;
    es.push_back(std::move(e));
  }
  std::stable_sort(es.begin(), es.end(), [](const Entry &a, const Entry &b) {
    return static_cast<double>(a.runs) * a.perRun > static_cast<double>(b.runs) * b.perRun;
  });
  std::string r;
  char line[256];
  for (const Entry &e : es) {
    double t = static_cast<double>(e.runs) * e.perRun;
    std::snprintf(line, sizeof line, "  %-14s %-20s %6ld runs  %9.3f ms/run  %10.3f ms  %5.1f%%\n",
                  e.p->group.c_str(), e.p->role.c_str(), e.runs, e.perRun, t,
                  total > 0 ? 100 * t / total : 0.0);
    r += line;
  }
  // The tables of the three costliest programs, and of every derivative program (the
  // staged module's segments are what a profile of --grad or --second is for, whatever
  // the value sweep's small programs cost on a given run).
  for (size_t i = 0; i < es.size(); ++i) {
    if (i >= 3 && es[i].p->role == "value") continue;
    r += "== " + es[i].p->group + " (" + es[i].p->role + "): " +
         ir::text::atName(es[i].p->program().name) + "\n" + es[i].table;
    if (r.back() != '\n') r += "\n";
  }
  return r;
}

} // namespace tessel::frontend
