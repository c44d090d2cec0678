//===- frontend/Tracer.h - Tracing tensor API on top of ir::Builder ----------===//
//
// Write a program as ordinary C++ expressions on `frontend::Tensor` handles; every
// operation appends one op (or a few) to an ir::Program through ir::Builder, with the
// result shape inferred at once. A shape error throws tessel::ShapeError naming the op,
// both shapes and the current location, at the line of C++ that caused it:
//
//   Tracer tr("f");
//   Tensor x = tr.input("x", {4, 4});
//   Tensor y = (x * x).sum() + 1.0;          // reduce_sum, add of a broadcast scalar
//   auto [U, s, Vt] = svd(x);                 // the svd op
//   tr.output(y, "y");
//   ir::Program p = tr.take();
//
// Conventions: row-major, shapes as in ir::Type. Binary elementwise operators broadcast
// a rank-0 operand to the other operand's shape (broadcast_in_dim); any other shape
// difference is a ShapeError (no implicit NumPy broadcasting). `double` operands become
// f64[] constants.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "ir/Builder.h"
#include "ir/Program.h"

namespace tessel::frontend {

/// A traced value: an SSA value of a program being built, plus its builder. Cheap to
/// copy. A default-constructed Tensor is invalid (valid() == false).
class Tensor {
public:
  Tensor() = default;
  Tensor(ir::Builder &b, ir::ValueId v) : b_(&b), v_(v) {}

  bool valid() const { return b_ != nullptr; }
  ir::ValueId id() const { return v_; }
  ir::Builder &builder() const { return *b_; }
  const ir::Type &type() const { return b_->type(v_); }
  const ir::Shape &shape() const { return type().shape; }
  int rank() const { return type().rank(); }
  int64_t dim(int i) const { return shape()[static_cast<size_t>(i)]; }
  int64_t numel() const { return type().numel(); }

  /// Names the SSA value (printed as %name; uniquified if taken). Returns *this.
  Tensor named(const std::string &name) const;

  // Unary elementwise ops.
  Tensor operator-() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor abs() const;
  Tensor sign() const;
  Tensor stopGradient() const;

  // Shape ops (StableHLO semantics; see ir/ops.def).
  Tensor reshape(llvm::ArrayRef<int64_t> shape) const;
  Tensor transpose(llvm::ArrayRef<int64_t> perm) const;
  /// Matrix transpose of a rank-2 tensor.
  Tensor T() const;
  Tensor slice(llvm::ArrayRef<int64_t> start, llvm::ArrayRef<int64_t> limit) const;
  /// Zero padding: result dim i = low[i] + dim(i) + high[i].
  Tensor pad(llvm::ArrayRef<int64_t> low, llvm::ArrayRef<int64_t> high) const;
  /// broadcast_in_dim: operand dim i goes to result dim dims[i] (size equal or 1).
  Tensor broadcastInDim(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> dims) const;
  /// Broadcasts a rank-0 tensor to `shape`.
  Tensor broadcastTo(llvm::ArrayRef<int64_t> shape) const;

  // Reductions (reduced axes are removed).
  Tensor sum(llvm::ArrayRef<int64_t> axes) const;
  Tensor max(llvm::ArrayRef<int64_t> axes) const;
  /// Sum / max over all axes (result f64[]).
  Tensor sum() const;
  Tensor max() const;

private:
  ir::Builder *b_ = nullptr;
  ir::ValueId v_ = ir::kNoValue;
};

// Binary elementwise ops. A rank-0 operand broadcasts to the other operand's shape.
Tensor operator+(const Tensor &a, const Tensor &b);
Tensor operator-(const Tensor &a, const Tensor &b);
Tensor operator*(const Tensor &a, const Tensor &b);
Tensor operator/(const Tensor &a, const Tensor &b);
Tensor operator+(const Tensor &a, double b);
Tensor operator-(const Tensor &a, double b);
Tensor operator*(const Tensor &a, double b);
Tensor operator/(const Tensor &a, double b);
Tensor operator+(double a, const Tensor &b);
Tensor operator-(double a, const Tensor &b);
Tensor operator*(double a, const Tensor &b);
Tensor operator/(double a, const Tensor &b);
Tensor maximum(const Tensor &a, const Tensor &b);
/// Elementwise comparison, 1.0 where true, 0.0 where false. direction: EQ NE LT LE GT GE.
Tensor compare(const Tensor &a, const Tensor &b, llvm::StringRef direction);
/// select(pred, a, b): a where pred != 0, b elsewhere (all of one shape, or rank 0).
Tensor select(const Tensor &pred, const Tensor &a, const Tensor &b);

// Free-function spellings of the unary ops.
inline Tensor exp(const Tensor &a) { return a.exp(); }
inline Tensor log(const Tensor &a) { return a.log(); }
inline Tensor sqrt(const Tensor &a) { return a.sqrt(); }
inline Tensor sin(const Tensor &a) { return a.sin(); }
inline Tensor cos(const Tensor &a) { return a.cos(); }
inline Tensor tanh(const Tensor &a) { return a.tanh(); }
inline Tensor abs(const Tensor &a) { return a.abs(); }
inline Tensor sign(const Tensor &a) { return a.sign(); }
inline Tensor stopGradient(const Tensor &a) { return a.stopGradient(); }
/// cosh x = (eˣ + e⁻ˣ)/2 and sinh x = (eˣ − e⁻ˣ)/2, from exp (the op set has no cosh).
Tensor cosh(const Tensor &a);
Tensor sinh(const Tensor &a);

/// n-ary einsum with explicit output, e.g. einsum("war,abu,bgl,gwd->ruld", {S1,S2,S3,S4}).
/// Left as one einsum op; the ordering pass lowers it to dot_general/transposes.
Tensor einsum(llvm::StringRef spec, std::initializer_list<Tensor> operands);
Tensor einsum(llvm::StringRef spec, llvm::ArrayRef<Tensor> operands);
/// dot_general with JAX/StableHLO dimension numbers.
Tensor dotGeneral(const Tensor &a, const Tensor &b, llvm::ArrayRef<int64_t> lhsBatch,
                  llvm::ArrayRef<int64_t> rhsBatch, llvm::ArrayRef<int64_t> lhsContract,
                  llvm::ArrayRef<int64_t> rhsContract);
/// Matrix product of a [m,k] and b [k,n] (dot_general contracting a.1 with b.0).
Tensor matmul(const Tensor &a, const Tensor &b);
/// Concatenation along `axis`, lowered to zero pads and adds (all operands agree in the
/// other dimensions). Exact: each result element is one operand element plus zeros.
Tensor concatenate(llvm::ArrayRef<Tensor> parts, int64_t axis);

/// Thin SVD A[m,n] = U[m,k]·diag(s[k])·Vt[k,n], k = min(m,n), s descending (LAPACK
/// gesdd at run time). eps is the Lorentzian broadening of the reverse rule (docs/trg.md §5).
struct SvdResult {
  Tensor U, s, Vt;
};
/// The svd op; `gauge` its attribute ("bond": the loss is invariant under an orthogonal
/// gauge of the bond between U·diag(√s) and diag(√s)·Vt, ops.def).
SvdResult svd(const Tensor &a, double eps = 1e-12, const std::string &gauge = "none");

/// Owns a Program and its Builder; the entry point of tracing.
class Tracer {
public:
  explicit Tracer(std::string programName = "main");
  Tracer(const Tracer &) = delete;
  Tracer &operator=(const Tracer &) = delete;

  /// Declares a named input of shape `shape` (f64). Throws ShapeError when the shape's
  /// byte size overflows int64 (as the readers refuse such a declared type).
  Tensor input(const std::string &name, llvm::ArrayRef<int64_t> shape);
  /// Marks `t` as an output; names it when `name` is not empty.
  void output(const Tensor &t, const std::string &name = {});

  Tensor constant(const ir::Tensor &value);
  Tensor scalar(double v);
  /// A constant of `shape` filled with `v`.
  Tensor full(llvm::ArrayRef<int64_t> shape, double v);
  /// iota: element = its index along `dim`.
  Tensor iota(llvm::ArrayRef<int64_t> shape, int64_t dim);

  /// Location attached to the ops traced from now on (e.g. "trg 16->16: svd Ma").
  void setLoc(std::string loc) { b_.setLoc(std::move(loc)); }
  ir::Builder &builder() { return b_; }
  ir::Program &program() { return *p_; }
  /// Moves the traced program out (the tracer must not be used afterwards).
  ir::Program take();

private:
  std::unique_ptr<ir::Program> p_;
  ir::Builder b_;
};

} // namespace tessel::frontend
