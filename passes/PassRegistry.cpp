//===- passes/PassRegistry.cpp - THE list of passes ------------------------------===//
//
// One block per pass: name, one-line summary, options (name, kind, default, help) and
// a thin adapter from the parsed options to the pass's free function
// `bool runX(Program&, const XOptions&)`. This table drives `--passes=`,
// `--list-passes`, the canonical pipeline printer and the docs.
//
// Option names are kebab-case (as in MLIR). List values separate items with ';'
// (`grad{wrt=beta;h}`) because ',' separates options.
//
//===----------------------------------------------------------------------===//
#include <stdexcept>

#include "ir/Diagnostics.h"
#include "passes/Checkpoint.h"
#include "passes/Grad.h"
#include "passes/PassManager.h"

namespace tessel::passes {

namespace {

using Kind = PassOptionInfo::Kind;

PassOptionInfo boolOption(std::string name, bool def, std::string help) {
  PassOptionInfo o;
  o.name = std::move(name);
  o.kind = Kind::Bool;
  o.defaultValue = def ? "true" : "false";
  o.help = std::move(help);
  return o;
}

PassOptionInfo enumOption(std::string name, std::vector<std::string> allowed, std::string def,
                          std::string help) {
  PassOptionInfo o;
  o.name = std::move(name);
  o.kind = Kind::Enum;
  o.allowed = std::move(allowed);
  o.defaultValue = std::move(def);
  o.help = std::move(help);
  return o;
}

PassOptionInfo listOption(std::string name, std::string help) {
  PassOptionInfo o;
  o.name = std::move(name);
  o.kind = Kind::List;
  o.help = std::move(help);
  return o;
}

/// `auto` or an integer >= 1 (canonical: "auto" or the decimal number).
PassOptionInfo autoOrCountOption(std::string name, std::string help) {
  PassOptionInfo o;
  o.name = std::move(name);
  o.kind = Kind::String;
  o.allowed = {"auto", "<integer >= 1>"};
  o.defaultValue = "auto";
  o.help = std::move(help);
  o.canonicalize = [](const std::string &v) -> std::string {
    if (v == "auto") return v;
    int64_t x = 0;
    if (llvm::StringRef(v).getAsInteger(10, x) || x < 1)
      throw std::invalid_argument("expected 'auto' or an integer >= 1");
    return std::to_string(x);
  };
  return o;
}

//--- grad ----------------------------------------------------------------------

bool runGradPass(ir::Program &p, const PassInvocation &inv, PassStatistics &stats) {
  GradOptions o;
  o.wrt = inv.getList("wrt");
  o.vjp = inv.getBool("vjp");
  o.keepOutputs = inv.getBool("keep-outputs");
  size_t before = p.ops.size();
  ir::Program g = grad(p, o);
  stats.add("gradients", static_cast<int64_t>(o.wrt.empty() ? p.inputs.size() : o.wrt.size()));
  stats.add("ops-added", static_cast<int64_t>(g.ops.size()) - static_cast<int64_t>(before));
  p = std::move(g);
  return true;
}

//--- checkpoint ----------------------------------------------------------------

bool runCheckpointPass(ir::Program &p, const PassInvocation &inv, PassStatistics &stats) {
  CheckpointOptions o;
  o.policy = parseRematPolicy(inv.get("policy"));
  o.regions = inv.get("regions") == "auto" ? 0 : inv.getInt("regions");
  CheckpointStats s;
  bool changed = runCheckpoint(p, o, &s);
  stats.add("forward-ops", s.forwardOps);
  stats.add("backward-ops", s.backwardOps);
  stats.add("regions", s.regions);
  stats.add("recomputed-ops", s.recomputedOps);
  stats.add("residuals", s.residuals);
  stats.add("residual-bytes", s.residualBytes);
  return changed;
}

std::vector<PassInfo> buildRegistry() {
  std::vector<PassInfo> r;

  r.push_back(PassInfo{
      "grad",
      "Reverse-mode gradient (value_and_grad / VJP): outputs grad_<input> per wrt input",
      {listOption("wrt", "inputs to differentiate with respect to, separated by ';' "
                         "(empty = all inputs)"),
       boolOption("vjp", false,
                  "take one cotangent input ct_<output> per output instead of seeding a "
                  "scalar output with 1.0"),
       boolOption("keep-outputs", true,
                  "keep the original outputs before the gradients (needed by checkpoint)")},
      runGradPass});

  r.push_back(PassInfo{
      "checkpoint",
      "Remat policy over grad's forward/backward split: recompute unsaved residuals in the "
      "backward",
      {enumOption("policy", {"store", "recompute", "save-svd"}, "recompute",
                  "store: keep every residual; recompute: keep only region inputs; "
                  "save-svd: also keep svd results"),
       autoOrCountOption("regions", "forward regions whose inputs are saved (1 = whole "
                                    "forward; auto = round(sqrt(forward ops)))")},
      runCheckpointPass});

  return r;
}

} // namespace

const std::vector<PassInfo> &passRegistry() {
  static const std::vector<PassInfo> registry = buildRegistry();
  return registry;
}

} // namespace tessel::passes
