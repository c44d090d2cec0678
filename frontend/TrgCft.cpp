//===- frontend/TrgCft.cpp - CFT data from the coarse-grained tensor --------------===//
#include "frontend/TrgCft.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "ir/Diagnostics.h"
#include "runtime/HostLinalg.h"

namespace tessel::frontend {
namespace {

/// The leading eigenvalue of the row-major n×n matrix M by power iteration (the
/// transfer matrix's identity state, real and positive at a fixed point), or NaN when the
/// estimate has not settled to 1e-13 relative within `maxIter` products.
double leadingEigenvalue(const std::vector<double> &M, size_t n, int maxIter = 5000) {
  std::vector<double> v(n), w(n);
  for (size_t i = 0; i < n; ++i) v[i] = 1.0 + 1e-3 * static_cast<double>(i % 7);
  double prev = 0;
  int still = 0;
  for (int it = 0; it < maxIter; ++it) {
    double nv = 0;
    for (double a : v) nv += a * a;
    nv = std::sqrt(nv);
    for (double &a : v) a /= nv;
    rt::matmulRowMajor(M.data(), v.data(), w.data(), static_cast<int64_t>(n), static_cast<int64_t>(n), 1);
    double lambda = 0;
    for (size_t i = 0; i < n; ++i) lambda += v[i] * w[i];
    if (!std::isfinite(lambda)) return NAN;
    still = std::fabs(lambda - prev) <= 1e-13 * std::fabs(lambda) ? still + 1 : 0;
    if (still >= 3) return lambda;
    prev = lambda;
    v.swap(w);
  }
  return NAN;
}

} // namespace

TrgCftRow trgCftData(size_t step, const ir::Tensor &T, const ir::Tensor *wh, const ir::Tensor *wv) {
  const ir::Shape &sh = T.type.shape;
  if (sh.size() != 4 || sh[1] != sh[0] || sh[2] != sh[0] || sh[3] != sh[0])
    throw Error("error: trg cft: T must be f64[D,D,D,D], got " + T.type.str());
  const size_t D = static_cast<size_t>(sh[0]), D2 = D * D;
  // T̃ = T with √w on each leg, scaled by its largest entry (c and x do not depend on a
  // scale: it cancels between L = 1 and L = 2, and in the ratios).
  std::vector<double> t(T.data);
  if (wh && wv) {
    size_t at = 0;
    for (size_t i = 0; i < D; ++i)
      for (size_t j = 0; j < D; ++j)
        for (size_t k = 0; k < D; ++k)
          for (size_t l = 0; l < D; ++l, ++at)
            t[at] *= std::sqrt(wh->data[i] * wv->data[j] * wh->data[k] * wv->data[l]);
  }
  double mx = 0;
  for (double a : t) mx = std::max(mx, std::fabs(a));
  if (!(mx > 0) || !std::isfinite(mx))
    throw Error("error: trg cft: the tensor of step " + std::to_string(step) + " is zero or not finite");
  for (double &a : t) a /= mx;
  auto at = [&](size_t r, size_t u, size_t l, size_t d) { return t[((r * D + u) * D + l) * D + d]; };

  TrgCftRow row;
  row.step = step;
  row.D = static_cast<int64_t>(D);
  // L = 1: M1[u,d] = Σ_i T̃[i,u,i,d] (right leg joined to its own left leg).
  std::vector<double> m1(D2, 0.0);
  for (size_t u = 0; u < D; ++u)
    for (size_t d = 0; d < D; ++d)
      for (size_t i = 0; i < D; ++i) m1[u * D + d] += at(i, u, i, d);
  std::vector<std::complex<double>> ev = rt::eigenvaluesGeneral(m1, static_cast<int64_t>(D));
  std::vector<double> mod(ev.size());
  for (size_t i = 0; i < ev.size(); ++i) mod[i] = std::abs(ev[i]);
  std::sort(mod.begin(), mod.end(), std::greater<>());
  const double l1 = mod[0];
  for (size_t i = 1; i < mod.size() && row.x.size() < kTrgCftDimensions; ++i)
    row.x.push_back(mod[i] > 0 ? std::log(l1 / mod[i]) / (2 * std::numbers::pi) : INFINITY);
  // L = 2: M2[(u1,u2),(d1,d2)] = Σ_{i,j} T̃[j,u1,i,d1]·T̃[i,u2,j,d2], one GEMM
  // P[(u1,d1),(j,i)]·Q[(j,i),(u2,d2)].
  std::vector<double> P(D2 * D2), Q(D2 * D2), R(D2 * D2), m2(D2 * D2);
  for (size_t j = 0; j < D; ++j)
    for (size_t i = 0; i < D; ++i)
      for (size_t u = 0; u < D; ++u)
        for (size_t d = 0; d < D; ++d) {
          P[(u * D + d) * D2 + j * D + i] = at(j, u, i, d);
          Q[(j * D + i) * D2 + u * D + d] = at(i, u, j, d);
        }
  rt::matmulRowMajor(P.data(), Q.data(), R.data(), static_cast<int64_t>(D2), static_cast<int64_t>(D2),
                     static_cast<int64_t>(D2));
  for (size_t u1 = 0; u1 < D; ++u1)
    for (size_t d1 = 0; d1 < D; ++d1)
      for (size_t u2 = 0; u2 < D; ++u2)
        for (size_t d2 = 0; d2 < D; ++d2)
          m2[(u1 * D + u2) * D2 + d1 * D + d2] = R[(u1 * D + d1) * D2 + u2 * D + d2];
  const double l2 = leadingEigenvalue(m2, D2);
  row.c = l1 > 0 && l2 > 0 ? (8 * std::log(l1) - 4 * std::log(l2)) / std::numbers::pi : NAN;
  return row;
}

TrgCftPlateau trgCftPlateau(const std::vector<TrgCftRow> &rows, int sitesLog2) {
  TrgCftPlateau best;
  const size_t w = trgCftPlateauSteps(sitesLog2);
  int64_t D = 0;
  for (const TrgCftRow &r : rows) D = std::max(D, r.D);
  auto usable = [&](const TrgCftRow &r) {
    return r.D == D && std::isfinite(r.c) && r.c >= 0.05 && !r.x.empty() && std::isfinite(r.x[0]) &&
           r.x[0] >= 0.01;
  };
  double bestChange = INFINITY;
  for (size_t a = 0; a + w <= rows.size(); ++a) {
    bool ok = true;
    for (size_t i = a; i < a + w; ++i) ok = ok && usable(rows[i]) && rows[i].step == rows[a].step + (i - a);
    if (!ok) continue;
    double change = 0, cMin = INFINITY, cMax = -INFINITY, xMin = INFINITY, xMax = -INFINITY;
    for (size_t i = a; i < a + w; ++i) {
      if (i > a)
        change += std::fabs(rows[i].c - rows[i - 1].c) / kTrgCftPlateauSpreadC +
                  std::fabs(rows[i].x[0] - rows[i - 1].x[0]) / kTrgCftPlateauSpreadX;
      cMin = std::min(cMin, rows[i].c);
      cMax = std::max(cMax, rows[i].c);
      xMin = std::min(xMin, rows[i].x[0]);
      xMax = std::max(xMax, rows[i].x[0]);
    }
    if (cMax - cMin > kTrgCftPlateauSpreadC || xMax - xMin > kTrgCftPlateauSpreadX || !(change < bestChange))
      continue;
    bestChange = change;
    best = TrgCftPlateau{};
    best.found = true;
    best.firstStep = rows[a].step;
    best.lastStep = rows[a + w - 1].step;
    best.cSpread = cMax - cMin;
    size_t nx = rows[a].x.size();
    for (size_t i = a; i < a + w; ++i) {
      best.c += rows[i].c / static_cast<double>(w);
      nx = std::min(nx, rows[i].x.size());
    }
    for (size_t k = 0; k < nx; ++k) {
      double sum = 0, lo = INFINITY, hi = -INFINITY;
      for (size_t i = a; i < a + w; ++i) {
        sum += rows[i].x[k];
        lo = std::min(lo, rows[i].x[k]);
        hi = std::max(hi, rows[i].x[k]);
      }
      best.x.push_back(sum / static_cast<double>(w));
      best.xSpread.push_back(hi - lo);
    }
  }
  return best;
}

} // namespace tessel::frontend
