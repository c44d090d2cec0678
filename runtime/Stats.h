//===- runtime/Stats.h - Timing summaries and machine load (docs/benchmarking.md) -===//
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace tessel::rt {

/// Milliseconds elapsed since `t0` on the steady clock.
inline double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// min / median / p90 / max of a set of timings (ms). p90 is the nearest-rank
/// percentile: the ceil(0.9·N)-th smallest. Empty input gives n = 0 and zeros.
struct Summary {
  size_t n = 0;
  double min = 0, median = 0, p90 = 0, max = 0;
};
Summary summarize(std::vector<double> ms);

/// "min 8.812 median 8.901 p90 9.120 max 9.532 ms (N=30)".
std::string formatSummary(const Summary &s);

/// The 1, 5 and 15 minute load averages from /proc/loadavg; empty if unavailable.
std::vector<double> readLoadAverage();
/// "0.52 0.58 0.59" (two decimals, as /proc/loadavg), or "unavailable" if empty.
std::string formatLoadAverage(const std::vector<double> &load);
/// The load averages now, formatted.
inline std::string loadAverage() { return formatLoadAverage(readLoadAverage()); }

/// The value of a "Name:   1234 kB" line of /proc/self/status (VmRSS, VmSize, VmData,
/// ...), in bytes; -1 if absent.
int64_t procStatusBytes(const char *name);

/// Resident set size of this process now (VmRSS of /proc/self/status), bytes; -1 if
/// unavailable.
int64_t residentBytes();
/// Starts a new peak-RSS window: the kernel's high-water mark VmHWM is reset to the
/// current RSS (writing 5 to /proc/self/clear_refs, Linux >= 4.0). Returns false where
/// that is not possible; peakResidentBytes() then counts from the start of the process.
bool resetPeakResident();
/// Peak resident set size since the last resetPeakResident() (VmHWM), bytes; falls back
/// to getrusage(RUSAGE_SELF).ru_maxrss (since the start); -1 if neither is available.
int64_t peakResidentBytes();

} // namespace tessel::rt
