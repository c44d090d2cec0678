//===- runtime/TruncatedSvd.h - Top-k SVD and the complement of its pullback ---===//
//
// The two kernels behind svd_topk and svd_topk_complement (ir/ops.def), written
// against plain arrays so that the engine, the tests and the benchmarks call the same
// code. Internal to the runtime; the counters are public through runtime/Runtime.h.
//
// topkSvd: the k leading singular triplets of a row-major m×n matrix by randomized
// block Golub–Kahan–Lanczos (block Krylov) with full reorthogonalisation and
// Rayleigh–Ritz (Golub, Luk, Overton, ACM TOMS 7, 149 (1981); Musco, Musco, NeurIPS
// 2015; Halko, Martinsson, Tropp, SIAM Rev. 53, 217 (2011); for TRG: Morita et al.,
// PRE 97, 033310 (2018)). With blocks of p columns:
//   Q₀ = orth(A·Ω), Ω Gaussian n×p (fixed seed)
//   repeat: Zⱼ = Aᵀ·Qⱼ;  Qⱼ₊₁ = orth((I − Qb·Qbᵀ)·A·Zⱼ)   (Qb = [Q₀ … Qⱼ], the basis)
// Qb spans the Krylov space of A·Aᵀ from A·Ω, Zs = [Z₀ … Zⱼ] = Aᵀ·Qb, and the Ritz
// triplets of B = Qbᵀ·A = Zsᵀ converge at the rate of a Chebyshev polynomial in the gap
// at the cut rather than of a power: on TRG's matrices (1024², k = 32 and 48) a third of
// the product columns of the subspace iteration with a 2k sketch it replaced, at about
// 0.55× and 0.6× its time. Each block costs no extra product to check: (I − Qb·Qbᵀ)·A·Zⱼ, which the
// next block needs anyway, is the whole residual A·v − σ·u of a Ritz vector v = Zs·z/σ
// (z an eigenvector of the Gram matrix Zsᵀ·Zs = B·Bᵀ), so the eigenpairs of that small
// matrix estimate every residual. When the estimates are below the tolerance, the
// Rayleigh–Ritz step proper computes the triplets to working accuracy (Zs = P·R by
// CholeskyQR2, gesdd of the basis-sized R; a gesdd of Zs where CholeskyQR2's checks
// fail) and their true residuals with one product of k columns; the kernel stops when
//   ‖A·vᵢ − σᵢ·uᵢ‖ ≤ tol·σ₁ for every i < k (Aᵀ·uᵢ = σᵢ·vᵢ holds by construction),
//   tol = 8·ε·√max(m, n),
// and otherwise goes on. Each new block is projected against the basis twice before its
// QR and once after (BCGS2: a Krylov block's columns are nearly dependent among
// themselves, and its QR would multiply what the projection leaves of the basis by that
// dependence, 1.5e-13 of lost orthogonality at 1024² where the true residuals need
// 6e-14). A column that the projection leaves at the rounding level (the Krylov space
// closed: A of rank below the basis) is replaced by a Gaussian one. p = max(min(k, 8),
// k/6) (a caller may ask for another); the basis is capped at min(K, 6k + p) columns
// (K = min(m, n)), where the Rayleigh–Ritz step is exact if it reaches m, and the
// number of blocks at half the flops of a gesdd of A; past either the kernel falls back
// to gesdd and counts it. A block Krylov space holds at most p directions of an exactly
// degenerate multiplet (rounding adds more only slowly), so a multiplet of more than p
// copies among the k can come back short, its place taken by smaller true triplets
// that pass the residual test (Potts models have (q − 1)-fold multiplets). Before it
// returns, the kernel therefore probes A − U·S·Vᵀ with an independent Gaussian block
// and one power step (three products of p columns): an estimate of its largest
// singular value above s_k by more than the tolerance means a missed triplet, and the
// kernel falls back to gesdd (counted; `missed` in the outcome). Where the first
// block's norm is outside [2⁻³⁰⁰, 2³⁰⁰] every product with A is scaled by a power of
// 2 (exact) so that the squares of σ₁ in the recurrence neither underflow nor overflow:
// any A from ~1e-300 to ~1e300 converges as at scale 1. Every run is
// deterministic: the seeds depend only on (m, n, k), and BLAS runs single-threaded.
//
// svdComplement: the part of the pullback of A ↦ (U, s, Vt) = top-k SVD that couples
// the kept triplets to the discarded subspace (Francuz, Schuch, Vanhecke, PRR 7,
// 013237 (2025), arXiv:2311.11894): X ⟂ U, Y ⟂ V with
//   X·S − A⊥·Y = (I − UUᵀ)·Ū,   Y·S − A⊥ᵀ·X = (I − VVᵀ)·V̄,   A⊥ = A − U·S·Vᵀ,
// for the r leading triplets that carry cotangents (S = diag(s[:r])). In the singular
// basis of A⊥ this is x_ij = ½(a+b)_ij/(s_j − σ_i) + ½(a−b)_ij/(s_j + σ_i) with
// a = uᵢᵀŪ_j, b = vᵢᵀV̄_j, and y_ij the same with the second term subtracted: the
// rows i ≥ k of the full rule's core matrix (docs/trg.md §5). The discarded triplets
// nearest the cut (the "guards", g = min(K − k, max(4, k/2)) of them, computed by
// topkSvd on A⊥ with the residual measured against s₀) are coupled
// explicitly with the full rule's Lorentzian broadening 1/x → x/(x² + (ε·s₀)²). The
// rest, whose singular values lie below the last guard, is solved by conjugate
// gradients on the normal form (s_j²·I − A₂·A₂ᵀ)·x_j = s_j·F_j + A₂·G_j (A₂ = A⊥ minus
// the guards; condition number 1/(1 − (σ_max(A₂)/s_j)²); each iteration multiplies only
// the columns not yet converged), then y_j = (G_j + A₂ᵀ·x_j)/s_j;
// the true residual of the first equation is checked at the end (the second holds by
// the construction of y up to the rounding of the division, also checked). Exact
// reciprocals differ from the broadened ones by a relative (ε·s₀/gap)²; where every gap
// (s[r−1] minus the last guard, and s[r−1] itself) is at least 10⁵·ε·s₀ (a difference
// of at most 1e-10) the tail is solved in real arithmetic, otherwise with the complex
// shift s_j → z_j = s_j + iε·s₀: Re 1/(x + iδ) = x/(x² + δ²) is the Lorentzian itself,
// so the real part of that solution is the full rule's for every tail triplet and the
// null space (the matrix z_j²·I − A₂·A₂ᵀ is complex symmetric: COCG, CG with the
// unconjugated bilinear form, twice the flops). This is the high-temperature case
// (β = 0.3, χ = 32: s[r−1] ~ 1e-4·s₀). When the guards do not reach below s[r−1], or
// CG meets a direction of non-positive curvature (breaks down), exceeds its budget
// (half a gesdd's flops) or leaves a true residual above its tolerance, the kernel
// computes the same numbers by the full rule, from a gesdd of A restricted to the
// complements of the kept vectors (Q⊥ᵀ·A·P⊥: its triplets are A's discarded ones), and
// counts the fallback. For s₀ outside [2⁻⁵⁰, 2⁵⁰] the solve works on A and s scaled by a power of
// 2 (its inner products go as the fourth power of the scale) and scales X, Y back.
//
// Both kernels also take A as a LinearOperator (its products only; e.g. a reshaped
// einsum never formed, runtime/EinsumOperator.h): the complement solve then applies A₂
// factor by factor, A's product followed by the rank-(k + g) corrections.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace tessel::rt {

/// Sizes fixed at prepare for topkSvd on an m×n matrix keeping k triplets.
struct TopkSvdConfig {
  int64_t m = 0, n = 0, k = 0;
  int64_t b0 = 0;   ///< the block size p
  int64_t bmax = 0; ///< the largest basis (columns)
  int maxIter = 0;  ///< blocks before falling back to gesdd
  double tol = 0;   ///< residual tolerance relative to σ₁
  int64_t lworkSvd = 0, lworkQr = 0, lworkEig = 0, liworkEig = 0; ///< LAPACK workspaces (queried once)
  int64_t workElems = 0;             ///< doubles of workspace topkSvd needs
  /// The Gaussian start Ω (column-major n×p), drawn once here: it depends only on
  /// (m, n, k), and drawing it (Box–Muller: a log, a sqrt and a sincos per pair) took
  /// ~3% of a call at 1024×1024, k = 48.
  std::shared_ptr<const std::vector<double>> sketch;
};
/// `block` = the block size p (clamped to [1, min(m, n)]; 0: max(min(k, 8), k/6)).
TopkSvdConfig topkSvdConfig(int64_t m, int64_t n, int64_t k, int64_t block = 0);

/// Where each array of topkSvd's workspace lives: offsets in doubles from its start, in
/// this order (cm = bmax, p = b0, p4 = p rounded up to a multiple of 4): Qb m×cm; Zs, P,
/// Vs n×cm; Vk n×k; Uk, W m×k; Y m×p; H cm×p4; the Gram matrix Gm, its eigenvectors Ev,
/// Rb, Zr, VTs cm² each; CholeskyQR2's G 2·cm² + cm; the eigenvalues lam, σ sv, tau cm
/// each; column norms y0 and flags bad p each; the products' row-major blocks Xr, Yr
/// max(m, n)·p4 each; gesdd's work lw and iwork, dgeqrf's qw, dsyevd's ew and eiw
/// (lapack_int, in doubles). `end` is the size. One definition for the sizing
/// (TopkSvdConfig::workElems) and the carving (topkSvd), so the two cannot disagree.
struct TopkSvdWorkspace {
  int64_t Qb, Zs, P, Vs, Vk, Uk, W, Y, H, Gm, Ev, Rb, Zr, VTs, G, lam, sv, tau, y0, bad, Xr, Yr;
  int64_t lw, iwork, qw, ew, eiw, end;
};
/// The layout for `c` (its m, n, k, b0, bmax and LAPACK workspace sizes).
TopkSvdWorkspace topkSvdWorkspace(const TopkSvdConfig &c);

/// What one topkSvd call did (for the counters and the tests).
struct TopkSvdOutcome {
  int iterations = 0;   ///< blocks
  int64_t sketch = 0;   ///< the basis' columns at the stop
  int rayleighRitz = 0; ///< Rayleigh–Ritz steps (each a product of k columns)
  int64_t drawn = 0;    ///< Gaussian columns drawn where the Krylov space closed
  bool fallback = false;
  double residual = 0;  ///< max_i ‖A·vᵢ − σᵢ·uᵢ‖ / σ₁ at the stop (0 after a fallback)
  int lapackInfo = 0;   ///< != 0: a LAPACK call failed (the caller reports it)
  int cholQr = 0;       ///< Rayleigh–Ritz steps whose basis CholeskyQR2 factored (the others: gesdd)
  double probe = 0;     ///< the probe's estimate of σ_max(A − U·S·Vᵀ) (0 when not run)
  bool missed = false;  ///< the probe found a triplet above s_k that the basis missed (then: fallback)
};

/// A linear map A: ℝⁿ → ℝᵐ known only by its products with blocks of vectors: the
/// implicit form of a matrix that is costly to form. The next TRG step's matrix is
/// a reshape of the coarse tensor T' = einsum(S1, S2, S3, S4) (docs/trg.md §2.6):
/// forming it costs O(χ⁶) and O(χ⁴) memory, a product with b vectors through the
/// four half-tensors O(χ⁴·b) (Morita, Igarashi, Zhao, Kawashima, PRE 97, 033310
/// (2018)). topkSvd needs nothing else of A, except where it falls back to gesdd.
class LinearOperator {
public:
  LinearOperator(int64_t m, int64_t n) : m_(m), n_(n) {}
  virtual ~LinearOperator() = default;
  int64_t rows() const { return m_; }
  int64_t cols() const { return n_; }
  /// Y = A·X: X row-major n×p, Y row-major m×p (overwritten; leading dimensions p).
  virtual void apply(const double *X, int64_t p, double *Y) const = 0;
  /// Z = Aᵀ·Y: Y row-major m×p, Z row-major n×p (overwritten).
  virtual void applyTransposed(const double *Y, int64_t p, double *Z) const = 0;
  /// max|A_ij|, or a bound within a few powers of two of it: it sets the working scale
  /// (topkSvd's aMaxAbs), which only matters outside [2⁻³⁰⁰, 2³⁰⁰].
  virtual double maxAbsBound() const = 0;
  /// A as a row-major m×n matrix into `out` (what the gesdd fallback factors). The
  /// default multiplies by the columns of the identity, a block at a time.
  virtual void materialize(double *out) const;

private:
  int64_t m_, n_;
};

/// topkSvd of an implicit A (cfg sized for op.rows() × op.cols()): the same iteration,
/// its products with A those of `op` (each on a block of at most cfg.b0 columns), and
/// the gesdd fallback on
/// op.materialize(). An operator that multiplies by a matrix exactly as
/// matMultivector / matTMultivector do (runtime/Multivector.h) gives that matrix's
/// triplets bit for bit (the true residuals are measured with op's products instead of
/// one dgemm: they may differ in the last bits; and the dense kernel pads each block
/// with zero columns to a multiple of 4, which the operator does not see). The
/// fallback allocates the m×n materialised matrix besides gesdd's arrays: a caller's
/// memory plan must allow for it. An operator of another size than cfg's is a
/// programming error (std::logic_error).
TopkSvdOutcome topkSvd(const TopkSvdConfig &cfg, const LinearOperator &op, double *U, double *s,
                       double *Vt, double *work, double scale = 0);

/// A row-major m×n (finite), U row-major m×k, s[k] descending, Vt row-major k×n.
/// `work` has cfg.workElems doubles. The fallback allocates gesdd's workspace on the
/// heap (the only allocation).
/// The residual tolerance is cfg.tol·max(σ₁, scale): a caller that factors a deflated
/// matrix passes the scale of the original one (its accuracy needs no more).
/// `aMaxAbs` = max|A_ij| when the caller has it (the kernel, from its finiteness pass),
/// negative to compute it here: where it is outside [2⁻³⁰⁰, 2³⁰⁰] the products run on
/// 2⁻ᵉ·A (exact), so every scale a double represents, subnormal included, gives the
/// triplets of A to rounding.
TopkSvdOutcome topkSvd(const TopkSvdConfig &cfg, const double *A, double *U, double *s,
                       double *Vt, double *work, double scale = 0, double aMaxAbs = -1);

/// The exact power of two α = 2⁻ᵉ that brings `maxAbs` to [1, 2), or 1 where `maxAbs`
/// is within [2⁻³⁰⁰, 2³⁰⁰], zero or not finite (the scale the SVD kernels work at).
double svdWorkingScale(double maxAbs);

/// Sizes fixed at prepare for svdComplement.
struct SvdComplementConfig {
  int64_t m = 0, n = 0, k = 0, r = 0; ///< k: the kept triplets
  int64_t guards = 0;   ///< g: ir::svdTopkComplementGuards, or the ones given
  bool givenGuards = false; ///< the operands' last g triplets are the guards
  TopkSvdConfig guard;  ///< topkSvd of A⊥ for the guards (when not given)
  int maxIter = 0;      ///< CG iterations before falling back
  double tol = 0;       ///< CG residual tolerance relative to ‖f_j‖
  bool implicitA = false; ///< for an A given as a LinearOperator (no m×n workspace)
  int64_t workElems = 0;
};
/// `given` > 0: U, s, Vt hold k kept triplets and then the next `given` ones below the
/// cut (converged like the kept ones), which svdComplement takes as its guards.
/// `implicitA`: sized for the LinearOperator overload of svdComplement.
SvdComplementConfig svdComplementConfig(int64_t m, int64_t n, int64_t k, int64_t r,
                                        int64_t given = 0, bool implicitA = false);

struct SvdComplementOutcome {
  int iterations = 0; ///< CG iterations
  bool fallback = false;
  const char *fallbackReason = ""; ///< why, when fallback
  bool broadenedTail = false; ///< the tail was solved with the complex shift s_j + iδ
  TopkSvdOutcome guard;
  int lapackInfo = 0;
};

/// A m×n, U m×k, s[k], Vt k×n (the op's top-k SVD of A), gU m×r, gVt r×n (cotangents
/// of the first r triplets); writes X m×r and Yt r×n (= Yᵀ), all row-major. eps is the
/// Lorentzian broadening relative to s[0] (the svd rule's eps). With given guards U,
/// s, Vt have k + g triplets (U m×(k+g)), the last g the guards.
SvdComplementOutcome svdComplement(const SvdComplementConfig &cfg, double eps, const double *A,
                                   const double *U, const double *s, const double *Vt,
                                   const double *gU, const double *gVt, double *X, double *Yt,
                                   double *work);

/// The same for an implicit A (cfg from svdComplementConfig(…, implicitA = true)): the
/// solve's products with A₂ = A minus the kept triplets and the guards are A's products
/// followed by the rank-(k + g) corrections, so A₂ (and A) is never formed: O(m·n)
/// memory less, and each CG iteration costs two of A's products with a few columns.
/// The guards (when not given) are a topkSvd of that implicit A⊥; the full rule's
/// fallback factors A.materialize(). The same X and Yt as the dense overload to the
/// rounding of the products.
SvdComplementOutcome svdComplement(const SvdComplementConfig &cfg, double eps,
                                   const LinearOperator &A, const double *U, const double *s,
                                   const double *Vt, const double *gU, const double *gVt,
                                   double *X, double *Yt, double *work);

} // namespace tessel::rt
