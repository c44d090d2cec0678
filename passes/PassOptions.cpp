//===- passes/PassOptions.cpp - Text forms of the pass option kinds -------------===//
#include "passes/PassOptions.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace tessel::passes {

std::string PassOptionInfo::valueSyntax() const {
  switch (kind) {
  case Kind::Bool: return "true|false";
  case Kind::Int:
    return minInt == INT64_MIN ? "<integer>" : "<integer >= " + std::to_string(minInt) + ">";
  case Kind::Enum: return llvm::join(allowed, "|");
  case Kind::List: return "<name>[;<name>...]";
  case Kind::String: return allowed.empty() ? "<string>" : llvm::join(allowed, "|");
  }
  return "";
}

namespace detail {

bool parseFlag(const std::string &text) {
  if (text == "true") return true;
  if (text == "false") return false;
  throw std::invalid_argument("allowed: true, false");
}

std::string printFlag(bool value) { return value ? "true" : "false"; }

int64_t parseInteger(const std::string &text, int64_t minValue) {
  int64_t x = 0;
  llvm::StringRef s(text);
  if (s.empty() || s.getAsInteger(10, x)) throw std::invalid_argument("expected an integer");
  if (x < minValue)
    throw std::invalid_argument("expected an integer >= " + std::to_string(minValue));
  return x;
}

std::vector<std::string> parseList(const std::string &text) {
  std::vector<std::string> items;
  if (llvm::StringRef(text).trim(" \t\r\n").empty()) return items;
  llvm::SmallVector<llvm::StringRef, 4> parts;
  llvm::StringRef(text).split(parts, ';');
  for (llvm::StringRef part : parts) {
    items.push_back(part.trim(" \t\r\n").str());
    if (items.back().empty()) throw std::invalid_argument("empty item in ';'-separated list");
  }
  return items;
}

std::string printList(const std::vector<std::string> &items) { return llvm::join(items, ";"); }

int64_t parseCount(const std::string &text) {
  if (text == "auto") return 0;
  int64_t x = 0;
  if (llvm::StringRef(text).getAsInteger(10, x) || x < 1)
    throw std::invalid_argument("expected 'auto' or an integer >= 1");
  return x;
}

std::string printCount(int64_t value) { return value == 0 ? "auto" : std::to_string(value); }

} // namespace detail

} // namespace tessel::passes
