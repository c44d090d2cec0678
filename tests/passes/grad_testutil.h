// Helpers shared by the grad tests (tests/passes/grad_*.cpp).
#pragma once

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "frontend/GradCheck.h"
#include "ir/Builder.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Grad.h"
#include "runtime/Runtime.h"

namespace gradtest {

using namespace tessel;
using ir::Tensor;

/// Row-major matrix helpers (tests only).
struct Mat {
  int64_t m = 0, n = 0;
  std::vector<double> a;
  Mat() = default;
  Mat(int64_t m_, int64_t n_) : m(m_), n(n_), a(static_cast<size_t>(m_ * n_), 0.0) {}
  double &operator()(int64_t i, int64_t j) { return a[static_cast<size_t>(i * n + j)]; }
  double operator()(int64_t i, int64_t j) const { return a[static_cast<size_t>(i * n + j)]; }
  Tensor tensor() const { return Tensor(ir::Type({m, n}), a); }
  static Mat eye(int64_t n) {
    Mat r(n, n);
    for (int64_t i = 0; i < n; ++i) r(i, i) = 1;
    return r;
  }
};

inline Mat matmul(const Mat &x, const Mat &y) {
  Mat r(x.m, y.n);
  for (int64_t i = 0; i < x.m; ++i)
    for (int64_t k = 0; k < x.n; ++k)
      for (int64_t j = 0; j < y.n; ++j) r(i, j) += x(i, k) * y(k, j);
  return r;
}

inline Mat transposed(const Mat &x) {
  Mat r(x.n, x.m);
  for (int64_t i = 0; i < x.m; ++i)
    for (int64_t j = 0; j < x.n; ++j) r(j, i) = x(i, j);
  return r;
}

/// A random orthogonal n×n matrix: a product of three Householder reflections.
inline Mat randomOrthogonal(int64_t n, std::mt19937_64 &rng) {
  std::normal_distribution<double> N(0, 1);
  Mat q = Mat::eye(n);
  for (int r = 0; r < 3; ++r) {
    std::vector<double> w(static_cast<size_t>(n));
    double ww = 0;
    for (double &x : w) {
      x = N(rng);
      ww += x * x;
    }
    Mat h = Mat::eye(n);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) h(i, j) -= 2 * w[i] * w[j] / ww;
    q = matmul(q, h);
  }
  return q;
}

/// The first k columns of x.
inline Mat leftCols(const Mat &x, int64_t k) {
  Mat r(x.m, k);
  for (int64_t i = 0; i < x.m; ++i)
    for (int64_t j = 0; j < k; ++j) r(i, j) = x(i, j);
  return r;
}

/// U[m,k]·diag(s)·V[n,k]ᵀ.
inline Mat usvt(const Mat &U, const std::vector<double> &s, const Mat &V) {
  Mat r(U.m, V.m);
  for (int64_t i = 0; i < U.m; ++i)
    for (int64_t j = 0; j < V.m; ++j)
      for (size_t k = 0; k < s.size(); ++k)
        r(i, j) += U(i, static_cast<int64_t>(k)) * s[k] * V(j, static_cast<int64_t>(k));
  return r;
}

inline double maxAbsDiff(const std::vector<double> &x, const std::vector<double> &y) {
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, std::abs(x[i] - y[i]));
  return d;
}

inline bool allFinite(const std::vector<double> &x) {
  for (double v : x)
    if (!std::isfinite(v)) return false;
  return true;
}

/// Gradient of a single-scalar-output program w.r.t. `wrt` at `inputs`, evaluated by the
/// reference evaluator. The grad program is verified first.
inline std::vector<Tensor> evalGrad(const ir::Program &p, const std::vector<std::string> &wrt,
                                    const std::vector<Tensor> &inputs) {
  passes::GradOptions o;
  o.wrt = wrt;
  o.keepOutputs = false;
  ir::Program g = passes::grad(p, o);
  ir::verifyOrThrow(g);
  return rt::evaluateReference(g, inputs);
}

} // namespace gradtest
