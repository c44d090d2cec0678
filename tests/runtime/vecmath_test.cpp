// The vectorised sin, cos, tanh, exp and log (runtime/VecMath.h, SLEEF's 1-ulp routines): their
// distance from glibc's libm in ulps over wide ranges, the IEEE special values, and that a
// result depends only on its input (not on its position in the array or the array's length).
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "runtime/VecMath.h"

using tessel::rt::VecFn;
using tessel::rt::vecMath;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// |a − b| in units of the last place of b (the spacing of doubles at |b|; at least the
/// smallest subnormal); infinite when only one of them is NaN or they differ and one is inf.
double ulps(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : kInf;
  if (a == b) return 0;
  if (std::isinf(a) || std::isinf(b)) return kInf;
  const double spacing = std::nextafter(std::fabs(b), kInf) - std::fabs(b);
  return std::fabs(a - b) / std::max(spacing, std::numeric_limits<double>::denorm_min());
}

double libm(VecFn f, double x) {
  switch (f) {
  case VecFn::Sin: return std::sin(x);
  case VecFn::Cos: return std::cos(x);
  case VecFn::Tanh: return std::tanh(x);
  case VecFn::Exp: return std::exp(x);
  case VecFn::Log: return std::log(x);
  }
  return x;
}

/// The largest distance from libm over the inputs, and where.
std::pair<double, double> worstUlps(VecFn f, const std::vector<double> &x) {
  std::vector<double> o(x.size());
  vecMath(f, x.data(), o.data(), static_cast<int64_t>(x.size()));
  double worst = 0, at = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double u = ulps(o[i], libm(f, x[i]));
    if (u > worst) {
      worst = u;
      at = x[i];
    }
  }
  return {worst, at};
}

std::vector<double> uniform(double lo, double hi, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> x(static_cast<size_t>(n));
  for (double &v : x) v = d(rng);
  return x;
}

/// ± 10^e with e uniform in [e0, e1]: magnitudes over many orders.
std::vector<double> logUniform(double e0, double e1, int n, uint64_t seed, bool signs) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(e0, e1);
  std::vector<double> x(static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::pow(10.0, d(rng)) * (signs && (i % 2) ? -1 : 1);
  return x;
}

} // namespace

TEST_CASE("vecmath: within 2 ulp of glibc's libm over wide ranges (both are within 1 ulp of exact)") {
  struct Range {
    VecFn f;
    const char *what;
    std::vector<double> x;
  };
  const std::vector<Range> ranges = {
      {VecFn::Sin, "sin on [-10, 10]", uniform(-10, 10, 200000, 1)},
      {VecFn::Sin, "sin on |x| in [1e-300, 1e300]", logUniform(-300, 300, 200000, 2, true)},
      {VecFn::Sin, "sin on subnormals", logUniform(-323, -308, 20000, 3, true)},
      {VecFn::Cos, "cos on [-10, 10]", uniform(-10, 10, 200000, 4)},
      {VecFn::Cos, "cos on |x| in [1e-300, 1e300]", logUniform(-300, 300, 200000, 5, true)},
      {VecFn::Tanh, "tanh on [-20, 20]", uniform(-20, 20, 200000, 12)},
      {VecFn::Tanh, "tanh on |x| in [1e-300, 1e300]", logUniform(-300, 300, 200000, 13, true)},
      {VecFn::Tanh, "tanh on subnormals", logUniform(-323, -308, 20000, 14, true)},
      {VecFn::Exp, "exp on [-745, 709.78]", uniform(-745, 709.78, 200000, 6)},
      {VecFn::Exp, "exp on [-1, 1]", uniform(-1, 1, 200000, 7)},
      {VecFn::Log, "log on [1e-323, 1e308]", logUniform(-323, 308, 200000, 8, false)},
      {VecFn::Log, "log on [0.5, 2]", uniform(0.5, 2, 200000, 9)},
  };
  for (const Range &r : ranges) {
    auto [worst, at] = worstUlps(r.f, r.x);
    INFO(std::string(r.what) << ": worst " << worst << " ulp at x = " << at);
    CHECK(worst <= 2.0);
  }
}

TEST_CASE("vecmath: IEEE special values") {
  auto s = [](VecFn f, double x) { return vecMath(f, x); };
  CHECK(std::isnan(s(VecFn::Sin, kInf)));
  CHECK(std::isnan(s(VecFn::Sin, -kInf)));
  CHECK(std::isnan(s(VecFn::Cos, kInf)));
  CHECK(std::isnan(s(VecFn::Sin, kNaN)));
  CHECK(std::isnan(s(VecFn::Tanh, kNaN)));
  CHECK(s(VecFn::Tanh, kInf) == 1.0);
  CHECK(s(VecFn::Tanh, -kInf) == -1.0);
  CHECK(s(VecFn::Tanh, 19.1) == 1.0);
  CHECK(s(VecFn::Tanh, 0.0) == 0.0);
  CHECK(std::bit_cast<uint64_t>(s(VecFn::Tanh, -0.0)) == std::bit_cast<uint64_t>(-0.0));
  CHECK(std::isnan(s(VecFn::Exp, kNaN)));
  CHECK(std::isnan(s(VecFn::Log, kNaN)));
  CHECK(std::bit_cast<uint64_t>(s(VecFn::Sin, -0.0)) == std::bit_cast<uint64_t>(-0.0));
  CHECK(s(VecFn::Sin, 0.0) == 0.0);
  CHECK(s(VecFn::Cos, 0.0) == 1.0);
  CHECK(s(VecFn::Exp, 0.0) == 1.0);
  CHECK(s(VecFn::Exp, -kInf) == 0.0);
  CHECK(s(VecFn::Exp, kInf) == kInf);
  CHECK(s(VecFn::Exp, 710.0) == kInf);
  CHECK(s(VecFn::Exp, -746.0) == 0.0);
  CHECK(s(VecFn::Log, 1.0) == 0.0);
  CHECK(s(VecFn::Log, 0.0) == -kInf);
  CHECK(s(VecFn::Log, -0.0) == -kInf);
  CHECK(s(VecFn::Log, kInf) == kInf);
  CHECK(std::isnan(s(VecFn::Log, -1.0)));
  CHECK(std::isnan(s(VecFn::Log, -kInf)));
  // The smallest subnormal: log = −744.44..., finite.
  CHECK(s(VecFn::Log, std::numeric_limits<double>::denorm_min()) ==
        doctest::Approx(-744.4400719213812).epsilon(1e-15));
}

TEST_CASE("vecmath: a result depends only on its input, not on its position or the length") {
  const std::vector<double> x = uniform(-50, 50, 1003, 11);
  for (VecFn f : {VecFn::Sin, VecFn::Cos, VecFn::Tanh, VecFn::Exp, VecFn::Log}) {
    std::vector<double> in = x;
    if (f == VecFn::Log)
      for (double &v : in) v = std::fabs(v);
    std::vector<double> whole(in.size());
    vecMath(f, in.data(), whole.data(), static_cast<int64_t>(in.size()));
    // Every offset and ragged length, and one element at a time (the reference evaluator).
    for (int64_t off : {1, 2, 3, 5}) {
      std::vector<double> part(in.size());
      vecMath(f, in.data() + off, part.data(), static_cast<int64_t>(in.size()) - off);
      for (size_t i = 0; i + static_cast<size_t>(off) < in.size(); ++i)
        REQUIRE(std::bit_cast<uint64_t>(part[i]) == std::bit_cast<uint64_t>(whole[i + static_cast<size_t>(off)]));
    }
    for (size_t i = 0; i < in.size(); ++i)
      REQUIRE(std::bit_cast<uint64_t>(vecMath(f, in[i])) == std::bit_cast<uint64_t>(whole[i]));
    // In place.
    std::vector<double> inplace = in;
    vecMath(f, inplace.data(), inplace.data(), static_cast<int64_t>(inplace.size()));
    for (size_t i = 0; i < in.size(); ++i)
      REQUIRE(std::bit_cast<uint64_t>(inplace[i]) == std::bit_cast<uint64_t>(whole[i]));
  }
  MESSAGE("vecmath code path: " << std::string(tessel::rt::vecMathIsa()));
}
