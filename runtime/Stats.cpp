//===- runtime/Stats.cpp - Timing summaries and machine load ------------------===//
#include "runtime/Stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <sys/resource.h>

namespace tessel::rt {

Summary summarize(std::vector<double> ms) {
  Summary s;
  s.n = ms.size();
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  s.min = ms.front();
  s.max = ms.back();
  size_t n = ms.size();
  s.median = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  size_t rank = static_cast<size_t>(std::ceil(0.9 * static_cast<double>(n)));
  s.p90 = ms[std::clamp<size_t>(rank, 1, n) - 1];
  return s;
}

std::string formatSummary(const Summary &s) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "min %.3f median %.3f p90 %.3f max %.3f ms (N=%zu)", s.min,
                s.median, s.p90, s.max, s.n);
  return buf;
}

std::vector<double> readLoadAverage() {
  std::ifstream in("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  if (!(in >> a >> b >> c)) return {};
  return {a, b, c};
}

std::string formatLoadAverage(const std::vector<double> &l) {
  if (l.size() != 3) return "unavailable";
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.2f %.2f %.2f", l[0], l[1], l[2]);
  return buf;
}

int64_t procStatusBytes(const char *name) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string key = std::string(name) + ":";
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) {
      long long kb = -1;
      if (std::sscanf(line.c_str() + key.size(), "%lld", &kb) == 1 && kb >= 0) return kb * 1024;
      return -1;
    }
  return -1;
}

int64_t residentBytes() { return procStatusBytes("VmRSS"); }

bool resetPeakResident() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

int64_t peakResidentBytes() {
  int64_t hwm = procStatusBytes("VmHWM");
  if (hwm >= 0) return hwm;
  struct rusage ru {};
  if (getrusage(RUSAGE_SELF, &ru) == 0) return static_cast<int64_t>(ru.ru_maxrss) * 1024;
  return -1;
}

} // namespace tessel::rt
