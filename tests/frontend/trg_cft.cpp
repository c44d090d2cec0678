//===- tests/frontend/trg_cft.cpp - CFT data from the fixed point (docs/trg.md §10) -===//
//
// The central charge and scaling dimensions of the critical Ising and 3-state Potts
// models from the coarse-grained tensor, against the exact c = 1/2, x_σ = 1/8, x_ε = 1
// and c = 4/5, x_σ = 2/15 (twice), x_ε = 4/5; and the massive phase's c -> 0.
//
//===----------------------------------------------------------------------===//
#include <doctest/doctest.h>

#include <cmath>

#include "frontend/Onsager.h"
#include "frontend/TrgCft.h"
#include "frontend/TrgDriver.h"
#include "ir/Diagnostics.h"

using namespace tessel;
using namespace tessel::frontend;

namespace {

/// The number of consecutive rows (the longest run) whose data satisfy `ok`.
template <class F> size_t longestWindow(const std::vector<TrgCftRow> &rows, F &&ok) {
  size_t best = 0, run = 0;
  for (const TrgCftRow &r : rows) {
    run = ok(r) ? run + 1 : 0;
    best = std::max(best, run);
  }
  return best;
}

/// The CFT rows of a value sweep of `steps` steps at β (docs/trg.md §10).
std::vector<TrgCftRow> cftRows(TrgAlgorithm algorithm, int64_t chi, int steps, double beta,
                               TrgModel model = {}) {
  TrgOptions o;
  o.model = model;
  o.algorithm = algorithm;
  o.chi = chi;
  o.steps = steps;
  o.cft = true;
  return TrgDriver(o).cftData(beta);
}

} // namespace

TEST_CASE("trg cft: Ising at beta_c, BTRG chi = 32: c = 1/2, x_sigma = 1/8, x_eps = 1 in a window of steps") {
  const std::vector<TrgCftRow> rows = cftRows(TrgAlgorithm::Btrg, 32, 14, kIsingBetaC);
  REQUIRE(rows.size() == 14);
  for (size_t n = 0; n < rows.size(); ++n) CHECK(rows[n].step == n);
  // Measured: steps 7 to 13 give c in [0.4972, 0.5014], x_1 in [0.1246, 0.1252], x_2 in
  // [0.9970, 1.0065] (docs/trg.md §10).
  const size_t window = longestWindow(rows, [](const TrgCftRow &r) {
    return r.x.size() >= 2 && std::fabs(r.c - 0.5) < 0.005 && std::fabs(r.x[0] - 0.125) < 0.005 &&
           std::fabs(r.x[1] - 1.0) < 0.01;
  });
  CHECK(window >= 5);
  CHECK(std::fabs(rows[10].c - 0.5) < 0.002);
  CHECK(std::fabs(rows[10].x[0] - 0.125) < 0.0005);
  // The plateau found without being told where (measured: steps 11-13, c = 0.49894,
  // x = 0.12494, 1.00458).
  const TrgCftPlateau p = trgCftPlateau(rows, 1);
  REQUIRE(p.found);
  CHECK(p.lastStep - p.firstStep + 1 == kTrgCftPlateauSteps);
  CHECK(p.firstStep >= 6);
  CHECK(std::fabs(p.c - 0.5) < 0.005);
  REQUIRE(p.x.size() >= 2);
  CHECK(std::fabs(p.x[0] - 0.125) < 0.005);
  CHECK(std::fabs(p.x[1] - 1.0) < 0.01);
}

TEST_CASE("trg cft: HOTRG at beta_c, chi = 16: the plateau spans a factor 2 in size, two of its steps") {
  // A HOTRG step doubles the linear size, a TRG step grows it by √2: the three-step window
  // of TRG is two steps of HOTRG. Its c drifts by ~0.005 per step here (0.5055, 0.4995,
  // 0.4942 at steps 3-5), so no three HOTRG steps hold it within 0.01.
  const std::vector<TrgCftRow> rows = cftRows(TrgAlgorithm::Hotrg, 16, 8, kIsingBetaC);
  CHECK_FALSE(trgCftPlateau(rows, 1).found); // TRG's three-step windows
  const TrgCftPlateau p = trgCftPlateau(rows, 2);
  REQUIRE(p.found);
  // Measured: steps 4-5, c = 0.49686, x = 0.12481, 1.01469.
  CHECK(p.lastStep - p.firstStep + 1 == 2);
  CHECK(std::fabs(p.c - 0.5) < 0.005);
  REQUIRE(p.x.size() >= 2);
  CHECK(std::fabs(p.x[0] - 0.125) < 0.001);
  CHECK(std::fabs(p.x[1] - 1.0) < 0.02);
  CHECK(trgCftPlateauSteps(1) == 3);
  CHECK(trgCftPlateauSteps(2) == 2);
}

TEST_CASE("trg cft: 3-state Potts at beta_c: c = 4/5, x_sigma = 2/15 twice, x_eps = 4/5") {
  const std::vector<TrgCftRow> rows =
      cftRows(TrgAlgorithm::Btrg, 27, 12, std::log(1 + std::sqrt(3.0)), parseTrgModel("potts", 3));
  // Measured (chi = 27): steps 6 to 8 give c 0.807, 0.791, 0.793; x_1 = x_2 = 0.1359 ...
  // 0.1340; x_3 0.848 ... 0.828.
  const size_t window = longestWindow(rows, [](const TrgCftRow &r) {
    return r.x.size() >= 3 && std::fabs(r.c - 0.8) < 0.02 && std::fabs(r.x[0] - 2.0 / 15) < 0.005 &&
           std::fabs(r.x[1] - r.x[0]) < 1e-3 && std::fabs(r.x[2] - 0.8) < 0.05;
  });
  CHECK(window >= 3);
  // The plateau (measured: steps 9-11, c = 0.78176, x = 0.13345 twice, 0.81435): at this
  // chi the flattest window has begun to drift below 4/5 (steps 6-8 average 0.797).
  const TrgCftPlateau p = trgCftPlateau(rows, 1);
  REQUIRE(p.found);
  CHECK(std::fabs(p.c - 0.8) < 0.02);
  REQUIRE(p.x.size() >= 3);
  CHECK(std::fabs(p.x[0] - 2.0 / 15) < 0.005);
  CHECK(std::fabs(p.x[1] - p.x[0]) < 1e-3);
}

TEST_CASE("trg cft: away from T_c the fixed point is trivial (c -> 0, x_1 large)") {
  const std::vector<TrgCftRow> rows = cftRows(TrgAlgorithm::Trg, 16, 14, 0.3);
  INFO("step 13: c " << rows.back().c << " x_1 " << rows.back().x[0]);
  CHECK(std::fabs(rows.back().c) < 1e-3);
  CHECK(rows.back().x[0] > 1);
  CHECK_FALSE(trgCftPlateau(rows, 1).found);
}

TEST_CASE("trg cft: the plateau is the flattest window of steps at a nontrivial fixed point, or none") {
  auto row = [](size_t step, int64_t D, double c, double x1) { return TrgCftRow{step, D, c, {x1, 1.0}}; };
  // Steps 3-5 change least; steps 6-8 are flat but massive (c -> 0); step 0 has a smaller D.
  std::vector<TrgCftRow> rows = {row(0, 4, 0.5, 0.125),   row(1, 8, 0.56, 0.14),  row(2, 8, 0.47, 0.12),
                                 row(3, 8, 0.501, 0.1251), row(4, 8, 0.499, 0.125), row(5, 8, 0.500, 0.1249),
                                 row(6, 8, 0.01, 2.0),     row(7, 8, 0.01, 2.0),    row(8, 8, 0.01, 2.0)};
  TrgCftPlateau p = trgCftPlateau(rows, 1);
  REQUIRE(p.found);
  CHECK(p.firstStep == 3);
  CHECK(p.lastStep == 5);
  CHECK(p.c == doctest::Approx(0.5).epsilon(1e-12));
  CHECK(p.cSpread == doctest::Approx(0.002).epsilon(1e-9));
  CHECK(p.x[0] == doctest::Approx(0.125).epsilon(1e-12));
  REQUIRE(p.xSpread.size() == 2);
  CHECK(p.xSpread[1] == 0.0);
  // A window that spreads by more than kTrgCftPlateauSpreadC does not count, however
  // little it changes otherwise: the next flat one is taken, or none.
  rows[4].c = 0.49;
  rows[5].c = 0.51;
  CHECK_FALSE(trgCftPlateau(rows, 1).found);
  rows.push_back(row(9, 8, 0.30, 0.05));
  rows.push_back(row(10, 8, 0.305, 0.052));
  rows.push_back(row(11, 8, 0.302, 0.051));
  p = trgCftPlateau(rows, 1);
  REQUIRE(p.found);
  CHECK(p.firstStep == 9);
  CHECK_FALSE(trgCftPlateau({}, 1).found);
}

TEST_CASE("trg cft: c and x do not depend on the tensor's scale or its bond gauge; errors") {
  // A random-ish D = 3 tensor: scaling it, or an orthogonal gauge on its bonds (the same on
  // both ends of each bond), leaves the spectrum of both transfer matrices unchanged.
  ir::Tensor T(ir::Type({3, 3, 3, 3}), std::vector<double>(81));
  for (size_t i = 0; i < 81; ++i) T.data[i] = std::cos(0.7 * static_cast<double>(i)) + (i % 10 == 0 ? 3.0 : 0.0);
  const TrgCftRow a = trgCftData(0, T);
  ir::Tensor S = T;
  for (double &v : S.data) v *= 1e3;
  const TrgCftRow b = trgCftData(0, S);
  CHECK(std::fabs(a.c - b.c) < 1e-12);
  for (size_t i = 0; i < a.x.size(); ++i) CHECK(std::fabs(a.x[i] - b.x[i]) < 1e-12);
  // An orthogonal gauge O on the 0-2 bonds and P on the 1-3 bonds (rotations by 0.4 and
  // 1.1 in two planes): T'[i,j,k,l] = O[i,a]·P[j,b]·O[k,c]·P[l,d]·T[a,b,c,d].
  auto rot = [](double t, int p0, int p1) {
    std::vector<double> R(9, 0.0);
    for (int i = 0; i < 3; ++i) R[static_cast<size_t>(i * 4)] = 1;
    R[static_cast<size_t>(p0 * 3 + p0)] = R[static_cast<size_t>(p1 * 3 + p1)] = std::cos(t);
    R[static_cast<size_t>(p0 * 3 + p1)] = -std::sin(t);
    R[static_cast<size_t>(p1 * 3 + p0)] = std::sin(t);
    return R;
  };
  const std::vector<double> O = rot(0.4, 0, 1), P = rot(1.1, 1, 2);
  ir::Tensor G(ir::Type({3, 3, 3, 3}), std::vector<double>(81, 0.0));
  for (size_t i = 0; i < 3; ++i)
    for (size_t j = 0; j < 3; ++j)
      for (size_t k = 0; k < 3; ++k)
        for (size_t l = 0; l < 3; ++l)
          for (size_t p = 0; p < 81; ++p) {
            const size_t a = p / 27, bb = p / 9 % 3, c = p / 3 % 3, e = p % 3;
            G.data[((i * 3 + j) * 3 + k) * 3 + l] +=
                O[i * 3 + a] * P[j * 3 + bb] * O[k * 3 + c] * P[l * 3 + e] * T.data[p];
          }
  const TrgCftRow g = trgCftData(0, G);
  CHECK(std::fabs(a.c - g.c) < 1e-10);
  for (size_t i = 0; i < a.x.size(); ++i) CHECK(std::fabs(a.x[i] - g.x[i]) < 1e-10);
  // Weights of ones are no weights.
  ir::Tensor ones(ir::Type({3}), {1.0, 1.0, 1.0});
  const TrgCftRow w = trgCftData(0, T, &ones, &ones);
  CHECK(std::fabs(a.c - w.c) < 1e-12);
  CHECK_THROWS_WITH_AS(trgCftData(0, ir::Tensor(ir::Type({2, 3}), std::vector<double>(6, 1.0))),
                       doctest::Contains("T must be f64[D,D,D,D]"), Error);
  TrgOptions bad;
  bad.cft = true;
  bad.mode = TrgMode::Whole;
  CHECK_THROWS_WITH_AS(TrgDriver{bad}, doctest::Contains("--cft"), Error);
}
