//===- ir/Builder.cpp ---------------------------------------------------------------===//
#include "ir/Builder.h"

#include "ir/OpCheck.h"

namespace tessel::ir {

llvm::SmallVector<ValueId, 1> Builder::createMulti(OpKind kind, llvm::ArrayRef<ValueId> operands,
                                                   AttrList attrs) {
  llvm::SmallVector<Type, 4> types;
  for (ValueId v : operands) {
    if (v >= prog_.values.size())
      throw ShapeError(std::string(opName(kind)) + ": operand is not a value of this program");
    types.push_back(prog_.type(v));
  }
  std::optional<std::vector<Type>> results = checkOpAndInferTypes(
      kind, types, attrs, [](const OpProblem &problem) { throw ShapeError(problem.message); },
      callees());
  canonicalizeAttrs(kind, attrs);
  return prog_.appendOp(kind, operands, std::move(attrs), *results, loc_, remat_);
}

ValueId Builder::create(OpKind kind, llvm::ArrayRef<ValueId> operands, AttrList attrs) {
  auto r = createMulti(kind, operands, std::move(attrs));
  if (r.size() != 1)
    throw ShapeError(std::string(opName(kind)) + " has " + std::to_string(r.size()) +
                     " results; use createMulti");
  return r[0];
}

llvm::SmallVector<ValueId, 1> Builder::call(llvm::StringRef callee,
                                            llvm::ArrayRef<ValueId> operands) {
  return createMulti(OpKind::Call, operands, {{"callee", Attr::str(callee.str())}});
}

llvm::SmallVector<ValueId, 1> Builder::scan(llvm::StringRef body, llvm::ArrayRef<ValueId> carries,
                                            llvm::ArrayRef<ValueId> xs, int64_t length,
                                            bool reverse) {
  llvm::SmallVector<ValueId, 8> operands(carries.begin(), carries.end());
  operands.append(xs.begin(), xs.end());
  return createMulti(OpKind::Scan, operands,
                     {{"callee", Attr::str(body.str())},
                      {"length", Attr::i64(length)},
                      {"carries", Attr::i64(static_cast<int64_t>(carries.size()))},
                      {"reverse", Attr::i64(reverse ? 1 : 0)}});
}

ValueId Builder::constant(const Tensor &t) {
  return create(OpKind::Constant, {}, {{"value", Attr::tensor(t)}});
}

ValueId Builder::full(const Type &t, double v) {
  return constant(Tensor(t, std::vector<double>(static_cast<size_t>(t.numel()), v)));
}

ValueId Builder::iota(llvm::ArrayRef<int64_t> shape, int64_t dim) {
  return create(OpKind::Iota, {}, {{"shape", Attr::i64s(shape)}, {"dim", Attr::i64(dim)}});
}

ValueId Builder::compare(ValueId a, ValueId b, llvm::StringRef direction) {
  return create(OpKind::Compare, {a, b}, {{"direction", Attr::str(direction.str())}});
}

ValueId Builder::reduceSum(ValueId a, llvm::ArrayRef<int64_t> axes) {
  return create(OpKind::ReduceSum, {a}, {{"axes", Attr::i64s(axes)}});
}

ValueId Builder::reduceMax(ValueId a, llvm::ArrayRef<int64_t> axes) {
  return create(OpKind::ReduceMax, {a}, {{"axes", Attr::i64s(axes)}});
}

ValueId Builder::broadcastInDim(ValueId a, llvm::ArrayRef<int64_t> shape,
                                llvm::ArrayRef<int64_t> dims) {
  return create(OpKind::BroadcastInDim, {a},
                {{"shape", Attr::i64s(shape)}, {"dims", Attr::i64s(dims)}});
}

ValueId Builder::reshape(ValueId a, llvm::ArrayRef<int64_t> shape) {
  return create(OpKind::Reshape, {a}, {{"shape", Attr::i64s(shape)}});
}

ValueId Builder::transpose(ValueId a, llvm::ArrayRef<int64_t> perm) {
  return create(OpKind::Transpose, {a}, {{"perm", Attr::i64s(perm)}});
}

ValueId Builder::slice(ValueId a, llvm::ArrayRef<int64_t> start, llvm::ArrayRef<int64_t> limit) {
  return create(OpKind::Slice, {a}, {{"start", Attr::i64s(start)}, {"limit", Attr::i64s(limit)}});
}

ValueId Builder::pad(ValueId a, llvm::ArrayRef<int64_t> low, llvm::ArrayRef<int64_t> high) {
  return create(OpKind::Pad, {a}, {{"low", Attr::i64s(low)}, {"high", Attr::i64s(high)}});
}

ValueId Builder::dotGeneral(ValueId a, ValueId b, llvm::ArrayRef<int64_t> lhsBatch,
                            llvm::ArrayRef<int64_t> rhsBatch, llvm::ArrayRef<int64_t> lhsContract,
                            llvm::ArrayRef<int64_t> rhsContract) {
  return create(OpKind::DotGeneral, {a, b},
                {{"lhs_batch", Attr::i64s(lhsBatch)},
                 {"rhs_batch", Attr::i64s(rhsBatch)},
                 {"lhs_contract", Attr::i64s(lhsContract)},
                 {"rhs_contract", Attr::i64s(rhsContract)}});
}

ValueId Builder::einsum(llvm::StringRef spec, llvm::ArrayRef<ValueId> operands) {
  return create(OpKind::Einsum, operands, {{"spec", Attr::str(spec.str())}});
}

llvm::SmallVector<ValueId, 1> Builder::svd(ValueId a, double eps, llvm::StringRef gauge) {
  return createMulti(OpKind::Svd, {a}, {{"eps", Attr::f64(eps)}, {"gauge", Attr::str(gauge.str())}});
}

llvm::SmallVector<ValueId, 1> Builder::svdTopk(ValueId a, int64_t k, double eps) {
  return createMulti(OpKind::SvdTopk, {a}, {{"k", Attr::i64(k)}, {"eps", Attr::f64(eps)}});
}

llvm::SmallVector<ValueId, 1> Builder::eigh(ValueId a, double eps) {
  return createMulti(OpKind::Eigh, {a}, {{"eps", Attr::f64(eps)}});
}

llvm::SmallVector<ValueId, 1> Builder::qr(ValueId a) { return createMulti(OpKind::Qr, {a}, {}); }

ValueId Builder::triangularSolve(ValueId a, ValueId b, bool leftSide, bool lower, bool transposeA) {
  return create(OpKind::TriangularSolve, {a, b},
                {{"left_side", Attr::i64(leftSide ? 1 : 0)}, {"lower", Attr::i64(lower ? 1 : 0)},
                 {"transpose_a", Attr::i64(transposeA ? 1 : 0)}});
}

ValueId Builder::sylvesterSolve(ValueId a, ValueId b, ValueId c) {
  return create(OpKind::SylvesterSolve, {a, b, c}, {});
}

llvm::SmallVector<ValueId, 1> Builder::svdTopkComplement(ValueId a, ValueId u, ValueId s,
                                                         ValueId vt, ValueId gU, ValueId gVt,
                                                         double eps, int64_t guards) {
  return createMulti(OpKind::SvdTopkComplement, {a, u, s, vt, gU, gVt},
                     {{"eps", Attr::f64(eps)}, {"guards", Attr::i64(guards)}});
}

} // namespace tessel::ir
