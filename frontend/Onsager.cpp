//===- frontend/Onsager.cpp - Exact 2D Ising free energy -----------------------===//
#include "frontend/Onsager.h"

#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <sstream>

#include "ir/Diagnostics.h"

namespace tessel::frontend {
namespace {

constexpr double kPi = std::numbers::pi;

/// Nodes and weights of n-point Gauss–Legendre quadrature on [-1, 1], by Newton's
/// method on the three-term recurrence of P_n (converges to machine precision from the
/// asymptotic initial guess cos(π (i − 1/4) / (n + 1/2))).
template <int N> struct GaussLegendre {
  std::array<double, N> x{}, w{};
  GaussLegendre() {
    for (int i = 0; i < (N + 1) / 2; ++i) {
      double z = std::cos(kPi * (i + 0.75) / (N + 0.5));
      double dp = 0;
      for (int it = 0; it < 100; ++it) {
        double p0 = 1, p1 = z;
        for (int j = 2; j <= N; ++j) {
          double p2 = ((2.0 * j - 1) * z * p1 - (j - 1.0) * p0) / j;
          p0 = p1;
          p1 = p2;
        }
        // p1 = P_N(z), p0 = P_{N-1}(z).
        dp = N * (z * p1 - p0) / (z * z - 1);
        double dz = p1 / dp;
        z -= dz;
        if (std::fabs(dz) < 1e-17) break;
      }
      double p0 = 1, p1 = z;
      for (int j = 2; j <= N; ++j) {
        double p2 = ((2.0 * j - 1) * z * p1 - (j - 1.0) * p0) / j;
        p0 = p1;
        p1 = p2;
      }
      dp = N * (z * p1 - p0) / (z * z - 1);
      double wi = 2 / ((1 - z * z) * dp * dp);
      x[i] = -z;
      x[N - 1 - i] = z;
      w[i] = w[N - 1 - i] = wi;
    }
  }
};

const GaussLegendre<24> &gaussLegendre24() {
  static const GaussLegendre<24> rule;
  return rule;
}

void checkBeta(double beta) {
  if (!std::isfinite(beta) || beta <= 0) {
    std::ostringstream os;
    os.precision(17);
    os << "onsager: beta must be finite and > 0, got " << beta;
    throw Error(os.str());
  }
}

/// x_c = 2β_c = ln(1 + √2) as an unevaluated sum hi + lo (double-double).
constexpr double kXcHi = 0.881373587019543;
constexpr double kXcLo = -2.250545892825866e-17;

/// k' = |sinh² x − 1| / cosh² x, computed without forming 1 − k². Near β_c the factor
/// sinh x − 1 is formed as sinh x − sinh x_c = 2 cosh((x + x_c)/2) sinh((x − x_c)/2)
/// with x − x_c in double-double, so k' keeps full relative precision (K ~ ln(4/k')
/// would otherwise lose ~1e-12 at β = 0.4407).
double complementaryModulus(double x) {
  if (x > 20) {
    // Far from x_c (and where sinh, cosh would overflow, x > 710): with e = e^{−2x},
    // k' = (tanh² x − sech² x) = ((1 − e)² − 4e) / (1 + e)², no cancellation.
    const double e = std::exp(-2 * x);
    return ((1 - e) * (1 - e) - 4 * e) / ((1 + e) * (1 + e));
  }
  double sh = std::sinh(x), ch = std::cosh(x);
  double d = (x - kXcHi) - kXcLo; // x − x_c; x − kXcHi is exact near x_c (Sterbenz)
  double shm1 = 2 * std::cosh(0.5 * (x + kXcHi)) * std::sinh(0.5 * d);
  return std::fabs(shm1 * (sh + 1)) / (ch * ch);
}

/// (1/π) ∫_0^{π/2} ln[(1 + sqrt(1 − k² sin²θ)) / 2] dθ with k² = 1 − k'².
/// With φ = π/2 − θ the root is sqrt(k'² + k² sin²φ), nearly singular at φ = 0 on a
/// scale k'; panels [b/2, b] with b = π/2, π/4, … down to 2^-70·π/2 resolve it, each
/// with 24-point Gauss–Legendre (the branch point is ≥ one panel width away from
/// each panel, so each panel converges geometrically to machine precision).
double onsagerIntegral(double kp) {
  const double k2 = (1 - kp) * (1 + kp);
  const double kp2 = kp * kp;
  auto f = [&](double phi) {
    double s = std::sin(phi);
    double r = std::sqrt(kp2 + k2 * s * s);
    return std::log1p(0.5 * (r - 1));
  };
  const auto &gl = gaussLegendre24();
  auto panel = [&](double a, double b) {
    double half = 0.5 * (b - a), mid = 0.5 * (a + b), sum = 0;
    for (int i = 0; i < 24; ++i) sum += gl.w[i] * f(mid + half * gl.x[i]);
    return sum * half;
  };
  constexpr int kPanels = 70;
  double total = 0;
  // Smallest panels first (smaller magnitudes summed first).
  double lo = std::ldexp(kPi / 2, -kPanels);
  total += panel(0, lo);
  for (int j = kPanels; j >= 1; --j) {
    double a = std::ldexp(kPi / 2, -j), b = std::ldexp(kPi / 2, -(j - 1));
    total += panel(a, b);
  }
  return total / kPi;
}

} // namespace

double ellipticKFromKp(double kp) {
  if (kp == 0) return INFINITY;
  double a = 1, b = kp;
  for (int i = 0; i < 64 && std::fabs(a - b) > 1e-16 * a; ++i) {
    double an = 0.5 * (a + b);
    b = std::sqrt(a * b);
    a = an;
  }
  return kPi / (2 * a);
}

EllipticKE ellipticKE(double kp, double k2) {
  // AGM with c_0 = k, c_{n+1} = c_n² / (4 a_{n+1}) (no cancellation);
  // E = K · (1 − Σ_n 2^{n−1} c_n²).
  double a = 1, b = kp;
  double c2 = k2; // c_0²
  double sum = 0.5 * c2;
  double pow2 = 0.5;
  for (int i = 0; i < 64; ++i) {
    double an = 0.5 * (a + b);
    double bn = std::sqrt(a * b);
    double cn = c2 / (4 * an); // c2 holds c_n², so cn = c_{n+1}
    a = an;
    b = bn;
    c2 = cn * cn;
    pow2 *= 2;
    sum += pow2 * c2;
    if (c2 * pow2 < 1e-34) break;
  }
  EllipticKE r;
  r.K = kPi / (2 * a);
  r.KminusE = r.K * sum;
  return r;
}

double ellipticEFromKp(double kp) {
  if (kp == 0) return 1;
  EllipticKE ke = ellipticKE(kp, (1 - kp) * (1 + kp));
  return ke.K - ke.KminusE;
}

namespace {

/// Below this β the closed forms lose digits (d/dβ and d² cancel like 1/β² there) and the
/// high-temperature series is used instead.
constexpr double kSeriesBeta = 0.02;

/// The high-temperature series of the square lattice, t = tanh β (the closed polygons of
/// the lattice; Domb, Adv. Phys. 9, 149 (1960)):
///   lnZ/N = ln 2 + 2 ln cosh β + t⁴ + 2t⁶ + (9/2)t⁸ + 12t¹⁰ + (112/3)t¹² + O(130 t¹⁴),
/// checked against a 40-digit evaluation of Onsager's integral (remainder 130·t¹⁴: 2e-22
/// at β = 0.02). Returns {lnZ/N, d/dβ, d²/dβ²}.
std::array<double, 3> highTemperatureSeries(double beta) {
  const double t = std::tanh(beta), s = 1 - t * t; // dt/dβ = 1 − t²
  static constexpr std::array<std::pair<int, double>, 5> a = {
      {{4, 1.0}, {6, 2.0}, {8, 4.5}, {10, 12.0}, {12, 112.0 / 3}}};
  // 2 ln cosh β = −ln(1 − t²) (no overflow; log1p keeps the digits of small t).
  double f = std::log(2.0) - std::log1p(-t * t), d1 = 2 * t, d2 = 2 * s;
  for (auto it = a.rbegin(); it != a.rend(); ++it) { // smallest terms first
    const int n = it->first;
    const double c = it->second, tn2 = std::pow(t, n - 2);
    f += c * tn2 * t * t;
    d1 += c * n * tn2 * t * s;
    d2 += c * n * ((n - 1) * tn2 * s - 2 * tn2 * t * t) * s;
  }
  return {f, d1, d2};
}

} // namespace

double onsagerLnZ(double beta) {
  checkBeta(beta);
  if (beta < kSeriesBeta) return highTemperatureSeries(beta)[0];
  double x = 2 * beta;
  double kp = complementaryModulus(x);
  // ln(2 cosh x) = x + ln(1 + e^{−2x}) (no overflow for large β).
  double lnc = x + std::log1p(std::exp(-2 * x));
  double lnZ = lnc + onsagerIntegral(kp);
  if (!std::isfinite(lnZ)) // 2β itself overflows (β above ~9e307): refuse, no silent inf
  {
    std::ostringstream os;
    os.precision(17);
    os << "onsager: lnZ/N = 2*beta + O(e^(-4 beta)) overflows a double at beta = " << beta;
    throw Error(os.str());
  }
  return lnZ;
}

OnsagerValues onsager(double beta) {
  checkBeta(beta);
  OnsagerValues v;
  v.beta = beta;
  v.lnZ = onsagerLnZ(beta);
  if (beta < kSeriesBeta) {
    const std::array<double, 3> f = highTemperatureSeries(beta);
    v.dlnZ = f[1];
    v.energy = -v.dlnZ;
    v.d2lnZ = f[2];
    v.specificHeat = beta * beta * v.d2lnZ;
    return v;
  }
  if (beta == kIsingBetaC) {
    // 2t² − 1 = 0 and K = ∞: the energy's limit is finite, coth(2β_c) = √2 (the product
    // (2t² − 1)·K vanishes like |β − β_c|·ln|β − β_c|); only c diverges.
    v.dlnZ = std::sqrt(2.0);
    v.energy = -v.dlnZ;
    v.d2lnZ = v.specificHeat = INFINITY;
    return v;
  }
  const double x = 2 * beta;
  const double t = std::tanh(x);
  const double coth = 1 / t;
  const double kp = complementaryModulus(x);
  // sech² x = 4e/(1 + e)², e = e^{−2x}: no overflow of cosh for large β.
  const double e2x = std::exp(-2 * x);
  const double oneMinusT2 = 4 * e2x / ((1 + e2x) * (1 + e2x));
  // k = 2 sinh x / cosh² x, so k² = 4 t² sech² x, exact where k' is near 1.
  const EllipticKE ke = ellipticKE(kp, 4 * t * t * oneMinusT2);
  const double K = ke.K;
  // 2t² − 1 = (t − 1/√2)(t + 1/√2)·2 is tiny near β_c; form it as t² − (1 − t²).
  const double twoT2m1 = t * t - oneMinusT2;
  v.dlnZ = coth * (1 + (2 / kPi) * twoT2m1 * K);
  v.energy = -v.dlnZ;
  // K − E and sech² x (π/2 + (2t² − 1)K) are both O(sech² x) away from β_c and cancel to
  // O(sech⁴ x): K − E comes from the AGM directly, not as a difference of two O(1) numbers.
  v.specificHeat = (4 / kPi) * (beta * coth) * (beta * coth) *
                   (ke.KminusE - oneMinusT2 * (kPi / 2 + twoT2m1 * K));
  v.d2lnZ = v.specificHeat / (beta * beta);
  return v;
}

double pottsBetaC(int q) { return std::log1p(std::sqrt(static_cast<double>(q))); }

std::optional<double> pottsCriticalEnergy(int q) {
  if (q < 2 || q > 4) return std::nullopt;
  return -(1 + 1 / std::sqrt(static_cast<double>(q)));
}

bool isPottsBetaC(int q, double beta) {
  const double bc = pottsBetaC(q);
  return std::fabs(beta - bc) <= 4 * std::numeric_limits<double>::epsilon() * bc;
}

} // namespace tessel::frontend
