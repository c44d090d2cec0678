//===- frontend/TrgMeasure.cpp - One β of the TRG, timed, with its report --------===//
#include "frontend/TrgMeasure.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "frontend/Onsager.h"
#include "ir/TextUtil.h"

namespace tessel::frontend {
namespace {

using Clock = std::chrono::steady_clock;

std::string fmt(const char *f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

/// Runs `f` once (first), once more untimed (warm-up), then `repeat` timed times.
template <class F>
RunTimes timeRuns(F &&f, int64_t repeat, const TrgProgress &progress, const std::string &what) {
  RunTimes s;
  s.have = true;
  const int64_t total = repeat > 0 ? repeat + 2 : 1;
  if (progress) progress(what, 1, total);
  auto t0 = Clock::now();
  f();
  s.first = rt::msSince(t0);
  if (repeat > 0) {
    if (progress) progress(what + " (warm-up)", 2, total);
    f();
    std::vector<double> ms;
    for (int64_t i = 0; i < repeat; ++i) {
      if (progress) progress(what, i + 3, total);
      auto t1 = Clock::now();
      f();
      ms.push_back(rt::msSince(t1));
    }
    s.steady = rt::summarize(ms);
  }
  return s;
}

/// Runs `f` (the timed runs of one kind) inside a fresh peak-RSS window.
template <typename F> RunTimes measureMemory(PeakMemory &m, int64_t rssBase, F &&f) {
  m.have = true;
  m.window = rt::resetPeakResident();
  RunTimes s = f();
  const int64_t peak = rt::peakResidentBytes();
  if (peak >= 0 && rssBase >= 0) m.measured = peak - rssBase;
  return s;
}

nlohmann::json optNumber(const std::optional<double> &v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json loadJson(const std::vector<double> &l) {
  return l.size() == 3 ? nlohmann::json(l) : nlohmann::json(nullptr);
}

nlohmann::json runTimesJson(const RunTimes &s) {
  if (!s.have) return nullptr;
  nlohmann::json j;
  j["first"] = roundToMicroseconds(s.first);
  const rt::Summary &t = s.steady;
  if (t.n) {
    j["min"] = roundToMicroseconds(t.min);
    j["median"] = roundToMicroseconds(t.median);
    j["p90"] = roundToMicroseconds(t.p90);
    j["max"] = roundToMicroseconds(t.max);
  } else {
    j["min"] = j["median"] = j["p90"] = j["max"] = nullptr;
  }
  j["n"] = t.n;
  return j;
}

nlohmann::json peakMemoryJson(const PeakMemory &m) {
  if (!m.have) return nullptr;
  return {{"planned_peak_bytes", m.planned},
          {"measured_peak_rss_bytes", m.measured >= 0 ? nlohmann::json(m.measured) : nlohmann::json(nullptr)},
          {"rss_window", m.window ? "runs" : "process"}};
}

nlohmann::json groupsJson(const TrgDriver &drv) {
  nlohmann::json gs = nlohmann::json::array();
  for (const auto &g : drv.groups())
    gs.push_back({{"group", g.group}, {"uses", g.uses}, {"ops", g.ops},
                  {"compile_ms", roundToMicroseconds(g.compileMs)},
                  {"prepare_ms", roundToMicroseconds(g.prepareMs)},
                  {"peak_live_bytes", g.peakLiveBytes}});
  return gs;
}

} // namespace

TopkCounts TopkCounts::between(const rt::TruncatedSvdStats &a, const rt::TruncatedSvdStats &b) {
  TopkCounts c;
  c.calls = b.topkCalls - a.topkCalls;
  c.iterations = b.topkIterations - a.topkIterations;
  c.fallbacks = b.topkFallbacks - a.topkFallbacks;
  c.complementCalls = b.complementCalls - a.complementCalls;
  c.complementIterations = b.complementIterations - a.complementIterations;
  c.complementFallbacks = b.complementFallbacks - a.complementFallbacks;
  c.complementBroadened = b.complementBroadened - a.complementBroadened;
  return c;
}

void TopkCounts::add(const TopkCounts &o) {
  calls += o.calls;
  iterations += o.iterations;
  fallbacks += o.fallbacks;
  complementCalls += o.complementCalls;
  complementIterations += o.complementIterations;
  complementFallbacks += o.complementFallbacks;
  complementBroadened += o.complementBroadened;
}

nlohmann::json TopkCounts::json() const {
  return {{"calls", calls},
          {"iterations", iterations},
          {"fallbacks", fallbacks},
          {"complement_calls", complementCalls},
          {"complement_cg_iterations", complementIterations},
          {"complement_fallbacks", complementFallbacks},
          {"complement_broadened", complementBroadened}};
}

std::string TopkCounts::text() const {
  auto mean = [](int64_t a, int64_t b) {
    return b ? fmt("%.1f", double(a) / double(b)) : std::string("-");
  };
  return std::to_string(calls) + " top-k SVDs (" + mean(iterations, calls) +
         " Krylov blocks each, " + std::to_string(fallbacks) + " fell back to gesdd); " +
         std::to_string(complementCalls) + " complement solves (" +
         mean(complementIterations, complementCalls) + " CG iterations each, " +
         std::to_string(complementBroadened) + " with the broadened tail, " +
         std::to_string(complementFallbacks) + " fell back to the full rule)";
}

std::optional<double> TrgBetaMeasurement::dlnZ() const {
  return gradTimes.have || secondTimes.have ? grad.dlnZ : std::nullopt;
}
std::optional<double> TrgBetaMeasurement::d2lnZ() const {
  return secondTimes.have ? second.d2lnZ : std::nullopt;
}
std::optional<double> TrgBetaMeasurement::dlnZdh() const {
  return gradTimes.have || secondTimes.have ? grad.dlnZdh : std::nullopt;
}
std::optional<double> TrgBetaMeasurement::d2lnZdbetadh() const {
  return secondTimes.have ? second.d2lnZdbetadh : std::nullopt;
}
std::optional<double> TrgBetaMeasurement::d2lnZdh2() const {
  return secondTimes.have ? second.d2lnZdh2 : std::nullopt;
}
std::optional<double> TrgBetaMeasurement::magnetization() const {
  const std::optional<double> d = dlnZdh();
  return d ? std::optional<double>(*d / beta) : std::nullopt;
}
std::optional<double> TrgBetaMeasurement::susceptibility() const {
  const std::optional<double> d = d2lnZdh2();
  return d ? std::optional<double>(*d / beta) : std::nullopt;
}

void trgExactValues(TrgBetaMeasurement &m, const TrgModel &model, double field) {
  double scale = 1, shift = 0; // lnZ/N = lnZ_Ising(scale·β)/N + shift·β
  if (model.kind == TrgModel::Kind::Ising) {
    if (field != 0) return;
  } else if (model.q == 2) {
    scale = 0.5;
    shift = 1;
  } else {
    // q = 3, 4: only the energy at β_c is known in closed form.
    const std::optional<double> uc = pottsCriticalEnergy(model.q);
    if (uc && isPottsBetaC(model.q, m.beta)) m.exactDlnZ = -*uc;
    return;
  }
  const double b = scale * m.beta;
  m.exactLnZ = onsagerLnZ(b) + shift * m.beta;
  const OnsagerValues ex = onsager(b);
  m.exactDlnZ = scale * ex.dlnZ + shift;
  if (!std::isfinite(ex.d2lnZ)) return; // β_c: d² and c diverge
  m.exactD2lnZ = scale * scale * ex.d2lnZ;
  m.exactSpecificHeat = m.beta * m.beta * *m.exactD2lnZ;
}

TrgBetaMeasurement measureTrgBeta(TrgDriver &drv, double beta, int64_t repeat, int64_t rssBase,
                                  const TrgProgress &progress) {
  TrgBetaMeasurement m;
  m.beta = beta;
  const TrgOptions &opts = drv.options();
  m.loadBefore = rt::readLoadAverage();
  const rt::TruncatedSvdStats svdBefore = drv.svdStats();
  auto kind = [&](RunTimes &times, PeakMemory &mem, TrgResult &out, const char *what,
                  TrgResult (TrgDriver::*run)(double)) {
    times = measureMemory(mem, rssBase, [&] {
      return timeRuns(
          [&] {
            out = (drv.*run)(beta);
            mem.planned = std::max(mem.planned, drv.plannedPeakBytes());
          },
          repeat, progress, what);
    });
  };
  // Timed runs (repeat > 0) time every kind the driver has; otherwise one run of the
  // highest order gives every requested number (second order returns lnZ/N and the first
  // derivatives too).
  const bool all = repeat > 0;
  if (all || !opts.grad) kind(m.valueTimes, m.valueMemory, m.value, "value", &TrgDriver::value);
  if (opts.grad && (all || !opts.second))
    kind(m.gradTimes, m.gradMemory, m.grad, "value+grad", &TrgDriver::valueAndGrad);
  if (opts.second) kind(m.secondTimes, m.secondMemory, m.second, "second", &TrgDriver::second);
  if (!m.valueTimes.have) m.value = opts.second ? m.second : m.grad;
  if (!m.gradTimes.have && opts.second) m.grad = m.second;
  m.loadAfter = rt::readLoadAverage();
  m.topk = TopkCounts::between(svdBefore, drv.svdStats());
  if (opts.cft) m.cft = drv.cftData(beta); // after the counters: not part of the timed runs

  trgExactValues(m, opts.model, opts.field);
  return m;
}

std::vector<TrgColumn> trgPhysicsColumns(const TrgBetaMeasurement &m, const TrgOptions &opts) {
  const double beta = m.beta;
  const std::optional<double> d1 = m.dlnZ(), d2 = m.d2lnZ(), dh = m.dlnZdh();
  auto negated = [](const std::optional<double> &v) { return v ? std::optional<double>(-*v) : std::nullopt; };
  auto col = [](const char *name, std::optional<double> v, const char *label = nullptr,
                const char *note = nullptr) {
    TrgColumn c;
    c.name = name;
    c.value = v;
    c.label = label;
    c.note = note;
    return c;
  };
  auto exact = [&](const char *name, std::optional<double> v) {
    TrgColumn c = col(name, v);
    c.exact = true;
    return c;
  };
  std::vector<TrgColumn> cols = {
      col("beta", beta),
      col("temperature", 1 / beta),
      col("lnZ_per_site", m.value.lnZ, "lnZ/N"),
      exact("exact_lnZ_per_site", m.exactLnZ),
      col("dlnZ_dbeta", d1, "d(lnZ/N)/dbeta"),
      exact("exact_dlnZ_dbeta", m.exactDlnZ),
      col("energy_per_site", negated(d1), "energy per site"),
      exact("exact_energy_per_site", negated(m.exactDlnZ)),
      col("d2lnZ_dbeta2", d2, "d2(lnZ/N)/dbeta2"),
      exact("exact_d2lnZ_dbeta2", m.exactD2lnZ),
      col("specific_heat", d2 ? std::optional<double>(beta * beta * *d2) : std::nullopt, "specific heat"),
      exact("exact_specific_heat", m.exactSpecificHeat),
      col("field", opts.model.hasField() ? std::optional<double>(opts.field) : std::nullopt),
      col("dlnZ_dh", dh, "d(lnZ/N)/dh"),
      col("magnetization", m.magnetization(), "magnetization", "(m = (1/beta) d(lnZ/N)/dh)"),
      col("d2lnZ_dbeta_dh", m.d2lnZdbetadh(), "d2(lnZ/N)/dbetadh"),
      col("d2lnZ_dh2", m.d2lnZdh2(), "d2(lnZ/N)/dh2"),
      col("susceptibility", m.susceptibility(), "susceptibility", "(chi_m = (1/beta) d2(lnZ/N)/dh2)")};
  for (TrgColumn &c : cols) {
    const std::string name = c.name;
    // ∂/∂h is the first-order run's (m.grad: a copy of m.second where only that ran).
    if (name == "dlnZ_dh" && !dh && d1 && !m.grad.dhRefused.empty()) {
      c.absent = m.grad.dhRefused;
      c.absentLabel = "refused";
    } else if (name == "dlnZ_dh" && !dh && d1 && opts.model.hasField())
      c.absent = "not computed at h = 0 with svd_topk (0 by symmetry; its tolerance breaks the symmetry "
                 "below T_c: --second or --svd full computes it, docs/trg.md section 8.1)";
    // Second order's refusal (TrgResult::refused: both h-derivatives, or ∂²/∂β∂h alone at
    // h = 0) stands on the ∂²/∂β∂h row.
    if (name == "d2lnZ_dbeta_dh" && !m.second.refused.empty()) {
      c.absent = m.second.refused;
      c.absentLabel = "refused";
    }
  }
  return cols;
}

namespace {

/// Which SVDs a split cuts: Ma, Mb (TRG, BTRG) or the environments of HOTRG's two
/// half-steps (TrgMultipletSplit::matrices).
std::string splitMatrices(unsigned m, TrgAlgorithm a) {
  if (a == TrgAlgorithm::Hotrg)
    return m == 3 ? "both environments" : m == 1 ? "environment 1" : "environment 2";
  return m == 3 ? "Ma and Mb" : m == 1 ? "Ma" : "Mb";
}

/// The report's lines on steps whose cut splits a multiplet (TrgResult::multipletSplits).
std::string multipletSplitText(const std::vector<TrgMultipletSplit> &splits, const TrgOptions &opts) {
  if (splits.empty()) return "";
  const TrgMultipletSplit &f = splits.front();
  const std::string pad(20, ' ');
  std::string os = "  multiplet cut     step " + std::to_string(f.step) + " (" + std::to_string(f.D) + "->" +
                   std::to_string(f.Dp) + ", " + splitMatrices(f.matrices, opts.algorithm) + "): s[" +
                   std::to_string(f.Dp - 1) + "] = " + fmt("%.12e", f.kept) + " and s[" + std::to_string(f.Dp) +
                   "] = " + fmt("%.12e", f.cut) + " of s[0] = " + fmt("%.6e", f.s0) + " (relative gap " +
                   fmt("%.1e", (f.kept - f.cut) / f.kept) + ")\n";
  if (splits.size() > 1) {
    os += pad + "also step";
    const size_t shown = std::min<size_t>(splits.size(), 9);
    os += shown > 2 ? "s " : " ";
    for (size_t i = 1; i < shown; ++i) os += (i > 1 ? ", " : "") + std::to_string(splits[i].step);
    if (splits.size() > shown) os += ", ... (" + std::to_string(splits.size()) + " steps in all)";
    os += "\n";
  }
  if (opts.field != 0)
    os += pad + "which of its vectors are kept is the SVD routine's choice, or for a pair the field\n" + pad +
          "splits changes with beta and h: lnZ/N and its derivatives depend on the routine and\n" + pad +
          "are not smooth there (docs/trg.md section 2.4);\n";
  else
    os += pad + "which of its vectors are kept is the SVD routine's choice: lnZ/N and its derivatives\n" + pad +
          "depend on the routine there (docs/trg.md section 2.4: 1.3e-10 in lnZ/N in its example);\n";
  os += pad + (opts.ranks.empty() ? "the derived schedule keeps a split only where the values above it are half\n" +
                                        pad + "of D' or fewer\n"
                                  : std::string("without --ranks the derived schedule keeps the values above such a\n") +
                                        pad + "multiplet\n");
  return os;
}

/// "  label   " padded to the table's value column.
std::string tableLabel(const std::string &label) {
  std::string l = "  " + label;
  l.resize(std::max<size_t>(l.size() + 1, 20), ' ');
  return l;
}

} // namespace

std::string trgCsvHeader() {
  std::string h;
  for (const TrgColumn &c : trgPhysicsColumns(TrgBetaMeasurement{}, TrgOptions{})) h += std::string(c.name) + ",";
  return h + "steps";
}

std::string trgCsvRow(const TrgBetaMeasurement &m, const TrgOptions &opts, size_t steps) {
  std::string row;
  for (const TrgColumn &c : trgPhysicsColumns(m, opts))
    row += (c.value ? ir::text::formatDouble(*c.value) : std::string("nan")) + ",";
  return row + std::to_string(steps);
}

std::string trgBetaText(const TrgBetaMeasurement &m, const TrgDriver &drv, const TrgReportContext &ctx) {
  const TrgOptions &opts = drv.options();
  const size_t steps = drv.ranks().size();
  std::string os = "beta = " + ir::text::formatDouble(m.beta) + "  (T = " + fmt("%.15g", 1 / m.beta) + ")";
  if (ctx.mpiRanks > 1)
    os += "  rank " + std::to_string(ctx.rank) + " of " + std::to_string(ctx.mpiRanks) + ", width " +
          std::to_string(opts.width);
  os += "\n  steps             " + std::to_string(steps) +
        (opts.stepsAuto ? (drv.stepsConverged() ? " (converged: infinite lattice)"
                                                : " (NOT converged within the step limit: an estimate "
                                                  "of the infinite lattice)")
                        : " (" + fmt("%.15g", std::ldexp(1.0, static_cast<int>(steps) * opts.sitesLog2())) +
                              " sites)") +
        "; ranks " + formatTrgRanks(drv.ranks()) + "\n";
  const std::vector<TrgColumn> cols = trgPhysicsColumns(m, opts);
  for (size_t i = 0; i < cols.size(); ++i) {
    const TrgColumn &c = cols[i];
    if (!c.label) continue;
    if (!c.value) {
      if (!c.absent.empty()) os += tableLabel(c.absentLabel ? c.absentLabel : c.label) + c.absent + "\n";
      continue;
    }
    os += tableLabel(c.label) + fmt("%.15g", *c.value);
    if (i + 1 < cols.size() && cols[i + 1].exact && cols[i + 1].value)
      os += "  exact " + fmt("%.15g", *cols[i + 1].value) + "  err " + fmt("%+.3e", *c.value - *cols[i + 1].value);
    if (c.note) os += std::string("  ") + c.note;
    os += "\n";
  }
  os += multipletSplitText(m.value.multipletSplits, opts);
  // Without --repeat only the highest order ran (it gives every lower one).
  const struct {
    const char *run, *memory;
    const RunTimes &times;
    const PeakMemory &peak;
  } kinds[] = {{"  run value         ", "  memory value      ", m.valueTimes, m.valueMemory},
               {"  run value+grad    ", "  memory value+grad ", m.gradTimes, m.gradMemory},
               {"  run second        ", "  memory second     ", m.secondTimes, m.secondMemory}};
  for (const auto &k : kinds)
    if (k.times.have) os += k.run + runTimesText(k.times) + "\n";
  for (const auto &k : kinds)
    if (k.times.have) os += k.memory + peakMemoryText(k.peak, ctx.rssBase) + "\n";
  os += "  loadavg           before " + rt::formatLoadAverage(m.loadBefore) + " | after " +
        rt::formatLoadAverage(m.loadAfter) + "\n";
  if (m.topk.calls + m.topk.complementCalls > 0) os += "  svd_topk          " + m.topk.text() + "\n";
  if (!m.cft.empty()) os += trgCftText(m.cft, opts.sitesLog2());
  return os;
}

nlohmann::json trgBetaJson(const TrgBetaMeasurement &m, const TrgDriver &drv,
                           const TrgReportContext &ctx) {
  const TrgOptions &opts = drv.options();
  nlohmann::json j;
  j["model"] = opts.model.kind == TrgModel::Kind::Ising ? "ising" : "potts";
  j["q"] = opts.model.states();
  j["algorithm"] = trgAlgorithmName(opts.algorithm);
  j["btrg_k"] = opts.algorithm == TrgAlgorithm::Btrg ? nlohmann::json(opts.btrgK) : nlohmann::json(nullptr);
  j["chi"] = opts.chi;
  j["eps"] = opts.svdEps;
  const int steps = static_cast<int>(drv.ranks().size());
  j["steps"] = steps;
  j["lattice"] = opts.stepsAuto ? "infinite" : "periodic";
  j["steps_converged"] = drv.stepsConverged();
  j["sites"] = opts.stepsAuto ? nlohmann::json(nullptr)
                              : nlohmann::json(std::ldexp(1.0, steps * opts.sitesLog2()));
  j["mode"] = trgModeName(opts.mode);
  j["checkpoint"] = ctx.checkpoint;
  j["order"] = ctx.order;
  j["width"] = opts.width;
  j["rank"] = ctx.rank;
  j["mpi_ranks"] = ctx.mpiRanks;
  j["svd"] = opts.pipeline.empty() ? trgSvdName(opts.svd) : "as --passes";
  j["svd_topk"] = m.topk.json();
  if (opts.cft) {
    nlohmann::json rows = nlohmann::json::array();
    for (const TrgCftRow &c : m.cft) {
      nlohmann::json x = nlohmann::json::array();
      for (double v : c.x) x.push_back(std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr));
      rows.push_back({{"step", c.step}, {"D", c.D},
                      {"c", std::isfinite(c.c) ? nlohmann::json(c.c) : nlohmann::json(nullptr)},
                      {"x", x}});
    }
    j["cft"] = rows;
    const TrgCftPlateau pl = trgCftPlateau(m.cft, opts.sitesLog2());
    j["cft_plateau"] = pl.found ? nlohmann::json{{"first_step", pl.firstStep}, {"last_step", pl.lastStep},
                                                 {"c", pl.c}, {"c_spread", pl.cSpread}, {"x", pl.x},
                                                 {"x_spread", pl.xSpread}}
                                : nlohmann::json(nullptr);
  } else {
    j["cft"] = nullptr;
    j["cft_plateau"] = nullptr;
  }
  j["ranks"] = drv.ranks();
  j["ranks_probe_ms"] =
      ctx.ranksProbeMs >= 0 ? nlohmann::json(roundToMicroseconds(ctx.ranksProbeMs)) : nlohmann::json(nullptr);
  for (const TrgColumn &c : trgPhysicsColumns(m, opts)) j[c.name] = optNumber(c.value);
  std::string refused = m.grad.dhRefused;
  if (!m.second.refused.empty()) refused += (refused.empty() ? "" : "; ") + m.second.refused;
  j["refused"] = refused.empty() ? nlohmann::json(nullptr) : nlohmann::json(refused);
  nlohmann::json splits = nlohmann::json::array();
  for (const TrgMultipletSplit &s : m.value.multipletSplits)
    splits.push_back({{"step", s.step}, {"D", s.D}, {"D_prime", s.Dp}, {"matrices", splitMatrices(s.matrices, opts.algorithm)},
                      {"kept", s.kept}, {"cut", s.cut}, {"s0", s.s0}});
  j["multiplet_splits"] = splits;
  nlohmann::json t;
  t["compile"] = roundToMicroseconds(drv.compileMs());
  t["prepare"] = roundToMicroseconds(drv.prepareMs());
  t["value"] = runTimesJson(m.valueTimes);
  t["value_and_grad"] = runTimesJson(m.gradTimes);
  t["second"] = runTimesJson(m.secondTimes);
  j["timing_ms"] = t;
  j["compile_groups"] = groupsJson(drv);
  j["ops"] = drv.totalOps();
  j["repeat"] = ctx.repeat;
  j["passes"] = trgPipeline(opts);
  j["blas"] = ctx.blas;
  j["loadavg"] = {{"before", loadJson(m.loadBefore)}, {"after", loadJson(m.loadAfter)}};
  j["memory"] = {{"rss_before_runs_bytes", ctx.rssBase},
                 {"value", peakMemoryJson(m.valueMemory)},
                 {"value_and_grad", peakMemoryJson(m.gradMemory)},
                 {"second", peakMemoryJson(m.secondMemory)}};
  return j;
}

double roundToMicroseconds(double ms) { return std::round(ms * 1e3) / 1e3; }

std::string runTimesText(const RunTimes &s) {
  std::string t = "first " + fmt("%.3f", s.first) + " ms";
  const rt::Summary &m = s.steady;
  if (m.n)
    t += " | steady min " + fmt("%.3f", m.min) + " median " + fmt("%.3f", m.median) + " p90 " +
         fmt("%.3f", m.p90) + " max " + fmt("%.3f", m.max) + " ms (N=" + std::to_string(m.n) +
         " after 1 warm-up)";
  return t;
}

std::string formatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  return b < 1048576.0 ? fmt("%.1f", b / 1024.0) + " KiB" : fmt("%.1f", b / 1048576.0) + " MiB";
}

std::string trgCftText(const std::vector<TrgCftRow> &rows, int sitesLog2) {
  std::string t = "  cft               c and the lowest scaling dimensions x of each step's tensor "
                  "(docs/trg.md section 10; at a critical beta, good in a window of steps)\n"
                  "    step    D        c        x_1      x_2      x_3      x_4\n";
  char buf[48];
  for (const TrgCftRow &c : rows) {
    std::snprintf(buf, sizeof buf, "    %4zu %4lld ", c.step, static_cast<long long>(c.D));
    t += buf;
    if (std::isfinite(c.c)) std::snprintf(buf, sizeof buf, "%8.5f", c.c);
    t += std::isfinite(c.c) ? std::string(buf) : std::string("     nan");
    for (double x : c.x) {
      if (std::isfinite(x)) std::snprintf(buf, sizeof buf, " %8.5f", x);
      t += std::isfinite(x) ? std::string(buf) : std::string("      inf");
    }
    t += "\n";
  }
  const TrgCftPlateau pl = trgCftPlateau(rows, sitesLog2);
  if (!pl.found)
    return t + "    plateau   none: no " + std::to_string(trgCftPlateauSteps(sitesLog2)) +
           " steps where c and x_1 hold still (not a critical beta, or too few steps)\n";
  std::snprintf(buf, sizeof buf, "    plateau   steps %zu-%zu: c = %.5f", pl.firstStep, pl.lastStep, pl.c);
  t += buf;
  std::snprintf(buf, sizeof buf, " (spread %.1e), x =", pl.cSpread);
  t += buf;
  for (double x : pl.x) {
    std::snprintf(buf, sizeof buf, " %.5f", x);
    t += buf;
  }
  return t + "\n";
}

std::string peakMemoryText(const PeakMemory &m, int64_t rssBase) {
  std::string t = "planned peak " + formatBytes(m.planned) + " (tensors between programs + engine arena)";
  if (m.measured < 0) return t + " | peak RSS unavailable";
  t += " | measured peak RSS " + formatBytes(m.measured) + " above the " + formatBytes(rssBase) +
       " before the runs";
  if (m.planned > 0)
    t += fmt(" (%+.1f%%)", 100.0 * (static_cast<double>(m.measured) / static_cast<double>(m.planned) - 1));
  if (!m.window) t += " [peak since process start: /proc/self/clear_refs not writable]";
  return t;
}

} // namespace tessel::frontend
