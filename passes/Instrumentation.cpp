//===- passes/Instrumentation.cpp - The pass-manager instrumentations -----------===//
#include "passes/Instrumentation.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <stdexcept>

#include "ir/OpAttrs.h"
#include "ir/TextUtil.h"
#include "ir/Diagnostics.h"
#include "ir/OpTable.h"
#include "ir/Verifier.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

#include <sys/wait.h>
#include <unistd.h>

namespace tessel::passes {

namespace {

bool contains(const std::vector<std::string> &v, const std::string &s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

/// Every line of `text` as a comment line "//   <line>".
std::string commentLines(const std::string &text) {
  std::string out;
  llvm::SmallVector<llvm::StringRef, 8> lines;
  llvm::StringRef(text).rtrim("\n").split(lines, '\n');
  for (llvm::StringRef l : lines) out += "//   " + l.str() + "\n";
  return out;
}

/// `s` with its line breaks written \n (so it stays on one // comment line).
std::string oneLine(const std::string &s) {
  std::string out;
  for (char c : s) out += c == '\n' ? std::string("\\n") : c == '\r' ? std::string("\\r") : std::string(1, c);
  return out;
}

/// `s` as one shell word that a POSIX shell reads back to the same bytes and that stays
/// on one line: bare when it has only [A-Za-z0-9_./=,:+-], '…' (a quote as '\'') when
/// it has no control byte, else bash's $'…' with \n, \t, \xHH, \\ and \' (a newline
/// in a // comment line would end the comment and the reproducer would not parse).
std::string shellQuote(const std::string &s) {
  const bool bare = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_./=,:+-", c) != nullptr;
  });
  if (bare) return s;
  const bool control = std::any_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
  if (!control) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  }
  std::string q = "$'";
  static const char *hex = "0123456789abcdef";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') q += "\\n";
    else if (c == '\t') q += "\\t";
    else if (c == '\\' || c == '\'') q += std::string("\\") + c;
    else if (u < 0x20 || u == 0x7f) q += std::string("\\x") + hex[u >> 4] + hex[u & 15];
    else q += c;
  }
  return q + "'";
}

/// Whether `name` is one of the dump's own entries: "NN-…" or "NNN-…" (a file NN-pass.tir
/// of the pipeline, or tessel trg's per-program directory NN-program).
bool isDumpEntry(const std::string &name) {
  size_t d = 0;
  while (d < name.size() && std::isdigit(static_cast<unsigned char>(name[d]))) ++d;
  return (d == 2 || d == 3) && d < name.size() && name[d] == '-';
}

/// "grad (1)": how the IR dumps name a pass.
/// In a fixpoint group: "cse (2, round 3)".
std::string passTag(const PassRecord &pass) {
  return pass.name + " (" + std::to_string(pass.index) +
         (pass.round > 0 ? ", round " + std::to_string(pass.round) : std::string()) + ")";
}

} // namespace

void writeFileOrThrow(const std::string &path, const std::string &text, const char *what) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error(std::string("error: ") + what + ": cannot open '" + path + "' for writing");
  out << text;
  if (!out) throw Error(std::string("error: ") + what + ": cannot write '" + path + "'");
}

void clearEarlierDump(const std::string &dir, bool directoriesToo) {
  std::error_code ec;
  for (const auto &e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!isDumpEntry(name)) continue;
    std::error_code rm;
    if (e.is_regular_file(rm) && name.ends_with(".tir")) std::filesystem::remove(e.path(), rm);
    else if (directoriesToo && e.is_directory(rm)) std::filesystem::remove_all(e.path(), rm);
  }
}

//===----------------------------------------------------------------------===//
// PassFailure, PassInstrumentor
//===----------------------------------------------------------------------===//

void PassFailure::raise() const {
  switch (kind) {
  case Kind::Error: throw Error(message + notes);
  case Kind::Internal: throw std::runtime_error(message + notes);
  case Kind::Verify: throw VerifyError(message + notes);
  }
  throw std::logic_error("PassFailure: unknown kind");
}

void PassInstrumentor::add(std::shared_ptr<PassInstrumentation> instrumentation) {
  list_.push_back(std::move(instrumentation));
}

void PassInstrumentor::runBeforePipeline(const ir::Program &p) {
  for (auto &i : list_) i->runBeforePipeline(p);
}

bool PassInstrumentor::shouldRun(PassRecord &pass, const ir::Program &p) {
  for (auto &i : list_)
    if (!i->shouldRun(pass, p)) return false;
  return true;
}

void PassInstrumentor::runAfterPassSkipped(const PassRecord &pass, const ir::Program &p) {
  for (auto &i : list_) i->runAfterPassSkipped(pass, p);
}

void PassInstrumentor::runBeforePass(const PassRecord &pass, const ir::Program &p) {
  for (auto &i : list_) i->runBeforePass(pass, p);
}

void PassInstrumentor::runAfterPass(PassRecord &pass, const ir::Program &p) {
  for (auto &i : list_) i->runAfterPass(pass, p);
}

void PassInstrumentor::runAfterPassFailed(const PassRecord &pass, PassFailure &failure) {
  for (auto &i : list_) i->runAfterPassFailed(pass, failure);
}

void PassInstrumentor::runAfterPipeline(const PassRunReport &report) {
  for (auto &i : list_) i->runAfterPipeline(report);
}

PassInstrumentor standardInstrumentations(const PassManagerOptions &opts,
                                          const Pipeline &pipeline, std::ostream &log,
                                          InputState input) {
  PassInstrumentor list;
  if (opts.verifyEach)
    list.add(std::make_shared<VerifierInstrumentation>(pipeline.passes.size(),
                                                       input == InputState::Unverified));
  list.add(std::make_shared<IRPrinterInstrumentation>(opts, pipeline, log));
  if (!opts.disabledPasses.empty())
    list.add(std::make_shared<DisablePassInstrumentation>(opts.disabledPasses));
  if (!opts.crashReproducer.empty())
    list.add(std::make_shared<CrashReproducerInstrumentation>(opts.crashReproducer, pipeline));
  if (opts.timePasses || opts.timePassesJson)
    list.add(std::make_shared<TimingInstrumentation>(opts.timePassesJson, log));
  if (opts.statistics) list.add(std::make_shared<StatisticsInstrumentation>(log));
  return list;
}

std::string passLabel(const PassRecord &pass, size_t pipelineSize) {
  return "pass '" + pass.name + "' (" + std::to_string(pass.index) + " of " +
         std::to_string(pipelineSize) +
         (pass.round > 0 ? ", round " + std::to_string(pass.round) : std::string()) + ")";
}

//===----------------------------------------------------------------------===//
// Verifier
//===----------------------------------------------------------------------===//

void VerifierInstrumentation::runBeforePipeline(const ir::Program &p) {
  if (!verifyInput_) return;
  std::vector<std::string> errs = ir::verify(p);
  if (!errs.empty())
    throw VerifyError("error: the input program does not verify:\n" + llvm::join(errs, "\n"));
}

void VerifierInstrumentation::runAfterPass(PassRecord &pass, const ir::Program &p) {
  // A pass that reports no change left the program it was given, which verified (as
  // MLIR's pass manager skips the verifier when a pass preserves everything).
  if (!pass.changed) return;
  Stopwatch watch;
  std::vector<std::string> errs;
  if (pass.changedFunctions.empty()) {
    errs = ir::verify(p);
  } else {
    // A function pass: the functions it changed, and their callers (a call checks its
    // callee's signature); the others are as the last verification left them.
    std::vector<char> which = pass.changedFunctions;
    auto callsChanged = [&](const ir::Program &f) {
      for (const ir::Op &op : f.ops)
        if (ir::hasCallee(op.kind))
          if (int c = p.functionIndex(ir::calleeOf(op)); c >= 0 && pass.changedFunctions[static_cast<size_t>(c)])
            return true;
      return false;
    };
    for (size_t i = 0; i < p.functions.size(); ++i)
      if (!which[i]) which[i] = callsChanged(p.functions[i]);
    if (!which.back()) which.back() = callsChanged(p);
    errs = ir::verify(p, which);
  }
  pass.verifySeconds = watch.seconds();
  if (!errs.empty())
    throw PassFailure{PassFailure::Kind::Verify,
                      "error: verifier failed after " + passLabel(pass, pipelineSize_) + ": " +
                          pass.invocation + "\n" + llvm::join(errs, "\n"),
                      ""};
}

//===----------------------------------------------------------------------===//
// IR printing and dump files
//===----------------------------------------------------------------------===//

namespace {

/// Writes `text` to a new temporary file; returns its path ("" on failure).
std::string writeTempFile(const std::string &text) {
  std::string path = (std::filesystem::temp_directory_path() / "tessel-ir-XXXXXX").string();
  int fd = mkstemp(path.data());
  if (fd < 0) return "";
  close(fd);
  std::ofstream f(path, std::ios::binary);
  f << text;
  return f ? path : "";
}

} // namespace

std::string unifiedDiff(const std::string &before, const std::string &after,
                        const std::string &labelBefore, const std::string &labelAfter) {
  const std::string a = writeTempFile(before), b = writeTempFile(after);
  std::string out;
  if (!a.empty() && !b.empty()) {
    auto quote = [](const std::string &s) {
      std::string q = "'";
      for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      return q + "'";
    };
    const std::string cmd = "diff -u --label " + quote(labelBefore) + " --label " +
                            quote(labelAfter) + " " + quote(a) + " " + quote(b) + " 2>&1";
    if (FILE *pipe = popen(cmd.c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
      const int status = pclose(pipe);
      // diff exits 1 when the files differ, 0 when they do not, 2 on trouble.
      if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) > 1) out.clear();
    }
  }
  std::error_code ec;
  if (!a.empty()) std::filesystem::remove(a, ec);
  if (!b.empty()) std::filesystem::remove(b, ec);
  if (out.empty())
    return "// (no `diff` program to compare with; the program after the pass:)\n" + after;
  return out;
}

IRPrinterInstrumentation::IRPrinterInstrumentation(const PassManagerOptions &opts,
                                                   const Pipeline &pipeline, std::ostream &log)
    : before_(opts.printIrBefore), after_(opts.printIrAfter), afterAll_(opts.printIrAfterAll),
      afterChange_(opts.printIrAfterChange || opts.printChangedDiff),
      changedDiff_(opts.printChangedDiff), dumpDir_(opts.dumpDir),
      pipelineText_(pipeline.str()), pipelineSize_(pipeline.passes.size()), log_(log) {
  logPrint_.elideConstantsAbove = opts.elideConstantsAbove;
  exactPrint_.elideConstantsAbove = 0;
}

void IRPrinterInstrumentation::dump(const std::string &header, const ir::Program &p) {
  log_ << "// -----// " << header << " //----- //\n" << ir::printProgram(p, logPrint_);
  log_.flush();
}

bool IRPrinterInstrumentation::printsAfter(const PassRecord &pass) const {
  return afterAll_ || contains(after_, pass.name);
}

void IRPrinterInstrumentation::writeDumpFile(size_t index, const std::string &name,
                                             const std::string &text) {
  const size_t width = pipelineSize_ >= 100 ? 3 : 2;
  std::string n = std::to_string(index);
  if (n.size() < width) n = std::string(width - n.size(), '0') + n;
  writeFileOrThrow(dumpDir_ + "/" + n + "-" + name + ".tir", text, "--dump-dir");
}

void IRPrinterInstrumentation::runBeforePipeline(const ir::Program &p) {
  if (!dumpDir_.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dumpDir_, ec);
    if (ec)
      throw Error("error: --dump-dir: cannot create directory '" + dumpDir_ +
                  "': " + ec.message());
    // A second run into the same directory replaces the first's files instead of
    // leaving them beside its own (a shorter pipeline left the old tail).
    clearEarlierDump(dumpDir_, false);
    writeDumpFile(0, "input",
                  "// tessel pass dump: input of the pipeline\n// pipeline: " + pipelineText_ +
                      "\n" + ir::printProgram(p, exactPrint_));
  }
  if (afterChange_) dump("IR Dump At Start", p);
}

void IRPrinterInstrumentation::runAfterPassSkipped(const PassRecord &pass, const ir::Program &) {
  if (pass.status == PassRecord::Status::Disabled && (printsAfter(pass) || afterChange_))
    log_ << "// -----// " << passTag(pass) << " skipped: disabled by --disable-pass //----- //\n";
}

void IRPrinterInstrumentation::runBeforePass(const PassRecord &pass, const ir::Program &p) {
  if (contains(before_, pass.name)) dump("IR Dump Before " + passTag(pass), p);
  if (afterChange_) textBefore_ = ir::printProgram(p, exactPrint_);
}

void IRPrinterInstrumentation::runAfterPass(PassRecord &pass, const ir::Program &p) {
  if (printsAfter(pass)) {
    dump("IR Dump After " + passTag(pass), p);
  } else if (afterChange_) {
    const std::string after = ir::printProgram(p, exactPrint_);
    if (after == textBefore_)
      log_ << "// -----// IR Dump After " << passTag(pass) << " omitted: no change //----- //\n";
    else if (changedDiff_)
      log_ << "// -----// IR Diff After " << passTag(pass) << " //----- //\n"
           << unifiedDiff(textBefore_, after, "before " + pass.invocation,
                          "after " + pass.invocation);
    else
      dump("IR Dump After " + passTag(pass), p);
  }
  if (!dumpDir_.empty())
    writeDumpFile(pass.index,
                  pass.round > 0 ? pass.name + (pass.round < 10 ? "-round0" : "-round") + std::to_string(pass.round)
                                 : pass.name,
                  "// tessel pass dump: after pass " + std::to_string(pass.index) + " of " +
                      std::to_string(pipelineSize_) + ": " + pass.invocation +
                      "\n// pipeline: " + pipelineText_ + "\n" +
                      ir::printProgram(p, exactPrint_));
}

//===----------------------------------------------------------------------===//
// Disable, bisect
//===----------------------------------------------------------------------===//

bool DisablePassInstrumentation::shouldRun(PassRecord &pass, const ir::Program &) {
  if (pass.required || !contains(names_, pass.name)) return true;
  pass.status = PassRecord::Status::Disabled;
  return false;
}

bool BisectInstrumentation::shouldRun(PassRecord &pass, const ir::Program &p) {
  if (pass.required) {
    log_ << "BISECT: running required pass " << pass.invocation << " on program " << ir::text::atName(p.name)
         << " (not counted)\n";
    return true;
  }
  ++executions_;
  const bool run = executions_ <= limit_;
  log_ << "BISECT: " << (run ? "running" : "NOT running") << " pass (" << executions_ << ") "
       << pass.invocation << " on program " << ir::text::atName(p.name)
       << (pass.round > 0 ? " (fixpoint round " + std::to_string(pass.round) + ")" : "") << "\n";
  if (!run) pass.status = PassRecord::Status::Bisected;
  return run;
}

//===----------------------------------------------------------------------===//
// Crash reproducer
//===----------------------------------------------------------------------===//

void CrashReproducerInstrumentation::runBeforePass(const PassRecord &, const ir::Program &p) {
  saved_ = p;
}

void CrashReproducerInstrumentation::runAfterPassFailed(const PassRecord &pass,
                                                        PassFailure &failure) {
  const std::string label = passLabel(pass, pipelineSize_);
  const std::string command =
      "tessel opt " + shellQuote(file_) + " --passes=" + shellQuote(pass.invocation);
  ir::PrintOptions exact;
  exact.elideConstantsAbove = 0;
  // A reproducer that cannot be written must not hide the pass's own error: a note.
  try {
    writeFileOrThrow(file_,
                     "// tessel crash reproducer: " + label + " failed:\n" +
                         commentLines(failure.message) + "// pipeline: " + oneLine(pipelineText_) +
                         "\n// reproduce: " + command + "\n" + ir::printProgram(saved_, exact),
                     "--crash-reproducer");
  } catch (const Error &e) {
    failure.notes += "\nnote: no crash reproducer: " + errorText(e);
    return;
  }
  if (failure.kind == PassFailure::Kind::Internal) {
    failure.kind = PassFailure::Kind::Error;
    failure.message = "error: internal error in " + label + ": " + failure.message;
  }
  const std::string shownFile = shellQuote(file_) == file_ ? "'" + file_ + "'" : ir::text::quoteString(file_);
  failure.notes += "\nnote: crash reproducer (the program before the pass) written to " +
                   shownFile + "; reproduce with: " + command;
}

//===----------------------------------------------------------------------===//
// Reports
//===----------------------------------------------------------------------===//

void TimingInstrumentation::runAfterPipeline(const PassRunReport &report) {
  log_ << (json_ ? report.timingJson() : report.timingText());
}

void StatisticsInstrumentation::runAfterPipeline(const PassRunReport &report) {
  log_ << report.statisticsText();
}

} // namespace tessel::passes
