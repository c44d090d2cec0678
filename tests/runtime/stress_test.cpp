// Stress: many runs with random widths and programs, engines shared across plans,
// two engines running one plan concurrently, failures mixed in. No deadlock, results
// always bitwise equal to the width-1 result.
#include <atomic>
#include <chrono>
#include <limits>
#include <random>
#include <thread>

#include <doctest/doctest.h>

#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "runtime/Runtime.h"
#include "tests/runtime/rt_testutil.h"

using namespace tessel;
using ir::Tensor;
using ir::Type;
using namespace rttest;

namespace {

struct Case {
  RandomProgram rp;
  std::shared_ptr<const rt::Plan> plan;
  std::vector<Tensor> expect;
};

std::vector<Case> makeCases(std::mt19937_64 &rng, int n) {
  std::vector<Case> cases;
  rt::Engine e1(1);
  for (int i = 0; i < n; ++i) {
    Case c;
    c.rp = randomProgram(rng, 12 + static_cast<int>(rng() % 30));
    c.plan = rt::prepare(c.rp.program);
    c.expect = e1.run(*c.plan, c.rp.inputs);
    cases.push_back(std::move(c));
  }
  // A larger program with chunked ops and two independent SVDs.
  Case big;
  ir::Program &p = big.rp.program;
  ir::Builder b(p);
  auto x = p.addInput("x", Type({96, 96}));
  auto y = p.addInput("y", Type({96, 96}));
  auto sx = b.svd(b.unary(ir::OpKind::Sin, x));
  auto sy = b.svd(b.add(y, b.dotGeneral(x, y, {}, {}, {1}, {0})));
  auto big1 = b.dotGeneral(b.broadcastInDim(sx[0], {4, 96, 96}, {1, 2}), b.broadcastInDim(sy[2], {4, 96, 96}, {1, 2}), {0}, {0}, {2}, {1});
  p.addOutput(b.reduceSum(big1, {0}));
  p.addOutput(sx[1]);
  p.addOutput(sy[1]);
  big.rp.inputs = {randomTensor(Type({96, 96}), rng), randomTensor(Type({96, 96}), rng)};
  big.plan = rt::prepare(p);
  big.expect = e1.run(*big.plan, big.rp.inputs);
  cases.push_back(std::move(big));
  return cases;
}

} // namespace

TEST_CASE("stress: 1000 runs, random widths and programs, failures mixed in, no deadlock") {
  auto t0 = std::chrono::steady_clock::now();
  std::mt19937_64 rng(777);
  std::vector<Case> cases = makeCases(rng, 24);
  std::vector<std::unique_ptr<rt::Engine>> engines;
  for (int w : {1, 2, 3, 4}) engines.push_back(std::make_unique<rt::Engine>(w));
  // A failing plan: svd of an input that the test poisons with NaN.
  ir::Program fp;
  {
    ir::Builder b(fp);
    auto m = fp.addInput("m", Type({6, 6}));
    b.setLoc("stress svd");
    fp.addOutput(b.svd(b.mul(m, m))[1]);
  }
  auto failPlan = rt::prepare(fp);
  Tensor poisoned = randomTensor(Type({6, 6}), rng);
  poisoned.data[7] = std::numeric_limits<double>::quiet_NaN();

  int mismatches = 0, failures = 0;
  for (int run = 0; run < 1000; ++run) {
    rt::Engine &e = *engines[rng() % engines.size()];
    if (run % 50 == 7) {
      try {
        e.run(*failPlan, {poisoned});
      } catch (const Error &err) {
        ++failures;
        CHECK(std::string(err.what()).find("stress svd") != std::string::npos);
      }
      continue;
    }
    const Case &c = cases[rng() % cases.size()];
    auto got = e.run(*c.plan, c.rp.inputs);
    for (size_t i = 0; i < got.size(); ++i) mismatches += !bitwiseEqual(got[i], c.expect[i]);
  }
  CHECK(mismatches == 0);
  CHECK(failures == 20);

  // Two engines running the same plans at the same time from two threads.
  std::atomic<int> bad{0};
  auto worker = [&](int width, uint64_t seed) {
    rt::Engine e(width);
    std::mt19937_64 r(seed);
    for (int k = 0; k < 150; ++k) {
      const Case &c = cases[r() % cases.size()];
      auto got = e.run(*c.plan, c.rp.inputs);
      for (size_t i = 0; i < got.size(); ++i) bad += !bitwiseEqual(got[i], c.expect[i]);
    }
  };
  std::thread t1(worker, 2, 1), t2(worker, 3, 2);
  t1.join();
  t2.join();
  CHECK(bad.load() == 0);
  // Creating and destroying engines repeatedly does not hang.
  for (int k = 0; k < 50; ++k) {
    rt::Engine e(1 + k % 4);
    auto got = e.run(*cases[k % cases.size()].plan, cases[k % cases.size()].rp.inputs);
    CHECK(bitwiseEqual(got[0], cases[k % cases.size()].expect[0]));
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("stress test took " << secs << " s");
}

TEST_CASE("large program (list-order slots with write-after-read edges) matches the reference") {
  // More than 8192 instructions: prepare places buffers in list order and adds
  // write-after-read edges instead of using ancestor sets.
  std::mt19937_64 rng(31);
  ir::Program p;
  ir::Builder b(p);
  auto x = p.addInput("x", Type({8}));
  std::vector<ir::ValueId> live = {x, b.unary(ir::OpKind::Sin, x), b.unary(ir::OpKind::Cos, x)};
  for (int k = 0; k < 17000; ++k) {
    ir::ValueId a = live[rng() % live.size()], c = live[rng() % live.size()];
    ir::ValueId r;
    switch (rng() % 4) {
    case 0: r = b.unary(ir::OpKind::Sin, b.add(a, c)); break;
    case 1: r = b.mul(a, c); break;
    case 2: r = b.unary(ir::OpKind::Cos, a); break;
    default: r = b.sub(a, c); break;
    }
    // Keep a window of recent values so that values die and slots get reused.
    if (live.size() < 6) live.push_back(r);
    else live[rng() % live.size()] = r;
  }
  for (auto v : live) p.addOutput(v);
  auto plan = rt::prepare(p);
  REQUIRE(rt::planSize(*plan) > 8192);
  // Memory is reused only where the write-after-read edges do not lengthen the
  // critical path, so the arena keeps independent values apart (76 KiB here, against
  // a list-order peak of 448 B), but far below one buffer per value.
  rt::PrepareOptions noReuse;
  noReuse.reuseBuffers = false;
  CHECK(rt::arenaBytes(*plan) * 10 < rt::arenaBytes(*rt::prepare(p, noReuse)));
  CHECK(checkSlotsDoNotRace(*plan, Reachability(*plan)) > 1000); // slots reusing memory
  std::vector<Tensor> in = {randomTensor(Type({8}), rng)};
  auto ref = rt::evaluateReference(p, in);
  std::vector<Tensor> first;
  for (int w : {1, 2, 4}) {
    rt::Engine e(w);
    auto got = e.run(*plan, in);
    for (size_t i = 0; i < ref.size(); ++i) {
      CHECK(maxRelDiff(got[i], ref[i]) <= 1e-13);
      if (!first.empty()) CHECK(bitwiseEqual(got[i], first[i]));
    }
    if (first.empty()) first = got;
  }
}

TEST_CASE("both buffer allocators report the same peak for a chain computed in place") {
  // x -> sin -> sin -> ... -> reduce_sum: every sin after the first overwrites its
  // operand, so one 1000-element buffer is live at a time, plus the 1-element output.
  // 100 instructions use ancestor sets, 17000 list-order slots; the peak is the same.
  for (int n : {100, 17000}) {
    ir::Program p;
    ir::Builder b(p);
    ir::ValueId v = p.addInput("x", Type({1000}));
    for (int k = 0; k < n; ++k) v = b.unary(ir::OpKind::Sin, v);
    p.addOutput(b.reduceSum(v, {0}));
    rt::PrepareOptions unfused; // one instruction per sin
    unfused.fuseElementwise = false;
    auto plan = rt::prepare(p, unfused);
    INFO("chain of " << n);
    CHECK(rt::planSize(*plan) == static_cast<size_t>(n) + 1);
    CHECK(rt::peakLiveBytes(*plan) == 1000 * 8 + 8);
    CHECK(rt::arenaBytes(*plan) == 1000 * 8);
  }
}

TEST_CASE("list-order placement reuses memory of two independent chains without racing") {
  // A GEMM chain and a sin+transpose chain of the same 32x32 size, interleaved: free
  // ranges mix memory freed by both, and each chain may reuse the other's memory only
  // through edges that do not lengthen the critical path. The arena stays within a
  // few buffers of the peak (it grew with the program when only the low end of a free
  // range was tried).
  ir::Program p;
  ir::Builder b(p);
  ir::ValueId x = p.addInput("x", Type({32, 32})), w = p.addInput("w", Type({32, 32}));
  ir::ValueId y = p.addInput("y", Type({32, 32}));
  for (int k = 0; k < 3000; ++k) {
    x = b.dotGeneral(x, w, {}, {}, {1}, {0});
    y = b.transpose(b.unary(ir::OpKind::Sin, y), {1, 0});
  }
  p.addOutput(x);
  p.addOutput(y);
  auto plan = rt::prepare(p);
  REQUIRE(rt::planSize(*plan) > 8192);
  REQUIRE(!plan->usedAncestors);
  CHECK(rt::peakLiveBytes(*plan) == 3 * 32 * 32 * 8);
  CHECK(rt::arenaBytes(*plan) <= 4 * 32 * 32 * 8);
  CHECK(checkSlotsDoNotRace(*plan, Reachability(*plan)) > 1000);
  std::mt19937_64 rng(7);
  std::vector<Tensor> in;
  for (int k = 0; k < 3; ++k) in.push_back(randomTensor(Type({32, 32}), rng, -0.2, 0.2));
  auto ref = rt::evaluateReference(p, in);
  for (int width : {1, 2}) {
    rt::Engine e(width);
    auto got = e.run(*plan, in);
    for (size_t i = 0; i < ref.size(); ++i) CHECK(maxRelDiff(got[i], ref[i]) <= 1e-12);
  }
}
