//===- passes/Order.cpp - Contraction paths: chain, pairwise, greedy, optimal -----===//
//
// The path search of the `order` pass (see Order.h): strategy names, the four
// strategies over an einsum's label masks (ContractionProblem.h), the path with its
// opt_einsum figures, and the per-einsum costs that `tessel cost` reports. The
// lowering along a path is in OrderLowering.cpp, the report layout in
// ContractionReport.cpp.
//
//===----------------------------------------------------------------------===//
#include "passes/Order.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>

#include "ir/OpAttrs.h"
#include "ir/Diagnostics.h"
#include "ir/ShapeRules.h"
#include "ir/TextUtil.h"
#include "passes/ContractionProblem.h"

namespace tessel::passes {

using namespace tessel::ir;

//===----------------------------------------------------------------------===//
// Strategy names
//===----------------------------------------------------------------------===//

const char *orderStrategyName(OrderStrategy s) {
  switch (s) {
  case OrderStrategy::Auto: return "auto";
  case OrderStrategy::Chain: return "chain";
  case OrderStrategy::Pairwise: return "pairwise";
  case OrderStrategy::Greedy: return "greedy";
  case OrderStrategy::Optimal: return "optimal";
  }
  return "?";
}

OrderStrategy parseOrderStrategy(llvm::StringRef name) {
  for (OrderStrategy s : {OrderStrategy::Auto, OrderStrategy::Chain, OrderStrategy::Pairwise,
                          OrderStrategy::Greedy, OrderStrategy::Optimal})
    if (name == orderStrategyName(s)) return s;
  throw Error("error: unknown contraction strategy '" + name.str() +
              "' (allowed: auto, chain, pairwise, greedy, optimal)");
}

llvm::ArrayRef<OrderStrategy> concreteOrderStrategies() {
  static const OrderStrategy kAll[] = {OrderStrategy::Chain, OrderStrategy::Pairwise,
                                       OrderStrategy::Greedy, OrderStrategy::Optimal};
  return kAll;
}

namespace contraction {

Problem makeProblem(llvm::StringRef spec, llvm::ArrayRef<Shape> shapes) {
  Problem P;
  P.spec = spec.str();
  EinsumSpec es;
  try {
    es = parseEinsumSpec(spec);
  } catch (const ShapeError &e) {
    throw Error(std::string("einsum: ") + e.what());
  }
  if (es.inputs.size() != shapes.size())
    throw Error("einsum: spec '" + ir::text::clipForMessage(P.spec) + "' names " + std::to_string(es.inputs.size()) +
                " operands but " + std::to_string(shapes.size()) + " shapes were given");
  if (es.inputs.empty()) throw Error("einsum: spec '" + ir::text::clipForMessage(P.spec) + "' has no operand");
  std::array<bool, kNumLabels> known{};
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string &l = es.inputs[i];
    if (l.size() != shapes[i].size())
      throw Error("einsum: operand " + std::to_string(i) + " has shape " + shapeStr(shapes[i]) +
                  " but subscripts '" + ir::text::clipForMessage(l) + "' in spec '" + ir::text::clipForMessage(P.spec) + "'");
    for (size_t j = 0; j < l.size(); ++j) {
      size_t b = static_cast<size_t>(bitOf(l[j]));
      if (known[b] && P.size[b] != shapes[i][j])
        throw Error("einsum: index '" + std::string(1, l[j]) + "' has size " +
                    std::to_string(P.size[b]) + " and " + std::to_string(shapes[i][j]) +
                    " in spec '" + ir::text::clipForMessage(P.spec) + "'");
      known[b] = true;
      P.size[b] = shapes[i][j];
    }
  }
  P.raw = es.inputs;
  P.output = es.output;
  P.out = maskOf(P.output);
  P.shapes.assign(shapes.begin(), shapes.end());
  for (const std::string &l : P.raw) P.leafMask.push_back(maskOf(l));
  for (size_t i = 0; i < P.n(); ++i) {
    Mask need = P.out;
    for (size_t j = 0; j < P.n(); ++j)
      if (j != i) need |= P.leafMask[j];
    std::string d = diagonalLabels(P.raw[i]), kept;
    for (char c : d)
      if (has(need, c)) kept += c;
    P.leaf.push_back(kept);
  }
  return P;
}

} // namespace contraction

namespace {

using namespace contraction;

int64_t toElements(double x) {
  return x >= 9.2e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(x);
}

//===----------------------------------------------------------------------===//
// From a list of pairs to a ContractionPath with opt_einsum's figures
//===----------------------------------------------------------------------===//

using Pairs = std::vector<std::pair<int, int>>;

/// dot_general's result labels for lhs/rhs with the given batch order.
std::string resultOrder(const std::string &la, const std::string &lb, const std::string &batch,
                        Mask keep) {
  std::string r = batch;
  Mask mb = maskOf(lb), ma = maskOf(la);
  for (char c : la)
    if (!has(mb, c) && has(keep, c)) r += c;
  for (char c : lb)
    if (!has(ma, c) && has(keep, c)) r += c;
  return r;
}

/// Shared kept labels of la and lb, in the order of `order`.
std::string batchIn(const std::string &order, const std::string &la, const std::string &lb,
                    Mask keep) {
  std::string r;
  Mask ma = maskOf(la), mb = maskOf(lb);
  for (char c : order)
    if (has(ma, c) && has(mb, c) && has(keep, c)) r += c;
  return r;
}

ContractionPath buildPath(const Problem &P, const Pairs &pairs) {
  ContractionPath cp;
  cp.spec = P.spec;
  cp.shapes = P.shapes;
  const size_t n = P.n();
  Mask all = 0;
  int sumSets = 0;
  for (Mask m : P.leafMask) {
    all |= m;
    sumSets += std::popcount(m);
  }
  cp.naiveScaling = std::popcount(all);
  bool naiveInner = sumSets > std::popcount(all);
  cp.naiveFlops = P.prod(all) * (std::max<double>(1.0, double(n) - 1.0) + (naiveInner ? 1 : 0));
  cp.outputSize = toElements(P.prod(P.out));

  if (n == 1) {
    ContractionStep s;
    s.lhs = 0;
    s.lhsLabels = P.raw[0];
    s.resultLabels = P.leaf[0];
    Mask removed = P.leafMask[0] & ~P.out;
    for (char c : diagonalLabels(P.raw[0]))
      if (has(removed, c)) s.contracted += c;
    s.flops = P.prod(P.leafMask[0]) * (removed ? 2 : 1);
    s.resultSize = cp.outputSize;
    s.scaling = std::popcount(P.leafMask[0]);
    cp.steps.push_back(s);
  } else {
    if (pairs.size() != n - 1) throw Error("internal: contraction path has the wrong length");
    std::vector<std::string> labels(2 * n - 1), display(2 * n - 1);
    std::vector<Mask> masks(2 * n - 1, 0);
    std::vector<bool> alive(2 * n - 1, false);
    for (size_t i = 0; i < n; ++i) {
      labels[i] = P.leaf[i];
      display[i] = P.raw[i];
      masks[i] = P.leafMask[i];
      alive[i] = true;
    }
    for (size_t k = 0; k < pairs.size(); ++k) {
      auto [a, b] = pairs[k];
      if (a < 0 || b < 0 || a == b || size_t(a) >= n + k || size_t(b) >= n + k || !alive[a] ||
          !alive[b])
        throw Error("internal: invalid contraction path step " + std::to_string(k));
      Mask others = 0;
      for (size_t t = 0; t < n + k; ++t)
        if (alive[t] && int(t) != a && int(t) != b) others |= masks[t];
      Mask idx = masks[a] | masks[b];
      Mask keep = idx & (others | P.out);
      Mask removed = idx & ~keep;
      const bool root = k + 1 == pairs.size();
      int lhs = a, rhs = b;
      std::string batch = batchIn(labels[a], labels[a], labels[b], keep);
      std::string result = resultOrder(labels[a], labels[b], batch, keep);
      if (root) {
        // Let the last dot_general produce the output order when it can.
        bool done = false;
        for (int swap = 0; swap < 2 && !done; ++swap) {
          int l = swap ? b : a, r = swap ? a : b;
          std::string bt = batchIn(P.output, labels[l], labels[r], keep);
          std::string res = resultOrder(labels[l], labels[r], bt, keep);
          if (res == P.output) {
            lhs = l, rhs = r, batch = bt, result = res;
            done = true;
          }
        }
        if (!done) {
          batch = batchIn(P.output, labels[a], labels[b], keep);
          result = resultOrder(labels[a], labels[b], batch, keep);
        }
        cp.finalTranspose = result != P.output;
      }
      ContractionStep s;
      s.lhs = lhs;
      s.rhs = rhs;
      s.lhsLabels = display[lhs];
      s.rhsLabels = display[rhs];
      s.resultLabels = result;
      s.batch = batch;
      for (char c : diagonalLabels(display[lhs]) + diagonalLabels(display[rhs]))
        if (has(removed, c) && s.contracted.find(c) == std::string::npos) s.contracted += c;
      s.flops = P.prod(idx) * (removed ? 2 : 1);
      s.resultSize = toElements(P.prod(keep));
      s.scaling = std::popcount(idx);
      cp.steps.push_back(s);
      size_t id = n + k;
      labels[id] = display[id] = result;
      masks[id] = keep;
      alive[a] = alive[b] = false;
      alive[id] = true;
    }
  }
  for (const ContractionStep &s : cp.steps) {
    cp.totalFlops += s.flops;
    cp.optimizedScaling = std::max(cp.optimizedScaling, s.scaling);
    cp.largestIntermediate = std::max(cp.largestIntermediate, s.resultSize);
  }
  return cp;
}

//===----------------------------------------------------------------------===//
// Strategies
//===----------------------------------------------------------------------===//

Pairs chainPairs(size_t n) {
  Pairs p;
  if (n < 2) return p;
  p.push_back({0, 1});
  for (size_t k = 2; k < n; ++k) p.push_back({int(n + k - 2), int(k)});
  return p;
}

Pairs pairwisePairs(size_t n) {
  Pairs p;
  std::vector<int> q;
  for (size_t i = 0; i < n; ++i) q.push_back(int(i));
  int next = int(n);
  while (q.size() > 1) {
    std::vector<int> r;
    for (size_t i = 0; i + 1 < q.size(); i += 2) {
      p.push_back({q[i], q[i + 1]});
      r.push_back(next++);
    }
    if (q.size() % 2) r.push_back(q.back());
    q = std::move(r);
  }
  return p;
}

Pairs greedyPairs(const Problem &P) {
  const size_t n = P.n();
  Pairs p;
  std::vector<Mask> masks(P.leafMask);
  std::vector<int> alive;
  for (size_t i = 0; i < n; ++i) alive.push_back(int(i));
  while (alive.size() > 1) {
    // Labels held by two or more alive terms, or by the output, survive a merge.
    std::array<int, kNumLabels> count{};
    for (int t : alive)
      for (Mask m = masks[t]; m; m &= m - 1) ++count[static_cast<size_t>(std::countr_zero(m))];
    struct Cand {
      double key, flops;
      size_t i, j;
      Mask keep;
    };
    bool haveShared = false, haveAny = false;
    Cand best{}, bestOuter{};
    for (size_t i = 0; i < alive.size(); ++i)
      for (size_t j = i + 1; j < alive.size(); ++j) {
        Mask mi = masks[alive[i]], mj = masks[alive[j]];
        Mask idx = mi | mj, others = 0;
        for (Mask m = idx; m; m &= m - 1) {
          int b = std::countr_zero(m);
          int inPair = ((mi >> b) & 1) + ((mj >> b) & 1);
          if (count[static_cast<size_t>(b)] > inPair) others |= Mask(1) << b;
        }
        Mask keep = idx & (others | P.out);
        double flops = P.prod(idx) * ((idx & ~keep) ? 2 : 1);
        if (mi & mj) {
          double key = P.prod(keep) - P.prod(mi) - P.prod(mj);
          if (!haveShared || key < best.key || (key == best.key && flops < best.flops)) {
            best = {key, flops, i, j, keep};
            haveShared = true;
          }
        } else {
          double key = P.prod(keep);
          if (!haveAny || key < bestOuter.key || (key == bestOuter.key && flops < bestOuter.flops)) {
            bestOuter = {key, flops, i, j, keep};
            haveAny = true;
          }
        }
      }
    const Cand &c = haveShared ? best : bestOuter;
    int a = alive[c.i], b = alive[c.j];
    p.push_back({a, b});
    int id = int(masks.size());
    masks.push_back(c.keep);
    alive.erase(alive.begin() + long(c.j));
    alive.erase(alive.begin() + long(c.i));
    alive.push_back(id);
  }
  return p;
}

/// Subset DP (see Order.h). Returns false when no tree keeps every intermediate at
/// rank <= kMaxRank.
bool optimalPairs(const Problem &P, Pairs &out) {
  const size_t n = P.n();
  const uint32_t full = (uint32_t(1) << n) - 1;
  const size_t N = size_t(full) + 1;
  std::vector<Mask> uni(N, 0);
  for (uint32_t s = 1; s <= full; ++s) {
    uint32_t low = s & (~s + 1);
    uni[s] = uni[s ^ low] | P.leafMask[static_cast<size_t>(std::countr_zero(low))];
  }
  auto keepOf = [&](uint32_t s) { return uni[s] & (uni[full ^ s] | P.out); };
  auto idxOf = [&](uint32_t s) {
    return std::popcount(s) == 1 ? P.leafMask[static_cast<size_t>(std::countr_zero(s))]
                                 : keepOf(s);
  };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> cost(N, kInf), big(N, 0);
  std::vector<uint32_t> split(N, 0);
  for (uint32_t i = 0; i < n; ++i) cost[uint32_t(1) << i] = 0;
  for (uint32_t s = 1; s <= full; ++s) {
    if (std::popcount(s) < 2) continue;
    Mask ks = keepOf(s);
    if (s != full && std::popcount(ks) > kMaxRank) continue;
    double sizeS = P.prod(ks);
    uint32_t low = s & (~s + 1), rest = s ^ low;
    double bestC = kInf, bestL = kInf;
    uint32_t bestA = 0;
    for (uint32_t sub = rest;; sub = (sub - 1) & rest) {
      uint32_t A = sub | low, B = s ^ A;
      if (B != 0 && cost[A] < kInf && cost[B] < kInf) {
        Mask idx = idxOf(A) | idxOf(B);
        double f = P.prod(idx) * ((idx & ~ks) ? 2 : 1);
        double c = cost[A] + cost[B] + f;
        double L = std::max({big[A], big[B], sizeS});
        if (c < bestC || (c == bestC && L < bestL)) {
          bestC = c;
          bestL = L;
          bestA = A;
        }
      }
      if (sub == 0) break;
    }
    cost[s] = bestC;
    big[s] = bestL;
    split[s] = bestA;
  }
  if (!(cost[full] < kInf)) return false;
  // Post-order emission; returns the term id of subset s.
  auto emit = [&](auto &self, uint32_t s) -> int {
    if (std::popcount(s) == 1) return std::countr_zero(s);
    int a = self(self, split[s]);
    int b = self(self, s ^ split[s]);
    out.push_back({a, b});
    return int(n + out.size() - 1);
  };
  out.clear();
  emit(emit, full);
  if (!buildPath(P, out).finalTranspose) return true;
  const Pairs first = out;
  // Among the root splits as good as the best (flops, then largest intermediate),
  // prefer one whose last dot_general yields the output order directly.
  const uint32_t low = full & (~full + 1), rest = full ^ low;
  for (uint32_t sub = rest;; sub = (sub - 1) & rest) {
    uint32_t A = sub | low, B = full ^ A;
    if (B != 0 && A != split[full] && cost[A] < kInf && cost[B] < kInf) {
      Mask idx = idxOf(A) | idxOf(B);
      double f = P.prod(idx) * ((idx & ~P.out) ? 2 : 1);
      double L = std::max({big[A], big[B], P.prod(P.out)});
      if (cost[A] + cost[B] + f == cost[full] && L == big[full]) {
        split[full] = A;
        out.clear();
        emit(emit, full);
        if (!buildPath(P, out).finalTranspose) return true;
      }
    }
    if (sub == 0) break;
  }
  out = first;
  return true;
}

} // namespace

//===----------------------------------------------------------------------===//
// Public API
//===----------------------------------------------------------------------===//

ContractionPath planContraction(llvm::StringRef spec, llvm::ArrayRef<Shape> shapes,
                                OrderStrategy strategy, const OrderOptions &opts) {
  Problem P = makeProblem(spec, shapes);
  const size_t n = P.n();
  OrderStrategy used = strategy;
  std::string note;
  if (strategy == OrderStrategy::Auto) {
    used = int(n) <= opts.autoOptimalMax ? OrderStrategy::Optimal : OrderStrategy::Greedy;
    note = std::string("auto: ") + orderStrategyName(used) + " (" + std::to_string(n) +
           " operand" + (n == 1 ? "" : "s") + (used == OrderStrategy::Optimal ? " <= " : " > ") +
           std::to_string(opts.autoOptimalMax) + ")";
  }
  if (used == OrderStrategy::Optimal && int(n) > std::min(opts.optimalLimit, kOptimalHardLimit)) {
    used = OrderStrategy::Greedy;
    note = "optimal: " + std::to_string(n) + " operands > limit " +
           std::to_string(std::min(opts.optimalLimit, kOptimalHardLimit)) + ", fell back to greedy";
  }
  Pairs pairs;
  switch (used) {
  case OrderStrategy::Chain: pairs = chainPairs(n); break;
  case OrderStrategy::Pairwise: pairs = pairwisePairs(n); break;
  case OrderStrategy::Greedy: pairs = greedyPairs(P); break;
  case OrderStrategy::Optimal:
  case OrderStrategy::Auto:
    if (n >= 2 && !optimalPairs(P, pairs)) {
      used = OrderStrategy::Greedy;
      note = "optimal: every contraction tree has an intermediate of rank > " +
             std::to_string(kMaxRank) + ", fell back to greedy";
      pairs = greedyPairs(P);
    }
    break;
  }
  ContractionPath cp = buildPath(P, pairs);
  auto tooWide = [](const ContractionPath &c) {
    for (const ContractionStep &st : c.steps)
      if (st.resultLabels.size() > size_t(kMaxRank)) return true;
    return false;
  };
  if (strategy == OrderStrategy::Auto && used == OrderStrategy::Greedy && tooWide(cp) &&
      int(n) <= std::min(opts.optimalLimit, kOptimalHardLimit) && optimalPairs(P, pairs)) {
    // auto must produce a path the lowering accepts: prefer the rank-limited DP.
    used = OrderStrategy::Optimal;
    note = "auto: greedy needs an intermediate of rank > " + std::to_string(kMaxRank) +
           ", used optimal";
    cp = buildPath(P, pairs);
  }
  cp.requested = strategy;
  cp.used = used;
  cp.note = note;
  return cp;
}

std::vector<EinsumCost> einsumCosts(const Program &p, const OrderOptions &opts) {
  std::vector<EinsumCost> res;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const Op &op = p.ops[i];
    if (op.kind != OpKind::Einsum) continue;
    std::vector<Shape> shapes;
    for (ValueId v : op.operands) shapes.push_back(p.type(v).shape);
    const std::string &spec = ir::attr<OpKind::Einsum, "spec">(op);
    EinsumCost c;
    c.opIndex = i;
    c.result = op.results[0];
    c.chosen = planContraction(spec, shapes, opts.strategy, opts);
    for (OrderStrategy s : concreteOrderStrategies())
      c.all.push_back(planContraction(spec, shapes, s, opts));
    res.push_back(std::move(c));
  }
  return res;
}

//===----------------------------------------------------------------------===//
// Lowering
//===----------------------------------------------------------------------===//

} // namespace tessel::passes
