//===- runtime/VecMath.h - Vectorised transcendental functions ---------------===//
//
// sin, cos, tanh, exp and log over arrays of f64, from SLEEF (Shibata & Petrogalli, IEEE TPDS
// 31(6), 2020; Debian's libsleef), its 1.0-ulp ("u10") routines: every result is within
// 1.0 ulp of the correctly rounded value over the whole f64 range, with the IEEE special
// values (sin(±inf) = NaN, exp(−inf) = 0, exp(x > 709.78) = inf, log(0) = −inf,
// log(x < 0) = NaN, NaN in → NaN out, signed zeros kept). glibc's libm is also within
// 1 ulp, so the two may differ by up to 2 ulp in a result (tests/runtime/vecmath_test.cpp
// measures the difference over wide ranges).
//
// On x86-64 with AVX2 and FMA the routines run four lanes at a time (chosen once, at the
// first call, from CPUID); elsewhere SLEEF's scalar routines of the same accuracy run.
// Each element's result depends only on its own input, never on its position or on n:
// a ragged tail is computed as a padded vector. So the engine's chunks, whatever thread
// runs them, give bitwise the same results, and the reference evaluator, which calls the
// scalar entry points below, gives bitwise the engine's.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_VECMATH_H
#define TESSEL_RUNTIME_VECMATH_H

#include <cstdint>

namespace tessel::rt {

enum class VecFn { Sin, Cos, Tanh, Exp, Log };

/// o[i] = f(x[i]) for i in [0, n). x and o may be the same array (in place); other
/// overlaps are not allowed.
void vecMath(VecFn f, const double *x, double *o, int64_t n);

/// f(x) for one value, bitwise as vecMath computes it.
double vecMath(VecFn f, double x);

/// "avx2+fma (4 lanes)" or "scalar": the code path vecMath uses on this machine.
const char *vecMathIsa();

} // namespace tessel::rt

#endif
