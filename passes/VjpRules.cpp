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

// y = exp x: x̄ = g·y
OperandCotangents vjpExp(const VjpCall &c) {
  return {c.b.mul(c.cotangents[0], c.op.results[0])};
}

// y = log x: x̄ = g / x
OperandCotangents vjpLog(const VjpCall &c) {
  return {c.b.div(c.cotangents[0], c.op.operands[0])};
}

// y = sqrt x: x̄ = g / (2y) = g / (y + y)   (no constant needed)
OperandCotangents vjpSqrt(const VjpCall &c) {
  ValueId y = c.op.results[0];
  return {c.b.div(c.cotangents[0], c.b.add(y, y))};
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

// y = a / b: ā = g / b, b̄ = -ā·y  (= -g·a/b²)
OperandCotangents vjpDiv(const VjpCall &c) {
  ValueId g = c.cotangents[0], b = c.op.operands[1], y = c.op.results[0];
  ValueId ga = c.b.div(g, b);
  return {c.needed[0] ? ga : kNone, c.needed[1] ? c.b.neg(c.b.mul(ga, y)) : kNone};
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

// Thin SVD A[m,n] = U[m,k]·diag(s[k])·Vt[k,n], k = min(m,n), V = Vtᵀ. trg.md §5,
// with Lorentzian broadening ε (the op's "eps" attribute):
//   d_ij = s_j² − s_i²,  F_ij = d_ij / (d_ij² + ε²)  (0 on the diagonal and at exact ties),
//   s⁺_i = s_i / (s_i² + ε²),  J = F∘(UᵀŪ),  K = F∘(VᵀV̄),
//   Ā = U·[(J + Jᵀ)·diag(s) + diag(s)·(K + Kᵀ) + diag(s̄)]·Vᵀ
//       + (I − UUᵀ)·Ū·diag(s⁺)·Vᵀ + U·diag(s⁺)·V̄ᵀ·(I − VVᵀ).
// With Vt as the op's result, VᵀV̄ = Vt·V̄tᵀ and V̄ᵀ(I − VVᵀ) = V̄t − (VᵀV̄)ᵀ·Vt.
// The projector terms vanish identically when m == k (resp. n == k) and are skipped.
// F and s⁺ are multiplied by a (x != 0) mask (see `lorentzian`): same values, but a
// zero derivative at exact ties, so the rule's own derivative (grad of grad) stays
// finite and clean there; with ε = 0 it also avoids 0/0.
//
// Truncated cotangents (block form). When only the first r ≤ k/2 columns of Ū, rows of
// V̄t and entries of s̄ can be nonzero — they are the VJP (a pad) of the slice that
// keeps r singular triplets, as in TRG — J and K are nonzero only in their first r
// columns (J_r = F[:, :r]∘(UᵀŪ_r), K_r = F[:, :r]∘(Vt·V̄t_rᵀ), k×r), so the bracket M is
// zero outside its first r columns and rows: M = [C | 0] + [0 R ; 0 0] with
//   C = M[:, :r] = (J + Jᵀ)[:, :r]·diag(s_r) + diag(s)·(K + Kᵀ)[:, :r] + diag(s̄)[:, :r],
//   R = M[:r, r:] = J[r:, :r]ᵀ·diag(s[r:]) + diag(s_r)·K[r:, :r]ᵀ,
// where (J + Jᵀ)[:, :r] = J_r + [J_r[:r, :]ᵀ ; 0]. Then
//   Ā = (U·C + P_r)·Vt[:r, :] + U[:, :r]·(R·Vt[r:, :] + diag(s⁺_r)·Q_r),
// with P_r, Q_r the first r columns/rows of the projector terms (Ū − U·UᵀŪ)·diag(s⁺) and
// V̄t − (VᵀV̄)ᵀ·Vt. The r×r corner is summed as J_rr + J_rrᵀ before scaling, like the full
// rule: its near-cancelling terms then cancel elementwise, which keeps the rule's own
// derivative (second order) as accurate as the full rule's (splitting the corner between
// the two products lost 4% of d²(lnZ/N)/dβ² at TRG χ = 8, 20 steps). The same numbers up
// to rounding, with k×k×r products instead of k×k×k ones: for TRG at χ = 16 (k = 256,
// r = 16) six products of 256×256×16 per SVD instead of four of 256×256×256. The coupling
// to the discarded singular vectors is all there (U and Vt enter in full).
// References: J. Townsend, "Differentiating the SVD" (2016); Z.-Q. Wan, S.-X. Zhang,
// arXiv:1909.02659; H.-J. Liao et al., PRX 9, 031041 (2019).
OperandCotangents vjpSvd(const VjpCall &c) {
  Builder &b = c.b;
  ValueId U = c.op.results[0], s = c.op.results[1], Vt = c.op.results[2];
  ValueId gU = c.cotangents[0], gs = c.cotangents[1], gVt = c.cotangents[2];
  Shape as = shapeOf(b, c.op.operands[0]);
  int64_t m = as[0], n = as[1], k = std::min(m, n);
  double eps = c.op.attrs.getF64("eps");
  double eps2 = eps * eps;

  // Lorentzian 1/x ≈ x / (x² + ε²), times the mask (x != 0). The mask does not change
  // the value (0 at x = 0 either way) but makes the derivative 0 at exact zeros (the
  // diagonal d_ii and exact ties), instead of the Lorentzian's slope 1/ε² = 1e24: for
  // second derivatives, those terms cancel in exact arithmetic (a tie-preserving
  // perturbation has dd_ij = 0) but leave ~1e24·1e-16 of rounding garbage in floating
  // point. With ε = 0 the mask also keeps the denominator nonzero (no 0/0).
  auto lorentzian = [&](ValueId x) {
    Shape xs = shapeOf(b, x);
    ValueId zero = splat(b, 0.0, xs);
    ValueId den = b.mul(x, x);
    if (eps2 > 0) den = b.add(den, splat(b, eps2, xs));
    else den = b.add(den, b.compare(x, zero, "EQ"));
    return b.mul(b.div(x, den), b.compare(x, zero, "NE"));
  };
  auto add = [&](ValueId a, ValueId t) { return a == kNone ? t : b.add(a, t); };

  // r: how many leading singular triplets the cotangents can touch.
  int64_t r = 0;
  if (gU != kNone) r = std::max(r, leadingExtent(b, gU, 1));
  if (gVt != kNone) r = std::max(r, leadingExtent(b, gVt, 0));
  if (gs != kNone) r = std::max(r, leadingExtent(b, gs, 0));
  if (r == 0) return {kNone};
  // Block form when it saves enough: the full rule's U·M and (U·M)·Vt cost m·k·k + m·k·n
  // multiply-adds, the block form's four products m·k·r + r·(k−r)·n + 2·m·r·n (UᵀŪ and
  // VᵀV̄ are k×k×r in both once pad-sink has run). It has ~15 more ops (a few µs), so it
  // must save at least 2¹⁵ multiply-adds: TRG χ = 16 (k = 256, r = 16) saves 28M; a 4×4
  // SVD keeping 2 stays in the full form.
  const int64_t saved = (m * k * k + m * k * n) - (m * k * r + r * (k - r) * n + 2 * m * r * n);
  const bool block = c.svdBlocks && 2 * r <= k && saved >= (int64_t(1) << 15);
  if (!block) r = k;
  Shape kr{k, r}, mr{m, r};
  ValueId gUr = gU == kNone ? kNone : leading(b, gU, 1, r);
  ValueId gVtr = gVt == kNone ? kNone : leading(b, gVt, 0, r);
  ValueId gsr = gs == kNone ? kNone : leading(b, gs, 0, r);
  ValueId sr = block ? leading(b, s, 0, r) : s;

  // The first r columns of J and K (all of them when r = k).
  ValueId Jr = kNone, Kr = kNone, UtgU = kNone, VtgV = kNone;
  if (gU != kNone || gVt != kNone) {
    // s² once, then a plain subtraction: exact ties give d = 0 bitwise (a fused
    // fma(s_j, s_j, −s_i²) would not).
    ValueId s2 = b.mul(s, s);
    ValueId s2r = block ? leading(b, s2, 0, r) : s2;
    ValueId d = b.sub(b.broadcastInDim(s2r, kr, {1}), b.broadcastInDim(s2, kr, {0})); // s_j² − s_i²
    ValueId F = lorentzian(d);
    if (gU != kNone) {
      UtgU = b.dotGeneral(U, gUr, {}, {}, {0}, {0}); // (UᵀŪ)_ij, j < r
      Jr = b.mul(F, UtgU);
    }
    if (gVt != kNone) {
      VtgV = b.dotGeneral(Vt, gVtr, {}, {}, {1}, {1}); // (VᵀV̄)_ij = Σ_n Vt[i,n]·V̄t[j,n]
      Kr = b.mul(F, VtgV);
    }
  }
  bool uProj = gU != kNone && m > k, vProj = gVt != kNone && n > k;
  ValueId splus = (uProj || vProj) ? lorentzian(sr) : kNone;

  if (!block) {
    // inner = (J + Jᵀ)·diag(s) + diag(s)·(K + Kᵀ) + diag(s̄);  Ā = (U·inner + P)·Vt + U·diag(s⁺)·Q.
    Shape kk{k, k};
    ValueId inner = kNone;
    if (Jr != kNone)
      inner = add(inner, b.mul(b.add(Jr, b.transpose(Jr, {1, 0})), b.broadcastInDim(s, kk, {1})));
    if (Kr != kNone)
      inner = add(inner, b.mul(b.broadcastInDim(s, kk, {0}), b.add(Kr, b.transpose(Kr, {1, 0}))));
    if (gs != kNone) {
      ValueId eye = b.compare(b.iota(kk, 0), b.iota(kk, 1), "EQ");
      inner = add(inner, b.mul(b.broadcastInDim(gs, kk, {0}), eye)); // diag(s̄)
    }
    ValueId left = inner == kNone ? kNone : b.dotGeneral(U, inner, {}, {}, {1}, {0}); // [m,k]
    if (uProj) {
      // (I − UUᵀ)·Ū·diag(s⁺) = (Ū − U·(UᵀŪ))·diag(s⁺)
      ValueId P = b.sub(gU, b.dotGeneral(U, UtgU, {}, {}, {1}, {0}));
      left = add(left, b.mul(P, b.broadcastInDim(splus, mr, {1})));
    }
    ValueId result = left == kNone ? kNone : b.dotGeneral(left, Vt, {}, {}, {1}, {0}); // [m,n]
    if (vProj) {
      // U·diag(s⁺)·(V̄t − (VᵀV̄)ᵀ·Vt)
      ValueId Q = b.sub(gVt, b.dotGeneral(VtgV, Vt, {}, {}, {0}, {0}));
      ValueId Us = b.mul(U, b.broadcastInDim(splus, mr, {1}));
      result = add(result, b.dotGeneral(Us, Q, {}, {}, {1}, {0}));
    }
    return {result};
  }

  // Block form: C = M[:, :r] (k×r) and R = M[:r, r:] (r×(k−r)) of the bracket M. The
  // corner M[:r, :r] is summed as J_rr + J_rrᵀ (and K_rr + K_rrᵀ) before it is scaled, as
  // in the full rule, so that its near-cancelling terms cancel elementwise.
  const int64_t rest = k - r;
  Shape rr{r, rest};
  auto symCols = [&](ValueId X) { // X + [X[:r, :r]ᵀ ; 0]  (k×r)
    ValueId corner = b.transpose(b.slice(X, {0, 0}, {r, r}), {1, 0});
    return b.add(X, b.pad(corner, {0, 0}, {rest, 0}));
  };
  auto lowerT = [&](ValueId X) { return b.transpose(b.slice(X, {r, 0}, {k, r}), {1, 0}); };
  ValueId srest = b.slice(s, {r}, {k});
  ValueId C = kNone, R = kNone;
  if (Jr != kNone) {
    C = add(C, b.mul(symCols(Jr), b.broadcastInDim(sr, kr, {1})));   // (J + Jᵀ)·diag(s), cols < r
    R = add(R, b.mul(lowerT(Jr), b.broadcastInDim(srest, rr, {1}))); // Jᵀ·diag(s), rows < r, cols ≥ r
  }
  if (Kr != kNone) {
    C = add(C, b.mul(b.broadcastInDim(s, kr, {0}), symCols(Kr)));    // diag(s)·(K + Kᵀ), cols < r
    R = add(R, b.mul(b.broadcastInDim(sr, rr, {0}), lowerT(Kr)));    // diag(s)·Kᵀ, rows < r, cols ≥ r
  }
  if (gs != kNone) {
    ValueId eye = b.compare(b.iota(kr, 0), b.iota(kr, 1), "EQ");
    C = add(C, b.mul(b.broadcastInDim(gsr, kr, {1}), eye)); // diag(s̄)[:, :r]
  }
  ValueId Ur = leading(b, U, 1, r), Vtr = leading(b, Vt, 0, r);
  ValueId left = C == kNone ? kNone : b.dotGeneral(U, C, {}, {}, {1}, {0}); // [m,r]
  if (uProj) {
    ValueId P = b.sub(gUr, b.dotGeneral(U, UtgU, {}, {}, {1}, {0}));
    left = add(left, b.mul(P, b.broadcastInDim(splus, mr, {1})));
  }
  ValueId right = R == kNone ? kNone
                              : b.dotGeneral(R, b.slice(Vt, {r, 0}, {k, n}), {}, {}, {1}, {0}); // [r,n]
  if (vProj) {
    ValueId Q = b.sub(gVtr, b.dotGeneral(VtgV, Vt, {}, {}, {0}, {0}));
    right = add(right, b.mul(b.broadcastInDim(splus, Shape{r, n}, {0}), Q));
  }
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

constexpr bool tableInOrder() {
  if (std::size(kTable) != static_cast<size_t>(ir::kNumOpKinds)) return false;
  for (size_t i = 0; i < std::size(kTable); ++i)
    if (static_cast<size_t>(kTable[i].kind) != i) return false;
  return true;
}
static_assert(tableInOrder(),
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
