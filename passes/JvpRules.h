//===- passes/JvpRules.h - The JVP-rule table (internal to the jvp transform) ===//
//
// One forward-mode rule per op kind, in ops.def order, with the VJP table's structure
// (passes/VjpRules.h): a rule receives the op (already emitted, operands and results
// in the new program) and the tangent of each operand, emits ordinary ops through
// ir::Builder, and returns one tangent per result (kNoValue = zero). Which operands a
// tangent flows through is the VJP table's column (vjp::isDifferentiableOperand), so
// the two modes agree on what is an AD barrier. Rules only use ops of the table, so a
// JVP can be differentiated again (forward-over-reverse and reverse-over-forward).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "ir/Builder.h"
#include "ir/Program.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

namespace tessel::passes::jvprules {

/// What the rules of call and scan need from the transform of a module
/// (passes/Jvp.cpp): the JVP function of a callee, made once per callee, set of
/// inputs with tangents and layout.
class ModuleJvp {
public:
  virtual ~ModuleJvp() = default;
  /// The JVP function of `callee` for the inputs `marked` holds (one flag per input;
  /// for a scan widened to the carries the body makes active from them):
  /// for a call (carries = -1), inputs [the callee's..., tangents of the marked ones]
  /// and outputs [the callee's..., tangents of `tangentOutputs`]; for a scan body
  /// (carries = k >= 0), inputs [c..., tangents of marked c, xs..., tangents of marked
  /// xs] and outputs [c'..., tangents of the marked carries, ys..., tangents of the
  /// ys `tangentOutputs` marks]. `tangentOutputs` (one flag per output) is set to the
  /// outputs that get a tangent. Returns the function's name.
  virtual std::string jvpFunction(const std::string &callee, std::vector<bool> &marked, int carries,
                                  std::vector<bool> &tangentOutputs) = 0;
};

/// Arguments of one rule invocation.
struct JvpCall {
  ir::Builder &b;
  /// The op as emitted in the new program (a copy: the op vector grows while rules run).
  const ir::Op &op;
  /// Tangent of each operand, of the operand's type; kNoValue = zero.
  llvm::ArrayRef<ir::ValueId> tangents;
  /// The module (the rules of call and scan).
  ModuleJvp *module = nullptr;
  /// Set by the rules of call and scan, which replace the op by a call of the callee's
  /// JVP function: the new op's primal results, one per result of `op`.
  llvm::SmallVector<ir::ValueId, 4> *primalResults = nullptr;
};

/// Tangent per result, of the result's type; kNoValue = zero.
using ResultTangents = llvm::SmallVector<ir::ValueId, 3>;
using JvpRule = ResultTangents (*)(const JvpCall &);

/// The rule for `kind`, or nullptr if the table has none.
JvpRule findJvpRule(ir::OpKind kind);
/// The rule for `kind`; throws tessel::Error "jvp: no JVP rule for op '<name>'".
JvpRule jvpRuleOrThrow(ir::OpKind kind);
/// The JVP rule of `kind` in words (`tessel ops`, docs/ops.md).
const char *jvpRuleDoc(ir::OpKind kind);

/// The rules of the factorizations (JvpLinalg.cpp): svd and svd_topk, svd_topk_complement,
/// eigh, qr, triangular_solve.
ResultTangents jvpSvd(const JvpCall &c);
ResultTangents jvpSvdTopkComplement(const JvpCall &c);
ResultTangents jvpEigh(const JvpCall &c);
ResultTangents jvpQr(const JvpCall &c);
ResultTangents jvpTriangularSolve(const JvpCall &c);
ResultTangents jvpSylvesterSolve(const JvpCall &c);

} // namespace tessel::passes::jvprules
