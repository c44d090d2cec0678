//===- passes/Checkpoint.cpp - Remat policies over the forward/backward split ---===//
#include "passes/Checkpoint.h"

#include "passes/Inline.h"

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

struct RematConfig {
  RematPolicy policy = RematPolicy::Recompute;
  int64_t regions = 1;           ///< 0 = auto
  size_t numPrimal = 0;          ///< leading outputs that are primal
  bool keepPrimalOutputs = true; ///< primal outputs are saveable
  /// Gradient outputs that name an unsaved forward value get a clone (split mode);
  /// otherwise they keep naming the original (it is an output, live anyway).
  bool materializeOutputs = false;
};

struct RematResult {
  Program prog;
  std::vector<char> isForward; ///< per op of prog: an original forward op
  int64_t clones = 0;
  int64_t regions = 0;
  int64_t forwardOps = 0;
  int64_t backwardOps = 0;
};

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

/// The op that defines `v` (ir::describeOp), or "input %v".
std::string describeOrigin(const Program &p, ValueId v) {
  int32_t d = p.values[v].def;
  return d < 0 ? "input " + ir::valueRef(p, v) : ir::describeOp(p, p.ops[d]);
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

//===----------------------------------------------------------------------===//
// splitVjp
//===----------------------------------------------------------------------===//

int64_t ForwardBackward::residualBytes() const {
  int64_t b = 0;
  for (const Residual &r : residuals) b += r.bytes;
  return b;
}

std::vector<ir::Tensor>
ForwardBackward::backwardInputs(const std::vector<ir::Tensor> &forwardInputs,
                                const std::vector<ir::Tensor> &forwardOutputs,
                                const std::vector<ir::Tensor> &cotangents) const {
  if (forwardInputs.size() != forward.inputs.size())
    throw Error("error: backwardInputs: " + std::to_string(forwardInputs.size()) +
                " forward inputs given, " + ir::text::atName(forward.name) + " has " +
                std::to_string(forward.inputs.size()));
  if (forwardOutputs.size() != forward.outputs.size())
    throw Error("error: backwardInputs: " + std::to_string(forwardOutputs.size()) +
                " forward outputs given, " + ir::text::atName(forward.name) + " has " +
                std::to_string(forward.outputs.size()));
  if (cotangents.size() != numCotangents)
    throw Error("error: backwardInputs: " + std::to_string(cotangents.size()) +
                " cotangents given, " + ir::text::atName(backward.name) + " takes " +
                std::to_string(numCotangents));
  std::vector<ir::Tensor> in;
  in.reserve(residuals.size() + cotangents.size());
  for (const Residual &r : residuals)
    in.push_back(r.forwardInput >= 0 ? forwardInputs[r.forwardInput]
                                     : forwardOutputs[r.forwardOutput]);
  for (const ir::Tensor &t : cotangents) in.push_back(t);
  return in;
}

std::string ForwardBackward::describeResiduals() const {
  std::ostringstream os;
  os << "residuals of " << ir::text::atName(forward.name) << " under policy " << rematPolicyName(policy) << ": "
     << residuals.size() << " values, " << residualBytes() << " bytes";
  if (recomputedOps) os << ", " << recomputedOps << " ops recomputed in the backward";
  os << "\n";
  size_t wn = 4, wt = 4, wb = 5;
  for (const Residual &r : residuals) {
    wn = std::max(wn, r.name.size() + 1);
    wt = std::max(wt, r.type.str().size());
    wb = std::max(wb, std::to_string(r.bytes).size());
  }
  auto pad = [](std::string s, size_t w, bool right = false) {
    if (s.size() >= w) return s;
    return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
  };
  os << "  " << pad("name", wn) << "  " << pad("type", wt) << "  " << pad("bytes", wb, true)
     << "  origin\n";
  for (const Residual &r : residuals)
    os << "  " << pad("%" + r.name, wn) << "  " << pad(r.type.str(), wt) << "  "
       << pad(std::to_string(r.bytes), wb, true) << "  " << r.origin << "\n";
  return os.str();
}
/// Appends `op` (of program `src`, which is discarded after) to `dst` reading
/// `operands`, with its attributes, location, position and result names moved over;
/// records the new results in `map` (indexed by `src` value ids).
static void appendMoved(ir::Program &dst, ir::Program &src, Op &op,
                        llvm::ArrayRef<ValueId> operands, std::vector<ValueId> &map) {
  llvm::SmallVector<ir::Type, 3> types;
  for (ValueId v : op.results) types.push_back(src.values[v].type);
  auto out = dst.appendOp(op.kind, operands, std::move(op.attrs), types, std::move(op.loc), op.remat);
  dst.ops.back().pos = op.pos;
  for (size_t k = 0; k < out.size(); ++k) {
    map[op.results[k]] = out[k];
    const std::string &nm = src.values[op.results[k]].name;
    if (!ir::isAnonymousName(nm)) dst.setName(out[k], nm);
  }
}


ForwardBackward splitVjp(const Program &fwd, const GradOptions &opts, RematPolicy policy) {
  GradOptions go = opts;
  go.keepOutputs = true;
  return splitGradient(grad(fwd, go), fwd.outputs.size(), fwd.inputs.size(), policy);
}

ForwardBackward splitGradient(const Program &g, size_t numPrimal, size_t numPrimalInputs,
                              RematPolicy policy, bool asCallee) {
  if (g.outputs.size() < numPrimal || g.inputs.size() < numPrimalInputs)
    throw Error("internal: gradient program " + ir::text::atName(g.name) + " does not keep the primal outputs");

  RematConfig cfg;
  cfg.policy = policy;
  cfg.regions = 1;
  cfg.numPrimal = numPrimal;
  cfg.keepPrimalOutputs = false;
  cfg.materializeOutputs = true;
  RematResult r = rematerialize(g, cfg);
  // Each op of h goes to one half, moved (h is not read after the halves are built).
  Program &h = r.prog;

  ForwardBackward fb;
  fb.policy = policy;
  fb.numPrimalOutputs = numPrimal;
  fb.numCotangents = h.inputs.size() - numPrimalInputs;
  fb.recomputedOps = r.clones;
  std::vector<ValueId> res = residualValues(h, r.isForward, numPrimal, numPrimalInputs, true);

  // Forward program: the forward ops, the original outputs, then the residuals that
  // are neither inputs nor original outputs.
  // Names no function of the module has (a module's entry split again).
  auto freshName = [&](const std::string &base) {
    std::string n = base;
    for (int k = 1; g.functionIndex(n) >= 0; ++k) n = base + "_" + std::to_string(k);
    return n;
  };
  Program &F = fb.forward, &B = fb.backward;
  F.name = freshName(h.name + "_fwd");
  const size_t forwardOps = static_cast<size_t>(
      std::count_if(r.isForward.begin(), r.isForward.end(), [](char f) { return f != 0; }));
  F.ops.reserve(forwardOps);
  B.ops.reserve(h.ops.size() - forwardOps);
  F.functions = g.functions; // both halves of a module's entry call its functions
  std::vector<ValueId> toF(h.values.size(), ir::kNoValue);
  for (size_t k = 0; k < numPrimalInputs; ++k) {
    ValueId in = h.inputs[k];
    toF[in] = F.addInput(h.values[in].name, h.values[in].type);
  }
  for (size_t i = 0; i < h.ops.size(); ++i) {
    if (!r.isForward[i]) continue;
    Op &op = h.ops[i];
    llvm::SmallVector<ValueId, 4> ops;
    for (ValueId u : op.operands) ops.push_back(toF[u]);
    appendMoved(F, h, op, ops, toF);
  }
  for (size_t o = 0; o < numPrimal; ++o) F.addOutput(toF[h.outputs[o]]);
  for (size_t k = 0; k < res.size(); ++k) {
    ValueId v = res[k];
    ValueId fv = toF[v];
    Residual rr;
    rr.type = h.values[v].type;
    rr.bytes = rr.type.bytes();
    int32_t d = h.values[v].def;
    if (d < 0) {
      rr.forwardInput = F.inputIndex(F.values[fv].name);
    } else {
      for (size_t o = 0; o < numPrimal; ++o)
        if (F.outputs[o] == fv) {
          rr.forwardOutput = static_cast<int>(o);
          break;
        }
      // A residual is a backward input, which needs a name (a primal output may be
      // anonymous too).
      if (ir::isAnonymousName(F.values[fv].name)) F.setName(fv, "res" + std::to_string(k));
      if (rr.forwardOutput < 0) {
        rr.forwardOutput = static_cast<int>(F.outputs.size());
        F.addOutput(fv);
      }
    }
    rr.name = F.values[fv].name;
    fb.residuals.push_back(std::move(rr));
  }
  // Origins, described with the forward program's names.
  for (size_t k = 0; k < res.size() && !asCallee; ++k) {
    Residual &rr = fb.residuals[k];
    int32_t d = h.values[res[k]].def;
    if (d < 0) {
      rr.originOp = "input";
      rr.origin = "input %" + rr.name;
      continue;
    }
    ValueId fv = toF[res[k]];
    rr.originOp = ir::opName(F.ops[F.values[fv].def].kind);
    rr.origin = describeOrigin(F, fv);
  }

  // Backward program: residuals, then the cotangents; the backward ops and clones.
  B.name = freshName(h.name + "_bwd");
  B.functions = g.functions;
  std::vector<ValueId> toB(h.values.size(), ir::kNoValue);
  for (size_t k = 0; k < res.size(); ++k)
    toB[res[k]] = B.addInput(fb.residuals[k].name, fb.residuals[k].type);
  for (size_t k = numPrimalInputs; k < h.inputs.size(); ++k) {
    ValueId in = h.inputs[k];
    toB[in] = B.addInput(h.values[in].name, h.values[in].type);
  }
  for (size_t i = 0; i < h.ops.size(); ++i) {
    if (r.isForward[i]) continue;
    Op &op = h.ops[i];
    llvm::SmallVector<ValueId, 4> ops;
    for (ValueId u : op.operands) {
      if (toB[u] == ir::kNoValue)
        throw Error("internal: splitVjp: backward op " + std::string(ir::opName(op.kind)) +
                    " reads a forward value that is not a residual");
      ops.push_back(toB[u]);
    }
    appendMoved(B, h, op, ops, toB);
  }
  for (size_t o = numPrimal; o < h.outputs.size(); ++o) B.addOutput(toB[h.outputs[o]]);

  removeDeadFunctions(F);
  removeDeadFunctions(B);
  if (!asCallee) {
    ir::verifyOrThrow(F);
    ir::verifyOrThrow(B);
  }
  return fb;
}

} // namespace tessel::passes
