//===- runtime/Prepare.cpp - prepare(): a Program to a Plan --------------------===//
//
// The driver of the stages in PrepareStages.h: verify, refuse programs that cannot
// fit in this machine's memory, decide the fusion, lower, build the dependency graph,
// assign buffers, finish the schedule (printing the plan after the stages
// PrepareOptions::printPlanAfter names). prepare() runs once per program, outside run().
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>

#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "ir/Verifier.h"
#include "runtime/MemoryLimit.h"
#include "runtime/ModulePlan.h"
#include "runtime/PrepareStages.h"

namespace tessel::rt {

namespace {

std::atomic<uint64_t> nextPlanId{1};

/// A program whose values cannot fit in the memory this process may still take
/// (runtime/MemoryLimit.h: the machine's, ulimit, cgroup) is refused before any buffer
/// is sized or allocated (the verifier only guarantees byte sizes fit int64): a clear
/// error naming the value, its op and the limit instead of std::bad_alloc or the OOM
/// killer at run time. Also keeps the plan's byte sums far from int64 overflow. The
/// iota tables, which lowering materialises, count together.
void checkValuesFitInMemory(const ir::Program &p, const MemoryLimit &mem) {
  auto tooBig = [&](int64_t bytes) { return bytes > mem.bytes; };
  for (ir::ValueId v : p.inputs)
    if (tooBig(p.type(v).bytes()))
      throw Error("error: prepare: input " + valueDisplayName(p, v) + " " + p.type(v).str() +
                  " needs " + std::to_string(p.type(v).bytes()) + " bytes, more than " + mem.what);
  int64_t tables = 0;
  for (const ir::Op &op : p.ops) {
    for (ir::ValueId v : op.results)
      if (tooBig(p.type(v).bytes()))
        throw Error("error: prepare: " + describeOp(p, op) + ": result " + valueDisplayName(p, v) +
                    " " + p.type(v).str() + " needs " + std::to_string(p.type(v).bytes()) +
                    " bytes, more than " + mem.what);
    if (op.kind == ir::OpKind::Iota) {
      tables += p.type(op.results[0]).bytes();
      if (tooBig(tables))
        throw Error("error: prepare: the iota tables of program " + ir::text::atName(p.name) +
                    " (built at prepare) need " + formatGiB(tables) + " up to " +
                    describeOp(p, op) + ", more than " + mem.what);
    }
  }
}

/// The buffers an engine allocates for one run (arena + output tensors) and the iota
/// tables the plan holds must fit too.
void checkPlanFitsInMemory(const Plan &P, const MemoryLimit &mem) {
  int64_t outBytes = 0;
  for (int32_t v : P.outputValue) outBytes += P.values[v].type.bytes();
  const int64_t arena = P.arenaElems * 8, tables = tableBytes(P);
  if (arena > mem.bytes - std::min(mem.bytes, outBytes + tables))
    throw Error("error: prepare: program " + ir::text::atName(P.program.name) + " needs " +
                formatGiB(arena) + " of buffers (peak live " + formatGiB(P.peakLiveBytes) + ") plus " +
                formatGiB(outBytes) + " of outputs per run" +
                (tables > 0 ? " and " + formatGiB(tables) + " of iota tables" : std::string()) +
                ", more than " + mem.what);
}

} // namespace

std::shared_ptr<const Plan> prepare(const ir::Program &p, const PrepareOptions &opts) {
  return prepare(ir::Program(p), opts);
}

std::shared_ptr<const Plan> prepare(ir::Program &&p, const PrepareOptions &opts) {
  ensureBlasSingleThreaded();
  ir::verifyOrThrow(p);
  const MemoryLimit mem = memoryLimit();
  // A module: every value of every function (a scan's stacked outputs too) must fit.
  for (const ir::Program &f : p.functions) checkValuesFitInMemory(f, mem);
  checkValuesFitInMemory(p, mem);
  if (!p.functions.empty()) return prepareModule(std::move(p), opts, mem);
  return preparePlain(std::move(p), opts, mem);
}

std::shared_ptr<const Plan> preparePlain(ir::Program p, const PrepareOptions &opts,
                                         const MemoryLimit &mem) {
  auto plan = std::make_shared<Plan>();
  plan->id = nextPlanId.fetch_add(1);
  plan->program = std::move(p);
  plan->options = opts;
  auto after = [&](PrepareStage stage, auto &&text) {
    const auto &want = opts.printPlanAfter;
    if (std::find(want.begin(), want.end(), stage) == want.end()) return;
    std::ostream &os = opts.planLog ? *opts.planLog : std::cerr;
    os << "// -----// plan after " << prepareStageName(stage) << " (" << ir::text::atName(plan->program.name)
       << ") //----- //\n"
       << text() << std::flush;
  };
  const prep::Fusion fusion(plan->program, opts.fuseElementwise && opts.valueCheck == ValueCheck::Off);
  after(PrepareStage::Fuse, [&] { return prep::describeFusion(plan->program, fusion); });
  prep::lower(*plan, fusion);
  after(PrepareStage::Lower, [&] { return prep::describePlanStage(*plan, PrepareStage::Lower); });
  prep::DepGraph deps(*plan, opts.reuseBuffers && plan->insts.size() <= prep::kMaxAncestorInsts);
  plan->usedAncestors = deps.hasAncestors();
  prep::assignBuffers(*plan, deps);
  after(PrepareStage::Assign, [&] { return prep::describePlanStage(*plan, PrepareStage::Assign); });
  prep::finishSchedule(*plan, deps);
  after(PrepareStage::Schedule, [&] { return prep::describePlanStage(*plan, PrepareStage::Schedule); });
  checkPlanFitsInMemory(*plan, mem);
  return plan;
}

const char *prepareStageName(PrepareStage s) {
  switch (s) {
  case PrepareStage::Fuse: return "fuse";
  case PrepareStage::Lower: return "lower";
  case PrepareStage::Assign: return "assign";
  case PrepareStage::Schedule: return "schedule";
  }
  return "?";
}

PrepareStage parsePrepareStage(const std::string &name, const std::string &what) {
  for (PrepareStage s : {PrepareStage::Fuse, PrepareStage::Lower, PrepareStage::Assign, PrepareStage::Schedule})
    if (name == prepareStageName(s)) return s;
  throw Error("error: " + what + ": unknown prepare stage '" + ir::text::clipForMessage(name) +
              "' (allowed: fuse, lower, assign, schedule)");
}

int64_t peakLiveBytes(const Plan &plan) { return plan.peakLiveBytes; }
int64_t arenaBytes(const Plan &plan) { return plan.arenaElems * 8; }
int64_t moduleTensorBytes(const Plan &plan) { return plan.moduleTensorBytes; }
TruncatedSvdStats planSvdStats(const Plan &plan) {
  auto get = [&](size_t i) {
    int64_t n = plan.svdCounts[i].load(std::memory_order_relaxed);
    if (plan.module)
      for (const ModuleFunction &f : plan.module->functions)
        for (const ModuleSegment &seg : f.segments)
          n += seg.plan->svdCounts[i].load(std::memory_order_relaxed);
    return n;
  };
  TruncatedSvdStats s;
  s.topkCalls = get(0), s.topkIterations = get(1), s.topkFallbacks = get(2);
  s.complementCalls = get(3), s.complementIterations = get(4), s.complementFallbacks = get(5);
  s.complementBroadened = get(6);
  return s;
}

int64_t tableBytes(const Plan &plan) {
  int64_t b = 0;
  for (const auto &t : plan.ownedConstants) b += static_cast<int64_t>(t.size()) * 8;
  if (plan.module)
    for (const ModuleFunction &f : plan.module->functions)
      for (const ModuleSegment &seg : f.segments) b += tableBytes(*seg.plan);
  return b;
}
const ir::Program &planProgram(const Plan &plan) { return plan.program; }
size_t planSize(const Plan &plan) {
  size_t n = plan.insts.size();
  if (plan.module)
    for (const ModuleFunction &f : plan.module->functions)
      for (const ModuleSegment &s : f.segments) n += planSize(*s.plan);
  return n;
}

} // namespace tessel::rt
