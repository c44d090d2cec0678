//===- frontend/LiveBytes.h - Planned peak bytes of a sequence of engine runs ---===//
//
// A driver that chains programs (the staged TRG sweeps) holds tensors between runs:
// the next step's input, the residuals its backward will read, the cotangents. Each
// plan accounts for the bytes inside one run (rt::arenaBytes, outputs); this ledger
// adds what lies between runs, so that the planned peak of a whole sweep can be
// compared with the peak resident set size the operating system measures.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "ir/Type.h"

namespace tessel::frontend {

/// Records the runs of one evaluation (a value, value+grad or second-order sweep) and
/// gives its planned peak: the largest, over the runs, of
///   (bytes of every tensor passed between runs that is live at that run)
///   + (the run's outputs) + (the engines' arenas, rt::Engine::residentBytes).
/// A tensor is live from the run that wrote it (or, for one the driver made or copied,
/// the run that first reads it) to the last run that reads it; tensors are told apart
/// by their data address and size, so a copy counts on its own. A tensor the driver
/// keeps after its last reader is not counted: that is memory the plan does not need,
/// and the measured peak then exceeds the planned one.
class LiveBytesLedger {
public:
  /// Forgets every run (start of an evaluation).
  void clear();
  /// One run: the tensors it read and wrote, and the engines' resident arena bytes
  /// after it.
  void record(const std::vector<ir::Tensor> &inputs, const std::vector<ir::Tensor> &outputs,
              int64_t engineBytes);
  /// Number of runs recorded since clear().
  size_t runs() const { return engineBytes_.size(); }
  /// The planned peak in bytes (0 before any run).
  int64_t peakBytes() const;

private:
  struct Buffer {
    int64_t bytes = 0;
    size_t first = 0, last = 0; ///< runs
  };
  std::vector<Buffer> buffers_;
  std::unordered_map<const double *, size_t> byAddress_;
  std::vector<int64_t> engineBytes_;
};

} // namespace tessel::frontend
