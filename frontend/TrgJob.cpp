//===- frontend/TrgJob.cpp - TrgRequest -> TrgOptions, for the CLI and Python ----===//
#include "frontend/TrgJob.h"

#include <climits>
#include <cmath>

#include "frontend/TrgMeasure.h"
#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"

namespace tessel::frontend {

namespace {

/// Runs a parser on a flag's value; its error names the flag.
template <class F> auto asFlag(const char *flag, F parse) {
  try {
    return parse();
  } catch (const Error &e) {
    throw withContext(e, flag);
  }
}

/// The driver's options are int: a larger value is an error here, not a wrapped one there.
int toInt(int64_t v, const char *flag) {
  if (v < INT_MIN || v > INT_MAX)
    throw Error(std::string("error: ") + flag + ": " + std::to_string(v) + " is out of range");
  return static_cast<int>(v);
}

} // namespace

TrgOptions trgOptions(const TrgRequest &r) {
  TrgOptions o;
  if (r.repeat < 0 || r.repeat > kTrgMaxRepeat)
    throw Error("error: --repeat must be an integer in [0, " + std::to_string(kTrgMaxRepeat) + "], got " +
                std::to_string(r.repeat));
  o.model = parseTrgModel(r.model, r.q);
  o.field = r.field == 0 ? 0.0 : r.field; // -0 is h = 0
  o.susceptibility = r.susceptibility;
  o.chi = r.chi;
  o.ranks = r.ranks;
  if (r.steps) {
    o.steps = toInt(*r.steps, "--steps");
  } else if (!r.ranks.empty() && !r.stepsAutoGiven) {
    o.steps = toInt(static_cast<int64_t>(r.ranks.size()), "--ranks");
  } else {
    o.stepsAuto = true;
    o.steps = kTrgStepsAutoMax;
  }
  o.mode = parseTrgMode(r.mode);
  o.svd = parseTrgSvd(r.svd);
  o.algorithm = parseTrgAlgorithm(r.algorithm);
  if (r.btrgKGiven) checkBtrgKApplies(o.algorithm);
  o.btrgK = r.btrgK;
  o.cft = r.cft;
  o.checkpoint = asFlag("--checkpoint", [&] { return passes::parseRematPolicy(r.checkpoint); });
  o.order = asFlag("--order", [&] { return passes::parseOrderStrategy(r.order); });
  o.width = toInt(r.width, "--width");
  o.second = r.second || r.susceptibility;
  if (r.secondMode != "forward-over-reverse" && r.secondMode != "reverse-over-reverse")
    throw Error("error: --second-mode: expected forward-over-reverse or reverse-over-reverse, got '" +
                ir::text::clipForMessage(r.secondMode) + "'");
  o.secondForwardOverReverse = r.secondMode == "forward-over-reverse";
  o.grad = r.grad || o.second;
  o.svdEps = r.eps;
  o.valueCheck = r.valueCheck;
  o.fuseElementwise = r.fuseElementwise;
  return o;
}

void checkTrgBeta(double beta, const std::string &flag) {
  if (!(beta > 0) || !std::isfinite(beta))
    throw Error("error: " + (flag.empty() ? "" : flag + ": ") +
                "beta must be finite and > 0, got " + ir::text::formatDouble(beta) +
                " (allowed: beta > 0, e.g. 0.3" + (flag == "--beta" ? " or 0.3,0.4,0.5)" : ")"));
}

void sweepTrgBetas(TrgDriver &drv, const std::vector<double> &betas, const TrgBetaSweepOptions &o,
                   const std::function<void(TrgBetaRow &&)> &row) {
  for (size_t i = 0; i < betas.size(); ++i) {
    if (o.owns && !o.owns(i)) continue;
    TrgBetaRow r;
    r.index = i;
    r.beta = betas[i];
    TrgProgress progress;
    if (o.onRun)
      progress = [&](const std::string &what, int64_t k, int64_t n) { o.onRun(i, what, k, n); };
    try {
      r.measurement = measureTrgBeta(drv, betas[i], o.repeat, o.rssBase, progress);
    } catch (const Error &e) {
      r.error = e.what();
      if (r.error.empty()) r.error = "error: trg: beta = " + ir::text::formatDouble(betas[i]) + " failed";
    } catch (const std::exception &e) {
      if (!o.captureInternalErrors) throw;
      r.error = std::string("error: internal error: ") + e.what();
    }
    row(std::move(r));
  }
}

} // namespace tessel::frontend
