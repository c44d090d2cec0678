//===- passes/PassManager.h - Pass registry, pipelines, instrumented driver ----===//
//
// Three parts:
//   * the registry (passes/PassRegistry.cpp) lists every pass: name, one-line help, and
//     its options, declared once against the pass's options struct
//     (passes/PassOptions.h). It drives the pipeline parser (`--passes=`), the
//     canonical pipeline text, `--list-passes` and the docs, as MLIR's Passes.td /
//     LLVM's PassRegistry.def do;
//   * a Pipeline is a list of PassInvocations, each a pass with its options struct;
//   * PassManager::run runs a pipeline: for each pass it asks the instrumentations
//     whether to run it, calls their before hooks, runs the pass, and calls their
//     after (or failed) hooks. Every flag below is one instrumentation
//     (passes/Instrumentation.h).
//
// Pipeline strings
// ----------------
//   pipeline ::= [element (',' element)*]
//   element  ::= pass | named | 'fixpoint(' pass-or-named (',' pass-or-named)* ')'
//   pass     ::= name ['{' [option (',' option)*] '}']
//   named    ::= the name of a registered pipeline (pipelineRegistry()): its passes
//   option   ::= key '=' value          value: any characters except , { } and blanks
//
// fixpoint(a,b,...) runs its passes in rounds until a round in which none reports a
// change (XLA's HloPassFix), at most kMaxFixpointRounds rounds; groups do not nest.
//
// Lists (e.g. grad's `wrt`) separate their items with ';' inside one value, so that
// ',' keeps separating options:   grad{wrt=beta;h,vjp=false}
// Whitespace around names, keys, values and separators is ignored.
//
// The canonical form (Pipeline::str()) prints every option of every pass, in registry
// order, with its canonical value (booleans `true`/`false`, integers in decimal,
// lists joined by ';'); a pass without options prints as its bare name. Hence
// Pipeline::parse(p.str()) == p and parse(s).str() is a fixed point.
//
// Errors (tessel::Error) name the pass and the option and list the allowed ones:
//   error: --passes: unknown pass 'csee' (known passes: checkpoint, cse, ...)
//   error: --passes: pass 'order' has no option 'strat' (options: strategy)
//   error: --passes: pass 'order', option 'strategy': invalid value 'fast'
//          (allowed: chain, pairwise, greedy, optimal, auto)
// Syntax errors quote the string with a caret under the offending column.
//
// Instrumentations (PassManagerOptions; LLVM `opt` / `mlir-opt` style), all written to
// PassManagerOptions::log (stderr in the driver, so stdout stays the program):
//   * verify-each: ir::verify after every pass that changed the program (default on; a
//     pass that reports no change is not verified again); a failure names the pass;
//   * print IR before/after named passes, after all passes, after change only;
//   * dump-dir: 00-input.tir, 01-<pass>.tir, ... (number = position in the pipeline);
//   * per-pass wall time (text or JSON), pass statistics (ops before/after and the
//     counters each pass reports);
//   * bisect limit: only the first N pass executions run; each one is logged as
//     `BISECT: running pass (N) <pass> on program @name` or `BISECT: NOT running ...`;
//   * disable-pass: named passes are skipped (logged with --print-ir-* and statistics);
//   * required passes: a driver may run a pipeline of its own through the manager
//     (run(p, pipeline, PassRequirement::Required), e.g. tessel trg's grad and
//     checkpoint) with the same printing, dumps and reports. As LLVM's required passes,
//     they always run: --disable-pass does not skip them and --bisect-limit does not
//     count them; the bisect log shows each as `BISECT: running required pass <pass>
//     on program @name (not counted)`;
//   * crash reproducer: when a pass throws or fails verification, the program as it
//     was before that pass is written to a file, preceded by `//` comments giving the
//     error, the pipeline and the command that reproduces it; the error rethrown is a
//     tessel::Error that names the file.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/Printer.h"
#include "ir/Program.h"
#include "llvm/ADT/StringRef.h"
#include "passes/PassOptions.h"

namespace tessel::passes {

/// Counters reported by one pass execution (`--pass-statistics`), e.g.
/// {"einsums-lowered": 3}. Printed sorted by name.
struct PassStatistics {
  std::map<std::string, int64_t> counters;
  void add(const std::string &name, int64_t n = 1) { counters[name] += n; }
};

class PassInvocation;

/// Runs a pass on `p` in place; returns true when it changed the program. Throws
/// tessel::Error for user errors.
using PassRunFn =
    std::function<bool(ir::Program &p, const PassInvocation &opts, PassStatistics &stats)>;

/// One row of the registry.
struct PassInfo {
  std::string name;
  std::string summary; ///< one line
  /// Declared from the pass's options struct (passes/PassOptions.h), in canonical order.
  std::vector<PassOptionInfo> options;
  PassRunFn run;
  /// That options struct with every member at its default (empty: no options struct).
  std::any defaultOptions = {};
  /// A module pass runs once on the whole module (grad, inline, dce); any other pass is a
  /// function pass, run on each function of a module and then on its entry.
  bool modulePass = false;
  /// Passes that, when a pipeline holds both, must run before this one (each occurrence
  /// of this pass needs one of them before it), and why: a misordered pipeline would
  /// silently do nothing. Pipeline::parse refuses it.
  struct RunsAfter {
    std::string pass, why;
  };
  std::vector<RunsAfter> runsAfter = {};
  /// False for a pass that adds to the program every time it runs (grad, jvp, hessian,
  /// checkpoint, split-vjp): fixpoint(...) refuses it, as it would never stop changing.
  bool reachesFixpoint = true;

  /// Index of the option `name`, or -1.
  int findOption(llvm::StringRef name) const;
};

/// Every registered pass, in registry order (passes/PassRegistry.cpp).
const std::vector<PassInfo> &passRegistry();
/// The pass named `name`, or nullptr.
const PassInfo *lookupPass(llvm::StringRef name);
/// Comma-separated names of all registered passes (for error messages).
std::string knownPassNames();
/// A named pipeline: a name that stands for its passes wherever a pipeline is parsed
/// (`--passes trg`, `--passes 'trg,fold'`), as MLIR's registered pass pipelines. No
/// pipeline has the name of a pass.
struct NamedPipeline {
  std::string name, summary;
  std::string text; ///< the passes, in pipeline syntax
};
/// Every named pipeline (passes/PassRegistry.cpp): run-default (what `tessel run`,
/// `tessel prepare` and tessel.prepare apply before prepare), trg and trg-full-svd (what
/// `tessel trg` applies to every program with the truncated or the full SVD).
const std::vector<NamedPipeline> &pipelineRegistry();
/// The named pipeline `name`, or nullptr.
const NamedPipeline *lookupPipeline(llvm::StringRef name);
/// Text of `--list-passes`: one block per pass (name, summary, options with syntax,
/// default and help), then the named pipelines with their passes.
std::string describePasses();

/// One pass of a pipeline with its options struct (every option set, to its default
/// unless the pipeline gave a value).
class PassInvocation {
public:
  /// The pass with all options at their defaults.
  explicit PassInvocation(const PassInfo &info);

  const PassInfo &info() const { return *info_; }
  const std::string &name() const { return info_->name; }

  /// Sets an option from its text form; validates it and stores it in the options
  /// struct. Throws tessel::Error naming the pass, the option and the allowed values.
  void set(llvm::StringRef option, llvm::StringRef value);

  /// Canonical text of an option (throws tessel::Error for an undeclared option).
  std::string get(llvm::StringRef option) const;

  /// The options struct, of the type the registry declared for the pass (e.g.
  /// GradOptions). Throws tessel::Error for another type (a bug in the pass adapter).
  template <class Options> const Options &options() const {
    if (const Options *o = std::any_cast<Options>(&options_)) return *o;
    throwWrongOptionsType();
  }

  /// Canonical text: `name` or `name{opt=value,...}` (every option, registry order).
  std::string str() const;

  /// Same pass, and every option has the same canonical text.
  bool operator==(const PassInvocation &o) const;
  bool operator!=(const PassInvocation &o) const { return !(*this == o); }

private:
  [[noreturn]] void throwWrongOptionsType() const;

  const PassInfo *info_;
  std::any options_;
};

/// The most rounds a fixpoint group runs. A group still changing the program after that
/// many stops there with a note in the log (a pass that keeps reporting a change would
/// otherwise run forever).
inline constexpr int kMaxFixpointRounds = 16;

/// An ordered list of pass invocations, some of them in fixpoint groups.
struct Pipeline {
  std::vector<PassInvocation> passes;
  /// A fixpoint group: passes[begin, end) run in rounds until none changes the program.
  struct Fixpoint {
    size_t begin = 0, end = 0;
    bool operator==(const Fixpoint &o) const { return begin == o.begin && end == o.end; }
  };
  std::vector<Fixpoint> fixpoints; ///< disjoint, in pipeline order, none empty

  /// The group that begins at passes[i], or nullptr.
  const Fixpoint *fixpointAt(size_t i) const;
  /// This pipeline without the passes named `name` (groups keep the rest; a group left
  /// empty goes).
  Pipeline without(llvm::StringRef name) const;

  /// Parses a pipeline string (grammar above). `what` prefixes error messages
  /// (e.g. "--passes"). Throws tessel::Error.
  static Pipeline parse(llvm::StringRef text, llvm::StringRef what = "--passes");
  /// Canonical text (see top of file); "" for an empty pipeline.
  std::string str() const;

  bool empty() const { return passes.empty(); }
  bool operator==(const Pipeline &o) const { return passes == o.passes && fixpoints == o.fixpoints; }
  bool operator!=(const Pipeline &o) const { return !(*this == o); }
};

/// Instrumentation of a PassManager run (each field is one command-line flag of
/// tools/PassFlags.h).
struct PassManagerOptions {
  bool verifyEach = true;                  ///< --verify-each
  std::vector<std::string> printIrBefore;  ///< --print-ir-before=P (pass names)
  std::vector<std::string> printIrAfter;   ///< --print-ir-after=P
  bool printIrAfterAll = false;            ///< --print-ir-after-all
  bool printIrAfterChange = false;         ///< --print-ir-after-change
  /// --print-changed=diff: as printIrAfterChange, but after a pass that changed the
  /// program print a unified diff against the program before it (the system's
  /// `diff -u`, as LLVM's -print-changed=diff does) instead of the whole program.
  bool printChangedDiff = false;
  std::string dumpDir;                     ///< --dump-dir=DIR ("" = off)
  /// For a driver that compiles several programs with one manager (tessel trg): run k
  /// (from 1) of the manager dumps into DIR/kk-<program name>/ instead of DIR itself.
  bool dumpDirPerProgram = false;
  bool timePasses = false;                 ///< --time-passes (text report)
  bool timePassesJson = false;             ///< --time-passes-json (JSON report)
  bool statistics = false;                 ///< --pass-statistics
  int64_t bisectLimit = -1;                ///< --bisect-limit=N (-1 = no limit)
  std::string crashReproducer;             ///< --crash-reproducer=FILE ("" = off)
  std::vector<std::string> disabledPasses; ///< --disable-pass=NAME
  /// Constants with more elements print as a summary in --print-ir-* output (0 = never).
  /// Dump files and reproducers always print constants in full (they must parse).
  int64_t elideConstantsAbove = ir::kElideConstantsForReading;
  /// Where instrumentation goes (nullptr = std::cerr).
  std::ostream *log = nullptr;
};

/// What happened to one pass of the pipeline.
struct PassRecord {
  int index = 0;          ///< 1-based position in the pipeline
  int round = 0;          ///< in a fixpoint group: the round (1-based); 0 outside one
  std::string name;       ///< registry name
  std::string invocation; ///< canonical text with options
  enum class Status { Ran, Disabled, Bisected } status = Status::Ran;
  /// A required pass: --disable-pass and --bisect-limit never skip it.
  bool required = false;
  bool changed = false;  ///< as reported by the pass
  /// A function pass on a module: which functions it reported changed (index i <
  /// functions.size() is function i, the last the entry). Empty when the pass ran on the
  /// program as a whole (a module pass, or a plain program). The verifier checks only
  /// those (and their callers).
  std::vector<char> changedFunctions;
  double seconds = 0;    ///< wall time of the pass (not the verifier)
  double verifySeconds = 0;
  size_t opsBefore = 0, opsAfter = 0;
  PassStatistics stats;
};

/// Everything a run measured; also rendered as the reports the flags ask for.
struct PassRunReport {
  std::string program; ///< name of the program the pipeline ran on (its @name)
  std::vector<PassRecord> passes;
  double totalSeconds = 0; ///< passes + verifier + instrumentation

  /// LLVM-style "Pass execution timing report" (wall time per pass, verifier, total).
  std::string timingText() const;
  /// {"program": .., "total_seconds": .., "verifier_seconds": .., "passes": [{"index", "name",
  ///  "pass", "status", "changed", "seconds", "ops_before", "ops_after"}]}.
  std::string timingJson() const;
  /// "Pass statistics report": per pass, ops before -> after, changed, counters.
  std::string statisticsText() const;
};

class PassInstrumentation;

/// Whether the program given to PassManager::run is known to verify: the output of an
/// earlier run with verifyEach (each run verifies its input or, after its last pass that
/// changed the program, its output). verifyEach then does not verify it again first.
enum class InputState { Unverified, Verified };

/// Whether the passes of a pipeline given to PassManager::run may be skipped by
/// --disable-pass and --bisect-limit (Optional) or always run (Required).
enum class PassRequirement { Optional, Required };

/// Runs a pipeline with instrumentation.
class PassManager {
public:
  /// Throws tessel::Error if a --print-ir-* or --disable-pass name is not a registered
  /// pass (listing the known ones) or the bisect limit is below -1.
  PassManager(Pipeline pipeline, PassManagerOptions opts = {});

  const Pipeline &pipeline() const { return pipeline_; }
  const PassManagerOptions &options() const { return opts_; }

  /// Adds an instrumentation (passes/Instrumentation.h) that every run calls after the
  /// ones the options ask for. Copies of this manager share it, and it keeps its state
  /// from one run to the next.
  void addInstrumentation(std::shared_ptr<PassInstrumentation> instrumentation);

  /// Runs every pass on `p` in place and prints the requested reports (timing,
  /// statistics; each names the program) to the log at the end. Errors: the pass's own tessel::Error with a
  /// note naming the pass (and the reproducer file), or a VerifyError naming the pass
  /// after which verification failed. The input program is verified first when
  /// verifyEach is set, unless `input` says it verifies.
  PassRunReport run(ir::Program &p, InputState input = InputState::Unverified) const {
    return run(p, pipeline_, PassRequirement::Optional, input);
  }

  /// Runs `pipeline` instead of the manager's own, with the same instrumentation state:
  /// the run counts towards the --dump-dir subdirectory numbering and the bisect count,
  /// and prints the same reports. With PassRequirement::Required every pass of
  /// `pipeline` runs whatever --disable-pass and --bisect-limit say (see the top of
  /// this file).
  PassRunReport run(ir::Program &p, const Pipeline &pipeline,
                    PassRequirement requirement = PassRequirement::Optional,
                    InputState input = InputState::Unverified) const;

  /// With --dump-dir and dumpDirPerProgram: the directory the last run dumped into
  /// (DIR/kk-<program name>), where a driver may write what it makes of that program
  /// next (tessel trg: its plan); "" before any run or without them.
  std::string lastDumpDir() const { return *lastDumpDir_; }

private:
  Pipeline pipeline_;
  PassManagerOptions opts_;
  std::vector<std::shared_ptr<PassInstrumentation>> extraInstrumentations_;
  /// --bisect-limit counts pass executions over every run of this manager (and its
  /// copies), as LLVM's -opt-bisect-limit counts over a whole compilation.
  std::shared_ptr<PassInstrumentation> bisect_;
  /// Runs so far (numbers the --dump-dir subdirectories); shared by copies.
  std::shared_ptr<int64_t> runs_ = std::make_shared<int64_t>(0);
  std::shared_ptr<std::string> lastDumpDir_ = std::make_shared<std::string>();
};

} // namespace tessel::passes
