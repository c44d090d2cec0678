//===- tests/frontend/trg_job.cpp - TrgRequest -> TrgOptions (CLI and Python) ---===//
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>

#include "frontend/TrgJob.h"
#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"

using namespace tessel;
using namespace tessel::frontend;

TEST_CASE("trg job: the implications and defaults both front ends share") {
  TrgRequest r;
  TrgOptions o = trgOptions(r);
  CHECK(o.stepsAuto);
  CHECK(o.steps == kTrgStepsAutoMax);
  CHECK(!o.grad);
  CHECK(!o.second);
  CHECK(o.secondForwardOverReverse);
  CHECK(o.svd == TrgSvd::Truncated);
  CHECK(o.checkpoint == passes::RematPolicy::Store);
  CHECK(o.order == passes::OrderStrategy::Pairwise);

  r.susceptibility = true; // needs the second derivative, which needs the first
  r.field = -0.0;
  o = trgOptions(r);
  CHECK(o.second);
  CHECK(o.grad);
  CHECK(o.field == 0);
  CHECK(!std::signbit(o.field));

  r = TrgRequest{};
  r.ranks = {2, 4, 4};
  o = trgOptions(r);
  CHECK(!o.stepsAuto);
  CHECK(o.steps == 3);
  r.stepsAutoGiven = true; // the driver refuses auto with a schedule
  CHECK(trgOptions(r).stepsAuto);
  r.steps = 5;
  CHECK(trgOptions(r).steps == 5);

  r = TrgRequest{};
  r.model = "potts";
  r.q = 3;
  r.algorithm = "btrg";
  r.secondMode = "reverse-over-reverse";
  r.checkpoint = "save-svd";
  o = trgOptions(r);
  CHECK(o.model.kind == TrgModel::Kind::Potts);
  CHECK(o.model.q == 3);
  CHECK(o.algorithm == TrgAlgorithm::Btrg);
  CHECK(!o.secondForwardOverReverse);
  CHECK(o.checkpoint == passes::RematPolicy::SaveSvd);
}

TEST_CASE("trg job: errors name the flag and the allowed values") {
  auto err = [](auto edit) {
    TrgRequest r;
    edit(r);
    try {
      trgOptions(r);
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(err([](TrgRequest &r) { r.repeat = -1; }) == "error: --repeat must be an integer in [0, 1000000], got -1");
  CHECK(err([](TrgRequest &r) { r.checkpoint = "never"; }).rfind("error: --checkpoint: unknown checkpoint policy 'never'", 0) == 0);
  CHECK(err([](TrgRequest &r) { r.order = "fast"; }).rfind("error: --order: ", 0) == 0);
  CHECK(err([](TrgRequest &r) { r.secondMode = "sideways"; }) ==
        "error: --second-mode: expected forward-over-reverse or reverse-over-reverse, got 'sideways'");
  CHECK(err([](TrgRequest &r) { r.width = int64_t(1) << 40; }) == "error: --width: 1099511627776 is out of range");
  CHECK(err([](TrgRequest &r) { r.mode = "fast"; }).find("unknown mode 'fast' (allowed: staged, whole)") != std::string::npos);
  CHECK_THROWS_WITH(checkTrgBeta(0.0), "error: beta must be finite and > 0, got 0 (allowed: beta > 0, e.g. 0.3)");
  CHECK_THROWS_WITH(checkTrgBeta(-1.0, "--beta-range"),
                    "error: --beta-range: beta must be finite and > 0, got -1 (allowed: beta > 0, e.g. 0.3)");
  CHECK_THROWS_WITH(checkTrgBeta(NAN), doctest::Contains("beta must be finite and > 0"));
  CHECK_NOTHROW(checkTrgBeta(0.44));
}

TEST_CASE("trg job: the sweep over beta goes on after a failed beta; owns picks an MPI rank's share") {
  // beta = 800 with the structural schedule keeps an exact zero singular value at step 2
  // (tests/lit/trg/trg-errors.test has the same sweep on the command line).
  TrgRequest r;
  r.chi = 8;
  r.ranks = {2, 4, 4, 8, 8, 8};
  TrgDriver drv(trgOptions(r));
  const std::vector<double> betas = {0.3, 800.0, 0.5};
  std::vector<TrgBetaRow> rows;
  TrgBetaSweepOptions o;
  std::vector<std::string> runs;
  o.onRun = [&](size_t i, const std::string &what, int64_t, int64_t) { runs.push_back(std::to_string(i) + " " + what); };
  sweepTrgBetas(drv, betas, o, [&](TrgBetaRow &&row) { rows.push_back(std::move(row)); });
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].measurement.has_value());
  CHECK(rows[0].error.empty());
  CHECK_FALSE(rows[1].measurement.has_value());
  CHECK(rows[1].beta == 800.0);
  CHECK(rows[1].error.starts_with("error: trg: step 2 (2->4, beta = 800): the smallest kept singular value"));
  REQUIRE(rows[2].measurement.has_value());
  CHECK(rows[2].index == 2);
  // Each beta's value is that of a driver that ran it alone.
  TrgDriver alone(trgOptions(r));
  CHECK(rows[2].measurement->value.lnZ == alone.value(0.5).lnZ);
  CHECK(runs == std::vector<std::string>{"0 value", "1 value", "2 value"});

  // An MPI rank's share: the odd indices only.
  rows.clear();
  o.owns = [](size_t i) { return i % 2 == 1; };
  sweepTrgBetas(drv, betas, o, [&](TrgBetaRow &&row) { rows.push_back(std::move(row)); });
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].index == 1);
  CHECK_FALSE(rows[0].error.empty());
}

TEST_CASE("trg job: one column list for the CSV header, a CSV row and the JSON keys") {
  CHECK(trgCsvHeader() ==
        "beta,temperature,lnZ_per_site,exact_lnZ_per_site,dlnZ_dbeta,exact_dlnZ_dbeta,"
        "energy_per_site,exact_energy_per_site,d2lnZ_dbeta2,exact_d2lnZ_dbeta2,specific_heat,"
        "exact_specific_heat,field,dlnZ_dh,magnetization,d2lnZ_dbeta_dh,d2lnZ_dh2,susceptibility,steps");
  TrgRequest r;
  r.chi = 8;
  r.steps = 6;
  r.grad = true;
  TrgDriver drv(trgOptions(r));
  const TrgBetaMeasurement m = measureTrgBeta(drv, 0.4, 0, 0);
  const std::string row = trgCsvRow(m, drv.options(), drv.ranks().size());
  // beta, T, lnZ/N, exact, d/dbeta, exact, energy (= −d/dbeta, exactly), exact, the
  // second order (nan) beside its exact value, the field h = 0, nan for the h
  // derivatives (not computed at h = 0 through svd_topk), and the steps.
  const std::string lnz = ir::text::formatDouble(m.value.lnZ), d1 = ir::text::formatDouble(*m.dlnZ()),
                    e = ir::text::formatDouble(-*m.dlnZ());
  CHECK(row.starts_with("0.4,2.5," + lnz + ","));
  CHECK(row.find("," + d1 + ",") != std::string::npos);
  CHECK(row.find("," + e + ",") != std::string::npos);
  CHECK(row.ends_with(",0,nan,nan,nan,nan,nan,6"));
  TrgReportContext ctx;
  const nlohmann::json j = trgBetaJson(m, drv, ctx);
  for (const TrgColumn &c : trgPhysicsColumns(m, drv.options())) {
    INFO(c.name);
    REQUIRE(j.contains(c.name));
    if (c.value) CHECK(j[c.name].get<double>() == *c.value);
    else CHECK(j[c.name].is_null());
  }
  // The table reads the same list: each labelled value beside its exact value and the
  // difference, and why the h-derivative is absent.
  const std::string text = trgBetaText(m, drv, ctx);
  char line[160];
  std::snprintf(line, sizeof line, "\n  energy per site   %.15g  exact %.15g  err %+.3e\n", -*m.dlnZ(),
                -*m.exactDlnZ, -*m.dlnZ() + *m.exactDlnZ);
  CHECK(text.find(line) != std::string::npos);
  std::snprintf(line, sizeof line, "\n  lnZ/N             %.15g  exact %.15g", m.value.lnZ, *m.exactLnZ);
  CHECK(text.find(line) != std::string::npos);
  CHECK(text.starts_with("beta = 0.4  (T = 2.5)\n  steps             6 (64 sites); ranks "));
  CHECK(text.find("\n  d(lnZ/N)/dh       not computed at h = 0 with svd_topk") != std::string::npos);
  CHECK(text.find("specific heat") == std::string::npos); // second order did not run

  // Second order's refusal of the h-derivatives (below T_c, the ordered pair's gap at
  // rounding level by 16 steps) stands on its own row, labelled "refused".
  r.steps = 16;
  r.chi = 16;
  r.susceptibility = true;
  TrgDriver ds(trgOptions(r));
  const TrgBetaMeasurement ms = measureTrgBeta(ds, 0.5, 0, 0);
  REQUIRE_FALSE(ms.second.refused.empty());
  const std::string refusedText = trgBetaText(ms, ds, ctx);
  CHECK(refusedText.find("\n  refused           d2/dbeta dh and d2/dh2 refused: ") != std::string::npos);
  CHECK(refusedText.find("susceptibility") == std::string::npos);
}
