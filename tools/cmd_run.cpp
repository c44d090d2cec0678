//===- tools/cmd_run.cpp - `tessel run FILE --input NAME=VALUE ...` --------------===//
//
// Prepares and runs a program on the engine, writes the outputs as .npy files (or
// prints them), and reports timings as docs/benchmarking.md asks: prepare, the first run
// alone, the steady state over N runs after one warm-up (min/median/p90/max), the
// engine width, the BLAS library and its thread count, and the load average before
// and after.
//
//===----------------------------------------------------------------------===//
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "runtime/Npy.h"
#include "runtime/Runtime.h"
#include "runtime/Stats.h"
#include "tools/Commands.h"
#include "tools/RuntimeCommon.h"

namespace tessel::tools {
namespace {

std::string formatTensorShort(const ir::Tensor &t) {
  std::ostringstream os;
  os.precision(17);
  if (t.data.size() <= 16) {
    os << "[";
    for (size_t i = 0; i < t.data.size(); ++i) os << (i ? ", " : "") << t.data[i];
    os << "]";
    return os.str();
  }
  double mn = t.data[0], mx = t.data[0], sum = 0;
  for (double x : t.data) {
    mn = std::min(mn, x);
    mx = std::max(mx, x);
    sum += x;
  }
  os << "<" << t.data.size() << " elements, min " << mn << ", max " << mx << ", sum " << sum << ">";
  return os.str();
}

} // namespace

void addRunCommand(CLI::App &app) {
  struct Opts {
    std::string file;
    std::string inputFormat = "auto";
    std::vector<std::string> inputs;
    int width = 1;
    int repeat = 0;
    std::string outputDir;
    PrepareFlags prepareFlags;
    RunPassesFlag passes;
    std::string order = "auto";
    bool profile = false;
    size_t profileTop = 15;
    int64_t randomSeed = -1;
  };
  auto opts = std::make_shared<Opts>();
  CLI::App *cmd = app.add_subcommand(
      "run",
      "Prepare a program and run it on an engine of fixed width. Inputs come from NumPy "
      ".npy files (little-endian float64, C order) or, for small ones, inline JSON "
      "(NAME=0.4, NAME=[[1,2],[3,4]]). Outputs are written as DIR/<output name>.npy with "
      "--output-dir (bytes other than letters, digits and _+-. and a leading '.' as %XX; "
      "two outputs that would share a file are an error), else printed (values of up to 16 elements, a summary otherwise). "
      "Timings: prepare, the first run, and with --repeat N the steady state over N runs "
      "after one warm-up (min/median/p90/max), plus the width, the BLAS library and its "
      "thread count and the load average before and after. A missing, unknown, "
      "unreadable or mis-shaped input exits 1 naming the input. einsum ops are lowered "
      "by the order pass first (see --order), then the pipeline of --passes runs (default "
      "fold,cse,dce; --passes '' runs the program exactly as given).");
  cmd->add_option("file", opts->file, "Program file (.tir text or .json), or '-' for stdin");
  cmd->add_option("--input-format", opts->inputFormat, "auto, text or json")->capture_default_str();
  cmd->add_option("-i,--input", opts->inputs,
                  "NAME=PATH.npy or NAME=<JSON number or nested list>; one per program input")
      ->allow_extra_args(false);
  cmd->add_option("--random-inputs", opts->randomSeed,
                  "Fill inputs not given with --input with uniform random values in [-1, 1) "
                  "from this seed (for benchmarks)");
  cmd->add_option("-w,--width", opts->width, "Engine width (threads; 1 = the calling thread)")
      ->capture_default_str();
  cmd->add_option("-n,--repeat", opts->repeat,
                  "Steady-state runs timed after one warm-up (0 = only the first run)")
      ->capture_default_str();
  cmd->add_option("-o,--output-dir", opts->outputDir,
                  "Directory for the outputs as <name>.npy (created if missing)");
  opts->prepareFlags.addTo(*cmd, "the op, its location and which operands held NaN or inf");
  opts->passes.addTo(*cmd);
  cmd->add_flag("--profile", opts->profile,
                "Time every instruction over all runs and print the costliest ones (mean ms "
                "per run, share of the total)");
  cmd->add_option("--profile-top", opts->profileTop,
                  "Instructions listed by --profile (0 = all)")
      ->capture_default_str();
  cmd->add_option("--order", opts->order,
                  "Strategy to lower einsum ops (auto, chain, pairwise, greedy, optimal) or "
                  "'none' to reject them")
      ->capture_default_str();
  cmd->callback([opts]() {
    if (opts->passes.flags.handleListPasses()) return;
    if (opts->file.empty()) throw Error("error: a program file is required (FILE, or '-' for stdin)");
    {
      rt::PrepareOptions stages; // a bad --print-plan-after stage, before any work
      opts->passes.addPlanPrinting(stages);
    }
    if (opts->width < 1 || opts->width > 256)
      throw Error("error: --width must be between 1 and 256, got " + std::to_string(opts->width));
    if (opts->repeat < 0) throw Error("error: --repeat must be >= 0, got " + std::to_string(opts->repeat));
    std::string loadBefore = rt::loadAverage();
    ir::Program p = loadProgram(opts->file, parseInputFormat(opts->inputFormat));
    const passes::RunPreparation prep = opts->passes.apply(p, opts->order);
    const std::string &note = prep.note, &passesLine = prep.passesLine;

    std::vector<ir::Tensor> inputs = loadProgramInputs(p, opts->inputs, opts->randomSeed);

    rt::PrepareOptions po = opts->prepareFlags.options();
    opts->passes.addPlanPrinting(po);
    auto t0 = std::chrono::steady_clock::now();
    auto plan = rt::prepare(p, po);
    double prepareMs = rt::msSince(t0);
    rt::Engine engine(opts->width);
    engine.setProfiling(opts->profile);

    t0 = std::chrono::steady_clock::now();
    std::vector<ir::Tensor> outs = engine.run(*plan, inputs);
    double firstMs = rt::msSince(t0);
    std::vector<double> steady;
    if (opts->repeat > 0) {
      engine.run(*plan, inputs); // warm-up
      for (int r = 0; r < opts->repeat; ++r) {
        t0 = std::chrono::steady_clock::now();
        auto o = engine.run(*plan, inputs);
        steady.push_back(rt::msSince(t0));
      }
    }
    std::string loadAfter = rt::loadAverage();

    std::string text;
    // Every output's file (or printed label) first, so a collision is an error before
    // anything is written: two outputs must not share a file.
    std::vector<std::string> labels(outs.size()), files(outs.size());
    std::map<std::string, size_t> byFile, byName;
    for (size_t i = 0; i < outs.size(); ++i) {
      std::string name = p.outputName(i);
      labels[i] = displayOutputName(name);
      if (!opts->outputDir.empty()) {
        files[i] = npyFileName(name);
        auto [it, fresh] = byFile.emplace(files[i], i);
        if (!fresh)
          throw Error("error: outputs " + std::to_string(it->second) + " (" +
                      labels[it->second] + ") and " + std::to_string(i) + " (" + labels[i] +
                      ") would both be written to " + files[i] +
                      "; give the program's outputs distinct names");
      } else if (!byName.emplace(name, i).second) {
        labels[i] += " (output " + std::to_string(i) + ")";
      }
    }
    if (!opts->outputDir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(opts->outputDir, ec);
      if (ec) throw Error("error: --output-dir: cannot create '" + opts->outputDir + "': " + ec.message());
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      if (!opts->outputDir.empty()) {
        std::string path = (std::filesystem::path(opts->outputDir) / files[i]).string();
        rt::writeNpy(path, outs[i]);
        // The path as written; quoted only when --output-dir itself holds bytes a
        // terminal should not see raw.
        std::string shown = ir::text::quoteString(path);
        if (shown == "\"" + path + "\"") shown = path;
        text += "output " + labels[i] + ": " + outs[i].type.str() + " -> " + shown + "\n";
      } else {
        text += "output " + labels[i] + ": " + outs[i].type.str() + " = " + formatTensorShort(outs[i]) + "\n";
      }
    }
    if (!passesLine.empty()) text += passesLine + "\n";
    char buf[256];
    std::snprintf(buf, sizeof buf, "prepare: %.3f ms (%zu instructions, arena %lld bytes, peak live %lld bytes",
                  prepareMs, rt::planSize(*plan), static_cast<long long>(rt::arenaBytes(*plan)),
                  static_cast<long long>(rt::peakLiveBytes(*plan)));
    text += buf;
    if (const int64_t tables = rt::tableBytes(*plan); tables > 0)
      text += ", iota tables " + std::to_string(tables) + " bytes";
    text += ")\n";
    std::snprintf(buf, sizeof buf, "run first: %.3f ms\n", firstMs);
    text += buf;
    if (!steady.empty())
      text += "run steady: " + rt::formatSummary(rt::summarize(steady)) + " after 1 warm-up\n";
    text += "width: " + std::to_string(opts->width) + "\n";
    text += "blas: " + rt::blasInfo() + "\n";
    text += "load average: before " + loadBefore + ", after " + loadAfter + "\n";
    if (!note.empty()) text += "note: " + note + "\n";
    if (opts->profile) text += engine.profileReport(*plan, opts->profileTop);
    writeOutput("-", text);
  });
}

} // namespace tessel::tools
