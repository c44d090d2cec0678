//===- passes/PadSink.cpp - Sink zero pads, hoist slices (see PadSink.h) -------===//
#include "passes/PadSink.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <vector>

#include "ir/Builder.h"
#include "passes/Cse.h"
#include "passes/Rewrite.h"

namespace tessel::passes {

using namespace tessel::ir;

namespace {

/// A pad op seen by phase 1: its operand and padding, and whether it is a remat op.
struct PadInfo {
  ValueId src;
  I64List low, high;
  bool remat;
};

bool samePadding(const PadInfo &a, const PadInfo &b) {
  return a.low == b.low && a.high == b.high;
}

int64_t indexOf(const I64List &l, int64_t x) {
  auto it = std::find(l.begin(), l.end(), x);
  return it == l.end() ? -1 : int64_t(it - l.begin());
}

class PadSinker {
public:
  explicit PadSinker(Program &p) : p_(p), b_(p), firstNew_(ValueId(p.values.size())) {}

  bool run(PadSinkStats *stats);

private:
  Program &p_;
  Builder b_;
  const ValueId firstNew_; ///< values at or above this index were created by the pass
  std::unordered_map<ValueId, PadInfo> pads_;
  int64_t sunk_ = 0, hoisted_ = 0;

  // ---- phase 1 -------------------------------------------------------------
  bool sinkSweep();
  /// The pad defining `v`, if it pads something and its remat status is `remat`.
  const PadInfo *padOf(ValueId v, bool remat) const {
    auto it = pads_.find(v);
    if (it == pads_.end() || it->second.remat != remat) return nullptr;
    return &it->second;
  }
  /// The value `kind(operands)` computes, built on the interior of a pad operand, or
  /// kNoValue when no rule applies. Creates ops (at the builder's loc).
  ValueId sink(OpKind kind, llvm::ArrayRef<ValueId> operands, const AttrList &attrs, bool remat);
  /// Creates `kind(operands)`, sinking pads through it where a rule applies.
  ValueId emit(OpKind kind, llvm::ArrayRef<ValueId> operands, const AttrList &attrs,
               bool remat);
  ValueId makePad(ValueId y, const I64List &low, const I64List &high, bool remat);
  ValueId makeSlice(ValueId x, const I64List &start, const I64List &limit, bool remat);
  ValueId sliceToInterior(ValueId x, const PadInfo &pad, bool remat);

  // ---- phase 2 -------------------------------------------------------------
  bool hoistSweep();

  /// Redirects `from` (result of an op that is dropped) to `to`; false if `to` cannot
  /// take over `from` as an output.
  bool replace(std::vector<ValueId> &repl, ValueId from, ValueId to);
  size_t eraseUnused(const std::vector<int> &usesBefore);
};

/// True if low/high pad anything.
bool padsAnything(const I64List &low, const I64List &high) {
  auto nonzero = [](int64_t x) { return x != 0; };
  return std::any_of(low.begin(), low.end(), nonzero) || std::any_of(high.begin(), high.end(), nonzero);
}

ValueId PadSinker::makePad(ValueId y, const I64List &low, const I64List &high, bool remat) {
  if (!padsAnything(low, high)) return y;
  ValueId v = b_.pad(y, low, high);
  pads_[v] = PadInfo{y, low, high, remat};
  return v;
}

ValueId PadSinker::makeSlice(ValueId x, const I64List &start, const I64List &limit, bool remat) {
  const Shape &s = p_.type(x).shape;
  bool full = true;
  for (size_t i = 0; i < s.size(); ++i) full &= start[i] == 0 && limit[i] == s[i];
  if (full) return x;
  return emit(OpKind::Slice, {x}, {{"start", Attr::i64s(start)}, {"limit", Attr::i64s(limit)}},
              remat);
}

ValueId PadSinker::sliceToInterior(ValueId x, const PadInfo &pad, bool remat) {
  const Shape &n = p_.type(pad.src).shape;
  I64List limit(pad.low);
  for (size_t i = 0; i < n.size(); ++i) limit[i] += n[i];
  return makeSlice(x, pad.low, limit, remat);
}

ValueId PadSinker::emit(OpKind kind, llvm::ArrayRef<ValueId> operands, const AttrList &attrs,
                        bool remat) {
  ValueId v = sink(kind, operands, attrs, remat);
  if (v != kNoValue) {
    ++sunk_;
    return v;
  }
  v = b_.create(kind, operands, attrs);
  if (kind == OpKind::Pad)
    pads_[v] = PadInfo{operands[0], attrs.getI64s("low"), attrs.getI64s("high"), remat};
  return v;
}

ValueId PadSinker::sink(OpKind kind, llvm::ArrayRef<ValueId> ops, const AttrList &attrs,
                        bool remat) {
  switch (kind) {
  case OpKind::Transpose: {
    const PadInfo *P = padOf(ops[0], remat);
    if (!P) return kNoValue;
    const PadInfo pad = *P; // emit() may rehash pads_
    const I64List &perm = attrs.getI64s("perm");
    I64List low, high;
    for (int64_t q : perm) {
      low.push_back(pad.low[size_t(q)]);
      high.push_back(pad.high[size_t(q)]);
    }
    return makePad(emit(kind, {pad.src}, attrs, remat), low, high, remat);
  }
  case OpKind::Neg:
  case OpKind::Sqrt:
  case OpKind::Sin:
  case OpKind::Tanh:
  case OpKind::Abs:
  case OpKind::Sign: { // f(0) = 0
    const PadInfo *P = padOf(ops[0], remat);
    if (!P) return kNoValue;
    const PadInfo pad = *P;
    return makePad(emit(kind, {pad.src}, attrs, remat), pad.low, pad.high, remat);
  }
  case OpKind::Mul: { // x * 0 = 0
    int side = padOf(ops[1], remat) ? 1 : padOf(ops[0], remat) ? 0 : -1;
    if (side < 0) return kNoValue;
    const PadInfo pad = *padOf(ops[size_t(side)], remat);
    ValueId other = sliceToInterior(ops[size_t(1 - side)], pad, remat);
    ValueId a = side == 0 ? pad.src : other, b = side == 0 ? other : pad.src;
    return makePad(emit(kind, {a, b}, attrs, remat), pad.low, pad.high, remat);
  }
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Maximum: { // f(0, 0) = 0
    const PadInfo *A = padOf(ops[0], remat), *B = padOf(ops[1], remat);
    if (!A || !B || !samePadding(*A, *B)) return kNoValue;
    const PadInfo pa = *A, pb = *B;
    return makePad(emit(kind, {pa.src, pb.src}, attrs, remat), pa.low, pa.high, remat);
  }
  case OpKind::BroadcastInDim: {
    const PadInfo *P = padOf(ops[0], remat);
    if (!P) return kNoValue;
    const PadInfo pad = *P;
    const Shape &n = p_.type(pad.src).shape;
    I64List shape = attrs.getI64s("shape");
    const I64List &dims = attrs.getI64s("dims");
    I64List low(shape.size(), 0), high(shape.size(), 0);
    for (size_t i = 0; i < dims.size(); ++i) {
      if (pad.low[i] == 0 && pad.high[i] == 0) continue;
      const size_t d = size_t(dims[i]);
      if (shape[d] != n[i] + pad.low[i] + pad.high[i]) return kNoValue; // expanded dim
      shape[d] = n[i];
      low[d] = pad.low[i];
      high[d] = pad.high[i];
    }
    AttrList a{{"shape", Attr::i64s(shape)}, {"dims", Attr::i64s(dims)}};
    return makePad(emit(kind, {pad.src}, a, remat), low, high, remat);
  }
  case OpKind::ReduceSum: {
    const PadInfo *P = padOf(ops[0], remat);
    if (!P) return kNoValue;
    const PadInfo pad = *P;
    const I64List &axes = attrs.getI64s("axes");
    I64List low, high;
    for (size_t i = 0; i < pad.low.size(); ++i)
      if (indexOf(axes, int64_t(i)) < 0) {
        low.push_back(pad.low[i]);
        high.push_back(pad.high[i]);
      }
    return makePad(emit(kind, {pad.src}, attrs, remat), low, high, remat);
  }
  case OpKind::Slice: {
    const PadInfo *P = padOf(ops[0], remat);
    if (!P) return kNoValue;
    const PadInfo pad = *P;
    const Shape &n = p_.type(pad.src).shape;
    const I64List &start = attrs.getI64s("start"), &limit = attrs.getI64s("limit");
    I64List is, il, low, high;
    Shape out;
    bool empty = false;
    for (size_t d = 0; d < n.size(); ++d) {
      const int64_t s = start[d] - pad.low[d], l = limit[d] - pad.low[d];
      const int64_t a = std::clamp<int64_t>(s, 0, n[d]), b = std::clamp<int64_t>(l, 0, n[d]);
      empty |= b <= a;
      is.push_back(a);
      il.push_back(b);
      low.push_back(a - s);
      high.push_back(l - b);
      out.push_back(limit[d] - start[d]);
    }
    if (empty) return b_.broadcastInDim(b_.scalar(0.0), out, {});
    return makePad(makeSlice(pad.src, is, il, remat), low, high, remat);
  }
  case OpKind::DotGeneral: {
    for (int side = 0; side < 2; ++side) {
      const PadInfo *P = padOf(ops[size_t(side)], remat);
      if (!P) continue;
      const PadInfo pad = *P;
      const bool lhs = side == 0;
      const I64List &xb = attrs.getI64s(lhs ? "lhs_batch" : "rhs_batch"),
                    &xc = attrs.getI64s(lhs ? "lhs_contract" : "rhs_contract"),
                    &ob = attrs.getI64s(lhs ? "rhs_batch" : "lhs_batch"),
                    &oc = attrs.getI64s(lhs ? "rhs_contract" : "lhs_contract");
      const ValueId other = ops[size_t(1 - side)];
      const Shape &n = p_.type(pad.src).shape;
      const Shape &os = p_.type(other).shape;
      // Result dims: batch, lhs free, rhs free.
      const int64_t nb = int64_t(xb.size()), nc = int64_t(xc.size());
      const int64_t lhsFree = p_.type(ops[0]).rank() - nb - nc;
      const int64_t resultRank = nb + lhsFree + (p_.type(ops[1]).rank() - nb - nc);
      const int64_t freeBase = lhs ? nb : nb + lhsFree;
      I64List ostart(os.size(), 0), olimit(os.begin(), os.end());
      I64List low(size_t(resultRank), 0), high(size_t(resultRank), 0);
      int64_t freeIdx = 0;
      for (size_t d = 0; d < n.size(); ++d) {
        const int64_t jb = indexOf(xb, int64_t(d)), jc = indexOf(xc, int64_t(d));
        const bool padded = pad.low[d] != 0 || pad.high[d] != 0;
        if (jb >= 0 || jc >= 0) {
          if (!padded) continue;
          const size_t od = size_t(jb >= 0 ? ob[size_t(jb)] : oc[size_t(jc)]);
          ostart[od] = pad.low[d];
          olimit[od] = pad.low[d] + n[d];
          if (jb >= 0) {
            low[size_t(jb)] = pad.low[d];
            high[size_t(jb)] = pad.high[d];
          }
        } else {
          low[size_t(freeBase + freeIdx)] = pad.low[d];
          high[size_t(freeBase + freeIdx)] = pad.high[d];
          ++freeIdx;
        }
      }
      ValueId o = makeSlice(other, ostart, olimit, remat);
      ValueId l = lhs ? pad.src : o, r = lhs ? o : pad.src;
      return makePad(emit(kind, {l, r}, attrs, remat), low, high, remat);
    }
    return kNoValue;
  }
  default: return kNoValue;
  }
}

bool PadSinker::replace(std::vector<ValueId> &repl, ValueId from, ValueId to) {
  if (to < firstNew_ || p_.values[to].def < 0) {
    if (!canReplaceValue(p_, from, to)) return false;
  } else if (isOutput(p_, from) && (!isAnonymousName(p_.values[to].name) || isOutput(p_, to))) {
    return false; // `to` cannot take over the output's name (or already is an output)
  }
  repl[from] = to;
  const std::string name = p_.values[from].name;
  p_.values[from].name.clear();
  if (!isAnonymousName(name) && isAnonymousName(p_.values[to].name) && p_.values[to].def >= 0)
    p_.setName(to, name);
  for (ValueId &o : p_.outputs)
    if (o == from) o = to;
  return true;
}

bool PadSinker::sinkSweep() {
  const int64_t before = sunk_;
  // Dead ops (the pads a rewrite bypassed, dead code of the input) neither get
  // rewritten nor count as uses, so one run of the pass reaches its fixed point.
  const std::vector<bool> live = liveOps(p_);
  // Every rule starts from a live op reading a pad that pads something: without one
  // the sweep would rebuild the program unchanged (most of a gradient's functions).
  bool readsPad = false;
  for (size_t i = 0; i < p_.ops.size() && !readsPad; ++i) {
    if (!live[i] || p_.ops[i].results.size() != 1) continue;
    for (ValueId v : p_.ops[i].operands) {
      const int32_t d = p_.values[v].def;
      if (d < 0) continue;
      const Op &def = p_.ops[size_t(d)];
      if (def.kind == OpKind::Pad && def.remat == p_.ops[i].remat &&
          padsAnything(def.attrs.getI64s("low"), def.attrs.getI64s("high"))) {
        readsPad = true;
        break;
      }
    }
  }
  if (!readsPad) return false;
  std::vector<Op> old = std::move(p_.ops);
  p_.ops.clear();
  pads_.clear();
  std::vector<ValueId> repl(p_.values.size());
  for (size_t v = 0; v < repl.size(); ++v) repl[v] = ValueId(v);
  for (size_t i = 0; i < old.size(); ++i) {
    Op &op = old[i];
    for (ValueId &v : op.operands) v = repl[v];
    const bool remat = op.remat;
    if (op.results.size() == 1 && live[i]) {
      b_.setOrigin(op);
      const size_t firstOp = p_.ops.size();
      const int64_t sunkBefore = sunk_;
      ValueId v = sink(op.kind, op.operands, op.attrs, remat);
      for (size_t k = firstOp; k < p_.ops.size(); ++k) p_.ops[k].pos = op.pos;
      if (v != kNoValue && replace(repl, op.results[0], v)) {
        ++sunk_;
        continue;
      }
      sunk_ = sunkBefore; // ops made for a rewrite that was not taken are erased later
    }
    if (op.kind == OpKind::Pad) {
      const I64List &low = op.attrs.getI64s("low"), &high = op.attrs.getI64s("high");
      if (padsAnything(low, high)) pads_[op.results[0]] = PadInfo{op.operands[0], low, high, remat};
    }
    p_.ops.push_back(std::move(op));
  }
  p_.recomputeDefs();
  return sunk_ > before;
}

bool hoistable(OpKind k) {
  return isElementwise(k) || k == OpKind::Transpose || k == OpKind::BroadcastInDim;
}

/// A block [start, limit) of a value.
struct Block {
  I64List start, limit;
  bool operator==(const Block &o) const { return start == o.start && limit == o.limit; }
};

/// The block of operand `j` that `op` reads to compute block `b` of its result
/// (op hoistable).
Block operandBlock(const Program &p, const Op &op, size_t j, const Block &b) {
  const Shape &in = p.type(op.operands[j]).shape;
  if (op.kind == OpKind::Transpose) {
    const I64List &perm = op.attrs.getI64s("perm");
    Block r{I64List(perm.size()), I64List(perm.size())};
    for (size_t d = 0; d < perm.size(); ++d) {
      r.start[size_t(perm[d])] = b.start[d];
      r.limit[size_t(perm[d])] = b.limit[d];
    }
    return r;
  }
  if (op.kind == OpKind::BroadcastInDim) {
    const I64List &dims = op.attrs.getI64s("dims"), &shape = op.attrs.getI64s("shape");
    Block r{I64List(in.size(), 0), I64List(in.begin(), in.end())};
    for (size_t i = 0; i < dims.size(); ++i)
      if (in[i] == shape[size_t(dims[i])]) { // not an expanded size-1 dimension
        r.start[i] = b.start[size_t(dims[i])];
        r.limit[i] = b.limit[size_t(dims[i])];
      }
    return r;
  }
  return b; // elementwise
}

bool PadSinker::hoistSweep() {
  const std::vector<bool> live = liveOps(p_);
  // A hoist starts from a live slice of a hoistable op's result: without one there is
  // nothing to decide.
  bool slicesHoistable = false;
  for (size_t i = 0; i < p_.ops.size() && !slicesHoistable; ++i) {
    const Op &op = p_.ops[i];
    if (!live[i] || op.kind != OpKind::Slice) continue;
    const int32_t d = p_.values[op.operands[0]].def;
    slicesHoistable = d >= 0 && hoistable(p_.ops[size_t(d)].kind);
  }
  if (!slicesHoistable) return false;
  const std::vector<int> anyUse = useCounts(p_);
  std::vector<std::vector<uint32_t>> users(p_.values.size());
  for (size_t i = 0; i < p_.ops.size(); ++i)
    if (live[i])
      for (ValueId v : p_.ops[i].operands) users[v].push_back(uint32_t(i));

  // Decide, last op first, so that decisions cascade up a chain in one sweep: op i
  // computes only block[i] of its result when every live use reads that same block —
  // a slice, or a hoisted op (same remat status) whose operand block it is.
  std::vector<std::optional<Block>> block(p_.ops.size());
  bool any = false;
  for (size_t i = p_.ops.size(); i-- > 0;) {
    const Op &op = p_.ops[i];
    if (!live[i] || op.results.size() != 1 || !hoistable(op.kind)) continue;
    const ValueId r = op.results[0];
    if (users[r].empty() || isOutput(p_, r)) continue;
    const bool remat = op.remat;
    std::optional<Block> want;
    bool ok = true;
    for (uint32_t u : users[r]) {
      const Op &user = p_.ops[u];
      if (user.remat != remat) ok = false;
      else if (user.kind == OpKind::Slice && !isOutput(p_, user.results[0])) {
        Block b{user.attrs.getI64s("start"), user.attrs.getI64s("limit")};
        ok = !want || *want == b;
        want = b;
      } else if (block[u]) {
        for (size_t j = 0; j < user.operands.size() && ok; ++j) {
          if (user.operands[j] != r) continue;
          Block b = operandBlock(p_, user, j, *block[u]);
          ok = !want || *want == b;
          want = b;
        }
      } else {
        ok = false;
      }
      if (!ok) break;
    }
    if (!ok || !want) continue;
    const Shape &sh = p_.type(r).shape;
    bool smaller = false;
    for (size_t d = 0; d < sh.size(); ++d) smaller |= want->start[d] != 0 || want->limit[d] != sh[d];
    if (!smaller) continue;
    block[i] = want;
    any = true;
  }
  if (!any) return false;

  // A hoisted op stays as it was too when a dead op reads its full result, and then so
  // do its hoisted operands, which that full copy reads (decided last op first, as the
  // users of an op come after it).
  std::vector<bool> keepFull(p_.ops.size(), false);
  for (size_t i = p_.ops.size(); i-- > 0;) {
    if (!block[i]) continue;
    const ValueId r = p_.ops[i].results[0];
    keepFull[i] = anyUse[r] > static_cast<int>(users[r].size());
    for (uint32_t u : users[r]) keepFull[i] = keepFull[i] || (block[u] && keepFull[u]);
  }

  // Rebuild: a hoisted op reads the hoisted versions of its hoisted operands, slices of
  // the others; the slices that read it read the hoisted op instead.
  std::vector<Op> old = std::move(p_.ops);
  p_.ops.clear();
  std::vector<ValueId> repl(p_.values.size());
  for (size_t v = 0; v < repl.size(); ++v) repl[v] = ValueId(v);
  std::unordered_map<ValueId, ValueId> hoistedOf; // old result -> its block's value
  std::vector<bool> dropped(old.size(), false);
  for (size_t i = 0; i < old.size(); ++i) {
    Op &op = old[i];
    if (dropped[i]) continue;
    if (!block[i]) {
      for (ValueId &v : op.operands) v = repl[v];
      p_.ops.push_back(std::move(op));
      continue;
    }
    b_.setOrigin(op);
    const size_t firstOp = p_.ops.size();
    llvm::SmallVector<ValueId, 3> operands;
    for (size_t j = 0; j < op.operands.size(); ++j) {
      const ValueId o = op.operands[j];
      auto h = hoistedOf.find(o);
      if (h != hoistedOf.end()) {
        operands.push_back(h->second); // block[] of o is exactly this operand block
        continue;
      }
      const Block ob = operandBlock(p_, op, j, *block[i]);
      const Shape &sh = p_.type(o).shape;
      bool full = true;
      for (size_t d = 0; d < sh.size(); ++d) full &= ob.start[d] == 0 && ob.limit[d] == sh[d];
      operands.push_back(full ? repl[o] : b_.slice(repl[o], ob.start, ob.limit));
    }
    AttrList attrs = op.attrs;
    if (op.kind == OpKind::BroadcastInDim) {
      I64List out;
      for (size_t d = 0; d < block[i]->start.size(); ++d)
        out.push_back(block[i]->limit[d] - block[i]->start[d]);
      attrs.set("shape", Attr::i64s(out));
    }
    const ValueId v = b_.create(op.kind, operands, attrs);
    for (size_t k = firstOp; k < p_.ops.size(); ++k) p_.ops[k].pos = op.pos;
    const ValueId r = op.results[0];
    hoistedOf[r] = v;
    for (uint32_t u : users[r]) {
      if (old[u].kind == OpKind::Slice && !block[u]) {
        dropped[u] = true;
        replace(repl, old[u].results[0], v);
      }
    }
    // Dead ops may still read the full result: keep the op for them (erased with them).
    if (keepFull[i]) {
      for (ValueId &x : op.operands) x = repl[x];
      p_.ops.push_back(std::move(op));
    }
    ++hoisted_;
  }
  for (ValueId &o : p_.outputs) o = repl[o];
  p_.recomputeDefs();
  return true;
}

size_t PadSinker::eraseUnused(const std::vector<int> &usesBefore) {
  std::vector<int> uses = useCounts(p_);
  std::vector<bool> dead(p_.ops.size(), false);
  size_t erased = 0;
  for (size_t i = p_.ops.size(); i-- > 0;) {
    const Op &op = p_.ops[i];
    bool unused = true, eligible = false;
    for (ValueId r : op.results) {
      unused &= uses[r] == 0;
      eligible |= r >= firstNew_ || usesBefore[r] > 0;
    }
    if (!unused || !eligible) continue;
    dead[i] = true;
    ++erased;
    for (ValueId v : op.operands) --uses[v];
  }
  eraseOpsAndCompact(p_, dead);
  return erased;
}

bool PadSinker::run(PadSinkStats *stats) {
  bool pads = false, slices = false;
  for (const Op &op : p_.ops) {
    pads |= op.kind == OpKind::Pad;
    slices |= op.kind == OpKind::Slice;
  }
  if (!pads && !slices) return false; // nothing to sink or hoist
  const std::vector<int> usesBefore = useCounts(p_);
  // Each round sinks every pad as far as it goes, then hoists slices as far as they
  // go; a hoisted slice can meet a pad (slice(pad) folds in the next round).
  bool changed = false;
  for (int round = 0; round < 16; ++round) {
    bool c = pads && sinkSweep();
    pads = true; // hoisting can expose a slice of a pad
    bool h = false;
    while (hoistSweep()) h = true;
    changed |= c || h;
    if (!h) break;
  }
  size_t erased = changed ? eraseUnused(usesBefore) : 0;
  if (stats) {
    stats->sunk += sunk_;
    stats->hoisted += hoisted_;
    stats->erased += int64_t(erased);
  }
  return changed;
}

} // namespace

bool runPadSink(Program &p, const PadSinkOptions &, PadSinkStats *stats) {
  return PadSinker(p).run(stats);
}

} // namespace tessel::passes
