//===- tools/Common.cpp - File helpers shared by the subcommands ---------------===//
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "ir/Json.h"
#include "ir/Parser.h"
#include "tools/Commands.h"

namespace tessel::tools {

std::string readFile(const std::string &path) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error("error: cannot read '" + path + "': it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("error: cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    throw Error("error: cannot read '" + path + "'");
  return ss.str();
}

InputFormat parseInputFormat(const std::string &s) {
  if (s == "auto") return InputFormat::Auto;
  if (s == "text" || s == "tir") return InputFormat::Text;
  if (s == "json") return InputFormat::Json;
  throw Error("error: --input-format: unknown format '" + s + "' (allowed: auto, text, json)");
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

} // namespace tessel::tools
