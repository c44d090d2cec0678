//===- ir/OpCheck.h - The rules every op must satisfy --------------------------===//
//
// One check of one op, shared by the text reader, the JSON reader, the verifier and
// the builder, so that the same bad op gets the same message wherever it is found.
// checkOp runs these stages in order and stops at the first stage with a problem:
//
//   1. results:    as many as the op table says              (resultCountProblem)
//   2. operands:   as many as the op table says; a variadic   (operandCountProblem)
//                  op takes at least one
//   3. attributes: each one known to the op and given once,   (checkAttrs)
//                  of the kind ops.def declares, f64 values
//                  finite; every attribute without a default
//                  present
//   4. the op's rule (ir/ShapeRules.h): its attribute values against its operands
//      (axes in range, perm a permutation, einsum subscripts, compare direction, svd
//      eps, ...) and the result types it gives;
//   5. declared result types equal to those.
//
// A reader meets an op piece by piece and reports the first problem in the order of
// its source, so it runs the early stages itself as soon as it has read what they
// need, and checkOp once the op is complete. The stages are the only place these
// rules are written.
//
// Each problem comes with the part of the op it concerns, so that a reader can point
// at it (file:line:col of the attribute, or a JSON pointer); the verifier prefixes the
// op's description (ir::describeOp).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/Program.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace tessel::ir {

/// One problem of one op.
struct OpProblem {
  /// The part of the op the problem is about.
  enum class Part {
    Op,         ///< the op as a whole (its rule rejects the operands or attributes)
    Results,    ///< the number of results
    Operands,   ///< the number of operands
    Attrs,      ///< the attributes as a whole (a required one is missing)
    AttrName,   ///< attribute `index` of the list as given: unknown or given twice
    AttrValue,  ///< attribute `index` of the list as given: wrong kind or not finite
    ResultType, ///< the declared type of result `index`
  };
  Part part = Part::Op;
  size_t index = 0;
  std::string message;
};

/// Receives the problems of an op in the order above. A reader that stops at the
/// first problem throws from it.
using OpProblemSink = llvm::function_ref<void(const OpProblem &)>;

/// Names result `i` of the op being checked, with its '%'.
using ResultNamer = llvm::function_ref<std::string(size_t i)>;

/// Checks op `op` of `p`, whose operands must be values of `p` (the verifier checks
/// that first). Attributes may be in any order and may leave out those with a default
/// (as a reader has them before canonicalizeAttrs). Results are named by `resultName`,
/// by default as the text form prints them (ir::valueRef); a reader names them as its
/// source does.
/// `callees`: the functions a call or scan may name (ir::Callees; for the entry of a
/// module, its functions).
void checkOp(const Program &p, const Op &op, OpProblemSink report, Callees callees = {});
void checkOp(const Program &p, const Op &op, OpProblemSink report, ResultNamer resultName,
             Callees callees = {});

/// Stages 2 to 4, for an op about to be built: returns the result types the op's rule
/// gives, or nullopt after reporting a problem.
std::optional<std::vector<Type>> checkOpAndInferTypes(OpKind kind,
                                                      llvm::ArrayRef<Type> operandTypes,
                                                      const AttrList &attrs,
                                                      OpProblemSink report,
                                                      Callees callees = {});

/// Stage 1: "'svd' defines 3 results, but 2 values are named", or nullopt when `n` is
/// right.
std::optional<std::string> resultCountProblem(OpKind kind, size_t n);
/// Stage 2: "'sub' takes 2 operands, got 3", or nullopt when `n` is right.
std::optional<std::string> operandCountProblem(OpKind kind, size_t n);
/// Stage 3, attributes as given (any order, defaults may be absent). Returns false when
/// it reported a problem.
bool checkAttrs(OpKind kind, const AttrList &attrs, OpProblemSink report);

/// A reader must know an attribute's kind to read its value, so it finds an unknown
/// name or a value of the wrong kind while reading. These words are stage 3's.
///
/// The spec of attribute `name` of `kind`, or null when the op has no such attribute.
const AttrSpec *findAttrSpec(OpKind kind, llvm::StringRef name);
/// "unknown attribute 'axis' for op 'reduce_sum' (known: axes)".
std::string unknownAttrMessage(OpKind kind, llvm::StringRef name);
/// "attribute 'perm' of 'transpose' must be an i64 list like [0, 1], got <got>", where
/// `got` describes the value in the reader's terms ("a string", "the float 0.5").
std::string attrKindMessage(OpKind kind, const AttrSpec &spec, const std::string &got);
/// "attribute 'perm' of 'transpose'": one attribute, as every message names it.
std::string describeAttr(OpKind kind, llvm::StringRef name);

} // namespace tessel::ir
