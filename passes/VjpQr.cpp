//===- passes/VjpQr.cpp - The VJP rules of qr and the linear solves ------------===//
//
// Part of the VJP-rule table of VjpRules.cpp. One builder call per statement, so the
// ops come out in this order whatever the compiler's order of evaluating arguments.
//
// triangular_solve, X = op(A)⁻¹·B (left) or B·op(A)⁻¹ (right): B̄ solves the transposed
// system, B̄ = op(A)⁻ᵀ·X̄ (left) or X̄·op(A)⁻ᵀ (right), and op(A)'s cotangent is −B̄·Xᵀ
// (left) or −Xᵀ·B̄ (right), transposed back when op(A) = Aᵀ, kept on the triangle the op
// reads (M. B. Giles, "An extended collection of matrix derivative results for forward
// and reverse mode AD" (2008), §2.2.3).
//
// qr, A = Q·R with m >= n (k = n): with M = R·R̄ᵀ − Q̄ᵀ·Q and copyltu(M) the symmetric
// matrix with M's lower triangle,
//   Ā = (Q̄ + Q·copyltu(M))·R⁻ᵀ
// (S. F. Walter, L. Lehmann, J. Comput. Sci. 2018; M. Seeger et al., arXiv:1710.08717),
// R⁻ᵀ by a triangular_solve. For m < n, A = [X | Y] with X square, R = [U | V]: X = Q·U is
// the square case and Y = Q·V, so Ȳ = Q·V̄ and X̄ is the square rule with Q̄ + Y·V̄ᵀ in
// place of Q̄ (H.-J. Liao et al., PRX 9, 031041 (2019), appendix: the wide case public
// AD libraries got wrong). R must be nonsingular (A of full rank): at a zero of R's
// diagonal the solve stops with an error naming the op.
//
//===----------------------------------------------------------------------===//
#include "ir/OpAttrs.h"
#include "passes/VjpRules.h"

namespace tessel::passes::vjp {

namespace {

/// The square rule, A = Q·R with R k×k upper: (Q̄ + Q·copyltu(R·R̄ᵀ − Q̄ᵀ·Q))·R⁻ᵀ.
ValueId qrSquare(Builder &b, ValueId Q, ValueId R, ValueId gQ, ValueId gR) {
  const int64_t k = shapeOf(b, R)[0];
  ValueId M = kNone;
  if (gR != kNone) M = b.dotGeneral(R, gR, {}, {}, {1}, {1}); // R·R̄ᵀ
  if (gQ != kNone) {
    ValueId qtq = b.dotGeneral(gQ, Q, {}, {}, {0}, {0}); // Q̄ᵀ·Q
    M = M == kNone ? b.neg(qtq) : b.sub(M, qtq);
  }
  ValueId lower = triangleMask(b, k, false, false);
  ValueId strict = triangleMask(b, k, true, false);
  ValueId low = b.mul(M, lower);
  ValueId below = b.mul(M, strict);
  ValueId sym = b.add(low, b.transpose(below, {1, 0})); // copyltu(M)
  ValueId rhs = b.dotGeneral(Q, sym, {}, {}, {1}, {0});
  if (gQ != kNone) rhs = b.add(gQ, rhs);
  return b.triangularSolve(R, rhs, /*leftSide=*/false, /*lower=*/false, /*transposeA=*/true);
}

} // namespace

ValueId triangleMask(Builder &b, int64_t n, bool strict, bool upper) {
  const Shape nn{n, n};
  ValueId rows = b.iota(nn, 0);
  ValueId cols = b.iota(nn, 1);
  const char *dir = upper ? (strict ? "LT" : "LE") : (strict ? "GT" : "GE");
  return b.compare(rows, cols, dir);
}

OperandCotangents vjpQr(const VjpCall &c) {
  Builder &b = c.b;
  const ValueId Q = c.op.results[0], R = c.op.results[1];
  const ValueId gQ = c.cotangents[0], gR = c.cotangents[1];
  const Shape as = shapeOf(b, c.op.operands[0]);
  const int64_t m = as[0], n = as[1];
  if ((gQ == kNone && gR == kNone) || !c.needed[0] || std::min(m, n) == 0) return {kNone};
  if (m >= n) return {qrSquare(b, Q, R, gQ, gR)};
  // Wide: A = [X | Y], R = [U | V].
  ValueId U = b.slice(R, {0, 0}, {m, m});
  ValueId gU = kNone, gV = kNone;
  if (gR != kNone) {
    gU = b.slice(gR, {0, 0}, {m, m});
    gV = b.slice(gR, {0, m}, {m, n});
  }
  ValueId gQx = gQ;
  ValueId gY = kNone;
  if (gV != kNone) {
    ValueId Y = b.slice(c.op.operands[0], {0, m}, {m, n});
    ValueId yv = b.dotGeneral(Y, gV, {}, {}, {1}, {1}); // Y·V̄ᵀ
    gQx = gQx == kNone ? yv : b.add(gQx, yv);
    gY = b.dotGeneral(Q, gV, {}, {}, {1}, {0}); // Q·V̄
  }
  ValueId gX = qrSquare(b, Q, U, gQx, gU);
  ValueId left = b.pad(gX, {0, 0}, {0, n - m});
  if (gY == kNone) return {left};
  ValueId right = b.pad(gY, {0, m}, {0, 0});
  return {b.add(left, right)};
}

OperandCotangents vjpTriangularSolve(const VjpCall &c) {
  Builder &b = c.b;
  const ValueId A = c.op.operands[0], X = c.op.results[0], gX = c.cotangents[0];
  if (gX == kNone) return {kNone, kNone};
  const bool left = ir::attr<OpKind::TriangularSolve, "left_side">(c.op) == 1,
             lower = ir::attr<OpKind::TriangularSolve, "lower">(c.op) == 1;
  const bool trans = ir::attr<OpKind::TriangularSolve, "transpose_a">(c.op) == 1;
  ValueId gB = b.triangularSolve(A, gX, left, lower, !trans);
  ValueId gA = kNone;
  if (c.needed[0]) {
    // op(A)'s cotangent −B̄·Xᵀ (left) or −Xᵀ·B̄ (right), transposed when op(A) = Aᵀ: each
    // case is one product, its operands and contracted axis chosen.
    ValueId p;
    if (left) p = trans ? b.dotGeneral(X, gB, {}, {}, {1}, {1}) : b.dotGeneral(gB, X, {}, {}, {1}, {1});
    else p = trans ? b.dotGeneral(gB, X, {}, {}, {0}, {0}) : b.dotGeneral(X, gB, {}, {}, {0}, {0});
    ValueId mask = triangleMask(b, shapeOf(b, A)[0], false, !lower);
    ValueId kept = b.mul(p, mask);
    gA = b.neg(kept);
  }
  return {gA, c.needed[1] ? gB : kNone};
}

/// sylvester_solve: L(X) = S_A·X + X·S_B is self-adjoint for symmetric S_A, S_B, so
/// C̄ = L⁻¹(X̄) is the same op on X̄, and with Ẋ = L⁻¹(Ċ − Ṡ_A·X − X·Ṡ_B), Ṡ = sym(Ȧ):
/// Ā = −sym(C̄·Xᵀ), B̄ = −sym(Xᵀ·C̄) (sym(M) = (M + Mᵀ)/2: the op reads symmetric parts).
OperandCotangents vjpSylvesterSolve(const VjpCall &c) {
  Builder &b = c.b;
  const ValueId A = c.op.operands[0], B = c.op.operands[1], X = c.op.results[0], gX = c.cotangents[0];
  if (gX == kNone) return {kNone, kNone, kNone};
  ValueId gC = b.sylvesterSolve(A, B, gX);
  auto negSym = [&](ValueId M) {
    ValueId Mt = b.transpose(M, {1, 0});
    ValueId sum = b.add(M, Mt);
    ValueId half = splat(b, -0.5, shapeOf(b, M));
    return b.mul(sum, half);
  };
  ValueId gA = kNone, gB = kNone;
  if (c.needed[0]) {
    ValueId p = b.dotGeneral(gC, X, {}, {}, {1}, {1}); // C̄·Xᵀ [n,n]
    gA = negSym(p);
  }
  if (c.needed[1]) {
    ValueId p = b.dotGeneral(X, gC, {}, {}, {0}, {0}); // Xᵀ·C̄ [m,m]
    gB = negSym(p);
  }
  return {gA, gB, c.needed[2] ? gC : kNone};
}

} // namespace tessel::passes::vjp
