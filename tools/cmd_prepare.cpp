//===- tools/cmd_prepare.cpp - `tessel prepare FILE` ----------------------------===//
//
// Prepares a program for the engine and prints the plan: one line per instruction
// (kernel, op, result and operand buffers, dependencies, chunks, bytes written,
// kernel details such as the GEMM form or the gesdd workspace), then the outputs,
// the arena size and the peak live bytes.
//
//===----------------------------------------------------------------------===//
#include <chrono>
#include <memory>

#include "runtime/Runtime.h"
#include "runtime/Stats.h"
#include "tools/Commands.h"
#include "tools/RuntimeCommon.h"

namespace tessel::tools {

void addPrepareCommand(CLI::App &app) {
  struct Opts {
    std::string file;
    std::string inputFormat = "auto";
    std::string format = "text";
    std::string order = "auto";
    int width = 1;
    PrepareFlags prepareFlags;
    RunPassesFlag passes;
    bool noReuse = false;
  };
  auto opts = std::make_shared<Opts>();
  CLI::App *cmd = app.add_subcommand(
      "prepare",
      "Lower a program to the engine's plan and print it: the flat instruction list in "
      "execution order, each with its kernel (elementwise, reduce, copy, pad, gemm, svd), "
      "result and operand buffers (arena+OFFSET = bytes into the engine's arena, inputN, constN, "
      "outputN = written straight into the returned tensor), dependencies (#i), chunk count, bytes written "
      "and kernel details (GEMM form B/M/N/K, gesdd workspace); then the arena size and "
      "the peak live bytes. reshape and stop_gradient are aliases and produce no "
      "instruction. einsum ops are first lowered by the order pass (see --order), then "
      "the pipeline of --passes runs (default fold,cse,dce, as in tessel run; --passes '' "
      "shows the plan of the program exactly as given).");
  cmd->add_option("file", opts->file, "Program file (.tir text or .json), or '-' for stdin");
  cmd->add_option("--input-format", opts->inputFormat, "auto, text or json")->capture_default_str();
  cmd->add_option("--format", opts->format, "Output format: text or json")->capture_default_str();
  cmd->add_option("--width", opts->width,
                  "Engine width the plan is shown for (plans do not depend on the width: "
                  "chunking is fixed so results are bitwise identical for every width)")
      ->capture_default_str();
  cmd->add_option("--order", opts->order,
                  "Contraction order strategy used to lower einsum ops (auto, chain, "
                  "pairwise, greedy, optimal), or 'none' to reject them")
      ->capture_default_str();
  opts->prepareFlags.addTo(*cmd, "the op (the plan then works in place nowhere)");
  opts->passes.addTo(*cmd);
  cmd->add_flag("--no-reuse", opts->noReuse, "Give every value its own buffer (no slot reuse)");
  cmd->callback([opts]() {
    if (opts->passes.flags.handleListPasses()) return;
    if (opts->file.empty()) throw Error("error: a program file is required (FILE, or '-' for stdin)");
    {
      rt::PrepareOptions stages; // a bad --print-plan-after stage, before any work
      opts->passes.addPlanPrinting(stages);
    }
    if (opts->format != "text" && opts->format != "json")
      throw Error("error: --format: unknown format '" + opts->format + "' (allowed: text, json)");
    if (opts->width < 1) throw Error("error: --width must be >= 1, got " + std::to_string(opts->width));
    ir::Program p = loadProgram(opts->file, parseInputFormat(opts->inputFormat));
    const std::string note = opts->passes.apply(p, opts->order).note;
    rt::PrepareOptions po = opts->prepareFlags.options();
    opts->passes.addPlanPrinting(po);
    po.reuseBuffers = !opts->noReuse;
    auto t0 = std::chrono::steady_clock::now();
    auto plan = rt::prepare(p, po);
    double ms = rt::msSince(t0);
    std::string out = rt::describePlan(*plan, opts->format == "json");
    if (opts->format == "text") {
      char buf[96];
      std::snprintf(buf, sizeof buf, "prepared in %.3f ms; engine width %d\n", ms, opts->width);
      out += buf;
      if (!note.empty()) out += "note: " + note + "\n";
    }
    writeOutput("-", out);
  });
}

} // namespace tessel::tools
