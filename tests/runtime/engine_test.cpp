// Engine vs reference evaluator, width independence, buffer reuse, errors.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <doctest/doctest.h>

#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "passes/Inline.h"
#include "runtime/Runtime.h"
#include "tests/runtime/rt_testutil.h"

using namespace tessel;
using ir::Builder;
using ir::OpKind;
using ir::Program;
using ir::Tensor;
using ir::Type;
using namespace rttest;

#ifndef RT_TRIALS
#define RT_TRIALS 40
#endif
static const int kTrials = RT_TRIALS;

TEST_CASE("engine: every op kind matches the reference, widths 1/2/4 bitwise equal") {
  std::mt19937_64 rng(7);
  Program p;
  Builder b(p);
  auto x = p.addInput("x", Type({3, 4}));
  auto y = p.addInput("y", Type({3, 4}));
  auto m = p.addInput("m", Type({5, 3}));
  auto pos = b.add(b.mul(x, x), b.full(Type({3, 4}), 0.5));
  std::vector<ir::ValueId> outs = {
      b.neg(x), b.unary(OpKind::Exp, x), b.unary(OpKind::Log, pos), b.unary(OpKind::Sqrt, pos),
      b.unary(OpKind::Sin, x), b.unary(OpKind::Cos, x), b.unary(OpKind::Tanh, x),
      b.unary(OpKind::Abs, x),
      b.unary(OpKind::Sign, x), b.stopGradient(x), b.add(x, y), b.sub(x, y), b.mul(x, y),
      b.div(x, pos), b.binary(OpKind::Maximum, x, y), b.compare(x, y, "EQ"),
      b.compare(x, y, "NE"), b.compare(x, y, "LT"), b.compare(x, y, "LE"), b.compare(x, y, "GT"),
      b.compare(x, y, "GE"), b.select(b.compare(x, y, "GT"), x, y), b.reduceSum(x, {0}),
      b.reduceSum(x, {1}), b.reduceSum(x, {0, 1}), b.reduceMax(x, {1}), b.reduceMax(x, {0, 1}),
      b.broadcastInDim(x, {2, 3, 4}, {1, 2}), b.broadcastScalar(b.scalar(1.5), {2, 2}),
      b.reshape(x, {4, 3}), b.transpose(x, {1, 0}), b.slice(x, {1, 1}, {3, 4}),
      b.pad(x, {1, 0}, {2, 1}), b.iota({2, 3}, 1),
      b.dotGeneral(m, x, {}, {}, {1}, {0}),       // [5,4]
      b.dotGeneral(x, m, {}, {}, {0}, {1}),       // [4,5] (lhs transposed)
      b.dotGeneral(x, y, {0}, {0}, {1}, {1}),     // batched [3]
  };
  // The factors of svd, eigh and qr: (columns, rows or none) output pairs whose signs
  // are fixed by one convention on both sides before the comparison (the reference's
  // decompositions are Eigen's, the engine's LAPACK's).
  std::vector<std::pair<size_t, size_t>> factors;
  constexpr size_t kNone = ~size_t{0};
  auto usv = b.svd(m);
  factors.push_back({outs.size(), outs.size() + 2});
  outs.insert(outs.end(), usv.begin(), usv.end());
  auto wv = b.eigh(b.slice(m, {0, 0}, {3, 3}));
  factors.push_back({outs.size() + 1, kNone});
  outs.insert(outs.end(), wv.begin(), wv.end());
  for (ValueId a : {m, b.transpose(m, {1, 0})}) { // tall and wide
    auto qr = b.qr(a);
    factors.push_back({outs.size(), outs.size() + 1});
    outs.insert(outs.end(), qr.begin(), qr.end());
  }
  {
    ValueId eye = b.compare(b.iota({3, 3}, 0), b.iota({3, 3}, 1), "EQ");
    ValueId tri = b.add(b.mul(b.broadcastScalar(b.scalar(4.0), {3, 3}), eye), b.slice(m, {0, 0}, {3, 3}));
    outs.push_back(b.triangularSolve(tri, x, true, true, false));                       // [3,4]
    outs.push_back(b.triangularSolve(tri, b.transpose(x, {1, 0}), false, false, true)); // [4,3]
    // sylvester_solve: tri (read by its symmetric part) and 3·I + y·yᵀ/4 (4×4 positive
    // definite), C = x.
    ValueId eye4 = b.compare(b.iota({4, 4}, 0), b.iota({4, 4}, 1), "EQ");
    ValueId yyt = b.dotGeneral(y, y, {}, {}, {0}, {0}); // yᵀ·y [4,4]
    ValueId B = b.add(b.mul(b.broadcastScalar(b.scalar(3.0), {4, 4}), eye4),
                      b.mul(yyt, b.broadcastScalar(b.scalar(0.25), {4, 4})));
    outs.push_back(b.sylvesterSolve(tri, B, x)); // [3,4]
  }
  // svd_topk and svd_topk_complement through basis-independent values: s, U·diag(s)·Vt
  // of the two leading triplets, and the complement (independent of the vectors' signs).
  const size_t firstTopk = outs.size();
  auto top2 = b.svdTopk(m, 2);
  outs.push_back(top2[1]);
  outs.push_back(b.dotGeneral(b.mul(top2[0], b.broadcastInDim(top2[1], {5, 2}, {1})), top2[2], {},
                              {}, {1}, {0}));
  auto top1 = b.svdTopk(m, 1);
  auto xy = b.svdTopkComplement(m, top1[0], top1[1], top1[2], b.slice(m, {0, 1}, {5, 2}),
                                b.slice(x, {1, 0}, {2, 3}), 1e-12);
  outs.insert(outs.end(), xy.begin(), xy.end());
  // A call and a scan (both directions): the engine runs them inlined (passes/Inline.h),
  // the reference evaluates the functions themselves.
  {
    Program f;
    f.name = "f";
    ir::ValueId fa = f.addInput("a", Type({3, 4}));
    ir::ValueId fb = f.addInput("b", Type({3, 4}));
    Builder bf(f);
    f.addOutput(bf.mul(bf.unary(OpKind::Sin, fa), fb));
    f.addOutput(bf.reduceSum(fa, {1}));
    Program body;
    body.name = "body";
    ir::ValueId c = body.addInput("c", Type({4}));
    ir::ValueId row = body.addInput("row", Type({4}));
    Builder bb(body);
    ir::ValueId next = bb.add(bb.unary(OpKind::Tanh, c), bb.mul(row, c));
    body.addOutput(next);
    body.addOutput(bb.reduceSum(bb.mul(next, row), {0}));
    p.functions.push_back(std::move(f));
    p.functions.push_back(std::move(body));
  }
  auto called = b.call("f", {x, y});
  outs.insert(outs.end(), called.begin(), called.end());
  for (bool reverse : {false, true}) {
    auto scanned = b.scan("body", {b.reshape(b.slice(x, {0, 0}, {1, 4}), {4})}, {x}, 3, reverse);
    outs.insert(outs.end(), scanned.begin(), scanned.end());
  }
  for (auto v : outs) p.addOutput(v);
  // Every op the runtime executes is here (einsum is lowered to dot_general by the
  // order pass before prepare): a new op must join this differential test.
  std::vector<bool> seen(ir::kNumOpKinds, false);
  for (const ir::Op &op : p.ops) seen[static_cast<size_t>(op.kind)] = true;
  for (OpKind k : ir::allOpKinds())
    if (k != OpKind::Einsum) CHECK_MESSAGE(seen[static_cast<size_t>(k)], "no case for op ", ir::opName(k));
  std::vector<Tensor> in = {randomTensor(Type({3, 4}), rng), randomTensor(Type({3, 4}), rng),
                            randomTensor(Type({5, 3}), rng)};
  in[1].data[2] = in[0].data[2]; // an EQ hit
  auto ref = rt::evaluateReference(p, in);
  auto fixSigns = [&](std::vector<Tensor> &t) {
    for (auto [c, r] : factors) fixFactorSigns(t[c], r == kNone ? nullptr : &t[r]);
  };
  fixSigns(ref);
  Program flat = p;
  REQUIRE(passes::runInline(flat));
  auto plan = rt::prepare(flat);
  std::vector<Tensor> w1;
  for (int w : {1, 2, 4}) {
    rt::Engine e(w);
    auto got = e.run(*plan, in);
    REQUIRE(got.size() == ref.size());
    fixSigns(got);
    for (size_t i = 0; i < ref.size(); ++i) {
      INFO("output " << i << " width " << w);
      CHECK(got[i].type == ref[i].type);
      // The iterative kernels stop at a residual of 8ε·√max(m,n) relative to the scale.
      CHECK(maxRelDiff(got[i], ref[i]) <= (i >= firstTopk ? 1e-12 : 1e-13));
    }
    if (w == 1) w1 = got;
    else
      for (size_t i = 0; i < ref.size(); ++i) CHECK(bitwiseEqual(got[i], w1[i]));
  }
}

TEST_CASE("engine: random programs match the reference; widths bitwise equal") {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < kTrials; ++trial) {
    INFO("trial " << trial);
    RandomProgram rp = randomProgram(rng, 24);
    auto ref = rt::evaluateReference(rp.program, rp.inputs);
    auto plan = rt::prepare(rp.program);
    checkSlotsDoNotRace(*plan, Reachability(*plan));
    std::vector<Tensor> first;
    for (int w : {1, 2, 4}) {
      rt::Engine e(w);
      auto got = e.run(*plan, rp.inputs);
      REQUIRE(got.size() == ref.size());
      for (size_t i = 0; i < ref.size(); ++i) {
        INFO("output " << i << " width " << w);
        CHECK(maxRelDiff(got[i], ref[i]) <= 1e-13);
        if (!first.empty()) CHECK(bitwiseEqual(got[i], first[i]));
      }
      if (first.empty()) first = got;
    }
  }
}

TEST_CASE("engine: large ops split into chunks give identical results for every width") {
  std::mt19937_64 rng(99);
  Program p;
  Builder b(p);
  auto a = p.addInput("a", Type({300, 280}));
  auto c = p.addInput("c", Type({280, 260}));
  auto t = p.addInput("t", Type({16, 16, 16, 16}));
  auto prod = b.dotGeneral(a, c, {}, {}, {1}, {0}); // 2*300*280*260 = 43.7 MFLOP: chunked
  // Both operands transposed in memory (the GEMM reads them with trans flags), a
  // 2×2 grid of ragged tiles of C (300 = 152 + 148 rows and columns).
  auto ta = p.addInput("ta", Type({400, 300}));
  auto tb = p.addInput("tb", Type({300, 400}));
  auto tiled = b.dotGeneral(ta, tb, {}, {}, {0}, {1}); // 2*300*300*400 = 72 MFLOP
  // Split by columns only, for each of the other three layouts (a ragged last column).
  auto nnA = p.addInput("nnA", Type({100, 300}));
  auto nnB = p.addInput("nnB", Type({300, 600}));
  auto nn = b.dotGeneral(nnA, nnB, {}, {}, {1}, {0}); // NN, 36 MFLOP
  auto ntA = p.addInput("ntA", Type({120, 280}));
  auto ntB = p.addInput("ntB", Type({500, 280}));
  auto nt = b.dotGeneral(ntA, ntB, {}, {}, {1}, {1}); // NT, 33.6 MFLOP
  auto tnA = p.addInput("tnA", Type({300, 150}));
  auto tnB = p.addInput("tnB", Type({300, 480}));
  auto tn = b.dotGeneral(tnA, tnB, {}, {}, {0}, {0}); // TN, 43.2 MFLOP
  // Enough rows for full-width strips of >= 128 rows: 4 strips, not a 2×2 grid.
  auto stA = p.addInput("stA", Type({512, 128}));
  auto stB = p.addInput("stB", Type({128, 512}));
  auto strips = b.dotGeneral(stA, stB, {}, {}, {1}, {0}); // NN, 67 MFLOP
  auto e1 = b.unary(OpKind::Exp, b.mul(prod, b.full(Type({300, 260}), 1e-3)));
  auto tt = b.transpose(t, {3, 2, 1, 0});
  auto s = b.reduceSum(b.mul(tt, tt), {0, 2});
  auto mx = b.reduceMax(b.unary(OpKind::Abs, t), {0, 1, 2, 3});
  auto pd = b.pad(t, {1, 0, 0, 2}, {0, 1, 1, 0});
  p.addOutput(e1);
  p.addOutput(s);
  p.addOutput(mx);
  p.addOutput(pd);
  p.addOutput(tiled);
  p.addOutput(nn);
  p.addOutput(nt);
  p.addOutput(tn);
  p.addOutput(strips);
  std::vector<Tensor> in;
  for (ir::ValueId v : p.inputs) in.push_back(randomTensor(p.type(v), rng));
  auto plan = rt::prepare(p);
  const std::string described = rt::describePlan(*plan);
  CHECK(described.find("chunks: 1 |") != std::string::npos);
  CHECK(described.find("chunks: 4 | bytes: 720000 | B=1 M=300 N=300 K=400 TT tiles 152x152") !=
        std::string::npos);
  CHECK(described.find("B=1 M=100 N=600 K=300 NN tiles 100x304") != std::string::npos);
  CHECK(described.find("B=1 M=120 N=500 K=280 NT tiles 120x256") != std::string::npos);
  CHECK(described.find("B=1 M=150 N=480 K=300 TN tiles 150x240") != std::string::npos);
  CHECK(described.find("B=1 M=512 N=512 K=128 NN tiles 128x512") != std::string::npos);
  auto ref = rt::evaluateReference(p, in);
  rt::Engine e1w(1), e2w(2), e4w(4);
  auto r1 = e1w.run(*plan, in);
  auto r2 = e2w.run(*plan, in);
  auto r4 = e4w.run(*plan, in);
  for (size_t i = 0; i < ref.size(); ++i) {
    INFO("output " << i);
    CHECK(maxRelDiff(r1[i], ref[i]) <= 1e-13);
    CHECK(bitwiseEqual(r1[i], r2[i]));
    CHECK(bitwiseEqual(r1[i], r4[i]));
  }
  // Repeated runs on the same engine are bitwise stable too.
  auto again = e4w.run(*plan, in);
  for (size_t i = 0; i < ref.size(); ++i) CHECK(bitwiseEqual(again[i], r4[i]));
}

TEST_CASE("engine: width 1 runs a GEMM's row strips as one call, bitwise equal to the strips") {
  // The engine of width 1 merges the full-width row strips of a GEMM into one BLAS call
  // (runtime/Kernels.h); wider engines run them one by one. Equal bits need a BLAS
  // whose row i of C does not depend on the row split. The shapes of a χ = 32 TRG step:
  // the plaquette GEMM and its two VJP products (1024³ in three layouts, 8 strips), the
  // K = 32 pairwise contractions and the K = 64 svd VJP product (4 and 8 strips).
  std::mt19937_64 rng(17);
  Program p;
  Builder b(p);
  auto a = p.addInput("a", Type({1024, 1024}));
  auto c = p.addInput("c", Type({1024, 1024}));
  auto l = p.addInput("l", Type({1024, 32}));
  auto r = p.addInput("r", Type({32, 1024}));
  auto l2 = p.addInput("l2", Type({1024, 64}));
  auto r2 = p.addInput("r2", Type({64, 1024}));
  p.addOutput(b.dotGeneral(a, c, {}, {}, {1}, {0}));  // NN
  p.addOutput(b.dotGeneral(a, c, {}, {}, {0}, {0}));  // TN
  p.addOutput(b.dotGeneral(a, c, {}, {}, {1}, {1}));  // NT
  p.addOutput(b.dotGeneral(l, r, {}, {}, {1}, {0}));  // K = 32
  p.addOutput(b.dotGeneral(l2, r2, {}, {}, {1}, {0})); // K = 64
  // Two batches of 4 strips each, the last one ragged (1000 = 3·256 + 232 rows): width 1
  // merges within a batch only.
  auto ba = p.addInput("ba", Type({2, 1000, 512}));
  auto bb = p.addInput("bb", Type({2, 512, 1024}));
  p.addOutput(b.dotGeneral(ba, bb, {0}, {0}, {2}, {1}));
  std::vector<Tensor> in;
  for (ir::ValueId v : p.inputs) in.push_back(randomTensor(p.type(v), rng));
  auto plan = rt::prepare(p);
  const std::string described = rt::describePlan(*plan);
  CHECK(described.find("M=1024 N=1024 K=1024 NN tiles 128x1024") != std::string::npos);
  CHECK(described.find("M=1024 N=1024 K=32 NN tiles 256x1024") != std::string::npos);
  CHECK(described.find("B=2 M=1000 N=1024 K=512 NN tiles 256x1024") != std::string::npos);
  rt::Engine one(1), two(2);
  auto merged = one.run(*plan, in), strips = two.run(*plan, in);
  for (size_t i = 0; i < merged.size(); ++i) {
    INFO("output " << i);
    CHECK(bitwiseEqual(merged[i], strips[i]));
  }
}

TEST_CASE("engine: buffer reuse shrinks the arena of a chain") {
  Program p;
  Builder b(p);
  auto x = p.addInput("x", Type({64, 64}));
  ir::ValueId v = x;
  for (int i = 0; i < 20; ++i) v = b.unary(i % 2 ? OpKind::Sin : OpKind::Cos, b.add(v, v));
  p.addOutput(b.reduceSum(v, {0, 1}));
  // One instruction per op (the chain would otherwise be one fused loop).
  rt::PrepareOptions unfused;
  unfused.fuseElementwise = false;
  rt::PrepareOptions noReuse = unfused;
  noReuse.reuseBuffers = false;
  auto reuse = rt::prepare(p, unfused), plain = rt::prepare(p, noReuse);
  const int64_t one = 64 * 64 * 8;
  CHECK(rt::arenaBytes(*plain) >= 40 * one);
  CHECK(rt::arenaBytes(*reuse) <= 2 * one);
  CHECK(rt::peakLiveBytes(*reuse) <= 2 * one + 8);
  CHECK(rt::peakLiveBytes(*reuse) >= one);
  // Same numbers either way.
  std::mt19937_64 rng(3);
  std::vector<Tensor> in = {randomTensor(Type({64, 64}), rng)};
  rt::Engine e(2);
  CHECK(bitwiseEqual(e.run(*reuse, in)[0], e.run(*plain, in)[0]));
  CHECK(maxRelDiff(e.run(*reuse, in)[0], rt::evaluateReference(p, in)[0]) <= 1e-13);
}

TEST_CASE("engine: reshape and stop_gradient are aliases; outputs in place") {
  Program p;
  Builder b(p);
  auto x = p.addInput("x", Type({4, 4}));
  auto r = b.reshape(b.stopGradient(x), {2, 8});
  auto y = b.neg(r);
  p.addOutput(y);
  p.addOutput(r);
  p.addOutput(b.reshape(y, {16}));
  auto plan = rt::prepare(p);
  CHECK(rt::planSize(*plan) == 1);
  std::mt19937_64 rng(5);
  std::vector<Tensor> in = {randomTensor(Type({4, 4}), rng)};
  rt::Engine e(1);
  auto out = e.run(*plan, in);
  REQUIRE(out.size() == 3);
  CHECK(out[0].type == Type({2, 8}));
  CHECK(out[1].type == Type({2, 8}));
  CHECK(out[2].type == Type({16}));
  for (int i = 0; i < 16; ++i) {
    CHECK(out[0].data[i] == -in[0].data[i]);
    CHECK(out[1].data[i] == in[0].data[i]);
    CHECK(out[2].data[i] == -in[0].data[i]);
  }
}

TEST_CASE("engine: input errors name the input; the engine stays usable") {
  Program p;
  Builder b(p);
  auto x = p.addInput("T", Type({2, 3}));
  p.addOutput(b.neg(x));
  auto plan = rt::prepare(p);
  rt::Engine e(2);
  CHECK_THROWS_WITH_AS(e.run(*plan, {}), doctest::Contains("1 input(s) (%T), got 0"), Error);
  CHECK_THROWS_WITH_AS(e.run(*plan, {Tensor::zeros(Type({3, 2}))}),
                       doctest::Contains("input %T (#0): expected f64[2,3], got f64[3,2]"), Error);
  auto ok = e.run(*plan, {Tensor(Type({2, 3}), {1, 2, 3, 4, 5, 6})});
  CHECK(ok[0].data[5] == -6.0);
}

TEST_CASE("engine: kernel failure names the op, then the engine is reused") {
  Program p;
  Builder b(p);
  auto m = p.addInput("M", Type({8, 8}));
  auto m2 = p.addInput("M2", Type({8, 8}));
  b.setLoc("test: svd of M");
  auto usv = b.svd(b.mul(m, b.full(Type({8, 8}), 2.0)));
  b.setLoc("test: svd of M2");
  auto usv2 = b.svd(m2);
  p.addOutput(usv[1]);
  p.addOutput(usv2[1]);
  auto plan = rt::prepare(p);
  std::mt19937_64 rng(11);
  Tensor good = randomTensor(Type({8, 8}), rng), bad = good;
  bad.data[9] = std::numeric_limits<double>::quiet_NaN();
  for (int w : {1, 2, 3}) {
    rt::Engine e(w);
    for (int rep = 0; rep < 3; ++rep) {
      CHECK_THROWS_WITH_AS(e.run(*plan, {bad, good}), doctest::Contains("test: svd of M\""), Error);
      CHECK_THROWS_WITH_AS(e.run(*plan, {good, bad}), doctest::Contains("NaN or inf"), Error);
      auto out = e.run(*plan, {good, good});
      auto ref = rt::evaluateReference(p, {good, good});
      CHECK(maxRelDiff(out[0], ref[0]) <= 1e-13);
      CHECK(maxRelDiff(out[1], ref[1]) <= 1e-13);
    }
  }
}

TEST_CASE("engine: when two independent ops fail, every width names the same one") {
  // Two SVDs of NaN matrices can run at the same time; the error must not depend on
  // which thread fails first (found by the differential fuzzer, fuzz/README.md).
  Program p;
  Builder b(p);
  auto m = p.addInput("M", Type({8, 8}));
  auto m2 = p.addInput("M2", Type({8, 8}));
  b.setLoc("svd one");
  auto usv = b.svd(b.mul(m, b.full(Type({8, 8}), 2.0)));
  b.setLoc("svd two");
  auto usv2 = b.svd(m2);
  p.addOutput(usv[1]);
  p.addOutput(usv2[1]);
  auto plan = rt::prepare(p);
  Tensor bad = Tensor::zeros(Type({8, 8}));
  bad.data[3] = std::numeric_limits<double>::quiet_NaN();
  std::string first;
  for (int w : {1, 2, 3, 4}) {
    rt::Engine e(w);
    for (int rep = 0; rep < 20; ++rep) {
      std::string msg;
      try {
        e.run(*plan, {bad, bad});
      } catch (const Error &err) {
        msg = err.what();
      }
      if (first.empty()) first = msg;
      INFO("width " << w << " run " << rep);
      CHECK(msg == first);
    }
  }
  CHECK(first.find("svd one") != std::string::npos);
}

TEST_CASE("engine: --check-nan and --check-inf skip the svd results nothing reads") {
  // Only s is used, so gesdd computes no vectors and U and Vt get no buffer (found by
  // the differential fuzzer: the check read them through a null pointer).
  Program p;
  Builder b(p);
  auto a = p.addInput("a", Type({3, 2}));
  p.addOutput(b.svd(a)[1]);
  std::mt19937_64 rng(4);
  std::vector<Tensor> in = {randomTensor(Type({3, 2}), rng)};
  auto expect = rt::evaluateReference(p, in);
  for (rt::ValueCheck check : {rt::ValueCheck::Nan, rt::ValueCheck::NanOrInf}) {
    rt::PrepareOptions o;
    o.valueCheck = check;
    auto plan = rt::prepare(p, o);
    for (int w : {1, 2}) {
      rt::Engine e(w);
      CHECK(maxRelDiff(e.run(*plan, in)[0], expect[0]) <= 1e-13);
    }
  }
}

TEST_CASE("engine: --check-nan stops at the first op producing NaN") {
  Program p;
  Builder b(p);
  auto x = p.addInput("x", Type({3}));
  b.setLoc("log of x");
  auto l = b.unary(OpKind::Log, x);
  b.setLoc("");
  p.addOutput(b.mul(l, x));
  rt::PrepareOptions o;
  o.valueCheck = rt::ValueCheck::Nan;
  auto plan = rt::prepare(p, o);
  for (int w : {1, 2}) {
    rt::Engine e(w);
    CHECK_THROWS_WITH_AS(e.run(*plan, {Tensor(Type({3}), {1, -1, 2})}),
                         doctest::Contains("log of x"), Error);
    CHECK_THROWS_WITH_AS(e.run(*plan, {Tensor(Type({3}), {1, -1, 2})}),
                         doctest::Contains("is NaN at [1]; operands: %x finite"), Error);
    auto ok = e.run(*plan, {Tensor(Type({3}), {1, 2, 4})});
    CHECK(ok[0].data[1] == doctest::Approx(2 * std::log(2.0)));
  }
}

TEST_CASE("engine: --check-nan reports operands as they were (no in-place with the check)") {
  Program p;
  Builder b(p);
  auto x = p.addInput("x", Type({2, 3}));
  auto t = b.add(x, x); // dies at the log: in place without the check
  b.setLoc("log of 2x");
  auto l = b.unary(OpKind::Log, t);
  b.setLoc("");
  p.addOutput(b.unary(OpKind::Exp, l));
  rt::PrepareOptions o;
  o.valueCheck = rt::ValueCheck::Nan;
  auto plan = rt::prepare(p, o);
  CHECK(rt::describePlan(*plan).find("in-place") == std::string::npos);
  rt::PrepareOptions unfused; // (fused, the add, log and exp are one loop)
  unfused.fuseElementwise = false;
  CHECK(rt::describePlan(*rt::prepare(p, unfused)).find("in-place") != std::string::npos);
  for (int w : {1, 2, 4}) {
    rt::Engine e(w);
    CHECK_THROWS_WITH_AS(e.run(*plan, {Tensor(Type({2, 3}), {1, 2, -3, 4, 5, 6})}),
                         doctest::Contains("is NaN at [0,2]; operands: %0 finite"), Error);
  }
}

TEST_CASE("engine: prepare rejects einsum with a message naming the op") {
  Program p;
  Builder b(p);
  auto x = p.addInput("x", Type({2, 2}));
  b.setLoc("contract");
  p.addOutput(b.einsum("ij,jk->ik", {x, x}));
  CHECK_THROWS_WITH_AS(rt::prepare(p), doctest::Contains("einsum must be lowered by the order pass"),
                       Error);
  CHECK_THROWS_WITH_AS(rt::prepare(p), doctest::Contains("contract"), Error);
}

TEST_CASE("engine: width must be positive") {
  CHECK_THROWS_AS(rt::Engine(0), Error);
  rt::Engine e(3);
  CHECK(e.width() == 3);
  CHECK(rt::blasInfo().find("1 thread") != std::string::npos);
}

TEST_CASE("engine: reduce_max over contiguous data is bitwise the sequential max (NaN, -0, ties)") {
  // The kernel maxes 8 lanes at a time; where the order matters (which NaN, which
  // zero) the result must still be the reference's left-to-right one.
  const double nan1 = std::numeric_limits<double>::quiet_NaN();
  double nan2 = nan1;
  uint64_t bits = 0;
  std::memcpy(&bits, &nan2, sizeof bits);
  bits ^= 0x5; // another payload
  std::memcpy(&nan2, &bits, sizeof bits);
  const double inf = std::numeric_limits<double>::infinity();
  const int64_t n = 37;
  std::mt19937_64 rng(21);
  std::vector<std::vector<double>> cases;
  cases.push_back(randomTensor(Type({n}), rng).data);
  cases.push_back(std::vector<double>(n, -inf));
  std::vector<double> zeros(n, -0.0);
  zeros[3] = 0.0;  // +0 after −0: the sequential max keeps −0
  zeros[20] = -1.0;
  cases.push_back(zeros);
  std::vector<double> zeros2(n, 0.0);
  zeros2[11] = -0.0;
  cases.push_back(zeros2);
  std::vector<double> zeros3(n, -2.0);
  zeros3[0] = -1.0;
  zeros3[1] = -0.0; // the sequential max keeps this −0; lanes 0 and 1 alone give +0
  zeros3[8] = 0.0;
  cases.push_back(zeros3);
  std::vector<double> nans = randomTensor(Type({n}), rng).data;
  nans[5] = nan1;
  nans[30] = nan2; // the sequential loop ends on the last NaN
  cases.push_back(nans);
  std::vector<double> tail = randomTensor(Type({n}), rng, -1.0, 0.0).data;
  tail[n - 1] = 2.0; // the maximum in the remainder after the lanes
  cases.push_back(tail);
  Program p;
  Builder b(p);
  auto x = p.addInput("x", Type({n}));
  p.addOutput(b.reduceMax(x, {0}));
  auto plan = rt::prepare(p);
  for (size_t c = 0; c < cases.size(); ++c) {
    CAPTURE(c);
    Tensor in(Type({n}), cases[c]);
    double want = -inf;
    for (double v : cases[c])
      if (v > want || v != v) want = v;
    Tensor ref = rt::evaluateReference(p, {in})[0];
    rt::Engine e(1);
    Tensor got = e.run(*plan, {in})[0];
    CHECK(bitwiseEqual(got, ref));
    CHECK(std::memcmp(&got.data[0], &want, sizeof want) == 0);
  }
  // Several contiguous segments per output: the running max enters the next segment
  // (here a NaN, and a −0 that a later +0 must not replace).
  Program q;
  Builder bq(q);
  auto y = q.addInput("y", Type({2, 3, n}));
  q.addOutput(bq.reduceMax(y, {0, 2}));
  Tensor in = randomTensor(Type({2, 3, n}), rng);
  in.data[0 * 3 * n + 0 * n + 5] = nan1;               // output 0: NaN from segment 1
  for (int64_t i = 0; i < n; ++i) in.data[0 * 3 * n + 1 * n + i] = -1.0;
  in.data[0 * 3 * n + 1 * n + 2] = -0.0;                // output 1: −0 in segment 1 ...
  for (int64_t i = 0; i < n; ++i) in.data[1 * 3 * n + 1 * n + i] = i % 9 == 0 ? 0.0 : -1.0; // ... +0 in 2
  Tensor ref = rt::evaluateReference(q, {in})[0];
  rt::Engine e(1);
  Tensor got = e.run(*rt::prepare(q), {in})[0];
  CHECK(bitwiseEqual(got, ref));
  CHECK(std::isnan(got.data[0]));
  CHECK(std::signbit(got.data[1]));
}
