//===- passes/TruncateSvd.cpp - svd used through its leading triplets -> svd_topk -===//
#include "passes/TruncateSvd.h"

#include <algorithm>
#include <vector>

#include "ir/Attribute.h"
#include "ir/OpAttrs.h"

namespace tessel::passes {

bool runTruncateSvd(ir::Program &p, const TruncateSvdOptions &opts, TruncateSvdStats *stats) {
  // needed[v]: how many leading triplets the uses of svd result v read; -1 = all (an
  // output or a use other than a slice).
  const size_t nv = p.values.size();
  std::vector<int64_t> needed(nv, 0);
  auto isSvdResult = [&](ir::ValueId v) {
    const ir::ValueInfo &vi = p.values[v];
    return vi.def >= 0 && p.ops[static_cast<size_t>(vi.def)].kind == ir::OpKind::Svd;
  };
  for (ir::ValueId v : p.outputs)
    if (isSvdResult(v)) needed[v] = -1;
  for (const ir::Op &op : p.ops)
    for (ir::ValueId v : op.operands) {
      if (!isSvdResult(v) || needed[v] < 0) continue;
      if (op.kind != ir::OpKind::Slice) {
        needed[v] = -1;
        continue;
      }
      // The triplet axis: columns of U (result 0), the only axis of s and the rows of
      // Vt.
      const uint32_t r = p.values[v].resultIndex;
      const size_t axis = r == 0 ? 1 : 0;
      needed[v] = std::max(needed[v], ir::attr<ir::OpKind::Slice, "limit">(op)[axis]);
    }
  bool changed = false;
  for (ir::Op &op : p.ops) {
    if (op.kind != ir::OpKind::Svd) continue;
    const ir::Shape &as = p.type(op.operands[0]).shape;
    const int64_t m = as[0], n = as[1], K = std::min(m, n);
    int64_t k = 0;
    bool all = false;
    for (ir::ValueId v : op.results) {
      all |= needed[v] < 0;
      k = std::max(k, needed[v]);
    }
    if (all || k == 0 || K < opts.minSize || 100 * k > opts.maxKPercent * K) continue;
    const double eps = ir::attr<ir::OpKind::Svd, "eps">(op);
    const std::string gauge = ir::attr<ir::OpKind::Svd, "gauge">(op);
    op.kind = ir::OpKind::SvdTopk;
    op.attrs = ir::AttrList{{"k", ir::Attr::i64(k)}, {"eps", ir::Attr::f64(eps)},
                            {"gauge", ir::Attr::str(gauge)}, {"guards", ir::Attr::i64(0)}};
    p.values[op.results[0]].type = ir::Type({m, k});
    p.values[op.results[1]].type = ir::Type({k});
    p.values[op.results[2]].type = ir::Type({k, n});
    changed = true;
    if (stats) {
      ++stats->rewritten;
      stats->tripletsKept += k;
      stats->tripletsTotal += K;
    }
  }
  return changed;
}

} // namespace tessel::passes
