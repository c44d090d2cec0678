//===- tools/RuntimeCommon.h - Shared by `tessel prepare`, `run` and `trg` ------===//
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include <vector>

#include "ir/Program.h"
#include "passes/Order.h"
#include "passes/RunPipeline.h"
#include "runtime/Runtime.h"
#include "tools/PassFlags.h"

namespace tessel::tools {

using passes::lowerEinsumsForRuntime;

/// The prepare flags of `tessel prepare`, `run` and `trg`: --check-nan and --check-inf
/// (which values stop a run, rt::ValueCheck; `names` says what the error names, e.g.
/// "the op, its location and which operands held NaN or inf") and --no-fusion.
struct PrepareFlags {
  bool nan = false, inf = false, noFusion = false;
  void addTo(CLI::App &cmd, const std::string &names) {
    cmd.add_flag("--check-nan", nan,
                 "check every op's results for NaN; the first one stops with an error naming " +
                     names + " (±inf is a legal value, e.g. a -inf mask)");
    cmd.add_flag("--check-inf", inf,
                 "like --check-nan, but ±inf stops too (the first NaN or inf)");
    cmd.add_flag("--no-fusion", noFusion,
                 "one instruction per elementwise op (no loop fusion of elementwise chains; "
                 "results are bitwise the same either way)");
  }
  rt::ValueCheck value() const {
    return inf ? rt::ValueCheck::NanOrInf : nan ? rt::ValueCheck::Nan : rt::ValueCheck::Off;
  }
  rt::PrepareOptions options() const {
    rt::PrepareOptions o;
    o.valueCheck = value();
    o.fuseElementwise = !noFusion;
    return o;
  }
};

/// The pipeline `tessel run` and `tessel prepare` apply before preparing (the same as
/// tessel.prepare's: passes/RunPipeline.h).
using passes::kRunPipeline;

/// The pass and plan flags of `tessel run` and `tessel prepare`: --passes (the pipeline
/// applied to the program after its einsums are lowered, before prepare; default
/// kRunPipeline, "" = none: the program exactly as given) with every instrumentation
/// flag of `tessel opt` (tools/PassFlags.h: --print-ir-after-all, --dump-dir, ...), and
/// --print-plan-after=STAGE[,..] (the plan after prepare's fuse, lower, assign or
/// schedule stage, to stderr).
struct RunPassesFlag {
  PassFlags flags;
  std::vector<std::string> printPlanAfter;
  void addTo(CLI::App &cmd);
  /// The pipeline --passes gives (kRunPipeline when it is not given).
  std::string pipeline() const { return flags.passesGiven ? flags.passes : std::string(kRunPipeline); }
  /// Lowers `p`'s einsums by `order` and runs the pipeline on it with the
  /// instrumentation of the flags (passes::prepareForRun, the path tessel.prepare takes
  /// too); prints the canonical pipeline first with --print-pipeline.
  passes::RunPreparation apply(ir::Program &p, const std::string &order) const;
  /// Adds --print-plan-after's stages to `o` (throws tessel::Error for an unknown stage).
  void addPlanPrinting(rt::PrepareOptions &o) const;
};

/// The inputs of `p` from `--input NAME=VALUE` arguments: VALUE is a .npy file
/// (little-endian float64, C order) or inline JSON (a number or a nested list). Every
/// input exactly once; with randomSeed >= 0, inputs not given are filled with uniform
/// values in [-1, 1) from that seed. Throws tessel::Error naming the input for a
/// missing, unknown, repeated, unreadable or mis-shaped input.
std::vector<ir::Tensor> loadProgramInputs(const ir::Program &p, const std::vector<std::string> &args,
                                          int64_t randomSeed = -1);

/// How `tessel run` shows an output's name: ir::text::percentName without the '%' (bare,
/// or quoted with escapes; control bytes and invalid UTF-8 never reach the terminal).
std::string displayOutputName(const std::string &name);

/// The file name `tessel run --output-dir` writes output `name` to: `<name>.npy`, with
/// every byte outside [A-Za-z0-9_+-.] and a leading '.' written as %XX (so "/", "..",
/// NUL and control bytes cannot leave the directory or cut the name, and distinct names
/// give distinct files). Throws tessel::Error when the result exceeds the 255-byte limit
/// of a file name.
std::string npyFileName(const std::string &name);

} // namespace tessel::tools
