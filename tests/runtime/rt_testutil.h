// Helpers of the runtime tests: random tensors, comparisons, random programs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include <doctest/doctest.h>

#include "ir/Builder.h"
#include "ir/Program.h"
#include "runtime/Plan.h"

namespace rttest {

using tessel::ir::Builder;
using tessel::ir::OpKind;
using tessel::ir::Program;
using tessel::ir::Tensor;
using tessel::ir::Type;
using tessel::ir::ValueId;

inline Tensor randomTensor(const Type &t, std::mt19937_64 &rng, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> u(lo, hi);
  Tensor r = Tensor::zeros(t);
  for (double &x : r.data) x = u(rng);
  return r;
}

/// Row-major product of [m,k] and [k,n] (plain loops: an independent check of BLAS).
inline std::vector<double> matmul(const std::vector<double> &a, const std::vector<double> &b,
                                  int64_t m, int64_t k, int64_t n) {
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t l = 0; l < k; ++l)
      for (int64_t j = 0; j < n; ++j) c[i * n + j] += a[i * k + l] * b[l * n + j];
  return c;
}

/// max |a - b| / max(max |b|, 1e-300); 0 when both hold the same values (incl. NaN/inf
/// at the same places); +inf on a type mismatch.
inline double maxRelDiff(const Tensor &a, const Tensor &b) {
  if (a.type != b.type || a.data.size() != b.data.size()) return INFINITY;
  double scale = 0, diff = 0;
  for (double x : b.data)
    if (std::isfinite(x)) scale = std::max(scale, std::fabs(x));
  for (size_t i = 0; i < a.data.size(); ++i) {
    double x = a.data[i], y = b.data[i];
    if (x == y || (std::isnan(x) && std::isnan(y))) continue;
    if (!std::isfinite(x) || !std::isfinite(y)) return INFINITY;
    diff = std::max(diff, std::fabs(x - y));
  }
  return diff / std::max(scale, 1e-300);
}

/// One sign convention for factors from two libraries (the engine's LAPACK, the
/// reference evaluator's Eigen), applied to both sides of a comparison: each column j of
/// the row-major [m,k] `cols` whose entry of largest magnitude (the first such) is
/// negative is negated, and row j of `rows` (if given: Vt of an svd, R of a qr) with it.
/// Valid where that entry is well separated from the next (generic matrices); a
/// degenerate multiplet or a symmetric vector needs a gauge-invariant check instead.
inline void fixFactorSigns(Tensor &cols, Tensor *rows = nullptr) {
  const int64_t m = cols.type.shape[0], k = cols.type.shape[1];
  for (int64_t j = 0; j < k; ++j) {
    int64_t at = 0;
    for (int64_t i = 1; i < m; ++i)
      if (std::fabs(cols.data[i * k + j]) > std::fabs(cols.data[at * k + j])) at = i;
    if (m == 0 || cols.data[at * k + j] >= 0) continue;
    for (int64_t i = 0; i < m; ++i) cols.data[i * k + j] = -cols.data[i * k + j];
    if (rows != nullptr) {
      const int64_t n = rows->type.shape[1];
      for (int64_t c = 0; c < n; ++c) rows->data[j * n + c] = -rows->data[j * n + c];
    }
  }
}

inline bool bitwiseEqual(const Tensor &a, const Tensor &b) {
  return a.type == b.type && a.data.size() == b.data.size() &&
         (a.data.empty() ||
          std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(double)) == 0);
}

/// Transitive dependencies of a plan's final schedule (its dependency edges,
/// write-after-read edges included), as one bitset row per instruction.
class Reachability {
public:
  explicit Reachability(const tessel::rt::Plan &P) : words_((P.insts.size() + 63) / 64) {
    rows_.assign(P.insts.size() * words_, 0);
    for (size_t i = 0; i < P.insts.size(); ++i)
      for (int32_t p : P.insts[i].preds) {
        uint64_t *dst = &rows_[i * words_];
        const uint64_t *src = &rows_[static_cast<size_t>(p) * words_];
        for (size_t w = 0; w < words_; ++w) dst[w] |= src[w];
        dst[p / 64] |= uint64_t(1) << (p % 64);
      }
  }
  /// Instruction i depends (transitively) on instruction j.
  bool dependsOn(size_t i, size_t j) const { return (rows_[i * words_ + j / 64] >> (j % 64)) & 1u; }

private:
  size_t words_;
  std::vector<uint64_t> rows_;
};

/// The plan is free of races on arena memory (the engine may run any two instructions
/// its final schedule does not order at once): an instruction that computes in place
/// runs after every other reader of the buffer it overwrites; wherever two arena slots
/// overlap, every instruction that writes or reads the one whose first writer comes
/// first runs before the first writer of the other; and a slot read by a final output
/// copy is never followed. Checking each slot against the slots that last held its
/// memory suffices (the orders chain through their writers). Each check is a doctest
/// CHECK; returns the number of pairs checked.
inline size_t checkSlotsDoNotRace(const tessel::rt::Plan &P, const Reachability &reach) {
  using tessel::rt::GroupKind;
  struct Slot {
    std::vector<int32_t> uses;
    int32_t first = -1;
    bool pinned = false;
  };
  std::vector<Slot> slots(P.slotOffset.size());
  for (const auto &g : P.groups) {
    if (g.kind != GroupKind::Arena || g.index < 0) continue;
    Slot &s = slots[static_cast<size_t>(g.index)];
    if (g.producer >= 0) {
      s.uses.push_back(g.producer);
      s.first = s.first < 0 ? g.producer : std::min(s.first, g.producer);
    }
    s.uses.insert(s.uses.end(), g.readers.begin(), g.readers.end());
    s.pinned |= g.pinned;
  }
  // Within a slot: an instruction that overwrites a buffer in place (an elementwise
  // result taking its operand's slot, gesdd overwriting its operand) runs after every
  // other reader of that buffer.
  size_t pairs = 0;
  for (size_t i = 0; i < P.insts.size(); ++i) {
    const tessel::rt::Instruction &inst = P.insts[i];
    if (!inst.inPlace) continue;
    std::vector<int32_t> overwritten;
    if (inst.kernel() == tessel::rt::Kernel::Svd) {
      overwritten.push_back(P.values[inst.in[0]].group);
    } else {
      const auto &result = P.groups[P.values[inst.out[0]].group];
      for (int32_t v : inst.in)
        if (const auto &g = P.groups[P.values[v].group]; g.kind == GroupKind::Arena && g.index == result.index)
          overwritten.push_back(P.values[v].group);
    }
    CHECK(!overwritten.empty());
    for (int32_t h : overwritten)
      for (int32_t r : P.groups[h].readers) {
        ++pairs;
        INFO("instruction #" << i << " overwrites in place a buffer instruction #" << r << " reads");
        CHECK((r == static_cast<int32_t>(i) || reach.dependsOn(i, static_cast<size_t>(r))));
      }
  }
  std::vector<size_t> byFirst;
  for (size_t k = 0; k < slots.size(); ++k)
    if (slots[k].first >= 0) byFirst.push_back(k);
  std::stable_sort(byFirst.begin(), byFirst.end(), [&](size_t a, size_t b) { return slots[a].first < slots[b].first; });
  // The slot that last held each part of the arena: begin -> (end, slot).
  std::map<int64_t, std::pair<int64_t, size_t>> holder;
  for (size_t b : byFirst) {
    const int64_t lo = P.slotOffset[b], hi = lo + P.slotElems[b];
    std::vector<size_t> previous;
    auto it = holder.lower_bound(lo);
    if (it != holder.begin() && std::prev(it)->second.first > lo) --it;
    while (it != holder.end() && it->first < hi) {
      const auto [begin, held] = *it;
      const auto [end, a] = held;
      previous.push_back(a);
      it = holder.erase(it);
      if (begin < lo) holder.emplace(begin, std::make_pair(lo, a)); // the part below stays
      if (end > hi) it = holder.emplace(hi, std::make_pair(end, a)).first; // and above
    }
    holder.emplace(lo, std::make_pair(hi, b));
    std::sort(previous.begin(), previous.end());
    previous.erase(std::unique(previous.begin(), previous.end()), previous.end());
    for (size_t a : previous) {
      ++pairs;
      const Slot &A = slots[a], &B = slots[b];
      INFO("slot " << b << " (first writer #" << B.first << ") reuses memory of slot " << a);
      CHECK(!A.pinned);
      CHECK(std::all_of(A.uses.begin(), A.uses.end(),
                        [&](int32_t u) { return reach.dependsOn(static_cast<size_t>(B.first), static_cast<size_t>(u)); }));
    }
  }
  return pairs;
}

struct RandomProgram {
  Program program;
  std::vector<Tensor> inputs;
};

/// A random straight-line program of about `nops` ops over the whole op set except
/// einsum (which prepare rejects). Values stay finite and SVDs only see fresh random
/// inputs (so the engine and the reference factor bitwise-identical matrices).
inline RandomProgram randomProgram(std::mt19937_64 &rng, int nops) {
  RandomProgram rp;
  Program &p = rp.program;
  Builder b(p);
  std::vector<ValueId> pool;
  int nin = 0;
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  auto randShape = [&](int maxRank) {
    int rank = static_cast<int>(pick(static_cast<size_t>(maxRank) + 1));
    std::vector<int64_t> s;
    for (int i = 0; i < rank; ++i) s.push_back(1 + static_cast<int64_t>(pick(5)));
    return s;
  };
  auto newInput = [&](std::vector<int64_t> shape) {
    Type t(shape);
    std::string name = "in";
    name += std::to_string(nin++);
    ValueId v = p.addInput(name, t);
    rp.inputs.push_back(randomTensor(t, rng));
    pool.push_back(v);
    return v;
  };
  newInput(randShape(3));
  newInput(randShape(3));
  auto any = [&]() { return pool[pick(pool.size())]; };
  auto sameShapeAs = [&](ValueId a) {
    std::vector<ValueId> c;
    for (ValueId v : pool)
      if (p.type(v) == p.type(a)) c.push_back(v);
    if (c.size() > 1 && pick(4) != 0) return c[pick(c.size())];
    // Broadcast a reduction of something to a's shape.
    const Type t = p.type(a); // copy: building ops grows p.values
    ValueId s = b.reduceSum(any(), {});
    if (p.type(s).rank() > 0) {
      std::vector<int64_t> ax(static_cast<size_t>(p.type(s).rank()));
      std::iota(ax.begin(), ax.end(), 0);
      s = b.reduceSum(s, ax);
    }
    return b.broadcastScalar(b.unary(OpKind::Sin, s), t.shape);
  };
  for (int k = 0; k < nops; ++k) {
    ValueId a = any();
    const Type ta = p.type(a);
    ValueId r = a;
    switch (pick(18)) {
    case 0: r = b.unary(pick(2) ? OpKind::Sin : OpKind::Cos, a); break;
    case 1: r = b.unary(pick(2) ? OpKind::Neg : OpKind::Abs, a); break;
    case 2: r = b.unary(OpKind::Exp, b.unary(OpKind::Sin, a)); break;
    case 3: {
      ValueId q = b.add(b.mul(a, a), b.full(ta, 1.0));
      r = b.unary(pick(2) ? OpKind::Log : OpKind::Sqrt, q);
      break;
    }
    case 4: {
      static const OpKind ks[] = {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Maximum};
      r = b.binary(ks[pick(4)], a, sameShapeAs(a));
      break;
    }
    case 5: r = b.div(a, b.add(b.mul(a, a), b.full(ta, 2.0))); break;
    case 6: {
      static const char *dirs[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
      ValueId c = b.compare(a, sameShapeAs(a), dirs[pick(6)]);
      r = pick(2) ? c : b.select(c, a, b.unary(OpKind::Sign, a));
      break;
    }
    case 7: case 8: {
      std::vector<int64_t> axes;
      for (int d = 0; d < ta.rank(); ++d)
        if (pick(2)) axes.push_back(d);
      r = pick(2) ? b.reduceSum(a, axes) : b.reduceMax(a, axes);
      break;
    }
    case 9: {
      std::vector<int64_t> perm(static_cast<size_t>(ta.rank()));
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      r = b.transpose(a, perm);
      break;
    }
    case 10: {
      // Insert a new dimension somewhere and broadcast along it (and along extent-1 dims).
      if (ta.rank() >= 4) break;
      int at = static_cast<int>(pick(static_cast<size_t>(ta.rank()) + 1));
      std::vector<int64_t> shape, dims;
      int64_t ext = 1 + static_cast<int64_t>(pick(4));
      for (int d = 0; d <= ta.rank(); ++d) {
        if (d == at) shape.push_back(ext);
        if (d < ta.rank()) {
          dims.push_back(static_cast<int64_t>(shape.size()));
          shape.push_back(ta.shape[d] == 1 ? 1 + static_cast<int64_t>(pick(3)) : ta.shape[d]);
        }
      }
      r = b.broadcastInDim(a, shape, dims);
      break;
    }
    case 11: {
      std::vector<int64_t> shape = {ta.numel()};
      if (ta.numel() % 2 == 0 && pick(2)) shape = {2, ta.numel() / 2};
      r = b.reshape(a, shape);
      break;
    }
    case 12: {
      std::vector<int64_t> start, limit;
      for (int d = 0; d < ta.rank(); ++d) {
        int64_t s0 = static_cast<int64_t>(pick(static_cast<size_t>(ta.shape[d])));
        int64_t l = s0 + 1 + static_cast<int64_t>(pick(static_cast<size_t>(ta.shape[d] - s0)));
        start.push_back(s0);
        limit.push_back(l);
      }
      r = b.slice(a, start, limit);
      break;
    }
    case 13: {
      std::vector<int64_t> lo, hi;
      for (int d = 0; d < ta.rank(); ++d) {
        lo.push_back(static_cast<int64_t>(pick(3)));
        hi.push_back(static_cast<int64_t>(pick(3)));
      }
      r = b.pad(a, lo, hi);
      break;
    }
    case 14: case 15: {
      // dot_general with a fresh input: random batch / contract / free dims, operand
      // dims in a random order (exercises the GEMM-form transposes).
      if (ta.rank() == 0) break;
      std::vector<int64_t> dims(static_cast<size_t>(ta.rank()));
      std::iota(dims.begin(), dims.end(), 0);
      std::shuffle(dims.begin(), dims.end(), rng);
      std::vector<int64_t> lb, lc;
      for (int64_t d : dims) {
        size_t c = pick(3);
        if (c == 0) lb.push_back(d);
        else if (c == 1) lc.push_back(d);
      }
      std::vector<int64_t> rshape;
      int nfree = static_cast<int>(pick(3));
      for (int64_t d : lb) rshape.push_back(ta.shape[d]);
      for (int64_t d : lc) rshape.push_back(ta.shape[d]);
      for (int f = 0; f < nfree; ++f) rshape.push_back(1 + static_cast<int64_t>(pick(5)));
      // Random placement of rhs dims.
      std::vector<int64_t> place(rshape.size());
      std::iota(place.begin(), place.end(), 0);
      std::shuffle(place.begin(), place.end(), rng);
      std::vector<int64_t> rs(rshape.size());
      for (size_t i = 0; i < rshape.size(); ++i) rs[place[i]] = rshape[i];
      std::vector<int64_t> rb, rc;
      for (size_t i = 0; i < lb.size(); ++i) rb.push_back(place[i]);
      for (size_t i = 0; i < lc.size(); ++i) rc.push_back(place[lb.size() + i]);
      if (lb.size() + (ta.rank() - lb.size() - lc.size()) + nfree > 6) break;
      ValueId rhs = newInput(rs);
      r = b.dotGeneral(a, rhs, lb, rb, lc, rc);
      break;
    }
    case 16: {
      int64_t m = 1 + static_cast<int64_t>(pick(6)), n = 1 + static_cast<int64_t>(pick(6));
      ValueId M = newInput({m, n});
      // What the program reads of the factors does not depend on their signs (the
      // reference evaluator's come from another library): the projectors U·Uᵀ and
      // Vtᵀ·Vt of a generic matrix, and the singular values.
      auto usv = b.svd(M);
      pool.push_back(b.dotGeneral(usv[0], usv[0], {}, {}, {1}, {1}));
      pool.push_back(b.dotGeneral(usv[2], usv[2], {}, {}, {0}, {0}));
      r = usv[1];
      break;
    }
    case 17: r = pick(2) ? b.iota(randShape(2).empty() ? std::vector<int64_t>{3} : std::vector<int64_t>{2, 3}, 0)
                         : b.stopGradient(a); break;
    }
    pool.push_back(r);
  }
  // Outputs: the last value and a few random others (possibly repeated, possibly inputs).
  p.addOutput(pool.back());
  for (int i = 0; i < 3; ++i) p.addOutput(any());
  return rp;
}

} // namespace rttest
