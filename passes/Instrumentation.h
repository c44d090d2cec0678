//===- passes/Instrumentation.h - Hooks around the passes of a pipeline ---------===//
//
// PassManager::run calls a list of instrumentations around the pipeline and around
// every pass (MLIR's PassInstrumentation, LLVM's PassInstrumentationCallbacks). Each
// concern of the pass-manager flags (PassManagerOptions) is one class:
//
//   --verify-each                      VerifierInstrumentation
//   --print-ir-*, --dump-dir           IRPrinterInstrumentation
//   --disable-pass                     DisablePassInstrumentation
//   --bisect-limit                     BisectInstrumentation
//   --crash-reproducer                 CrashReproducerInstrumentation
//   --time-passes, --time-passes-json  TimingInstrumentation
//   --pass-statistics                  StatisticsInstrumentation
//
// standardInstrumentations() builds the ones the options ask for, in that order, except
// BisectInstrumentation: the PassManager makes that one once and adds it after them, so
// that its count runs over every program the manager compiles. The hooks of each event
// are called in list order:
//
//   runBeforePipeline(program)           once, before the first pass
//   for every pass of the pipeline:
//     shouldRun(pass, program)           asked in turn until one says no; then
//       runAfterPassSkipped(pass, ...)   instead of the three below
//     runBeforePass(pass, program)
//       ... the pass runs ...
//     runAfterPass(pass, program)        may fail the pass by throwing PassFailure
//     runAfterPassFailed(pass, failure)  when the pass threw or an after hook failed it
//   runAfterPipeline(report)             once, after the last pass
//
// `pass` is the pass's PassRecord: its position, name and canonical text, and, once it
// ran, what it did. Everything the instrumentations print goes to one log stream.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "ir/Printer.h"
#include "ir/Program.h"
#include "passes/PassManager.h"

namespace tessel::passes {

/// Why a pass failed: an exception from the pass, or a program that does not verify
/// after it. Instrumentations see it in runAfterPassFailed and may add to it; the pass
/// manager then throws it (raise()).
struct PassFailure {
  enum class Kind {
    Error,    ///< tessel::Error from the pass: a user error
    Internal, ///< any other exception from the pass (a bug): std::runtime_error
    Verify,   ///< the program does not verify after the pass: VerifyError
  };
  Kind kind = Kind::Error;
  std::string message; ///< the diagnostic ("error: ..." unless Internal)
  std::string notes;   ///< "\nnote: ..." lines, appended to the message when thrown

  /// Throws the exception `kind` names, whose text is message + notes.
  [[noreturn]] void raise() const;
};

/// Hooks around a pipeline run; every hook does nothing unless overridden.
class PassInstrumentation {
public:
  virtual ~PassInstrumentation() = default;

  virtual void runBeforePipeline(const ir::Program &) {}
  /// Returning false skips the pass; the instrumentation sets `pass.status` to say why.
  virtual bool shouldRun(PassRecord &, const ir::Program &) { return true; }
  virtual void runAfterPassSkipped(const PassRecord &, const ir::Program &) {}
  virtual void runBeforePass(const PassRecord &, const ir::Program &) {}
  /// `pass` holds what the pass did; an instrumentation may add measurements to it.
  virtual void runAfterPass(PassRecord &, const ir::Program &) {}
  virtual void runAfterPassFailed(const PassRecord &, PassFailure &) {}
  virtual void runAfterPipeline(const PassRunReport &) {}
};

/// The instrumentations of one run; each hook calls them in order.
class PassInstrumentor {
public:
  void add(std::shared_ptr<PassInstrumentation> instrumentation);

  void runBeforePipeline(const ir::Program &p);
  bool shouldRun(PassRecord &pass, const ir::Program &p);
  void runAfterPassSkipped(const PassRecord &pass, const ir::Program &p);
  void runBeforePass(const PassRecord &pass, const ir::Program &p);
  void runAfterPass(PassRecord &pass, const ir::Program &p);
  void runAfterPassFailed(const PassRecord &pass, PassFailure &failure);
  void runAfterPipeline(const PassRunReport &report);

private:
  std::vector<std::shared_ptr<PassInstrumentation>> list_;
};

/// The instrumentations `opts` asks for, in the order of the table at the top of this
/// file, writing to `log`. Dump files and reproducers name `pipeline`; the verifier
/// skips an input known to verify (`input`).
PassInstrumentor standardInstrumentations(const PassManagerOptions &opts,
                                          const Pipeline &pipeline, std::ostream &log,
                                          InputState input = InputState::Unverified);

/// "pass 'order' (2 of 5)", as diagnostics name a pass of a pipeline of `pipelineSize`.
std::string passLabel(const PassRecord &pass, size_t pipelineSize);

/// Unified diff (`diff -u`, labels as given) of two program texts; where no `diff`
/// program can be run, a note and the text after instead.
std::string unifiedDiff(const std::string &before, const std::string &after,
                        const std::string &labelBefore, const std::string &labelAfter);

/// Wall-clock seconds since construction.
class Stopwatch {
public:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

//===----------------------------------------------------------------------===//
// The instrumentations of the pass-manager flags
//===----------------------------------------------------------------------===//

/// --verify-each: ir::verify on the input (a VerifyError) and after every pass that
/// reports a change (fails the pass with the verifier's messages; a pass that reports
/// none left the verified input); its time goes to PassRecord::verifySeconds.
class VerifierInstrumentation : public PassInstrumentation {
public:
  /// `verifyInput`: verify the program before the first pass (false for an input
  /// known to verify, InputState::Verified).
  explicit VerifierInstrumentation(size_t pipelineSize, bool verifyInput = true)
      : pipelineSize_(pipelineSize), verifyInput_(verifyInput) {}
  void runBeforePipeline(const ir::Program &p) override;
  void runAfterPass(PassRecord &pass, const ir::Program &p) override;

private:
  size_t pipelineSize_;
  bool verifyInput_;
};

/// --print-ir-before/-after/-after-all/-after-change and --print-changed=diff to the
/// log (constants elided
/// above PassManagerOptions::elideConstantsAbove), and --dump-dir files
/// (00-input.tir, 01-<pass>.tir, ...; numbered by pipeline position; constants in
/// full so that they parse). A disabled pass that would have been printed after is
/// logged as skipped.
class IRPrinterInstrumentation : public PassInstrumentation {
public:
  IRPrinterInstrumentation(const PassManagerOptions &opts, const Pipeline &pipeline,
                           std::ostream &log);
  void runBeforePipeline(const ir::Program &p) override;
  void runAfterPassSkipped(const PassRecord &pass, const ir::Program &p) override;
  void runBeforePass(const PassRecord &pass, const ir::Program &p) override;
  void runAfterPass(PassRecord &pass, const ir::Program &p) override;

private:
  void dump(const std::string &header, const ir::Program &p);
  bool printsAfter(const PassRecord &pass) const;
  void writeDumpFile(size_t index, const std::string &name, const std::string &text);

  std::vector<std::string> before_, after_;
  bool afterAll_, afterChange_, changedDiff_;
  std::string dumpDir_;
  std::string pipelineText_;
  size_t pipelineSize_;
  std::ostream &log_;
  ir::PrintOptions logPrint_, exactPrint_;
  std::string textBefore_; ///< --print-ir-after-change: the program before the pass
};

/// --disable-pass: the named passes do not run (status Disabled), unless required.
class DisablePassInstrumentation : public PassInstrumentation {
public:
  explicit DisablePassInstrumentation(std::vector<std::string> names)
      : names_(std::move(names)) {}
  bool shouldRun(PassRecord &pass, const ir::Program &p) override;

private:
  std::vector<std::string> names_;
};

/// --bisect-limit=N: only the first N pass executions (disabled passes do not count)
/// run; each is logged as `BISECT: running pass (K) <pass> on program @name` or
/// `BISECT: NOT running ...` (status Bisected). Required passes always run and are not
/// counted (as in LLVM's opt-bisect); each is logged as `BISECT: running required pass
/// <pass> on program @name (not counted)`.
class BisectInstrumentation : public PassInstrumentation {
public:
  BisectInstrumentation(int64_t limit, std::ostream &log) : limit_(limit), log_(log) {}
  bool shouldRun(PassRecord &pass, const ir::Program &p) override;

private:
  int64_t limit_;
  int64_t executions_ = 0;
  std::ostream &log_;
};

/// --crash-reproducer=FILE: when a pass fails, writes the program as it was before the
/// pass, preceded by `//` comments giving the error, the pipeline and the command that
/// reproduces it, and adds a note naming the file. An internal error becomes a
/// tessel::Error (it now points the user at the file).
class CrashReproducerInstrumentation : public PassInstrumentation {
public:
  CrashReproducerInstrumentation(std::string file, const Pipeline &pipeline)
      : file_(std::move(file)), pipelineText_(pipeline.str()),
        pipelineSize_(pipeline.passes.size()) {}
  void runBeforePass(const PassRecord &pass, const ir::Program &p) override;
  void runAfterPassFailed(const PassRecord &pass, PassFailure &failure) override;

private:
  std::string file_;
  std::string pipelineText_;
  size_t pipelineSize_;
  ir::Program saved_;
};

/// --time-passes / --time-passes-json: the timing report at the end of the pipeline.
class TimingInstrumentation : public PassInstrumentation {
public:
  TimingInstrumentation(bool json, std::ostream &log) : json_(json), log_(log) {}
  void runAfterPipeline(const PassRunReport &report) override;

private:
  bool json_;
  std::ostream &log_;
};

/// --pass-statistics: the statistics report at the end of the pipeline.
class StatisticsInstrumentation : public PassInstrumentation {
public:
  explicit StatisticsInstrumentation(std::ostream &log) : log_(log) {}
  void runAfterPipeline(const PassRunReport &report) override;

private:
  std::ostream &log_;
};

/// Writes `text` to `path` (replacing it). Throws tessel::Error "error: <what>: cannot
/// open|write '<path>'".
void writeFileOrThrow(const std::string &path, const std::string &text, const char *what);
/// Removes the entries an earlier --dump-dir run left in `dir`: its NN-*.tir files and,
/// with `directoriesToo` (tessel trg's per-program dumps), its NN-* directories; other
/// files are left alone.
void clearEarlierDump(const std::string &dir, bool directoriesToo);

} // namespace tessel::passes
