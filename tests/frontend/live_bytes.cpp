//===- tests/frontend/live_bytes.cpp - Planned peak bytes of a sequence of runs -===//
#include <doctest/doctest.h>

#include <utility>

#include "frontend/LiveBytes.h"

using namespace tessel;
using tessel::frontend::LiveBytesLedger;

namespace {
ir::Tensor vec(int64_t n) { return ir::Tensor::zeros(ir::Type({n})); }
/// A list of tensors moved in (an initializer list would copy them).
template <typename... T> std::vector<ir::Tensor> list(T &&...t) {
  std::vector<ir::Tensor> v;
  (v.push_back(std::move(t)), ...);
  return v;
}
} // namespace

TEST_CASE("live bytes: a tensor counts from the run that wrote it to the last run that reads it") {
  LiveBytesLedger l;
  CHECK(l.peakBytes() == 0);
  std::vector<ir::Tensor> in0 = list(vec(10));     // 80 bytes, made by the driver
  std::vector<ir::Tensor> out0 = list(vec(100));   // 800 bytes, written by run 0
  l.record(in0, out0, 1000);                       // 880 + 1000
  std::vector<ir::Tensor> out1 = list(vec(50));    // 400 bytes, written by run 1
  l.record(out0, out1, 1000);                      // 800 + 400 + 1000
  l.record(out1, {}, 64);                          // 400 + 64
  CHECK(l.runs() == 3);
  CHECK(l.peakBytes() == 2200);
}

TEST_CASE("live bytes: a tensor read again later stays live in between; a copy counts on its own") {
  LiveBytesLedger l;
  std::vector<ir::Tensor> a = list(vec(100)); // written by run 0, read again by run 2
  std::vector<ir::Tensor> b = list(vec(200)); // written by run 1, never read
  l.record({}, a, 0);
  l.record({}, b, 0);                         // a (800) + b (1600)
  std::vector<ir::Tensor> in2;                // a again, and a copy of it (800 more)
  in2.reserve(2);
  in2.push_back(std::move(a[0]));
  in2.push_back(in2[0]);
  l.record(in2, {}, 0);                       // a + the copy; b is dead
  CHECK(l.peakBytes() == 2400);
  l.clear();
  CHECK(l.peakBytes() == 0);
  l.record(in2, {}, 8);
  CHECK(l.peakBytes() == 1608);
}
