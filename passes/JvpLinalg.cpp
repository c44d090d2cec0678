//===- passes/JvpLinalg.cpp - The JVP rules of the factorizations --------------===//
//
// Part of the JVP-rule table of JvpRules.cpp: svd and svd_topk, eigh, qr,
// triangular_solve and sylvester_solve. Each rule is the forward twin of the VJP rule (VjpSvd.cpp,
// VjpEigh.cpp, VjpQr.cpp): the same broadened reciprocals (vjp::Broadening, with the same
// scale and ε), so that the JVP is the transpose of the VJP's linear map and a program's
// forward and reverse derivatives agree to rounding also where the broadening acts.
// One builder call per statement, so the ops come out in this order whatever the
// compiler's order of evaluating arguments.
//
// Thin SVD A = U·S·Vᵀ (S = diag(s), k triplets). With Ṗ = Uᵀ·Ȧ·V (k×k), from
// A·V = U·S and Aᵀ·U = V·S:
//   ṡ = diag Ṗ,
//   Ω_U = UᵀU̇ = Sym + Anti,   Ω_V = VᵀV̇ = Sym − Anti  (antisymmetric),
//   Sym_ij = ½(Ṗ_ij + Ṗ_ji)·1/(s_j − s_i),   Anti_ij = ½(Ṗ_ij − Ṗ_ji)·1/(s_j + s_i),
// each 1/x broadened to L(x) = x/(x² + (ε·s₀)²) as in the reverse rule (0 at x = 0). The
// parts outside the kept spaces, X = (I − UUᵀ)·U̇ and Y = (I − VVᵀ)·V̇, solve
//   X·S − A⊥·Y = (I − UUᵀ)·Ȧ·V,   Y·S − A⊥ᵀ·X = (I − VVᵀ)·Ȧᵀ·U,   A⊥ = A − U·S·Vᵀ.
// For svd (k = min(m, n)) A⊥ = 0: X = (Ȧ·V − U·Ṗ)·S⁻¹, Yᵀ = S⁻¹·(Uᵀ·Ȧ − Ṗ·Vᵀ), 1/s
// broadened; for svd_topk the system is svd_topk_complement's with Ū = Ȧ·V and
// V̄t = Uᵀ·Ȧ (Francuz, Schuch, Vanhecke, PRR 7, 013237 (2025)). Then U̇ = U·Ω_U + X and
// V̇t = Ω_Vᵀ·Vt + Yᵀ. (J. Townsend, "Differentiating the SVD" (2016); M. B. Giles, "An
// extended collection of matrix derivative results for forward and reverse mode AD"
// (2008), §3.2.)
//
// svd_topk_complement, X·S − A⊥·Y = P⊥·Ū and Y·S − A⊥ᵀ·X = Q⊥·V̄ with X ⟂ U, Y ⟂ V,
// S = diag(s[:r]), P⊥ = I − UUᵀ, Q⊥ = I − VVᵀ, A⊥ = A − U·diag(s)·Vt (V̄ = V̄tᵀ, Y = Ytᵀ).
// Differentiating the first equation and projecting it with P⊥ (A⊥'s columns lie in P⊥'s
// range; A⊥·V = 0 at the point, so A⊥·Ẏ = A⊥·Q⊥·Ẏ):
//   P⊥Ẋ·S − A⊥·Q⊥Ẏ = P⊥·(Ū̇ − U̇·UᵀŪ − X·Ṡ + Ȧ⊥·Y),
// and Ȧ⊥·Y = Ȧ·Y − U·diag(s)·(V̇t·Y) (Vt·Y = 0), whose second term P⊥ removes; the
// second equation likewise with Xᵀ·Ȧ⊥ = Xᵀ·Ȧ − (XᵀU̇)·diag(s)·Vt. So (P⊥Ẋ, Q⊥Ẏ) is the
// same operator's solve, another svd_topk_complement on those right-hand sides (it
// projects them itself), and the parts along U and V follow from UᵀX = 0, VᵀY = 0:
//   Ẋ = P⊥Ẋ − U·(U̇ᵀX),   Ẏt = (Q⊥Ẏ)ᵀ − (Yt·V̇tᵀ)·Vt.
// The kernel's broadening of the discarded triplets nearest the cut (a complex shift,
// runtime/SvdComplement.cpp) is held fixed: exact where the gaps at the cut exceed ε·s₀.
// With guards = g (the svd-topk-guards pass) U, s, Vt end in the g triplets below the cut,
// which the kernel deflates with instead of computing them. The solution does not depend
// on them (again up to that broadening), so both rules hold them constant: svd_topk{w,
// guards = g} gives the kept k = w − g the tangents of svd_topk{k}, through a complement
// solve with the same guards, and the guards zero tangents; the complement's rule reads
// the kept part of U, s, Vt and of their tangents and solves with the same guards. A
// program differentiated after that pass (--second's forward over reverse) thus deflates
// every solve with the forward's guards.
//
// eigh, S = (A + Aᵀ)/2 = V·diag(w)·Vᵀ: K = Vᵀ·Ṡ·V, ẇ = diag K, V̇ = V·(K∘F) with
// F_ij = 1/(w_j − w_i) broadened relative to max|w| and 0 for gaps within dsyevd's error
// bound (ties), as the reverse rule (Giles §3.1).
//
// qr, A = Q·R, m >= n: C = Qᵀ·Ȧ·R⁻¹, whose strictly lower part is that of Ω = QᵀQ̇
// (antisymmetric) since Ṙ·R⁻¹ is upper triangular: Ω = tril(C, −1) − tril(C, −1)ᵀ,
// Ṙ = (C − Ω)·R, Q̇ = Ȧ·R⁻¹ − Q·(C − Ω) (Walter and Lehmann, J. Comput. Sci. 2018).
// m < n, A = [X | Y], R = [U | V]: the square rule for X = Q·U, and V̇ = Qᵀ·(Ẏ − Q̇·V).
//
// triangular_solve: op(A)·X = B gives Ẋ = op(A)⁻¹·(Ḃ − op(Ȧ)·X) (left), and
// X·op(A) = B gives Ẋ = (Ḃ − X·op(Ȧ))·op(A)⁻¹ (right), Ȧ on the triangle the op reads.
//
// sylvester_solve, S_A·X + X·S_B = C: Ṡ_A·X + S_A·Ẋ + Ẋ·S_B + X·Ṡ_B = Ċ, so Ẋ is the same
// solve of Ċ − Ṡ_A·X − X·Ṡ_B (Ṡ the symmetric part of the tangent).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <utility>

#include "ir/Diagnostics.h"
#include "ir/OpAttrs.h"
#include "passes/JvpRules.h"
#include "passes/VjpRules.h"

namespace tessel::passes::jvprules {

using ir::Builder;
using ir::OpKind;
using ir::Shape;
using ir::ValueId;
using vjp::kNone;
using vjp::shapeOf;
using vjp::splat;
using vjp::triangleMask;

namespace {

/// diag(M) of a square matrix, as a vector.
ValueId diagonal(Builder &b, ValueId M) {
  const int64_t n = shapeOf(b, M)[0];
  const Shape nn{n, n};
  ValueId rows = b.iota(nn, 0);
  ValueId cols = b.iota(nn, 1);
  ValueId eye = b.compare(rows, cols, "EQ");
  return b.reduceSum(b.mul(M, eye), {1});
}

/// The square qr rule: Q̇ and U̇ for X = Q·U (U n×n upper) and the tangent Ẋ.
std::pair<ValueId, ValueId> qrSquare(Builder &b, ValueId Q, ValueId U, ValueId tX) {
  const int64_t n = shapeOf(b, U)[0];
  ValueId tXR = b.triangularSolve(U, tX, /*leftSide=*/false, /*lower=*/false, /*transposeA=*/false); // Ẋ·U⁻¹
  ValueId C = b.dotGeneral(Q, tXR, {}, {}, {0}, {0});                                                // Qᵀ·Ẋ·U⁻¹
  ValueId strict = triangleMask(b, n, true, false);
  ValueId L = b.mul(C, strict);
  ValueId Lt = b.transpose(L, {1, 0});
  ValueId Omega = b.sub(L, Lt);
  ValueId upper = b.sub(C, Omega); // Ṙ·R⁻¹, upper triangular
  ValueId tU = b.dotGeneral(upper, U, {}, {}, {1}, {0});
  ValueId QM = b.dotGeneral(Q, upper, {}, {}, {1}, {0});
  ValueId tQ = b.sub(tXR, QM);
  return {tQ, tU};
}

} // namespace

ResultTangents jvpSvd(const JvpCall &c) {
  Builder &b = c.b;
  const ValueId tA = c.tangents[0];
  if (tA == kNone) return {kNone, kNone, kNone};
  const ValueId A = c.op.operands[0];
  const ValueId Uw = c.op.results[0], sw = c.op.results[1], Vtw = c.op.results[2];
  const Shape as = shapeOf(b, A);
  const int64_t m = as[0], n = as[1], w = shapeOf(b, sw)[0];
  if (w == 0) return {kNone, kNone, kNone};
  const bool topk = c.op.kind == OpKind::SvdTopk;
  const double eps = c.op.attrs.getF64("eps");
  // svd_topk{guards = g}: the kept k = w − g have svd_topk{k}'s tangents, the guards none.
  const int64_t g = topk ? ir::attr<OpKind::SvdTopk, "guards">(c.op) : 0, k = w - g;
  const ValueId U = g ? b.slice(Uw, {0, 0}, {m, k}) : Uw;
  const ValueId s = g ? b.slice(sw, {0}, {k}) : sw;
  const ValueId Vt = g ? b.slice(Vtw, {0, 0}, {k, n}) : Vtw;
  const Shape kk{k, k};
  vjp::Broadening br = vjp::svdBroadening(b, eps, s);

  ValueId UtA = b.dotGeneral(U, tA, {}, {}, {0}, {0}); // Uᵀ·Ȧ   [k,n]
  ValueId tAV = b.dotGeneral(tA, Vt, {}, {}, {1}, {1}); // Ȧ·V    [m,k]
  ValueId P = b.dotGeneral(UtA, Vt, {}, {}, {1}, {1});  // Uᵀ·Ȧ·V [k,k]
  ValueId ts = diagonal(b, P);

  ValueId Pt = b.transpose(P, {1, 0});
  ValueId half = splat(b, 0.5, kk);
  ValueId sj = b.broadcastInDim(s, kk, {1});
  ValueId si = b.broadcastInDim(s, kk, {0});
  ValueId symNum = br.overScale(b.mul(half, b.add(P, Pt)));
  ValueId Sym = b.mul(symNum, br.ell(b.sub(sj, si)));
  ValueId antiNum = br.overScale(b.mul(half, b.sub(P, Pt)));
  ValueId Anti = b.mul(antiNum, br.ell(b.add(sj, si)));
  ValueId OmegaU = b.add(Sym, Anti);
  ValueId OmegaV = b.sub(Sym, Anti);

  ValueId tU = b.dotGeneral(U, OmegaU, {}, {}, {1}, {0});  // U·Ω_U
  ValueId tVt = b.dotGeneral(OmegaV, Vt, {}, {}, {0}, {0}); // Ω_Vᵀ·Vt
  if (topk) {
    auto xy = b.svdTopkComplement(A, Uw, sw, Vtw, tAV, UtA, eps, g);
    tU = b.add(tU, xy[0]);
    tVt = b.add(tVt, xy[1]);
    if (g) return {b.pad(tU, {0, 0}, {0, g}), b.pad(ts, {0}, {g}), b.pad(tVt, {0, 0}, {g, 0})};
  } else {
    ValueId sinv = kNone;
    if (m > k) {
      ValueId UP = b.dotGeneral(U, P, {}, {}, {1}, {0});
      ValueId proj = br.overScale(b.sub(tAV, UP)); // (I − UUᵀ)·Ȧ·V / s₀
      sinv = br.ell(s);
      tU = b.add(tU, b.mul(proj, b.broadcastInDim(sinv, Shape{m, k}, {1})));
    }
    if (n > k) {
      ValueId PV = b.dotGeneral(P, Vt, {}, {}, {1}, {0});
      ValueId proj = br.overScale(b.sub(UtA, PV)); // Uᵀ·Ȧ·(I − VVᵀ) / s₀
      if (sinv == kNone) sinv = br.ell(s);
      tVt = b.add(tVt, b.mul(b.broadcastInDim(sinv, Shape{k, n}, {0}), proj));
    }
  }
  return {tU, ts, tVt};
}

ResultTangents jvpSvdTopkComplement(const JvpCall &c) {
  Builder &b = c.b;
  if (std::all_of(c.tangents.begin(), c.tangents.end(), [](ValueId t) { return t == kNone; })) return {kNone, kNone};
  // With guards = g the operands U, s, Vt end in g guards: the rule reads the kept k
  // (and their tangents) and hands the guards on to the new solve, holding them constant.
  const int64_t g = ir::attr<OpKind::SvdTopkComplement, "guards">(c.op);
  const ValueId A = c.op.operands[0], Uw = c.op.operands[1], sw = c.op.operands[2], Vtw = c.op.operands[3];
  const ValueId gU = c.op.operands[4], gVt = c.op.operands[5];
  const ValueId X = c.op.results[0], Yt = c.op.results[1];
  const Shape xs = shapeOf(b, X), ys = shapeOf(b, Yt);
  const int64_t r = xs[1], m = xs[0], n = ys[1], k = shapeOf(b, sw)[0] - g;
  auto keptCols = [&](ValueId v) { return g == 0 || v == kNone ? v : b.slice(v, {0, 0}, {m, k}); };
  auto keptRows = [&](ValueId v) { return g == 0 || v == kNone ? v : b.slice(v, {0, 0}, {k, n}); };
  const ValueId U = keptCols(Uw), Vt = keptRows(Vtw);
  const ValueId tA = c.tangents[0], tU = keptCols(c.tangents[1]), ts = c.tangents[2], tVt = keptRows(c.tangents[3]);
  const ValueId tgU = c.tangents[4], tgVt = c.tangents[5];
  auto acc = [&](ValueId sum, ValueId term) { return sum == kNone ? term : b.add(sum, term); };
  auto sub = [&](ValueId sum, ValueId term) { return sum == kNone ? b.neg(term) : b.sub(sum, term); };
  ValueId rhs1 = tgU, rhs2 = tgVt; // [m,r], [r,n]
  if (tU != kNone) {
    ValueId UtgU = b.dotGeneral(U, gU, {}, {}, {0}, {0}); // UᵀŪ [k,r]
    rhs1 = sub(rhs1, b.dotGeneral(tU, UtgU, {}, {}, {1}, {0}));
  }
  if (tVt != kNone) {
    ValueId gVtV = b.dotGeneral(gVt, Vt, {}, {}, {1}, {1}); // V̄ᵀV [r,k]
    rhs2 = sub(rhs2, b.dotGeneral(gVtV, tVt, {}, {}, {1}, {0}));
  }
  if (ts != kNone) {
    ValueId tsr = b.slice(ts, {0}, {r});
    rhs1 = sub(rhs1, b.mul(X, b.broadcastInDim(tsr, xs, {1})));
    rhs2 = sub(rhs2, b.mul(b.broadcastInDim(tsr, ys, {0}), Yt));
  }
  if (tA != kNone) {
    rhs1 = acc(rhs1, b.dotGeneral(tA, Yt, {}, {}, {1}, {1})); // Ȧ·Y
    rhs2 = acc(rhs2, b.dotGeneral(X, tA, {}, {}, {0}, {0}));  // Xᵀ·Ȧ
  }
  ValueId tX = kNone, tYt = kNone;
  if (rhs1 != kNone || rhs2 != kNone) {
    auto xy = b.svdTopkComplement(A, Uw, sw, Vtw, rhs1 != kNone ? rhs1 : splat(b, 0.0, xs),
                                  rhs2 != kNone ? rhs2 : splat(b, 0.0, ys),
                                  ir::attr<OpKind::SvdTopkComplement, "eps">(c.op), g);
    tX = xy[0];
    tYt = xy[1];
  }
  if (tU != kNone) {
    ValueId UdX = b.dotGeneral(tU, X, {}, {}, {0}, {0}); // U̇ᵀX [k,r]
    tX = sub(tX, b.dotGeneral(U, UdX, {}, {}, {1}, {0}));
  }
  if (tVt != kNone) {
    ValueId YVd = b.dotGeneral(Yt, tVt, {}, {}, {1}, {1}); // Yt·V̇tᵀ [r,k]
    tYt = sub(tYt, b.dotGeneral(YVd, Vt, {}, {}, {1}, {0}));
  }
  return {tX, tYt};
}

ResultTangents jvpEigh(const JvpCall &c) {
  Builder &b = c.b;
  const ValueId tA = c.tangents[0];
  if (tA == kNone) return {kNone, kNone};
  const ValueId w = c.op.results[0], V = c.op.results[1];
  const int64_t n = shapeOf(b, w)[0];
  if (n == 0) return {kNone, kNone};
  const Shape nn{n, n};
  ValueId tAt = b.transpose(tA, {1, 0});
  ValueId tS = b.mul(b.add(tA, tAt), splat(b, 0.5, nn));
  ValueId VtS = b.dotGeneral(V, tS, {}, {}, {0}, {0}); // Vᵀ·Ṡ
  ValueId K = b.dotGeneral(VtS, V, {}, {}, {1}, {0});  // Vᵀ·Ṡ·V
  ValueId tw = diagonal(b, K);
  vjp::Broadening br = vjp::eighBroadening(b, ir::attr<OpKind::Eigh, "eps">(c.op), w);
  ValueId wj = b.broadcastInDim(w, nn, {1});
  ValueId wi = b.broadcastInDim(w, nn, {0});
  ValueId x = b.sub(wj, wi);
  ValueId recip = br.ell(x);
  ValueId resolved = vjp::eighResolvedGaps(b, br, x, n); // the reverse rule's ties
  ValueId Omega = b.mul(br.overScale(K), b.mul(recip, resolved));
  ValueId tV = b.dotGeneral(V, Omega, {}, {}, {1}, {0});
  return {tw, tV};
}

ResultTangents jvpQr(const JvpCall &c) {
  Builder &b = c.b;
  const ValueId tA = c.tangents[0];
  if (tA == kNone) return {kNone, kNone};
  const ValueId Q = c.op.results[0], R = c.op.results[1];
  const Shape as = shapeOf(b, c.op.operands[0]);
  const int64_t m = as[0], n = as[1];
  if (std::min(m, n) == 0) return {kNone, kNone};
  if (m >= n) {
    auto [tQ, tR] = qrSquare(b, Q, R, tA);
    return {tQ, tR};
  }
  ValueId U = b.slice(R, {0, 0}, {m, m});
  ValueId V = b.slice(R, {0, m}, {m, n});
  ValueId tX = b.slice(tA, {0, 0}, {m, m});
  ValueId tY = b.slice(tA, {0, m}, {m, n});
  auto [tQ, tU] = qrSquare(b, Q, U, tX);
  ValueId QV = b.dotGeneral(tQ, V, {}, {}, {1}, {0});
  ValueId tV = b.dotGeneral(Q, b.sub(tY, QV), {}, {}, {0}, {0}); // Qᵀ·(Ẏ − Q̇·V)
  ValueId left = b.pad(tU, {0, 0}, {0, n - m});
  ValueId right = b.pad(tV, {0, m}, {0, 0});
  return {tQ, b.add(left, right)};
}

ResultTangents jvpTriangularSolve(const JvpCall &c) {
  Builder &b = c.b;
  const ValueId A = c.op.operands[0], X = c.op.results[0];
  const ValueId tA = c.tangents[0], tB = c.tangents[1];
  if (tA == kNone && tB == kNone) return {kNone};
  const bool left = ir::attr<OpKind::TriangularSolve, "left_side">(c.op) == 1,
             lower = ir::attr<OpKind::TriangularSolve, "lower">(c.op) == 1;
  const bool trans = ir::attr<OpKind::TriangularSolve, "transpose_a">(c.op) == 1;
  ValueId term = kNone; // op(Ȧ)·X (left) or X·op(Ȧ) (right)
  if (tA != kNone) {
    ValueId mask = triangleMask(b, shapeOf(b, A)[0], false, !lower);
    ValueId kept = b.mul(tA, mask);
    ValueId opA = trans ? b.transpose(kept, {1, 0}) : kept;
    term = left ? b.dotGeneral(opA, X, {}, {}, {1}, {0}) : b.dotGeneral(X, opA, {}, {}, {1}, {0});
  }
  ValueId rhs = term == kNone ? tB : tB == kNone ? b.neg(term) : b.sub(tB, term);
  return {b.triangularSolve(A, rhs, left, lower, trans)};
}

ResultTangents jvpSylvesterSolve(const JvpCall &c) {
  Builder &b = c.b;
  const ValueId A = c.op.operands[0], B = c.op.operands[1], X = c.op.results[0];
  const ValueId tA = c.tangents[0], tB = c.tangents[1], tC = c.tangents[2];
  if (tA == kNone && tB == kNone && tC == kNone) return {kNone};
  auto sym = [&](ValueId M) {
    ValueId Mt = b.transpose(M, {1, 0});
    ValueId sum = b.add(M, Mt);
    ValueId half = splat(b, 0.5, shapeOf(b, M));
    return b.mul(sum, half);
  };
  ValueId rhs = tC;
  if (tA != kNone) {
    ValueId sA = sym(tA);
    ValueId t = b.dotGeneral(sA, X, {}, {}, {1}, {0}); // Ṡ_A·X
    rhs = rhs == kNone ? b.neg(t) : b.sub(rhs, t);
  }
  if (tB != kNone) {
    ValueId sB = sym(tB);
    ValueId t = b.dotGeneral(X, sB, {}, {}, {1}, {0}); // X·Ṡ_B
    rhs = rhs == kNone ? b.neg(t) : b.sub(rhs, t);
  }
  return {b.sylvesterSolve(A, B, rhs)};
}

} // namespace tessel::passes::jvprules
