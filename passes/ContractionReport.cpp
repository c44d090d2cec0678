//===- passes/ContractionReport.cpp - A contraction path in opt_einsum's layout -===//
#include <cstdio>
#include <sstream>

#include "passes/Order.h"

namespace tessel::passes {

namespace {

std::string sci(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3e", x);
  return buf;
}

std::string integer(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", x);
  return buf;
}

} // namespace

std::string formatContractionPath(const ContractionPath &cp) {
  std::ostringstream os;
  std::string out = cp.spec.substr(cp.spec.find("->") + 2);
  os << "              Strategy:  " << orderStrategyName(cp.requested);
  if (cp.used != cp.requested) os << " -> " << orderStrategyName(cp.used);
  if (!cp.note.empty()) os << "  (" << cp.note << ")";
  os << "\n";
  os << "  Complete contraction:  " << cp.spec << "\n";
  os << "         Naive scaling:  " << cp.naiveScaling << "\n";
  os << "     Optimized scaling:  " << cp.optimizedScaling << "\n";
  os << "      Naive FLOP count:  " << sci(cp.naiveFlops) << "\n";
  os << "  Optimized FLOP count:  " << sci(cp.totalFlops) << "\n";
  os << "   Theoretical speedup:  ";
  if (cp.totalFlops > 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", cp.naiveFlops / cp.totalFlops);
    os << buf << "\n";
  } else {
    os << "n/a\n";
  }
  os << "  Largest intermediate:  " << sci(double(cp.largestIntermediate)) << " elements\n";
  const std::string rule(80, '-');
  os << rule << "\n";
  char head[128];
  std::snprintf(head, sizeof head, "%-7s %15s   %-30s %s", "scaling", "flops", "current",
                "remaining");
  os << head << "\n" << rule << "\n";
  // Remaining terms after each step, in term-id order (opt_einsum appends results).
  const size_t n = cp.shapes.size();
  std::vector<std::string> terms;
  std::vector<bool> alive;
  {
    std::string lhs = cp.spec.substr(0, cp.spec.find("->"));
    size_t pos = 0;
    for (size_t i = 0; i < n; ++i) {
      size_t c = lhs.find(',', pos);
      terms.push_back(lhs.substr(pos, c == std::string::npos ? std::string::npos : c - pos));
      alive.push_back(true);
      pos = c == std::string::npos ? lhs.size() : c + 1;
    }
  }
  for (const ContractionStep &s : cp.steps) {
    std::string current = s.lhsLabels + (s.rhs >= 0 ? "," + s.rhsLabels : "") + "->" +
                          s.resultLabels;
    if (s.lhs >= 0) alive[size_t(s.lhs)] = false;
    if (s.rhs >= 0) alive[size_t(s.rhs)] = false;
    std::string remaining;
    terms.push_back(s.resultLabels);
    alive.push_back(true);
    for (size_t t = 0; t < terms.size(); ++t)
      if (alive[t]) remaining += (remaining.empty() ? "" : ",") + terms[t];
    remaining += "->" + out;
    char line[256];
    std::snprintf(line, sizeof line, "%4d    %15s   %-30s %s", s.scaling, integer(s.flops).c_str(),
                  current.c_str(), remaining.c_str());
    std::string l = line;
    while (!l.empty() && l.back() == ' ') l.pop_back();
    os << l << "\n";
  }
  if (cp.finalTranspose) {
    std::string last = cp.steps.back().resultLabels;
    os << "   +                   transpose " << last << "->" << out << "\n";
  }
  return os.str();
}

} // namespace tessel::passes
