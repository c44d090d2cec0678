//===- passes/ContractionProblem.h - An einsum as label masks (internal) -------===//
//
// Shared by the path search (Order.cpp) and the lowering of einsum to dot_general
// (OrderLowering.cpp): the einsum's labels as bits of a 64-bit mask, the operands'
// subscripts before and after diagonal extraction and single-operand sums, and every
// label's extent. Not a public header; see Order.h.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/Type.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace tessel::passes::contraction {

using ir::Shape;

using Mask = uint64_t;
constexpr int kNumLabels = 52;

inline int bitOf(char c) { return c >= 'a' && c <= 'z' ? c - 'a' : c - 'A' + 26; }
inline Mask bit(char c) { return Mask(1) << bitOf(c); }
inline Mask maskOf(llvm::StringRef labels) {
  Mask m = 0;
  for (char c : labels) m |= bit(c);
  return m;
}
inline bool has(Mask m, char c) { return (m & bit(c)) != 0; }

/// Position of the first label that repeats in `s` and of its second occurrence.
inline bool findRepeat(const std::string &s, size_t &p, size_t &q) {
  for (size_t i = 0; i < s.size(); ++i) {
    size_t j = s.find(s[i], i + 1);
    if (j != std::string::npos) {
      p = i;
      q = j;
      return true;
    }
  }
  return false;
}

/// The labels after one diagonal extraction of the copies at p < q: the other labels
/// in order, then the repeated one (see Order.h).
inline std::string mergeRepeat(const std::string &s, size_t p, size_t q) {
  std::string t;
  for (size_t j = 0; j < s.size(); ++j)
    if (j != p && j != q) t += s[j];
  return t + s[p];
}

inline std::string diagonalLabels(std::string s) {
  size_t p, q;
  while (findRepeat(s, p, q)) s = mergeRepeat(s, p, q);
  return s;
}

struct Problem {
  std::string spec;
  std::vector<std::string> raw;  ///< subscripts as written
  std::vector<std::string> leaf; ///< after diagonals and single-operand sums (lowering order)
  std::vector<Mask> leafMask;    ///< distinct labels of each operand (cost model)
  std::string output;
  Mask out = 0;
  std::array<int64_t, kNumLabels> size{};
  std::vector<Shape> shapes;

  size_t n() const { return raw.size(); }
  double prod(Mask m) const {
    double r = 1;
    while (m) {
      r *= static_cast<double>(size[static_cast<size_t>(std::countr_zero(m))]);
      m &= m - 1;
    }
    return r;
  }
};

/// Parses `spec` against the operand shapes. Throws tessel::Error ("einsum: ...") for
/// a malformed spec, a rank mismatch or one label with two extents.
Problem makeProblem(llvm::StringRef spec, llvm::ArrayRef<Shape> shapes);

} // namespace tessel::passes::contraction
