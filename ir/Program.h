//===- ir/Program.h - Typed SSA programs and modules --------------------------===//
//
// A Program is a straight-line SSA function: named, typed inputs; a list of ops, each
// defining one or more typed results; and a list of outputs. Values are referred to
// by ValueId, an index into Program::values. Text form (ir/Printer.h):
//
//   program @step(%T: f64[4,4,4,4]) {
//     %0 = abs %T : f64[4,4,4,4]
//     %m = reduce_max %0 {axes = [0, 1, 2, 3]} : f64[]
//     %U, %s, %Vt = svd %Ma {eps = 1e-12} : f64[16,16], f64[16], f64[16,16]
//     return %lnz, %Tn
//   }
//
// A module is a program with functions: Program::functions holds the functions its
// ops may `call` or `scan` over (ops.def), callees before their callers, and the
// program itself is the module's entry. A function may call only the functions before
// it (the entry: any of them), so a module has no recursion by construction. A plain
// program is a module of one function. Text form: the functions, then the entry
// marked `entry` (docs/ir-text.md).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/Attribute.h"
#include "ir/Diagnostics.h"
#include "ir/OpTable.h"
#include "ir/Type.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

namespace tessel::ir {

using ValueId = uint32_t;
inline constexpr ValueId kNoValue = ~ValueId(0);

/// Facts about one SSA value.
struct ValueInfo {
  Type type;
  /// Name without '%'. Empty or all-digits = anonymous (printed as %N, numbered in
  /// order of definition). Non-anonymous names are unique within a program.
  std::string name;
  int32_t def = -1;        ///< index of the defining op in Program::ops, -1 for an input
  uint32_t resultIndex = 0; ///< which result of the defining op
};

/// One op: kind, operands, attributes, typed results, optional location.
struct Op {
  OpKind kind;
  llvm::SmallVector<ValueId, 4> operands;
  llvm::SmallVector<ValueId, 1> results;
  AttrList attrs;
  /// Free-form location printed as `loc("...")` (e.g. "trg step 16->16: svd Ma"). It
  /// carries no meaning for any pass.
  std::string loc;
  /// A recomputation (rematerialisation) of a forward op, made by a checkpoint policy
  /// (passes/Checkpoint.h); printed as the keyword `remat` after the result types, and
  /// `"remat": true` in JSON. CSE never merges a remat op with one that is not (JAX's
  /// `prevent_cse`), and rewrites that replace an op keep the flag (ir::Builder::setOrigin).
  bool remat = false;
  /// Where the op was parsed from (not printed); unknown for built ops.
  SourcePos pos;

  // Moves do not throw (as Type's), so a vector of ops grows by moving them.
  Op() = default;
  Op(const Op &) = default;
  Op(Op &&) noexcept = default;
  Op &operator=(const Op &) = default;
  Op &operator=(Op &&) noexcept = default;
};

/// The signature of a gradient program (what passes::grad made): its outputs are
/// [primal outputs..., one gradient per `wrt` input], and with explicit cotangents (VJP)
/// its last `cotangents` inputs are the cotangents of the primal outputs, in order.
/// Printed after the inputs as `grad(primal_outputs = 1, wrt = [%beta])` (and
/// `, cotangents = N` when N > 0); JSON "grad": {"primal_outputs", "wrt", "cotangents"}.
/// The verifier checks it against the inputs and outputs.
struct GradSignature {
  size_t primalOutputs = 0;
  /// Input index of each gradient's wrt input; gradient i is output primalOutputs + i.
  std::vector<size_t> wrt;
  size_t cotangents = 0;
  bool operator==(const GradSignature &) const = default;
};

/// A typed SSA program. Invariant after verify(): every operand is an input or the
/// result of an earlier op; result types match the op's shape rule.
class Program {
public:
  // Moves do not throw (as Op's), so a module's vector of functions grows by moving.
  Program() = default;
  Program(const Program &) = default;
  Program(Program &&) noexcept = default;
  Program &operator=(const Program &) = default;
  Program &operator=(Program &&) noexcept = default;

  std::string name = "main";
  std::vector<ValueInfo> values;
  std::vector<ValueId> inputs;
  std::vector<Op> ops;
  std::vector<ValueId> outputs;
  /// Set on gradient programs (passes::grad); passes that keep inputs and outputs keep it.
  std::optional<GradSignature> gradSignature;
  /// The other functions of the module whose entry this program is, callees before their
  /// callers (function i may call functions 0..i-1; the entry any). Empty for a plain
  /// program; a function of a module has none of its own (the verifier checks both).
  std::vector<Program> functions;

  /// Function `name` among the first `visible` functions (all by default); null if none.
  const Program *function(llvm::StringRef name, size_t visible = ~size_t(0)) const;
  /// Index of function `name` in `functions`, or -1.
  int functionIndex(llvm::StringRef name) const;
  /// True when this program is a module of more than one function.
  bool isModule() const { return !functions.empty(); }

  /// Adds a named input (name must be non-empty and unique). Returns its value.
  ValueId addInput(const std::string &name, const Type &type);
  /// Appends an op whose result types are already known (no inference).
  /// Returns the result values. Prefer ir::Builder, which infers types.
  llvm::SmallVector<ValueId, 1> appendOp(OpKind kind, llvm::ArrayRef<ValueId> operands,
                                         AttrList attrs, llvm::ArrayRef<Type> resultTypes,
                                         std::string loc = {}, bool remat = false);
  /// Marks `v` as an output.
  void addOutput(ValueId v) { outputs.push_back(v); }

  const Type &type(ValueId v) const { return values[v].type; }
  const ValueInfo &value(ValueId v) const { return values[v]; }
  /// Gives `v` a name (uniquified with a numeric suffix if taken). Returns the name.
  std::string setName(ValueId v, const std::string &name);
  /// Finds a value by name (inputs and named results); kNoValue if none.
  ValueId lookup(llvm::StringRef name) const;
  /// Index of the input named `name`, or -1.
  int inputIndex(llvm::StringRef name) const;
  /// Index of input value `v`, or -1 if `v` is not an input.
  int inputIndex(ValueId v) const;
  /// Display name of an output (its value's name, or "out<i>" if anonymous).
  std::string outputName(size_t i) const;

  /// Recomputes ValueInfo::def / resultIndex from ops (call after reordering ops).
  void recomputeDefs();
  /// Number of ops.
  size_t size() const { return ops.size(); }

private:
  /// Name -> value cache for lookup(). Values appended since the last look-up are
  /// indexed lazily; a hit whose name changed triggers a full rebuild. Renaming an
  /// existing value should go through setName().
  mutable llvm::StringMap<ValueId> nameIndex_;
  mutable size_t indexed_ = 0;
  void indexFrom(size_t first) const;
};

/// True when `name` is empty or all digits (printed as a number).
bool isAnonymousName(llvm::StringRef name);

/// The functions an op may call: those of its module before the function it is in (for
/// the entry, all of them). What the shape rules of `call` and `scan` look callees up in.
using Callees = llvm::ArrayRef<Program>;

/// Finds function `name` in `callees`; null if none.
const Program *findCallee(Callees callees, llvm::StringRef name);

/// A function's signature as diagnostics print it: `@f(%x: f64[2], %b: f64[]) -> (f64[2])`.
std::string signatureString(const Program &f);

} // namespace tessel::ir
