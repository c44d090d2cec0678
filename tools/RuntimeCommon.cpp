//===- tools/RuntimeCommon.cpp - Program inputs for `tessel run` and `tessel bench` ===//
#include "tools/RuntimeCommon.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "passes/PassManager.h"
#include "runtime/Npy.h"
#include "runtime/Stats.h"
#include "tools/Commands.h"

namespace tessel::tools {
namespace {

/// Inline JSON: a number (scalar) or a nested rectangular list of numbers, nested at
/// most kMaxRank deep (checkInlineNesting), so the walk and the messages' dump() recurse
/// at most that deep.
ir::Tensor tensorFromJson(const nlohmann::json &j, const std::string &who) {
  std::vector<int64_t> shape;
  const nlohmann::json *cur = &j;
  while (cur->is_array()) {
    shape.push_back(static_cast<int64_t>(cur->size()));
    if (cur->empty()) break;
    cur = &(*cur)[0];
  }
  auto shown = [](const nlohmann::json &x) { return ir::text::clipForMessage(x.dump()); };
  std::vector<double> data;
  std::function<void(const nlohmann::json &, size_t)> walk = [&](const nlohmann::json &x, size_t d) {
    if (d == shape.size()) {
      if (!x.is_number())
        throw Error(who + ": expected a number, got " + shown(x) + " (inline inputs are JSON "
                    "numbers or nested lists of numbers)");
      data.push_back(x.get<double>());
      return;
    }
    if (!x.is_array() || static_cast<int64_t>(x.size()) != shape[d])
      throw Error(who + ": nested list is not rectangular: expected " + std::to_string(shape[d]) +
                  " entries at depth " + std::to_string(d) + ", got " + shown(x));
    for (const auto &e : x) walk(e, d + 1);
  };
  walk(j, 0);
  return ir::Tensor(ir::Type(shape), std::move(data));
}

ir::Tensor loadInput(const std::string &name, const std::string &value) {
  std::string who = "error: input %" + name;
  bool npy = value.size() >= 4 && value.compare(value.size() - 4, 4, ".npy") == 0;
  if (!npy && !value.empty() && std::string("[-+.0123456789").find(value[0]) != std::string::npos) {
    checkInlineNesting(value, who);
    nlohmann::json j = nlohmann::json::parse(value, nullptr, false);
    if (!j.is_discarded()) return tensorFromJson(j, who);
    if (!std::filesystem::exists(value))
      throw Error(who + ": '" + ir::text::clipForMessage(value) +
                  "' is neither valid inline JSON nor an existing .npy file");
  }
  try {
    return rt::readNpy(value);
  } catch (const Error &e) {
    throw Error(who + ": " + errorText(e));
  }
}

} // namespace

std::vector<ir::Tensor> loadProgramInputs(const ir::Program &p, const std::vector<std::string> &args,
                                          int64_t randomSeed) {
  std::map<std::string, std::string> given;
  for (const std::string &s : args) {
    size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("error: --input '" + s + "': expected NAME=PATH.npy or NAME=<JSON>");
    std::string name = s.substr(0, eq);
    if (!name.empty() && name[0] == '%') name = name.substr(1);
    if (p.inputIndex(name) < 0) {
      std::string names;
      for (ir::ValueId v : p.inputs)
        names += (names.empty() ? "" : ", ") + ir::text::percentName(p.value(v).name);
      throw Error("error: --input " + ir::text::clipForMessage(name) + ": program " +
                  ir::text::atName(p.name) + " has no input " + ir::text::percentName(name) +
                  " (inputs: " + (names.empty() ? "none" : names) + ")");
    }
    if (!given.emplace(name, s.substr(eq + 1)).second)
      throw Error("error: --input " + ir::text::clipForMessage(name) + " given twice");
  }
  std::mt19937_64 rng(static_cast<uint64_t>(randomSeed < 0 ? 0 : randomSeed));
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<ir::Tensor> inputs;
  for (ir::ValueId v : p.inputs) {
    const ir::ValueInfo &vi = p.value(v);
    auto it = given.find(vi.name);
    if (it == given.end()) {
      if (randomSeed < 0)
        throw Error("error: missing input %" + vi.name + " (" + vi.type.str() +
                    "): pass --input " + vi.name + "=PATH.npy");
      ir::Tensor t = ir::Tensor::zeros(vi.type);
      for (double &x : t.data) x = u(rng);
      inputs.push_back(std::move(t));
      continue;
    }
    ir::Tensor t = loadInput(vi.name, it->second);
    if (t.type != vi.type)
      throw Error("error: input %" + vi.name + ": expected " + vi.type.str() + ", got " +
                  t.type.str() + " from '" + it->second + "'");
    inputs.push_back(std::move(t));
  }
  return inputs;
}

void RunPassesFlag::addTo(CLI::App &cmd) {
  flags.addTo(cmd, "pass pipeline applied before prepare (default: " + std::string(kRunPipeline) +
                       ": algebraic folds such as x*1 -> x that the grad transform leaves, then "
                       "CSE and DCE; exact but for the sign of a zero in x + 0 and 0 - x; '' = run the "
                       "program exactly as given; --list-passes lists the passes and pipelines)");
  cmd.add_option("--print-plan-after", printPlanAfter,
                 "Print the plan (to stderr) after the named prepare stage(s): fuse (the fused "
                 "loops: each loop's ops and the buffers it reads), lower (the kernel "
                 "instructions, buffers unassigned), assign (arena slots, in-place), schedule "
                 "(the final dependencies and bytes written, 0 before it); a module's plan prints "
                 "per segment")
      ->allow_extra_args(false); // one value per flag: `--print-plan-after fuse FILE` keeps FILE
}

passes::RunPreparation RunPassesFlag::apply(ir::Program &p, const std::string &order) const {
  if (flags.printPipeline)
    std::cerr << "pipeline: " << passes::Pipeline::parse(pipeline(), "--passes").str() << "\n";
  return passes::prepareForRun(p, order, pipeline(), "--passes", flags.managerOptions());
}

void RunPassesFlag::addPlanPrinting(rt::PrepareOptions &o) const {
  // Split here, not by CLI11's delimiter, which drops the empty name in "fuse,,assign".
  for (const std::string &list : printPlanAfter) {
    size_t from = 0;
    while (true) {
      const size_t comma = std::min(list.find(',', from), list.size());
      o.printPlanAfter.push_back(rt::parsePrepareStage(list.substr(from, comma - from), "--print-plan-after"));
      if (comma == list.size()) break;
      from = comma + 1;
    }
  }
}

std::string displayOutputName(const std::string &name) {
  return ir::text::percentName(name).substr(1); // the IR's spelling, without the '%'
}

std::string npyFileName(const std::string &name) {
  static const char *hex = "0123456789ABCDEF";
  std::string file;
  for (size_t i = 0; i < name.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '-' || c == '+' || (c == '.' && i > 0);
    if (plain) {
      file += static_cast<char>(c);
    } else {
      file += '%';
      file += hex[c >> 4];
      file += hex[c & 15];
    }
  }
  file += ".npy";
  if (file.size() > 255)
    throw Error("error: output " + displayOutputName(name) + ": its file name would be " +
                std::to_string(file.size()) + " bytes, above the 255-byte limit of a file "
                "name; rename the output (or run without --output-dir to print it)");
  return file;
}

} // namespace tessel::tools
