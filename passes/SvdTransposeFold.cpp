//===- passes/SvdTransposeFold.cpp - svd of a transposed tensor (see the header) ---===//
#include "passes/SvdTransposeFold.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <vector>

#include "ir/OpAttrs.h"
#include "ir/Builder.h"
#include "passes/Rewrite.h"

namespace tessel::passes {

using namespace tessel::ir;

namespace {

/// svd(reshape(transpose(x, perm), [m, n])) whose row axes perm[0:rows] are the
/// leading axes of x (transposed = false: the operand is P_r·X2·P_c) or its trailing
/// axes (transposed = true: P_r·X2ᵀ·P_c).
struct Match {
  size_t reshape = 0, transpose = 0; ///< op indices
  ValueId x = kNoValue;
  I64List perm;
  size_t rows = 0;
  bool transposed = false;
};

bool isIdentity(const I64List &perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != int64_t(i)) return false;
  return true;
}

/// True if `axes` holds exactly first, first + 1, …, first + axes.size() − 1.
bool isRange(llvm::ArrayRef<int64_t> axes, int64_t first) {
  std::vector<int64_t> s(axes.begin(), axes.end());
  std::sort(s.begin(), s.end());
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] != first + int64_t(i)) return false;
  return true;
}

std::optional<Match> match(const Program &p, const Op &svd, const std::vector<int> &uses) {
  if (svd.kind != OpKind::Svd && svd.kind != OpKind::SvdTopk) return std::nullopt;
  const ValueId mv = svd.operands[0];
  const int32_t rd = p.values[mv].def;
  if (rd < 0 || uses[mv] != 1) return std::nullopt; // an output counts as a use
  const Op &reshape = p.ops[size_t(rd)];
  if (reshape.kind != OpKind::Reshape || reshape.remat != svd.remat) return std::nullopt;
  const ValueId tv = reshape.operands[0];
  const int32_t td = p.values[tv].def;
  if (td < 0 || uses[tv] != 1) return std::nullopt;
  const Op &tr = p.ops[size_t(td)];
  if (tr.kind != OpKind::Transpose || tr.remat != svd.remat) return std::nullopt;
  const I64List &perm = ir::attr<OpKind::Transpose, "perm">(tr);
  if (perm.size() < 2 || isIdentity(perm)) return std::nullopt;

  const Shape &ms = p.type(mv).shape, &xs = p.type(tr.operands[0]).shape;
  const int64_t m = ms[0], n = ms[1], k = p.type(svd.results[0]).shape[1];
  // Permuting U (m×k) and Vt (k×n) must move fewer elements than the copy it saves.
  if (!((m + n) * k < m * n)) return std::nullopt;
  const int64_t r = int64_t(perm.size());
  int64_t rowsNumel = 1;
  for (int64_t rows = 1; rows < r; ++rows) {
    rowsNumel *= xs[size_t(perm[size_t(rows - 1)])];
    if (rowsNumel != m) continue;
    const llvm::ArrayRef<int64_t> R(perm.data(), size_t(rows));
    Match mt{size_t(rd), size_t(td), tr.operands[0], perm, size_t(rows), false};
    if (isRange(R, 0)) return mt;
    if (isRange(R, r - rows)) {
      mt.transposed = true;
      return mt;
    }
  }
  return std::nullopt;
}

/// reshape(transpose(reshape(v, split), perm), result), without the transpose when
/// perm is the identity.
ValueId permuteFactor(Builder &b, ValueId v, const I64List &split, const I64List &perm,
                      const Shape &result) {
  if (isIdentity(perm)) return v;
  return b.reshape(b.transpose(b.reshape(v, split), perm), result);
}

/// The new {U, s, Vt} of `svd` (whose operand `mt` describes), built at the builder's
/// position.
llvm::SmallVector<ValueId, 3> rewrite(Builder &b, const Op &svd, const Match &mt) {
  Program &p = b.program();
  const Shape xs = p.type(mt.x).shape, us = p.type(svd.results[0]).shape,
              vs = p.type(svd.results[2]).shape;
  const int64_t m = us[0], n = vs[1], k = us[1];
  const int64_t r = int64_t(xs.size()), rows = int64_t(mt.rows);
  // The leading axes of x (q of them) are the rows of X2.
  const int64_t q = mt.transposed ? r - rows : rows;
  I64List lead(xs.begin(), xs.begin() + q), trail(xs.begin() + q, xs.end());
  const ValueId x2 = b.reshape(mt.x, {mt.transposed ? n : m, mt.transposed ? m : n});
  auto res = b.createMulti(svd.kind, {x2}, svd.attrs);
  const ValueId U2 = res[0], s = res[1], Vt2 = res[2];
  I64List leadK(lead), kTrail{k};
  leadK.push_back(k);
  kTrail.append(trail.begin(), trail.end());
  I64List permU, permV;
  if (!mt.transposed) {
    // U[(x_R…), j] = U2[(x_0…x_{q−1}), j];  Vt[j, (x_C…)] = Vt2[j, (x_q…)].
    for (int64_t i = 0; i < rows; ++i) permU.push_back(mt.perm[size_t(i)]);
    permU.push_back(rows);
    permV.push_back(0);
    for (int64_t i = rows; i < r; ++i) permV.push_back(1 + mt.perm[size_t(i)] - q);
    return {permuteFactor(b, U2, leadK, permU, {m, k}), s,
            permuteFactor(b, Vt2, kTrail, permV, {k, n})};
  }
  // X2 = reshape(x, [n, m]) = U2·diag(s)·Vt2, M = P_r·X2ᵀ·P_c:
  // U[(x_R…), j] = Vt2[j, (x_q…)];  Vt[j, (x_C…)] = U2[(x_0…x_{q−1}), j].
  for (int64_t i = 0; i < rows; ++i) permU.push_back(1 + mt.perm[size_t(i)] - q);
  permU.push_back(0);
  permV.push_back(q);
  for (int64_t i = rows; i < r; ++i) permV.push_back(mt.perm[size_t(i)]);
  return {permuteFactor(b, Vt2, kTrail, permU, {m, k}), s,
          permuteFactor(b, U2, leadK, permV, {k, n})};
}

} // namespace

bool runSvdTransposeFold(Program &p, const SvdTransposeFoldOptions &, SvdTransposeFoldStats *stats) {
  const std::vector<int> uses = useCounts(p);
  std::vector<std::optional<Match>> matches(p.ops.size());
  bool any = false;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    matches[i] = match(p, p.ops[i], uses);
    any |= matches[i].has_value();
  }
  if (!any) return false;

  std::vector<Op> old = std::move(p.ops);
  p.ops.clear();
  std::vector<ValueId> repl(p.values.size());
  std::iota(repl.begin(), repl.end(), ValueId(0));
  std::vector<size_t> newIndex(old.size());
  std::vector<bool> dead;
  Builder b(p);
  for (size_t i = 0; i < old.size(); ++i) {
    Op &op = old[i];
    for (ValueId &v : op.operands) v = repl[v];
    if (matches[i]) {
      Match mt = *matches[i];
      mt.x = repl[mt.x]; // x may be a factor of an svd folded above
      b.setOrigin(op);
      const size_t first = p.ops.size();
      const auto res = rewrite(b, op, mt);
      for (size_t j = first; j < p.ops.size(); ++j) p.ops[j].pos = op.pos;
      for (size_t j = 0; j < res.size(); ++j) redirectValue(p, repl, op.results[j], res[j]);
      dead.resize(p.ops.size() + 1, false);
      dead[newIndex[mt.reshape]] = dead[newIndex[mt.transpose]] = dead[p.ops.size()] = true;
      if (stats) {
        const Shape &us = p.type(op.results[0]).shape, &vs = p.type(op.results[2]).shape;
        ++stats->folded;
        stats->elementsSaved += us[0] * vs[1] - (us[0] + vs[1]) * us[1];
      }
    }
    newIndex[i] = p.ops.size();
    p.ops.push_back(std::move(op));
  }
  dead.resize(p.ops.size(), false);
  eraseOpsAndCompact(p, dead);
  return true;
}

} // namespace tessel::passes
