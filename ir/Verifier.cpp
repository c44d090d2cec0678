//===- ir/Verifier.cpp ----------------------------------------------------------------===//
#include "ir/Verifier.h"

#include <algorithm>

#include "ir/OpAttrs.h"
#include "ir/TextUtil.h"
#include "ir/Printer.h"
#include "ir/OpCheck.h"
#include "llvm/ADT/StringSet.h"

namespace tessel::ir {

namespace {

void verifyInto(const Program &p, Callees callees, std::vector<std::string> &errs) {
  std::vector<bool> defined(p.values.size(), false);
  llvm::StringSet<> names;
  auto checkName = [&](ValueId v) {
    const std::string &n = p.values[v].name;
    if (!isAnonymousName(n) && !names.insert(n).second)
      errs.push_back("value name '%" + n + "' is defined more than once");
  };
  for (ValueId in : p.inputs) {
    if (in >= p.values.size()) {
      errs.push_back("program input refers to a value that does not exist");
      continue;
    }
    if (isAnonymousName(p.values[in].name))
      errs.push_back("program input #" + std::to_string(&in - p.inputs.data()) +
                     " has no name");
    if (defined[in]) errs.push_back("value '%" + p.values[in].name + "' is an input twice");
    defined[in] = true;
    checkName(in);
  }
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const Op &op = p.ops[i];
    // Built only when reporting: describing every op would make verify() quadratic.
    auto where = [&] { return describeOp(p, op); };
    bool ok = true;
    for (size_t j = 0; j < op.operands.size(); ++j) {
      ValueId v = op.operands[j];
      if (v >= p.values.size() || !defined[v]) {
        errs.push_back(where() + ": operand " + std::to_string(j) + " " +
                       (v < p.values.size() ? valueRef(p, v) : std::string("?")) +
                       " is not defined before use");
        ok = false;
      }
    }
    for (ValueId r : op.results) {
      if (r >= p.values.size()) {
        errs.push_back(where() + ": result refers to a value that does not exist");
        ok = false;
        continue;
      }
      if (defined[r]) {
        errs.push_back(where() + ": redefines " + valueRef(p, r));
        ok = false;
      }
    }
    if (ok) {
      bool attrsWellFormed = true;
      checkOp(
          p, op,
          [&](const OpProblem &problem) {
            errs.push_back(where() + ": " + problem.message);
            attrsWellFormed &= problem.part == OpProblem::Part::Op ||
                               problem.part == OpProblem::Part::ResultType;
          },
          callees);
      // The stored form: what the readers and the builder make of the attributes.
      if (attrsWellFormed && !isCanonicalAttrs(op.kind, op.attrs))
        errs.push_back(where() + ": attributes are not in canonical form (order or defaults)");
    }
    for (ValueId r : op.results)
      if (r < p.values.size() && !defined[r]) {
        defined[r] = true;
        checkName(r);
      }
  }
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    ValueId v = p.outputs[i];
    if (v >= p.values.size() || !defined[v])
      errs.push_back("output #" + std::to_string(i) + " is not defined");
  }
  if (const auto &g = p.gradSignature) {
    const size_t nIn = p.inputs.size(), nOut = p.outputs.size();
    if (g->wrt.size() > nOut || g->primalOutputs != nOut - g->wrt.size())
      errs.push_back("grad signature: " + std::to_string(g->primalOutputs) + " primal outputs and " +
                     std::to_string(g->wrt.size()) + " gradients, but the program has " +
                     std::to_string(nOut) + " outputs");
    if (g->cotangents > nIn)
      errs.push_back("grad signature: " + std::to_string(g->cotangents) +
                     " cotangent inputs, but the program has " + std::to_string(nIn) + " inputs");
    for (size_t i = 0; i < g->wrt.size(); ++i) {
      const size_t k = g->wrt[i], o = g->primalOutputs + i;
      if (std::find(g->wrt.begin(), g->wrt.begin() + static_cast<ptrdiff_t>(i), k) !=
          g->wrt.begin() + static_cast<ptrdiff_t>(i))
        errs.push_back("grad signature: wrt #" + std::to_string(i) + " repeats an earlier input");
      if (k >= nIn - std::min(g->cotangents, nIn)) {
        errs.push_back("grad signature: wrt #" + std::to_string(i) +
                       " is not a primal input of the program");
        continue;
      }
      if (o < nOut && p.inputs[k] < p.values.size() && p.outputs[o] < p.values.size() &&
          p.type(p.inputs[k]) != p.type(p.outputs[o]))
        errs.push_back("grad signature: gradient output #" + std::to_string(o) + " has type " +
                       p.type(p.outputs[o]).str() + " but its wrt input " +
                       valueRef(p, p.inputs[k]) + " has type " + p.type(p.inputs[k]).str());
    }
  }
}

} // namespace

std::vector<std::string> verifyFunction(const Program &f, Callees callees) {
  std::vector<std::string> errs;
  verifyInto(f, callees, errs);
  return errs;
}

std::vector<std::string> verify(const Program &p) {
  return verify(p, std::vector<char>(p.functions.size() + 1, 1));
}

std::vector<std::string> verify(const Program &p, const std::vector<char> &which) {
  std::vector<std::string> errs;
  auto marked = [&](size_t i) { return i < which.size() && which[i]; };
  // The functions first, each seeing only those before it (so no recursion), then the
  // entry, which sees them all.
  for (size_t i = 0; i < p.functions.size(); ++i) {
    const Program &f = p.functions[i];
    std::vector<std::string> fe;
    if (f.name == p.name)
      fe.push_back("has the name of the module's entry");
    for (size_t j = 0; j < i; ++j)
      if (p.functions[j].name == f.name) fe.push_back("is defined twice (function " + std::to_string(j) + " too)");
    if (!f.functions.empty())
      fe.push_back("has functions of its own (only a module's entry holds functions)");
    if (marked(i)) verifyInto(f, Callees(p.functions).take_front(i), fe);
    for (std::string &e : fe) errs.push_back("function " + text::atName(f.name) + ": " + e);
  }
  if (marked(p.functions.size())) verifyInto(p, p.functions, errs);
  // Nesting: the longest chain of calls and scans from the entry. Every stage that
  // follows it (grad, the interpreters) recurses once per level.
  if (errs.empty() && !p.functions.empty()) {
    std::vector<size_t> depth(p.functions.size() + 1, 1);
    auto nesting = [&](const Program &f) {
      size_t d = 1;
      for (const Op &op : f.ops)
        if (hasCallee(op.kind))
          if (int i = p.functionIndex(calleeOf(op)); i >= 0)
            d = std::max(d, 1 + depth[static_cast<size_t>(i)]);
      return d;
    };
    for (size_t i = 0; i < p.functions.size(); ++i) depth[i] = nesting(p.functions[i]);
    const size_t entry = nesting(p);
    if (entry > kMaxCallDepth)
      errs.push_back("module " + ir::text::atName(p.name) + ": calls and scans nest " +
                     std::to_string(entry) + " functions deep, more than the " +
                     std::to_string(kMaxCallDepth) + " a module may nest");
  }
  return errs;
}

void verifyOrThrow(const Program &p) {
  std::vector<std::string> errs = verify(p);
  if (errs.empty()) return;
  std::string msg = "error: program " + ir::text::atName(p.name) + " failed verification:";
  for (const std::string &e : errs) msg += "\n  " + e;
  throw VerifyError(msg);
}

} // namespace tessel::ir
