//===- passes/VjpRules.h - The VJP-rule table (internal to the grad transform) ===//
//
// One reverse-mode rule per op kind, in ops.def order (docs/architecture.md pattern 6,
// JAX ad.py / tinygrad gradient.py). A rule receives the forward op, the cotangent of
// each of its results, and which operands need a cotangent; it emits ordinary ops
// through ir::Builder and returns one cotangent per operand (kNoValue = zero or not
// needed). Rules only use ops of the table, so their output can be differentiated
// again.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Builder.h"
#include "ir/Program.h"

#include <functional>
#include <string>
#include <vector>
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace tessel::passes::vjp {

/// What the rules of call and scan need from the grad transform of a module
/// (passes/Grad.cpp): the module's functions, the VJP function of a callee (made once per
/// callee and set of differentiated inputs, however many call sites), and what a scan
/// stored for its reverse loop.
class ModuleGrad {
public:
  virtual ~ModuleGrad() = default;
  /// The functions of the module so far (the rules add to them).
  virtual const std::vector<ir::Program> &functions() const = 0;
  /// Adds `f` under a name not yet taken, starting from f.name; returns the name.
  virtual std::string addFunction(ir::Program f) = 0;
  /// What grad made of a differentiated call or scan before the reverse sweep: the op now
  /// runs `forward`, the forward half of the callee's gradient (split with the remat
  /// policy GradOptions::callRemat), whose outputs are
  /// the callee's (`primal`) and then residuals; `backward` takes the residuals, then one
  /// cotangent per output `cotangents` marks, and returns one cotangent per input `wrt`
  /// marks.
  struct SplitCallee {
    std::string callee;   ///< the original callee
    std::string backward; ///< the backward half
    size_t primal = 0;    ///< the callee's outputs
    /// Per backward residual input: the op's operand (>= 0) it is (for a scan an x, sliced
    /// per iteration), or -1 when it is the op's result `fromResult`.
    std::vector<int> fromOperand, fromResult;
    std::vector<bool> wrt, cotangents;
  };
  /// The split form whose forward half is `forward`, or null.
  virtual const SplitCallee *splitCallee(llvm::StringRef forward) const = 0;
};

/// Arguments of one rule invocation.
struct VjpCall {
  ir::Builder &b;
  /// A copy of the forward op (the program's op vector grows while rules run).
  const ir::Op &op;
  /// Cotangent of each result of `op`, of the result's type; kNoValue = zero.
  llvm::ArrayRef<ir::ValueId> cotangents;
  /// needed[i]: the caller wants the cotangent of operand i (it is differentiable and
  /// depends on a wrt input). Rules skip the work for operands not needed.
  llvm::ArrayRef<bool> needed;
  /// GradOptions::svdBlocks: the svd rule may use its block form.
  bool svdBlocks = true;
  /// GradOptions::bondGauge: the svd rule may use the op's gauge = "bond" promise.
  bool bondGauge = false;
  /// The module being differentiated (the rules of call and scan).
  ModuleGrad *module = nullptr;
};

/// Cotangent per operand, of the operand's type; kNoValue = zero / not computed.
using OperandCotangents = llvm::SmallVector<ir::ValueId, 4>;
using VjpRule = OperandCotangents (*)(const VjpCall &);

/// The rule for `kind`, or nullptr if the table has none.
VjpRule findVjpRule(ir::OpKind kind);

/// The rule for `kind`; throws tessel::Error "grad: no VJP rule for op '<name>'".
VjpRule vjpRuleOrThrow(ir::OpKind kind);

/// Replaces the rule for `kind` (nullptr removes it) and returns the previous one.
/// For tests of the missing-rule error only; not thread-safe.
VjpRule setVjpRuleForTesting(ir::OpKind kind, VjpRule rule);

/// The VJP rule of `kind` in words (`tessel ops`, docs/ops.md).
const char *vjpRuleDoc(ir::OpKind kind);

/// Which operands of an op a cotangent flows through (a column of the rule table).
enum class Differentiable : uint8_t { All, None, AllButFirst };
Differentiable differentiableOperands(ir::OpKind kind);

/// False for operands through which no cotangent flows: every operand of compare,
/// sign and stop_gradient, and the predicate of select. (Their derivative is zero
/// almost everywhere, or they are AD barriers by definition.)
bool isDifferentiableOperand(ir::OpKind kind, unsigned operandIndex);

// --- Shared by the rules ------------------------------------------------------------

using ir::Builder;
using ir::I64List;
using ir::OpKind;
using ir::Shape;
using ir::ValueId;
/// The cotangent kNoValue: zero, or not computed.
inline constexpr ValueId kNone = ir::kNoValue;

inline ir::Shape shapeOf(const ir::Builder &b, ir::ValueId v) { return b.type(v).shape; }

/// A tensor of `shape` filled with `c`: a scalar constant broadcast (keeps the printed
/// IR small whatever the shape).
inline ir::ValueId splat(ir::Builder &b, double c, const ir::Shape &shape) {
  ir::ValueId s = b.scalar(c);
  return shape.empty() ? s : b.broadcastScalar(s, shape);
}

/// The Lorentzian broadening of the reciprocal gaps in the rules of svd and eigh
/// (VjpSvd.cpp, VjpEigh.cpp; docs/trg.md, "The SVD reverse rule"): 1/x becomes
/// L(x) = x/(x² + (ε·s₀)²) with s₀ the matrix's scale, held constant. A term num·L(x) is
/// built as overScale(num)·ell(x) = (num/s₀)·ℓ(x/s₀), ℓ(y) = (y ≠ 0)·y/(y² + ε²) with
/// |y| <= 2, so that nothing squared can over- or underflow, no derivative of ℓ exceeds
/// 1/ε² per order, and c·A has the gradient of A for any c > 0.
class Broadening {
public:
  /// `scale` builds s₀ (a scalar, held constant, nonzero), on first use.
  Broadening(Builder &b, double eps, std::function<ir::ValueId()> scale)
      : b_(b), eps_(eps), makeScale_(std::move(scale)) {}
  /// s₀, built once.
  ir::ValueId scale();
  /// x -> ℓ(x/s₀), elementwise; 0 (with a zero derivative) where x = 0.
  ir::ValueId ell(ir::ValueId x);
  /// num -> num/s₀, elementwise.
  ir::ValueId overScale(ir::ValueId num);
  /// x -> 1/x where x != 0, 0 at x = 0 (no broadening).
  ir::ValueId invOrZero(ir::ValueId x);

private:
  Builder &b_;
  double eps_;
  std::function<ir::ValueId()> makeScale_;
  ir::ValueId scale_ = ir::kNoValue;
};

/// svd's broadening: s₀ = s[0], the largest singular value (1 for a zero matrix), held
/// constant (VjpSvd.cpp; the VJP and JVP rules of svd and svd_topk).
Broadening svdBroadening(Builder &b, double eps, ir::ValueId s);
/// eigh's broadening: w₀ = max|w| (1 for a zero matrix), held constant (VjpEigh.cpp).
Broadening eighBroadening(Builder &b, double eps, ir::ValueId w);
/// 1 where the computed eigenvalue gap x (n×n) exceeds dsyevd's error bound 8·n·u·w₀
/// (u the unit roundoff), 0 where it is a tie (VjpEigh.cpp).
ir::ValueId eighResolvedGaps(Builder &b, Broadening &br, ir::ValueId x, int64_t n);

/// 1 on the lower (`upper`: upper) triangle of an n×n matrix, strictly off the diagonal
/// if `strict`, else 0 (VjpQr.cpp; the rules of qr and triangular_solve, both modes).
ir::ValueId triangleMask(Builder &b, int64_t n, bool strict, bool upper);

/// The rule of svd (VjpSvd.cpp): Lorentzian-broadened reverse rule of the thin SVD,
/// full or block form (docs/trg.md, "The SVD reverse rule").
OperandCotangents vjpSvd(const VjpCall &c);
OperandCotangents vjpSvdTopkComplement(const VjpCall &c);

/// The rule of eigh (VjpEigh.cpp): Ā = V·(diag(w̄) + ½(K − Kᵀ)∘L(w_j − w_i))·Vᵀ, K = VᵀV̄.
OperandCotangents vjpEigh(const VjpCall &c);

/// The rules of qr (wide matrices included) and triangular_solve (VjpQr.cpp).
OperandCotangents vjpQr(const VjpCall &c);
OperandCotangents vjpTriangularSolve(const VjpCall &c);
/// The rule of sylvester_solve (VjpQr.cpp): C̄ = the same solve of X̄, Ā = −sym(C̄·Xᵀ),
/// B̄ = −sym(Xᵀ·C̄).
OperandCotangents vjpSylvesterSolve(const VjpCall &c);

/// The rules of call and scan (VjpCall.cpp): a call of the callee's VJP function; a
/// reverse scan over the body's VJP with the carries stored per iteration.
OperandCotangents vjpCall(const VjpCall &c);
OperandCotangents vjpScan(const VjpCall &c);

} // namespace tessel::passes::vjp
