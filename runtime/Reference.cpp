//===- runtime/Reference.cpp - The op-by-op reference evaluator ---------------===//
//
// evaluateReference(): the simplest possible interpreter of a Program. No plan, no
// threads, no buffer reuse, no BLAS for contractions: each op is a short loop nest
// written directly from the op's definition (StableHLO / jax.lax semantics, see
// ir/ops.def). It exists as an independent oracle for the engine (differential
// tests) and for gradcheck. It is deliberately written without sharing code with the
// engine's kernels; the only shared piece is the SVD, which both take from LAPACK
// dgesdd with the same call so that singular-vector signs agree.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <lapacke.h>

#include "ir/Diagnostics.h"
#include "ir/Printer.h"
#include "ir/ShapeRules.h"
#include "runtime/Runtime.h"
#include "runtime/RuntimeInternal.h"

namespace tessel::rt {
namespace {

using ir::Op;
using ir::OpKind;
using ir::Program;
using ir::Type;

/// Advances a row-major multi-index; returns false after the last one.
bool nextIndex(std::vector<int64_t> &idx, llvm::ArrayRef<int64_t> shape) {
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    if (++idx[d] < shape[d]) return true;
    idx[d] = 0;
  }
  return false;
}

bool anyZero(llvm::ArrayRef<int64_t> shape) {
  for (int64_t e : shape)
    if (e == 0) return true;
  return false;
}

/// Calls `f(multiIndex, linearIndex)` for every element of `shape` in row-major order.
template <typename F> void forEachIndex(llvm::ArrayRef<int64_t> shape, F &&f) {
  if (anyZero(shape)) return;
  std::vector<int64_t> idx(shape.size(), 0);
  int64_t lin = 0;
  do {
    f(idx, lin);
    ++lin;
  } while (nextIndex(idx, shape));
}

double applyUnary(OpKind k, double x) {
  switch (k) {
  case OpKind::Neg: return -x;
  case OpKind::Exp: return std::exp(x);
  case OpKind::Log: return std::log(x);
  case OpKind::Sqrt: return std::sqrt(x);
  case OpKind::Sin: return std::sin(x);
  case OpKind::Cos: return std::cos(x);
  case OpKind::Abs: return std::fabs(x);
  case OpKind::Sign: return std::isnan(x) ? x : (x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0));
  case OpKind::StopGradient: return x;
  default: break;
  }
  throw Error("internal error: not a unary op");
}

double applyBinary(OpKind k, double a, double b) {
  switch (k) {
  case OpKind::Add: return a + b;
  case OpKind::Sub: return a - b;
  case OpKind::Mul: return a * b;
  case OpKind::Div: return a / b;
  case OpKind::Maximum:
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
    return a > b ? a : b;
  default: break;
  }
  throw Error("internal error: not a binary op");
}

Tensor evalOp(const Program &p, const Op &op, const std::vector<const Tensor *> &in, size_t r,
              const Type &rt) {
  Tensor out = Tensor::zeros(rt);
  auto &o = out.data;
  const auto &a = op.attrs;
  switch (op.kind) {
  case OpKind::Constant: return a.getTensor("value");
  case OpKind::Iota: {
    int64_t dim = a.getI64("dim");
    forEachIndex(rt.shape, [&](const std::vector<int64_t> &idx, int64_t lin) {
      o[lin] = static_cast<double>(idx[dim]);
    });
    return out;
  }
  case OpKind::Neg: case OpKind::Exp: case OpKind::Log: case OpKind::Sqrt:
  case OpKind::Sin: case OpKind::Cos: case OpKind::Abs: case OpKind::Sign:
  case OpKind::StopGradient:
    for (size_t i = 0; i < o.size(); ++i) o[i] = applyUnary(op.kind, in[0]->data[i]);
    return out;
  case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div:
  case OpKind::Maximum:
    for (size_t i = 0; i < o.size(); ++i)
      o[i] = applyBinary(op.kind, in[0]->data[i], in[1]->data[i]);
    return out;
  case OpKind::Compare: {
    CompareDir dir = parseCompareDirection(a.getStr("direction"));
    for (size_t i = 0; i < o.size(); ++i)
      o[i] = compareValues(dir, in[0]->data[i], in[1]->data[i]) ? 1.0 : 0.0;
    return out;
  }
  case OpKind::Select:
    for (size_t i = 0; i < o.size(); ++i)
      o[i] = in[0]->data[i] != 0.0 ? in[1]->data[i] : in[2]->data[i];
    return out;
  case OpKind::ReduceSum:
  case OpKind::ReduceMax: {
    const Type &it = in[0]->type;
    const auto &axes = a.getI64s("axes");
    std::vector<bool> reduced(it.rank(), false);
    for (int64_t ax : axes) reduced[ax] = true;
    auto ost = rowMajorStrides(rt.shape);
    bool isMax = op.kind == OpKind::ReduceMax;
    if (isMax) std::fill(o.begin(), o.end(), -std::numeric_limits<double>::infinity());
    forEachIndex(it.shape, [&](const std::vector<int64_t> &idx, int64_t lin) {
      int64_t oi = 0;
      int od = 0;
      for (int d = 0; d < it.rank(); ++d)
        if (!reduced[d]) oi += idx[d] * ost[od++];
      double x = in[0]->data[lin];
      if (!isMax) o[oi] += x;
      else if (std::isnan(x) || x > o[oi]) o[oi] = x;
    });
    return out;
  }
  case OpKind::BroadcastInDim: {
    const Type &it = in[0]->type;
    const auto &dims = a.getI64s("dims");
    auto ist = rowMajorStrides(it.shape);
    forEachIndex(rt.shape, [&](const std::vector<int64_t> &idx, int64_t lin) {
      int64_t ii = 0;
      for (int d = 0; d < it.rank(); ++d)
        ii += (it.shape[d] == 1 ? 0 : idx[dims[d]]) * ist[d];
      o[lin] = in[0]->data[ii];
    });
    return out;
  }
  case OpKind::Reshape:
    o = in[0]->data;
    return out;
  case OpKind::Transpose: {
    const auto &perm = a.getI64s("perm");
    auto ist = rowMajorStrides(in[0]->type.shape);
    forEachIndex(rt.shape, [&](const std::vector<int64_t> &idx, int64_t lin) {
      int64_t ii = 0;
      for (int d = 0; d < rt.rank(); ++d) ii += idx[d] * ist[perm[d]];
      o[lin] = in[0]->data[ii];
    });
    return out;
  }
  case OpKind::Slice: {
    const auto &start = a.getI64s("start");
    auto ist = rowMajorStrides(in[0]->type.shape);
    forEachIndex(rt.shape, [&](const std::vector<int64_t> &idx, int64_t lin) {
      int64_t ii = 0;
      for (int d = 0; d < rt.rank(); ++d) ii += (idx[d] + start[d]) * ist[d];
      o[lin] = in[0]->data[ii];
    });
    return out;
  }
  case OpKind::Pad: {
    const auto &low = a.getI64s("low");
    const Type &it = in[0]->type;
    auto ist = rowMajorStrides(it.shape);
    forEachIndex(rt.shape, [&](const std::vector<int64_t> &idx, int64_t lin) {
      int64_t ii = 0;
      for (int d = 0; d < rt.rank(); ++d) {
        int64_t s = idx[d] - low[d];
        if (s < 0 || s >= it.shape[d]) return; // padding: stays zero
        ii += s * ist[d];
      }
      o[lin] = in[0]->data[ii];
    });
    return out;
  }
  case OpKind::DotGeneral: {
    const Type &lt = in[0]->type, &rtt = in[1]->type;
    const auto &lb = a.getI64s("lhs_batch"), &rb = a.getI64s("rhs_batch");
    const auto &lc = a.getI64s("lhs_contract"), &rc = a.getI64s("rhs_contract");
    auto freeDims = [](int rank, const ir::I64List &b, const ir::I64List &c) {
      std::vector<int64_t> f;
      for (int d = 0; d < rank; ++d)
        if (std::find(b.begin(), b.end(), d) == b.end() &&
            std::find(c.begin(), c.end(), d) == c.end())
          f.push_back(d);
      return f;
    };
    auto lf = freeDims(lt.rank(), lb, lc), rf = freeDims(rtt.rank(), rb, rc);
    auto lst = rowMajorStrides(lt.shape), rst = rowMajorStrides(rtt.shape);
    std::vector<int64_t> cshape;
    for (int64_t d : lc) cshape.push_back(lt.shape[d]);
    forEachIndex(rt.shape, [&](const std::vector<int64_t> &idx, int64_t lin) {
      // Result index = [batch..., lhs free..., rhs free...].
      int64_t lbase = 0, rbase = 0;
      size_t pos = 0;
      for (size_t i = 0; i < lb.size(); ++i, ++pos) {
        lbase += idx[pos] * lst[lb[i]];
        rbase += idx[pos] * rst[rb[i]];
      }
      for (int64_t d : lf) lbase += idx[pos++] * lst[d];
      for (int64_t d : rf) rbase += idx[pos++] * rst[d];
      double acc = 0.0;
      forEachIndex(cshape, [&](const std::vector<int64_t> &cidx, int64_t) {
        int64_t li = lbase, ri = rbase;
        for (size_t i = 0; i < lc.size(); ++i) {
          li += cidx[i] * lst[lc[i]];
          ri += cidx[i] * rst[rc[i]];
        }
        acc += in[0]->data[li] * in[1]->data[ri];
      });
      o[lin] = acc;
    });
    return out;
  }
  case OpKind::Einsum: {
    ir::EinsumSpec spec = ir::parseEinsumSpec(a.getStr("spec"));
    // Every label's extent, from the operands.
    int64_t extent[128];
    std::fill(std::begin(extent), std::end(extent), -1);
    for (size_t i = 0; i < spec.inputs.size(); ++i)
      for (size_t j = 0; j < spec.inputs[i].size(); ++j)
        extent[static_cast<unsigned char>(spec.inputs[i][j])] = in[i]->type.shape[j];
    // Summed labels: in some input, not in the output (first-appearance order).
    std::string summed;
    for (const auto &s : spec.inputs)
      for (char c : s)
        if (spec.output.find(c) == std::string::npos && summed.find(c) == std::string::npos)
          summed += c;
    std::vector<int64_t> sshape;
    for (char c : summed) sshape.push_back(extent[static_cast<unsigned char>(c)]);
    std::vector<std::vector<int64_t>> ist;
    for (const Tensor *t : in) ist.push_back(rowMajorStrides(t->type.shape));
    int64_t val[128] = {};
    forEachIndex(rt.shape, [&](const std::vector<int64_t> &idx, int64_t lin) {
      for (size_t j = 0; j < spec.output.size(); ++j)
        val[static_cast<unsigned char>(spec.output[j])] = idx[j];
      double acc = 0.0;
      forEachIndex(sshape, [&](const std::vector<int64_t> &sidx, int64_t) {
        for (size_t j = 0; j < summed.size(); ++j)
          val[static_cast<unsigned char>(summed[j])] = sidx[j];
        double prod = 1.0;
        for (size_t i = 0; i < in.size(); ++i) {
          int64_t off = 0;
          for (size_t j = 0; j < spec.inputs[i].size(); ++j)
            off += val[static_cast<unsigned char>(spec.inputs[i][j])] * ist[i][j];
          prod *= in[i]->data[off];
        }
        acc += prod;
      });
      o[lin] = acc;
    });
    return out;
  }
  case OpKind::Svd: {
    // Computed once per op (all three results); see evaluateReference.
    break;
  }
  }
  (void)p;
  (void)r;
  throw Error("internal error: reference evaluator has no rule for op '" +
              std::string(ir::opName(op.kind)) + "'");
}

} // namespace

std::vector<Tensor> evaluateReference(const ir::Program &p, const std::vector<Tensor> &inputs) {
  ensureBlasSingleThreaded();
  validateInputs(p, inputs);
  std::vector<const Tensor *> env(p.values.size(), nullptr);
  for (size_t i = 0; i < p.inputs.size(); ++i) env[p.inputs[i]] = &inputs[i];
  std::vector<std::unique_ptr<Tensor>> owned;
  for (const Op &op : p.ops) {
    std::vector<const Tensor *> in;
    for (ir::ValueId v : op.operands) in.push_back(env[v]);
    if (op.kind == OpKind::Svd) {
      const Type &at = in[0]->type;
      int64_t m = at.shape[0], n = at.shape[1];
      auto U = std::make_unique<Tensor>(Tensor::zeros(p.type(op.results[0])));
      auto s = std::make_unique<Tensor>(Tensor::zeros(p.type(op.results[1])));
      auto Vt = std::make_unique<Tensor>(Tensor::zeros(p.type(op.results[2])));
      int64_t k = std::min(m, n);
      if (k > 0) {
        for (double x : in[0]->data)
          if (!std::isfinite(x)) throw Error(svdFailureMessage(p, op, kSvdNonFinite));
        // Row-major A[m,n] is column-major A^T[n,m]; the SVD of A^T = V S U^T gives
        // Vt (row-major) as LAPACK's U and U (row-major) as LAPACK's VT, with no
        // transposition. The engine makes the same call, so signs agree.
        std::vector<double> acopy = in[0]->data;
        lapack_int info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'S', static_cast<lapack_int>(n),
                                         static_cast<lapack_int>(m), acopy.data(),
                                         static_cast<lapack_int>(n), s->data.data(),
                                         Vt->data.data(), static_cast<lapack_int>(n),
                                         U->data.data(), static_cast<lapack_int>(k));
        if (info != 0) throw Error(svdFailureMessage(p, op, info));
      }
      env[op.results[0]] = U.get();
      env[op.results[1]] = s.get();
      env[op.results[2]] = Vt.get();
      owned.push_back(std::move(U));
      owned.push_back(std::move(s));
      owned.push_back(std::move(Vt));
      continue;
    }
    for (size_t r = 0; r < op.results.size(); ++r) {
      auto t = std::make_unique<Tensor>(evalOp(p, op, in, r, p.type(op.results[r])));
      env[op.results[r]] = t.get();
      owned.push_back(std::move(t));
    }
  }
  std::vector<Tensor> outs;
  for (ir::ValueId v : p.outputs) outs.push_back(*env[v]);
  return outs;
}

} // namespace tessel::rt
