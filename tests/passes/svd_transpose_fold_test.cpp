// svd / svd_topk of a transposed tensor computed on the tensor's own layout
// (passes/SvdTransposeFold.h).
#include <doctest/doctest.h>

#include <cmath>

#include "ir/Builder.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/SvdTransposeFold.h"
#include "runtime/Runtime.h"
#include "pass_testutil.h"

using namespace tessel;
using namespace tessel::ir;
using namespace tessel::passes;
using namespace passtest;

namespace {

/// p: one svd_topk{k} (or svd when k = 0) of reshape(transpose(x, perm), [m, n]),
/// outputs U, s, Vt named "U", "s", "Vt".
Program svdOfTranspose(const Shape &xs, const I64List &perm, int64_t m, int64_t n, int64_t k) {
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type(xs));
  ValueId M = b.reshape(b.transpose(x, perm), {m, n});
  auto r = k > 0 ? b.svdTopk(M, k) : b.svd(M);
  for (const char *name : {"U", "s", "Vt"}) {
    const size_t i = p.outputs.size();
    p.setName(r[i], name);
    p.addOutput(r[i]);
  }
  return p;
}

/// The largest transpose in q, in elements (0 if none).
int64_t largestTranspose(const Program &q) {
  int64_t most = 0;
  for (const Op &op : q.ops)
    if (op.kind == OpKind::Transpose) most = std::max(most, q.type(op.results[0]).numel());
  return most;
}

/// Runs the pass on a copy of p and checks that the result verifies, keeps the output
/// names, and gives the same singular values and, column by column up to one sign,
/// the same singular vectors (the inputs are random, so the triplets are unique up to
/// that sign).
Program folded(const Program &p, bool expectChange, SvdTransposeFoldStats *stats = nullptr) {
  Program q = p;
  CHECK(runSvdTransposeFold(q, SvdTransposeFoldOptions{}, stats) == expectChange);
  INFO(printProgram(q));
  CHECK(verify(q).empty());
  REQUIRE(q.outputs.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(q.outputName(i) == p.outputName(i));
  std::vector<Tensor> ins = nonzeroRandomInputs(p, 11);
  auto x = rt::evaluateReference(p, ins), y = rt::evaluateReference(q, ins);
  REQUIRE(x.size() == 3);
  REQUIRE(y.size() == 3);
  for (size_t i = 0; i < 3; ++i) REQUIRE(x[i].type == y[i].type);
  const int64_t m = x[0].type.shape[0], k = x[0].type.shape[1], n = x[2].type.shape[1];
  const double s0 = x[1].data[0];
  for (int64_t j = 0; j < k; ++j) {
    INFO("triplet " << j);
    CHECK(std::abs(x[1].data[size_t(j)] - y[1].data[size_t(j)]) <= 1e-13 * s0);
    double dot = 0;
    for (int64_t i = 0; i < m; ++i) dot += x[0].data[size_t(i * k + j)] * y[0].data[size_t(i * k + j)];
    const double sign = dot < 0 ? -1.0 : 1.0;
    double du = 0, dv = 0;
    for (int64_t i = 0; i < m; ++i)
      du = std::max(du, std::abs(x[0].data[size_t(i * k + j)] - sign * y[0].data[size_t(i * k + j)]));
    for (int64_t i = 0; i < n; ++i)
      dv = std::max(dv, std::abs(x[2].data[size_t(j * n + i)] - sign * y[2].data[size_t(j * n + i)]));
    CHECK(du <= 1e-11);
    CHECK(dv <= 1e-11);
  }
  return q;
}

} // namespace

TEST_CASE("svd-transpose-fold: row axes trailing (the TRG Mb axis reversal): svd of the "
          "plain reshape, U and Vt swapped and permuted") {
  // x[a0,a1,a2,a3], M[(a3,a2),(a1,a0)] = reshape(x, [12, 30])ᵀ with rows and columns permuted.
  Program p = svdOfTranspose({3, 4, 5, 6}, {3, 2, 1, 0}, 30, 12, 3);
  SvdTransposeFoldStats st;
  Program q = folded(p, true, &st);
  CHECK(st.folded == 1);
  CHECK(st.elementsSaved == 30 * 12 - (30 + 12) * 3);
  // The svd_topk reads reshape(x, [12, 30]); only the k-column factors are transposed.
  for (const Op &op : q.ops)
    if (op.kind == OpKind::SvdTopk) {
      const Op &r = q.ops[size_t(q.values[op.operands[0]].def)];
      CHECK(r.kind == OpKind::Reshape);
      CHECK(r.operands[0] == q.lookup("x"));
      CHECK(q.type(op.operands[0]) == Type({12, 30}));
    }
  CHECK(largestTranspose(q) == 30 * 3);
  CHECK(countOps(q, OpKind::Transpose) == 2);
}

TEST_CASE("svd-transpose-fold: row axes leading, each group permuted within itself") {
  Program q = folded(svdOfTranspose({3, 4, 5, 6}, {1, 0, 3, 2}, 12, 30, 3), true);
  CHECK(largestTranspose(q) == 30 * 3);
  // Groups in order but swapped: only the matrix transpose, no factor transposes needed
  // beyond U <-> Vt (2 of them).
  Program r = folded(svdOfTranspose({3, 4, 5, 6}, {2, 3, 0, 1}, 30, 12, 2), true);
  CHECK(countOps(r, OpKind::Transpose) == 2);
  CHECK(largestTranspose(r) == 30 * 2);
  // Row axes leading and in order: U is the new svd's own result, only Vt is permuted.
  Program u = folded(svdOfTranspose({3, 4, 5, 6}, {0, 1, 3, 2}, 12, 30, 3), true);
  CHECK(countOps(u, OpKind::Transpose) == 1);
  // Rank 3: one trailing row axis, two trailing row axes, two leading ones.
  folded(svdOfTranspose({2, 3, 7}, {2, 0, 1}, 7, 6, 2), true);
  folded(svdOfTranspose({2, 3, 7}, {1, 2, 0}, 21, 2, 1), true);
  folded(svdOfTranspose({2, 3, 7}, {1, 0, 2}, 6, 7, 2), true);
  // Size-1 axes: the split is found past a prefix that is too short.
  folded(svdOfTranspose({1, 4, 5, 6}, {3, 2, 1, 0}, 30, 4, 1), true);
  folded(svdOfTranspose({3, 1, 5, 6}, {1, 0, 3, 2}, 3, 30, 1), true);
}

TEST_CASE("svd-transpose-fold: a folded svd's factor feeds another folded svd") {
  // svd_topk of the axis reversal of x, then svd_topk of Uᵀ (a 2-d transpose: trailing
  // row axis). Both fold; the second reads the first's new, permuted U.
  Program p;
  Builder b(p);
  ValueId x = p.addInput("x", Type({3, 4, 5, 6}));
  auto r1 = b.svdTopk(b.reshape(b.transpose(x, {3, 2, 1, 0}), {30, 12}), 3);
  auto r2 = b.svdTopk(b.reshape(b.transpose(r1[0], {1, 0}), {3, 30}), 1);
  p.setName(r1[1], "s1");
  p.setName(r2[1], "s2");
  p.addOutput(r1[1]);
  p.addOutput(r2[1]);
  Program q = p;
  SvdTransposeFoldStats st;
  CHECK(runSvdTransposeFold(q, SvdTransposeFoldOptions{}, &st));
  INFO(printProgram(q));
  CHECK(st.folded == 2);
  CHECK(verify(q).empty());
  CHECK(largestTranspose(q) == 30 * 3);
  // Singular values do not see the signs of the first svd's vectors.
  std::vector<Tensor> ins = nonzeroRandomInputs(p, 3);
  auto x0 = rt::evaluateReference(p, ins), x1 = rt::evaluateReference(q, ins);
  REQUIRE(x1.size() == 2);
  CHECK(q.outputName(0) == "s1");
  CHECK(q.outputName(1) == "s2");
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < x0[i].data.size(); ++j)
      CHECK(std::abs(x0[i].data[j] - x1[i].data[j]) <= 1e-13 * x0[i].data[0]);
}

TEST_CASE("svd-transpose-fold: what stays") {
  // Row axes {2, 1} are neither the leading nor the trailing axes: the copy is needed.
  folded(svdOfTranspose({3, 4, 5, 6}, {2, 1, 0, 3}, 20, 18, 3), false);
  // A full svd: permuting its m×K and K×n factors moves more than the operand.
  folded(svdOfTranspose({3, 4, 5, 6}, {3, 2, 1, 0}, 30, 12, 0), false);
  // The transpose has another use: the copy stays, so folding would only add work.
  Program p = svdOfTranspose({3, 4, 5, 6}, {3, 2, 1, 0}, 30, 12, 3);
  REQUIRE(p.ops[0].kind == OpKind::Transpose);
  p.addOutput(p.ops[0].results[0]);
  Program q = p;
  CHECK_FALSE(runSvdTransposeFold(q, SvdTransposeFoldOptions{}));
  CHECK(printProgram(q) == printProgram(p));
}
