//===- tools/cmd_bench_plaquette.cpp - `tessel bench plaquette --chi 16,32,64` ---===//
//
// The top-k SVD of the next TRG step's matrix Ma' two ways, side by side on the same
// half-tensors (docs/benchmarking.md: alternated A B A B, first run apart, medians,
// width, BLAS, load): formed (the plaquette contraction's three GEMMs, O(χ⁶), then
// svd_topk of the χ²×χ² matrix) and implicit (svd_topk over the einsum of the four
// half-tensors, runtime/EinsumOperator.h: O(χ⁴·p) per product, the matrix never
// formed); and the pullback's complement solve on both. Where the implicit form wins is
// the crossover the svd_topk-of-an-einsum rewrite needs (docs/trg.md §2.7).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>

#include <cblas.h>

#include "ir/Diagnostics.h"
#include "ir/ShapeRules.h"
#include "runtime/EinsumOperator.h"
#include "runtime/MemoryLimit.h"
#include "runtime/Runtime.h"
#include "runtime/Stats.h"
#include "runtime/TruncatedSvd.h"
#include "tools/Commands.h"

namespace tessel::tools {
namespace {

struct PlaquetteBenchOpts {
  std::string chi = "16,24,32,48,64";
  int repeat = 3;
  uint64_t seed = 7;
  double decay = 0.8;
};

using rt::msSince;
double median(const std::vector<double> &ms) { return rt::summarize(ms).median; }

/// The dense path's arrays, allocated once per χ.
struct FormBuffers {
  std::vector<double> A, P, Q, Pt, Qt, R, tmp;
  FormBuffers(int64_t D, int64_t Dp)
      : A(static_cast<size_t>(Dp * Dp * Dp * Dp)), P(static_cast<size_t>(D * Dp * D * Dp)), Q(P.size()),
        Pt(P.size()), Qt(P.size()), R(A.size()), tmp(static_cast<size_t>(D * D * Dp)) {}
};

/// Ma' (rows (l,u), columns (r,d)) of T'[r,u,l,d] = Σ S1[w,a,r]·S2[a,b,u]·S3[b,g,l]·S4[g,w,d]
/// as the plaquette einsum lowers it: P[w,r,b,u] = Σ_a S1·S2 and Q[b,l,w,d] = Σ_g S3·S4
/// (O(χ⁵) each), then R[(u,r),(l,d)] = Σ_{w,b} P·Q, one (D'²×D²)·(D²×D'²) GEMM (O(χ⁶)),
/// permuted to (l,u,r,d).
void formMa(const std::vector<std::vector<double>> &S, int64_t D, int64_t Dp, FormBuffers &b) {
  std::vector<int64_t> ext(256, 0);
  for (char c : std::string("wabg")) ext[static_cast<unsigned char>(c)] = D;
  for (char c : std::string("rlud")) ext[static_cast<unsigned char>(c)] = Dp;
  const int D2 = static_cast<int>(D * D), DDp = static_cast<int>(D * Dp), Dp2 = static_cast<int>(Dp * Dp);
  rt::permuteLabeled(S[0].data(), "war", "wra", ext, b.tmp.data());
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, DDp, DDp, static_cast<int>(D), 1.0, b.tmp.data(),
              static_cast<int>(D), S[1].data(), DDp, 0.0, b.P.data(), DDp);
  rt::permuteLabeled(S[2].data(), "bgl", "blg", ext, b.tmp.data());
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, DDp, DDp, static_cast<int>(D), 1.0, b.tmp.data(),
              static_cast<int>(D), S[3].data(), DDp, 0.0, b.Q.data(), DDp);
  rt::permuteLabeled(b.P.data(), "wrbu", "urwb", ext, b.Pt.data());
  rt::permuteLabeled(b.Q.data(), "blwd", "wbld", ext, b.Qt.data());
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Dp2, Dp2, D2, 1.0, b.Pt.data(), D2, b.Qt.data(),
              Dp2, 0.0, b.R.data(), Dp2);
  rt::permuteLabeled(b.R.data(), "urld", "lurd", ext, b.A.data());
}

void benchPlaquette(const PlaquetteBenchOpts &o) {
  std::vector<int64_t> chis;
  for (const std::string &t : CLI::detail::split(o.chi, ',')) {
    double v = 0;
    if (!readDouble(t, v).empty() || v != std::floor(v) || v < 2 || v > 96)
      throw Error("error: bench plaquette: --chi takes integers in [2, 96], got '" + t + "'");
    chis.push_back(static_cast<int64_t>(v));
  }
  if (o.repeat < 1) throw Error("error: bench plaquette: --repeat must be >= 1");
  // The dense side holds the formed χ²×χ² matrix, the two plaquette halves, their GEMM
  // forms and the product (six arrays of χ⁴ doubles) and the complement's copy of the
  // matrix: refused before anything is allocated where that exceeds what this process
  // may still take.
  const rt::MemoryLimit lim = rt::memoryLimit();
  for (int64_t chi : chis) {
    const int64_t bytes = 8 * 8 * chi * chi * chi * chi;
    if (bytes > lim.bytes)
      throw Error("error: bench plaquette: chi = " + std::to_string(chi) + " needs about " +
                  rt::formatGiB(bytes) + " (the formed matrix and its plaquette arrays), more than " +
                  lim.what + " allows");
  }
  if (!(o.decay > 0 && o.decay <= 1)) throw Error("error: bench plaquette: --decay must be in (0, 1]");
  const std::string loadBefore = rt::loadAverage();
  std::printf("bench plaquette: top-chi SVD of the next step's chi^2 x chi^2 matrix Ma' from four random "
              "half-tensors (D = D' = chi, new-bond weight %g^k, seed %llu); formed (3 GEMMs, O(chi^6)) "
              "then svd_topk, against svd_topk over the implicit einsum (O(chi^4 p) per product); "
              "alternated, %d timed rounds after one warm-up, medians (ms)\n",
              o.decay, static_cast<unsigned long long>(o.seed), o.repeat);
  std::printf("%5s %10s %10s %10s %10s %8s %7s %7s %10s %10s %9s %10s %10s %6s %6s\n", "chi", "form", "topk",
              "formed", "implicit", "ratio", "blocks", "blocks", "MiB form", "MiB impl", "ds/s0", "cmpl form",
              "cmpl impl", "CG", "CG");
  for (int64_t chi : chis) {
    const int64_t D = chi, Dp = chi, n = Dp * Dp, k = chi;
    std::mt19937_64 rng(o.seed);
    std::uniform_real_distribution<double> U(-1.0, 1.0);
    std::vector<std::vector<double>> S(4, std::vector<double>(static_cast<size_t>(D * D * Dp)));
    for (std::vector<double> &s : S)
      for (size_t i = 0; i < s.size(); ++i)
        s[i] = U(rng) * std::pow(o.decay, static_cast<double>(static_cast<int64_t>(i) % Dp));
    std::vector<rt::EinsumOperand> ops;
    const char *labels[] = {"war", "abu", "bgl", "gwd"};
    for (int i = 0; i < 4; ++i) ops.push_back({S[static_cast<size_t>(i)].data(), labels[i], {D, D, Dp}});
    const rt::EinsumOperator op(std::move(ops), "lu", "rd");
    const rt::TopkSvdConfig cfg = rt::topkSvdConfig(n, n, k);
    std::vector<double> work(static_cast<size_t>(cfg.workElems)), Uo(static_cast<size_t>(n * k)),
        s1(static_cast<size_t>(k)), s2(static_cast<size_t>(k)), Vt(static_cast<size_t>(k * n));
    FormBuffers buf(D, Dp);
    std::vector<double> tForm, tTopk, tImpl;
    rt::TopkSvdOutcome oDense, oImpl;
    for (int r = 0; r <= o.repeat; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      formMa(S, D, Dp, buf);
      const double f = msSince(t0);
      t0 = std::chrono::steady_clock::now();
      oDense = rt::topkSvd(cfg, buf.A.data(), Uo.data(), s1.data(), Vt.data(), work.data());
      const double d = msSince(t0);
      t0 = std::chrono::steady_clock::now();
      oImpl = rt::topkSvd(cfg, op, Uo.data(), s2.data(), Vt.data(), work.data());
      const double i = msSince(t0);
      if (oDense.lapackInfo != 0 || oImpl.lapackInfo != 0)
        throw Error("error: bench plaquette: a LAPACK call failed at chi = " + std::to_string(chi));
      if (r == 0) continue; // the warm-up
      tForm.push_back(f);
      tTopk.push_back(d);
      tImpl.push_back(i);
    }
    // The pullback's complement solve (the gradient's svd_topk_complement, guards given
    // by the forward as svd-topk-guards arranges, r = k cotangent columns): on the formed
    // matrix against the implicit one, alternated.
    const int64_t g = ir::svdTopkComplementGuards(n, n, k), kg = k + g;
    std::vector<double> Ug(static_cast<size_t>(n * kg)), sgv(static_cast<size_t>(kg)), Vgt(static_cast<size_t>(kg * n));
    {
      const rt::TopkSvdConfig cg = rt::topkSvdConfig(n, n, kg);
      std::vector<double> wg(static_cast<size_t>(cg.workElems));
      rt::topkSvd(cg, buf.A.data(), Ug.data(), sgv.data(), Vgt.data(), wg.data());
    }
    std::vector<double> gU(static_cast<size_t>(n * k)), gVt(static_cast<size_t>(k * n)),
        X(static_cast<size_t>(n * k)), Yt(static_cast<size_t>(k * n));
    for (double &x : gU) x = U(rng);
    for (double &x : gVt) x = U(rng);
    const rt::SvdComplementConfig cd = rt::svdComplementConfig(n, n, k, k, g),
                                  ci = rt::svdComplementConfig(n, n, k, k, g, true);
    std::vector<double> wc(static_cast<size_t>(std::max(cd.workElems, ci.workElems)));
    std::vector<double> tCd, tCi;
    int itD = 0, itI = 0;
    for (int r = 0; r <= o.repeat; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      const rt::SvdComplementOutcome a = rt::svdComplement(cd, 1e-9, buf.A.data(), Ug.data(), sgv.data(), Vgt.data(),
                                                           gU.data(), gVt.data(), X.data(), Yt.data(), wc.data());
      const double d = msSince(t0);
      t0 = std::chrono::steady_clock::now();
      const rt::SvdComplementOutcome b = rt::svdComplement(ci, 1e-9, op, Ug.data(), sgv.data(), Vgt.data(), gU.data(),
                                                           gVt.data(), X.data(), Yt.data(), wc.data());
      const double i = msSince(t0);
      itD = a.iterations, itI = b.iterations;
      if (r == 0) continue;
      tCd.push_back(d);
      tCi.push_back(i);
    }
    double ds = 0;
    for (int64_t i = 0; i < k; ++i) ds = std::max(ds, std::fabs(s1[i] - s2[i]) / s1[0]);
    // Memory beyond the half-tensors: the formed matrix and the plaquette halves (as the
    // engine's plan holds them: A, P, Q; this bench's transposed copies not counted);
    // the operator's permuted operands (two per operand) and its two running blocks
    // (p = cfg.b0 columns: at most D·D·D'·p each).
    const double mib = 1.0 / (1 << 20) * sizeof(double);
    const double formMiB = static_cast<double>(buf.A.size() + buf.P.size() + buf.Q.size()) * mib;
    const double implMiB = static_cast<double>(8 * D * D * Dp + 2 * D * D * Dp * ((cfg.b0 + 3) / 4 * 4)) * mib;
    const double formed = median(tForm) + median(tTopk), implicit = median(tImpl);
    std::printf("%5lld %10.1f %10.1f %10.1f %10.1f %8.3f %7d %7d %10.1f %10.1f %9.1e %10.1f %10.1f %6d %6d\n",
                static_cast<long long>(chi), median(tForm), median(tTopk), formed, implicit,
                implicit / formed, oDense.iterations, oImpl.iterations, formMiB, implMiB, ds,
                median(tCd), median(tCi), itD, itI);
  }
  std::printf("columns: form = the plaquette GEMMs, topk = svd_topk of the formed matrix, formed = their "
              "sum, implicit = svd_topk over the einsum, ratio = implicit / formed, blocks = Krylov "
              "blocks (formed, implicit), MiB = memory beyond the half-tensors, ds/s0 = max difference "
              "of the singular values, cmpl = the pullback's complement solve (svd_topk_complement, "
              "chi cotangent columns, guards given) on the formed and the implicit matrix, CG = its "
              "iterations\n");
  std::printf("width 1 | blas %s\nload average: before %s, after %s\n", rt::blasInfo().c_str(),
              loadBefore.c_str(), rt::loadAverage().c_str());
}

} // namespace

void addBenchPlaquetteCommand(CLI::App &bench) {
  auto o = std::make_shared<PlaquetteBenchOpts>();
  CLI::App *c = bench.add_subcommand(
      "plaquette",
      "Time the top-chi SVD of a TRG step's next matrix (chi^2 x chi^2) formed from four "
      "random half-tensors (the plaquette GEMMs, O(chi^6), then svd_topk) against svd_topk "
      "over the implicit einsum (O(chi^4 p) per product, never formed), alternated: medians "
      "(ms), their ratio, Krylov blocks, memory and the largest difference of the singular "
      "values. The crossover chi of the implicit form. See docs/trg.md section 2.7.");
  c->add_option("--chi", o->chi, "Comma-separated bond dimensions (D = D' = chi), each in [2, 96]")
      ->capture_default_str();
  c->add_option("--repeat", o->repeat, "Timed rounds after one warm-up")->capture_default_str();
  c->add_option("--seed", o->seed, "Seed of the half-tensors")->capture_default_str();
  c->add_option("--decay", o->decay,
                "Weight decay^k on the new-bond index k of each half-tensor (as U*sqrt(s) carries "
                "the singular values), in (0, 1]")
      ->capture_default_str();
  c->callback([o]() { benchPlaquette(*o); });
}

} // namespace tessel::tools
