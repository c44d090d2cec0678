//===- passes/Checkpoint.h - Remat policies over the forward/backward split -----===//
//
// The forward/backward split of a gradient program (JAX `checkpoint` policies):
//
//   forward   = the ops the primal outputs depend on (transitively);
//   backward  = every other op (the VJP rules, the seed, zero gradients);
//   residual  = a forward value (or a program input) that a backward op reads.
//
// A policy decides which forward values the backward may read ("saveable") and which
// it must recompute:
//
//   store      every forward value is saveable but broadcasts and cheap unary ops (see
//              below): nothing else is recomputed;
//   recompute  only the region's inputs are saveable: the backward clones the forward
//              ops it needs (JAX `nothing_saveable`);
//   save-svd   the region's inputs and the results of every `svd` (and `svd_topk`) are saveable, the
//              rest is recomputed from them (SVDs are the expensive ops; an svd is
//              never recomputed under this policy), and so are the results of a `call`
//              or `scan`, whose callee may hold svds of its own.
//
// Under every policy a broadcast_in_dim that expands a saved operand is not saved: the
// backward redoes it from the operand (a copy, or for a scalar a value fused into its
// reader's loop), which holds the same information in fewer bytes. Nor is a cheap unary
// op (abs, neg, sign: ir::isCheapElementwise) of a saved operand: the backward redoes
// it inside its readers' loops, a few instructions per element against the bytes of a
// saved copy.
//
// Recomputation clones forward ops verbatim (same kind, attributes and operands, the
// operands themselves clones or saved values), so the recomputed values are bitwise
// identical to the forward's, and so are the gradients under all three policies.
// Each clone is placed just before the first backward op that needs it (clones
// needed by the same backward op keep their forward order). Clones are remat ops
// (Op::remat, printed `remat`) with the original loc and results named `<name>.remat`;
// CSE never merges a remat op with one that is not (passes/Cse.h), so the forward
// values die early instead of living until the backward.
//
// Regions (the `checkpoint` pass only). The forward ops, in program order, are cut
// into `regions` contiguous regions; each cut is put where the fewest bytes of forward
// values cross it (within half a region of its ideal position). A region's inputs are
// the program inputs and the values defined in an earlier region and read by its
// forward ops; they are saved under every policy (as the inputs of a jax.checkpoint'd
// function are), so the backward of a region recomputes only that region, and each
// forward op is recomputed at most once (cost: at most one extra forward).
// regions = 1 is JAX's checkpoint of the whole function; the default (auto) uses
// round(sqrt(number of forward ops)) regions (Chen et al. 2016, "Training Deep Nets
// with Sublinear Memory Cost"), which for a chain of identical steps puts the cuts
// between steps.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/Program.h"
#include "ir/Type.h"
#include "llvm/ADT/StringRef.h"
#include "passes/Grad.h"

namespace tessel::passes {

/// "store", "recompute", "save-svd".
const char *rematPolicyName(RematPolicy p);
/// Parses a policy name; throws tessel::Error listing the allowed names.
RematPolicy parseRematPolicy(llvm::StringRef name);
/// All policies, in the order store, save-svd, recompute (most memory to least).
const std::vector<RematPolicy> &allRematPolicies();

//===----------------------------------------------------------------------===//
// (a) The `checkpoint` pass: one program produced by grad(keepOutputs = true)
//===----------------------------------------------------------------------===//

struct CheckpointOptions {
  RematPolicy policy = RematPolicy::Recompute;
  /// Number of forward regions; 0 = auto (round(sqrt(forward ops)), at least 1).
  int64_t regions = 0;
  /// Number of leading outputs that are primal outputs; -1 = the program's grad
  /// signature's (ir::GradSignature, set by passes::grad).
  int64_t numPrimalOutputs = -1;
};

struct CheckpointStats {
  int64_t forwardOps = 0;    ///< ops in the forward region
  int64_t backwardOps = 0;   ///< ops in the backward before rematerialisation
  int64_t regions = 0;       ///< regions actually used
  int64_t recomputedOps = 0; ///< clones inserted
  int64_t residuals = 0;     ///< forward values (inputs included) read by the backward after
  int64_t residualBytes = 0; ///< ... and their bytes
};

/// Applies `opts.policy` to a gradient program in place: forward values the policy
/// does not save are recomputed in the backward (see the top of this file). Primal
/// outputs are saved under every policy (they stay live as outputs anyway). Returns
/// true when clones were inserted (store only for broadcasts).
/// Throws tessel::Error when the program has no grad signature or no
/// primal outputs (grad ran with keepOutputs = false), naming the pass.
bool runCheckpoint(ir::Program &p, const CheckpointOptions &opts,
                   CheckpointStats *stats = nullptr);

//===----------------------------------------------------------------------===//
// Residuals, and (b) splitVjp: a forward and a backward program for staged execution
//===----------------------------------------------------------------------===//

/// One value the backward needs from the forward.
struct Residual {
  /// Name of the backward input (and of the forward output that carries it; an input
  /// keeps its name, a named value its name, anonymous values get `res<k>`).
  std::string name;
  ir::Type type;
  int64_t bytes = 0; ///< 8 * numel
  /// Where the driver finds it. From splitVjp exactly one of the two is >= 0; from
  /// listResiduals forwardInput is set for an input, forwardOutput for a primal
  /// output, and both are -1 for a value inside the program.
  int forwardInput = -1;  ///< index into the forward program's inputs
  int forwardOutput = -1; ///< index into the forward program's outputs
  /// Op that defines it in the forward ("input" for an input), e.g. "svd".
  std::string originOp;
  /// Human description: the defining op, e.g. `%U, %s, %Vt = svd %Ma loc("step: svd
  /// Ma")`, or `input %T`.
  std::string origin;
};

/// The residuals of a gradient program as it stands (after grad, or after grad and
/// checkpoint): every forward value, program inputs included, that a backward op
/// reads, inputs first (input order), then op results in definition order. Names are
/// the printed names without '%'. `numPrimalOutputs` as in CheckpointOptions. Throws
/// like runCheckpoint when the program is not a gradient program.
std::vector<Residual> listResiduals(const ir::Program &p, int64_t numPrimalOutputs = -1);

/// A forward and a backward (VJP) program of one step, for staged execution:
///
///   fwd outputs  = [the original outputs..., residuals that are neither inputs nor
///                   original outputs...]
///   bwd inputs   = [residuals..., cotangents ct_<output> (GradOptions::vjp only)...]
///   bwd outputs  = [grad_<wrt>...]
///
/// Driver recipe (staged TRG, one step class):
///   auto fb = passes::splitVjp(step, {.wrt = {"T"}, .vjp = true}, RematPolicy::Store);
///   // forward sweep: outs = run(fb.forward, ins), keep outs (residuals included)
///   // backward sweep: grads = run(fb.backward, fb.backwardInputs(ins, outs, cts))
struct ForwardBackward {
  ir::Program forward;
  ir::Program backward;
  std::vector<Residual> residuals; ///< in backward-input order
  size_t numPrimalOutputs = 0;     ///< leading outputs of `forward` that are the original ones
  size_t numCotangents = 0;        ///< trailing inputs of `backward`
  RematPolicy policy = RematPolicy::Store;
  int64_t recomputedOps = 0; ///< forward ops cloned into the backward

  /// Sum of Residual::bytes (what a staged driver holds per step between sweeps).
  int64_t residualBytes() const;
  /// Inputs of `backward`: residuals picked from the forward's inputs and outputs,
  /// then the cotangents (one per original output, in output order; must be empty
  /// without GradOptions::vjp). Throws tessel::Error on a count mismatch.
  std::vector<ir::Tensor> backwardInputs(const std::vector<ir::Tensor> &forwardInputs,
                                         const std::vector<ir::Tensor> &forwardOutputs,
                                         const std::vector<ir::Tensor> &cotangents) const;
  /// Table of the residuals (name, type, bytes, origin) and the total, one per line.
  std::string describeResiduals() const;
};

/// Builds grad(fwd, opts) (keepOutputs is forced on) and splits it into a forward
/// program that also outputs the residuals and a backward program that takes them,
/// with the policy applied over the whole program as one region:
///   store      the residuals are every forward value the VJP reads but broadcasts,
///              which the backward redoes (it never calls an svd again);
///   recompute  the residuals are only forward inputs; the backward first re-runs the
///              forward ops it needs (bitwise identical values);
///   save-svd   the residuals are the svd, svd_topk, call and scan results the backward
///              needs (+ inputs);
///              everything else is recomputed from them.
/// Both programs verify. Throws tessel::Error from grad (e.g. a non-scalar output
/// without vjp) as is.
ForwardBackward splitVjp(const ir::Program &fwd, const GradOptions &opts, RematPolicy policy);

/// The split of splitVjp on a gradient program `g` already built, e.g. by the `grad` pass
/// with keep-outputs=true: `numPrimalOutputs` leading outputs of `g` are the original
/// outputs and its `numPrimalInputs` leading inputs the original inputs (the rest are
/// cotangents). splitVjp(fwd, opts, policy) is splitGradient(grad(fwd, opts with
/// keepOutputs), fwd.outputs.size(), fwd.inputs.size(), policy). With `asCallee` (grad's
/// own split of a function a call or scan differentiates) the halves are not verified
/// here and the residuals carry no origin text: they become functions of the module,
/// verified with it (passes::grad verifies its result; after the grad pass, --verify-each
/// or prepare does), as verifying a half alone would need copies of the functions it
/// calls; and nothing prints their residual table.
ForwardBackward splitGradient(const ir::Program &g, size_t numPrimalOutputs,
                              size_t numPrimalInputs, RematPolicy policy,
                              bool asCallee = false);

} // namespace tessel::passes
