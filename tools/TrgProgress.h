//===- tools/TrgProgress.h - The progress line of `tessel trg` ---------------===//
//
// What `tessel trg` shows on a terminal while it runs: the β, the run (value, value+grad,
// ... and which repeat), the sweep and its step, and the time left in that sweep.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "frontend/TrgDriver.h"
#include "ir/TextUtil.h"

namespace tessel::tools {

/// A progress line on stderr, only when stderr is a terminal: the β, the run, the sweep
/// and its step, and the time left in that sweep (from its steps so far); redrawn at
/// most ten times a second.
struct Progress {
  bool on = false;
  size_t nbeta = 1, ib = 0;
  double beta = 0;
  std::string run; ///< "value+grad run 1/11"
  std::string phase;
  std::chrono::steady_clock::time_point phaseStart, lastDraw;
  void startRun(size_t i, double b, const std::string &what, int64_t k, int64_t n) {
    ib = i;
    beta = b;
    run = what + " run " + std::to_string(k) + "/" + std::to_string(n);
    phase.clear();
    draw("");
  }
  void step(const frontend::TrgProgressStep &s) {
    if (!on) return;
    const auto now = std::chrono::steady_clock::now();
    if (phase != s.phase) {
      phase = s.phase;
      phaseStart = now;
    }
    if (now - lastDraw < std::chrono::milliseconds(100) && s.step > 1) return;
    std::string t = phase + " step " + std::to_string(s.step) + (s.atMost ? " (at most " : "/") +
                    std::to_string(s.steps) + (s.atMost ? ")" : "");
    const double done = static_cast<double>(s.step - 1);
    if (done >= 2 && !s.atMost) {
      const double sec = std::chrono::duration<double>(now - phaseStart).count();
      char left[64];
      std::snprintf(left, sizeof left, ", ~%.1f s left in this sweep",
                    sec / done * static_cast<double>(s.steps - s.step + 1));
      t += left;
    }
    draw(t);
  }
  void draw(const std::string &t) {
    if (!on) return;
    lastDraw = std::chrono::steady_clock::now();
    std::fprintf(stderr, "\r\033[Ktessel trg: beta %zu/%zu (%s): %s%s%s", ib + 1, nbeta,
                 ir::text::formatDouble(beta).c_str(), run.c_str(), t.empty() ? "" : ": ", t.c_str());
    std::fflush(stderr);
  }
  void clear() const {
    if (!on) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
};

} // namespace tessel::tools
