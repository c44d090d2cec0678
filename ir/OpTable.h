//===- ir/OpTable.h - Op kinds and their static description -------------------===//
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/Attribute.h"
#include "llvm/ADT/StringRef.h"

namespace tessel::ir {

enum class OpKind : uint8_t {
#define TESSEL_OP(Enum, name, operands, results, attrs, traits, summary) Enum,
#include "ir/ops.def"
};

inline constexpr int kNumOpKinds = 0
#define TESSEL_OP(Enum, name, operands, results, attrs, traits, summary) +1
#include "ir/ops.def"
    ;

/// One attribute of an op's spec.
struct AttrSpec {
  std::string name;
  AttrKind kind;
  std::optional<Attr> defaultValue; ///< absent = required
};

/// Static description of an op kind (from ops.def).
struct OpInfo {
  OpKind kind;
  const char *name;
  int numOperands; ///< -1 = variadic, at least one; -2 = any number, zero too
  int numResults;  ///< -1 = variadic, at least one
  std::vector<AttrSpec> attrs; ///< canonical order
  const char *summary;         ///< what the op computes (ops.def)
  /// The traits column of ops.def (its header says what each means).
  bool elementwise = false, cheap = false, savedBySaveSvd = false;
  bool hasCallee = false;      ///< a `callee` attribute (hasCallee), from `attrs`
};

/// The row of the op table for `kind`.
const OpInfo &opInfo(OpKind kind);
inline const char *opName(OpKind kind) { return opInfo(kind).name; }
/// Looks an op up by its printed name; nullopt if unknown.
std::optional<OpKind> opKindByName(llvm::StringRef name);
/// The op name closest to `name` (edit distance below 3), or "" if none is.
std::string closestOpName(llvm::StringRef name);
/// All op kinds in table order.
const std::vector<OpKind> &allOpKinds();

/// The traits of ops.def: unary, binary, compare and select (trait `elementwise`).
bool isElementwise(OpKind kind);
/// Trait `save-svd`: the save-svd remat policy keeps the op's results (svd, svd_topk,
/// call, scan: recomputing them would redo an SVD).
bool isSavedBySaveSvd(OpKind kind);
/// The traits of `kind` as ops.def spells them ("elementwise, cheap"; "" for none).
std::string opTraitsText(OpKind kind);
/// The op runs a function of its module, named by its `callee` attribute (call, scan):
/// the text form prints the callee as a symbol, `call @f(%x)`.
bool hasCallee(OpKind kind);
/// Trait `cheap`: an elementwise op of a few cycles per element (add, sub, mul, neg,
/// abs, sign, maximum, compare, select: no division, no square root, no transcendental),
/// cheaper to redo inside a reader's loop than to write and read back as a buffer.
bool isCheapElementwise(OpKind kind);

/// True if `table` has exactly one entry per op of ops.def, in its order. Per-op rule
/// tables (VJP, lowering, ...) are arrays of entries with a `kind` member, checked
/// with static_assert(coversEveryOpInOrder(kTable)) so that adding an op to ops.def
/// fails to compile until every table has its row.
template <typename Entry, size_t N> constexpr bool coversEveryOpInOrder(const Entry (&table)[N]) {
  if (N != static_cast<size_t>(kNumOpKinds)) return false;
  for (size_t i = 0; i < N; ++i)
    if (static_cast<size_t>(table[i].kind) != i) return false;
  return true;
}

/// Puts `attrs` in canonical order (the op table's) and fills in defaults. Attributes
/// the op does not have are dropped and a missing required one stays missing: check
/// the attributes first (ir::checkOp reports those).
void canonicalizeAttrs(OpKind kind, AttrList &attrs);
/// Whether `attrs` is exactly the op's attributes in the op table's order, defaults
/// included (no copy). For attributes that pass checkAttrs (no unknown, duplicate or
/// missing required ones) this is "canonicalizeAttrs would leave them as they are".
bool isCanonicalAttrs(OpKind kind, const AttrList &attrs);

} // namespace tessel::ir
