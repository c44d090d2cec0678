//===- runtime/Prepare.cpp - prepare(): a Program to a Plan --------------------===//
//
// The driver of the stages in PrepareStages.h: verify, refuse programs that cannot
// fit in this machine's memory, lower, build the dependency graph, assign buffers,
// finish the schedule. prepare() runs once per program, outside run().
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <atomic>
#include <cstdio>

#include <unistd.h>

#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "ir/Verifier.h"
#include "runtime/PrepareStages.h"

namespace tessel::rt {

namespace {

std::atomic<uint64_t> nextPlanId{1};

/// Physical memory of this machine in bytes (sysconf), or INT64_MAX if unknown.
int64_t physicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return INT64_MAX;
  return static_cast<int64_t>(pages) * static_cast<int64_t>(page);
}

std::string gib(int64_t b) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g GiB", static_cast<double>(b) / double(int64_t(1) << 30));
  return buf;
}

/// A program whose values cannot fit in this machine's memory is refused before any
/// buffer is sized or allocated (the verifier only guarantees byte sizes fit int64):
/// a clear error naming the value and its op instead of std::bad_alloc or the OOM
/// killer at run time. Also keeps the plan's byte sums far from int64 overflow.
void checkValuesFitInMemory(const ir::Program &p) {
  const int64_t mem = physicalMemoryBytes();
  auto tooBig = [&](int64_t bytes) { return bytes > mem; };
  for (ir::ValueId v : p.inputs)
    if (tooBig(p.type(v).bytes()))
      throw Error("error: prepare: input " + valueDisplayName(p, v) + " " + p.type(v).str() +
                  " needs " + std::to_string(p.type(v).bytes()) + " bytes, more than this machine's " +
                  gib(mem) + " of memory");
  for (const ir::Op &op : p.ops)
    for (ir::ValueId v : op.results)
      if (tooBig(p.type(v).bytes()))
        throw Error("error: prepare: " + describeOp(p, op) + ": result " + valueDisplayName(p, v) +
                    " " + p.type(v).str() + " needs " + std::to_string(p.type(v).bytes()) +
                    " bytes, more than this machine's " + gib(mem) + " of memory");
}

/// The buffers an engine allocates for one run (arena + output tensors) must fit too.
void checkPlanFitsInMemory(const Plan &P) {
  const int64_t mem = physicalMemoryBytes();
  int64_t outBytes = 0;
  for (int32_t v : P.outputValue) outBytes += P.values[v].type.bytes();
  int64_t arena = P.arenaElems * 8;
  if (arena > mem - std::min(mem, outBytes))
    throw Error("error: prepare: program " + ir::text::atName(P.program.name) + " needs " + gib(arena) +
                " of buffers (peak live " + gib(P.peakLiveBytes) + ") plus " + gib(outBytes) +
                " of outputs per run, more than this machine's " + gib(mem) + " of memory");
}

} // namespace

std::shared_ptr<const Plan> prepare(const ir::Program &p, const PrepareOptions &opts) {
  ensureBlasSingleThreaded();
  ir::verifyOrThrow(p);
  checkValuesFitInMemory(p);
  auto plan = std::make_shared<Plan>();
  plan->id = nextPlanId.fetch_add(1);
  plan->program = p;
  plan->options = opts;
  prep::lower(*plan);
  prep::DepGraph deps(*plan, opts.reuseBuffers && plan->insts.size() <= prep::kMaxAncestorInsts);
  plan->usedAncestors = deps.hasAncestors();
  prep::assignBuffers(*plan, deps);
  prep::finishSchedule(*plan, deps);
  checkPlanFitsInMemory(*plan);
  return plan;
}

int64_t peakLiveBytes(const Plan &plan) { return plan.peakLiveBytes; }
int64_t arenaBytes(const Plan &plan) { return plan.arenaElems * 8; }
const ir::Program &planProgram(const Plan &plan) { return plan.program; }
size_t planSize(const Plan &plan) { return plan.insts.size(); }

} // namespace tessel::rt
