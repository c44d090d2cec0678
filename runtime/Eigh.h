//===- runtime/Eigh.h - The eigh kernel: LAPACK dsyevd ------------------------===//
//
// The symmetric eigendecomposition of op eigh (ir/ops.def): the symmetric part
// S = (A + Aᵀ)/2 of a row-major n×n operand, S = V·diag(w)·Vᵀ, w ascending, by LAPACK
// dsyevd (divide and conquer, jobz = 'V'). One chunk: dsyevd is one call.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>

#include "ir/Program.h"
#include "runtime/Plan.h"

namespace tessel::rt {

/// The plan of an eigh of an n×n operand: dsyevd's workspace sizes, queried once per n
/// (memoised). `op` names errors.
EighPlan eighPlan(const ir::Program &p, const ir::Op &op, int64_t n);

/// Runs the decomposition: A (row-major n×n) -> w[n], V (row-major n×n, V[i][j] the i-th
/// component of eigenvector j). `work` holds plan.lwork + plan.iworkElems doubles. Throws
/// tessel::Error naming `op` when A holds NaN or inf (LAPACK is not called) or dsyevd
/// fails.
void runEigh(const EighPlan &plan, const ir::Program &p, const ir::Op &op, const double *A,
             double *w, double *V, double *work);

/// The message of a failed eigh: the op, the matrix shape and LAPACK's info
/// (kEighNonFinite: the operand holds NaN or inf).
inline constexpr int kEighNonFinite = 1 << 30;
std::string eighFailureMessage(const ir::Program &p, const ir::Op &op, int info);

} // namespace tessel::rt
