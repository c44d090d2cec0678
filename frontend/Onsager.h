//===- frontend/Onsager.h - Exact 2D Ising free energy (Onsager 1944) ---------===//
//
// Exact per-site quantities of the 2D square-lattice Ising model on the infinite
// lattice, J = 1, no field, β = 1/T (docs/trg.md §7). These are the reference values the
// TRG approximant is compared with.
//
//   x = 2β, t = tanh x, k = 2 sinh x / cosh² x, k'² = ((sinh² x − 1)/cosh² x)²
//   lnZ/N       = ln(2 cosh x) + (1/π) ∫_0^{π/2} ln[(1 + sqrt(1 − k² sin²θ)) / 2] dθ
//   d(lnZ/N)/dβ = −u = coth(x)·[1 + (2/π)(2t² − 1)·K(k)]
//   c           = (4/π)(β coth x)²·{K − E − (1 − t²)·[π/2 + (2t² − 1)·K]}
//   d²(lnZ/N)/dβ² = c / β²
//
// K and E are computed by the arithmetic–geometric mean from k' (not from 1 − k², which
// loses all digits near β_c); the integral by composite Gauss–Legendre quadrature on
// panels graded geometrically towards θ = π/2, where the integrand has a near-
// singularity of width ~k' (fixed rule, no adaptive tolerance). Accuracy ~1e-15
// relative for β in (0, 5], including β next to β_c.
//
// References: L. Onsager, Phys. Rev. 65, 117 (1944); the AGM for K and E:
// Abramowitz & Stegun 17.6.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>

namespace tessel::frontend {

/// β_c = ½ ln(1 + √2), the critical inverse temperature.
inline constexpr double kIsingBetaC = 0.44068679350977147;

/// Exact per-site values at one β. Units: J = 1, k_B = 1.
struct OnsagerValues {
  double beta = 0;
  double lnZ = 0;          ///< lnZ/N
  double dlnZ = 0;         ///< d(lnZ/N)/dβ = −u
  double energy = 0;       ///< u = internal energy per site = −d(lnZ/N)/dβ
  double d2lnZ = 0;        ///< d²(lnZ/N)/dβ² (diverges at β_c)
  double specificHeat = 0; ///< c = β² d²(lnZ/N)/dβ²
};

/// Exact values at `beta`. At β_c exactly (kIsingBetaC) the energy is its finite limit
/// u = −√2 (d(lnZ/N)/dβ = √2) and d², c are +inf (they diverge logarithmically). Throws
/// tessel::Error if beta is not finite or ≤ 0.
OnsagerValues onsager(double beta);

/// The critical point of the q-state Potts model (J = 1, energy −J·δ(σ_i, σ_j) per bond):
/// β_c = ln(1 + √q) (Potts 1952; Baxter, J. Phys. C 6, L445 (1973)).
double pottsBetaC(int q);
/// The exact internal energy per site of the q-state Potts model at β_c, for q ≤ 4 (a
/// continuous transition): u_c = −(1 + 1/√q) (Baxter, Exactly Solved Models, §12.7; the
/// two bonds per site of the square lattice). For q > 4 the transition is first order and
/// the two coexisting phases have different energies: returns nothing.
std::optional<double> pottsCriticalEnergy(int q);
/// Whether `beta` is pottsBetaC(q) to within 4 ulp (a β_c typed with 16 significant digits
/// counts).
bool isPottsBetaC(int q, double beta);

/// Exact lnZ/N alone (well defined at β_c too). Throws tessel::Error for beta ≤ 0 and
/// where lnZ/N ≈ 2β overflows a double (β above ~9e307).
double onsagerLnZ(double beta);

/// Complete elliptic integrals of the first and second kind, K(k) and E(k), given the
/// complementary modulus k' = sqrt(1 − k²) in [0, 1] (AGM; K = π / (2 AGM(1, k'))).
/// K(k' = 0) = +inf. Exposed for tests.
double ellipticKFromKp(double kp);
double ellipticEFromKp(double kp);

/// K(k) and K(k) − E(k), the latter without the cancellation of K − E for small k:
/// K − E = K · Σ_n 2^{n−1} c_n² over the AGM's c_n (Abramowitz & Stegun 17.6.4), with
/// c_0² = k² given as `k2` (1 − k'² loses relative precision when k' is near 1, deep in
/// the ordered or disordered phase). Requires k' in (0, 1], k2 = 1 − k'² in [0, 1).
struct EllipticKE {
  double K = 0, KminusE = 0;
};
EllipticKE ellipticKE(double kp, double k2);

} // namespace tessel::frontend
