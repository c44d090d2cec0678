//===- passes/SvdTopkGuards.cpp - complement guards from the forward (see the header) ===//
#include "passes/SvdTopkGuards.h"

#include <numeric>
#include <vector>

#include "ir/Builder.h"
#include "ir/OpAttrs.h"
#include "ir/ShapeRules.h"
#include "passes/Rewrite.h"

namespace tessel::passes {

using namespace tessel::ir;

bool runSvdTopkGuards(Program &p, const SvdTopkGuardsOptions &, SvdTopkGuardsStats *stats) {
  // A clone of an svd_topk (a checkpoint policy's) would stay narrow while the forward
  // widens: different triplets, possibly different signs, for the same values.
  for (const Op &op : p.ops)
    if (op.remat && (op.kind == OpKind::SvdTopk || op.kind == OpKind::SvdTopkComplement))
      return false;
  // guards[i]: for an svd_topk, the g it will compute; for a complement of such an
  // svd_topk (reading its A and all three results), the g it will take.
  std::vector<int64_t> guards(p.ops.size(), 0);
  bool any = false;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const Op &c = p.ops[i];
    if (c.kind != OpKind::SvdTopkComplement || ir::attr<OpKind::SvdTopkComplement, "guards">(c) != 0) continue;
    const int32_t d = p.values[c.operands[1]].def;
    if (d < 0) continue;
    const Op &t = p.ops[size_t(d)];
    if (t.kind != OpKind::SvdTopk || ir::attr<OpKind::SvdTopk, "guards">(t) != 0 || t.operands[0] != c.operands[0] ||
        c.operands[1] != t.results[0] || c.operands[2] != t.results[1] ||
        c.operands[3] != t.results[2])
      continue;
    const Shape &as = p.type(t.operands[0]).shape;
    const int64_t g = svdTopkComplementGuards(as[0], as[1], ir::attr<OpKind::SvdTopk, "k">(t));
    if (g == 0) continue;
    guards[size_t(d)] = guards[i] = g;
    any = true;
  }
  if (!any) return false;

  std::vector<Op> old = std::move(p.ops);
  p.ops.clear();
  std::vector<ValueId> repl(p.values.size());
  std::iota(repl.begin(), repl.end(), ValueId(0));
  Builder b(p);
  for (size_t i = 0; i < old.size(); ++i) {
    Op &op = old[i];
    const bool widen = op.kind == OpKind::SvdTopk && guards[i] > 0;
    if (op.kind == OpKind::SvdTopkComplement && guards[i] > 0) {
      // A and the cotangents as remapped; U, s, Vt stay the widened results.
      for (size_t q : {size_t(0), size_t(4), size_t(5)}) op.operands[q] = repl[op.operands[q]];
      op.attrs.set("guards", Attr::i64(guards[i]));
    } else {
      for (ValueId &v : op.operands) v = repl[v];
    }
    if (!widen) {
      p.ops.push_back(std::move(op));
      continue;
    }
    const Shape &as = p.type(op.operands[0]).shape;
    const int64_t m = as[0], n = as[1], k = ir::attr<OpKind::SvdTopk, "k">(op), w = k + guards[i];
    op.attrs.set("k", Attr::i64(w));
    op.attrs.set("guards", Attr::i64(guards[i]));
    p.values[op.results[0]].type = Type({m, w});
    p.values[op.results[1]].type = Type({w});
    p.values[op.results[2]].type = Type({w, n});
    const Op wide = op;
    p.ops.push_back(std::move(op));
    b.setOrigin(wide);
    const ValueId kept[3] = {b.slice(wide.results[0], {0, 0}, {m, k}),
                             b.slice(wide.results[1], {0}, {k}),
                             b.slice(wide.results[2], {0, 0}, {k, n})};
    for (size_t j = 0; j < 3; ++j) {
      p.ops[p.ops.size() - 3 + j].pos = wide.pos;
      redirectValue(p, repl, wide.results[j], kept[j]);
    }
    if (stats) {
      ++stats->widened;
      stats->guards += guards[i];
    }
  }
  p.recomputeDefs();
  return true;
}

} // namespace tessel::passes
