//===- frontend/GradCheck.cpp - Finite-difference check of the grad transform ===//
#include "frontend/GradCheck.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "passes/Grad.h"
#include "runtime/Runtime.h"

namespace tessel::frontend {

using ir::Program;
using ir::Tensor;

namespace {

double dot(const Tensor &a, const Tensor &b) {
  double s = 0;
  for (size_t i = 0; i < a.data.size(); ++i) s += a.data[i] * b.data[i];
  return s;
}

/// point + s·t on the wrt inputs.
std::vector<Tensor> shifted(const std::vector<Tensor> &point, const std::vector<size_t> &wrtIdx,
                            const std::vector<Tensor> &dirs, double s) {
  std::vector<Tensor> x = point;
  for (size_t k = 0; k < wrtIdx.size(); ++k) {
    Tensor &xi = x[wrtIdx[k]];
    for (size_t e = 0; e < xi.data.size(); ++e) xi.data[e] += s * dirs[k].data[e];
  }
  return x;
}

struct Level {
  Program first;             ///< the first-order program of this level's program
  std::vector<Tensor> point; ///< point of `first` (the program's point + cotangents)
};

/// One check of program `p` at `point` along fresh random directions. Returns the
/// entry and, through `next`, the first-order program and its point (for order 2).
GradCheckEntry checkOnce(const Program &p, const std::vector<Tensor> &point,
                         const std::vector<std::string> &wrt, const GradCheckOptions &o,
                         std::mt19937_64 &rng, int order, Level *next) {
  std::vector<size_t> wrtIdx;
  for (const std::string &n : wrt) wrtIdx.push_back(static_cast<size_t>(p.inputIndex(n)));

  std::vector<Tensor> dirs;
  for (size_t i : wrtIdx) dirs.push_back(randomTensor(p.type(p.inputs[i]), rng, InitKind::Normal));

  bool scalar = p.outputs.size() == 1 && p.type(p.outputs[0]).rank() == 0;
  std::vector<Tensor> cts;
  if (!scalar)
    for (ir::ValueId out : p.outputs) cts.push_back(randomTensor(p.type(out), rng, InitKind::Normal));

  // f(s) = ⟨F(x + s·t), c⟩ (c = 1 for a scalar output).
  auto f = [&](double s) {
    std::vector<Tensor> outs = rt::evaluateReference(p, shifted(point, wrtIdx, dirs, s));
    if (scalar) return outs[0].data[0];
    double acc = 0;
    for (size_t i = 0; i < outs.size(); ++i) acc += dot(outs[i], cts[i]);
    return acc;
  };
  double scale = 0;
  for (size_t i : wrtIdx)
    for (double v : point[i].data) scale = std::max(scale, std::abs(v));
  double h = o.eps * (scale > 0 && std::isfinite(scale) ? scale : 1.0), fd;
  if (o.stencil == 3) fd = (f(h) - f(-h)) / (2 * h);
  else fd = (f(-2 * h) - 8 * f(-h) + 8 * f(h) - f(2 * h)) / (12 * h);

  passes::GradOptions go;
  go.wrt = wrt;
  go.vjp = !scalar;
  go.keepOutputs = false;
  Program g = passes::grad(p, go);
  std::vector<Tensor> gpoint = point;
  gpoint.insert(gpoint.end(), cts.begin(), cts.end()); // ct_<output> inputs, in output order
  std::vector<Tensor> grads = rt::evaluateReference(g, gpoint);
  double ad = 0;
  for (size_t k = 0; k < wrtIdx.size(); ++k) ad += dot(grads[k], dirs[k]);

  GradCheckEntry e;
  e.order = order;
  e.mode = scalar ? "grad" : "vjp";
  e.fd = fd;
  e.ad = ad;
  e.absErr = std::abs(fd - ad);
  const double mag = std::max(std::abs(fd), std::abs(ad));
  e.relErr = mag > 0 ? e.absErr / mag : 0.0;
  e.tol = o.atol + o.rtol * mag;
  e.step = h;
  e.byRel = o.rtol * mag >= o.atol;
  e.passed = std::isfinite(fd) && std::isfinite(ad) && e.absErr <= e.tol;
  if (!std::isfinite(e.absErr)) e.relErr = e.absErr = INFINITY;
  if (next) {
    next->first = std::move(g);
    next->point = std::move(gpoint);
  }
  return e;
}

} // namespace

GradCheckResult gradCheck(const Program &p, const std::vector<Tensor> &point,
                          const GradCheckOptions &opts) {
  if (opts.order != 1 && opts.order != 2)
    throw Error("error: gradcheck: order must be 1 or 2, got " + std::to_string(opts.order));
  if (!(opts.eps > 0) || !std::isfinite(opts.eps))
    throw Error("error: gradcheck: eps (the finite-difference step) must be > 0, got " +
                ir::text::formatDouble(opts.eps));
  if (opts.stencil != 3 && opts.stencil != 5)
    throw Error("error: gradcheck: stencil must be 3 or 5 points, got " + std::to_string(opts.stencil));
  if (point.size() != p.inputs.size())
    throw Error("error: gradcheck: program " + ir::text::atName(p.name) + " has " + std::to_string(p.inputs.size()) +
                " inputs but " + std::to_string(point.size()) + " values were given");
  for (size_t i = 0; i < point.size(); ++i)
    if (point[i].type != p.type(p.inputs[i]) ||
        point[i].data.size() != static_cast<size_t>(point[i].type.numel()))
      throw Error("error: gradcheck: input '%" + p.value(p.inputs[i]).name + "' has type " +
                  p.type(p.inputs[i]).str() + " but the given value is " + point[i].type.str());

  // Resolve wrt to explicit names (the first-order program has extra ct_ inputs).
  std::vector<std::string> wrt = opts.wrt;
  if (wrt.empty())
    for (ir::ValueId in : p.inputs) wrt.push_back(p.value(in).name);
  for (const std::string &n : wrt)
    if (p.inputIndex(n) < 0)
      throw Error("error: gradcheck: --wrt: program " + ir::text::atName(p.name) + " has no input named '" + ir::text::percentName(n) + "'");

  std::mt19937_64 rng(opts.seed);
  GradCheckResult r;
  Level level;
  r.checks.push_back(checkOnce(p, point, wrt, opts, rng, 1, opts.order >= 2 ? &level : nullptr));
  if (opts.order >= 2)
    r.checks.push_back(checkOnce(level.first, level.point, wrt, opts, rng, 2, nullptr));
  for (const GradCheckEntry &e : r.checks) {
    r.passed &= e.passed;
    r.maxAbsErr = std::max(r.maxAbsErr, e.absErr);
    if (e.byRel) r.maxRelErr = std::max(r.maxRelErr, e.relErr);
  }
  return r;
}

InitKind parseInitKind(const std::string &s) {
  if (s == "positive") return InitKind::Positive;
  if (s == "symmetric") return InitKind::Symmetric;
  if (s == "normal") return InitKind::Normal;
  throw Error("error: --init: unknown distribution '" + s +
              "' (allowed: positive, symmetric, normal)");
}

Tensor randomTensor(const ir::Type &t, std::mt19937_64 &rng, InitKind kind) {
  Tensor x = Tensor::zeros(t);
  std::uniform_real_distribution<double> pos(0.5, 1.5), sym(-1.0, 1.0);
  std::normal_distribution<double> nrm(0.0, 1.0);
  for (double &v : x.data) {
    switch (kind) {
    case InitKind::Positive: v = pos(rng); break;
    case InitKind::Symmetric: v = sym(rng); break;
    case InitKind::Normal: v = nrm(rng); break;
    }
  }
  return x;
}

std::vector<Tensor> randomInputs(const Program &p, uint64_t seed, InitKind kind) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> xs;
  for (ir::ValueId in : p.inputs) xs.push_back(randomTensor(p.type(in), rng, kind));
  return xs;
}

std::string formatGradCheck(const GradCheckResult &r) {
  std::string s = "order  mode  step       finite-difference        transform                abs-err    rel-err    tol        by   result\n";
  char buf[320];
  size_t byRel = 0;
  for (const GradCheckEntry &e : r.checks) {
    std::snprintf(buf, sizeof buf,
                  "%-6d %-5s %-10.3e %-24.17g %-24.17g %-10.3e %-10.3e %-10.3e %-4s %s\n", e.order,
                  e.mode.c_str(), e.step, e.fd, e.ad, e.absErr, e.relErr, e.tol,
                  e.byRel ? "rel" : "abs", e.passed ? "ok" : "FAIL");
    s += buf;
    byRel += e.byRel;
  }
  const size_t byAbs = r.checks.size() - byRel;
  std::string rel = byRel ? "max rel err " : "";
  if (byRel) {
    std::snprintf(buf, sizeof buf, "%.3e", r.maxRelErr);
    rel += buf;
  }
  std::snprintf(buf, sizeof buf, "gradcheck: %s (max abs err %.3e%s%s; %zu check%s decided by rtol, %zu by atol)\n",
                r.passed ? "PASS" : "FAIL", r.maxAbsErr, byRel ? ", " : "", rel.c_str(), byRel,
                byRel == 1 ? "" : "s", byAbs);
  s += buf;
  return s;
}

} // namespace tessel::frontend
