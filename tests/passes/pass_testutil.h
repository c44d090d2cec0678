// Helpers shared by the pass tests (tests/passes/*_test.cpp).
#pragma once

#include <random>
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

} // namespace passtest
