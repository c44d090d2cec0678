//===- fuzz/diff/tessel_difffuzz.cpp - The differential fuzzer's driver -----------===//
//
//   tessel_difffuzz [--seconds S] [--count N] [--seed S] [--max-size N] [--out DIR]
//                   [--minimize-seconds S] [--max-failures N] [--verbose]
//   tessel_difffuzz --replay FILE...
//
// Checks the cases of seeds S, S+1, ... (fuzz/diff/DiffFuzz.h) until the time, the
// count or the failure budget is spent, and prints how many it ran and what they
// covered. Every failing
// case is minimised (fuzz/diff/Minimize.h) and written to DIR as a case file
// (fuzz/diff/CaseFile.h) named after its seed and oracle; keep it in
// fuzz/regressions/diff/ (fuzz/README.md). A crash prints the seed first. --replay
// checks case files instead (a case marked known-failure is reported, not counted).
// Exit status: 0 no failure, 1 failures, 2 bad usage or an unreadable case file.
//
//===----------------------------------------------------------------------===//
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "fuzz/diff/CaseFile.h"
#include "fuzz/diff/DiffFuzz.h"
#include "fuzz/diff/Minimize.h"
#include "ir/Diagnostics.h"
#include "passes/PassManager.h"

using namespace tessel;
using namespace tessel::difffuzz;

namespace {

/// What a crash handler prints: set before each case (async-signal-safe to write).
char gCurrent[256] = "";

void onCrash(int sig) {
  ssize_t ignored = write(STDERR_FILENO, gCurrent, strlen(gCurrent));
  (void)ignored;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void printFailures(const std::vector<Failure> &fs, const std::string &indent) {
  for (const Failure &f : fs) std::cout << indent << f.oracle << ": " << f.message << "\n";
}

int replay(const std::vector<std::string> &files) {
  Checker checker;
  int failing = 0;
  for (const std::string &path : files) {
    CaseFile f = parseCaseFile(slurp(path), path);
    CheckResult r = checker.check(f.c);
    std::cout << path << ": " << (r.failures.empty() ? "passes" : "FAILS")
              << (f.knownFailure.empty() ? "" : " (known failure: " + f.knownFailure + ")") << "\n";
    printFailures(r.failures, "  ");
    failing += !r.failures.empty() && f.knownFailure.empty();
  }
  return failing ? 1 : 0;
}

struct Totals {
  uint64_t programs = 0, ops = 0, grads = 0, fdChecked = 0, engineRan = 0, failing = 0, slack = 0,
           fdSlack = 0;
  std::map<std::string, uint64_t> fdSkipped, failures;
  std::set<std::string> opKinds, passes;
};

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"Differential fuzzing of tessel: random programs, random pipelines, every "
               "evaluator against the others (fuzz/README.md)"};
  double seconds = 60, minimizeSeconds = 20;
  uint64_t maxFailures = 10;
  uint64_t count = 0, seed = 0;
  int maxSize = 24;
  std::string out = "difffuzz-failures";
  bool verbose = false;
  std::vector<std::string> replayFiles;
  app.add_option("--seconds", seconds, "stop after this many seconds (default 60)");
  app.add_option("--count", count, "stop after this many programs (0 = no limit)");
  auto *seedOpt = app.add_option("--seed", seed, "first seed (default: from the clock)");
  app.add_option("--max-size", maxSize, "largest number of ops a program draws (default 24)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--out", out, "folder for the minimised failing cases (default difffuzz-failures)");
  app.add_option("--minimize-seconds", minimizeSeconds,
                 "time to spend minimising each failure (default 20; 0 = keep it as found)");
  app.add_option("--max-failures", maxFailures,
                 "stop after this many failing programs (default 10; each is minimised)");
  app.add_flag("--verbose", verbose, "print every case's seed and pipeline");
  app.add_option("--replay", replayFiles, "check these case files instead of fuzzing");
  CLI11_PARSE(app, argc, argv);

  try {
    if (!replayFiles.empty()) return replay(replayFiles);
    if (!seedOpt->count())
      seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) %
             1000000000ull;
    std::signal(SIGSEGV, onCrash);
    std::signal(SIGABRT, onCrash);
    std::signal(SIGFPE, onCrash);
    std::signal(SIGBUS, onCrash);
    std::cout << "tessel_difffuzz: first seed " << seed << ", max size " << maxSize << ", "
              << seconds << " s" << (count ? ", at most " + std::to_string(count) + " programs" : "")
              << std::endl;

    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
    Checker checker;
    Totals t;
    for (uint64_t s = seed;
         (!count || t.programs < count) && t.failing < maxFailures && elapsed() < seconds; ++s) {
      std::snprintf(gCurrent, sizeof gCurrent,
                    "\ntessel_difffuzz: crashed on seed %llu; reproduce with: tessel_difffuzz "
                    "--seed %llu --count 1 --max-size %d\n",
                    static_cast<unsigned long long>(s), static_cast<unsigned long long>(s), maxSize);
      ++t.programs;
      Case c;
      try {
        c = generateCase(s, maxSize);
      } catch (const std::exception &e) {
        ++t.failing;
        ++t.failures["generator"];
        std::cout << "seed " << s << ": generator: " << e.what() << "\n";
        continue;
      }
      if (verbose) std::cout << "seed " << s << ": " << c.program.ops.size() << " ops, pipeline '" << c.pipeline << "'\n";
      t.ops += c.program.ops.size();
      for (const ir::Op &op : c.program.ops) t.opKinds.insert(ir::opName(op.kind));
      for (const passes::PassInvocation &inv : passes::Pipeline::parse(c.pipeline).passes) {
        t.passes.insert(inv.name());
        t.grads += inv.name() == "grad";
      }
      CheckResult r = checker.check(c);
      t.fdChecked += r.fdChecked;
      t.engineRan += r.engineRan;
      t.slack += static_cast<uint64_t>(r.roundingSlackNeeded);
      t.fdSlack += r.fdSlackNeeded;
      if (!r.fdSkipped.empty()) ++t.fdSkipped[r.fdSkipped];
      if (r.failures.empty()) continue;

      ++t.failing;
      for (const Failure &f : r.failures) ++t.failures[f.oracle];
      std::cout << "seed " << s << ": FAILS (" << c.program.ops.size() << " ops, pipeline '"
                << c.pipeline << "')\n";
      printFailures(r.failures, "  ");
      const Failure &first = r.failures.front();
      MinimizeStats ms;
      Case small = minimizeSeconds > 0 ? minimize(c, first.oracle, checker, minimizeSeconds, &ms) : c;
      CheckResult again = checker.check(small);
      CaseFile f{small, first.oracle, first.message, "", ""};
      for (const Failure &g : again.failures)
        if (g.oracle == first.oracle) f.message = g.message;
      std::filesystem::create_directories(out);
      std::string path = out + "/seed-" + std::to_string(s) + "-" + first.oracle + ".tir";
      std::ofstream(path) << formatCaseFile(f);
      std::cout << "  minimised to " << small.program.ops.size() << " ops (" << ms.attempts
                << " attempts): " << path << "\n";
    }

    std::cout << "tessel_difffuzz: " << t.programs << " programs (" << t.ops << " ops, "
              << t.opKinds.size() << " of " << ir::kNumOpKinds << " op kinds) in " << elapsed()
              << " s, seeds " << seed << ".." << seed + t.programs - 1 << "\n";
    std::cout << "  pipelines used " << t.passes.size() << " of " << passes::passRegistry().size()
              << " passes, " << t.grads << " grads; engine ran " << t.engineRan
              << " programs; gradient checked by finite differences " << t.fdChecked << " times\n";
    std::cout << "  value comparisons that needed the rounding slack: " << t.slack << "\n";
    std::cout << "  finite-difference checks that needed the transform's rounding: " << t.fdSlack << "\n";
    for (const auto &[why, n] : t.fdSkipped) std::cout << "  finite differences skipped " << n << "x: " << why << "\n";
    std::cout << "  failing programs: " << t.failing << "\n";
    for (const auto &[oracle, n] : t.failures) std::cout << "    " << oracle << ": " << n << "\n";
    return t.failing ? 1 : 0;
  } catch (const std::exception &e) {
    std::cerr << "tessel_difffuzz: " << e.what() << "\n";
    return 2;
  }
}
