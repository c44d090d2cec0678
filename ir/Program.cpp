//===- ir/Program.cpp ---------------------------------------------------------------===//
#include "ir/Program.h"

#include <type_traits>
#include <algorithm>
#include <cctype>

#include "ir/TextUtil.h"

namespace tessel::ir {

const Program *findCallee(Callees callees, llvm::StringRef name) {
  for (const Program &f : callees)
    if (f.name == name) return &f;
  return nullptr;
}

const Program *Program::function(llvm::StringRef n, size_t visible) const {
  return findCallee(Callees(functions).take_front(std::min(visible, functions.size())), n);
}

int Program::functionIndex(llvm::StringRef n) const {
  for (size_t i = 0; i < functions.size(); ++i)
    if (functions[i].name == n) return static_cast<int>(i);
  return -1;
}

std::string signatureString(const Program &f) {
  std::string s = text::atName(f.name) + "(";
  for (size_t i = 0; i < f.inputs.size(); ++i)
    s += (i ? ", " : "") + text::percentName(f.values[f.inputs[i]].name) + ": " +
         f.type(f.inputs[i]).str();
  s += ") -> (";
  for (size_t i = 0; i < f.outputs.size(); ++i)
    s += (i ? ", " : "") + (f.outputs[i] < f.values.size() ? f.type(f.outputs[i]).str() : "?");
  return s + ")";
}

bool isAnonymousName(llvm::StringRef name) {
  for (char c : name)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

ValueId Program::addInput(const std::string &n, const Type &t) {
  if (isAnonymousName(n))
    throw Error("program input needs a name that is not a number, got '" + n + "'");
  if (lookup(n) != kNoValue) throw Error("duplicate value name '%" + n + "'");
  ValueId v = static_cast<ValueId>(values.size());
  values.push_back(ValueInfo{t, n, -1, 0});
  inputs.push_back(v);
  return v;
}

llvm::SmallVector<ValueId, 1> Program::appendOp(OpKind kind, llvm::ArrayRef<ValueId> operands,
                                                AttrList attrs,
                                                llvm::ArrayRef<Type> resultTypes,
                                                std::string loc, bool remat) {
  Op op;
  op.kind = kind;
  op.operands.assign(operands.begin(), operands.end());
  op.attrs = std::move(attrs);
  op.loc = std::move(loc);
  op.remat = remat;
  int32_t idx = static_cast<int32_t>(ops.size());
  for (size_t i = 0; i < resultTypes.size(); ++i) {
    ValueId v = static_cast<ValueId>(values.size());
    values.push_back(ValueInfo{resultTypes[i], "", idx, static_cast<uint32_t>(i)});
    op.results.push_back(v);
  }
  ops.push_back(std::move(op));
  return ops.back().results;
}

std::string Program::setName(ValueId v, const std::string &n) {
  if (isAnonymousName(n)) {
    values[v].name.clear();
    return "";
  }
  if (values[v].name == n) return n;
  std::string cand = n;
  for (int i = 1; lookup(cand) != kNoValue; ++i) cand = n + "_" + std::to_string(i);
  values[v].name = cand;
  nameIndex_[cand] = v;
  return cand;
}

void Program::indexFrom(size_t first) const {
  if (first == 0) nameIndex_.clear();
  for (size_t i = first; i < values.size(); ++i)
    if (!isAnonymousName(values[i].name))
      nameIndex_.try_emplace(values[i].name, static_cast<ValueId>(i));
  indexed_ = values.size();
}

ValueId Program::lookup(llvm::StringRef n) const {
  if (isAnonymousName(n)) return kNoValue;
  if (indexed_ > values.size()) indexFrom(0);
  auto it = nameIndex_.find(n);
  if (it != nameIndex_.end()) {
    if (it->second < values.size() && values[it->second].name == n) return it->second;
    indexFrom(0); // stale: a value was renamed or removed directly
  } else if (indexed_ < values.size()) {
    indexFrom(indexed_);
  } else {
    return kNoValue;
  }
  it = nameIndex_.find(n);
  return it == nameIndex_.end() ? kNoValue : it->second;
}

int Program::inputIndex(llvm::StringRef n) const {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (values[inputs[i]].name == n) return static_cast<int>(i);
  return -1;
}

int Program::inputIndex(ValueId v) const {
  auto it = std::find(inputs.begin(), inputs.end(), v);
  return it == inputs.end() ? -1 : static_cast<int>(it - inputs.begin());
}

std::string Program::outputName(size_t i) const {
  const std::string &n = values[outputs[i]].name;
  return isAnonymousName(n) ? "out" + std::to_string(i) : n;
}

void Program::recomputeDefs() {
  for (ValueId in : inputs) {
    values[in].def = -1;
    values[in].resultIndex = 0;
  }
  for (size_t i = 0; i < ops.size(); ++i)
    for (size_t r = 0; r < ops[i].results.size(); ++r) {
      values[ops[i].results[r]].def = static_cast<int32_t>(i);
      values[ops[i].results[r]].resultIndex = static_cast<uint32_t>(r);
    }
}

} // namespace tessel::ir
// A vector grows by moving its elements only if their moves cannot throw; otherwise it
// copies them (every op of every function, each time a module's vectors grow).
static_assert(std::is_nothrow_move_constructible_v<tessel::ir::Op>);
static_assert(std::is_nothrow_move_constructible_v<tessel::ir::ValueInfo>);
static_assert(std::is_nothrow_move_constructible_v<tessel::ir::Tensor>);
static_assert(std::is_nothrow_move_constructible_v<tessel::ir::Program>);
