//===- passes/Cse.cpp - Common subexpression elimination (see Cse.h) -----------===//
#include "passes/Cse.h"

#include <cstring>
#include <unordered_map>
#include <vector>

#include "passes/Rewrite.h"

namespace tessel::passes {

using namespace tessel::ir;


namespace {

uint64_t bitsOf(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

void mix(uint64_t &h, uint64_t x) {
  // 64-bit FNV-style combine followed by a multiply-xorshift.
  h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
}

void hashAttr(uint64_t &h, const Attr &a) {
  mix(h, uint64_t(a.kind()));
  switch (a.kind()) {
  case AttrKind::I64: mix(h, uint64_t(a.getI64())); break;
  case AttrKind::F64: mix(h, bitsOf(a.getF64())); break;
  case AttrKind::Str:
    for (char c : a.getStr()) mix(h, uint64_t(uint8_t(c)));
    mix(h, a.getStr().size());
    break;
  case AttrKind::I64s:
    for (int64_t x : a.getI64s()) mix(h, uint64_t(x));
    mix(h, a.getI64s().size());
    break;
  case AttrKind::Tensor: {
    const Tensor &t = a.getTensor();
    for (int64_t d : t.type.shape) mix(h, uint64_t(d));
    mix(h, t.type.shape.size());
    for (double x : t.data) mix(h, bitsOf(x));
    break;
  }
  }
}

bool attrBitsEqual(const Attr &a, const Attr &b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
  case AttrKind::I64: return a.getI64() == b.getI64();
  case AttrKind::F64: return bitsOf(a.getF64()) == bitsOf(b.getF64());
  case AttrKind::Str: return a.getStr() == b.getStr();
  case AttrKind::I64s: return a.getI64s() == b.getI64s();
  case AttrKind::Tensor: {
    const Tensor &x = a.getTensor(), &y = b.getTensor();
    if (x.type != y.type || x.data.size() != y.data.size()) return false;
    return x.data.empty() ||
           std::memcmp(x.data.data(), y.data.data(), x.data.size() * sizeof(double)) == 0;
  }
  }
  return false;
}

bool sameExpression(const Op &a, const Op &b) {
  if (a.kind != b.kind || a.operands != b.operands || a.remat != b.remat ||
      a.results.size() != b.results.size())
    return false;
  const auto &la = a.attrs.list(), &lb = b.attrs.list();
  if (la.size() != lb.size()) return false;
  for (size_t i = 0; i < la.size(); ++i)
    if (la[i].name != lb[i].name || !attrBitsEqual(la[i].value, lb[i].value)) return false;
  return true;
}

uint64_t hashOp(const Op &op) {
  uint64_t h = 0x6a09e667f3bcc908ULL;
  mix(h, uint64_t(op.kind));
  mix(h, op.remat ? 1 : 0);
  for (ValueId v : op.operands) mix(h, v);
  mix(h, op.operands.size());
  for (const NamedAttr &na : op.attrs.list()) {
    for (char c : na.name) mix(h, uint64_t(uint8_t(c)));
    hashAttr(h, na.value);
  }
  return h;
}

} // namespace

bool runCse(Program &p, const CseOptions &, CseStats *stats) {
  std::vector<ValueId> repl(p.values.size());
  for (size_t v = 0; v < repl.size(); ++v) repl[v] = ValueId(v);
  std::unordered_map<uint64_t, std::vector<size_t>> seen;
  std::vector<bool> dead(p.ops.size(), false);
  int64_t merged = 0;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    Op &op = p.ops[i];
    for (ValueId &v : op.operands) v = repl[v];
    uint64_t h = hashOp(op);
    std::vector<size_t> &bucket = seen[h];
    bool done = false;
    for (size_t j : bucket) {
      const Op &prev = p.ops[j];
      if (!sameExpression(op, prev)) continue;
      bool ok = true;
      for (size_t r = 0; r < op.results.size(); ++r)
        ok &= canReplaceValue(p, op.results[r], prev.results[r]);
      if (!ok) continue;
      for (size_t r = 0; r < op.results.size(); ++r) {
        ValueId from = op.results[r], to = prev.results[r];
        repl[from] = to;
        // Outputs and the name move now; later operands go through repl.
        for (ValueId &o : p.outputs)
          if (o == from) o = to;
        const std::string name = p.values[from].name;
        if (!isAnonymousName(name) && isAnonymousName(p.values[to].name) &&
            p.values[to].def >= 0) {
          p.values[from].name.clear();
          p.setName(to, name);
        }
      }
      dead[i] = true;
      ++merged;
      done = true;
      break;
    }
    if (!done) bucket.push_back(i);
  }
  if (stats) stats->mergedOps += merged;
  if (merged == 0) return false;
  eraseOpsAndCompact(p, dead);
  return true;
}

} // namespace tessel::passes
