//===- passes/Inline.cpp - Inlining a module into one program (see Inline.h) ----===//
#include "passes/Inline.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "ir/OpAttrs.h"
#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "passes/Rewrite.h"

namespace tessel::passes {

using ir::Builder;
using ir::Op;
using ir::OpKind;
using ir::Program;
using ir::ValueId;

namespace {

int64_t satAdd(int64_t a, int64_t b) {
  return a > std::numeric_limits<int64_t>::max() - b ? std::numeric_limits<int64_t>::max() : a + b;
}
int64_t satMul(int64_t a, int64_t b) {
  return b != 0 && a > std::numeric_limits<int64_t>::max() / b ? std::numeric_limits<int64_t>::max()
                                                              : a * b;
}

/// Inlined op count of each function of `p` (in order) and of the entry (last).
std::vector<int64_t> inlinedSizes(const Program &p) {
  std::vector<int64_t> sizes;
  auto sizeOf = [&](const Program &f) {
    int64_t n = 0;
    for (const Op &op : f.ops) {
      if (!ir::hasCallee(op.kind)) {
        n = satAdd(n, 1);
        continue;
      }
      const int callee = p.functionIndex(ir::calleeOf(op));
      const int64_t body = callee < 0 ? 0 : sizes[static_cast<size_t>(callee)];
      if (op.kind == OpKind::Call) {
        n = satAdd(n, satAdd(body, static_cast<int64_t>(op.results.size())));
      } else {
        const int64_t length = ir::attr<ir::OpKind::Scan, "length">(op);
        const int64_t k = ir::attr<ir::OpKind::Scan, "carries">(op);
        const int64_t xs = static_cast<int64_t>(op.operands.size()) - k;
        const int64_t ys = static_cast<int64_t>(op.results.size()) - k;
        n = satAdd(n, satMul(length, satAdd(body, 2 * xs + 4 * ys)));
      }
    }
    return n;
  };
  for (const Program &f : p.functions) sizes.push_back(sizeOf(f));
  sizes.push_back(sizeOf(p));
  return sizes;
}

/// The location of an op of a callee inlined at a call site located at `site` (a
/// scan's: with the iteration): the op's own, then where it was called from, as
/// MLIR's call-site locations ("<op's> (in <site's>)"; inlined again, the outer site
/// joins the list: "<op's> (in <inner site>, in <outer site>)"); either alone where
/// the other is empty.
std::string inlinedLoc(const std::string &own, const std::string &site) {
  if (own.empty()) return site;
  if (site.empty()) return own;
  const size_t at = own.find(" (in ");
  if (at != std::string::npos && own.back() == ')')
    return own.substr(0, own.size() - 1) + ", in " + site + ")";
  return own + " (in " + site + ")";
}

/// Appends the ops of `f` (whose calls are inlined already: `flat`) to `b`'s program
/// with f's inputs bound to `args`; returns the values of f's outputs.
class Inliner {
public:
  Inliner(const Program &module, const std::vector<Program> &flat) : module_(module), flat_(flat) {}

  /// Copies `f` into `out`, inlining its calls and scans.
  void flatten(const Program &f, Program &out) {
    Builder b(out);
    std::vector<ValueId> map(f.values.size(), ir::kNoValue);
    for (size_t i = 0; i < f.inputs.size(); ++i)
      map[f.inputs[i]] = out.addInput(f.value(f.inputs[i]).name, f.type(f.inputs[i]));
    for (const Op &op : f.ops) {
      llvm::SmallVector<ValueId, 8> args;
      for (ValueId v : op.operands) args.push_back(map[v]);
      llvm::SmallVector<ValueId, 4> results;
      if (!ir::hasCallee(op.kind)) {
        llvm::SmallVector<ir::Type, 3> types;
        for (ValueId r : op.results) types.push_back(f.type(r));
        auto rs = out.appendOp(op.kind, args, op.attrs, types, op.loc, op.remat);
        results.assign(rs.begin(), rs.end());
      } else {
        const Program &g = flat_[static_cast<size_t>(module_.functionIndex(ir::calleeOf(op)))];
        results = op.kind == OpKind::Call ? inlineBody(b, g, args, op, op.loc) : unroll(b, g, args, op);
      }
      for (size_t i = 0; i < op.results.size(); ++i) {
        ValueId r = results[i];
        const std::string &name = f.value(op.results[i]).name;
        if (!ir::isAnonymousName(name)) {
          if (!ir::isAnonymousName(out.value(r).name) || out.value(r).def < 0) {
            b.setOrigin(op);
            r = b.reshape(r, out.type(r).shape); // an identity, to carry the name
          }
          out.setName(r, name);
        }
        map[op.results[i]] = r;
      }
    }
    for (ValueId v : f.outputs) out.addOutput(map[v]);
  }

private:
  /// The ops of the flat function `g` on `args`, tagged as coming from `site`; g's
  /// output values.
  llvm::SmallVector<ValueId, 4> inlineBody(Builder &b, const Program &g,
                                           llvm::ArrayRef<ValueId> args, const Op &site,
                                           const std::string &siteLoc) {
    Program &out = b.program();
    std::vector<ValueId> map(g.values.size(), ir::kNoValue);
    for (size_t i = 0; i < g.inputs.size(); ++i) map[g.inputs[i]] = args[i];
    for (const Op &op : g.ops) {
      llvm::SmallVector<ValueId, 8> in;
      for (ValueId v : op.operands) in.push_back(map[v]);
      llvm::SmallVector<ir::Type, 3> types;
      for (ValueId r : op.results) types.push_back(g.type(r));
      auto rs = out.appendOp(op.kind, in, op.attrs, types, inlinedLoc(op.loc, siteLoc),
                             op.remat || site.remat);
      for (size_t i = 0; i < rs.size(); ++i) map[op.results[i]] = rs[i];
    }
    llvm::SmallVector<ValueId, 4> outs;
    for (ValueId v : g.outputs) outs.push_back(map[v]);
    return outs;
  }

  /// A scan of `g` unrolled: per iteration the xs sliced, the body inlined; then the
  /// ys stacked.
  llvm::SmallVector<ValueId, 4> unroll(Builder &b, const Program &g, llvm::ArrayRef<ValueId> args,
                                       const Op &site) {
    const int64_t n = ir::attr<ir::OpKind::Scan, "length">(site);
    const size_t k = static_cast<size_t>(ir::attr<ir::OpKind::Scan, "carries">(site));
    const bool reverse = ir::attr<ir::OpKind::Scan, "reverse">(site) != 0;
    llvm::SmallVector<ValueId, 8> carry(args.begin(), args.begin() + static_cast<ptrdiff_t>(k));
    const size_t ny = g.outputs.size() - k;
    std::vector<std::vector<ValueId>> ys(ny, std::vector<ValueId>(static_cast<size_t>(n)));
    for (int64_t step = 0; step < n; ++step) {
      const int64_t i = reverse ? n - 1 - step : step;
      b.setOrigin(site);
      llvm::SmallVector<ValueId, 8> in(carry.begin(), carry.end());
      for (size_t x = k; x < args.size(); ++x) {
        const ir::Type &t = b.type(args[x]);
        ir::I64List start(t.shape.size(), 0), limit(t.shape.begin(), t.shape.end());
        start[0] = i;
        limit[0] = i + 1;
        in.push_back(b.reshape(b.slice(args[x], start, limit), g.type(g.inputs[x]).shape));
      }
      const std::string iteration = "iteration " + std::to_string(i + 1) + " of " + std::to_string(n);
      llvm::SmallVector<ValueId, 4> outs =
          inlineBody(b, g, in, site, site.loc.empty() ? iteration : site.loc + ", " + iteration);
      for (size_t c = 0; c < k; ++c) carry[c] = outs[c];
      for (size_t y = 0; y < ny; ++y) {
        ir::Shape one{1};
        const ir::Type &t = b.type(outs[k + y]);
        one.append(t.shape.begin(), t.shape.end());
        b.setOrigin(site);
        ys[y][static_cast<size_t>(i)] = b.reshape(outs[k + y], one);
      }
    }
    llvm::SmallVector<ValueId, 4> results(carry.begin(), carry.end());
    b.setOrigin(site);
    for (size_t y = 0; y < ny; ++y) results.push_back(stack(b, ys[y], 0, ys[y].size()));
    return results;
  }

  /// The pieces [lo, hi) of extent 1 along axis 0 stacked: pad both halves to the
  /// whole extent and add (each element a sum of its value and zeros: exact).
  ValueId stack(Builder &b, const std::vector<ValueId> &pieces, size_t lo, size_t hi) {
    if (hi - lo == 1) return pieces[lo];
    const size_t mid = lo + (hi - lo) / 2;
    ValueId left = stack(b, pieces, lo, mid), right = stack(b, pieces, mid, hi);
    const size_t rank = b.type(left).shape.size();
    ir::I64List zero(rank, 0), highL(rank, 0), lowR(rank, 0);
    highL[0] = static_cast<int64_t>(hi - mid);
    lowR[0] = static_cast<int64_t>(mid - lo);
    return b.add(b.pad(left, zero, highL), b.pad(right, lowR, zero));
  }

  const Program &module_;
  const std::vector<Program> &flat_;
};

} // namespace

int64_t inlinedOpCount(const Program &p) { return inlinedSizes(p).back(); }

bool runInline(Program &p, const InlineOptions &) {
  if (p.functions.empty()) return false;
  const int64_t total = inlinedOpCount(p);
  if (total > kMaxInlinedOps)
    throw Error("error: inline: module " + ir::text::atName(p.name) + " unrolls to " +
                (total == std::numeric_limits<int64_t>::max() ? std::string("more than 2^63")
                                                              : std::to_string(total)) +
                " ops, more than the " + std::to_string(kMaxInlinedOps) +
                " the engine's programs may have (shorten its scans)");
  std::vector<Program> flat;
  Inliner inliner(p, flat);
  for (const Program &f : p.functions) {
    Program out;
    out.name = f.name;
    inliner.flatten(f, out);
    flat.push_back(std::move(out));
  }
  Program out;
  out.name = p.name;
  inliner.flatten(p, out);
  out.gradSignature = p.gradSignature;
  p = std::move(out);
  return true;
}

size_t removeDeadFunctions(Program &p) {
  if (p.functions.empty()) return 0;
  std::vector<char> live(p.functions.size(), 0);
  auto mark = [&](const Program &f) {
    for (const Op &op : f.ops)
      if (ir::hasCallee(op.kind))
        if (int i = p.functionIndex(ir::calleeOf(op)); i >= 0) live[static_cast<size_t>(i)] = 1;
  };
  mark(p);
  // Callees come before callers: one sweep from the last function down reaches all.
  for (size_t i = p.functions.size(); i-- > 0;)
    if (live[i]) mark(p.functions[i]);
  std::vector<Program> kept;
  for (size_t i = 0; i < p.functions.size(); ++i)
    if (live[i]) kept.push_back(std::move(p.functions[i]));
  const size_t removed = p.functions.size() - kept.size();
  p.functions = std::move(kept);
  return removed;
}

} // namespace tessel::passes
