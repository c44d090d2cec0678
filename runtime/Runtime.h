//===- runtime/Runtime.h - prepare, the fixed-width engine, reference evaluator ===//
//
// Data flow:  ir::Program --prepare--> Plan --Engine(width).run(plan, inputs)--> outputs
// Compile and prepare never happen inside run(); run() returns only when the outputs
// are in host memory.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/Program.h"
#include "ir/Type.h"

namespace tessel::rt {

using ir::Tensor;

struct PrepareOptions {
  /// Check every op's outputs for NaN/inf after it runs; the first one found stops the
  /// run with an error naming the op, its location and which inputs were finite.
  bool checkNan = false;
  /// Reuse arena slots once their values are dead (and run elementwise ops and gesdd
  /// in place on operands that die there). Off: one slot per value (for tests and
  /// debugging).
  bool reuseBuffers = true;
};

/// A prepared program: flat instruction list in a valid order, kernel plans
/// (permutations, GEMM dimensions, gesdd workspace sizes, broadcast strides),
/// dependency counts, buffer slots with reuse, peak live bytes. Immutable after
/// prepare(); one Plan may be run by several engines.
class Plan;

/// Lowers a verified program to a Plan. Throws tessel::Error for ops the runtime cannot
/// execute (e.g. an einsum the ordering pass has not lowered), naming the op.
std::shared_ptr<const Plan> prepare(const ir::Program &p, const PrepareOptions &opts = {});

/// Human-readable (text) or JSON listing of a plan: one instruction per line with its
/// kernel, input/output slots, dependencies, bytes, and the peak live bytes.
std::string describePlan(const Plan &plan, bool json = false);
/// Peak number of live buffer bytes of the plan's schedule (arena values, temporaries
/// and outputs the runtime writes; not the caller's inputs or constants), in list
/// order.
int64_t peakLiveBytes(const Plan &plan);
/// Bytes of the arena an engine allocates for this plan (sum of slot sizes, each
/// rounded to 64 bytes). With buffer reuse it is close to peakLiveBytes.
int64_t arenaBytes(const Plan &plan);
/// Number of instructions (kernel calls) of the plan; aliases cost none.
size_t planSize(const Plan &plan);
/// The program a plan was prepared from (its input/output names and types).
const ir::Program &planProgram(const Plan &plan);

/// An engine of fixed width (number of threads that execute ops; width 1 runs on the
/// calling thread). Results are bitwise identical for every width. Not reentrant: one
/// run() at a time per engine.
class Engine {
public:
  explicit Engine(int width);
  ~Engine();
  Engine(const Engine &) = delete;
  Engine &operator=(const Engine &) = delete;

  int width() const;
  /// Runs the plan. Validates input count and shapes (tessel::Error naming the input).
  /// A kernel failure (e.g. LAPACK no convergence) throws tessel::Error naming the op;
  /// the engine stays usable.
  std::vector<Tensor> run(const Plan &plan, const std::vector<Tensor> &inputs);

  /// Profiling: when on, run() adds the time spent in each instruction (summed over
  /// its chunks, so CPU time at width > 1) to per-plan counters. Costs two clock reads
  /// per chunk. Off by default.
  void setProfiling(bool on);
  /// Table of the profiled runs of `plan` on this engine: one line per instruction
  /// (index, kernel, op, first result, loc), mean ms per run and share of the total,
  /// sorted by time, at most `top` lines (0 = all). Empty if nothing was profiled.
  std::string profileReport(const Plan &plan, size_t top = 0) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Simple op-by-op evaluation of a program (no plan, no threads), for differential
/// tests and gradcheck. Supports every op of the table except einsum with more than
/// two operands is evaluated directly (naive summation) too.
std::vector<Tensor> evaluateReference(const ir::Program &p, const std::vector<Tensor> &inputs);

/// "OpenBLAS 0.3.21 (pthread), 1 thread" — the BLAS/LAPACK library actually loaded and
/// its thread count. The runtime pins BLAS to one thread at first use.
std::string blasInfo();

} // namespace tessel::rt
