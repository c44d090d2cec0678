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
#include "passes/Cse.h"
#include "passes/Dce.h"
#include "passes/Fold.h"
#include "passes/Grad.h"
#include "passes/Order.h"
#include "passes/PadSink.h"
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
  o.svdBlocks = inv.getBool("svd-blocks");
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

PassOptionInfo intOption(std::string name, int64_t def, int64_t minValue, std::string help) {
  PassOptionInfo o;
  o.name = std::move(name);
  o.kind = Kind::Int;
  o.defaultValue = std::to_string(def);
  o.minInt = minValue;
  o.help = std::move(help);
  return o;
}

int64_t countOps(const ir::Program &p, ir::OpKind k) {
  int64_t n = 0;
  for (const ir::Op &op : p.ops) n += op.kind == k;
  return n;
}

//--- order ---------------------------------------------------------------------

bool runOrderPass(ir::Program &p, const PassInvocation &inv, PassStatistics &stats) {
  OrderOptions o;
  o.strategy = parseOrderStrategy(inv.get("strategy"));
  int64_t einsums = countOps(p, ir::OpKind::Einsum);
  int64_t dots = countOps(p, ir::OpKind::DotGeneral);
  bool changed = runOrder(p, o);
  stats.add("einsums-lowered", einsums - countOps(p, ir::OpKind::Einsum));
  stats.add("dot-generals-created", countOps(p, ir::OpKind::DotGeneral) - dots);
  return changed;
}

//--- cse / dce / fold ----------------------------------------------------------

bool runCsePass(ir::Program &p, const PassInvocation &, PassStatistics &stats) {
  CseStats s;
  bool changed = runCse(p, CseOptions{}, &s);
  stats.add("merged-ops", s.mergedOps);
  return changed;
}

bool runDcePass(ir::Program &p, const PassInvocation &, PassStatistics &stats) {
  DceStats s;
  bool changed = runDce(p, DceOptions{}, &s);
  stats.add("removed-ops", s.removedOps);
  stats.add("removed-values", s.removedValues);
  return changed;
}

bool runFoldPass(ir::Program &p, const PassInvocation &inv, PassStatistics &stats) {
  FoldOptions o;
  o.maxBroadcastConstant = inv.getInt("max-broadcast-constant");
  FoldStats s;
  bool changed = runFold(p, o, &s);
  stats.add("folded", s.folded);
  stats.add("erased-ops", s.erased);
  return changed;
}

bool runPadSinkPass(ir::Program &p, const PassInvocation &, PassStatistics &stats) {
  PadSinkStats s;
  bool changed = runPadSink(p, PadSinkOptions{}, &s);
  stats.add("sunk", s.sunk);
  stats.add("hoisted", s.hoisted);
  stats.add("erased-ops", s.erased);
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
                  "keep the original outputs before the gradients (needed by checkpoint)"),
       boolOption("svd-blocks", true,
                  "svd reverse rule in block form when only the first r <= k/2 singular "
                  "triplets carry cotangents (k*k*r products instead of k*k*k; false = "
                  "always the full rule)")},
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

  r.push_back(PassInfo{
      "order",
      "Contraction ordering: lower every einsum into binary dot_generals (opt_einsum cost "
      "model)",
      {enumOption("strategy", {"chain", "pairwise", "greedy", "optimal", "auto"}, "auto",
                  "chain: left to right; pairwise: balanced; greedy: opt_einsum greedy; "
                  "optimal: DP over subsets; auto: optimal up to 8 operands, else greedy")},
      runOrderPass});

  r.push_back(PassInfo{"cse",
                       "Common subexpression elimination (never merges remat ops with "
                       "forward ones)",
                       {},
                       runCsePass});

  r.push_back(PassInfo{"dce",
                       "Dead code elimination (keeps every output and input, zero gradients "
                       "included)",
                       {},
                       runDcePass});

  r.push_back(PassInfo{
      "fold",
      "Algebraic folds: transpose/reshape chains, identities, x*1, x+0, neg(neg x), "
      "constant broadcasts",
      {intOption("max-broadcast-constant", 256, 0,
                 "largest constant (elements) a broadcast of a scalar constant folds into")},
      runFoldPass});

  r.push_back(PassInfo{"pad-sink",
                       "Sink zero pads past transpose, mul, reduce_sum and dot_general (and "
                       "hoist slices) so ops compute only the unpadded block",
                       {},
                       runPadSinkPass});

  return r;
}

} // namespace

const std::vector<PassInfo> &passRegistry() {
  static const std::vector<PassInfo> registry = buildRegistry();
  return registry;
}

} // namespace tessel::passes
