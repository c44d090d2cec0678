//===- tools/Commands.h - Subcommands of the tessel driver ---------------------===//
//
// Each subcommand lives in its own cmd_<name>.cpp and registers itself with
// add<Name>Command(app): it adds a CLI11 subcommand, its options, and a callback.
// Callbacks report problems by throwing (see ir/Diagnostics.h): tessel::Error is a
// user error (exit 1), anything else an internal error (exit 2).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "ir/Program.h"

namespace tessel::tools {

void addEmitCommand(CLI::App &app);      // cmd_emit.cpp
void addVerifyCommand(CLI::App &app);    // cmd_verify.cpp
void addDumpCommand(CLI::App &app);      // cmd_dump.cpp
void addPrepareCommand(CLI::App &app);   // cmd_prepare.cpp
void addRunCommand(CLI::App &app);       // cmd_run.cpp
void addBenchCommand(CLI::App &app);     // cmd_bench.cpp
void addOptCommand(CLI::App &app);       // cmd_opt.cpp
void addCostCommand(CLI::App &app);      // cmd_cost.cpp
void addGradcheckCommand(CLI::App &app); // cmd_gradcheck.cpp
void addTrgCommand(CLI::App &app);       // cmd_trg.cpp
void addOpsCommand(CLI::App &app);       // cmd_ops.cpp

/// Input formats of a program file.
enum class InputFormat { Auto, Text, Json };

/// Reads a program from `path` ("-" = stdin). Auto picks JSON for a ".json" file or
/// text starting with '{', the text form otherwise. Errors (unreadable file, parse
/// or verification errors) throw tessel::Error with a file:line:col diagnostic.
ir::Program loadProgram(const std::string &path, InputFormat fmt = InputFormat::Auto);

/// Parses an --input-format value ("auto", "text", "json"); throws tessel::Error.
InputFormat parseInputFormat(const std::string &s);

/// Writes `text` to `path` ("-" or empty = stdout). Throws tessel::Error on failure.
void writeOutput(const std::string &path, const std::string &text);

/// Reads a whole file ("-" = stdin). Throws tessel::Error naming the file.
std::string readFile(const std::string &path);

} // namespace tessel::tools
