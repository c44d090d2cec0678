//===- runtime/VecMath.cpp - Vectorised transcendental functions -------------===//
#include "runtime/VecMath.h"

#include <sleef.h>

#include "runtime/VecMathAvx2.h"

namespace tessel::rt {
namespace {

bool useAvx2() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
#else
  return false;
#endif
}

double scalar(VecFn f, double x) {
  switch (f) {
  case VecFn::Sin: return Sleef_sin_u10(x);
  case VecFn::Cos: return Sleef_cos_u10(x);
  case VecFn::Tanh: return Sleef_tanh_u10(x);
  case VecFn::Exp: return Sleef_exp_u10(x);
  case VecFn::Log: return Sleef_log_u10(x);
  }
  return x;
}

} // namespace

void vecMath(VecFn f, const double *x, double *o, int64_t n) {
#if defined(__x86_64__)
  if (useAvx2()) {
    detail::vecMathAvx2(f, x, o, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) o[i] = scalar(f, x[i]);
}

double vecMath(VecFn f, double x) {
  double o = 0;
  vecMath(f, &x, &o, 1);
  return o;
}

const char *vecMathIsa() { return useAvx2() ? "avx2+fma (4 lanes)" : "scalar"; }

} // namespace tessel::rt
