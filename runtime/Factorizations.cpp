//===- runtime/Factorizations.cpp - The eigh, qr and triangular_solve kernels --===//
#include "runtime/Factorizations.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>

#include <cblas.h>
#include <lapacke.h>

#include "ir/Diagnostics.h"
#include "ir/Printer.h"
#include "runtime/RuntimeInternal.h"

namespace tessel::rt {

/// gesdd's optimal workspace for a row-major m×n matrix (computed as the column-major
/// SVD of its transpose), jobz 'S' (thin U and Vt) or 'N' (singular values only).
int64_t gesddWorkspace(const ir::Program &prog, const ir::Op &op, const SvdPlan &s, char jobz) {
  // Memoised per shape (a module holds the same SVD shape in many functions; a query
  // costs tens of microseconds); failures are not cached (they throw).
  static std::mutex mu;
  static std::map<std::array<int64_t, 4>, int64_t> cache;
  const std::array<int64_t, 4> key{s.m, s.n, s.k, jobz};
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  double wq = 0, dummy = 0;
  lapack_int idummy = 0;
  const bool vectors = jobz == 'S';
  lapack_int info = LAPACKE_dgesdd_work(
      LAPACK_COL_MAJOR, jobz, static_cast<lapack_int>(s.n), static_cast<lapack_int>(s.m), &dummy,
      static_cast<lapack_int>(s.n), &dummy, &dummy, vectors ? static_cast<lapack_int>(s.n) : 1,
      &dummy, vectors ? static_cast<lapack_int>(s.k) : 1, &wq, -1, &idummy);
  if (info != 0) throw Error(svdFailureMessage(prog, op, info));
  const int64_t lwork = std::max<int64_t>(1, static_cast<int64_t>(wq));
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= 1024) cache.clear();
  cache.emplace(key, lwork);
  return lwork;
}

std::string eighFailureMessage(const ir::Program &p, const ir::Op &op, int info) {
  const std::string shape = p.type(op.operands[0]).str();
  if (info == kEighNonFinite)
    return "error: " + ir::describeOp(p, op) + ": input matrix " + shape +
           " contains NaN or inf; LAPACK dsyevd not called";
  const std::string why = info > 0 ? "the divide-and-conquer iteration did not converge"
                                   : "argument " + std::to_string(-info) + " had an illegal value";
  return "error: " + ir::describeOp(p, op) + ": LAPACK dsyevd failed on " + shape +
         " (info = " + std::to_string(info) + ": " + why + ")";
}

EighPlan eighPlan(const ir::Program &p, const ir::Op &op, int64_t n) {
  EighPlan e;
  e.n = n;
  if (n == 0) return e;
  // Memoised per n (a module holds one shape in many functions); failures throw.
  static std::mutex mu;
  static std::map<int64_t, std::array<int64_t, 2>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(n); it != cache.end()) {
      e.lwork = it->second[0];
      e.liwork = it->second[1];
    }
  }
  if (e.lwork == 0) {
    double wq = 0, dummy = 0;
    lapack_int iq = 0;
    const lapack_int info = LAPACKE_dsyevd_work(LAPACK_COL_MAJOR, 'V', 'L', static_cast<lapack_int>(n), &dummy,
                                                static_cast<lapack_int>(n), &dummy, &wq, -1, &iq, -1);
    if (info != 0) throw Error(eighFailureMessage(p, op, info));
    e.lwork = std::max<int64_t>(1, static_cast<int64_t>(wq));
    e.liwork = std::max<int64_t>(1, static_cast<int64_t>(iq));
    std::lock_guard<std::mutex> lock(mu);
    if (cache.size() >= 1024) cache.clear();
    cache[n] = {e.lwork, e.liwork};
  }
  e.iworkElems = (e.liwork * static_cast<int64_t>(sizeof(lapack_int)) + 7) / 8;
  return e;
}

void runEigh(const EighPlan &plan, const ir::Program &p, const ir::Op &op, const double *A,
             double *w, double *V, double *work) {
  const int64_t n = plan.n;
  if (n == 0) return;
  // S = (A + Aᵀ)/2 into V (symmetric: its row- and column-major forms agree); an entry
  // equal to its mirror is taken as it is, so a symmetric A is decomposed exactly as given.
  bool finite = true;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double x = A[i * n + j], y = A[j * n + i];
      V[i * n + j] = x == y ? x : 0.5 * x + 0.5 * y;
      finite &= std::isfinite(x);
    }
  if (!finite) throw Error(eighFailureMessage(p, op, kEighNonFinite));
  auto *iwork = reinterpret_cast<lapack_int *>(work + plan.lwork);
  const lapack_int info = LAPACKE_dsyevd_work(
      LAPACK_COL_MAJOR, 'V', 'L', static_cast<lapack_int>(n), V, static_cast<lapack_int>(n), w, work,
      static_cast<lapack_int>(plan.lwork), iwork, static_cast<lapack_int>(plan.liwork));
  if (info != 0) throw Error(eighFailureMessage(p, op, info));
  // dsyevd left eigenvector j in column j of the column-major array, i.e. in row j of the
  // row-major one: transpose in place.
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) std::swap(V[i * n + j], V[j * n + i]);
}

namespace {

std::string qrFailureMessage(const ir::Program &p, const ir::Op &op, const char *routine, int info) {
  const std::string shape = p.type(op.operands[0]).str();
  if (info == kEighNonFinite)
    return "error: " + ir::describeOp(p, op) + ": input matrix " + shape +
           " contains NaN or inf; LAPACK dgeqrf not called";
  return "error: " + ir::describeOp(p, op) + ": LAPACK " + routine + " failed on " + shape +
         " (info = " + std::to_string(info) + ": argument " + std::to_string(-info) +
         " had an illegal value)";
}

} // namespace

QrPlan qrPlan(const ir::Program &p, const ir::Op &op, int64_t m, int64_t n) {
  QrPlan q;
  q.m = m;
  q.n = n;
  q.k = std::min(m, n);
  if (q.k == 0) return q;
  static std::mutex mu;
  static std::map<std::array<int64_t, 2>, int64_t> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find({m, n}); it != cache.end()) {
      q.lwork = it->second;
      return q;
    }
  }
  double wq = 0, dummy = 0;
  const auto M = static_cast<lapack_int>(m), N = static_cast<lapack_int>(n), K = static_cast<lapack_int>(q.k);
  lapack_int info = LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, M, N, &dummy, M, &dummy, &wq, -1);
  if (info != 0) throw Error(qrFailureMessage(p, op, "dgeqrf", info));
  int64_t lwork = static_cast<int64_t>(wq);
  info = LAPACKE_dorgqr_work(LAPACK_COL_MAJOR, M, K, K, &dummy, M, &dummy, &wq, -1);
  if (info != 0) throw Error(qrFailureMessage(p, op, "dorgqr", info));
  q.lwork = std::max<int64_t>({1, lwork, static_cast<int64_t>(wq)});
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= 1024) cache.clear();
  cache[{m, n}] = q.lwork;
  return q;
}

void runQr(const QrPlan &plan, const ir::Program &p, const ir::Op &op, const double *A, double *Q,
           double *R, double *work) {
  const int64_t m = plan.m, n = plan.n, k = plan.k;
  if (k == 0) return;
  // Column-major copy of A (LAPACK's layout), then the reflectors' scalars, then LAPACK's
  // workspace.
  double *a = work, *tau = work + m * n, *w = tau + k;
  bool finite = true;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double x = A[i * n + j];
      a[i + j * m] = x;
      finite &= std::isfinite(x);
    }
  if (!finite) throw Error(qrFailureMessage(p, op, "dgeqrf", kEighNonFinite));
  const auto M = static_cast<lapack_int>(m), N = static_cast<lapack_int>(n), K = static_cast<lapack_int>(k);
  const auto L = static_cast<lapack_int>(plan.lwork);
  lapack_int info = LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, M, N, a, M, tau, w, L);
  if (info != 0) throw Error(qrFailureMessage(p, op, "dgeqrf", info));
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < n; ++j) R[i * n + j] = j >= i ? a[i + j * m] : 0.0;
  info = LAPACKE_dorgqr_work(LAPACK_COL_MAJOR, M, K, K, a, M, tau, w, L);
  if (info != 0) throw Error(qrFailureMessage(p, op, "dorgqr", info));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j) Q[i * k + j] = a[i + j * m];
}

SylvesterSolvePlan sylvesterSolvePlan(const ir::Program &p, const ir::Op &op, int64_t n, int64_t m) {
  SylvesterSolvePlan s;
  s.n = n;
  s.m = m;
  s.a = eighPlan(p, op, n);
  s.b = eighPlan(p, op, m);
  return s;
}

int64_t sylvesterWorkElems(const SylvesterSolvePlan &s) {
  const int64_t lapack = std::max(s.a.lwork + s.a.iworkElems, s.b.lwork + s.b.iworkElems);
  return s.n * s.n + s.n + s.m * s.m + s.m + 2 * s.n * s.m + lapack;
}

std::string sylvesterFailureMessage(const ir::Program &p, const ir::Op &op, int what) {
  const std::string a = "A " + p.type(op.operands[0]).str(), b = "B " + p.type(op.operands[1]).str();
  if (what < 2)
    return "error: " + ir::describeOp(p, op) + ": " + (what == 0 ? a : b) +
           " holds NaN or inf; LAPACK dsyevd not called";
  return "error: " + ir::describeOp(p, op) + ": the equation is singular: an eigenvalue of A's " +
         "symmetric part meets one of −B's to rounding (" + a + ", " + b + ")";
}

bool sylvesterSingular(const double *lambda, int64_t n, const double *mu, int64_t m) {
  double scale = 0;
  for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(lambda[i]));
  for (int64_t j = 0; j < m; ++j) scale = std::max(scale, std::fabs(mu[j]));
  const double tol = 8 * std::numeric_limits<double>::epsilon() * static_cast<double>(std::max(n, m)) * scale;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j)
      if (!(std::fabs(lambda[i] + mu[j]) > tol)) return true;
  return false;
}

void runSylvesterSolve(const SylvesterSolvePlan &plan, const ir::Program &p, const ir::Op &op,
                       const double *A, const double *B, const double *C, double *X, double *work) {
  const int64_t n = plan.n, m = plan.m;
  for (int64_t e = 0; e < n * n; ++e)
    if (!std::isfinite(A[e])) throw Error(sylvesterFailureMessage(p, op, 0));
  for (int64_t e = 0; e < m * m; ++e)
    if (!std::isfinite(B[e])) throw Error(sylvesterFailureMessage(p, op, 1));
  if (n == 0 || m == 0) return;
  double *VA = work, *la = VA + n * n, *VB = la + n, *mu = VB + m * m, *T = mu + m, *U = T + n * m;
  double *lapack = U + n * m;
  runEigh(plan.a, p, op, A, la, VA, lapack);
  runEigh(plan.b, p, op, B, mu, VB, lapack);
  if (sylvesterSingular(la, n, mu, m)) throw Error(sylvesterFailureMessage(p, op, 2));
  const int N = static_cast<int>(n), M = static_cast<int>(m);
  // U = V_Aᵀ·C, T = U·V_B, T ⊘ (λ_i + μ_j), U = V_A·T, X = U·V_Bᵀ.
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, M, N, 1.0, VA, N, C, M, 0.0, U, M);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, M, M, 1.0, U, M, VB, M, 0.0, T, M);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) T[i * m + j] /= la[i] + mu[j];
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, M, N, 1.0, VA, N, T, M, 0.0, U, M);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, M, M, 1.0, U, M, VB, M, 0.0, X, M);
}

std::string singularTriangleMessage(const ir::Program &p, const ir::Op &op, int64_t i, double diag) {
  return "error: " + ir::describeOp(p, op) + ": A " + p.type(op.operands[0]).str() + " has " +
         (diag == 0.0 ? "a zero" : "a non-finite value") + " on its diagonal (A[" + std::to_string(i) +
         "][" + std::to_string(i) + "]): the triangular system is singular; BLAS dtrsm not called";
}

void runTriangularSolve(const TriangularSolvePlan &plan, const ir::Program &p, const ir::Op &op,
                        const double *A, const double *B, double *X) {
  const int64_t n = plan.n;
  for (int64_t i = 0; i < n; ++i)
    if (A[i * n + i] == 0.0 || !std::isfinite(A[i * n + i]))
      throw Error(singularTriangleMessage(p, op, i, A[i * n + i]));
  const int64_t count = plan.rows * plan.cols;
  std::copy(B, B + count, X);
  if (count == 0) return;
  cblas_dtrsm(CblasRowMajor, plan.left ? CblasLeft : CblasRight, plan.lower ? CblasLower : CblasUpper,
              plan.transposeA ? CblasTrans : CblasNoTrans, CblasNonUnit, static_cast<int>(plan.rows),
              static_cast<int>(plan.cols), 1.0, A, static_cast<int>(n), X, static_cast<int>(plan.cols));
}

} // namespace tessel::rt
