//===- ir/Builder.h - Appending ops with shape inference ---------------------===//
//
// The one way passes and frontends create ops: checks the op and infers its result
// types with ir::checkOpAndInferTypes (throws tessel::ShapeError with the message a
// reader or the verifier would give, e.g. naming the op and both shapes),
// canonicalizes attributes, and tags each op with the current location.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <string>

#include "ir/Program.h"

namespace tessel::ir {

class Builder {
public:
  explicit Builder(Program &p) : prog_(p), callees_(&p.functions) {}
  Program &program() { return prog_; }
  /// The functions call and scan ops may name: the first `visible` of `functions` (by
  /// default, all of the built program's own functions: it is the entry of its module).
  /// Set it when building a function of another program's module.
  void setCallees(const std::vector<Program> &functions, size_t visible = ~size_t(0)) {
    callees_ = &functions;
    visible_ = visible;
  }
  Callees callees() const {
    return Callees(*callees_).take_front(std::min(visible_, callees_->size()));
  }
  const Type &type(ValueId v) const { return prog_.type(v); }

  /// Location attached to every op created from now on; the ops are not remat ops.
  void setLoc(std::string loc) {
    loc_ = std::move(loc);
    remat_ = false;
  }
  /// Ops created from now on replace `op`: they take its location and its remat flag.
  /// Every rewrite that creates ops in place of an existing op uses this.
  void setOrigin(const Op &op) {
    loc_ = op.loc;
    remat_ = op.remat;
  }
  /// Marks the ops created from now on as remat ops (until the next setLoc/setOrigin).
  void setRemat(bool remat) { remat_ = remat; }
  const std::string &loc() const { return loc_; }
  bool remat() const { return remat_; }

  /// Creates an op and returns all its results.
  llvm::SmallVector<ValueId, 1> createMulti(OpKind kind, llvm::ArrayRef<ValueId> operands,
                                            AttrList attrs = {});
  /// Creates a single-result op and returns its result.
  ValueId create(OpKind kind, llvm::ArrayRef<ValueId> operands, AttrList attrs = {});

  // Conveniences (all go through create()).
  ValueId constant(const Tensor &t);
  ValueId scalar(double v) { return constant(Tensor::scalar(v)); }
  /// A constant of type `t` filled with `v`.
  ValueId full(const Type &t, double v);
  ValueId iota(llvm::ArrayRef<int64_t> shape, int64_t dim);
  ValueId unary(OpKind k, ValueId a) { return create(k, {a}); }
  ValueId binary(OpKind k, ValueId a, ValueId b) { return create(k, {a, b}); }
  ValueId add(ValueId a, ValueId b) { return binary(OpKind::Add, a, b); }
  ValueId sub(ValueId a, ValueId b) { return binary(OpKind::Sub, a, b); }
  ValueId mul(ValueId a, ValueId b) { return binary(OpKind::Mul, a, b); }
  ValueId div(ValueId a, ValueId b) { return binary(OpKind::Div, a, b); }
  ValueId neg(ValueId a) { return unary(OpKind::Neg, a); }
  ValueId compare(ValueId a, ValueId b, llvm::StringRef direction);
  ValueId select(ValueId p, ValueId a, ValueId b) { return create(OpKind::Select, {p, a, b}); }
  ValueId reduceSum(ValueId a, llvm::ArrayRef<int64_t> axes);
  ValueId reduceMax(ValueId a, llvm::ArrayRef<int64_t> axes);
  ValueId broadcastInDim(ValueId a, llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> dims);
  /// Broadcasts a scalar (rank 0) to `shape`.
  ValueId broadcastScalar(ValueId a, llvm::ArrayRef<int64_t> shape) {
    return broadcastInDim(a, shape, {});
  }
  ValueId reshape(ValueId a, llvm::ArrayRef<int64_t> shape);
  ValueId transpose(ValueId a, llvm::ArrayRef<int64_t> perm);
  ValueId slice(ValueId a, llvm::ArrayRef<int64_t> start, llvm::ArrayRef<int64_t> limit);
  ValueId pad(ValueId a, llvm::ArrayRef<int64_t> low, llvm::ArrayRef<int64_t> high);
  ValueId dotGeneral(ValueId a, ValueId b, llvm::ArrayRef<int64_t> lhsBatch,
                     llvm::ArrayRef<int64_t> rhsBatch, llvm::ArrayRef<int64_t> lhsContract,
                     llvm::ArrayRef<int64_t> rhsContract);
  ValueId einsum(llvm::StringRef spec, llvm::ArrayRef<ValueId> operands);
  /// Returns {U, s, Vt}.
  /// `gauge`: the op's gauge attribute ("none" or "bond", ops.def).
  llvm::SmallVector<ValueId, 1> svd(ValueId a, double eps = 1e-12, llvm::StringRef gauge = "none");
  /// Returns {U, s, Vt} of the k leading triplets.
  llvm::SmallVector<ValueId, 1> svdTopk(ValueId a, int64_t k, double eps = 1e-12);
  /// Returns {Q, R}: the thin QR of a (ir/ops.def, qr).
  llvm::SmallVector<ValueId, 1> qr(ValueId a);
  /// X with op(a)·X = b (leftSide) or X·op(a) = b, a triangular (ir/ops.def, triangular_solve).
  ValueId triangularSolve(ValueId a, ValueId b, bool leftSide, bool lower, bool transposeA);
  /// X with S_A·X + X·S_B = C, S_A and S_B the symmetric parts of a and b.
  ValueId sylvesterSolve(ValueId a, ValueId b, ValueId c);
  /// Returns {w, V}: the symmetric part of a[n,n] is V·diag(w)·Vᵀ, w ascending (ir/ops.def, eigh).
  llvm::SmallVector<ValueId, 1> eigh(ValueId a, double eps = 1e-12);
  /// Returns {X, Yt} (ir/ops.def, svd_topk_complement).
  llvm::SmallVector<ValueId, 1> svdTopkComplement(ValueId a, ValueId u, ValueId s, ValueId vt,
                                                  ValueId gU, ValueId gVt, double eps,
                                                  int64_t guards = 0);
  ValueId stopGradient(ValueId a) { return unary(OpKind::StopGradient, a); }
  /// `call @callee(operands)`: the callee's outputs.
  llvm::SmallVector<ValueId, 1> call(llvm::StringRef callee, llvm::ArrayRef<ValueId> operands);
  /// `scan @body(carries..., xs...) {length, carries}`: the final carries, then the stacked ys.
  llvm::SmallVector<ValueId, 1> scan(llvm::StringRef body, llvm::ArrayRef<ValueId> carries,
                                     llvm::ArrayRef<ValueId> xs, int64_t length,
                                     bool reverse = false);

private:
  Program &prog_;
  const std::vector<Program> *callees_;
  size_t visible_ = ~size_t(0);
  std::string loc_;
  bool remat_ = false;
};

} // namespace tessel::ir
