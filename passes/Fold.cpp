//===- passes/Fold.cpp - Algebraic simplifications (see Fold.h) ----------------===//
#include "passes/Fold.h"

#include <vector>

#include "ir/OpAttrs.h"
#include "passes/Cse.h"
#include "passes/Rewrite.h"

namespace tessel::passes {

using namespace tessel::ir;

namespace {

class Folder {
public:
  Folder(Program &p, const FoldOptions &o) : p_(p), opts_(o) {}

  bool run(FoldStats *stats);

private:
  Program &p_;
  const FoldOptions &opts_;
  int64_t folded_ = 0;

  const Op *defOp(ValueId v) const {
    int32_t d = p_.values[v].def;
    return d < 0 ? nullptr : &p_.ops[size_t(d)];
  }
  /// The op defining `v` if a fold of `user` may look through it: both or neither are
  /// rematerialised (see Fold.h).
  const Op *producer(const Op &user, ValueId v) const {
    const Op *op = defOp(v);
    return op && op->remat == user.remat ? op : nullptr;
  }
  /// v is a constant (or a broadcast of one) whose every element equals `x`
  /// (0.0 == -0.0 here).
  bool isFill(ValueId v, double x) const {
    const Op *op = defOp(v);
    if (!op) return false;
    if (op->kind == OpKind::BroadcastInDim) return isFill(op->operands[0], x);
    if (op->kind != OpKind::Constant) return false;
    for (double e : ir::attr<OpKind::Constant, "value">(*op).data)
      if (!(e == x)) return false;
    return true;
  }
  /// The value the op's result can be replaced by, or kNoValue; may rewrite `op` in
  /// place (then ++folded_).
  ValueId fold(Op &op);
};

bool isIdentityPerm(llvm::ArrayRef<int64_t> perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != int64_t(i)) return false;
  return true;
}

bool allZero(llvm::ArrayRef<int64_t> v) {
  for (int64_t x : v)
    if (x != 0) return false;
  return true;
}

ValueId Folder::fold(Op &op) {
  if (op.results.size() != 1) return kNoValue;
  const Type &rt = p_.type(op.results[0]);
  switch (op.kind) {
  case OpKind::Transpose: {
    const Op *in = producer(op, op.operands[0]);
    if (in && in->kind == OpKind::Transpose) {
      const I64List &inner = ir::attr<OpKind::Transpose, "perm">(*in);
      const I64List outer = ir::attr<OpKind::Transpose, "perm">(op);
      I64List r;
      for (int64_t q : outer) r.push_back(inner[size_t(q)]);
      op.operands[0] = in->operands[0];
      op.attrs.set("perm", Attr::i64s(r));
      ++folded_;
    }
    if (isIdentityPerm(ir::attr<OpKind::Transpose, "perm">(op))) return op.operands[0];
    return kNoValue;
  }
  case OpKind::Reshape: {
    const Op *in = producer(op, op.operands[0]);
    if (in && in->kind == OpKind::Reshape) {
      op.operands[0] = in->operands[0];
      ++folded_;
    }
    if (p_.type(op.operands[0]) == rt) return op.operands[0];
    return kNoValue;
  }
  case OpKind::BroadcastInDim: {
    if (p_.type(op.operands[0]) == rt) return op.operands[0];
    const Op *in = defOp(op.operands[0]); // the result is a constant: reads nothing
    if (in && in->kind == OpKind::Constant && p_.type(op.operands[0]).numel() == 1 &&
        rt.numel() <= opts_.maxBroadcastConstant) {
      double x = ir::attr<OpKind::Constant, "value">(*in).data[0];
      Tensor t(rt, std::vector<double>(size_t(rt.numel()), x));
      op.kind = OpKind::Constant;
      op.operands.clear();
      op.attrs = AttrList{{"value", Attr::tensor(std::move(t))}};
      ++folded_;
    }
    return kNoValue;
  }
  case OpKind::ReduceSum:
  case OpKind::ReduceMax:
    return op.attrs.getI64s("axes").empty() ? op.operands[0] : kNoValue;
  case OpKind::Slice: {
    const Shape &s = p_.type(op.operands[0]).shape;
    const I64List &limit = ir::attr<OpKind::Slice, "limit">(op);
    bool full = allZero(ir::attr<OpKind::Slice, "start">(op));
    for (size_t i = 0; i < s.size() && full; ++i) full = limit[i] == s[i];
    return full ? op.operands[0] : kNoValue;
  }
  case OpKind::Pad:
    return allZero(ir::attr<OpKind::Pad, "low">(op)) && allZero(ir::attr<OpKind::Pad, "high">(op))
               ? op.operands[0]
               : kNoValue;
  case OpKind::Mul:
    if (isFill(op.operands[1], 1.0)) return op.operands[0];
    if (isFill(op.operands[0], 1.0)) return op.operands[1];
    return kNoValue;
  case OpKind::Div:
    return isFill(op.operands[1], 1.0) ? op.operands[0] : kNoValue;
  case OpKind::Add:
    if (isFill(op.operands[1], 0.0)) return op.operands[0];
    if (isFill(op.operands[0], 0.0)) return op.operands[1];
    return kNoValue;
  case OpKind::Sub:
    if (isFill(op.operands[1], 0.0)) return op.operands[0];
    if (isFill(op.operands[0], 0.0)) {
      op.kind = OpKind::Neg;
      op.operands.erase(op.operands.begin());
      ++folded_;
    }
    return kNoValue;
  case OpKind::Neg: {
    const Op *in = producer(op, op.operands[0]);
    return in && in->kind == OpKind::Neg ? in->operands[0] : kNoValue;
  }
  default: return kNoValue;
  }
}

bool Folder::run(FoldStats *stats) {
  const std::vector<int> usesBefore = useCounts(p_);
  std::vector<ValueId> repl(p_.values.size());
  for (size_t v = 0; v < repl.size(); ++v) repl[v] = ValueId(v);
  std::vector<bool> dead(p_.ops.size(), false);
  int64_t erased = 0;
  for (size_t i = 0; i < p_.ops.size(); ++i) {
    Op &op = p_.ops[i];
    for (ValueId &v : op.operands) v = repl[v];
    ValueId to = fold(op);
    if (to == kNoValue) continue;
    ValueId from = op.results[0];
    if (!canReplaceValue(p_, from, to)) continue;
    repl[from] = to;
    for (ValueId &o : p_.outputs)
      if (o == from) o = to;
    const std::string name = p_.values[from].name;
    if (!isAnonymousName(name) && isAnonymousName(p_.values[to].name) &&
        p_.values[to].def >= 0) {
      p_.values[from].name.clear();
      p_.setName(to, name);
    }
    dead[i] = true;
    ++folded_;
    ++erased;
  }
  // Erase ops that the rewrites left without uses (they had some before).
  std::vector<int> uses(p_.values.size(), 0);
  for (size_t i = 0; i < p_.ops.size(); ++i)
    if (!dead[i])
      for (ValueId v : p_.ops[i].operands) ++uses[v];
  for (ValueId v : p_.outputs) ++uses[v];
  for (size_t i = p_.ops.size(); i-- > 0;) {
    if (dead[i]) continue;
    const Op &op = p_.ops[i];
    bool unusedNow = true, usedBefore = false;
    for (ValueId r : op.results) {
      unusedNow &= uses[r] == 0;
      usedBefore |= usesBefore[r] > 0;
    }
    if (!unusedNow || !usedBefore) continue;
    dead[i] = true;
    ++erased;
    for (ValueId v : op.operands) --uses[v];
  }
  if (stats) {
    stats->folded += folded_;
    stats->erased += erased;
  }
  if (folded_ == 0) return false;
  eraseOpsAndCompact(p_, dead);
  return true;
}

} // namespace

bool runFold(Program &p, const FoldOptions &opts, FoldStats *stats) {
  return Folder(p, opts).run(stats);
}

} // namespace tessel::passes
