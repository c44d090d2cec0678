//===- runtime/Plan.h - The prepared form of a program (internal) --------------===//
//
// A Plan is what prepare() produces and what the engine executes:
//
//  * PlanValue: every SSA value of the program, plus internal temporaries (operand
//    transposes of dot_general, SVD input copies and LAPACK workspaces). Each value
//    lives in a storage group; aliases (reshape, stop_gradient) share their
//    operand's group, so they cost nothing.
//  * Group: one buffer. Kind Input (the caller's tensor), Constant (plan-owned data:
//    constant attributes and iota tables), Output (written straight into the
//    returned tensor) or Arena (a slot of the engine's arena, reused once every
//    reader of its previous occupant has run).
//  * Instruction: one kernel call, split into a fixed number of chunks. The chunking
//    depends only on shapes, never on the engine width, so results are bitwise the
//    same for every width.
//
// Not a public header; tools and tests use runtime/Runtime.h.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "ir/Program.h"
#include "runtime/Runtime.h"
#include "runtime/RuntimeInternal.h"
#include "runtime/TruncatedSvd.h"

namespace tessel::rt {

/// Elements per chunk of elementwise and copy kernels (fixed: results must not
/// depend on the width).
inline constexpr int64_t kChunkElems = int64_t(1) << 15;
/// Contractions below this many flops run as one chunk.
inline constexpr double kGemmSplitFlops = 24e6;
/// Flops per contraction chunk a product's split aims at (rounded to a power-of-two
/// count of tiles, so a chunk may have somewhat fewer).
inline constexpr double kGemmChunkFlops = 16e6;
/// Most chunks of one product. A chunk is a tile of C, and every tile repacks its
/// rows of op(A) and its columns of op(B), so more, thinner tiles cost bandwidth
/// (rows of 8 across a 1024×1024×1024 product ran at half the BLAS's speed).
inline constexpr int64_t kGemmMaxChunks = 16;
/// Fewest rows of a full-width row strip of C (the preferred chunk of a large
/// product: it repacks only op(B)); 1024³ in 8 strips is ~12% above one call.
inline constexpr int64_t kGemmMinStripRows = 128;
/// Arenas of at least this size are allocated on 2 MiB boundaries and asked for
/// transparent huge pages (madvise; Linux).
inline constexpr int64_t kHugePageBytes = int64_t(2) << 20;
inline constexpr int64_t kHugeArenaBytes = int64_t(4) << 20;
/// Alignment of arena slots, in doubles (64 bytes).
inline constexpr int64_t kSlotAlign = 8;

/// The kernel an instruction calls; the index of its plan in KernelPlan.
enum class Kernel : uint8_t {
  Elementwise, Reduce, Copy, Pad, Gemm, Svd, SvdTopk, SvdComplement, Eigh, Qr, TriangularSolve,
  SylvesterSolve
};
const char *kernelName(Kernel k);

enum class GroupKind : uint8_t { Arena, Input, Constant, Output };

struct Group {
  GroupKind kind = GroupKind::Arena;
  int64_t index = -1;  ///< slot (Arena), input index, constant index, output index
  int64_t elems = 0;   ///< size in doubles
  int32_t producer = -1;        ///< instruction writing it (-1: input/constant)
  std::vector<int32_t> readers; ///< instructions reading it (deduplicated)
  bool pinned = false;          ///< read by a final output copy: never reused
};

struct PlanValue {
  ir::Type type;
  int32_t group = -1;
  ir::ValueId irValue = ir::kNoValue; ///< kNoValue for internal temporaries
  std::string name;                   ///< display name ("%T", "tmp3")
};

/// One op of a fused elementwise loop: the op, its compare direction, and per operand
/// either the result of an earlier step (>= 0) or an operand of the instruction
/// (-1 - k for Instruction::in[k]).
struct FusedStep {
  ir::OpKind op = ir::OpKind::Add;
  CompareDir cmp = CompareDir::EQ;
  uint8_t nargs = 0;
  int16_t arg[3] = {0, 0, 0};
};

/// Most ops of one fused loop (each step holds one block of its results).
inline constexpr int kMaxFusedSteps = 32;
/// Elements a fused loop computes step by step before moving on: 4 KB per
/// intermediate, in L1 for short loops (kMaxFusedSteps · 4 KB at most). Measured on the
/// gradient of Σ sin(x)·x² (5 instructions fused, 11 not): 256 costs ~5% more than
/// unfused at n = 1000 (loop overhead per block and step), 512 ~2%; at n = 10⁵ fused
/// is ~9% faster (fewer passes over memory).
inline constexpr int64_t kFusedBlock = 512;

/// Every kernel plan states two things about its kernel, as members, so that a new
/// kernel cannot fall through to a default (a missing member does not compile):
///   double cost(int64_t numel) const   the work of one call for the critical path
///       (runtime/Schedule.cpp; flops, ~c·m·n·k for a factorization, or elements
///       touched; `numel` is the instruction's result size), defined in Schedule.cpp;
///   OperandTakeover takeover() const   which operand the kernel may overwrite when the
///       operand dies at it, instead of copying it into a temp (buffer assignment,
///       runtime/BufferAssignment.cpp), and which temp that copy would have been.
struct OperandTakeover {
  int operand = -1; ///< index in Instruction::in, or -1: the kernel overwrites nothing
  int temp = -1;    ///< index in Instruction::out of the copy it then needs no storage for
};

/// Elementwise map over `Instruction::numel` elements; the function is
/// `Instruction::op` (unary, binary, compare with `cmp`, select). With `steps`, a
/// fused loop (XLA's loop fusion, decided at lowering): a chain of elementwise ops
/// whose intermediates are read by nothing outside the loop (or are cheap enough to
/// recompute in each loop that reads them), and broadcasts of one value into them,
/// run as one loop over the data in blocks of kFusedBlock; the last step is
/// the instruction's op and writes its result. Each element goes through the same
/// ops in the same order as unfused, so results are bitwise the same.
struct ElementwisePlan {
  CompareDir cmp = CompareDir::EQ;
  std::vector<FusedStep> steps;
  /// Per operand of the instruction (fused loops): one value broadcast to every element.
  std::vector<bool> scalar;
  double cost(int64_t numel) const;
  OperandTakeover takeover() const { return {}; }
};

/// Strided N-d copy: out (row-major over `shape`) = in[base + Σ idx_d · stride_d].
/// Dimensions are coalesced at prepare; the last one is the inner row.
struct CopyPlan {
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;
  int64_t base = 0;
  int64_t rows = 1; ///< product of all but the last extent
  /// Row mode: rows per chunk. Tile mode: outer iterations per chunk.
  int64_t perChunk = 1;
  /// Tile mode (transposes whose output rows read the input with a stride): the
  /// output dim `tileDim` reads the input contiguously; the copy walks 2-D tiles of
  /// (tileDim, last dim) so both sides stay in L1. outer* describe the other dims.
  int tileDim = -1;
  std::vector<int64_t> outerShape, outerIn, outerOut;
  int64_t outerCount = 1;
  int64_t outStrideTile = 0; ///< output stride of tileDim
  double cost(int64_t numel) const;
  OperandTakeover takeover() const { return {}; }
};

/// Zero padding: per output dimension, low padding, input extent and input stride.
struct PadPlan {
  std::vector<int64_t> outShape, low, inShape, inStride;
  int64_t rows = 1;
  double cost(int64_t numel) const;
  OperandTakeover takeover() const { return {}; }
};

/// Reduction: outputs enumerate `keptShape` (row-major); each output sums / maxes
/// over `redShape` in row-major order (a fixed order, the reference's order).
struct ReducePlan {
  bool isMax = false;
  std::vector<int64_t> keptShape, keptStride, redShape, redStride;
  int64_t outElems = 1, redElems = 1;
  int64_t outPerChunk = 1;
  /// Input fusion (XLA's): with `input.steps`, the reduced operand has no buffer. It is
  /// the last step of a fused elementwise loop over the instruction's operands, which
  /// the kernel evaluates block by block along the reduced contiguous inner axis and
  /// reduces in the same order as from a buffer (bitwise the same).
  ElementwisePlan input;
  double cost(int64_t numel) const;
  OperandTakeover takeover() const { return {}; }
};

/// Batched row-major GEMM C[b] = op(A[b]) · op(B[b]), C[b] of shape M×N.
struct GemmPlan {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  bool transA = false, transB = false;
  int64_t lda = 0, ldb = 0, strideA = 0, strideB = 0, strideC = 0;
  int64_t rowsPerChunk = 0;     ///< rows of a tile of C (tile mode)
  int64_t colsPerChunk = 0;     ///< columns of a tile of C (tile mode)
  int64_t colChunks = 1;        ///< tiles across N (tile mode)
  int64_t chunksPerBatch = 1;   ///< tiles per batch (tile mode), row-major over the tile grid
  int64_t batchesPerChunk = 0;  ///< >0: batch-group mode (several whole batches a chunk)
  double flops = 0;
  double cost(int64_t numel) const;
  OperandTakeover takeover() const { return {}; }
};

/// Thin SVD of a row-major m×n matrix through LAPACKE_dgesdd_work, computed as the
/// column-major SVD of Aᵀ (n×m) so that no transposition is needed.
struct SvdPlan {
  int64_t m = 0, n = 0, k = 0;
  int64_t lwork = 0;      ///< queried once at prepare
  int64_t iworkElems = 0; ///< 8·k ints, stored in doubles
  /// U and Vt are never read: gesdd with jobz = 'N' (singular values only, about half
  /// the work). s may then differ from a full SVD's in the last bits.
  bool valuesOnly = false;
  double cost(int64_t numel) const;
  /// gesdd destroys its input: it runs on the operand itself when the operand dies here
  /// (temp 4 is the copy it needs otherwise); not when only singular values are computed
  /// from a k = 0 matrix.
  OperandTakeover takeover() const { return k > 0 ? OperandTakeover{0, 4} : OperandTakeover{}; }
};

/// svd_topk (runtime/TruncatedSvd.h): block size, basis cap, budget, workspace.
struct SvdTopkPlan {
  TopkSvdConfig cfg;
  double cost(int64_t numel) const;
  OperandTakeover takeover() const { return {}; }
};

/// svd_topk_complement (runtime/TruncatedSvd.h).
struct SvdComplementPlan {
  SvdComplementConfig cfg;
  double eps = 0;
  double cost(int64_t numel) const;
  OperandTakeover takeover() const { return {}; }
};

/// eigh: LAPACK dsyevd (jobz 'V') on the symmetric part of an n×n operand.
struct EighPlan {
  int64_t n = 0;
  int64_t lwork = 0, liwork = 0; ///< queried once at prepare (liwork ints, in doubles: iworkElems)
  int64_t iworkElems = 0;
  double cost(int64_t numel) const;
  OperandTakeover takeover() const { return {}; }
};

/// qr: LAPACK dgeqrf and dorgqr on an m×n operand, k = min(m, n).
struct QrPlan {
  int64_t m = 0, n = 0, k = 0;
  int64_t lwork = 0; ///< the larger of the two routines' workspaces, queried once at prepare
  double cost(int64_t numel) const;
  OperandTakeover takeover() const { return {}; }
};

/// triangular_solve: BLAS dtrsm on B's copy (row-major), A of order n, B rows×cols.
struct TriangularSolvePlan {
  int64_t n = 0, rows = 0, cols = 0;
  bool left = true, lower = true, transposeA = false;
  double cost(int64_t numel) const;
  OperandTakeover takeover() const { return {}; }
};

/// sylvester_solve: dsyevd of the symmetric parts of A (order n) and B (order m), C (n×m)
/// brought into their eigenbases and back by four GEMMs. One temp: the workspace
/// (sylvesterWorkElems).
struct SylvesterSolvePlan {
  int64_t n = 0, m = 0;
  EighPlan a, b; ///< dsyevd's workspaces for the two orders
  double cost(int64_t numel) const;
  OperandTakeover takeover() const { return {}; }
};

/// What a kernel needs to know, computed once at prepare; one alternative per Kernel,
/// in its order.
using KernelPlan = std::variant<ElementwisePlan, ReducePlan, CopyPlan, PadPlan, GemmPlan, SvdPlan,
                                SvdTopkPlan, SvdComplementPlan, EighPlan, QrPlan, TriangularSolvePlan,
                                SylvesterSolvePlan>;
static_assert(std::variant_size_v<KernelPlan> == static_cast<size_t>(Kernel::SylvesterSolve) + 1,
              "one KernelPlan alternative per Kernel, in its order");

struct Instruction {
  KernelPlan plan;
  ir::OpKind op = ir::OpKind::Reshape; ///< source op kind (elementwise: the function)
  int32_t srcOp = -1;                  ///< index of the source op in the program
  std::vector<int32_t> in;             ///< plan values read
  std::vector<int32_t> out;            ///< plan values written (results, then temps)
  int32_t numResults = 0;              ///< out[0..numResults) are results; rest temps
  int32_t nchunks = 1;
  int64_t numel = 0;                   ///< elements of the (first) result
  /// Elementwise: the result takes the storage of an operand that dies here.
  /// Svd: gesdd overwrites its operand, which dies here, instead of a copy.
  bool inPlace = false;
  std::string what;                    ///< short description of the kernel plan
  // Scheduling.
  int32_t initialDeps = 0;
  int32_t succBegin = 0, succEnd = 0;   ///< range in Plan::succ
  std::vector<int32_t> preds;           ///< for describePlan
  int64_t bytesWritten = 0;

  Kernel kernel() const { return static_cast<Kernel>(plan.index()); }
  template <typename T> const T &as() const { return std::get<T>(plan); }
  template <typename T> T &as() { return std::get<T>(plan); }
};

/// The kernel column of plan listings and profiles: "fused" for a fused elementwise
/// loop, else kernelName.
inline const char *instructionKernelName(const Instruction &in) {
  if (in.kernel() == Kernel::Elementwise && !in.as<ElementwisePlan>().steps.empty()) return "fused";
  return kernelName(in.kernel());
}

/// A final copy of an output that is not written in place (alias of an input, a
/// constant, another output, or an SVD result).
struct FinalCopy {
  int32_t output;
  int32_t value;
};

class Plan {
public:
  uint64_t id = 0; ///< unique per prepare() in the process (engine cache key)
  ir::Program program;
  PrepareOptions options;
  std::vector<PlanValue> values;
  std::vector<Group> groups;
  std::vector<Instruction> insts;
  std::vector<int32_t> succ;
  std::vector<int32_t> initiallyReady;
  std::vector<const double *> constants; ///< data of Constant groups
  std::vector<std::vector<double>> ownedConstants; ///< iota tables
  /// What this plan's truncated-SVD kernels did over all its runs, by any engine: the
  /// fields of TruncatedSvdStats in order (top-k calls, iterations, fallbacks; complement
  /// calls, iterations, fallbacks, broadened). Counted per plan, so that concurrent jobs
  /// with plans of their own (two tessel.trg calls) each report their own.
  mutable std::array<std::atomic<int64_t>, 7> svdCounts{};
  std::vector<int64_t> slotOffset;       ///< in doubles, per arena slot
  std::vector<int64_t> slotElems;
  int64_t arenaElems = 0;
  int64_t peakLiveBytes = 0;
  /// A module's plan: the most bytes of host tensors the module interpreter holds at
  /// once (values between segments, call frames, a scan's stacked outputs and slices),
  /// beside the engine's arena (runtime/ModulePlan.h). 0 for a plain plan.
  int64_t moduleTensorBytes = 0;
  std::vector<int32_t> outputValue;      ///< plan value of each output
  std::vector<FinalCopy> finalCopies;
  int64_t maxChunks = 1;
  /// Buffer reuse followed the dependency order (ancestor sets); false for programs
  /// too large for them, where reuse adds write-after-read edges instead.
  bool usedAncestors = true;

  const ir::Op &srcOp(const Instruction &in) const { return program.ops[in.srcOp]; }

  /// A module's plan (runtime/ModulePlan.h): the plans of its straight-line segments and
  /// the calls and scans between them, run by Engine::run's module interpreter. Null for
  /// a plain program; set, the plan has no instructions of its own.
  std::shared_ptr<const struct ModuleExec> module;
};

} // namespace tessel::rt
