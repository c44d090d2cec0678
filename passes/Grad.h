//===- passes/Grad.h - Reverse-mode grad transform ----------------------------===//
//
// grad(P) is an ordinary program built only from ops of the op table, so it prints,
// verifies, runs, and can be differentiated again.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "ir/Program.h"

namespace tessel::passes {

/// How the backward gets the forward values it reads (passes/Checkpoint.h).
enum class RematPolicy { Store, Recompute, SaveSvd };

struct GradOptions {
  /// Names of the inputs to differentiate with respect to. Empty = all inputs.
  std::vector<std::string> wrt;
  /// Explicit cotangents (VJP): add one input `ct_<output name>` per output, of the
  /// output's type, and compute Σ_o <ct_o, d out_o / d wrt>. Without it the program
  /// must have exactly one output, and it must be a scalar (seed 1.0); otherwise
  /// grad throws tessel::Error giving the output's name and shape.
  bool vjp = false;
  /// Keep the original outputs first in the result (value_and_grad); otherwise the
  /// result's outputs are only the gradients.
  bool keepOutputs = true;
  /// Reverse rule of svd in block form when its cotangents are truncated (only the
  /// first r <= k/2 singular triplets carry cotangents, as after a truncating slice):
  /// k×k×r products instead of k×k×k (passes/VjpRules.cpp). The same gradient up to
  /// rounding, and as good a second derivative (grad of grad) as the full rule: TRG χ = 8,
  /// β = 0.4, 20 steps, d²(lnZ/N)/dβ² = 5.3790169235 (block) vs 5.3790169236 (full) vs
  /// 5.379017 (finite difference). false = always the full rule (for comparisons).
  bool svdBlocks = true;
  /// Use the promise of svd and svd_topk ops with gauge = "bond" (ops.def): their rule
  /// couples two kept triplets without 1/(s_j − s_i) (docs/trg.md §5, "A bond gauge"),
  /// which keeps a gauge-invariant first derivative exact where a kept pair is tied to
  /// rounding (below T_c: ∂(lnZ/N)/∂h = 0 to 1e-15 instead of 1e-8). That form equals
  /// the general one only for cotangents the promise constrains; its own derivative is
  /// the rule's only along inputs that keep the promise (measured equal for TRG, not
  /// proved for any program): those ops get gauge = "bond-vjp", and grad refuses to
  /// differentiate a program that has one (differentiate the original twice without this
  /// option).
  bool bondGauge = false;
  /// With vjp: the outputs that get a cotangent input (empty = all); the others count as
  /// having a zero cotangent and get none. How a call's VJP function leaves out the
  /// outputs its call site does not differentiate (diagnostic outputs, say), so that no
  /// zeros flow back through them.
  std::vector<bool> cotangentsFor;
  /// Auxiliary outputs (JAX's has_aux): names of outputs that are computed and kept but
  /// get no cotangent, neither an input with vjp nor a seed without it (diagnostics such
  /// as the TRG's %skept). Without vjp the one remaining output is the loss. Errors
  /// (tessel::Error): an unknown name; without vjp, other than one scalar output left.
  std::vector<std::string> aux;
  /// Without vjp: the index of the output seeded with 1 (grad sets it from `aux`).
  size_t lossOutput = 0;
  /// The remat policy at the boundaries of calls and scans: each differentiated call
  /// runs the forward half of its callee's gradient (passes::splitGradient with this
  /// policy), which returns the residuals its backward half reads, and its VJP calls
  /// the backward half on them; a scan stacks them per iteration for a reverse scan of
  /// the backward half. Recompute (default): the residuals are the callee's inputs and
  /// the backward half recomputes its forward (JAX's remat of a call; a scan stores its
  /// carries); Store: every value the backward reads; SaveSvd: the inputs and the svd
  /// results (passes/VjpCall.cpp).
  RematPolicy callRemat = RematPolicy::Recompute;
  /// Run svd-topk-guards (passes/SvdTopkGuards.h) on each callee's gradient before it is
  /// split, where the forward's svd_topk and the
  /// backward's svd_topk_complement are still in one function (after the split the
  /// pass would see neither pair).
  bool svdTopkGuards = false;
};

/// Reverse-mode transform (JAX ad.py style, one VJP rule per op keyed by op kind, in
/// passes/VjpRules.cpp).
/// Result: inputs = P's inputs [+ cotangent inputs]; outputs = [P's outputs] +
/// one gradient per wrt input, named `grad_<input>`, of the input's type.
/// Cotangents of values used several times are summed; inputs the outputs do not
/// depend on get zeros; stop_gradient blocks. A missing VJP rule throws tessel::Error
/// naming the op. Errors (tessel::Error): unknown or repeated wrt name; without vjp,
/// a program whose outputs are not exactly one scalar (the message gives the shape).
///
/// Conventions of the rules: compare, sign and iota have zero derivative; select
/// routes the cotangent by its predicate; maximum and reduce_max split the cotangent
/// equally between tied maxima (JAX's rule); abs has derivative sign(x) (0 at 0); svd
/// uses the Lorentzian-broadened rule of docs/trg.md §5 with the op's eps (ε², not ε).
/// Backward ops carry the location "vjp <forward op loc or name>". Ops that no output
/// of the result uses are dropped (the forward part is otherwise kept as is).
ir::Program grad(const ir::Program &p, const GradOptions &opts);

/// The same as a pass (docs/architecture.md pattern 2): replaces `p` by grad(p, opts) and
/// returns true. For the pass registry's `grad{wrt=a;b,vjp=true}` entry.
bool runGrad(ir::Program &p, const GradOptions &opts);

/// True if the VJP-rule table has an entry for `kind` (coverage test).
bool hasVjpRule(ir::OpKind kind);

/// The VJP rule of an op in words and the operands a cotangent flows through ("all",
/// "none", "all but the first"), from the rule table: the op reference (`tessel ops`).
struct VjpRuleInfo {
  const char *rule;
  const char *differentiableOperands;
};
VjpRuleInfo vjpRuleInfo(ir::OpKind kind);

} // namespace tessel::passes
