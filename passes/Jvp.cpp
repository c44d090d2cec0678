//===- passes/Jvp.cpp - Forward-mode jvp transform, and the Hessian -------------===//
//
// The transform (JAX's jvp): one walk over the ops in order, building a new program.
// Each op is copied; where an operand carries a tangent (through an operand the VJP
// table calls differentiable), its JVP rule (passes/JvpRules.cpp) emits the tangents of
// its results right after it. A call or scan with a tangent operand is replaced by a call
// (scan) of the callee's JVP function instead of being copied: the module side below
// makes that function once per callee, set of inputs with tangents and layout, by the
// same walk over the callee, and adds it to the module after the functions it calls.
// A scan's JVP body carries the tangents of the carries the body makes active (a fixed
// point over the carries, as grad's), starting from zero where the scan got none.
//
// hessian is forward-over-reverse: the jvp of grad{keep-outputs=false}, called once per
// input with a unit tangent.
//
//===----------------------------------------------------------------------===//
#include "passes/Jvp.h"

#include <algorithm>
#include <map>
#include <string>

#include "ir/Builder.h"
#include "ir/OpAttrs.h"
#include "ir/TextUtil.h"
#include "ir/Verifier.h"
#include "passes/Activity.h"
#include "passes/Inline.h"
#include "passes/JvpRules.h"
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

/// `base`, or base_1, base_2, ... : a value name neither program holds.
std::string freshValueName(const Program &a, const Program &b, const std::string &base) {
  std::string cand = base;
  for (int i = 1; a.lookup(cand) != kNoValue || b.lookup(cand) != kNoValue; ++i) cand = base + "_" + std::to_string(i);
  return cand;
}

/// Where the tangent inputs and outputs go: after all inputs and outputs (the entry and
/// a call's callee), or after the carries and after the xs/ys (a scan body).
struct Layout {
  int carries = -1; ///< -1: not a scan body
  bool keepOutputs = true;
  bool entry = false; ///< tangents named t_<input> / jvp_<output>, zeros for every output
};

class ModuleJvpImpl;

/// The walk over `p` (a function of the module, or its entry). `marked`: the inputs
/// with tangents; `tangentOutputs`: the outputs that get one (set for a call's callee
/// from activity; for a scan body the carries are the marked ones).
Program transform(const Program &p, const std::vector<bool> &marked, const Layout &layout,
                  std::vector<bool> &tangentOutputs, ModuleJvpImpl &m);

class ModuleJvpImpl final : public jvprules::ModuleJvp {
public:
  ModuleJvpImpl(std::vector<Program> functions, std::string entry)
      : fns_(std::move(functions)), entry_(std::move(entry)) {}

  const std::vector<Program> &functions() const { return fns_; }
  std::vector<Program> take() { return std::move(fns_); }

  std::string jvpFunction(const std::string &callee, std::vector<bool> &marked, int carries,
                          std::vector<bool> &tangentOutputs) override {
    // A copy: the walk adds functions to the module, which may move them.
    const Program f = function(callee);
    if (carries >= 0) activeCarries(f, static_cast<size_t>(carries), marked); // to a fixed point
    std::string key = callee + "\x01" + std::to_string(carries) + "\x01";
    for (bool b : marked) key += b ? '1' : '0';
    if (auto it = memo_.find(key); it != memo_.end()) {
      tangentOutputs = it->second.second;
      return it->second.first;
    }
    Layout layout;
    layout.carries = carries;
    Program r = transform(f, marked, layout, tangentOutputs, *this);
    r.name = callee + "_jvp";
    const std::string name = addFunction(std::move(r));
    memo_[key] = {name, tangentOutputs};
    return name;
  }

  const Program &function(llvm::StringRef name) const {
    for (const Program &f : fns_)
      if (f.name == name) return f;
    throw Error("jvp: no function " + ir::text::atName(name) + " in the module");
  }

private:
  std::string addFunction(Program f) {
    f.name = freshFunctionName(fns_, entry_, f.name);
    fns_.push_back(std::move(f));
    return fns_.back().name;
  }

  std::vector<Program> fns_;
  std::string entry_;
  std::map<std::string, std::pair<std::string, std::vector<bool>>> memo_;
};

/// svd_topk{guards = g}'s rule gives the guards zero tangents: exact for the readers the
/// svd-topk-guards pass leaves (slices of the kept triplets, complements with the same
/// guards, and the residual outputs that carry them to the backward half). Any other
/// reader of a guard column would get a wrong tangent, so it is an error, as a cotangent on
/// a guard is in the reverse rule.
void checkGuardReaders(const Program &p, const Op &svd) {
  const int64_t g = ir::attr<ir::OpKind::SvdTopk, "guards">(svd);
  if (g == 0) return;
  const int64_t w = p.type(svd.results[1]).shape[0], k = w - g;
  auto fail = [&](const std::string &reader) {
    throw Error("jvp: svd_topk" + (svd.loc.empty() ? std::string() : " (" + svd.loc + ")") + " has guards = " +
                std::to_string(g) + ": " + reader + " reads its guard triplets, which have no derivative "
                "(only slices of the kept " + std::to_string(k) + " and svd_topk_complement with guards = " +
                std::to_string(g) + " may); differentiate before the svd-topk-guards pass");
  };
  for (const Op &op : p.ops)
    for (size_t j = 0; j < op.operands.size(); ++j) {
      const auto it = std::find(svd.results.begin(), svd.results.end(), op.operands[j]);
      if (it == svd.results.end()) continue;
      const size_t which = static_cast<size_t>(it - svd.results.begin()); // U, s, Vt
      if (op.kind == ir::OpKind::Slice) {
        const size_t dim = which == 0 ? 1 : 0; // the triplet axis
        if (ir::attr<ir::OpKind::Slice, "limit">(op)[dim] <= k) continue;
      } else if (op.kind == ir::OpKind::SvdTopkComplement && j == which + 1 &&
                 ir::attr<ir::OpKind::SvdTopkComplement, "guards">(op) == g) {
        continue;
      } else if (ir::hasCallee(op.kind)) {
        continue; // a residual handed to a callee
      }
      fail(std::string("'") + ir::opName(op.kind) + "'" + (op.loc.empty() ? "" : " (" + op.loc + ")"));
    }
  // Outputs are residuals of a forward half, read by the backward's slices and complements.
}

Program transform(const Program &p, const std::vector<bool> &marked, const Layout &layout,
                  std::vector<bool> &tangentOutputs, ModuleJvpImpl &m) {
  Program r;
  r.name = p.name;
  std::vector<ValueId> map(p.values.size(), kNoValue), tan(p.values.size(), kNoValue);
  const size_t nIn = p.inputs.size();
  const size_t k = layout.carries >= 0 ? static_cast<size_t>(layout.carries) : nIn;
  auto addPrimal = [&](size_t i) {
    map[p.inputs[i]] = r.addInput(p.value(p.inputs[i]).name, p.type(p.inputs[i]));
  };
  auto addTangent = [&](size_t i) {
    if (!marked[i]) return;
    const ir::ValueInfo &vi = p.value(p.inputs[i]);
    tan[p.inputs[i]] = r.addInput(freshValueName(p, r, "t_" + vi.name), vi.type);
  };
  // Inputs: [primal..., tangents...] (the scan body's: per group, carries then xs).
  for (size_t i = 0; i < k; ++i) addPrimal(i);
  for (size_t i = 0; i < k; ++i) addTangent(i);
  for (size_t i = k; i < nIn; ++i) addPrimal(i);
  for (size_t i = k; i < nIn; ++i) addTangent(i);

  Builder b(r);
  b.setCallees(m.functions());
  llvm::SmallVector<ValueId, 4> operands;
  llvm::SmallVector<ValueId, 4> tangents;
  llvm::SmallVector<ValueId, 4> primal;
  llvm::SmallVector<ir::Type, 3> types;
  for (const Op &op : p.ops) {
    operands.clear();
    tangents.clear();
    bool any = false;
    for (size_t j = 0; j < op.operands.size(); ++j) {
      operands.push_back(map[op.operands[j]]);
      ValueId t = vjp::isDifferentiableOperand(op.kind, static_cast<unsigned>(j)) ? tan[op.operands[j]] : kNoValue;
      tangents.push_back(t);
      any |= t != kNoValue;
    }
    ir::AttrList attrs = op.attrs;
    if (any && op.kind == ir::OpKind::SvdTopk) checkGuardReaders(p, op);
    if (any && (op.kind == ir::OpKind::Svd || op.kind == ir::OpKind::SvdTopk)) {
      const std::string gauge = attrs.getStr("gauge");
      if (gauge == "bond-vjp")
        throw Error(std::string("jvp: ") + ir::opName(op.kind) + (op.loc.empty() ? "" : " (" + op.loc + ")") +
                    " has gauge = \"bond-vjp\": this program holds a VJP built with grad{bond-gauge=true}, "
                    "whose derivative is not the svd rule's; differentiate the original program with "
                    "bond-gauge=false");
      // The promise is about cotangents reaching the svd; the tangent outputs read U and
      // Vt directly, so it does not hold for this program's own derivatives.
      if (gauge == "bond") attrs.set("gauge", ir::Attr::str("none"));
    }
    const std::string where = "jvp " + (op.loc.empty() ? std::string(ir::opName(op.kind)) : op.loc);
    jvprules::ResultTangents rt;
    if (any && ir::hasCallee(op.kind)) {
      // Replaced by the callee's JVP function, which also computes the primal results.
      Op copy = op;
      copy.operands.assign(operands.begin(), operands.end());
      copy.attrs = attrs;
      b.setLoc(op.loc);
      b.setRemat(op.remat);
      primal.clear();
      rt = jvprules::jvpRuleOrThrow(op.kind)(jvprules::JvpCall{b, copy, tangents, &m, &primal});
      for (size_t o = 0; o < op.results.size(); ++o) map[op.results[o]] = primal[o];
    } else {
      types.clear();
      for (ValueId res : op.results) types.push_back(p.type(res));
      auto res = r.appendOp(op.kind, operands, std::move(attrs), types, op.loc, op.remat);
      for (size_t o = 0; o < op.results.size(); ++o) map[op.results[o]] = res[o];
      if (!any) continue;
      const Op copy = r.ops.back(); // the vector grows while the rule runs
      b.setLoc(where);
      rt = jvprules::jvpRuleOrThrow(op.kind)(jvprules::JvpCall{b, copy, tangents, &m, nullptr});
    }
    for (size_t o = 0; o < op.results.size() && o < rt.size(); ++o) tan[op.results[o]] = rt[o];
  }
  // Names after the ops: a primal value keeps its name (tangent inputs took theirs first).
  for (ValueId v = 0; v < p.values.size(); ++v)
    if (p.value(v).def >= 0 && map[v] != kNoValue && !ir::isAnonymousName(p.value(v).name))
      r.setName(map[v], p.value(v).name);

  // Outputs.
  const std::vector<char> active = activeFromInputs(p, marked);
  const size_t nOut = p.outputs.size();
  tangentOutputs.assign(nOut, false);
  for (size_t o = 0; o < nOut; ++o)
    tangentOutputs[o] = layout.entry || (layout.carries >= 0 && o < k ? marked[o] : active[p.outputs[o]] != 0);
  std::vector<ValueId> outT(nOut, kNoValue);
  for (size_t o = 0; o < nOut; ++o) {
    if (!tangentOutputs[o]) continue;
    ValueId t = tan[p.outputs[o]];
    const ir::Type ty = p.type(p.outputs[o]);
    if (t == kNoValue) {
      b.setLoc("jvp: zero tangent (the output does not depend on a tangent input)");
      t = vjp::splat(b, 0.0, ty.shape); // a scalar broadcast, not a dense constant
    } else if (layout.entry && (r.value(t).def < 0 || !ir::isAnonymousName(r.value(t).name) ||
                                std::find(outT.begin(), outT.end(), t) != outT.end())) {
      b.setLoc("jvp: copy");
      t = b.reshape(t, ty.shape); // an identity reshape, to carry the output's name
    }
    outT[o] = t;
  }
  const size_t kOut = layout.carries >= 0 ? k : nOut;
  auto primalOut = [&](size_t o) { r.addOutput(map[p.outputs[o]]); };
  auto tangentOut = [&](size_t o) {
    if (!tangentOutputs[o]) return;
    r.addOutput(outT[o]);
    if (layout.entry) r.setName(outT[o], freshValueName(p, r, "jvp_" + p.outputName(o)));
  };
  if (layout.keepOutputs)
    for (size_t o = 0; o < kOut; ++o) primalOut(o);
  for (size_t o = 0; o < kOut; ++o) tangentOut(o);
  for (size_t o = kOut; o < nOut; ++o) primalOut(o);
  for (size_t o = kOut; o < nOut; ++o) tangentOut(o);
  eraseDeadOps(r);
  return r;
}

std::vector<bool> resolveMarks(const Program &p, const std::vector<std::string> &wrt, const char *who) {
  std::vector<bool> marked(p.inputs.size(), wrt.empty());
  for (const std::string &name : wrt) {
    const int idx = p.inputIndex(name);
    if (idx < 0) {
      std::string names;
      for (size_t i = 0; i < p.inputs.size(); ++i)
        names += (i ? ", " : "") + ir::text::percentName(p.value(p.inputs[i]).name);
      throw Error(std::string(who) + ": wrt: program " + ir::text::atName(p.name) + " has no input named '" +
                  ir::text::percentName(name) + "' (inputs: " + (names.empty() ? "none" : names) + ")");
    }
    if (marked[static_cast<size_t>(idx)])
      throw Error(std::string(who) + ": wrt: input '" + ir::text::percentName(name) + "' is listed twice");
    marked[static_cast<size_t>(idx)] = true;
  }
  return marked;
}

Program jvpOf(Program p, const JvpOptions &opts) {
  const std::vector<bool> marked = resolveMarks(p, opts.wrt, "jvp");
  ModuleJvpImpl m(std::move(p.functions), p.name);
  p.functions.clear();
  Layout layout;
  layout.entry = true;
  layout.keepOutputs = opts.keepOutputs;
  std::vector<bool> outs;
  Program r = transform(p, marked, layout, outs, m);
  r.functions = m.take();
  removeDeadFunctions(r);
  return r;
}

} // namespace

bool hasJvpRule(ir::OpKind kind) { return jvprules::findJvpRule(kind) != nullptr; }
const char *jvpRuleDoc(ir::OpKind kind) { return jvprules::jvpRuleDoc(kind); }

Program jvp(const Program &p, const JvpOptions &opts) {
  Program r = jvpOf(p, opts);
  ir::verifyOrThrow(r);
  return r;
}

bool runJvp(Program &p, const JvpOptions &opts) {
  p = jvpOf(std::move(p), opts);
  return true;
}

Program hessian(const Program &p, const HessianOptions &opts) {
  const std::vector<bool> marked = resolveMarks(p, opts.wrt, "hessian");
  // The inputs in wrt's order (all inputs, in order, for an empty wrt).
  std::vector<size_t> order;
  for (const std::string &name : opts.wrt) order.push_back(static_cast<size_t>(p.inputIndex(name)));
  for (size_t i = 0; i < p.inputs.size() && opts.wrt.empty(); ++i)
    if (marked[i]) order.push_back(i);
  std::vector<std::string> wrt;
  for (size_t i : order) {
    const ir::ValueInfo &vi = p.value(p.inputs[i]);
    if (vi.type.rank() != 0)
      throw Error("hessian: input '" + ir::text::percentName(vi.name) + "' has shape " + vi.type.str() +
                  "; hessian takes scalar inputs (for a Hessian-vector product use jvp of "
                  "grad{keep-outputs=false})");
    wrt.push_back(vi.name);
  }
  GradOptions go;
  go.wrt = wrt;
  go.keepOutputs = false;
  go.callRemat = opts.callRemat;
  go.svdTopkGuards = true; // in each callee's gradient, before it is split
  JvpOptions jo;
  jo.wrt = wrt;
  // The complement solves of svd_topk's rules (the reverse rule's and the jvp's) deflate
  // with guards the forward computes (passes/SvdTopkGuards.h); jvp holds them constant.
  Program g = grad(p, go);
  runSvdTopkGuards(g, {});
  Program hvp = jvpOf(std::move(g), jo); // inputs: p's, t_<w>...; outputs: grad_<w>..., H·t

  Program h;
  h.name = p.name;
  h.functions = std::move(hvp.functions);
  hvp.functions.clear();
  hvp.name = "hvp";
  for (int i = 1; std::any_of(h.functions.begin(), h.functions.end(),
                              [&](const Program &f) { return f.name == hvp.name; }) ||
                  hvp.name == h.name;
       ++i)
    hvp.name = "hvp_" + std::to_string(i);
  const std::string callee = hvp.name;
  h.functions.push_back(std::move(hvp));
  std::vector<ValueId> inputs;
  for (ValueId in : p.inputs) inputs.push_back(h.addInput(p.value(in).name, p.type(in)));
  Builder b(h);
  const size_t n = wrt.size();
  std::vector<std::vector<ValueId>> rows(n);
  for (size_t i = 0; i < n; ++i) {
    b.setLoc("hessian: row %" + wrt[i]);
    // @hvp's tangent inputs follow P's input order (jvp's), its outputs wrt's (grad's).
    std::vector<ValueId> operands = inputs;
    std::vector<size_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    for (size_t j = 0; j < n; ++j) operands.push_back(b.scalar(sorted[j] == order[i] ? 1.0 : 0.0));
    auto res = b.call(callee, operands);
    rows[i].assign(res.begin() + static_cast<ptrdiff_t>(n), res.end());
  }
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) {
      ValueId v = rows[i][j];
      b.setLoc("hessian: d2 %" + wrt[i] + " %" + wrt[j]);
      v = b.reshape(v, {}); // a value of its own, to carry the name
      h.setName(v, n == 1 ? "d2_" + wrt[0] : "d2_" + wrt[i] + "_" + wrt[j]);
      h.addOutput(v);
    }
  ir::verifyOrThrow(h);
  return h;
}

} // namespace tessel::passes
