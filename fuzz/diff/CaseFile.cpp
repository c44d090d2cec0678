//===- fuzz/diff/CaseFile.cpp - Cases as regression files -------------------------===//
#include "fuzz/diff/CaseFile.h"

#include <cstdlib>
#include <sstream>

#include "ir/Diagnostics.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/TextUtil.h"

namespace tessel::difffuzz {

namespace {

std::string oneLine(const std::string &s) { return s.substr(0, s.find('\n')); }

} // namespace

std::string formatCaseFile(const CaseFile &f) {
  const Case &c = f.c;
  std::string s = "// tessel_difffuzz case: replay with tessel_difffuzz --replay FILE\n";
  s += "// seed: " + std::to_string(c.seed) + "\n";
  s += "// pipeline: " + c.pipeline + "\n";
  s += std::string("// fd: ") + (c.fd ? "true" : "false") + "\n";
  s += "// oracle: " + f.oracle + "\n";
  s += "// message: " + oneLine(f.message) + "\n";
  if (!f.cause.empty()) s += "// cause: " + oneLine(f.cause) + "\n";
  if (!f.knownFailure.empty()) s += "// known-failure: " + oneLine(f.knownFailure) + "\n";
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const ir::Tensor &t = c.inputs[i];
    s += "// input " + ir::valueRef(c.program, c.program.inputs[i]) + ": " +
         ir::text::formatType(t.type) + " =";
    for (double x : t.data) s += " " + ir::text::formatDouble(x);
    s += "\n";
  }
  return s + ir::printProgram(c.program);
}

CaseFile parseCaseFile(const std::string &text, const std::string &filename) {
  CaseFile f;
  f.c.program = ir::parseProgram(text, filename);
  const ir::Program &p = f.c.program;
  f.c.inputs.resize(p.inputs.size());
  std::vector<bool> given(p.inputs.size(), false);
  bool haveSeed = false, havePipeline = false;
  auto bad = [&](const std::string &what) {
    return Error(filename + ": error: " + what + " (see fuzz/diff/CaseFile.h)");
  };
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("// ", 0) != 0) continue;
    std::string body = line.substr(3);
    size_t colon = body.find(": ");
    if (colon == std::string::npos) continue;
    std::string key = body.substr(0, colon), value = body.substr(colon + 2);
    if (key == "seed") {
      f.c.seed = std::strtoull(value.c_str(), nullptr, 10);
      haveSeed = true;
    } else if (key == "pipeline") {
      f.c.pipeline = value;
      havePipeline = true;
    } else if (key == "fd") {
      f.c.fd = value == "true";
    } else if (key == "oracle") {
      f.oracle = value;
    } else if (key == "message") {
      f.message = value;
    } else if (key == "cause") {
      f.cause = value;
    } else if (key == "known-failure") {
      f.knownFailure = value;
    } else if (key.rfind("input %", 0) == 0) {
      std::string name = key.substr(7);
      int idx = p.inputIndex(name);
      if (idx < 0) throw bad("the program has no input %" + name);
      size_t eq = value.find(" =");
      if (eq == std::string::npos) throw bad("input %" + name + " has no '='");
      ir::Tensor t;
      t.type = ir::parseType(value.substr(0, eq));
      if (t.type != p.type(p.inputs[static_cast<size_t>(idx)]))
        throw bad("input %" + name + " is declared " + t.type.str() + " here but " +
                  p.type(p.inputs[static_cast<size_t>(idx)]).str() + " in the program");
      std::istringstream nums(value.substr(eq + 2));
      for (std::string tok; nums >> tok;) t.data.push_back(std::strtod(tok.c_str(), nullptr));
      if (static_cast<int64_t>(t.data.size()) != t.type.numel())
        throw bad("input %" + name + " has " + std::to_string(t.data.size()) + " values for " +
                  t.type.str());
      f.c.inputs[static_cast<size_t>(idx)] = std::move(t);
      given[static_cast<size_t>(idx)] = true;
    }
  }
  if (!haveSeed || !havePipeline) throw bad("the header needs a seed and a pipeline line");
  for (size_t i = 0; i < given.size(); ++i)
    if (!given[i]) throw bad("no value for input " + ir::valueRef(p, p.inputs[i]));
  return f;
}

} // namespace tessel::difffuzz
