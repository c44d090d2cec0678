//===- runtime/Lowering.cpp - Ops to kernel instructions (stage 1 of prepare) --===//
//
// One rule per op in a table in ops.def order; the kernel plans the rules build
// (strided copies, GEMM layouts and their chunks) come from runtime/PlanBuilders.h.
//
// One lowering rule per op of ir/ops.def, in a table in its order (checked at
// compile time). A rule either emits instructions (Lowering::addInst) with their
// kernel plan fully computed from the shapes, or makes the result an alias of an
// operand's storage (no instruction), or binds plan-owned constant data. See
// PrepareStages.h for the stages that follow.
//
//===----------------------------------------------------------------------===//
#include <algorithm>

#include <lapacke.h>

#include "ir/Diagnostics.h"
#include "ir/OpAttrs.h"
#include "runtime/Factorizations.h"
#include "runtime/Fusion.h"
#include "runtime/PlanBuilders.h"
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
  case Kernel::SylvesterSolve: return "sylvester_solve";
  }
  return "?";
}

namespace prep {
namespace {

using ir::OpKind;
using ir::Type;

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

/// dot_general as one batched GEMM C[b] = op(A[b])·op(B[b]). The contracted pairs are
/// taken in the order (as given, by lhs dim, by rhs dim) that leaves the fewest
/// operand elements to transpose; an operand not in GEMM form either way is
/// transposed into a temporary first.
void lowerDotGeneral(Lowering &L, const ir::Op &op, size_t i) {
  const ir::ValueId lv = op.operands[0], rv = op.operands[1];
  const Type &lt = L.type(lv), &rtt = L.type(rv);
  auto vec = [](const ir::I64List &v) { return std::vector<int64_t>(v.begin(), v.end()); };
  GemmForm f = gemmForm(lt, rtt, vec(ir::attr<OpKind::DotGeneral, "lhs_batch">(op)),
                        vec(ir::attr<OpKind::DotGeneral, "rhs_batch">(op)),
                        vec(ir::attr<OpKind::DotGeneral, "lhs_contract">(op)),
                        vec(ir::attr<OpKind::DotGeneral, "rhs_contract">(op)));
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
  if (!f.lOk) {
    in.in[0] = transposeTo(lv, f.lhsOrder(), "lhs");
    f.transA = false;
  }
  if (!f.rOk) {
    in.in[1] = transposeTo(rv, f.rhsOrder(), "rhs");
    f.transB = false;
  }
  GemmPlan &g = in.as<GemmPlan>();
  fillGemmShape(g, lt, rtt, f);
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

/// A Sylvester equation through the eigendecompositions of A and B
/// (runtime/Factorizations.h); one temp, the workspace.
void lowerSylvesterSolve(Lowering &L, const ir::Op &op, size_t i) {
  const SylvesterSolvePlan s =
      sylvesterSolvePlan(L.prog, op, L.type(op.operands[0]).shape[0], L.type(op.operands[1]).shape[0]);
  Instruction in = L.instruction(op, i, s);
  in.numResults = 1;
  in.out.push_back(L.newTemp(Type({std::max<int64_t>(1, sylvesterWorkElems(s))}), "work"));
  in.what = "n=" + std::to_string(s.n) + " m=" + std::to_string(s.m) + " 2 dsyevd + 4 gemm";
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
    {OpKind::SylvesterSolve, lowerSylvesterSolve},
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
