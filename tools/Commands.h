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

/// Thrown by a command whose errors are already printed (each where it happened, e.g. the
/// failed β values of a sweep): the driver exits with `code` and prints nothing more.
struct ExitStatus {
  int code = 1;
};

void addEmitCommand(CLI::App &app);      // cmd_emit.cpp
void addVerifyCommand(CLI::App &app);    // cmd_verify.cpp
void addDumpCommand(CLI::App &app);      // cmd_dump.cpp
void addPrepareCommand(CLI::App &app);   // cmd_prepare.cpp
void addRunCommand(CLI::App &app);       // cmd_run.cpp
void addBenchCommand(CLI::App &app);     // cmd_bench.cpp
void addBenchPlaquetteCommand(CLI::App &bench); // cmd_bench_plaquette.cpp, under bench
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

/// Reads the whole of `s` as a double, as strtod does (decimal, hex, inf, nan). A
/// subnormal value such as 1e-320 is a number; a literal beyond the range of double
/// (1e999), or so small that it reads as 0 (1e-400), is a problem rather than a silent
/// inf or 0. Returns the problem ("'x' is not a number"), or "" when `v` was set.
std::string readDouble(const std::string &s, double &v);

/// readDouble for the value of `flag`; throws tessel::Error "error: FLAG: <problem>".
double parseDoubleArg(const std::string &s, const std::string &flag);

/// The whole of `s` as a decimal int64; throws tessel::Error "error: FLAG: ..." for
/// anything else, naming a value out of the range of int64 as such.
int64_t parseIntArg(const std::string &s, const std::string &flag);

/// CLI11 check of a number option: >= 0, or > 0 when `strict`. Its message names the
/// bound and repeats the value as given ("--atol: must be >= 0, got -1"); CLI11's own
/// range checks print the whole range of double, 310 digits, in fixed notation.
CLI::Validator nonNegative(bool strict = false);

/// An inline tensor value (`--input x=[[1,2],[3,4]]` of run and gradcheck) nests at most
/// as deep as a tensor's rank. Throws tessel::Error "<who>: nested list deeper than 8
/// levels ..." otherwise; checked before the value is parsed and walked.
void checkInlineNesting(const std::string &value, const std::string &who);

/// --elide-constants N of the commands that print a program as text (verify, opt, dump).
/// A summarised constant does not read back, so by default only text a person reads is
/// summarised: stdout on a terminal gets ir::kElideConstantsForReading, a file (-o, or
/// stdout redirected) or a pipe gets every constant in full. The flag, when given,
/// applies wherever the text goes (0 = always in full).
struct ConstantElisionFlag {
  int64_t above = -1; ///< -1: not given
  void addTo(CLI::App &cmd);
  /// ir::PrintOptions::elideConstantsAbove for text written to `outputPath` ("-" or
  /// empty = stdout).
  int64_t forOutput(const std::string &outputPath) const;
};

} // namespace tessel::tools
