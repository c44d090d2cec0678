// Loop fusion of elementwise chains at lowering: which ops fuse, and that fused loops
// give bitwise the results of one instruction per op, for every width and across
// chunk and block boundaries.
#include <limits>
#include <random>
#include <string>

#include <doctest/doctest.h>

#include "ir/Builder.h"
#include "runtime/Runtime.h"
#include "tests/runtime/rt_testutil.h"

using namespace tessel;
using namespace tessel::ir;
using namespace rttest;

namespace {

rt::PrepareOptions unfused() {
  rt::PrepareOptions o;
  o.fuseElementwise = false;
  return o;
}

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

/// Every elementwise op kind in chains with single-use intermediates, scalar
/// broadcasts (a constant and an input), a value read twice, and an intermediate output.
Program elementwiseMix(int64_t n) {
  Program p;
  Builder b(p);
  const Type t({n});
  auto x = p.addInput("x", t), y = p.addInput("y", t), k = p.addInput("k", Type({}));
  auto kb = b.broadcastScalar(k, {n});
  auto two = b.broadcastScalar(b.scalar(2.0), {n});
  auto s = b.unary(OpKind::Sin, x);                                     // read twice
  auto a = b.mul(s, b.unary(OpKind::Cos, y));                           // fuses into the next
  auto c = b.add(a, b.mul(kb, b.unary(OpKind::Exp, b.neg(b.unary(OpKind::Abs, y)))));
  auto d = b.div(c, b.add(two, b.unary(OpKind::Sqrt, b.unary(OpKind::Abs, x))));
  auto m = b.create(OpKind::Maximum, {d, b.sub(s, kb)});
  auto pred = b.compare(m, b.unary(OpKind::Sign, y), "GT");
  auto sel = b.select(pred, m, b.unary(OpKind::Log, b.add(two, b.mul(s, s))));
  p.addOutput(d);                                                       // an intermediate output
  p.addOutput(b.mul(sel, kb));
  return p;
}

} // namespace

TEST_CASE("fusion: fused loops equal one instruction per op bitwise, every width, across chunks") {
  // 70001 elements: three chunks of 2^15, and blocks of 512 with a partial last one.
  for (int64_t n : {1, 511, 513, 70001}) {
    INFO("n = " << n);
    Program p = elementwiseMix(n);
    std::mt19937_64 rng(11);
    std::vector<Tensor> in = {randomTensor(Type({n}), rng), randomTensor(Type({n}), rng), Tensor::scalar(0.75)};
    auto ref = rt::evaluateReference(p, in);
    auto plainPlan = rt::prepare(p, unfused());
    auto fusedPlan = rt::prepare(p);
    CHECK(rt::planSize(*fusedPlan) < rt::planSize(*plainPlan));
    auto plain = rt::Engine(1).run(*plainPlan, in);
    for (int w : {1, 2, 4}) {
      auto got = rt::Engine(w).run(*fusedPlan, in);
      for (size_t i = 0; i < ref.size(); ++i) {
        CHECK(bitwiseEqual(got[i], plain[i]));
        CHECK(maxRelDiff(got[i], ref[i]) <= 1e-13);
      }
    }
  }
}

TEST_CASE("fusion: what fuses and what does not") {
  Program p = elementwiseMix(1000);
  const std::string fused = rt::describePlan(*rt::prepare(p));
  const std::string plain = rt::describePlan(*rt::prepare(p, unfused()));
  CHECK(count(plain, " fused ") == 0);
  CHECK(count(fused, " fused ") >= 2);
  // sin x is read three times: its own instruction; %d is an output: its own buffer.
  CHECK(count(fused, "elementwise sin") == 1);
  CHECK(fused.find("output0") != std::string::npos);
  // The broadcasts of scalars are operands of the loops, not copies.
  CHECK(count(plain, "copy broadcast_in_dim") == 2);
  CHECK(count(fused, "copy broadcast_in_dim") == 0);
  // No fusion with a value check (every op's results are checked).
  rt::PrepareOptions check;
  check.valueCheck = rt::ValueCheck::Nan;
  CHECK(count(rt::describePlan(*rt::prepare(p, check)), " fused ") == 0);
}

TEST_CASE("fusion: a loop holds at most 32 ops; the gradient of sum(sin(x) x^2) is one loop") {
  Program p;
  Builder b(p);
  ir::ValueId v = p.addInput("x", Type({512}));
  for (int k = 0; k < 100; ++k) v = b.unary(k % 2 ? OpKind::Sin : OpKind::Cos, v);
  p.addOutput(v);
  auto plan = rt::prepare(p);
  CHECK(rt::planSize(*plan) == 4); // 32 + 32 + 32 + 4
  std::mt19937_64 rng(5);
  std::vector<Tensor> in = {randomTensor(Type({512}), rng)};
  CHECK(bitwiseEqual(rt::Engine(2).run(*plan, in)[0], rt::Engine(1).run(*rt::prepare(p, unfused()), in)[0]));

  // The grad transform's program of the seeds' micro benchmark (cse, dce applied): one
  // loop; t4, read twice by one add (t4 + t4), is computed once in it.
  Program g;
  Builder gb(g);
  auto x = g.addInput("x", Type({1000}));
  auto s = gb.unary(OpKind::Sin, x);
  auto x2 = gb.mul(x, x);
  auto one = gb.broadcastScalar(gb.scalar(1.0), {1000});
  auto t2 = gb.mul(one, x2);
  auto t4 = gb.mul(gb.mul(one, s), x);
  auto t5 = gb.add(t4, t4);
  g.addOutput(gb.add(t5, gb.mul(t2, gb.unary(OpKind::Cos, x))));
  CHECK(rt::planSize(*rt::prepare(g)) == 1);
  CHECK(rt::planSize(*rt::prepare(g, unfused())) == 10); // 9 ops and the broadcast's copy
}

TEST_CASE("fusion: a value whose readers are all in one loop (a diamond) is computed once in it") {
  // d = x / y is read by the NaN test and by the select that replaces NaN by 0 (the
  // grad transform's zero-cotangent guard): one loop. Read also by an op of another
  // loop (an output), d keeps its buffer.
  const int64_t n = 1000;
  for (bool shared : {false, true}) {
    INFO("d also read by another loop: " << shared);
    Program p;
    Builder b(p);
    const Type t({n});
    auto x = p.addInput("x", t), y = p.addInput("y", t);
    auto d = b.div(x, y);
    auto isNan = b.compare(d, d, "NE");
    auto s = b.select(isNan, b.broadcastScalar(b.scalar(0.0), {n}), d);
    p.addOutput(b.mul(s, x));
    if (shared) p.addOutput(b.unary(OpKind::Exp, d));
    auto plan = rt::prepare(p);
    const std::string text = rt::describePlan(*plan);
    if (!shared) {
      CHECK(rt::planSize(*plan) == 1);
      CHECK(text.find("4 ops fused [div,compare,select,mul]") != std::string::npos);
    } else {
      CHECK(count(text, "elementwise div") == 1);
      CHECK(text.find("3 ops fused [compare,select,mul]") != std::string::npos);
    }
    std::mt19937_64 rng(3);
    std::vector<Tensor> in = {randomTensor(t, rng), randomTensor(t, rng)};
    for (int64_t i = 0; i < n; i += 7) in[1].data[i] = 0; // x/0: ±inf, and 0/0 = NaN below
    in[0].data[0] = 0;
    auto plain = rt::Engine(1).run(*rt::prepare(p, unfused()), in);
    auto ref = rt::evaluateReference(p, in);
    for (int w : {1, 2}) {
      auto got = rt::Engine(w).run(*plan, in);
      for (size_t i = 0; i < got.size(); ++i) CHECK(bitwiseEqual(got[i], plain[i]));
    }
    CHECK(plain[0].data[0] == 0.0); // the NaN of 0/0 replaced
    CHECK(bitwiseEqual(plain[0], ref[0]));
  }
}

TEST_CASE("fusion: a reduction over the last axis computes its operand's loop (input fusion)") {
  // 3 x 1300: each output reduces a run of 1300 (two full blocks of 512 and a partial
  // one); over both axes one run of 3900. Inputs hold NaN, ±inf and ±0 (max picks the
  // same NaN and the same zero as from a buffer).
  for (std::vector<int64_t> axes : {std::vector<int64_t>{1}, std::vector<int64_t>{0, 1}}) {
    INFO("axes " << axes.size());
    Program p;
    Builder b(p);
    const Type t({3, 1300});
    auto x = p.addInput("x", t), y = p.addInput("y", t);
    p.addOutput(b.reduceMax(b.unary(OpKind::Abs, x), axes));
    auto pos = b.compare(x, y, "GT");
    p.addOutput(b.reduceSum(b.select(pos, b.mul(x, y), b.neg(y)), axes));
    auto plan = rt::prepare(p);
    const std::string text = rt::describePlan(*plan);
    CHECK(rt::planSize(*plan) == 2); // two reductions, no elementwise instruction
    CHECK(text.find("input 1 ops fused [abs]") != std::string::npos);
    CHECK(text.find("input 4 ops fused [compare,mul,neg,select]") != std::string::npos);
    std::mt19937_64 rng(9);
    std::vector<Tensor> in = {randomTensor(t, rng), randomTensor(t, rng)};
    in[0].data[7] = std::numeric_limits<double>::quiet_NaN();
    in[0].data[1400] = -std::numeric_limits<double>::infinity();
    in[1].data[2000] = std::numeric_limits<double>::infinity();
    for (int64_t i = 2600; i < 3900; ++i) in[0].data[i] = i % 2 ? 0.0 : -0.0;
    auto plain = rt::Engine(1).run(*rt::prepare(p, unfused()), in);
    auto ref = rt::evaluateReference(p, in);
    for (int w : {1, 2}) {
      auto got = rt::Engine(w).run(*plan, in);
      for (size_t i = 0; i < got.size(); ++i) CHECK(bitwiseEqual(got[i], plain[i]));
    }
    for (size_t i = 0; i < ref.size(); ++i) CHECK(bitwiseEqual(plain[i], ref[i]));
  }
  // Not fused: a reduction over a leading axis only (strided runs), and an operand that
  // another op also reads.
  Program q;
  Builder b(q);
  auto x = q.addInput("x", Type({4, 6}));
  auto a = b.unary(OpKind::Abs, x);
  q.addOutput(b.reduceSum(a, {0}));
  q.addOutput(b.reduceMax(a, {1}));
  const std::string text = rt::describePlan(*rt::prepare(q));
  CHECK(text.find("ops fused") == std::string::npos);
  CHECK(count(text, "elementwise abs") == 1);
}

TEST_CASE("fusion: a cheap op read by two loops is recomputed in each; a costly one keeps its buffer") {
  // mask = (|x| == max|x|) is read by a reduction (the count of maxima) and by the
  // elementwise chain after it, as in the VJP of reduce_max: recomputed in both. e =
  // exp(x), read by two loops too, keeps its instruction.
  Program p;
  Builder b(p);
  const Type t({4, 300});
  auto x = p.addInput("x", t), y = p.addInput("y", t);
  auto ax = b.unary(OpKind::Abs, x);
  auto m = b.reduceMax(ax, {0, 1});
  auto mask = b.compare(ax, b.broadcastScalar(m, {4, 300}), "EQ");
  auto maxima = b.reduceSum(mask, {0, 1});
  auto e = b.unary(OpKind::Exp, x);
  p.addOutput(b.mul(b.mul(mask, y), b.broadcastScalar(maxima, {4, 300})));
  p.addOutput(b.add(e, y));
  p.addOutput(b.reduceSum(b.mul(e, e), {1}));
  auto plan = rt::prepare(p);
  const std::string text = rt::describePlan(*plan);
  CHECK(text.find("elementwise compare") == std::string::npos);
  CHECK(text.find("fused compare") == std::string::npos);
  CHECK(text.find("input 2 ops fused [abs,compare]") != std::string::npos);
  CHECK(count(text, "elementwise exp") == 1);
  std::mt19937_64 rng(4);
  std::vector<Tensor> in = {randomTensor(t, rng), randomTensor(t, rng)};
  in[0].data[17] = 5;
  in[0].data[900] = -5; // two maxima of |x|
  auto plain = rt::Engine(1).run(*rt::prepare(p, unfused()), in);
  for (int w : {1, 2}) {
    auto got = rt::Engine(w).run(*plan, in);
    for (size_t i = 0; i < got.size(); ++i) CHECK(bitwiseEqual(got[i], plain[i]));
  }
  CHECK(plain[0].data[17] == 2 * in[1].data[17]);
}
