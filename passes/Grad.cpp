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
// A module (a program with functions) is differentiated through its calls and scans:
// their rules (passes/VjpCall.cpp) ask for the VJP function of a callee, which this
// transform makes by differentiating the callee with explicit cotangents (once per
// callee and set of differentiated inputs) and adds to the module before the function
// that uses it. A differentiated scan first gets a body that also returns the carries
// it was given (the residuals of its reverse loop). Grad of grad goes through the same
// path: no reverse sweep outside the IR.
//
//===----------------------------------------------------------------------===//
#include "passes/Grad.h"

#include <algorithm>
#include <map>
#include <string>

#include "ir/OpAttrs.h"
#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "ir/Verifier.h"
#include "passes/Activity.h"
#include "passes/Checkpoint.h"
#include "passes/Inline.h"
#include "passes/Rewrite.h"
#include "passes/SvdTopkGuards.h"
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

/// Without vjp the program needs exactly one scalar output (the loss), besides the
/// auxiliary ones.
void checkScalarLoss(const Program &p, const GradOptions &opts) {
  if (!opts.aux.empty()) {
    const ir::Type &t = p.type(p.outputs[opts.lossOutput]);
    if (std::count(opts.cotangentsFor.begin(), opts.cotangentsFor.end(), true) != 1)
      throw Error("grad: program " + ir::text::atName(p.name) + " has " + std::to_string(p.outputs.size()) +
                  " outputs, " +
                  std::to_string(std::count(opts.cotangentsFor.begin(), opts.cotangentsFor.end(), false)) +
                  " of them auxiliary; without vjp exactly one other output (the loss) is needed");
    if (t.rank() != 0)
      throw Error("grad: output '%" + p.outputName(opts.lossOutput) + "' has shape " + t.str() +
                  "; the loss (the one output not in aux) must be a scalar, or use vjp");
    return;
  }
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

class ModuleGradImpl;

/// The reverse sweep over the forward ops of `p`, appending to `r` (a copy of p):
/// seeds the output cotangents (inputs ct_<output> with vjp, else 1 for the loss),
/// then runs each op's VJP rule where a result has a cotangent and an operand is
/// active. Returns the accumulated cotangent of every forward value (kNoValue: zero).
std::vector<ValueId> reverseSweep(const Program &p, Program &r, Builder &b,
                                  const std::vector<char> &active, const GradOptions &opts,
                                  vjp::ModuleGrad *module) {
  std::vector<ValueId> ct(p.values.size(), kNoValue);
  auto accumulate = [&](ValueId v, ValueId c) {
    ct[v] = ct[v] == kNoValue ? c : b.add(ct[v], c);
  };
  if (opts.vjp) {
    b.setLoc("grad: output cotangent");
    for (size_t i = 0; i < p.outputs.size(); ++i) {
      if (i < opts.cotangentsFor.size() && !opts.cotangentsFor[i]) continue;
      ValueId out = p.outputs[i];
      ValueId c = r.addInput(uniqueName(r, "ct_" + p.outputName(i)), p.type(out));
      if (active[out]) accumulate(out, c);
    }
  } else if (active[p.outputs[opts.lossOutput]]) {
    b.setLoc("grad: seed");
    accumulate(p.outputs[opts.lossOutput], b.scalar(1.0));
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
        rule(vjp::VjpCall{b, op, resultCts, needed, opts.svdBlocks, opts.bondGauge, module});
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

namespace {

/// `owned`: p itself, which grad may change (the caller's copy, or its moved-in program).
Program gradFunction(const Program &p, const GradOptions &opts, ModuleGradImpl &m, Program *owned = nullptr);

/// The module side of the transform: the functions it adds, memoised.
class ModuleGradImpl final : public vjp::ModuleGrad {
public:
  ModuleGradImpl(std::vector<Program> functions, std::string entry, const GradOptions &opts)
      : fns_(std::move(functions)), entry_(std::move(entry)), opts_(opts) {}

  const std::vector<Program> &functions() const override { return fns_; }
  std::vector<Program> take() { return std::move(fns_); }

  std::string addFunction(Program f) override {
    f.name = freshFunctionName(fns_, entry_, f.name);
    fns_.push_back(std::move(f));
    return fns_.back().name;
  }

  const SplitCallee *splitCallee(llvm::StringRef forward) const override {
    auto it = splits_.find(forward.str());
    return it == splits_.end() ? nullptr : &it->second;
  }

  /// The forward half of `callee`'s gradient for these marks (made once per callee,
  /// marks and use): GradOptions::callRemat. For a scan body (`scan`) every residual is
  /// an output of the forward half that is not a carry, so that the scan stacks it.
  std::string splitFunction(const std::string &callee, const std::vector<bool> &wrt,
                            const std::vector<bool> &cts, bool scan, size_t carries) {
    std::string key = callee + "\x01";
    for (bool w : wrt) key += w ? '1' : '0';
    key += '\x01';
    for (bool c : cts) key += c ? '1' : '0';
    key += scan ? "\x01" "scan" + std::to_string(carries) : std::string("\x01" "call");
    if (auto it = splitNames_.find(key); it != splitNames_.end()) return it->second;
    // gradFunction adds the splits of the callee's own calls to the module, which may
    // move its functions: a callee with calls is differentiated from a copy.
    const Program *fp = function(callee);
    Program copy;
    const bool calls =
        std::any_of(fp->ops.begin(), fp->ops.end(), [](const ir::Op &op) { return ir::hasCallee(op.kind); });
    if (calls) {
      copy = *fp;
      fp = &copy;
    }
    const Program &f = *fp;
    GradOptions o = opts_;
    o.vjp = true;
    o.keepOutputs = true;
    o.aux.clear();
    o.cotangentsFor = cts;
    o.wrt.clear();
    for (size_t i = 0; i < f.inputs.size() && i < wrt.size(); ++i)
      if (wrt[i]) o.wrt.push_back(f.value(f.inputs[i]).name);
    Program g = gradFunction(f, o, *this, calls ? &copy : nullptr);
    if (opts_.svdTopkGuards) runSvdTopkGuards(g, {});
    // The halves become functions of the module, verified with it (grad() verifies its
    // result; the grad pass leaves it to the pass manager, i.e. to --verify-each or to
    // prepare): verifying them here would need copies of the functions they call.
    ForwardBackward fb = splitGradient(g, f.outputs.size(), f.inputs.size(), opts_.callRemat,
                                       /*asCallee=*/true);
    SplitCallee sc;
    sc.callee = callee;
    sc.primal = f.outputs.size();
    sc.wrt = wrt;
    sc.cotangents = cts;
    for (const Residual &r : fb.residuals) {
      int operand = r.forwardInput, result = r.forwardOutput;
      if (scan && ((operand >= 0 && static_cast<size_t>(operand) < carries) ||
                   (operand < 0 && static_cast<size_t>(result) < carries))) {
        // A carry the iteration got or made: an output of its own, stacked (an x is the
        // scan's own operand, which the reverse scan slices again).
        fb.forward.addOutput(operand >= 0 ? fb.forward.inputs[static_cast<size_t>(operand)]
                                          : fb.forward.outputs[static_cast<size_t>(result)]);
        operand = -1;
        result = static_cast<int>(fb.forward.outputs.size()) - 1;
      }
      sc.fromOperand.push_back(operand);
      sc.fromResult.push_back(operand >= 0 ? -1 : result);
    }
    fb.forward.name = callee + "_fwd";
    fb.backward.name = callee + "_bwd";
    sc.backward = addFunction(std::move(fb.backward));
    const std::string fwd = addFunction(std::move(fb.forward));
    splits_[fwd] = std::move(sc);
    splitNames_[key] = fwd;
    return fwd;
  }

  const Program *function(llvm::StringRef name) const {
    for (const Program &f : fns_)
      if (f.name == name) return &f;
    throw Error("grad: no function " + ir::text::atName(name) + " in the module");
  }

private:
  std::vector<Program> fns_;
  std::string entry_;
  GradOptions opts_;
  std::map<std::string, SplitCallee> splits_;       ///< by forward half
  std::map<std::string, std::string> splitNames_;   ///< forward half by callee and marks
};

/// Which values get a cotangent in the reverse sweep: those an output with a cotangent
/// depends on differentiably through active values (a superset of what the rules give).
std::vector<char> cotangentReach(const Program &p, const std::vector<char> &active, const GradOptions &opts) {
  std::vector<char> reach(p.values.size(), 0);
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const bool seeded = opts.vjp ? i >= opts.cotangentsFor.size() || opts.cotangentsFor[i] : i == opts.lossOutput;
    if (seeded && active[p.outputs[i]]) reach[p.outputs[i]] = 1;
  }
  for (size_t i = p.ops.size(); i-- > 0;) {
    const Op &op = p.ops[i];
    bool any = false;
    for (ValueId r : op.results) any |= reach[r] != 0;
    if (!any) continue;
    for (size_t j = 0; j < op.operands.size(); ++j)
      if (active[op.operands[j]] && vjp::isDifferentiableOperand(op.kind, static_cast<unsigned>(j)))
        reach[op.operands[j]] = 1;
  }
  return reach;
}

/// Under a store policy (GradOptions::callRemat): makes every call and scan whose
/// cotangents grad will need run the forward half of its callee's gradient, whose
/// residuals become new results after the op's own (stacked per iteration for a scan).
void storeCallResiduals(Program &p, const std::vector<char> &active, const std::vector<char> &reach,
                        ModuleGradImpl &m) {
  for (size_t i = 0; i < p.ops.size(); ++i) {
    ir::Op &op = p.ops[i];
    const bool scan = op.kind == ir::OpKind::Scan;
    if (op.kind != ir::OpKind::Call && !scan) continue;
    const size_t k = scan ? static_cast<size_t>(ir::attr<ir::OpKind::Scan, "carries">(op)) : 0;
    std::vector<bool> wrt, cts;
    bool anyWrt = false, anyCt = false;
    for (size_t j = 0; j < op.operands.size(); ++j) {
      wrt.push_back(active[op.operands[j]] != 0);
      anyWrt |= active[op.operands[j]] != 0;
    }
    if (scan && anyWrt) activeCarries(*m.function(ir::calleeOf(op)), k, wrt);
    for (size_t r = 0; r < op.results.size(); ++r) {
      cts.push_back(r < k || reach[op.results[r]] != 0);
      anyCt |= reach[op.results[r]] != 0;
    }
    if (!anyWrt || !anyCt) continue;
    const size_t primal = op.results.size();
    const std::string fwd = m.splitFunction(ir::calleeOf(op), wrt, cts, scan, k);
    op.attrs.set("callee", ir::Attr::str(fwd));
    const Program &f = *m.function(fwd);
    for (size_t o = primal; o < f.outputs.size(); ++o) {
      ir::Shape shape;
      if (scan) shape.push_back(ir::attr<ir::OpKind::Scan, "length">(op));
      const ir::Type &t = f.type(f.outputs[o]);
      shape.append(t.shape.begin(), t.shape.end());
      const ValueId v = static_cast<ValueId>(p.values.size());
      p.values.push_back(ir::ValueInfo{ir::Type(shape), "", static_cast<int32_t>(i),
                                       static_cast<uint32_t>(op.results.size())});
      op.results.push_back(v);
    }
  }
}

/// grad of one function of a module (the entry, or a callee for its VJP function).
Program gradFunction(const Program &p0, const GradOptions &opts, ModuleGradImpl &m, Program *owned) {
  const std::vector<ValueId> wrt = resolveWrt(p0, opts);
  if (!opts.vjp) checkScalarLoss(p0, opts);
  // The calls and scans change (storeCallResiduals): on the caller's program when it
  // hands it over, else on a copy; a function without them is read as it is.
  Program withResiduals;
  const Program *pp = &p0;
  if (std::any_of(p0.ops.begin(), p0.ops.end(), [](const ir::Op &op) { return ir::hasCallee(op.kind); })) {
    Program &q = owned ? *owned : (withResiduals = p0);
    const std::vector<char> act = activeValues(q, wrt);
    storeCallResiduals(q, act, cotangentReach(q, act, opts), m);
    pp = &q;
  }
  const Program &p = *pp;
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
  b.setCallees(m.functions());
  const std::vector<ValueId> ct = reverseSweep(p, r, b, active, opts, &m);
  const std::vector<ValueId> grads = gradientValues(p, r, b, wrt, ct);

  // The signature says which outputs are gradients of what (the checkpoint pass reads
  // it); names like grad_<input> are for people.
  ir::GradSignature sig;
  sig.primalOutputs = opts.keepOutputs ? p.outputs.size() : 0;
  for (ValueId w : wrt) sig.wrt.push_back(static_cast<size_t>(p.inputIndex(w)));
  sig.cotangents = 0;
  for (size_t i = 0; opts.vjp && i < p.outputs.size(); ++i)
    sig.cotangents += i >= opts.cotangentsFor.size() || opts.cotangentsFor[i];
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

} // namespace

namespace {

/// grad of a program it may take apart (runGrad's is moved in, grad's copied).
Program gradOf(Program p, const GradOptions &options) {
  GradOptions opts = options;
  if (!opts.aux.empty()) {
    // The auxiliary outputs: no cotangent input (vjp), or the loss is the other one.
    std::vector<bool> withCt(p.outputs.size(), true);
    for (size_t i = 0; i < opts.cotangentsFor.size() && i < withCt.size(); ++i) withCt[i] = opts.cotangentsFor[i];
    for (const std::string &name : opts.aux) {
      bool found = false;
      for (size_t i = 0; i < p.outputs.size(); ++i)
        if (p.outputName(i) == name) {
          withCt[i] = false; // every output of that name (an output may repeat a value)
          found = true;
        }
      if (!found) {
        std::string names;
        for (size_t i = 0; i < p.outputs.size(); ++i) names += (i ? ", " : "") + ir::text::percentName(p.outputName(i));
        throw Error("grad: aux: program " + ir::text::atName(p.name) + " has no output named '" +
                    ir::text::percentName(name) + "' (outputs: " + names + ")");
      }
    }
    opts.cotangentsFor = withCt;
    for (size_t i = 0; i < withCt.size(); ++i)
      if (withCt[i]) {
        opts.lossOutput = i;
        break;
      }
  }
  ModuleGradImpl m(std::move(p.functions), p.name, opts);
  p.functions.clear();
  Program r = gradFunction(p, opts, m, &p);
  r.functions = m.take();
  // The functions the gradient no longer calls (the differentiated originals, now run
  // as their forward halves) go: later passes need not see them.
  removeDeadFunctions(r);
  return r;
}

} // namespace

Program grad(const Program &p, const GradOptions &options) {
  // Called directly (Python's tessel.grad, gradcheck): the result is verified here, once,
  // which also covers the forward and backward halves of every callee it split.
  Program r = gradOf(p, options);
  ir::verifyOrThrow(r);
  return r;
}

bool runGrad(Program &p, const GradOptions &opts) {
  p = gradOf(std::move(p), opts);
  return true;
}

} // namespace tessel::passes
