//===- passes/Grad.cpp - Reverse-mode grad transform ----------------------------===//
//
// The transform (JAX ad.py backward_pass / tinygrad gradient.py style):
//   1. activity: a value is active if it depends differentiably on a wrt input
//      (compare, sign and stop_gradient cut the dependence, so does select's predicate);
//   2. copy the forward program, seed the outputs' cotangents (1.0 for a scalar output,
//      or one `ct_<output>` input per output with vjp);
//   3. walk the ops backwards; for an op with a cotangent on some result, call its VJP
//      rule (passes/VjpRules.cpp) for the active operands only, and sum the returned
//      cotangents per SSA value;
//   4. output the cotangent of each wrt input (zeros if no output depends on it), named
//      grad_<input>, and drop ops no output uses.
// Only values on a path from a wrt input to an output ever receive a cotangent, so no
// backward work is emitted for the rest of the program.
//
//===----------------------------------------------------------------------===//
#include "passes/Grad.h"

#include <algorithm>
#include <string>

#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "passes/Rewrite.h"
#include "passes/VjpRules.h"

namespace tessel::passes {

using ir::Builder;
using ir::kNoValue;
using ir::Op;
using ir::Program;
using ir::ValueId;

namespace {

std::string uniqueName(const Program &p, const std::string &base) {
  std::string cand = base;
  for (int i = 1; p.lookup(cand) != kNoValue; ++i) cand = base + "_" + std::to_string(i);
  return cand;
}

std::string inputList(const Program &p) {
  std::string s;
  for (size_t i = 0; i < p.inputs.size(); ++i)
    s += (i ? ", " : "") + ir::text::percentName(p.value(p.inputs[i]).name);
  return s.empty() ? "none" : s;
}

/// The inputs to differentiate with respect to: opts.wrt by name, else every input.
std::vector<ValueId> resolveWrt(const Program &p, const GradOptions &opts) {
  if (opts.wrt.empty()) return p.inputs;
  std::vector<ValueId> wrt;
  for (const std::string &name : opts.wrt) {
    int idx = p.inputIndex(name);
    if (idx < 0)
      throw Error("grad: wrt: program " + ir::text::atName(p.name) + " has no input named '" + ir::text::percentName(name) +
                  "' (inputs: " + inputList(p) + ")");
    ValueId v = p.inputs[static_cast<size_t>(idx)];
    if (std::find(wrt.begin(), wrt.end(), v) != wrt.end())
      throw Error("grad: wrt: input '%" + name + "' is listed twice");
    wrt.push_back(v);
  }
  return wrt;
}

/// The name of the gradient with respect to input `w`: grad_<w>, or, differentiating
/// a program whose outputs already hold grad_<w> (or gradN_<w>) — grad of grad —
/// grad2_<w> (gradN+1_<w>): the order of the derivative, not a uniquifying suffix.
std::string gradientName(const Program &p, const std::string &w) {
  int order = 0;
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const std::string name = p.outputName(i); // a temporary: the StringRef must not outlive it
    const std::string suffix = "_" + w;
    llvm::StringRef n(name);
    if (!n.consume_front("grad") || !n.endswith(suffix)) continue;
    n = n.drop_back(w.size() + 1);
    unsigned k = 1;
    if (!n.empty() && (n.getAsInteger(10, k) || k < 2)) continue;
    order = std::max(order, static_cast<int>(k));
  }
  return order == 0 ? "grad_" + w : "grad" + std::to_string(order + 1) + "_" + w;
}

/// Without vjp the program needs exactly one scalar output (the loss).
void checkScalarLoss(const Program &p) {
  if (p.outputs.size() != 1)
  {
    std::string names;
    for (size_t i = 0; i < p.outputs.size() && i < 4; ++i)
      names += (i ? ", " : "") + ir::text::percentName(p.outputName(i));
    if (p.outputs.size() > 4) names += ", ...";
    throw Error("grad: program " + ir::text::atName(p.name) + " has " + std::to_string(p.outputs.size()) +
                " outputs (" + names + "); without vjp the program needs exactly one scalar output " +
                (p.gradSignature && p.gradSignature->primalOutputs > 0
                     ? "(it is a gradient that kept its value: build it with keep-outputs=false, "
                       "tessel.grad(p, keep_outputs=False), to differentiate it again; or use vjp "
                       "to pass a cotangent per output)"
                     : "(use vjp to pass a cotangent per output)"));
  }
  const ir::Type &t = p.type(p.outputs[0]);
  if (t.rank() != 0)
    throw Error("grad: output '%" + p.outputName(0) + "' has shape " + t.str() +
                "; a non-scalar output needs an explicit cotangent (use vjp)");
}

/// Activity analysis: active[v] when v depends differentiably on a wrt input.
std::vector<char> activeValues(const Program &p, const std::vector<ValueId> &wrt) {
  std::vector<char> active(p.values.size(), 0);
  for (ValueId v : wrt) active[v] = 1;
  for (const Op &op : p.ops) {
    bool any = false;
    for (size_t j = 0; j < op.operands.size() && !any; ++j)
      any = active[op.operands[j]] && vjp::isDifferentiableOperand(op.kind, static_cast<unsigned>(j));
    if (any)
      for (ValueId r : op.results) active[r] = 1;
  }
  return active;
}

/// The reverse sweep over the forward ops of `p`, appending to `r` (a copy of p):
/// seeds the output cotangents (inputs ct_<output> with vjp, else 1 for the loss),
/// then runs each op's VJP rule where a result has a cotangent and an operand is
/// active. Returns the accumulated cotangent of every forward value (kNoValue: zero).
std::vector<ValueId> reverseSweep(const Program &p, Program &r, Builder &b,
                                  const std::vector<char> &active, const GradOptions &opts) {
  std::vector<ValueId> ct(p.values.size(), kNoValue);
  auto accumulate = [&](ValueId v, ValueId c) {
    ct[v] = ct[v] == kNoValue ? c : b.add(ct[v], c);
  };
  if (opts.vjp) {
    b.setLoc("grad: output cotangent");
    for (size_t i = 0; i < p.outputs.size(); ++i) {
      ValueId out = p.outputs[i];
      ValueId c = r.addInput(uniqueName(r, "ct_" + p.outputName(i)), p.type(out));
      if (active[out]) accumulate(out, c);
    }
  } else if (active[p.outputs[0]]) {
    b.setLoc("grad: seed");
    accumulate(p.outputs[0], b.scalar(1.0));
  }
  llvm::SmallVector<ValueId, 3> resultCts;
  llvm::SmallVector<bool, 4> needed;
  for (size_t i = p.ops.size(); i-- > 0;) {
    const Op &op = p.ops[i]; // p is not modified; value ids are shared with r
    resultCts.clear();
    bool anyCt = false;
    for (ValueId res : op.results) {
      resultCts.push_back(ct[res]);
      anyCt |= ct[res] != kNoValue;
    }
    if (!anyCt) continue;
    needed.clear();
    bool anyNeeded = false;
    for (size_t j = 0; j < op.operands.size(); ++j) {
      bool n = active[op.operands[j]] && vjp::isDifferentiableOperand(op.kind, static_cast<unsigned>(j));
      needed.push_back(n);
      anyNeeded |= n;
    }
    if (!anyNeeded) continue;
    vjp::VjpRule rule = vjp::vjpRuleOrThrow(op.kind);
    b.setLoc("vjp " + (op.loc.empty() ? std::string(ir::opName(op.kind)) : op.loc));
    vjp::OperandCotangents oc =
        rule(vjp::VjpCall{b, op, resultCts, needed, opts.svdBlocks, opts.bondGauge});
    for (size_t j = 0; j < op.operands.size(); ++j)
      if (needed[j] && j < oc.size() && oc[j] != kNoValue) accumulate(op.operands[j], oc[j]);
  }
  return ct;
}

/// One gradient value per wrt input, named grad_<input>: zeros where no output
/// depends on it, and a value of its own where the cotangent is a forward value, an
/// input or another gradient (so that it can carry its own name).
std::vector<ValueId> gradientValues(const Program &p, Program &r, Builder &b,
                                    const std::vector<ValueId> &wrt, const std::vector<ValueId> &ct) {
  std::vector<ValueId> grads;
  for (ValueId w : wrt) {
    const ir::Type t = p.type(w);
    ValueId g = ct[w];
    if (g == kNoValue) {
      b.setLoc("grad: zero gradient (no output depends on %" + p.value(w).name + ")");
      g = b.scalar(0.0);
      if (t.rank() > 0) g = b.broadcastScalar(g, t.shape);
    } else if (g < p.values.size() || r.value(g).def < 0 || !ir::isAnonymousName(r.value(g).name) ||
               std::find(grads.begin(), grads.end(), g) != grads.end()) {
      b.setLoc("grad: copy");
      g = b.reshape(g, t.shape); // an identity reshape
    }
    r.setName(g, gradientName(p, p.value(w).name));
    grads.push_back(g);
  }
  return grads;
}

} // namespace

bool hasVjpRule(ir::OpKind kind) { return vjp::findVjpRule(kind) != nullptr; }

VjpRuleInfo vjpRuleInfo(ir::OpKind kind) {
  const char *which = "all";
  switch (vjp::differentiableOperands(kind)) {
  case vjp::Differentiable::All: which = "all"; break;
  case vjp::Differentiable::None: which = "none"; break;
  case vjp::Differentiable::AllButFirst: which = "all but the first"; break;
  }
  return {vjp::vjpRuleDoc(kind), which};
}

Program grad(const Program &p, const GradOptions &opts) {
  const std::vector<ValueId> wrt = resolveWrt(p, opts);
  if (!opts.vjp) checkScalarLoss(p);
  const std::vector<char> active = activeValues(p, wrt);
  for (const ir::Op &op : p.ops)
    if ((op.kind == ir::OpKind::Svd || op.kind == ir::OpKind::SvdTopk) &&
        op.attrs.getStr("gauge") == "bond-vjp" && active[op.operands[0]])
      throw Error(std::string("grad: ") + ir::opName(op.kind) +
                  (op.loc.empty() ? "" : " (" + op.loc + ")") +
                  " has gauge = \"bond-vjp\": this program holds a VJP built with "
                  "grad{bond-gauge=true}, whose derivative is not the svd rule's; differentiate "
                  "the original program twice with bond-gauge=false");
  Program r = p; // the forward part, unchanged
  Builder b(r);
  const std::vector<ValueId> ct = reverseSweep(p, r, b, active, opts);
  const std::vector<ValueId> grads = gradientValues(p, r, b, wrt, ct);

  // The signature says which outputs are gradients of what (the checkpoint pass reads
  // it); names like grad_<input> are for people.
  ir::GradSignature sig;
  sig.primalOutputs = opts.keepOutputs ? p.outputs.size() : 0;
  for (ValueId w : wrt) sig.wrt.push_back(static_cast<size_t>(p.inputIndex(w)));
  sig.cotangents = opts.vjp ? p.outputs.size() : 0;
  r.gradSignature = sig;
  if (!opts.keepOutputs) r.outputs.clear();
  for (ValueId g : grads) r.addOutput(g);
  eraseDeadOps(r);
  // gauge = "bond" promised that the loss reads U and Vt only through the balanced
  // factors; the rules just emitted read them directly, so the promise does not hold for
  // this program: "none" (its grad takes svd's general rule), or "bond-vjp" where this
  // grad used it (GradOptions::bondGauge; such a program is not differentiated again).
  for (ir::Op &op : r.ops)
    if ((op.kind == ir::OpKind::Svd || op.kind == ir::OpKind::SvdTopk) &&
        op.attrs.getStr("gauge") == "bond")
      op.attrs.set("gauge", ir::Attr::str(opts.bondGauge ? "bond-vjp" : "none"));
  return r;
}

bool runGrad(Program &p, const GradOptions &opts) {
  p = grad(p, opts);
  return true;
}

} // namespace tessel::passes
