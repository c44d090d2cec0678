//===- tools/cmd_verify.cpp - `tessel verify FILE|-` ----------------------------===//
//
// Parses a program (text or JSON form), verifies it, and prints its canonical text
// form on stdout (or -o FILE). A malformed or invalid program exits 1 with a
// `file:line:col: error: ...` diagnostic (source line and caret) on stderr. Large
// constants are summarised only on a terminal (ConstantElisionFlag, tools/Commands.h).
//
//===----------------------------------------------------------------------===//
#include <memory>

#include "ir/Printer.h"
#include "tools/Commands.h"

namespace tessel::tools {

void addVerifyCommand(CLI::App &app) {
  struct Opts {
    std::string file;
    std::string inputFormat = "auto";
    std::string output = "-";
    bool quiet = false;
    ConstantElisionFlag elide;
  };
  auto opts = std::make_shared<Opts>();
  CLI::App *cmd = app.add_subcommand(
      "verify",
      "Parse and verify a program, then print its canonical text form (.tir).\n"
      "Exit 0 when the program is valid; exit 1 with 'file:line:col: error: ...', the source "
      "line and a caret on stderr otherwise. Checks: syntax, UTF-8, names defined once and "
      "before use, op arity, attributes, types (rank <= 8, extents >= 0) and every op's shape "
      "rule.");
  cmd->add_option("file", opts->file, "Program file (.tir text or .json), or '-' for stdin")
      ->required();
  cmd->add_option("--input-format", opts->inputFormat,
                  "Input format: auto (JSON for *.json or input starting with '{', text "
                  "otherwise), text, or json")
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", opts->quiet, "Only check; print nothing on success");
  cmd->add_option("-o,--output", opts->output, "Where to write the canonical text ('-' = stdout)")
      ->capture_default_str();
  opts->elide.addTo(*cmd);
  cmd->callback([opts]() {
    ir::Program p = loadProgram(opts->file, parseInputFormat(opts->inputFormat));
    if (opts->quiet) return;
    ir::PrintOptions po;
    po.elideConstantsAbove = opts->elide.forOutput(opts->output);
    writeOutput(opts->output, ir::printProgram(p, po));
  });
}

} // namespace tessel::tools
