//===- passes/JvpRules.cpp - One JVP rule per op, keyed by op kind -------------===//
//
// Notation in the comments: x, a, b operands; y result; ẋ, ȧ, ḃ their tangents, ẏ the
// result's. Every rule emits ordinary ops of the table through ir::Builder. A tangent
// that is kNoValue is zero: rules skip its terms, and a result whose terms are all
// skipped has tangent kNoValue. Conventions follow the VJP rules (passes/VjpRules.cpp),
// so that each rule is the transpose of the VJP rule's linear map: ties of maximum and
// reduce_max split equally, abs has derivative sign x (0 at 0), an exactly zero tangent
// contributes exactly 0 where the local derivative is infinite.
//
// The table at the bottom is in ops.def order; its size and order are checked at
// compile time, and tests/passes/jvp_rules.cpp checks every op's rule against finite
// differences and against its VJP rule (⟨ū, J·ẋ⟩ = ⟨Jᵀ·ū, ẋ⟩). The factorizations'
// rules are in JvpLinalg.cpp, the module's (call, scan) in Jvp.cpp's ModuleJvp.
//
//===----------------------------------------------------------------------===//
#include "passes/JvpRules.h"

#include <algorithm>
#include <string>

#include "ir/Diagnostics.h"
#include "ir/OpAttrs.h"
#include "ir/ShapeRules.h"
#include "passes/VjpRules.h"

namespace tessel::passes::jvprules {

using ir::Builder;
using ir::I64List;
using ir::OpKind;
using ir::Shape;
using ir::ValueId;
using vjp::kNone;
using vjp::shapeOf;
using vjp::splat;

namespace {

/// a + b where either may be a zero tangent (kNone).
ValueId addT(Builder &b, ValueId x, ValueId y) {
  if (x == kNone) return y;
  if (y == kNone) return x;
  return b.add(x, y);
}

/// ẏ = r = ẋ·f′(x), with the convention that an exactly zero tangent contributes exactly
/// 0 where f′ is infinite (the forward twin of VjpRules.cpp's zeroCotangentSafe).
ValueId zeroTangentSafe(Builder &b, ValueId t, ValueId r) {
  Shape shape = shapeOf(b, t);
  ValueId zero = splat(b, 0.0, shape);
  ValueId dropped = b.mul(b.compare(t, zero, "EQ"), b.compare(r, r, "NE"));
  return b.select(dropped, zero, r);
}

ResultTangents jvpZero(const JvpCall &c) { return ResultTangents(c.op.results.size(), kNone); }

// The op applied to the tangent: linear ops (neg, reduce_sum, the shape ops, pad) and
// copies (name-like ops) whose attributes do not depend on values.
ResultTangents jvpLinear(const JvpCall &c) {
  const ValueId t = c.tangents[0];
  if (t == kNone) return {kNone};
  return {c.b.create(c.op.kind, {t}, c.op.attrs)};
}

// ---------------------------------------------------------------------------
// Unary elementwise.

// y = exp x: ẏ = ẋ·y
ResultTangents jvpExp(const JvpCall &c) {
  ValueId t = c.tangents[0];
  return {zeroTangentSafe(c.b, t, c.b.mul(t, c.op.results[0]))};
}

// y = log x: ẏ = ẋ / x
ResultTangents jvpLog(const JvpCall &c) {
  ValueId t = c.tangents[0];
  return {zeroTangentSafe(c.b, t, c.b.div(t, c.op.operands[0]))};
}

// y = sqrt x: ẏ = ẋ / (2y)
ResultTangents jvpSqrt(const JvpCall &c) {
  ValueId t = c.tangents[0], y = c.op.results[0];
  return {zeroTangentSafe(c.b, t, c.b.div(t, c.b.add(y, y)))};
}

// y = sin x: ẏ = ẋ·cos x
ResultTangents jvpSin(const JvpCall &c) {
  return {c.b.mul(c.tangents[0], c.b.unary(OpKind::Cos, c.op.operands[0]))};
}

// y = cos x: ẏ = -(ẋ·sin x)
ResultTangents jvpCos(const JvpCall &c) {
  return {c.b.neg(c.b.mul(c.tangents[0], c.b.unary(OpKind::Sin, c.op.operands[0])))};
}

// y = tanh x: ẏ = ẋ − (ẋ·y)·y
ResultTangents jvpTanh(const JvpCall &c) {
  ValueId t = c.tangents[0], y = c.op.results[0];
  return {c.b.sub(t, c.b.mul(c.b.mul(t, y), y))};
}

// y = |x|: ẏ = ẋ·sign x (0 at x = 0)
ResultTangents jvpAbs(const JvpCall &c) {
  return {c.b.mul(c.tangents[0], c.b.unary(OpKind::Sign, c.op.operands[0]))};
}

// ---------------------------------------------------------------------------
// Binary and ternary elementwise.

// y = a + b: ẏ = ȧ + ḃ
ResultTangents jvpAdd(const JvpCall &c) { return {addT(c.b, c.tangents[0], c.tangents[1])}; }

// y = a - b: ẏ = ȧ − ḃ
ResultTangents jvpSub(const JvpCall &c) {
  ValueId ta = c.tangents[0], tb = c.tangents[1];
  if (tb == kNone) return {ta};
  return {ta == kNone ? c.b.neg(tb) : c.b.sub(ta, tb)};
}

// y = a·b: ẏ = ȧ·b + a·ḃ
ResultTangents jvpMul(const JvpCall &c) {
  Builder &b = c.b;
  ValueId ta = c.tangents[0], tb = c.tangents[1];
  ValueId l = ta == kNone ? kNone : b.mul(ta, c.op.operands[1]);
  ValueId r = tb == kNone ? kNone : b.mul(c.op.operands[0], tb);
  return {addT(b, l, r)};
}

// y = a / b: ẏ = ȧ/b − (ḃ/b)·y   (each term 0 where its tangent is 0, also at b = 0)
ResultTangents jvpDiv(const JvpCall &c) {
  Builder &b = c.b;
  ValueId ta = c.tangents[0], tb = c.tangents[1], den = c.op.operands[1], y = c.op.results[0];
  ValueId l = ta == kNone ? kNone : zeroTangentSafe(b, ta, b.div(ta, den));
  ValueId r = kNone;
  if (tb != kNone) {
    ValueId q = b.div(tb, den);
    r = zeroTangentSafe(b, tb, b.neg(b.mul(q, y)));
  }
  return {addT(b, l, r)};
}

// y = max(a, b): ẏ = w·ȧ + (1 − w)·ḃ, w = 1 where a > b, 1/2 at a tie, 0 where a < b
// (the VJP rule's split).
ResultTangents jvpMaximum(const JvpCall &c) {
  Builder &b = c.b;
  ValueId x = c.op.operands[0], z = c.op.operands[1], ta = c.tangents[0], tb = c.tangents[1];
  Shape shape = shapeOf(b, c.op.results[0]);
  ValueId gt = b.compare(x, z, "GT");
  ValueId ge = b.compare(x, z, "GE");
  ValueId w = b.mul(b.add(gt, ge), splat(b, 0.5, shape));
  ValueId l = ta == kNone ? kNone : b.mul(w, ta);
  ValueId r = kNone;
  if (tb != kNone) r = b.mul(b.sub(splat(b, 1.0, shape), w), tb);
  return {addT(b, l, r)};
}

// y = select(p, a, b): ẏ = select(p, ȧ, ḃ); nothing from p.
ResultTangents jvpSelect(const JvpCall &c) {
  Builder &b = c.b;
  ValueId ta = c.tangents[1], tb = c.tangents[2];
  if (ta == kNone && tb == kNone) return {kNone};
  Shape shape = shapeOf(b, c.op.results[0]);
  ValueId zero = kNone;
  if (ta == kNone || tb == kNone) zero = splat(b, 0.0, shape);
  return {b.select(c.op.operands[0], ta == kNone ? zero : ta, tb == kNone ? zero : tb)};
}

// ---------------------------------------------------------------------------
// Reductions.

// y = reduce_max(x, axes): ẏ = Σ (mask·ẋ) / Σ mask, mask = (x == y) (ties share equally).
ResultTangents jvpReduceMax(const JvpCall &c) {
  Builder &b = c.b;
  ValueId x = c.op.operands[0], y = c.op.results[0], t = c.tangents[0];
  I64List axes = ir::attr<OpKind::ReduceMax, "axes">(c.op);
  if (axes.empty()) return {t};
  Shape xs = shapeOf(b, x);
  I64List kept;
  for (int64_t i = 0; i < static_cast<int64_t>(xs.size()); ++i)
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) kept.push_back(i);
  ValueId mask = b.compare(x, b.broadcastInDim(y, xs, kept), "EQ");
  ValueId count = b.reduceSum(mask, axes);
  return {b.div(b.reduceSum(b.mul(mask, t), axes), count)};
}

// ---------------------------------------------------------------------------
// Contractions: bilinear, one term per operand with a tangent.

// y = dot_general(l, r): ẏ = dot_general(l̇, r) + dot_general(l, ṙ)
ResultTangents jvpDotGeneral(const JvpCall &c) {
  Builder &b = c.b;
  ValueId l = c.tangents[0] == kNone ? kNone : b.create(OpKind::DotGeneral, {c.tangents[0], c.op.operands[1]}, c.op.attrs);
  ValueId r = c.tangents[1] == kNone ? kNone : b.create(OpKind::DotGeneral, {c.op.operands[0], c.tangents[1]}, c.op.attrs);
  return {addT(b, l, r)};
}

// y = einsum(spec, x_0..x_{n-1}): ẏ = Σ_i einsum(spec, x_0.., ẋ_i, ..x_{n-1})
ResultTangents jvpEinsum(const JvpCall &c) {
  Builder &b = c.b;
  ValueId sum = kNone;
  for (size_t i = 0; i < c.op.operands.size(); ++i) {
    if (c.tangents[i] == kNone) continue;
    llvm::SmallVector<ValueId, 4> operands(c.op.operands.begin(), c.op.operands.end());
    operands[i] = c.tangents[i];
    sum = addT(b, sum, b.create(OpKind::Einsum, operands, c.op.attrs));
  }
  return {sum};
}

// ---------------------------------------------------------------------------
// The module: a call of the callee's JVP function; a scan over the body's JVP that
// carries the tangents of the carries along.

ResultTangents jvpCall(const JvpCall &c) {
  Builder &b = c.b;
  std::vector<bool> marked;
  llvm::SmallVector<ValueId, 8> operands(c.op.operands.begin(), c.op.operands.end());
  for (ValueId t : c.tangents) {
    marked.push_back(t != kNone);
    if (t != kNone) operands.push_back(t);
  }
  std::vector<bool> outs;
  const std::string f = c.module->jvpFunction(ir::attr<OpKind::Call, "callee">(c.op), marked, -1, outs);
  auto res = b.call(f, operands);
  const size_t n = c.op.results.size();
  c.primalResults->assign(res.begin(), res.begin() + static_cast<ptrdiff_t>(n));
  ResultTangents out(n, kNone);
  for (size_t o = 0, next = n; o < n; ++o)
    if (outs[o]) out[o] = res[next++];
  return out;
}

ResultTangents jvpScan(const JvpCall &c) {
  Builder &b = c.b;
  const size_t k = static_cast<size_t>(ir::attr<OpKind::Scan, "carries">(c.op));
  const std::string callee = ir::attr<OpKind::Scan, "callee">(c.op);
  std::vector<bool> marked;
  for (ValueId t : c.tangents) marked.push_back(t != kNone);
  std::vector<bool> outs;
  const std::string f = c.module->jvpFunction(callee, marked, static_cast<int>(k), outs);
  // jvpFunction widened `marked` to the carries the body makes active: those start
  // from a zero tangent.
  llvm::SmallVector<ValueId, 8> carries(c.op.operands.begin(), c.op.operands.begin() + static_cast<ptrdiff_t>(k));
  llvm::SmallVector<ValueId, 8> xs(c.op.operands.begin() + static_cast<ptrdiff_t>(k), c.op.operands.end());
  for (size_t j = 0; j < k; ++j)
    if (marked[j]) carries.push_back(c.tangents[j] != kNone ? c.tangents[j] : splat(b, 0.0, shapeOf(b, c.op.operands[j])));
  for (size_t j = k; j < c.op.operands.size(); ++j)
    if (marked[j]) xs.push_back(c.tangents[j]);
  auto res = b.scan(f, carries, xs, ir::attr<OpKind::Scan, "length">(c.op), ir::attr<OpKind::Scan, "reverse">(c.op) != 0);
  const size_t n = c.op.results.size();
  size_t next = 0;
  c.primalResults->clear();
  ResultTangents out(n, kNone);
  for (size_t j = 0; j < k; ++j) c.primalResults->push_back(res[next++]);
  for (size_t j = 0; j < k; ++j)
    if (marked[j]) out[j] = res[next++];
  for (size_t o = k; o < n; ++o) c.primalResults->push_back(res[next++]);
  for (size_t o = k; o < n; ++o)
    if (outs[o]) out[o] = res[next++];
  return out;
}

// ---------------------------------------------------------------------------
// The table, in ops.def order.

struct Entry {
  OpKind kind;
  JvpRule rule;
  const char *doc; ///< the rule in words (`tessel ops`, docs/ops.md)
};

constexpr Entry kTable[] = {
    {OpKind::Constant, jvpZero, "ẏ = 0"},
    {OpKind::Iota, jvpZero, "ẏ = 0"},
    {OpKind::Neg, jvpLinear, "ẏ = -ẋ"},
    {OpKind::Exp, jvpExp, "ẏ = ẋ·y"},
    {OpKind::Log, jvpLog, "ẏ = ẋ / x"},
    {OpKind::Sqrt, jvpSqrt, "ẏ = ẋ / (2y)"},
    {OpKind::Sin, jvpSin, "ẏ = ẋ·cos x"},
    {OpKind::Cos, jvpCos, "ẏ = -ẋ·sin x"},
    {OpKind::Tanh, jvpTanh, "ẏ = ẋ·(1 − y²)"},
    {OpKind::Abs, jvpAbs, "ẏ = ẋ·sign x (0 at x = 0)"},
    {OpKind::Sign, jvpZero, "ẏ = 0"},
    {OpKind::Add, jvpAdd, "ẏ = ȧ + ḃ"},
    {OpKind::Sub, jvpSub, "ẏ = ȧ − ḃ"},
    {OpKind::Mul, jvpMul, "ẏ = ȧ·b + a·ḃ"},
    {OpKind::Div, jvpDiv, "ẏ = ȧ/b − (ḃ/b)·y"},
    {OpKind::Maximum, jvpMaximum, "ẏ = w·ȧ + (1 − w)·ḃ, w = 1 where a > b, 1/2 at ties, 0 where a < b"},
    {OpKind::Compare, jvpZero, "ẏ = 0"},
    {OpKind::Select, jvpSelect, "ẏ = select(pred, ȧ, ḃ)"},
    {OpKind::ReduceSum, jvpLinear, "ẏ = reduce_sum(ẋ)"},
    {OpKind::ReduceMax, jvpReduceMax, "ẏ = mean of ẋ over the positions equal to the maximum"},
    {OpKind::BroadcastInDim, jvpLinear, "ẏ = broadcast_in_dim(ẋ)"},
    {OpKind::Reshape, jvpLinear, "ẏ = reshape(ẋ)"},
    {OpKind::Transpose, jvpLinear, "ẏ = transpose(ẋ)"},
    {OpKind::Slice, jvpLinear, "ẏ = slice(ẋ)"},
    {OpKind::Pad, jvpLinear, "ẏ = pad(ẋ)"},
    {OpKind::DotGeneral, jvpDotGeneral, "ẏ = dot_general(l̇, r) + dot_general(l, ṙ)"},
    {OpKind::Einsum, jvpEinsum, "ẏ = Σ_i einsum(x_0, .., ẋ_i, .., x_{n-1})"},
    {OpKind::Svd, jvpSvd,
     "Ṗ = Uᵀ·Ȧ·V: ṡ = diag Ṗ, U̇ = U·Ω_U + (I − UUᵀ)·Ȧ·V·S⁻¹, V̇ = V·Ω_V + (I − VVᵀ)·Ȧᵀ·U·S⁻¹, "
     "Ω_U, Ω_V = Sym ± Anti with Sym = ½(Ṗ + Ṗᵀ)∘L(s_j − s_i), Anti = ½(Ṗ − Ṗᵀ)∘L(s_j + s_i), "
     "L svd's broadened 1/x (passes/JvpLinalg.cpp)"},
    {OpKind::SvdTopk, jvpSvd,
     "svd's rule over the k kept triplets, the parts outside them (X ⟂ U, Y ⟂ V) from "
     "svd_topk_complement with Ū = Ȧ·V, V̄t = Uᵀ·Ȧ; with guards = g, svd_topk{k − g}'s on the "
     "kept ones (the solve deflating with the guards) and zero on the guards"},
    {OpKind::SvdTopkComplement, jvpSvdTopkComplement,
     "(P⊥Ẋ, Q⊥Ẏ) = svd_topk_complement of the right-hand sides Ū̇ − U̇·UᵀŪ − X·Ṡ + Ȧ·Y and "
     "V̄̇ᵀ − V̄ᵀV·V̇ᵀ − Ṡ·Yᵀ + Xᵀ·Ȧ (the same operator), Ẋ = P⊥Ẋ − U·U̇ᵀX, Ẏ = Q⊥Ẏ − V·V̇ᵀY "
     "(passes/JvpLinalg.cpp); with guards, over the kept triplets, the guards held constant"},
    {OpKind::Eigh, jvpEigh,
     "K = Vᵀ·sym(Ȧ)·V: ẇ = diag K, V̇ = V·(K∘F), F_ij = 1/(w_j − w_i) broadened as in the "
     "VJP rule (ties within dsyevd's error count as exact)"},
    {OpKind::Qr, jvpQr,
     "m >= n: C = Qᵀ·Ȧ·R⁻¹, Ω = tril(C, −1) − tril(C, −1)ᵀ, Ṙ = (C − Ω)·R, Q̇ = Ȧ·R⁻¹ − Q·(C − Ω); "
     "m < n: the square rule on A's first m columns and V̇ = Qᵀ·(Ẏ − Q̇·V) for the rest"},
    {OpKind::TriangularSolve, jvpTriangularSolve,
     "Ẋ = op(A)⁻¹·(Ḃ − op(Ȧ)·X) (left) or (Ḃ − X·op(Ȧ))·op(A)⁻¹ (right), Ȧ on the triangle the "
     "op reads"},
    {OpKind::SylvesterSolve, jvpSylvesterSolve,
     "Ẋ = sylvester_solve(A, B, Ċ − Ṡ_A·X − X·Ṡ_B), Ṡ = (Ȧ + Ȧᵀ)/2: the same equation, no "
     "eigenvector of A or B"},
    {OpKind::StopGradient, jvpZero, "ẏ = 0 (an AD barrier)"},
    {OpKind::Call, jvpCall,
     "the call runs @<callee>_jvp (one per callee and set of operands with tangents), which "
     "returns the callee's outputs and then their tangents"},
    {OpKind::Scan, jvpScan,
     "a scan of the body's JVP, carrying the tangents of the carries (those the body makes "
     "active start at 0) and stacking the tangents of the ys"},
};

static_assert(ir::coversEveryOpInOrder(kTable),
              "the JVP-rule table must have one entry per op of ir/ops.def, in its order");

} // namespace

JvpRule findJvpRule(OpKind kind) { return kTable[static_cast<size_t>(kind)].rule; }

JvpRule jvpRuleOrThrow(OpKind kind) {
  JvpRule r = findJvpRule(kind);
  if (!r) throw Error(std::string("jvp: no JVP rule for op '") + ir::opName(kind) + "'");
  return r;
}

const char *jvpRuleDoc(OpKind kind) { return kTable[static_cast<size_t>(kind)].doc; }

} // namespace tessel::passes::jvprules
