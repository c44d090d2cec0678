//===- frontend/LiveBytes.cpp - Planned peak bytes of a sequence of engine runs -===//
#include "frontend/LiveBytes.h"

#include <algorithm>

namespace tessel::frontend {

void LiveBytesLedger::clear() {
  buffers_.clear();
  byAddress_.clear();
  engineBytes_.clear();
}

void LiveBytesLedger::record(const std::vector<ir::Tensor> &inputs,
                             const std::vector<ir::Tensor> &outputs, int64_t engineBytes) {
  const size_t run = engineBytes_.size();
  auto bytesOf = [](const ir::Tensor &t) { return static_cast<int64_t>(t.data.size() * sizeof(double)); };
  for (const ir::Tensor &t : inputs) {
    const int64_t b = bytesOf(t);
    if (b == 0) continue;
    auto it = byAddress_.find(t.data.data());
    if (it != byAddress_.end() && buffers_[it->second].bytes == b) {
      buffers_[it->second].last = run;
      continue;
    }
    byAddress_[t.data.data()] = buffers_.size();
    buffers_.push_back({b, run, run});
  }
  for (const ir::Tensor &t : outputs) {
    const int64_t b = bytesOf(t);
    if (b == 0) continue;
    byAddress_[t.data.data()] = buffers_.size();
    buffers_.push_back({b, run, run});
  }
  engineBytes_.push_back(engineBytes);
}

int64_t LiveBytesLedger::peakBytes() const {
  const size_t n = engineBytes_.size();
  std::vector<int64_t> delta(n + 1, 0);
  for (const Buffer &b : buffers_) {
    delta[b.first] += b.bytes;
    delta[b.last + 1] -= b.bytes;
  }
  int64_t live = 0, peak = 0;
  for (size_t k = 0; k < n; ++k) {
    live += delta[k];
    peak = std::max(peak, live + engineBytes_[k]);
  }
  return peak;
}

} // namespace tessel::frontend
