//===- runtime/PrepareStages.h - The stages of prepare (internal) --------------===//
//
// prepare() (Prepare.cpp) runs these stages in order, as XLA's compiler does
// (fusion, lowering, scheduling, buffer assignment), each in a file of its own; the
// names in brackets are rt::PrepareStage's, after which `--print-plan-after` prints:
//
//   0. Fusion [fuse] (Fusion.cpp): which values are computed inside the loops of the
//      ops that read them instead of in a buffer of their own (chains of elementwise
//      ops whose intermediates nothing else reads, broadcasts of one value into them,
//      reductions that take their operand as input); none when
//      PrepareOptions::fuseElementwise is off or a value check is on. Printed by
//      describeFusion.
//   1. Lowering [lower] (Lowering.cpp): one lowering rule per op of ir/ops.def turns the
//      program into kernel instructions with every data-independent quantity
//      precomputed (copy strides, GEMM form, gesdd workspace); reshape,
//      stop_gradient and no-op shape ops become aliases (no instruction); constants
//      and iota tables become plan-owned data; each loop of the fusion plan becomes one
//      instruction. Outputs are bound (a result written
//      by an instruction goes straight into the returned tensor), each buffer group
//      learns its readers, and an svd whose U and Vt nobody reads computes singular
//      values only.
//   2. Dependencies (Schedule.cpp): producer -> reader edges, and ancestor sets when
//      the program is small enough for them (kMaxAncestorInsts).
//   3. Buffer assignment [assign] (BufferAssignment.cpp): in-place decisions, arena slots,
//      peak live bytes. Two buffers share memory only if one is entirely before the
//      other in the dependency order, or if write-after-read edges can order them
//      without lengthening the critical path (CriticalPath below): greedy placement
//      by size with ancestor sets, or for large programs, list-order placement.
//   4. Schedule [schedule] (Schedule.cpp): the final edges, successor lists and ready set that
//      the engine runs.
//
// Plan printing (describePlan, describeFusion, describePlanStage) is in PlanPrinter.cpp.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/Fusion.h"
#include "runtime/Plan.h"

namespace tessel::rt::prep {

/// Stage 1: fills P.values, P.groups (with producers and readers), P.insts,
/// P.constants and the output bindings from P.program, one instruction per loop of
/// `fusion` (stage 0, decided on P.program). Throws tessel::Error for ops the runtime
/// does not execute (einsum before the order pass).
void lower(Plan &P, const Fusion &fusion);

/// The fusion plan of `prog` for people: a summary line, then one line per fused loop
/// (an instruction of more than one op) in program order: the op that writes the
/// loop's buffer, the ops computed inside it ("recomputed" for a cheap op each of its
/// readers' loops recomputes) and the buffers the loop reads.
std::string describeFusion(const ir::Program &prog, const Fusion &fusion);
/// describePlan's text of a plan that prepare has run up to and including `stage`
/// (Lower, Assign or Schedule): before Assign the arena values' storage is
/// "unassigned" and the arena and peak are left out, before Schedule the deps are "-".
std::string describePlanStage(const Plan &P, PrepareStage stage);

/// Programs with more instructions than this use list-order buffer reuse instead of
/// ancestor sets (2 n² / 8 bytes) and greedy placement, whose work grows with how many
/// buffers share each part of the arena over time. Measured on the whole-program TRG
/// derivatives (chi = 8, width 1): the 64-step gradient (14,273 instructions) prepares
/// in 42 ms instead of 248 ms with an arena 0.07% larger, grad(grad) at 20 steps
/// (13,543) in 37 ms instead of 159 ms, 1.2% larger, with no slower runs at widths 1
/// and 2; small programs keep the greedy arena, often 15-60% smaller.
inline constexpr size_t kMaxAncestorInsts = 8192;

/// The dependency graph of a plan's instructions. Every edge points forward in list
/// order. Buffer assignment may add edges (addEdge). Ancestor sets start as those of
/// the producer -> reader graph; an added edge from -> to adds from's ancestors to
/// to's row and to's descendants to from's row, but is not propagated further (to
/// to's descendants, from's ancestors). So the sets may miss relations the added
/// edges imply, never claim one they do not: enough for "is it already ordered?".
class DepGraph {
public:
  /// Producer -> reader edges of P; ancestor sets when `withAncestors`.
  DepGraph(const Plan &P, bool withAncestors);

  size_t size() const { return preds_.size(); }
  bool hasAncestors() const { return withAncestors_; }
  /// True if instruction `a` is an ancestor of `of` (requires hasAncestors()). Reads
  /// the ancestor row of `of`: fast in loops where `of` is fixed.
  bool isAncestor(int32_t a, int32_t of) const {
    return (anc_[static_cast<size_t>(of) * words_ + a / 64] >> (a % 64)) & 1u;
  }
  /// True if `to` is a descendant of instruction `a`, read from the descendant row of
  /// `a`: fast in loops where `a` is fixed. Before any edge is added, the same answer
  /// as isAncestor(a, to); after, either may know an order the other does not (see
  /// above).
  bool reaches(int32_t a, int32_t to) const {
    return (desc_[static_cast<size_t>(a) * words_ + to / 64] >> (to % 64)) & 1u;
  }
  /// The ancestor (descendant) row of instruction i: bit j of word j / 64 is set if j
  /// is an ancestor (descendant) of i; rowWords() words (requires hasAncestors()).
  const uint64_t *ancestorRow(int32_t i) const { return &anc_[static_cast<size_t>(i) * words_]; }
  const uint64_t *descendantRow(int32_t i) const { return &desc_[static_cast<size_t>(i) * words_]; }
  size_t rowWords() const { return words_; }
  /// True if every instruction of `set` except `self` is an ancestor of `i`.
  bool allAncestors(const std::vector<int32_t> &set, int32_t i, int32_t self = -2) const;
  const std::vector<int32_t> &preds(int32_t i) const { return preds_[i]; }
  /// Adds the edge from -> to unless it exists (or from == to), and updates the rows
  /// of `from` and `to` (see above).
  bool addEdge(int32_t from, int32_t to);

private:
  std::vector<std::vector<int32_t>> preds_; ///< per instruction, deduplicated
  std::vector<uint64_t> anc_;               ///< ancestor bitsets, one row per instruction
  std::vector<uint64_t> desc_;              ///< descendant bitsets (the transpose)
  size_t words_ = 0;
  bool withAncestors_ = false;
};

/// Earliest and latest start times of every instruction on an infinitely wide engine
/// (cost model: a fixed dispatch cost plus flops or elements), kept up to date as
/// edges are added. An edge u -> d is harmless when u finishes before d's latest
/// start: it delays only ops that have slack (e.g. backward-pass values that depend
/// on forward residuals alone), never the critical path (the two SVDs of a TRG step
/// against each other).
class CriticalPath {
public:
  CriticalPath(const Plan &P, DepGraph &deps);

  bool harmless(int32_t u, int32_t d) const { return u < d && finish(u) <= deadline(d); }
  /// Earliest finish of u.
  double finish(int32_t u) const { return est_[u] + cost_[u]; }
  /// Latest start of d, with the rounding slack harmless() allows.
  double deadline(int32_t d) const { return lst_[d] + 1e-9 * makespan_; }
  /// Adds the edges u -> d for every u of `from` (callers check harmless() first)
  /// and updates the times incrementally.
  void addEdgesInto(llvm::ArrayRef<int32_t> from, int32_t d);
  /// For a caller that adds edges only into the instruction it is at, going through
  /// the instructions in list order (list-order buffer placement): adds the edges and
  /// updates no time; settle(d), once no more edges go into d, sets d's earliest start
  /// from its predecessors. harmless(u, d) stays exact for every settled u < d and the
  /// d being processed, as d's latest start depends only on its descendants, which get
  /// no edges before d. O(1) per edge instead of a walk over the affected cone.
  void addEdgesIntoInListOrder(llvm::ArrayRef<int32_t> from, int32_t d);
  void settle(int32_t d);

private:
  void raiseEarliestStart(int32_t d, double e);
  void lowerLatestStart(int32_t u, double l);

  DepGraph &deps_;
  std::vector<double> cost_, est_, lst_;
  std::vector<std::vector<int32_t>> succ_;
  double makespan_ = 0;
};

/// Stage 3: decides in-place execution, assigns every arena group a slot, lays out
/// the arena and computes P.peakLiveBytes. May add write-after-read edges to `deps`.
void assignBuffers(Plan &P, DepGraph &deps);

/// Peak, over the list order, of the bytes held by arena and output buffers:
/// `occupies[g]` says whether group g holds memory of its own; a group is live from
/// its producer to its last reader in list order (only at its producer if nothing
/// reads it; to the end if pinned or an output); an instruction whose result is
/// computed in place over operand group `inPlaceOperand[i]` (else -1) replaces it.
/// Inputs and constants are not counted.
int64_t listOrderPeakBytes(const Plan &P, const std::vector<bool> &occupies,
                           const std::vector<int32_t> &inPlaceOperand);

/// Stage 4: sorts the edges, checks they point forward, fills preds, successor
/// ranges, initial dependency counts, the ready set, bytes written and maxChunks.
void finishSchedule(Plan &P, const DepGraph &deps);

} // namespace tessel::rt::prep
