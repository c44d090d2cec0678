//===- tests/frontend/trg_algorithm_checks.h - Checks every TRG algorithm passes ===//
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>

#include "frontend/TrgDriver.h"

namespace tessel::frontend::testing {

/// χ, --steps auto (the infinite lattice).
inline TrgOptions limitOptions(int64_t chi) {
  TrgOptions o;
  o.chi = chi;
  o.stepsAuto = true;
  o.steps = kTrgStepsAutoMax;
  return o;
}

inline double relErr(double v, double exact) { return std::fabs(v - exact) / std::fabs(exact); }

/// With `o`'s algorithm, χ = 8 and `steps` steps at β = 0.5, h = 0.02: the staged and
/// whole modes agree (lnZ/N to 1e-13, d/dβ and d/dh to 1e-11), and the AD d/dh equals a
/// central difference of the staged lnZ/N in h (step 1e-5) to 1e-8.
inline void checkStagedWholeAndFieldDerivative(TrgOptions o, int steps) {
  o.chi = 8;
  o.steps = steps;
  o.grad = true;
  o.field = 0.02;
  TrgDriver staged(o);
  o.mode = TrgMode::Whole;
  TrgDriver whole(o);
  const TrgResult s = staged.valueAndGrad(0.5), w = whole.valueAndGrad(0.5);
  CHECK(std::fabs(s.lnZ - w.lnZ) < 1e-13);
  CHECK(std::fabs(*s.dlnZ - *w.dlnZ) < 1e-11);
  CHECK(std::fabs(*s.dlnZdh - *w.dlnZdh) < 1e-11);
  const double dh = 1e-5;
  TrgOptions p = o;
  p.mode = TrgMode::Staged;
  p.grad = false;
  double f[2];
  for (int i = 0; i < 2; ++i) {
    p.field = 0.02 + (i ? dh : -dh);
    f[i] = TrgDriver(p).value(0.5).lnZ;
  }
  const double fd = (f[1] - f[0]) / (2 * dh);
  INFO("dlnZ/dh " << *s.dlnZdh << " fd " << fd);
  CHECK(std::fabs(*s.dlnZdh - fd) < 1e-8);
}

/// d/dβ and d²/dβ² of `d` (with grad and second) at β equal 5-point differences (step
/// 1e-4·β) of its lnZ/N and of its AD d/dβ to 1e-8 and 1e-7 relative.
inline void checkBetaDerivativesAgainstDifferences(TrgDriver &d, double beta) {
  const double h = 1e-4 * beta;
  double g[5], f[5];
  for (int i = 0; i < 5; ++i) {
    const TrgResult r = d.valueAndGrad(beta + (i - 2) * h);
    f[i] = r.lnZ;
    g[i] = *r.dlnZ;
  }
  const double fd1 = (f[0] - 8 * f[1] + 8 * f[3] - f[4]) / (12 * h);
  const double fd2 = (g[0] - 8 * g[1] + 8 * g[3] - g[4]) / (12 * h);
  const TrgResult s = d.second(beta);
  INFO("beta " << beta << " d " << *s.dlnZ << " fd " << fd1 << " d2 " << *s.d2lnZ << " fd " << fd2);
  CHECK(std::fabs(*s.dlnZ - fd1) <= 1e-8 * std::fabs(*s.dlnZ));
  CHECK(std::fabs(*s.d2lnZ - fd2) <= 1e-7 * std::fabs(*s.d2lnZ));
}

} // namespace tessel::frontend::testing
