//===- passes/OrderLowering.cpp - einsum to dot_general along a path; runOrder ---===//
//
// Lowers an einsum along a contraction path (Order.h, lowerEinsum): diagonals and
// single-operand sums first, then one dot_general per pairwise step and a final
// transpose to the output order; and the `order` pass itself (runOrder).
//
//===----------------------------------------------------------------------===//
#include <algorithm>

#include "ir/OpAttrs.h"
#include "ir/Diagnostics.h"
#include "ir/Printer.h"
#include "passes/ContractionProblem.h"
#include "passes/Order.h"
#include "passes/Rewrite.h"

namespace tessel::passes {

using namespace tessel::ir;
using namespace contraction;

namespace {

std::vector<int64_t> positionsIn(const std::string &labels, const std::string &which) {
  std::vector<int64_t> r;
  for (char c : which) r.push_back(int64_t(labels.find(c)));
  return r;
}

/// Takes the diagonal over the two copies (positions p < q) of one label; see Order.h.
ValueId extractDiagonal(Builder &b, ValueId v, std::string &labels, size_t p, size_t q) {
  const Shape in = b.type(v).shape;
  const int rank = int(in.size());
  std::vector<int64_t> perm;
  for (int j = 0; j < rank; ++j)
    if (size_t(j) != p && size_t(j) != q) perm.push_back(j);
  perm.push_back(int64_t(p));
  perm.push_back(int64_t(q));
  bool identity = true;
  for (int j = 0; j < rank; ++j) identity &= perm[size_t(j)] == j;
  if (!identity) v = b.transpose(v, perm);
  const int64_t D = in[p];
  Shape lead;
  for (int j = 0; j + 2 < rank; ++j) lead.push_back(in[size_t(perm[size_t(j)])]);
  Shape s = lead;
  s.push_back(D * D);
  v = b.reshape(v, s);
  std::vector<int64_t> low(s.size(), 0), high(s.size(), 0);
  high.back() = D;
  v = b.pad(v, low, high);
  s = lead;
  s.push_back(D);
  s.push_back(D + 1);
  v = b.reshape(v, s);
  std::vector<int64_t> start(s.size(), 0), limit(s.begin(), s.end());
  limit.back() = 1;
  v = b.slice(v, start, limit);
  s.pop_back();
  v = b.reshape(v, s);
  labels = mergeRepeat(labels, p, q);
  return v;
}

} // namespace

ValueId lowerEinsum(Builder &b, llvm::StringRef spec, llvm::ArrayRef<ValueId> operands,
                    const ContractionPath &path) {
  std::vector<Shape> shapes;
  for (ValueId v : operands) shapes.push_back(b.type(v).shape);
  Problem P = makeProblem(spec, shapes);
  const size_t n = P.n();
  if (path.spec != P.spec || path.shapes != P.shapes ||
      path.steps.size() != (n == 1 ? 1 : n - 1))
    throw Error("internal: contraction path does not belong to einsum '" + P.spec + "'");

  std::vector<ValueId> term(2 * n, kNoValue);
  std::vector<std::string> labels(2 * n);
  for (size_t i = 0; i < n; ++i) {
    ValueId v = operands[i];
    std::string l = P.raw[i];
    size_t p, q;
    while (findRepeat(l, p, q)) v = extractDiagonal(b, v, l, p, q);
    std::vector<int64_t> axes;
    std::string kept;
    for (size_t j = 0; j < l.size(); ++j) {
      if (P.leaf[i].find(l[j]) == std::string::npos)
        axes.push_back(int64_t(j));
      else
        kept += l[j];
    }
    if (!axes.empty()) v = b.reduceSum(v, axes);
    if (kept != P.leaf[i]) throw Error("internal: einsum lowering label order mismatch");
    term[i] = v;
    labels[i] = kept;
  }

  ValueId v = term[0];
  std::string cur = labels[0];
  for (size_t k = 0; n > 1 && k < path.steps.size(); ++k) {
    const ContractionStep &s = path.steps[k];
    const std::string &la = labels[size_t(s.lhs)], &lb = labels[size_t(s.rhs)];
    std::string contract;
    for (char c : la)
      if (lb.find(c) != std::string::npos && s.batch.find(c) == std::string::npos) contract += c;
    if (s.resultLabels.size() > size_t(kMaxRank))
      throw Error("order: einsum '" + P.spec + "' under strategy " +
                  orderStrategyName(path.used) + " needs an intermediate '" + s.resultLabels +
                  "' of rank " + std::to_string(s.resultLabels.size()) +
                  ", above the limit of " + std::to_string(kMaxRank) +
                  " (try strategy=optimal)");
    std::string got;
    if (contract.empty() && s.batch.size() == la.size() && s.batch.size() == lb.size()) {
      // Hadamard product (same labels on both sides, nothing summed): an elementwise
      // mul, after putting rhs in lhs's order; same rounding as the dot_general.
      ValueId r = term[size_t(s.rhs)];
      if (lb != la) r = b.transpose(r, positionsIn(lb, la));
      v = b.mul(term[size_t(s.lhs)], r);
      got = la;
      if (got != s.resultLabels) {
        v = b.transpose(v, positionsIn(got, s.resultLabels));
        got = s.resultLabels;
      }
    } else {
      v = b.dotGeneral(term[size_t(s.lhs)], term[size_t(s.rhs)], positionsIn(la, s.batch),
                       positionsIn(lb, s.batch), positionsIn(la, contract),
                       positionsIn(lb, contract));
      got = s.batch;
      for (char c : la)
        if (lb.find(c) == std::string::npos) got += c;
      for (char c : lb)
        if (la.find(c) == std::string::npos) got += c;
    }
    if (got != s.resultLabels)
      throw Error("internal: einsum lowering produced '" + got + "', path says '" +
                  s.resultLabels + "'");
    term[n + k] = v;
    labels[n + k] = got;
    cur = got;
  }
  if (cur != P.output) {
    std::vector<int64_t> perm = positionsIn(cur, P.output);
    v = b.transpose(v, perm);
  }
  return v;
}

bool runOrder(Program &p, const OrderOptions &opts) {
  bool any = false;
  for (const Op &op : p.ops) any |= op.kind == OpKind::Einsum;
  if (!any) return false;

  std::vector<Op> old = std::move(p.ops);
  p.ops.clear();
  std::vector<ValueId> repl(p.values.size());
  for (size_t v = 0; v < repl.size(); ++v) repl[v] = ValueId(v);
  Builder b(p);
  for (Op &op : old) {
    for (ValueId &v : op.operands) v = repl[v];
    if (op.kind != OpKind::Einsum) {
      p.ops.push_back(std::move(op));
      continue;
    }
    const std::string spec = ir::attr<OpKind::Einsum, "spec">(op);
    std::vector<Shape> shapes;
    for (ValueId v : op.operands) shapes.push_back(p.type(v).shape);
    const ValueId oldResult = op.results[0];
    ContractionPath path;
    try {
      path = planContraction(spec, shapes, opts.strategy, opts);
    } catch (const Error &e) {
      throw Error(std::string(e.what()) + " (at " + describeOp(p, op) + ")");
    }
    const size_t firstOp = p.ops.size();
    const ValueId firstValue = ValueId(p.values.size());
    b.setOrigin(op);
    ValueId v;
    try {
      v = lowerEinsum(b, spec, op.operands, path);
    } catch (const Error &e) {
      throw Error(std::string(e.what()) + " (at " + describeOp(p, op) + ")");
    }
    // An identity einsum yields an existing value; keep a copy if that value cannot
    // take over the output's name.
    if (v < firstValue && !canReplaceValue(p, oldResult, v))
      v = b.reshape(v, p.type(v).shape);
    for (size_t i = firstOp; i < p.ops.size(); ++i) p.ops[i].pos = op.pos;
    repl[oldResult] = v;
    const std::string name = p.values[oldResult].name;
    p.values[oldResult].name.clear();
    if (!isAnonymousName(name) && v >= firstValue) p.setName(v, name);
  }
  for (ValueId &v : p.outputs) v = repl[v];
  p.recomputeDefs();
  eraseOpsAndCompact(p, {});
  return true;
}

std::string lowerEinsumsForRuntime(Program &p, const std::string &strategy) {
  size_t n = 0;
  for (const Op &op : p.ops) n += op.kind == OpKind::Einsum;
  for (const Program &f : p.functions)
    for (const Op &op : f.ops) n += op.kind == OpKind::Einsum;
  if (n == 0 || strategy == "none") return "";
  OrderOptions o;
  o.strategy = parseOrderStrategy(strategy);
  for (Program &f : p.functions) runOrder(f, o);
  runOrder(p, o);
  return std::to_string(n) + " einsum op" + (n == 1 ? "" : "s") +
         " lowered by the order pass (strategy " + strategy + ")";
}

} // namespace tessel::passes
