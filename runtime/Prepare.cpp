//===- runtime/Prepare.cpp - Lowering a Program to a Plan ----------------------===//
//
// prepare() runs once per program, outside run():
//   1. lower ops to kernel instructions with every data-independent quantity
//      precomputed (copy strides, GEMM form and dimensions, gesdd workspace size);
//      reshape, stop_gradient and no-op shape ops become aliases (no instruction);
//      constants and iota tables become plan-owned data;
//   2. bind program outputs: a result written by an instruction goes straight into
//      the returned tensor;
//   3. dependencies between instructions (producer -> reader);
//   4. liveness and slot assignment: a slot is reused once every reader of its
//      previous occupant is an ancestor of the new writer in the dependency graph,
//      so reuse never adds an edge and never serialises independent ops (for very
//      large programs, where ancestor sets would be too big, reuse adds the
//      write-after-read edges instead); elementwise ops and gesdd work in place on
//      an operand that dies there;
//   5. arena layout (64-byte aligned slots), peak live bytes.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <queue>
#include <sstream>

#include <unistd.h>

#include <lapacke.h>
#include <nlohmann/json.hpp>

#include "ir/Diagnostics.h"
#include "ir/Verifier.h"
#include "runtime/Plan.h"

namespace tessel::rt {

const char *kernelName(Kernel k) {
  switch (k) {
  case Kernel::Elementwise: return "elementwise";
  case Kernel::Reduce: return "reduce";
  case Kernel::Copy: return "copy";
  case Kernel::Pad: return "pad";
  case Kernel::Gemm: return "gemm";
  case Kernel::Svd: return "svd";
  }
  return "?";
}

namespace {

using ir::OpKind;
using ir::Type;

std::vector<int64_t> rowMajorStrides(llvm::ArrayRef<int64_t> shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * shape[d + 1];
  return st;
}

std::string listStr(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(v[i]);
  }
  return s + "]";
}

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

/// Chunks of a copy (fixed by the shapes, never by the width).
int32_t copyChunks(const CopyPlan &c) {
  int64_t units = c.tileDim >= 0 ? c.outerCount : c.rows;
  if (units <= 0) return 1;
  return static_cast<int32_t>((units + c.perChunk - 1) / c.perChunk);
}

int32_t chunksFor(int64_t total, int64_t per) {
  if (total <= 0) return 1;
  return static_cast<int32_t>((total + per - 1) / per);
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

class Preparer {
public:
  Preparer(Plan &plan) : P(plan), prog(plan.program) {}

  void run() {
    lower();
    bindOutputs();
    collectReaders();
    selectSvdJobs();
    computePreds();
    allocate();
    finishSchedule();
  }

private:
  Plan &P;
  const ir::Program &prog;
  std::vector<std::vector<int32_t>> preds; // per instruction, deduplicated

  int32_t newGroup(GroupKind kind, int64_t index, int64_t elems) {
    Group g;
    g.kind = kind;
    g.index = index;
    g.elems = elems;
    P.groups.push_back(std::move(g));
    return static_cast<int32_t>(P.groups.size() - 1);
  }
  int32_t newTemp(const Type &t, const std::string &name) {
    PlanValue v;
    v.type = t;
    v.name = name;
    P.values.push_back(std::move(v));
    return static_cast<int32_t>(P.values.size() - 1);
  }
  int32_t groupOf(int32_t v) const { return P.values[v].group; }
  void alias(ir::ValueId result, ir::ValueId operand) {
    P.values[result].group = P.values[operand].group;
  }
  /// Adds an instruction writing fresh arena groups for each of its `out` values.
  int32_t addInst(Instruction inst) {
    int32_t id = static_cast<int32_t>(P.insts.size());
    for (int32_t v : inst.out) {
      P.values[v].group = newGroup(GroupKind::Arena, -1, P.values[v].type.numel());
      P.groups[P.values[v].group].producer = id;
    }
    if (inst.numResults == 0) inst.numResults = static_cast<int32_t>(inst.out.size());
    inst.numel = inst.out.empty() ? 0 : P.values[inst.out[0]].type.numel();
    P.insts.push_back(std::move(inst));
    return id;
  }
  Instruction base(const ir::Op &op, size_t opIndex, Kernel k) {
    Instruction in;
    in.kernel = k;
    in.op = op.kind;
    in.srcOp = static_cast<int32_t>(opIndex);
    for (ir::ValueId v : op.operands) in.in.push_back(static_cast<int32_t>(v));
    for (ir::ValueId v : op.results) in.out.push_back(static_cast<int32_t>(v));
    return in;
  }
  int32_t constantGroup(const double *data, int64_t elems) {
    P.constants.push_back(data);
    return newGroup(GroupKind::Constant, static_cast<int64_t>(P.constants.size() - 1), elems);
  }

  void lower() {
    // Program values first, with the same ids.
    P.values.resize(prog.values.size());
    for (size_t v = 0; v < prog.values.size(); ++v) {
      P.values[v].type = prog.values[v].type;
      P.values[v].irValue = static_cast<ir::ValueId>(v);
      P.values[v].name = valueDisplayName(prog, static_cast<ir::ValueId>(v));
    }
    for (size_t i = 0; i < prog.inputs.size(); ++i)
      P.values[prog.inputs[i]].group =
          newGroup(GroupKind::Input, static_cast<int64_t>(i), prog.type(prog.inputs[i]).numel());
    for (size_t i = 0; i < prog.ops.size(); ++i) lowerOp(prog.ops[i], i);
  }

  void lowerOp(const ir::Op &op, size_t i) {
    const auto &a = op.attrs;
    ir::ValueId r0 = op.results.empty() ? ir::kNoValue : op.results[0];
    switch (op.kind) {
    case OpKind::Constant: {
      const Tensor &t = a.getTensor("value");
      P.values[r0].group = constantGroup(t.data.data(), t.type.numel());
      return;
    }
    case OpKind::Iota: {
      const Type &t = prog.type(r0);
      int64_t dim = a.getI64("dim");
      std::vector<double> data(static_cast<size_t>(t.numel()));
      auto st = rowMajorStrides(t.shape);
      for (int64_t k = 0; k < t.numel(); ++k)
        data[k] = static_cast<double>((k / st[dim]) % t.shape[dim]);
      P.ownedConstants.push_back(std::move(data));
      P.values[r0].group = constantGroup(P.ownedConstants.back().data(), t.numel());
      return;
    }
    case OpKind::Neg: case OpKind::Exp: case OpKind::Log: case OpKind::Sqrt:
    case OpKind::Sin: case OpKind::Cos: case OpKind::Abs: case OpKind::Sign:
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div:
    case OpKind::Maximum: case OpKind::Compare: case OpKind::Select: {
      Instruction in = base(op, i, Kernel::Elementwise);
      if (op.kind == OpKind::Compare) in.cmp = parseCompareDirection(a.getStr("direction"));
      int64_t n = prog.type(r0).numel();
      in.nchunks = chunksFor(n, kChunkElems);
      in.what = std::string(ir::opName(op.kind)) + " n=" + std::to_string(n);
      addInst(std::move(in));
      return;
    }
    case OpKind::StopGradient:
    case OpKind::Reshape:
      alias(r0, op.operands[0]);
      return;
    case OpKind::ReduceSum:
    case OpKind::ReduceMax: lowerReduce(op, i); return;
    case OpKind::BroadcastInDim: {
      const Type &it = prog.type(op.operands[0]), &ot = prog.type(r0);
      if (it.numel() == ot.numel()) {
        alias(r0, op.operands[0]);
        return;
      }
      const auto &dims = a.getI64s("dims");
      auto ist = rowMajorStrides(it.shape);
      std::vector<int64_t> shape(ot.shape.begin(), ot.shape.end()), stride(ot.rank(), 0);
      for (int d = 0; d < it.rank(); ++d)
        if (it.shape[d] != 1) stride[dims[d]] = ist[d];
      emitCopy(op, i, shape, stride, 0, "broadcast " + it.str() + " -> " + ot.str());
      return;
    }
    case OpKind::Transpose: {
      const Type &it = prog.type(op.operands[0]), &ot = prog.type(r0);
      const auto &perm = a.getI64s("perm");
      std::vector<int64_t> order(perm.begin(), perm.end());
      if (isMemoryOrder(order, it.shape)) {
        alias(r0, op.operands[0]);
        return;
      }
      auto ist = rowMajorStrides(it.shape);
      std::vector<int64_t> shape(ot.shape.begin(), ot.shape.end()), stride;
      for (int64_t p : perm) stride.push_back(ist[p]);
      emitCopy(op, i, shape, stride, 0, "transpose perm=" + listStr(order));
      return;
    }
    case OpKind::Slice: {
      const Type &it = prog.type(op.operands[0]), &ot = prog.type(r0);
      if (it == ot) {
        alias(r0, op.operands[0]);
        return;
      }
      const auto &start = a.getI64s("start");
      auto ist = rowMajorStrides(it.shape);
      int64_t baseOff = 0;
      for (int d = 0; d < it.rank(); ++d) baseOff += start[d] * ist[d];
      std::vector<int64_t> shape(ot.shape.begin(), ot.shape.end());
      emitCopy(op, i, shape, ist, baseOff,
               "slice start=" + listStr(std::vector<int64_t>(start.begin(), start.end())));
      return;
    }
    case OpKind::Pad: {
      const Type &it = prog.type(op.operands[0]), &ot = prog.type(r0);
      if (it == ot) {
        alias(r0, op.operands[0]);
        return;
      }
      Instruction in = base(op, i, Kernel::Pad);
      PadPlan &p = in.pad;
      const auto &low = a.getI64s("low");
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
      p.rows = 1;
      for (size_t d = 0; d + 1 < p.outShape.size(); ++d) p.rows *= p.outShape[d];
      in.nchunks = chunksFor(p.rows, std::max<int64_t>(1, kChunkElems / std::max<int64_t>(1, p.outShape.back())));
      in.what = "pad " + it.str() + " -> " + ot.str();
      addInst(std::move(in));
      return;
    }
    case OpKind::DotGeneral: lowerDot(op, i); return;
    case OpKind::Einsum:
      throw Error("error: prepare: " + describeOp(prog, op) + ": einsum must be lowered by the "
                  "order pass before prepare (e.g. `tessel opt --passes=order`); the runtime "
                  "executes only pairwise contractions (dot_general)");
    case OpKind::Svd: lowerSvd(op, i); return;
    }
    throw Error("error: prepare: no kernel for op " + describeOp(prog, op));
  }

  void emitCopy(const ir::Op &op, size_t i, std::vector<int64_t> shape, std::vector<int64_t> stride,
                int64_t baseOff, std::string what) {
    Instruction in = base(op, i, Kernel::Copy);
    in.copy = makeCopy(std::move(shape), std::move(stride), baseOff);
    in.nchunks = copyChunks(in.copy);
    in.what = std::move(what);
    addInst(std::move(in));
  }

  void lowerReduce(const ir::Op &op, size_t i) {
    const Type &it = prog.type(op.operands[0]);
    ir::ValueId r0 = op.results[0];
    const auto &axes = op.attrs.getI64s("axes");
    std::vector<bool> red(it.rank(), false);
    int64_t redElems = 1;
    for (int64_t ax : axes) {
      red[ax] = true;
      redElems *= it.shape[ax];
    }
    if (redElems == 1 && it.numel() > 0) { // nothing to combine: same data
      alias(r0, op.operands[0]);
      return;
    }
    Instruction in = base(op, i, Kernel::Reduce);
    ReducePlan &R = in.reduce;
    R.isMax = op.kind == OpKind::ReduceMax;
    auto ist = rowMajorStrides(it.shape);
    for (int d = 0; d < it.rank(); ++d) {
      (red[d] ? R.redShape : R.keptShape).push_back(it.shape[d]);
      (red[d] ? R.redStride : R.keptStride).push_back(ist[d]);
    }
    R.outElems = prog.type(r0).numel();
    R.redElems = redElems;
    bool emptyRed = redElems == 0;
    coalesce(R.keptShape, R.keptStride);
    coalesce(R.redShape, R.redStride);
    if (emptyRed) {
      R.redShape = {0};
      R.redStride = {0};
    }
    R.outPerChunk = std::max<int64_t>(1, kChunkElems / std::max<int64_t>(1, redElems));
    in.nchunks = chunksFor(R.outElems, R.outPerChunk);
    std::vector<int64_t> ax(axes.begin(), axes.end());
    in.what = std::string(R.isMax ? "max" : "sum") + " over " + listStr(ax) + " of " + it.str();
    addInst(std::move(in));
  }

  void lowerDot(const ir::Op &op, size_t i) {
    const auto &a = op.attrs;
    ir::ValueId lv = op.operands[0], rv = op.operands[1];
    const Type &lt = prog.type(lv), &rtt = prog.type(rv);
    std::vector<int64_t> lb(a.getI64s("lhs_batch").begin(), a.getI64s("lhs_batch").end());
    std::vector<int64_t> rb(a.getI64s("rhs_batch").begin(), a.getI64s("rhs_batch").end());
    std::vector<int64_t> lc(a.getI64s("lhs_contract").begin(), a.getI64s("lhs_contract").end());
    std::vector<int64_t> rc(a.getI64s("rhs_contract").begin(), a.getI64s("rhs_contract").end());
    auto freeDims = [](int rank, const std::vector<int64_t> &b, const std::vector<int64_t> &c) {
      std::vector<int64_t> f;
      for (int d = 0; d < rank; ++d)
        if (std::find(b.begin(), b.end(), d) == b.end() && std::find(c.begin(), c.end(), d) == c.end())
          f.push_back(d);
      return f;
    };
    auto lf = freeDims(lt.rank(), lb, lc), rf = freeDims(rtt.rank(), rb, rc);
    auto cat = [](std::initializer_list<const std::vector<int64_t> *> parts) {
      std::vector<int64_t> r;
      for (auto *p : parts) r.insert(r.end(), p->begin(), p->end());
      return r;
    };
    // Candidate orders of the contracted pairs: as given, by lhs dim, by rhs dim.
    size_t nc = lc.size();
    std::vector<std::vector<size_t>> orders(3, std::vector<size_t>(nc));
    for (auto &o : orders) std::iota(o.begin(), o.end(), 0);
    std::sort(orders[1].begin(), orders[1].end(), [&](size_t x, size_t y) { return lc[x] < lc[y]; });
    std::sort(orders[2].begin(), orders[2].end(), [&](size_t x, size_t y) { return rc[x] < rc[y]; });
    struct Choice {
      std::vector<int64_t> lcP, rcP;
      bool lOk = false, rOk = false, transA = false, transB = false;
      int64_t cost = 0;
    } best;
    best.cost = -1;
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
    Instruction in = base(op, i, Kernel::Gemm);
    std::string notes;
    // Operands not in GEMM form are transposed into temporaries first.
    auto transposeTo = [&](ir::ValueId v, const std::vector<int64_t> &order, const char *side) {
      const Type &t = prog.type(v);
      Type tt;
      for (int64_t d : order) tt.shape.push_back(t.shape[d]);
      int32_t tmp = newTemp(tt, "tmp" + std::to_string(P.values.size()));
      Instruction c = base(op, i, Kernel::Copy);
      c.in = {static_cast<int32_t>(v)};
      c.out = {tmp};
      auto ist = rowMajorStrides(t.shape);
      std::vector<int64_t> shape, stride;
      for (int64_t d : order) {
        shape.push_back(t.shape[d]);
        stride.push_back(ist[d]);
      }
      c.copy = makeCopy(shape, stride, 0);
      c.nchunks = copyChunks(c.copy);
      c.what = std::string("dot_general ") + side + " to GEMM form perm=" + listStr(order);
      addInst(std::move(c));
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
    GemmPlan &g = in.gemm;
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
    double perBatch = 2.0 * static_cast<double>(g.M) * static_cast<double>(g.N) * static_cast<double>(g.K);
    g.flops = perBatch * static_cast<double>(g.batch);
    if (g.flops < kGemmSplitFlops || perBatch < kGemmChunkFlops) {
      // Whole batches per chunk.
      int64_t bpc = g.flops < kGemmSplitFlops
                        ? std::max<int64_t>(1, g.batch)
                        : std::max<int64_t>(1, static_cast<int64_t>(kGemmChunkFlops / std::max(1.0, perBatch)));
      g.batchesPerChunk = bpc;
      in.nchunks = chunksFor(g.batch, bpc);
    } else {
      // About kGemmChunkFlops per chunk, rows a multiple of 8 (whole register tiles;
      // fewer, larger calls: each call repacks the rhs).
      int64_t want = std::max<int64_t>(1, std::llround(perBatch / kGemmChunkFlops));
      int64_t rows = (g.M + want - 1) / want;
      g.rowsPerChunk = std::min<int64_t>(std::max<int64_t>(1, g.M), (rows + 7) / 8 * 8);
      g.chunksPerBatch = chunksFor(g.M, g.rowsPerChunk);
      in.nchunks = static_cast<int32_t>(g.batch * g.chunksPerBatch);
    }
    in.what = "B=" + std::to_string(g.batch) + " M=" + std::to_string(g.M) + " N=" +
              std::to_string(g.N) + " K=" + std::to_string(g.K) + " " + (g.transA ? "T" : "N") +
              (g.transB ? "T" : "N") + notes;
    addInst(std::move(in));
  }

  void lowerSvd(const ir::Op &op, size_t i) {
    const Type &at = prog.type(op.operands[0]);
    Instruction in = base(op, i, Kernel::Svd);
    SvdPlan &s = in.svd;
    s.m = at.shape[0];
    s.n = at.shape[1];
    s.k = std::min(s.m, s.n);
    if (s.k > 0) {
      double wq = 0, dummy = 0;
      lapack_int idummy = 0;
      lapack_int info = LAPACKE_dgesdd_work(
          LAPACK_COL_MAJOR, 'S', static_cast<lapack_int>(s.n), static_cast<lapack_int>(s.m), &dummy,
          static_cast<lapack_int>(s.n), &dummy, &dummy, static_cast<lapack_int>(s.n), &dummy,
          static_cast<lapack_int>(s.k), &wq, -1, &idummy);
      if (info != 0) throw Error(svdFailureMessage(prog, op, info));
      s.lwork = std::max<int64_t>(1, static_cast<int64_t>(wq));
      s.iworkElems = (8 * s.k * static_cast<int64_t>(sizeof(lapack_int)) + 7) / 8;
    }
    in.numResults = 3;
    in.out.push_back(newTemp(Type({s.lwork + s.iworkElems}), "work" + std::to_string(P.values.size())));
    in.out.push_back(newTemp(Type({s.k > 0 ? s.m * s.n : 0}), "acopy" + std::to_string(P.values.size())));
    in.what = std::to_string(s.m) + "x" + std::to_string(s.n) + " gesdd lwork=" + std::to_string(s.lwork);
    addInst(std::move(in));
  }

  void bindOutputs() {
    for (size_t i = 0; i < prog.outputs.size(); ++i) {
      int32_t v = static_cast<int32_t>(prog.outputs[i]);
      P.outputValue.push_back(v);
      Group &g = P.groups[groupOf(v)];
      // Written straight into the returned tensor (malloc-aligned rather than 64-byte
      // aligned: OpenBLAS gemm and gesdd give bitwise identical results for any 8-byte
      // alignment of their arrays, checked for n = 16..256).
      bool direct = g.kind == GroupKind::Arena && g.producer >= 0;
      if (direct) {
        g.kind = GroupKind::Output;
        g.index = static_cast<int64_t>(i);
      } else {
        g.pinned = true;
        P.finalCopies.push_back({static_cast<int32_t>(i), v});
      }
    }
  }

  /// An SVD whose U and Vt nobody reads computes singular values only (jobz = 'N').
  void selectSvdJobs() {
    for (Instruction &in : P.insts) {
      if (in.kernel != Kernel::Svd || in.svd.k == 0) continue;
      auto dead = [&](int32_t v) {
        const Group &g = P.groups[groupOf(v)];
        return g.kind == GroupKind::Arena && !g.pinned && g.readers.empty();
      };
      if (!dead(in.out[0]) || !dead(in.out[2])) continue;
      SvdPlan &s = in.svd;
      double wq = 0, dummy = 0;
      lapack_int idummy = 0;
      lapack_int info = LAPACKE_dgesdd_work(LAPACK_COL_MAJOR, 'N', static_cast<lapack_int>(s.n),
                                            static_cast<lapack_int>(s.m), &dummy,
                                            static_cast<lapack_int>(s.n), &dummy, &dummy, 1, &dummy,
                                            1, &wq, -1, &idummy);
      if (info != 0) throw Error(svdFailureMessage(prog, P.srcOp(in), info));
      s.valuesOnly = true;
      s.lwork = std::max<int64_t>(1, static_cast<int64_t>(wq));
      P.groups[groupOf(in.out[0])].elems = 0; // no buffers for U and Vt
      P.groups[groupOf(in.out[2])].elems = 0;
      Group &work = P.groups[groupOf(in.out[3])];
      work.elems = s.lwork + s.iworkElems;
      P.values[in.out[3]].type = Type({work.elems});
      in.what = std::to_string(s.m) + "x" + std::to_string(s.n) +
                " gesdd singular values only (jobz=N) lwork=" + std::to_string(s.lwork);
    }
  }

  void collectReaders() {
    for (size_t i = 0; i < P.insts.size(); ++i)
      for (int32_t v : P.insts[i].in) {
        auto &r = P.groups[groupOf(v)].readers;
        if (r.empty() || r.back() != static_cast<int32_t>(i)) r.push_back(static_cast<int32_t>(i));
      }
  }

  void computePreds() {
    preds.assign(P.insts.size(), {});
    for (size_t i = 0; i < P.insts.size(); ++i)
      for (int32_t v : P.insts[i].in) {
        int32_t p = P.groups[groupOf(v)].producer;
        if (p >= 0 && std::find(preds[i].begin(), preds[i].end(), p) == preds[i].end())
          preds[i].push_back(p);
      }
  }

  // --- Liveness and slots ----------------------------------------------------------
  struct FreeSlot {
    int64_t slot;
    std::vector<int32_t> release; // instructions that must have run before reuse
  };
  std::vector<uint64_t> anc; // ancestor bitsets, row per instruction
  size_t words = 0;

  bool isAncestor(int32_t a, int32_t of) const {
    return (anc[static_cast<size_t>(of) * words + a / 64] >> (a % 64)) & 1u;
  }
  /// True if every instruction of `set` except `self` has run before `i` starts.
  bool allBefore(const std::vector<int32_t> &set, int32_t i, int32_t self = -2) const {
    if (!P.usedAncestors) return true;
    for (int32_t r : set)
      if (r != self && !isAncestor(r, i)) return false;
    return true;
  }
  /// The distinct groups an instruction reads (an operand may appear twice: x * x).
  /// Group::readers lists each reader once, so liveness counts must too.
  llvm::SmallVector<int32_t, 4> operandGroups(const Instruction &inst) const {
    llvm::SmallVector<int32_t, 4> gs;
    for (int32_t v : inst.in) {
      int32_t g = groupOf(v);
      if (std::find(gs.begin(), gs.end(), g) == gs.end()) gs.push_back(g);
    }
    return gs;
  }

  /// Programs with more instructions use list-order slots and WAR edges instead of
  /// ancestor sets (n² / 8 bytes).
  static constexpr size_t kMaxAncestorInsts = 16384;

  void addEdges(const std::vector<int32_t> &set, int32_t i) {
    if (P.usedAncestors) return;
    for (int32_t r : set)
      if (r != i && std::find(preds[i].begin(), preds[i].end(), r) == preds[i].end())
        preds[i].push_back(r);
  }

  void allocate() {
    size_t n = P.insts.size();
    P.usedAncestors = P.options.reuseBuffers && n <= kMaxAncestorInsts;
    if (P.usedAncestors) {
      words = (n + 63) / 64;
      anc.assign(n * words, 0);
      for (size_t i = 0; i < n; ++i)
        for (int32_t p : preds[i]) {
          uint64_t *dst = &anc[i * words];
          const uint64_t *src = &anc[static_cast<size_t>(p) * words];
          for (size_t w = 0; w < words; ++w) dst[w] |= src[w];
          dst[p / 64] |= uint64_t(1) << (p % 64);
        }
    }
    if (P.options.reuseBuffers && !P.usedAncestors) allocateListOrder();
    else allocateGreedy();
  }

  // --- Critical-path times (infinite width) for harmless write-after-read edges ----
  std::vector<double> cost, est, lst;
  std::vector<std::vector<int32_t>> succDyn;
  double makespan = 0;

  static double instCost(const Instruction &in) {
    double c = 200; // dispatch
    switch (in.kernel) {
    case Kernel::Svd:
      c += 10.0 * static_cast<double>(in.svd.m) * static_cast<double>(in.svd.n) *
           static_cast<double>(std::max<int64_t>(1, in.svd.k));
      break;
    case Kernel::Gemm: c += in.gemm.flops; break;
    case Kernel::Reduce: c += static_cast<double>(in.reduce.outElems * std::max<int64_t>(1, in.reduce.redElems)); break;
    default: c += static_cast<double>(in.numel); break;
    }
    return c;
  }
  void computeTimes() {
    size_t n = P.insts.size();
    if (cost.size() != n) {
      cost.resize(n);
      for (size_t i = 0; i < n; ++i) cost[i] = instCost(P.insts[i]);
      succDyn.assign(n, {});
      for (size_t i = 0; i < n; ++i)
        for (int32_t p : preds[i]) succDyn[p].push_back(static_cast<int32_t>(i));
    }
    est.assign(n, 0);
    makespan = 0;
    for (size_t i = 0; i < n; ++i) {
      for (int32_t p : preds[i]) est[i] = std::max(est[i], est[p] + cost[p]);
      makespan = std::max(makespan, est[i] + cost[i]);
    }
    lst.assign(n, 0);
    for (size_t i = n; i-- > 0;) {
      double lf = makespan;
      for (int32_t s : succDyn[i]) lf = std::min(lf, lst[s]);
      lst[i] = lf - cost[i];
    }
  }
  /// An edge u -> d keeps the list order topological and does not delay the end.
  bool harmless(int32_t u, int32_t d) const {
    return u < d && est[u] + cost[u] <= lst[d] + 1e-9 * makespan;
  }
  /// Adds harmless edges from every `u` of `from` to `d` and updates the times
  /// incrementally (earliest starts after d, latest starts before each u).
  void addEdgesInto(const std::vector<int32_t> &from, int32_t d) {
    double e = est[d];
    for (int32_t u : from) {
      if (u == d || std::find(preds[d].begin(), preds[d].end(), u) != preds[d].end()) continue;
      preds[d].push_back(u);
      succDyn[u].push_back(d);
      e = std::max(e, est[u] + cost[u]);
      lowerLatestStart(u, lst[d] - cost[u]);
    }
    if (e > est[d]) raiseEarliestStart(d, e);
  }
  void raiseEarliestStart(int32_t d, double e) {
    est[d] = e;
    std::priority_queue<int32_t, std::vector<int32_t>, std::greater<int32_t>> q; // list order
    std::vector<int32_t> queued;
    for (int32_t s : succDyn[d]) q.push(s);
    while (!q.empty()) {
      int32_t j = q.top();
      q.pop();
      if (!queued.empty() && queued.back() == j) continue; // duplicate
      queued.push_back(j);
      double ne = 0;
      for (int32_t p : preds[j]) ne = std::max(ne, est[p] + cost[p]);
      if (ne > est[j]) {
        est[j] = ne;
        for (int32_t s : succDyn[j]) q.push(s);
      }
    }
  }
  void lowerLatestStart(int32_t u, double l) {
    if (l >= lst[u]) return;
    lst[u] = l;
    std::priority_queue<int32_t> q; // reverse list order
    std::vector<int32_t> queued;
    for (int32_t p : preds[u]) q.push(p);
    while (!q.empty()) {
      int32_t j = q.top();
      q.pop();
      if (!queued.empty() && queued.back() == j) continue;
      queued.push_back(j);
      double lf = makespan;
      for (int32_t s : succDyn[j]) lf = std::min(lf, lst[s]);
      if (lf - cost[j] < lst[j]) {
        lst[j] = lf - cost[j];
        for (int32_t p : preds[j]) q.push(p);
      }
    }
  }

  /// A buffer of the arena: one group, or a chain of groups computed in place.
  struct Buf {
    int64_t elems = 0;
    int32_t def = -1;             ///< first writer
    std::vector<int32_t> uses;    ///< writers and readers of every group in the chain
    bool pinned = false;          ///< read by a final output copy: lives to the end
    int64_t offset = 0;
  };

  /// X is entirely before Y: every use of X has run before Y's first writer starts.
  bool before(const Buf &X, const Buf &Y) const {
    if (X.pinned) return false;
    for (int32_t u : X.uses)
      if (!isAncestor(u, Y.def)) return false;
    return true;
  }

  /// A can be made entirely before B by harmless edges from every use of A to B's
  /// first writer.
  bool orderable(const Buf &A, const Buf &B) const {
    if (A.pinned) return false;
    for (int32_t u : A.uses)
      if (!isAncestor(u, B.def) && !harmless(u, B.def)) return false;
    return true;
  }

  /// Ancestor-based reuse (TFLite-style greedy by size): two buffers may share memory
  /// only if one is entirely before the other in the dependency order, so reuse never
  /// adds an edge and never serialises independent instructions. In-place: an
  /// elementwise result takes the buffer of an operand that dies there; gesdd
  /// overwrites an operand that dies there.
  void allocateGreedy() {
    bool reuse = P.options.reuseBuffers;
    size_t ng = P.groups.size();
    std::vector<int32_t> bufOf(ng, -1);
    std::vector<bool> consumed(ng, false), skip(ng, false);
    std::vector<Buf> bufs;
    // True if operand group h of i dies at i: every other reader ran before i.
    // (Not with a value check: the check reports whether the operands were finite, so they
    // must survive the op.)
    auto diesAt = [&](int32_t h, int32_t i) {
      const Group &g = P.groups[h];
      if (!reuse || P.options.valueCheck != ValueCheck::Off || g.kind != GroupKind::Arena || g.pinned || bufOf[h] < 0 ||
          consumed[h])
        return false;
      for (int32_t r : g.readers)
        if (r != i && !isAncestor(r, i)) return false;
      return true;
    };
    for (size_t ii = 0; ii < P.insts.size(); ++ii) {
      int32_t i = static_cast<int32_t>(ii);
      Instruction &inst = P.insts[ii];
      if (inst.kernel == Kernel::Svd && inst.svd.k > 0 && diesAt(groupOf(inst.in[0]), i)) {
        inst.svd.inPlace = true;
        consumed[groupOf(inst.in[0])] = true;
        skip[groupOf(inst.out[4])] = true;
      }
      for (size_t k = 0; k < inst.out.size(); ++k) {
        int32_t g = groupOf(inst.out[k]);
        const Group &G = P.groups[g];
        if (G.kind != GroupKind::Arena || skip[g] || G.elems == 0) continue;
        if (inst.kernel == Kernel::Elementwise && k == 0) {
          for (int32_t v : inst.in) {
            int32_t h = groupOf(v);
            if (P.groups[h].elems == G.elems && diesAt(h, i)) {
              bufOf[g] = bufOf[h];
              consumed[h] = true;
              inst.inPlace = true;
              Buf &B = bufs[bufOf[g]];
              B.uses.insert(B.uses.end(), G.readers.begin(), G.readers.end());
              B.pinned |= G.pinned;
              break;
            }
          }
          if (bufOf[g] >= 0) continue;
        }
        Buf B;
        B.elems = (G.elems + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
        B.def = i;
        B.uses = G.readers;
        B.uses.push_back(i);
        B.pinned = G.pinned;
        bufOf[g] = static_cast<int32_t>(bufs.size());
        bufs.push_back(std::move(B));
      }
    }
    // Peak live bytes in list order (inputs and constants excluded).
    {
      std::vector<int64_t> remaining(ng);
      for (size_t g = 0; g < ng; ++g) remaining[g] = static_cast<int64_t>(P.groups[g].readers.size());
      int64_t live = 0;
      auto counted = [&](int32_t g) {
        const Group &G = P.groups[g];
        return G.kind == GroupKind::Output || (G.kind == GroupKind::Arena && bufOf[g] >= 0);
      };
      for (size_t ii = 0; ii < P.insts.size(); ++ii) {
        const Instruction &inst = P.insts[ii];
        for (int32_t v : inst.out) {
          int32_t g = groupOf(v);
          if (counted(g)) live += P.groups[g].elems;
        }
        // An in-place result replaces its operand: count the operand dead now.
        if (inst.inPlace)
          for (int32_t v : inst.in)
            if (consumed[groupOf(v)] && remaining[groupOf(v)] == 1 &&
                bufOf[groupOf(v)] == bufOf[groupOf(inst.out[0])]) {
              live -= P.groups[groupOf(v)].elems;
              remaining[groupOf(v)] = -1; // already subtracted
              break;
            }
        P.peakLiveBytes = std::max(P.peakLiveBytes, live * 8);
        for (int32_t g : operandGroups(inst)) {
          if (remaining[g] > 0 && --remaining[g] == 0 && counted(g) &&
              P.groups[g].kind == GroupKind::Arena && !P.groups[g].pinned)
            live -= P.groups[g].elems;
        }
        for (int32_t v : inst.out) {
          int32_t g = groupOf(v);
          if (P.groups[g].readers.empty() && counted(g) && P.groups[g].kind == GroupKind::Arena &&
              !P.groups[g].pinned)
            live -= P.groups[g].elems;
        }
      }
    }
    // Greedy by size: largest first, at the lowest offset not overlapping a buffer it
    // conflicts with. Two buffers that are not ordered by the dependencies may still
    // share memory if a write-after-read edge can order them without lengthening the
    // critical path (the edge's source finishes before the latest start of its target
    // in the infinite-width schedule): such edges only delay ops that have slack, e.g.
    // backward-pass values that depend on forward residuals alone, never the two SVDs
    // of a TRG step against each other. Edges are used only when they save memory.
    computeTimes();
    std::vector<int32_t> order(bufs.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return bufs[a].elems > bufs[b].elems; });
    std::vector<int32_t> placed, forced;
    std::vector<std::pair<int64_t, int64_t>> busyHard, busyAll;
    std::vector<std::pair<int32_t, bool>> cands; // (buffer, true = it goes before X)
    int64_t arena = 0;
    auto lowestGap = [](std::vector<std::pair<int64_t, int64_t>> &busy, int64_t size) {
      std::sort(busy.begin(), busy.end());
      int64_t off = 0;
      for (const auto &[b, e] : busy) {
        if (b - off >= size) break;
        off = std::max(off, e);
      }
      return off;
    };
    for (int32_t x : order) {
      Buf &X = bufs[x];
      forced.clear();
      for (;;) {
        busyHard.clear();
        busyAll.clear();
        cands.clear();
        for (int32_t y : placed) {
          const Buf &Y = bufs[y];
          std::pair<int64_t, int64_t> iv{Y.offset, Y.offset + Y.elems};
          if (reuse && (before(X, Y) || before(Y, X))) continue;
          busyAll.push_back(iv);
          bool isForced = std::find(forced.begin(), forced.end(), y) != forced.end();
          if (reuse && !isForced && orderable(Y, X)) cands.push_back({y, true});
          else if (reuse && !isForced && orderable(X, Y)) cands.push_back({y, false});
          else busyHard.push_back(iv);
        }
        int64_t offAll = lowestGap(busyAll, X.elems);
        int64_t offHard = lowestGap(busyHard, X.elems);
        if (offAll + X.elems <= std::max(arena, offHard + X.elems)) {
          X.offset = offAll; // no growth without edges: no edges
          break;
        }
        bool ok = true;
        for (const auto &[y, yFirst] : cands) {
          const Buf &Y = bufs[y];
          if (Y.offset >= offHard + X.elems || Y.offset + Y.elems <= offHard) continue;
          const Buf &A = yFirst ? Y : X, &B = yFirst ? X : Y;
          if (!orderable(A, B)) { // slack used up by edges added just before
            forced.push_back(y);
            ok = false;
            break;
          }
          addEdgesInto(A.uses, B.def);
        }
        if (ok) {
          X.offset = offHard;
          break;
        }
      }
      arena = std::max(arena, X.offset + X.elems);
      placed.push_back(x);
    }
    for (const Buf &B : bufs) {
      P.slotOffset.push_back(B.offset);
      P.slotElems.push_back(B.elems);
    }
    for (size_t g = 0; g < ng; ++g)
      if (P.groups[g].kind == GroupKind::Arena) P.groups[g].index = bufOf[g];
    P.arenaElems = arena;
  }

  /// Fallback for programs too large for ancestor sets: slots assigned in list order
  /// (a slot is reused once the last reader, in list order, of its occupant has run),
  /// with write-after-read edges added so that the parallel schedule respects reuse.
  void allocateListOrder() {
    size_t n = P.insts.size();
    std::vector<int64_t> slotOf(P.groups.size(), -1);
    std::vector<int64_t> remaining(P.groups.size());
    std::vector<bool> transferred(P.groups.size(), false), skip(P.groups.size(), false);
    for (size_t g = 0; g < P.groups.size(); ++g)
      remaining[g] = static_cast<int64_t>(P.groups[g].readers.size());
    std::vector<FreeSlot> freeSlots;
    int64_t live = 0;

    auto release = [&](int32_t g, std::vector<int32_t> set) {
      if (P.groups[g].kind != GroupKind::Arena || slotOf[g] < 0 || P.groups[g].pinned) return;
      live -= P.groups[g].elems;
      if (transferred[g]) return; // the slot now belongs to an in-place result
      if (P.options.reuseBuffers) freeSlots.push_back({slotOf[g], std::move(set)});
    };
    // True if group h (an operand of i) dies at i: i is its last reader in list order
    // and every other reader has run before i.
    auto diesAt = [&](int32_t h, int32_t i) {
      const Group &g = P.groups[h];
      return P.options.reuseBuffers && P.options.valueCheck == ValueCheck::Off && g.kind == GroupKind::Arena &&
             !g.pinned && slotOf[h] >= 0 &&
             !transferred[h] && remaining[h] == 1 && allBefore(g.readers, i, i);
    };

    for (size_t ii = 0; ii < n; ++ii) {
      int32_t i = static_cast<int32_t>(ii);
      Instruction &inst = P.insts[ii];
      // --check-nan reports whether each operand of a failing op was finite, so with
      // it on no op may overwrite its operands (no in-place svd or elementwise).
      const bool mayWorkInPlace = P.options.valueCheck == ValueCheck::Off;
      if (inst.kernel == Kernel::Svd && inst.svd.k > 0 && mayWorkInPlace) {
        int32_t h = groupOf(inst.in[0]);
        if (diesAt(h, i)) {
          inst.svd.inPlace = true;
          skip[groupOf(inst.out[4])] = true;
          addEdges(P.groups[h].readers, i);
        }
      }
      for (size_t k = 0; k < inst.out.size(); ++k) {
        int32_t g = groupOf(inst.out[k]);
        Group &G = P.groups[g];
        if (G.kind == GroupKind::Output) {
          live += G.elems;
          continue;
        }
        if (skip[g] || G.kind != GroupKind::Arena || G.elems == 0) continue;
        // In place: an elementwise result over an operand that dies here.
        if (inst.kernel == Kernel::Elementwise && k == 0 && mayWorkInPlace) {
          bool done = false;
          for (int32_t v : inst.in) {
            int32_t h = groupOf(v);
            if (P.groups[h].elems == G.elems && diesAt(h, i)) {
              slotOf[g] = slotOf[h];
              transferred[h] = true;
              inst.inPlace = true;
              addEdges(P.groups[h].readers, i);
              live += G.elems;
              done = true;
              break;
            }
          }
          if (done) continue;
        }
        int best = -1;
        for (size_t f = 0; f < freeSlots.size(); ++f) {
          if (!allBefore(freeSlots[f].release, i)) continue;
          int64_t cap = P.slotElems[freeSlots[f].slot];
          if (best < 0) { best = static_cast<int>(f); continue; }
          int64_t bcap = P.slotElems[freeSlots[best].slot];
          bool fits = cap >= G.elems, bfits = bcap >= G.elems;
          if ((fits && (!bfits || cap < bcap)) || (!fits && !bfits && cap > bcap))
            best = static_cast<int>(f);
        }
        if (best >= 0) {
          FreeSlot fs = std::move(freeSlots[best]);
          freeSlots.erase(freeSlots.begin() + best);
          slotOf[g] = fs.slot;
          P.slotElems[fs.slot] = std::max(P.slotElems[fs.slot], G.elems);
          addEdges(fs.release, i);
        } else {
          slotOf[g] = static_cast<int64_t>(P.slotElems.size());
          P.slotElems.push_back(G.elems);
        }
        live += G.elems;
      }
      P.peakLiveBytes = std::max(P.peakLiveBytes, live * 8);
      // Operands whose last reader (in list order) is i die now.
      for (int32_t h : operandGroups(inst)) {
        if (remaining[h] > 0 && --remaining[h] == 0) {
          std::vector<int32_t> set = P.groups[h].readers;
          if (P.groups[h].producer >= 0) set.push_back(P.groups[h].producer);
          release(h, std::move(set));
        }
      }
      // Results nobody reads (temporaries, unused results) die right after i.
      for (int32_t v : inst.out) {
        int32_t h = groupOf(v);
        if (P.groups[h].readers.empty() && !skip[h]) release(h, {i});
      }
    }
    for (size_t g = 0; g < P.groups.size(); ++g)
      if (P.groups[g].kind == GroupKind::Arena) P.groups[g].index = slotOf[g];
    int64_t off = 0;
    for (int64_t e : P.slotElems) {
      P.slotOffset.push_back(off);
      off += (e + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
    }
    P.arenaElems = off;
  }

  void finishSchedule() {
    size_t n = P.insts.size();
    std::vector<std::vector<int32_t>> succs(n);
    for (size_t i = 0; i < n; ++i) {
      std::sort(preds[i].begin(), preds[i].end());
      // Every edge must point forward in list order (the engine relies on an acyclic
      // graph; width 1 runs in list order).
      if (!preds[i].empty() && preds[i].back() >= static_cast<int32_t>(i))
        throw std::logic_error("prepare: internal error: instruction #" + std::to_string(i) +
                               " depends on #" + std::to_string(preds[i].back()));
      for (int32_t p : preds[i]) succs[p].push_back(static_cast<int32_t>(i));
      P.insts[i].preds = preds[i];
      P.insts[i].initialDeps = static_cast<int32_t>(preds[i].size());
      if (preds[i].empty()) P.initiallyReady.push_back(static_cast<int32_t>(i));
    }
    for (size_t i = 0; i < n; ++i) {
      Instruction &in = P.insts[i];
      in.succBegin = static_cast<int32_t>(P.succ.size());
      P.succ.insert(P.succ.end(), succs[i].begin(), succs[i].end());
      in.succEnd = static_cast<int32_t>(P.succ.size());
      in.bytesWritten = 0;
      for (int32_t k = 0; k < in.numResults; ++k)
        if (P.groups[P.values[in.out[k]].group].elems > 0 || P.values[in.out[k]].type.numel() == 0)
          in.bytesWritten += P.values[in.out[k]].type.bytes();
      P.maxChunks = std::max<int64_t>(P.maxChunks, in.nchunks);
    }
  }
};

std::atomic<uint64_t> nextPlanId{1};

std::string storageStr(const Plan &P, int32_t v) {
  const Group &g = P.groups[P.values[v].group];
  switch (g.kind) {
  case GroupKind::Arena:
    return g.index < 0 ? "none" : "arena+" + std::to_string(P.slotOffset[g.index] * 8);
  case GroupKind::Input: return "input" + std::to_string(g.index);
  case GroupKind::Constant: return "const" + std::to_string(g.index);
  case GroupKind::Output: return "output" + std::to_string(g.index);
  }
  return "?";
}

std::string bytesStr(int64_t b) {
  char buf[64];
  if (b >= (1 << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(b) / (1 << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.2f KiB", static_cast<double>(b) / 1024);
  else std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  return buf;
}

} // namespace

namespace {

/// Physical memory of this machine in bytes (sysconf), or INT64_MAX if unknown.
int64_t physicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return INT64_MAX;
  return static_cast<int64_t>(pages) * static_cast<int64_t>(page);
}

std::string gib(int64_t b) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g GiB", static_cast<double>(b) / double(int64_t(1) << 30));
  return buf;
}

/// A program whose values cannot fit in this machine's memory is refused before any
/// buffer is sized or allocated (the verifier only guarantees byte sizes fit int64):
/// a clear error naming the value and its op instead of std::bad_alloc or the OOM
/// killer at run time. Also keeps the plan's byte sums far from int64 overflow.
void checkValuesFitInMemory(const ir::Program &p) {
  const int64_t mem = physicalMemoryBytes();
  auto tooBig = [&](int64_t bytes) { return bytes > mem; };
  for (ir::ValueId v : p.inputs)
    if (tooBig(p.type(v).bytes()))
      throw Error("error: prepare: input " + valueDisplayName(p, v) + " " + p.type(v).str() +
                  " needs " + std::to_string(p.type(v).bytes()) + " bytes, more than this machine's " +
                  gib(mem) + " of memory");
  for (const ir::Op &op : p.ops)
    for (ir::ValueId v : op.results)
      if (tooBig(p.type(v).bytes()))
        throw Error("error: prepare: " + describeOp(p, op) + ": result " + valueDisplayName(p, v) +
                    " " + p.type(v).str() + " needs " + std::to_string(p.type(v).bytes()) +
                    " bytes, more than this machine's " + gib(mem) + " of memory");
}

/// The buffers an engine allocates for one run (arena + output tensors) must fit too.
void checkPlanFitsInMemory(const Plan &P) {
  const int64_t mem = physicalMemoryBytes();
  int64_t outBytes = 0;
  for (int32_t v : P.outputValue) outBytes += P.values[v].type.bytes();
  int64_t arena = P.arenaElems * 8;
  if (arena > mem - std::min(mem, outBytes))
    throw Error("error: prepare: program @" + P.program.name + " needs " + gib(arena) +
                " of buffers (peak live " + gib(P.peakLiveBytes) + ") plus " + gib(outBytes) +
                " of outputs per run, more than this machine's " + gib(mem) + " of memory");
}

} // namespace

std::shared_ptr<const Plan> prepare(const ir::Program &p, const PrepareOptions &opts) {
  ensureBlasSingleThreaded();
  ir::verifyOrThrow(p);
  checkValuesFitInMemory(p);
  auto plan = std::make_shared<Plan>();
  plan->id = nextPlanId.fetch_add(1);
  plan->program = p;
  plan->options = opts;
  Preparer(*plan).run();
  checkPlanFitsInMemory(*plan);
  return plan;
}

int64_t peakLiveBytes(const Plan &plan) { return plan.peakLiveBytes; }
int64_t arenaBytes(const Plan &plan) { return plan.arenaElems * 8; }
const ir::Program &planProgram(const Plan &plan) { return plan.program; }
size_t planSize(const Plan &plan) { return plan.insts.size(); }

std::string describePlan(const Plan &P, bool json) {
  const ir::Program &prog = P.program;
  if (json) {
    nlohmann::ordered_json j;
    j["kind"] = "tessel.plan";
    j["program"] = prog.name;
    j["instructions"] = nlohmann::ordered_json::array();
    for (size_t i = 0; i < P.insts.size(); ++i) {
      const Instruction &in = P.insts[i];
      nlohmann::ordered_json e;
      e["index"] = i;
      e["kernel"] = kernelName(in.kernel);
      e["op"] = ir::opName(P.srcOp(in).kind);
      if (!P.srcOp(in).loc.empty()) e["loc"] = P.srcOp(in).loc;
      auto vals = [&](const std::vector<int32_t> &vs, size_t count) {
        nlohmann::ordered_json a = nlohmann::ordered_json::array();
        for (size_t k = 0; k < count; ++k)
          a.push_back({{"value", P.values[vs[k]].name}, {"type", P.values[vs[k]].type.str()},
                       {"storage", storageStr(P, vs[k])}});
        return a;
      };
      e["inputs"] = vals(in.in, in.in.size());
      e["outputs"] = vals(in.out, static_cast<size_t>(in.numResults));
      e["temps"] = vals(std::vector<int32_t>(in.out.begin() + in.numResults, in.out.end()),
                        in.out.size() - static_cast<size_t>(in.numResults));
      e["deps"] = in.preds;
      e["chunks"] = in.nchunks;
      e["bytes"] = in.bytesWritten;
      e["in_place"] = in.inPlace || in.svd.inPlace;
      e["detail"] = in.what;
      j["instructions"].push_back(std::move(e));
    }
    nlohmann::ordered_json outs = nlohmann::ordered_json::array();
    for (size_t i = 0; i < P.outputValue.size(); ++i)
      outs.push_back({{"name", prog.outputName(i)}, {"value", P.values[P.outputValue[i]].name},
                      {"storage", storageStr(P, P.outputValue[i])}});
    j["outputs"] = outs;
    j["buffers"] = P.slotElems.size();
    j["arena_bytes"] = P.arenaElems * 8;
    j["peak_live_bytes"] = P.peakLiveBytes;
    return j.dump(1) + "\n";
  }
  std::ostringstream os;
  os << "plan @" << prog.name << ": " << P.insts.size() << " instructions, "
     << P.slotElems.size() << " buffers, arena " << P.arenaElems * 8 << " bytes ("
     << bytesStr(P.arenaElems * 8) << "), peak live " << P.peakLiveBytes << " bytes ("
     << bytesStr(P.peakLiveBytes) << ")\n";
  for (size_t i = 0; i < P.insts.size(); ++i) {
    const Instruction &in = P.insts[i];
    os << "  #" << i << " " << kernelName(in.kernel) << " " << ir::opName(P.srcOp(in).kind);
    for (int32_t k = 0; k < in.numResults; ++k)
      os << (k ? ", " : " ") << P.values[in.out[k]].name << "@" << storageStr(P, in.out[k]);
    os << " <-";
    for (int32_t v : in.in) os << " " << P.values[v].name << "@" << storageStr(P, v);
    os << " | deps:";
    if (in.preds.empty()) os << " -";
    for (int32_t p : in.preds) os << " #" << p;
    os << " | chunks: " << in.nchunks << " | bytes: " << in.bytesWritten;
    if (in.inPlace || in.svd.inPlace) os << " | in-place";
    for (size_t k = static_cast<size_t>(in.numResults); k < in.out.size(); ++k)
      if (P.values[in.out[k]].type.numel() > 0 && storageStr(P, in.out[k]) != "none")
        os << " | temp " << P.values[in.out[k]].type.bytes() << " B@" << storageStr(P, in.out[k]);
    os << " | " << in.what << "\n";
  }
  for (size_t i = 0; i < P.outputValue.size(); ++i)
    os << "  output " << prog.outputName(i) << " = " << P.values[P.outputValue[i]].name << "@"
       << storageStr(P, P.outputValue[i]) << "\n";
  return os.str();
}

} // namespace tessel::rt
