//===- ir/Attribute.cpp -----------------------------------------------------------===//
#include "ir/Attribute.h"

#include <cstring>

#include "ir/Diagnostics.h"

namespace tessel::ir {

const char *attrKindName(AttrKind k) {
  switch (k) {
  case AttrKind::I64: return "i64";
  case AttrKind::F64: return "f64";
  case AttrKind::Str: return "str";
  case AttrKind::I64s: return "i64s";
  case AttrKind::Tensor: return "tensor";
  }
  return "?";
}

bool Attr::operator==(const Attr &o) const {
  if (kind() != o.kind()) return false;
  switch (kind()) {
  case AttrKind::I64: return getI64() == o.getI64();
  case AttrKind::F64: {
    double a = getF64(), b = o.getF64();
    return std::memcmp(&a, &b, sizeof a) == 0;
  }
  case AttrKind::Str: return getStr() == o.getStr();
  case AttrKind::I64s: return getI64s() == o.getI64s();
  case AttrKind::Tensor: {
    const Tensor &a = getTensor(), &b = o.getTensor();
    return a.type == b.type && a.data.size() == b.data.size() &&
           (a.data.empty() ||
            std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(double)) == 0);
  }
  }
  return false;
}

const Attr *AttrList::find(llvm::StringRef name) const {
  for (const NamedAttr &a : list_)
    if (a.name == name) return &a.value;
  return nullptr;
}

void AttrList::set(llvm::StringRef name, Attr value) {
  for (NamedAttr &a : list_)
    if (a.name == name) {
      a.value = std::move(value);
      return;
    }
  list_.push_back({name.str(), std::move(value)});
}

const Attr &AttrList::get(llvm::StringRef name, AttrKind kind) const {
  const Attr *a = find(name);
  if (!a) throw Error("missing attribute '" + name.str() + "'");
  if (a->kind() != kind)
    throw Error("attribute '" + name.str() + "' must be " + attrKindName(kind) + ", got " +
                attrKindName(a->kind()));
  return *a;
}

int64_t AttrList::getI64(llvm::StringRef n) const { return get(n, AttrKind::I64).getI64(); }
double AttrList::getF64(llvm::StringRef n) const { return get(n, AttrKind::F64).getF64(); }
const std::string &AttrList::getStr(llvm::StringRef n) const {
  return get(n, AttrKind::Str).getStr();
}
const I64List &AttrList::getI64s(llvm::StringRef n) const {
  return get(n, AttrKind::I64s).getI64s();
}
const Tensor &AttrList::getTensor(llvm::StringRef n) const {
  return get(n, AttrKind::Tensor).getTensor();
}

} // namespace tessel::ir
