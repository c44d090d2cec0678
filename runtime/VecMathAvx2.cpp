//===- runtime/VecMathAvx2.cpp - The AVX2 path of runtime/VecMath.h ----------===//
#include "runtime/VecMathAvx2.h"

#if defined(__x86_64__)
#include <cstring>
#include <immintrin.h>
#include <sleef.h>

namespace tessel::rt::detail {
namespace {

template <class F>
void apply(F f, const double *x, double *o, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) _mm256_storeu_pd(o + i, f(_mm256_loadu_pd(x + i)));
  if (i < n) {
    alignas(32) double in[4] = {0, 0, 0, 0}, out[4];
    const size_t bytes = static_cast<size_t>(n - i) * sizeof(double);
    std::memcpy(in, x + i, bytes);
    _mm256_store_pd(out, f(_mm256_load_pd(in)));
    std::memcpy(o + i, out, bytes);
  }
}

} // namespace

void vecMathAvx2(VecFn f, const double *x, double *o, int64_t n) {
  switch (f) {
  case VecFn::Sin: apply([](__m256d v) { return Sleef_sind4_u10avx2(v); }, x, o, n); return;
  case VecFn::Cos: apply([](__m256d v) { return Sleef_cosd4_u10avx2(v); }, x, o, n); return;
  case VecFn::Tanh: apply([](__m256d v) { return Sleef_tanhd4_u10avx2(v); }, x, o, n); return;
  case VecFn::Exp: apply([](__m256d v) { return Sleef_expd4_u10avx2(v); }, x, o, n); return;
  case VecFn::Log: apply([](__m256d v) { return Sleef_logd4_u10avx2(v); }, x, o, n); return;
  }
}

} // namespace tessel::rt::detail
#endif
