//===- runtime/EinsumOperator.cpp - A reshaped einsum as an implicit matrix ------===//
#include "runtime/EinsumOperator.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <cblas.h>

#include "ir/Diagnostics.h"

namespace tessel::rt {
namespace {

constexpr char kBatch = '#';

bool has(const std::string &s, char c) { return s.find(c) != std::string::npos; }

/// The extent of `label` in the operands (0 where no operand has it).
int64_t labelExtent(const std::vector<EinsumOperand> &ops, char label) {
  for (const EinsumOperand &o : ops)
    for (size_t i = 0; i < o.labels.size() && i < o.shape.size(); ++i)
      if (o.labels[i] == label) return o.shape[i];
  return 0;
}

int64_t sizeOf(const std::vector<EinsumOperand> &ops, const std::string &labels) {
  int64_t e = 1;
  for (char c : labels) e *= labelExtent(ops, c);
  return e;
}

std::string describe(const std::vector<EinsumOperand> &ops, const std::string &rows,
                     const std::string &cols) {
  std::string s;
  for (size_t i = 0; i < ops.size(); ++i) s += (i ? "," : "") + ops[i].labels;
  return s + "->" + rows + "|" + cols;
}

} // namespace

void permuteLabeled(const double *src, const std::string &from, const std::string &to,
                    const std::vector<int64_t> &extentOf, double *dst) {
  const size_t r = to.size();
  if (r == 0) {
    dst[0] = src[0];
    return;
  }
  // srcStride[j]: the stride in src of the label at to[j].
  std::vector<int64_t> srcStride(r), ext(r);
  int64_t s = 1;
  for (size_t i = from.size(); i-- > 0;) {
    srcStride[to.find(from[i])] = s;
    s *= extentOf[static_cast<unsigned char>(from[i])];
  }
  for (size_t j = 0; j < r; ++j) ext[j] = extentOf[static_cast<unsigned char>(to[j])];
  const int64_t inner = ext[r - 1], innerStride = srcStride[r - 1];
  std::vector<int64_t> idx(r, 0);
  int64_t at = 0, total = s;
  for (int64_t o = 0; o < total; o += inner) {
    const double *p = src + at;
    if (innerStride == 1) {
      std::copy(p, p + inner, dst + o);
    } else {
      for (int64_t x = 0; x < inner; ++x) dst[o + x] = p[x * innerStride];
    }
    // Advance the outer labels (an odometer over to[0 .. r−2]).
    for (size_t j = r - 1; j-- > 0;) {
      at += srcStride[j];
      if (++idx[j] < ext[j]) break;
      at -= srcStride[j] * ext[j];
      idx[j] = 0;
    }
  }
}

EinsumOperator::EinsumOperator(std::vector<EinsumOperand> operands, std::string rowLabels,
                               std::string colLabels, std::vector<int> applyOrder,
                               std::vector<int> transposedOrder)
    : LinearOperator(sizeOf(operands, rowLabels), sizeOf(operands, colLabels)),
      operands_(std::move(operands)), rows_(std::move(rowLabels)), cols_(std::move(colLabels)),
      dim_(256, 0) {
  const std::string spec = describe(operands_, rows_, cols_);
  auto fail = [&](const std::string &why) {
    throw Error("error: einsum operator " + spec + ": " + why);
  };
  if (operands_.empty()) fail("no operands");
  const std::string out = rows_ + cols_;
  if (has(out, kBatch)) fail("'#' is the batch label");
  for (size_t i = 0; i < out.size(); ++i)
    if (out.find(out[i]) != i) fail(std::string("output label '") + out[i] + "' appears twice");
  std::vector<int> count(256, 0);
  normBound_ = 1;
  for (const EinsumOperand &o : operands_) {
    if (o.labels.size() != o.shape.size())
      fail("operand " + o.labels + " has " + std::to_string(o.shape.size()) + " axes");
    double ss = 0;
    int64_t size = 1;
    for (size_t i = 0; i < o.labels.size(); ++i) {
      const auto c = static_cast<unsigned char>(o.labels[i]);
      if (o.labels[i] == kBatch) fail("'#' is the batch label");
      if (o.labels.find(o.labels[i]) != i) fail("a label repeated in one operand (a trace)");
      if (o.shape[i] < 1) fail("an axis of extent < 1");
      if (dim_[c] != 0 && dim_[c] != o.shape[i])
        fail(std::string("label '") + o.labels[i] + "' has extents " + std::to_string(dim_[c]) +
             " and " + std::to_string(o.shape[i]));
      dim_[c] = o.shape[i];
      ++count[c];
      size *= o.shape[i];
    }
    for (int64_t i = 0; i < size; ++i) ss += o.data[i] * o.data[i];
    normBound_ *= std::sqrt(ss);
  }
  for (int c = 0; c < 256; ++c) {
    const bool output = has(out, static_cast<char>(c));
    if (count[c] == 0 && output) fail(std::string("output label '") + char(c) + "' is no operand's");
    if (count[c] == 1 && !output)
      fail(std::string("label '") + char(c) + "' is summed inside one operand");
    if (count[c] == 2 && output)
      fail(std::string("label '") + char(c) + "' of two operands is an output label");
    if (count[c] > 2) fail(std::string("label '") + char(c) + "' joins more than two operands");
  }
  applySeq_ = plan(applyOrder.empty() ? cheapestOrder(cols_, 8) : applyOrder, cols_, rows_);
  transSeq_ = plan(transposedOrder.empty() ? cheapestOrder(rows_, 8) : transposedOrder, rows_, cols_);
}

int64_t EinsumOperator::extent(const std::string &labels, int64_t p) const {
  int64_t e = 1;
  for (char c : labels) e *= c == kBatch ? p : dim_[static_cast<unsigned char>(c)];
  return e;
}

EinsumOperator::Sequence EinsumOperator::plan(const std::vector<int> &order, const std::string &from,
                                              const std::string &to) const {
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> all(operands_.size());
  std::iota(all.begin(), all.end(), 0);
  if (sorted != all)
    throw Error("error: einsum operator " + describe(operands_, rows_, cols_) +
                ": a product's order is not a permutation of the operands");
  Sequence s;
  s.order = order;
  s.start = from + kBatch;
  s.end = to + kBatch;
  std::string cur = s.start;
  for (size_t i = 0; i < order.size(); ++i) {
    const EinsumOperand &o = operands_[static_cast<size_t>(order[i])];
    Step st;
    st.operand = order[i];
    st.in = cur;
    std::string summed, freeBlock, freeOperand;
    for (char c : cur) (has(o.labels, c) ? summed : freeBlock) += c;
    for (char c : o.labels)
      if (!has(summed, c)) freeOperand += c;
    st.blockForm = freeBlock + summed;
    st.out = freeBlock + freeOperand;
    st.summed = extent(summed, 1);
    st.freeOperand = extent(freeOperand, 1);
    st.operandForm.resize(static_cast<size_t>(st.summed * st.freeOperand));
    permuteLabeled(o.data, o.labels, summed + freeOperand, dim_, st.operandForm.data());
    cur = st.out;
    s.steps.push_back(std::move(st));
  }
  // Every label of the block but the target's was summed (the constructor's checks).
  std::string a = cur, b = s.end;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  if (a != b)
    throw Error("error: einsum operator " + describe(operands_, rows_, cols_) +
                ": a product ends with labels " + cur + ", not " + s.end);
  return s;
}

int64_t EinsumOperator::flops(const std::vector<int> &order, const std::string &from, int64_t p) const {
  // The steps' sizes without building the permuted operands.
  std::string cur = from + kBatch;
  int64_t total = 0;
  for (int i : order) {
    const EinsumOperand &o = operands_[static_cast<size_t>(i)];
    std::string summed, freeBlock, freeOperand;
    for (char c : cur) (has(o.labels, c) ? summed : freeBlock) += c;
    for (char c : o.labels)
      if (!has(summed, c)) freeOperand += c;
    total += extent(freeBlock, p) * extent(summed, p) * extent(freeOperand, p);
    cur = freeBlock + freeOperand;
  }
  return total;
}

std::vector<int> EinsumOperator::cheapestOrder(const std::string &from, int64_t p) const {
  std::vector<int> order(operands_.size()), best;
  std::iota(order.begin(), order.end(), 0);
  int64_t bestFlops = -1;
  do {
    const int64_t f = flops(order, from, p);
    if (bestFlops < 0 || f < bestFlops) bestFlops = f, best = order;
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

void EinsumOperator::run(const Sequence &s, const double *in, int64_t p, double *out) const {
  std::vector<int64_t> ext = dim_;
  ext[static_cast<unsigned char>(kBatch)] = p;
  const double *src = in;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step &st = s.steps[i];
    const double *blk = src;
    if (st.blockForm != st.in) {
      std::vector<double> &perm = src == bufA_.data() ? bufB_ : bufA_;
      perm.resize(static_cast<size_t>(extent(st.in, p)));
      permuteLabeled(src, st.in, st.blockForm, ext, perm.data());
      blk = perm.data();
    }
    const int64_t M = extent(st.blockForm, p) / st.summed, K = st.summed, N = st.freeOperand;
    const bool last = i + 1 == s.steps.size();
    double *dst;
    if (last && st.out == s.end) {
      dst = out;
    } else {
      std::vector<double> &o = blk == bufA_.data() ? bufB_ : bufA_;
      o.resize(static_cast<size_t>(M * N));
      dst = o.data();
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(M), static_cast<int>(N),
                static_cast<int>(K), 1.0, blk, static_cast<int>(K), st.operandForm.data(),
                static_cast<int>(N), 0.0, dst, static_cast<int>(N));
    src = dst;
  }
  if (src != out) permuteLabeled(src, s.steps.back().out, s.end, ext, out);
}

void EinsumOperator::apply(const double *X, int64_t p, double *Y) const { run(applySeq_, X, p, Y); }

void EinsumOperator::applyTransposed(const double *Y, int64_t p, double *Z) const {
  run(transSeq_, Y, p, Z);
}

} // namespace tessel::rt
