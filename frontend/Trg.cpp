//===- frontend/Trg.cpp - The TRG programs (docs/trg.md) -------------------------===//
#include "frontend/Trg.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "frontend/TrgHotrg.h"
#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"

namespace tessel::frontend {
namespace {

/// "trg 4->4: what" for a step-class program; "trg step 3 (4->4): what" inside the
/// whole program, where every step of a class is traced again.
std::string stepLoc(int64_t din, int64_t dout, int step, const std::string &what,
                    const char *algorithm = "trg") {
  const std::string cls = std::to_string(din) + "->" + std::to_string(dout);
  const std::string a = algorithm;
  if (step > 0) return a + " step " + std::to_string(step) + " (" + cls + "): " + what;
  return a + " " + cls + ": " + what;
}

/// Half-tensor S[p,q,k] = X[p·D+q, k]·sqrt(s[k]) for X of shape [D²,D'] (docs/trg.md §2.5);
/// `sqrtS` is sqrt(s) already broadcast to [D, D, D'].
Tensor halfTensor(const Tensor &X, const Tensor &sqrtS, int64_t D, int64_t Dp) {
  return X.reshape({D, D, Dp}) * sqrtS;
}

/// ln cosh x, traced so that its first and second derivatives are right everywhere,
/// x = 0 included: with s = ±1 the sign of x as a constant (compare has no derivative),
/// u = s·x = |x| and ln cosh x = u + ln((1 + e^(−2u))/2), where e^(−2u) ≤ 1 never
/// overflows (d/dx = tanh x, d²/dx² = 1 − tanh² x; abs would give 0 for both at 0).
Tensor logCosh(const Tensor &x) {
  ir::Builder &b = x.builder();
  Tensor zero(b, b.scalar(0.0)), one(b, b.scalar(1.0)), minusOne(b, b.scalar(-1.0));
  Tensor s = select(compare(x, zero, "GE"), one, minusOne);
  Tensor u = s * x;
  return u + ((u * -2.0).exp() * 0.5 + 0.5).log();
}

/// W = [[1, √t], [1, −√t]] with t = tanh β: e^(βσσ') = cosh β·(1 + t·σσ') and
/// Σ_i W_σi W_σ'i = 1 + t·σσ', so T0 is the Ising tensor divided by cosh² β (one factor
/// per bond; trgInitLogScale adds 2 ln cosh β back), every entry in [0, 2] for any β a
/// double holds (docs/trg.md §1). Nothing cancels at small β: t = β to rounding, and the
/// derivatives of lnZ/N are 2 tanh β plus terms of order β (an e^(2β) taken out instead
/// left 2 − 2 + 2β, only absolutely accurate).
Tensor isingBondFactor(const Tensor &beta) {
  ir::Builder &b = beta.builder();
  b.setLoc("trg init: tanh");
  Tensor s = beta.tanh().sqrt().named("s");
  b.setLoc("trg init: W");
  // W[a, i], a = spin (+1 -> 0, -1 -> 1), i = bond index.
  Tensor colC(b, b.constant(ir::Tensor(ir::Type({2, 2}), {1, 0, 1, 0})));
  Tensor colS(b, b.constant(ir::Tensor(ir::Type({2, 2}), {0, 1, 0, -1})));
  return (colC + s * colS).named("W");
}

/// s^e for s > 0 (singular values): sqrt for e = ½ (bitwise what TRG computes), ones
/// for e = 0 (so that BTRG with k = 0 is TRG bitwise), exp(e·ln s) otherwise.
Tensor powConst(const Tensor &s, double e) {
  if (e == 0.5) return s.sqrt();
  if (e == 0) return Tensor(s.builder(), s.builder().scalar(1.0)).broadcastInDim(s.shape(), {});
  if (e == 1) return s;
  return (s.log() * e).exp();
}

/// The weight wh[i]·wv[j] of a pair of legs (i on a 0–2 bond, j on a 1–3 bond), broadcast
/// to `shape` with i, j on its dims 0 and 1.
Tensor legPairWeight(const TrgBondWeights &w, llvm::ArrayRef<int64_t> shape) {
  return w.h.broadcastInDim(shape, {0}) * w.v.broadcastInDim(shape, {1});
}

/// ln ‖T̃‖ of T̃ = T with √w absorbed into each leg: ½ ln Σ T²·wh[i]·wv[j]·wh[k]·wv[l].
Tensor lnNormWeighted(const Tensor &T, const TrgBondWeights &w) {
  if (!w.valid()) return (T * T).sum().log() * 0.5;
  const ir::Shape &sh = T.shape();
  Tensor W = w.h.broadcastInDim(sh, {0}) * w.v.broadcastInDim(sh, {1}) *
             w.h.broadcastInDim(sh, {2}) * w.v.broadcastInDim(sh, {3});
  return (T * T * W).sum().log() * 0.5;
}

void checkWeights(const Tensor &T, const TrgBondWeights &w, const char *where) {
  const int64_t D = T.shape()[0];
  for (const Tensor *t : {&w.h, &w.v})
    if (!t->valid() || t->rank() != 1 || t->shape()[0] != D)
      throw ShapeError(std::string(where) + ": BTRG's bond weights must be f64[" + std::to_string(D) +
                       "] for T of " + T.type().str() +
                       (t->valid() ? ", got " + t->type().str() : std::string(", got none")));
}

void checkScalarInput(const Tensor &t, const char *what) {
  if (t.rank() != 0)
    throw ShapeError(std::string("trg init: ") + what + " must be a scalar f64[], got " + t.type().str());
}

} // namespace

const char *trgAlgorithmName(TrgAlgorithm a) {
  return a == TrgAlgorithm::Btrg ? "btrg" : a == TrgAlgorithm::Hotrg ? "hotrg" : "trg";
}

int trgStepSitesLog2(TrgAlgorithm a) { return a == TrgAlgorithm::Hotrg ? 2 : 1; }

std::string trgAlgorithmText(TrgAlgorithm a, double k) {
  return a == TrgAlgorithm::Btrg ? "btrg (k = " + ir::text::formatDouble(k) + ")" : trgAlgorithmName(a);
}

TrgAlgorithm parseTrgAlgorithm(const std::string &s) {
  if (s == "trg") return TrgAlgorithm::Trg;
  if (s == "btrg") return TrgAlgorithm::Btrg;
  if (s == "hotrg") return TrgAlgorithm::Hotrg;
  throw Error("error: --algorithm: unknown algorithm '" + ir::text::clipForMessage(s) +
              "' (allowed: trg, btrg, hotrg)");
}

void checkBtrgK(double k) {
  if (!(k >= -1 && k < 1))
    throw Error("error: --btrg-k: the bond-weight exponent k must be in [-1, 1) (the half-tensors "
                "carry s^((1-k)/2)), got " + ir::text::formatDouble(k));
}

void checkBtrgKApplies(TrgAlgorithm a) {
  if (a != TrgAlgorithm::Btrg)
    throw Error(std::string("error: --btrg-k: the bond-weight exponent is BTRG's; it changes nothing "
                            "with --algorithm ") + trgAlgorithmName(a) + " (use --algorithm btrg)");
}

std::vector<std::string> TrgModel::parameters() const {
  if (hasField()) return {"beta", "h"};
  return {"beta"};
}

std::string TrgModel::str() const {
  return kind == Kind::Ising ? "ising" : "potts (q = " + std::to_string(q) + ")";
}

namespace {
void checkPottsQ(int64_t q) {
  if (q < 2 || q > kTrgMaxPottsQ)
    throw Error("error: --q: the Potts model needs q in [2, " + std::to_string(kTrgMaxPottsQ) +
                "] states, got " + std::to_string(q));
}
} // namespace

void checkTrgModel(const TrgModel &m) {
  if (m.kind == TrgModel::Kind::Potts) checkPottsQ(m.q);
}

TrgModel parseTrgModel(const std::string &name, std::optional<int64_t> q) {
  TrgModel m;
  if (name == "ising") {
    if (q && *q != 2)
      throw Error("error: --q: the ising model has q = 2 states, got " + std::to_string(*q) +
                  " (use --model potts --q " + std::to_string(*q) + ")");
    return m;
  }
  if (name != "potts")
    throw Error("error: --model: unknown model '" + ir::text::clipForMessage(name) + "' (allowed: ising, potts)");
  if (!q) throw Error("error: --model potts needs --q (the number of states, e.g. --q 3)");
  checkPottsQ(*q);
  m.kind = TrgModel::Kind::Potts;
  m.q = static_cast<int>(*q);
  return m;
}

TrgLogScale trgInitLogScale(const TrgModel &m, double beta, double h) {
  TrgLogScale s;
  if (m.kind == TrgModel::Kind::Potts) { // e^β per bond
    s.value = 2.0 * beta;
    s.dbeta = 2.0;
    return s;
  }
  // Ising: cosh β per bond, 2 ln cosh β = 2β + 2 ln((1 + e^(−2β))/2); d/dβ = 2 tanh β,
  // d²/dβ² = 2 sech² β = 8e^(−2β)/(1 + e^(−2β))² (no 1 − tanh² cancellation).
  const double e = std::exp(-2.0 * beta);
  s.value = 2.0 * (beta + std::log1p(e) - std::log(2.0));
  s.dbeta = 2.0 * std::tanh(beta);
  s.dbeta2 = 8.0 * e / ((1.0 + e) * (1.0 + e));
  if (!m.hasField()) return s;
  // + ln cosh(βh): with x = βh, t = tanh x, sech² = 1 − t²,
  // ∂/∂β = h t, ∂/∂h = β t, ∂²/∂β² = h² sech², ∂²/∂β∂h = t + x sech², ∂²/∂h² = β² sech².
  const double x = beta * h, ax = std::fabs(x), t = std::tanh(x), sech2 = 1.0 - t * t;
  s.value += ax + std::log1p(std::exp(-2.0 * ax)) - std::log(2.0);
  s.dbeta += h * t;
  s.dh = beta * t;
  s.dbeta2 += h * h * sech2;
  s.dbetadh = t + x * sech2;
  s.dh2 = beta * beta * sech2;
  return s;
}

std::string trgStepName(int64_t din, int64_t dout) {
  return "trg_step_" + std::to_string(din) + "_" + std::to_string(dout);
}

Tensor traceTrgInit(const Tensor &beta, const Tensor &h) {
  ir::Builder &b = beta.builder();
  checkScalarInput(beta, "beta");
  checkScalarInput(h, "h");
  Tensor W = isingBondFactor(beta);
  b.setLoc("trg init: field");
  // The site weight e^(βhσ) divided by cosh(βh) (taken out with cosh² β): 1 + σ·tanh(βh),
  // in [0, 2] for every β and h. It multiplies the first of the four W factors
  // (V[a, i] = (1 + σ_a t)·W[a, i]); at h = 0 the weight is exactly 1 and V = W bitwise.
  Tensor t = (beta * h).tanh().named("t");
  Tensor sigma(b, b.constant(ir::Tensor(ir::Type({2, 2}), {1, 1, -1, -1})));
  Tensor V = (W * (t * sigma + 1.0)).named("V");
  b.setLoc("trg init: T0");
  Tensor T0 = einsum("ai,aj,ak,al->ijkl", {V, W, W, W}).named("T0");
  b.setLoc("");
  return T0;
}

Tensor traceTrgPottsInit(const Tensor &beta, int q) {
  ir::Builder &b = beta.builder();
  checkScalarInput(beta, "beta");
  checkTrgModel(TrgModel{TrgModel::Kind::Potts, q});
  b.setLoc("trg init: potts eigenvalues");
  // e^(βδ(a,b)) = (e^β − 1)·δ_ab + 1: eigenvalue e^β − 1 + q on the uniform vector,
  // e^β − 1 on its complement; divided by e^β (trgInitLogScale): 1 + (q − 1)e^(−β) and
  // 1 − e^(−β), both in (0, q] for β > 0.
  Tensor e = (-beta).exp().named("e");
  Tensor l0 = (e * static_cast<double>(q - 1) + 1.0).sqrt().named("sqrt_l0");
  Tensor l1 = (1.0 - e).sqrt().named("sqrt_l1");
  b.setLoc("trg init: W");
  // O: column 0 = 1/√q (uniform), column k ≥ 1 = the Helmert vector
  // (1, …, 1, −k, 0, …)/√(k(k+1)) (k ones): orthonormal, fixed. W = O·diag(√λ).
  const size_t n = static_cast<size_t>(q);
  std::vector<double> o0(n * n, 0.0), ok(n * n, 0.0);
  for (size_t a = 0; a < n; ++a) {
    o0[a * n] = 1.0 / std::sqrt(static_cast<double>(q));
    for (size_t k = 1; k < n; ++k) {
      const double norm = std::sqrt(static_cast<double>(k * (k + 1)));
      ok[a * n + k] = a < k ? 1.0 / norm : a == k ? -static_cast<double>(k) / norm : 0.0;
    }
  }
  const int64_t qq = q;
  Tensor O0(b, b.constant(ir::Tensor(ir::Type({qq, qq}), o0)));
  Tensor Ok(b, b.constant(ir::Tensor(ir::Type({qq, qq}), ok)));
  Tensor W = (l0 * O0 + l1 * Ok).named("W");
  b.setLoc("trg init: T0");
  Tensor T0 = einsum("ai,aj,ak,al->ijkl", {W, W, W, W}).named("T0");
  b.setLoc("");
  return T0;
}

namespace {
/// s[i] as f64[1], or 0 where s (f64[K]) has no entry i (nothing was cut).
Tensor valueAt(const Tensor &s, int64_t i) {
  if (i < s.shape()[0]) return s.slice({i}, {i + 1});
  return Tensor(s.builder(), s.builder().constant(ir::Tensor(ir::Type({1}), {0.0})));
}

/// The values at the step's cut at D' = dout, from r.sa and r.sb, as the options ask:
/// r.skept = (sa[D'-1], sb[D'-1]), the smallest kept, and r.scut = (sa[0], sa[D'], …,
/// sa[E], sb[0], sb[D'], …, sb[E]), the largest and the largest cut ones (E =
/// max(D', opts.cutValuesTo)).
void traceCutValues(TrgStepTrace &r, int64_t dout, const TrgStepOptions &opts,
                    const std::function<void(const std::string &)> &loc) {
  if (opts.outputKeptSingularValues) {
    loc("kept singular values");
    r.skept = concatenate({valueAt(r.sa, dout - 1), valueAt(r.sb, dout - 1)}, 0).named("skept");
  }
  if (opts.outputCutSingularValues) {
    loc("largest cut singular values");
    const int64_t last = std::max(dout, opts.cutValuesTo);
    std::vector<Tensor> parts;
    for (const Tensor *s : {&r.sa, &r.sb}) {
      parts.push_back(valueAt(*s, 0));
      for (int64_t i = dout; i <= last; ++i) parts.push_back(valueAt(*s, i));
    }
    r.scut = concatenate(parts, 0).named("scut");
  }
  if (opts.outputLeadingPair) {
    loc("leading singular values");
    r.spair = concatenate({valueAt(r.sa, 0), valueAt(r.sa, 1), valueAt(r.sb, 0), valueAt(r.sb, 1)}, 0)
                  .named("spair");
  }
}
} // namespace

TrgStepTrace traceTrgStep(const Tensor &T, int64_t dout, const TrgStepOptions &opts,
                          const TrgBondWeights &w) {
  ir::Builder &b = T.builder();
  const ir::Shape &sh = T.shape();
  const bool hotrg = opts.algorithm == TrgAlgorithm::Hotrg;
  const std::string name = hotrg ? "hotrg" : "trg";
  if (T.rank() != 4 || sh[1] != sh[0] || sh[2] != sh[0] || sh[3] != sh[0])
    throw ShapeError(name + " step: T must be f64[D,D,D,D], got " + T.type().str());
  const int64_t D = sh[0], D2 = D * D, Dp = dout;
  if (Dp < 1 || Dp > D2)
    throw ShapeError(name + " step: D' = " + std::to_string(Dp) + " must be in [1, D^2 = " +
                     std::to_string(D2) + "] for D = " + std::to_string(D));
  const bool btrg = opts.weighted();
  if (btrg) {
    checkBtrgK(opts.btrgK);
    checkWeights(T, w, "trg step");
  }
  const std::function<void(const std::string &)> loc = [&](const std::string &what) {
    b.setLoc(stepLoc(D, Dp, opts.stepNumber, what, name.c_str()));
  };
  TrgStepTrace r;

  if (hotrg) {
    // 1. Normalise by m = max|T| (HOTRG's SVDs are of environments, not of T).
    loc("normalise");
    Tensor m = T.abs().max();
    if (opts.stopGradientOnNorm) m = m.stopGradient();
    m.named("m");
    r.logm = m.log().named("logm");
    traceHotrgHalves((T / m).named("Tnorm"), Dp, opts, loc, r);
    traceCutValues(r, Dp, opts, loc);
    b.setLoc("");
    return r;
  }

  // 1. The two D²×D² matrices, of T as it comes: the step normalises by Ma's largest
  //    singular value (4.), which the SVDs give.
  loc("reshape Ma");
  Tensor Ma = T.transpose({2, 1, 0, 3}).reshape({D2, D2}).named("Ma");
  loc("reshape Mb");
  Tensor Mb = T.transpose({3, 2, 1, 0}).reshape({D2, D2}).named("Mb");

  // 2. Full SVDs.
  loc("svd Ma");
  // The half-tensors U·√s and √s·Vt meet again only across the new bond, so lnZ/N does
  // not change under an orthogonal gauge of that bond (docs/trg.md §5). Not so in BTRG:
  // the weight s^k on the new bond commutes only with a rotation inside a degenerate
  // multiplet, so its SVDs promise nothing (§9), except at k = 0, where the weights are
  // ones and the step is TRG's.
  const char *gauge = btrg && opts.btrgK != 0 ? "none" : "bond";
  SvdResult A = svd(Ma, opts.svdEps, gauge);
  A.U.named("Ua");
  A.s.named("sa");
  A.Vt.named("Vta");
  loc("svd Mb");
  SvdResult B = svd(Mb, opts.svdEps, gauge);
  B.U.named("Ub");
  B.s.named("sb");
  B.Vt.named("Vtb");

  // 3. Truncation: a slice of the full factors (so the reverse rule sees the
  //    discarded singular vectors too, docs/trg.md §5).
  auto truncate = [&](const SvdResult &F, const char *tag) {
    loc(std::string("truncate ") + tag);
    if (Dp == D2) return F;
    return SvdResult{F.U.slice({0, 0}, {D2, Dp}), F.s.slice({0}, {Dp}),
                     F.Vt.slice({0, 0}, {Dp, D2})};
  };
  SvdResult Ak = truncate(A, "a"), Bk = truncate(B, "b");

  // 4. Normalise by m = sa[0]: svd(T/m) = (U, s/m, Vt), so dividing the values is dividing
  //    T, which is never formed (docs/trg.md §2.1). The kept values are divided after the
  //    slice, so that their cotangents reach no triplet the step cuts.
  loc("normalise");
  Tensor m = Ak.s.slice({0}, {1}).reshape({});
  if (opts.stopGradientOnNorm) m = m.stopGradient();
  m.named("m");
  r.logm = m.log().named("logm");
  Ak.s = Ak.s / m;
  Bk.s = Bk.s / m;
  // The values the options output, divided after a slice as well: an op that reads all
  // of s would keep truncate-svd from computing only the leading triplets.
  int64_t reported = 0;
  if (opts.outputKeptSingularValues || opts.outputLeadingSingularValues) reported = Dp;
  if (opts.outputCutSingularValues) reported = std::max(Dp, opts.cutValuesTo) + 1;
  if (opts.outputLeadingPair) reported = std::max<int64_t>(reported, 2);
  if (opts.outputSingularValues) reported = D2;
  reported = std::min(reported, D2);
  if (reported > 0) {
    r.sa = A.s.slice({0}, {reported}) / m;
    r.sb = B.s.slice({0}, {reported}) / m;
  }
  r.Ma = Ma;
  r.Mb = Mb;

  // 5. Half-tensors S1..S4 of shape (D, D, D'): U·s^e and V·s^e, e = ½ (TRG) or
  //    (1 − k)/2 (BTRG, docs/trg.md §9).
  const double e = btrg ? (1.0 - opts.btrgK) / 2 : 0.5;
  loc("half-tensors a");
  Tensor sqa = powConst(Ak.s, e).broadcastInDim({D, D, Dp}, {2});
  Tensor S1 = halfTensor(Ak.U, sqa, D, Dp);
  Tensor S3 = halfTensor(Ak.Vt.T(), sqa, D, Dp);
  loc("half-tensors b");
  Tensor sqb = powConst(Bk.s, e).broadcastInDim({D, D, Dp}, {2});
  Tensor S2 = halfTensor(Bk.U, sqb, D, Dp).named("S2");
  Tensor S4 = halfTensor(Bk.Vt.T(), sqb, D, Dp).named("S4");
  if (btrg) {
    // The old weights on the four internal bonds of the plaquette, each once: S1's and
    // S3's legs (dims 0, 1) are a 0–2 leg and a 1–3 leg of the sublattice-a tensor.
    loc("bond weights");
    Tensor W = legPairWeight(w, {D, D, Dp});
    S1 = S1 * W;
    S3 = S3 * W;
    // The new bonds: r–l of Tn split an a tensor, u–d a b tensor.
    loc("new bond weights");
    r.wn.h = powConst(Ak.s, opts.btrgK).named("wh_next");
    r.wn.v = powConst(Bk.s, opts.btrgK).named("wv_next");
  }
  S1.named("S1");
  S3.named("S3");

  // 6. Plaquette contraction (lowered later by the ordering pass).
  loc("plaquette einsum");
  r.Tn = einsum("war,abu,bgl,gwd->ruld", {S1, S2, S3, S4}).named("Tn");

  traceCutValues(r, Dp, opts, loc);
  b.setLoc("");
  return r;
}

Tensor traceTrgClosure(const Tensor &T, const TrgBondWeights &w) {
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
  if (w.valid()) {
    checkWeights(T, w, "trg closure");
    diag = diag * legPairWeight(w, {D, D}).reshape({n, 1}); // wh[i]·wv[j] at row i·D + j
  }
  Tensor tr = diag.sum().named("tr");
  b.setLoc("trg closure " + std::to_string(D) + ": log");
  Tensor lntr = tr.log().named("lntr");
  b.setLoc("");
  return lntr;
}

TrgStepTrace traceTrgLimitClosure(const Tensor &T, int64_t dout, const TrgStepOptions &opts,
                                  const TrgBondWeights &w) {
  ir::Builder &b = T.builder();
  if (T.rank() != 4)
    throw ShapeError("trg limit closure: T must be f64[D,D,D,D], got " + T.type().str());
  TrgStepOptions so = opts;
  so.outputKeptSingularValues = true;
  TrgStepTrace s = traceTrgStep(T, dout, so, w);
  // A step covers b = 2^sitesLog2 tensors: f = (b·ln m + ln‖T'‖ − ln‖T‖)/(b − 1).
  const double sites = std::ldexp(1.0, opts.sitesLog2());
  b.setLoc("trg limit closure " + std::to_string(T.shape()[0]) +
           (sites == 2 ? ": 2 ln m + ln|T'| - ln|T|" : ": (4 ln m + ln|T'| - ln|T|)/3"));
  Tensor f = s.logm * sites + lnNormWeighted(s.Tn, s.wn) - lnNormWeighted(T, w);
  s.ltail = (sites == 2 ? f : f / (sites - 1)).named("ltail");
  b.setLoc("");
  return s;
}

namespace {
/// The init tensor of `model` on fresh inputs model.parameters() of `tr`, and those
/// inputs (params[0] = β, params[1] = h with a field).
Tensor traceModelInit(Tracer &tr, const TrgModel &model, std::vector<Tensor> &params) {
  checkTrgModel(model);
  for (const std::string &name : model.parameters()) params.push_back(tr.input(name, {}));
  if (model.hasField()) return traceTrgInit(params[0], params[1]);
  return traceTrgPottsInit(params[0], model.q);
}

/// BTRG: the inputs %wh, %wv: f64[d] of a step or closure program; TRG: none.
TrgBondWeights weightInputs(Tracer &tr, int64_t d, const TrgStepOptions &opts) {
  if (!opts.weighted()) return {};
  return {tr.input("wh", {d}), tr.input("wv", {d})};
}

/// BTRG: the initial tensor's bond weights, ones; TRG: none.
TrgBondWeights initialWeights(Tracer &tr, int64_t d, const TrgStepOptions &opts) {
  if (!opts.weighted()) return {};
  return {tr.full({d}, 1.0).named("wh0"), tr.full({d}, 1.0).named("wv0")};
}
} // namespace

double trgLnNorm(const ir::Tensor &T, const ir::Tensor *wh, const ir::Tensor *wv) {
  double s = 0;
  if (!wh) {
    for (double v : T.data) s += v * v;
    return 0.5 * std::log(s);
  }
  const size_t D = wh->data.size();
  size_t at = 0;
  for (size_t i = 0; i < D; ++i)
    for (size_t j = 0; j < D; ++j)
      for (size_t k = 0; k < D; ++k)
        for (size_t l = 0; l < D; ++l, ++at) {
          const double v = T.data[at];
          s += v * v * (wh->data[i] * wv->data[j] * wh->data[k] * wv->data[l]);
        }
  return 0.5 * std::log(s);
}

ir::Program buildTrgInit(const TrgModel &model) {
  Tracer tr("trg_init");
  std::vector<Tensor> params;
  tr.output(traceModelInit(tr, model, params), "T0");
  return tr.take();
}

ir::Program buildTrgStep(int64_t din, int64_t dout, const TrgStepOptions &opts) {
  if (din < 1) throw Error("trg step: D must be >= 1, got " + std::to_string(din));
  Tracer tr(trgStepName(din, dout));
  Tensor T = tr.input("T", {din, din, din, din});
  const TrgBondWeights w = weightInputs(tr, din, opts);
  TrgStepTrace s = traceTrgStep(T, dout, opts, w);
  tr.output(s.logm, "logm");
  tr.output(s.Tn, "Tn");
  if (opts.outputKeptSingularValues) tr.output(s.skept, "skept");
  if (opts.outputCutSingularValues) tr.output(s.scut, "scut");
  if (opts.outputLeadingPair) tr.output(s.spair, "spair");
  if (opts.outputSingularValues) {
    tr.output(s.sa, "sa");
    tr.output(s.sb, "sb");
  } else if (opts.outputLeadingSingularValues) {
    tr.output(s.sa.slice({0}, {dout}), "sa");
    tr.output(s.sb.slice({0}, {dout}), "sb");
  }
  if (opts.outputSvdInputs) {
    tr.output(s.Ma, "Ma");
    tr.output(s.Mb, "Mb");
  }
  if (s.wn.valid()) {
    tr.output(s.wn.h, "wh_next");
    tr.output(s.wn.v, "wv_next");
  }
  return tr.take();
}

ir::Program buildTrgClosure(int64_t d, const TrgStepOptions &opts) {
  if (d < 1) throw Error("trg closure: D must be >= 1, got " + std::to_string(d));
  Tracer tr("trg_closure_" + std::to_string(d));
  Tensor T = tr.input("T", {d, d, d, d});
  const TrgBondWeights w = weightInputs(tr, d, opts);
  tr.output(traceTrgClosure(T, w), "lntr");
  return tr.take();
}

ir::Program buildTrgLimitClosure(int64_t d, int64_t dout, const TrgStepOptions &opts) {
  if (d < 1) throw Error("trg limit closure: D must be >= 1, got " + std::to_string(d));
  Tracer tr("trg_limit_closure_" + std::to_string(d) + "_" + std::to_string(dout));
  Tensor T = tr.input("T", {d, d, d, d});
  const TrgBondWeights w = weightInputs(tr, d, opts);
  TrgStepTrace s = traceTrgLimitClosure(T, dout, opts, w);
  tr.output(s.ltail, "ltail");
  tr.output(s.skept, "skept");
  if (opts.outputCutSingularValues) tr.output(s.scut, "scut");
  if (opts.outputLeadingPair) tr.output(s.spair, "spair");
  return tr.take();
}

ir::Program buildTrgWhole(const std::vector<int64_t> &ranks, const TrgStepOptions &opts,
                          const TrgModel &model) {
  if (ranks.empty()) throw Error("trg whole: needs at least one step");
  Tracer tr("trg_whole");
  ir::Builder &b = tr.builder();
  std::vector<Tensor> params;
  Tensor T = traceModelInit(tr, model, params);
  TrgBondWeights w = initialWeights(tr, model.states(), opts);
  const Tensor &beta = params[0];
  // lnZ/N = Σ_n logm_n / b^n + lntr / b^N (b = 2, HOTRG 4), accumulated in step order
  // (same order as the staged driver on the host, so the two modes agree to the last bits).
  Tensor lnz;
  std::vector<Tensor> kept;
  // With the limit closure the last rank is its step's.
  const size_t chain = ranks.size() - (opts.limitClosure ? 1 : 0);
  if (chain == 0) throw Error("trg whole: the limit closure needs at least one step before it");
  for (size_t n = 0; n < chain; ++n) {
    TrgStepOptions stepOpts = opts;
    stepOpts.stepNumber = static_cast<int>(n + 1);
    TrgStepTrace s = traceTrgStep(T, ranks[n], stepOpts, w);
    b.setLoc("trg whole: accumulate step " + std::to_string(n + 1));
    Tensor term = n == 0 ? s.logm : s.logm * std::ldexp(1.0, -static_cast<int>(n) * opts.sitesLog2());
    lnz = n == 0 ? term : lnz + term;
    if (opts.outputKeptSingularValues) kept.push_back(s.skept.reshape({1, 2}));
    T = s.Tn;
    w = s.wn;
  }
  Tensor lntr;
  if (opts.limitClosure) {
    TrgStepOptions closureOpts = opts;
    closureOpts.stepNumber = static_cast<int>(chain + 1);
    TrgStepTrace c = traceTrgLimitClosure(T, ranks.back(), closureOpts, w);
    lntr = c.ltail;
    if (opts.outputKeptSingularValues) kept.push_back(c.skept.reshape({1, 2}));
  } else {
    lntr = traceTrgClosure(T, w);
  }
  b.setLoc("trg whole: accumulate closure");
  lnz = lnz + lntr * std::ldexp(1.0, -static_cast<int>(chain) * opts.sitesLog2());
  b.setLoc("trg whole: initial tensor scale");
  // trgInitLogScale: 2 ln cosh β for Ising (+ ln cosh(βh) in a field), 2β for Potts.
  lnz = model.kind == TrgModel::Kind::Potts ? lnz + beta * 2.0 : lnz + logCosh(beta) * 2.0;
  if (model.hasField()) lnz = lnz + logCosh(beta * params[1]);
  lnz = lnz.named("lnz");

  b.setLoc("");
  tr.output(lnz, "lnz");
  if (opts.outputKeptSingularValues) {
    b.setLoc("trg whole: kept singular values");
    tr.output(concatenate(kept, 0), "skept");
    b.setLoc("");
  }
  return tr.take();
}

ir::Program buildTrgModule(const std::vector<int64_t> &ranks, const TrgStepOptions &opts,
                           const TrgModel &model) {
  if (ranks.empty()) throw Error("trg module: needs at least one step");
  const size_t chain = ranks.size() - (opts.limitClosure ? 1 : 0);
  if (chain == 0) throw Error("trg module: the limit closure needs at least one step before it");
  TrgStepOptions so = opts;
  so.outputKeptSingularValues = true;
  so.stepNumber = 0;
  std::vector<ir::Program> fns;
  fns.push_back(buildTrgInit(model));
  // The runs of equal step classes (D -> D') in schedule order: each one scan.
  struct Run {
    int64_t D, Dp;
    int64_t length;
    std::string body;
    size_t first; ///< its first step (1-based)
  };
  std::vector<Run> runs;
  int64_t D = model.states();
  for (size_t n = 0; n < chain; ++n) {
    if (!runs.empty() && runs.back().D == D && runs.back().Dp == ranks[n]) ++runs.back().length;
    else runs.push_back({D, ranks[n], 1, "", n + 1});
    D = ranks[n];
  }
  for (Run &r : runs) {
    const std::string step = trgStepName(r.D, r.Dp);
    r.body = "trg_chain_" + std::to_string(r.D) + "_" + std::to_string(r.Dp);
    bool have = false;
    for (const ir::Program &f : fns) have |= f.name == r.body;
    if (have) continue;
    fns.push_back(buildTrgStep(r.D, r.Dp, so));
    // The loop body: one step, its logm accumulated with weight w = 2^-n (exact; HOTRG
    // 4^-n), as buildTrgWhole and the staged driver accumulate: lnz + logm·w, w·½ (¼).
    // BTRG carries the bond weights after T.
    ir::Program body;
    body.name = r.body;
    const ir::ValueId T = body.addInput("T", ir::Type({r.D, r.D, r.D, r.D}));
    llvm::SmallVector<ir::ValueId, 3> stepArgs{T};
    if (so.weighted())
      for (const char *name : {"wh", "wv"}) stepArgs.push_back(body.addInput(name, ir::Type({r.D})));
    const ir::ValueId lnz = body.addInput("lnz", ir::Type({}));
    const ir::ValueId w = body.addInput("w", ir::Type({}));
    ir::Builder b(body);
    b.setCallees(fns);
    const std::string cls = "trg " + std::to_string(r.D) + "->" + std::to_string(r.Dp);
    b.setLoc(cls + ": step");
    llvm::SmallVector<ir::ValueId, 1> s = b.call(step, stepArgs);
    b.setLoc(cls + ": accumulate");
    const ir::ValueId lnzNext = b.add(lnz, b.mul(s[0], w));
    const ir::ValueId wNext = b.mul(w, b.scalar(std::ldexp(1.0, -so.sitesLog2())));
    body.setName(s[1], "Tn");
    body.setName(lnzNext, "lnz_next");
    body.setName(wNext, "w_next");
    body.setName(s[2], "skept");
    body.addOutput(s[1]);
    if (so.weighted()) {
      body.setName(s[3], "wh_next");
      body.setName(s[4], "wv_next");
      body.addOutput(s[3]);
      body.addOutput(s[4]);
    }
    for (ir::ValueId v : {lnzNext, wNext, s[2]}) body.addOutput(v);
    fns.push_back(std::move(body));
  }
  fns.push_back(opts.limitClosure ? buildTrgLimitClosure(D, ranks.back(), so) : buildTrgClosure(D, so));
  const std::string closure = fns.back().name;

  Tracer tr("trg");
  ir::Builder &b = tr.builder();
  std::vector<Tensor> params;
  for (const std::string &name : model.parameters()) params.push_back(tr.input(name, {}));
  b.setCallees(fns);
  llvm::SmallVector<ir::ValueId, 4> args;
  for (const Tensor &t : params) args.push_back(t.id());
  b.setLoc("trg: init");
  ir::ValueId T = b.call(fns.front().name, args)[0];
  // BTRG: the state is (T, wh, wv), the weights of T0 ones.
  llvm::SmallVector<ir::ValueId, 2> weights;
  if (so.weighted()) {
    const TrgBondWeights w0 = initialWeights(tr, model.states(), so);
    weights = {w0.h.id(), w0.v.id()};
  }
  const size_t nw = weights.size();
  ir::ValueId lnz = b.scalar(0.0), w = b.scalar(1.0);
  std::vector<Tensor> kept;
  for (const Run &r : runs) {
    // A class that changes D is a call (the next step is of another class), so is a
    // single step.
    const bool loop = r.D == r.Dp && r.length > 1;
    const std::string cls = " (" + std::to_string(r.D) + "->" + std::to_string(r.Dp) + ")";
    b.setLoc(loop ? "trg: steps " + std::to_string(r.first) + " to " +
                        std::to_string(r.first + static_cast<size_t>(r.length) - 1) + cls
                  : "trg: step " + std::to_string(r.first) + cls);
    llvm::SmallVector<ir::ValueId, 6> carried{T};
    carried.append(weights.begin(), weights.end());
    carried.append({lnz, w});
    llvm::SmallVector<ir::ValueId, 1> o =
        loop ? b.scan(r.body, carried, {}, r.length) : b.call(r.body, carried);
    T = o[0];
    for (size_t i = 0; i < nw; ++i) weights[i] = o[1 + i];
    lnz = o[1 + nw];
    w = o[2 + nw];
    kept.push_back(loop ? Tensor(b, o[3 + nw]) : Tensor(b, o[3 + nw]).reshape({1, 2}));
  }
  b.setLoc("trg: closure");
  llvm::SmallVector<ir::ValueId, 3> closureArgs{T};
  closureArgs.append(weights.begin(), weights.end());
  llvm::SmallVector<ir::ValueId, 1> c = b.call(closure, closureArgs);
  if (opts.limitClosure) kept.push_back(Tensor(b, c[1]).reshape({1, 2}));
  b.setLoc("trg: accumulate closure");
  Tensor total = Tensor(b, lnz) + Tensor(b, c[0]) * Tensor(b, w);
  if (opts.initScale) {
    b.setLoc("trg: initial tensor scale");
    const Tensor &beta = params[0];
    total = model.kind == TrgModel::Kind::Potts ? total + beta * 2.0 : total + logCosh(beta) * 2.0;
    if (model.hasField()) total = total + logCosh(beta * params[1]);
  }
  b.setLoc("");
  tr.output(total, "lnz");
  if (opts.outputKeptSingularValues) {
    b.setLoc("trg: kept singular values");
    tr.output(kept.size() == 1 ? kept[0] : concatenate(kept, 0), "skept");
    b.setLoc("");
  }
  ir::Program m = tr.take();
  m.functions = std::move(fns);
  return m;
}

int64_t squareSaturated(int64_t d) {
  int64_t sq = 0;
  return __builtin_mul_overflow(d, d, &sq) ? INT64_MAX : sq;
}

std::vector<int64_t> trgDefaultRanks(int64_t chi, int steps, int64_t states, TrgAlgorithm algorithm) {
  std::vector<int64_t> r;
  int64_t Dprev = 0, D = states; // Dprev: input dimension of the previous step
  for (int n = 0; n < steps; ++n) {
    int64_t bound = algorithm == TrgAlgorithm::Hotrg ? INT64_MAX
                    : n == 0                         ? states
                                                     : squareSaturated(Dprev);
    int64_t Dn = std::min({squareSaturated(D), chi, bound});
    r.push_back(Dn);
    Dprev = D;
    D = Dn;
  }
  return r;
}

void checkTrgRanks(const std::vector<int64_t> &ranks, int64_t chi, int64_t states) {
  if (ranks.empty()) throw Error("error: --ranks: the rank schedule is empty (steps must be >= 1)");
  int64_t D = states;
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
