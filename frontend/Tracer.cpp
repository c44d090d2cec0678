//===- frontend/Tracer.cpp - Tracing tensor API ----------------------------------===//
#include "frontend/Tracer.h"

#include <numeric>

#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"

namespace tessel::frontend {
namespace {

/// Runs one builder call; a ShapeError gets the current location appended so the
/// message says which traced step failed ("... (at trg 16->16: svd Ma)").
template <class F> auto traced(ir::Builder &b, F &&f) -> decltype(f()) {
  try {
    return f();
  } catch (const ShapeError &e) {
    if (b.loc().empty()) throw;
    throw ShapeError(std::string(e.what()) + " (at " + b.loc() + ")");
  }
}

ir::Builder &builderOf(const Tensor &a, const char *what) {
  if (!a.valid()) throw ShapeError(std::string(what) + ": operand is an invalid (empty) Tensor");
  return a.builder();
}

ir::Builder &builderOf2(const Tensor &a, const Tensor &b, const char *what) {
  ir::Builder &ba = builderOf(a, what);
  ir::Builder &bb = builderOf(b, what);
  if (&ba != &bb) throw ShapeError(std::string(what) + ": operands belong to different programs");
  return ba;
}

Tensor unaryOp(const Tensor &a, ir::OpKind k) {
  ir::Builder &b = builderOf(a, ir::opName(k));
  return Tensor(b, traced(b, [&] { return b.unary(k, a.id()); }));
}

/// Broadcasts a rank-0 operand to the other's shape (only rank 0; anything else is
/// left to the op's shape rule, which reports both shapes).
std::pair<ir::ValueId, ir::ValueId> promote(ir::Builder &b, const Tensor &x, const Tensor &y) {
  ir::ValueId vx = x.id(), vy = y.id();
  if (x.rank() == 0 && y.rank() != 0) vx = b.broadcastScalar(vx, y.shape());
  else if (y.rank() == 0 && x.rank() != 0) vy = b.broadcastScalar(vy, x.shape());
  return {vx, vy};
}

Tensor binaryOp(const Tensor &x, const Tensor &y, ir::OpKind k) {
  ir::Builder &b = builderOf2(x, y, ir::opName(k));
  return Tensor(b, traced(b, [&] {
                  auto [vx, vy] = promote(b, x, y);
                  return b.binary(k, vx, vy);
                }));
}

Tensor scalarLike(const Tensor &a, double v, const char *what) {
  ir::Builder &b = builderOf(a, what);
  return Tensor(b, b.scalar(v));
}

} // namespace

//===--- Tensor ---------------------------------------------------------------===//

Tensor Tensor::named(const std::string &name) const {
  builderOf(*this, "named").program().setName(v_, name);
  return *this;
}

Tensor Tensor::operator-() const { return unaryOp(*this, ir::OpKind::Neg); }
Tensor Tensor::exp() const { return unaryOp(*this, ir::OpKind::Exp); }
Tensor Tensor::log() const { return unaryOp(*this, ir::OpKind::Log); }
Tensor Tensor::sqrt() const { return unaryOp(*this, ir::OpKind::Sqrt); }
Tensor Tensor::sin() const { return unaryOp(*this, ir::OpKind::Sin); }
Tensor Tensor::cos() const { return unaryOp(*this, ir::OpKind::Cos); }
Tensor Tensor::tanh() const { return unaryOp(*this, ir::OpKind::Tanh); }
Tensor Tensor::abs() const { return unaryOp(*this, ir::OpKind::Abs); }
Tensor Tensor::sign() const { return unaryOp(*this, ir::OpKind::Sign); }
Tensor Tensor::stopGradient() const { return unaryOp(*this, ir::OpKind::StopGradient); }

Tensor Tensor::reshape(llvm::ArrayRef<int64_t> shape) const {
  ir::Builder &b = builderOf(*this, "reshape");
  return Tensor(b, traced(b, [&] { return b.reshape(v_, shape); }));
}

Tensor Tensor::transpose(llvm::ArrayRef<int64_t> perm) const {
  ir::Builder &b = builderOf(*this, "transpose");
  return Tensor(b, traced(b, [&] { return b.transpose(v_, perm); }));
}

Tensor Tensor::T() const {
  if (valid() && rank() != 2)
    throw ShapeError("transpose: T() needs a matrix, got " + type().str() +
                     (builder().loc().empty() ? "" : " (at " + builder().loc() + ")"));
  return transpose({1, 0});
}

Tensor Tensor::slice(llvm::ArrayRef<int64_t> start, llvm::ArrayRef<int64_t> limit) const {
  ir::Builder &b = builderOf(*this, "slice");
  return Tensor(b, traced(b, [&] { return b.slice(v_, start, limit); }));
}

Tensor Tensor::pad(llvm::ArrayRef<int64_t> low, llvm::ArrayRef<int64_t> high) const {
  ir::Builder &b = builderOf(*this, "pad");
  return Tensor(b, traced(b, [&] { return b.pad(v_, low, high); }));
}

Tensor Tensor::broadcastInDim(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> dims) const {
  ir::Builder &b = builderOf(*this, "broadcast_in_dim");
  return Tensor(b, traced(b, [&] { return b.broadcastInDim(v_, shape, dims); }));
}

Tensor Tensor::broadcastTo(llvm::ArrayRef<int64_t> shape) const {
  return broadcastInDim(shape, {});
}

Tensor Tensor::sum(llvm::ArrayRef<int64_t> axes) const {
  ir::Builder &b = builderOf(*this, "reduce_sum");
  return Tensor(b, traced(b, [&] { return b.reduceSum(v_, axes); }));
}

Tensor Tensor::max(llvm::ArrayRef<int64_t> axes) const {
  ir::Builder &b = builderOf(*this, "reduce_max");
  return Tensor(b, traced(b, [&] { return b.reduceMax(v_, axes); }));
}

static ir::I64List allAxes(int rank) {
  ir::I64List axes(static_cast<size_t>(rank));
  std::iota(axes.begin(), axes.end(), 0);
  return axes;
}

Tensor Tensor::sum() const {
  builderOf(*this, "reduce_sum");
  return sum(allAxes(rank()));
}
Tensor Tensor::max() const {
  builderOf(*this, "reduce_max");
  return max(allAxes(rank()));
}

//===--- Free functions ---------------------------------------------------------===//

Tensor operator+(const Tensor &a, const Tensor &b) { return binaryOp(a, b, ir::OpKind::Add); }
Tensor operator-(const Tensor &a, const Tensor &b) { return binaryOp(a, b, ir::OpKind::Sub); }
Tensor operator*(const Tensor &a, const Tensor &b) { return binaryOp(a, b, ir::OpKind::Mul); }
Tensor operator/(const Tensor &a, const Tensor &b) { return binaryOp(a, b, ir::OpKind::Div); }
Tensor operator+(const Tensor &a, double b) { return a + scalarLike(a, b, "add"); }
Tensor operator-(const Tensor &a, double b) { return a - scalarLike(a, b, "sub"); }
Tensor operator*(const Tensor &a, double b) { return a * scalarLike(a, b, "mul"); }
Tensor operator/(const Tensor &a, double b) { return a / scalarLike(a, b, "div"); }
Tensor operator+(double a, const Tensor &b) { return scalarLike(b, a, "add") + b; }
Tensor operator-(double a, const Tensor &b) { return scalarLike(b, a, "sub") - b; }
Tensor operator*(double a, const Tensor &b) { return scalarLike(b, a, "mul") * b; }
Tensor operator/(double a, const Tensor &b) { return scalarLike(b, a, "div") / b; }

Tensor maximum(const Tensor &a, const Tensor &b) { return binaryOp(a, b, ir::OpKind::Maximum); }

Tensor compare(const Tensor &x, const Tensor &y, llvm::StringRef direction) {
  ir::Builder &b = builderOf2(x, y, "compare");
  return Tensor(b, traced(b, [&] {
                  auto [vx, vy] = promote(b, x, y);
                  return b.compare(vx, vy, direction);
                }));
}

Tensor select(const Tensor &pred, const Tensor &x, const Tensor &y) {
  ir::Builder &b = builderOf2(x, y, "select");
  builderOf2(pred, x, "select");
  return Tensor(b, traced(b, [&] {
                  // Broadcast rank-0 operands to the largest operand's shape.
                  const Tensor *big = &pred;
                  if (x.rank() > big->rank()) big = &x;
                  if (y.rank() > big->rank()) big = &y;
                  auto lift = [&](const Tensor &t) {
                    return t.rank() == 0 && big->rank() != 0 ? b.broadcastScalar(t.id(), big->shape())
                                                             : t.id();
                  };
                  return b.select(lift(pred), lift(x), lift(y));
                }));
}

Tensor cosh(const Tensor &a) { return (a.exp() + (-a).exp()) * 0.5; }
Tensor sinh(const Tensor &a) { return (a.exp() - (-a).exp()) * 0.5; }

Tensor einsum(llvm::StringRef spec, llvm::ArrayRef<Tensor> operands) {
  if (operands.empty()) throw ShapeError("einsum: needs at least one operand");
  ir::Builder &b = builderOf(operands[0], "einsum");
  llvm::SmallVector<ir::ValueId, 4> ids;
  for (const Tensor &t : operands) {
    builderOf2(operands[0], t, "einsum");
    ids.push_back(t.id());
  }
  return Tensor(b, traced(b, [&] { return b.einsum(spec, ids); }));
}

Tensor einsum(llvm::StringRef spec, std::initializer_list<Tensor> operands) {
  return einsum(spec, llvm::ArrayRef<Tensor>(operands.begin(), operands.size()));
}

Tensor dotGeneral(const Tensor &x, const Tensor &y, llvm::ArrayRef<int64_t> lhsBatch,
                  llvm::ArrayRef<int64_t> rhsBatch, llvm::ArrayRef<int64_t> lhsContract,
                  llvm::ArrayRef<int64_t> rhsContract) {
  ir::Builder &b = builderOf2(x, y, "dot_general");
  return Tensor(b, traced(b, [&] {
                  return b.dotGeneral(x.id(), y.id(), lhsBatch, rhsBatch, lhsContract,
                                      rhsContract);
                }));
}

Tensor matmul(const Tensor &x, const Tensor &y) {
  ir::Builder &b = builderOf2(x, y, "dot_general");
  // numpy's matmul for operands of rank 1 and 2: x's last axis against y's first (a
  // vector operand is not promoted to a matrix, so its axis does not appear in the result).
  if (x.rank() < 1 || x.rank() > 2 || y.rank() < 1 || y.rank() > 2)
    throw ShapeError("dot_general: matmul needs matrices or vectors, got " + x.type().str() +
                     " and " + y.type().str() + " (use einsum or dot_general for batches)" +
                     (b.loc().empty() ? "" : " (at " + b.loc() + ")"));
  return dotGeneral(x, y, {}, {}, {x.rank() - 1}, {0});
}

Tensor concatenate(llvm::ArrayRef<Tensor> parts, int64_t axis) {
  if (parts.empty()) throw ShapeError("concatenate: needs at least one operand");
  const Tensor &first = parts[0];
  ir::Builder &b = builderOf(first, "concatenate");
  int rank = first.rank();
  if (axis < 0 || axis >= rank)
    throw ShapeError("concatenate: axis " + std::to_string(axis) + " out of range for " +
                     first.type().str());
  int64_t total = 0;
  for (const Tensor &t : parts) {
    builderOf2(first, t, "concatenate");
    bool ok = t.rank() == rank;
    for (int i = 0; ok && i < rank; ++i)
      if (i != axis && t.dim(i) != first.dim(i)) ok = false;
    if (!ok)
      throw ShapeError("concatenate: shapes " + first.type().str() + " and " + t.type().str() +
                       " differ outside axis " + std::to_string(axis) +
                       (b.loc().empty() ? "" : " (at " + b.loc() + ")"));
    total += t.dim(static_cast<int>(axis));
  }
  Tensor acc;
  int64_t offset = 0;
  for (const Tensor &t : parts) {
    ir::I64List low(static_cast<size_t>(rank), 0), high(static_cast<size_t>(rank), 0);
    int64_t n = t.dim(static_cast<int>(axis));
    low[static_cast<size_t>(axis)] = offset;
    high[static_cast<size_t>(axis)] = total - offset - n;
    Tensor padded = (offset == 0 && n == total) ? t : t.pad(low, high);
    acc = acc.valid() ? acc + padded : padded;
    offset += n;
  }
  return acc;
}

SvdResult svd(const Tensor &a, double eps, const std::string &gauge) {
  ir::Builder &b = builderOf(a, "svd");
  auto r = traced(b, [&] { return b.svd(a.id(), eps, gauge); });
  return {Tensor(b, r[0]), Tensor(b, r[1]), Tensor(b, r[2])};
}

//===--- Tracer ------------------------------------------------------------------===//

Tracer::Tracer(std::string programName)
    : p_(std::make_unique<ir::Program>()), b_(*p_) {
  p_->name = std::move(programName);
}

Tensor Tracer::input(const std::string &name, llvm::ArrayRef<int64_t> shape) {
  ir::Type t(shape);
  if (!ir::text::checkedNumel(shape))
    throw ShapeError("input %" + name + ": type " + t.str() +
                     " is too large: its byte size overflows 64 bits");
  return Tensor(b_, p_->addInput(name, t));
}

void Tracer::output(const Tensor &t, const std::string &name) {
  if (!t.valid() || &t.builder() != &b_)
    throw Error("output: tensor does not belong to program " + ir::text::atName(p_->name));
  if (!name.empty()) p_->setName(t.id(), name);
  p_->addOutput(t.id());
}

Tensor Tracer::constant(const ir::Tensor &value) {
  return Tensor(b_, traced(b_, [&] { return b_.constant(value); }));
}

Tensor Tracer::scalar(double v) { return Tensor(b_, b_.scalar(v)); }

Tensor Tracer::full(llvm::ArrayRef<int64_t> shape, double v) {
  return Tensor(b_, traced(b_, [&] { return b_.full(ir::Type(shape), v); }));
}

Tensor Tracer::iota(llvm::ArrayRef<int64_t> shape, int64_t dim) {
  return Tensor(b_, traced(b_, [&] { return b_.iota(shape, dim); }));
}

ir::Program Tracer::take() { return std::move(*p_); }

} // namespace tessel::frontend
