//===- tools/PassFlags.h - Pass-manager flags for any subcommand ----------------===//
//
// The LLVM-style pass flags, added to a CLI11 subcommand by PassFlags::addTo and turned
// into a passes::PassManager by PassFlags::buildPassManager. Used by `tessel opt` and by
// every command that compiles something (`tessel trg`):
//
//   --passes=PIPELINE         e.g. 'grad{wrt=beta},checkpoint{policy=recompute},cse,dce'
//   --list-passes             print the registry (to stdout) and exit
//   --print-pipeline          print the canonical pipeline string (stderr) before running
//   --disable-pass=NAME[,..]  skip these passes wherever they appear
//   --print-ir-before=P[,..]  --print-ir-after=P[,..]  --print-ir-after-all
//   --print-ir-after-change   --dump-dir=DIR           --time-passes
//   --time-passes-json        --pass-statistics        --verify-each[=false]
//   --bisect-limit=N          --crash-reproducer=FILE
//
// Everything the instrumentation prints goes to stderr (stdout stays the program).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "passes/PassManager.h"

namespace tessel::tools {

struct PassFlags {
  std::string passes;
  bool passesGiven = false; ///< --passes appeared on the command line
  bool listPasses = false;
  bool printPipeline = false;
  std::vector<std::string> disablePass;
  std::vector<std::string> printIrBefore, printIrAfter;
  bool printIrAfterAll = false;
  bool printIrAfterChange = false;
  std::string printChanged; ///< --print-changed=full|diff ("" = off)
  std::string dumpDir;
  bool timePasses = false;
  bool timePassesJson = false;
  bool passStatistics = false;
  bool verifyEach = true; ///< the default (tessel trg: false) before addTo
  int64_t bisectLimit = -1;
  std::string crashReproducer;

  /// Adds the flags to `cmd` (this object must outlive parsing). `passesHelp`
  /// replaces the help of --passes (e.g. to say what the default pipeline is).
  void addTo(CLI::App &cmd, const std::string &passesHelp = "");
  /// The instrumentation options (log = std::cerr).
  passes::PassManagerOptions managerOptions() const;
  /// Parses --passes (or `defaultPipeline` when --passes was not given) and builds
  /// the manager. Throws tessel::Error for a bad pipeline or pass name.
  passes::PassManager buildPassManager(const std::string &defaultPipeline = "") const;
  /// If --list-passes was given, prints the registry to stdout and returns true
  /// (the command should then stop).
  bool handleListPasses() const;
};

} // namespace tessel::tools
