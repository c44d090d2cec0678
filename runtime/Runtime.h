//===- runtime/Runtime.h - prepare, the fixed-width engine, reference evaluator ===//
//
// Data flow:  ir::Program --prepare--> Plan --Engine(width).run(plan, inputs)--> outputs
// Compile and prepare never happen inside run(); run() returns only when the outputs
// are in host memory.
//
// Kernels (runtime/Kernels.cpp): elementwise ops, reductions (each output summed /
// maxed in row-major order of the reduced indices, the reference's order), strided
// copies for broadcast_in_dim / transpose / slice (2-D tiles for transposes), zero
// padding, dot_general through cblas_dgemm (operands read in GEMM form with transpose
// flags when their layout allows, else transposed once into a temporary), svd through
// LAPACKE_dgesdd_work (jobz='S', or 'N' when U and Vt are unused), computed as the
// column-major SVD of Aᵀ so that no transposition is needed. reshape and
// stop_gradient are aliases; constants and iota tables are plan data.
//
// Determinism: every instruction is split into a number of chunks fixed by its shapes
// (never by the width), each computed the same way whichever thread runs it, and BLAS
// runs single-threaded, so outputs are bitwise identical for every engine width.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "ir/Program.h"
#include "ir/Type.h"

namespace tessel::rt {

using ir::Tensor;

/// Which values the engine checks after every op (PrepareOptions::valueCheck).
enum class ValueCheck {
  Off,
  Nan,      ///< --check-nan: NaN stops the run; ±inf is a legal value (e.g. a −inf mask)
  NanOrInf, ///< --check-inf: NaN and ±inf stop the run
};

/// "--check-nan" / "--check-inf" (the prefix of the errors), "" for Off.
const char *valueCheckFlag(ValueCheck c);

/// The stages of prepare, in the order they run (runtime/PrepareStages.h): the fusion
/// plan (which values are computed inside their readers' loops), lowering to kernel
/// instructions, buffer assignment (in-place decisions, arena slots), the schedule
/// (final dependencies, the ready set).
enum class PrepareStage { Fuse, Lower, Assign, Schedule };
/// "fuse", "lower", "assign", "schedule".
const char *prepareStageName(PrepareStage s);
/// The stage named `name`. Throws tessel::Error "<what>: unknown prepare stage 'x'
/// (allowed: fuse, lower, assign, schedule)".
PrepareStage parsePrepareStage(const std::string &name, const std::string &what);

struct PrepareOptions {
  /// Check every op's outputs after it runs; the first NaN (with Nan) or NaN/inf (with
  /// NanOrInf) stops the run with an error naming the op, its location, the element and
  /// which operands held NaN or inf.
  ValueCheck valueCheck = ValueCheck::Off;
  /// Reuse arena memory once every reader of a value has run (and run elementwise ops
  /// and gesdd in place on operands that die there; not with a value check). Off: one
  /// buffer per value (for tests and debugging).
  bool reuseBuffers = true;
  /// Loop fusion: a chain of elementwise ops (and broadcasts of one value into them)
  /// whose intermediates nothing else reads runs as one instruction, one loop over the
  /// data without buffers for the intermediates (`fused` in describePlan). Results are
  /// bitwise the same as unfused. Off with a value check (every op's results are
  /// checked), or here (`--no-fusion`).
  bool fuseElementwise = true;
  /// Instrumentation (`tessel prepare` / `tessel run --print-plan-after`): after each
  /// stage listed here, the plan as that stage left it is written to planLog (nullptr =
  /// std::cerr), once per plain plan (a module: once per segment): after fuse the fused
  /// loops (each loop's ops and the buffers it reads), after the others the instruction
  /// list as describePlan prints it, storage "unassigned" before assign and deps "-"
  /// before schedule.
  std::vector<PrepareStage> printPlanAfter;
  std::ostream *planLog = nullptr;
};

/// A prepared program: flat instruction list in a valid order, kernel plans
/// (permutations, GEMM dimensions, gesdd workspace sizes, copy strides), dependency
/// counts, arena offsets with reuse, peak live bytes. Immutable after prepare(); one
/// Plan may be run by several engines (also at the same time). See runtime/Plan.h.
class Plan;

/// Lowers a program to a Plan (verifies it first: tessel::VerifyError). Throws
/// tessel::Error naming the op for an einsum (lower it with passes::runOrder first;
/// `tessel prepare` / `tessel run` do so) and for a LAPACK workspace query failure.
/// Buffer reuse never adds a dependency that lengthens the critical path, so
/// independent ops (the two SVDs of a TRG step) stay concurrent. Up to 8192
/// instructions buffers are placed greedily by size with ancestor sets; larger
/// programs place them in list order (runtime/PrepareStages.h, kMaxAncestorInsts).
std::shared_ptr<const Plan> prepare(const ir::Program &p, const PrepareOptions &opts = {});
/// prepare() of a program the plan takes over (planProgram gives it back), without a copy.
std::shared_ptr<const Plan> prepare(ir::Program &&p, const PrepareOptions &opts = {});

/// Human-readable (text) or JSON listing of a plan: one instruction per line with its
/// kernel, op, results and operands with their storage (arena+BYTES, inputN, constN,
/// outputN = written into the returned tensor), dependencies, chunks, bytes written,
/// in-place marks and kernel details; then the outputs, arena bytes and peak live bytes.
std::string describePlan(const Plan &plan, bool json = false);
/// Peak number of live buffer bytes of the plan's schedule (arena values, temporaries
/// and outputs the runtime writes; not the caller's inputs or constants), in list
/// order.
int64_t peakLiveBytes(const Plan &plan);
/// A module's plan: the most bytes of host tensors its interpreter holds at once beside
/// the engine's arena (runtime/ModulePlan.h); 0 for a plain plan.
int64_t moduleTensorBytes(const Plan &plan);
/// Bytes of the arena an engine needs for this plan (buffers at 64-byte aligned
/// offsets, overlapping when their lifetimes do not); an engine's one arena is the
/// largest of these over the plans it runs. With buffer reuse it is close to
/// peakLiveBytes (parallel branches may keep it somewhat above).
int64_t arenaBytes(const Plan &plan);
/// Bytes of the iota tables the plan built at prepare (constants it owns; 0 for most).
int64_t tableBytes(const Plan &plan);
/// Number of instructions (kernel calls) of the plan; aliases cost none.
size_t planSize(const Plan &plan);
/// The program a plan was prepared from (its input/output names and types).
const ir::Program &planProgram(const Plan &plan);

/// An engine of fixed width (number of threads that execute ops; width 1 runs on the
/// calling thread, width W uses the calling thread and W-1 workers). Independent
/// instructions run concurrently; large ones are split into chunks claimed one at a
/// time, so a preempted thread delays at most one chunk. Idle workers block on a
/// condition variable after a spin of a few microseconds. Results are bitwise
/// identical for every width. Not reentrant: one run() at a time per engine.
/// Throws tessel::Error for a width outside [1, 256].
class Engine {
public:
  explicit Engine(int width);
  ~Engine();
  Engine(const Engine &) = delete;
  Engine &operator=(const Engine &) = delete;

  int width() const;
  /// Runs the plan. Validates input count and shapes (tessel::Error naming the input).
  /// A kernel failure (NaN/inf input to svd, LAPACK info != 0) throws tessel::Error
  /// naming the op (kind, results, loc, position); the engine stays usable. When
  /// several ops would fail, the error is the first one's in list order, as at width 1,
  /// whatever the width (a failed parallel run is run again serially). The engine's
  /// one arena grows to the largest plan it has run and is shared by all plans; the
  /// first run of a plan also allocates its small tables. Later runs allocate only
  /// the returned tensors.
  std::vector<Tensor> run(const Plan &plan, const std::vector<Tensor> &inputs);

  /// Bytes of the arena this engine keeps between runs: one buffer shared by every
  /// plan it runs, the largest arenaBytes(plan) so far rounded up to 64 bytes. Its
  /// small per-plan tables (pointers, counters) are not counted. This is bookkeeping of
  /// what the engine allocated, not a measurement.
  /// Called by the module interpreter (runtime/ModulePlan.h) before each call and each
  /// scan iteration of a module's entry function, with the op and the iteration (0 for
  /// a call); an exception it throws ends the run. Empty: no calls.
  void setModuleStepHook(std::function<void(const ir::Op &op, int64_t iteration)> hook);
  const std::function<void(const ir::Op &, int64_t)> &moduleStepHook() const;
  int64_t residentBytes() const;

  /// Profiling: when on, run() adds the time spent in each instruction (summed over
  /// its chunks, so CPU time at width > 1) to per-plan counters. Costs two clock reads
  /// per chunk, and the engine then keeps the state of every plan it runs (a module's
  /// segments included) instead of the few it caches otherwise. Off by default.
  void setProfiling(bool on);
  /// Table of the profiled runs of `plan` on this engine: totals per kernel kind, then
  /// one line per instruction (mean ms per run, share of the total, first start / last
  /// end in the last run and the threads that ran it, index, kernel, op, first result,
  /// loc), sorted by time, at most `top` lines (0 = all). Empty if nothing was profiled.
  std::string profileReport(const Plan &plan, size_t top = 0) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Counters of the truncated-SVD kernels since the process started (all engines and
/// threads; read a snapshot before and after a run to attribute them). A fallback is a
/// call that ended in a full LAPACK dgesdd because the iteration would not converge
/// within its budget (runtime/TruncatedSvd.h); guard computations of the complement
/// kernel count as top-k calls. complementBroadened counts the complement solves whose
/// tail took the complex shift s_j + iδ (a gap within 10⁵·δ of the broadening).
struct TruncatedSvdStats {
  int64_t topkCalls = 0, topkIterations = 0, topkFallbacks = 0;
  int64_t complementCalls = 0, complementIterations = 0, complementFallbacks = 0;
  int64_t complementBroadened = 0;
  /// Adds another set of counts (of other plans, or another driver's).
  TruncatedSvdStats &operator+=(const TruncatedSvdStats &o) {
    topkCalls += o.topkCalls, topkIterations += o.topkIterations, topkFallbacks += o.topkFallbacks;
    complementCalls += o.complementCalls, complementIterations += o.complementIterations;
    complementFallbacks += o.complementFallbacks, complementBroadened += o.complementBroadened;
    return *this;
  }
};
TruncatedSvdStats truncatedSvdStats();
/// The same counters for the runs of one plan only (by any engine, any thread).
TruncatedSvdStats planSvdStats(const Plan &plan);

/// Simple op-by-op evaluation of a program (no plan, no threads, no BLAS), for
/// differential tests and gradcheck. Every op of the table, einsum included (n-ary,
/// repeated indices / traces, scalar outputs; naive summation over all indices, so
/// keep einsums small). svd calls LAPACKE_dgesdd the same way as the engine, so signs
/// of singular vectors agree. Validates inputs like Engine::run.
std::vector<Tensor> evaluateReference(const ir::Program &p, const std::vector<Tensor> &inputs);

/// "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ... SkylakeX ..., 1 thread" — the
/// BLAS/LAPACK library actually loaded (openblas_get_config()) and its thread count.
/// The runtime pins OpenBLAS to one thread (openblas_set_num_threads(1)) at first use.
std::string blasInfo();

} // namespace tessel::rt
