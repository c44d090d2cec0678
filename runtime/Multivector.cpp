//===- runtime/Multivector.cpp - Products of a large matrix with a few vectors ===//
#include "runtime/Multivector.h"

#include <algorithm>
#include <cstring>

#include <cblas.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TESSEL_MULTIVECTOR_AVX2 1
#endif

namespace tessel::rt {
namespace {

bool useAvx2() {
#if TESSEL_MULTIVECTOR_AVX2
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
#else
  return false;
#endif
}

#if TESSEL_MULTIVECTOR_AVX2
#define TESSEL_AVX2 __attribute__((target("avx2,fma")))

// Both products run over blocks of columnBlock(p) columns of A (the j of the sums), so
// that the small operand's rows a block reads (X[j0:j1, :] for A·X) or writes (Z[j0:j1, :]
// for Aᵀ·Y) stay in L1 while four rows of A at a time stream past them. Within a
// block, the columns of X, Y and Z go in chunks of eight (two vectors) and then four.
// A sum over j continues across blocks through Y in memory: the same chain of FMAs,
// in the same order, as without blocks.
inline int64_t columnBlock(int64_t p) { return p <= 8 ? 256 : p <= 16 ? 128 : p <= 32 ? 64 : 32; }

/// Y[0:R, chunk] (+)= A[0:R, j0:j1]·X[j0:j1, chunk] (first: from zero). A points at the
/// block's first row, X and Y at the chunk's first column.
template <int R, int V>
TESSEL_AVX2 inline void axBlock(const double *A, int64_t lda, int64_t j0, int64_t j1,
                                const double *X, int64_t p, double *Y, bool first) {
  __m256d acc[R][V];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v)
      acc[r][v] = first ? _mm256_setzero_pd() : _mm256_loadu_pd(Y + r * p + 4 * v);
  for (int64_t j = j0; j < j1; ++j) {
    __m256d x[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) x[v] = _mm256_loadu_pd(X + j * p + 4 * v);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256d s = _mm256_broadcast_sd(A + r * lda + j);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_pd(s, x[v], acc[r][v]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) _mm256_storeu_pd(Y + r * p + 4 * v, acc[r][v]);
}

/// Z[j0:j1, chunk] += A[0:R, j0:j1]ᵀ·Y[0:R, chunk] (R = 4: two partial sums of two rows
/// each, added last, so that no chain is four FMAs deep).
template <int R, int V>
TESSEL_AVX2 inline void atyBlock(const double *A, int64_t lda, int64_t j0, int64_t j1,
                                 const double *Y, int64_t p, double *Z) {
  __m256d y[R][V];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) y[r][v] = _mm256_loadu_pd(Y + r * p + 4 * v);
  for (int64_t j = j0; j < j1; ++j) {
    double *z = Z + j * p;
    if constexpr (R == 4) {
      const __m256d s0 = _mm256_broadcast_sd(A + j), s1 = _mm256_broadcast_sd(A + lda + j);
      const __m256d s2 = _mm256_broadcast_sd(A + 2 * lda + j);
      const __m256d s3 = _mm256_broadcast_sd(A + 3 * lda + j);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) {
        const __m256d part = _mm256_fmadd_pd(s1, y[1][v], _mm256_mul_pd(s0, y[0][v]));
        const __m256d acc =
            _mm256_fmadd_pd(s3, y[3][v], _mm256_fmadd_pd(s2, y[2][v], _mm256_loadu_pd(z + 4 * v)));
        _mm256_storeu_pd(z + 4 * v, _mm256_add_pd(acc, part));
      }
    } else {
      const __m256d s = _mm256_broadcast_sd(A + j);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v)
        _mm256_storeu_pd(z + 4 * v, _mm256_fmadd_pd(s, y[0][v], _mm256_loadu_pd(z + 4 * v)));
    }
  }
}

template <int R>
TESSEL_AVX2 void axRows(const double *A, int64_t lda, int64_t j0, int64_t j1, const double *X,
                        int64_t p, double *Y) {
  int64_t c = 0;
  for (; c + 8 <= p; c += 8) axBlock<R, 2>(A, lda, j0, j1, X + c, p, Y + c, j0 == 0);
  for (; c < p; c += 4) axBlock<R, 1>(A, lda, j0, j1, X + c, p, Y + c, j0 == 0);
}

template <int R>
TESSEL_AVX2 void atyRows(const double *A, int64_t lda, int64_t j0, int64_t j1, const double *Y,
                         int64_t p, double *Z) {
  int64_t c = 0;
  for (; c + 8 <= p; c += 8) atyBlock<R, 2>(A, lda, j0, j1, Y + c, p, Z + c);
  for (; c < p; c += 4) atyBlock<R, 1>(A, lda, j0, j1, Y + c, p, Z + c);
}

TESSEL_AVX2 void matMultivectorAvx2(const double *A, int64_t m, int64_t n, const double *X,
                                    int64_t p, double *Y) {
  const int64_t jb = columnBlock(p);
  for (int64_t j0 = 0; j0 < n || j0 == 0; j0 += jb) {
    const int64_t j1 = std::min(n, j0 + jb);
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) axRows<4>(A + i * n, n, j0, j1, X, p, Y + i * p);
    for (; i < m; ++i) axRows<1>(A + i * n, n, j0, j1, X, p, Y + i * p);
  }
}

TESSEL_AVX2 void matTMultivectorAvx2(const double *A, int64_t m, int64_t n, const double *Y,
                                     int64_t p, double *Z) {
  std::memset(Z, 0, static_cast<size_t>(n * p) * sizeof(double));
  const int64_t jb = columnBlock(p);
  for (int64_t j0 = 0; j0 < n; j0 += jb) {
    const int64_t j1 = std::min(n, j0 + jb);
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) atyRows<4>(A + i * n, n, j0, j1, Y + i * p, p, Z);
    for (; i < m; ++i) atyRows<1>(A + i * n, n, j0, j1, Y + i * p, p, Z);
  }
}
#undef TESSEL_AVX2
#endif

} // namespace

void matMultivector(const double *A, int64_t m, int64_t n, const double *X, int64_t p, double *Y) {
  if (m == 0 || p == 0) return;
#if TESSEL_MULTIVECTOR_AVX2
  if (p % 4 == 0 && useAvx2()) {
    matMultivectorAvx2(A, m, n, X, p, Y);
    return;
  }
#endif
  if (n == 0) {
    std::memset(Y, 0, static_cast<size_t>(m * p) * sizeof(double));
    return;
  }
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(p), static_cast<blasint>(n), 1.0, A, static_cast<blasint>(n), X,
              static_cast<blasint>(p), 0.0, Y, static_cast<blasint>(p));
}

void matTMultivector(const double *A, int64_t m, int64_t n, const double *Y, int64_t p, double *Z) {
  if (n == 0 || p == 0) return;
#if TESSEL_MULTIVECTOR_AVX2
  if (p % 4 == 0 && useAvx2()) {
    matTMultivectorAvx2(A, m, n, Y, p, Z);
    return;
  }
#endif
  if (m == 0) {
    std::memset(Z, 0, static_cast<size_t>(n * p) * sizeof(double));
    return;
  }
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<blasint>(n),
              static_cast<blasint>(p), static_cast<blasint>(m), 1.0, A, static_cast<blasint>(n), Y,
              static_cast<blasint>(p), 0.0, Z, static_cast<blasint>(p));
}

const char *multivectorIsa() { return useAvx2() ? "avx2+fma" : "blas"; }

} // namespace tessel::rt
