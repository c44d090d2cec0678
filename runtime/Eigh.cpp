//===- runtime/Eigh.cpp - The eigh kernel: LAPACK dsyevd ----------------------===//
#include "runtime/Eigh.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <mutex>

#include <lapacke.h>

#include "ir/Diagnostics.h"
#include "ir/Printer.h"

namespace tessel::rt {

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

} // namespace tessel::rt
