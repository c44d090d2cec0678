//===- runtime/ModulePlan.h - Preparing and running a module ---------------------===//
//
// A module (a program with functions, ir/Program.h) is prepared without inlining: each
// function is cut at its call and scan ops into straight-line segments, each segment is
// an ordinary program prepared into a Plan, and the module interpreter (Engine::run on
// a module's plan) runs a function as its steps in order: a segment on the engine, a
// call by running the callee, a scan by running its body once per iteration (slicing
// the xs, stacking the ys). So the work of prepare is that of the functions, whatever
// the trip counts, and the same engine (its width and arena) runs every segment.
//
// Values that cross a segment boundary (the segment's inputs and outputs, a call's
// arguments and results, a scan's carries) are host tensors owned by the interpreter,
// each released after the step that reads it last: a step that reads a value last gets
// it moved in (a carry, a residual read by the backward), an earlier reader a copy; a
// scan slices its xs (a copy per iteration) and writes its ys into stacked tensors.
// Plan::moduleTensorBytes is the most bytes of them held at once, computed at prepare
// by the same rules (the engine's arena comes on top). Results are bitwise those of the
// inlined program (the same ops in the same order, each segment's kernels planned as in
// the inlined one, except for fusion and buffer reuse across a boundary, which do not
// change values).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/MemoryLimit.h"
#include "runtime/Plan.h"

namespace tessel::rt {

/// A straight-line piece of a function: its plan and which values of the function are
/// its inputs and outputs.
struct ModuleSegment {
  std::shared_ptr<const Plan> plan;
  std::vector<ir::ValueId> inputs, outputs;
};

/// One step of a function: a segment, or the call/scan op at `op`.
struct ModuleStep {
  enum class Kind { Segment, Call, Scan } kind = Kind::Segment;
  size_t index = 0;  ///< segment index, or op index for a call or scan
  size_t callee = 0; ///< function index of a call's or scan's callee
  /// The values this step reads last (none of them an output of the function): moved
  /// into the step, released after it.
  std::vector<ir::ValueId> dies;
};

struct ModuleFunction {
  /// The function: one of the plan's program's functions, or its entry (the plan owns
  /// the program and is neither copied nor moved, so the pointer stays valid).
  const ir::Program *fn = nullptr;
  std::vector<ModuleStep> steps;
  std::vector<ModuleSegment> segments;
};

/// The prepared module: its functions in order, the entry last.
struct ModuleExec {
  std::vector<ModuleFunction> functions;
};

/// Prepares a module (p.functions non-empty) that rt::prepare has verified and checked
/// against the memory limit `mem`: a Plan whose `module` is set.
std::shared_ptr<const Plan> prepareModule(ir::Program p, const PrepareOptions &opts,
                                          const MemoryLimit &mem);

/// rt::prepare of a plain program (no functions) known to verify: lower, assign buffers,
/// schedule, and check the plan against `mem`. A module's segments are prepared so (they
/// are the verified module's ops), without verifying and reading the limit again per
/// segment.
std::shared_ptr<const Plan> preparePlain(ir::Program p, const PrepareOptions &opts,
                                         const MemoryLimit &mem);

class Engine;
/// Runs a module's plan on `e` (Engine::run does, for a plan whose `module` is set).
std::vector<Tensor> runModulePlan(Engine &e, const Plan &plan, const std::vector<Tensor> &inputs);

/// Human-readable listing of a module's plan: per function its steps, each segment's
/// plan listing (describePlan) indented under it.
std::string describeModulePlan(const Plan &plan);

} // namespace tessel::rt
