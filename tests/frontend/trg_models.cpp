//===- tests/frontend/trg_models.cpp - The Ising model in a field, and Potts -----===//
//
// Derivatives in the field h by AD against finite differences of the driver's own
// values (and of its own first derivatives), staged against whole mode, h = 0 against
// the field-free values, Yang's spontaneous magnetization, and the q-state Potts model:
// the q = 2 identity with the Ising model and the specific-heat peak at the exact
// critical point β_c = ln(1 + √q) of q = 3 (docs/trg.md §7).
//
//===----------------------------------------------------------------------===//
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "frontend/Onsager.h"
#include "frontend/TrgDriver.h"
#include "ir/Diagnostics.h"

using namespace tessel;
using namespace tessel::frontend;

namespace {

/// chi = 8, 10 steps, a fixed schedule (so that the finite differences differentiate
/// one smooth function), the field `h`.
TrgOptions fieldOptions(double h, bool second = false) {
  TrgOptions o;
  o.chi = 8;
  o.steps = 10;
  o.ranks = trgDefaultRanks(8, 10);
  o.field = h;
  o.grad = true;
  o.second = second;
  o.susceptibility = second;
  return o;
}

/// The 5-point central difference of f at x with step d (error O(d⁴)).
double fd5(const std::function<double(double)> &f, double x, double d) {
  return (f(x - 2 * d) - 8 * f(x - d) + 8 * f(x + d) - f(x + 2 * d)) / (12 * d);
}

double relErr(double got, double want) { return std::fabs(got - want) / std::fabs(want); }

} // namespace

TEST_CASE("trg field: m, chi_m and d2/dbeta dh by AD match finite differences in h") {
  // Above T_c (beta = 0.35) and below it (beta = 0.5, where the field orders the
  // lattice); the finite differences are of the driver's own lnZ/N and of its own first
  // derivatives, at the same fixed schedule. Below T_c the 2^10 sites round the jump of
  // m at h = 0 over h ~ 1/(beta N m) ~ 2e-3: the differences are taken well above that
  // scale (at h = 0.02 a step of 1e-3 resolves m(h) only to 1e-3).
  for (auto [beta, h] : {std::pair{0.35, 0.05}, std::pair{0.5, 0.1}}) {
    INFO("beta = " << beta << ", h = " << h);
    TrgDriver drv(fieldOptions(h, true));
    const TrgResult r = drv.second(beta);
    REQUIRE(r.dlnZdh.has_value());
    REQUIRE(r.d2lnZdh2.has_value());
    REQUIRE(r.d2lnZdbetadh.has_value());
    auto at = [&](double hh) { return TrgDriver(fieldOptions(hh)).valueAndGrad(beta); };
    const double d = 1e-3;
    const double fdH = fd5([&](double hh) { return at(hh).lnZ; }, h, d);
    const double fdHH = fd5([&](double hh) { return *at(hh).dlnZdh; }, h, d);
    const double fdBH = fd5([&](double hh) { return *at(hh).dlnZ; }, h, d);
    INFO("dlnZ/dh " << *r.dlnZdh << " vs FD " << fdH << "; d2/dh2 " << *r.d2lnZdh2 << " vs FD "
                    << fdHH << "; d2/dbeta dh " << *r.d2lnZdbetadh << " vs FD " << fdBH);
    CHECK(relErr(*r.dlnZdh, fdH) < 1e-7);
    CHECK(relErr(*r.d2lnZdh2, fdHH) < 1e-7);
    CHECK(relErr(*r.d2lnZdbetadh, fdBH) < 1e-7);
    // The first-order programs give the same first derivatives as the second-order ones.
    const TrgResult g = at(h);
    CHECK(relErr(*g.dlnZdh, *r.dlnZdh) < 1e-12);
    CHECK(relErr(g.lnZ, r.lnZ) < 1e-14);
  }
}

TEST_CASE("trg field: staged and whole mode agree on every derivative") {
  TrgOptions s = fieldOptions(0.03, true);
  TrgOptions w = s;
  w.mode = TrgMode::Whole;
  const TrgResult a = TrgDriver(s).second(0.4), b = TrgDriver(w).second(0.4);
  CHECK(relErr(b.lnZ, a.lnZ) < 1e-13);
  CHECK(relErr(*b.dlnZ, *a.dlnZ) < 1e-12);
  CHECK(relErr(*b.dlnZdh, *a.dlnZdh) < 1e-12);
  CHECK(relErr(*b.d2lnZ, *a.d2lnZ) < 1e-10);
  CHECK(relErr(*b.d2lnZdbetadh, *a.d2lnZdbetadh) < 1e-10);
  CHECK(relErr(*b.d2lnZdh2, *a.d2lnZdh2) < 1e-10);
}

TEST_CASE("trg field: at h = 0 the field is an input, m = 0 and chi_m matches the FD of m") {
  TrgDriver drv(fieldOptions(0.0, true));
  const TrgResult r = drv.second(0.35);
  // The field-free values are unchanged (at h = 0 the site weight is exactly 1).
  TrgOptions plain;
  plain.chi = 8;
  plain.steps = 10;
  plain.grad = true;
  const TrgResult p = TrgDriver(plain).valueAndGrad(0.35);
  CHECK(relErr(r.lnZ, p.lnZ) < 1e-15);
  CHECK(relErr(*r.dlnZ, *p.dlnZ) < 1e-14);
  // lnZ is even in h: its derivative is 0 up to rounding, not an error.
  CHECK(std::fabs(*r.dlnZdh) < 1e-14);
  CHECK(std::fabs(*r.d2lnZdbetadh) < 1e-12);
  // chi_m > 0, and it is the slope of m: (m(d) − m(−d))/2d with m odd in h.
  auto m = [&](double hh) { return *TrgDriver(fieldOptions(hh)).valueAndGrad(0.35).dlnZdh; };
  const double fd = fd5(m, 0.0, 1e-3);
  CHECK(*r.d2lnZdh2 > 0);
  CHECK(relErr(*r.d2lnZdh2, fd) < 1e-7);
}

TEST_CASE("trg field: m approaches Yang's spontaneous magnetization as h -> 0 below T_c") {
  // m₀ = (1 − sinh⁻⁴(2β))^(1/8) (C. N. Yang, Phys. Rev. 85, 808 (1952)). At β = 0.7,
  // chi = 16, 2^30 sites: m − m₀ ≈ chi_m·h (measured 1.93e-5, 1.93e-6, 1.94e-7 for
  // h = 1e-3, 1e-4, 1e-5): the difference falls with h, and the TRG's own error is below it.
  const double beta = 0.7, m0 = std::pow(1 - std::pow(std::sinh(2 * beta), -4), 0.125);
  double prev = 1;
  for (double h : {1e-3, 1e-4, 1e-5}) {
    TrgOptions o;
    o.chi = 16;
    o.steps = 30;
    o.field = h;
    o.grad = true;
    o.ranks = deriveTrgRanks(beta, o.chi, o.steps, o.rankTol, "", o.model, h);
    const TrgResult r = TrgDriver(o).valueAndGrad(beta);
    const double m = *r.dlnZdh / beta, diff = m - m0;
    INFO("h = " << h << ": m = " << m << ", m0 = " << m0 << ", m - m0 = " << diff);
    CHECK(diff > 0);
    CHECK(diff < 3 * h);
    CHECK(diff < prev / 5);
    prev = diff;
  }
}

TEST_CASE("trg field: a field below T_c needs the schedule derived from the spectrum") {
  // The Z2 symmetry broken, the fixed point has one dominant singular value; the
  // structural schedule then keeps exact zeros, which the driver refuses by name.
  TrgOptions o = fieldOptions(1e-3);
  o.chi = 8;
  o.steps = 20;
  o.ranks = trgDefaultRanks(8, 20);
  CHECK_THROWS_WITH_AS(TrgDriver(o).value(0.5), doctest::Contains("leave --ranks out"), Error);
  o.ranks = deriveTrgRanks(0.5, 8, 20, o.rankTol, "", o.model, 1e-3);
  CHECK(o.ranks != trgDefaultRanks(8, 20));
  CHECK_NOTHROW(TrgDriver(o).valueAndGrad(0.5));
}

TEST_CASE("trg potts: q = 2 is the Ising model at beta/2: lnZ/N + beta, derivatives alike") {
  // Potts with q = 2: δ(σ, σ') = (1 + s s')/2, so lnZ_P(β)/N = lnZ_I(β/2)/N + β (two bonds
  // per site). The Potts tensor's bond basis differs from the Ising one (an orthogonal
  // change of basis on every bond), so the agreement is to rounding, not bitwise.
  for (TrgMode mode : {TrgMode::Staged, TrgMode::Whole}) {
    TrgOptions ising;
    ising.chi = 8;
    ising.steps = 12;
    ising.grad = ising.second = true;
    ising.mode = mode;
    TrgOptions potts = ising;
    potts.model.kind = TrgModel::Kind::Potts;
    potts.model.q = 2;
    for (double beta : {0.6, 0.88, 1.2}) {
      INFO("beta = " << beta << ", mode " << trgModeName(mode));
      const TrgResult i = TrgDriver(ising).second(beta / 2), p = TrgDriver(potts).second(beta);
      CHECK(std::fabs(p.lnZ - (i.lnZ + beta)) < 1e-13);
      CHECK(relErr(*p.dlnZ, *i.dlnZ / 2 + 1) < 1e-12);
      CHECK(relErr(*p.d2lnZ, *i.d2lnZ / 4) < 1e-9);
      CHECK(!p.dlnZdh.has_value());
    }
  }
}

TEST_CASE("trg potts: the q = 3 specific heat peaks at beta_c = ln(1 + sqrt 3)") {
  // Self-duality puts the transition of the q-state Potts model at β_c = ln(1 + √q)
  // (q = 3: 1.00505..., continuous). c(β) = β² d²(lnZ/N)/dβ² at chi = 16 on a grid of
  // step 0.0025 peaks at 1.0025 (c = 12.3; chi = 9: at 1.0175): the two grid points
  // beside β_c are above those 0.0075 away on either side.
  TrgOptions o;
  o.model.kind = TrgModel::Kind::Potts;
  o.model.q = 3;
  o.chi = 16;
  o.steps = 24;
  o.grad = o.second = true;
  TrgDriver drv(o);
  const double betaC = std::log(1 + std::sqrt(3.0));
  auto c = [&](double beta) { return beta * beta * *drv.second(beta).d2lnZ; };
  const double below = c(0.995), left = c(1.0025), right = c(1.0075), above = c(1.015);
  INFO("c = " << below << ", " << left << ", " << right << ", " << above
              << " at beta = 0.995, 1.0025, 1.0075, 1.015; beta_c = " << betaC);
  CHECK(1.0025 < betaC);
  CHECK(betaC < 1.0075);
  CHECK(std::min(left, right) > std::max(below, above));
  CHECK(std::max(left, right) > 6); // the peak grows with chi (~ln chi at a continuous transition)
}

TEST_CASE("trg potts: the derived schedule cuts no degenerate multiplet (q = 3, chi = 24, beta = 0.98)") {
  // q = 3 spectra hold exact pairs (the S3 symmetry). At beta = 0.98 the chi = 24 cut of
  // step 5 falls inside one (s23 = s24 = 1.44e-2 s0, relative gap 1e-15): which of the
  // pair's vectors is kept was the SVD's arbitrary choice, so lnZ/N depended on the SVD
  // algorithm and had kinks in beta (AD d/dbeta 1.4430 against one-sided slopes of 1.4705
  // and 1.4501 per 1e-6). The derived schedule keeps the values above a split multiplet.
  // Reference: scripts/potts_multiplet_reference.py, an independent numpy TRG with the
  // same rank rule, derived the same schedule and lnZ/N = 2.032543470837834.
  TrgOptions o;
  o.model = parseTrgModel("potts", 3);
  o.chi = 24;
  o.steps = 24;
  o.grad = true;
  const double beta = 0.98;
  const std::vector<int64_t> numpyRanks = {3,  9,  9,  24, 23, 24, 24, 24, 24, 23, 23, 24,
                                           24, 24, 24, 24, 22, 22, 22, 22, 22, 22, 22, 22};
  TrgDriver truncated(o);
  const TrgResult t = truncated.valueAndGrad(beta);
  CHECK(truncated.ranks() == numpyRanks);
  CHECK(std::fabs(t.lnZ - 2.032543470837834) < 1e-13);
  // The same function whatever computes the SVDs.
  o.svd = TrgSvd::Full;
  TrgDriver full(o);
  const TrgResult f = full.valueAndGrad(beta);
  CHECK(full.ranks() == numpyRanks);
  CHECK(std::fabs(t.lnZ - f.lnZ) < 1e-13);
  REQUIRE(t.dlnZ);
  REQUIRE(f.dlnZ);
  CHECK(std::fabs(*t.dlnZ - *f.dlnZ) < 1e-10 * *f.dlnZ);
  // And smooth: d/dbeta is the slope of lnZ/N (a central difference on the schedule of
  // beta; at 1e-6 its own error is ~1e-9: rounding 4e-16/1e-6, d3 ~ 3e3 times 1e-12/6).
  o.ranks = numpyRanks;
  o.grad = false;
  TrgDriver pinned(o);
  const double d = 1e-6, lo = pinned.value(beta - d).lnZ, hi = pinned.value(beta + d).lnZ;
  CHECK(std::fabs(pinned.value(beta).lnZ - f.lnZ) < 1e-13);
  CHECK(std::fabs((hi - lo) / (2 * d) - *t.dlnZ) < 1e-8 * *t.dlnZ);
  // Without the check the cut of step 5 splits the pair.
  TrgOptions split;
  split.model = o.model;
  split.chi = 24;
  split.steps = 24;
  split.multipletTol = 0;
  TrgDriver old(split);
  old.value(beta);
  REQUIRE(old.ranks().size() > 4);
  CHECK(old.ranks()[4] == 24);
}

TEST_CASE("trg models: the value sweep names each step whose cut splits a multiplet") {
  // A schedule given with --ranks is run as given: at beta = 0.98 (Potts q = 3, chi = 24)
  // its step 5 cuts the exact pair s23 = s24 (1.4420448437e-2 of s0; the numpy SVDs of
  // scripts/trg_reference.py, run with these ranks, give 1.44204484368455e-2).
  TrgOptions o;
  o.model = parseTrgModel("potts", 3);
  o.chi = 24;
  o.steps = 6;
  o.grad = true;
  o.ranks = {3, 9, 9, 24, 24, 24};
  const double beta = 0.98;
  TrgDriver given(o);
  // A first-order run of a given schedule runs no value sweep: nothing to report.
  CHECK(given.valueAndGrad(beta).multipletSplits.empty());
  const TrgResult v = given.value(beta);
  REQUIRE(v.multipletSplits.size() == 1);
  const TrgMultipletSplit &sp = v.multipletSplits[0];
  CHECK(sp.step == 5);
  CHECK(sp.D == 24);
  CHECK(sp.Dp == 24);
  CHECK(sp.matrices == 3u); // Ma and Mb
  CHECK(std::fabs(sp.kept - 1.44204484368455e-2) < 1e-12);
  CHECK(sp.kept - sp.cut <= 1e-14 * sp.kept);
  CHECK(sp.kept >= kTrgMultipletFloor * sp.s0);
  // The value+grad run at that beta carries the sweep's finding.
  const TrgResult g = given.valueAndGrad(beta);
  REQUIRE(g.multipletSplits.size() == 1);
  CHECK(g.multipletSplits[0].step == 5);
  CHECK(g.multipletSplits[0].kept == sp.kept);
  // The derived schedule splits nothing here.
  o.ranks.clear();
  o.grad = false;
  TrgDriver derived(o);
  CHECK(derived.value(beta).multipletSplits.empty());
  CHECK(derived.ranks() == std::vector<int64_t>{3, 9, 9, 24, 23, 24});
  // multipletTol = 0: no rule, no report.
  o.ranks = {3, 9, 9, 24, 24, 24};
  o.multipletTol = 0;
  CHECK(TrgDriver(o).value(beta).multipletSplits.empty());
  // Where the derived schedule keeps a split (chi < q: keeping s0 alone would be a
  // product state) the split is named too: step 1 cuts the pair after s0; whole mode
  // reports its planner's sweep.
  TrgOptions small;
  small.model = o.model;
  small.chi = 2;
  small.steps = 4;
  for (TrgMode mode : {TrgMode::Staged, TrgMode::Whole}) {
    small.mode = mode;
    const TrgResult s = TrgDriver(small).value(1.0);
    REQUIRE(!s.multipletSplits.empty());
    CHECK(s.multipletSplits[0].step == 1);
    CHECK(s.multipletSplits[0].Dp == 2);
    CHECK(s.multipletSplits[0].matrices == 3u);
  }
  // A repeated run at a planned beta (--steps auto) reports its planning run's list (whose
  // last step, the limit closure's, only the planning run checks); so does value+grad.
  small.mode = TrgMode::Staged;
  small.steps = 80;
  small.stepsAuto = true;
  small.grad = true;
  TrgDriver limit(small);
  const std::vector<TrgMultipletSplit> first = limit.value(1.0).multipletSplits;
  REQUIRE(!first.empty());
  const std::vector<TrgMultipletSplit> again = limit.value(1.0).multipletSplits,
                                       grad = limit.valueAndGrad(1.0).multipletSplits;
  REQUIRE(again.size() == first.size());
  REQUIRE(grad.size() == first.size());
  for (size_t i = 0; i < first.size(); ++i) {
    CHECK(again[i].step == first[i].step);
    CHECK(grad[i].step == first[i].step);
    CHECK(again[i].kept == first[i].kept);
  }
}

TEST_CASE("trg models: the multiplet rule leaves alone what it cannot resolve or would halve") {
  // The schedule with the rule (TrgOptions::multipletTol) against without it (0), on a
  // fixed number of steps.
  auto ranksOf = [](TrgOptions o, double beta, double tol) {
    o.multipletTol = tol;
    TrgDriver d(o);
    d.value(beta);
    return d.ranks();
  };
  TrgOptions ising;
  ising.chi = 16;
  ising.steps = 12;
  // Cuts among values below kTrgMultipletFloor·s0 (β = 0.05: an exact pair at 1.6e-8·s0
  // in step 7; β = 2: a near-quadruplet at 7.6e-11·s0 in step 6), and the seeds' β.
  for (double beta : {0.05, 0.4, 2.0}) {
    CAPTURE(beta);
    CHECK(ranksOf(ising, beta, kTrgMultipletTol) == ranksOf(ising, beta, 0));
  }
  // Potts with chi < q: the (q − 1)-fold multiplet after s0 cannot be kept whole, and
  // keeping s0 alone would be a product state: the cut stays (2, not 1).
  TrgOptions potts;
  potts.model = parseTrgModel("potts", 3);
  potts.chi = 2;
  potts.steps = 6;
  const std::vector<int64_t> r = ranksOf(potts, 1.0, kTrgMultipletTol);
  CHECK(r == std::vector<int64_t>(6, 2));
  CHECK(r == ranksOf(potts, 1.0, 0));
  // Where the rule applies it lowers: Ising below T_c at odd chi (β = 0.6, chi = 15: step
  // 9 cuts a quadruplet 1.5389e-3·s0 at relative gaps ≤ 6e-7).
  ising.chi = 15;
  ising.steps = 10;
  const std::vector<int64_t> low = ranksOf(ising, 0.6, kTrgMultipletTol);
  REQUIRE(low.size() == 10);
  CHECK(low[8] == 12);
  CHECK(ranksOf(ising, 0.6, 0)[8] == 15);
  ising.multipletTol = -1;
  CHECK_THROWS_WITH_AS(TrgDriver{ising}, doctest::Contains("multiplet tolerance must be finite and >= 0"), Error);
}

TEST_CASE("trg models: in a field the derived schedule cuts no pair the field splits (chi = 16)") {
  // A field splits the Ising runs' pairs (one state of each Z2 sector) by 1e-6 to 3e-4 of
  // their values and couples them: across a cut between such a pair which vector is kept
  // changes with beta (an avoided crossing), so lnZ/N of that schedule is not smooth there.
  // At beta = 0.43, h = 0.01, 16 steps the cuts of steps 13-16 split one at relative gaps
  // of 2.7e-4 to 1.4e-4: full and truncated SVDs gave d2(lnZ/N)/dbeta2 2.3e-6 apart and a 5-point
  // difference of lnZ/N (step 2e-4) 1.1e-3 below the AD value. In a field the rule ties
  // values within kTrgFieldPairTol, and those steps keep 15. Reference:
  // scripts/ising_field_reference.py, an independent numpy TRG with the same rule, derived
  // the same schedules, lnZ/N = 0.9173615989916334 (0.7906893273536825 at beta = 0.3, h =
  // 0.02, 12 steps) and a 5-point difference of its lnZ/N of 9.45132091316932 (step 2e-4,
  // whose rounding alone is up to ~3e-9 relative).
  TrgOptions o;
  o.chi = 16;
  o.steps = 16;
  o.field = 0.01;
  o.second = true;
  const double beta = 0.43;
  auto fd2 = [&](TrgOptions pinned, const std::vector<int64_t> &ranks, double d) {
    pinned.ranks = ranks;
    pinned.second = false;
    TrgDriver p(pinned);
    double f[5];
    for (int k = 0; k < 5; ++k) f[k] = p.value(beta + (k - 2) * d).lnZ;
    return (-f[0] + 16 * f[1] - 30 * f[2] + 16 * f[3] - f[4]) / (12 * d * d);
  };
  TrgDriver truncated(o);
  const TrgResult t = truncated.second(beta);
  const std::vector<int64_t> want = {2, 4, 4, 16, 16, 16, 16, 16, 16, 16, 16, 16, 15, 15, 15, 15};
  CHECK(truncated.ranks() == want);
  CHECK(t.multipletSplits.empty());
  CHECK(std::fabs(t.lnZ - 0.9173615989916334) < 1e-13);
  REQUIRE(t.d2lnZ);
  CHECK(std::fabs(*t.d2lnZ - 9.45132091316932) < 1e-8 * *t.d2lnZ); // measured 1.2e-9
  o.svd = TrgSvd::Full;
  TrgDriver full(o);
  const TrgResult f = full.second(beta);
  CHECK(full.ranks() == want);
  REQUIRE(f.d2lnZ);
  CHECK(std::fabs(*t.d2lnZ - *f.d2lnZ) < 1e-10 * *f.d2lnZ); // measured 2.6e-12
  // The schedule's lnZ/N is smooth: its 5-point difference (rounding ~6e-9 at d = 2e-4)
  // is the AD value (measured 5e-10 apart).
  CHECK(std::fabs(fd2(o, want, 2e-4) - *t.d2lnZ) < 1e-8 * *t.d2lnZ);
  // With fieldPairTol = 0 (the rule's gap kTrgMultipletTol, as at h = 0) the cuts stay and
  // the difference is off by the kink.
  o.svd = TrgSvd::Truncated;
  o.fieldPairTol = 0;
  TrgDriver old(o);
  const TrgResult b = old.second(beta);
  CHECK(old.ranks() == std::vector<int64_t>{2, 4, 4, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16});
  REQUIRE(b.d2lnZ);
  CHECK(std::fabs(fd2(o, old.ranks(), 2e-4) - *b.d2lnZ) > 1e-5 * *b.d2lnZ);
  // At beta = 0.3, h = 0.02, 12 steps (steps 8-10 split pairs 8.3e-9, 1.4e-9 and 9.4e-9 of
  // s0 apart, inside the SVD rule's broadening eps*s0) full and truncated were 6.3e-7 apart.
  o.fieldPairTol = kTrgFieldPairTol;
  o.steps = 12;
  o.field = 0.02;
  double d2[2];
  for (TrgSvd svd : {TrgSvd::Truncated, TrgSvd::Full}) {
    o.svd = svd;
    TrgDriver d(o);
    const TrgResult r = d.second(0.3);
    CHECK(std::fabs(r.lnZ - 0.7906893273536825) < 1e-13);
    REQUIRE(r.d2lnZ);
    d2[svd == TrgSvd::Full] = *r.d2lnZ;
    CHECK(d.ranks() == std::vector<int64_t>{2, 4, 4, 16, 16, 16, 16, 15, 15, 15, 15, 15});
  }
  CHECK(std::fabs(d2[0] - d2[1]) < 1e-10 * d2[1]); // measured 1.7e-11
  // The rule's gap: multipletTol, in a field at least fieldPairTol; off with multipletTol = 0.
  CHECK(trgMultipletTol(o) == kTrgFieldPairTol);
  o.multipletTol = 1e-2;
  CHECK(trgMultipletTol(o) == 1e-2);
  o.multipletTol = 0;
  CHECK(trgMultipletTol(o) == 0);
  o.multipletTol = kTrgMultipletTol;
  o.field = -0.0;
  CHECK(trgMultipletTol(o) == kTrgMultipletTol);
  o.fieldPairTol = -1;
  CHECK_THROWS_WITH_AS(TrgDriver{o}, doctest::Contains("field pair tolerance must be finite and >= 0"), Error);
}

TEST_CASE("trg models: bad options are errors naming the option") {
  TrgOptions o;
  o.model.kind = TrgModel::Kind::Potts;
  o.model.q = 1;
  CHECK_THROWS_WITH_AS(TrgDriver{o}, doctest::Contains("--q"), Error);
  o.model.q = 3;
  o.field = 0.1;
  CHECK_THROWS_WITH_AS(TrgDriver{o}, doctest::Contains("has no field"), Error);
  o.field = 0;
  o.second = o.susceptibility = true;
  CHECK_THROWS_WITH_AS(TrgDriver{o}, doctest::Contains("--susceptibility"), Error);
  TrgOptions i;
  i.field = std::nan("");
  CHECK_THROWS_WITH_AS(TrgDriver{i}, doctest::Contains("--field must be finite"), Error);
  i.field = 0;
  i.susceptibility = true;
  CHECK_THROWS_WITH_AS(TrgDriver{i}, doctest::Contains("needs the second-order"), Error);
  // The initial tensor of every model is finite at any beta and h.
  for (double h : {-1e3, 1e3}) {
    TrgOptions f;
    f.chi = 4;
    f.steps = 4;
    f.field = h;
    f.ranks = deriveTrgRanks(50.0, 4, 4, f.rankTol, "", f.model, h);
    const TrgResult r = TrgDriver(f).value(50.0);
    // Every spin along the field: lnZ/N = 2β + β|h| (the ground state), exactly enough.
    CHECK(relErr(r.lnZ, 2 * 50.0 + 50.0 * 1e3) < 1e-14);
  }
}

TEST_CASE("trg field: at h = 0 below T_c the h derivatives are 0 to rounding, or refused") {
  // d/dh at h = 0 is exactly 0 by the Z2 symmetry. Below T_c the two leading singular
  // values of every step pair up (the two ordered states) until their gap is rounding;
  // the first-order rule with the bond gauge (docs/trg.md §5) keeps d/dh at rounding
  // there (it was -1.9e-8 at 16 steps and -1.2e-3 with eps = 0 at beta = 0.6). Second
  // derivatives in h through that pair are rounding over the gap squared: refused, with
  // the step and the gap named. chi = 16, full SVDs (second order).
  for (double beta : {0.5, 0.6})
    for (int steps : {12, 16, 20, 24}) {
      INFO("beta = " << beta << ", steps = " << steps);
      TrgOptions o;
      o.chi = 16;
      o.steps = steps;
      o.svd = TrgSvd::Full;
      o.second = o.grad = o.susceptibility = true;
      TrgDriver drv(o);
      const TrgResult r = drv.second(beta);
      REQUIRE(r.dlnZ);
      REQUIRE(r.dlnZdh);
      CHECK(std::fabs(*r.dlnZdh) <= 1e-13 * std::fabs(*r.dlnZ)); // measured <= 3e-16
      CHECK(!r.d2lnZdh2);
      CHECK(!r.d2lnZdbetadh);
      CHECK(r.refused.find("the two leading singular values of step") != std::string::npos);
      CHECK(r.d2lnZ); // beta's row is unaffected (the pair is even under it)
    }
}

TEST_CASE("trg field: chi_m at h = 0 below T_c is beta N m^2 of the finite lattice") {
  // Where the ordered pair is still split (6 and 8 steps at beta = 0.5, chi = 16), chi_m
  // by AD equals a Richardson-extrapolated second difference of the driver's lnZ/N in h
  // (steps x/(beta N m0) and half that, x = 0.03: the ln cosh(beta h N m) curvature's x^2
  // bias cancels) to 1e-6, approaches beta N m0^2 (Yang's m0; the finite lattice's m
  // exceeds it: +1.4% at 8x8 sites, +0.36% at 16x16), and d2/dbeta dh is 0 to rounding.
  const double beta = 0.5, m0 = std::pow(1 - std::pow(std::sinh(2 * beta), -4), 0.125);
  std::vector<double> offYang;
  for (int steps : {6, 8}) {
    INFO("steps = " << steps);
    TrgOptions o;
    o.chi = 16;
    o.steps = steps;
    o.ranks = trgDefaultRanks(16, steps);
    o.second = o.grad = o.susceptibility = true;
    const TrgResult r = TrgDriver(o).second(beta);
    REQUIRE(r.d2lnZdh2);
    REQUIRE(r.d2lnZdbetadh);
    CHECK(std::fabs(*r.d2lnZdbetadh) <= 1e-12 * std::fabs(*r.d2lnZ)); // measured <= 2e-15
    const double N = std::ldexp(1.0, steps), d = 0.03 / (beta * N * m0);
    TrgOptions v = o;
    v.second = v.grad = v.susceptibility = false;
    v.svd = TrgSvd::Full;
    auto lnz = [&](double h) {
      v.field = h;
      return TrgDriver(v).value(beta).lnZ;
    };
    const double l0 = lnz(0);
    auto second = [&](double dd) { return (lnz(dd) + lnz(-dd) - 2 * l0) / (dd * dd); };
    const double fd = (4 * second(d / 2) - second(d)) / 3;
    const double chi = *r.d2lnZdh2 / beta;
    INFO("chi_m " << chi << ", difference " << fd / beta << ", beta N m0^2 " << beta * N * m0 * m0);
    CHECK(relErr(*r.d2lnZdh2, fd) < 1e-6);
    offYang.push_back(chi / (beta * N * m0 * m0) - 1);
  }
  CHECK(offYang[0] > 0);
  CHECK(offYang[0] < 2e-2);
  CHECK(offYang[1] > 0);
  CHECK(offYang[1] < offYang[0] / 2);
}
