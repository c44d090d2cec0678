//===- ir/ShapeRules.cpp - One shape rule per op, keyed by op kind --------------===//
//
// Each rule receives the operand types and canonical attributes, already checked
// against the op table (ir/OpCheck.cpp: operand count, attribute names and kinds), and
// checks what is particular to its op: attribute values (axes in range, perm a
// permutation, einsum subscripts, compare direction, svd eps, ...) and operand shapes.
// It returns the result types, or throws ShapeError("<op>: <what> <shapes>"). The
// table below is in ops.def order; its size is checked at compile time.
//
//===----------------------------------------------------------------------===//
#include "ir/ShapeRules.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>

#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"

namespace tessel::ir {

namespace {

using Types = llvm::ArrayRef<Type>;
using Result = std::vector<Type>;
using Rule = Result (*)(OpKind, Types, const AttrList &, Callees);

[[noreturn]] void fail(OpKind k, const std::string &msg) {
  throw ShapeError(std::string(opName(k)) + ": " + msg);
}

/// "[a, b, c]"; a list of more than 16 entries shows its first 12 and its size
/// ("[0, 0, …, 0, ...] (300000 entries)"), so a message stays one line.
std::string list(llvm::ArrayRef<int64_t> v) {
  constexpr size_t kShown = 12;
  const bool clip = v.size() > 16;
  std::string s = "[";
  for (size_t i = 0; i < (clip ? kShown : v.size()); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  if (clip) return s + ", ...] (" + std::to_string(v.size()) + " entries)";
  return s + "]";
}

// Checks that `axes` are distinct and in [0, rank). `what` names the attribute.
void checkAxes(OpKind k, llvm::ArrayRef<int64_t> axes, int rank, const char *what,
               const Type &t) {
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    if (a < 0 || a >= rank)
      fail(k, std::string(what) + " " + list(axes) + " out of range for operand " + t.str());
    if (seen[static_cast<size_t>(a)])
      fail(k, std::string(what) + " " + list(axes) + " repeats axis " + std::to_string(a));
    seen[static_cast<size_t>(a)] = true;
  }
}

Type checkedType(OpKind k, llvm::ArrayRef<int64_t> shape) {
  if (shape.size() > static_cast<size_t>(kMaxRank))
    fail(k, "result rank " + std::to_string(shape.size()) + " exceeds the limit of " +
                std::to_string(kMaxRank));
  for (int64_t d : shape)
    if (d < 0) fail(k, "negative dimension in result shape " + list(shape));
  // Like a declared type (ir/TextLexer.cpp), the byte size 8 * numel must fit in int64,
  // so Type::numel()/bytes() never overflow downstream.
  if (!text::checkedNumel(shape))
    fail(k, "result shape " + list(shape) + " is too large: its byte size overflows 64 bits");
  return Type(shape);
}

Result ruleConstant(OpKind k, Types, const AttrList &a, Callees) {
  const Tensor &t = a.getTensor("value");
  checkedType(k, t.type.shape);
  if (static_cast<int64_t>(t.data.size()) != t.type.numel())
    fail(k, "value has " + std::to_string(t.data.size()) + " elements but type " +
                t.type.str() + " needs " + std::to_string(t.type.numel()));
  return {t.type};
}

Result ruleIota(OpKind k, Types, const AttrList &a, Callees) {
  const I64List &shape = a.getI64s("shape");
  int64_t dim = a.getI64("dim");
  Type t = checkedType(k, shape);
  if (dim < 0 || dim >= t.rank())
    fail(k, "dim " + std::to_string(dim) + " out of range for shape " + t.str());
  return {t};
}

Result ruleUnary(OpKind, Types ops, const AttrList &, Callees) { return {ops[0]}; }

Result ruleSameShape(OpKind k, Types ops, const AttrList &, Callees) {
  for (size_t i = 1; i < ops.size(); ++i)
    if (ops[i] != ops[0])
      fail(k, "operand shapes differ: " + ops[0].str() + " vs " + ops[i].str() +
                  " (operand " + std::to_string(i) + "; broadcast explicitly with broadcast_in_dim)");
  return {ops[0]};
}

Result ruleCompare(OpKind k, Types ops, const AttrList &a, Callees) {
  const std::string &d = a.getStr("direction");
  static const char *dirs[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
  if (std::find_if(std::begin(dirs), std::end(dirs), [&](const char *x) { return d == x; }) ==
      std::end(dirs))
    fail(k, "direction '" + d + "' is not one of EQ, NE, LT, LE, GT, GE");
  return ruleSameShape(k, ops, a, {});
}

Result ruleReduce(OpKind k, Types ops, const AttrList &a, Callees) {
  const I64List &axes = a.getI64s("axes");
  checkAxes(k, axes, ops[0].rank(), "axes", ops[0]);
  Shape out;
  for (int i = 0; i < ops[0].rank(); ++i)
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) out.push_back(ops[0].shape[i]);
  return {Type(out)};
}

Result ruleBroadcastInDim(OpKind k, Types ops, const AttrList &a, Callees) {
  const I64List &shape = a.getI64s("shape");
  const I64List &dims = a.getI64s("dims");
  Type out = checkedType(k, shape);
  const Type &in = ops[0];
  if (static_cast<int>(dims.size()) != in.rank())
    fail(k, "dims " + list(dims) + " must have one entry per operand dimension of " + in.str());
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= out.rank())
      fail(k, "dims " + list(dims) + " out of range for result " + out.str());
    if (i && dims[i] <= dims[i - 1])
      fail(k, "dims " + list(dims) + " must be strictly increasing");
    int64_t d = in.shape[i], r = out.shape[static_cast<size_t>(dims[i])];
    if (d != 1 && d != r)
      fail(k, "operand " + in.str() + " dimension " + std::to_string(i) + " (size " +
                  std::to_string(d) + ") cannot broadcast to size " + std::to_string(r) +
                  " of result " + out.str());
  }
  return {out};
}

Result ruleReshape(OpKind k, Types ops, const AttrList &a, Callees) {
  Type out = checkedType(k, a.getI64s("shape"));
  if (out.numel() != ops[0].numel())
    fail(k, "cannot reshape " + ops[0].str() + " (" + std::to_string(ops[0].numel()) +
                " elements) to " + out.str() + " (" + std::to_string(out.numel()) + " elements)");
  return {out};
}

Result ruleTranspose(OpKind k, Types ops, const AttrList &a, Callees) {
  const I64List &perm = a.getI64s("perm");
  if (static_cast<int>(perm.size()) != ops[0].rank())
    fail(k, "perm " + list(perm) + " has " + std::to_string(perm.size()) +
                " entries for operand " + ops[0].str());
  checkAxes(k, perm, ops[0].rank(), "perm", ops[0]);
  Shape out;
  for (int64_t p : perm) out.push_back(ops[0].shape[static_cast<size_t>(p)]);
  return {Type(out)};
}

Result ruleSlice(OpKind k, Types ops, const AttrList &a, Callees) {
  const I64List &start = a.getI64s("start"), &limit = a.getI64s("limit");
  const Type &in = ops[0];
  if (static_cast<int>(start.size()) != in.rank() || static_cast<int>(limit.size()) != in.rank())
    fail(k, "start " + list(start) + " and limit " + list(limit) +
                " need one entry per dimension of " + in.str());
  Shape out;
  for (int i = 0; i < in.rank(); ++i) {
    if (start[i] < 0 || start[i] > limit[i] || limit[i] > in.shape[i])
      fail(k, "slice [" + std::to_string(start[i]) + ", " + std::to_string(limit[i]) +
                  ") out of bounds in dimension " + std::to_string(i) + " of " + in.str());
    out.push_back(limit[i] - start[i]);
  }
  return {Type(out)};
}

Result rulePad(OpKind k, Types ops, const AttrList &a, Callees) {
  const I64List &low = a.getI64s("low"), &high = a.getI64s("high");
  const Type &in = ops[0];
  if (static_cast<int>(low.size()) != in.rank() || static_cast<int>(high.size()) != in.rank())
    fail(k, "low " + list(low) + " and high " + list(high) +
                " need one entry per dimension of " + in.str());
  Shape out;
  for (int i = 0; i < in.rank(); ++i) {
    if (low[i] < 0 || high[i] < 0)
      fail(k, "negative padding in dimension " + std::to_string(i) + " (use slice)");
    if (low[i] > INT64_MAX - in.shape[i] || high[i] > INT64_MAX - in.shape[i] - low[i])
      fail(k, "padding low " + list(low) + " high " + list(high) + " overflows dimension " +
                  std::to_string(i) + " of " + in.str());
    out.push_back(in.shape[i] + low[i] + high[i]);
  }
  return {checkedType(k, out)};
}

Result ruleDotGeneral(OpKind k, Types ops, const AttrList &a, Callees) {
  const I64List &lb = a.getI64s("lhs_batch"), &rb = a.getI64s("rhs_batch");
  const I64List &lc = a.getI64s("lhs_contract"), &rc = a.getI64s("rhs_contract");
  const Type &l = ops[0], &r = ops[1];
  if (lb.size() != rb.size())
    fail(k, "lhs_batch " + list(lb) + " and rhs_batch " + list(rb) + " differ in length");
  if (lc.size() != rc.size())
    fail(k, "lhs_contract " + list(lc) + " and rhs_contract " + list(rc) + " differ in length");
  I64List lall(lb), rall(rb);
  lall.append(lc.begin(), lc.end());
  rall.append(rc.begin(), rc.end());
  checkAxes(k, lall, l.rank(), "lhs batch+contract dims", l);
  checkAxes(k, rall, r.rank(), "rhs batch+contract dims", r);
  for (size_t i = 0; i < lall.size(); ++i)
    if (l.shape[lall[i]] != r.shape[rall[i]])
      fail(k, "size mismatch: lhs " + l.str() + " dim " + std::to_string(lall[i]) + " is " +
                  std::to_string(l.shape[lall[i]]) + " but rhs " + r.str() + " dim " +
                  std::to_string(rall[i]) + " is " + std::to_string(r.shape[rall[i]]));
  Shape out;
  for (int64_t d : lb) out.push_back(l.shape[d]);
  for (int i = 0; i < l.rank(); ++i)
    if (std::find(lall.begin(), lall.end(), i) == lall.end()) out.push_back(l.shape[i]);
  for (int i = 0; i < r.rank(); ++i)
    if (std::find(rall.begin(), rall.end(), i) == rall.end()) out.push_back(r.shape[i]);
  return {checkedType(k, out)};
}

Result ruleEinsum(OpKind k, Types ops, const AttrList &a, Callees) {
  EinsumSpec spec;
  try {
    spec = parseEinsumSpec(a.getStr("spec"));
  } catch (const ShapeError &e) {
    fail(k, e.what());
  }
  if (spec.inputs.size() != ops.size())
    fail(k, "spec '" + text::clipForMessage(a.getStr("spec")) + "' has " + std::to_string(spec.inputs.size()) +
                " operands but the op has " + std::to_string(ops.size()));
  std::map<char, int64_t> size;
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string &labels = spec.inputs[i];
    if (static_cast<int>(labels.size()) != ops[i].rank())
      fail(k, "operand " + std::to_string(i) + " has type " + ops[i].str() + " but subscripts '" +
                  text::clipForMessage(labels) + "' name " + std::to_string(labels.size()) + " dimensions");
    for (size_t j = 0; j < labels.size(); ++j) {
      auto [it, fresh] = size.emplace(labels[j], ops[i].shape[j]);
      if (!fresh && it->second != ops[i].shape[j])
        fail(k, "index '" + std::string(1, labels[j]) + "' has size " + std::to_string(it->second) +
                    " elsewhere but size " + std::to_string(ops[i].shape[j]) + " in operand " +
                    std::to_string(i) + " " + ops[i].str());
    }
  }
  Shape out;
  for (char c : spec.output) out.push_back(size.at(c));
  return {checkedType(k, out)};
}

Result ruleSvd(OpKind k, Types ops, const AttrList &a, Callees) {
  double eps = a.getF64("eps");
  if (!(eps >= 0) || !std::isfinite(eps))
    fail(k, "eps must be finite and >= 0, got " + text::formatDouble(eps));
  const std::string &gauge = a.getStr("gauge");
  if (gauge != "none" && gauge != "bond" && gauge != "bond-vjp")
    fail(k, "gauge must be \"none\", \"bond\" or \"bond-vjp\", got " +
                text::quoteString(gauge.size() > 40 ? gauge.substr(0, 40) + "..." : gauge));
  if (ops[0].rank() != 2) fail(k, "operand must be a matrix, got " + ops[0].str());
  int64_t m = ops[0].shape[0], n = ops[0].shape[1], kk = std::min(m, n);
  return {Type({m, kk}), Type({kk}), Type({kk, n})};
}

Result ruleEigh(OpKind k, Types ops, const AttrList &a, Callees) {
  const double eps = a.getF64("eps");
  if (!(eps >= 0) || !std::isfinite(eps))
    fail(k, "eps must be finite and >= 0, got " + text::formatDouble(eps));
  if (ops[0].rank() != 2 || ops[0].shape[0] != ops[0].shape[1])
    fail(k, "operand must be a square matrix, got " + ops[0].str());
  const int64_t n = ops[0].shape[0];
  return {Type({n}), Type({n, n})};
}

Result ruleQr(OpKind k, Types ops, const AttrList &, Callees) {
  if (ops[0].rank() != 2) fail(k, "operand must be a matrix, got " + ops[0].str());
  const int64_t m = ops[0].shape[0], n = ops[0].shape[1], kk = std::min(m, n);
  return {Type({m, kk}), Type({kk, n})};
}

Result ruleTriangularSolve(OpKind k, Types ops, const AttrList &a, Callees) {
  for (const char *flag : {"left_side", "lower", "transpose_a"}) {
    const int64_t v = a.getI64(flag);
    if (v != 0 && v != 1) fail(k, std::string(flag) + " must be 0 or 1, got " + std::to_string(v));
  }
  if (ops[0].rank() != 2 || ops[0].shape[0] != ops[0].shape[1])
    fail(k, "A must be a square matrix, got " + ops[0].str());
  if (ops[1].rank() != 2) fail(k, "B must be a matrix, got " + ops[1].str());
  const bool left = a.getI64("left_side") == 1;
  const int64_t n = ops[0].shape[0], along = ops[1].shape[left ? 0 : 1];
  if (along != n)
    fail(k, std::string(left ? "B's rows" : "B's columns") + " (" + std::to_string(along) +
                ") must match A's order (" + std::to_string(n) + "): A " + ops[0].str() + ", B " +
                ops[1].str());
  return {ops[1]};
}

Result ruleSylvesterSolve(OpKind k, Types ops, const AttrList &, Callees) {
  for (size_t i = 0; i < 2; ++i)
    if (ops[i].rank() != 2 || ops[i].shape[0] != ops[i].shape[1])
      fail(k, std::string(i == 0 ? "A" : "B") + " must be a square matrix, got " + ops[i].str());
  const int64_t n = ops[0].shape[0], m = ops[1].shape[0];
  if (ops[2].rank() != 2 || ops[2].shape[0] != n || ops[2].shape[1] != m)
    fail(k, "C must be f64[" + std::to_string(n) + "," + std::to_string(m) + "] (A's order, B's order): A " +
                ops[0].str() + ", B " + ops[1].str() + ", C " + ops[2].str());
  return {ops[2]};
}

Result ruleSvdTopk(OpKind k, Types ops, const AttrList &a, Callees) {
  Result full = ruleSvd(k, ops, a, {});
  const int64_t m = ops[0].shape[0], n = ops[0].shape[1], kk = a.getI64("k");
  if (kk < 1 || kk > std::min(m, n))
    fail(k, "k = " + std::to_string(kk) + " must be in [1, min(m, n) = " +
                std::to_string(std::min(m, n)) + "] for operand " + ops[0].str());
  const int64_t g = a.getI64("guards");
  if (g < 0 || g >= kk)
    fail(k, "guards = " + std::to_string(g) + " must be in [0, k − 1] = [0, " + std::to_string(kk - 1) +
                "] (at least one kept triplet before the guards)");
  return {Type({m, kk}), Type({kk}), Type({kk, n})};
}

} // namespace

int64_t svdTopkComplementGuards(int64_t m, int64_t n, int64_t k) {
  return std::max<int64_t>(0, std::min(std::min(m, n) - k, std::max<int64_t>(4, k / 2)));
}

namespace {

Result ruleSvdTopkComplement(OpKind k, Types ops, const AttrList &a, Callees) {
  double eps = a.getF64("eps");
  if (!(eps >= 0) || !std::isfinite(eps))
    fail(k, "eps must be finite and >= 0, got " + text::formatDouble(eps));
  const char *names[] = {"A", "U", "s", "Vt", "gU", "gVt"};
  const int ranks[] = {2, 2, 1, 2, 2, 2};
  for (size_t i = 0; i < 6; ++i)
    if (ops[i].rank() != ranks[i])
      fail(k, std::string("operand ") + names[i] + " must have rank " + std::to_string(ranks[i]) +
                  ", got " + ops[i].str());
  const int64_t m = ops[0].shape[0], n = ops[0].shape[1], kk = ops[2].shape[0];
  const int64_t r = ops[4].shape[1];
  auto want = [&](size_t i, const Type &t) {
    if (ops[i] != t)
      fail(k, std::string("operand ") + names[i] + " must be " + t.str() + " for A " +
                  ops[0].str() + ", " + std::to_string(kk) + " kept and " + std::to_string(r) +
                  " differentiated triplets, got " + ops[i].str());
  };
  want(1, Type({m, kk}));
  want(3, Type({kk, n}));
  want(4, Type({m, r}));
  want(5, Type({r, n}));
  if (kk < 1 || kk > std::min(m, n) || r > kk)
    fail(k, "needs 1 <= r <= k <= min(m, n), got k = " + std::to_string(kk) + ", r = " +
                std::to_string(r) + " for A " + ops[0].str());
  const int64_t g = a.getI64("guards");
  if (g < 0 || r > kk - g)
    fail(k, "guards = " + std::to_string(g) + " must be in [0, k − r] = [0, " +
                std::to_string(kk - r) + "] (the guards follow the " + std::to_string(r) +
                " differentiated triplets among the k = " + std::to_string(kk) + ")");
  return {Type({m, r}), Type({r, n})};
}

/// The function a call or scan names, among those visible to it.
const Program &callee(OpKind k, const AttrList &a, Callees callees) {
  const std::string &name = a.getStr("callee");
  if (const Program *f = findCallee(callees, name)) return *f;
  fail(k, calleeProblem(name, callees));
}

Result ruleCall(OpKind k, Types ops, const AttrList &a, Callees callees) {
  const Program &f = callee(k, a, callees);
  if (ops.size() != f.inputs.size())
    fail(k, std::to_string(ops.size()) + " operand" + (ops.size() == 1 ? "" : "s") + " for " +
                signatureString(f) + ", which takes " + std::to_string(f.inputs.size()));
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i] != f.type(f.inputs[i]))
      fail(k, "operand " + std::to_string(i) + " has type " + ops[i].str() + " but " +
                  signatureString(f) + " takes " + f.type(f.inputs[i]).str() + " there");
  if (f.outputs.empty()) fail(k, signatureString(f) + " returns nothing: a called function must return a value");
  Result out;
  for (ValueId v : f.outputs) out.push_back(f.type(v));
  return out;
}

Result ruleScan(OpKind k, Types ops, const AttrList &a, Callees callees) {
  const Program &f = callee(k, a, callees);
  const int64_t n = a.getI64("length"), c = a.getI64("carries"), rev = a.getI64("reverse");
  if (n < 1 || n > kMaxScanLength)
    fail(k, "length = " + std::to_string(n) + " must be in [1, 2^30]");
  if (rev != 0 && rev != 1) fail(k, "reverse = " + std::to_string(rev) + " must be 0 or 1");
  const int64_t nIn = static_cast<int64_t>(f.inputs.size()), nOut = static_cast<int64_t>(f.outputs.size());
  if (c < 0 || c > nIn)
    fail(k, "carries = " + std::to_string(c) + " must be in [0, " + std::to_string(nIn) +
                "] for the body " + signatureString(f) + " (its inputs are the carries, then xs)");
  if (c > nOut)
    fail(k, "the body " + signatureString(f) + " returns " + std::to_string(nOut) + " output" +
                (nOut == 1 ? "" : "s") + ", fewer than its " + std::to_string(c) + " carries");
  if (static_cast<int64_t>(ops.size()) != nIn)
    fail(k, std::to_string(ops.size()) + " operands for the body " + signatureString(f) +
                ", which takes " + std::to_string(nIn) + " (" + std::to_string(c) + " carries, then xs)");
  if (nOut == 0) fail(k, "the body " + signatureString(f) + " returns nothing");
  Result out;
  for (int64_t i = 0; i < c; ++i) {
    const Type &in = f.type(f.inputs[static_cast<size_t>(i)]);
    const Type &res = f.type(f.outputs[static_cast<size_t>(i)]);
    if (ops[static_cast<size_t>(i)] != in)
      fail(k, "carry " + std::to_string(i) + " has type " + ops[static_cast<size_t>(i)].str() +
                  " but the body " + signatureString(f) + " takes " + in.str());
    if (res != in)
      fail(k, "the body " + signatureString(f) + " changes the type of carry " + std::to_string(i) +
                  " from " + in.str() + " to " + res.str() + " (carries keep their types)");
    out.push_back(in);
  }
  for (int64_t i = c; i < nIn; ++i) {
    const Type &x = f.type(f.inputs[static_cast<size_t>(i)]);
    std::vector<int64_t> stacked{n};
    stacked.insert(stacked.end(), x.shape.begin(), x.shape.end());
    if (llvm::ArrayRef<int64_t>(ops[static_cast<size_t>(i)].shape) != llvm::ArrayRef<int64_t>(stacked))
      fail(k, "xs operand " + std::to_string(i) + " has type " + ops[static_cast<size_t>(i)].str() +
                  " but the body " + signatureString(f) + " takes slices " + x.str() + " of it, so " +
                  checkedType(k, stacked).str() + " for length " + std::to_string(n));
  }
  for (int64_t i = c; i < nOut; ++i) {
    const Type &y = f.type(f.outputs[static_cast<size_t>(i)]);
    std::vector<int64_t> stacked{n};
    stacked.insert(stacked.end(), y.shape.begin(), y.shape.end());
    out.push_back(checkedType(k, stacked));
  }
  return out;
}

// The table, in ops.def order (checked at compile time).
struct Entry {
  OpKind kind;
  Rule rule;
  const char *doc; ///< the rule in words (`tessel ops`, docs/ops.md)
};
constexpr Entry kRules[] = {
    {OpKind::Constant, ruleConstant,
     "the type of `value`"},
    {OpKind::Iota, ruleIota,
     "`shape`; 0 <= dim < rank"},
    {OpKind::Neg, ruleUnary,
     "same as the operand"},
    {OpKind::Exp, ruleUnary,
     "same as the operand"},
    {OpKind::Log, ruleUnary,
     "same as the operand"},
    {OpKind::Sqrt, ruleUnary,
     "same as the operand"},
    {OpKind::Sin, ruleUnary,
     "same as the operand"},
    {OpKind::Cos, ruleUnary,
     "same as the operand"},
    {OpKind::Tanh, ruleUnary,
     "same as the operand"},
    {OpKind::Abs, ruleUnary,
     "same as the operand"},
    {OpKind::Sign, ruleUnary,
     "same as the operand"},
    {OpKind::Add, ruleSameShape,
     "operands of one shape; the same"},
    {OpKind::Sub, ruleSameShape,
     "operands of one shape; the same"},
    {OpKind::Mul, ruleSameShape,
     "operands of one shape; the same"},
    {OpKind::Div, ruleSameShape,
     "operands of one shape; the same"},
    {OpKind::Maximum, ruleSameShape,
     "operands of one shape; the same"},
    {OpKind::Compare, ruleCompare,
     "operands of one shape; the same"},
    {OpKind::Select, ruleSameShape,
     "pred, a and b of one shape; the same"},
    {OpKind::ReduceSum, ruleReduce,
     "the operand without `axes` (distinct, in range)"},
    {OpKind::ReduceMax, ruleReduce,
     "the operand without `axes` (distinct, in range)"},
    {OpKind::BroadcastInDim, ruleBroadcastInDim,
     "`shape`; dims strictly increasing, one per operand dimension, each operand extent equal to shape[dims[d]] or 1"},
    {OpKind::Reshape, ruleReshape,
     "`shape`, with as many elements as the operand"},
    {OpKind::Transpose, ruleTranspose,
     "operand extents permuted by `perm` (a permutation of 0..rank-1)"},
    {OpKind::Slice, ruleSlice,
     "limit[d] - start[d]; 0 <= start[d] <= limit[d] <= extent"},
    {OpKind::Pad, rulePad,
     "extent + low[d] + high[d]; low, high >= 0"},
    {OpKind::DotGeneral, ruleDotGeneral,
     "[batch..., lhs free..., rhs free...]; paired batch and contracted extents equal, no dimension listed twice"},
    {OpKind::Einsum, ruleEinsum,
     "the output labels' extents; one extent per label, one subscript per operand dimension"},
    {OpKind::Svd, ruleSvd,
     "U f64[m,k], s f64[k], Vt f64[k,n] for a matrix operand f64[m,n]; eps finite and >= 0"},
    {OpKind::SvdTopk, ruleSvdTopk,
     "U f64[m,k], s f64[k], Vt f64[k,n] for a matrix operand f64[m,n], 1 <= k <= min(m, n), 0 <= guards < k; eps finite and >= 0"},
    {OpKind::SvdTopkComplement, ruleSvdTopkComplement,
     "X f64[m,r], Yt f64[r,n] for A f64[m,n], U f64[m,k], s f64[k], Vt f64[k,n], Ū f64[m,r], V̄t f64[r,n], r <= k − guards, k <= min(m, n)"},
    {OpKind::Eigh, ruleEigh,
     "w f64[n], V f64[n,n] for a square matrix operand f64[n,n]; eps finite and >= 0"},
    {OpKind::Qr, ruleQr,
     "Q f64[m,k], R f64[k,n], k = min(m, n), for a matrix operand f64[m,n]"},
    {OpKind::TriangularSolve, ruleTriangularSolve,
     "the type of B; A f64[n,n], B f64[n,m] (left_side = 1) or f64[m,n] (left_side = 0); flags 0 or 1"},
    {OpKind::SylvesterSolve, ruleSylvesterSolve,
     "the type of C; A f64[n,n], B f64[m,m], C f64[n,m]"},
    {OpKind::StopGradient, ruleUnary,
     "same as the operand"},
    {OpKind::Call, ruleCall,
     "the callee's output types; operands of its input types, in order"},
    {OpKind::Scan, ruleScan,
     "the carries' types, then each ys output of the body with a leading extent `length`; carries of the body's first input types, unchanged by it; xs of the body's other input types with a leading extent `length`"},
};
static_assert(coversEveryOpInOrder(kRules),
              "the shape-rule table must have one entry per op of ir/ops.def, in its order");

} // namespace

const char *shapeRuleDoc(OpKind kind) { return kRules[static_cast<size_t>(kind)].doc; }

bool hasShapeRule(OpKind kind) { return kRules[static_cast<size_t>(kind)].rule != nullptr; }

std::vector<Type> inferResultTypes(OpKind kind, llvm::ArrayRef<Type> operandTypes,
                                   const AttrList &attrs, Callees callees) {
  Rule r = kRules[static_cast<size_t>(kind)].rule;
  if (!r) fail(kind, "no shape rule registered");
  try {
    return r(kind, operandTypes, attrs, callees);
  } catch (const ShapeError &) {
    throw;
  } catch (const Error &e) { // attribute getters
    fail(kind, e.what());
  }
}

std::string calleeProblem(llvm::StringRef name, Callees callees) {
  std::string known;
  size_t shown = 0;
  for (const Program &f : callees)
    if (shown++ < 8) known += (known.empty() ? "" : ", ") + text::atName(f.name);
  if (callees.size() > 8) known += ", … (" + std::to_string(callees.size()) + " functions)";
  return "no function " + text::atName(name) + " above the calling function (" +
         (known.empty() ? std::string("there is none") : "above it: " + known) +
         "; a function may call only the functions defined above it in the module, so there "
         "is no recursion)";
}

EinsumSpec parseEinsumSpec(llvm::StringRef spec) {
  const std::string quoted = "einsum spec '" + text::clipForMessage(spec) + "'";
  auto [lhs, rhs] = spec.split("->");
  if (lhs.size() == spec.size())
    throw ShapeError(quoted + " needs an explicit '->' output");
  if (rhs.contains("->"))
    throw ShapeError(quoted + " has more than one '->' (a spec names one output, "
                     "as in 'ij,jk->ik')");
  EinsumSpec out;
  llvm::SmallVector<llvm::StringRef, 8> parts;
  lhs.split(parts, ',', -1, true);
  auto isLabel = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  // The offending character whole (a multi-byte UTF-8 one too, or \xHH for a byte that
  // starts none), quoted as the IR printer quotes strings.
  auto notALabel = [&](llvm::StringRef part, size_t i) {
    const size_t len = std::max<size_t>(1, text::utf8SequenceLength(part, i));
    const std::string ch = text::quoteString(part.substr(i, len));
    const bool ascii = static_cast<unsigned char>(part[i]) < 0x80;
    return ShapeError(quoted + ": " + ch + " is not an index letter (a-z, A-Z" +
                      (ascii ? ")" : "; einsum labels are ASCII letters, 52 at most)"));
  };
  for (llvm::StringRef p : parts) {
    p = p.trim();
    for (size_t i = 0; i < p.size(); ++i)
      if (!isLabel(p[i])) throw notALabel(p, i);
    out.inputs.push_back(p.str());
  }
  rhs = rhs.trim();
  for (size_t i = 0; i < rhs.size(); ++i) {
    char c = rhs[i];
    if (!isLabel(c)) throw notALabel(rhs, i);
    if (rhs.find(c, i + 1) != llvm::StringRef::npos)
      throw ShapeError(quoted + ": output index '" + std::string(1, c) + "' repeats");
    bool found = false;
    for (const std::string &in : out.inputs) found |= in.find(c) != std::string::npos;
    if (!found)
      throw ShapeError(quoted + ": output index '" + std::string(1, c) + "' appears in no operand");
  }
  out.output = rhs.str();
  return out;
}

} // namespace tessel::ir
