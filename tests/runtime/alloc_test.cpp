// A steady-state run allocates only the returned output tensors (counted through a
// replacement of the global operator new; counting is off outside this test).
#include <atomic>
#include <cstdlib>
#include <new>
#include <random>

#include <doctest/doctest.h>

#include "ir/Builder.h"
#include "runtime/Runtime.h"
#include "tests/runtime/rt_testutil.h"

namespace {
std::atomic<bool> gCounting{false};
std::atomic<long> gAllocs{0};
} // namespace

void *operator new(std::size_t n) {
  if (gCounting.load(std::memory_order_relaxed)) gAllocs.fetch_add(1, std::memory_order_relaxed);
  if (void *p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void *operator new[](std::size_t n) { return operator new(n); }
// The nothrow forms too (std::stable_sort's temporary buffer uses them and frees with the
// sized delete below): every non-aligned new/delete pair then goes through malloc/free,
// which AddressSanitizer's alloc-dealloc-mismatch check requires.
void *operator new(std::size_t n, const std::nothrow_t &) noexcept {
  if (gCounting.load(std::memory_order_relaxed)) gAllocs.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void *operator new[](std::size_t n, const std::nothrow_t &t) noexcept { return operator new(n, t); }
void operator delete(void *p, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }

using namespace tessel;
using ir::Type;
using namespace rttest;

TEST_CASE("engine: a steady-state run allocates only its output tensors") {
  std::mt19937_64 rng(17);
  ir::Program p;
  ir::Builder b(p);
  auto x = p.addInput("x", Type({64, 48}));
  auto y = p.addInput("y", Type({48, 40}));
  auto c = b.dotGeneral(x, y, {}, {}, {1}, {0});
  auto usv = b.svd(b.unary(ir::OpKind::Sin, c));
  auto t = b.transpose(b.mul(usv[0], usv[0]), {1, 0});
  auto big = b.broadcastInDim(t, {3, 40, 64}, {1, 2});
  p.addOutput(b.reduceSum(big, {0, 2}));
  p.addOutput(usv[1]);
  p.addOutput(b.reduceMax(b.pad(c, {1, 1}, {0, 2}), {0}));
  std::vector<ir::Tensor> in = {randomTensor(Type({64, 48}), rng), randomTensor(Type({48, 40}), rng)};
  auto plan = rt::prepare(p);
  for (int w : {1, 2, 4}) {
    rt::Engine e(w);
    auto first = e.run(*plan, in); // allocates the arena and counters
    e.run(*plan, in);
    gAllocs = 0;
    gCounting = true;
    auto out = e.run(*plan, in);
    gCounting = false;
    // The output vector itself and one data buffer per output (rank <= 4 shapes are
    // stored inline).
    CHECK(gAllocs.load() == static_cast<long>(1 + out.size()));
    for (size_t i = 0; i < out.size(); ++i) CHECK(bitwiseEqual(out[i], first[i]));
  }
}
