//===- ir/OpCost.cpp - The cost table (see OpCost.h) ---------------------------===//
#include "ir/OpCost.h"

#include <algorithm>
#include <string>

#include "ir/OpAttrs.h"
#include "ir/ShapeRules.h"

namespace tessel::ir {
namespace {

double numel(const Type &t) { return static_cast<double>(t.numel()); }
double resultElems(const Program &p, const Op &op) { return numel(p.type(op.results[0])); }

using FlopsRule = double (*)(const Program &, const Op &);

double noFlops(const Program &, const Op &) { return 0; }
double perResultElement(const Program &p, const Op &op) { return resultElems(p, op); }
double perOperandElement(const Program &p, const Op &op) { return numel(p.type(op.operands[0])); }

double dotGeneralFlops(const Program &p, const Op &op) {
  const Type &lhs = p.type(op.operands[0]);
  double contracted = 1;
  for (int64_t d : attr<OpKind::DotGeneral, "lhs_contract">(op)) contracted *= static_cast<double>(lhs.shape[d]);
  // The result holds batch × lhs free × rhs free elements.
  return 2.0 * resultElems(p, op) * contracted;
}

/// opt_einsum's flop_count for the whole einsum in one step (its "Naive FLOP count").
double einsumFlops(const Program &p, const Op &op) {
  const EinsumSpec spec = parseEinsumSpec(attr<OpKind::Einsum, "spec">(op));
  std::string labels;
  size_t occurrences = 0;
  double all = 1;
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    for (size_t j = 0; j < spec.inputs[i].size(); ++j, ++occurrences) {
      const char c = spec.inputs[i][j];
      if (labels.find(c) != std::string::npos) continue;
      labels += c;
      all *= static_cast<double>(p.type(op.operands[i]).shape[j]);
    }
  const bool innerProduct = occurrences > labels.size(); // a label shared by operands
  const double terms = std::max(1.0, static_cast<double>(spec.inputs.size()) - 1.0);
  return all * (terms + (innerProduct ? 1 : 0));
}

double svdFlops(const Program &p, const Op &op) {
  const Type &a = p.type(op.operands[0]);
  const double m = static_cast<double>(std::max(a.shape[0], a.shape[1]));
  const double k = static_cast<double>(std::min(a.shape[0], a.shape[1]));
  return std::min(14 * m * k * k + 8 * k * k * k, 6 * m * k * k + 20 * k * k * k);
}

/// Symmetric eigendecomposition with vectors: 9n³ (Golub & Van Loan, Matrix
/// Computations, 4th ed., §8.3: tridiagonal reduction, its accumulation and the QR
/// iteration; dsyevd's divide and conquer is at most that).
double eighFlops(const Program &p, const Op &op) {
  const double n = static_cast<double>(p.type(op.operands[0]).shape[0]);
  return 9 * n * n * n;
}

/// Householder QR with Q formed, k = min(m, n) (LAPACK Working Note 41): dgeqrf
/// 2·max(m, n)·k² − (2/3)k³ and dorgqr (m×k from k reflectors) 2mk² − (2/3)k³.
double qrFlops(const Program &p, const Op &op) {
  const Type &a = p.type(op.operands[0]);
  const double m = static_cast<double>(a.shape[0]), n = static_cast<double>(a.shape[1]);
  const double k = std::min(m, n);
  return 2 * std::max(m, n) * k * k + 2 * m * k * k - 4 * k * k * k / 3;
}

/// A triangular solve with r right-hand sides of order n: n²·r (one multiply-add per
/// entry of the triangle per right-hand side).
double triangularSolveFlops(const Program &p, const Op &op) {
  const double n = static_cast<double>(p.type(op.operands[0]).shape[0]);
  return n * static_cast<double>(p.type(op.operands[1]).numel());
}

/// Two dsyevd (9n³ + 9m³, as eighFlops) and four products bringing C into the eigenbases
/// and back, 2·(2n²m + 2nm²).
double sylvesterSolveFlops(const Program &p, const Op &op) {
  const double n = static_cast<double>(p.type(op.operands[0]).shape[0]);
  const double m = static_cast<double>(p.type(op.operands[1]).shape[0]);
  return 9 * (n * n * n + m * m * m) + 4 * n * m * (n + m);
}

/// Randomized block Krylov: two products (A·Z, Aᵀ·Q) per column of a basis of about 3k
/// columns and one of k for the true residuals, 2·m·n flops per column (a typical
/// basis; the kernel's real one depends on the spectrum, --profile reports it).
double svdTopkFlops(const Program &p, const Op &op) {
  const Type &a = p.type(op.operands[0]);
  const double mn = static_cast<double>(a.shape[0]) * static_cast<double>(a.shape[1]);
  const double k = static_cast<double>(attr<OpKind::SvdTopk, "k">(op));
  return 2 * mn * (2 * 3 * k + k);
}

/// The guards (a top-k SVD of A⊥, unless the forward gave them) plus conjugate-gradient
/// iterations, two products with A⊥ each (a typical count, as svd_topk's).
double svdTopkComplementFlops(const Program &p, const Op &op) {
  const Type &a = p.type(op.operands[0]);
  const double mn = static_cast<double>(a.shape[0]) * static_cast<double>(a.shape[1]);
  const double k = static_cast<double>(p.type(op.operands[2]).shape[0]);
  const double r = static_cast<double>(p.type(op.operands[4]).shape[1]);
  const double guards = attr<OpKind::SvdTopkComplement, "guards">(op) > 0 ? 0.0 : 4 * 4 * mn * 2 * k;
  return guards + 10 * 4 * mn * r;
}

struct Entry {
  OpKind kind;
  FlopsRule flops;
};

constexpr Entry kCostRules[] = {
    {OpKind::Constant, noFlops},
    {OpKind::Iota, noFlops},
    {OpKind::Neg, perResultElement},
    {OpKind::Exp, perResultElement},
    {OpKind::Log, perResultElement},
    {OpKind::Sqrt, perResultElement},
    {OpKind::Sin, perResultElement},
    {OpKind::Cos, perResultElement},
    {OpKind::Tanh, perResultElement},
    {OpKind::Abs, perResultElement},
    {OpKind::Sign, perResultElement},
    {OpKind::Add, perResultElement},
    {OpKind::Sub, perResultElement},
    {OpKind::Mul, perResultElement},
    {OpKind::Div, perResultElement},
    {OpKind::Maximum, perResultElement},
    {OpKind::Compare, perResultElement},
    {OpKind::Select, perResultElement},
    {OpKind::ReduceSum, perOperandElement},
    {OpKind::ReduceMax, perOperandElement},
    {OpKind::BroadcastInDim, noFlops},
    {OpKind::Reshape, noFlops},
    {OpKind::Transpose, noFlops},
    {OpKind::Slice, noFlops},
    {OpKind::Pad, noFlops},
    {OpKind::DotGeneral, dotGeneralFlops},
    {OpKind::Einsum, einsumFlops},
    {OpKind::Svd, svdFlops},
    {OpKind::SvdTopk, svdTopkFlops},
    {OpKind::SvdTopkComplement, svdTopkComplementFlops},
    {OpKind::Eigh, eighFlops},
    {OpKind::Qr, qrFlops},
    {OpKind::TriangularSolve, triangularSolveFlops},
    {OpKind::SylvesterSolve, sylvesterSolveFlops},
    {OpKind::StopGradient, noFlops},
    {OpKind::Call, noFlops},
    {OpKind::Scan, noFlops},
};
static_assert(coversEveryOpInOrder(kCostRules),
              "the cost table must have one entry per op of ir/ops.def, in its order");

} // namespace

OpCost opCost(const Program &p, const Op &op) {
  OpCost c;
  c.flops = kCostRules[static_cast<size_t>(op.kind)].flops(p, op);
  for (ValueId v : op.operands) c.bytes += static_cast<double>(p.type(v).bytes());
  for (ValueId v : op.results) c.bytes += static_cast<double>(p.type(v).bytes());
  return c;
}

} // namespace tessel::ir
