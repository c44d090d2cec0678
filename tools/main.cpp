//===- tools/main.cpp - The tessel command-line driver --------------------------===//
#include <cstdio>
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "ir/Diagnostics.h"
#include "tools/Commands.h"

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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    // --help and --version exit 0; bad flags exit 1 with CLI11's message.
    int rc = app.exit(e);
    return rc == 0 ? 0 : 1;
  } catch (const tessel::Error &e) {
    std::cout.flush();
    std::cerr << e.what() << (std::string(e.what()).ends_with('\n') ? "" : "\n");
    return 1;
  } catch (const std::exception &e) {
    std::cout.flush();
    std::cerr << "tessel: internal error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
