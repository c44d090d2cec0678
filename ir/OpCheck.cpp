//===- ir/OpCheck.cpp - The rules every op must satisfy -------------------------===//
//
// The table-driven rules (counts, attribute names, kinds and presence) are here; the
// rules particular to one op are its entry in ir/ShapeRules.cpp, run from here once
// the attributes are known to be well formed.
//
//===----------------------------------------------------------------------===//
#include "ir/OpCheck.h"

#include <cmath>

#include "ir/Printer.h"
#include "ir/ShapeRules.h"
#include "ir/TextUtil.h"

namespace tessel::ir {

namespace {

using Part = OpProblem::Part;

std::string quoted(llvm::StringRef s) { return "'" + text::clipForMessage(s) + "'"; }

/// "1 operand", "2 operands".
std::string counted(size_t n, const char *noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

/// What a value of `kind` must be, in messages.
const char *kindWord(AttrKind kind) {
  switch (kind) {
  case AttrKind::I64: return "an i64 (integer)";
  case AttrKind::F64: return "an f64 (finite number)";
  case AttrKind::Str: return "a string";
  case AttrKind::I64s: return "an i64 list like [0, 1]";
  case AttrKind::Tensor: return "a tensor";
  }
  return "?";
}

/// An attribute value in the words the text reader uses for the literal it read.
std::string describeValue(const Attr &a) {
  switch (a.kind()) {
  case AttrKind::I64: return "the integer " + std::to_string(a.getI64());
  case AttrKind::F64: return "the float " + text::formatFloatAttr(a.getF64());
  case AttrKind::Str: return "a string";
  case AttrKind::I64s: return "a list";
  case AttrKind::Tensor: return "a dense tensor";
  }
  return "?";
}

} // namespace

//===--- Stages 1 to 3: the op table ----------------------------------------===//

std::optional<std::string> resultCountProblem(OpKind kind, size_t n) {
  const OpInfo &info = opInfo(kind);
  if (info.numResults < 0)
    return n > 0 ? std::nullopt
                 : std::optional<std::string>(quoted(info.name) + " defines at least one result");
  if (n == static_cast<size_t>(info.numResults)) return std::nullopt;
  return quoted(info.name) + " defines " + counted(static_cast<size_t>(info.numResults), "result") +
         ", but " + std::to_string(n) + (n == 1 ? " value is" : " values are") + " named";
}

std::optional<std::string> operandCountProblem(OpKind kind, size_t n) {
  const OpInfo &info = opInfo(kind);
  if (info.numOperands == -1 && n == 0)
    return quoted(info.name) + " takes at least one operand, got none";
  if (info.numOperands >= 0 && n != static_cast<size_t>(info.numOperands))
    return quoted(info.name) + " takes " +
           counted(static_cast<size_t>(info.numOperands), "operand") + ", got " +
           std::to_string(n);
  return std::nullopt;
}

bool checkAttrs(OpKind kind, const AttrList &attrs, OpProblemSink report) {
  const std::vector<NamedAttr> &list = attrs.list();
  bool ok = true;
  auto problem = [&](Part part, size_t index, std::string message) {
    report(OpProblem{part, index, std::move(message)});
    ok = false;
  };
  for (size_t i = 0; i < list.size(); ++i) {
    const NamedAttr &a = list[i];
    const AttrSpec *spec = findAttrSpec(kind, a.name);
    if (!spec)
      problem(Part::AttrName, i, unknownAttrMessage(kind, a.name));
    else if (attrs.find(a.name) != &a.value)
      problem(Part::AttrName, i, "duplicate attribute " + quoted(a.name));
    else if (a.value.kind() != spec->kind)
      problem(Part::AttrValue, i, attrKindMessage(kind, *spec, describeValue(a.value)));
    else if (spec->kind == AttrKind::F64 && !std::isfinite(a.value.getF64()))
      problem(Part::AttrValue, i,
              describeAttr(kind, a.name) + " must be finite, got " +
                  text::formatDouble(a.value.getF64()) +
                  " (nan and inf are allowed only inside dense<...> constants)");
  }
  for (const AttrSpec &s : opInfo(kind).attrs)
    if (!s.defaultValue && !attrs.has(s.name))
      problem(Part::Attrs, 0,
              "op " + quoted(opName(kind)) + " is missing required attribute " + quoted(s.name) +
                  " (" + attrKindName(s.kind) + ")");
  return ok;
}

const AttrSpec *findAttrSpec(OpKind kind, llvm::StringRef name) {
  for (const AttrSpec &s : opInfo(kind).attrs)
    if (s.name == name) return &s;
  return nullptr;
}

std::string unknownAttrMessage(OpKind kind, llvm::StringRef name) {
  std::string known;
  for (const AttrSpec &s : opInfo(kind).attrs) known += (known.empty() ? "" : ", ") + s.name;
  return "unknown attribute " + quoted(name) + " for op " + quoted(opName(kind)) + " (" +
         (known.empty() ? "it takes no attributes" : "known: " + known) + ")";
}

std::string attrKindMessage(OpKind kind, const AttrSpec &spec, const std::string &got) {
  return describeAttr(kind, spec.name) + " must be " + kindWord(spec.kind) + ", got " + got;
}

std::string describeAttr(OpKind kind, llvm::StringRef name) {
  return "attribute " + quoted(name) + " of " + quoted(opName(kind));
}

//===--- The whole op -------------------------------------------------------===//

std::optional<std::vector<Type>> checkOpAndInferTypes(OpKind kind,
                                                      llvm::ArrayRef<Type> operandTypes,
                                                      const AttrList &attrs,
                                                      OpProblemSink report,
                                                      Callees callees) {
  if (auto msg = operandCountProblem(kind, operandTypes.size())) {
    report(OpProblem{Part::Operands, 0, *msg});
    return std::nullopt;
  }
  if (!checkAttrs(kind, attrs, report)) return std::nullopt;
  // The shape rules read the canonical form (defaults filled in): copy only when needed.
  std::optional<AttrList> canon;
  if (!isCanonicalAttrs(kind, attrs)) {
    canon = attrs;
    canonicalizeAttrs(kind, *canon);
  }
  try {
    return inferResultTypes(kind, operandTypes, canon ? *canon : attrs, callees);
  } catch (const Error &e) {
    report(OpProblem{Part::Op, 0, e.what()});
    return std::nullopt;
  }
}

void checkOp(const Program &p, const Op &op, OpProblemSink report, Callees callees) {
  checkOp(p, op, report, [&](size_t i) { return valueRef(p, op.results[i]); }, callees);
}

void checkOp(const Program &p, const Op &op, OpProblemSink report, ResultNamer resultName,
             Callees callees) {
  if (auto msg = resultCountProblem(op.kind, op.results.size())) {
    report(OpProblem{Part::Results, 0, *msg});
    return;
  }
  llvm::SmallVector<Type, 4> operandTypes;
  for (ValueId v : op.operands) operandTypes.push_back(p.type(v));
  std::optional<std::vector<Type>> inferred =
      checkOpAndInferTypes(op.kind, operandTypes, op.attrs, report, callees);
  if (!inferred) return;
  auto name = [&] { return quoted(opName(op.kind)); }; // only for a message
  if (inferred->size() != op.results.size()) {
    report(OpProblem{Part::Op, 0,
                     name() + ": the shape rule gives " + std::to_string(inferred->size()) +
                         " results, " + std::to_string(op.results.size()) + " are declared"});
    return;
  }
  for (size_t i = 0; i < op.results.size(); ++i) {
    const Type &declared = p.type(op.results[i]);
    if (declared != (*inferred)[i])
      report(OpProblem{Part::ResultType, i,
                       name() + ": result " + resultName(i) + " is declared as " +
                           text::formatType(declared) + ", but the op's shape rule gives " +
                           text::formatType((*inferred)[i])});
  }
}

} // namespace tessel::ir
