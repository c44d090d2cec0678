//===- tests/frontend/onsager.cpp - Exact Ising values vs onsager.json --------===//
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "frontend/Onsager.h"
#include "ir/Diagnostics.h"

using namespace tessel::frontend;

namespace {
nlohmann::json loadJson(const std::string &name) {
  std::ifstream in(std::string(TESSEL_TEST_DATA_DIR) + "/" + name);
  REQUIRE_MESSAGE(in.good(), "cannot open tests/data/" << name);
  return nlohmann::json::parse(in);
}
// |a - b| <= tol * max(1, |b|): absolute below 1, relative above. The file's values are
// checked against a 40-digit evaluation by scripts/onsager_reference.py (mpmath).
void near(double got, double want, double tol, const char *what, double beta) {
  double err = std::fabs(got - want);
  CHECK_MESSAGE(err <= tol * std::max(1.0, std::fabs(want)),
                what << " at beta=" << beta << ": got " << got << " want " << want
                     << " err " << err);
}
} // namespace

TEST_CASE("onsager: every row of onsager.json to 1e-12") {
  auto j = loadJson("onsager.json");
  CHECK(j["beta_c"].get<double>() == kIsingBetaC);
  REQUIRE(j["rows"].size() >= 10);
  for (const auto &row : j["rows"]) {
    double beta = row["beta"].get<double>();
    OnsagerValues v = onsager(beta);
    near(v.lnZ, row["lnZ_per_site"].get<double>(), 1e-12, "lnZ/N", beta);
    near(v.dlnZ, row["dlnZ_dbeta"].get<double>(), 1e-12, "dlnZ/dbeta", beta);
    near(v.energy, row["energy_per_site"].get<double>(), 1e-12, "energy", beta);
    near(v.d2lnZ, row["d2lnZ_dbeta2"].get<double>(), 1e-12, "d2lnZ/dbeta2", beta);
    near(v.specificHeat, row["specific_heat"].get<double>(), 1e-12, "specific heat", beta);
    CHECK(onsagerLnZ(beta) == v.lnZ);
  }
}

TEST_CASE("onsager: derivatives are consistent with finite differences of lnZ") {
  // Independent of the closed forms for -u and c: differentiate the integral formula.
  for (double beta : {0.2, 0.35, 0.6}) {
    double h = 5e-4;
    double f[5];
    for (int i = 0; i < 5; ++i) f[i] = onsagerLnZ(beta + (i - 2) * h);
    double d1 = (f[0] - 8 * f[1] + 8 * f[3] - f[4]) / (12 * h);
    double d2 = (-f[0] + 16 * f[1] - 30 * f[2] + 16 * f[3] - f[4]) / (12 * h * h);
    OnsagerValues v = onsager(beta);
    CHECK(std::fabs(d1 - v.dlnZ) < 1e-10);
    CHECK(std::fabs(d2 - v.d2lnZ) < 1e-6);
  }
}

TEST_CASE("onsager: elliptic integrals and limits") {
  // K(0) = E(0) = pi/2 (k' = 1); Legendre's relation at k = k' = 1/sqrt(2):
  // 2 E K - K^2 = pi/2.
  CHECK(ellipticKFromKp(1.0) == doctest::Approx(M_PI / 2).epsilon(1e-15));
  CHECK(ellipticEFromKp(1.0) == doctest::Approx(M_PI / 2).epsilon(1e-15));
  double kp = std::sqrt(0.5);
  double K = ellipticKFromKp(kp), E = ellipticEFromKp(kp);
  CHECK(std::fabs(2 * E * K - K * K - M_PI / 2) < 1e-14);
  CHECK(std::isinf(ellipticKFromKp(0.0)));
  CHECK(ellipticEFromKp(0.0) == 1.0);
  // High temperature: lnZ/N -> ln 2 + 2 ln cosh(beta) + O(beta^4 ...) ; at beta -> 0, ln 2.
  CHECK(std::fabs(onsagerLnZ(1e-8) - std::log(2.0)) < 1e-14);
  // Low temperature: lnZ/N -> 2 beta (ground state energy -2 per site).
  CHECK(std::fabs(onsagerLnZ(5.0) - 10.0) < 1e-8);
  // Exactly at beta_c lnZ/N and the energy u = -sqrt(2) are finite; d2 and c diverge.
  CHECK(std::isfinite(onsagerLnZ(kIsingBetaC)));
  const OnsagerValues c = onsager(kIsingBetaC);
  CHECK(std::fabs(c.energy + std::sqrt(2.0)) < 1e-15);
  CHECK(c.dlnZ == -c.energy);
  CHECK(std::isinf(c.d2lnZ));
  CHECK(std::isinf(c.specificHeat));
  // Next to beta_c the general formula gives the same limit (the log singularity of K is
  // multiplied by 2t^2 - 1 = O(beta - beta_c)).
  CHECK(std::fabs(onsager(kIsingBetaC * (1 + 1e-12)).energy + std::sqrt(2.0)) < 1e-9);
  CHECK_THROWS_AS(onsager(0.0), tessel::Error);
  CHECK_THROWS_AS(onsager(-0.1), tessel::Error);
  CHECK_THROWS_AS(onsager(NAN), tessel::Error);
}

TEST_CASE("onsager: deep in the ordered phase d2 keeps its digits, and no beta overflows") {
  // Reference: lnZ/N = ln(2 cosh 2β) + (1/π)∫_0^{π/2} ln[(1 + sqrt(1 − k² sin²θ))/2] dθ,
  // differentiated numerically at 40 digits (mpmath 1.3: mp.quad, mp.diff). At β = 3 the
  // specific-heat bracket cancels from O(sech² 2β) to O(sech⁴ 2β); with K − E formed as a
  // difference it was 1.1e-7 off here.
  struct Row {
    double beta, d1, d2, tol;
  };
  for (Row r : {Row{1.0, 1.9971602041122511268, 0.023379564686542134481, 1e-13},
                Row{2.0, 1.9999990988116571145, 7.2131381790616156482e-6, 1e-11},
                Row{3.0, 1.9999999996979836695, 2.4161529122379646316e-9, 1e-10},
                Row{5.0, 1.999999999999999966, 2.7189467486053681615e-16, 1e-7}}) {
    OnsagerValues v = onsager(r.beta);
    INFO("beta = " << r.beta << ": d2 " << v.d2lnZ << " want " << r.d2);
    CHECK(std::fabs(v.dlnZ - r.d1) <= 4e-16 * r.d1);
    CHECK(std::fabs(v.d2lnZ - r.d2) <= r.tol * r.d2);
  }
  // β = 400 and 1000: cosh 2β overflows a double; lnZ/N = 2β (+ e^{−8β}-small terms),
  // the energy −2, the specific heat 0.
  for (double beta : {400.0, 1000.0}) {
    OnsagerValues v = onsager(beta);
    CHECK(v.lnZ == 2 * beta);
    CHECK(v.dlnZ == 2.0);
    CHECK(v.d2lnZ == 0.0);
  }
}

TEST_CASE("onsager: the Potts critical energy, and q = 2 against Onsager at beta_c") {
  // The q = 2 Potts model is the Ising model at beta/2 plus beta per site (docs/trg.md
  // §8.2), so its critical energy follows from Onsager's u(beta_c) = -sqrt(2):
  // u_Potts = -(1 + sqrt(2)/2) at beta = 2 beta_c = ln(1 + sqrt 2).
  CHECK(pottsBetaC(2) == doctest::Approx(2 * kIsingBetaC).epsilon(1e-15));
  CHECK(*pottsCriticalEnergy(2) ==
        doctest::Approx(-(1 + 0.5 * onsager(kIsingBetaC).dlnZ)).epsilon(1e-15));
  CHECK(*pottsCriticalEnergy(3) == doctest::Approx(-1.5773502691896257).epsilon(1e-15));
  CHECK(*pottsCriticalEnergy(4) == -1.5);
  CHECK(!pottsCriticalEnergy(5)); // first order: two energies coexist at beta_c
  // beta_c typed with 16 significant digits still counts; a neighbour does not.
  CHECK(isPottsBetaC(3, 1.005052538742381));
  CHECK(isPottsBetaC(3, pottsBetaC(3)));
  CHECK(!isPottsBetaC(3, 1.00505253874));
}

TEST_CASE("onsager: at high temperature the values keep their digits (the series below 0.02)") {
  // Reference: Onsager's integral and its derivatives at 40 digits (mpmath 1.2: mp.quad,
  // mp.diff). The closed forms for d/dbeta and d2 cancel like 1/beta^2 here: at
  // beta = 1e-8 they gave d/dbeta 11% off, at 1e-12 a negative specific heat.
  struct Row {
    double beta, lnz, d1, d2;
  };
  for (Row r : {Row{1e-12, 0.69314718055994530942, 2.0e-12, 2.0},
                Row{1e-5, 0.69314718065994530943, 2.0000000003333333334e-5, 2.0000000010000000002},
                Row{1e-3, 0.69314818056077864346, 0.0020000033333376000135, 2.0000100000213334278},
                Row{0.015, 0.69337222275554963408, 0.030011253242306800023, 2.0022510810767141078},
                Row{0.025, 0.69377250625464748058, 0.050052125082503489852, 2.0062583564466954998}}) {
    INFO("beta = " << r.beta);
    const OnsagerValues v = onsager(r.beta);
    CHECK(std::fabs(v.lnZ - r.lnz) <= 4e-16 * r.lnz);
    // Above 0.02 the closed form: its cancellation leaves 3.4e-14 at 0.025.
    CHECK(std::fabs(v.dlnZ - r.d1) <= (r.beta < 0.02 ? 1e-14 : 1e-13) * r.d1);
    CHECK(std::fabs(v.d2lnZ - r.d2) <= 1e-13 * r.d2);
    CHECK(v.specificHeat > 0);
  }
}
