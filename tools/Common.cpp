//===- tools/Common.cpp - File and flag helpers shared by the subcommands -------===//
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

#include "ir/Json.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/TextUtil.h"
#include "runtime/MemoryLimit.h"
#include "tools/Commands.h"

namespace tessel::tools {

std::string readFile(const std::string &path) { return rt::readBoundedFile(path); }

InputFormat parseInputFormat(const std::string &s) {
  if (s == "auto") return InputFormat::Auto;
  if (s == "text" || s == "tir") return InputFormat::Text;
  if (s == "json") return InputFormat::Json;
  throw Error("error: --input-format: unknown format '" + ir::text::clipForMessage(s) + "' (allowed: auto, text, json)");
}

ir::Program loadProgram(const std::string &path, InputFormat fmt) {
  std::string text = readFile(path);
  std::string display = path == "-" ? "<stdin>" : path;
  if (fmt == InputFormat::Auto) {
    bool json = path.size() > 5 && path.substr(path.size() - 5) == ".json";
    const size_t bom = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0; // UTF-8 BOM
    size_t first = text.find_first_not_of(" \t\r\n", bom);
    if (!json && first != std::string::npos && text[first] == '{') json = true;
    fmt = json ? InputFormat::Json : InputFormat::Text;
  }
  if (fmt == InputFormat::Json) return ir::programFromJson(text, display);
  return ir::parseProgram(text, display);
}

void writeOutput(const std::string &path, const std::string &text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    std::cout.flush();
    return;
  }
  std::ofstream out(path, std::ios::binary);
  if (!out)
    throw Error("error: cannot open '" + path + "' for writing");
  out << text;
  if (!out)
    throw Error("error: cannot write '" + path + "'");
}

std::string readDouble(const std::string &s, double &v) {
  const char *begin = s.c_str();
  char *end = nullptr;
  errno = 0;
  double x = std::strtod(begin, &end);
  const std::string quoted = "'" + ir::text::clipForMessage(s) + "'";
  if (end == begin || end != begin + s.size()) return quoted + " is not a number";
  // strtod sets ERANGE for a subnormal result too; only inf and 0 are wrong values.
  if (errno == ERANGE && (std::isinf(x) || x == 0))
    return quoted + " is out of the range of f64 (it would read as " + (x == 0 ? "0" : "inf") + ")";
  v = x;
  return "";
}

double parseDoubleArg(const std::string &s, const std::string &flag) {
  double v = 0;
  std::string problem = readDouble(s, v);
  if (!problem.empty()) throw Error("error: " + flag + ": " + problem);
  return v;
}

int64_t parseIntArg(const std::string &s, const std::string &flag) {
  const char *begin = s.c_str();
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(begin, &end, 10);
  const std::string quoted = "'" + ir::text::clipForMessage(s) + "'";
  if (end == begin || end != begin + s.size())
    throw Error("error: " + flag + ": " + quoted + " is not an integer");
  if (errno == ERANGE)
    throw Error("error: " + flag + ": " + quoted + " is out of the range of a 64-bit integer");
  return v;
}

CLI::Validator nonNegative(bool strict) {
  const std::string bound = strict ? "> 0" : ">= 0";
  return CLI::Validator(
      [strict, bound](std::string &s) -> std::string {
        double v = 0;
        std::string problem = readDouble(s, v);
        if (!problem.empty()) return problem;
        if (strict ? v > 0 : v >= 0) return "";
        return "must be " + bound + ", got " + ir::text::clipForMessage(s);
      },
      bound);
}

void checkInlineNesting(const std::string &value, const std::string &who) {
  if (ir::text::findJsonNestingBeyond(value, ir::kMaxRank))
    throw Error(who + ": nested list deeper than " + std::to_string(ir::kMaxRank) +
                " levels (the maximum rank is " + std::to_string(ir::kMaxRank) + ")");
}

void ConstantElisionFlag::addTo(CLI::App &cmd) {
  cmd.add_option("--elide-constants", above,
                 "text: print constants with more than N elements as a one-line summary "
                 "'dense<N elements, min A, max B, sum S> : f64[...]', which does not read back; "
                 "0 = print every constant in full. Default: " +
                     std::to_string(ir::kElideConstantsForReading) +
                     " when stdout is a terminal, 0 (exact) for -o FILE, a redirect or a pipe")
      ->check(nonNegative());
}

int64_t ConstantElisionFlag::forOutput(const std::string &outputPath) const {
  if (above >= 0) return above;
  bool toTerminal = (outputPath.empty() || outputPath == "-") && isatty(STDOUT_FILENO);
  return toTerminal ? ir::kElideConstantsForReading : 0;
}

} // namespace tessel::tools
