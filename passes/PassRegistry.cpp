//===- passes/PassRegistry.cpp - THE list of passes ------------------------------===//
//
// One block per pass: name, one-line summary, the declaration of its options (each
// bound to a member of the pass's XOptions struct; passes/PassOptions.h) and a thin
// adapter from that struct to the pass's free function `bool runX(Program&, const
// XOptions&)` that also reports the pass's statistics. This table drives `--passes=`,
// `--list-passes`, the canonical pipeline printer and the docs.
//
// Option names are kebab-case (as in MLIR). List values separate items with ';'
// (`grad{wrt=beta;h}`) because ',' separates options.
//
//===----------------------------------------------------------------------===//
#include "ir/Diagnostics.h"
#include "passes/Checkpoint.h"
#include "passes/Cse.h"
#include "passes/Dce.h"
#include "passes/Fold.h"
#include "passes/Grad.h"
#include "passes/Inline.h"
#include "passes/Jvp.h"
#include "passes/SplitVjp.h"
#include "passes/Order.h"
#include "passes/RunPipeline.h"
#include "passes/PadSink.h"
#include "passes/PassManager.h"
#include "passes/SvdTopkGuards.h"
#include "passes/SvdTransposeFold.h"
#include "passes/TruncateSvd.h"

namespace tessel::passes {

namespace {

/// A registry row for a pass whose adapter takes its options struct: `declare` binds
/// the struct's members to option names (none for a pass without options), and the
/// defaults are those of a default-constructed Options.
template <class Options>
PassInfo makePass(std::string name, std::string summary,
                  bool (*run)(ir::Program &, const Options &, PassStatistics &),
                  void (*declare)(PassOptionBinder<Options> &) = nullptr) {
  PassOptionBinder<Options> binder;
  if (declare) declare(binder);
  return PassInfo{std::move(name), std::move(summary), binder.take(),
                  [run](ir::Program &p, const PassInvocation &inv, PassStatistics &stats) {
                    return run(p, inv.options<Options>(), stats);
                  },
                  Options{}};
}

int64_t countOps(const ir::Program &p, ir::OpKind k) {
  int64_t n = 0;
  for (const ir::Op &op : p.ops) n += op.kind == k;
  return n;
}

//--- grad ----------------------------------------------------------------------

void declareGradOptions(PassOptionBinder<GradOptions> &b) {
  b.list("wrt", &GradOptions::wrt,
         "inputs to differentiate with respect to, separated by ';' (empty = all inputs)");
  b.flag("vjp", &GradOptions::vjp,
         "take one cotangent input ct_<output> per output instead of seeding a scalar "
         "output with 1.0");
  b.flag("keep-outputs", &GradOptions::keepOutputs,
         "keep the original outputs before the gradients (needed by checkpoint)");
  b.flag("svd-blocks", &GradOptions::svdBlocks,
         "svd reverse rule in block form when only the first r <= k/2 singular triplets "
         "carry cotangents and that saves at least 2^15 multiply-adds (k*k*r products "
         "instead of k*k*k: so small svds keep the full rule either way); false = always "
         "the full rule");
  b.flag("bond-gauge", &GradOptions::bondGauge,
         "use svd's gauge = \"bond\" promise in its rule (exact first derivatives through "
         "tied kept pairs; the result must not be differentiated again)");
  b.choice("remat", &GradOptions::callRemat,
           {RematPolicy::Recompute, RematPolicy::Store, RematPolicy::SaveSvd}, rematPolicyName,
           "remat policy at call and scan boundaries: a call runs the forward half of its "
           "callee's gradient, which returns the residuals its backward half reads: the "
           "callee's inputs (recompute: the backward half recomputes the rest), every value "
           "the backward reads (store), or the inputs and the svd results (save-svd)");
  b.flag("svd-topk-guards", &GradOptions::svdTopkGuards,
         "run svd-topk-guards on each callee's gradient before it is split (the forward's "
         "svd_topk and the backward's complement are then in one function)");
  b.list("aux", &GradOptions::aux,
         "auxiliary outputs, separated by ';': kept, but given no cotangent (has_aux); "
         "without vjp the one other output is the loss");
}

bool runGradPass(ir::Program &p, const GradOptions &o, PassStatistics &stats) {
  const size_t before = p.ops.size(), inputs = p.inputs.size();
  // In place (no copy of the module); the pass manager verifies the result (--verify-each,
  // or prepare).
  runGrad(p, o);
  stats.add("gradients", static_cast<int64_t>(o.wrt.empty() ? inputs : o.wrt.size()));
  stats.add("ops-added", static_cast<int64_t>(p.ops.size()) - static_cast<int64_t>(before));
  return true;
}

//--- jvp, hessian ---------------------------------------------------------------

void declareJvpOptions(PassOptionBinder<JvpOptions> &b) {
  b.list("wrt", &JvpOptions::wrt,
         "inputs that get a tangent input t_<input>, separated by ';' (empty = all inputs)");
  b.flag("keep-outputs", &JvpOptions::keepOutputs, "keep the original outputs before the tangents");
}

bool runJvpPass(ir::Program &p, const JvpOptions &o, PassStatistics &stats) {
  const size_t before = p.ops.size(), inputs = p.inputs.size();
  runJvp(p, o);
  stats.add("tangents", static_cast<int64_t>(o.wrt.empty() ? inputs : o.wrt.size()));
  stats.add("ops-added", static_cast<int64_t>(p.ops.size()) - static_cast<int64_t>(before));
  return true;
}

void declareHessianOptions(PassOptionBinder<HessianOptions> &b) {
  b.list("wrt", &HessianOptions::wrt, "the scalar inputs, separated by ';' (empty = all inputs)");
  b.choice("remat", &HessianOptions::callRemat,
           {RematPolicy::Recompute, RematPolicy::Store, RematPolicy::SaveSvd}, rematPolicyName,
           "grad's remat policy at call and scan boundaries");
}

bool runHessianPass(ir::Program &p, const HessianOptions &o, PassStatistics &stats) {
  p = hessian(p, o);
  stats.add("outputs", static_cast<int64_t>(p.outputs.size()));
  return true;
}

//--- checkpoint ----------------------------------------------------------------

void declareCheckpointOptions(PassOptionBinder<CheckpointOptions> &b) {
  b.choice("policy", &CheckpointOptions::policy,
           {RematPolicy::Store, RematPolicy::Recompute, RematPolicy::SaveSvd}, rematPolicyName,
           "store: keep every residual; recompute: keep only region inputs; save-svd: also "
           "keep svd results");
  b.count("regions", &CheckpointOptions::regions,
          "forward regions whose inputs are saved (1 = whole forward; auto = round(sqrt("
          "forward ops)))");
}

bool runCheckpointPass(ir::Program &p, const CheckpointOptions &o, PassStatistics &stats) {
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

//--- order ---------------------------------------------------------------------

void declareOrderOptions(PassOptionBinder<OrderOptions> &b) {
  b.choice("strategy", &OrderOptions::strategy,
           {OrderStrategy::Chain, OrderStrategy::Pairwise, OrderStrategy::Greedy,
            OrderStrategy::Optimal, OrderStrategy::Auto},
           orderStrategyName,
           "chain: left to right; pairwise: balanced; greedy: opt_einsum greedy; optimal: DP "
           "over subsets; auto: optimal up to 8 operands, else greedy");
}

bool runOrderPass(ir::Program &p, const OrderOptions &o, PassStatistics &stats) {
  int64_t einsums = countOps(p, ir::OpKind::Einsum);
  int64_t dots = countOps(p, ir::OpKind::DotGeneral);
  bool changed = runOrder(p, o);
  stats.add("einsums-lowered", einsums - countOps(p, ir::OpKind::Einsum));
  stats.add("dot-generals-created", countOps(p, ir::OpKind::DotGeneral) - dots);
  return changed;
}

//--- cse / dce / fold / pad-sink -----------------------------------------------

bool runCsePass(ir::Program &p, const CseOptions &o, PassStatistics &stats) {
  CseStats s;
  bool changed = runCse(p, o, &s);
  stats.add("merged-ops", s.mergedOps);
  return changed;
}

bool runDcePass(ir::Program &p, const DceOptions &o, PassStatistics &stats) {
  DceStats s;
  bool changed = runDce(p, o, &s);
  stats.add("removed-ops", s.removedOps);
  stats.add("removed-values", s.removedValues);
  if (s.removedFunctions) stats.add("removed-functions", s.removedFunctions);
  return changed;
}

bool runInlinePass(ir::Program &p, const InlineOptions &o, PassStatistics &stats) {
  const size_t functions = p.functions.size();
  const bool changed = runInline(p, o);
  if (changed) stats.add("functions-inlined", static_cast<int64_t>(functions));
  return changed;
}

void declareSplitVjpOptions(PassOptionBinder<SplitVjpOptions> &b) {
  b.choice("policy", &SplitVjpOptions::policy,
           {RematPolicy::Store, RematPolicy::Recompute, RematPolicy::SaveSvd}, rematPolicyName,
           "store: the residuals are what the backward reads; recompute: only the forward's "
           "inputs, the backward redoes the rest; save-svd: also the svd results");
}

bool runSplitVjpPass(ir::Program &p, const SplitVjpOptions &o, PassStatistics &stats) {
  const bool changed = runSplitVjp(p, o);
  const ir::Program &bwd = p.functions.back();
  stats.add("residuals", static_cast<int64_t>(bwd.inputs.size() - p.gradSignature->cotangents));
  return changed;
}

/// A registry row for a module pass (PassInfo::modulePass).
PassInfo modulePass(PassInfo info) {
  info.modulePass = true;
  return info;
}

/// A registry row for a pass that adds to the program every time it runs (a derivative,
/// a split): fixpoint(...) refuses it (PassInfo::reachesFixpoint).
PassInfo growing(PassInfo info) {
  info.reachesFixpoint = false;
  return info;
}

/// `info`, which must run after `pass` when a pipeline holds both (PassInfo::runsAfter).
PassInfo after(PassInfo info, std::string pass, std::string why) {
  info.runsAfter.push_back({std::move(pass), std::move(why)});
  return info;
}

void declareFoldOptions(PassOptionBinder<FoldOptions> &b) {
  b.integer("max-broadcast-constant", &FoldOptions::maxBroadcastConstant, 0,
            "largest constant (elements) a broadcast of a scalar constant folds into");
}

bool runFoldPass(ir::Program &p, const FoldOptions &o, PassStatistics &stats) {
  FoldStats s;
  bool changed = runFold(p, o, &s);
  stats.add("folded", s.folded);
  stats.add("erased-ops", s.erased);
  return changed;
}

bool runPadSinkPass(ir::Program &p, const PadSinkOptions &o, PassStatistics &stats) {
  PadSinkStats s;
  bool changed = runPadSink(p, o, &s);
  stats.add("sunk", s.sunk);
  stats.add("hoisted", s.hoisted);
  stats.add("erased-ops", s.erased);
  return changed;
}

void declareTruncateSvdOptions(PassOptionBinder<TruncateSvdOptions> &b) {
  b.integer("max-k-percent", &TruncateSvdOptions::maxKPercent, 1,
            "rewrite an svd only when the k triplets used are at most this percentage of "
            "min(m, n)");
  b.integer("min-size", &TruncateSvdOptions::minSize, 1,
            "rewrite an svd only when min(m, n) is at least this (LAPACK is as fast below)");
}

bool runTruncateSvdPass(ir::Program &p, const TruncateSvdOptions &o, PassStatistics &stats) {
  TruncateSvdStats s;
  bool changed = runTruncateSvd(p, o, &s);
  stats.add("rewritten", s.rewritten);
  stats.add("triplets-kept", s.tripletsKept);
  stats.add("triplets-total", s.tripletsTotal);
  return changed;
}

bool runSvdTransposeFoldPass(ir::Program &p, const SvdTransposeFoldOptions &o,
                             PassStatistics &stats) {
  SvdTransposeFoldStats s;
  bool changed = runSvdTransposeFold(p, o, &s);
  stats.add("folded", s.folded);
  stats.add("elements-saved", s.elementsSaved);
  return changed;
}

bool runSvdTopkGuardsPass(ir::Program &p, const SvdTopkGuardsOptions &o, PassStatistics &stats) {
  SvdTopkGuardsStats s;
  bool changed = runSvdTopkGuards(p, o, &s);
  stats.add("widened", s.widened);
  stats.add("guards", s.guards);
  return changed;
}

std::vector<PassInfo> buildRegistry() {
  std::vector<PassInfo> r;
  const char *makesGrad = "it takes apart the gradient program grad makes";
  r.push_back(after(after(growing(modulePass(makePass(
      "grad", "Reverse-mode gradient (value_and_grad / VJP): outputs grad_<input> per wrt input; "
      "through calls (the callee's VJP function) and scans (a reverse scan)",
      runGradPass, declareGradOptions))),
      "truncate-svd", "after grad, an svd's reverse rule reads all of its triplets, so "
      "truncate-svd finds none used only through slices"),
      "svd-transpose-fold", "its svd_topk ops should be folded before grad differentiates them"));
  r.push_back(after(after(growing(modulePass(makePass(
      "jvp", "Forward-mode derivative (JAX's jvp): a tangent input t_<input> per wrt input, "
      "outputs jvp_<output> per output; through calls and scans (the callee's JVP function)",
      runJvpPass, declareJvpOptions))),
      "truncate-svd", "after jvp, an svd's forward rule reads all of its triplets, so "
      "truncate-svd finds none used only through slices"),
      "svd-transpose-fold", "its svd_topk ops should be folded before jvp differentiates them"));
  r.push_back(after(growing(modulePass(makePass(
      "hessian", "Hessian of a scalar loss in a few scalar inputs by forward-over-reverse (jvp "
      "of grad): outputs d2_<a>_<b> (d2_<a> for one input)",
      runHessianPass, declareHessianOptions))),
      "svd-transpose-fold", "its svd ops should be folded before hessian differentiates them"));
  r.push_back(after(growing(modulePass(makePass("checkpoint",
                       "Remat policy over grad's forward/backward split: recompute unsaved "
                       "residuals in the backward (the entry's; a call's VJP recomputes its callee)",
                       runCheckpointPass, declareCheckpointOptions))), "grad", makesGrad));
  r.back().runsAfter.push_back({"svd-topk-guards", "the guards it gives svd_topk belong to the "
                                "forward that checkpoint splits"});
  r.push_back(after(growing(modulePass(makePass(
      "split-vjp", "Split a gradient program into forward and backward functions and an entry "
      "that calls them, the residuals between them (the staged form of a VJP)",
      runSplitVjpPass, declareSplitVjpOptions))), "grad", makesGrad));
  r.push_back(modulePass(makePass(
      "inline", "Inline every call and unroll every scan of a module: one plain program, the "
      "same ops in the same order (tessel trg's whole mode runs it; tessel run and prepare run a "
      "module as it is)",
      runInlinePass)));
  r.push_back(makePass("order",
                       "Contraction ordering: lower every einsum into binary dot_generals "
                       "(opt_einsum cost model)",
                       runOrderPass, declareOrderOptions));
  r.push_back(makePass(
      "cse", "Common subexpression elimination (never merges remat ops with forward ones)",
      runCsePass));
  r.push_back(modulePass(makePass(
      "dce", "Dead code elimination (keeps every output and input, zero gradients included; "
      "in each function of a module, then the functions no call reaches)",
      runDcePass)));
  r.push_back(makePass("fold",
                       "Algebraic folds: transpose/reshape chains, identities, x*1, x+0, "
                       "neg(neg x), constant broadcasts",
                       runFoldPass, declareFoldOptions));
  r.push_back(makePass("pad-sink",
                       "Sink zero pads past transpose, mul, reduce_sum and dot_general (and "
                       "hoist slices) so ops compute only the unpadded block",
                       runPadSinkPass));
  r.push_back(makePass("truncate-svd",
                       "Replace an svd used only through slices of its k leading triplets by "
                       "svd_topk{k}, which computes only those (run before grad)",
                       runTruncateSvdPass, declareTruncateSvdOptions));
  r.push_back(after(makePass("svd-transpose-fold",
                       "Compute an svd/svd_topk of a transposed tensor on the tensor's own "
                       "layout and permute the k-column factors instead (run after "
                       "truncate-svd, before grad)",
                       runSvdTransposeFoldPass),
                     "truncate-svd", "it folds the transposes of the svd_topk ops truncate-svd makes too"));
  // (Before grad it finds no complement and does nothing, harmlessly: trg's pipeline runs
  // it before and after grad.)
  r.push_back(after(makePass("svd-topk-guards",
                       "In a gradient program, let each svd_topk compute the guards its "
                       "svd_topk_complement needs (g more triplets) instead of the complement "
                       "(run after grad, before checkpoint)",
                       runSvdTopkGuardsPass),
                     "truncate-svd", "it widens the svd_topk ops truncate-svd makes; before it there are none"));
  return r;
}

} // namespace

const std::vector<PassInfo> &passRegistry() {
  static const std::vector<PassInfo> registry = buildRegistry();
  return registry;
}

const std::vector<NamedPipeline> &pipelineRegistry() {
  static const std::vector<NamedPipeline> registry = {
      {"run-default",
       "the clean-up `tessel run`, `tessel prepare` and tessel.prepare apply before prepare",
       kRunPipeline},
      {"trg",
       "what `tessel trg` applies to every program (before and after grad) with the truncated "
       "SVD (--svd truncated, the default; --order names another strategy)",
       "truncate-svd,svd-transpose-fold,svd-topk-guards,order{strategy=pairwise},pad-sink,cse,dce"},
      {"trg-full-svd", "what `tessel trg --svd full` applies to every program",
       "order{strategy=pairwise},pad-sink,cse,dce"},
  };
  return registry;
}

const NamedPipeline *lookupPipeline(llvm::StringRef name) {
  for (const NamedPipeline &p : pipelineRegistry())
    if (p.name == name) return &p;
  return nullptr;
}

} // namespace tessel::passes
