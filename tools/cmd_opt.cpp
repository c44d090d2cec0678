//===- tools/cmd_opt.cpp - `tessel opt`: run a pass pipeline on a program -------===//
#include <memory>

#include "ir/Json.h"
#include "ir/Printer.h"
#include "tools/Commands.h"
#include "tools/PassFlags.h"

namespace tessel::tools {

namespace {

struct OptArgs {
  std::string input;
  std::string output = "-";
  std::string format = "text";
  std::string inputFormat = "auto";
  ConstantElisionFlag elide;
  PassFlags flags;
};

void runOpt(const OptArgs &a) {
  if (a.flags.handleListPasses()) return;
  if (a.input.empty())
    throw Error("error: opt: no input program (give FILE or '-' for stdin)");
  passes::PassManager pm = a.flags.buildPassManager();
  ir::Program p = loadProgram(a.input, parseInputFormat(a.inputFormat));
  pm.run(p);
  std::string out;
  if (a.format == "text") {
    ir::PrintOptions po;
    po.elideConstantsAbove = a.elide.forOutput(a.output);
    out = ir::printProgram(p, po);
  } else if (a.format == "json") {
    out = ir::programToJson(p) + "\n";
  } else {
    out = ir::printDot(p);
  }
  writeOutput(a.output, out);
}

} // namespace

void addOptCommand(CLI::App &app) {
  auto args = std::make_shared<OptArgs>();
  CLI::App *cmd = app.add_subcommand(
      "opt",
      "Run a pass pipeline on a program and print the result.\n"
      "  tessel opt FILE|- --passes='grad{wrt=beta},checkpoint{policy=recompute},cse,dce'\n"
      "The program goes to stdout (or -o FILE); instrumentation (--print-ir-*, "
      "--time-passes, --pass-statistics, BISECT lines) goes to stderr. --list-passes "
      "shows every pass and option.");
  cmd->add_option("file", args->input, "Program to transform (.tir text or .json; '-' = stdin)");
  cmd->add_option("-o,--output", args->output, "Where to write the result ('-' = stdout)");
  cmd->add_option("--format", args->format, "Output format")
      ->check(CLI::IsMember({"text", "json", "dot"}))
      ->default_str("text");
  cmd->add_option("--input-format", args->inputFormat, "Input format: auto, text or json")
      ->default_str("auto");
  args->elide.addTo(*cmd);
  args->flags.addTo(*cmd);
  cmd->callback([args] { runOpt(*args); });
}

} // namespace tessel::tools
