// Grad transform: one small program per op, checked by gradcheck (orders 1 and 2),
// plus the exact conventions (zero gradients, ties, stop_gradient, sums over uses).
#include <doctest/doctest.h>

#include <functional>
#include <map>

#include "grad_testutil.h"
#include "passes/Jvp.h"
#include "passes/VjpRules.h"

using namespace gradtest;
using namespace tessel::ir;
using tessel::frontend::GradCheckOptions;
using tessel::frontend::InitKind;

namespace {

struct OpCase {
  std::string what;
  Program prog;
  std::vector<std::string> wrt;
  InitKind init = InitKind::Symmetric;
  bool zeroGrad = false; ///< the op has zero derivative: the gradient must be exactly 0
  bool finiteDifferences = true; ///< false for stop_gradient
};

using CaseFn = std::function<std::vector<OpCase>()>;

OpCase unaryCase(OpKind k, InitKind init) {
  Program p;
  p.name = opName(k);
  Builder b(p);
  ValueId x = p.addInput("x", Type({3, 4}));
  p.addOutput(b.unary(k, x));
  return {opName(k), p, {"x"}, init};
}

OpCase binaryCase(OpKind k, InitKind init) {
  Program p;
  p.name = opName(k);
  Builder b(p);
  ValueId x = p.addInput("x", Type({2, 3}));
  ValueId y = p.addInput("y", Type({2, 3}));
  p.addOutput(b.binary(k, x, y));
  return {opName(k), p, {"x", "y"}, init};
}

// One program builder per op; the test below requires an entry for every op kind.
std::map<OpKind, CaseFn> opCases() {
  std::map<OpKind, CaseFn> m;
  m[OpKind::Constant] = [] {
    // out = c (no dependence: zero gradient) and out = Σ c·x (constant on the path).
    Program p0;
    Builder b0(p0);
    p0.addInput("x", Type({2, 2}));
    p0.addOutput(b0.constant(Tensor(Type({2, 2}), {1, 2, 3, 4})));
    Program p1;
    Builder b1(p1);
    ValueId x = p1.addInput("x", Type({2, 2}));
    p1.addOutput(b1.reduceSum(b1.mul(b1.constant(Tensor(Type({2, 2}), {1, -2, 3, 0.5})), x), {0, 1}));
    return std::vector<OpCase>{{"constant output", p0, {"x"}, InitKind::Symmetric, true},
                               {"constant times x", p1, {"x"}}};
  };
  m[OpKind::Iota] = [] {
    Program p0;
    Builder b0(p0);
    p0.addInput("x", Type({2, 3}));
    p0.addOutput(b0.iota({2, 3}, 1));
    Program p1;
    Builder b1(p1);
    ValueId x = p1.addInput("x", Type({2, 3}));
    p1.addOutput(b1.mul(b1.iota({2, 3}, 1), b1.mul(x, x)));
    return std::vector<OpCase>{{"iota output", p0, {"x"}, InitKind::Symmetric, true},
                               {"iota times x²", p1, {"x"}}};
  };
  for (OpKind k : {OpKind::Neg, OpKind::Exp, OpKind::Sin, OpKind::Cos, OpKind::Tanh, OpKind::Abs})
    m[k] = [k] { return std::vector<OpCase>{unaryCase(k, InitKind::Symmetric)}; };
  for (OpKind k : {OpKind::Log, OpKind::Sqrt})
    m[k] = [k] { return std::vector<OpCase>{unaryCase(k, InitKind::Positive)}; };
  m[OpKind::Sign] = [] {
    OpCase c = unaryCase(OpKind::Sign, InitKind::Symmetric);
    c.zeroGrad = true;
    return std::vector<OpCase>{c};
  };
  for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Maximum})
    m[k] = [k] { return std::vector<OpCase>{binaryCase(k, InitKind::Symmetric)}; };
  m[OpKind::Div] = [] { return std::vector<OpCase>{binaryCase(OpKind::Div, InitKind::Positive)}; };
  m[OpKind::Compare] = [] {
    std::vector<OpCase> cs;
    for (const char *d : {"LT", "GE", "EQ"}) {
      Program p;
      Builder b(p);
      ValueId x = p.addInput("x", Type({2, 3}));
      ValueId y = p.addInput("y", Type({2, 3}));
      p.addOutput(b.compare(x, y, d));
      cs.push_back({std::string("compare ") + d, p, {"x", "y"}, InitKind::Symmetric, true});
    }
    return cs;
  };
  m[OpKind::Select] = [] {
    // select(x > y, x·x, sin y): the predicate depends on the inputs but carries no
    // cotangent; each branch gets the cotangent where it is selected.
    Program p;
    Builder b(p);
    ValueId x = p.addInput("x", Type({3, 3}));
    ValueId y = p.addInput("y", Type({3, 3}));
    p.addOutput(b.select(b.compare(x, y, "GT"), b.mul(x, x), b.unary(OpKind::Sin, y)));
    return std::vector<OpCase>{{"select", p, {"x", "y"}}};
  };
  m[OpKind::ReduceSum] = [] {
    std::vector<OpCase> cs;
    for (auto axes : {std::vector<int64_t>{0, 2}, std::vector<int64_t>{1}, std::vector<int64_t>{}}) {
      Program p;
      Builder b(p);
      ValueId x = p.addInput("x", Type({2, 3, 4}));
      p.addOutput(b.reduceSum(b.mul(x, x), axes));
      cs.push_back({"reduce_sum " + std::to_string(axes.size()) + " axes", p, {"x"}});
    }
    return cs;
  };
  m[OpKind::ReduceMax] = [] {
    std::vector<OpCase> cs;
    for (auto axes : {std::vector<int64_t>{1}, std::vector<int64_t>{0, 1, 2}}) {
      Program p;
      Builder b(p);
      ValueId x = p.addInput("x", Type({2, 3, 4}));
      p.addOutput(b.reduceMax(b.mul(x, x), axes));
      cs.push_back({"reduce_max " + std::to_string(axes.size()) + " axes", p, {"x"}});
    }
    return cs;
  };
  m[OpKind::BroadcastInDim] = [] {
    // New axes (0) and an expanded size-1 axis (operand dim 1 -> result dim 2).
    Program p;
    Builder b(p);
    ValueId x = p.addInput("x", Type({3, 1}));
    ValueId y = b.broadcastInDim(b.mul(x, x), {2, 3, 4}, {1, 2});
    p.addOutput(b.mul(y, b.iota({2, 3, 4}, 2)));
    Program q;
    Builder c(q);
    ValueId s = q.addInput("s", Type({}));
    q.addOutput(c.unary(OpKind::Sin, c.broadcastScalar(s, {2, 2})));
    return std::vector<OpCase>{{"broadcast_in_dim", p, {"x"}}, {"broadcast scalar", q, {"s"}}};
  };
  m[OpKind::Reshape] = [] {
    Program p;
    Builder b(p);
    ValueId x = p.addInput("x", Type({2, 6}));
    p.addOutput(b.unary(OpKind::Sin, b.reshape(x, {3, 2, 2})));
    return std::vector<OpCase>{{"reshape", p, {"x"}}};
  };
  m[OpKind::Transpose] = [] {
    Program p;
    Builder b(p);
    ValueId x = p.addInput("x", Type({2, 3, 4}));
    p.addOutput(b.mul(b.transpose(x, {2, 0, 1}), b.iota({4, 2, 3}, 0)));
    return std::vector<OpCase>{{"transpose", p, {"x"}}};
  };
  m[OpKind::Slice] = [] {
    Program p;
    Builder b(p);
    ValueId x = p.addInput("x", Type({4, 5}));
    p.addOutput(b.unary(OpKind::Exp, b.slice(x, {1, 0}, {3, 4})));
    return std::vector<OpCase>{{"slice", p, {"x"}}};
  };
  m[OpKind::Pad] = [] {
    Program p;
    Builder b(p);
    ValueId x = p.addInput("x", Type({2, 3}));
    p.addOutput(b.unary(OpKind::Cos, b.pad(x, {1, 0}, {0, 2})));
    return std::vector<OpCase>{{"pad", p, {"x"}}};
  };
  m[OpKind::DotGeneral] = [] {
    std::vector<OpCase> cs;
    {
      Program p;
      Builder b(p);
      ValueId x = p.addInput("x", Type({3, 4}));
      ValueId y = p.addInput("y", Type({4, 2}));
      p.addOutput(b.dotGeneral(x, y, {}, {}, {1}, {0}));
      cs.push_back({"matmul", p, {"x", "y"}});
    }
    {
      // Batch dims not leading, two contracting dims in swapped order.
      Program p;
      Builder b(p);
      ValueId x = p.addInput("x", Type({2, 3, 4, 5}));
      ValueId y = p.addInput("y", Type({5, 2, 6, 3}));
      p.addOutput(b.dotGeneral(x, y, {0}, {1}, {3, 1}, {0, 3}));
      cs.push_back({"batched, 2 contracting", p, {"x", "y"}});
    }
    {
      // Same operand twice (a Gram matrix): cotangents of both uses are summed.
      Program p;
      Builder b(p);
      ValueId x = p.addInput("x", Type({3, 4}));
      p.addOutput(b.dotGeneral(x, x, {}, {}, {0}, {0}));
      cs.push_back({"xᵀx", p, {"x"}});
    }
    return cs;
  };
  m[OpKind::Einsum] = [] {
    std::vector<OpCase> cs;
    auto add = [&](const std::string &spec, std::vector<Type> types) {
      Program p;
      Builder b(p);
      std::vector<ValueId> xs;
      std::vector<std::string> names;
      for (size_t i = 0; i < types.size(); ++i) {
        names.push_back("x" + std::to_string(i));
        xs.push_back(p.addInput(names.back(), types[i]));
      }
      p.addOutput(b.einsum(spec, xs));
      cs.push_back({"einsum " + spec, p, names});
    };
    add("wak,abu->wkbu", {Type({2, 3, 2}), Type({3, 2, 4})});
    add("ij,jk,kl->li", {Type({2, 3}), Type({3, 4}), Type({4, 2})});
    add("ab,bc->c", {Type({2, 3}), Type({3, 4})});  // 'a' summed inside operand 0 alone
    add("iij,jk->ik", {Type({3, 3, 2}), Type({2, 4})}); // a diagonal
    add("ijk->kj", {Type({2, 3, 4})});
    add("ij,ij->", {Type({2, 3}), Type({2, 3})});
    add("iij->j", {Type({3, 3, 2})}); // diagonal, 'i' only in this operand
    add("ijij->", {Type({2, 3, 2, 3})}); // the TRG closure's trace
    return cs;
  };
  m[OpKind::Svd] = [] {
    // All three results as outputs with a random cotangent (real SVD: the only gauge
    // freedom is a sign per singular pair, fixed continuously by LAPACK near a point).
    std::vector<OpCase> cs;
    for (auto shape : {std::vector<int64_t>{4, 4}, std::vector<int64_t>{5, 3},
                       std::vector<int64_t>{3, 5}}) {
      Program p;
      Builder b(p);
      ValueId a = p.addInput("a", Type(shape));
      auto usv = b.svd(a);
      for (ValueId v : usv) p.addOutput(v);
      cs.push_back({"svd " + Type(shape).str(), p, {"a"}});
    }
    return cs;
  };
  m[OpKind::Eigh] = [] {
    // w and V as outputs with a random cotangent (the gauge is a sign per eigenvector,
    // which LAPACK fixes continuously near a point), on a non-symmetric operand (the op
    // decomposes its symmetric part), and V·diag(w²)·Vᵀ.
    std::vector<OpCase> cs;
    for (int64_t n : {int64_t(1), int64_t(4)}) {
      Program p;
      Builder b(p);
      ValueId a = p.addInput("a", Type({n, n}));
      auto wv = b.eigh(a);
      for (ValueId v : wv) p.addOutput(v);
      cs.push_back({"eigh " + Type({n, n}).str(), p, {"a"}});
    }
    Program p;
    Builder b(p);
    ValueId a = p.addInput("a", Type({5, 5}));
    auto wv = b.eigh(a);
    ValueId vw = b.mul(wv[1], b.broadcastInDim(b.mul(wv[0], wv[0]), {5, 5}, {1}));
    p.addOutput(b.dotGeneral(vw, wv[1], {}, {}, {1}, {1}));
    cs.push_back({"eigh V·diag(w²)·Vᵀ", p, {"a"}});
    return cs;
  };
  m[OpKind::Qr] = [] {
    // Q and R as outputs with a random cotangent, tall, square and wide (the wide case's
    // rule is the one public AD libraries got wrong).
    std::vector<OpCase> cs;
    for (auto shape : {std::vector<int64_t>{5, 3}, std::vector<int64_t>{4, 4},
                       std::vector<int64_t>{3, 5}}) {
      Program p;
      Builder b(p);
      ValueId a = p.addInput("a", Type(shape));
      auto qr = b.qr(a);
      for (ValueId v : qr) p.addOutput(v);
      cs.push_back({"qr " + Type(shape).str(), p, {"a"}});
    }
    return cs;
  };
  m[OpKind::TriangularSolve] = [] {
    // A = 3·I + the random input (diagonally dominant, either triangle), every flag.
    std::vector<OpCase> cs;
    for (int flags = 0; flags < 8; ++flags) {
      const bool left = flags & 1, lower = flags & 2, trans = flags & 4;
      Program p;
      Builder b(p);
      ValueId a = p.addInput("a", Type({3, 3}));
      ValueId rhs = p.addInput("b", left ? Type({3, 2}) : Type({2, 3}));
      ValueId eye = b.compare(b.iota({3, 3}, 0), b.iota({3, 3}, 1), "EQ");
      ValueId A = b.add(b.mul(b.broadcastScalar(b.scalar(3.0), {3, 3}), eye), a);
      p.addOutput(b.triangularSolve(A, rhs, left, lower, trans));
      cs.push_back({std::string("triangular_solve") + (left ? " left" : " right") + (lower ? " lower" : " upper") +
                        (trans ? " transposed" : ""),
                    p, {"a", "b"}});
    }
    return cs;
  };
  m[OpKind::SylvesterSolve] = [] {
    // A = 3·I + a, B = 2·I + b (eigenvalue sums near 5, well away from 0), by all three
    // operands; square and rectangular C.
    std::vector<OpCase> cs;
    for (auto [n, m] : {std::pair<int64_t, int64_t>{3, 3}, {4, 2}}) {
      Program p;
      Builder b(p);
      ValueId a = p.addInput("a", Type({n, n})), bb = p.addInput("b", Type({m, m}));
      ValueId c = p.addInput("c", Type({n, m}));
      auto shifted = [&](ValueId x, int64_t d, double s) {
        ValueId eye = b.compare(b.iota({d, d}, 0), b.iota({d, d}, 1), "EQ");
        return b.add(b.mul(b.broadcastScalar(b.scalar(s), {d, d}), eye), x);
      };
      p.addOutput(b.sylvesterSolve(shifted(a, n, 3.0), shifted(bb, m, 2.0), c));
      cs.push_back({"sylvester_solve " + Type({n, m}).str(), p, {"a", "b", "c"}});
    }
    return cs;
  };
  m[OpKind::SvdTopk] = [] {
    // The k leading triplets of matrices with more than k singular values, so the
    // coupling to the discarded subspace (svd_topk_complement) is exercised; outputs the
    // basis-independent U·diag(s)·Vt and s. Second order: jvp of grad against grad of
    // grad, through svd_topk_complement's VJP.
    std::vector<OpCase> cs;
    for (auto [shape, k] : {std::pair{std::vector<int64_t>{6, 6}, int64_t(2)},
                            std::pair{std::vector<int64_t>{7, 5}, int64_t(2)},
                            std::pair{std::vector<int64_t>{4, 9}, int64_t(1)}}) {
      Program p;
      Builder b(p);
      ValueId a = p.addInput("a", Type(shape));
      auto usv = b.svdTopk(a, k);
      ValueId us = b.mul(usv[0], b.broadcastInDim(usv[1], {shape[0], k}, {1}));
      p.addOutput(b.dotGeneral(us, usv[2], {}, {}, {1}, {0}));
      p.addOutput(usv[1]);
      cs.push_back({"svd_topk k=" + std::to_string(k) + " of " + Type(shape).str(), p, {"a"}});
    }
    return cs;
  };
  m[OpKind::SvdTopkComplement] = [] {
    // Its JVP and VJP rules are solves with the same operator, one the other's transpose;
    // X and Yt do not depend on the signs of U's and V's columns (the right-hand sides are
    // inputs, projected by U·Uᵀ and V·Vᵀ), so finite differences apply. Both outputs, by A
    // and by the right-hand sides; a tall, a wide and a square matrix.
    std::vector<OpCase> cs;
    for (auto [m, n] : {std::pair<int64_t, int64_t>{5, 5}, {6, 4}, {4, 7}}) {
      Program p;
      Builder b(p);
      b.setLoc("example");
      ValueId a = p.addInput("a", Type({m, n}));
      ValueId gu = p.addInput("gu", Type({m, 2})), gvt = p.addInput("gvt", Type({2, n}));
      auto usv = b.svdTopk(a, 2);
      auto xy = b.svdTopkComplement(a, usv[0], usv[1], usv[2], gu, gvt, 1e-12);
      p.addOutput(xy[0]);
      p.addOutput(xy[1]);
      cs.push_back({"svd_topk_complement of " + Type({m, n}).str(), p, {"a", "gu", "gvt"}});
    }
    // With a guard, as the svd-topk-guards pass builds it: svd_topk{3, guards = 1} keeps 2,
    // the complement deflates with the third, and both rules hold it constant (U, s and Vt
    // get no cotangent there, which svd_topk's rule requires).
    Program p;
    Builder b(p);
    ValueId a = p.addInput("a", Type({6, 6}));
    ValueId gu = p.addInput("gu", Type({6, 2})), gvt = p.addInput("gvt", Type({2, 6}));
    auto usv = b.svdTopk(a, 3);
    p.ops[size_t(p.value(usv[0]).def)].attrs.set("guards", ir::Attr::i64(1));
    auto xy = b.svdTopkComplement(a, usv[0], usv[1], usv[2], gu, gvt, 1e-12, 1);
    p.addOutput(xy[0]);
    p.addOutput(xy[1]);
    cs.push_back({"svd_topk_complement{guards = 1} of f64[6,6]", p, {"a", "gu", "gvt"}});
    return cs;
  };
  m[OpKind::StopGradient] = [] {
    // stop_gradient changes the derivative on purpose, so finite differences do not
    // apply: the gradient must be exactly zero (product rules: grad_transform.cpp).
    Program p0;
    Builder b0(p0);
    ValueId x = p0.addInput("x", Type({2, 2}));
    p0.addOutput(b0.stopGradient(b0.mul(x, x)));
    OpCase c{"stop_gradient output", p0, {"x"}, InitKind::Symmetric, true};
    c.finiteDifferences = false;
    return std::vector<OpCase>{c};
  };
  m[OpKind::Call] = [] {
    // Two call sites of one function (one VJP function serves both), and a call whose
    // second output no one uses (its cotangent is zero).
    Program p;
    p.name = "calls";
    Program f;
    f.name = "f";
    ValueId a = f.addInput("a", Type({2, 3}));
    ValueId w = f.addInput("w", Type({2, 3}));
    Builder bf(f);
    f.addOutput(bf.mul(bf.unary(OpKind::Sin, a), w));
    f.addOutput(bf.reduceSum(bf.mul(a, a), {0, 1}));
    p.functions.push_back(std::move(f));
    Builder b(p);
    ValueId x = p.addInput("x", Type({2, 3}));
    ValueId y = p.addInput("y", Type({2, 3}));
    auto r1 = b.call("f", {x, y});
    auto r2 = b.call("f", {r1[0], x});
    p.addOutput(b.add(b.reduceSum(b.mul(r2[0], r2[0]), {0, 1}), r1[1]));
    return std::vector<OpCase>{{"two calls of @f", p, {"x", "y"}}};
  };
  m[OpKind::Scan] = [] {
    // A carried vector and a scanned matrix, stacked outputs, both directions.
    std::vector<OpCase> cs;
    for (bool reverse : {false, true}) {
      Program p;
      p.name = "loop";
      Program body;
      body.name = "body";
      ValueId c = body.addInput("c", Type({3}));
      ValueId row = body.addInput("row", Type({3}));
      Builder bb(body);
      ValueId next = bb.unary(OpKind::Tanh, bb.add(bb.mul(row, c), c));
      body.addOutput(next);
      body.addOutput(bb.reduceSum(bb.mul(next, row), {0}));
      p.functions.push_back(std::move(body));
      Builder b(p);
      ValueId c0 = p.addInput("c0", Type({3}));
      ValueId xs = p.addInput("xs", Type({4, 3}));
      auto r = b.scan("body", {c0}, {xs}, 4, reverse);
      p.addOutput(b.add(b.reduceSum(b.mul(r[0], r[0]), {0}), b.reduceSum(b.unary(OpKind::Sin, r[1]), {0})));
      cs.push_back({reverse ? "reverse scan" : "scan", p, {"c0", "xs"}});
    }
    return cs;
  };
  return m;
}

GradCheckOptions order2(uint64_t seed) {
  GradCheckOptions o;
  o.order = 2;
  o.seed = seed;
  o.eps = 1e-4;
  o.atol = 1e-9;
  o.rtol = 1e-6;
  return o;
}

} // namespace

TEST_CASE("grad: the VJP-rule table covers every op") {
  for (OpKind k : allOpKinds()) {
    std::string op = opName(k);
    CAPTURE(op);
    CHECK(tessel::passes::hasVjpRule(k));
    CHECK_NOTHROW(tessel::passes::vjp::vjpRuleOrThrow(k));
  }
}

TEST_CASE("grad: every op's rule passes gradcheck of orders 1 and 2") {
  auto cases = opCases();
  uint64_t seed = 1;
  for (OpKind k : allOpKinds()) {
    std::string op = opName(k);
    CAPTURE(op);
    REQUIRE_MESSAGE(cases.count(k), "no gradcheck case for op ", op);
    for (OpCase &c : cases[k]()) {
      CAPTURE(c.what);
      verifyOrThrow(c.prog);
      auto point = tessel::frontend::randomInputs(c.prog, seed, c.init);
      if (c.finiteDifferences) {
        auto r = tessel::frontend::gradCheck(c.prog, point, order2(seed++));
        INFO(tessel::frontend::formatGradCheck(r));
        CHECK(r.checks.size() == 2);
        CHECK(r.passed);
        // The check is not vacuous unless the op's derivative is zero.
        if (!c.zeroGrad) CHECK(std::abs(r.checks[0].ad) > 1e-6);
      }
      if (!c.zeroGrad) continue;
      // Exactly zero, with no backward work: only a zero constant (broadcast) per
      // wrt input.
      tessel::passes::GradOptions o;
      o.wrt = c.wrt;
      o.vjp = true;
      o.keepOutputs = false;
      Program g = tessel::passes::grad(c.prog, o);
      verifyOrThrow(g);
      for (const Op &gop : g.ops)
        CHECK_MESSAGE((gop.kind == OpKind::Constant || gop.kind == OpKind::BroadcastInDim),
                      "unexpected op in a zero gradient: ", opName(gop.kind));
      std::vector<Tensor> in = point;
      for (ValueId out : c.prog.outputs) {
        const Type t = c.prog.type(out);
        in.push_back(Tensor(t, std::vector<double>(static_cast<size_t>(t.numel()), 1.0)));
      }
      for (const Tensor &t : tessel::rt::evaluateReference(g, in))
        for (double v : t.data) CHECK(v == 0.0);
    }
  }
}

// ---------------------------------------------------------------------------
// The JVP rules (passes/JvpRules.cpp), on the same cases: each op's forward derivative
// against 5-point finite differences, against its VJP rule (⟨u, J·t⟩ = ⟨Jᵀ·u, t⟩, the
// transpose to rounding), and second order by forward-over-reverse (jvp of the VJP)
// against reverse-over-reverse (the VJP of the VJP).

namespace {

double dotAll(const std::vector<Tensor> &a, const std::vector<Tensor> &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[i].data.size(); ++j) s += a[i].data[j] * b[i].data[j];
  return s;
}

std::vector<Tensor> randomLike(const Program &p, const std::vector<ValueId> &values, std::mt19937_64 &rng) {
  std::vector<Tensor> r;
  for (ValueId v : values) r.push_back(tessel::frontend::randomTensor(p.type(v), rng, InitKind::Symmetric));
  return r;
}

} // namespace

TEST_CASE("jvp: the JVP-rule table covers every op") {
  for (OpKind k : allOpKinds()) {
    std::string op = opName(k);
    CAPTURE(op);
    CHECK(tessel::passes::hasJvpRule(k));
    CHECK(std::string(tessel::passes::jvpRuleDoc(k)).size() > 4);
  }
}

TEST_CASE("jvp: every op's rule against finite differences, its VJP rule, and second order") {
  using tessel::rt::evaluateReference;
  auto cases = opCases();
  uint64_t seed = 100;
  for (OpKind k : allOpKinds()) {
    std::string op = opName(k);
    CAPTURE(op);
    REQUIRE(cases.count(k));
    for (OpCase &c : cases[k]()) {
      CAPTURE(c.what);
      // Tangents and cotangents from a stream of their own (the point's would make the
      // tangent the point itself: a direction that only scales it).
      std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
      const std::vector<Tensor> point = tessel::frontend::randomInputs(c.prog, seed++, c.init);
      tessel::passes::JvpOptions jo;
      jo.wrt = c.wrt;
      jo.keepOutputs = false;
      Program j = tessel::passes::jvp(c.prog, jo);
      // Tangents of the wrt inputs, in input order (the jvp program's tangent inputs).
      std::vector<ValueId> wrtInputs;
      for (ValueId in : c.prog.inputs)
        if (std::find(c.wrt.begin(), c.wrt.end(), c.prog.value(in).name) != c.wrt.end()) wrtInputs.push_back(in);
      REQUIRE(j.inputs.size() == c.prog.inputs.size() + wrtInputs.size());
      const std::vector<Tensor> t = randomLike(c.prog, wrtInputs, rng);
      std::vector<Tensor> in = point;
      in.insert(in.end(), t.begin(), t.end());
      const std::vector<Tensor> jt = evaluateReference(j, in);
      REQUIRE(jt.size() == c.prog.outputs.size());
      if (c.zeroGrad || !c.finiteDifferences) {
        for (const Tensor &x : jt)
          for (double v : x.data) CHECK(v == 0.0);
        continue;
      }
      const std::vector<Tensor> u = randomLike(c.prog, c.prog.outputs, rng);
      const double ad = dotAll(u, jt);
      // Finite differences along t.
      auto along = [&](double h) {
        std::vector<Tensor> x = point;
        for (size_t w = 0; w < wrtInputs.size(); ++w) {
          Tensor &xi = x[static_cast<size_t>(c.prog.inputIndex(wrtInputs[w]))];
          for (size_t e = 0; e < xi.data.size(); ++e) xi.data[e] += h * t[w].data[e];
        }
        return dotAll(u, evaluateReference(c.prog, x));
      };
      const double h = 1e-4;
      const double fd = (-along(2 * h) + 8 * along(h) - 8 * along(-h) + along(-2 * h)) / (12 * h);
      CHECK(std::abs(ad) > 1e-6);
      CHECK(std::abs(ad - fd) <= 1e-7 * std::max(1.0, std::abs(fd)));
      // The VJP with cotangent u, read along t: the same number to rounding.
      tessel::passes::GradOptions go;
      go.wrt = c.wrt;
      go.vjp = true;
      go.keepOutputs = false;
      const Program g = tessel::passes::grad(c.prog, go);
      std::vector<Tensor> gin = point;
      gin.insert(gin.end(), u.begin(), u.end());
      const std::vector<Tensor> gu = evaluateReference(g, gin); // wrt order
      std::vector<Tensor> tInWrtOrder;
      for (const std::string &w : c.wrt)
        for (size_t i = 0; i < wrtInputs.size(); ++i)
          if (c.prog.value(wrtInputs[i]).name == w) tInWrtOrder.push_back(t[i]);
      const double rev = dotAll(gu, tInWrtOrder);
      CHECK(std::abs(ad - rev) <= 1e-11 * std::max(1.0, std::abs(rev)));
      // Second order: the VJP program g(x, u) differentiated forward along t (jvp over
      // the primal inputs only) against its VJP with cotangent s (reverse-over-reverse):
      // ⟨s, ∂g·t⟩ both ways.
      tessel::passes::JvpOptions j2;
      for (ValueId w : wrtInputs) j2.wrt.push_back(c.prog.value(w).name);
      j2.keepOutputs = false;
      const Program fr = tessel::passes::jvp(g, j2);
      std::vector<Tensor> frIn = gin;
      frIn.insert(frIn.end(), t.begin(), t.end());
      const std::vector<Tensor> ht = evaluateReference(fr, frIn); // one per gradient
      std::vector<ValueId> gouts(g.outputs.begin(), g.outputs.end());
      const std::vector<Tensor> s = randomLike(g, gouts, rng);
      const double fwdRev = dotAll(s, ht);
      tessel::passes::GradOptions g2 = go;
      g2.wrt = j2.wrt;
      const Program rr = tessel::passes::grad(g, g2);
      std::vector<Tensor> rrIn = gin;
      rrIn.insert(rrIn.end(), s.begin(), s.end());
      const std::vector<Tensor> sh = evaluateReference(rr, rrIn); // input order
      const double revRev = dotAll(sh, t);
      CHECK(std::abs(fwdRev - revRev) <= 1e-9 * std::max(1.0, std::abs(revRev)));
    }
  }
}
