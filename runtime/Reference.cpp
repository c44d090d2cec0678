//===- runtime/Reference.cpp - The op-by-op reference evaluator ---------------===//
//
// evaluateReference(): the simplest possible interpreter of a Program. No plan, no
// threads, no buffer reuse, no BLAS for contractions: each op is a short loop nest
// written directly from the op's definition (StableHLO / jax.lax semantics, see
// ir/ops.def). It exists as an independent oracle for the engine (differential
// tests) and for gradcheck. It is deliberately written without sharing code with the
// engine's kernels, the decompositions included: svd, eigh and qr come from Eigen
// (BDCSVD, SelfAdjointEigenSolver, HouseholderQR), not the LAPACK routines the engine
// calls, so a fault in those calls or their wrappers shows as a difference. Their
// factors' signs are each library's own: a comparison of factors fixes one sign
// convention on both sides first (tests/runtime/rt_testutil.h), and anything computed
// from them that does not depend on the signs agrees to rounding.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <Eigen/Dense>
#include <Eigen/SVD>

#include "ir/Diagnostics.h"
#include "ir/OpAttrs.h"
#include "ir/Printer.h"
#include "ir/ShapeRules.h"
#include "runtime/Factorizations.h"
#include "runtime/Runtime.h"
#include "runtime/RuntimeInternal.h"
#include "runtime/VecMath.h"

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

using Operands = std::vector<const Tensor *>;
using Results = std::vector<Tensor>;

/// Elementwise: result[i] = f(operands[0][i], operands[1][i], ...).
template <typename F> Results map(const Operands &in, const Type &rt, F f) {
  Tensor out = Tensor::zeros(rt);
  for (size_t i = 0; i < out.data.size(); ++i) {
    if constexpr (std::is_invocable_v<F, double>) out.data[i] = f(in[0]->data[i]);
    else if constexpr (std::is_invocable_v<F, double, double>)
      out.data[i] = f(in[0]->data[i], in[1]->data[i]);
    else out.data[i] = f(in[0]->data[i], in[1]->data[i], in[2]->data[i]);
  }
  return {out};
}

#define TESSEL_REF_MAP(Name, ...)                                                        \
  Results Name(const Program &, const Op &, const Operands &in, const Type &rt) {        \
    return map(in, rt, __VA_ARGS__);                                                     \
  }
TESSEL_REF_MAP(refNeg, [](double x) { return -x; })
// sin, cos, exp and log are SLEEF's 1-ulp routines, as in the engine (runtime/VecMath.h).
TESSEL_REF_MAP(refExp, [](double x) { return vecMath(VecFn::Exp, x); })
TESSEL_REF_MAP(refLog, [](double x) { return vecMath(VecFn::Log, x); })
TESSEL_REF_MAP(refSqrt, [](double x) { return std::sqrt(x); })
TESSEL_REF_MAP(refSin, [](double x) { return vecMath(VecFn::Sin, x); })
TESSEL_REF_MAP(refCos, [](double x) { return vecMath(VecFn::Cos, x); })
TESSEL_REF_MAP(refTanh, [](double x) { return vecMath(VecFn::Tanh, x); })
TESSEL_REF_MAP(refAbs, [](double x) { return std::fabs(x); })
TESSEL_REF_MAP(refSign, [](double x) { return std::isnan(x) ? x : (x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0)); })
TESSEL_REF_MAP(refAdd, [](double x, double y) { return x + y; })
TESSEL_REF_MAP(refSub, [](double x, double y) { return x - y; })
TESSEL_REF_MAP(refMul, [](double x, double y) { return x * y; })
TESSEL_REF_MAP(refDiv, [](double x, double y) { return x / y; })
TESSEL_REF_MAP(refMaximum, [](double x, double y) {
  if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<double>::quiet_NaN();
  return x > y ? x : y;
})
TESSEL_REF_MAP(refSelect, [](double pred, double x, double y) { return pred != 0.0 ? x : y; })
#undef TESSEL_REF_MAP

Results refCompare(const Program &, const Op &op, const Operands &in, const Type &rt) {
  const CompareDir dir = parseCompareDirection(ir::attr<OpKind::Compare, "direction">(op));
  return map(in, rt, [dir](double x, double y) { return compareValues(dir, x, y) ? 1.0 : 0.0; });
}

/// reshape and stop_gradient: the same data.
Results refIdentity(const Program &, const Op &, const Operands &in, const Type &rt) {
  return {Tensor(rt, in[0]->data)};
}

Results refConstant(const Program &, const Op &op, const Operands &, const Type &) {
  return {ir::attr<OpKind::Constant, "value">(op)};
}

Results refIota(const Program &, const Op &op, const Operands &, const Type &rt) {
  Tensor out = Tensor::zeros(rt);
  const int64_t dim = ir::attr<OpKind::Iota, "dim">(op);
  forEachIndex(rt.shape, [&](const std::vector<int64_t> &idx, int64_t lin) {
    out.data[lin] = static_cast<double>(idx[dim]);
  });
  return {out};
}

Results refReduce(const Program &, const Op &op, const Operands &in, const Type &rt) {
  Tensor out = Tensor::zeros(rt);
  auto &o = out.data;
  const auto &a = op.attrs;
  (void)a;
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
  return {out};
}

Results refBroadcastInDim(const Program &, const Op &op, const Operands &in, const Type &rt) {
  Tensor out = Tensor::zeros(rt);
  auto &o = out.data;
  const auto &a = op.attrs;
  (void)a;
  const Type &it = in[0]->type;
  const auto &dims = a.getI64s("dims");
  auto ist = rowMajorStrides(it.shape);
  forEachIndex(rt.shape, [&](const std::vector<int64_t> &idx, int64_t lin) {
    int64_t ii = 0;
    for (int d = 0; d < it.rank(); ++d)
      ii += (it.shape[d] == 1 ? 0 : idx[dims[d]]) * ist[d];
    o[lin] = in[0]->data[ii];
  });
  return {out};
}

Results refTranspose(const Program &, const Op &op, const Operands &in, const Type &rt) {
  Tensor out = Tensor::zeros(rt);
  auto &o = out.data;
  const auto &a = op.attrs;
  (void)a;
  const auto &perm = a.getI64s("perm");
  auto ist = rowMajorStrides(in[0]->type.shape);
  forEachIndex(rt.shape, [&](const std::vector<int64_t> &idx, int64_t lin) {
    int64_t ii = 0;
    for (int d = 0; d < rt.rank(); ++d) ii += idx[d] * ist[perm[d]];
    o[lin] = in[0]->data[ii];
  });
  return {out};
}

Results refSlice(const Program &, const Op &op, const Operands &in, const Type &rt) {
  Tensor out = Tensor::zeros(rt);
  auto &o = out.data;
  const auto &a = op.attrs;
  (void)a;
  const auto &start = a.getI64s("start");
  auto ist = rowMajorStrides(in[0]->type.shape);
  forEachIndex(rt.shape, [&](const std::vector<int64_t> &idx, int64_t lin) {
    int64_t ii = 0;
    for (int d = 0; d < rt.rank(); ++d) ii += (idx[d] + start[d]) * ist[d];
    o[lin] = in[0]->data[ii];
  });
  return {out};
}

/// Zero padding (low and high).
Results refPad(const Program &, const Op &op, const Operands &in, const Type &rt) {
  Tensor out = Tensor::zeros(rt);
  auto &o = out.data;
  const auto &a = op.attrs;
  (void)a;
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
  return {out};
}

/// Result index = [batch..., lhs free..., rhs free...] (StableHLO).
Results refDotGeneral(const Program &, const Op &op, const Operands &in, const Type &rt) {
  Tensor out = Tensor::zeros(rt);
  auto &o = out.data;
  const auto &a = op.attrs;
  (void)a;
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
  return {out};
}

/// Every output element sums the product of the operands over the labels not in the output.
Results refEinsum(const Program &, const Op &op, const Operands &in, const Type &rt) {
  Tensor out = Tensor::zeros(rt);
  auto &o = out.data;
  const auto &a = op.attrs;
  (void)a;
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
  return {out};
}

using RowMajorMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Copies the m×n Eigen matrix `x` into the row-major tensor `t` of that shape.
template <class X> void store(const X &x, Tensor &t) {
  Eigen::Map<RowMajorMatrix>(t.data.data(), x.rows(), x.cols()) = x;
}

std::string notConverged(const Program &p, const Op &op, const char *solver) {
  return "error: " + describeOp(p, op) + ": the reference evaluator's Eigen " + solver +
         " did not converge on " + p.type(op.operands[0]).str();
}

/// The full thin SVD {U[m,K], s[K], Vt[K,n]} of `A` by Eigen's BDCSVD (divide and
/// conquer, Jacobi below 16 columns; it scales by max|A_ij| itself); errors name `op`.
Results thinSvd(const Program &p, const Op &op, const Tensor &A) {
  const Type &at = A.type;
  const int64_t m = at.shape[0], n = at.shape[1], k = std::min(m, n);
  Results r;
  r.push_back(Tensor::zeros(Type({m, k})));
  r.push_back(Tensor::zeros(Type({k})));
  r.push_back(Tensor::zeros(Type({k, n})));
  Tensor &U = r[0], &s = r[1], &Vt = r[2];
  if (k == 0) return r;
  for (double x : A.data)
    if (!std::isfinite(x)) throw Error(svdFailureMessage(p, op, kSvdNonFinite));
  const Eigen::Map<const RowMajorMatrix> a(A.data.data(), m, n);
  Eigen::BDCSVD<Eigen::MatrixXd> svd(a, Eigen::ComputeThinU | Eigen::ComputeThinV);
  if (svd.info() != Eigen::Success) throw Error(notConverged(p, op, "BDCSVD"));
  store(svd.matrixU(), U);
  store(svd.singularValues().transpose(), s);
  store(svd.matrixV().transpose(), Vt);
  return r;
}

Results refSvd(const Program &p, const Op &op, const Operands &in, const Type &) {
  return thinSvd(p, op, *in[0]);
}

/// The first k triplets of refSvd's full thin SVD.
Results refSvdTopk(const Program &p, const Op &op, const Operands &in, const Type &) {
  const int64_t m = in[0]->type.shape[0], n = in[0]->type.shape[1], K = std::min(m, n);
  const int64_t k = ir::attr<OpKind::SvdTopk, "k">(op);
  Results f = thinSvd(p, op, *in[0]);
  Results r;
  for (ir::ValueId v : op.results) r.push_back(Tensor::zeros(p.type(v)));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j) r[0].data[i * k + j] = f[0].data[i * K + j];
  for (int64_t j = 0; j < k; ++j) r[1].data[j] = f[1].data[j];
  for (int64_t j = 0; j < k * n; ++j) r[2].data[j] = f[2].data[j];
  return r;
}

/// eigh by Eigen's SelfAdjointEigenSolver (tridiagonalisation, implicit symmetric QR)
/// of S = (A + Aᵀ)/2 (an entry equal to its mirror as it is): eigenvalues ascending,
/// the eigenvectors V's columns.
Results refEigh(const Program &p, const Op &op, const Operands &in, const Type &) {
  const Tensor &A = *in[0];
  const int64_t n = A.type.shape[0];
  Results r;
  r.push_back(Tensor::zeros(Type({n})));
  r.push_back(Tensor::zeros(Type({n, n})));
  if (n == 0) return r;
  for (double x : A.data)
    if (!std::isfinite(x)) throw Error(eighFailureMessage(p, op, kEighNonFinite));
  Eigen::MatrixXd S(n, n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double a = A.data[static_cast<size_t>(i * n + j)], b = A.data[static_cast<size_t>(j * n + i)];
      S(i, j) = a == b ? a : 0.5 * a + 0.5 * b;
    }
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(S, Eigen::ComputeEigenvectors);
  if (es.info() != Eigen::Success) throw Error(notConverged(p, op, "SelfAdjointEigenSolver"));
  store(es.eigenvalues().transpose(), r[0]);
  store(es.eigenvectors(), r[1]);
  return r;
}

/// qr by Eigen's HouseholderQR: Q[m,K] the first K columns of the product of the
/// reflectors, R[K,n] the upper triangle of the factored matrix.
Results refQr(const Program &p, const Op &op, const Operands &in, const Type &) {
  const Tensor &A = *in[0];
  const int64_t m = A.type.shape[0], n = A.type.shape[1], k = std::min(m, n);
  Results r;
  r.push_back(Tensor::zeros(Type({m, k})));
  r.push_back(Tensor::zeros(Type({k, n})));
  if (k == 0) return r;
  for (double x : A.data)
    if (!std::isfinite(x))
      throw Error("error: " + describeOp(p, op) + ": input matrix " + A.type.str() +
                  " contains NaN or inf; LAPACK dgeqrf not called");
  const Eigen::HouseholderQR<Eigen::MatrixXd> qr(Eigen::Map<const RowMajorMatrix>(A.data.data(), m, n));
  store(qr.householderQ() * Eigen::MatrixXd::Identity(m, k), r[0]);
  store(qr.matrixQR().topRows(k).triangularView<Eigen::Upper>().toDenseMatrix(), r[1]);
  return r;
}

/// triangular_solve by substitution, one right-hand side at a time, reading only the
/// triangle `lower` names: op(A)·x = b column by column (left), or xᵀ·op(A) = bᵀ row by
/// row, i.e. op(A)ᵀ·x = b (right).
Results refTriangularSolve(const Program &p, const Op &op, const Operands &in, const Type &) {
  const Tensor &A = *in[0], &B = *in[1];
  const int64_t n = A.type.shape[0], rows = B.type.shape[0], cols = B.type.shape[1];
  const bool left = ir::attr<OpKind::TriangularSolve, "left_side">(op) == 1,
             lower = ir::attr<OpKind::TriangularSolve, "lower">(op) == 1;
  const bool trans = ir::attr<OpKind::TriangularSolve, "transpose_a">(op) == 1;
  for (int64_t i = 0; i < n; ++i)
    if (A.data[static_cast<size_t>(i * n + i)] == 0.0 || !std::isfinite(A.data[static_cast<size_t>(i * n + i)]))
      throw Error(singularTriangleMessage(p, op, i, A.data[static_cast<size_t>(i * n + i)]));
  // The system solved per right-hand side is T·x = b with T = op(A) (left) or op(A)ᵀ
  // (right); T(i, j) reads A's triangle, 0 outside it.
  const bool tT = left ? trans : !trans;
  auto T = [&](int64_t i, int64_t j) {
    const int64_t r = tT ? j : i, c = tT ? i : j; // T(i, j) = A(r, c)
    const bool in = lower ? r >= c : r <= c;
    return in ? A.data[static_cast<size_t>(r * n + c)] : 0.0;
  };
  // T is lower triangular when A's triangle is lower and not transposed, or upper and
  // transposed: forward substitution; else backward.
  const bool forward = lower != tT;
  Tensor X = Tensor::zeros(B.type);
  const int64_t rhs = left ? cols : rows;
  for (int64_t c = 0; c < rhs; ++c) {
    auto at = [&](int64_t i) -> size_t { return static_cast<size_t>(left ? i * cols + c : c * cols + i); };
    for (int64_t s = 0; s < n; ++s) {
      const int64_t i = forward ? s : n - 1 - s;
      double acc = B.data[at(i)];
      for (int64_t t = 0; t < s; ++t) {
        const int64_t j = forward ? t : n - 1 - t;
        acc -= T(i, j) * X.data[at(j)];
      }
      X.data[at(i)] = acc / T(i, i);
    }
  }
  return {X};
}

/// sylvester_solve as one linear system of n·m unknowns, (I ⊗ S_A + S_Bᵀ ⊗ I)·vec(X) =
/// vec(C), by Eigen's fully pivoted LU (not the kernel's eigendecompositions), up to
/// kSylvesterKronecker unknowns (its matrix holds their square: 32 MiB); past that by
/// Eigen's eigendecompositions of S_A and S_B (Bartels–Stewart with diagonal Schur forms,
/// O(n³ + m³) like the kernel, in another library).
constexpr int64_t kSylvesterKronecker = 2048;

Results refSylvesterSolve(const Program &p, const Op &op, const Operands &in, const Type &) {
  const Tensor &A = *in[0], &B = *in[1], &C = *in[2];
  const int64_t n = A.type.shape[0], m = B.type.shape[0], N = n * m;
  auto sym = [](const Tensor &M, int64_t d, int64_t i, int64_t j) {
    const double x = M.data[static_cast<size_t>(i * d + j)], y = M.data[static_cast<size_t>(j * d + i)];
    return x == y ? x : 0.5 * x + 0.5 * y;
  };
  for (int w = 0; w < 2; ++w)
    for (double v : (w == 0 ? A : B).data)
      if (!std::isfinite(v)) throw Error(sylvesterFailureMessage(p, op, w));
  Tensor X = Tensor::zeros(C.type);
  if (N == 0) return {X};
  // Singular by the kernel's rule, on Eigen's eigenvalues (the same words; the same verdict
  // but within rounding of the threshold).
  auto symmetric = [&](const Tensor &M, int64_t d) {
    Eigen::MatrixXd S(d, d);
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j) S(i, j) = sym(M, d, i, j);
    return S;
  };
  // Eigenvectors only where the eigenbases solve the equation (past kSylvesterKronecker).
  const int options = N > kSylvesterKronecker ? Eigen::ComputeEigenvectors : Eigen::EigenvaluesOnly;
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> ea(symmetric(A, n), options), eb(symmetric(B, m), options);
  const Eigen::VectorXd &la = ea.eigenvalues(), &mu = eb.eigenvalues();
  if (sylvesterSingular(la.data(), n, mu.data(), m)) throw Error(sylvesterFailureMessage(p, op, 2));
  if (N > kSylvesterKronecker) {
    const Eigen::Map<const RowMajorMatrix> Cm(C.data.data(), n, m);
    Eigen::MatrixXd T = ea.eigenvectors().transpose() * Cm * eb.eigenvectors();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) T(i, j) /= la(i) + mu(j);
    store(ea.eigenvectors() * T * eb.eigenvectors().transpose(), X);
    return {X};
  }
  Eigen::MatrixXd K = Eigen::MatrixXd::Zero(N, N);
  Eigen::VectorXd rhs(N);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      const int64_t row = i * m + j;
      rhs(row) = C.data[static_cast<size_t>(row)];
      for (int64_t k = 0; k < n; ++k) K(row, k * m + j) += sym(A, n, i, k);
      for (int64_t l = 0; l < m; ++l) K(row, i * m + l) += sym(B, m, l, j);
    }
  const Eigen::FullPivLU<Eigen::MatrixXd> lu(K);
  const Eigen::VectorXd x = lu.solve(rhs);
  for (int64_t r = 0; r < N; ++r) X.data[static_cast<size_t>(r)] = x(r);
  return {X};
}

/// The definition through a full SVD (docs/trg.md §5, the rows i >= k of the full
/// rule's core matrix and its projector terms), in plain loops: with F = (I − UUᵀ)·Ū and
/// G = (I − VVᵀ)·V̄, a_ij = u_iᵀF_j and b_ij = v_iᵀG_j over the discarded triplets i,
/// x_ij = ½(a+b)L(s_j − σ_i) + ½(a−b)L(s_j + σ_i), y_ij = ½(a+b)L(s_j − σ_i) −
/// ½(a−b)L(s_j + σ_i); X = Σ_i u_i x_i + (null-space part of F)·L(s_j), Yᵀ likewise, L
/// the broadened reciprocal of svd's rule. The discarded triplets are those of A on the
/// orthogonal complements of the given kept vectors: the SVD of Q⊥ᵀ·A·P⊥, with Q⊥ and P⊥
/// orthonormal bases of span(U)⊥ and span(V)⊥ (the trailing columns of full Householder
/// QRs of U and V), mapped back. They are the full SVD's trailing triplets when U and V
/// are A's leading ones, and stay orthogonal to the given ones where a multiplet (a zero
/// singular value of a rank-deficient A) straddles the cut and any basis of it is valid.
Results refSvdTopkComplement(const Program &p, const Op &op, const Operands &in, const Type &) {
  const Tensor &A = *in[0], &U = *in[1], &s = *in[2], &Vt = *in[3], &gU = *in[4], &gVt = *in[5];
  const int64_t m = A.type.shape[0], n = A.type.shape[1], K = std::min(m, n);
  // ld: the columns of U (the kept triplets, then the guards, which the SVD of the
  // complement below makes redundant); k: the kept ones.
  const int64_t ld = s.type.shape[0], k = ld - ir::attr<OpKind::SvdTopkComplement, "guards">(op), r = gU.type.shape[1];
  const double eps = ir::attr<OpKind::SvdTopkComplement, "eps">(op);
  for (double x : A.data)
    if (!std::isfinite(x)) throw Error(svdFailureMessage(p, op, kSvdNonFinite));
  // The discarded triplets: Uf m×K and Vtf K×n hold them in columns (rows) k … K−1.
  std::vector<double> Uf(static_cast<size_t>(m * K), 0.0), sf(static_cast<size_t>(K), 0.0),
      Vtf(static_cast<size_t>(K * n), 0.0);
  if (K > k) {
    const Eigen::Map<const RowMajorMatrix> Um(U.data.data(), m, ld), Vtm(Vt.data.data(), ld, n);
    const Eigen::MatrixXd Qperp = Eigen::HouseholderQR<Eigen::MatrixXd>(Um.leftCols(k)).householderQ() *
                                  Eigen::MatrixXd::Identity(m, m).rightCols(m - k);
    const Eigen::MatrixXd Pperp = Eigen::HouseholderQR<Eigen::MatrixXd>(Vtm.topRows(k).transpose()).householderQ() *
                                  Eigen::MatrixXd::Identity(n, n).rightCols(n - k);
    const Eigen::MatrixXd B = Qperp.transpose() * Eigen::Map<const RowMajorMatrix>(A.data.data(), m, n) * Pperp;
    Eigen::BDCSVD<Eigen::MatrixXd> svd(B, Eigen::ComputeThinU | Eigen::ComputeThinV);
    if (svd.info() != Eigen::Success) throw Error(notConverged(p, op, "BDCSVD"));
    const Eigen::MatrixXd Ud = Qperp * svd.matrixU(), Vd = Pperp * svd.matrixV();
    for (int64_t i = k; i < K; ++i) {
      sf[static_cast<size_t>(i)] = svd.singularValues()(i - k);
      for (int64_t q = 0; q < m; ++q) Uf[static_cast<size_t>(q * K + i)] = Ud(q, i - k);
      for (int64_t q = 0; q < n; ++q) Vtf[static_cast<size_t>(i * n + q)] = Vd(q, i - k);
    }
  }
  const double s0 = s.data[0] != 0 ? s.data[0] : 1.0;
  // num·L(x) with L(x) = x/(x² + (ε·s₀)²): as (num/s₀)·y/(y² + ε²), y = x/s₀, the
  // fraction as 1/(y + ε²/y) with ε²/y = ε·(ε/y), so that no square under- or
  // overflows and 1/s₀ is never formed (a subnormal s₀).
  auto timesL = [&](double num, double x) {
    if (x == 0) return 0.0;
    const double y = x / s0;
    return (num / s0) / (y + eps * (eps / y));
  };
  // F (m×r) and Gt (r×n).
  std::vector<double> F(gU.data), Gt(gVt.data);
  for (int64_t j = 0; j < r; ++j) {
    for (int64_t q = 0; q < k; ++q) {
      double c = 0;
      for (int64_t i = 0; i < m; ++i) c += U.data[i * ld + q] * gU.data[i * r + j];
      for (int64_t i = 0; i < m; ++i) F[i * r + j] -= U.data[i * ld + q] * c;
      double d = 0;
      for (int64_t i = 0; i < n; ++i) d += Vt.data[q * n + i] * gVt.data[j * n + i];
      for (int64_t i = 0; i < n; ++i) Gt[j * n + i] -= Vt.data[q * n + i] * d;
    }
  }
  Results out;
  for (ir::ValueId v : op.results) out.push_back(Tensor::zeros(p.type(v)));
  std::vector<double> &X = out[0].data, &Yt = out[1].data;
  // Null-space parts first: F − Σ_{i >= k} u_i a_i (times L(s_j) when m > K).
  std::vector<double> Fn(F), Gn(Gt);
  for (int64_t i = k; i < K; ++i)
    for (int64_t j = 0; j < r; ++j) {
      double a = 0, bb = 0;
      for (int64_t q = 0; q < m; ++q) a += Uf[q * K + i] * F[q * r + j];
      for (int64_t q = 0; q < n; ++q) bb += Vtf[i * n + q] * Gt[j * n + q];
      const double sp = 0.5 * (a + bb), sm = 0.5 * (a - bb);
      const double pm = timesL(sp, s.data[j] - sf[i]), mp = timesL(sm, s.data[j] + sf[i]);
      const double x = pm + mp, y = pm - mp;
      for (int64_t q = 0; q < m; ++q) {
        X[q * r + j] += Uf[q * K + i] * x;
        Fn[q * r + j] -= Uf[q * K + i] * a;
      }
      for (int64_t q = 0; q < n; ++q) {
        Yt[j * n + q] += y * Vtf[i * n + q];
        Gn[j * n + q] -= bb * Vtf[i * n + q];
      }
    }
  for (int64_t j = 0; j < r; ++j) {
    if (m > K)
      for (int64_t q = 0; q < m; ++q) X[q * r + j] += timesL(Fn[q * r + j], s.data[j]);
    if (n > K)
      for (int64_t q = 0; q < n; ++q) Yt[j * n + q] += timesL(Gn[j * n + q], s.data[j]);
  }
  return out;
}

/// call and scan run a function of the module: the interpreter loop evaluates them
/// (evaluateFunction), so their table row is never reached.
Results refRunsFunction(const Program &, const Op &op, const Operands &, const Type &) {
  throw Error(std::string("reference: ") + ir::opName(op.kind) + " is evaluated by the interpreter loop");
}

// --- The table, in ops.def order --------------------------------------------------

/// Computes every result of `op` (types: `rt` is the first result's) from its operands.
using RefRule = Results (*)(const Program &p, const Op &op, const Operands &in, const Type &rt);
struct Entry {
  OpKind kind;
  RefRule rule;
};
constexpr Entry kRefRules[] = {
    {OpKind::Constant, refConstant},
    {OpKind::Iota, refIota},
    {OpKind::Neg, refNeg},
    {OpKind::Exp, refExp},
    {OpKind::Log, refLog},
    {OpKind::Sqrt, refSqrt},
    {OpKind::Sin, refSin},
    {OpKind::Cos, refCos},
    {OpKind::Tanh, refTanh},
    {OpKind::Abs, refAbs},
    {OpKind::Sign, refSign},
    {OpKind::Add, refAdd},
    {OpKind::Sub, refSub},
    {OpKind::Mul, refMul},
    {OpKind::Div, refDiv},
    {OpKind::Maximum, refMaximum},
    {OpKind::Compare, refCompare},
    {OpKind::Select, refSelect},
    {OpKind::ReduceSum, refReduce},
    {OpKind::ReduceMax, refReduce},
    {OpKind::BroadcastInDim, refBroadcastInDim},
    {OpKind::Reshape, refIdentity},
    {OpKind::Transpose, refTranspose},
    {OpKind::Slice, refSlice},
    {OpKind::Pad, refPad},
    {OpKind::DotGeneral, refDotGeneral},
    {OpKind::Einsum, refEinsum},
    {OpKind::Svd, refSvd},
    {OpKind::SvdTopk, refSvdTopk},
    {OpKind::SvdTopkComplement, refSvdTopkComplement},
    {OpKind::Eigh, refEigh},
    {OpKind::Qr, refQr},
    {OpKind::TriangularSolve, refTriangularSolve},
    {OpKind::SylvesterSolve, refSylvesterSolve},
    {OpKind::StopGradient, refIdentity},
    {OpKind::Call, refRunsFunction},
    {OpKind::Scan, refRunsFunction},
};
static_assert(ir::coversEveryOpInOrder(kRefRules),
              "the reference-evaluator table must have one entry per op of ir/ops.def, in its order");

Tensor zerosOf(const Type &t) {
  return Tensor(t, std::vector<double>(static_cast<size_t>(t.numel()), 0.0));
}

/// Evaluates function `f` of a module whose calls name `callees`: ops in order, a call
/// or scan by evaluating its callee (a scan once per iteration, slicing its xs and
/// stacking its ys as ops.def says), every other op by its rule.
std::vector<Tensor> evaluateFunction(const Program &f, ir::Callees callees,
                                     const std::vector<const Tensor *> &inputs) {
  std::vector<const Tensor *> env(f.values.size(), nullptr);
  for (size_t i = 0; i < f.inputs.size(); ++i) env[f.inputs[i]] = inputs[i];
  std::vector<std::unique_ptr<Tensor>> owned;
  for (const Op &op : f.ops) {
    Operands in;
    for (ir::ValueId v : op.operands) in.push_back(env[v]);
    Results rs;
    if (ir::hasCallee(op.kind)) {
      const Program &g = *ir::findCallee(callees, ir::calleeOf(op));
      const ir::Callees inner = callees.take_front(static_cast<size_t>(&g - callees.data()));
      if (op.kind == OpKind::Call) {
        rs = evaluateFunction(g, inner, in);
      } else {
        const int64_t n = ir::attr<ir::OpKind::Scan, "length">(op);
        const size_t k = static_cast<size_t>(ir::attr<ir::OpKind::Scan, "carries">(op));
        const bool reverse = ir::attr<ir::OpKind::Scan, "reverse">(op) != 0;
        std::vector<Tensor> carry;
        for (size_t c = 0; c < k; ++c) carry.push_back(*in[c]);
        std::vector<Tensor> ys;
        for (size_t y = k; y < op.results.size(); ++y) ys.push_back(zerosOf(f.type(op.results[y])));
        for (int64_t step = 0; step < n; ++step) {
          const int64_t i = reverse ? n - 1 - step : step;
          std::vector<Tensor> slices;
          for (size_t x = k; x < in.size(); ++x) {
            const Tensor &xs = *in[x];
            const int64_t per = xs.type.numel() / n;
            Tensor s = zerosOf(g.type(g.inputs[x]));
            std::copy(xs.data.begin() + i * per, xs.data.begin() + (i + 1) * per, s.data.begin());
            slices.push_back(std::move(s));
          }
          std::vector<const Tensor *> args;
          for (const Tensor &c : carry) args.push_back(&c);
          for (const Tensor &s : slices) args.push_back(&s);
          std::vector<Tensor> out = evaluateFunction(g, inner, args);
          for (size_t c = 0; c < k; ++c) carry[c] = std::move(out[c]);
          for (size_t y = 0; y < ys.size(); ++y) {
            const int64_t per = out[k + y].type.numel();
            std::copy(out[k + y].data.begin(), out[k + y].data.end(), ys[y].data.begin() + i * per);
          }
        }
        rs = std::move(carry);
        for (Tensor &y : ys) rs.push_back(std::move(y));
      }
    } else {
      rs = kRefRules[static_cast<size_t>(op.kind)].rule(f, op, in, f.type(op.results[0]));
    }
    for (size_t r = 0; r < op.results.size(); ++r) {
      owned.push_back(std::make_unique<Tensor>(std::move(rs[r])));
      env[op.results[r]] = owned.back().get();
    }
  }
  std::vector<Tensor> outs;
  for (ir::ValueId v : f.outputs) outs.push_back(*env[v]);
  return outs;
}

} // namespace

std::vector<Tensor> evaluateReference(const ir::Program &p, const std::vector<Tensor> &inputs) {
  ensureBlasSingleThreaded();
  validateInputs(p, inputs);
  std::vector<const Tensor *> in;
  for (const Tensor &t : inputs) in.push_back(&t);
  return evaluateFunction(p, p.functions, in);
}

} // namespace tessel::rt
