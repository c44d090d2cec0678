//===- runtime/HostLinalg.cpp - Dense linear algebra on the host -----------------===//
#include "runtime/HostLinalg.h"

#include <cblas.h>
#include <lapacke.h>

#include <string>

#include "ir/Diagnostics.h"

namespace tessel::rt {

std::vector<std::complex<double>> eigenvaluesGeneral(std::vector<double> a, int64_t n) {
  if (n < 1 || static_cast<int64_t>(a.size()) != n * n)
    throw Error("error: eigenvalues: expected a " + std::to_string(n) + "x" + std::to_string(n) +
                " matrix, got " + std::to_string(a.size()) + " entries");
  std::vector<double> wr(static_cast<size_t>(n)), wi(static_cast<size_t>(n));
  double dummy = 0;
  const lapack_int N = static_cast<lapack_int>(n);
  const lapack_int info = LAPACKE_dgeev(LAPACK_ROW_MAJOR, 'N', 'N', N, a.data(), N, wr.data(),
                                        wi.data(), &dummy, 1, &dummy, 1);
  if (info != 0)
    throw Error("error: eigenvalues: LAPACK dgeev failed (info = " + std::to_string(info) + ") for a " +
                std::to_string(n) + "x" + std::to_string(n) + " matrix");
  std::vector<std::complex<double>> ev(static_cast<size_t>(n));
  for (size_t i = 0; i < ev.size(); ++i) ev[i] = {wr[i], wi[i]};
  return ev;
}

void matmulRowMajor(const double *a, const double *b, double *c, int64_t m, int64_t k, int64_t n) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0, a, static_cast<int>(k), b, static_cast<int>(n), 0.0, c,
              static_cast<int>(n));
}

} // namespace tessel::rt
