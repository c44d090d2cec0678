//===- tools/cmd_dump.cpp - `tessel dump FILE|- --format text|json|dot` ----------===//
//
// Converts a program between its forms: canonical text (.tir), JSON (docs/ir-json.md)
// and Graphviz DOT of the dataflow graph. The input is parsed and verified first, so
// dump also rejects malformed input with a file:line:col diagnostic (exit 1).
//
//===----------------------------------------------------------------------===//
#include <memory>

#include "ir/Json.h"
#include "ir/Printer.h"
#include "tools/Commands.h"

namespace tessel::tools {

void addDumpCommand(CLI::App &app) {
  struct Opts {
    std::string file;
    std::string format = "text";
    std::string output = "-";
    std::string inputFormat = "auto";
    ConstantElisionFlag elide;
    bool noLoc = false;
    int indent = 1;
  };
  auto opts = std::make_shared<Opts>();
  CLI::App *cmd = app.add_subcommand(
      "dump",
      "Print a program (text .tir or JSON input) as text, JSON or Graphviz DOT.\n"
      "text -> json -> text is the identity. Example: tessel dump step.tir --format dot -o "
      "step.dot && dot -Tsvg step.dot > step.svg");
  cmd->add_option("file", opts->file, "Program file (.tir text or .json), or '-' for stdin")
      ->required();
  cmd->add_option("--format", opts->format, "Output format: text, json or dot")
      ->check(CLI::IsMember({"text", "json", "dot"}))
      ->capture_default_str();
  cmd->add_option("-o,--output", opts->output, "Output file ('-' = stdout)")
      ->capture_default_str();
  cmd->add_option("--input-format", opts->inputFormat,
                  "Input format: auto (JSON for *.json or input starting with '{', text "
                  "otherwise), text, or json")
      ->capture_default_str();
  opts->elide.addTo(*cmd);
  cmd->add_flag("--no-loc", opts->noLoc, "text: omit loc(\"...\") source locations");
  cmd->add_option("--indent", opts->indent, "json: spaces per indentation level (-1 = one line)")
      ->check(CLI::Range(-1, ir::kMaxJsonIndent))
      ->capture_default_str();
  cmd->callback([opts]() {
    ir::Program p = loadProgram(opts->file, parseInputFormat(opts->inputFormat));
    std::string out;
    if (opts->format == "json") {
      out = ir::programToJson(p, opts->indent);
    } else if (opts->format == "dot") {
      out = ir::printDot(p);
    } else {
      ir::PrintOptions po;
      po.elideConstantsAbove = opts->elide.forOutput(opts->output);
      po.printLocations = !opts->noLoc;
      out = ir::printProgram(p, po);
    }
    writeOutput(opts->output, out);
  });
}

} // namespace tessel::tools
