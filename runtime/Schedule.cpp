//===- runtime/Schedule.cpp - Dependencies, critical path, final schedule -------===//
//
// Stages 2 and 4 of prepare (see PrepareStages.h): the producer -> reader graph with
// its ancestor sets, the infinite-width critical-path times that tell buffer
// assignment which write-after-read edges are harmless, and the final edge lists
// the engine runs.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <functional>
#include <queue>
#include <stdexcept>
#include <string>

#include "runtime/PrepareStages.h"

namespace tessel::rt {

// The cost model of each kernel plan (Plan.h): ~10 m·n·k for gesdd, 14 m·n·k for the
// top-k SVD's block Krylov passes, 40 m·n·(k + r) for the complement's solves, 9 n³ for
// dsyevd, 4 m·n·k for the QR, the products' flops, and elements touched otherwise.
double SvdPlan::cost(int64_t) const {
  return 10.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(std::max<int64_t>(1, k));
}
double SvdTopkPlan::cost(int64_t) const {
  return 14.0 * static_cast<double>(cfg.m) * static_cast<double>(cfg.n) * static_cast<double>(cfg.k);
}
double SvdComplementPlan::cost(int64_t) const {
  return 40.0 * static_cast<double>(cfg.m) * static_cast<double>(cfg.n) * static_cast<double>(cfg.k + cfg.r);
}
double EighPlan::cost(int64_t) const {
  const double d = static_cast<double>(n);
  return 9.0 * d * d * d;
}
double QrPlan::cost(int64_t) const {
  return 4.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
}
double TriangularSolvePlan::cost(int64_t) const {
  return static_cast<double>(n) * static_cast<double>(rows * cols);
}
double SylvesterSolvePlan::cost(int64_t) const {
  const double dn = static_cast<double>(n), dm = static_cast<double>(m);
  return 9.0 * (dn * dn * dn + dm * dm * dm) + 4.0 * dn * dm * (dn + dm);
}
double GemmPlan::cost(int64_t) const { return flops; }
double ReducePlan::cost(int64_t) const {
  return static_cast<double>(outElems * std::max<int64_t>(1, redElems));
}
double ElementwisePlan::cost(int64_t numel) const { return static_cast<double>(numel); }
double CopyPlan::cost(int64_t numel) const { return static_cast<double>(numel); }
double PadPlan::cost(int64_t numel) const { return static_cast<double>(numel); }

} // namespace tessel::rt

namespace tessel::rt::prep {

DepGraph::DepGraph(const Plan &P, bool withAncestors) : withAncestors_(withAncestors) {
  const size_t n = P.insts.size();
  preds_.assign(n, {});
  for (size_t i = 0; i < n; ++i)
    for (int32_t v : P.insts[i].in) {
      int32_t p = P.groups[P.values[v].group].producer;
      if (p >= 0) addEdge(p, static_cast<int32_t>(i));
    }
  if (!withAncestors) return;
  words_ = (n + 63) / 64;
  anc_.assign(n * words_, 0);
  for (size_t i = 0; i < n; ++i)
    for (int32_t p : preds_[i]) {
      uint64_t *dst = &anc_[i * words_];
      const uint64_t *src = &anc_[static_cast<size_t>(p) * words_];
      for (size_t w = 0; w < words_; ++w) dst[w] |= src[w];
      dst[p / 64] |= uint64_t(1) << (p % 64);
    }
  desc_.assign(n * words_, 0);
  for (size_t i = n; i-- > 0;)
    for (int32_t p : preds_[i]) {
      uint64_t *dst = &desc_[static_cast<size_t>(p) * words_];
      const uint64_t *src = &desc_[i * words_];
      for (size_t w = 0; w < words_; ++w) dst[w] |= src[w];
      dst[i / 64] |= uint64_t(1) << (i % 64);
    }
}

bool DepGraph::allAncestors(const std::vector<int32_t> &set, int32_t i, int32_t self) const {
  for (int32_t r : set)
    if (r != self && !isAncestor(r, i)) return false;
  return true;
}

bool DepGraph::addEdge(int32_t from, int32_t to) {
  auto &p = preds_[to];
  if (from == to || std::find(p.begin(), p.end(), from) != p.end()) return false;
  p.push_back(from);
  if (!anc_.empty()) { // `to` inherits the ancestors of `from`, `from` the descendants of `to`
    uint64_t *anc = &anc_[static_cast<size_t>(to) * words_];
    const uint64_t *fromAnc = &anc_[static_cast<size_t>(from) * words_];
    uint64_t *desc = &desc_[static_cast<size_t>(from) * words_];
    const uint64_t *toDesc = &desc_[static_cast<size_t>(to) * words_];
    for (size_t w = 0; w < words_; ++w) {
      anc[w] |= fromAnc[w];
      desc[w] |= toDesc[w];
    }
    anc[from / 64] |= uint64_t(1) << (from % 64);
    desc[to / 64] |= uint64_t(1) << (to % 64);
  }
  return true;
}

namespace {

/// Relative cost of an instruction for the critical path: a fixed dispatch cost plus
/// its kernel plan's cost (flops for GEMM and the factorizations, elements touched for
/// the others).
double instructionCost(const Instruction &in) {
  return 200 + std::visit([&](const auto &plan) { return plan.cost(in.numel); }, in.plan);
}

} // namespace

CriticalPath::CriticalPath(const Plan &P, DepGraph &deps) : deps_(deps) {
  const size_t n = P.insts.size();
  cost_.resize(n);
  for (size_t i = 0; i < n; ++i) cost_[i] = instructionCost(P.insts[i]);
  succ_.assign(n, {});
  for (size_t i = 0; i < n; ++i)
    for (int32_t p : deps.preds(static_cast<int32_t>(i))) succ_[p].push_back(static_cast<int32_t>(i));
  est_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (int32_t p : deps.preds(static_cast<int32_t>(i))) est_[i] = std::max(est_[i], est_[p] + cost_[p]);
    makespan_ = std::max(makespan_, est_[i] + cost_[i]);
  }
  lst_.assign(n, 0);
  for (size_t i = n; i-- > 0;) {
    double lf = makespan_;
    for (int32_t s : succ_[i]) lf = std::min(lf, lst_[s]);
    lst_[i] = lf - cost_[i];
  }
}

void CriticalPath::addEdgesInto(llvm::ArrayRef<int32_t> from, int32_t d) {
  double e = est_[d];
  for (int32_t u : from) {
    if (!deps_.addEdge(u, d)) continue;
    succ_[u].push_back(d);
    e = std::max(e, est_[u] + cost_[u]);
    lowerLatestStart(u, lst_[d] - cost_[u]);
  }
  if (e > est_[d]) raiseEarliestStart(d, e);
}

void CriticalPath::addEdgesIntoInListOrder(llvm::ArrayRef<int32_t> from, int32_t d) {
  for (int32_t u : from) deps_.addEdge(u, d);
}

void CriticalPath::settle(int32_t d) {
  for (int32_t p : deps_.preds(d)) est_[d] = std::max(est_[d], est_[p] + cost_[p]);
}

void CriticalPath::raiseEarliestStart(int32_t d, double e) {
  est_[d] = e;
  std::priority_queue<int32_t, std::vector<int32_t>, std::greater<int32_t>> q; // list order
  std::vector<int32_t> queued;
  for (int32_t s : succ_[d]) q.push(s);
  while (!q.empty()) {
    int32_t j = q.top();
    q.pop();
    if (!queued.empty() && queued.back() == j) continue; // duplicate
    queued.push_back(j);
    double ne = 0;
    for (int32_t p : deps_.preds(j)) ne = std::max(ne, est_[p] + cost_[p]);
    if (ne > est_[j]) {
      est_[j] = ne;
      for (int32_t s : succ_[j]) q.push(s);
    }
  }
}

void CriticalPath::lowerLatestStart(int32_t u, double l) {
  if (l >= lst_[u]) return;
  lst_[u] = l;
  std::priority_queue<int32_t> q; // reverse list order
  std::vector<int32_t> queued;
  for (int32_t p : deps_.preds(u)) q.push(p);
  while (!q.empty()) {
    int32_t j = q.top();
    q.pop();
    if (!queued.empty() && queued.back() == j) continue;
    queued.push_back(j);
    double lf = makespan_;
    for (int32_t s : succ_[j]) lf = std::min(lf, lst_[s]);
    if (lf - cost_[j] < lst_[j]) {
      lst_[j] = lf - cost_[j];
      for (int32_t p : deps_.preds(j)) q.push(p);
    }
  }
}

void finishSchedule(Plan &P, const DepGraph &deps) {
  const size_t n = P.insts.size();
  std::vector<std::vector<int32_t>> succs(n);
  for (size_t i = 0; i < n; ++i) {
    std::vector<int32_t> preds = deps.preds(static_cast<int32_t>(i));
    std::sort(preds.begin(), preds.end());
    // Every edge must point forward in list order (the engine relies on an acyclic
    // graph; width 1 runs in list order).
    if (!preds.empty() && preds.back() >= static_cast<int32_t>(i))
      throw std::logic_error("prepare: internal error: instruction #" + std::to_string(i) +
                             " depends on #" + std::to_string(preds.back()));
    for (int32_t p : preds) succs[p].push_back(static_cast<int32_t>(i));
    P.insts[i].initialDeps = static_cast<int32_t>(preds.size());
    if (preds.empty()) P.initiallyReady.push_back(static_cast<int32_t>(i));
    P.insts[i].preds = std::move(preds);
  }
  for (size_t i = 0; i < n; ++i) {
    Instruction &in = P.insts[i];
    in.succBegin = static_cast<int32_t>(P.succ.size());
    P.succ.insert(P.succ.end(), succs[i].begin(), succs[i].end());
    in.succEnd = static_cast<int32_t>(P.succ.size());
    in.bytesWritten = 0;
    for (int32_t k = 0; k < in.numResults; ++k)
      if (P.groups[P.values[in.out[k]].group].elems > 0 || P.values[in.out[k]].type.numel() == 0)
        in.bytesWritten += P.values[in.out[k]].type.bytes();
    P.maxChunks = std::max<int64_t>(P.maxChunks, in.nchunks);
  }
}

} // namespace tessel::rt::prep
