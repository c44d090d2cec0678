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

/// How one pairwise contraction splits the labels: those of the block (`cur`) that the
/// operand also has are summed; the rest of each side stays (in its own order).
struct LabelSplit {
  std::string summed, freeBlock, freeOperand;
};
LabelSplit splitLabels(const std::string &cur, const std::string &operand) {
  LabelSplit l;
  for (char c : cur) (has(operand, c) ? l.summed : l.freeBlock) += c;
  for (char c : operand)
    if (!has(l.summed, c)) l.freeOperand += c;
  return l;
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
  // The strides of each label of `to` in src and in dst.
  std::vector<int64_t> ss(r), ds(r), ext(r);
  int64_t total = 1;
  for (size_t i = from.size(); i-- > 0;) {
    ss[to.find(from[i])] = total;
    total *= extentOf[static_cast<unsigned char>(from[i])];
  }
  for (size_t j = r, d = 1; j-- > 0;) {
    ext[j] = extentOf[static_cast<unsigned char>(to[j])];
    ds[j] = static_cast<int64_t>(d);
    d *= static_cast<size_t>(ext[j]);
  }
  // Two labels move: b, dst's innermost, and a, src's innermost. Where they are the same
  // label, rows are copied whole; otherwise each (a, b) plane is a 2-D transpose, done in
  // tiles of 8×8 so that both sides read and write whole cache lines.
  const size_t b = r - 1, a = to.find(from.back());
  std::vector<size_t> outer;
  for (size_t j = 0; j < r; ++j)
    if (j != a && j != b) outer.push_back(j);
  std::vector<int64_t> idx(outer.size(), 0);
  const int64_t planes = total / (a == b ? ext[b] : ext[a] * ext[b]);
  int64_t so = 0, dof = 0;
  constexpr int64_t kTile = 8;
  for (int64_t q = 0; q < planes; ++q) {
    if (a == b) {
      std::copy(src + so, src + so + ext[b], dst + dof);
    } else {
      const int64_t ea = ext[a], eb = ext[b], sb = ss[b], da = ds[a];
      for (int64_t a0 = 0; a0 < ea; a0 += kTile)
        for (int64_t b0 = 0; b0 < eb; b0 += kTile) {
          const int64_t a1 = std::min(ea, a0 + kTile), b1 = std::min(eb, b0 + kTile);
          for (int64_t ia = a0; ia < a1; ++ia)
            for (int64_t ib = b0; ib < b1; ++ib) dst[dof + ia * da + ib] = src[so + ib * sb + ia];
        }
    }
    // The next plane: an odometer over the other labels.
    for (size_t t = outer.size(); t-- > 0;) {
      const size_t j = outer[t];
      so += ss[j];
      dof += ds[j];
      if (++idx[t] < ext[j]) break;
      so -= ss[j] * ext[j];
      dof -= ds[j] * ext[j];
      idx[t] = 0;
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
    const auto [summed, freeBlock, freeOperand] = splitLabels(cur, o.labels);
    // The block as it is where the summed labels are its last ones (block · operand) or
    // its first ones (operand · block); otherwise permuted to (free, summed).
    const size_t ns = summed.size();
    st.right = cur.compare(0, ns, summed) == 0 && cur.compare(cur.size() - ns, ns, summed) != 0;
    st.blockForm = st.right ? cur : freeBlock + summed;
    st.out = st.right ? freeOperand + freeBlock : freeBlock + freeOperand;
    st.summed = extent(summed, 1);
    st.freeOperand = extent(freeOperand, 1);
    st.operandForm.resize(static_cast<size_t>(st.summed * st.freeOperand));
    permuteLabeled(o.data, o.labels, st.right ? freeOperand + summed : summed + freeOperand, dim_,
                   st.operandForm.data());
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
    const auto [summed, freeBlock, freeOperand] = splitLabels(cur, operands_[static_cast<size_t>(i)].labels);
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
  // The buffers only grow (a resize that shrinks and grows again would zero the tail).
  auto room = [](std::vector<double> &v, int64_t n) -> double * {
    if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
    return v.data();
  };
  const double *src = in;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step &st = s.steps[i];
    const double *blk = src;
    if (st.blockForm != st.in) {
      double *perm = room(src == bufA_.data() ? bufB_ : bufA_, extent(st.in, p));
      permuteLabeled(src, st.in, st.blockForm, ext, perm);
      blk = perm;
    }
    // Block (free × summed) · operand (summed × free'), or operand (free' × summed) ·
    // block (summed × free).
    const int64_t K = st.summed, F = extent(st.blockForm, p) / K, N = st.freeOperand;
    const bool last = i + 1 == s.steps.size();
    double *dst = last && st.out == s.end ? out : room(blk == bufA_.data() ? bufB_ : bufA_, F * N);
    const auto iK = static_cast<int>(K), iF = static_cast<int>(F), iN = static_cast<int>(N);
    if (st.right)
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, iN, iF, iK, 1.0, st.operandForm.data(), iK,
                  blk, iF, 0.0, dst, iF);
    else
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, iF, iN, iK, 1.0, blk, iK,
                  st.operandForm.data(), iN, 0.0, dst, iN);
    src = dst;
  }
  if (src != out) permuteLabeled(src, s.steps.back().out, s.end, ext, out);
}

void EinsumOperator::apply(const double *X, int64_t p, double *Y) const { run(applySeq_, X, p, Y); }

void EinsumOperator::applyTransposed(const double *Y, int64_t p, double *Z) const {
  run(transSeq_, Y, p, Z);
}

} // namespace tessel::rt
