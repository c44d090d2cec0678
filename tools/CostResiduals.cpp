//===- tools/CostResiduals.cpp - `tessel cost --residuals` -----------------------===//
#include "tools/CostResiduals.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ir/TextUtil.h"
#include "ir/Diagnostics.h"
#include "passes/Checkpoint.h"
#include "passes/PassManager.h"
#include "runtime/Runtime.h"

namespace tessel::tools {

void addResidualFlags(CLI::App &cmd, ResidualArgs &a) {
  cmd.add_flag("--residuals", a.enabled,
               "Instead of the einsum report: for each checkpoint policy, list every saved "
               "residual (type, bytes, origin op) of grad+checkpoint and the peak live bytes "
               "after prepare (a module: the policy at its call and scan boundaries too, and the "
               "tensors held between its segments plus their arena peak)");
  cmd.add_option("--policy", a.policies,
                 "With --residuals: policies to report (store, save-svd, recompute; "
                 "comma-separated; default all)")
      ->delimiter(',')
      ->check(CLI::IsMember({"store", "save-svd", "recompute"}));
  cmd.add_option("--wrt", a.wrt,
                 "With --residuals: inputs to differentiate with respect to "
                 "(comma-separated; default all)")
      ->delimiter(',');
  cmd.add_flag("--vjp", a.vjp,
               "With --residuals: grad with one cotangent input per output (needed when the "
               "program has several or non-scalar outputs)");
  cmd.add_option("--regions", a.regions,
                 "With --residuals: checkpoint regions (auto, or N >= 1; 1 = the whole "
                 "forward is one region, as in staged mode)")
      ->capture_default_str();
}

namespace {

struct PolicyResult {
  std::string policy;
  std::string pipeline;
  std::vector<passes::Residual> residuals;
  int64_t residualBytes = 0;
  int64_t recomputed = 0;
  int64_t peak = 0;
  size_t ops = 0;
};

PolicyResult evaluatePolicy(const ir::Program &p, const ResidualArgs &a,
                            const std::string &policy, passes::OrderStrategy strategy) {
  PolicyResult r;
  r.policy = policy;
  std::string wrt;
  for (size_t i = 0; i < a.wrt.size(); ++i) wrt += (i ? ";" : "") + a.wrt[i];
  // A module: the policy also at its call and scan boundaries (grad's remat), as tessel
  // trg applies --checkpoint; a plain program has none.
  passes::Pipeline gradCkpt = passes::Pipeline::parse(
      "grad{wrt=" + wrt + ",vjp=" + (a.vjp ? "true" : "false") + ",remat=" + policy +
          "},checkpoint{policy=" + policy + ",regions=" + a.regions + "}",
      "--residuals");
  passes::Pipeline order = passes::Pipeline::parse(
      std::string("order{strategy=") + passes::orderStrategyName(strategy) + "}", "--residuals");
  r.pipeline = gradCkpt.str() + "," + order.str();

  passes::PassManagerOptions quiet;
  ir::Program h = p;
  passes::PassRunReport rep = passes::PassManager(gradCkpt, quiet).run(h);
  r.recomputed = rep.passes[1].stats.counters["recomputed-ops"];
  r.residuals = passes::listResiduals(h);
  for (const passes::Residual &x : r.residuals) r.residualBytes += x.bytes;
  passes::PassManager(order, quiet).run(h);
  r.ops = h.ops.size();
  const auto plan = rt::prepare(h);
  // A module's plan: the host tensors the module interpreter holds between segments
  // (residuals included) plus its segments' arena peak, as tessel trg plans a module.
  r.peak = rt::peakLiveBytes(*plan) + rt::moduleTensorBytes(*plan);
  return r;
}

std::string pad(const std::string &s, size_t w, bool right = false) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

} // namespace

std::string residualsReport(const ir::Program &p, const ResidualArgs &a,
                            passes::OrderStrategy strategy, bool json) {
  std::vector<std::string> policies = a.policies;
  if (policies.empty())
    for (passes::RematPolicy pol : passes::allRematPolicies())
      policies.push_back(passes::rematPolicyName(pol));
  std::vector<PolicyResult> results;
  for (const std::string &pol : policies) {
    passes::parseRematPolicy(pol); // validates
    results.push_back(evaluatePolicy(p, a, pol, strategy));
  }

  if (json) {
    nlohmann::ordered_json j;
    j["program"] = p.name;
    j["wrt"] = a.wrt;
    j["vjp"] = a.vjp;
    j["regions"] = a.regions;
    auto list = nlohmann::ordered_json::array();
    for (const PolicyResult &r : results) {
      nlohmann::ordered_json e;
      e["policy"] = r.policy;
      e["pipeline"] = r.pipeline;
      auto res = nlohmann::ordered_json::array();
      for (const passes::Residual &x : r.residuals)
        res.push_back({{"name", x.name},
                       {"type", x.type.str()},
                       {"bytes", x.bytes},
                       {"origin_op", x.originOp},
                       {"origin", x.origin}});
      e["residuals"] = res;
      e["residual_bytes"] = r.residualBytes;
      e["recomputed_ops"] = r.recomputed;
      e["ops_after_order"] = r.ops;
      e["peak_live_bytes"] = r.peak;
      list.push_back(e);
    }
    j["policies"] = list;
    return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  }

  std::ostringstream os;
  os << "program " << ir::text::atName(p.name) << ": residuals per checkpoint policy\n";
  for (const PolicyResult &r : results) {
    os << "\n=== policy " << r.policy << ": " << r.residuals.size() << " residuals, "
       << r.residualBytes << " bytes; " << r.recomputed << " ops recomputed; peak live bytes "
       << r.peak << "\n";
    os << "    pipeline: " << r.pipeline << "\n";
    size_t wn = 4, wt = 4, wb = 5, wo = 6;
    for (const passes::Residual &x : r.residuals) {
      wn = std::max(wn, x.name.size() + 1);
      wt = std::max(wt, x.type.str().size());
      wb = std::max(wb, std::to_string(x.bytes).size());
      wo = std::max(wo, x.originOp.size());
    }
    os << "  " << pad("name", wn) << "  " << pad("type", wt) << "  " << pad("bytes", wb, true)
       << "  " << pad("op", wo) << "  origin\n";
    for (const passes::Residual &x : r.residuals)
      os << "  " << pad("%" + x.name, wn) << "  " << pad(x.type.str(), wt) << "  "
         << pad(std::to_string(x.bytes), wb, true) << "  " << pad(x.originOp, wo) << "  "
         << x.origin << "\n";
  }
  os << "\n=== summary (peak live bytes after prepare)\n";
  char buf[200];
  std::snprintf(buf, sizeof buf, "  %-10s %10s %16s %15s %16s\n", "policy", "residuals",
                "residual bytes", "recomputed ops", "peak live bytes");
  os << buf;
  for (const PolicyResult &r : results) {
    std::snprintf(buf, sizeof buf, "  %-10s %10zu %16lld %15lld %16lld\n", r.policy.c_str(),
                  r.residuals.size(), static_cast<long long>(r.residualBytes),
                  static_cast<long long>(r.recomputed), static_cast<long long>(r.peak));
    os << buf;
  }
  return os.str();
}

} // namespace tessel::tools
