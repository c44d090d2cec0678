// Helpers shared by the pass tests (tests/passes/*_test.cpp).
#pragma once

#include <algorithm>
#include <random>
#include <string_view>
#include <vector>

#include "ir/Program.h"

namespace passtest {

/// Number of ops of kind `k` in `p`.
inline int countOps(const tessel::ir::Program &p, tessel::ir::OpKind k) {
  int n = 0;
  for (const tessel::ir::Op &op : p.ops) n += op.kind == k;
  return n;
}

/// One random tensor per input of `p`: entries ±U[0.5, 1.5] (never zero, so the
/// sign-of-zero caveats of fold and pad-sink do not apply).
inline std::vector<tessel::ir::Tensor> nonzeroRandomInputs(const tessel::ir::Program &p,
                                                          uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.5, 1.5);
  std::vector<tessel::ir::Tensor> ins;
  for (tessel::ir::ValueId v : p.inputs) {
    tessel::ir::Tensor t = tessel::ir::Tensor::zeros(p.type(v));
    for (double &x : t.data) x = rng() % 2 ? u(rng) : -u(rng);
    ins.push_back(std::move(t));
  }
  return ins;
}

/// The largest dot_general among the ops whose loc contains `locPart`: result elements ×
/// contraction length (multiply-adds). 0 if there is none.
inline int64_t largestProduct(const tessel::ir::Program &p, std::string_view locPart) {
  int64_t most = 0;
  for (const tessel::ir::Op &op : p.ops) {
    if (op.kind != tessel::ir::OpKind::DotGeneral || op.loc.find(locPart) == std::string::npos)
      continue;
    int64_t len = 1;
    for (int64_t d : op.attrs.getI64s("lhs_contract")) len *= p.type(op.operands[0]).shape[size_t(d)];
    most = std::max(most, p.type(op.results[0]).numel() * len);
  }
  return most;
}

} // namespace passtest
