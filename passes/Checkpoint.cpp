//===- passes/Checkpoint.cpp - Remat policies and the checkpoint pass -----------===//
//
// The remat policies (rematerialize: which forward values the backward recomputes)
// and the checkpoint pass that applies one to a gradient program; the split into a
// forward and a backward program over the same policies is passes/SplitGradient.cpp.
//
//===----------------------------------------------------------------------===//
#include "passes/Checkpoint.h"

#include "passes/Inline.h"
#include "passes/Remat.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>

#include "ir/TextUtil.h"
#include "ir/Diagnostics.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

namespace tessel::passes {

using ir::Op;
using ir::OpKind;
using ir::Program;
using ir::ValueId;
using namespace remat_detail; // passes/Remat.h

const char *rematPolicyName(RematPolicy p) {
  switch (p) {
  case RematPolicy::Store: return "store";
  case RematPolicy::Recompute: return "recompute";
  case RematPolicy::SaveSvd: return "save-svd";
  }
  return "?";
}

RematPolicy parseRematPolicy(llvm::StringRef name) {
  if (name == "store") return RematPolicy::Store;
  if (name == "recompute") return RematPolicy::Recompute;
  if (name == "save-svd") return RematPolicy::SaveSvd;
  throw Error("error: unknown checkpoint policy '" + name.str() +
              "' (allowed: store, recompute, save-svd)");
}

const std::vector<RematPolicy> &allRematPolicies() {
  static const std::vector<RematPolicy> all = {RematPolicy::Store, RematPolicy::SaveSvd,
                                               RematPolicy::Recompute};
  return all;
}

namespace {


/// Marks the ops the first `numPrimal` outputs depend on.
std::vector<char> markForward(const Program &g, size_t numPrimal) {
  std::vector<char> fwd(g.ops.size(), 0);
  std::vector<ValueId> stack(g.outputs.begin(), g.outputs.begin() + numPrimal);
  while (!stack.empty()) {
    ValueId v = stack.back();
    stack.pop_back();
    int32_t d = g.values[v].def;
    if (d < 0 || fwd[d]) continue;
    fwd[d] = 1;
    for (ValueId u : g.ops[d].operands) stack.push_back(u);
  }
  return fwd;
}

/// Region index of every forward op (indexed by op index; -1 for backward ops) and the
/// number of regions used. Cuts go where the fewest bytes of forward values cross.
std::vector<int> assignRegions(const Program &g, const std::vector<char> &fwd, int64_t wanted,
                               int64_t &used) {
  std::vector<int> F;
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (fwd[i]) F.push_back(static_cast<int>(i));
  const int64_t m = static_cast<int64_t>(F.size());
  std::vector<int> region(g.ops.size(), -1);
  int64_t n = wanted > 0 ? wanted : std::max<int64_t>(1, std::llround(std::sqrt(double(m))));
  n = std::min<int64_t>(n, std::max<int64_t>(m, 1));
  if (n <= 1 || m <= 1) {
    for (int i : F) region[i] = 0;
    used = 1;
    return region;
  }
  // Position of each forward op, last forward use of each value.
  std::vector<int64_t> pos(g.ops.size(), -1);
  for (int64_t j = 0; j < m; ++j) pos[F[j]] = j;
  std::vector<int64_t> lastUse(g.values.size(), -1);
  for (int64_t j = 0; j < m; ++j)
    for (ValueId u : g.ops[F[j]].operands) lastUse[u] = j;
  // crossing[j] = bytes of values defined at positions <= j and read after j.
  std::vector<int64_t> diff(m + 1, 0);
  for (int64_t j = 0; j < m; ++j)
    for (ValueId v : g.ops[F[j]].results)
      if (lastUse[v] > j) {
        diff[j] += g.values[v].type.bytes();
        diff[lastUse[v]] -= g.values[v].type.bytes();
      }
  std::vector<int64_t> crossing(m, 0);
  int64_t acc = 0;
  for (int64_t j = 0; j < m; ++j) crossing[j] = (acc += diff[j]);

  std::vector<int64_t> cuts; // cut after position c
  int64_t prev = -1, half = m / (2 * n);
  for (int64_t k = 1; k < n; ++k) {
    int64_t ideal = (k * m) / n - 1;
    int64_t lo = std::max(prev + 1, ideal - half), hi = std::min(m - 2, ideal + half);
    if (lo > hi) continue;
    int64_t best = lo;
    for (int64_t j = lo; j <= hi; ++j) {
      bool better = crossing[j] < crossing[best] ||
                    (crossing[j] == crossing[best] &&
                     std::llabs(j - ideal) < std::llabs(best - ideal));
      if (better) best = j;
    }
    cuts.push_back(best);
    prev = best;
  }
  size_t c = 0;
  for (int64_t j = 0; j < m; ++j) {
    region[F[j]] = static_cast<int>(c);
    if (c < cuts.size() && cuts[c] == j) ++c;
  }
  used = static_cast<int64_t>(cuts.size()) + 1;
  return region;
}

/// A name for the clone of a value named `base`, unused in both programs.
std::string cloneName(const Program &src, const Program &dst, const std::string &base) {
  std::string cand = base + ".remat";
  for (int i = 1; src.lookup(cand) != ir::kNoValue || dst.lookup(cand) != ir::kNoValue; ++i)
    cand = base + ".remat" + std::to_string(i);
  return cand;
}

} // namespace

namespace remat_detail {

RematResult rematerialize(const Program &g, const RematConfig &cfg) {
  RematResult r;
  const std::vector<char> fwd = markForward(g, cfg.numPrimal);
  const std::vector<int> region = assignRegions(g, fwd, cfg.regions, r.regions);
  for (char f : fwd) (f ? r.forwardOps : r.backwardOps)++;

  // Which forward values the backward may read.
  std::vector<char> isPrimal(g.values.size(), 0);
  for (size_t i = 0; i < cfg.numPrimal; ++i) isPrimal[g.outputs[i]] = 1;
  std::vector<char> boundary(g.values.size(), 0);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (!fwd[i]) continue;
    for (ValueId u : g.ops[i].operands) {
      int32_t d = g.values[u].def;
      if (d >= 0 && region[d] < region[i]) boundary[u] = 1;
    }
  }
  // Memoised: every backward operand asks, and a broadcast's answer asks its operand's.
  std::vector<signed char> savedMemo(g.values.size(), -1);
  std::function<bool(ValueId)> savedUncached;
  auto saved = [&](ValueId v) {
    if (savedMemo[v] < 0) savedMemo[v] = savedUncached(v) ? 1 : 0;
    return savedMemo[v] == 1;
  };
  savedUncached = [&](ValueId v) {
    int32_t d = g.values[v].def;
    if (d < 0 || !fwd[d]) return true; // input or backward value: nothing to recompute
    if (cfg.keepPrimalOutputs && isPrimal[v]) return true;
    // A broadcast holds no more than its smaller operand: under every policy the
    // backward redoes it (a scalar one fuses into its reader's loop) from the saved
    // operand instead of reading a saved copy (TRG: the 1M-element broadcast of m_n
    // that divides T at χ = 32).
    const Op &def = g.ops[d];
    if (def.kind == OpKind::BroadcastInDim &&
        g.type(def.operands[0]).numel() < g.type(v).numel() && saved(def.operands[0]))
      return false;
    // Likewise a cheap unary op (abs, neg, sign) of a saved value: redone in its
    // readers' loops it costs a few instructions per element, saved it costs its bytes
    // and a pass to write them (TRG: |T| of the normalisation, 8 MiB per χ = 32 step).
    if (def.operands.size() == 1 && ir::isCheapElementwise(def.kind) && saved(def.operands[0]))
      return false;
    if (cfg.policy == RematPolicy::Store) return true;
    if (boundary[v]) return true;
    // save-svd: the svd results, and the results of a call or scan (its forward half
    // holds its own svds: recomputing it would redo them).
    if (cfg.policy == RematPolicy::SaveSvd && ir::isSavedBySaveSvd(g.ops[d].kind)) return true;
    return false;
  };

  Program &h = r.prog;
  h.name = g.name;
  h.gradSignature = g.gradSignature;
  h.ops.reserve(g.ops.size());
  h.values.reserve(g.values.size());
  std::vector<ValueId> map(g.values.size(), ir::kNoValue);
  std::vector<ValueId> clone(g.values.size(), ir::kNoValue);
  for (ValueId in : g.inputs) map[in] = h.addInput(g.values[in].name, g.values[in].type);

  auto resultTypes = [&](const Op &op) {
    llvm::SmallVector<ir::Type, 3> t;
    for (ValueId v : op.results) t.push_back(g.values[v].type);
    return t;
  };
  // A clone is a remat op; a copy keeps the op's own flag.
  auto copyOp = [&](const Op &op, llvm::ArrayRef<ValueId> operands, bool isClone) {
    auto res = h.appendOp(op.kind, operands, op.attrs, resultTypes(op), op.loc,
                          isClone || op.remat);
    h.ops.back().pos = op.pos;
    for (size_t k = 0; k < res.size(); ++k) {
      const std::string &nm = g.values[op.results[k]].name;
      if (ir::isAnonymousName(nm)) continue;
      h.setName(res[k], isClone ? cloneName(g, h, nm) : nm);
    }
    r.isForward.push_back(isClone ? 0 : fwd[&op - g.ops.data()]);
    return res;
  };
  // The value a backward op reads for `u`.
  auto resolve = [&](ValueId u) { return saved(u) ? map[u] : clone[u]; };
  // Emits clones of every unsaved forward value `roots` need that has none yet, in
  // forward order.
  std::vector<uint32_t> queued(g.ops.size(), 0);
  uint32_t walk = 0;
  auto materialize = [&](llvm::ArrayRef<ValueId> roots) {
    std::vector<int32_t> need;
    std::vector<ValueId> stack;
    ++walk; // queued[d] == walk: op d is already in `need`
    for (ValueId u : roots) stack.push_back(u);
    while (!stack.empty()) {
      ValueId u = stack.back();
      stack.pop_back();
      if (saved(u) || clone[u] != ir::kNoValue) continue;
      int32_t d = g.values[u].def;
      if (queued[d] == walk) continue;
      queued[d] = walk;
      need.push_back(d);
      for (ValueId w : g.ops[d].operands) stack.push_back(w);
    }
    std::sort(need.begin(), need.end());
    for (int32_t d : need) {
      const Op &op = g.ops[d];
      llvm::SmallVector<ValueId, 4> ops;
      for (ValueId w : op.operands) ops.push_back(resolve(w));
      auto res = copyOp(op, ops, true);
      for (size_t k = 0; k < res.size(); ++k) clone[op.results[k]] = res[k];
      ++r.clones;
    }
  };

  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op &op = g.ops[i];
    llvm::SmallVector<ValueId, 4> ops;
    if (fwd[i]) {
      for (ValueId u : op.operands) ops.push_back(map[u]);
    } else {
      materialize(op.operands);
      for (ValueId u : op.operands) ops.push_back(resolve(u));
    }
    auto res = copyOp(op, ops, false);
    for (size_t k = 0; k < res.size(); ++k) map[op.results[k]] = res[k];
  }
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    ValueId v = g.outputs[o];
    if (o >= cfg.numPrimal && cfg.materializeOutputs) {
      materialize(llvm::ArrayRef<ValueId>(v));
      h.addOutput(resolve(v));
    } else {
      h.addOutput(map[v]);
    }
  }
  return r;
}

/// Values of `h` (inputs and forward results) read by backward ops or, when
/// `gradOutputs`, named by gradient outputs; inputs first (input order), then op
/// results in definition order. Inputs at index >= numPrimalInputs are excluded.
std::vector<ValueId> residualValues(const Program &h, const std::vector<char> &isForward,
                                    size_t numPrimal, size_t numPrimalInputs, bool gradOutputs) {
  std::vector<char> read(h.values.size(), 0);
  for (size_t i = 0; i < h.ops.size(); ++i)
    if (!isForward[i])
      for (ValueId u : h.ops[i].operands) read[u] = 1;
  if (gradOutputs)
    for (size_t o = numPrimal; o < h.outputs.size(); ++o) read[h.outputs[o]] = 1;
  std::vector<ValueId> out;
  for (size_t k = 0; k < h.inputs.size() && k < numPrimalInputs; ++k)
    if (read[h.inputs[k]]) out.push_back(h.inputs[k]);
  for (size_t i = 0; i < h.ops.size(); ++i)
    if (isForward[i])
      for (ValueId v : h.ops[i].results)
        if (read[v]) out.push_back(v);
  return out;
}

/// The op that defines `v` (ir::describeOp), or "input %v".
std::string describeOrigin(const Program &p, ValueId v) {
  int32_t d = p.values[v].def;
  return d < 0 ? "input " + ir::valueRef(p, v) : ir::describeOp(p, p.ops[d]);
}

} // namespace remat_detail

namespace {

size_t countPrimalOutputs(const Program &p) {
  if (!p.gradSignature)
    throw Error("error: checkpoint: program " + ir::text::atName(p.name) +
                " is not a gradient program (it has no grad(...) signature): run grad first, "
                "e.g. --passes='grad{wrt=beta},checkpoint'");
  const size_t grads = p.gradSignature->wrt.size();
  if (grads == 0 || grads > p.outputs.size() ||
      p.gradSignature->primalOutputs != p.outputs.size() - grads)
    throw Error("error: checkpoint: program " + ir::text::atName(p.name) + " has a grad signature with " +
                std::to_string(grads) + " gradients for its " +
                std::to_string(p.outputs.size()) + " outputs");
  if (p.gradSignature->primalOutputs == 0)
    throw Error("error: checkpoint: program " + ir::text::atName(p.name) +
                " has no primal outputs before its gradients: run grad with "
                "keep-outputs=true");
  return p.outputs.size() - grads;
}

size_t primalOutputCount(const Program &p, int64_t requested) {
  if (requested < 0) return countPrimalOutputs(p);
  if (requested == 0 || size_t(requested) >= p.outputs.size())
    throw Error("error: checkpoint: " + std::to_string(requested) +
                " primal outputs requested, program " + ir::text::atName(p.name) + " has " +
                std::to_string(p.outputs.size()) +
                " outputs (need at least one primal and one gradient output)");
  return size_t(requested);
}

} // namespace

std::vector<Residual> listResiduals(const Program &p, int64_t numPrimalOutputs) {
  size_t numPrimal = primalOutputCount(p, numPrimalOutputs);
  std::vector<char> fwd = markForward(p, numPrimal);
  std::vector<ValueId> vals = residualValues(p, fwd, numPrimal, p.inputs.size(), false);
  std::vector<Residual> out;
  const std::vector<std::string> refs = ir::valueRefs(p);
  for (ValueId v : vals) {
    Residual r;
    r.name = llvm::StringRef(refs[v]).drop_front().str();
    r.type = p.values[v].type;
    r.bytes = r.type.bytes();
    int32_t d = p.values[v].def;
    if (d < 0) {
      r.forwardInput = p.inputIndex(p.values[v].name);
      r.originOp = "input";
    } else {
      for (size_t o = 0; o < numPrimal; ++o)
        if (p.outputs[o] == v) {
          r.forwardOutput = static_cast<int>(o);
          break;
        }
      r.originOp = ir::opName(p.ops[d].kind);
    }
    r.origin = describeOrigin(p, v);
    out.push_back(std::move(r));
  }
  return out;
}

bool runCheckpoint(Program &p, const CheckpointOptions &opts, CheckpointStats *stats) {
  size_t numPrimal = primalOutputCount(p, opts.numPrimalOutputs);
  if (opts.regions < 0)
    throw Error("error: checkpoint: regions must be >= 0 (0 = auto), got " +
                std::to_string(opts.regions));
  RematConfig cfg;
  cfg.policy = opts.policy;
  cfg.regions = opts.regions;
  cfg.numPrimal = numPrimal;
  cfg.keepPrimalOutputs = true;
  cfg.materializeOutputs = false;
  RematResult r = rematerialize(p, cfg);
  if (stats) {
    stats->forwardOps = r.forwardOps;
    stats->backwardOps = r.backwardOps;
    stats->regions = r.regions;
    stats->recomputedOps = r.clones;
    std::vector<ValueId> res =
        residualValues(r.prog, r.isForward, numPrimal, r.prog.inputs.size(), false);
    stats->residuals = static_cast<int64_t>(res.size());
    stats->residualBytes = 0;
    for (ValueId v : res) stats->residualBytes += r.prog.values[v].type.bytes();
  }
  if (r.clones == 0) return false;
  r.prog.functions = std::move(p.functions); // a module keeps its functions
  p = std::move(r.prog);
  return true;
}

} // namespace tessel::passes
