// Helpers of the runtime tests: random tensors, comparisons, random programs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
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

inline bool bitwiseEqual(const Tensor &a, const Tensor &b) {
  return a.type == b.type && a.data.size() == b.data.size() &&
         (a.data.empty() ||
          std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(double)) == 0);
}

/// anc[i][j]: instruction i depends (transitively) on instruction j in the plan's final
/// schedule (its dependency edges, write-after-read edges included).
inline std::vector<std::vector<bool>> reachability(const tessel::rt::Plan &P) {
  const size_t n = P.insts.size();
  std::vector<std::vector<bool>> anc(n, std::vector<bool>(n, false));
  for (size_t i = 0; i < n; ++i)
    for (int32_t p : P.insts[i].preds) {
      anc[i][p] = true;
      for (size_t k = 0; k < n; ++k)
        if (anc[p][k]) anc[i][k] = true;
    }
  return anc;
}

/// The plan is free of races on arena memory: for every two arena slots that overlap,
/// every instruction that writes or reads the one runs before the first writer of the
/// other in the final schedule (the engine may run any two instructions it does not
/// order at once). A slot read by a final output copy comes last. Checks each pair
/// with doctest and returns the number of overlapping pairs checked.
inline size_t checkSlotsDoNotRace(const tessel::rt::Plan &P, const std::vector<std::vector<bool>> &anc) {
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
  auto before = [&](const Slot &a, const Slot &b) {
    if (a.pinned || b.first < 0) return false;
    return std::all_of(a.uses.begin(), a.uses.end(), [&](int32_t u) { return anc[b.first][u]; });
  };
  std::vector<size_t> byOffset(slots.size());
  std::iota(byOffset.begin(), byOffset.end(), 0);
  std::sort(byOffset.begin(), byOffset.end(), [&](size_t a, size_t b) { return P.slotOffset[a] < P.slotOffset[b]; });
  size_t pairs = 0;
  for (size_t i = 0; i < byOffset.size(); ++i) {
    const size_t a = byOffset[i];
    for (size_t j = i + 1; j < byOffset.size(); ++j) {
      const size_t b = byOffset[j];
      if (P.slotOffset[b] >= P.slotOffset[a] + P.slotElems[a]) break;
      ++pairs;
      INFO("slots " << a << " and " << b << " overlap in the arena");
      CHECK((before(slots[a], slots[b]) || before(slots[b], slots[a])));
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
      auto usv = b.svd(M);
      pool.push_back(usv[0]);
      pool.push_back(usv[2]);
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
