//===- frontend/TrgSchedule.cpp - TRG options, rank schedules, SVD-input probes ===//
//
// What a TRG run is before it is compiled: mode names and the default pipeline, the
// validation of TrgOptions, the rank schedule derived from the singular values at one
// β (--ranks auto), and the probe that returns every step's two SVD inputs. See
// TrgDriver.h.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "frontend/TrgDriver.h"
#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "passes/PassManager.h"

namespace tessel::frontend {

using ir::text::formatDouble;

const char *trgModeName(TrgMode m) { return m == TrgMode::Staged ? "staged" : "whole"; }

TrgMode parseTrgMode(const std::string &s) {
  if (s == "staged") return TrgMode::Staged;
  if (s == "whole") return TrgMode::Whole;
  throw Error("error: --mode: unknown mode '" + s + "' (allowed: staged, whole)");
}

const char *trgSvdName(TrgSvd s) { return s == TrgSvd::Full ? "full" : "truncated"; }

TrgSvd parseTrgSvd(const std::string &s) {
  if (s == "full") return TrgSvd::Full;
  if (s == "truncated") return TrgSvd::Truncated;
  throw Error("error: --svd: unknown method '" + s + "' (allowed: full, truncated)");
}

std::string defaultTrgPipeline(passes::OrderStrategy order, TrgSvd svd) {
  // The registered pipelines order contractions pairwise; another strategy is an option
  // of their `order` pass.
  passes::Pipeline p = passes::Pipeline::parse(
      passes::lookupPipeline(svd == TrgSvd::Truncated ? "trg" : "trg-full-svd")->text);
  bool ordered = false;
  for (passes::PassInvocation &inv : p.passes)
    if (inv.name() == "order") {
      inv.set("strategy", passes::orderStrategyName(order));
      ordered = true;
    }
  if (!ordered) throw std::logic_error("the trg pipelines have no order pass");
  return p.str();
}

std::string trgPipeline(const TrgOptions &o) {
  return o.pipeline.empty() ? defaultTrgPipeline(o.order, o.svd) : o.pipeline;
}

void checkTrgStepCount(int64_t steps, TrgAlgorithm a, const std::string &flag) {
  // The lattice's 2^(steps·sitesLog2) sites must be a finite double.
  const int maxSteps = kTrgMaxSteps / trgStepSitesLog2(a);
  if (steps <= maxSteps) return;
  const bool hotrg = a == TrgAlgorithm::Hotrg;
  const std::string with = hotrg ? " with --algorithm hotrg" : "";
  const std::string why = std::string(" (the lattice's ") + (hotrg ? "4" : "2") +
                          "^steps sites must be a finite double; beyond ~" + (hotrg ? "30" : "60") +
                          " steps lnZ/N no longer changes in double precision)";
  if (flag == "--ranks")
    throw Error("error: --ranks has " + std::to_string(steps) + " entries (one per step), more than the " +
                std::to_string(maxSteps) + " steps a run can have" + with + why);
  throw Error("error: " + flag + " must be <= " + std::to_string(maxSteps) + with + ", got " +
              std::to_string(steps) + why);
}

double trgMultipletTol(const TrgOptions &o) {
  if (!(o.multipletTol > 0)) return 0;
  return o.field != 0 ? std::max(o.multipletTol, o.fieldPairTol) : o.multipletTol;
}

void validateTrgOptions(const TrgOptions &o) {
  if (o.chi < 2)
    throw Error("error: --chi must be an integer >= 2, got " + std::to_string(o.chi));
  if (o.steps < 1)
    throw Error("error: --steps must be an integer >= 1 (or auto), got " + std::to_string(o.steps));
  if (!o.ranks.empty()) checkTrgStepCount(static_cast<int64_t>(o.ranks.size()), o.algorithm, "--ranks");
  checkTrgStepCount(o.steps, o.algorithm, "--steps");
  if (o.width < 1)
    throw Error("error: --width must be an integer >= 1, got " + std::to_string(o.width));
  if (o.algorithm == TrgAlgorithm::Btrg) checkBtrgK(o.btrgK);
  if (o.cft && o.mode == TrgMode::Whole)
    throw Error("error: --cft reads the tensor of every step, which only the staged value sweep "
                "has (use --mode staged, the default)");
  if (!(o.svdEps >= 0) || !(o.svdEps <= kTrgMaxSvdEps))
    throw Error("error: --eps: the svd broadening must be in [0, " + formatDouble(kTrgMaxSvdEps) +
                "], got " + formatDouble(o.svdEps) +
                " (it removes the coupling of singular values closer than eps*s0: above 1e-6 "
                "it biases d(lnZ/N)/dbeta by more than 1e-11 relative; docs/trg.md section 5)");
  if (!(o.rankTol >= 0) || !std::isfinite(o.rankTol))
    throw Error("error: rank tolerance must be finite and >= 0, got " + formatDouble(o.rankTol));
  if (!(o.multipletTol >= 0) || !std::isfinite(o.multipletTol))
    throw Error("error: multiplet tolerance must be finite and >= 0, got " + formatDouble(o.multipletTol));
  if (!(o.fieldPairTol >= 0) || !std::isfinite(o.fieldPairTol))
    throw Error("error: field pair tolerance must be finite and >= 0, got " + formatDouble(o.fieldPairTol));
  checkTrgModel(o.model);
  if (!std::isfinite(o.field))
    throw Error("error: --field must be finite, got " + formatDouble(o.field));
  if (o.field != 0 && !o.model.hasField())
    throw Error("error: --field: the " + o.model.str() + " model has no field (only ising)");
  if (o.susceptibility && !o.model.hasField())
    throw Error("error: --susceptibility: the " + o.model.str() +
                " model has no field to differentiate by (only ising)");
  if (o.susceptibility && !o.second)
    throw Error("error: --susceptibility needs the second-order programs (--second)");
  if (o.stepsAuto && !o.ranks.empty())
    throw Error("error: --ranks gives the number of steps (one rank per step); with a given "
                "schedule use --steps N, not --steps auto");
  if (!o.ranks.empty()) {
    if (static_cast<int>(o.ranks.size()) != o.steps)
      throw Error("error: --ranks has " + std::to_string(o.ranks.size()) +
                  " entries but --steps is " + std::to_string(o.steps));
    checkTrgRanks(o.ranks, o.chi, o.model.states());
  }
}

std::vector<ir::Tensor> trgParameterInputs(const TrgModel &model, double beta, double field) {
  std::vector<ir::Tensor> v;
  v.push_back(ir::Tensor::scalar(beta));
  if (model.hasField()) v.push_back(ir::Tensor::scalar(field));
  return v;
}

std::vector<int64_t> deriveTrgRanks(double beta, int64_t chi, int steps, double tol,
                                    const std::string &pipeline, const TrgModel &model,
                                    double field) {
  TrgOptions o;
  o.model = model;
  o.field = field;
  o.chi = chi;
  o.steps = steps;
  o.rankTol = tol;
  o.pipeline = pipeline;
  if (!std::isfinite(beta) || beta <= 0)
    throw Error("error: trg: beta must be finite and > 0, got " + formatDouble(beta));
  // The value sweep of a driver without a given schedule derives it (TrgOptions::ranks).
  TrgDriver d(o);
  d.value(beta);
  return d.ranks();
}

std::vector<std::array<ir::Tensor, 2>> trgSvdInputs(double beta, const std::vector<int64_t> &ranks,
                                                    const std::string &pipeline,
                                                    const TrgModel &model, double field) {
  if (!std::isfinite(beta) || beta <= 0)
    throw Error("error: trg: beta must be finite and > 0, got " + formatDouble(beta));
  checkTrgRanks(ranks, INT64_MAX, model.states());
  passes::PassManager pm(passes::Pipeline::parse(
      pipeline.empty() ? defaultTrgPipeline(passes::OrderStrategy::Pairwise) : pipeline, "--passes"));
  rt::Engine engine(1);
  ir::Program init = buildTrgInit(model);
  pm.run(init);
  ir::Tensor T = std::move(engine.run(*rt::prepare(init), trgParameterInputs(model, beta, field))[0]);
  std::map<std::pair<int64_t, int64_t>, std::shared_ptr<const rt::Plan>> plans;
  std::vector<std::array<ir::Tensor, 2>> out;
  int64_t D = model.states();
  for (int64_t Dp : ranks) {
    auto &plan = plans[{D, Dp}];
    if (!plan) {
      TrgStepOptions so;
      so.outputSvdInputs = true;
      ir::Program p = buildTrgStep(D, Dp, so);
      pm.run(p);
      plan = rt::prepare(p);
    }
    auto r = engine.run(*plan, {T});
    out.push_back({std::move(r[2]), std::move(r[3])});
    T = std::move(r[1]);
    D = Dp;
  }
  return out;
}

std::string formatTrgRanks(const std::vector<int64_t> &r) {
  std::string s;
  for (size_t i = 0; i < r.size();) {
    size_t j = i;
    while (j < r.size() && r[j] == r[i]) ++j;
    if (!s.empty()) s += ",";
    if (j - i > 2) {
      s += std::to_string(r[i]) + "x" + std::to_string(j - i);
      i = j;
    } else {
      s += std::to_string(r[i]);
      ++i;
    }
  }
  return s;
}

std::vector<int64_t> parseTrgRanks(const std::string &text, const std::string &flag) {
  auto bad = [&](llvm::StringRef item, const std::string &why) {
    return Error("error: " + flag + ": '" + ir::text::clipForMessage(item) + "' " + why);
  };
  llvm::SmallVector<llvm::StringRef, 16> items;
  llvm::StringRef(text).split(items, ',', -1, /*KeepEmpty=*/true);
  std::vector<int64_t> ranks;
  for (llvm::StringRef item : items) {
    auto [rankText, countText] = item.split('x');
    // Decimal digits (after an optional '-') too many for 64 bits are out of range, not
    // "not a rank".
    auto integer = [&](llvm::StringRef t, long long &v) {
      t = t.trim();
      if (!t.getAsInteger(10, v)) return true;
      llvm::StringRef digits = t.startswith("-") ? t.drop_front() : t;
      if (digits.size() >= 19 && digits.find_first_not_of("0123456789") == llvm::StringRef::npos)
        throw bad(item, "is out of the range of a 64-bit integer");
      return false;
    };
    long long rank = 0, count = 1;
    if (!integer(rankText, rank) || (item.contains('x') && !integer(countText, count)))
      throw bad(item, "is not a rank (an integer, or <rank>x<count>: 2,4,4,16x17 is 20 steps)");
    if (count < 1) throw bad(item, "repeats a rank " + std::to_string(count) + " times (the count must be >= 1)");
    // The most steps any algorithm allows (checkTrgStepCount judges the algorithm's own).
    if (count > kTrgMaxSteps - static_cast<long long>(ranks.size()))
      throw Error("error: " + flag + ": more than " + std::to_string(kTrgMaxSteps) +
                  " entries (one per step; no run has more than " + std::to_string(kTrgMaxSteps) + " steps)");
    ranks.insert(ranks.end(), static_cast<size_t>(count), static_cast<int64_t>(rank));
  }
  return ranks;
}

} // namespace tessel::frontend
