//===- ir/ShapeRules.h - Per-op shape inference -------------------------------===//
#pragma once

#include <vector>

#include "ir/Attribute.h"
#include "ir/OpTable.h"
#include "ir/Program.h"
#include "ir/Type.h"

namespace tessel::ir {

/// Infers the result types of an op of `kind` from its operand types and its
/// canonicalized attributes, per the op's rule (one rule per op, table keyed by kind,
/// in ops.def order), which also checks the attribute values against the operands.
/// The operand count and the attribute kinds must already be checked: call it through
/// ir::checkOp or ir::checkOpAndInferTypes (ir/OpCheck.h). Throws tessel::ShapeError
/// whose message names the op and the offending shapes, e.g.
/// "add: operand shapes differ: f64[2,2] vs f64[4]".
/// `callees`: the functions a call or scan may name (ir::Callees).
std::vector<Type> inferResultTypes(OpKind kind, llvm::ArrayRef<Type> operandTypes,
                                   const AttrList &attrs, Callees callees = {});

/// Why `name` cannot be called from a function that sees `callees` (no such function
/// above it), listing those it could call; the words of the call and scan rules.
std::string calleeProblem(llvm::StringRef name, Callees callees);

/// The largest `length` of a scan.
inline constexpr int64_t kMaxScanLength = int64_t(1) << 30;

/// The shape rule of `kind` in words: the result types and what is checked.
const char *shapeRuleDoc(OpKind kind);

/// True if the shape-rule table has an entry for `kind` (used by the coverage test).
bool hasShapeRule(OpKind kind);

/// The guards of svd_topk_complement for k kept triplets of an m×n matrix, K = min(m, n):
/// min(K − k, max(4, k/2)), the discarded triplets nearest the cut that it couples
/// explicitly (computed by its kernel, or by the forward's svd_topk after the
/// svd-topk-guards pass).
int64_t svdTopkComplementGuards(int64_t m, int64_t n, int64_t k);

/// Parsed einsum subscripts, e.g. "wak,abu->wkbu". Each operand's labels are chars.
struct EinsumSpec {
  std::vector<std::string> inputs;
  std::string output;
};
/// Parses and checks an einsum subscript string (explicit "->" required; letters only;
/// output labels unique and present in some input). Throws tessel::ShapeError.
EinsumSpec parseEinsumSpec(llvm::StringRef spec);

} // namespace tessel::ir
