//===- ir/Attribute.h - Op attributes ----------------------------------------===//
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ir/Type.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace tessel::ir {

enum class AttrKind : uint8_t { I64, F64, Str, I64s, Tensor };

/// Name of an attribute kind as written in ops.def: "i64", "f64", "str", "i64s", "tensor".
const char *attrKindName(AttrKind k);

using I64List = llvm::SmallVector<int64_t, 4>;

/// One attribute value. Tensor values are shared (constants can be large).
class Attr {
public:
  Attr() : v_(int64_t(0)) {}
  static Attr i64(int64_t x) { return Attr(Storage(x)); }
  static Attr f64(double x) { return Attr(Storage(x)); }
  static Attr str(std::string x) { return Attr(Storage(std::move(x))); }
  static Attr i64s(llvm::ArrayRef<int64_t> x) { return Attr(Storage(I64List(x.begin(), x.end()))); }
  static Attr tensor(Tensor t) {
    return Attr(Storage(std::make_shared<const Tensor>(std::move(t))));
  }

  AttrKind kind() const { return static_cast<AttrKind>(v_.index()); }
  int64_t getI64() const { return std::get<int64_t>(v_); }
  double getF64() const { return std::get<double>(v_); }
  const std::string &getStr() const { return std::get<std::string>(v_); }
  const I64List &getI64s() const { return std::get<I64List>(v_); }
  const Tensor &getTensor() const { return *std::get<std::shared_ptr<const Tensor>>(v_); }

  /// Structural equality (tensor attributes compare by value, bitwise).
  bool operator==(const Attr &o) const;
  bool operator!=(const Attr &o) const { return !(*this == o); }

private:
  using Storage =
      std::variant<int64_t, double, std::string, I64List, std::shared_ptr<const Tensor>>;
  explicit Attr(Storage s) : v_(std::move(s)) {}
  Storage v_;
};

struct NamedAttr {
  std::string name;
  Attr value;
  bool operator==(const NamedAttr &o) const { return name == o.name && value == o.value; }
};

/// Attributes of one op, kept in the canonical order of the op table.
class AttrList {
public:
  AttrList() = default;
  AttrList(std::initializer_list<NamedAttr> l) : list_(l) {}

  const Attr *find(llvm::StringRef name) const;
  bool has(llvm::StringRef name) const { return find(name) != nullptr; }
  /// Sets (or replaces) an attribute. Order is fixed by canonicalize().
  void set(llvm::StringRef name, Attr value);
  /// Typed getters; throw tessel::Error naming the attribute when missing or mistyped.
  int64_t getI64(llvm::StringRef name) const;
  double getF64(llvm::StringRef name) const;
  const std::string &getStr(llvm::StringRef name) const;
  const I64List &getI64s(llvm::StringRef name) const;
  const Tensor &getTensor(llvm::StringRef name) const;

  const std::vector<NamedAttr> &list() const { return list_; }
  std::vector<NamedAttr> &list() { return list_; }
  bool operator==(const AttrList &o) const { return list_ == o.list_; }

private:
  const Attr &get(llvm::StringRef name, AttrKind kind) const;
  std::vector<NamedAttr> list_;
};

} // namespace tessel::ir
