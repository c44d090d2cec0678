//===- tools/cmd_cost.cpp - `tessel cost FILE`: contraction costs per einsum ------===//
//
// For every einsum of a program: the path the chosen strategy takes, in opt_einsum's
// PathInfo layout (passes/Order.h, formatContractionPath), then the totals of every
// strategy side by side; at the end the totals over all einsums. --json prints the
// same figures as one JSON document. A module's functions follow its entry, each with its
// own report (once per function as written; the op-kind table counts calls and scans).
//
// Extension point: reports about other costs of the same program (e.g. the residuals
// of checkpoint policies, `--residuals`) add a flag to CostArgs and a section in
// runCost() after the einsum report; the einsum report itself is printEinsumReport().
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ir/OpAttrs.h"
#include "ir/OpCost.h"
#include "ir/TextUtil.h"
#include "ir/Printer.h"
#include "passes/Order.h"
#include "tools/Commands.h"
#include "tools/CostResiduals.h"

namespace tessel::tools {

namespace {

struct CostArgs {
  std::string file;
  std::string inputFormat = "auto";
  std::string strategy = "auto";
  int optimalLimit = passes::OrderOptions{}.optimalLimit;
  bool json = false;
  ResidualArgs residuals; // --residuals (tools/CostResiduals.h)
};

std::string fmt(const char *f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

std::string operandTypes(const ir::Program &p, const ir::Op &op) {
  std::string s;
  for (size_t i = 0; i < op.operands.size(); ++i)
    s += (i ? ", " : "") + ir::valueRef(p, op.operands[i]) + ": " + p.type(op.operands[i]).str();
  return s;
}

struct Totals {
  double flops = 0;
  int64_t largest = 0;
  void add(const passes::ContractionPath &c) {
    flops += c.totalFlops;
    largest = std::max(largest, c.largestIntermediate);
  }
};

std::string tableHeader(bool scaling) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "  %-10s %20s %22s %8s", "strategy", "flops",
                "largest intermediate", scaling ? "scaling" : "");
  std::string s = buf;
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s + "\n";
}

std::string tableRow(const std::string &name, double flops, int64_t largest, int scaling,
                     const std::string &note) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %-10s %20s %22lld %8s", name.c_str(),
                fmt("%.0f", flops).c_str(), static_cast<long long>(largest),
                scaling < 0 ? "" : std::to_string(scaling).c_str());
  std::string s = buf;
  while (!s.empty() && s.back() == ' ') s.pop_back();
  if (!note.empty()) s += "  (" + note + ")";
  return s + "\n";
}

nlohmann::ordered_json pathJson(const passes::ContractionPath &c) {
  nlohmann::ordered_json j;
  j["requested"] = passes::orderStrategyName(c.requested);
  j["used"] = passes::orderStrategyName(c.used);
  if (!c.note.empty()) j["note"] = c.note;
  j["naive_scaling"] = c.naiveScaling;
  j["optimized_scaling"] = c.optimizedScaling;
  j["naive_flops"] = c.naiveFlops;
  j["flops"] = c.totalFlops;
  j["largest_intermediate"] = c.largestIntermediate;
  j["final_transpose"] = c.finalTranspose;
  auto steps = nlohmann::ordered_json::array();
  for (const passes::ContractionStep &s : c.steps) {
    nlohmann::ordered_json e;
    e["lhs"] = s.lhs;
    if (s.rhs >= 0) e["rhs"] = s.rhs;
    e["contraction"] =
        s.lhsLabels + (s.rhs >= 0 ? "," + s.rhsLabels : "") + "->" + s.resultLabels;
    e["summed"] = s.contracted;
    e["batch"] = s.batch;
    e["flops"] = s.flops;
    e["result_elements"] = s.resultSize;
    e["scaling"] = s.scaling;
    steps.push_back(e);
  }
  j["steps"] = steps;
  return j;
}

/// The einsum report (text or JSON) of `p` under `opts`; a text report of a program
/// without einsums says `whenEmpty`.
std::string printEinsumReport(const ir::Program &p, const passes::OrderOptions &opts,
                              const std::vector<passes::EinsumCost> &costs, bool json,
                              const char *whenEmpty = "(no einsum ops: nothing to order)") {
  const auto strategies = passes::concreteOrderStrategies();
  std::vector<Totals> totals(strategies.size());
  Totals chosen;
  for (const passes::EinsumCost &c : costs) {
    chosen.add(c.chosen);
    for (size_t s = 0; s < strategies.size(); ++s) totals[s].add(c.all[s]);
  }
  const std::string requested = passes::orderStrategyName(opts.strategy);

  if (json) {
    nlohmann::ordered_json j;
    j["program"] = p.name;
    j["strategy"] = requested;
    auto list = nlohmann::ordered_json::array();
    for (const passes::EinsumCost &c : costs) {
      const ir::Op &op = p.ops[c.opIndex];
      nlohmann::ordered_json e;
      e["result"] = ir::valueRef(p, c.result);
      e["loc"] = op.loc;
      e["spec"] = c.chosen.spec;
      auto types = nlohmann::ordered_json::array();
      for (ir::ValueId v : op.operands) types.push_back(p.type(v).str());
      e["operand_types"] = types;
      e["chosen"] = pathJson(c.chosen);
      nlohmann::ordered_json all;
      for (size_t s = 0; s < strategies.size(); ++s)
        all[passes::orderStrategyName(strategies[s])] = pathJson(c.all[s]);
      e["strategies"] = all;
      list.push_back(e);
    }
    j["einsums"] = list;
    nlohmann::ordered_json t;
    t[requested] = {{"flops", chosen.flops}, {"largest_intermediate", chosen.largest}};
    for (size_t s = 0; s < strategies.size(); ++s)
      t[passes::orderStrategyName(strategies[s])] = {{"flops", totals[s].flops},
                                                     {"largest_intermediate", totals[s].largest}};
    j["totals"] = t;
    return j.dump(2) + "\n";
  }

  std::ostringstream os;
  os << "program " << ir::text::atName(p.name) << ": " << costs.size() << " einsum"
     << (costs.size() == 1 ? "" : "s") << ", strategy " << requested << "\n";
  if (costs.empty()) {
    os << whenEmpty << "\n";
    return os.str();
  }
  for (size_t k = 0; k < costs.size(); ++k) {
    const passes::EinsumCost &c = costs[k];
    const ir::Op &op = p.ops[c.opIndex];
    os << "\n=== einsum " << (k + 1) << "/" << costs.size() << ": " << ir::valueRef(p, c.result)
       << " : " << p.type(c.result).str();
    if (!op.loc.empty()) os << "  loc(\"" << op.loc << "\")";
    os << "\n    operands: " << operandTypes(p, op) << "\n";
    os << passes::formatContractionPath(c.chosen);
    os << "\n" << tableHeader(true);
    for (size_t s = 0; s < strategies.size(); ++s) {
      const passes::ContractionPath &a = c.all[s];
      os << tableRow(passes::orderStrategyName(strategies[s]), a.totalFlops,
                     a.largestIntermediate, a.optimizedScaling, a.note);
    }
  }
  os << "\n=== totals over " << costs.size() << " einsum" << (costs.size() == 1 ? "" : "s")
     << "\n"
     << tableHeader(false);
  for (size_t s = 0; s < strategies.size(); ++s)
    os << tableRow(passes::orderStrategyName(strategies[s]), totals[s].flops, totals[s].largest,
                   -1, "");
  if (opts.strategy == passes::OrderStrategy::Auto)
    os << tableRow("auto", chosen.flops, chosen.largest, -1, "");
  return os.str();
}

/// Op count, flops and bytes per op kind over the whole program (ir/OpCost.h), in
/// op-table order, then the total. In a module, a function's ops count once per call and
/// per iteration of a scan (the ops the program runs, not the ops it is written with).
std::string printOpKindReport(const ir::Program &p, bool json) {
  struct Row {
    double count = 0, flops = 0, bytes = 0;
  };
  std::vector<Row> rows(ir::kNumOpKinds);
  Row total;
  std::function<void(const ir::Program &, double)> add = [&](const ir::Program &f, double times) {
    for (const ir::Op &op : f.ops) {
      const ir::OpCost c = ir::opCost(f, op);
      for (Row *r : {&rows[static_cast<size_t>(op.kind)], &total}) {
        r->count += times;
        r->flops += times * c.flops;
        r->bytes += times * c.bytes;
      }
      if (ir::hasCallee(op.kind))
        if (const ir::Program *g = p.function(ir::calleeOf(op)))
          add(*g, times * (op.kind == ir::OpKind::Scan ? static_cast<double>(ir::attr<ir::OpKind::Scan, "length">(op)) : 1.0));
    }
  };
  add(p, 1.0);
  if (json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (ir::OpKind k : ir::allOpKinds()) {
      const Row &r = rows[static_cast<size_t>(k)];
      if (r.count > 0)
        j.push_back({{"op", ir::opName(k)},
                     {"count", static_cast<int64_t>(std::min(r.count, 9.2e18))}, // an integer
                     {"flops", r.flops},
                     {"bytes", r.bytes}});
    }
    return j.dump();
  }
  std::string s = "\n=== ops by kind (flops and bytes of each op as written, before lowering" +
                  std::string(p.functions.empty() ? ")\n" : "; a function's ops once per call and scan iteration)\n");
  char buf[160];
  std::snprintf(buf, sizeof buf, "  %-18s %8s %20s %20s\n", "op", "count", "flops", "bytes");
  s += buf;
  auto line = [&](const char *name, const Row &r) {
    std::snprintf(buf, sizeof buf, "  %-18s %8s %20s %20s\n", name, fmt("%.0f", r.count).c_str(),
                  fmt("%.0f", r.flops).c_str(), fmt("%.0f", r.bytes).c_str());
    s += buf;
  };
  for (ir::OpKind k : ir::allOpKinds())
    if (rows[static_cast<size_t>(k)].count > 0) line(ir::opName(k), rows[static_cast<size_t>(k)]);
  line("total", total);
  return s;
}

void runCost(const CostArgs &a) {
  passes::OrderOptions opts;
  opts.strategy = passes::parseOrderStrategy(a.strategy);
  if (a.optimalLimit < 1 || a.optimalLimit > passes::kOptimalHardLimit)
    throw Error("error: cost: --optimal-limit must be between 1 and " +
                std::to_string(passes::kOptimalHardLimit) + ", got " +
                std::to_string(a.optimalLimit));
  opts.optimalLimit = a.optimalLimit;
  ir::Program p = loadProgram(a.file, parseInputFormat(a.inputFormat));
  if (a.residuals.enabled) {
    writeOutput("-", residualsReport(p, a.residuals, opts.strategy, a.json));
    return;
  }
  const std::vector<passes::EinsumCost> entryCosts = passes::einsumCosts(p, opts);
  std::string report = printEinsumReport(p, opts, entryCosts, a.json);
  // A module: each function's einsums too (once per function, as written).
  if (a.json) {
    auto j = nlohmann::ordered_json::parse(report);
    if (!p.functions.empty()) {
      auto fns = nlohmann::ordered_json::array();
      for (const ir::Program &f : p.functions)
        fns.push_back(nlohmann::ordered_json::parse(printEinsumReport(f, opts, passes::einsumCosts(f, opts), true)));
      j["functions"] = fns;
    }
    j["ops_by_kind"] = nlohmann::ordered_json::parse(printOpKindReport(p, true));
    report = j.dump(2) + "\n";
  } else {
    std::string functions;
    for (const ir::Program &f : p.functions)
      if (const auto costs = passes::einsumCosts(f, opts); !costs.empty()) {
        const std::string fr = printEinsumReport(f, opts, costs, false);
        functions += "\nfunction " + fr.substr(fr.find('@'));
      }
    if (!functions.empty())
      report = printEinsumReport(p, opts, entryCosts, false, "(none in the entry; its functions' follow)");
    report += functions;
    report += printOpKindReport(p, false);
  }
  writeOutput("-", report);
}

} // namespace

void addCostCommand(CLI::App &app) {
  auto args = std::make_shared<CostArgs>();
  CLI::App *cmd = app.add_subcommand(
      "cost",
      "Contraction cost of every einsum of a program (what the `order` pass would do).\n"
      "  tessel cost FILE [--strategy auto|chain|pairwise|greedy|optimal]\n"
      "For each einsum: the chosen contraction path in opt_einsum's layout (complete "
      "contraction, naive and optimized scaling, naive and optimized FLOP count, theoretical "
      "speedup, largest intermediate, then one line per pairwise step with its scaling, flops, "
      "the contraction and the remaining terms), then the totals of every strategy side by "
      "side; at the end the totals over all einsums. Flops follow opt_einsum's convention: "
      "product of the sizes of all indices of a step, times 2 when the step sums an index. "
      "Last, every op kind of the program with its count, flops and bytes (svd: the "
      "Golub-Van Loan count for U, s and Vt; see ir/OpCost.h).");
  cmd->add_option("file", args->file, "Program file (.tir text or .json), or '-' for stdin")
      ->required();
  cmd->add_option("--strategy", args->strategy,
                  "Strategy whose path is printed: auto (optimal up to 8 operands, else "
                  "greedy), chain, pairwise, greedy, optimal")
      ->check(CLI::IsMember({"auto", "chain", "pairwise", "greedy", "optimal"}))
      ->capture_default_str();
  cmd->add_option("--optimal-limit", args->optimalLimit,
                  "Largest operand count for which `optimal` runs its subset DP (cost ~3^n); "
                  "beyond it optimal falls back to greedy and says so")
      ->capture_default_str();
  cmd->add_option("--input-format", args->inputFormat, "Input format: auto, text or json")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print the report as JSON");
  addResidualFlags(*cmd, args->residuals);
  cmd->callback([args] { runCost(*args); });
}

} // namespace tessel::tools
