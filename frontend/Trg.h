//===- frontend/Trg.h - The TRG programs of the 2D Ising model (docs/trg.md) ---===//
//
// Builders for the programs of Levin–Nave TRG, exactly as specified in
// docs/trg.md (section numbers below refer to it):
//
//   init     (%beta: f64[], %h: f64[]) -> (%T0: f64[2,2,2,2])   Ising in a field h  §1, §8.1
//            (%beta: f64[]) -> (%T0: f64[q,q,q,q])              q-state Potts       §8.2
//   step     (%T: f64[D,D,D,D]) -> (%logm: f64[], %Tn: f64[D',D',D',D'])      §2
//   closure  (%T: f64[D,D,D,D]) -> (%lntr: f64[])   ln Σ_ij T[i,j,i,j]         §3
//   whole    (the init's inputs) -> (%lnz: f64[])   all of the above, lnZ/N    §2–3
//
// Only init depends on the model: the step and closure programs are the same for
// every model (they see a tensor of bond dimension D, nothing else).
//
// The driver accumulates lnZ/N = Σ_n logm_n / b^n + lntr / b^N (b = 2 tensors per
// step; HOTRG 4) on the host (staged mode) or inside the whole program. The plaquette contraction stays one 4-operand
// einsum op; the ordering pass (passes/Order.h) lowers it. All programs are made of
// differentiable ops, so grad() applies to them (and to their gradients).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "frontend/Tracer.h"
#include "ir/Program.h"

namespace tessel::frontend {

/// Singular values ≤ this (relative to s[0]: the step divides them by sa[0], HOTRG's
/// environments by their largest entry) count as exact zeros (docs/trg.md §2.4).
inline constexpr double kTrgRankTol = 1e-12;
/// A step's cut at D' splits a degenerate multiplet where s[D'-1] − s[D'] ≤ this·s[D'-1]
/// (of Ma or Mb): the derived schedule then keeps the multiplet's values above it
/// instead, where that keeps more than half of D' (docs/trg.md §2.4). Relative to the
/// values at the cut, so that a cut among values near the rank tolerance, which differ
/// by little in absolute terms, is not a multiplet. Above the rounding of the gaps of
/// symmetry-exact multiplets (≲ 1e-11·s[0], so ≤ 1e-6 relative down to 1e-5·s[0]) and
/// below the smallest relative cut gap of a spectrum without one met (1.2e-5: Ising,
/// β = 0.8, χ = 16, step 7).
inline constexpr double kTrgMultipletTol = 1e-6;
/// The multiplet rule applies where s[D'-1] ≥ this·s[0]: below it svd_topk's values
/// (accurate to ~1e-14·s[0], its residual stop) do not resolve a gap of kTrgMultipletTol,
/// and what the cut does to lnZ/N there is of the order of those values.
inline constexpr double kTrgMultipletFloor = 1e-7;
/// In a field (h ≠ 0) the rule also ties values within this relative gap: the field
/// splits the pairs of the Ising runs (one state of each Z2 sector) by 1e-6 to 3e-4 of
/// their values and couples them, so across a cut between such a pair which vector is
/// kept changes with β and h (an avoided crossing) and lnZ/N is not smooth there: at
/// χ = 16, β = 0.43, h = 0.01, 16 steps (relative gaps 2.7e-4 to 1.4e-4 at steps 13–16)
/// d²(lnZ/N)/dβ² from full and truncated SVDs were 2.3e-6 apart and 5-point differences
/// of lnZ/N drifted by 0.3% between steps 4e-4 and 5e-5. Above every gap that did so in a
/// scan of β = 0.28–0.55, h = 0.003–0.1 at χ = 16, 12 and 16 steps (2.6e-4; with it none
/// is more than 6.6e-10 apart, also at 20 steps and χ = 24). At h = 0 the β direction does
/// not couple a pair (each member keeps its sector), so there kTrgMultipletTol alone
/// applies (docs/trg.md §2.4, "Pairs a field splits").
inline constexpr double kTrgFieldPairTol = 1e-3;

/// Default broadening ε of the svd reverse rule in the TRG programs, relative to the
/// largest singular value of each SVD (docs/trg.md §5, "The size of ε"). In the ordered
/// phase the gaps of symmetry-degenerate pairs shrink with every step until rounding stops
/// them at ~1e-11·s₀ (β = 0.45, χ = 16, steps 19–20); ε = 1e-9 keeps those noise gaps
/// inside the broadening. ε = 1e-12 gives the same d²(lnZ/N)/dβ² to ≤ 5e-10 relative and
/// first derivatives to ~1e-14, so this is a margin, not a correction.
inline constexpr double kTrgSvdEps = 1e-9;
/// The largest broadening a TRG run accepts. L(x) = x/(x² + (ε·s₀)²) differs from 1/x by
/// the factor x²/(x² + (ε·s₀)²), so every pair of singular values closer than ~ε·s₀ loses
/// its coupling: measured at χ = 16, 20 steps (β = 0.3, 0.44, 0.5), d(lnZ/N)/dβ moves by
/// ≤ 2e-13 relative at ε = 1e-7, 1e-11 at 1e-6, 1e-9 at 1e-5, 1e-7 at 1e-4 and 70% at 1.
/// Up to 1e-6 the bias stays below the 1e-10 to which AD and finite differences agree.
inline constexpr double kTrgMaxSvdEps = 1e-6;

/// The coarse-graining algorithm (docs/trg.md §2, §9).
///   Trg   Levin–Nave TRG (PRL 99, 120601 (2007)): the state is T.
///   Btrg  bond-weighted TRG (Adachi, Okubo, Todo, PRB 105, L060402 (2022)): the state is
///         T and two bond weights (TrgBondWeights); each SVD M = U·s·V† splits as
///         U·s^((1−k)/2) and s^((1−k)/2)·V†, the new bond carries s^k, and the old weights
///         sit on the four internal bonds of the plaquette. k = 0 is TRG.
///   Hotrg higher-order TRG (Xie, Chen, Qin, Zhu, Yang, Xiang, PRB 86, 045139 (2012)): the
///         state is T; a step contracts two tensors along each axis in turn and cuts
///         each doubled bond to D' with the isometry of its environment (docs/trg.md
///         §11). A step covers 4 tensors, not 2: lnZ/N weighs step n by 4^-n and
///         `--steps N` is a torus of 4^N sites.
enum class TrgAlgorithm { Trg, Btrg, Hotrg };
/// "trg", "btrg", "hotrg".
const char *trgAlgorithmName(TrgAlgorithm a);
/// log₂ of the tensors one step of `a` contracts into one: 1 (TRG, BTRG: a step halves
/// the lattice), 2 (HOTRG: a step quarters it). Step n's ln m_n counts with weight
/// 2^(−n·this) in lnZ/N, and N steps stand for 2^(N·this) sites.
int trgStepSitesLog2(TrgAlgorithm a);
/// "trg", or "btrg (k = -0.5)" with BTRG's exponent, as the reports print it.
std::string trgAlgorithmText(TrgAlgorithm a, double k);
/// Throws tessel::Error "--algorithm: unknown algorithm 'x' (allowed: trg, btrg, hotrg)".
TrgAlgorithm parseTrgAlgorithm(const std::string &s);
/// BTRG's bond-weight exponent by default: k = −½, the value Adachi et al. find best
/// (the error at T_c falls ~10× from k = 0 and rises again beyond −½).
inline constexpr double kBtrgDefaultK = -0.5;
/// Throws tessel::Error "--btrg-k: ..." for k outside [−1, 1) or not finite: the half-
/// tensors carry s^((1−k)/2), which must keep a positive power of s.
void checkBtrgK(double k);
/// For a --btrg-k that was given: throws tessel::Error "--btrg-k: ... changes nothing with
/// --algorithm a" unless `a` is BTRG.
void checkBtrgKApplies(TrgAlgorithm a);

struct TrgStepOptions {
  /// The algorithm of the step and closure programs, and BTRG's exponent k.
  TrgAlgorithm algorithm = TrgAlgorithm::Trg;
  double btrgK = kBtrgDefaultK;
  /// Whether the state carries bond weights (BTRG): the step takes (T, wh, wv) and adds
  /// the outputs %wh_next, %wv_next last; the closures take (T, wh, wv).
  bool weighted() const { return algorithm == TrgAlgorithm::Btrg; }
  /// trgStepSitesLog2(algorithm).
  int sitesLog2() const { return trgStepSitesLog2(algorithm); }
  /// Lorentzian broadening ε of the svd reverse rule, relative to the largest singular
  /// value (docs/trg.md §5).
  double svdEps = kTrgSvdEps;
  /// m_n = stop_gradient(sa[0]) instead of m_n = sa[0] (HOTRG: max|T|). lnZ/N does not
  /// depend on m_n, so value and gradient are the same either way, but with the
  /// stop-gradient every β-derivative reaches lnZ/N only through the closure, where
  /// d²(lnZ/N)/dβ² is a difference of two O(2^N) squares: rounding grows ~2× per step
  /// (docs/trg.md §2.1). Off by default.
  bool stopGradientOnNorm = false;
  /// Adds an output %skept: f64[2] = (sa[D'-1], sb[D'-1]), the smallest kept singular
  /// values of Ma and Mb, so a driver can refuse a kept value ≤ tol at run time.
  bool outputKeptSingularValues = false;
  /// Adds an output %scut: f64[4] = (sa[0], sa[D'], sb[0], sb[D']), the largest singular
  /// value and the largest one the step cuts (0 where D' = D²: nothing is cut), of Ma and
  /// of Mb, after %skept; the step then computes D' + 1 triplets (svd_topk{D'+1} under
  /// truncate-svd). A driver compares them with %skept to see a cut through a degenerate
  /// multiplet (docs/trg.md §2.4). HOTRG: of the environments, whose values are the
  /// squares of the bond's.
  bool outputCutSingularValues = false;
  /// Adds an output %spair: f64[4] = (sa[0], sa[1], sb[0], sb[1]), the two leading
  /// singular values of Ma and of Mb (s[1] = 0 where D² = 1), after %skept and %scut: below
  /// T_c at h = 0 the two ordered states, whose gap decides whether second derivatives in
  /// h are refused (docs/trg.md §8.1). The step computes at least 2 triplets.
  bool outputLeadingPair = false;
  /// With outputCutSingularValues and a value E > D': %scut: f64[2·(E − D' + 2)] holds
  /// (s[0], s[D'], s[D'+1], …, s[E]) of Ma, then the same of Mb (the step computes E + 1
  /// triplets), so a driver also sees whether a cut at E would split a multiplet.
  int64_t cutValuesTo = 0;
  /// Adds outputs %sa, %sb: f64[D²], all singular values.
  bool outputSingularValues = false;
  /// Adds outputs %sa, %sb: f64[D'], the D' leading singular values, computed as the
  /// step computes them (with truncate-svd: by svd_topk{D'}). The driver counts those
  /// > tol to derive the schedule from the spectrum (docs/trg.md §2.4).
  bool outputLeadingSingularValues = false;
  /// buildTrgWhole: end with the closure of the infinite lattice (traceTrgLimitClosure,
  /// its step keeping ranks.back()) instead of the trace of the finite torus.
  bool limitClosure = false;
  /// buildTrgModule: add ln of the initial tensor's factor (trgInitLogScale) in the
  /// program, so that %lnz is lnZ/N. The staged driver leaves it out and adds it on the
  /// host with its derivatives, as for the value sweep (their formulas keep the relative
  /// digits of d/dβ at high temperature; the traced ln cosh loses them below β ~ 1e-5).
  bool initScale = true;
  /// Adds outputs %Ma, %Mb: f64[D²,D²], the two SVD inputs (T permuted and reshaped, as
  /// the SVDs factor it, before the normalisation by sa[0]; HOTRG: the two environments),
  /// for benchmarks that time the same gesdd calls outside the program.
  bool outputSvdInputs = false;
  /// Step number (1-based) for the locations of a step traced inside a larger program
  /// ("trg step 3 (4->4): svd Ma"); 0 = a step-class program ("trg 4->4: svd Ma").
  /// buildTrgWhole sets it.
  int stepNumber = 0;
};

/// The lattice model of a TRG run (docs/trg.md §1, §8).
///   Ising  Z = Σ exp(β Σ_<ij> σ_i σ_j + β h Σ_i σ_i), σ = ±1; the field h is an input
///          of the programs (0 by default), so derivatives in h come from the grad pass.
///   Potts  Z = Σ exp(β Σ_<ij> δ(σ_i, σ_j)), σ ∈ {0, …, q−1}, q ≥ 2; no field.
/// β in units of 1/J (J = 1, k_B = 1).
struct TrgModel {
  enum class Kind { Ising, Potts };
  Kind kind = Kind::Ising;
  int q = 2; ///< Potts: states per spin (≥ 2); Ising: 2
  /// The bond dimension of the initial tensor: the number of spin states.
  int64_t states() const { return kind == Kind::Ising ? 2 : q; }
  /// Whether the programs take the field input %h (Ising).
  bool hasField() const { return kind == Kind::Ising; }
  /// The inputs of the init (and whole) programs: {"beta", "h"} or {"beta"}.
  std::vector<std::string> parameters() const;
  /// "ising", "potts (q = 3)".
  std::string str() const;
};

/// The most Potts states a run takes: the initial tensor has q⁴ entries and the first
/// step's matrices are q²×q² (q = 20: 400×400, a second-order run of 1 s; q = 64 would
/// need gigabytes for the gradient of the first step).
inline constexpr int kTrgMaxPottsQ = 20;
/// Throws tessel::Error "--q: ..." for q outside [2, kTrgMaxPottsQ] (Potts).
void checkTrgModel(const TrgModel &m);
/// The model named `name` ("ising" or "potts") with `q` states if given (the --model and
/// --q of `tessel trg`, `tessel.trg(model=, q=)`). Throws tessel::Error naming the flag for
/// an unknown name, potts without q, ising with q != 2, or q outside [2, kTrgMaxPottsQ].
TrgModel parseTrgModel(const std::string &name, std::optional<int64_t> q);

/// The traced pieces, to compose programs (each sets locations "trg ...: what").
/// Ising: β, h (f64[]) -> T0/(cosh²β·cosh(βh)) (f64[2,2,2,2]), docs/trg.md §1, §8.1: the
/// initial tensor with its factor cosh²β·cosh(βh) taken out, from √tanh β and
/// t = tanh(βh) (site weights 1 ± t ∈ [0, 2]; max entry ≤ 4, so no β or h overflows).
/// At h = 0 the tensor is bitwise the field-free one. lnZ/N of this tensor's lattice is
/// the model's minus trgInitLogScale(model, β, h).value.
Tensor traceTrgInit(const Tensor &beta, const Tensor &h);
/// q-state Potts: β (f64[]) -> T0·e^(−2β) (f64[q,q,q,q]), docs/trg.md §8.2: the bond
/// weight e^(βδ(a,b)) = Σ_i W_ai W_bi with W = O·diag(√λ) from its eigenvectors O (the
/// uniform vector and a fixed orthonormal basis of its complement, independent of β) and
/// eigenvalues λ = e^β − 1 + q, e^β − 1 (×(q−1)), each divided by e^β.
Tensor traceTrgPottsInit(const Tensor &beta, int q);

/// ln of the factor taken out of each initial tensor, per site, and its derivatives in
/// β and h: Ising 2β + ln cosh(βh) (docs/trg.md §8.1), Potts 2β. Drivers add these to
/// lnZ/N and its derivatives computed on a lattice of the init program's tensors;
/// buildTrgWhole adds the value in the program.
struct TrgLogScale {
  double value = 0, dbeta = 0, dh = 0;        ///< s, ∂s/∂β, ∂s/∂h
  double dbeta2 = 0, dbetadh = 0, dh2 = 0;    ///< ∂²s/∂β², ∂²s/∂β∂h, ∂²s/∂h²
};
TrgLogScale trgInitLogScale(const TrgModel &m, double beta, double h = 0);

/// BTRG's bond weights, f64[D] each, positive: `h` on the bonds of legs 0–2 of T (the
/// trace's i), `v` on those of legs 1–3 (j). Ones for the initial tensor; after a step
/// h = s_a^k, v = s_b^k of its kept singular values (docs/trg.md §9). Invalid = TRG.
struct TrgBondWeights {
  Tensor h, v;
  bool valid() const { return h.valid(); }
};

struct TrgStepTrace {
  Tensor logm;  ///< f64[]: ln m, m = sa[0] (HOTRG: max|T|), docs/trg.md §2.1
  Tensor Tn;    ///< f64[D',D',D',D']
  /// Singular values, descending. TRG and BTRG: of Ma and Mb divided by m = sa[0], only the
  /// leading ones the options output (none, D', D'+1 … cutValuesTo + 1, or all D² with
  /// outputSingularValues). HOTRG: f64[D²] of the two environments, each divided by its
  /// largest entry (the squares of the doubled bond's values).
  Tensor sa, sb;
  Tensor skept; ///< f64[2]: (sa[D'-1], sb[D'-1])
  Tensor scut;  ///< (sa[0], sa[D'..E], sb[0], sb[D'..E]), 0 past D²; E = max(D', cutValuesTo)
  Tensor spair; ///< f64[4]: (sa[0], sa[1], sb[0], sb[1]), 0 past D²
  Tensor ltail; ///< traceTrgLimitClosure: f64[], f(T)
  Tensor Ma, Mb; ///< f64[D²,D²]: the SVD inputs
  TrgBondWeights wn; ///< BTRG: the weights of Tn's bonds, f64[D'] each
};
/// One Levin–Nave step D -> dout on T (f64[D,D,D,D]), docs/trg.md §2. Throws
/// tessel::ShapeError if T is not rank 4 with equal extents or dout ∉ [1, D²].
/// BTRG (opts.weighted()): `w` are T's bond weights (required), the step's own weights
/// come back in TrgStepTrace::wn. HOTRG (docs/trg.md §11, frontend/TrgHotrg.h): after the
/// same normalisation, twice: stack two tensors along legs 1–3, cut the doubled legs 0 and
/// 2 (D² -> dout) with the dout leading singular vectors of their environment, turn the
/// result by 90°; Tn stands for 4 tensors, sa/sb/Ma/Mb are the environments'.
TrgStepTrace traceTrgStep(const Tensor &T, int64_t dout, const TrgStepOptions &opts = {},
                          const TrgBondWeights &w = {});

/// ln Σ_ij T[i,j,i,j] (opposite legs paired, docs/trg.md §3). T: f64[D,D,D,D] -> f64[].
/// With weights: ln Σ_ij T[i,j,i,j]·w.h[i]·w.v[j] (docs/trg.md §9).
Tensor traceTrgClosure(const Tensor &T, const TrgBondWeights &w = {});
/// The closure of the infinite lattice (docs/trg.md §3.1): f(T) = 2·ln m + ln‖T'‖ − ln‖T‖
/// (HOTRG, whose step covers b = 4 tensors: (4·ln m + ln‖T'‖ − ln‖T‖)/3; in general
/// (b·ln m + ln‖T'‖ − ln‖T‖)/(b − 1)),
/// with T' = the step D -> dout of T (m its normalisation, sa[0] or HOTRG's max|T|, ‖·‖ the
/// Frobenius norm).
/// lnZ/N of an infinite lattice of T's is f(T) per tensor when T is at its fixed point up
/// to the bond gauge (an orthogonal transformation of each bond, which keeps ‖·‖): f is
/// homogeneous (f(aT) = ln a + f(T)) and halves the tensors per step (f(T) = f(T')/2),
/// so f(t) = ln‖step(t)‖ for ‖t‖ = 1. T: f64[D,D,D,D] -> ltail f64[] and the step's skept.
/// With weights (BTRG) the norms are those of T with √w absorbed into each leg, the tensor
/// of the same network without weights (docs/trg.md §9).
TrgStepTrace traceTrgLimitClosure(const Tensor &T, int64_t dout, const TrgStepOptions &opts = {},
                                  const TrgBondWeights &w = {});

/// The programs. buildTrgInit's inputs are model.parameters(); its output %T0 is
/// f64[d,d,d,d], d = model.states().
ir::Program buildTrgInit(const TrgModel &model = {});
/// BTRG (opts.weighted()): the step's inputs are (%T, %wh, %wv: f64[din]) and it adds
/// the outputs %wh_next, %wv_next: f64[dout] after all others; the closures' inputs are
/// (%T, %wh, %wv).
ir::Program buildTrgStep(int64_t din, int64_t dout, const TrgStepOptions &opts = {});
ir::Program buildTrgClosure(int64_t d, const TrgStepOptions &opts = {});
/// (%T: f64[d,d,d,d]) -> (%ltail: f64[], %skept: f64[2]) = traceTrgLimitClosure(T, dout).
ir::Program buildTrgLimitClosure(int64_t d, int64_t dout, const TrgStepOptions &opts = {});
/// ln ‖T‖ (Frobenius) of T with √wh, √wv absorbed into its legs (no weights: of T), on
/// the host: the gauge-invariant norm of the staged sweep's estimates (docs/trg.md §3.1).
double trgLnNorm(const ir::Tensor &T, const ir::Tensor *wh = nullptr, const ir::Tensor *wv = nullptr);
/// The whole computation (β[, h]) -> lnZ/N for the schedule `ranks` (ranks[n] = D' of step
/// n+1; D of step 1 is model.states()), trgInitLogScale included. With
/// opts.outputKeptSingularValues also outputs %skept: f64[N,2] (row n = smallest kept
/// singular values of step n+1).
ir::Program buildTrgWhole(const std::vector<int64_t> &ranks, const TrgStepOptions &opts = {},
                          const TrgModel &model = {});

/// The same computation as buildTrgWhole (output %lnz; %skept: f64[N,2] with
/// opts.outputKeptSingularValues), staged
/// as a module (docs/trg.md §6.1): a function per piece (trg_init, one trg_step_D_D'
/// per step class, the closure) and per step class a loop body trg_chain_D_D'(T, lnz, w)
/// -> (Tn, lnz + logm·w, w/2, skept) (BTRG: (T, wh, wv, lnz, w) -> (Tn, wh', wv', …)); the entry calls init, runs one scan per run of equal
/// classes in the schedule (16 identical 16 -> 16 steps are one op) and calls the closure.
/// lnZ/N accumulates in step order with the weights 2^-n (HOTRG 4^-n: the body's w·¼),
/// bitwise as buildTrgWhole does.
/// opts.limitClosure: end with the limit closure (its step keeping ranks.back()).
ir::Program buildTrgModule(const std::vector<int64_t> &ranks, const TrgStepOptions &opts = {},
                           const TrgModel &model = {});

/// The default truncation schedule (docs/trg.md §2.4): ranks[n] = D' of step n+1 =
/// min(D², χ, r), where r is the exact rank bound the lattice structure puts on Ma and
/// Mb: the cut of the input of step k crosses two bonds of the tensors step k−1 started
/// from, so r = D_{k−2}² (k ≥ 2), and r = d (the spin states, `states`) for T0. For
/// the Ising model (d = 2) at χ = 16: 2, 4, 4, 16, 16, … . The bound is structural (it
/// holds in a field, and for Potts); the zeros it drops are exact (the singular values
/// are ~1e-17); the driver still checks at run time that every kept singular value is > tol.
/// HOTRG (algorithm): ranks[n] = min(D², χ); its doubled bond has no such structural
/// bound, and the run's own SVDs lower a rank where a kept value is ≤ tol.
std::vector<int64_t> trgDefaultRanks(int64_t chi, int steps, int64_t states = 2,
                                     TrgAlgorithm algorithm = TrgAlgorithm::Trg);

/// d², or INT64_MAX when it overflows (a χ or a rank schedule may be any int64; the
/// bound it gives is then never the one that applies).
int64_t squareSaturated(int64_t d);

/// Checks a schedule: every ranks[n] in [1, min(D_n², χ)] (D_0 = states), steps ≥ 1.
/// Throws tessel::Error naming the step and the allowed range, as an error of the flag
/// the schedule comes from (--ranks of `tessel trg` and `tessel emit trg`).
void checkTrgRanks(const std::vector<int64_t> &ranks, int64_t chi, int64_t states = 2);
/// A rank schedule for people: runs of three or more equal ranks as <rank>x<count>
/// ("2,4,4,16x17").
std::string formatTrgRanks(const std::vector<int64_t> &ranks);
/// The schedule a flag gives, in formatTrgRanks' words: comma-separated entries, each a
/// rank or <rank>x<count> ("2,4,4,16x17" is 20 steps), so a report's schedule can be
/// passed back. Throws Error naming `flag` for an entry that is neither, a count < 1,
/// an empty list, or more entries in all than a run has steps (kTrgMaxSteps). The ranks'
/// values are checkTrgRanks' to judge.
std::vector<int64_t> parseTrgRanks(const std::string &text, const std::string &flag);
/// Throws Error naming `flag` ("--steps", or "--ranks" for a schedule of that length)
/// where `steps` exceeds what algorithm `a` allows: 2^(steps·trgStepSitesLog2(a)) sites
/// must be a finite double (1023 TRG or BTRG steps, 511 HOTRG steps).
void checkTrgStepCount(int64_t steps, TrgAlgorithm a, const std::string &flag);

/// "trg_step_16_16" — the name of the step-class program D -> D'.
std::string trgStepName(int64_t din, int64_t dout);

} // namespace tessel::frontend
