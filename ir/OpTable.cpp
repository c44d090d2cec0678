//===- ir/OpTable.cpp - The op table, built from ops.def ------------------------===//
#include "ir/OpTable.h"

#include <cstdlib>
#include <stdexcept>

#include "ir/OpAttrs.h"
#include "llvm/ADT/StringMap.h"

namespace tessel::ir {

namespace {

AttrKind parseKind(llvm::StringRef k) {
  if (k == "i64") return AttrKind::I64;
  if (k == "f64") return AttrKind::F64;
  if (k == "str") return AttrKind::Str;
  if (k == "i64s") return AttrKind::I64s;
  if (k == "tensor") return AttrKind::Tensor;
  std::abort(); // ops.def is malformed; caught by the op-table test
}

// Parses "name:kind[=default],..." from ops.def.
std::vector<AttrSpec> parseSpec(llvm::StringRef spec) {
  std::vector<AttrSpec> out;
  llvm::SmallVector<llvm::StringRef, 4> parts;
  spec.split(parts, ',', -1, false);
  for (llvm::StringRef p : parts) {
    auto [nameKind, def] = p.trim().split('=');
    auto [name, kind] = nameKind.split(':');
    AttrSpec s{name.str(), parseKind(kind), std::nullopt};
    if (!def.empty()) {
      switch (s.kind) {
      case AttrKind::I64: s.defaultValue = Attr::i64(std::strtoll(def.str().c_str(), nullptr, 10)); break;
      case AttrKind::F64: s.defaultValue = Attr::f64(std::strtod(def.str().c_str(), nullptr)); break;
      case AttrKind::Str: s.defaultValue = Attr::str(def.str()); break;
      default: std::abort();
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

// Parses the traits column of ops.def ("elementwise,cheap").
void parseTraits(OpInfo &info, llvm::StringRef traits) {
  llvm::SmallVector<llvm::StringRef, 4> parts;
  traits.split(parts, ',', -1, false);
  for (llvm::StringRef t : parts) {
    t = t.trim();
    if (t == "elementwise") info.elementwise = true;
    else if (t == "cheap") info.cheap = true;
    else if (t == "save-svd") info.savedBySaveSvd = true;
    else std::abort(); // ops.def is malformed; caught by the op-table test
  }
  if (info.cheap && !info.elementwise) std::abort(); // cheap is a kind of elementwise
}

struct Table {
  std::vector<OpInfo> infos;
  std::vector<OpKind> kinds;
  llvm::StringMap<OpKind> byName;
  Table() {
#define TESSEL_OP(Enum, name, operands, results, attrs, traits, summary)                            \
  infos.push_back(OpInfo{OpKind::Enum, name, operands, results, parseSpec(attrs), summary});         \
  parseTraits(infos.back(), traits);                                                                \
  kinds.push_back(OpKind::Enum);                                                                    \
  byName[name] = OpKind::Enum;
#include "ir/ops.def"
    for (OpInfo &info : infos)
      for (const AttrSpec &a : info.attrs) info.hasCallee |= a.name == "callee";
  }
};

const Table &table() {
  static const Table t;
  return t;
}

} // namespace

const OpInfo &opInfo(OpKind kind) { return table().infos[static_cast<size_t>(kind)]; }

std::optional<OpKind> opKindByName(llvm::StringRef name) {
  auto it = table().byName.find(name);
  if (it == table().byName.end()) return std::nullopt;
  return it->second;
}

const std::vector<OpKind> &allOpKinds() { return table().kinds; }

std::string closestOpName(llvm::StringRef name) {
  std::string best;
  unsigned bestDist = 3;
  for (OpKind k : allOpKinds()) {
    unsigned d = llvm::StringRef(opName(k)).edit_distance(name, true, bestDist);
    if (d < bestDist) {
      bestDist = d;
      best = opName(k);
    }
  }
  return best;
}

bool hasCallee(OpKind kind) { return opInfo(kind).hasCallee; }

bool isElementwise(OpKind k) { return opInfo(k).elementwise; }
bool isCheapElementwise(OpKind k) { return opInfo(k).cheap; }
bool isSavedBySaveSvd(OpKind k) { return opInfo(k).savedBySaveSvd; }

std::string opTraitsText(OpKind k) {
  const OpInfo &info = opInfo(k);
  std::string s;
  auto add = [&](bool on, const char *name) {
    if (on) s += (s.empty() ? "" : ", ") + std::string(name);
  };
  add(info.elementwise, "elementwise");
  add(info.cheap, "cheap");
  add(info.savedBySaveSvd, "save-svd");
  return s;
}

bool isCanonicalAttrs(OpKind kind, const AttrList &attrs) {
  const auto &specs = opInfo(kind).attrs;
  const std::vector<NamedAttr> &list = attrs.list();
  if (list.size() != specs.size()) return false;
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i].name != specs[i].name) return false;
  return true;
}

void canonicalizeAttrs(OpKind kind, AttrList &attrs) {
  std::vector<NamedAttr> out;
  for (const AttrSpec &s : opInfo(kind).attrs) {
    if (const Attr *a = attrs.find(s.name)) out.push_back({s.name, *a});
    else if (s.defaultValue) out.push_back({s.name, *s.defaultValue});
  }
  attrs.list() = std::move(out);
}

} // namespace tessel::ir

namespace tessel::ir::detail {

void throwWrongOpKind(const Op &op, OpKind expected, std::string_view attr) {
  // A bug, not the input's fault: an internal error (exit 2), not a tessel::Error.
  throw std::logic_error("attribute '" + std::string(attr) + "' of " + opName(expected) +
                         " read from a " + opName(op.kind) + " op");
}

} // namespace tessel::ir::detail
