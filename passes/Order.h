//===- passes/Order.h - Contraction ordering: einsum -> binary dot_generals ------===//
//
// The `order` pass lowers every n-ary `einsum` into a tree of binary `dot_general`s
// (docs/architecture.md pattern 8, after opt_einsum), plus
//   * a diagonal extraction for an index repeated inside one operand ("ii->i",
//     traces): transpose the two copies last, reshape [.., D, D] -> [.., D*D], pad D
//     zeros, reshape [.., D, D+1], slice column 0, reshape [.., D]. Exact (no
//     multiplication by a 0/1 mask, so an inf elsewhere in the operand cannot turn
//     into a NaN) and O(size);
//   * a reduce_sum for every index that appears in one operand only and not in the
//     output (done before that operand enters a contraction);
//   * at most one final transpose, only when the last dot_general cannot already
//     produce the output's order (dot_general yields batch dims, then the lhs free
//     dims, then the rhs free dims; the last step picks lhs/rhs and the batch order
//     to match the output when it can).
// Indices shared by the two operands of a step and still needed later (by another
// operand or the output) become batch dims; the others are contracted. A step whose
// operands carry the same indices and sums none (a Hadamard product) becomes an
// elementwise mul instead (rhs transposed to lhs's order if needed).
// Ops created for an einsum carry the einsum's `loc` and remat flag
// (ir::Builder::setOrigin; the flag keeps a recomputed einsum separate from the
// forward, see passes/Cse.h); the final value takes the einsum's result name.
//
// Cost model (exactly opt_einsum's, `opt_einsum.helpers.flop_count`): a step that
// contracts two tensors costs  prod(size of every distinct index of both operands)
// times 2 when at least one index is summed away in that step ("inner"), times 1
// otherwise (outer or Hadamard/batch product). An index that occurs in one operand
// only (and not in the output) is counted in the step that first uses that operand,
// as opt_einsum does, although the lowering sums it beforehand. A single-operand
// einsum is one step costing prod(sizes) * (2 if an index is summed else 1).
// The naive cost is prod(all index sizes) * max(1, n-1) (+1 when anything is
// summed); the largest intermediate is the largest result of any step (elements,
// the final result included), as in opt_einsum's PathInfo.
//
// Strategies (names as in --passes=order{strategy=...} and `tessel cost --strategy`):
//   chain     ((S1·S2)·S3)·S4 ... left to right;
//   pairwise  balanced rounds: (S1·S2)·(S3·S4), an odd last operand joins the next
//             round;
//   greedy    opt_einsum's greedy: repeatedly contract, among pairs that share an
//             index, the one with the smallest  size(result) - size(lhs) - size(rhs)
//             (ties: fewer flops, then the earliest pair); outer products only when
//             no pair shares an index, smallest result first ("outer products last");
//   optimal   dynamic programming over operand subsets (every binary contraction tree
//             is considered, outer products included), minimising total flops, then
//             the largest intermediate; intermediates of rank > 8 (ir::kMaxRank) are
//             excluded. Time and memory grow as 3^n and 2^n; beyond
//             OrderOptions::optimalLimit operands (default 14, about 0.1 s) it falls
//             back to greedy and ContractionPath::note says so;
//   auto      optimal for n <= OrderOptions::autoOptimalMax (default 8), else greedy;
//             if that greedy path needs an intermediate of rank > 8, the rank-limited
//             optimal DP instead (when n <= optimalLimit).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/Builder.h"
#include "ir/Program.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace tessel::passes {

enum class OrderStrategy : uint8_t { Auto, Chain, Pairwise, Greedy, Optimal };

/// "auto", "chain", "pairwise", "greedy", "optimal".
const char *orderStrategyName(OrderStrategy s);
/// Parses a strategy name; throws tessel::Error listing the allowed names.
OrderStrategy parseOrderStrategy(llvm::StringRef name);
/// The concrete strategies in display order: chain, pairwise, greedy, optimal.
llvm::ArrayRef<OrderStrategy> concreteOrderStrategies();

/// `optimal`'s subset DP never runs on more operands than this (2^n table entries,
/// ~3^n steps), whatever OrderOptions::optimalLimit says.
inline constexpr int kOptimalHardLimit = 20;

struct OrderOptions {
  OrderStrategy strategy = OrderStrategy::Auto;
  /// `optimal` runs its subset DP up to this many operands (capped at
  /// kOptimalHardLimit), else falls back to greedy.
  int optimalLimit = 14;
  /// `auto` uses optimal up to this many operands, greedy beyond.
  int autoOptimalMax = 8;
};

/// One pairwise contraction (or, for a 1-operand einsum, the single-operand step).
struct ContractionStep {
  /// Term ids: 0..n-1 are the einsum's operands, n+k is the result of step k.
  /// rhs == -1 for the single step of a 1-operand einsum. lhs/rhs are in the order
  /// the lowering passes them to dot_general.
  int lhs = -1, rhs = -1;
  /// Subscripts as opt_einsum prints them: operands as written in the spec,
  /// intermediates in the order of the dot_general result.
  std::string lhsLabels, rhsLabels;
  std::string resultLabels; ///< dot_general order: batch, lhs free, rhs free
  std::string batch;        ///< shared indices kept (batch dims), in result order
  std::string contracted;   ///< indices summed in this step (incl. single-operand ones)
  double flops = 0;         ///< opt_einsum flop_count of this step
  int64_t resultSize = 0;   ///< elements of the result
  int scaling = 0;          ///< number of distinct indices involved
};

/// A contraction path with opt_einsum's figures.
struct ContractionPath {
  std::string spec;                ///< the einsum subscripts
  std::vector<ir::Shape> shapes;   ///< operand shapes
  OrderStrategy requested = OrderStrategy::Auto;
  OrderStrategy used = OrderStrategy::Auto; ///< after auto / fallback resolution
  std::string note;                ///< why `used` differs from `requested`, if it does
  std::vector<ContractionStep> steps;
  bool finalTranspose = false;     ///< the lowering ends with a transpose
  double naiveFlops = 0;
  int naiveScaling = 0;            ///< number of distinct indices of the einsum
  double totalFlops = 0;           ///< sum of the steps' flops ("Optimized FLOP count")
  int optimizedScaling = 0;        ///< max scaling over the steps
  int64_t largestIntermediate = 0; ///< elements
  int64_t outputSize = 0;          ///< elements of the einsum result
};

/// Plans the contraction of one einsum. Throws tessel::Error (naming the spec) for
/// a spec/shape mismatch. Deterministic.
ContractionPath planContraction(llvm::StringRef spec, llvm::ArrayRef<ir::Shape> shapes,
                                OrderStrategy strategy, const OrderOptions &opts = {});

/// opt_einsum's PathInfo layout: "Complete contraction", "Naive scaling", "Optimized
/// scaling", "Naive FLOP count", "Optimized FLOP count", "Theoretical speedup",
/// "Largest intermediate", then one line per step (scaling, flops, current
/// contraction, remaining terms).
std::string formatContractionPath(const ContractionPath &path);

/// The cost of one einsum op of a program under the chosen strategy and under every
/// concrete strategy.
struct EinsumCost {
  size_t opIndex = 0;            ///< index in Program::ops
  ir::ValueId result = ir::kNoValue;
  ContractionPath chosen;        ///< for OrderOptions::strategy
  std::vector<ContractionPath> all; ///< one per concreteOrderStrategies(), same order
};
/// Costs of every einsum of `p`, in op order.
std::vector<EinsumCost> einsumCosts(const ir::Program &p, const OrderOptions &opts);

/// Lowers one einsum (`spec`, operands already in the program) at the end of the
/// builder's program following `path` (from planContraction on the operands' shapes).
/// Returns the value holding the einsum's result (may be an operand itself for an
/// identity einsum such as "ab->ab").
ir::ValueId lowerEinsum(ir::Builder &b, llvm::StringRef spec,
                        llvm::ArrayRef<ir::ValueId> operands, const ContractionPath &path);

/// The pass: replaces every einsum of `p` by its lowering under opts.strategy.
/// Returns true if any einsum was lowered. Throws tessel::Error naming the einsum
/// (result and loc) if a path needs an intermediate of rank > 8.
bool runOrder(ir::Program &p, const OrderOptions &opts);

/// The runtime executes pairwise contractions only: when `p` holds einsum ops and
/// `strategy` is not "none", lowers them with runOrder under that strategy (auto, chain,
/// pairwise, greedy, optimal; tessel::Error for another name) and returns a note such as
/// "2 einsum ops lowered by the order pass (strategy auto)"; returns "" when there was
/// nothing to lower. With "none", rt::prepare will reject an einsum with an error
/// naming it. Used by `tessel prepare`, `run`, `bench` and the Python tessel.prepare.
std::string lowerEinsumsForRuntime(ir::Program &p, const std::string &strategy);

} // namespace tessel::passes
