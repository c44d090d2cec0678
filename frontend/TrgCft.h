//===- frontend/TrgCft.h - CFT data from the coarse-grained tensor (docs/trg.md §10) -===//
//
// At a critical point the coarse-grained tensor T_n of step n is, up to truncation, a
// fixed point whose transfer matrices on a cylinder carry the conformal spectrum (Gu and
// Wen, PRB 80, 155131 (2009)): on a cylinder of circumference L tensors, per tensor of
// length, the eigenvalues are λ_i = e^{L·f}·exp(−(2π/L)(x_i − c/12)), f the free energy
// per tensor, c the central charge and x_i the scaling dimensions. tessel forms the
// transfer matrices of L = 1 (D×D) and L = 2 (D²×D²) and eliminates f between their
// leading eigenvalues, so no normalisation of T enters:
//
//   c   = (8·ln λ₀(L=1) − 4·ln λ₀(L=2)) / π
//   x_i = ln(λ₀/|λ_i|) / (2π)       (L = 1, the eigenvalues by modulus)
//
// BTRG's bond weights are absorbed first (√w on each leg: the same network without
// weights). The data are good for a window of steps: before it the tensor has not
// reached the fixed point, after it the truncation drifts it away (docs/trg.md §10).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

#include "ir/Program.h"

namespace tessel::frontend {

/// How many scaling dimensions a row reports (the lowest, from the L = 1 spectrum).
inline constexpr size_t kTrgCftDimensions = 4;

struct TrgCftRow {
  size_t step = 0;       ///< T_n after this many steps (0: the initial tensor)
  int64_t D = 0;         ///< its bond dimension
  double c = 0;          ///< central charge (NaN when the L = 2 power iteration did not converge)
  std::vector<double> x; ///< the lowest scaling dimensions x_1 ≤ x_2 ≤ … (fewer when D is small)
};

/// The CFT data of T (f64[D,D,D,D], legs r, u, l, d) with bond weights wh, wv (f64[D];
/// both null for TRG). `step` is copied into the row. Cost: O(D⁶) for the L = 2 matrix
/// (one GEMM), O(D⁴) per power iteration on it, O(D³) for the L = 1 spectrum (LAPACK
/// dgeev). Throws tessel::Error for a T that is not rank 4 with equal extents.
TrgCftRow trgCftData(size_t step, const ir::Tensor &T, const ir::Tensor *wh = nullptr,
                     const ir::Tensor *wv = nullptr);

/// The plateau of a run's CFT data (docs/trg.md §10): among the windows of consecutive
/// steps that span a factor 2 in linear size (kTrgCftPlateauSteps = 3 steps of TRG and
/// BTRG, which grow it by √2 each; 2 of HOTRG, `sitesLog2` = 2, which doubles it) at the
/// run's largest bond dimension whose fixed
/// point is not a massive one (c ≥ 0.05 and x_1 ≥ 0.01: away from T_c the tensor flows to
/// c → 0, with x_1 → 0 in the ordered phase) and which are flat (c spreads by
/// ≤ kTrgCftPlateauSpreadC and x_1 by ≤ kTrgCftPlateauSpreadX), the one whose c and x_1
/// change least, each step's |Δc| and |Δx_1| in units of those spreads. c and each x_i
/// (those every row of the window has) are the window's means, with their spreads
/// (max − min). Not found: no such window; meaningful at a critical β only.
inline constexpr size_t kTrgCftPlateauSteps = 3;
/// The window's steps for a step of 2^sitesLog2 sites: 2/sitesLog2 + 1.
inline size_t trgCftPlateauSteps(int sitesLog2) {
  return (kTrgCftPlateauSteps - 1) / static_cast<size_t>(sitesLog2) + 1;
}
inline constexpr double kTrgCftPlateauSpreadC = 0.01;
inline constexpr double kTrgCftPlateauSpreadX = 0.005;

struct TrgCftPlateau {
  bool found = false;
  size_t firstStep = 0, lastStep = 0;
  double c = 0, cSpread = 0;
  std::vector<double> x, xSpread;
};

TrgCftPlateau trgCftPlateau(const std::vector<TrgCftRow> &rows, int sitesLog2);

} // namespace tessel::frontend
