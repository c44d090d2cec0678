//===- runtime/Multivector.h - Products of a large matrix with a few vectors -===//
//
// The Krylov kernels of runtime/TruncatedSvd.cpp and runtime/SvdComplement.cpp multiply
// one large matrix A (m×n, 1024×1024 at χ = 32) by blocks of a few vectors, tens of times per call, alternately
// A·X and Aᵀ·Y. A BLAS dgemm packs its large operand into panels on every call; with
// 8 columns that copy of A costs as much as the flops (OpenBLAS, 1024×1024×8: 0.9–1.0
// ms per product, half of it packing). These kernels stream A once per product,
// unpacked, four rows at a time against the vectors held in registers (XLA's CPU
// backend likewise emits its own loops for matrix–vector products instead of calling
// a GEMM): 0.49 ms for A·X and 0.58 ms for Aᵀ·Y at 1024×1024×8 on one AVX2 core (AMD
// EPYC). From about 32 columns on a product is compute-bound and BLAS is as fast.
//
// Each result element is one sum in a fixed order (over the columns of A for A·X, over
// rows in blocks of four for Aᵀ·Y), the same for every call, width and run. The AVX2
// path takes p a multiple of 4 (callers pad with zero columns); other p, and CPUs
// without AVX2 and FMA, go to cblas_dgemm.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace tessel::rt {

/// Y = A·X. A row-major m×n (leading dimension n), X row-major n×p, Y row-major m×p
/// (leading dimensions p). Any p >= 0 (the streaming path when p is a multiple of 4).
void matMultivector(const double *A, int64_t m, int64_t n, const double *X, int64_t p, double *Y);

/// Z = Aᵀ·Y. A row-major m×n, Y row-major m×p, Z row-major n×p (overwritten).
void matTMultivector(const double *A, int64_t m, int64_t n, const double *Y, int64_t p, double *Z);

/// "avx2+fma" or "blas": which path the products take on this CPU.
const char *multivectorIsa();

} // namespace tessel::rt
