//===- runtime/Kernels.h - CPU kernels of the engine (internal) ----------------===//
#pragma once

#include <cstdint>

#include "runtime/Plan.h"

namespace tessel::rt {

/// Executes chunk `chunk` (0 <= chunk < inst.nchunks) of `inst`. `ptr[v]` is the
/// buffer of plan value v for this run. Chunks of one instruction write disjoint
/// parts of the results and may run concurrently. Throws tessel::Error naming the op
/// when a kernel fails (non-finite SVD input, LAPACK info != 0).
void runChunk(const Plan &plan, const Instruction &inst, int32_t chunk, double *const *ptr);

/// Executes chunks [c0, c1) of `inst` on the calling thread, with the same results as
/// runChunk on each of them. A GEMM whose chunks are full-width row strips runs each
/// batch's strips as one BLAS call (one packing of op(B) instead of one per strip; the
/// engine of width 1 runs every instruction so). That gives the same bits because a
/// BLAS level-3 driver blocks the sum over K by K alone: row i of C is the same sum in
/// the same order however the rows are split (OpenBLAS's does; tests/runtime/
/// engine_test.cpp checks it for the shapes of the TRG programs). A BLAS that sends
/// single-row products to its GEMV (newer OpenBLAS does) could differ only where the
/// last strip is one row.
void runChunks(const Plan &plan, const Instruction &inst, int32_t c0, int32_t c1,
               double *const *ptr);

/// --check-nan / --check-inf (plan.options.valueCheck): throws tessel::Error if a result of
/// `inst` holds NaN (or, with --check-inf, ±inf), naming the op, its location, the first
/// bad element and, per operand, whether it held NaN, inf or neither.
void checkFiniteResults(const Plan &plan, const Instruction &inst, double *const *ptr);

} // namespace tessel::rt
