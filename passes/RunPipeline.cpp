//===- passes/RunPipeline.cpp - What runs before prepare, for the CLI and Python -===//
#include "passes/RunPipeline.h"

#include <chrono>
#include <cstdio>

#include "passes/Order.h"
#include "passes/PassManager.h"

namespace tessel::passes {

RunPreparation prepareForRun(ir::Program &p, const std::string &order, const std::string &pipeline,
                             const char *flag, const PassManagerOptions &instrumentation) {
  RunPreparation r;
  r.note = lowerEinsumsForRuntime(p, order);
  Pipeline pl = Pipeline::parse(pipeline, flag);
  if (pl.passes.empty()) return r;
  const size_t before = p.ops.size();
  const auto t0 = std::chrono::steady_clock::now();
  PassManager(pl, instrumentation).run(p);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  char buf[96];
  std::snprintf(buf, sizeof buf, ": %zu -> %zu ops, %.3f ms", before, p.ops.size(), ms);
  r.passesLine = "passes " + pipeline + buf;
  return r;
}

} // namespace tessel::passes
