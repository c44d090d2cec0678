//===- runtime/Lowering.cpp - Ops to kernel instructions (stage 1 of prepare) --===//
//
// One lowering rule per op of ir/ops.def, in a table in its order (checked at
// compile time). A rule either emits instructions (Lowering::addInst) with their
// kernel plan fully computed from the shapes, or makes the result an alias of an
// operand's storage (no instruction), or binds plan-owned constant data. See
// PrepareStages.h for the stages that follow.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <numeric>

#include <lapacke.h>

#include "ir/Diagnostics.h"
#include "ir/OpAttrs.h"
#include "runtime/Fusion.h"
#include "runtime/Factorizations.h"
#include "runtime/PrepareStages.h"

namespace tessel::rt {

const char *kernelName(Kernel k) {
  switch (k) {
  case Kernel::Elementwise: return "elementwise";
  case Kernel::Reduce: return "reduce";
  case Kernel::Copy: return "copy";
  case Kernel::Pad: return "pad";
  case Kernel::Gemm: return "gemm";
  case Kernel::Svd: return "svd";
  case Kernel::SvdTopk: return "svd_topk";
  case Kernel::SvdComplement: return "svd_complement";
  case Kernel::Eigh: return "eigh";
  case Kernel::Qr: return "qr";
  case Kernel::TriangularSolve: return "triangular_solve";
  }
  return "?";
}

namespace prep {
namespace {

using ir::OpKind;
using ir::Type;

/// Drops extent-1 dims and merges neighbours that are contiguous in the source.
/// Always leaves at least one dimension.
void coalesce(std::vector<int64_t> &shape, std::vector<int64_t> &stride) {
  std::vector<int64_t> s2, st2;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!s2.empty() && st2.back() == stride[d] * shape[d]) {
      s2.back() *= shape[d];
      st2.back() = stride[d];
    } else {
      s2.push_back(shape[d]);
      st2.push_back(stride[d]);
    }
  }
  if (s2.empty()) {
    s2.push_back(1);
    st2.push_back(0);
  }
  shape = std::move(s2);
  stride = std::move(st2);
}

CopyPlan makeCopy(std::vector<int64_t> shape, std::vector<int64_t> stride, int64_t base) {
  CopyPlan c;
  bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
  coalesce(shape, stride);
  if (empty) {
    shape = {0};
    stride = {0};
  }
  c.shape = std::move(shape);
  c.stride = std::move(stride);
  c.base = base;
  c.rows = 1;
  for (size_t d = 0; d + 1 < c.shape.size(); ++d) c.rows *= c.shape[d];
  size_t r = c.shape.size();
  int64_t inner = std::max<int64_t>(1, c.shape.back());
  c.perChunk = std::max<int64_t>(1, kChunkElems / inner);
  // Tile mode: the last output dim reads with a stride, another dim contiguously.
  if (!empty && r >= 2 && c.stride.back() != 1 && c.stride.back() != 0 && c.shape.back() >= 4) {
    for (size_t q = 0; q + 1 < r; ++q)
      if (c.stride[q] == 1 && c.shape[q] >= 4) c.tileDim = static_cast<int>(q);
  }
  if (c.tileDim >= 0) {
    std::vector<int64_t> outStride(r, 1);
    for (size_t d = r - 1; d-- > 0;) outStride[d] = outStride[d + 1] * c.shape[d + 1];
    for (size_t d = 0; d + 1 < r; ++d) {
      if (static_cast<int>(d) == c.tileDim) continue;
      c.outerShape.push_back(c.shape[d]);
      c.outerIn.push_back(c.stride[d]);
      c.outerOut.push_back(outStride[d]);
      c.outerCount *= c.shape[d];
    }
    c.outStrideTile = outStride[c.tileDim];
    c.perChunk = std::max<int64_t>(1, kChunkElems / (c.shape[c.tileDim] * c.shape.back()));
  }
  return c;
}

int32_t chunksFor(int64_t total, int64_t per) {
  if (total <= 0) return 1;
  return static_cast<int32_t>((total + per - 1) / per);
}

/// Chunks of a copy (fixed by the shapes, never by the width).
int32_t copyChunks(const CopyPlan &c) {
  return chunksFor(c.tileDim >= 0 ? c.outerCount : c.rows, c.perChunk);
}

/// True if `order` (a list of dims of a tensor of `shape`) lists every dim of extent
/// > 1 in increasing order, i.e. the tensor read in that order is its memory order.
bool isMemoryOrder(const std::vector<int64_t> &order, llvm::ArrayRef<int64_t> shape) {
  int64_t last = -1;
  for (int64_t d : order) {
    if (shape[d] == 1) continue;
    if (d < last) return false;
    last = d;
  }
  return true;
}

/// An elementwise op lowered by lowerElementwise (stop_gradient is an alias).

/// The state of lowering one program: the plan being filled and the helpers the
/// rules use.
class Lowering {
public:
  Lowering(Plan &plan, const Fusion &f) : P(plan), prog(plan.program), fusion(f) {}
  Plan &P;
  const ir::Program &prog;
  const Fusion &fusion;

  const Type &type(ir::ValueId v) const { return prog.type(v); }

  int32_t newGroup(GroupKind kind, int64_t index, int64_t elems) {
    Group g;
    g.kind = kind;
    g.index = index;
    g.elems = elems;
    P.groups.push_back(std::move(g));
    return static_cast<int32_t>(P.groups.size() - 1);
  }
  int32_t newTemp(const Type &t, const std::string &prefix) {
    PlanValue v;
    v.type = t;
    v.name = prefix + std::to_string(P.values.size());
    P.values.push_back(std::move(v));
    return static_cast<int32_t>(P.values.size() - 1);
  }
  /// The result shares the operand's storage (no instruction).
  void alias(ir::ValueId result, ir::ValueId operand) {
    P.values[result].group = P.values[operand].group;
  }
  /// The result is plan-owned constant data.
  void bindConstant(ir::ValueId result, const double *data, int64_t elems) {
    P.constants.push_back(data);
    P.values[result].group =
        newGroup(GroupKind::Constant, static_cast<int64_t>(P.constants.size() - 1), elems);
  }
  /// An instruction for `op` reading its operands and writing its results.
  Instruction instruction(const ir::Op &op, size_t opIndex, KernelPlan plan) {
    Instruction in;
    in.plan = std::move(plan);
    in.op = op.kind;
    in.srcOp = static_cast<int32_t>(opIndex);
    for (ir::ValueId v : op.operands) in.in.push_back(static_cast<int32_t>(v));
    for (ir::ValueId v : op.results) in.out.push_back(static_cast<int32_t>(v));
    return in;
  }
  /// Adds an instruction writing fresh arena groups for each of its `out` values.
  void addInst(Instruction inst) {
    int32_t id = static_cast<int32_t>(P.insts.size());
    for (int32_t v : inst.out) {
      P.values[v].group = newGroup(GroupKind::Arena, -1, P.values[v].type.numel());
      P.groups[P.values[v].group].producer = id;
    }
    if (inst.numResults == 0) inst.numResults = static_cast<int32_t>(inst.out.size());
    inst.numel = inst.out.empty() ? 0 : P.values[inst.out[0]].type.numel();
    P.insts.push_back(std::move(inst));
  }
  /// A strided copy (broadcast, transpose, slice, GEMM operand layout) of `in`.
  void addCopy(Instruction in, std::vector<int64_t> shape, std::vector<int64_t> stride,
               int64_t baseOff, std::string what) {
    CopyPlan c = makeCopy(std::move(shape), std::move(stride), baseOff);
    in.nchunks = copyChunks(c);
    in.plan = std::move(c);
    in.what = std::move(what);
    addInst(std::move(in));
  }
  void copyOp(const ir::Op &op, size_t i, std::vector<int64_t> shape, std::vector<int64_t> stride,
              int64_t baseOff, std::string what) {
    addCopy(instruction(op, i, CopyPlan{}), std::move(shape), std::move(stride), baseOff,
            std::move(what));
  }
};

// --- The rules ---------------------------------------------------------------------

using LowerRule = void (*)(Lowering &, const ir::Op &, size_t);

void lowerConstant(Lowering &L, const ir::Op &op, size_t) {
  const Tensor &t = ir::attr<OpKind::Constant, "value">(op);
  L.bindConstant(op.results[0], t.data.data(), t.type.numel());
}

void lowerIota(Lowering &L, const ir::Op &op, size_t) {
  const Type &t = L.type(op.results[0]);
  const int64_t dim = ir::attr<OpKind::Iota, "dim">(op);
  std::vector<double> data(static_cast<size_t>(t.numel()));
  auto st = rowMajorStrides(t.shape);
  for (int64_t k = 0; k < t.numel(); ++k) data[k] = static_cast<double>((k / st[dim]) % t.shape[dim]);
  L.P.ownedConstants.push_back(std::move(data));
  L.bindConstant(op.results[0], L.P.ownedConstants.back().data(), t.numel());
}

/// Builds the steps and operands of one fused loop (the instruction of its root op).
struct FusedLoopBuilder {
  Lowering &L;
  ElementwisePlan &e;
  Instruction &in;
  std::vector<ir::ValueId> computed; ///< the SSA value of each step
  std::vector<std::string> names;    ///< the op of each step

  /// "N ops fused [op,op,...]" for plan listings.
  std::string describe() const {
    std::string list;
    for (const std::string &nm : names) list += (list.empty() ? "" : ",") + nm;
    return std::to_string(names.size()) + " ops fused [" + list + "]";
  }

  /// Appends the steps computing op `d`'s result from its operands (inlined producers
  /// first); returns the step's index.
  int step(const ir::Op &d) {
    FusedStep st;
    st.op = d.kind;
    if (d.kind == OpKind::Compare) st.cmp = parseCompareDirection(ir::attr<OpKind::Compare, "direction">(d));
    st.nargs = static_cast<uint8_t>(d.operands.size());
    for (size_t q = 0; q < d.operands.size(); ++q) st.arg[q] = static_cast<int16_t>(value(d.operands[q]));
    e.steps.push_back(st);
    computed.push_back(d.results[0]);
    names.push_back(ir::opName(d.kind));
    return static_cast<int>(e.steps.size() - 1);
  }

  /// The reference of value `v`: a step computing it (an inlined producer; a value read
  /// twice, as in x + x, is computed once), or an operand of the instruction (-1 - k;
  /// a scalar for an inlined broadcast of one value).
  int value(ir::ValueId v) {
    for (size_t j = 0; j < computed.size(); ++j)
      if (computed[j] == v) return static_cast<int>(j);
    if (!L.fusion.inlined(v)) return operand(v, false);
    const ir::Op &d = L.prog.ops[L.fusion.def[v]];
    if (d.kind == OpKind::BroadcastInDim) return operand(d.operands[0], true);
    return step(d);
  }

  int operand(ir::ValueId x, bool scalar) {
    for (size_t k = 0; k < in.in.size(); ++k)
      if (in.in[k] == static_cast<int32_t>(x)) return -1 - static_cast<int>(k);
    in.in.push_back(static_cast<int32_t>(x));
    e.scalar.push_back(scalar);
    return -static_cast<int>(in.in.size());
  }
};

void lowerElementwise(Lowering &L, const ir::Op &op, size_t i) {
  if (L.fusion.inlined(op.results[0])) return; // computed inside its readers' loops
  ElementwisePlan e;
  if (op.kind == OpKind::Compare) e.cmp = parseCompareDirection(ir::attr<OpKind::Compare, "direction">(op));
  Instruction in = L.instruction(op, i, e);
  const int64_t n = L.type(op.results[0]).numel();
  in.nchunks = chunksFor(n, kChunkElems);
  bool fused = false;
  for (ir::ValueId v : op.operands) fused |= L.fusion.inlined(v);
  if (fused) {
    in.in.clear();
    FusedLoopBuilder b{L, in.as<ElementwisePlan>(), in, {}, {}};
    b.step(op);
    in.what = b.describe() + " n=" + std::to_string(n);
  } else {
    in.what = std::string(ir::opName(op.kind)) + " n=" + std::to_string(n);
  }
  L.addInst(std::move(in));
}

/// reshape and stop_gradient: same data, no instruction.
void lowerAlias(Lowering &L, const ir::Op &op, size_t) { L.alias(op.results[0], op.operands[0]); }

void lowerReduce(Lowering &L, const ir::Op &op, size_t i) {
  const Type &it = L.type(op.operands[0]);
  const auto &axes = op.attrs.getI64s("axes");
  std::vector<bool> red(it.rank(), false);
  int64_t redElems = 1;
  for (int64_t ax : axes) {
    red[ax] = true;
    redElems *= it.shape[ax];
  }
  if (redElems == 1 && it.numel() > 0) { // nothing to combine: same data
    L.alias(op.results[0], op.operands[0]);
    return;
  }
  ReducePlan R;
  R.isMax = op.kind == OpKind::ReduceMax;
  auto ist = rowMajorStrides(it.shape);
  for (int d = 0; d < it.rank(); ++d) {
    (red[d] ? R.redShape : R.keptShape).push_back(it.shape[d]);
    (red[d] ? R.redStride : R.keptStride).push_back(ist[d]);
  }
  R.outElems = L.type(op.results[0]).numel();
  R.redElems = redElems;
  coalesce(R.keptShape, R.keptStride);
  coalesce(R.redShape, R.redStride);
  if (redElems == 0) {
    R.redShape = {0};
    R.redStride = {0};
  }
  R.outPerChunk = std::max<int64_t>(1, kChunkElems / std::max<int64_t>(1, redElems));
  Instruction in = L.instruction(op, i, R);
  in.nchunks = chunksFor(R.outElems, R.outPerChunk);
  in.what = std::string(R.isMax ? "max" : "sum") + " over " + ir::shapeStr(axes) + " of " + it.str();
  if (L.fusion.inlined(op.operands[0])) {
    if (R.redStride.back() != 1)
      throw Error("internal error: input fusion into a reduction whose inner axis is strided");
    in.in.clear();
    FusedLoopBuilder b{L, in.as<ReducePlan>().input, in, {}, {}};
    b.step(L.prog.ops[L.fusion.def[op.operands[0]]]);
    in.what += ", input " + b.describe();
  }
  L.addInst(std::move(in));
}

void lowerBroadcastInDim(Lowering &L, const ir::Op &op, size_t i) {
  if (L.fusion.inlined(op.results[0])) return; // a scalar operand of its readers' loops
  const Type &it = L.type(op.operands[0]), &ot = L.type(op.results[0]);
  if (it.numel() == ot.numel()) {
    L.alias(op.results[0], op.operands[0]);
    return;
  }
  const auto &dims = ir::attr<OpKind::BroadcastInDim, "dims">(op);
  auto ist = rowMajorStrides(it.shape);
  std::vector<int64_t> shape(ot.shape.begin(), ot.shape.end()), stride(ot.rank(), 0);
  for (int d = 0; d < it.rank(); ++d)
    if (it.shape[d] != 1) stride[dims[d]] = ist[d];
  L.copyOp(op, i, shape, stride, 0, "broadcast " + it.str() + " -> " + ot.str());
}

void lowerTranspose(Lowering &L, const ir::Op &op, size_t i) {
  const Type &it = L.type(op.operands[0]), &ot = L.type(op.results[0]);
  const auto &perm = ir::attr<OpKind::Transpose, "perm">(op);
  std::vector<int64_t> order(perm.begin(), perm.end());
  if (isMemoryOrder(order, it.shape)) {
    L.alias(op.results[0], op.operands[0]);
    return;
  }
  auto ist = rowMajorStrides(it.shape);
  std::vector<int64_t> shape(ot.shape.begin(), ot.shape.end()), stride;
  for (int64_t p : perm) stride.push_back(ist[p]);
  L.copyOp(op, i, shape, stride, 0, "transpose perm=" + ir::shapeStr(order));
}

void lowerSlice(Lowering &L, const ir::Op &op, size_t i) {
  const Type &it = L.type(op.operands[0]), &ot = L.type(op.results[0]);
  if (it == ot) {
    L.alias(op.results[0], op.operands[0]);
    return;
  }
  const auto &start = ir::attr<OpKind::Slice, "start">(op);
  auto ist = rowMajorStrides(it.shape);
  int64_t baseOff = 0;
  for (int d = 0; d < it.rank(); ++d) baseOff += start[d] * ist[d];
  std::vector<int64_t> shape(ot.shape.begin(), ot.shape.end());
  L.copyOp(op, i, shape, ist, baseOff, "slice start=" + ir::shapeStr(start));
}

void lowerPad(Lowering &L, const ir::Op &op, size_t i) {
  const Type &it = L.type(op.operands[0]), &ot = L.type(op.results[0]);
  if (it == ot) {
    L.alias(op.results[0], op.operands[0]);
    return;
  }
  PadPlan p;
  const auto &low = ir::attr<OpKind::Pad, "low">(op);
  p.outShape.assign(ot.shape.begin(), ot.shape.end());
  p.inShape.assign(it.shape.begin(), it.shape.end());
  p.low.assign(low.begin(), low.end());
  p.inStride = rowMajorStrides(it.shape);
  if (p.outShape.empty()) {
    p.outShape = {1};
    p.inShape = {1};
    p.low = {0};
    p.inStride = {1};
  }
  for (size_t d = 0; d + 1 < p.outShape.size(); ++d) p.rows *= p.outShape[d];
  const int64_t rowsPerChunk = std::max<int64_t>(1, kChunkElems / std::max<int64_t>(1, p.outShape.back()));
  Instruction in = L.instruction(op, i, p);
  in.nchunks = chunksFor(p.rows, rowsPerChunk);
  in.what = "pad " + it.str() + " -> " + ot.str();
  L.addInst(std::move(in));
}

/// Chunks of a GEMM, fixed by its shape: whole batches per chunk for small products,
/// else tiles of C per batch, at most flops / kGemmChunkFlops of them (and at most
/// kGemmMaxChunks). Full-width row strips come first, halved while a strip keeps at
/// least kGemmMinStripRows rows: each call packs all of op(B) once, and that costs
/// less than the repacking of both operands by a grid (1024³ on one thread: 8 strips
/// 36 ms, 16 tiles of 256² 42 ms, one call 32 ms), so such a product stops at the
/// strips. Only when the strips are fewer than 4 does the tile's longer side keep
/// halving, as long as it is at least 32.
/// Tile sides are multiples of 8 (whole register tiles); the last tile of a row or
/// column takes the remainder.
int32_t chunkGemm(GemmPlan &g) {
  const double perBatch = 2.0 * static_cast<double>(g.M) * static_cast<double>(g.N) * static_cast<double>(g.K);
  g.flops = perBatch * static_cast<double>(g.batch);
  if (g.flops < kGemmSplitFlops || perBatch < kGemmChunkFlops) {
    // Whole batches per chunk.
    int64_t bpc = g.flops < kGemmSplitFlops
                      ? std::max<int64_t>(1, g.batch)
                      : std::max<int64_t>(1, static_cast<int64_t>(kGemmChunkFlops / std::max(1.0, perBatch)));
    g.batchesPerChunk = bpc;
    return chunksFor(g.batch, bpc);
  }
  const int64_t want = std::clamp<int64_t>(std::llround(perBatch / kGemmChunkFlops), 1, kGemmMaxChunks);
  auto ceilDiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  auto side = [&](int64_t n, int64_t parts) {
    return std::min<int64_t>(std::max<int64_t>(1, n), (ceilDiv(n, parts) + 7) / 8 * 8);
  };
  int64_t rowParts = 1, colParts = 1;
  while (rowParts * 2 <= want && ceilDiv(g.M, rowParts * 2) >= kGemmMinStripRows) rowParts *= 2;
  const bool grid = rowParts < 4;
  while (grid && rowParts * colParts * 2 <= want) {
    const int64_t tm = ceilDiv(g.M, rowParts), tn = ceilDiv(g.N, colParts);
    if (tm >= tn && tm >= 32) rowParts *= 2;
    else if (tn >= 32) colParts *= 2;
    else if (tm >= 32) rowParts *= 2;
    else break;
  }
  g.rowsPerChunk = side(g.M, rowParts);
  g.colsPerChunk = side(g.N, colParts);
  g.colChunks = chunksFor(g.N, g.colsPerChunk);
  g.chunksPerBatch = chunksFor(g.M, g.rowsPerChunk) * g.colChunks;
  return static_cast<int32_t>(g.batch * g.chunksPerBatch);
}

/// dot_general as one batched GEMM C[b] = op(A[b])·op(B[b]). The contracted pairs are
/// taken in the order (as given, by lhs dim, by rhs dim) that leaves the fewest
/// operand elements to transpose; an operand not in GEMM form either way is
/// transposed into a temporary first.
void lowerDotGeneral(Lowering &L, const ir::Op &op, size_t i) {
  const ir::ValueId lv = op.operands[0], rv = op.operands[1];
  const Type &lt = L.type(lv), &rtt = L.type(rv);
  auto vec = [](const ir::I64List &v) { return std::vector<int64_t>(v.begin(), v.end()); };
  const std::vector<int64_t> lb = vec(ir::attr<OpKind::DotGeneral, "lhs_batch">(op)),
                             rb = vec(ir::attr<OpKind::DotGeneral, "rhs_batch">(op));
  const std::vector<int64_t> lc = vec(ir::attr<OpKind::DotGeneral, "lhs_contract">(op)),
                             rc = vec(ir::attr<OpKind::DotGeneral, "rhs_contract">(op));
  auto freeDims = [](int rank, const std::vector<int64_t> &b, const std::vector<int64_t> &c) {
    std::vector<int64_t> f;
    for (int d = 0; d < rank; ++d)
      if (std::find(b.begin(), b.end(), d) == b.end() && std::find(c.begin(), c.end(), d) == c.end())
        f.push_back(d);
    return f;
  };
  const auto lf = freeDims(lt.rank(), lb, lc), rf = freeDims(rtt.rank(), rb, rc);
  auto cat = [](std::initializer_list<const std::vector<int64_t> *> parts) {
    std::vector<int64_t> r;
    for (auto *p : parts) r.insert(r.end(), p->begin(), p->end());
    return r;
  };
  const size_t nc = lc.size();
  std::vector<std::vector<size_t>> orders(3, std::vector<size_t>(nc));
  for (auto &o : orders) std::iota(o.begin(), o.end(), 0);
  std::sort(orders[1].begin(), orders[1].end(), [&](size_t x, size_t y) { return lc[x] < lc[y]; });
  std::sort(orders[2].begin(), orders[2].end(), [&](size_t x, size_t y) { return rc[x] < rc[y]; });
  struct Choice {
    std::vector<int64_t> lcP, rcP;
    bool lOk = false, rOk = false, transA = false, transB = false;
    int64_t cost = -1;
  } best;
  for (const auto &o : orders) {
    Choice c;
    for (size_t k : o) {
      c.lcP.push_back(lc[k]);
      c.rcP.push_back(rc[k]);
    }
    if (isMemoryOrder(cat({&lb, &lf, &c.lcP}), lt.shape)) c.lOk = true;
    else if (isMemoryOrder(cat({&lb, &c.lcP, &lf}), lt.shape)) c.lOk = c.transA = true;
    if (isMemoryOrder(cat({&rb, &c.rcP, &rf}), rtt.shape)) c.rOk = true;
    else if (isMemoryOrder(cat({&rb, &rf, &c.rcP}), rtt.shape)) c.rOk = c.transB = true;
    c.cost = (c.lOk ? 0 : lt.numel()) + (c.rOk ? 0 : rtt.numel());
    if (best.cost < 0 || c.cost < best.cost) best = c;
  }
  Instruction in = L.instruction(op, i, GemmPlan{});
  std::string notes;
  auto transposeTo = [&](ir::ValueId v, const std::vector<int64_t> &order, const char *side) {
    const Type &t = L.type(v);
    Type tt;
    for (int64_t d : order) tt.shape.push_back(t.shape[d]);
    const int32_t tmp = L.newTemp(tt, "tmp");
    Instruction c = L.instruction(op, i, CopyPlan{});
    c.in = {static_cast<int32_t>(v)};
    c.out = {tmp};
    auto ist = rowMajorStrides(t.shape);
    std::vector<int64_t> shape, stride;
    for (int64_t d : order) {
      shape.push_back(t.shape[d]);
      stride.push_back(ist[d]);
    }
    L.addCopy(std::move(c), shape, stride, 0,
              std::string("dot_general ") + side + " to GEMM form perm=" + ir::shapeStr(order));
    notes += std::string(" ") + side + "-transposed";
    return tmp;
  };
  if (!best.lOk) {
    in.in[0] = transposeTo(lv, cat({&lb, &lf, &best.lcP}), "lhs");
    best.transA = false;
  }
  if (!best.rOk) {
    in.in[1] = transposeTo(rv, cat({&rb, &best.rcP, &rf}), "rhs");
    best.transB = false;
  }
  GemmPlan &g = in.as<GemmPlan>();
  for (int64_t d : lb) g.batch *= lt.shape[d];
  g.M = 1;
  for (int64_t d : lf) g.M *= lt.shape[d];
  g.N = 1;
  for (int64_t d : rf) g.N *= rtt.shape[d];
  g.K = 1;
  for (int64_t d : lc) g.K *= lt.shape[d];
  g.transA = best.transA;
  g.transB = best.transB;
  g.lda = std::max<int64_t>(1, g.transA ? g.M : g.K);
  g.ldb = std::max<int64_t>(1, g.transB ? g.K : g.N);
  g.strideA = g.M * g.K;
  g.strideB = g.K * g.N;
  g.strideC = g.M * g.N;
  in.nchunks = chunkGemm(g);
  in.what = "B=" + std::to_string(g.batch) + " M=" + std::to_string(g.M) + " N=" +
            std::to_string(g.N) + " K=" + std::to_string(g.K) + " " + (g.transA ? "T" : "N") +
            (g.transB ? "T" : "N") + notes;
  if (g.batchesPerChunk == 0)
    in.what += " tiles " + std::to_string(g.rowsPerChunk) + "x" + std::to_string(g.colsPerChunk);
  L.addInst(std::move(in));
}

void lowerEinsum(Lowering &L, const ir::Op &op, size_t) {
  throw Error("error: prepare: " + describeOp(L.prog, op) + ": einsum must be lowered by the "
              "order pass before prepare; the runtime executes only pairwise contractions "
              "(dot_general)");
}

void lowerRunsFunction(Lowering &L, const ir::Op &op, size_t) {
  throw Error("error: prepare: " + describeOp(L.prog, op) + ": " + ir::opName(op.kind) +
              " runs a function of the module: prepare inlines the module first (the `inline` "
              "pass); a program given to the engine has no calls or scans left");
}

/// Thin SVD through gesdd (jobz 'S'). Temps after U, s, Vt: the workspace (lwork
/// doubles + 8k ints) and a copy of the operand, which gesdd overwrites (dropped at
/// buffer assignment when the operand dies here).
void lowerSvd(Lowering &L, const ir::Op &op, size_t i) {
  const Type &at = L.type(op.operands[0]);
  SvdPlan s;
  s.m = at.shape[0];
  s.n = at.shape[1];
  s.k = std::min(s.m, s.n);
  if (s.k > 0) {
    s.lwork = gesddWorkspace(L.prog, op, s, 'S');
    s.iworkElems = (8 * s.k * static_cast<int64_t>(sizeof(lapack_int)) + 7) / 8;
  }
  Instruction in = L.instruction(op, i, s);
  in.numResults = 3;
  in.out.push_back(L.newTemp(Type({s.lwork + s.iworkElems}), "work"));
  in.out.push_back(L.newTemp(Type({s.k > 0 ? s.m * s.n : 0}), "acopy"));
  in.what = std::to_string(s.m) + "x" + std::to_string(s.n) + " gesdd lwork=" + std::to_string(s.lwork);
  L.addInst(std::move(in));
}

/// Top-k SVD by randomized block Krylov (runtime/TruncatedSvd.h); one temp, the workspace
/// (the basis, Aᵀ·basis, the Rayleigh–Ritz factors, LAPACK workspaces).
void lowerSvdTopk(Lowering &L, const ir::Op &op, size_t i) {
  const Type &at = L.type(op.operands[0]);
  SvdTopkPlan s;
  s.cfg = topkSvdConfig(at.shape[0], at.shape[1], ir::attr<OpKind::SvdTopk, "k">(op));
  Instruction in = L.instruction(op, i, s);
  in.numResults = 3;
  in.out.push_back(L.newTemp(Type({std::max<int64_t>(1, s.cfg.workElems)}), "work"));
  in.what = std::to_string(s.cfg.m) + "x" + std::to_string(s.cfg.n) + " top " +
            std::to_string(s.cfg.k) + " block " + std::to_string(s.cfg.b0) + " basis <= " +
            std::to_string(s.cfg.bmax) + " budget " + std::to_string(s.cfg.maxIter) + " blocks";
  L.addInst(std::move(in));
}

/// The coupling of svd_topk's pullback to the discarded subspace; one temp, the
/// workspace (A⊥, the guards, the conjugate-gradient vectors).
void lowerSvdTopkComplement(Lowering &L, const ir::Op &op, size_t i) {
  const Type &at = L.type(op.operands[0]);
  SvdComplementPlan s;
  const int64_t given = ir::attr<OpKind::SvdTopkComplement, "guards">(op);
  s.cfg = svdComplementConfig(at.shape[0], at.shape[1], L.type(op.operands[2]).shape[0] - given,
                              L.type(op.operands[4]).shape[1], given);
  s.eps = ir::attr<OpKind::SvdTopkComplement, "eps">(op);
  Instruction in = L.instruction(op, i, s);
  in.numResults = 2;
  in.out.push_back(L.newTemp(Type({std::max<int64_t>(1, s.cfg.workElems)}), "work"));
  in.what = std::to_string(s.cfg.m) + "x" + std::to_string(s.cfg.n) + " k=" +
            std::to_string(s.cfg.k) + " r=" + std::to_string(s.cfg.r) + " guards " +
            std::to_string(s.cfg.guards) + (s.cfg.givenGuards ? " (from the forward)" : "") +
            " cg budget " + std::to_string(s.cfg.maxIter);
  L.addInst(std::move(in));
}

/// Symmetric eigendecomposition through dsyevd (runtime/Factorizations.h): V's buffer takes the
/// symmetrized operand and LAPACK's eigenvectors; one temp, the workspace.
void lowerEigh(Lowering &L, const ir::Op &op, size_t i) {
  const EighPlan e = eighPlan(L.prog, op, L.type(op.operands[0]).shape[0]);
  Instruction in = L.instruction(op, i, e);
  in.numResults = 2;
  in.out.push_back(L.newTemp(Type({e.lwork + e.iworkElems}), "work"));
  in.what = std::to_string(e.n) + "x" + std::to_string(e.n) + " dsyevd lwork=" + std::to_string(e.lwork);
  L.addInst(std::move(in));
}

/// Thin QR through dgeqrf and dorgqr (runtime/Factorizations.h); one temp: A's column-
/// major copy, the reflectors' scalars and the workspace.
void lowerQr(Lowering &L, const ir::Op &op, size_t i) {
  const Type &at = L.type(op.operands[0]);
  const QrPlan q = qrPlan(L.prog, op, at.shape[0], at.shape[1]);
  Instruction in = L.instruction(op, i, q);
  in.numResults = 2;
  in.out.push_back(L.newTemp(Type({std::max<int64_t>(1, qrWorkElems(q))}), "work"));
  in.what = std::to_string(q.m) + "x" + std::to_string(q.n) + " dgeqrf+dorgqr lwork=" + std::to_string(q.lwork);
  L.addInst(std::move(in));
}

/// A triangular solve through dtrsm on a copy of B written into X.
void lowerTriangularSolve(Lowering &L, const ir::Op &op, size_t i) {
  const Type &bt = L.type(op.operands[1]);
  TriangularSolvePlan t{L.type(op.operands[0]).shape[0], bt.shape[0], bt.shape[1],
                        ir::attr<OpKind::TriangularSolve, "left_side">(op) == 1, ir::attr<OpKind::TriangularSolve, "lower">(op) == 1,
                        ir::attr<OpKind::TriangularSolve, "transpose_a">(op) == 1};
  Instruction in = L.instruction(op, i, t);
  in.what = std::string(t.left ? "left" : "right") + (t.lower ? " lower" : " upper") +
            (t.transposeA ? " transposed" : "") + " dtrsm n=" + std::to_string(t.n) + " rhs " + bt.str();
  L.addInst(std::move(in));
}

// --- The table, in ops.def order --------------------------------------------------

struct Entry {
  OpKind kind;
  LowerRule rule;
};

constexpr Entry kLowerRules[] = {
    {OpKind::Constant, lowerConstant},
    {OpKind::Iota, lowerIota},
    {OpKind::Neg, lowerElementwise},
    {OpKind::Exp, lowerElementwise},
    {OpKind::Log, lowerElementwise},
    {OpKind::Sqrt, lowerElementwise},
    {OpKind::Sin, lowerElementwise},
    {OpKind::Cos, lowerElementwise},
    {OpKind::Tanh, lowerElementwise},
    {OpKind::Abs, lowerElementwise},
    {OpKind::Sign, lowerElementwise},
    {OpKind::Add, lowerElementwise},
    {OpKind::Sub, lowerElementwise},
    {OpKind::Mul, lowerElementwise},
    {OpKind::Div, lowerElementwise},
    {OpKind::Maximum, lowerElementwise},
    {OpKind::Compare, lowerElementwise},
    {OpKind::Select, lowerElementwise},
    {OpKind::ReduceSum, lowerReduce},
    {OpKind::ReduceMax, lowerReduce},
    {OpKind::BroadcastInDim, lowerBroadcastInDim},
    {OpKind::Reshape, lowerAlias},
    {OpKind::Transpose, lowerTranspose},
    {OpKind::Slice, lowerSlice},
    {OpKind::Pad, lowerPad},
    {OpKind::DotGeneral, lowerDotGeneral},
    {OpKind::Einsum, lowerEinsum},
    {OpKind::Svd, lowerSvd},
    {OpKind::SvdTopk, lowerSvdTopk},
    {OpKind::SvdTopkComplement, lowerSvdTopkComplement},
    {OpKind::Eigh, lowerEigh},
    {OpKind::Qr, lowerQr},
    {OpKind::TriangularSolve, lowerTriangularSolve},
    {OpKind::StopGradient, lowerAlias},
    {OpKind::Call, lowerRunsFunction},
    {OpKind::Scan, lowerRunsFunction},
};
static_assert(ir::coversEveryOpInOrder(kLowerRules),
              "the lowering table must have one entry per op of ir/ops.def, in its order");

/// Program outputs: a result written by an instruction goes straight into the
/// returned tensor (malloc-aligned rather than 64-byte aligned: OpenBLAS gemm and
/// gesdd give bitwise identical results for any 8-byte alignment of their arrays,
/// checked for n = 16..256); anything else (an input, a constant, an alias of one,
/// a value that is two outputs) is pinned and copied out at the end of the run.
void bindOutputs(Plan &P) {
  const ir::Program &prog = P.program;
  for (size_t i = 0; i < prog.outputs.size(); ++i) {
    const int32_t v = static_cast<int32_t>(prog.outputs[i]);
    P.outputValue.push_back(v);
    Group &g = P.groups[P.values[v].group];
    if (g.kind == GroupKind::Arena && g.producer >= 0) {
      g.kind = GroupKind::Output;
      g.index = static_cast<int64_t>(i);
    } else {
      g.pinned = true;
      P.finalCopies.push_back({static_cast<int32_t>(i), v});
    }
  }
}

/// Group::readers: every instruction reading a group, once, in list order.
void collectReaders(Plan &P) {
  for (size_t i = 0; i < P.insts.size(); ++i)
    for (int32_t v : P.insts[i].in) {
      auto &r = P.groups[P.values[v].group].readers;
      if (r.empty() || r.back() != static_cast<int32_t>(i)) r.push_back(static_cast<int32_t>(i));
    }
}

/// An svd whose U and Vt nobody reads computes singular values only (jobz = 'N'):
/// about half the work; s may then differ from a full SVD's in the last bits.
void selectSvdJobs(Plan &P) {
  auto unread = [&](int32_t v) {
    const Group &g = P.groups[P.values[v].group];
    return g.kind == GroupKind::Arena && !g.pinned && g.readers.empty();
  };
  for (Instruction &in : P.insts) {
    if (in.kernel() != Kernel::Svd || in.as<SvdPlan>().k == 0) continue;
    if (!unread(in.out[0]) || !unread(in.out[2])) continue;
    SvdPlan &s = in.as<SvdPlan>();
    s.valuesOnly = true;
    s.lwork = gesddWorkspace(P.program, P.srcOp(in), s, 'N');
    P.groups[P.values[in.out[0]].group].elems = 0; // no buffers for U and Vt
    P.groups[P.values[in.out[2]].group].elems = 0;
    Group &work = P.groups[P.values[in.out[3]].group];
    work.elems = s.lwork + s.iworkElems;
    P.values[in.out[3]].type = Type({work.elems});
    in.what = std::to_string(s.m) + "x" + std::to_string(s.n) +
              " gesdd singular values only (jobz=N) lwork=" + std::to_string(s.lwork);
  }
}

} // namespace

void lower(Plan &P, const Fusion &fusion) {
  Lowering L(P, fusion);
  const ir::Program &prog = P.program;
  // Program values first, with the same ids; temporaries follow.
  P.values.resize(prog.values.size());
  std::vector<std::string> names = ir::valueRefs(prog);
  for (size_t v = 0; v < prog.values.size(); ++v) {
    P.values[v].type = prog.values[v].type;
    P.values[v].irValue = static_cast<ir::ValueId>(v);
    P.values[v].name = std::move(names[v]);
  }
  for (size_t i = 0; i < prog.inputs.size(); ++i)
    P.values[prog.inputs[i]].group =
        L.newGroup(GroupKind::Input, static_cast<int64_t>(i), prog.type(prog.inputs[i]).numel());
  for (size_t i = 0; i < prog.ops.size(); ++i)
    kLowerRules[static_cast<size_t>(prog.ops[i].kind)].rule(L, prog.ops[i], i);
  bindOutputs(P);
  collectReaders(P);
  selectSvdJobs(P);
}

} // namespace prep
} // namespace tessel::rt
