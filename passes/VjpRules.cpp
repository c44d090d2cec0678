//===- passes/VjpRules.cpp - One VJP rule per op, keyed by op kind -------------===//
//
// Notation in the comments: x, a, b operands; y result; g the cotangent of y (ȳ).
// Every rule emits ordinary ops of the table through ir::Builder, so grad of grad
// works. Types are copied out of the program before building (the value vector
// grows while a rule runs).
//
// The table at the bottom is in ops.def order; its size and order are checked at
// compile time, and tests/passes/grad_rules.cpp checks every op's rule numerically.
//
//===----------------------------------------------------------------------===//
#include "passes/VjpRules.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include "ir/Diagnostics.h"
#include "ir/ShapeRules.h"

namespace tessel::passes::vjp {

using ir::Builder;
using ir::I64List;
using ir::kNoValue;
using ir::OpKind;
using ir::Shape;
using ir::ValueId;

namespace {

constexpr ValueId kNone = kNoValue;

Shape shapeOf(const Builder &b, ValueId v) { return b.type(v).shape; }

/// A tensor of `shape` filled with `c`: a scalar constant broadcast (keeps the printed
/// IR small whatever the shape).
ValueId splat(Builder &b, double c, const Shape &shape) {
  ValueId s = b.scalar(c);
  return shape.empty() ? s : b.broadcastScalar(s, shape);
}

/// Axes 0..rank-1 not in `axes`, increasing.
I64List complementAxes(int rank, llvm::ArrayRef<int64_t> axes) {
  I64List out;
  for (int i = 0; i < rank; ++i)
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) out.push_back(i);
  return out;
}

bool isIdentityPerm(llvm::ArrayRef<int64_t> perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

ValueId transposeIfNeeded(Builder &b, ValueId v, llvm::ArrayRef<int64_t> perm) {
  return isIdentityPerm(perm) ? v : b.transpose(v, perm);
}

int64_t indexIn(llvm::ArrayRef<int64_t> list, int64_t x) {
  return std::find(list.begin(), list.end(), x) - list.begin();
}

I64List sorted(llvm::ArrayRef<int64_t> v) {
  I64List s(v.begin(), v.end());
  std::sort(s.begin(), s.end());
  return s;
}

I64List range(int64_t begin, int64_t end) {
  I64List r;
  for (int64_t i = begin; i < end; ++i) r.push_back(i);
  return r;
}

// ---------------------------------------------------------------------------
// Leaves and AD barriers: nothing flows to operands.

OperandCotangents vjpNone(const VjpCall &c) {
  return OperandCotangents(c.op.operands.size(), kNone);
}

// ---------------------------------------------------------------------------
// Unary elementwise.

// y = -x: x̄ = -g
OperandCotangents vjpNeg(const VjpCall &c) { return {c.b.neg(c.cotangents[0])}; }

/// The contribution r = g·f′(x) of a cotangent g, with the convention that an exactly
/// zero cotangent contributes exactly 0 even where the local derivative f′ is infinite
/// (0·∞ of sqrt and log at 0, of div by 0, of exp at overflow): r where it is a number,
/// and 0 where g == 0 and r is NaN. A NaN from a nonzero g, or from a NaN input, still
/// propagates; where g != 0 nothing changes, and the derivative with respect to g is
/// kept wherever f′ is finite (the predicate is false there).
ValueId zeroCotangentSafe(Builder &b, ValueId g, ValueId r) {
  Shape shape = shapeOf(b, g);
  ValueId zero = splat(b, 0.0, shape);
  ValueId dropped = b.mul(b.compare(g, zero, "EQ"), b.compare(r, r, "NE"));
  return b.select(dropped, zero, r);
}

// y = exp x: x̄ = g·y   (0 where g = 0, also where y overflows)
OperandCotangents vjpExp(const VjpCall &c) {
  ValueId g = c.cotangents[0];
  return {zeroCotangentSafe(c.b, g, c.b.mul(g, c.op.results[0]))};
}

// y = log x: x̄ = g / x   (0 where g = 0, also at x = 0)
OperandCotangents vjpLog(const VjpCall &c) {
  ValueId g = c.cotangents[0];
  return {zeroCotangentSafe(c.b, g, c.b.div(g, c.op.operands[0]))};
}

// y = sqrt x: x̄ = g / (2y) = g / (y + y)   (no constant needed; 0 where g = 0, also at x = 0)
OperandCotangents vjpSqrt(const VjpCall &c) {
  ValueId g = c.cotangents[0], y = c.op.results[0];
  return {zeroCotangentSafe(c.b, g, c.b.div(g, c.b.add(y, y)))};
}

// y = sin x: x̄ = g·cos x
OperandCotangents vjpSin(const VjpCall &c) {
  return {c.b.mul(c.cotangents[0], c.b.unary(OpKind::Cos, c.op.operands[0]))};
}

// y = cos x: x̄ = -(g·sin x)
OperandCotangents vjpCos(const VjpCall &c) {
  return {c.b.neg(c.b.mul(c.cotangents[0], c.b.unary(OpKind::Sin, c.op.operands[0])))};
}

// y = |x|: x̄ = g·sign x   (0 at x = 0, like JAX)
OperandCotangents vjpAbs(const VjpCall &c) {
  return {c.b.mul(c.cotangents[0], c.b.unary(OpKind::Sign, c.op.operands[0]))};
}

// ---------------------------------------------------------------------------
// Binary elementwise.

// y = a + b: ā = g, b̄ = g
OperandCotangents vjpAdd(const VjpCall &c) {
  ValueId g = c.cotangents[0];
  return {c.needed[0] ? g : kNone, c.needed[1] ? g : kNone};
}

// y = a - b: ā = g, b̄ = -g
OperandCotangents vjpSub(const VjpCall &c) {
  ValueId g = c.cotangents[0];
  return {c.needed[0] ? g : kNone, c.needed[1] ? c.b.neg(g) : kNone};
}

// y = a·b: ā = g·b, b̄ = g·a
OperandCotangents vjpMul(const VjpCall &c) {
  ValueId g = c.cotangents[0], a = c.op.operands[0], b = c.op.operands[1];
  return {c.needed[0] ? c.b.mul(g, b) : kNone, c.needed[1] ? c.b.mul(g, a) : kNone};
}

// y = a / b: ā = g / b, b̄ = -ā·y  (= -g·a/b²; both 0 where g = 0, also at b = 0)
OperandCotangents vjpDiv(const VjpCall &c) {
  ValueId g = c.cotangents[0], b = c.op.operands[1], y = c.op.results[0];
  ValueId ga = zeroCotangentSafe(c.b, g, c.b.div(g, b));
  return {c.needed[0] ? ga : kNone,
          c.needed[1] ? zeroCotangentSafe(c.b, g, c.b.neg(c.b.mul(ga, y))) : kNone};
}

// y = max(a, b): ā = g·w, b̄ = g - ā with w = 1 where a > b, 1/2 where a == b, 0 where
// a < b. Ties split the cotangent equally (JAX's balanced rule), so ā + b̄ = g.
// w = ((a > b) + (a >= b)) / 2, built from compare (no cotangent flows through it).
OperandCotangents vjpMaximum(const VjpCall &c) {
  Builder &b = c.b;
  ValueId g = c.cotangents[0], x = c.op.operands[0], z = c.op.operands[1];
  Shape shape = shapeOf(b, g);
  ValueId w = b.mul(b.add(b.compare(x, z, "GT"), b.compare(x, z, "GE")), splat(b, 0.5, shape));
  ValueId ga = b.mul(g, w);
  return {c.needed[0] ? ga : kNone, c.needed[1] ? b.sub(g, ga) : kNone};
}

// y = select(p, a, b): ā = select(p, g, 0), b̄ = select(p, 0, g); p gets nothing.
OperandCotangents vjpSelect(const VjpCall &c) {
  Builder &b = c.b;
  ValueId g = c.cotangents[0], p = c.op.operands[0];
  ValueId zero = splat(b, 0.0, shapeOf(b, g));
  return {kNone, c.needed[1] ? b.select(p, g, zero) : kNone,
          c.needed[2] ? b.select(p, zero, g) : kNone};
}

// ---------------------------------------------------------------------------
// Reductions.

// y = reduce_sum(x, axes): x̄ = broadcast_in_dim(g, shape(x), kept axes)
OperandCotangents vjpReduceSum(const VjpCall &c) {
  Builder &b = c.b;
  ValueId x = c.op.operands[0];
  Shape xs = shapeOf(b, x);
  I64List kept = complementAxes(static_cast<int>(xs.size()), c.op.attrs.getI64s("axes"));
  if (kept.size() == xs.size()) return {c.cotangents[0]}; // empty axes: identity
  return {b.broadcastInDim(c.cotangents[0], xs, kept)};
}

// y = reduce_max(x, axes): the cotangent goes to the positions equal to the max; ties
// split it equally (like JAX's reduce_max / argmax-free rule):
//   mask = (x == broadcast(y)),  x̄ = mask · broadcast(g / reduce_sum(mask, axes)).
OperandCotangents vjpReduceMax(const VjpCall &c) {
  Builder &b = c.b;
  ValueId x = c.op.operands[0], y = c.op.results[0], g = c.cotangents[0];
  I64List axes = c.op.attrs.getI64s("axes");
  Shape xs = shapeOf(b, x);
  I64List kept = complementAxes(static_cast<int>(xs.size()), axes);
  if (kept.size() == xs.size()) return {g}; // empty axes: identity
  ValueId mask = b.compare(x, b.broadcastInDim(y, xs, kept), "EQ");
  ValueId count = b.reduceSum(mask, axes);
  return {b.mul(mask, b.broadcastInDim(b.div(g, count), xs, kept))};
}

// ---------------------------------------------------------------------------
// Shape manipulation.

// y = broadcast_in_dim(x, shape, dims) (dims strictly increasing): sum g over the
// result axes not in dims, then over the size-1 axes of x that were expanded, and
// reshape back to x's shape.
OperandCotangents vjpBroadcastInDim(const VjpCall &c) {
  Builder &b = c.b;
  ValueId x = c.op.operands[0], g = c.cotangents[0];
  Shape xs = shapeOf(b, x), ys = shapeOf(b, g);
  I64List dims = c.op.attrs.getI64s("dims");
  I64List newAxes = complementAxes(static_cast<int>(ys.size()), dims);
  ValueId r = newAxes.empty() ? g : b.reduceSum(g, newAxes);
  I64List expanded;
  for (size_t i = 0; i < xs.size(); ++i)
    if (xs[i] == 1 && ys[static_cast<size_t>(dims[i])] != 1)
      expanded.push_back(static_cast<int64_t>(i));
  if (expanded.empty()) return {r};
  return {b.reshape(b.reduceSum(r, expanded), xs)};
}

// y = reshape(x): x̄ = reshape(g, shape(x))
OperandCotangents vjpReshape(const VjpCall &c) {
  return {c.b.reshape(c.cotangents[0], shapeOf(c.b, c.op.operands[0]))};
}

// y = transpose(x, perm): x̄ = transpose(g, perm⁻¹)
OperandCotangents vjpTranspose(const VjpCall &c) {
  const I64List &perm = c.op.attrs.getI64s("perm");
  I64List inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return {transposeIfNeeded(c.b, c.cotangents[0], inv)};
}

// y = slice(x, start, limit): x̄ = pad(g, low = start, high = shape(x) - limit)
OperandCotangents vjpSlice(const VjpCall &c) {
  Shape xs = shapeOf(c.b, c.op.operands[0]);
  I64List start = c.op.attrs.getI64s("start"), limit = c.op.attrs.getI64s("limit");
  I64List high(xs.size());
  bool trivial = true;
  for (size_t i = 0; i < xs.size(); ++i) {
    high[i] = xs[i] - limit[i];
    trivial &= start[i] == 0 && high[i] == 0;
  }
  if (trivial) return {c.cotangents[0]};
  return {c.b.pad(c.cotangents[0], start, high)};
}

// y = pad(x, low, high) (zero padding, low/high >= 0): x̄ = slice(g, low, low + shape(x))
OperandCotangents vjpPad(const VjpCall &c) {
  Shape xs = shapeOf(c.b, c.op.operands[0]);
  I64List low = c.op.attrs.getI64s("low"), high = c.op.attrs.getI64s("high");
  I64List limit(xs.size());
  bool trivial = true;
  for (size_t i = 0; i < xs.size(); ++i) {
    limit[i] = low[i] + xs[i];
    trivial &= low[i] == 0 && high[i] == 0;
  }
  if (trivial) return {c.cotangents[0]};
  return {c.b.slice(c.cotangents[0], low, limit)};
}

// ---------------------------------------------------------------------------
// Contractions.

// y = dot_general(l, r) with result layout [batch, l free, r free] (StableHLO).
//   l̄ = dot_general(g, r; batch g[0..nb) ~ r_batch, contract g's r-free axes ~ r free)
//       whose layout is [batch, l free, r contract (by increasing r axis)], transposed
//       back to l's axis order;
//   r̄ = dot_general(l, g; batch l_batch ~ g[0..nb), contract l free ~ g's l-free axes)
//       whose layout is [batch, l contract (by increasing l axis), r free], transposed
//       back to r's axis order.
OperandCotangents vjpDotGeneral(const VjpCall &c) {
  Builder &b = c.b;
  ValueId g = c.cotangents[0], l = c.op.operands[0], r = c.op.operands[1];
  const ir::AttrList &at = c.op.attrs;
  I64List lb = at.getI64s("lhs_batch"), rb = at.getI64s("rhs_batch");
  I64List lc = at.getI64s("lhs_contract"), rc = at.getI64s("rhs_contract");
  int lr = b.type(l).rank(), rr = b.type(r).rank();
  I64List lUsed(lb), rUsed(rb);
  lUsed.append(lc.begin(), lc.end());
  rUsed.append(rc.begin(), rc.end());
  I64List lFree = complementAxes(lr, lUsed), rFree = complementAxes(rr, rUsed);
  int64_t nb = static_cast<int64_t>(lb.size());
  int64_t nlf = static_cast<int64_t>(lFree.size()), nrf = static_cast<int64_t>(rFree.size());
  int64_t nc = static_cast<int64_t>(lc.size());
  OperandCotangents out(2, kNone);
  if (c.needed[0]) {
    ValueId raw = b.dotGeneral(g, r, range(0, nb), rb, range(nb + nlf, nb + nlf + nrf), rFree);
    I64List rcSorted = sorted(rc), perm(static_cast<size_t>(lr));
    for (int64_t a = 0; a < lr; ++a) {
      int64_t i;
      if ((i = indexIn(lb, a)) < nb) perm[a] = i;
      else if ((i = indexIn(lFree, a)) < nlf) perm[a] = nb + i;
      else perm[a] = nb + nlf + indexIn(rcSorted, rc[indexIn(lc, a)]);
    }
    out[0] = transposeIfNeeded(b, raw, perm);
  }
  if (c.needed[1]) {
    ValueId raw = b.dotGeneral(l, g, lb, range(0, nb), lFree, range(nb, nb + nlf));
    I64List lcSorted = sorted(lc), perm(static_cast<size_t>(rr));
    for (int64_t a = 0; a < rr; ++a) {
      int64_t i;
      if ((i = indexIn(rb, a)) < nb) perm[a] = i;
      else if ((i = indexIn(rFree, a)) < nrf) perm[a] = nb + nc + i;
      else perm[a] = nb + indexIn(lcSorted, lc[indexIn(rc, a)]);
    }
    out[1] = transposeIfNeeded(b, raw, perm);
  }
  return out;
}

// y = einsum(spec, x_0..x_{n-1}): x̄_i = einsum of g with the other operands, to the
// labels of x_i. Still an einsum: the ordering pass lowers it like the forward one.
// Labels of x_i that appear nowhere else (summed inside x_i alone) are restored by
// broadcast_in_dim; a label repeated within x_i (a diagonal) by masking with
// compare(iota, iota, EQ).
OperandCotangents vjpEinsum(const VjpCall &c) {
  Builder &b = c.b;
  ValueId g = c.cotangents[0];
  ir::EinsumSpec spec = ir::parseEinsumSpec(c.op.attrs.getStr("spec"));
  size_t n = c.op.operands.size();
  OperandCotangents out(n, kNone);
  for (size_t i = 0; i < n; ++i) {
    if (!c.needed[i]) continue;
    const std::string &labels = spec.inputs[i];
    Shape xs = shapeOf(b, c.op.operands[i]);
    // Labels available from g and the other operands.
    std::string avail = spec.output;
    for (size_t j = 0; j < n; ++j)
      if (j != i) avail += spec.inputs[j];
    // Unique labels of x_i in first-occurrence order, restricted to available ones.
    std::string unique, kept;
    I64List keptAxes; // first-occurrence axis of each kept label (increasing)
    for (size_t a = 0; a < labels.size(); ++a) {
      char ch = labels[a];
      if (unique.find(ch) != std::string::npos) continue;
      unique += ch;
      if (avail.find(ch) != std::string::npos) {
        kept += ch;
        keptAxes.push_back(static_cast<int64_t>(a));
      }
    }
    ValueId e;
    if (n == 1) {
      // Only g: a permutation of g's axes (kept ⊆ output labels, as sets equal).
      I64List perm;
      for (char ch : kept) perm.push_back(static_cast<int64_t>(spec.output.find(ch)));
      e = transposeIfNeeded(b, g, perm);
    } else {
      std::string s = spec.output;
      llvm::SmallVector<ValueId, 4> operands{g};
      for (size_t j = 0; j < n; ++j) {
        if (j == i) continue;
        s += "," + spec.inputs[j];
        operands.push_back(c.op.operands[j]);
      }
      s += "->" + kept;
      e = b.einsum(s, operands);
    }
    if (kept == labels) {
      out[i] = e;
      continue;
    }
    ValueId full = b.broadcastInDim(e, xs, keptAxes);
    for (size_t a = 0; a < labels.size(); ++a) {
      size_t first = labels.find(labels[a]);
      if (first == a) continue;
      ValueId eq = b.compare(b.iota(xs, static_cast<int64_t>(first)),
                             b.iota(xs, static_cast<int64_t>(a)), "EQ");
      full = b.mul(full, eq);
    }
    out[i] = full;
  }
  return out;
}

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
  if (op.kind == OpKind::Pad) return full - op.attrs.getI64s("high")[dim];
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
      const I64List &low = op.attrs.getI64s("low"), &high = op.attrs.getI64s("high");
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

// Thin SVD A[m,n] = U[m,k]·diag(s[k])·Vt[k,n], k = min(m,n), V = Vtᵀ (docs/trg.md §5).
// With G = UᵀŪ, H = VᵀV̄ (= Vt·V̄tᵀ) and their antisymmetric parts a = G − Gᵀ,
// b = H − Hᵀ, the cotangent of A is
//   Ā = U·M·Vt + (I − UUᵀ)·Ū·diag(1/s)·Vt + U·diag(1/s)·(V̄t − (VᵀV̄)ᵀ·Vt),
//   M_ij = (a_ij·s_j + s_i·b_ij)/(s_j² − s_i²)  (i ≠ j),   M_ii = s̄_i.
// The core term is split into its two factors,
//   M_ij = ½(a + b)_ij · 1/(s_j − s_i)  +  ½(a − b)_ij · 1/(s_j + s_i),
// and each factor 1/x is broadened relative to the matrix's scale:
//   1/x -> L(x) = x/(x² + (ε·s₀)²),   s₀ = s[0] = ‖A‖₂ (held constant by stop_gradient),
// computed as (y/(y² + ε²))/s₀ with y = x/s₀, so that nothing is squared that could
// overflow or underflow: c·A gives the same gradient and a 1/c-scaled derivative of it
// for any c > 0. Only the first factor is singular at a tie s_i = s_j, where its
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
// (second order) does not pick up the broadening's slope 1/(ε·s₀)² there; with ε = 0
// the mask also avoids 0/0.
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
// References: J. Townsend, "Differentiating the SVD" (2016); Z.-Q. Wan, S.-X. Zhang,
// arXiv:1909.02659; H.-J. Liao et al., PRX 9, 031041 (2019).
OperandCotangents vjpSvd(const VjpCall &c) {
  Builder &b = c.b;
  ValueId U = c.op.results[0], s = c.op.results[1], Vt = c.op.results[2];
  ValueId gU = c.cotangents[0], gs = c.cotangents[1], gVt = c.cotangents[2];
  Shape as = shapeOf(b, c.op.operands[0]);
  int64_t m = as[0], n = as[1], k = std::min(m, n);
  double eps = c.op.attrs.getF64("eps");
  auto add = [&](ValueId a, ValueId t) { return a == kNone ? t : b.add(a, t); };

  // r: how many leading singular triplets the cotangents can touch.
  int64_t r = 0;
  if (gU != kNone) r = std::max(r, leadingExtent(b, gU, 1));
  if (gVt != kNone) r = std::max(r, leadingExtent(b, gVt, 0));
  if (gs != kNone) r = std::max(r, leadingExtent(b, gs, 0));
  if (r == 0 || k == 0) return {kNone};
  // Block form when it saves enough: the full rule's U·M and (U·M)·Vt cost m·k·k + m·k·n
  // multiply-adds, the block form's four products m·k·r + r·(k−r)·n + 2·m·r·n (UᵀŪ and
  // VᵀV̄ are k×k×r in both once pad-sink has run). It has ~10 more ops (a few µs), so it
  // must save at least 2¹⁵ multiply-adds: TRG χ = 16 (k = 256, r = 16) saves 28M; a 4×4
  // SVD keeping 2 stays in the full form.
  const int64_t saved = (m * k * k + m * k * n) - (m * k * r + r * (k - r) * n + 2 * m * r * n);
  const bool block = c.svdBlocks && 2 * r <= k && saved >= (int64_t(1) << 15);
  if (!block) r = k;
  const int64_t rest = k - r;
  Shape kr{k, r}, mr{m, r};
  ValueId gUr = gU == kNone ? kNone : leading(b, gU, 1, r);
  ValueId gVtr = gVt == kNone ? kNone : leading(b, gVt, 0, r);
  ValueId gsr = gs == kNone ? kNone : leading(b, gs, 0, r);
  ValueId sr = leading(b, s, 0, r);

  // The scale s₀ = s[0] (1 for a zero matrix), constant under differentiation; built on
  // first use (a cotangent on s alone needs no reciprocal).
  ValueId s0 = kNone;
  auto scaleOf = [&] {
    if (s0 == kNone) {
      s0 = b.stopGradient(b.reshape(b.slice(s, {0}, {1}), {}));
      s0 = b.add(s0, b.compare(s0, b.scalar(0.0), "EQ"));
    }
    return s0;
  };
  // x -> 1/x where x != 0, 0 at x = 0 (x + (x == 0) keeps the division finite).
  auto invOrZero = [&](ValueId x) {
    Shape xs = shapeOf(b, x);
    ValueId zero = splat(b, 0.0, xs);
    ValueId mask = b.compare(x, zero, "NE");
    return b.mul(b.div(splat(b, 1.0, xs), b.add(x, b.compare(x, zero, "EQ"))), mask);
  };
  // x -> L(x) = x/(x² + (ε·s₀)²), as (y/(y² + ε²))/s₀ with y = x/s₀; 0 at x = 0.
  auto broadenedInv = [&](ValueId x) {
    if (eps == 0) return invOrZero(x);
    Shape xs = shapeOf(b, x);
    ValueId scale = b.broadcastScalar(scaleOf(), xs);
    ValueId y = b.div(x, scale);
    ValueId den = b.add(b.mul(y, y), splat(b, eps * eps, xs));
    ValueId mask = b.compare(y, splat(b, 0.0, xs), "NE");
    return b.mul(b.div(b.div(y, den), scale), mask);
  };

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
    ValueId S = b.mul(b.mul(half, sum), broadenedInv(b.sub(sj, si)));
    ValueId Z = b.mul(b.mul(half, diff), broadenedInv(b.add(sj, si)));
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

  bool uProj = gU != kNone && m > k, vProj = gVt != kNone && n > k;
  ValueId sinv = (uProj || vProj) ? broadenedInv(sr) : kNone;
  ValueId left = C == kNone ? kNone : b.dotGeneral(U, C, {}, {}, {1}, {0}); // [m,r]
  if (uProj) {
    // (I − UUᵀ)·Ū·diag(1/s) = (Ū − U·(UᵀŪ))·diag(1/s), first r columns
    ValueId P = b.sub(gUr, b.dotGeneral(U, UtgU, {}, {}, {1}, {0}));
    left = add(left, b.mul(P, b.broadcastInDim(sinv, mr, {1})));
  }
  ValueId right = R == kNone ? kNone
                              : b.dotGeneral(R, b.slice(Vt, {r, 0}, {k, n}), {}, {}, {1}, {0}); // [r,n]
  if (vProj) {
    // diag(1/s)·(V̄t − (VᵀV̄)ᵀ·Vt), first r rows
    ValueId Q = b.sub(gVtr, b.dotGeneral(VtgV, Vt, {}, {}, {0}, {0}));
    right = add(right, b.mul(b.broadcastInDim(sinv, Shape{r, n}, {0}), Q));
  }
  ValueId Vtr = leading(b, Vt, 0, r), Ur = leading(b, U, 1, r);
  ValueId result = left == kNone ? kNone : b.dotGeneral(left, Vtr, {}, {}, {1}, {0}); // [m,n]
  if (right != kNone) result = add(result, b.dotGeneral(Ur, right, {}, {}, {1}, {0}));
  return {result};
}

// ---------------------------------------------------------------------------
// The table, in ops.def order.

struct Entry {
  OpKind kind;
  VjpRule rule; ///< nullptr = no rule (grad throws naming the op)
};

constexpr Entry kTable[] = {
    {OpKind::Constant, vjpNone},  // no operands
    {OpKind::Iota, vjpNone},      // no operands
    {OpKind::Neg, vjpNeg},
    {OpKind::Exp, vjpExp},
    {OpKind::Log, vjpLog},
    {OpKind::Sqrt, vjpSqrt},
    {OpKind::Sin, vjpSin},
    {OpKind::Cos, vjpCos},
    {OpKind::Abs, vjpAbs},
    {OpKind::Sign, vjpNone},      // derivative 0 almost everywhere
    {OpKind::Add, vjpAdd},
    {OpKind::Sub, vjpSub},
    {OpKind::Mul, vjpMul},
    {OpKind::Div, vjpDiv},
    {OpKind::Maximum, vjpMaximum},
    {OpKind::Compare, vjpNone},   // 0/1 valued: derivative 0
    {OpKind::Select, vjpSelect},
    {OpKind::ReduceSum, vjpReduceSum},
    {OpKind::ReduceMax, vjpReduceMax},
    {OpKind::BroadcastInDim, vjpBroadcastInDim},
    {OpKind::Reshape, vjpReshape},
    {OpKind::Transpose, vjpTranspose},
    {OpKind::Slice, vjpSlice},
    {OpKind::Pad, vjpPad},
    {OpKind::DotGeneral, vjpDotGeneral},
    {OpKind::Einsum, vjpEinsum},
    {OpKind::Svd, vjpSvd},
    {OpKind::StopGradient, vjpNone}, // AD barrier
};

static_assert(ir::coversEveryOpInOrder(kTable),
              "the VJP-rule table must have one entry per op of ir/ops.def, in its order");

// The table actually consulted (a copy, so tests can remove an entry).
std::array<VjpRule, ir::kNumOpKinds> &liveTable() {
  static std::array<VjpRule, ir::kNumOpKinds> t = [] {
    std::array<VjpRule, ir::kNumOpKinds> r{};
    for (size_t i = 0; i < r.size(); ++i) r[i] = kTable[i].rule;
    return r;
  }();
  return t;
}

} // namespace

VjpRule findVjpRule(OpKind kind) { return liveTable()[static_cast<size_t>(kind)]; }

VjpRule setVjpRuleForTesting(OpKind kind, VjpRule rule) {
  return std::exchange(liveTable()[static_cast<size_t>(kind)], rule);
}

VjpRule vjpRuleOrThrow(OpKind kind) {
  VjpRule r = findVjpRule(kind);
  if (!r) throw Error(std::string("grad: no VJP rule for op '") + ir::opName(kind) + "'");
  return r;
}

bool isDifferentiableOperand(OpKind kind, unsigned operandIndex) {
  switch (kind) {
  case OpKind::Compare: case OpKind::Sign: case OpKind::StopGradient:
    return false;
  case OpKind::Select:
    return operandIndex != 0;
  default:
    return true;
  }
}

} // namespace tessel::passes::vjp
