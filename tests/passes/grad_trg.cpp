// Gradients through the TRG step programs (frontend/Trg.h, `tessel emit trg-step`)
// against finite differences, for every step class of docs/trg.md §4.
//
// Test points: the step output Tn depends on the sign gauge of the singular vectors
// (flipping u_k, v_k flips the slices r = k and l = k of Tn), so finite differences of
// Tn itself are only meaningful where LAPACK's sign choice is continuous; the points
// and steps below are fixed and deterministic. The composite L = logm + ½·ln Σ Tn[i,j,i,j]
// (one step followed by the closure) is gauge invariant and independent of m = sa[0],
// so it is also checked with stop_gradient(m) (TrgStepOptions::stopGradientOnNorm).
#include <doctest/doctest.h>

#include "frontend/Trg.h"
#include "grad_testutil.h"
#include "passes/Order.h"

using namespace gradtest;
using namespace tessel::ir;
using namespace tessel::frontend;

namespace {

/// The step program with einsums lowered to dot_general (the reference evaluator's
/// naive n-ary einsum would dominate the run time).
Program stepProgram(int64_t din, int64_t dout, bool stopGradientOnNorm) {
  TrgStepOptions o;
  o.stopGradientOnNorm = stopGradientOnNorm;
  Program p = buildTrgStep(din, dout, o);
  tessel::passes::runOrder(p, {});
  return p;
}

/// L(T) = logm + ½·ln Σ_ij Tn[i,j,i,j] for one step D -> D' (stop_gradient on m).
Program stepClosureProgram(int64_t din, int64_t dout) {
  Tracer tr("step_closure_" + std::to_string(din) + "_" + std::to_string(dout));
  tessel::frontend::Tensor T = tr.input("T", {din, din, din, din});
  TrgStepOptions so;
  so.stopGradientOnNorm = true; // L does not depend on m, so finite differences agree anyway
  TrgStepTrace st = traceTrgStep(T, dout, so);
  tr.output(st.logm + traceTrgClosure(st.Tn) * 0.5, "L");
  Program p = tr.take();
  tessel::passes::runOrder(p, {});
  return p;
}

/// A graded random tensor T[i,j,k,l] = u·a^(i+j+k+l), u ~ U[0.5, 1.5]: Ma and Mb have
/// decaying spectra with relative gaps of a few percent among the leading 17 singular
/// values (a plain random tensor has a flat bulk, gaps too small for a 256×256 FD).
ir::Tensor gradedTensor(int64_t d, double a, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> U(0.5, 1.5);
  ir::Tensor T = ir::Tensor::zeros(Type({d, d, d, d}));
  size_t e = 0;
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < d; ++j)
      for (int64_t k = 0; k < d; ++k)
        for (int64_t l = 0; l < d; ++l) T.data[e++] = U(rng) * std::pow(a, double(i + j + k + l));
  return T;
}

void requirePass(const GradCheckResult &r, double rel) {
  INFO(formatGradCheck(r));
  CHECK(r.passed);
  CHECK(r.maxRelErr <= rel);
  for (const GradCheckEntry &e : r.checks) CHECK(std::abs(e.ad) > 1e-3);
}

} // namespace

TEST_CASE("grad trg: every small step class passes gradcheck (orders 1 and 2) to 1e-8 (5e-8 through max|T|)") {
  struct Cls {
    int64_t din, dout;
  };
  for (Cls c : {Cls{2, 2}, Cls{2, 4}, Cls{4, 4}, Cls{4, 16}}) {
    CAPTURE(c.din);
    CAPTURE(c.dout);
    GradCheckOptions o;
    o.order = 2;
    o.eps = 1e-5;
    o.rtol = 1e-8;
    o.atol = 0;
    o.seed = static_cast<uint64_t>(c.din * 100 + c.dout);
    // The step itself (differentiating through max|T|), outputs logm and Tn (vjp). Its
    // order-2 finite difference is noisier: for 4 -> 16 it moves by 2e-8..1e-7 relative
    // with the step (3e-6, 1e-5, 3e-5) around the transform's value, which the old and
    // the current svd rule give identically to 16 digits; hence 5e-8 here.
    Program step = stepProgram(c.din, c.dout, /*stopGradientOnNorm=*/false);
    o.rtol = 5e-8;
    requirePass(gradCheck(step, randomInputs(step, 7), o), 5e-8);
    o.rtol = 1e-8;
    // Step + closure with stop_gradient(max|T|): a scalar.
    Program sc = stepClosureProgram(c.din, c.dout);
    requirePass(gradCheck(sc, randomInputs(sc, 7), o), 1e-8);
  }
}

TEST_CASE("grad trg: the 16->16 step class (two 256×256 SVDs) agrees with FD to 1e-8") {
  // Order 1 only and one point: this is the expensive class.
  Program step = stepProgram(16, 16, /*stopGradientOnNorm=*/false);
  GradCheckOptions o;
  o.order = 1;
  o.eps = 1e-6;
  o.rtol = 1e-8;
  o.atol = 0;
  requirePass(gradCheck(step, {gradedTensor(16, 0.7, 3)}, o), 1e-8);
}

TEST_CASE("grad trg: d/dβ and d²/dβ² of lnZ/N through 4 whole steps (exact ties) vs FD") {
  // β -> lnZ/N over the steps 2->2, 2->4, 4->4, 4->16 at the Ising point, where lattice
  // symmetry makes exact ties among the singular values. Without the (d != 0) mask in
  // the svd rule's Lorentzian, the second derivative is off by 1.5% here (the 1/ε²
  // slope of d/(d² + ε²) at d = 0 amplifies rounding); with it, 1e-12.
  Program p = buildTrgWhole(trgDefaultRanks(16, 4));
  tessel::passes::runOrder(p, {});
  GradCheckOptions o;
  o.wrt = {"beta"}; // the field h = 0 is the program's second input
  o.order = 2;
  o.eps = 1e-4;
  o.rtol = 1e-8;
  o.atol = 0;
  requirePass(gradCheck(p, {ir::Tensor::scalar(0.4), ir::Tensor::scalar(0.0)}, o), 1e-8);
}
