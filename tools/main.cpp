//===- tools/main.cpp - The tessel command-line driver --------------------------===//
#include <cstdio>
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "ir/Diagnostics.h"
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

int main(int argc, char **argv) {
  CLI::App app{"tessel: a computation-graph compiler for differentiable tensor-network "
               "programs (typed SSA IR, grad, checkpointing, contraction ordering, "
               "prepare, fixed-width engine).",
               "tessel"};
  app.set_version_flag("--version", std::string("tessel ") + TESSEL_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);
  // CLI11's messages for a bad flag ("The following argument was not expected: --x")
  // carry the same tag as every other user error.
  app.failure_message([](const CLI::App *a, const CLI::Error &e) {
    return "error: " + CLI::FailureMessage::simple(a, e);
  });

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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    // --help and --version exit 0; bad flags exit 1 with CLI11's message.
    int rc = app.exit(e);
    return rc == 0 ? 0 : 1;
  } catch (const tessel::Error &e) {
    std::cout.flush();
    const std::string msg = withErrorTag(e.what());
    std::cerr << msg << (msg.ends_with('\n') ? "" : "\n");
    return 1;
  } catch (const std::exception &e) {
    std::cout.flush();
    std::cerr << "tessel: internal error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
