//===- runtime/HostLinalg.h - Dense linear algebra on the host, outside programs -===//
//
// What a driver computes from the tensors a program returned, with the same LAPACK and
// BLAS the kernels use (the runtime owns that dependency): the eigenvalues of a small
// general matrix (LAPACK dgeev) and a row-major matrix product (BLAS dgemm). Used by the
// TRG's CFT data (frontend/TrgCft.h), not by any program.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <complex>
#include <cstdint>
#include <vector>

namespace tessel::rt {

/// The eigenvalues of the row-major n×n real matrix `a` (LAPACK dgeev, no vectors), in
/// LAPACK's order; complex pairs as conjugates. Throws tessel::Error when dgeev fails or
/// `a` has not n² entries.
std::vector<std::complex<double>> eigenvaluesGeneral(std::vector<double> a, int64_t n);

/// c = a·b for row-major a (m×k), b (k×n), c (m×n) (BLAS dgemm, one thread's share of
/// the process's BLAS).
void matmulRowMajor(const double *a, const double *b, double *c, int64_t m, int64_t k, int64_t n);

} // namespace tessel::rt
