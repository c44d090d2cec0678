//===- runtime/VecMathAvx2.h - The AVX2 path of runtime/VecMath.h ------------===//
// Compiled with -mavx2 -mfma (runtime/CMakeLists.txt) and called only after CPUID said
// both are there.
#ifndef TESSEL_RUNTIME_VECMATHAVX2_H
#define TESSEL_RUNTIME_VECMATHAVX2_H

#include "runtime/VecMath.h"

namespace tessel::rt::detail {

/// vecMath(f, x, o, n) with SLEEF's 4-lane AVX2 routines; a tail of n mod 4 elements
/// runs as one zero-padded vector.
void vecMathAvx2(VecFn f, const double *x, double *o, int64_t n);

} // namespace tessel::rt::detail

#endif
