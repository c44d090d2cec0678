//===- tests/frontend/trg_job.cpp - TrgRequest -> TrgOptions (CLI and Python) ---===//
#include <doctest/doctest.h>

#include <cmath>

#include "frontend/TrgJob.h"
#include "ir/Diagnostics.h"

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
