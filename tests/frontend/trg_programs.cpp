//===- tests/frontend/trg_programs.cpp - The TRG program builders (docs/trg.md) ---===//
#include <doctest/doctest.h>

#include <bit>

#include <cmath>
#include <random>

#include "frontend/Trg.h"
#include "ir/Diagnostics.h"
#include "ir/Verifier.h"
#include "runtime/Runtime.h"

using namespace tessel;
using namespace tessel::frontend;

namespace {
int countOps(const ir::Program &p, ir::OpKind k) {
  int n = 0;
  for (const auto &op : p.ops) n += op.kind == k;
  return n;
}
ir::Tensor randomTensor(ir::Shape shape, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  ir::Type t(shape);
  std::vector<double> d(static_cast<size_t>(t.numel()));
  for (double &x : d) x = u(rng);
  return ir::Tensor(t, d);
}
} // namespace

TEST_CASE("trg: default rank schedule (docs/trg.md §2.4)") {
  std::vector<int64_t> want = {2, 4, 4, 16};
  for (int i = 0; i < 16; ++i) want.push_back(16);
  CHECK(trgDefaultRanks(16, 20) == want);
  CHECK(trgDefaultRanks(2, 4) == std::vector<int64_t>{2, 2, 2, 2});
  CHECK(trgDefaultRanks(3, 4) == std::vector<int64_t>{2, 3, 3, 3});
  CHECK(trgDefaultRanks(8, 5) == std::vector<int64_t>{2, 4, 4, 8, 8});
  // chi = 32: the input of step 5 comes from D = 4 tensors, so its Ma has rank <= 16.
  CHECK(trgDefaultRanks(32, 6) == std::vector<int64_t>{2, 4, 4, 16, 16, 32});
  CHECK_NOTHROW(checkTrgRanks(want, 16));
  CHECK_THROWS_WITH_AS(checkTrgRanks({2, 5}, 16), doctest::Contains("step 2"), Error);
  CHECK_THROWS_AS(checkTrgRanks({}, 16), Error);
  CHECK_THROWS_AS(checkTrgRanks({2, 4, 4, 17}, 16), Error);
}

TEST_CASE("trg: step programs have the signature and ops of docs/trg.md §2") {
  for (auto [D, Dp] : std::vector<std::pair<int64_t, int64_t>>{{2, 2}, {2, 4}, {4, 4}, {4, 16}, {16, 16}, {3, 5}}) {
    ir::Program p = buildTrgStep(D, Dp);
    INFO("step " << D << "->" << Dp);
    REQUIRE(ir::verify(p).empty());
    CHECK(p.name == trgStepName(D, Dp));
    REQUIRE(p.inputs.size() == 1);
    CHECK(p.type(p.inputs[0]) == ir::Type({D, D, D, D}));
    REQUIRE(p.outputs.size() == 2);
    CHECK(p.outputName(0) == "logm");
    CHECK(p.outputName(1) == "Tn");
    CHECK(p.type(p.outputs[0]) == ir::Type({}));
    CHECK(p.type(p.outputs[1]) == ir::Type({Dp, Dp, Dp, Dp}));
    CHECK(countOps(p, ir::OpKind::Svd) == 2);
    CHECK(countOps(p, ir::OpKind::Einsum) == 1);
    // The normalisation m = sa[0] is differentiated through (docs/trg.md §2.1).
    CHECK(countOps(p, ir::OpKind::StopGradient) == 0);
    // Truncation is a slice of the full SVD only when D' < D²; m is one more.
    CHECK(countOps(p, ir::OpKind::Slice) == (Dp < D * D ? 7 : 1));
    bool locFound = false;
    for (const auto &op : p.ops)
      if (op.kind == ir::OpKind::Svd && op.loc == "trg " + std::to_string(D) + "->" + std::to_string(Dp) + ": svd Ma")
        locFound = true;
    CHECK(locFound);
  }
  TrgStepOptions o;
  o.outputKeptSingularValues = true;
  o.outputSingularValues = true;
  o.stopGradientOnNorm = true;
  ir::Program p = buildTrgStep(4, 4, o);
  REQUIRE(p.outputs.size() == 5);
  CHECK(p.type(p.outputs[2]) == ir::Type({2}));
  CHECK(p.type(p.outputs[3]) == ir::Type({16}));
  CHECK(countOps(p, ir::OpKind::StopGradient) == 1);
  CHECK_THROWS_AS(buildTrgStep(4, 17), ShapeError);
  CHECK_THROWS_AS(buildTrgStep(4, 0), ShapeError);
}

TEST_CASE("trg: %spair is the two leading singular values of Ma and Mb (the ordered pair's gap)") {
  // Against the same step's full spectra (%sa, %sb, divided by m as %spair is), on a
  // random T, and at D' = 1, where the step keeps one triplet but still reports s[1].
  for (int64_t Dp : {int64_t(1), int64_t(3), int64_t(9)}) {
    INFO("D' = " << Dp);
    TrgStepOptions o;
    o.outputLeadingPair = true;
    o.outputSingularValues = true;
    ir::Program p = buildTrgStep(3, Dp, o);
    REQUIRE(ir::verify(p).empty());
    REQUIRE(p.outputs.size() == 5);
    CHECK(p.outputName(2) == "spair");
    CHECK(p.type(p.outputs[2]) == ir::Type({4}));
    auto out = rt::evaluateReference(p, {randomTensor({3, 3, 3, 3}, 11)});
    const std::vector<double> &pair = out[2].data, &sa = out[3].data, &sb = out[4].data;
    CHECK(pair[0] == 1.0); // m = sa[0]
    CHECK(pair[1] == doctest::Approx(sa[1]).epsilon(1e-14));
    CHECK(pair[1] < pair[0]);
    CHECK(pair[2] == doctest::Approx(sb[0]).epsilon(1e-14));
    CHECK(pair[3] == doctest::Approx(sb[1]).epsilon(1e-14));
  }
}

TEST_CASE("trg: the initial tensor (docs/trg.md §1)") {
  ir::Program p = buildTrgInit();
  REQUIRE(ir::verify(p).empty());
  for (double beta : {0.3, 0.44, 1.0}) {
    auto T = rt::evaluateReference(p, {ir::Tensor::scalar(beta), ir::Tensor::scalar(0.0)})[0];
    REQUIRE(T.type == ir::Type({2, 2, 2, 2}));
    auto at = [&](int i, int j, int k, int l) { return T.data[((i * 2 + j) * 2 + k) * 2 + l]; };
    // T0 = 2 cosh² β, 2 sinh² β, 2 cosh β sinh β, times 1/cosh² β = e^(−trgInitLogScale).
    double ch = std::cosh(beta), sh = std::sinh(beta), f = std::exp(-trgInitLogScale({}, beta).value);
    CHECK(at(0, 0, 0, 0) == doctest::Approx(2 * ch * ch * f).epsilon(1e-15));
    CHECK(at(1, 1, 1, 1) == doctest::Approx(2 * sh * sh * f).epsilon(1e-14));
    CHECK(at(0, 0, 1, 1) == doctest::Approx(2 * ch * sh * f).epsilon(1e-15));
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j)
        for (int k = 0; k < 2; ++k)
          for (int l = 0; l < 2; ++l) {
            if ((i + j + k + l) % 2) CHECK(at(i, j, k, l) == 0.0); // odd parity: exactly 0
            // Permutation symmetric (up to the association of the products).
            CHECK(at(i, j, k, l) == doctest::Approx(at(j, k, l, i)).epsilon(1e-15));
            CHECK(at(i, j, k, l) == doctest::Approx(at(j, i, k, l)).epsilon(1e-15));
            CHECK(std::fabs(at(i, j, k, l)) <= at(0, 0, 0, 0));
          }
  }
}

TEST_CASE("trg: the initial tensor stays finite at any beta (its factor cosh^2 beta is taken out)") {
  // cosh² 400 overflows a double; the normalised tensor at β = 400 has entries 2 or 0
  // (tanh 400 = 1: W = [[1, 1], [1, −1]]).
  ir::Program p = buildTrgInit();
  auto T = rt::evaluateReference(p, {ir::Tensor::scalar(400.0), ir::Tensor::scalar(0.0)})[0];
  for (size_t i = 0; i < T.data.size(); ++i) {
    INFO("element " << i);
    if (std::popcount(i) % 2) CHECK(T.data[i] == 0.0);
    else CHECK(T.data[i] == 2.0);
  }
  // β → 0: T0 → 2 on the all-zero entry, 2 tanh² β on two legs of index 1, with no
  // cancellation (1 − e^(−2β) would have been 0 below β ≈ 1e-16).
  for (double beta : {1e-300, 1e-20, 1e-8}) {
    CAPTURE(beta);
    auto t = rt::evaluateReference(p, {ir::Tensor::scalar(beta), ir::Tensor::scalar(0.0)})[0];
    CHECK(t.data[0] == 2.0);
    CHECK(t.data[3] == doctest::Approx(2 * std::tanh(beta)).epsilon(1e-15)); // [0,0,1,1]
    CHECK(t.data[15] == doctest::Approx(2 * std::tanh(beta) * std::tanh(beta)).epsilon(1e-15));
  }
}

TEST_CASE("trg: closure pairs opposite legs") {
  for (int64_t D : {2, 3, 5}) {
    ir::Program p = buildTrgClosure(D);
    REQUIRE(ir::verify(p).empty());
    ir::Tensor T = randomTensor({D, D, D, D}, 7);
    for (double &x : T.data) x = std::fabs(x); // positive trace
    double tr = 0;
    for (int64_t i = 0; i < D; ++i)
      for (int64_t j = 0; j < D; ++j) tr += T.data[((i * D + j) * D + i) * D + j];
    double got = rt::evaluateReference(p, {T})[0].data[0];
    CHECK(got == doctest::Approx(std::log(tr)).epsilon(1e-15));
  }
}

TEST_CASE("trg: one step follows docs/trg.md §2 on a random tensor") {
  // Checks the permutations, reshapes, half-tensors and the plaquette against the
  // index formulas of docs/trg.md §2 through a gauge-independent invariant.
  const int64_t D = 2, Dp = 4;
  TrgStepOptions o;
  o.outputSingularValues = true;
  ir::Program p = buildTrgStep(D, Dp, o);
  ir::Tensor T = randomTensor({D, D, D, D}, 3);
  auto out = rt::evaluateReference(p, {T});
  // m = the largest singular value of Ma (docs/trg.md §2.1), here by power iteration
  // on MaᵀMa on the host; the values come back divided by it.
  const int64_t n = D * D;
  // Ma[(x0,x1),(y0,y1)] = T[y0,x1,x0,y1] of T as it comes.
  auto rawMa = [&](int64_t x, int64_t y) { return T.data[(((y / D) * D + x % D) * D + x / D) * D + y % D]; };
  std::vector<double> v(n, 1.0), w(n);
  double m = 0;
  for (int it = 0; it < 2000; ++it) { // w = Maᵀ·(Ma·v), normalised
    std::vector<double> u(n, 0.0);
    for (int64_t x = 0; x < n; ++x)
      for (int64_t y = 0; y < n; ++y) u[x] += rawMa(x, y) * v[y];
    std::fill(w.begin(), w.end(), 0.0);
    for (int64_t x = 0; x < n; ++x)
      for (int64_t y = 0; y < n; ++y) w[y] += rawMa(x, y) * u[x];
    double nw = 0, nu = 0;
    for (int64_t i = 0; i < n; ++i) nw += w[i] * w[i], nu += u[i] * u[i];
    m = std::sqrt(nu); // ‖Ma·v‖ with ‖v‖ = 1
    for (int64_t i = 0; i < n; ++i) v[i] = w[i] / std::sqrt(nw);
  }
  CHECK(std::exp(out[0].data[0]) == doctest::Approx(m).epsilon(1e-13));
  m = std::exp(out[0].data[0]);
  CHECK(out[2].data[0] == 1.0);
  // With D' = D² nothing is truncated, so S1·S3ᵀ = Ma and S2·S4ᵀ = Mb whatever the
  // SVD gauge, and the trace of the new tensor is a host formula in T (below).
  auto Tn = [&](int64_t i) { return T.data[i] / m; };
  auto Tat = [&](int64_t i, int64_t j, int64_t k, int64_t l) { return Tn(((i * D + j) * D + k) * D + l); };
  // Ma[(x0,x1),(y0,y1)] = T[y0,x1,x0,y1]; Mb[(x0,x1),(y0,y1)] = T[y1,y0,x1,x0].
  auto Ma = [&](int64_t x0, int64_t x1, int64_t y0, int64_t y1) { return Tat(y0, x1, x0, y1); };
  auto Mb = [&](int64_t x0, int64_t x1, int64_t y0, int64_t y1) { return Tat(y1, y0, x1, x0); };
  // Σ_{r,u} T'[r,u,r,u] = Σ_{w,a,b,g} Σ_r S1[w,a,r] S3[b,g,r] Σ_u S2[a,b,u] S4[g,w,u]
  //                     = Σ_{w,a,b,g} Ma[w,a,b,g] Mb[a,b,g,w].
  double want = 0;
  for (int64_t w = 0; w < D; ++w)
    for (int64_t a = 0; a < D; ++a)
      for (int64_t b = 0; b < D; ++b)
        for (int64_t g = 0; g < D; ++g) want += Ma(w, a, b, g) * Mb(a, b, g, w);
  const ir::Tensor &Tp = out[1];
  double got = 0;
  for (int64_t r = 0; r < Dp; ++r)
    for (int64_t u = 0; u < Dp; ++u) got += Tp.data[((r * Dp + u) * Dp + r) * Dp + u];
  CHECK(got == doctest::Approx(want).epsilon(1e-12));
  // Singular values: Σ sa² = ||Ma||², descending.
  double fa = 0, sa2 = 0;
  for (int64_t i = 0; i < 16; ++i) fa += Tn(i) * Tn(i);
  for (double s : out[2].data) sa2 += s * s;
  CHECK(sa2 == doctest::Approx(fa).epsilon(1e-13));
}

TEST_CASE("trg: whole program and its kept singular values output") {
  TrgStepOptions o;
  o.outputKeptSingularValues = true;
  ir::Program p = buildTrgWhole({2, 4, 4}, o);
  REQUIRE(ir::verify(p).empty());
  REQUIRE(p.outputs.size() == 2);
  CHECK(p.type(p.outputs[0]) == ir::Type({}));
  CHECK(p.type(p.outputs[1]) == ir::Type({3, 2}));
  CHECK(countOps(p, ir::OpKind::Svd) == 6);
  auto out = rt::evaluateReference(p, {ir::Tensor::scalar(0.4), ir::Tensor::scalar(0.0)});
  // The schedule 2,4,4 keeps only nonzero singular values; the dropped ones are ~1e-17.
  for (double s : out[1].data) CHECK(s > 1e-3);
  // Same value as chaining the init, step and closure programs with the host
  // accumulation lnz = Σ_n logm_n / 2^n + lntr / 2^N + 2 ln cosh β (same ops, same order).
  ir::Tensor T = rt::evaluateReference(buildTrgInit(), {ir::Tensor::scalar(0.4), ir::Tensor::scalar(0.0)})[0];
  double lnz = 0;
  int64_t D = 2;
  std::vector<int64_t> ranks = {2, 4, 4};
  for (size_t n = 0; n < ranks.size(); ++n) {
    auto s = rt::evaluateReference(buildTrgStep(D, ranks[n]), {T});
    lnz += s[0].data[0] * std::ldexp(1.0, -static_cast<int>(n));
    T = s[1];
    D = ranks[n];
  }
  lnz += rt::evaluateReference(buildTrgClosure(D), {T})[0].data[0] * std::ldexp(1.0, -3);
  lnz += trgInitLogScale({}, 0.4).value;
  CHECK(out[0].data[0] == lnz);
  // Keeping an exact zero (rank 4 at step 1) shows up in skept.
  ir::Program q = buildTrgWhole({4, 4}, o);
  auto outq = rt::evaluateReference(q, {ir::Tensor::scalar(0.4), ir::Tensor::scalar(0.0)});
  CHECK(outq[1].data[0] < 1e-12);
}
