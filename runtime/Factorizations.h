//===- runtime/Factorizations.h - The eigh, qr and triangular_solve kernels ---===//
//
// The kernels of ops eigh (LAPACK dsyevd), qr (dgeqrf, dorgqr) and triangular_solve
// (BLAS dtrsm) (ir/ops.def): their plans, sized once at prepare (workspace queries
// memoised per shape), and their runs; and svd's gesdd workspace query. Each is one chunk: one LAPACK or BLAS call.
// Operands and results are row-major; errors name the op and the shape.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>

#include "ir/Program.h"
#include "runtime/Plan.h"

namespace tessel::rt {

/// gesdd's optimal workspace (memoised per shape) for svd's plan `s`: jobz 'S' (thin U
/// and Vt) or 'N' (singular values only). `op` names errors.
int64_t gesddWorkspace(const ir::Program &prog, const ir::Op &op, const SvdPlan &s, char jobz);

/// The plan of an eigh of an n×n operand: dsyevd's workspace sizes. `op` names errors.
EighPlan eighPlan(const ir::Program &p, const ir::Op &op, int64_t n);

/// S = (A + Aᵀ)/2 = V·diag(w)·Vᵀ: A (n×n) -> w[n] ascending, V (n×n, V[i][j] the i-th
/// component of eigenvector j). `work` holds plan.lwork + plan.iworkElems doubles. Throws
/// tessel::Error naming `op` when A holds NaN or inf (LAPACK is not called) or dsyevd
/// fails.
void runEigh(const EighPlan &plan, const ir::Program &p, const ir::Op &op, const double *A,
             double *w, double *V, double *work);

/// The message of a failed eigh: the op, the matrix shape and LAPACK's info
/// (kEighNonFinite: the operand holds NaN or inf).
inline constexpr int kEighNonFinite = 1 << 30;
std::string eighFailureMessage(const ir::Program &p, const ir::Op &op, int info);

/// The plan of a qr of an m×n operand: the workspace dgeqrf and dorgqr need.
QrPlan qrPlan(const ir::Program &p, const ir::Op &op, int64_t m, int64_t n);
/// Doubles of `work` runQr needs: the column-major copy of A, the k reflector scalars and
/// LAPACK's workspace.
inline int64_t qrWorkElems(const QrPlan &q) { return q.m * q.n + q.k + q.lwork; }

/// A (m×n) -> Q (m×k), R (k×n). Throws tessel::Error naming `op` when A holds NaN or inf
/// or LAPACK fails.
void runQr(const QrPlan &plan, const ir::Program &p, const ir::Op &op, const double *A, double *Q,
           double *R, double *work);

/// The message of a triangular_solve whose A has a zero or non-finite A[i][i].
std::string singularTriangleMessage(const ir::Program &p, const ir::Op &op, int64_t i, double diag);

/// X = op(A)⁻¹·B (left) or B·op(A)⁻¹ into X (B's shape). Throws tessel::Error naming `op`
/// when the triangle's diagonal has a zero (dtrsm is not called).
void runTriangularSolve(const TriangularSolvePlan &plan, const ir::Program &p, const ir::Op &op,
                        const double *A, const double *B, double *X);

/// The plan of a sylvester_solve with A of order n and B of order m.
SylvesterSolvePlan sylvesterSolvePlan(const ir::Program &p, const ir::Op &op, int64_t n, int64_t m);
/// Doubles of `work` runSylvesterSolve needs: both eigenbases and spectra, two n×m
/// intermediates and the larger dsyevd workspace.
int64_t sylvesterWorkElems(const SylvesterSolvePlan &s);

/// sylvester_solve's errors, worded alike by the kernel and the reference evaluator:
/// `what` 0 or 1, A or B holds NaN or inf; 2, the equation is singular.
std::string sylvesterFailureMessage(const ir::Program &p, const ir::Op &op, int what);
/// Whether some |λ_i + μ_j| is within 8·u·max(n, m)·max(|λ|, |μ|) of 0 (the equation is
/// singular to the rounding of the two spectra).
bool sylvesterSingular(const double *lambda, int64_t n, const double *mu, int64_t m);

/// X with S_A·X + X·S_B = C (S the symmetric parts; A n×n, B m×m, C and X n×m, row-major):
/// S_A = V_A·diag(λ)·V_Aᵀ, S_B = V_B·diag(μ)·V_Bᵀ, X = V_A·((V_Aᵀ·C·V_B) ⊘ (λ_i + μ_j))·V_Bᵀ.
/// Throws tessel::Error naming `op` when A or B holds NaN or inf, dsyevd fails, or some
/// |λ_i + μ_j| is at the rounding of the two spectra (the equation is singular).
void runSylvesterSolve(const SylvesterSolvePlan &plan, const ir::Program &p, const ir::Op &op,
                       const double *A, const double *B, const double *C, double *X, double *work);

} // namespace tessel::rt
