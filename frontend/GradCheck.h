//===- frontend/GradCheck.h - Finite-difference check of the grad transform ===//
//
// JAX `check_grads` style (jax._src.public_test_util): one random direction t with a
// fixed seed (std::mt19937_64), a central finite difference in f64 along t, compared
// with the directional derivative from the grad transform (passes/Grad.h):
//
//   * one scalar output f:   FD of f(x + h·t)           vs  ⟨∇f(x), t⟩
//   * otherwise (vjp), with a random cotangent c per output:
//                            FD of ⟨F(x + h·t), c⟩ = ⟨J·t, c⟩  vs  ⟨t, Jᵀ·c⟩
//
// Order 2 also runs the same check on the first-order program (the gradient, or the
// VJP with c fixed), i.e. it checks grad of grad. Programs are evaluated with the
// reference evaluator (rt::evaluateReference).
//
// The step is h = eps·s, s = max |x| over the wrt inputs (1 if they are all 0), so a
// program checked at c·x takes the step c·h: the same check at any scale.
//
// Error measure per check: abs = |fd − ad|, rel = abs / max(|fd|, |ad|) (0 if both are
// 0); a check passes when abs <= atol + rtol·max(|fd|, |ad|) and both are finite. The
// larger of the two terms of that tolerance decides the check ("abs" or "rel"): a true
// derivative of 0 is decided by atol, and its rel (up to 1) says nothing.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ir/Program.h"

namespace tessel::frontend {

struct GradCheckOptions {
  /// Inputs to differentiate with respect to; empty = all inputs.
  std::vector<std::string> wrt;
  /// 1 = first derivatives; 2 = first and second (grad of grad).
  int order = 1;
  /// Step of the finite difference along the direction t, relative to the scale of the
  /// wrt inputs: h = eps·max|x| (t has N(0,1) entries, so the perturbation's norm grows
  /// like sqrt(#elements)). Too large a step can cross a
  /// kink (abs, max) or a sign flip of LAPACK's singular vectors (gauge-dependent
  /// outputs such as a TRG step's Tn); too small a step loses digits to rounding.
  double eps = 1e-5;
  /// Points of the central difference: 3 (error O(h²)) or 5 (error O(h⁴), the default).
  int stencil = 5;
  /// Seed of the directions and cotangents (std::mt19937_64).
  uint64_t seed = 0;
  double atol = 1e-8;
  double rtol = 1e-6;
};

/// One comparison.
struct GradCheckEntry {
  int order = 1;      ///< 1: the program itself; 2: its first-order (grad/VJP) program
  std::string mode;   ///< "grad" (scalar output) or "vjp" (random output cotangent)
  double fd = 0;      ///< finite-difference directional derivative
  double ad = 0;      ///< the same from the grad transform
  double absErr = 0;  ///< |fd − ad|
  double relErr = 0;  ///< |fd − ad| / max(|fd|, |ad|)
  double tol = 0;     ///< atol + rtol·max(|fd|, |ad|)
  double step = 0;    ///< h = eps·max|x| over the wrt inputs
  bool byRel = true;  ///< rtol·max(|fd|, |ad|) >= atol: the relative error decided
  bool passed = false;
};

struct GradCheckResult {
  std::vector<GradCheckEntry> checks; ///< order 1, then order 2 if requested
  bool passed = true;
  double maxAbsErr = 0; ///< over all checks
  double maxRelErr = 0; ///< over the checks the relative error decided (0 if none)
};

/// Checks the grad transform of `p` at `point` (one tensor per input of `p`, in order).
/// Throws tessel::Error for a bad option (order not 1|2, eps <= 0, stencil not 3|5),
/// an unknown wrt name, or a point that does not match the inputs (naming the input).
GradCheckResult gradCheck(const ir::Program &p, const std::vector<ir::Tensor> &point,
                          const GradCheckOptions &opts = {});

/// Distributions for random inputs.
enum class InitKind {
  Positive,  ///< uniform in [0.5, 1.5]: safe for log/sqrt/div and TRG-like tensors
  Symmetric, ///< uniform in [-1, 1]
  Normal,    ///< N(0, 1)
};

/// Parses "positive", "symmetric" or "normal"; throws tessel::Error otherwise.
InitKind parseInitKind(const std::string &s);

/// A tensor of type `t` with entries drawn from `kind` using `rng`.
ir::Tensor randomTensor(const ir::Type &t, std::mt19937_64 &rng, InitKind kind);

/// One random tensor per input of `p`, drawn in input order from mt19937_64(seed).
std::vector<ir::Tensor> randomInputs(const ir::Program &p, uint64_t seed,
                                     InitKind kind = InitKind::Positive);

/// Human-readable table of the checks (one line each) and a PASS/FAIL summary line.
std::string formatGradCheck(const GradCheckResult &r);

} // namespace tessel::frontend
