//===- ir/Type.h - dtype + static shape, and host tensors --------------------===//
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace tessel::ir {

/// Element type. Only f64 today; c128 is reserved for complex tensor networks.
enum class DType : uint8_t { F64 };

/// Largest supported rank.
inline constexpr int kMaxRank = 8;

using Shape = llvm::SmallVector<int64_t, 4>;

/// A tensor type: dtype and a static shape of rank 0..8, every extent >= 0.
/// Printed as `f64[16,16,16,16]`; scalars as `f64[]`.
struct Type {
  DType dtype = DType::F64;
  Shape shape;

  Type() = default;
  // Moves do not throw (a SmallVector's move allocates nothing), so that vectors of
  // types, values and ops move their elements when they grow instead of copying them.
  Type(const Type &) = default;
  Type(Type &&) noexcept = default;
  Type &operator=(const Type &) = default;
  Type &operator=(Type &&) noexcept = default;
  explicit Type(llvm::ArrayRef<int64_t> s, DType d = DType::F64)
      : dtype(d), shape(s.begin(), s.end()) {}
  /// Type({2, 3}) is f64[2,3]; Type({}) is the scalar type f64[].
  explicit Type(std::initializer_list<int64_t> s) : shape(s.begin(), s.end()) {}

  int rank() const { return static_cast<int>(shape.size()); }
  /// Number of elements (1 for a scalar).
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  /// Size in bytes of one tensor of this type.
  int64_t bytes() const { return numel() * 8; }
  std::string str() const;
  bool operator==(const Type &o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const Type &o) const { return !(*this == o); }
};

/// Formats a shape as `[a,b,c]`.
std::string shapeStr(llvm::ArrayRef<int64_t> shape);

/// A dense host tensor in row-major order. Used for constants, program inputs and
/// outputs, and .npy files. data.size() == type.numel().
struct Tensor {
  Type type;
  std::vector<double> data;

  Tensor() = default;
  Tensor(Type t, std::vector<double> d) : type(std::move(t)), data(std::move(d)) {}
  // noexcept moves (llvm::SmallVector's are not declared so): std::vector<Tensor> then
  // moves its tensors when it grows instead of copying their data.
  Tensor(const Tensor &) = default;
  Tensor(Tensor &&) noexcept = default;
  Tensor &operator=(const Tensor &) = default;
  Tensor &operator=(Tensor &&) noexcept = default;
  static Tensor scalar(double v) { return Tensor(Type({}), {v}); }
  static Tensor zeros(const Type &t) {
    return Tensor(t, std::vector<double>(static_cast<size_t>(t.numel()), 0.0));
  }
};
static_assert(std::is_nothrow_move_constructible_v<Tensor>);

} // namespace tessel::ir
