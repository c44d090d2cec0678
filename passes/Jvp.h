//===- passes/Jvp.h - Forward-mode jvp transform, and the Hessian ------------===//
//
// jvp(P) and hessian(P) are ordinary programs built only from ops of the op table: they
// print, verify, run, and can be differentiated again.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "ir/Program.h"
#include "passes/Grad.h"

namespace tessel::passes {

struct JvpOptions {
  /// Names of the inputs that get a tangent. Empty = all inputs.
  std::vector<std::string> wrt;
  /// Keep the original outputs first in the result (JAX's jvp returns both); otherwise
  /// the result's outputs are only the tangents.
  bool keepOutputs = true;
};

/// Forward-mode transform (JAX's jvp; one JVP rule per op keyed by op kind, in
/// passes/JvpRules.cpp, with the VJP table's differentiable operands).
/// Result: inputs = P's inputs, then one tangent input `t_<input>` per wrt input, of
/// the input's type, in the order of P's inputs (not wrt's); outputs = [P's outputs] + one
/// tangent per output of P, named `jvp_<output>`, of the output's type: Σ_w ∂out/∂w · t_w.
/// A name P already holds gets a numeric suffix (`t_x_1`), as every new name. Outputs that do not depend
/// on a wrt input get zeros; stop_gradient, compare, sign and select's predicate carry
/// no tangent. Each tangent op follows the op it differentiates in the program and carries
/// the location "jvp <op loc or name>". A call or scan with a tangent operand becomes a
/// call (scan) of the callee's JVP function @<callee>_jvp, made once per callee and set
/// of inputs with tangents, that returns the callee's outputs and then their tangents: the
/// primal work is not repeated. The rules' conventions are grad's (passes/Grad.h); svd's
/// uses the same Lorentzian broadening, so jvp and grad of a program are transposes of
/// each other to rounding.
/// Errors (tessel::Error): an unknown or repeated wrt name; an op without a JVP rule,
/// naming the op; an svd
/// with gauge = "bond-vjp" on a path from a wrt input (a VJP built with grad{bond-gauge}).
ir::Program jvp(const ir::Program &p, const JvpOptions &opts);

/// The same as a pass: replaces `p` by jvp(p, opts) and returns true (the pass
/// registry's `jvp{wrt=a;b}`).
bool runJvp(ir::Program &p, const JvpOptions &opts);

/// True if the JVP-rule table has an entry for `kind` (coverage test).
bool hasJvpRule(ir::OpKind kind);
/// The JVP rule of an op in words (`tessel ops`, docs/ops.md).
const char *jvpRuleDoc(ir::OpKind kind);

struct HessianOptions {
  /// The scalar inputs of the Hessian. Empty = all inputs.
  std::vector<std::string> wrt;
  /// grad's remat policy at the boundaries of calls and scans (GradOptions::callRemat).
  RematPolicy callRemat = RematPolicy::Store;
};

/// The Hessian of a program with one scalar output (the loss) with respect to a few
/// scalar inputs, by forward-over-reverse: jvp of grad{keep-outputs=false}, one
/// Hessian-vector product per input (M. B. Giles (2008); the cheap mode for a few
/// parameters: the forward sweep carries one tangent alongside the reverse one, where
/// reverse-over-reverse differentiates the whole reverse sweep again).
/// The gradient's svd_topk compute their complement solves' guards (svd-topk-guards, in
/// each callee's gradient and in P's own) before the jvp, so every solve deflates with them.
/// Result: a module whose function @hvp is that jvp (inputs: P's, then a tangent per
/// wrt input; outputs: the gradient, then H·t), and whose entry has P's inputs and calls
/// it once per wrt input with a unit tangent. Outputs: d2_<a>_<b> = ∂²out/∂a∂b for
/// every pair in wrt order (row a, column b; P's input order for an empty wrt), or d2_<a>
/// for one input; a name P holds gets a numeric suffix.
/// Errors (tessel::Error): those of grad and jvp; a wrt input that is not a scalar
/// (its shape named: use jvp of grad for a Hessian-vector product).
ir::Program hessian(const ir::Program &p, const HessianOptions &opts);

} // namespace tessel::passes
