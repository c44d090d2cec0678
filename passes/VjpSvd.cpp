//===- passes/VjpSvd.cpp - The VJP rules of svd and svd_topk_complement --------===//
//
// The reverse rule of the thin SVD A = U diag(s) Vt with Lorentzian broadening of the
// reciprocal gaps (docs/trg.md, "The SVD reverse rule"), in full form or, when only
// r leading triplets carry cotangents, in block form; and the rule of svd_topk's
// complement solve, the transpose of its JVP (second order through svd_topk by reverse
// over reverse). Part of the VJP-rule table of VjpRules.cpp.
//
//===----------------------------------------------------------------------===//
#include <algorithm>

#include "ir/Diagnostics.h"
#include "ir/OpAttrs.h"

#include <functional>
#include <limits>

#include "passes/VjpRules.h"

namespace tessel::passes::vjp {

namespace {

// ---------------------------------------------------------------------------
// Linear algebra.

/// How many leading entries of `g` along `dim` may be nonzero, judging by the ops that
/// define it: a pad by zeros ends its data `high[dim]` before the end (the VJP of the
/// truncating slice x[..., :r] gives r); add/sub of such values, the larger extent;
/// anything else the full extent. Looks `depth` ops deep.
int64_t leadingExtent(Builder &b, ValueId g, size_t dim, int depth = 8) {
  const int64_t full = shapeOf(b, g)[dim];
  const ir::ValueInfo &vi = b.program().value(g);
  if (vi.def < 0 || depth == 0) return full;
  const ir::Op &op = b.program().ops[size_t(vi.def)];
  if (op.kind == OpKind::Pad) return full - ir::attr<OpKind::Pad, "high">(op)[dim];
  if (op.kind == OpKind::Add || op.kind == OpKind::Sub) {
    const ValueId x = op.operands[0], y = op.operands[1]; // op may move as ops are added
    return std::max(leadingExtent(b, x, dim, depth - 1), leadingExtent(b, y, dim, depth - 1));
  }
  return full;
}

/// The first r entries of `g` along `dim`: the pad's operand when `g` pads exactly
/// that block, else a slice.
ValueId leading(Builder &b, ValueId g, size_t dim, int64_t r) {
  Shape sh = shapeOf(b, g);
  if (sh[dim] == r) return g;
  const ir::ValueInfo &vi = b.program().value(g);
  if (vi.def >= 0) {
    const ir::Op &op = b.program().ops[size_t(vi.def)];
    if (op.kind == OpKind::Pad) {
      const I64List &low = ir::attr<OpKind::Pad, "low">(op), &high = ir::attr<OpKind::Pad, "high">(op);
      bool exact = sh[dim] - high[dim] == r;
      for (size_t i = 0; i < low.size(); ++i)
        exact &= low[i] == 0 && (i == dim || high[i] == 0);
      if (exact) return op.operands[0];
    }
  }
  I64List start(sh.size(), 0), limit(sh.begin(), sh.end());
  limit[dim] = r;
  return b.slice(g, start, limit);
}

} // namespace

// Thin SVD A[m,n] = U[m,k]·diag(s[k])·Vt[k,n], k = min(m,n), V = Vtᵀ (docs/trg.md §5).
// With G = UᵀŪ, H = VᵀV̄ (= Vt·V̄tᵀ) and their antisymmetric parts a = G − Gᵀ,
// b = H − Hᵀ, the cotangent of A is
//   Ā = U·M·Vt + (I − UUᵀ)·Ū·diag(1/s)·Vt + U·diag(1/s)·(V̄t − (VᵀV̄)ᵀ·Vt),
//   M_ij = (a_ij·s_j + s_i·b_ij)/(s_j² − s_i²)  (i ≠ j),   M_ii = s̄_i.
// The core term is split into its two factors,
//   M_ij = ½(a + b)_ij · 1/(s_j − s_i)  +  ½(a − b)_ij · 1/(s_j + s_i),
// and each factor 1/x is broadened relative to the matrix's scale:
//   1/x -> L(x) = x/(x² + (ε·s₀)²),   s₀ = s[0] = ‖A‖₂ (held constant by stop_gradient),
// and a term num·L(x) is computed as (num/s₀)·ℓ(y), y = x/s₀, ℓ(y) = y/(y² + ε²) with
// |y| <= 2 (Broadening::ell), so that nothing is squared that could overflow or underflow (not ε² for ε down to 0,
// not 1/s₀ for a subnormal A): c·A gives the same gradient and a 1/c-scaled derivative
// of it for any c > 0 a double represents. Only the first factor is singular at a tie s_i = s_j, where its
// numerator vanishes for a loss that does not depend on the basis inside the degenerate
// subspace; the second, 1/(s_j + s_i), is finite there and kept (its broadening matters
// only where both singular values are at the noise level, i.e. in the null space). So
// the gradient is continuous across a tie: the polar factor U·Vt at A = I has gradient
// (B − Bᵀ)/2 for L = ⟨U·Vt, B⟩. The projector terms use L(s_i) for 1/s_i; they vanish
// identically when m == k (resp. n == k) and are skipped.
// ε must lie above the noise floor of the computed gaps s_j − s_i: in TRG's ordered
// phase the gaps of symmetry-degenerate pairs stop shrinking at ~1e-11·s₀ after ~18
// steps (accumulated rounding), and a broadening below that turns those noise gaps into
// 1/noise (kTrgSvdEps in frontend/Trg.h; docs/trg.md, "The size of ε").
// Each L is multiplied by a (x != 0) mask: the same values, but a zero
// derivative at exact zeros (the diagonal and exact ties), so the rule's own derivative
// (second order) does not pick up the broadening's slope 1/(ε·s₀)² there; y + (y == 0)
// in place of y keeps the division at y = 0 finite.
//
// Truncated cotangents (block form). When only the first r ≤ k/2 columns of Ū, rows of
// V̄t and entries of s̄ can be nonzero — they are the VJP (a pad) of the slice that
// keeps r singular triplets, as in TRG — G and H are nonzero only in their first r
// columns (G_r = UᵀŪ_r, H_r = Vt·V̄t_rᵀ, k×r), so a, b and M vanish outside the first r
// columns and rows: M = [C | 0] + [0 R ; 0 0] with C = M[:, :r] (k×r) and
// R = M[:r, r:] (r×(k−r)). With S = ½(a + b)∘L(s_j − s_i) and Z = ½(a − b)∘L(s_j + s_i)
// on the first r columns (symmetric and antisymmetric matrices), C = S + Z + diag(s̄)[:, :r]
// and R = S[r:, :]ᵀ − Z[r:, :]ᵀ. Then
//   Ā = (U·C + P_r)·Vt[:r, :] + U[:, :r]·(R·Vt[r:, :] + diag(1/s_r)·Q_r),
// with P_r, Q_r the first r columns/rows of the projector terms (Ū − U·UᵀŪ)·diag(1/s)
// and V̄t − (VᵀV̄)ᵀ·Vt. The same numbers up to rounding, with k×k×r products instead of
// k×k×k ones: for TRG at χ = 16 (k = 256, r = 16) six products of 256×256×16 per SVD
// instead of four of 256×256×256. The coupling to the discarded singular vectors is all
// there (U and Vt enter in full). Without truncation the same code runs with r = k.
//
// svd_topk (k leading triplets of a K = min(m, n) spectrum) has the same rule with U,
// s and Vt the k kept triplets: the kept block C, R is built as above over i, j < k,
// and the coupling to the discarded subspace (the rows i >= k of M and the projector
// terms, which need the discarded singular vectors) comes from svd_topk_complement:
// X ⟂ U, Y ⟂ V with X·S_r − A⊥·Y = (I − UUᵀ)·Ū_r and Y·S_r − A⊥ᵀ·X = (I − VVᵀ)·V̄_r
// (Francuz, Schuch, Vanhecke, PRR 7, 013237 (2025)), added as left += X and
// right += Yᵀ. The numbers agree with svd's rule up to the complement kernel's
// tolerance (runtime/TruncatedSvd.h).
// References: J. Townsend, "Differentiating the SVD" (2016); Z.-Q. Wan, S.-X. Zhang,
// arXiv:1909.02659; H.-J. Liao et al., PRX 9, 031041 (2019).
namespace {

/// 1.0 at (i, j) of a `kr` matrix where i, j < q and i != j (two kept triplets), else 0.
ValueId keptOffDiagonal(Builder &b, const Shape &kr, int64_t q) {
  ValueId i = b.iota(kr, 0), j = b.iota(kr, 1);
  ValueId lim = b.broadcastScalar(b.scalar(static_cast<double>(q)), kr);
  return b.mul(b.mul(b.compare(i, lim, "LT"), b.compare(j, lim, "LT")), b.compare(i, j, "NE"));
}

/// gauge = "bond": ½(a + b)_ij / (s_j − s_i) for two kept triplets i != j < q, formed
/// without the difference (docs/trg.md §5, "A bond gauge"). With K = G + H, a loss that
/// is invariant under U√s -> U√s·O, √s·Vt -> Oᵀ·√s·Vt (O orthogonal) has
/// K_ij·√s_i/√s_j = K_ji·√s_j/√s_i (the cotangents of the two factors, projected on the
/// generator of O, cancel), and then
///   ½(a + b)_ij / (s_j − s_i) = (K_ij/√s_j + K_ji/√s_i) / (2(√s_i + √s_j)),
/// finite at a tie, where the difference form divides rounding noise by the gap.
/// `inv`: x -> 1/x, 0 at x = 0. Returns the q×q block (its diagonal is not used).
ValueId bondGaugeCoupling(Builder &b, ValueId G, ValueId H, ValueId s, int64_t q,
                          const std::function<ValueId(ValueId)> &inv) {
  const Shape qq{q, q};
  ValueId K = kNone;
  for (ValueId X : {G, H})
    if (X != kNone) {
      ValueId blk = b.slice(X, {0, 0}, {q, q});
      K = K == kNone ? blk : b.add(K, blk);
    }
  ValueId rs = b.unary(OpKind::Sqrt, b.slice(s, {0}, {q}));
  ValueId t = b.mul(K, b.broadcastInDim(inv(rs), qq, {1})); // K_ij / √s_j
  ValueId num = b.add(t, b.transpose(t, {1, 0}));
  ValueId den = b.add(b.broadcastInDim(rs, qq, {0}), b.broadcastInDim(rs, qq, {1}));
  return b.mul(b.mul(b.broadcastScalar(b.scalar(0.5), qq), num), inv(den));
}

} // namespace

OperandCotangents vjpSvd(const VjpCall &c) {
  Builder &b = c.b;
  const ValueId Uw = c.op.results[0], sw = c.op.results[1], Vtw = c.op.results[2];
  ValueId gU = c.cotangents[0], gs = c.cotangents[1], gVt = c.cotangents[2];
  Shape as = shapeOf(b, c.op.operands[0]);
  const bool topk = c.op.kind == OpKind::SvdTopk;
  const int64_t m = as[0], n = as[1];
  // svd_topk{guards = g}: the last g triplets are the complement's guards, held constant
  // (passes/JvpLinalg.cpp): the rule is svd_topk{k}'s on the kept k, its complement
  // solve deflating with those guards.
  const int64_t g = topk ? ir::attr<OpKind::SvdTopk, "guards">(c.op) : 0;
  const int64_t k = shapeOf(b, sw)[0] - g; // k = min(m, n) for svd
  double eps = c.op.attrs.getF64("eps");
  auto add = [&](ValueId a, ValueId t) { return a == kNone ? t : b.add(a, t); };

  // r: how many leading singular triplets the cotangents can touch; `factors`: how many
  // the cotangents of U and Vt touch (the bond gauge's kept block, below).
  int64_t r = 0;
  if (gU != kNone) r = std::max(r, leadingExtent(b, gU, 1));
  if (gVt != kNone) r = std::max(r, leadingExtent(b, gVt, 0));
  const int64_t factors = r;
  if (gs != kNone) r = std::max(r, leadingExtent(b, gs, 0));
  if (r == 0 || k == 0) return {kNone};
  if (r > k)
    throw Error("grad: svd_topk" + (c.op.loc.empty() ? std::string() : " (" + c.op.loc + ")") + " has guards = " +
                std::to_string(g) + ": a cotangent reaches its last " + std::to_string(r - k) +
                " triplet(s), the complement solves' guards, which have no derivative; differentiate "
                "before the svd-topk-guards pass");
  const ValueId U = g ? b.slice(Uw, {0, 0}, {m, k}) : Uw;
  const ValueId s = g ? b.slice(sw, {0}, {k}) : sw;
  const ValueId Vt = g ? b.slice(Vtw, {0, 0}, {k, n}) : Vtw;
  // Block form when it saves enough: the full rule's U·M and (U·M)·Vt cost m·k·k + m·k·n
  // multiply-adds, the block form's four products m·k·r + r·(k−r)·n + 2·m·r·n (UᵀŪ and
  // VᵀV̄ are k×k×r in both once pad-sink has run). It has ~10 more ops (a few µs), so it
  // must save at least 2¹⁵ multiply-adds: TRG χ = 16 (k = 256, r = 16) saves 28M; a 4×4
  // SVD keeping 2 stays in the full form.
  const int64_t saved = (m * k * k + m * k * n) - (m * k * r + r * (k - r) * n + 2 * m * r * n);
  const bool block = c.svdBlocks && 2 * r <= k && saved >= (int64_t(1) << 15);
  // The bond gauge's promise is about the balanced factors of the triplets whose U and Vt
  // the loss reads: a cotangent on a singular value further down (a value read past the
  // cut, or a whole vector divided by a norm) says nothing about rotations there.
  const int64_t kept = factors;
  if (!block) r = k;
  const int64_t rest = k - r;
  Shape kr{k, r}, mr{m, r};
  ValueId gUr = gU == kNone ? kNone : leading(b, gU, 1, r);
  ValueId gVtr = gVt == kNone ? kNone : leading(b, gVt, 0, r);
  ValueId gsr = gs == kNone ? kNone : leading(b, gs, 0, r);
  ValueId sr = leading(b, s, 0, r);

  // The scale s₀ = s[0] (1 for a zero matrix), constant under differentiation; built on
  // first use (a cotangent on s alone needs no reciprocal).
  Broadening br = svdBroadening(b, eps, s);
  auto invOrZero = [&](ValueId x) { return br.invOrZero(x); };
  auto ell = [&](ValueId x) { return br.ell(x); };
  auto overScale = [&](ValueId num) { return br.overScale(num); };

  // The first r columns of a = G − Gᵀ and b = H − Hᵀ: X − [X[:r, :r]ᵀ ; 0].
  auto antisymCols = [&](ValueId X) {
    ValueId corner = b.transpose(rest == 0 ? X : b.slice(X, {0, 0}, {r, r}), {1, 0});
    return b.sub(X, rest == 0 ? corner : b.pad(corner, {0, 0}, {rest, 0}));
  };
  ValueId UtgU = kNone, VtgV = kNone, aCols = kNone, bCols = kNone;
  if (gU != kNone) {
    UtgU = b.dotGeneral(U, gUr, {}, {}, {0}, {0}); // G_ij = (UᵀŪ)_ij, j < r
    aCols = antisymCols(UtgU);
  }
  if (gVt != kNone) {
    VtgV = b.dotGeneral(Vt, gVtr, {}, {}, {1}, {1}); // H_ij = Σ_n Vt[i,n]·V̄t[j,n], j < r
    bCols = antisymCols(VtgV);
  }
  // C = S + Z + diag(s̄)[:, :r] and R = S[r:, :]ᵀ − Z[r:, :]ᵀ (see above).
  ValueId C = kNone, R = kNone;
  if (aCols != kNone || bCols != kNone) {
    ValueId half = splat(b, 0.5, kr);
    ValueId sum = aCols == kNone ? bCols : bCols == kNone ? aCols : b.add(aCols, bCols);
    ValueId diff = aCols == kNone ? b.neg(bCols) : bCols == kNone ? aCols : b.sub(aCols, bCols);
    ValueId sj = b.broadcastInDim(sr, kr, {1}), si = b.broadcastInDim(s, kr, {0});
    ValueId S = b.mul(overScale(b.mul(half, sum)), ell(b.sub(sj, si)));
    if (c.bondGauge && c.op.attrs.getStr("gauge") == "bond" && kept > 1)
      S = b.select(keptOffDiagonal(b, kr, kept), b.pad(bondGaugeCoupling(b, UtgU, VtgV, s, kept, invOrZero),
                                                       {0, 0}, {k - kept, r - kept}),
                   S);
    ValueId Z = b.mul(overScale(b.mul(half, diff)), ell(b.add(sj, si)));
    C = b.add(S, Z);
    if (rest > 0) {
      auto lowerT = [&](ValueId X) { return b.transpose(b.slice(X, {r, 0}, {k, r}), {1, 0}); };
      R = b.sub(lowerT(S), lowerT(Z));
    }
  }
  if (gs != kNone) {
    ValueId eye = b.compare(b.iota(kr, 0), b.iota(kr, 1), "EQ");
    C = add(C, b.mul(b.broadcastInDim(gsr, kr, {1}), eye)); // diag(s̄)[:, :r]
  }

  // svd_topk: the coupling to the discarded subspace (a zero cotangent where one is
  // absent).
  ValueId X = kNone, Yt = kNone;
  if (topk && (gU != kNone || gVt != kNone)) {
    auto xy = b.svdTopkComplement(c.op.operands[0], Uw, sw, Vtw,
                                  gUr != kNone ? gUr : splat(b, 0.0, mr),
                                  gVtr != kNone ? gVtr : splat(b, 0.0, Shape{r, n}), eps, g);
    X = xy[0];
    Yt = xy[1];
  }
  bool uProj = !topk && gU != kNone && m > k, vProj = !topk && gVt != kNone && n > k;
  ValueId sinv = (uProj || vProj) ? ell(sr) : kNone; // times overScale(…) at each use
  ValueId left = C == kNone ? kNone : b.dotGeneral(U, C, {}, {}, {1}, {0}); // [m,r]
  if (uProj) {
    // (I − UUᵀ)·Ū·diag(1/s) = (Ū − U·(UᵀŪ))·diag(1/s), first r columns
    ValueId P = b.sub(gUr, b.dotGeneral(U, UtgU, {}, {}, {1}, {0}));
    left = add(left, b.mul(overScale(P), b.broadcastInDim(sinv, mr, {1})));
  }
  if (X != kNone) left = add(left, X);
  ValueId right = R == kNone ? kNone
                              : b.dotGeneral(R, b.slice(Vt, {r, 0}, {k, n}), {}, {}, {1}, {0}); // [r,n]
  if (vProj) {
    // diag(1/s)·(V̄t − (VᵀV̄)ᵀ·Vt), first r rows
    ValueId Q = b.sub(gVtr, b.dotGeneral(VtgV, Vt, {}, {}, {0}, {0}));
    right = add(right, b.mul(b.broadcastInDim(sinv, Shape{r, n}, {0}), overScale(Q)));
  }
  if (Yt != kNone) right = add(right, Yt);
  ValueId Vtr = leading(b, Vt, 0, r), Ur = leading(b, U, 1, r);
  if (left != kNone && right != kNone) {
    // Ā = left·Vtr + Ur·right as one product of inner extent 2r, [left | Ur]·[Vtr ; right]
    // (the blocks joined by zero pads and an add): one pass over the m×n result instead
    // of two products and an add of m×n each.
    ValueId lhs = b.add(b.pad(left, {0, 0}, {0, r}), b.pad(Ur, {0, r}, {0, 0}));   // [m,2r]
    ValueId rhs = b.add(b.pad(Vtr, {0, 0}, {r, 0}), b.pad(right, {r, 0}, {0, 0})); // [2r,n]
    return {b.dotGeneral(lhs, rhs, {}, {}, {1}, {0})};
  }
  if (left != kNone) return {b.dotGeneral(left, Vtr, {}, {}, {1}, {0})}; // [m,n]
  if (right != kNone) return {b.dotGeneral(Ur, right, {}, {}, {1}, {0})};
  return {kNone};
}

// svd_topk_complement (A, U, s, Vt, Ū, V̄t) -> (X, Yt) is linear in its right-hand sides,
// and its JVP (passes/JvpLinalg.cpp) is a solve with the same operator of
//   R₁ = Ū̇ − U̇·(UᵀŪ) − X·diag(ṡ_r) + Ȧ·Y,   R₂ = V̄̇t − (V̄t·V)·V̇t − diag(ṡ_r)·Yt + Xᵀ·Ȧ,
// followed by Ẋ −= U·(U̇ᵀX), Ẏt −= (Yt·V̇tᵀ)·Vt. The operator (Ξ, Ψ) -> (Ξ·S − A⊥·Ψ,
// Ψ·S − A⊥ᵀ·Ξ) on the complements is symmetric (and so is the real part of its inverse
// under the complex shift the kernel may take), so the transpose of the solve is the
// same solve: (W₁, W₂ᵗ) = svd_topk_complement(A, U, s, Vt, X̄, Ȳt), and each term above
// hands its factor on:
//   Ā = W₁·Yt + X·W₂ᵗ,   Ū = W₁,   V̄t = W₂ᵗ,
//   Ū_U = −W₁·(UᵀŪ)ᵀ − X·(X̄ᵀU),   V̄t_Vt = −(V̄t·V)ᵀ·W₂ᵗ − (Vt·Ȳtᵀ)·Yt,
//   s̄_j = −(Σ_i X_ij·W₁_ij + Σ_n Yt_jn·W₂ᵗ_jn)  (j < r).
// With guards = g, as in the JVP, the guards are constants: U, s and Vt get cotangents
// on their kept part only (zero pads). This makes reverse over reverse through svd_topk
// possible (grad of a gradient program), with the same numbers as jvp of grad.
OperandCotangents vjpSvdTopkComplement(const VjpCall &c) {
  Builder &b = c.b;
  const ValueId gX = c.cotangents[0], gYt = c.cotangents[1];
  OperandCotangents out(6, kNone);
  if (gX == kNone && gYt == kNone) return out;
  const int64_t g = ir::attr<OpKind::SvdTopkComplement, "guards">(c.op);
  const double eps = ir::attr<OpKind::SvdTopkComplement, "eps">(c.op);
  const ValueId A = c.op.operands[0], Uw = c.op.operands[1], sw = c.op.operands[2], Vtw = c.op.operands[3];
  const ValueId gU = c.op.operands[4], gVt = c.op.operands[5];
  const ValueId X = c.op.results[0], Yt = c.op.results[1];
  const Shape xs = shapeOf(b, X), ys = shapeOf(b, Yt);
  const int64_t m = xs[0], r = xs[1], n = ys[1], w = shapeOf(b, sw)[0], k = w - g;
  const ValueId U = g ? b.slice(Uw, {0, 0}, {m, k}) : Uw;
  const ValueId Vt = g ? b.slice(Vtw, {0, 0}, {k, n}) : Vtw;

  const ValueId rhs1 = gX != kNone ? gX : splat(b, 0.0, xs);
  const ValueId rhs2 = gYt != kNone ? gYt : splat(b, 0.0, ys);
  auto ws = b.svdTopkComplement(A, Uw, sw, Vtw, rhs1, rhs2, eps, g);
  const ValueId W1 = ws[0], W2t = ws[1];
  if (c.needed[4]) out[4] = W1;
  if (c.needed[5]) out[5] = W2t;
  if (c.needed[0]) {
    ValueId l = b.dotGeneral(W1, Yt, {}, {}, {1}, {0}); // [m,n]
    ValueId r2 = b.dotGeneral(X, W2t, {}, {}, {1}, {0});
    out[0] = b.add(l, r2);
  }
  if (c.needed[1]) {
    ValueId UtgU = b.dotGeneral(U, gU, {}, {}, {0}, {0}); // UᵀŪ [k,r]
    ValueId cot = b.dotGeneral(W1, UtgU, {}, {}, {1}, {1}); // W₁·(UᵀŪ)ᵀ [m,k]
    if (gX != kNone) {
      ValueId gXtU = b.dotGeneral(gX, U, {}, {}, {0}, {0}); // X̄ᵀU [r,k]
      ValueId t = b.dotGeneral(X, gXtU, {}, {}, {1}, {0});
      cot = b.add(cot, t);
    }
    cot = b.neg(cot);
    out[1] = g ? b.pad(cot, {0, 0}, {0, g}) : cot;
  }
  if (c.needed[3]) {
    ValueId gVtV = b.dotGeneral(gVt, Vt, {}, {}, {1}, {1}); // V̄t·V [r,k]
    ValueId cot = b.dotGeneral(gVtV, W2t, {}, {}, {0}, {0}); // (V̄t·V)ᵀ·W₂ᵗ [k,n]
    if (gYt != kNone) {
      ValueId VtgYt = b.dotGeneral(Vt, gYt, {}, {}, {1}, {1}); // Vt·Ȳtᵀ [k,r]
      ValueId t = b.dotGeneral(VtgYt, Yt, {}, {}, {1}, {0});
      cot = b.add(cot, t);
    }
    cot = b.neg(cot);
    out[3] = g ? b.pad(cot, {0, 0}, {g, 0}) : cot;
  }
  if (c.needed[2]) {
    ValueId xw = b.mul(X, W1);
    ValueId sc = b.reduceSum(xw, {0});
    ValueId yw = b.mul(Yt, W2t);
    ValueId sy = b.reduceSum(yw, {1});
    sc = b.add(sc, sy);
    sc = b.neg(sc); // [r]
    out[2] = w > r ? b.pad(sc, {0}, {w - r}) : sc;
  }
  return out;
}

Broadening svdBroadening(Builder &b, double eps, ValueId s) {
  return Broadening(b, eps, [&b, s] {
    ValueId s0 = b.stopGradient(b.reshape(b.slice(s, {0}, {1}), {}));
    return b.add(s0, b.compare(s0, b.scalar(0.0), "EQ"));
  });
}

ValueId Broadening::scale() {
  if (scale_ == kNone) scale_ = makeScale_();
  return scale_;
}

ValueId Broadening::invOrZero(ValueId x) {
  Shape xs = shapeOf(b_, x);
  ValueId zero = splat(b_, 0.0, xs);
  ValueId mask = b_.compare(x, zero, "NE");
  return b_.mul(b_.div(splat(b_, 1.0, xs), b_.add(x, b_.compare(x, zero, "EQ"))), mask);
}

// ℓ(y) = y/(y² + ε²), times (y ≠ 0): the same values, and a zero derivative at y = 0.
// y is a gap or a singular value over the matrix's scale s₀ (|y| <= 2), so y² cannot
// overflow, and where it underflows the denominator is ε²: ℓ and each derivative of it
// the forward and reverse rules take stay below 1/ε² per order (the form 1/(y + ε²/y)
// has the same values, but its derivative's chain passes through ε²/y², which overflows
// at y ~ 1e-300: a Hessian at β = 1e-300 was NaN by forward over reverse). Where ε² is
// not a normal double (ε below ~1e-154) that form is kept, with ε²/y as ε·(ε/y) so the
// broadening never underflows into 0/0, y + (y == 0) keeping the division at y = 0
// finite. overScale: 1/s₀ alone overflows for a subnormal s₀, so a numerator is divided
// by s₀ instead.
ValueId Broadening::ell(ValueId x) {
  Shape xs = shapeOf(b_, x);
  ValueId y = b_.div(x, b_.broadcastScalar(scale(), xs));
  ValueId zero = splat(b_, 0.0, xs);
  ValueId nonzero = b_.compare(y, zero, "NE");
  if (eps_ * eps_ >= std::numeric_limits<double>::min()) {
    ValueId num = b_.mul(nonzero, y);
    ValueId yy = b_.mul(y, y);
    ValueId den = b_.add(yy, splat(b_, eps_ * eps_, xs));
    return b_.div(num, den);
  }
  ValueId yz = b_.add(y, b_.compare(y, zero, "EQ"));
  ValueId den = yz;
  if (eps_ != 0) den = b_.add(yz, b_.mul(splat(b_, eps_, xs), b_.div(splat(b_, eps_, xs), yz)));
  return b_.div(nonzero, den);
}

ValueId Broadening::overScale(ValueId num) {
  return b_.div(num, b_.broadcastScalar(scale(), shapeOf(b_, num)));
}

} // namespace tessel::passes::vjp
