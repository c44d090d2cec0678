//===- ir/OpAttrs.h - Typed access to an op's attributes, checked against ops.def ---===//
//
//   const int64_t k = ir::attr<OpKind::SvdTopk, "k">(op);      // int64_t
//   const I64List &perm = ir::attr<OpKind::Transpose, "perm">(op);
//
// The attribute's name and kind come from the op's line in ir/ops.def at compile time:
// a name the op does not have is a compile error whose instantiation names the op kind
// and the attribute, and the result has the attribute's C++ type (i64 -> int64_t, f64
// -> double, str -> std::string, i64s -> I64List, tensor -> Tensor), so a
// string-keyed lookup cannot name a misspelt or renamed attribute, or read an i64 as a
// double, without the build saying so. At run time `op` must be of kind K (an internal
// error otherwise). op.attrs.getI64("k") and friends remain for code that handles
// attributes generically (the readers, printers and checks).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <string_view>

#include "ir/Diagnostics.h"
#include "ir/Program.h"

namespace tessel::ir {

namespace detail {

/// The attribute column of ops.def, per op kind in table order.
inline constexpr std::string_view kOpAttrSpecs[] = {
#define TESSEL_OP(Enum, name, operands, results, attrs, traits, summary) attrs,
#include "ir/ops.def"
};
static_assert(std::size(kOpAttrSpecs) == static_cast<size_t>(kNumOpKinds));

/// An attribute name as a template argument ("k", "perm").
template <size_t N> struct AttrName {
  char text[N];
  constexpr AttrName(const char (&s)[N]) {
    for (size_t i = 0; i < N; ++i) text[i] = s[i];
  }
  constexpr std::string_view view() const { return {text, N - 1}; }
};

/// The kind of attribute `name` in the spec "name:kind[=default],..." of ops.def, or -1.
constexpr int specKind(std::string_view spec, std::string_view name) {
  size_t at = 0;
  while (at < spec.size()) {
    size_t end = spec.find(',', at);
    if (end == std::string_view::npos) end = spec.size();
    const std::string_view item = spec.substr(at, end - at);
    const size_t colon = item.find(':');
    if (item.substr(0, colon) == name) {
      std::string_view kind = item.substr(colon + 1);
      kind = kind.substr(0, kind.find('='));
      if (kind == "i64") return static_cast<int>(AttrKind::I64);
      if (kind == "f64") return static_cast<int>(AttrKind::F64);
      if (kind == "str") return static_cast<int>(AttrKind::Str);
      if (kind == "i64s") return static_cast<int>(AttrKind::I64s);
      if (kind == "tensor") return static_cast<int>(AttrKind::Tensor);
      return -2;
    }
    at = end + 1;
  }
  return -1;
}

[[noreturn]] void throwWrongOpKind(const Op &op, OpKind expected, std::string_view attr);

} // namespace detail

/// The value of attribute `Name` of `op`, an op of kind K (see the top of this file).
template <OpKind K, detail::AttrName Name> decltype(auto) attr(const Op &op) {
  constexpr int kind = detail::specKind(detail::kOpAttrSpecs[static_cast<size_t>(K)], Name.view());
  static_assert(kind != -1, "ir::attr: ops.def gives this op kind no attribute of this name");
  static_assert(kind != -2, "ir::attr: ops.def spells this attribute's kind in a way attr does not know");
  if (op.kind != K) detail::throwWrongOpKind(op, K, Name.view());
  const llvm::StringRef name(Name.view().data(), Name.view().size());
  if constexpr (kind == static_cast<int>(AttrKind::I64)) return op.attrs.getI64(name);
  else if constexpr (kind == static_cast<int>(AttrKind::F64)) return op.attrs.getF64(name);
  else if constexpr (kind == static_cast<int>(AttrKind::Str)) return op.attrs.getStr(name);
  else if constexpr (kind == static_cast<int>(AttrKind::I64s)) return op.attrs.getI64s(name);
  else return op.attrs.getTensor(name);
}

/// The `callee` of a call or a scan op (the one attribute both have).
inline decltype(auto) calleeOf(const Op &op) {
  return op.kind == OpKind::Scan ? attr<OpKind::Scan, "callee">(op) : attr<OpKind::Call, "callee">(op);
}

} // namespace tessel::ir
