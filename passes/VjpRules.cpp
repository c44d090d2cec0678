//===- passes/VjpRules.cpp - One VJP rule per op, keyed by op kind -------------===//
//
// Notation in the comments: x, a, b operands; y result; g the cotangent of y (ȳ).
// Every rule emits ordinary ops of the table through ir::Builder, so grad of grad
// works. Types are copied out of the program before building (the value vector
// grows while a rule runs).
//
// The table at the bottom is in ops.def order, with each op's differentiable
// operands; its size and order are checked at compile time, and
// tests/passes/grad_rules.cpp checks every op's rule numerically. The svd rule, the
// longest, is in VjpSvd.cpp.
//
//===----------------------------------------------------------------------===//
#include "passes/VjpRules.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include "ir/Diagnostics.h"
#include "ir/OpAttrs.h"
#include "ir/ShapeRules.h"

namespace tessel::passes::vjp {

namespace {



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

// y = tanh x: x̄ = g·(1 − y²) = g − (g·y)·y
OperandCotangents vjpTanh(const VjpCall &c) {
  ValueId g = c.cotangents[0], y = c.op.results[0];
  return {c.b.sub(g, c.b.mul(c.b.mul(g, y), y))};
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
  I64List kept = complementAxes(static_cast<int>(xs.size()), ir::attr<OpKind::ReduceSum, "axes">(c.op));
  if (kept.size() == xs.size()) return {c.cotangents[0]}; // empty axes: identity
  return {b.broadcastInDim(c.cotangents[0], xs, kept)};
}

// y = reduce_max(x, axes): the cotangent goes to the positions equal to the max; ties
// split it equally (like JAX's reduce_max / argmax-free rule):
//   mask = (x == broadcast(y)),  x̄ = mask · broadcast(g / reduce_sum(mask, axes)).
OperandCotangents vjpReduceMax(const VjpCall &c) {
  Builder &b = c.b;
  ValueId x = c.op.operands[0], y = c.op.results[0], g = c.cotangents[0];
  I64List axes = ir::attr<OpKind::ReduceMax, "axes">(c.op);
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
  I64List dims = ir::attr<OpKind::BroadcastInDim, "dims">(c.op);
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
  const I64List &perm = ir::attr<OpKind::Transpose, "perm">(c.op);
  I64List inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return {transposeIfNeeded(c.b, c.cotangents[0], inv)};
}

// y = slice(x, start, limit): x̄ = pad(g, low = start, high = shape(x) - limit)
OperandCotangents vjpSlice(const VjpCall &c) {
  Shape xs = shapeOf(c.b, c.op.operands[0]);
  I64List start = ir::attr<OpKind::Slice, "start">(c.op), limit = ir::attr<OpKind::Slice, "limit">(c.op);
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
  I64List low = ir::attr<OpKind::Pad, "low">(c.op), high = ir::attr<OpKind::Pad, "high">(c.op);
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
// broadcast_in_dim; a label repeated within x_i (a diagonal) by selecting with
// compare(iota, iota, EQ): off the diagonal, entries the einsum never reads get an exact
// 0, also where the other operands hold inf or NaN (a 0/1 mask would give inf·0 = NaN
// there, as the order pass's lowering does not).
OperandCotangents vjpEinsum(const VjpCall &c) {
  Builder &b = c.b;
  ValueId g = c.cotangents[0];
  ir::EinsumSpec spec = ir::parseEinsumSpec(ir::attr<OpKind::Einsum, "spec">(c.op));
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
    ValueId zero = kNone;
    for (size_t a = 0; a < labels.size(); ++a) {
      size_t first = labels.find(labels[a]);
      if (first == a) continue;
      ValueId eq = b.compare(b.iota(xs, static_cast<int64_t>(first)),
                             b.iota(xs, static_cast<int64_t>(a)), "EQ");
      if (zero == kNone) zero = splat(b, 0.0, xs);
      full = b.select(eq, full, zero);
    }
    out[i] = full;
  }
  return out;
}

// ---------------------------------------------------------------------------
// The table, in ops.def order.

struct Entry {
  OpKind kind;
  VjpRule rule; ///< nullptr = no rule (grad throws naming the op)
  Differentiable operands;
  const char *doc; ///< the rule in words (`tessel ops`, docs/ops.md)
};

constexpr Entry kTable[] = {
    {OpKind::Constant, vjpNone, Differentiable::All, "none: no operands"},
    {OpKind::Iota, vjpNone, Differentiable::All, "none: no operands"},
    {OpKind::Neg, vjpNeg, Differentiable::All, "x̄ = -ȳ"},
    {OpKind::Exp, vjpExp, Differentiable::All, "x̄ = ȳ·y"},
    {OpKind::Log, vjpLog, Differentiable::All, "x̄ = ȳ / x"},
    {OpKind::Sqrt, vjpSqrt, Differentiable::All, "x̄ = ȳ / (2y)"},
    {OpKind::Sin, vjpSin, Differentiable::All, "x̄ = ȳ·cos x"},
    {OpKind::Cos, vjpCos, Differentiable::All, "x̄ = -ȳ·sin x"},
    {OpKind::Tanh, vjpTanh, Differentiable::All, "x̄ = ȳ·(1 − y²)"},
    {OpKind::Abs, vjpAbs, Differentiable::All, "x̄ = ȳ·sign x (0 at x = 0, as JAX)"},
    {OpKind::Sign, vjpNone, Differentiable::None, "none: the derivative is 0 almost everywhere"},
    {OpKind::Add, vjpAdd, Differentiable::All, "ā = ȳ, b̄ = ȳ"},
    {OpKind::Sub, vjpSub, Differentiable::All, "ā = ȳ, b̄ = -ȳ"},
    {OpKind::Mul, vjpMul, Differentiable::All, "ā = ȳ·b, b̄ = ȳ·a"},
    {OpKind::Div, vjpDiv, Differentiable::All, "ā = ȳ / b, b̄ = -ā·y"},
    {OpKind::Maximum, vjpMaximum, Differentiable::All,
     "ā = ȳ·w, b̄ = ȳ - ā, w = 1 where a > b, 1/2 at ties, 0 where a < b"},
    {OpKind::Compare, vjpNone, Differentiable::None, "none: 0/1 valued, the derivative is 0"},
    {OpKind::Select, vjpSelect, Differentiable::AllButFirst,
     "ā = select(pred, ȳ, 0), b̄ = select(pred, 0, ȳ); nothing to pred"},
    {OpKind::ReduceSum, vjpReduceSum, Differentiable::All, "x̄ = ȳ broadcast over `axes`"},
    {OpKind::ReduceMax, vjpReduceMax, Differentiable::All,
     "x̄ = ȳ at the positions equal to the maximum, split equally among ties"},
    {OpKind::BroadcastInDim, vjpBroadcastInDim, Differentiable::All,
     "x̄ = ȳ summed over the repeated dimensions"},
    {OpKind::Reshape, vjpReshape, Differentiable::All, "x̄ = reshape(ȳ, shape(x))"},
    {OpKind::Transpose, vjpTranspose, Differentiable::All, "x̄ = transpose(ȳ, perm⁻¹)"},
    {OpKind::Slice, vjpSlice, Differentiable::All, "x̄ = pad(ȳ, start, shape(x) - limit)"},
    {OpKind::Pad, vjpPad, Differentiable::All, "x̄ = slice(ȳ, low, low + shape(x))"},
    {OpKind::DotGeneral, vjpDotGeneral, Differentiable::All,
     "l̄ = ȳ contracted with r over r's free dimensions, r̄ = l contracted with ȳ over l's "
     "free dimensions (each transposed back to its operand's order)"},
    {OpKind::Einsum, vjpEinsum, Differentiable::All,
     "x̄_i = einsum of ȳ with the other operands to x_i's labels (a diagonal label masked, a "
     "label summed inside x_i broadcast back)"},
    {OpKind::Svd, vjpSvd, Differentiable::All,
     "Ā from Ū, s̄ and V̄t by the thin-SVD rule, each 1/(s_j ∓ s_i) broadened to "
     "x/(x² + (eps·s_0)²) (docs/trg.md, \"The SVD reverse rule\"); in block form when "
     "only the leading triplets carry cotangents"},
    {OpKind::SvdTopk, vjpSvd, Differentiable::All,
     "svd's rule over the k kept triplets, with the coupling to the discarded subspace "
     "from svd_topk_complement (no full SVD); with guards = g, svd_topk{k − g}'s (an error if a "
     "cotangent reaches the guards)"},
    {OpKind::SvdTopkComplement, vjpSvdTopkComplement, Differentiable::All,
     "the transpose of its JVP: the same solve of the cotangents (its operator is symmetric), "
     "(W₁, W₂ᵗ), then Ā = W₁·Yt + X·W₂ᵗ, Ū = W₁, V̄t = W₂ᵗ, and U, s, Vt's from the "
     "right-hand side's terms (passes/VjpSvd.cpp); the guards get none"},
    {OpKind::Eigh, vjpEigh, Differentiable::All,
     "Ā = V·(diag(w̄) + ½(K − Kᵀ)∘F)·Vᵀ with K = VᵀV̄ and F_ij = 1/(w_j − w_i) broadened to "
     "x/(x² + (eps·max|w|)²) (passes/VjpEigh.cpp); symmetric, finite at a tie for a loss "
     "that does not depend on the basis of a degenerate eigenspace"},
    {OpKind::Qr, vjpQr, Differentiable::All,
     "m >= n: Ā = (Q̄ + Q·copyltu(M))·R⁻ᵀ, M = R·R̄ᵀ − Q̄ᵀ·Q, copyltu(M) symmetric from M's "
     "lower triangle, R⁻ᵀ by triangular_solve; m < n: A = [X | Y], R = [U | V]: Ȳ = Q·V̄ and "
     "X̄ by the square rule with Q̄ + Y·V̄ᵀ (passes/VjpQr.cpp); R must be nonsingular"},
    {OpKind::TriangularSolve, vjpTriangularSolve, Differentiable::All,
     "B̄ = op(A)⁻ᵀ·X̄ (left) or X̄·op(A)⁻ᵀ (right), a triangular_solve; Ā = −B̄·Xᵀ (left) or "
     "−Xᵀ·B̄ (right), transposed when op(A) = Aᵀ, on the triangle the op reads"},
    {OpKind::SylvesterSolve, vjpSylvesterSolve, Differentiable::All,
     "C̄ = sylvester_solve(A, B, X̄) (the equation is self-adjoint), Ā = −sym(C̄·Xᵀ), "
     "B̄ = −sym(Xᵀ·C̄), sym(M) = (M + Mᵀ)/2: no eigenvector of A or B, finite at their ties"},
    {OpKind::StopGradient, vjpNone, Differentiable::None, "none: an AD barrier"},
    {OpKind::Call, vjpCall, Differentiable::All,
     "the call runs @<callee>_fwd, the forward half of the callee's gradient (one per callee "
     "and set of differentiated operands and outputs), which also returns the residuals of "
     "grad's remat policy (recompute: the inputs); x̄ = call @<callee>_bwd(residuals..., ȳ...)"},
    {OpKind::Scan, vjpScan, Differentiable::All,
     "the forward scan runs the forward half of the body's gradient and stacks its residuals "
     "(recompute: the carries each iteration got); c̄, x̄s = a scan in the other direction over "
     "the backward half, carrying c̄ and stacking x̄"},
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

const char *vjpRuleDoc(OpKind kind) { return kTable[static_cast<size_t>(kind)].doc; }
Differentiable differentiableOperands(OpKind kind) { return kTable[static_cast<size_t>(kind)].operands; }

bool isDifferentiableOperand(OpKind kind, unsigned operandIndex) {
  switch (kTable[static_cast<size_t>(kind)].operands) {
  case Differentiable::All: return true;
  case Differentiable::None: return false;
  case Differentiable::AllButFirst: return operandIndex != 0;
  }
  return true;
}

} // namespace tessel::passes::vjp
