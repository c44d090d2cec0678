//===- runtime/Fusion.cpp - Loop fusion, decided before lowering (see Fusion.h) -===//
#include "runtime/Fusion.h"

#include <algorithm>

#include "ir/OpTable.h"
#include "runtime/Plan.h"

namespace tessel::rt::prep {

using ir::OpKind;
using ir::Type;

bool fusible(OpKind k) { return ir::isElementwise(k); }

bool reduceTakesInputFusion(const ir::Program &prog, const ir::Op &op) {
  if (op.kind != OpKind::ReduceSum && op.kind != OpKind::ReduceMax) return false;
  const Type &t = prog.type(op.operands[0]);
  const auto &axes = op.attrs.getI64s("axes");
  return t.rank() > 0 && t.shape.back() > 1 && t.numel() > 0 &&
         std::find(axes.begin(), axes.end(), t.rank() - 1) != axes.end();
}

Fusion::Fusion(const ir::Program &prog, bool enabled)
    : def(prog.values.size(), -1), inline_(prog.values.size(), false) {
  if (!enabled) return;
  const size_t nv = prog.values.size();
  std::vector<int32_t> uses(nv, 0), elementwiseUses(nv, 0), steps(nv, 0);
  std::vector<size_t> lastUse(nv, 0);
  for (size_t i = 0; i < prog.ops.size(); ++i) {
    const ir::Op &op = prog.ops[i];
    for (ir::ValueId r : op.results) def[r] = static_cast<int32_t>(i);
    for (ir::ValueId v : op.operands) {
      ++uses[v];
      lastUse[v] = i;
      if (fusible(op.kind) && prog.type(v).numel() == prog.type(op.results[0]).numel())
        ++elementwiseUses[v];
    }
  }
  // Per value: its readers in program order, once per use (readers(v), one flat array).
  std::vector<int32_t> readerStart(nv + 1, 0), readerOps;
  for (size_t v = 0; v < nv; ++v) readerStart[v + 1] = readerStart[v] + uses[v];
  readerOps.resize(static_cast<size_t>(readerStart[nv]));
  {
    std::vector<int32_t> fill(readerStart.begin(), readerStart.end() - 1);
    for (size_t i = 0; i < prog.ops.size(); ++i)
      for (ir::ValueId v : prog.ops[i].operands) readerOps[static_cast<size_t>(fill[v]++)] = static_cast<int32_t>(i);
  }
  auto readers = [&](ir::ValueId v) {
    return llvm::ArrayRef<int32_t>(readerOps.data() + readerStart[v], readerOps.data() + readerStart[v + 1]);
  };
  for (ir::ValueId v : prog.outputs) {
    uses[v] += 2; // an output has its own buffer
    lastUse[v] = prog.ops.size();
  }
  // The values a loop computing v reads (its producers' operands, through inlined
  // ones), and whether reading them all at op i keeps every buffer's lifetime.
  std::vector<std::vector<ir::ValueId>> reads(nv);
  auto free = [&](ir::ValueId u) {
    return def[u] < 0 || prog.ops[def[u]].kind == OpKind::Constant ||
           prog.ops[def[u]].kind == OpKind::Iota || prog.type(u).numel() <= 1;
  };
  auto keepsLifetimes = [&](ir::ValueId v, size_t i) {
    // v's loop reads `reads[v]` where v is defined; joining op i's loop moves those
    // reads to i. One value may live on from there to i: v's buffer, which the
    // fusion removes, covered that time and was at least as large.
    int extended = 0;
    for (ir::ValueId u : reads[v]) {
      if (free(u) || lastUse[u] >= i) continue;
      if (++extended > 1 || prog.type(u).numel() > prog.type(v).numel()) return false;
    }
    return true;
  };
  auto scalarBroadcast = [&](ir::ValueId v) {
    if (def[v] < 0) return false;
    const ir::Op &d = prog.ops[def[v]];
    return d.kind == OpKind::BroadcastInDim && prog.type(d.operands[0]).numel() == 1 &&
           prog.type(v).numel() > 1 && uses[v] == elementwiseUses[v];
  };
  // The ops of each loop (per root result: the root and every op inlined into it).
  std::vector<std::vector<int32_t>> members(nv);
  std::vector<char> inLoop(prog.ops.size(), 0);
  std::vector<bool> dup(nv, false);
  // A recomputed value's ops (through recomputed operands) and the buffers they read.
  auto dupTree = [&](ir::ValueId v, int32_t &ops, std::vector<ir::ValueId> &bufs) {
    std::vector<ir::ValueId> stack{v};
    while (!stack.empty()) {
      const ir::ValueId w = stack.back();
      stack.pop_back();
      ++ops;
      for (ir::ValueId u : prog.ops[def[w]].operands) {
        if (dup[u]) stack.push_back(u);
        else if (!free(u) && !scalarBroadcast(u)) bufs.push_back(u);
      }
    }
    std::sort(bufs.begin(), bufs.end());
    bufs.erase(std::unique(bufs.begin(), bufs.end()), bufs.end());
  };
  auto planLoops = [&] {
    // In program order (operands before readers): a candidate operand joins its
    // reader's loop if the loop stays within kMaxFusedSteps.
    for (size_t i = 0; i < prog.ops.size(); ++i) {
      const ir::Op &op = prog.ops[i];
      if (reduceTakesInputFusion(prog, op)) {
        const ir::ValueId v = op.operands[0];
        if (def[v] >= 0 && fusible(prog.ops[def[v]].kind) && uses[v] == 1 &&
            steps[v] <= kMaxFusedSteps && keepsLifetimes(v, i))
          inline_[v] = true;
        continue;
      }
      if (!fusible(op.kind) || dup[op.results[0]]) continue;
      int32_t total = 1;
      std::vector<ir::ValueId> &r = reads[op.results[0]];
      std::vector<int32_t> &mem = members[op.results[0]];
      mem.push_back(static_cast<int32_t>(i));
      for (size_t q = 0; q < op.operands.size(); ++q) {
        const ir::ValueId v = op.operands[q];
        if (std::find(op.operands.begin(), op.operands.begin() + q, v) != op.operands.begin() + q)
          continue; // read twice by this op (x + x): decided at its first operand
        if (scalarBroadcast(v)) {
          inline_[v] = true;
          continue;
        }
        if (dup[v]) { // recomputed here: its ops join, the buffers they read are read here
          int32_t ops = 0;
          std::vector<ir::ValueId> bufs;
          dupTree(v, ops, bufs);
          total += ops;
          r.insert(r.end(), bufs.begin(), bufs.end());
          continue;
        }
        // Every use of v is by this op (once, or twice as in x + x: computed once in the
        // loop and read twice).
        const auto here = static_cast<int32_t>(std::count(op.operands.begin(), op.operands.end(), v));
        const bool candidate = def[v] >= 0 && fusible(prog.ops[def[v]].kind) && uses[v] == here &&
                               elementwiseUses[v] == here;
        if (candidate && total + steps[v] <= kMaxFusedSteps && keepsLifetimes(v, i)) {
          inline_[v] = true;
          total += steps[v];
          r.insert(r.end(), reads[v].begin(), reads[v].end());
          mem.insert(mem.end(), members[v].begin(), members[v].end());
        } else {
          r.push_back(v);
        }
      }
      std::sort(r.begin(), r.end());
      r.erase(std::unique(r.begin(), r.end()), r.end());
      // Diamonds: a value the loop reads whose readers are all in the loop by now joins
      // it too (and may bring more such values), under the same limits.
      for (bool grew = true; grew;) {
        grew = false;
        for (int32_t o : mem) inLoop[o] = 1;
        for (ir::ValueId u : r) {
          const bool allHere = def[u] >= 0 && fusible(prog.ops[def[u]].kind) && !inline_[u] &&
                               uses[u] == elementwiseUses[u] && uses[u] > 0 &&
                               std::all_of(readers(u).begin(), readers(u).end(),
                                           [&](int32_t o) { return inLoop[o] != 0; });
          if (!allHere || total + steps[u] > kMaxFusedSteps || !keepsLifetimes(u, i)) continue;
          inline_[u] = true;
          total += steps[u];
          mem.insert(mem.end(), members[u].begin(), members[u].end());
          std::vector<ir::ValueId> next;
          for (ir::ValueId w : r)
            if (w != u) next.push_back(w);
          next.insert(next.end(), reads[u].begin(), reads[u].end());
          std::sort(next.begin(), next.end());
          next.erase(std::unique(next.begin(), next.end()), next.end());
          r = std::move(next);
          grew = true;
          break;
        }
        for (int32_t o : mem) inLoop[o] = 0;
      }
      steps[op.results[0]] = total;
    }
  };
  planLoops();
  // Recomputed in every reader's loop (after a first plan without it): a single cheap
  // op (no division or transcendental) that kept an instruction of its own, read by
  // two or more ops, each an elementwise op or a reduction that takes it as its fused
  // input, and not an output. The loops then read its operands instead of its buffer,
  // which must not make any buffer but one, no larger than the one removed, live
  // longer (its operands are read up to its last reader).
  bool anyDup = false;
  for (size_t i = 0; i < prog.ops.size(); ++i) {
    const ir::Op &op = prog.ops[i];
    const ir::ValueId v = op.results.empty() ? 0 : op.results[0];
    if (!ir::isCheapElementwise(op.kind) || inline_[v] || steps[v] != 1) continue;
    int32_t taken = 0;
    for (int32_t rd : readers(v)) {
      const ir::Op &R = prog.ops[rd];
      if (fusible(R.kind) && prog.type(R.results[0]).numel() == prog.type(v).numel()) ++taken;
      else if (reduceTakesInputFusion(prog, R) && R.operands[0] == v) ++taken;
    }
    const bool twoReaders = !readers(v).empty() && readers(v).front() != readers(v).back();
    if (!twoReaders || taken != uses[v]) continue; // an output counts 2 in uses only
    // The buffers its recomputation reads (through operands already recomputed) are
    // read up to v's last reader: at most one of them may live longer for it.
    int32_t ops = 0;
    std::vector<ir::ValueId> bufs;
    dupTree(v, ops, bufs);
    int extended = 0;
    bool ok = ops <= 4;
    for (ir::ValueId u : bufs) {
      if (lastUse[u] >= lastUse[v]) continue;
      ok &= ++extended <= 1 && prog.type(u).numel() <= prog.type(v).numel();
    }
    dup[v] = ok;
    anyDup |= ok;
  }
  if (!anyDup) return;
  // The plan again, with those recomputed.
  std::fill(inline_.begin(), inline_.end(), false);
  for (auto &x : reads) x.clear();
  for (auto &x : members) x.clear();
  std::fill(steps.begin(), steps.end(), 0);
  for (size_t v = 0; v < nv; ++v) {
    if (!dup[v]) continue;
    inline_[v] = true;
    for (ir::ValueId u : prog.ops[def[v]].operands)
      if (scalarBroadcast(u)) inline_[u] = true;
  }
  planLoops();
}

std::vector<Fusion::Loop> Fusion::loops(const ir::Program &prog) const {
  std::vector<Loop> out;
  for (size_t i = 0; i < prog.ops.size(); ++i) {
    const ir::Op &op = prog.ops[i];
    if (op.results.empty() || inlined(op.results[0])) continue;
    if (!fusible(op.kind) && !reduceTakesInputFusion(prog, op)) continue;
    Loop L{i, {}, {}};
    std::vector<int32_t> stack{static_cast<int32_t>(i)};
    while (!stack.empty()) {
      const int32_t o = stack.back();
      stack.pop_back();
      if (std::find(L.ops.begin(), L.ops.end(), o) != L.ops.end()) continue;
      L.ops.push_back(o);
      for (ir::ValueId v : prog.ops[static_cast<size_t>(o)].operands) {
        if (inlined(v) && def[v] >= 0) stack.push_back(def[v]);
        else if (std::find(L.reads.begin(), L.reads.end(), v) == L.reads.end()) L.reads.push_back(v);
      }
    }
    if (L.ops.size() < 2) continue;
    std::sort(L.ops.begin(), L.ops.end());
    std::sort(L.reads.begin(), L.reads.end());
    out.push_back(std::move(L));
  }
  return out;
}

} // namespace tessel::rt::prep
