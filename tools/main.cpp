//===- tools/main.cpp - The tessel command-line driver --------------------------===//
#include <cerrno>
#include <cstdio>
#include <exception>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "llvm/ADT/StringRef.h"
#include "tools/Commands.h"

namespace {

/// A user error reads `error: ...`, or `<where>: error: ...` when it points into a file
/// (`step.tir:3:8: error:`, `step.json: /ops/2: error:`). Libraries throw some errors
/// with a plain message (a builder's shape error, a pass's complaint); the driver puts
/// the tag in front of those, so that every user error is found the same way.
std::string withErrorTag(const std::string &msg) {
  const std::string first = msg.substr(0, msg.find('\n'));
  if (first.starts_with("error: ") || first.find(": error: ") != std::string::npos) return msg;
  return "error: " + msg;
}

} // namespace

#ifndef TESSEL_VERSION
#define TESSEL_VERSION "0.0.0"
#endif

namespace {

/// The flag of `cmd` (or of the app) closest to `arg`, within an edit distance of 2.
std::string closestFlag(const CLI::App &cmd, const std::string &arg) {
  std::string best;
  unsigned bestDist = 3;
  for (const CLI::Option *o : cmd.get_options())
    for (const std::string &name : o->get_lnames()) {
      unsigned d = llvm::StringRef("--" + name).edit_distance(arg, true, bestDist);
      if (d < bestDist) {
        bestDist = d;
        best = "--" + name;
      }
    }
  return best;
}

/// A command-line error in tessel's form: "error: " first, then CLI11's message, a
/// suggestion for a mistyped flag, and where help is.
int reportUsageError(const CLI::App &app, const CLI::ParseError &e) {
  const CLI::App *cmd = &app;
  for (const CLI::App *sub : app.get_subcommands()) cmd = sub;
  std::string msg = e.what();
  // `tessel bogus`: CLI11 says only that a subcommand is required; name the word and the
  // closest subcommand.
  if (cmd == &app && !app.remaining().empty() && !llvm::StringRef(app.remaining().front()).startswith("-")) {
    const std::string word = app.remaining().front();
    msg = "unknown subcommand '" + tessel::ir::text::clipForMessage(word) + "'";
    std::string best;
    size_t bestDistance = 3;
    for (const CLI::App *sub : app.get_subcommands({})) {
      const size_t d = llvm::StringRef(sub->get_name()).edit_distance(word);
      if (d < bestDistance) {
        bestDistance = d;
        best = sub->get_name();
      }
    }
    msg += best.empty() ? " (tessel --help lists them)" : "; did you mean '" + best + "'?";
  } else if (dynamic_cast<const CLI::ExtrasError *>(&e)) {
    for (const std::string &extra : cmd->remaining()) {
      if (!llvm::StringRef(extra).startswith("-")) continue;
      std::string best = closestFlag(*cmd, extra.substr(0, extra.find('=')));
      if (!best.empty()) msg += "; did you mean '" + best + "'?";
      break;
    }
  }
  std::cerr << tessel::ir::text::clipLongLines("error: " + msg) << "\nRun 'tessel"
            << (cmd == &app ? "" : " " + cmd->get_name()) << " --help' for the options.\n";
  return 1;
}

/// The exit status once stdout is flushed: a write that failed (a full disk, a closed
/// descriptor: `> /dev/full`, `>&-`) makes an exit that would have been 0 an error, so no
/// output is lost silently. A closed pipe ends the process by SIGPIPE before this, as
/// `| head -1` expects.
int flushStdout(int code) {
  std::cout.flush();
  errno = 0;
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) || std::cout.fail();
  if (failed && code == 0) {
    const int err = errno;
    std::cerr << "error: cannot write to standard output"
              << (err != 0 ? std::string(": ") + std::strerror(err) : std::string()) << "\n";
    return 1;
  }
  return code;
}

/// CLI11 reads an integer flag with strtoll and keeps its saturated value: `--chi
/// 99999999999999999999` ran with chi = 2⁶³ − 1. Every integer option of every command
/// (type INT or UINT) gets a check that the digits fit first.
void checkIntegerRanges(CLI::App &app) {
  for (CLI::App *cmd : app.get_subcommands([](CLI::App *) { return true; }))
    for (CLI::Option *opt : cmd->get_options()) {
      const std::string type = opt->get_type_name();
      if (type != "INT" && type != "UINT") continue;
      const bool isUnsigned = type == "UINT";
      opt->check(CLI::Validator(
          [isUnsigned](std::string &v) -> std::string {
            llvm::StringRef digits(v);
            digits.consume_front("+") || digits.consume_front("-");
            if (digits.empty() || digits.find_first_not_of("0123456789") != llvm::StringRef::npos)
              return ""; // not a plain integer: CLI11's own conversion reports it
            errno = 0;
            char *end = nullptr;
            if (isUnsigned && !llvm::StringRef(v).startswith("-")) (void)std::strtoull(v.c_str(), &end, 10);
            else (void)std::strtoll(v.c_str(), &end, 10);
            if (errno == ERANGE)
              return tessel::ir::text::clipForMessage(v) + " is out of the range of a 64-bit integer";
            return "";
          },
          "", "64-bit integer range"));
    }
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"tessel: a computation-graph compiler for differentiable tensor-network "
               "programs (typed SSA IR, grad, checkpointing, contraction ordering, "
               "prepare, fixed-width engine).",
               "tessel"};
  app.set_version_flag("--version", std::string("tessel ") + TESSEL_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);

  using namespace tessel::tools;
  addEmitCommand(app);
  addVerifyCommand(app);
  addDumpCommand(app);
  addOptCommand(app);
  addCostCommand(app);
  addGradcheckCommand(app);
  addPrepareCommand(app);
  addRunCommand(app);
  addBenchCommand(app);
  addTrgCommand(app);
  addOpsCommand(app);
  checkIntegerRanges(app);

  // `--flag=` (an empty value) is the empty string, as `--flag ''` is: CLI11 would take
  // the next argument as the value instead (`tessel opt --passes= prog.tir`).
  std::vector<std::string> args(argv, argv + argc);
  std::vector<std::string> fixed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (i > 0 && a.size() > 3 && a.starts_with("--") && a.ends_with("=") &&
        a.find('=') == a.size() - 1) {
      fixed.push_back(a.substr(0, a.size() - 1));
      fixed.push_back("");
    } else {
      fixed.push_back(a);
    }
  }
  std::vector<char *> fixedArgv;
  for (std::string &a : fixed) fixedArgv.push_back(a.data());
  argc = static_cast<int>(fixedArgv.size());
  argv = fixedArgv.data();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    // --help and --version exit 0; bad flags exit 1 with CLI11's message after "error: ".
    if (e.get_exit_code() == 0) return flushStdout(app.exit(e));
    return reportUsageError(app, e);
  } catch (const tessel::tools::ExitStatus &e) {
    return flushStdout(e.code);
  } catch (const tessel::Error &e) {
    std::cout.flush();
    const std::string msg = tessel::ir::text::clipLongLines(withErrorTag(e.what()));
    std::cerr << msg << (msg.ends_with('\n') ? "" : "\n");
    return 1;
  } catch (const std::exception &e) {
    std::cout.flush();
    std::cerr << tessel::ir::text::clipLongLines(std::string("tessel: internal error: ") + e.what())
              << "\n";
    return 2;
  }
  return flushStdout(0);
}
