//===- passes/VjpEigh.cpp - The VJP rule of eigh -------------------------------===//
//
// The reverse rule of the symmetric eigendecomposition S = (A + Aᵀ)/2 = V·diag(w)·Vᵀ
// with the Lorentzian broadening of svd's rule. Part of the VJP-rule table of
// VjpRules.cpp.
//
// A perturbation dS gives dw_i = (VᵀdS·V)_ii and dV = V·(F∘(VᵀdS·V)), F_ij = 1/(w_j − w_i)
// (i ≠ j), F_ii = 0. With K = VᵀV̄ the cotangent of S along symmetric perturbations is the
// symmetric part of V·(diag(w̄) + F∘K)·Vᵀ, and since F is antisymmetric,
//   Ā = V·(diag(w̄) + ½(K − Kᵀ)∘F)·Vᵀ,
// which is also the cotangent of A (dS = (dA + dAᵀ)/2 and Ā is symmetric). Each F_ij is
// broadened as in svd's rule, 1/x -> L(x) = x/(x² + (ε·w₀)²), w₀ = max|w| held constant
// (passes/VjpRules.h, Broadening): at a tie w_i = w_j, K_ij − K_ji vanishes for a loss that
// does not depend on the basis inside the degenerate eigenspace, and the broadened
// product keeps the finite rest. A zero cotangent contributes exactly 0.
// A computed gap no larger than dsyevd's error bound, |w_j − w_i| <= 8·n·u·w₀ (u the unit
// roundoff; the eigenvalues are exact for a matrix within p(n)·u·‖S‖₂ of S), is a tie:
// the eigenvalues of an exactly degenerate space come out that far apart, where L(x) ~
// x/(ε·w₀)² would turn the rounding of K − Kᵀ into ~1e-8 of the gradient (and its
// derivative into far more). Such pairs are coupled as at an exact tie, by 0.
// What no rule that sees only w̄ and V̄ can do: at a tie, V·diag(g(w))·Vᵀ with g' ≠ 0 on
// the degenerate space has the derivative g'(w)·(VᵀdS·V)_ij between tied eigenvectors,
// but its cotangent K − Kᵀ = M_ij·(g_j − g_i) is 0 there, as it would be for a g' = 0.
// Such a block of the gradient (and, since the gradient of Σ g(w_i) is g'(S), of the
// Hessian at a tie) is missed; a loss that reads a degenerate space only as a whole
// (symmetric functions of w, projectors on whole degenerate spaces) is exact.
// References: M. B. Giles, "An extended collection of matrix derivative results for
// forward and reverse mode AD" (2008), §3.1; M. Seeger et al., "Auto-differentiating
// linear algebra", arXiv:1710.08717; H.-J. Liao et al., PRX 9, 031041 (2019) (broadening).
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "passes/VjpRules.h"

namespace tessel::passes::vjp {

namespace {
/// Ties: gaps up to 8·n·u relative to max|w| (u = 2⁻⁵³, the unit roundoff).
constexpr double kTieTolerance = 8 * 0x1p-53;
} // namespace

Broadening eighBroadening(Builder &b, double eps, ValueId w) {
  return Broadening(b, eps, [&b, w] {
    ValueId w0 = b.stopGradient(b.reduceMax(b.unary(OpKind::Abs, w), {0}));
    ValueId isZero = b.compare(w0, b.scalar(0.0), "EQ");
    return b.add(w0, isZero); // 1 for a zero matrix
  });
}

ValueId eighResolvedGaps(Builder &b, Broadening &br, ValueId x, int64_t n) {
  const Shape nn{n, n};
  ValueId tol = b.mul(splat(b, kTieTolerance * static_cast<double>(n), nn), b.broadcastScalar(br.scale(), nn));
  return b.compare(b.unary(OpKind::Abs, x), tol, "GT");
}

OperandCotangents vjpEigh(const VjpCall &c) {
  Builder &b = c.b;
  const ValueId w = c.op.results[0], V = c.op.results[1];
  const ValueId gw = c.cotangents[0], gV = c.cotangents[1];
  const int64_t n = shapeOf(b, w)[0];
  if ((gw == kNone && gV == kNone) || n == 0 || !c.needed[0]) return {kNone};
  const Shape nn{n, n};
  // One builder call per statement: the ops come out in this order whatever the
  // compiler's order of evaluating arguments.
  ValueId core = kNone; // diag(w̄) + ½(K − Kᵀ)∘L(w_j − w_i)
  if (gV != kNone) {
    Broadening br = eighBroadening(b, ir::attr<OpKind::Eigh, "eps">(c.op), w);
    ValueId K = b.dotGeneral(V, gV, {}, {}, {0}, {0}); // K_ij = Σ_a V[a,i]·V̄[a,j]
    ValueId Kt = b.transpose(K, {1, 0});
    ValueId antisym = b.sub(K, Kt);
    ValueId half = splat(b, 0.5, nn);
    ValueId num = br.overScale(b.mul(half, antisym));
    ValueId wj = b.broadcastInDim(w, nn, {1});
    ValueId wi = b.broadcastInDim(w, nn, {0});
    ValueId x = b.sub(wj, wi);
    ValueId recip = br.ell(x);
    // A gap within dsyevd's error bound is a tie (see the top of the file).
    ValueId resolved = eighResolvedGaps(b, br, x, n);
    core = b.mul(num, b.mul(recip, resolved));
  }
  if (gw != kNone) {
    ValueId rows = b.iota(nn, 0);
    ValueId cols = b.iota(nn, 1);
    ValueId eye = b.compare(rows, cols, "EQ");
    ValueId diag = b.mul(b.broadcastInDim(gw, nn, {1}), eye);
    core = core == kNone ? diag : b.add(core, diag);
  }
  ValueId left = b.dotGeneral(V, core, {}, {}, {1}, {0}); // V·core
  return {b.dotGeneral(left, V, {}, {}, {1}, {1})};      // V·core·Vᵀ
}

} // namespace tessel::passes::vjp
