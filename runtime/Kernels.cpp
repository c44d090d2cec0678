//===- runtime/Kernels.cpp - CPU kernels: elementwise, copies, reductions, GEMM, SVD
//
// Every kernel works on one chunk. Chunk boundaries come from the plan (shapes
// only), and within a chunk the arithmetic order is fixed, so the result of a
// program does not depend on how many threads run it or which thread runs a chunk.
//
//===----------------------------------------------------------------------===//
#include "runtime/Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <cblas.h>
#include <lapacke.h>

#include "ir/Diagnostics.h"
#include "runtime/Factorizations.h"
#include "runtime/VecMath.h"

namespace tessel::rt {
namespace {

using ir::OpKind;

inline std::pair<int64_t, int64_t> chunkRange(int64_t total, int64_t per, int32_t chunk) {
  int64_t b = static_cast<int64_t>(chunk) * per;
  return {b, std::min(total, b + per)};
}

template <typename F> inline void mapUnary(double *o, const double *a, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
}
template <typename F> inline void mapBinary(double *o, const double *a, const double *c, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], c[i]);
}

/// o[i] = op(x[i], y[i], z[i]) for i < n (y, z only for the ops that read them).
/// Returns false for an op without an elementwise kernel. Compiled twice (below): for
/// the baseline ISA and with AVX2 (4 lanes), one instantiation each (kIsa only keeps
/// them apart); every op here is exactly rounded IEEE arithmetic or a selection,
/// without contraction into FMA, so both give the same bits.
template <int kIsa>
inline bool elementwiseRangeImpl(OpKind op, CompareDir cmp, double *o, const double *x,
                                 const double *y, const double *z, int64_t n) {
  switch (op) {
  case OpKind::Neg: mapUnary(o, x, n, [](double v) { return -v; }); return true;
  case OpKind::Exp: vecMath(VecFn::Exp, x, o, n); return true;
  case OpKind::Log: vecMath(VecFn::Log, x, o, n); return true;
  case OpKind::Sqrt: mapUnary(o, x, n, [](double v) { return std::sqrt(v); }); return true;
  case OpKind::Sin: vecMath(VecFn::Sin, x, o, n); return true;
  case OpKind::Cos: vecMath(VecFn::Cos, x, o, n); return true;
  case OpKind::Tanh: vecMath(VecFn::Tanh, x, o, n); return true;
  case OpKind::Abs: mapUnary(o, x, n, [](double v) { return std::fabs(v); }); return true;
  case OpKind::Sign:
    // Branch-free so that it vectorises: (v > 0) − (v < 0), and NaN passed through.
    mapUnary(o, x, n, [](double v) {
      const double s = (v > 0 ? 1.0 : 0.0) - (v < 0 ? 1.0 : 0.0);
      return v != v ? v : s;
    });
    return true;
  case OpKind::StopGradient: mapUnary(o, x, n, [](double v) { return v; }); return true;
  case OpKind::Add: mapBinary(o, x, y, n, [](double u, double v) { return u + v; }); return true;
  case OpKind::Sub: mapBinary(o, x, y, n, [](double u, double v) { return u - v; }); return true;
  case OpKind::Mul: mapBinary(o, x, y, n, [](double u, double v) { return u * v; }); return true;
  case OpKind::Div: mapBinary(o, x, y, n, [](double u, double v) { return u / v; }); return true;
  case OpKind::Maximum:
    mapBinary(o, x, y, n, [](double u, double v) {
      return (u != u || v != v) ? std::numeric_limits<double>::quiet_NaN() : (u > v ? u : v);
    });
    return true;
  case OpKind::Compare:
    // One loop per direction (compareValues's semantics): the direction is not
    // switched on per element, and each loop vectorises.
    switch (cmp) {
    case CompareDir::EQ: mapBinary(o, x, y, n, [](double u, double v) { return u == v ? 1.0 : 0.0; }); break;
    case CompareDir::NE: mapBinary(o, x, y, n, [](double u, double v) { return u != v ? 1.0 : 0.0; }); break;
    case CompareDir::LT: mapBinary(o, x, y, n, [](double u, double v) { return u < v ? 1.0 : 0.0; }); break;
    case CompareDir::LE: mapBinary(o, x, y, n, [](double u, double v) { return u <= v ? 1.0 : 0.0; }); break;
    case CompareDir::GT: mapBinary(o, x, y, n, [](double u, double v) { return u > v ? 1.0 : 0.0; }); break;
    case CompareDir::GE: mapBinary(o, x, y, n, [](double u, double v) { return u >= v ? 1.0 : 0.0; }); break;
    }
    return true;
  case OpKind::Select:
    for (int64_t i = 0; i < n; ++i) o[i] = x[i] != 0.0 ? y[i] : z[i];
    return true;
  default: return false;
  }
}

bool elementwiseRangeBase(OpKind op, CompareDir cmp, double *o, const double *x, const double *y,
                          const double *z, int64_t n) {
  return elementwiseRangeImpl<0>(op, cmp, o, x, y, z, n);
}

__attribute__((target("avx2"))) bool elementwiseRangeAvx2(OpKind op, CompareDir cmp, double *o,
                                                          const double *x, const double *y,
                                                          const double *z, int64_t n) {
  return elementwiseRangeImpl<1>(op, cmp, o, x, y, z, n);
}

bool elementwiseRange(OpKind op, CompareDir cmp, double *o, const double *x, const double *y,
                      const double *z, int64_t n) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2 ? elementwiseRangeAvx2(op, cmp, o, x, y, z, n)
              : elementwiseRangeBase(op, cmp, o, x, y, z, n);
}

[[noreturn]] void noElementwiseKernel(OpKind op) {
  throw Error("internal error: no elementwise kernel for " + std::string(ir::opName(op)));
}

/// The register file of a fused loop on this thread: one block per step, then one
/// block filled with each scalar operand's value, then `extra` blocks for the caller.
double *fusedRegisters(const ElementwisePlan &ew, const Instruction &in, double *const *ptr,
                       size_t extra) {
  const size_t ns = ew.steps.size(), nin = in.in.size();
  thread_local std::vector<double> regs; // grows only: a resize would zero-fill each time
  const size_t need = (ns + nin + extra) * static_cast<size_t>(kFusedBlock);
  if (regs.size() < need) regs.resize(need);
  double *scalars = regs.data() + ns * kFusedBlock;
  for (size_t k = 0; k < nin; ++k)
    if (ew.scalar[k]) std::fill_n(scalars + k * kFusedBlock, kFusedBlock, ptr[in.in[k]][0]);
  return regs.data();
}

/// One block of a fused loop: elements [s, s + n) (n <= kFusedBlock), every step over
/// the block in `regs` (from fusedRegisters), the last step into `out`.
void fusedBlock(const ElementwisePlan &ew, const Instruction &in, double *regs, int64_t s,
                int64_t n, double *const *ptr, double *out) {
  const size_t ns = ew.steps.size();
  const double *scalars = regs + ns * kFusedBlock;
  for (size_t j = 0; j < ns; ++j) {
    const FusedStep &st = ew.steps[j];
    const double *a[3] = {nullptr, nullptr, nullptr};
    for (int q = 0; q < st.nargs; ++q) {
      const int r = st.arg[q];
      if (r >= 0) {
        a[q] = regs + static_cast<size_t>(r) * kFusedBlock;
      } else {
        const size_t k = static_cast<size_t>(-1 - r);
        a[q] = ew.scalar[k] ? scalars + k * kFusedBlock : ptr[in.in[k]] + s;
      }
    }
    double *o = j + 1 == ns ? out : regs + j * kFusedBlock;
    if (!elementwiseRange(st.op, st.cmp, o, a[0], a[1], a[2], n)) noElementwiseKernel(st.op);
  }
}

/// A fused loop over elements [b, e): block by block, the last step into the result.
void runFused(const ElementwisePlan &ew, const Instruction &in, int64_t b, int64_t e,
              double *const *ptr) {
  double *regs = fusedRegisters(ew, in, ptr, 0);
  for (int64_t s = b; s < e; s += kFusedBlock)
    fusedBlock(ew, in, regs, s, std::min(kFusedBlock, e - s), ptr, ptr[in.out[0]] + s);
}

void runKernel(const ElementwisePlan &ew, const Plan &, const Instruction &in, int32_t chunk,
               double *const *ptr) {
  auto [b, e] = chunkRange(in.numel, kChunkElems, chunk);
  if (!ew.steps.empty()) {
    runFused(ew, in, b, e, ptr);
    return;
  }
  const double *x = ptr[in.in[0]] + b;
  const double *y = in.in.size() > 1 ? ptr[in.in[1]] + b : nullptr;
  const double *z = in.in.size() > 2 ? ptr[in.in[2]] + b : nullptr;
  if (!elementwiseRange(in.op, ew.cmp, ptr[in.out[0]] + b, x, y, z, e - b)) noElementwiseKernel(in.op);
}

/// Row-major odometer over shape[0..n): sets idx and returns Σ idx·stride for `lin`.
inline int64_t unravel(int64_t lin, const std::vector<int64_t> &shape,
                       const std::vector<int64_t> &stride, size_t n, int64_t *idx) {
  int64_t off = 0;
  for (size_t d = n; d-- > 0;) {
    idx[d] = lin % shape[d];
    lin /= shape[d];
    off += idx[d] * stride[d];
  }
  return off;
}

/// Advances the odometer idx over shape[0..n) and updates the offset.
inline void advance(int64_t *idx, const std::vector<int64_t> &shape,
                    const std::vector<int64_t> &stride, size_t n, int64_t &off) {
  for (size_t d = n; d-- > 0;) {
    off += stride[d];
    if (++idx[d] < shape[d]) return;
    off -= idx[d] * stride[d];
    idx[d] = 0;
  }
}

/// Transpose by 2-D tiles: output dim tileDim reads the input contiguously, the last
/// output dim writes the output contiguously.
void tiledCopy(const CopyPlan &c, int32_t chunk, const double *src, double *dst) {
  constexpr int64_t T = 16;
  double tile[T * T];
  auto [o0, o1] = chunkRange(c.outerCount, c.perChunk, chunk);
  size_t no = c.outerShape.size();
  int64_t idx[ir::kMaxRank + 1] = {};
  int64_t inOff = c.base + unravel(o0, c.outerShape, c.outerIn, no, idx);
  int64_t outOff = 0;
  for (size_t d = 0; d < no; ++d) outOff += idx[d] * c.outerOut[d];
  int64_t Q = c.shape[c.tileDim], L = c.shape.back(), sL = c.stride.back(), oQ = c.outStrideTile;
  for (int64_t o = o0; o < o1; ++o) {
    const double *sp = src + inOff;
    double *dp = dst + outOff;
    for (int64_t i0 = 0; i0 < Q; i0 += T)
      for (int64_t j0 = 0; j0 < L; j0 += T) {
        const int64_t ni = std::min(Q, i0 + T) - i0, nj = std::min(L, j0 + T) - j0;
        // Read the tile's input rows whole into `tile`, then write its output rows
        // whole: each cache line is touched once, even when both strides are large
        // powers of two (a 32⁴ axis reversal: 256 KiB) and would evict each other.
        for (int64_t j = 0; j < nj; ++j)
          for (int64_t i = 0; i < ni; ++i) tile[j * T + i] = sp[(j0 + j) * sL + i0 + i];
        for (int64_t i = 0; i < ni; ++i)
          for (int64_t j = 0; j < nj; ++j) dp[(i0 + i) * oQ + j0 + j] = tile[j * T + i];
      }
    // Advance the outer odometer (input and output offsets together).
    for (size_t d = no; d-- > 0;) {
      inOff += c.outerIn[d];
      outOff += c.outerOut[d];
      if (++idx[d] < c.outerShape[d]) break;
      inOff -= idx[d] * c.outerIn[d];
      outOff -= idx[d] * c.outerOut[d];
      idx[d] = 0;
    }
  }
}

void runKernel(const CopyPlan &c, const Plan &, const Instruction &in, int32_t chunk,
               double *const *ptr) {
  if (c.tileDim >= 0) {
    tiledCopy(c, chunk, ptr[in.in[0]], ptr[in.out[0]]);
    return;
  }
  size_t nd = c.shape.size();
  int64_t inner = c.shape.back(), s = c.stride.back();
  if (inner == 0 || c.rows == 0) return;
  auto [r0, r1] = chunkRange(c.rows, c.perChunk, chunk);
  const double *src = ptr[in.in[0]];
  double *dst = ptr[in.out[0]] + r0 * inner;
  int64_t idx[ir::kMaxRank + 1] = {};
  int64_t off = c.base + unravel(r0, c.shape, c.stride, nd - 1, idx);
  for (int64_t r = r0; r < r1; ++r) {
    const double *p = src + off;
    if (s == 1) std::memcpy(dst, p, static_cast<size_t>(inner) * sizeof(double));
    else if (s == 0) std::fill(dst, dst + inner, *p);
    else
      for (int64_t i = 0; i < inner; ++i) dst[i] = p[i * s];
    dst += inner;
    advance(idx, c.shape, c.stride, nd - 1, off);
  }
}

void runKernel(const PadPlan &p, const Plan &, const Instruction &in, int32_t chunk,
               double *const *ptr) {
  size_t nd = p.outShape.size();
  int64_t outLen = p.outShape.back();
  if (outLen == 0 || p.rows == 0) return;
  int64_t rpc = std::max<int64_t>(1, kChunkElems / outLen);
  auto [r0, r1] = chunkRange(p.rows, rpc, chunk);
  const double *src = ptr[in.in[0]];
  double *dst = ptr[in.out[0]] + r0 * outLen;
  int64_t lo = p.low.back(), inLen = p.inShape.back();
  int64_t c0 = std::clamp<int64_t>(lo, 0, outLen), c1 = std::clamp<int64_t>(lo + inLen, 0, outLen);
  int64_t idx[ir::kMaxRank + 1] = {};
  {
    int64_t lin = r0;
    for (size_t d = nd - 1; d-- > 0;) {
      idx[d] = lin % p.outShape[d];
      lin /= p.outShape[d];
    }
  }
  for (int64_t r = r0; r < r1; ++r, dst += outLen) {
    bool inside = true;
    int64_t off = 0;
    for (size_t d = 0; d + 1 < nd; ++d) {
      int64_t s = idx[d] - p.low[d];
      if (s < 0 || s >= p.inShape[d]) { inside = false; break; }
      off += s * p.inStride[d];
    }
    if (!inside || c0 >= c1) {
      std::fill(dst, dst + outLen, 0.0);
    } else {
      std::fill(dst, dst + c0, 0.0);
      std::memcpy(dst + c0, src + off + (c0 - lo), static_cast<size_t>(c1 - c0) * sizeof(double));
      std::fill(dst + c1, dst + outLen, 0.0);
    }
    for (size_t d = nd - 1; d-- > 0;) {
      if (++idx[d] < p.outShape[d]) break;
      idx[d] = 0;
    }
  }
}

/// The sequential max of reduce_max, max(acc, p[0], …, p[n−1]) where a NaN wins (the
/// last one, as in the reference) and a tie keeps the earlier value, computed in 8
/// independent lanes (NaNs only flagged) so that the loop vectorises. The lanes see
/// the values in another order, which changes the result only when it is a NaN
/// (which one) or a zero (which sign): then the sequential loop decides, so the
/// result is bitwise the reference's.
double maxContiguous(const double *p, int64_t n, double acc) {
  constexpr int kLanes = 8;
  double lane[kLanes];
  bool nan[kLanes] = {};
  for (double &l : lane) l = acc;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const double x = p[i + l];
      lane[l] = x > lane[l] ? x : lane[l];
      nan[l] |= x != x;
    }
  double m = acc;
  bool anyNan = acc != acc;
  for (int l = 0; l < kLanes; ++l) {
    m = lane[l] > m ? lane[l] : m;
    anyNan |= nan[l];
  }
  for (; i < n; ++i) {
    m = p[i] > m ? p[i] : m;
    anyNan |= p[i] != p[i];
  }
  if (m == 0 || anyNan) {
    m = acc;
    for (int64_t j = 0; j < n; ++j)
      if (p[j] > m || p[j] != p[j]) m = p[j];
  }
  return m;
}

void runKernel(const ReducePlan &R, const Plan &, const Instruction &in, int32_t chunk,
               double *const *ptr) {
  if (R.outElems == 0) return;
  auto [o0, o1] = chunkRange(R.outElems, R.outPerChunk, chunk);
  double *dst = ptr[in.out[0]];
  size_t nk = R.keptShape.size(), nr = R.redShape.size();
  int64_t kidx[ir::kMaxRank + 1] = {};
  int64_t koff = unravel(o0, R.keptShape, R.keptStride, nk, kidx);
  int64_t inner = R.redShape.back(), is = R.redStride.back();
  int64_t outerRed = R.redElems / std::max<int64_t>(1, inner);
  if (!R.input.steps.empty()) {
    // Input fusion: the operand's contiguous runs (is == 1, checked at lowering) block by
    // block into the caller's register, reduced in the same order as from a buffer.
    const size_t ns = R.input.steps.size(), nin = in.in.size();
    double *regs = fusedRegisters(R.input, in, ptr, 1);
    double *blk = regs + (ns + nin) * kFusedBlock;
    for (int64_t o = o0; o < o1; ++o) {
      double acc = R.isMax ? -std::numeric_limits<double>::infinity() : 0.0;
      int64_t ridx[ir::kMaxRank + 1] = {};
      int64_t roff = 0;
      for (int64_t q = 0; q < outerRed; ++q) {
        for (int64_t s = 0; s < inner; s += kFusedBlock) {
          const int64_t n = std::min(kFusedBlock, inner - s);
          fusedBlock(R.input, in, regs, koff + roff + s, n, ptr, blk);
          if (R.isMax) {
            acc = maxContiguous(blk, n, acc);
          } else {
            for (int64_t i = 0; i < n; ++i) acc += blk[i];
          }
        }
        advance(ridx, R.redShape, R.redStride, nr - 1, roff);
      }
      dst[o] = acc;
      advance(kidx, R.keptShape, R.keptStride, nk, koff);
    }
    return;
  }
  const double *src = ptr[in.in[0]];
  for (int64_t o = o0; o < o1; ++o) {
    double acc = R.isMax ? -std::numeric_limits<double>::infinity() : 0.0;
    if (R.redElems > 0) {
      int64_t ridx[ir::kMaxRank + 1] = {};
      int64_t roff = 0;
      for (int64_t q = 0; q < outerRed; ++q) {
        const double *p = src + koff + roff;
        if (R.isMax && is == 1) {
          acc = maxContiguous(p, inner, acc);
        } else if (R.isMax) {
          for (int64_t i = 0; i < inner; ++i) {
            double x = p[i * is];
            if (x > acc || x != x) acc = x;
          }
        } else if (is == 1) {
          for (int64_t i = 0; i < inner; ++i) acc += p[i];
        } else {
          for (int64_t i = 0; i < inner; ++i) acc += p[i * is];
        }
        advance(ridx, R.redShape, R.redStride, nr - 1, roff);
      }
    }
    dst[o] = acc;
    advance(kidx, R.keptShape, R.keptStride, nk, koff);
  }
}

/// Chunks [k0, k1) of a GEMM. Tiles that are full-width row strips of one batch are one
/// call (see runChunks).
void gemmChunks(const GemmPlan &g, const Instruction &in, int32_t k0, int32_t k1,
                double *const *ptr) {
  const double *A = ptr[in.in[0]], *B = ptr[in.in[1]];
  double *C = ptr[in.out[0]];
  // C[b][r0:r1, c0:c1] = op(A[b])[r0:r1, :] · op(B[b])[:, c0:c1].
  auto one = [&](int64_t b, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    int64_t rows = r1 - r0, cols = c1 - c0;
    double *c = C + b * g.strideC + r0 * g.N + c0;
    if (rows <= 0 || cols <= 0) return;
    if (g.K == 0) {
      for (int64_t r = 0; r < rows; ++r) std::fill(c + r * g.N, c + r * g.N + cols, 0.0);
      return;
    }
    const double *a = A + b * g.strideA + (g.transA ? r0 : r0 * g.lda);
    const double *bm = B + b * g.strideB + (g.transB ? c0 * g.ldb : c0);
    cblas_dgemm(CblasRowMajor, g.transA ? CblasTrans : CblasNoTrans,
                g.transB ? CblasTrans : CblasNoTrans, static_cast<blasint>(rows),
                static_cast<blasint>(cols), static_cast<blasint>(g.K), 1.0, a,
                static_cast<blasint>(g.lda), bm, static_cast<blasint>(g.ldb), 0.0,
                c, static_cast<blasint>(g.N));
  };
  for (int32_t chunk = k0; chunk < k1; ++chunk) {
    if (g.batchesPerChunk > 0) {
      auto [b0, b1] = chunkRange(g.batch, g.batchesPerChunk, chunk);
      for (int64_t b = b0; b < b1; ++b) one(b, 0, g.M, 0, g.N);
      continue;
    }
    const int64_t b = chunk / g.chunksPerBatch, t = chunk % g.chunksPerBatch;
    if (g.colChunks == 1) {
      // The strips of batch b from t up to k1 (or the batch's end): one call.
      const int64_t t1 = std::min<int64_t>(g.chunksPerBatch, t + (k1 - chunk));
      const int64_t r0 = chunkRange(g.M, g.rowsPerChunk, static_cast<int32_t>(t)).first;
      const int64_t r1 = chunkRange(g.M, g.rowsPerChunk, static_cast<int32_t>(t1 - 1)).second;
      one(b, r0, r1, 0, g.N);
      chunk += static_cast<int32_t>(t1 - t - 1);
      continue;
    }
    auto [r0, r1] = chunkRange(g.M, g.rowsPerChunk, static_cast<int32_t>(t / g.colChunks));
    auto [c0, c1] = chunkRange(g.N, g.colsPerChunk, static_cast<int32_t>(t % g.colChunks));
    one(b, r0, r1, c0, c1);
  }
}

void runKernel(const GemmPlan &g, const Plan &, const Instruction &in, int32_t chunk,
               double *const *ptr) {
  gemmChunks(g, in, chunk, chunk + 1, ptr);
}

/// Whether d[0 .. n) are all finite (no NaN, no ±inf): one branch-free pass.
bool allFinite(const double *d, int64_t n) {
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) finite &= std::isfinite(d[i]);
  return finite;
}

/// One chunk: gesdd on the whole matrix.
void runKernel(const SvdPlan &s, const Plan &plan, const Instruction &in, int32_t,
               double *const *ptr) {
  if (s.k == 0) return;
  const double *A = ptr[in.in[0]];
  double *U = ptr[in.out[0]], *S = ptr[in.out[1]], *Vt = ptr[in.out[2]];
  double *work = ptr[in.out[3]];
  double *a = in.inPlace ? const_cast<double *>(A) : ptr[in.out[4]];
  int64_t mn = s.m * s.n;
  bool finite = true;
  if (!in.inPlace) {
    for (int64_t i = 0; i < mn; ++i) {
      double x = A[i];
      a[i] = x;
      finite &= std::isfinite(x);
    }
  } else {
    finite = allFinite(a, mn);
  }
  if (!finite) throw Error(svdFailureMessage(plan.program, plan.srcOp(in), kSvdNonFinite));
  auto *iwork = reinterpret_cast<lapack_int *>(work + s.lwork);
  if (s.valuesOnly) {
    double dummy = 0;
    lapack_int info = LAPACKE_dgesdd_work(
        LAPACK_COL_MAJOR, 'N', static_cast<lapack_int>(s.n), static_cast<lapack_int>(s.m), a,
        static_cast<lapack_int>(s.n), S, &dummy, 1, &dummy, 1, work,
        static_cast<lapack_int>(s.lwork), iwork);
    if (info != 0) throw Error(svdFailureMessage(plan.program, plan.srcOp(in), info));
    return;
  }
  // Row-major A (m×n) is column-major Aᵀ (n×m). gesdd(Aᵀ) = U' S VT' gives
  // Vt = U' (k×n row-major == n×k column-major) and U = VT' (m×k row-major).
  lapack_int info = LAPACKE_dgesdd_work(
      LAPACK_COL_MAJOR, 'S', static_cast<lapack_int>(s.n), static_cast<lapack_int>(s.m), a,
      static_cast<lapack_int>(s.n), S, Vt, static_cast<lapack_int>(s.n), U,
      static_cast<lapack_int>(s.k), work, static_cast<lapack_int>(s.lwork), iwork);
  if (info != 0) throw Error(svdFailureMessage(plan.program, plan.srcOp(in), info));
}

/// One chunk: dsyevd on the whole matrix (runtime/Factorizations.h).
void runKernel(const EighPlan &e, const Plan &plan, const Instruction &in, int32_t,
               double *const *ptr) {
  runEigh(e, plan.program, plan.srcOp(in), ptr[in.in[0]], ptr[in.out[0]], ptr[in.out[1]],
          ptr[in.out[2]]);
}

/// One chunk: dgeqrf and dorgqr on the whole matrix (runtime/Factorizations.h).
void runKernel(const QrPlan &q, const Plan &plan, const Instruction &in, int32_t, double *const *ptr) {
  runQr(q, plan.program, plan.srcOp(in), ptr[in.in[0]], ptr[in.out[0]], ptr[in.out[1]], ptr[in.out[2]]);
}

/// One chunk: dtrsm on all right-hand sides (runtime/Factorizations.h).
void runKernel(const TriangularSolvePlan &t, const Plan &plan, const Instruction &in, int32_t,
               double *const *ptr) {
  runTriangularSolve(t, plan.program, plan.srcOp(in), ptr[in.in[0]], ptr[in.in[1]], ptr[in.out[0]]);
}

/// One chunk: two dsyevd and four GEMMs (runtime/Factorizations.h).
void runKernel(const SylvesterSolvePlan &s, const Plan &plan, const Instruction &in, int32_t,
               double *const *ptr) {
  runSylvesterSolve(s, plan.program, plan.srcOp(in), ptr[in.in[0]], ptr[in.in[1]], ptr[in.in[2]],
                    ptr[in.out[0]], ptr[in.out[1]]);
}

/// Adds one top-k SVD to the plan's counters (Plan::svdCounts).
void countTopk(const Plan &plan, const TopkSvdOutcome &o) {
  auto &n = plan.svdCounts;
  n[0].fetch_add(1, std::memory_order_relaxed);
  n[1].fetch_add(o.iterations, std::memory_order_relaxed);
  n[2].fetch_add(o.fallback ? 1 : 0, std::memory_order_relaxed);
}

/// One chunk: the whole top-k SVD (runtime/TruncatedSvd.h).
void runKernel(const SvdTopkPlan &s, const Plan &plan, const Instruction &in, int32_t,
               double *const *ptr) {
  const double *A = ptr[in.in[0]];
  // One pass for both: finite, and max|A_ij| (the scale topkSvd works at).
  bool finite = true;
  double maxAbs = 0;
  for (int64_t i = 0; i < s.cfg.m * s.cfg.n; ++i) {
    finite &= std::isfinite(A[i]);
    maxAbs = std::max(maxAbs, std::fabs(A[i]));
  }
  if (!finite) throw Error(svdFailureMessage(plan.program, plan.srcOp(in), kSvdNonFinite));
  TopkSvdOutcome o = topkSvd(s.cfg, A, ptr[in.out[0]], ptr[in.out[1]], ptr[in.out[2]],
                             ptr[in.out[3]], 0, maxAbs);
  countTopk(plan, o);
  if (o.lapackInfo != 0) throw Error(svdFailureMessage(plan.program, plan.srcOp(in), o.lapackInfo));
}

/// One chunk: the whole complement solve (runtime/TruncatedSvd.h). A with NaN or inf
/// is an error, as for svd_topk (the fallback's gesdd cannot take it); a NaN or inf in
/// the forward's triplets or the cotangents makes X and Yt NaN, as the rule's products
/// would, without a solve (CG would only break down on it and fall back).
void runKernel(const SvdComplementPlan &s, const Plan &plan, const Instruction &in, int32_t,
               double *const *ptr) {
  const SvdComplementConfig &c = s.cfg;
  const int64_t kg = c.k + (c.givenGuards ? c.guards : 0);
  if (!allFinite(ptr[in.in[0]], c.m * c.n))
    throw Error(svdFailureMessage(plan.program, plan.srcOp(in), kSvdNonFinite));
  if (!allFinite(ptr[in.in[1]], c.m * kg) || !allFinite(ptr[in.in[2]], kg) ||
      !allFinite(ptr[in.in[3]], kg * c.n) || !allFinite(ptr[in.in[4]], c.m * c.r) ||
      !allFinite(ptr[in.in[5]], c.r * c.n)) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::fill(ptr[in.out[0]], ptr[in.out[0]] + c.m * c.r, nan);
    std::fill(ptr[in.out[1]], ptr[in.out[1]] + c.r * c.n, nan);
    return;
  }
  SvdComplementOutcome o =
      svdComplement(s.cfg, s.eps, ptr[in.in[0]], ptr[in.in[1]], ptr[in.in[2]], ptr[in.in[3]],
                    ptr[in.in[4]], ptr[in.in[5]], ptr[in.out[0]], ptr[in.out[1]], ptr[in.out[2]]);
  if (!c.givenGuards && c.guards > 0) countTopk(plan, o.guard); // the guards' top-k SVD
  auto &n = plan.svdCounts;
  n[3].fetch_add(1, std::memory_order_relaxed);
  n[4].fetch_add(o.iterations, std::memory_order_relaxed);
  n[5].fetch_add(o.fallback ? 1 : 0, std::memory_order_relaxed);
  n[6].fetch_add(o.broadenedTail ? 1 : 0, std::memory_order_relaxed);
  if (o.lapackInfo != 0) throw Error(svdFailureMessage(plan.program, plan.srcOp(in), o.lapackInfo));
}

} // namespace

void runChunk(const Plan &plan, const Instruction &inst, int32_t chunk, double *const *ptr) {
  // One runKernel overload per KernelPlan alternative: a missing one does not compile.
  std::visit([&](const auto &k) { runKernel(k, plan, inst, chunk, ptr); }, inst.plan);
}

void runChunks(const Plan &plan, const Instruction &inst, int32_t c0, int32_t c1,
               double *const *ptr) {
  if (const auto *g = std::get_if<GemmPlan>(&inst.plan)) {
    gemmChunks(*g, inst, c0, c1, ptr);
    return;
  }
  for (int32_t c = c0; c < c1; ++c) runChunk(plan, inst, c, ptr);
}

const char *valueCheckFlag(ValueCheck c) {
  switch (c) {
  case ValueCheck::Off: return "";
  case ValueCheck::Nan: return "--check-nan";
  case ValueCheck::NanOrInf: return "--check-inf";
  }
  return "";
}

namespace {

/// "NaN", "inf", "NaN and inf" or "" (neither) for the n values at d.
std::string nonFiniteKinds(const double *d, int64_t n) {
  bool nan = false, inf = false;
  for (int64_t k = 0; k < n && !(nan && inf); ++k) {
    nan |= std::isnan(d[k]);
    inf |= std::isinf(d[k]);
  }
  return nan && inf ? "NaN and inf" : nan ? "NaN" : inf ? "inf" : "";
}

} // namespace

void checkFiniteResults(const Plan &plan, const Instruction &inst, double *const *ptr) {
  const bool infToo = plan.options.valueCheck == ValueCheck::NanOrInf;
  for (int32_t r = 0; r < inst.numResults; ++r) {
    const PlanValue &pv = plan.values[inst.out[r]];
    const double *d = ptr[inst.out[r]];
    // A result nothing reads may have no buffer and not be computed (an svd whose U
    // and Vt are unused computes s alone): nothing to check.
    if (!d) continue;
    int64_t n = pv.type.numel();
    for (int64_t i = 0; i < n; ++i) {
      if (infToo ? std::isfinite(d[i]) : !std::isnan(d[i])) continue;
      std::string idx;
      int64_t lin = i;
      std::vector<int64_t> ix(pv.type.shape.size());
      for (size_t k = ix.size(); k-- > 0;) {
        ix[k] = lin % pv.type.shape[k];
        lin /= pv.type.shape[k];
      }
      for (size_t k = 0; k < ix.size(); ++k) {
        if (k) idx += ",";
        idx += std::to_string(ix[k]);
      }
      std::string operands;
      const ir::Op &op = plan.srcOp(inst);
      for (ir::ValueId v : op.operands) {
        // Plan values 0..N-1 are the program's values (same ids).
        const double *od = ptr[v];
        std::string state = "not checked";
        if (od) {
          std::string kinds = nonFiniteKinds(od, plan.program.type(v).numel());
          state = kinds.empty() ? "finite" : "has " + kinds;
        }
        operands += (operands.empty() ? "" : ", ") + valueDisplayName(plan.program, v) + " " + state;
      }
      throw Error(std::string("error: ") + valueCheckFlag(plan.options.valueCheck) + ": " +
                  describeOp(plan.program, op) + ": result " + pv.name + " " + pv.type.str() +
                  " is " + (std::isnan(d[i]) ? "NaN" : "inf") + " at [" + idx + "]" +
                  (operands.empty() ? "" : "; operands: " + operands));
    }
  }
}

} // namespace tessel::rt
