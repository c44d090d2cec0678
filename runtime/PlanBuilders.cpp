//===- runtime/PlanBuilders.cpp - Kernel plans from shapes (see PlanBuilders.h) ===//
#include "runtime/PlanBuilders.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tessel::rt::prep {

void coalesce(std::vector<int64_t> &shape, std::vector<int64_t> &stride) {
  std::vector<int64_t> s2, st2;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!s2.empty() && st2.back() == stride[d] * shape[d]) {
      s2.back() *= shape[d];
      st2.back() = stride[d];
    } else {
      s2.push_back(shape[d]);
      st2.push_back(stride[d]);
    }
  }
  if (s2.empty()) {
    s2.push_back(1);
    st2.push_back(0);
  }
  shape = std::move(s2);
  stride = std::move(st2);
}

CopyPlan makeCopy(std::vector<int64_t> shape, std::vector<int64_t> stride, int64_t base) {
  CopyPlan c;
  bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
  coalesce(shape, stride);
  if (empty) {
    shape = {0};
    stride = {0};
  }
  c.shape = std::move(shape);
  c.stride = std::move(stride);
  c.base = base;
  c.rows = 1;
  for (size_t d = 0; d + 1 < c.shape.size(); ++d) c.rows *= c.shape[d];
  size_t r = c.shape.size();
  int64_t inner = std::max<int64_t>(1, c.shape.back());
  c.perChunk = std::max<int64_t>(1, kChunkElems / inner);
  // Tile mode: the last output dim reads with a stride, another dim contiguously.
  if (!empty && r >= 2 && c.stride.back() != 1 && c.stride.back() != 0 && c.shape.back() >= 4) {
    for (size_t q = 0; q + 1 < r; ++q)
      if (c.stride[q] == 1 && c.shape[q] >= 4) c.tileDim = static_cast<int>(q);
  }
  if (c.tileDim >= 0) {
    std::vector<int64_t> outStride(r, 1);
    for (size_t d = r - 1; d-- > 0;) outStride[d] = outStride[d + 1] * c.shape[d + 1];
    for (size_t d = 0; d + 1 < r; ++d) {
      if (static_cast<int>(d) == c.tileDim) continue;
      c.outerShape.push_back(c.shape[d]);
      c.outerIn.push_back(c.stride[d]);
      c.outerOut.push_back(outStride[d]);
      c.outerCount *= c.shape[d];
    }
    c.outStrideTile = outStride[c.tileDim];
    c.perChunk = std::max<int64_t>(1, kChunkElems / (c.shape[c.tileDim] * c.shape.back()));
  }
  return c;
}

int32_t chunksFor(int64_t total, int64_t per) {
  if (total <= 0) return 1;
  return static_cast<int32_t>((total + per - 1) / per);
}

int32_t copyChunks(const CopyPlan &c) {
  return chunksFor(c.tileDim >= 0 ? c.outerCount : c.rows, c.perChunk);
}

bool isMemoryOrder(const std::vector<int64_t> &order, llvm::ArrayRef<int64_t> shape) {
  int64_t last = -1;
  for (int64_t d : order) {
    if (shape[d] == 1) continue;
    if (d < last) return false;
    last = d;
  }
  return true;
}

std::vector<int64_t> GemmForm::lhsOrder() const {
  std::vector<int64_t> o(lb);
  o.insert(o.end(), lf.begin(), lf.end());
  o.insert(o.end(), lc.begin(), lc.end());
  return o;
}

std::vector<int64_t> GemmForm::rhsOrder() const {
  std::vector<int64_t> o(rb);
  o.insert(o.end(), rc.begin(), rc.end());
  o.insert(o.end(), rf.begin(), rf.end());
  return o;
}

GemmForm gemmForm(const ir::Type &lt, const ir::Type &rtt, const std::vector<int64_t> &lb,
                  const std::vector<int64_t> &rb, const std::vector<int64_t> &lc,
                  const std::vector<int64_t> &rc) {
  auto freeDims = [](int rank, const std::vector<int64_t> &b, const std::vector<int64_t> &c) {
    std::vector<int64_t> f;
    for (int d = 0; d < rank; ++d)
      if (std::find(b.begin(), b.end(), d) == b.end() && std::find(c.begin(), c.end(), d) == c.end())
        f.push_back(d);
    return f;
  };
  const auto lf = freeDims(lt.rank(), lb, lc), rf = freeDims(rtt.rank(), rb, rc);
  const size_t nc = lc.size();
  std::vector<std::vector<size_t>> orders(3, std::vector<size_t>(nc));
  for (auto &o : orders) std::iota(o.begin(), o.end(), 0);
  std::sort(orders[1].begin(), orders[1].end(), [&](size_t x, size_t y) { return lc[x] < lc[y]; });
  std::sort(orders[2].begin(), orders[2].end(), [&](size_t x, size_t y) { return rc[x] < rc[y]; });
  GemmForm best;
  for (const auto &o : orders) {
    GemmForm c;
    c.lb = lb, c.lf = lf, c.rb = rb, c.rf = rf;
    for (size_t k : o) {
      c.lc.push_back(lc[k]);
      c.rc.push_back(rc[k]);
    }
    std::vector<int64_t> lTrans(lb);
    lTrans.insert(lTrans.end(), c.lc.begin(), c.lc.end());
    lTrans.insert(lTrans.end(), lf.begin(), lf.end());
    std::vector<int64_t> rTrans(rb);
    rTrans.insert(rTrans.end(), rf.begin(), rf.end());
    rTrans.insert(rTrans.end(), c.rc.begin(), c.rc.end());
    if (isMemoryOrder(c.lhsOrder(), lt.shape)) c.lOk = true;
    else if (isMemoryOrder(lTrans, lt.shape)) c.lOk = c.transA = true;
    if (isMemoryOrder(c.rhsOrder(), rtt.shape)) c.rOk = true;
    else if (isMemoryOrder(rTrans, rtt.shape)) c.rOk = c.transB = true;
    c.cost = (c.lOk ? 0 : lt.numel()) + (c.rOk ? 0 : rtt.numel());
    if (best.cost < 0 || c.cost < best.cost) best = c;
  }
  return best;
}

void fillGemmShape(GemmPlan &g, const ir::Type &lt, const ir::Type &rtt, const GemmForm &f) {
  for (int64_t d : f.lb) g.batch *= lt.shape[d];
  g.M = 1;
  for (int64_t d : f.lf) g.M *= lt.shape[d];
  g.N = 1;
  for (int64_t d : f.rf) g.N *= rtt.shape[d];
  g.K = 1;
  for (int64_t d : f.lc) g.K *= lt.shape[d];
  g.transA = f.transA;
  g.transB = f.transB;
  g.lda = std::max<int64_t>(1, g.transA ? g.M : g.K);
  g.ldb = std::max<int64_t>(1, g.transB ? g.K : g.N);
  g.strideA = g.M * g.K;
  g.strideB = g.K * g.N;
  g.strideC = g.M * g.N;
}

int32_t chunkGemm(GemmPlan &g) {
  const double perBatch = 2.0 * static_cast<double>(g.M) * static_cast<double>(g.N) * static_cast<double>(g.K);
  g.flops = perBatch * static_cast<double>(g.batch);
  if (g.flops < kGemmSplitFlops || perBatch < kGemmChunkFlops) {
    // Whole batches per chunk.
    int64_t bpc = g.flops < kGemmSplitFlops
                      ? std::max<int64_t>(1, g.batch)
                      : std::max<int64_t>(1, static_cast<int64_t>(kGemmChunkFlops / std::max(1.0, perBatch)));
    g.batchesPerChunk = bpc;
    return chunksFor(g.batch, bpc);
  }
  const int64_t want = std::clamp<int64_t>(std::llround(perBatch / kGemmChunkFlops), 1, kGemmMaxChunks);
  auto ceilDiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  auto side = [&](int64_t n, int64_t parts) {
    return std::min<int64_t>(std::max<int64_t>(1, n), (ceilDiv(n, parts) + 7) / 8 * 8);
  };
  int64_t rowParts = 1, colParts = 1;
  while (rowParts * 2 <= want && ceilDiv(g.M, rowParts * 2) >= kGemmMinStripRows) rowParts *= 2;
  const bool grid = rowParts < 4;
  while (grid && rowParts * colParts * 2 <= want) {
    const int64_t tm = ceilDiv(g.M, rowParts), tn = ceilDiv(g.N, colParts);
    if (tm >= tn && tm >= 32) rowParts *= 2;
    else if (tn >= 32) colParts *= 2;
    else if (tm >= 32) rowParts *= 2;
    else break;
  }
  g.rowsPerChunk = side(g.M, rowParts);
  g.colsPerChunk = side(g.N, colParts);
  g.colChunks = chunksFor(g.N, g.colsPerChunk);
  g.chunksPerBatch = chunksFor(g.M, g.rowsPerChunk) * g.colChunks;
  return static_cast<int32_t>(g.batch * g.chunksPerBatch);
}


} // namespace tessel::rt::prep
