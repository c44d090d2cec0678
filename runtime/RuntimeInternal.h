//===- runtime/RuntimeInternal.h - Helpers shared inside runtime/ -------------===//
//
// Not a public header: used by the reference evaluator, prepare, the engine and the
// kernels. Everything here is small and data-independent.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "ir/Printer.h"
#include "ir/Program.h"

namespace tessel::rt {

/// Pins OpenBLAS to one thread (openblas_set_num_threads(1)) the first time it is
/// called in the process; cheap afterwards.
void ensureBlasSingleThreaded();

/// Checks input count, dtype and shapes against the program's inputs. Throws
/// tessel::Error naming the input, e.g.
/// "run: input %T (#0): expected f64[4,4,4,4], got f64[4,4]".
void validateInputs(const ir::Program &p, const std::vector<ir::Tensor> &inputs);

/// Row-major strides of a shape, in elements.
inline std::vector<int64_t> rowMajorStrides(llvm::ArrayRef<int64_t> shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * shape[d + 1];
  return st;
}

/// Comparison directions of `compare` (StableHLO ComparisonDirection).
enum class CompareDir : uint8_t { EQ, NE, LT, LE, GT, GE };
/// Parses "EQ".."GE" (case-insensitive). Throws tessel::Error listing the allowed ones.
CompareDir parseCompareDirection(const std::string &s);
inline bool compareValues(CompareDir d, double a, double b) {
  switch (d) {
  case CompareDir::EQ: return a == b;
  case CompareDir::NE: return a != b;
  case CompareDir::LT: return a < b;
  case CompareDir::LE: return a <= b;
  case CompareDir::GT: return a > b;
  case CompareDir::GE: return a >= b;
  }
  return false;
}

/// "%name" of a value (anonymous values numbered in order of definition, as printed).
std::string valueDisplayName(const ir::Program &p, ir::ValueId v);
/// Names an op in diagnostics (the one describer of ir/Printer.h).
using ir::describeOp;

/// Pseudo-info passed to svdFailureMessage when the input holds NaN or inf.
inline constexpr int kSvdNonFinite = 1 << 30;
/// Message of a failed gesdd: names the op, the matrix shape and LAPACK's info.
std::string svdFailureMessage(const ir::Program &p, const ir::Op &op, int info);

} // namespace tessel::rt
