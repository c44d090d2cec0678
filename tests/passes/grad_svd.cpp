// The svd VJP rule (docs/trg.md §5): gauge-invariant losses on square, tall and wide
// matrices (gradcheck orders 1 and 2), and degenerate cases where the textbook rule
// gives NaN, against gradients derived by hand.
#include <doctest/doctest.h>

#include "grad_testutil.h"
#include "pass_testutil.h"

using namespace gradtest;
using namespace tessel::ir;
using tessel::frontend::GradCheckOptions;
using tessel::passes::grad;
using tessel::passes::GradOptions;

namespace {

/// A = Q1[:, :k]·diag(sigma)·Q2[:, :k]ᵀ with random orthogonal Q1 (m×m), Q2 (n×n).
struct Known {
  Mat Q1, Q2, A;
  std::vector<double> sigma;
};

Known known(int64_t m, int64_t n, std::vector<double> sigma, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Known k;
  k.Q1 = randomOrthogonal(m, rng);
  k.Q2 = randomOrthogonal(n, rng);
  k.sigma = sigma;
  k.A = usvt(leftCols(k.Q1, static_cast<int64_t>(sigma.size())), sigma,
             leftCols(k.Q2, static_cast<int64_t>(sigma.size())));
  return k;
}

ValueId constMat(Builder &b, const Mat &c) { return b.constant(c.tensor()); }

/// ⟨C, X⟩ for a constant C.
ValueId inner(Builder &b, const Mat &c, ValueId x) {
  return b.reduceSum(b.mul(constMat(b, c), x), {0, 1});
}

Mat randomMat(int64_t m, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> N(0, 1);
  Mat c(m, n);
  for (double &v : c.a) v = N(rng);
  return c;
}

/// U[:, :r]·diag(s[:r])·Vt[:r, :] from the svd results (the rank-r truncation).
ValueId truncation(Builder &b, llvm::ArrayRef<ValueId> usv, int64_t m, int64_t n, int64_t r) {
  ValueId Ur = b.slice(usv[0], {0, 0}, {m, r});
  ValueId sr = b.slice(usv[1], {0}, {r});
  ValueId Vtr = b.slice(usv[2], {0, 0}, {r, n});
  ValueId Us = b.mul(Ur, b.broadcastInDim(sr, {m, r}, {1}));
  return b.dotGeneral(Us, Vtr, {}, {}, {1}, {0});
}

/// Hand-derived gradient of L = ⟨C, P_r(A)⟩, P_r the rank-r truncation, at a square
/// A = U·diag(σ)·Vᵀ with σ_r > σ_{r+1} (σ may contain zeros). First-order perturbation
/// (X = Uᵀ·dA·V, Ω_U = UᵀdU, Ω_V = VᵀdV antisymmetric, X = Ω_U·S + dS − S·Ω_V):
///   (Ω_U)_ba = (σ_a X_ba + σ_b X_ab)/(σ_a² − σ_b²), (Ω_V)_ba = (σ_b X_ba + σ_a X_ab)/(σ_a² − σ_b²),
///   Y = Uᵀ·dP_r·V:  Y_bc = X_bc (b, c < r);  Y_bc = σ_c(σ_c X_bc + σ_b X_cb)/(σ_c² − σ_b²) (b ≥ r > c);
///   Y_bc = σ_b(σ_b X_bc + σ_c X_cb)/(σ_b² − σ_c²) (b < r ≤ c);  0 (b, c ≥ r).
/// Hence ∇L = U·G̃·Vᵀ with G̃ = ∂⟨C̃, Y⟩/∂X, C̃ = UᵀCV.
Mat truncationGrad(const Mat &U, const std::vector<double> &sig, const Mat &V, const Mat &C, int r) {
  int64_t n = U.m;
  Mat Ct = matmul(matmul(transposed(U), C), V), G(n, n);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t c = 0; c < n; ++c) {
      double sb = sig[b], sc = sig[c];
      if (b < r && c < r) {
        G(b, c) += Ct(b, c);
      } else if (b >= r && c < r) {
        G(b, c) += Ct(b, c) * sc * sc / (sc * sc - sb * sb);
        G(c, b) += Ct(b, c) * sb * sc / (sc * sc - sb * sb);
      } else if (b < r && c >= r) {
        G(b, c) += Ct(b, c) * sb * sb / (sb * sb - sc * sc);
        G(c, b) += Ct(b, c) * sb * sc / (sb * sb - sc * sc);
      }
    }
  return matmul(matmul(U, G), transposed(V));
}

void checkGrad(const std::vector<Tensor> &got, const Mat &expect, double tol) {
  REQUIRE(got.size() == 1);
  CHECK(allFinite(got[0].data));
  double err = maxAbsDiff(got[0].data, expect.a);
  INFO("max |grad - expected| = ", err);
  CHECK(err <= tol);
}

} // namespace

TEST_CASE("grad svd: gauge-invariant losses, square/tall/wide, gradcheck orders 1 and 2") {
  struct Shape2 {
    int64_t m, n;
  };
  uint64_t seed = 11;
  for (Shape2 sh : {Shape2{4, 4}, Shape2{6, 3}, Shape2{3, 5}}) {
    CAPTURE(sh.m);
    CAPTURE(sh.n);
    int64_t k = std::min(sh.m, sh.n);
    std::vector<double> sigma = {3.0, 2.1, 1.3, 0.6};
    sigma.resize(static_cast<size_t>(k));
    Known kn = known(sh.m, sh.n, sigma, seed++);
    // L = Σ_k w_k s_k² + ⟨C1, U·diag(sin s)·Vt⟩ + ⟨C2, U₂U₂ᵀ⟩ + ⟨C3, V₂V₂ᵀ⟩ + Σ log s
    Program p;
    Builder b(p);
    ValueId a = p.addInput("a", Type({sh.m, sh.n}));
    auto usv = b.svd(a);
    ValueId U = usv[0], s = usv[1], Vt = usv[2];
    Mat w = randomMat(1, k, seed++);
    ValueId l1 = b.reduceSum(b.mul(b.mul(s, s), b.constant(Tensor(Type({k}), w.a))), {0});
    ValueId Ug = b.mul(U, b.broadcastInDim(b.unary(OpKind::Sin, s), {sh.m, k}, {1}));
    ValueId l2 = inner(b, randomMat(sh.m, sh.n, seed++), b.dotGeneral(Ug, Vt, {}, {}, {1}, {0}));
    ValueId U2 = b.slice(U, {0, 0}, {sh.m, 2});
    ValueId l3 = inner(b, randomMat(sh.m, sh.m, seed++), b.dotGeneral(U2, U2, {}, {}, {1}, {1}));
    ValueId V2t = b.slice(Vt, {0, 0}, {2, sh.n});
    ValueId l4 = inner(b, randomMat(sh.n, sh.n, seed++), b.dotGeneral(V2t, V2t, {}, {}, {0}, {0}));
    ValueId l5 = b.reduceSum(b.unary(OpKind::Log, s), {0});
    p.addOutput(b.add(b.add(b.add(l1, l2), b.add(l3, l4)), l5));
    verifyOrThrow(p);

    GradCheckOptions o;
    o.order = 2;
    o.seed = seed++;
    o.rtol = 1e-7;
    auto r = tessel::frontend::gradCheck(p, {kn.A.tensor()}, o);
    INFO(tessel::frontend::formatGradCheck(r));
    CHECK(r.passed);
    CHECK(r.maxRelErr < 1e-8);
  }
}

TEST_CASE("grad svd: repeated singular values, L = ‖A‖_F at A = diag(1, 1, 2, 3)") {
  Mat A(4, 4);
  A(0, 0) = 1, A(1, 1) = 1, A(2, 2) = 2, A(3, 3) = 3;
  Mat expect = A; // dL/dA = A / ‖A‖_F, ‖A‖_F = √15
  for (double &v : expect.a) v /= std::sqrt(15.0);

  SUBCASE("L = sqrt(Σ s²)") {
    Program p;
    Builder b(p);
    ValueId a = p.addInput("a", Type({4, 4}));
    ValueId s = b.svd(a)[1];
    p.addOutput(b.unary(OpKind::Sqrt, b.reduceSum(b.mul(s, s), {0})));
    checkGrad(evalGrad(p, {"a"}, {A.tensor()}), expect, 1e-15);
  }
  SUBCASE("L = ‖U·diag(s)·Vt‖_F (cotangents on U and Vt meet the tie s₁ = s₂)") {
    Program p;
    Builder b(p);
    ValueId a = p.addInput("a", Type({4, 4}));
    ValueId rec = truncation(b, b.svd(a), 4, 4, 4);
    p.addOutput(b.unary(OpKind::Sqrt, b.reduceSum(b.mul(rec, rec), {0, 1})));
    checkGrad(evalGrad(p, {"a"}, {A.tensor()}), expect, 1e-14);
  }
  SUBCASE("L = Σ s (nuclear norm): dL/dA = U·Vᵀ = I") {
    Program p;
    Builder b(p);
    ValueId a = p.addInput("a", Type({4, 4}));
    p.addOutput(b.reduceSum(b.svd(a)[1], {0}));
    checkGrad(evalGrad(p, {"a"}, {A.tensor()}), Mat::eye(4), 1e-15);
  }
}

TEST_CASE("grad svd: rank-1 5×5 input (four zero singular values)") {
  std::mt19937_64 rng(5);
  Mat Q1 = randomOrthogonal(5, rng), Q2 = randomOrthogonal(5, rng);
  std::vector<double> sig = {2.0, 0, 0, 0, 0};
  Mat A = usvt(Q1, sig, Q2); // 2·u·vᵀ
  Mat uvT = usvt(leftCols(Q1, 1), {1.0}, leftCols(Q2, 1));

  SUBCASE("L = s₁: dL/dA = u₁v₁ᵀ") {
    Program p;
    Builder b(p);
    ValueId a = p.addInput("a", Type({5, 5}));
    p.addOutput(b.reduceSum(b.slice(b.svd(a)[1], {0}, {1}), {0}));
    checkGrad(evalGrad(p, {"a"}, {A.tensor()}), uvT, 1e-14);
  }
  SUBCASE("L = Σ_ij (u₁s₁v₁ᵀ)_ij: dL/dA = E − (I − uuᵀ)·E·(I − vvᵀ)") {
    Mat E(5, 5);
    for (double &v : E.a) v = 1;
    Program p;
    Builder b(p);
    ValueId a = p.addInput("a", Type({5, 5}));
    p.addOutput(b.reduceSum(truncation(b, b.svd(a), 5, 5, 1), {0, 1}));
    Mat P = Mat::eye(5), R = Mat::eye(5);
    Mat uu = usvt(leftCols(Q1, 1), {1.0}, leftCols(Q1, 1)), vv = usvt(leftCols(Q2, 1), {1.0}, leftCols(Q2, 1));
    for (size_t i = 0; i < P.a.size(); ++i) P.a[i] -= uu.a[i], R.a[i] -= vv.a[i];
    Mat expect = matmul(matmul(P, E), R);
    for (size_t i = 0; i < expect.a.size(); ++i) expect.a[i] = E.a[i] - expect.a[i];
    checkGrad(evalGrad(p, {"a"}, {A.tensor()}), expect, 1e-13);
    // The same from the general truncation formula (σ₂ = … = 0).
    CHECK(maxAbsDiff(expect.a, truncationGrad(Q1, sig, Q2, E, 1).a) < 1e-14);
  }
  SUBCASE("L = ⟨C, u₁s₁v₁ᵀ⟩ with a random C") {
    Mat C = randomMat(5, 5, 9);
    Program p;
    Builder b(p);
    ValueId a = p.addInput("a", Type({5, 5}));
    p.addOutput(inner(b, C, truncation(b, b.svd(a), 5, 5, 1)));
    checkGrad(evalGrad(p, {"a"}, {A.tensor()}), truncationGrad(Q1, sig, Q2, C, 1), 1e-13);
  }
}

TEST_CASE("grad svd: truncation keeping 2 of 4 distinct singular values") {
  std::mt19937_64 rng(21);
  Mat Q1 = randomOrthogonal(4, rng), Q2 = randomOrthogonal(4, rng);
  std::vector<double> sig = {4.0, 3.0, 2.0, 1.0};
  Mat A = usvt(Q1, sig, Q2);

  SUBCASE("L = s₁ + s₂: dL/dA = u₁v₁ᵀ + u₂v₂ᵀ") {
    Program p;
    Builder b(p);
    ValueId a = p.addInput("a", Type({4, 4}));
    p.addOutput(b.reduceSum(b.slice(b.svd(a)[1], {0}, {2}), {0}));
    checkGrad(evalGrad(p, {"a"}, {A.tensor()}), usvt(leftCols(Q1, 2), {1, 1}, leftCols(Q2, 2)), 1e-14);
  }
  SUBCASE("L = ⟨C, U₂·diag(s₂)·V₂ᵀ⟩: kept/discarded coupling") {
    Mat C = randomMat(4, 4, 3);
    Program p;
    Builder b(p);
    ValueId a = p.addInput("a", Type({4, 4}));
    p.addOutput(inner(b, C, truncation(b, b.svd(a), 4, 4, 2)));
    Mat expect = truncationGrad(Q1, sig, Q2, C, 2);
    checkGrad(evalGrad(p, {"a"}, {A.tensor()}), expect, 1e-13);
    // A rule that ignored the discarded singular vectors would give U₂U₂ᵀ·C·V₂V₂ᵀ-like
    // terms only; make sure the coupling is actually present in this example.
    Mat P2 = usvt(leftCols(Q1, 2), {1, 1}, leftCols(Q1, 2)), R2 = usvt(leftCols(Q2, 2), {1, 1}, leftCols(Q2, 2));
    CHECK(maxAbsDiff(expect.a, matmul(matmul(P2, C), R2).a) > 0.1);
    GradCheckOptions o;
    o.order = 2;
    auto r = tessel::frontend::gradCheck(p, {A.tensor()}, o);
    INFO(tessel::frontend::formatGradCheck(r));
    CHECK(r.passed);
  }
}

namespace {

/// L = ⟨C_U, U[:, :r]⟩ + ⟨c_s, s[:r]⟩ + ⟨C_V, Vt[:r, :]⟩ for A [m,n] (each term optional).
Program truncatedLoss(int64_t m, int64_t n, int64_t r, bool useU, bool useS, bool useV) {
  Program p;
  Builder b(p);
  ValueId a = p.addInput("a", Type({m, n}));
  auto res = b.svd(a);
  ValueId L = kNoValue;
  auto add = [&](ValueId t) { L = L == kNoValue ? t : b.add(L, t); };
  uint64_t seed = 40;
  if (useU) add(inner(b, randomMat(m, r, ++seed), b.slice(res[0], {0, 0}, {m, r})));
  if (useS) {
    Mat c = randomMat(1, r, ++seed);
    add(b.reduceSum(b.mul(b.slice(res[1], {0}, {r}), b.constant(Tensor(Type({r}), c.a))), {0}));
  }
  if (useV) add(inner(b, randomMat(r, n, ++seed), b.slice(res[2], {0, 0}, {r, n})));
  p.addOutput(L);
  return p;
}

} // namespace

TEST_CASE("grad svd: block form for truncated cotangents equals the full rule") {
  struct Case {
    int64_t m, n, r;
    bool u, s, v;
  };
  // Square, tall (U projector term) and wide (V projector term); every cotangent
  // subset; sizes where the block form saves >= 2^15 multiply-adds (the rule's threshold).
  const Case cases[] = {{32, 32, 2, true, true, true},  {32, 32, 8, true, true, true},
                        {32, 32, 3, true, false, false}, {32, 32, 3, false, true, false},
                        {32, 32, 3, false, false, true}, {40, 24, 2, true, true, true},
                        {32, 48, 3, true, true, true},   {40, 24, 3, true, false, true}};
  for (const Case &c : cases) {
    const int64_t k = std::min(c.m, c.n);
    INFO("A " << c.m << "x" << c.n << " keep " << c.r << " U " << c.u << " s " << c.s << " V "
              << c.v);
    Program p = truncatedLoss(c.m, c.n, c.r, c.u, c.s, c.v);
    Tensor A = randomMat(c.m, c.n, 7).tensor();
    GradOptions full, block;
    full.wrt = block.wrt = {"a"};
    full.keepOutputs = block.keepOutputs = false;
    full.svdBlocks = false; // the default is the block form
    Program gf = grad(p, full), gb = grad(p, block);
    verifyOrThrow(gb);
    // The block form multiplies k×k by k×r (never k×k by k×k); its largest product is
    // Ā = [left | U_r]·[Vt_r ; right], of inner extent 2r.
    CHECK(passtest::largestProduct(gf, "vjp") >= c.m * k * k);
    CHECK(passtest::largestProduct(gb, "vjp") <= c.m * c.n * 2 * c.r);
    auto xf = rt::evaluateReference(gf, {A}), xb = rt::evaluateReference(gb, {A});
    double scale = 0;
    for (double v : xf[0].data) scale = std::max(scale, std::abs(v));
    CHECK(scale > 0.1);
    CHECK(maxAbsDiff(xf[0].data, xb[0].data) < 1e-13 * scale);
    // And against a 5-point finite difference along a random direction t.
    Mat t = randomMat(c.m, c.n, 99);
    auto loss = [&](double h) {
      Tensor x = A;
      for (size_t i = 0; i < x.data.size(); ++i) x.data[i] += h * t.a[i];
      return rt::evaluateReference(p, {x})[0].data[0];
    };
    const double h = 1e-5;
    double fd = (loss(-2 * h) - 8 * loss(-h) + 8 * loss(h) - loss(2 * h)) / (12 * h);
    double ad = 0;
    for (size_t i = 0; i < t.a.size(); ++i) ad += xb[0].data[i] * t.a[i];
    CHECK(std::abs(fd - ad) < 1e-8 * std::max(1.0, std::abs(ad)));
  }
  // Second order (grad of the gradient program, a VJP with a random cotangent): the block
  // form's derivative equals the full rule's.
  for (const Case &c : {cases[0], cases[5], cases[6]}) {
    INFO("second order: A " << c.m << "x" << c.n << " keep " << c.r);
    Program p = truncatedLoss(c.m, c.n, c.r, c.u, c.s, c.v);
    Tensor A = randomMat(c.m, c.n, 7).tensor(), W = randomMat(c.m, c.n, 8).tensor();
    std::vector<double> out[2];
    for (int blocks = 0; blocks < 2; ++blocks) {
      GradOptions g1, g2;
      g1.wrt = g2.wrt = {"a"};
      g1.keepOutputs = g2.keepOutputs = false;
      g2.vjp = true;
      g1.svdBlocks = g2.svdBlocks = blocks == 1;
      Program h = grad(grad(p, g1), g2);
      verifyOrThrow(h);
      out[blocks] = rt::evaluateReference(h, {A, W})[0].data;
    }
    double scale = 0;
    for (double v : out[0]) scale = std::max(scale, std::abs(v));
    CHECK(scale > 0.1);
    CHECK(maxAbsDiff(out[0], out[1]) < 1e-12 * scale);
  }
  // r > k/2, or too small to pay for its extra ops: the full rule either way.
  GradOptions block;
  block.wrt = {"a"};
  CHECK(passtest::largestProduct(grad(truncatedLoss(32, 32, 17, true, true, true), block), "vjp") >= 32 * 32 * 32);
  CHECK(passtest::largestProduct(grad(truncatedLoss(8, 8, 2, true, true, true), block), "vjp") >= 8 * 8 * 8);
}

namespace {

/// H·w for a single-scalar-output program of one input "a": grad of ⟨∇L, w⟩, evaluated by
/// the reference evaluator (grad of the gradient program, as a VJP with cotangent w).
std::vector<double> hessianTimes(const Program &p, const Tensor &a, const Tensor &w) {
  GradOptions g1, g2;
  g1.wrt = g2.wrt = {"a"};
  g1.keepOutputs = g2.keepOutputs = false;
  g2.vjp = true;
  Program h = grad(grad(p, g1), g2);
  verifyOrThrow(h);
  return rt::evaluateReference(h, {a, w})[0].data;
}

/// L = ⟨U·Vt, B⟩ (the polar factor of a square A paired with B).
Program polarLoss(const Mat &B) {
  Program p;
  Builder b(p);
  ValueId a = p.addInput("a", Type({B.m, B.n}));
  auto usv = b.svd(a);
  p.addOutput(inner(b, B, b.dotGeneral(usv[0], usv[2], {}, {}, {1}, {0})));
  verifyOrThrow(p);
  return p;
}

Mat scaled(const Mat &x, double c) {
  Mat r = x;
  for (double &v : r.a) v *= c;
  return r;
}

} // namespace

TEST_CASE("grad svd: an exact tie keeps the finite part; gradients are continuous across it") {
  // X = diag(s1, s2), L = ⟨U·Vt, B⟩: dP = (dX − dXᵀ)/(s1 + s2) off the diagonal for the
  // polar factor P = U·Vt, so ∂L/∂X_ij = (B_ij − B_ji)/(s_i + s_j), and 0 on the diagonal.
  // At the tie X = I that is (B − Bᵀ)/2 = [[0, −0.5], [0.5, 0]], whatever basis gesdd picks.
  Mat B(2, 2);
  B(0, 0) = 1, B(0, 1) = 2, B(1, 0) = 3, B(1, 1) = 4;
  Program p = polarLoss(B);
  for (double s2 : {1.0, 1.0 + 1e-6, 1.0 + 1e-3}) {
    CAPTURE(s2);
    Mat X = Mat::eye(2);
    X(1, 1) = s2;
    Mat expect(2, 2);
    expect(0, 1) = (B(0, 1) - B(1, 0)) / (1 + s2);
    expect(1, 0) = -expect(0, 1);
    checkGrad(evalGrad(p, {"a"}, {X.tensor()}), expect, 1e-15);
  }
  // Second order: H·w at the tie is finite and equals the limit from split values (the
  // loss is smooth there), and a central difference of the gradient along w.
  Mat w = randomMat(2, 2, 3);
  std::vector<double> atTie = hessianTimes(p, Mat::eye(2).tensor(), w.tensor());
  CHECK(allFinite(atTie));
  Mat near = Mat::eye(2);
  near(1, 1) = 1 + 1e-7;
  CHECK(maxAbsDiff(atTie, hessianTimes(p, near.tensor(), w.tensor())) < 1e-6);
  const double h = 1e-5;
  std::vector<double> fd(4);
  for (double sign : {1.0, -1.0}) {
    Mat x = Mat::eye(2);
    for (size_t i = 0; i < x.a.size(); ++i) x.a[i] += sign * h * w.a[i];
    std::vector<double> g = evalGrad(p, {"a"}, {x.tensor()})[0].data;
    for (size_t i = 0; i < 4; ++i) fd[i] += sign * g[i] / (2 * h);
  }
  double scale = 0;
  for (double v : fd) scale = std::max(scale, std::abs(v));
  CHECK(scale > 0.1);
  CHECK(maxAbsDiff(atTie, fd) < 1e-8);
}

TEST_CASE("grad svd: any scale: c·A gives the same gradient and a 1/c-scaled Hessian") {
  // L = Σ s (nuclear norm): ∇L = U·Vt for every c; H(c·A) = H(A)/c, finite from 1e-160
  // to 1e160 (an absolute broadening gives 0 at 1e-160, and s·s overflows at 1e160).
  Mat A(3, 3);
  A(0, 0) = 4, A(0, 1) = 1, A(1, 0) = 1, A(1, 1) = 3, A(1, 2) = 1, A(2, 1) = 1, A(2, 2) = 2;
  Program p;
  {
    Builder b(p);
    ValueId a = p.addInput("a", Type({3, 3}));
    p.addOutput(b.reduceSum(b.svd(a)[1], {0}));
    verifyOrThrow(p);
  }
  // A is symmetric positive definite, where U·Vt = I in a whole neighbourhood and the
  // Hessian vanishes; two off-diagonal entries break the symmetry so that it does not.
  Mat An = A;
  An(0, 2) = -0.5, An(2, 0) = 0.7;
  Mat w = randomMat(3, 3, 5);
  std::vector<double> g1 = evalGrad(p, {"a"}, {An.tensor()})[0].data;
  std::vector<double> h1 = hessianTimes(p, An.tensor(), w.tensor());
  double hscale = 0;
  for (double v : h1) hscale = std::max(hscale, std::abs(v));
  CHECK(hscale > 0.01);
  // The gradient at c = 1 against a 5-point difference of L itself along w.
  auto loss = [&](double t) {
    Mat x = An;
    for (size_t i = 0; i < x.a.size(); ++i) x.a[i] += t * w.a[i];
    return rt::evaluateReference(p, {x.tensor()})[0].data[0];
  };
  const double hl = 1e-4;
  double fdl = (loss(-2 * hl) - 8 * loss(-hl) + 8 * loss(hl) - loss(2 * hl)) / (12 * hl), adl = 0;
  for (size_t i = 0; i < w.a.size(); ++i) adl += g1[i] * w.a[i];
  CHECK(std::abs(fdl - adl) < 1e-9 * std::max(1.0, std::abs(adl)));
  for (double c : {1e-160, 1e-20, 1.0, 1e20, 1e160}) {
    CAPTURE(c);
    std::vector<double> g = evalGrad(p, {"a"}, {scaled(An, c).tensor()})[0].data;
    CHECK(allFinite(g));
    CHECK(maxAbsDiff(g, g1) < 1e-14);
    std::vector<double> h = hessianTimes(p, scaled(An, c).tensor(), w.tensor());
    REQUIRE(allFinite(h));
    for (double &v : h) v *= c;
    CHECK(maxAbsDiff(h, h1) < 1e-13 * hscale);
  }
  // The Hessian itself against a central difference of the gradient.
  const double h = 1e-6;
  std::vector<double> fd(9);
  for (double sign : {1.0, -1.0}) {
    Mat x = An;
    for (size_t i = 0; i < x.a.size(); ++i) x.a[i] += sign * h * w.a[i];
    std::vector<double> g = evalGrad(p, {"a"}, {x.tensor()})[0].data;
    for (size_t i = 0; i < 9; ++i) fd[i] += sign * g[i] / (2 * h);
  }
  CHECK(maxAbsDiff(h1, fd) < 1e-8 * hscale);
}

namespace {

/// L = ⟨C, X·Y⟩ + ⟨D, X·Xᵀ⟩ + ⟨E, Yᵀ·Y⟩ with X = U[:, :2]·diag(√s[:2]) and
/// Y = diag(√s[:2])·Vt[:2, :] of svd{gauge = "bond"} of a 4×4 input: invariant under
/// X -> X·O, Y -> Oᵀ·Y for orthogonal O, the promise gauge = "bond" makes.
/// normalised: the values divided by s[0] first, the whole vector (as a program may
/// write it), and L gets ln s[0]: the cotangent of s reaches past the two kept triplets
/// while those of U and Vt do not.
Program bondLoss(bool normalised = false) {
  Program p;
  Builder b(p);
  ValueId a = p.addInput("a", Type({4, 4}));
  auto r = b.svd(a, 1e-12, "bond");
  ValueId s0 = b.reshape(b.slice(r[1], {0}, {1}), {});
  ValueId s = normalised ? b.div(r[1], b.broadcastScalar(s0, {4})) : r[1];
  ValueId rs = b.unary(OpKind::Sqrt, b.slice(s, {0}, {2}));
  ValueId X = b.mul(b.slice(r[0], {0, 0}, {4, 2}), b.broadcastInDim(rs, {4, 2}, {1}));
  ValueId Y = b.mul(b.slice(r[2], {0, 0}, {2, 4}), b.broadcastInDim(rs, {2, 4}, {0}));
  ValueId L = inner(b, randomMat(4, 4, 7), b.dotGeneral(X, Y, {}, {}, {1}, {0}));
  L = b.add(L, inner(b, randomMat(4, 4, 8), b.dotGeneral(X, X, {}, {}, {1}, {1})));
  L = b.add(L, inner(b, randomMat(4, 4, 9), b.dotGeneral(Y, Y, {}, {}, {0}, {0})));
  if (normalised) L = b.add(L, b.unary(OpKind::Log, s0));
  p.addOutput(L);
  return p;
}

Mat asMat(const Tensor &t) {
  Mat r(t.type.shape[0], t.type.shape[1]);
  r.a = t.data;
  return r;
}

std::vector<Tensor> bondGrad(const Program &p, const Mat &A, bool bondGauge) {
  GradOptions o;
  o.wrt = {"a"};
  o.keepOutputs = false;
  o.bondGauge = bondGauge;
  Program g = grad(p, o);
  verifyOrThrow(g);
  return tessel::rt::evaluateReference(g, {A.tensor()});
}

} // namespace

TEST_CASE("grad svd: gauge = bond couples kept pairs without 1/(s_j - s_i), exactly") {
  std::mt19937_64 rng(5);
  Mat Q1 = randomOrthogonal(4, rng), Q2 = randomOrthogonal(4, rng);
  const Program p = bondLoss();
  // Separated values: the bond form and the general rule agree to rounding.
  Mat A = usvt(Q1, {3.0, 2.0, 1.0, 0.5}, Q2);
  checkGrad(bondGrad(p, A, true), asMat(bondGrad(p, A, false)[0]), 1e-13);
  // The kept block is the triplets whose U and Vt carry cotangents: a cotangent on all of
  // s (the values divided by s[0]) does not widen it to the cut ones, which the promise
  // does not cover (it once did: the gradient was off by 43%).
  const Program pn = bondLoss(true);
  checkGrad(bondGrad(pn, A, true), asMat(bondGrad(pn, A, false)[0]), 1e-13);
  // A kept pair tied to 1e-13: the general rule divides its rounding by the gap (and
  // with eps drops the term); the bond form equals the gradient at a gap of 1e-3
  // continued to the tie, to 1e-6 (the loss is smooth there).
  Mat tied = usvt(Q1, {2.0, 2.0 - 1e-13, 1.0, 0.5}, Q2);
  Mat near = usvt(Q1, {2.0, 2.0 - 1e-3, 1.0, 0.5}, Q2);
  Mat nearer = usvt(Q1, {2.0, 2.0 - 5e-4, 1.0, 0.5}, Q2);
  const Mat gNear = asMat(bondGrad(p, near, false)[0]), gNearer = asMat(bondGrad(p, nearer, false)[0]);
  Mat limit = gNearer;
  for (size_t i = 0; i < limit.a.size(); ++i) limit.a[i] = 2 * gNearer.a[i] - gNear.a[i];
  checkGrad(bondGrad(p, tied, true), limit, 1e-6);
  CHECK(maxAbsDiff(asMat(bondGrad(p, tied, false)[0]).a, limit.a) > 1e-3);
  // The VJP made with the promise is not differentiated again.
  GradOptions o;
  o.wrt = {"a"};
  o.vjp = true;
  o.bondGauge = true;
  Program g = grad(p, o);
  bool marked = false;
  for (const Op &op : g.ops) marked |= op.kind == OpKind::Svd && op.attrs.getStr("gauge") == "bond-vjp";
  CHECK(marked);
  CHECK_THROWS_WITH_AS(grad(g, o), doctest::Contains("gauge = \"bond-vjp\""), tessel::Error);
  // Without the option the promise is dropped (a second grad takes the general rule).
  o.bondGauge = false;
  Program g2 = grad(p, o);
  for (const Op &op : g2.ops)
    if (op.kind == OpKind::Svd) CHECK(op.attrs.getStr("gauge") == "none");
}

namespace {
/// e = ⟨rank-k truncation of a, w⟩ through svd_topk (or svd and slices): its gradient
/// does not depend on the scale of a.
Program truncationLoss(int64_t m, int64_t n, int64_t k, bool topk) {
  Program p;
  Builder b(p);
  ValueId a = p.addInput("a", Type({m, n}));
  ValueId w = p.addInput("w", Type({m, n}));
  ValueId u, s, vt;
  if (topk) {
    auto usv = b.svdTopk(a, k, 1e-9);
    u = usv[0], s = usv[1], vt = usv[2];
  } else {
    auto usv = b.svd(a, 1e-9);
    u = b.slice(usv[0], {0, 0}, {m, k});
    s = b.slice(usv[1], {0}, {k});
    vt = b.slice(usv[2], {0, 0}, {k, n});
  }
  ValueId us = b.mul(u, b.broadcastInDim(s, Shape{m, k}, {1}));
  ValueId r = b.dotGeneral(us, vt, {}, {}, {1}, {0});
  p.addOutput(b.reduceSum(b.mul(r, w), {0, 1}));
  verifyOrThrow(p);
  return p;
}
} // namespace

TEST_CASE("grad svd_topk and svd: the engine's gradient of a truncation is the same at every scale, subnormal included") {
  // Unscaled, the complement solve's CG squared cotangents of the size of A: below
  // ~1e-160 its inner products underflowed and the gradient came out 39-77% off with
  // exit 0; at 1e-310 the Krylov products of the subnormal A lost its bits and the
  // scale 2^1027 meant to restore them overflowed, a "dgesdd failed (info = 3)".
  const int64_t m = 64, n = 48, k = 4;
  const Mat A0 = randomMat(m, n, 31), W = randomMat(m, n, 32);
  for (bool topk : {true, false}) {
    CAPTURE(topk);
    GradOptions o;
    o.wrt = {"a"};
    o.keepOutputs = false;
    Program g = grad(truncationLoss(m, n, k, topk), o);
    auto plan = rt::prepare(g);
    rt::Engine e(1);
    const std::vector<double> g1 = e.run(*plan, {A0.tensor(), W.tensor()})[0].data;
    double scale = 0;
    for (double v : g1) scale = std::max(scale, std::abs(v));
    REQUIRE(scale > 0.1);
    for (double c : {1e-100, 1e-160, 1e-200, 1e-300, 1e-310, 1e100, 1e200, 1e300}) {
      CAPTURE(c);
      const Tensor A = scaled(A0, c).tensor();
      std::vector<double> got = e.run(*plan, {A, W.tensor()})[0].data;
      std::vector<double> ref = rt::evaluateReference(g, {A, W.tensor()})[0].data;
      REQUIRE(allFinite(got));
      // A subnormal A has lost bits (at 1e-310 about 11 of 52): the gradient moves by
      // their rounding, ~1e-12 here; elsewhere only the kernels' own rounding.
      const double tol = c < 1e-305 ? 1e-10 : 1e-12;
      CHECK(maxAbsDiff(got, g1) <= tol * scale);
      CHECK(maxAbsDiff(ref, g1) <= tol * scale);
    }
  }
}

TEST_CASE("grad svd: a broadening whose square underflows (eps < 1e-154) or 0 gives no NaN at a tie") {
  // L = ⟨U·Vt, B⟩ at A = 3·I: every pair of singular values is tied, and the gradient
  // is (B − Bᵀ)/6 for any broadening. With L(x) = x/(x² + ε²) built as written, ε² = 0
  // for ε below ~1e-162 made it 0/0 at x = 0, masked to 0·NaN = NaN.
  const int64_t n = 4;
  Mat A(n, n), B = randomMat(n, n, 33);
  for (int64_t i = 0; i < n; ++i) A(i, i) = 3;
  for (double eps : {1e-12, 1e-160, 1e-200, 1e-300, 0.0}) {
    CAPTURE(eps);
    Program p;
    {
      Builder b(p);
      ValueId a = p.addInput("a", Type({n, n}));
      ValueId bb = p.addInput("b", Type({n, n}));
      auto usv = b.svd(a, eps);
      ValueId polar = b.dotGeneral(usv[0], usv[2], {}, {}, {1}, {0});
      p.addOutput(b.reduceSum(b.mul(polar, bb), {0, 1}));
      verifyOrThrow(p);
    }
    GradOptions o;
    o.wrt = {"a"};
    o.keepOutputs = false;
    Program g = grad(p, o);
    std::vector<double> want(static_cast<size_t>(n * n));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) want[i * n + j] = (B(i, j) - B(j, i)) / 6;
    rt::Engine e(1);
    std::vector<double> got = e.run(*rt::prepare(g), {A.tensor(), B.tensor()})[0].data;
    std::vector<double> ref = rt::evaluateReference(g, {A.tensor(), B.tensor()})[0].data;
    CHECK(maxAbsDiff(got, want) <= 1e-15);
    CHECK(maxAbsDiff(ref, want) <= 1e-15);
  }
}
