//===- frontend/Trg.cpp - The TRG programs (docs/trg.md) -------------------------===//
#include "frontend/Trg.h"

#include <algorithm>
#include <cmath>

#include "ir/Diagnostics.h"

namespace tessel::frontend {
namespace {

/// "trg 4->4: what" for a step-class program; "trg step 3 (4->4): what" inside the
/// whole program, where every step of a class is traced again.
std::string stepLoc(int64_t din, int64_t dout, int step, const std::string &what) {
  const std::string cls = std::to_string(din) + "->" + std::to_string(dout);
  if (step > 0) return "trg step " + std::to_string(step) + " (" + cls + "): " + what;
  return "trg " + cls + ": " + what;
}

/// Half-tensor S[p,q,k] = X[p·D+q, k]·sqrt(s[k]) for X of shape [D²,D'] (docs/trg.md §2.5);
/// `sqrtS` is sqrt(s) already broadcast to [D, D, D'].
Tensor halfTensor(const Tensor &X, const Tensor &sqrtS, int64_t D, int64_t Dp) {
  return X.reshape({D, D, Dp}) * sqrtS;
}

} // namespace

std::string trgStepName(int64_t din, int64_t dout) {
  return "trg_step_" + std::to_string(din) + "_" + std::to_string(dout);
}

Tensor traceTrgInit(const Tensor &beta) {
  ir::Builder &b = beta.builder();
  if (beta.rank() != 0)
    throw ShapeError("trg init: beta must be a scalar f64[], got " + beta.type().str());
  b.setLoc("trg init: cosh, sinh");
  // c = sqrt(cosh β)·e^(−β/2) and s = sqrt(sinh β)·e^(−β/2): the factor e^(2β) of T0 is
  // taken out (trgInitLogScale), so nothing overflows for any β a double holds.
  Tensor q = (beta * -2.0).exp().named("q");
  Tensor c = ((q + 1.0) * 0.5).sqrt().named("c");
  Tensor s = ((1.0 - q) * 0.5).sqrt().named("s");
  b.setLoc("trg init: W");
  // W = [[c, s], [c, -s]]: W[a, i], a = spin (+1 -> 0, -1 -> 1), i = bond index.
  Tensor colC(b, b.constant(ir::Tensor(ir::Type({2, 2}), {1, 0, 1, 0})));
  Tensor colS(b, b.constant(ir::Tensor(ir::Type({2, 2}), {0, 1, 0, -1})));
  Tensor W = (c * colC + s * colS).named("W");
  b.setLoc("trg init: T0");
  Tensor T0 = einsum("ai,aj,ak,al->ijkl", {W, W, W, W}).named("T0");
  b.setLoc("");
  return T0;
}

TrgStepTrace traceTrgStep(const Tensor &T, int64_t dout, const TrgStepOptions &opts) {
  ir::Builder &b = T.builder();
  const ir::Shape &sh = T.shape();
  if (T.rank() != 4 || sh[1] != sh[0] || sh[2] != sh[0] || sh[3] != sh[0])
    throw ShapeError("trg step: T must be f64[D,D,D,D], got " + T.type().str());
  const int64_t D = sh[0], D2 = D * D, Dp = dout;
  if (Dp < 1 || Dp > D2)
    throw ShapeError("trg step: D' = " + std::to_string(Dp) + " must be in [1, D^2 = " +
                     std::to_string(D2) + "] for D = " + std::to_string(D));
  auto loc = [&](const std::string &what) { b.setLoc(stepLoc(D, Dp, opts.stepNumber, what)); };
  TrgStepTrace r;

  // 1. Normalise by m = max|T|.
  loc("normalise");
  Tensor m = T.abs().max();
  if (opts.stopGradientOnMax) m = m.stopGradient();
  m.named("m");
  r.logm = m.log().named("logm");
  Tensor Tm = (T / m).named("Tnorm");

  // 2. The two D²×D² matrices.
  loc("reshape Ma");
  Tensor Ma = Tm.transpose({2, 1, 0, 3}).reshape({D2, D2}).named("Ma");
  loc("reshape Mb");
  Tensor Mb = Tm.transpose({3, 2, 1, 0}).reshape({D2, D2}).named("Mb");

  // 3. Full SVDs.
  loc("svd Ma");
  SvdResult A = svd(Ma, opts.svdEps);
  A.U.named("Ua");
  A.s.named("sa");
  A.Vt.named("Vta");
  loc("svd Mb");
  SvdResult B = svd(Mb, opts.svdEps);
  B.U.named("Ub");
  B.s.named("sb");
  B.Vt.named("Vtb");
  r.sa = A.s;
  r.sb = B.s;
  r.Ma = Ma;
  r.Mb = Mb;

  // 4. Truncation: a slice of the full factors (so the reverse rule sees the
  //    discarded singular vectors too, docs/trg.md §5).
  auto truncate = [&](const SvdResult &F, const char *tag) {
    loc(std::string("truncate ") + tag);
    if (Dp == D2) return F;
    return SvdResult{F.U.slice({0, 0}, {D2, Dp}), F.s.slice({0}, {Dp}),
                     F.Vt.slice({0, 0}, {Dp, D2})};
  };
  SvdResult Ak = truncate(A, "a"), Bk = truncate(B, "b");

  // 5. Half-tensors S1..S4 of shape (D, D, D').
  loc("half-tensors a");
  Tensor sqa = Ak.s.sqrt().broadcastInDim({D, D, Dp}, {2});
  Tensor S1 = halfTensor(Ak.U, sqa, D, Dp).named("S1");
  Tensor S3 = halfTensor(Ak.Vt.T(), sqa, D, Dp).named("S3");
  loc("half-tensors b");
  Tensor sqb = Bk.s.sqrt().broadcastInDim({D, D, Dp}, {2});
  Tensor S2 = halfTensor(Bk.U, sqb, D, Dp).named("S2");
  Tensor S4 = halfTensor(Bk.Vt.T(), sqb, D, Dp).named("S4");

  // 6. Plaquette contraction (lowered later by the ordering pass).
  loc("plaquette einsum");
  r.Tn = einsum("war,abu,bgl,gwd->ruld", {S1, S2, S3, S4}).named("Tn");

  if (opts.outputKeptSingularValues) {
    loc("kept singular values");
    r.skept = concatenate({A.s.slice({Dp - 1}, {Dp}), B.s.slice({Dp - 1}, {Dp})}, 0)
                  .named("skept");
  }
  b.setLoc("");
  return r;
}

Tensor traceTrgClosure(const Tensor &T) {
  ir::Builder &b = T.builder();
  const ir::Shape &sh = T.shape();
  if (T.rank() != 4 || sh[1] != sh[0] || sh[2] != sh[0] || sh[3] != sh[0])
    throw ShapeError("trg closure: T must be f64[D,D,D,D], got " + T.type().str());
  const int64_t D = sh[0], n = D * D;
  b.setLoc("trg closure " + std::to_string(D) + ": trace");
  // Σ_ij T[i,j,i,j] is the trace of the n×n matrix M[(i,j),(k,l)] = T[i,j,k,l]. Its
  // diagonal, without a mask: flatten, pad n zeros, view as [n, n+1]; column 0 holds
  // M[r,r] (flat index r·(n+1) = r·n + r).
  Tensor diag = T.reshape({n * n}).pad({0}, {n}).reshape({n, n + 1}).slice({0, 0}, {n, 1});
  Tensor tr = diag.sum().named("tr");
  b.setLoc("trg closure " + std::to_string(D) + ": log");
  Tensor lntr = tr.log().named("lntr");
  b.setLoc("");
  return lntr;
}

ir::Program buildTrgInit() {
  Tracer tr("trg_init");
  Tensor beta = tr.input("beta", {});
  tr.output(traceTrgInit(beta), "T0");
  return tr.take();
}

ir::Program buildTrgStep(int64_t din, int64_t dout, const TrgStepOptions &opts) {
  if (din < 1) throw Error("trg step: D must be >= 1, got " + std::to_string(din));
  Tracer tr(trgStepName(din, dout));
  Tensor T = tr.input("T", {din, din, din, din});
  TrgStepTrace s = traceTrgStep(T, dout, opts);
  tr.output(s.logm, "logm");
  tr.output(s.Tn, "Tn");
  if (opts.outputKeptSingularValues) tr.output(s.skept, "skept");
  if (opts.outputSingularValues) {
    tr.output(s.sa, "sa");
    tr.output(s.sb, "sb");
  }
  if (opts.outputSvdInputs) {
    tr.output(s.Ma, "Ma");
    tr.output(s.Mb, "Mb");
  }
  return tr.take();
}

ir::Program buildTrgClosure(int64_t d) {
  if (d < 1) throw Error("trg closure: D must be >= 1, got " + std::to_string(d));
  Tracer tr("trg_closure_" + std::to_string(d));
  Tensor T = tr.input("T", {d, d, d, d});
  tr.output(traceTrgClosure(T), "lntr");
  return tr.take();
}

ir::Program buildTrgWhole(const std::vector<int64_t> &ranks, const TrgStepOptions &opts) {
  if (ranks.empty()) throw Error("trg whole: needs at least one step");
  Tracer tr("trg_whole");
  ir::Builder &b = tr.builder();
  Tensor beta = tr.input("beta", {});
  Tensor T = traceTrgInit(beta);
  // lnZ/N = Σ_n logm_n / 2^n + lntr / 2^N, accumulated in step order (same order as
  // the staged driver on the host, so the two modes agree to the last bits).
  Tensor lnz;
  std::vector<Tensor> kept;
  for (size_t n = 0; n < ranks.size(); ++n) {
    TrgStepOptions stepOpts = opts;
    stepOpts.stepNumber = static_cast<int>(n + 1);
    TrgStepTrace s = traceTrgStep(T, ranks[n], stepOpts);
    b.setLoc("trg whole: accumulate step " + std::to_string(n + 1));
    Tensor term = n == 0 ? s.logm : s.logm * std::ldexp(1.0, -static_cast<int>(n));
    lnz = n == 0 ? term : lnz + term;
    if (opts.outputKeptSingularValues) kept.push_back(s.skept.reshape({1, 2}));
    T = s.Tn;
  }
  Tensor lntr = traceTrgClosure(T);
  b.setLoc("trg whole: accumulate closure");
  lnz = lnz + lntr * std::ldexp(1.0, -static_cast<int>(ranks.size()));
  b.setLoc("trg whole: initial tensor scale");
  lnz = (lnz + beta * 2.0).named("lnz"); // trgInitLogScale

  b.setLoc("");
  tr.output(lnz, "lnz");
  if (opts.outputKeptSingularValues) {
    b.setLoc("trg whole: kept singular values");
    tr.output(concatenate(kept, 0), "skept");
    b.setLoc("");
  }
  return tr.take();
}

int64_t squareSaturated(int64_t d) {
  int64_t sq = 0;
  return __builtin_mul_overflow(d, d, &sq) ? INT64_MAX : sq;
}

std::vector<int64_t> trgDefaultRanks(int64_t chi, int steps) {
  std::vector<int64_t> r;
  int64_t Dprev = 0, D = 2; // Dprev: input dimension of the previous step
  for (int n = 0; n < steps; ++n) {
    int64_t bound = n == 0 ? 2 : squareSaturated(Dprev);
    int64_t Dn = std::min({squareSaturated(D), chi, bound});
    r.push_back(Dn);
    Dprev = D;
    D = Dn;
  }
  return r;
}

void checkTrgRanks(const std::vector<int64_t> &ranks, int64_t chi) {
  if (ranks.empty()) throw Error("error: --ranks: the rank schedule is empty (steps must be >= 1)");
  int64_t D = 2;
  for (size_t n = 0; n < ranks.size(); ++n) {
    int64_t hi = std::min(squareSaturated(D), chi);
    if (ranks[n] < 1 || ranks[n] > hi)
      throw Error("error: --ranks: rank " + std::to_string(ranks[n]) + " of step " + std::to_string(n + 1) +
                  " is out of range: D = " + std::to_string(D) + " allows D' in [1, " +
                  std::to_string(hi) + "] (min(D^2, chi = " + std::to_string(chi) + "))");
    D = ranks[n];
  }
}

} // namespace tessel::frontend
