//===- tools/PassFlags.cpp - Pass-manager flags for any subcommand --------------===//
#include "tools/PassFlags.h"

#include <iostream>

namespace tessel::tools {

void PassFlags::addTo(CLI::App &cmd, const std::string &passesHelp) {
  auto *p = cmd.add_option(
      "--passes", passes,
      passesHelp.empty()
          ? "Pass pipeline, e.g. 'grad{wrt=beta},checkpoint{policy=recompute},cse,dce' "
            "(see --list-passes; list option values separate items with ';')"
          : passesHelp);
  p->each([this](const std::string &) { passesGiven = true; });
  cmd.add_flag("--list-passes", listPasses,
               "Print every registered pass with its options and defaults, then exit");
  cmd.add_flag("--print-pipeline", printPipeline,
               "Print the canonical form of the pipeline (every option spelled out) to "
               "stderr before running it");
  cmd.add_option("--disable-pass", disablePass,
                 "Skip the named pass(es) wherever they appear in the pipeline")
      ->delimiter(',')
      ->allow_extra_args(false);
  cmd.add_option("--print-ir-before", printIrBefore,
                 "Print the program (to stderr) before each run of the named pass(es)")
      ->delimiter(',')
      ->allow_extra_args(false);
  cmd.add_option("--print-ir-after", printIrAfter,
                 "Print the program (to stderr) after each run of the named pass(es)")
      ->delimiter(',')
      ->allow_extra_args(false);
  cmd.add_flag("--print-ir-after-all", printIrAfterAll,
               "Print the program (to stderr) after every pass");
  cmd.add_flag("--print-ir-after-change", printIrAfterChange,
               "Print the input, then the program after each pass that changed it");
  cmd.add_option("--print-changed", printChanged,
                 "Like --print-ir-after-change: 'full' prints the whole program after each pass "
                 "that changed it, 'diff' a unified diff against the program before the pass "
                 "(the system's diff -u)")
      ->check(CLI::IsMember({"full", "diff"}));
  cmd.add_option("--dump-dir", dumpDir,
                 "Write the program before the first and after every pass to DIR "
                 "(00-input.tir, 01-<pass>.tir, ...; numbered by pipeline position; "
                 "`trg` writes each program it compiles to its own DIR/NN-<program>/, and its plan "
                 "beside the last dump as plan.txt)")
      ->check([](const std::string &dir) {
        return dir.empty() ? std::string("an empty directory name (omit --dump-dir to write no dumps)")
                           : std::string();
      });
  cmd.add_flag("--time-passes", timePasses, "Report the wall time of every pass (stderr)");
  cmd.add_flag("--time-passes-json", timePassesJson,
               "Report the wall time of every pass as JSON (stderr)");
  cmd.add_flag("--pass-statistics", passStatistics,
               "Report ops before/after and the counters of every pass (stderr)");
  cmd.add_flag("--verify-each,!--no-verify-each", verifyEach,
               verifyEach ? "Verify the program after every pass that changed it (default: on; "
                            "--verify-each=false or --no-verify-each to disable)"
                          : "Verify each program after every pass that changed it (default: off: "
                            "each program is verified once, when it is prepared; this finds the "
                            "pass that broke one)");
  cmd.add_option("--bisect-limit", bisectLimit,
                 "Run only the first N pass executions, logging each as BISECT: running / "
                 "NOT running (-1 = no limit)");
  cmd.add_option("--crash-reproducer", crashReproducer,
                 "If a pass throws or fails verification, write its input program and the "
                 "pipeline to FILE");
}

passes::PassManagerOptions PassFlags::managerOptions() const {
  passes::PassManagerOptions o;
  o.verifyEach = verifyEach;
  o.printIrBefore = printIrBefore;
  o.printIrAfter = printIrAfter;
  o.printIrAfterAll = printIrAfterAll;
  o.printIrAfterChange = printIrAfterChange || printChanged == "full";
  o.printChangedDiff = printChanged == "diff";
  o.dumpDir = dumpDir;
  o.timePasses = timePasses;
  o.timePassesJson = timePassesJson;
  o.statistics = passStatistics;
  o.bisectLimit = bisectLimit;
  o.crashReproducer = crashReproducer;
  o.disabledPasses = disablePass;
  o.log = &std::cerr;
  return o;
}

passes::PassManager PassFlags::buildPassManager(const std::string &defaultPipeline) const {
  passes::Pipeline pl = passes::Pipeline::parse(passesGiven ? passes : defaultPipeline);
  if (printPipeline) std::cerr << "pipeline: " << pl.str() << "\n";
  return passes::PassManager(std::move(pl), managerOptions());
}

bool PassFlags::handleListPasses() const {
  if (!listPasses) return false;
  std::cout << passes::describePasses();
  std::cout.flush();
  return true;
}

} // namespace tessel::tools
