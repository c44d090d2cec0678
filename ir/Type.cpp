//===- ir/Type.cpp ----------------------------------------------------------------===//
#include "ir/Type.h"

namespace tessel::ir {

std::string shapeStr(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string Type::str() const { return "f64" + shapeStr(shape); }

} // namespace tessel::ir
