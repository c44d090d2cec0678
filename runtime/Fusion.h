//===- runtime/Fusion.h - Loop fusion, decided before lowering (prepare) ---------===//
//
// Which values prepare computes inside the loops of the ops that read them instead of
// in a buffer of their own (runtime/Fusion.cpp; the rules of runtime/Lowering.cpp then
// build the fused loops). Internal to prepare.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

#include "ir/Program.h"

namespace tessel::rt::prep {

/// Whether op kind `k` can be computed inside a fused loop (elementwise ops).
bool fusible(ir::OpKind k);

/// A reduction that can compute its operand in its own loop (input fusion): it reduces
/// the last axis (extent > 1), so the kernel walks contiguous runs of the operand.
bool reduceTakesInputFusion(const ir::Program &prog, const ir::Op &op);

/// Loop fusion, decided before the rules run: which values are computed inside the
/// loops of the ops that read them (elementwise ops, or a reduction taking its operand
/// as input) instead of in a buffer of their own.
///  * the result of an elementwise op, not an output, whose every reader is in one loop:
///    read by one elementwise op only (once, or as both operands of x + x), or by
///    several ops that all end up in the same loop (a diamond such as
///    select(x ≠ x, 0, x) inside one chain), where it is computed once. A value read by
///    ops of two loops keeps its buffer (recomputing it would repeat its work: sin and
///    cos cost more than a pass over memory);
///  * a broadcast_in_dim of one value (numel 1) that only elementwise ops read, each
///    of which then reads the value as a scalar operand;
///  * the operand of a reduce_sum or reduce_max over the last axis, computed by an
///    elementwise op that nothing else reads (input fusion: the reduction evaluates the
///    loop block by block and reduces the block);
///  * a single cheap op (arithmetic without division, compare, select) whose readers
///    are in two or more loops (elementwise ops, or reductions taking it as input): each
///    recomputes it (up to 4 ops, through cheap operands recomputed as well), a few
///    instructions per element against a pass over memory;
/// as long as no loop grows beyond kMaxFusedSteps ops, and no buffer lives longer for
/// it: a fused loop reads its producers' operands where the reader runs, so a producer
/// joins only if each arena value its computation reads is read at the reader or later
/// anyway (inputs, constants and single values are free), except one no larger than
/// the producer's result: the buffer the fusion removes covered its longer life.
/// Fusion then raises the peak of the list-order schedule by single values at most.
struct Fusion {
  std::vector<int32_t> def;  ///< per value: index of the op defining it (-1: input)
  std::vector<bool> inline_; ///< per value: computed inside its readers' loops

  bool inlined(ir::ValueId v) const { return inline_[v]; }

  /// Decides the fusion of `prog` (none when `enabled` is false).
  Fusion(const ir::Program &prog, bool enabled);

  /// One fused loop: an op that keeps its result's buffer and the ops computed inside
  /// its loop (through inlined operands, recomputed ones included).
  struct Loop {
    size_t root = 0;                ///< op index of the loop's op
    std::vector<int32_t> ops;       ///< the loop's ops, in program order (root included)
    std::vector<ir::ValueId> reads; ///< buffers the loop reads, ascending
  };
  /// The loops of more than one op, in program order of their roots (for the plan
  /// printer; prepare's rules find the same ops through inlined()).
  std::vector<Loop> loops(const ir::Program &prog) const;
};

} // namespace tessel::rt::prep
