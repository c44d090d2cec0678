//===- frontend/TrgMeasure.h - One β of the TRG, timed, with its report ----------===//
//
// What `tessel trg` and the Python `tessel.trg` measure per β, and the JSON object they
// both print (docs/cli.md, "`tessel trg --json`"): runs the value (and value+grad, second order)
// of a TrgDriver the way docs/benchmarking.md asks (first run, one warm-up, then
// `repeat` timed runs: min/median/p90/max), the planned and measured peak memory of
// each kind, the load average before and after, what the truncated-SVD kernels did,
// and Onsager's exact values beside the TRG's.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontend/TrgDriver.h"
#include "runtime/Runtime.h"
#include "runtime/Stats.h"

namespace tessel::frontend {

/// Timings (ms) of one kind of run: the first, then the steady runs after one warm-up.
struct RunTimes {
  bool have = false;
  double first = 0;
  rt::Summary steady;
};

/// Planned against measured peak memory of one kind of evaluation (value, value+grad,
/// second) over its runs at one β.
struct PeakMemory {
  bool have = false;
  int64_t planned = 0;   ///< max of TrgDriver::plannedPeakBytes over the runs
  int64_t measured = -1; ///< peak RSS during the runs minus the RSS before the first run
  bool window = true;    ///< the peak-RSS window was reset before the runs
};

/// What the truncated-SVD kernels did between two snapshots of TrgDriver::svdStats()
/// (rt::TruncatedSvdStats).
struct TopkCounts {
  int64_t calls = 0, iterations = 0, fallbacks = 0;
  int64_t complementCalls = 0, complementIterations = 0, complementFallbacks = 0;
  int64_t complementBroadened = 0;
  static TopkCounts between(const rt::TruncatedSvdStats &before, const rt::TruncatedSvdStats &after);
  void add(const TopkCounts &o);
  nlohmann::json json() const;
  /// "N top-k SVDs (I Krylov blocks each, F fell back to gesdd); ...".
  std::string text() const;
};

/// Everything measured at one β.
struct TrgBetaMeasurement {
  double beta = 0;
  TrgResult value, grad, second;      ///< grad / second: empty unless the driver has them
  RunTimes valueTimes, gradTimes, secondTimes;
  PeakMemory valueMemory, gradMemory, secondMemory;
  std::vector<double> loadBefore, loadAfter; ///< 1, 5, 15-minute load averages (empty: unknown)
  TopkCounts topk;
  /// With TrgOptions::cft: the CFT data of each step's tensor (an untimed value sweep).
  std::vector<TrgCftRow> cft;
  /// The exact infinite-lattice values where they are known (trgExactValues).
  std::optional<double> exactLnZ, exactDlnZ, exactD2lnZ, exactSpecificHeat;
  /// The driver's derivatives when it computed them: ∂/∂β (value+grad), ∂²/∂β²
  /// (second); in a field also ∂/∂h (value+grad), ∂²/∂β∂h (second) and ∂²/∂h² (second
  /// with susceptibility).
  std::optional<double> dlnZ() const;
  std::optional<double> d2lnZ() const;
  std::optional<double> dlnZdh() const;
  std::optional<double> d2lnZdbetadh() const;
  std::optional<double> d2lnZdh2() const;
  /// m = (1/β)·∂(lnZ/N)/∂h and χ_m = (1/β)·∂²(lnZ/N)/∂h² (docs/trg.md §8.1).
  std::optional<double> magnetization() const;
  std::optional<double> susceptibility() const;
};

/// The exact values of the infinite lattice for `model` at (β, h), where they are known:
/// the Ising model at h = 0 (Onsager, frontend/Onsager.h; the derivatives are absent at
/// β_c exactly, where they diverge) and the q = 2 Potts model, which is the Ising model
/// at β/2: lnZ_Potts(β)/N = lnZ_Ising(β/2)/N + β (docs/trg.md §8.2). Sets the exact*
/// fields of `m`; leaves them empty otherwise.
void trgExactValues(TrgBetaMeasurement &m, const TrgModel &model, double field);

/// Called before each run: what ("value", "value+grad (warm-up)", ...), run k of n.
using TrgProgress = std::function<void(const std::string &what, int64_t k, int64_t n)>;

/// The most timed repeats per β (`tessel trg --repeat`, `tessel.trg(repeat=)`): each is a
/// whole evaluation, so 10⁶ of even the smallest run is minutes; the bound keeps a
/// mistyped count from running for days.
inline constexpr int64_t kTrgMaxRepeat = 1000000;

/// Runs the driver at `beta`. With repeat > 0: value, then value+grad (if the driver was
/// built with grad), then second order (if with second), each once, once more untimed
/// and then `repeat` timed times. With repeat = 0 only the highest order runs, once:
/// its result gives lnZ/N and every lower derivative (value and grad then hold it too,
/// and their times are absent). `rssBase` is the process's
/// resident bytes before the first run of the sweep (rt::residentBytes()). Throws what
/// the driver throws (tessel::Error naming the step and β).
TrgBetaMeasurement measureTrgBeta(TrgDriver &drv, double beta, int64_t repeat, int64_t rssBase,
                                  const TrgProgress &progress = {});

/// One physics column of a β's report: its name (the --csv header; the --json and
/// tessel.trg key) and its value (nullopt where not computed: nan in CSV, null in JSON).
/// The table (`tessel trg` without --csv/--json) shows a column with a `label` as a row
/// "label value", followed by "exact X err Y" when the next column is its exact value
/// (`exact`), then the `note`; a column without a value shows `absent` after its label, or
/// after `absentLabel` where set (nothing when empty). Columns without a label (β, T, h)
/// are in the table's header.
struct TrgColumn {
  const char *name = nullptr;
  std::optional<double> value;
  const char *label = nullptr;
  bool exact = false; ///< the exact value of the column before it
  const char *note = nullptr;
  std::string absent;
  const char *absentLabel = nullptr; ///< the absent row's label when not `label` ("refused")
};

/// The physics of β in --csv's column order (docs/cli.md): beta, temperature (1/β, in
/// units of J/k_B), lnZ_per_site and its exact value, dlnZ_dbeta, energy_per_site (−d/dβ,
/// units of J), d2lnZ_dbeta2, specific_heat (β²·d², units of k_B), each with its exact
/// value (Onsager; Potts at β_c), then field, dlnZ_dh, magnetization, d2lnZ_dbeta_dh,
/// d2lnZ_dh2 and susceptibility. One list for --csv, --json and tessel.trg.
std::vector<TrgColumn> trgPhysicsColumns(const TrgBetaMeasurement &m, const TrgOptions &opts);

/// --csv's header: the names of trgPhysicsColumns, then `steps`.
std::string trgCsvHeader();

/// One β's --csv row (shortest round-trip numbers, nan where not computed; `steps` the
/// steps that ran).
std::string trgCsvRow(const TrgBetaMeasurement &m, const TrgOptions &opts, size_t steps);

/// What a report says besides the measurement.
struct TrgReportContext {
  std::string checkpoint; ///< the residual policy as given ("store", ...)
  std::string order;      ///< the contraction order as given ("pairwise", ...)
  int rank = 0, mpiRanks = 1;
  double ranksProbeMs = -1; ///< time of the schedule's probe (--ranks auto), -1 = none
  int64_t repeat = 0;
  std::string blas;  ///< TrgDriver::blas()
  int64_t rssBase = 0;
};

/// The table block of one β (docs/cli.md, "`tessel trg`"): β and T, the steps and ranks,
/// every labelled column of trgPhysicsColumns beside its exact value and the error, the
/// timings and peak memory of each kind that ran, the load, the svd_topk counters and the
/// --cft table.
std::string trgBetaText(const TrgBetaMeasurement &m, const TrgDriver &drv, const TrgReportContext &ctx);

/// The JSON object of one β (keys: docs/cli.md, "`tessel trg --json`"; times in ms rounded to the
/// microsecond, bytes as integers, null where not computed).
nlohmann::json trgBetaJson(const TrgBetaMeasurement &m, const TrgDriver &drv,
                           const TrgReportContext &ctx);

/// Milliseconds rounded to the microsecond (short JSON numbers).
double roundToMicroseconds(double ms);
/// "first 1.234 ms | steady min ... median ... p90 ... max ... ms (N=10 after 1 warm-up)".
std::string runTimesText(const RunTimes &t);
/// "planned peak 3.7 MiB (...) | measured peak RSS ... above the ... before the runs (+x%)".
std::string peakMemoryText(const PeakMemory &m, int64_t rssBase);
/// The --cft table: a header line, then per row "step D c x_1 … x_4" (docs/trg.md §10),
/// and the plateau (`sitesLog2`: of the algorithm's step, trgCftPlateau).
std::string trgCftText(const std::vector<TrgCftRow> &rows, int sitesLog2);
/// "12.3 MiB", or "45.6 KiB" below 1 MiB.
std::string formatBytes(int64_t bytes);

} // namespace tessel::frontend
