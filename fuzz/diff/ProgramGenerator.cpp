//===- fuzz/diff/ProgramGenerator.cpp - Random well-typed programs ----------------===//
//
// One generator case per op kind (the table at the bottom, in ops.def order). A case
// picks its operands from the pool of values made so far (or makes fresh inputs and
// constants), checks that the result stays small, builds the op and adds its result
// to the pool with what the generator knows of it (exactness, bounds; see the header).
// A case returns false when it cannot apply to the pool as it is; the main loop then
// draws another kind.
//
//===----------------------------------------------------------------------===//
#include "fuzz/diff/ProgramGenerator.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

#include "ir/Builder.h"

namespace tessel::difffuzz {

namespace {

using ir::Builder;
using ir::OpKind;
using ir::Shape;
using ir::Tensor;
using ir::Type;
using ir::ValueId;

/// A value whose bound grows past this is scaled back by a power of two.
constexpr double kMaxBound = 1e3;
/// Largest number of elements of a generated value (the reference evaluator loops);
/// in the few large programs, enough for the engine to split ops into several chunks
/// (runtime/Plan.h: kChunkElems).
constexpr int64_t kMaxNumel = 1024;
constexpr int64_t kMaxNumelLarge = int64_t(1) << 17;
/// Largest product of every index extent of an einsum (the reference's loop count
/// per operand) and largest number of distinct indices.
constexpr int64_t kMaxEinsumWork = 4096;
constexpr size_t kMaxEinsumLabels = 10;
/// Largest rank of a generated value, and of an svd matrix's sides.
constexpr int kMaxRank = 6;
constexpr int64_t kMaxSvdSide = 12;

/// What the generator knows of a value.
struct Val {
  ValueId id = ir::kNoValue;
  bool exact = true; ///< bitwise the same in every evaluator (see the header)
  double bound = 1;  ///< |value| <= bound
  double lo = 0;     ///< value >= lo > 0 everywhere, or 0 when unknown
};

int64_t numel(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> allAxes(int rank) {
  std::vector<int64_t> a(static_cast<size_t>(rank));
  std::iota(a.begin(), a.end(), 0);
  return a;
}

class Gen {
public:
  Gen(uint64_t seed, const GeneratorOptions &opts) : rng_(seed), b_(out_.program), opts_(opts) {
    out_.differentiable = chance(0.7);
    out_.quantized = chance(0.3);
    allowZero_ = chance(0.25);
    large_ = chance(0.02);
    out_.nonFinite = chance(0.03);
  }

  GeneratedProgram run();
  /// Makes the generated program a function of a module whose entry calls it, or scans
  /// over it (calls and scans are made here, not op by op).
  void stage();

  // The cases of the table; each returns false when it does not apply.
  bool constant() {
    constantOf(Type(shape(3)));
    return true;
  }
  bool iota();
  bool unary(OpKind k);
  bool binary(OpKind k);
  bool compare();
  bool select();
  bool reduce(OpKind k);
  bool broadcastInDim();
  bool reshape();
  bool transpose();
  bool slice();
  bool pad();
  bool dotGeneral();
  bool einsum();
  bool svd();
  bool svdTopk();
  bool svdTopkComplement();
  bool eigh();
  bool qr();
  bool triangularSolve();
  bool sylvesterSolve();
  bool nearIdentity(ValueId &A, int64_t &n, const Val *given = nullptr);

private:
  // --- Randomness -----------------------------------------------------------------
  size_t pick(size_t n) { return n ? static_cast<size_t>(rng_() % n) : 0; }
  bool chance(double p) { return uniform(0, 1) < p; }
  double uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng_);
  }
  /// An extent: mostly 2..5, often 1, in some programs sometimes 0; in large
  /// programs often up to 48.
  int64_t extent() {
    if (allowZero_ && chance(0.04)) return 0;
    if (chance(0.25)) return 1;
    if (large_ && chance(0.6)) return 6 + static_cast<int64_t>(pick(43));
    return 2 + static_cast<int64_t>(pick(4));
  }
  /// One of the few values of quantized inputs (ties on purpose).
  double level() {
    static const double levels[] = {-1, -0.5, 0, 0.5, 1};
    return levels[pick(5)];
  }
  /// Largest number of elements of a generated value.
  int64_t maxNumel() const { return large_ ? kMaxNumelLarge : kMaxNumel; }
  Shape shape(int maxRank) {
    Shape s;
    for (size_t r = pick(static_cast<size_t>(maxRank) + 1); r > 0; --r) s.push_back(extent());
    return s;
  }

  // --- Values -----------------------------------------------------------------------
  const Type &type(const Val &v) const { return out_.program.type(v.id); }
  Shape shapeOf(const Val &v) const { return type(v).shape; }

  /// Adds `v` to the pool, scaled back first if its bound grew too large.
  Val push(Val v) {
    v = scaled(v, kMaxBound);
    pool_.push_back(v);
    if (chance(0.08)) {
      // Mostly plain names; some need quotes, some are names the passes give their own
      // values (grad's inputs and outputs, checkpoint's clones), to meet them.
      static const char *taken[] = {"grad_x0", "ct_out0", "ct_loss", "x1.remat", "loss", "res0"};
      std::string name = chance(0.8)   ? "v" + std::to_string(named_++)
                         : chance(0.5) ? "a name." + std::to_string(named_++)
                                       : taken[pick(6)];
      out_.program.setName(v.id, name);
    }
    return v;
  }

  /// A fresh input; `continuous` overrides the program's quantized values.
  Val input(const Type &t, bool continuous = false) {
    ValueId v = out_.program.addInput("x" + std::to_string(out_.inputs.size()), t);
    Tensor data = Tensor::zeros(t);
    for (double &x : data.data) x = out_.quantized && !continuous ? level() : uniform(-1, 1);
    // Helper inputs (continuous: noise, cotangents, right-hand sides) meet inexact values
    // in products, so only the program's own inputs get a special value.
    if (out_.nonFinite && !continuous && !data.data.empty() && chance(0.3)) {
      static const double specials[] = {NAN, INFINITY, -INFINITY};
      data.data[pick(data.data.size())] = specials[pick(3)];
      nonFiniteInputs_.insert(v);
    }
    out_.inputs.push_back(std::move(data));
    Val r{v, true, 1, 0};
    pool_.push_back(r);
    return r;
  }

  /// A constant of type `t`: one repeated value (0, 1, ... : the fold pass's
  /// identities), the quantized levels, or uniform values.
  Val constantOf(const Type &t) {
    Tensor c = Tensor::zeros(t);
    static const double repeated[] = {0.0, 1.0, -0.0, 2.0, 0.5, -1.0};
    size_t how = pick(3);
    double rep = repeated[pick(6)];
    for (double &x : c.data) x = how == 0 ? rep : how == 1 ? level() : uniform(-1, 1);
    double hi = 0, lo = INFINITY;
    for (double x : c.data) {
      hi = std::max(hi, std::fabs(x));
      lo = std::min(lo, x);
    }
    Val r{b_.constant(c), true, std::max(hi, 1e-3), lo > 0 && std::isfinite(lo) ? lo : 0};
    pool_.push_back(r);
    return r;
  }

  /// A tensor of `shape` filled with `c`: a constant, or a broadcast scalar constant.
  ValueId splat(double c, const Shape &s) {
    if (s.empty() || chance(0.5)) return b_.full(Type(s), c);
    return b_.broadcastScalar(b_.scalar(c), s);
  }

  /// `v` times a power of two that brings its bound to at most `maxBound` (exact:
  /// scaling by 2^-k rounds nothing).
  Val scaled(Val v, double maxBound) {
    if (v.bound <= maxBound) return v;
    double s = std::ldexp(1.0, -static_cast<int>(std::ceil(std::log2(v.bound / maxBound))));
    return Val{b_.mul(v.id, splat(s, shapeOf(v))), v.exact, v.bound * s, v.lo * s};
  }

  Val any() { return pool_[pick(pool_.size())]; }

  /// The SVD rules' scale sweep: with probability 1/4 the matrix is multiplied by 2^e,
  /// e ∈ {−540, −700, −1000} (σ near 1e-163 … 1e-301, where σ² underflows and the
  /// kernels must work at a scale of their own), and unscale() multiplies the op's
  /// results back by 2^−e. Both exact: the value is that of the unscaled matrix but
  /// for how h of reconstruction() sees s. Returns e (0: not scaled).
  int tinyScale(Val &m) {
    if (!chance(0.25)) return 0;
    static const int exps[] = {-540, -700, -1000};
    const int e = exps[pick(3)];
    const double c = std::ldexp(1.0, e);
    m = Val{b_.mul(m.id, splat(c, shapeOf(m))), m.exact, m.bound * c, m.lo * c};
    return e;
  }
  Val unscale(Val v, int e) {
    if (e == 0) return v;
    const double c = std::ldexp(1.0, -e);
    return Val{b_.mul(v.id, splat(c, shapeOf(v))), false, v.bound * c, 0};
  }


  /// True when `v` may hold NaN or ±inf: it reads, through any chain of ops, an input
  /// holding one, or is a reduce_max over nothing (−inf).
  bool mayBeNonFinite(ValueId v) {
    if (!out_.nonFinite) return false;
    if (nonFiniteMemo_.size() <= v) nonFiniteMemo_.resize(out_.program.values.size(), -1);
    if (nonFiniteMemo_[v] >= 0) return nonFiniteMemo_[v] != 0;
    const ir::ValueInfo &info = out_.program.value(v);
    bool r = false;
    if (info.def < 0) {
      r = nonFiniteInputs_.count(v) != 0;
    } else {
      const ir::Op &op = out_.program.ops[static_cast<size_t>(info.def)];
      r = op.kind == OpKind::ReduceMax && numel(out_.program.type(op.operands[0]).shape) == 0;
      for (ValueId x : op.operands) r = r || mayBeNonFinite(x);
    }
    nonFiniteMemo_[v] = r ? 1 : 0;
    return r;
  }

  /// False for a product whose operands mix an inexact value with one that may be
  /// non-finite: an inexact value that is 0 in exact arithmetic comes out as rounding of
  /// either sign (or 0), and times ±inf that decides between +inf, −inf and NaN.
  bool productIsDecided(llvm::ArrayRef<Val> operands) {
    bool inexact = false, nonFinite = false;
    for (const Val &v : operands) {
      inexact |= !v.exact;
      nonFinite |= mayBeNonFinite(v.id);
    }
    return !(inexact && nonFinite);
  }

  /// An exact value of the pool, or a fresh input.
  Val anyExact() {
    std::vector<size_t> c;
    for (size_t i = 0; i < pool_.size(); ++i)
      if (pool_[i].exact) c.push_back(i);
    if (c.empty() || chance(0.1)) return input(Type(shape(3)));
    return pool_[c[pick(c.size())]];
  }

  /// A second operand of `a`'s type: a value of the pool (perhaps `a` itself), a
  /// fresh input or constant, or the sum of another value broadcast to the shape.
  Val partner(const Val &a, bool needExact) {
    const Type t = type(a);
    std::vector<size_t> same;
    for (size_t i = 0; i < pool_.size(); ++i)
      if (type(pool_[i]) == t && (pool_[i].exact || !needExact)) same.push_back(i);
    double r = uniform(0, 1);
    if (!same.empty() && r < 0.55) return pool_[same[pick(same.size())]];
    if (r < 0.75) return input(t);
    if (r < 0.9) return constantOf(t);
    Val s = needExact ? anyExact() : any();
    ValueId sum = b_.reduceSum(s.id, allAxes(type(s).rank()));
    ValueId squashed = b_.unary(OpKind::Sin, sum);
    return Val{t.rank() ? b_.broadcastScalar(squashed, t.shape) : squashed, s.exact, 1, 0};
  }

  /// `a` if it is bounded away from 0, else a·a + c for a c > 0.
  Val positive(Val a) {
    if (a.lo >= 0.2) return a;
    a = scaled(a, 4);
    static const double cs[] = {0.25, 0.5, 1.0, 2.0};
    double c = cs[pick(4)];
    ValueId v = b_.add(b_.mul(a.id, a.id), splat(c, shapeOf(a)));
    return Val{v, a.exact, a.bound * a.bound + c, c};
  }

  /// A random subset of `rank` axes (sometimes all), sometimes in a random order.
  std::vector<int64_t> randomAxes(int rank) {
    std::vector<int64_t> axes;
    double p = chance(0.2) ? 1.0 : 0.5;
    for (int d = 0; d < rank; ++d)
      if (chance(p)) axes.push_back(d);
    if (chance(0.3)) std::shuffle(axes.begin(), axes.end(), rng_);
    return axes;
  }

  /// Rewrites a value into an [m, n] matrix with sides at most kMaxSvdSide, or
  /// returns false.
  bool asMatrix(const Val &a, Val &m);

  /// U·diag(g)·Vt for g = s·h(s) (h even), through a three-operand einsum or a
  /// broadcast mul and a dot_general. Returns the product and a bound of it.
  Val reconstruction(ValueId u, ValueId s, ValueId vt, double sBound);

  void chooseOutputs();
  void maybeSetLoc() {
    static const char *locs[] = {"", "gen", "step 3: svd Ma", "quote \" and \\ back\tslash"};
    if (chance(0.2)) b_.setLoc(locs[pick(4)]);
  }

  std::mt19937_64 rng_;
  GeneratedProgram out_;
  Builder b_;
  GeneratorOptions opts_;
  std::vector<Val> pool_;
  std::set<ValueId> nonFiniteInputs_; ///< inputs holding a NaN or an infinity
  std::vector<int8_t> nonFiniteMemo_;  ///< mayBeNonFinite per value: -1 unknown, 0, 1
  bool allowZero_ = false;
  bool large_ = false; ///< large extents (see extent())
  int named_ = 0;
};

bool Gen::iota() {
  Shape s = shape(3);
  if (s.empty()) s.push_back(extent());
  int64_t dim = static_cast<int64_t>(pick(s.size()));
  double hi = std::max<double>(1, static_cast<double>(s[static_cast<size_t>(dim)] - 1));
  push(Val{b_.iota(s, dim), true, hi, 0});
  return true;
}

bool Gen::unary(OpKind k) {
  switch (k) {
  case OpKind::Neg:
  case OpKind::StopGradient: {
    Val a = any();
    push(Val{b_.unary(k, a.id), a.exact, a.bound, k == OpKind::Neg ? 0 : a.lo});
    return true;
  }
  case OpKind::Exp: {
    Val a = scaled(any(), 2);
    push(Val{b_.unary(k, a.id), a.exact, std::exp(a.bound), std::exp(-a.bound)});
    return true;
  }
  case OpKind::Log: {
    Val a = positive(any());
    double hi = std::max({std::fabs(std::log(a.lo)), std::fabs(std::log(a.bound)), 1e-3});
    push(Val{b_.unary(k, a.id), a.exact, hi, a.lo > 1 ? std::log(a.lo) : 0});
    return true;
  }
  case OpKind::Sqrt: {
    // sqrt of exact zeros only where nothing differentiates it (its slope is infinite).
    if (!out_.differentiable && chance(0.3)) {
      Val a = anyExact();
      ValueId ab = b_.unary(OpKind::Abs, a.id);
      push(Val{b_.unary(k, ab), true, std::sqrt(a.bound), 0});
      return true;
    }
    Val a = positive(any());
    push(Val{b_.unary(k, a.id), a.exact, std::sqrt(a.bound), std::sqrt(a.lo)});
    return true;
  }
  case OpKind::Sin:
  case OpKind::Cos:
  case OpKind::Tanh: {
    Val a = scaled(any(), 100);
    push(Val{b_.unary(k, a.id), a.exact, 1, 0});
    return true;
  }
  case OpKind::Abs:
  case OpKind::Sign: {
    Val a = anyExact();
    push(Val{b_.unary(k, a.id), true, k == OpKind::Abs ? a.bound : 1, 0});
    return true;
  }
  default: return false;
  }
}

bool Gen::binary(OpKind k) {
  const bool kink = k == OpKind::Maximum;
  Val a = kink ? anyExact() : any();
  Val c = partner(a, kink);
  if (k == OpKind::Div) c = positive(c);
  if ((k == OpKind::Mul || k == OpKind::Div) && !productIsDecided({a, c})) return false;
  Val r{ir::kNoValue, a.exact && c.exact, 0, 0};
  switch (k) {
  case OpKind::Add:
    r.bound = a.bound + c.bound;
    r.lo = a.lo > 0 && c.lo > 0 ? a.lo + c.lo : 0;
    break;
  case OpKind::Sub: r.bound = a.bound + c.bound; break;
  case OpKind::Mul:
    r.bound = a.bound * c.bound;
    r.lo = a.lo * c.lo;
    break;
  case OpKind::Div:
    r.bound = a.bound / c.lo;
    r.lo = a.lo / c.bound;
    break;
  case OpKind::Maximum:
    r.bound = std::max(a.bound, c.bound);
    r.lo = std::max(a.lo, c.lo);
    break;
  default: return false;
  }
  r.id = b_.binary(k, a.id, c.id);
  push(r);
  return true;
}

bool Gen::compare() {
  static const char *dirs[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
  Val a = anyExact();
  Val c = partner(a, true);
  push(Val{b_.compare(a.id, c.id, dirs[pick(6)]), true, 1, 0});
  return true;
}

bool Gen::select() {
  // Any exact value is a predicate (nonzero picks the first branch); compare results
  // are in the pool too.
  Val p = anyExact();
  Val a = partner(p, false), c = partner(p, false);
  push(Val{b_.select(p.id, a.id, c.id), p.exact && a.exact && c.exact,
           std::max(a.bound, c.bound), std::min(a.lo, c.lo)});
  return true;
}

bool Gen::reduce(OpKind k) {
  const bool isMax = k == OpKind::ReduceMax;
  Val a = isMax ? anyExact() : any();
  Shape s = shapeOf(a);
  std::vector<int64_t> axes = randomAxes(static_cast<int>(s.size()));
  int64_t reduced = 1, kept = 1;
  for (size_t d = 0; d < s.size(); ++d)
    (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end() ? reduced : kept) *= s[d];
  if (isMax && reduced == 0 && kept > 0 && !out_.nonFinite) return false; // max of nothing: -inf
  if (isMax) {
    push(Val{b_.reduceMax(a.id, axes), true, a.bound, a.lo});
  } else {
    push(Val{b_.reduceSum(a.id, axes), a.exact,
             a.bound * static_cast<double>(std::max<int64_t>(1, reduced)), 0});
  }
  return true;
}

bool Gen::broadcastInDim() {
  Val a = any();
  Shape in = shapeOf(a);
  if (in.size() > 3) return false;
  size_t rank = in.size() + pick(3);
  // The operand's dims go to a sorted random subset of the result's dims.
  std::vector<int64_t> positions = allAxes(static_cast<int>(rank));
  std::shuffle(positions.begin(), positions.end(), rng_);
  std::vector<int64_t> dims(positions.begin(), positions.begin() + static_cast<long>(in.size()));
  std::sort(dims.begin(), dims.end());
  Shape out(rank, 0);
  for (size_t d = 0; d < rank; ++d) out[d] = extent();
  for (size_t i = 0; i < in.size(); ++i)
    out[static_cast<size_t>(dims[i])] = in[i] != 1 ? in[i] : (chance(0.5) ? 1 : extent());
  if (numel(out) > maxNumel()) return false;
  push(Val{b_.broadcastInDim(a.id, out, dims), a.exact, a.bound, a.lo});
  return true;
}

bool Gen::reshape() {
  Val a = any();
  int64_t n = numel(shapeOf(a));
  Shape out;
  if (n == 0) {
    for (size_t r = 1 + pick(3); r > 0; --r) out.push_back(extent());
    out[pick(out.size())] = 0;
  } else {
    // The prime factors of n, dealt into 1..3 dims, with some size-1 dims between.
    std::vector<int64_t> primes;
    for (int64_t m = n, f = 2; m > 1;) {
      if (m % f == 0) {
        primes.push_back(f);
        m /= f;
      } else {
        ++f;
      }
    }
    std::shuffle(primes.begin(), primes.end(), rng_);
    out.assign(1 + pick(3), 1);
    for (int64_t f : primes) out[pick(out.size())] *= f;
    for (size_t k = pick(3); k > 0 && out.size() < static_cast<size_t>(kMaxRank); --k)
      out.insert(out.begin() + static_cast<long>(pick(out.size() + 1)), 1);
  }
  push(Val{b_.reshape(a.id, out), a.exact, a.bound, a.lo});
  return true;
}

bool Gen::transpose() {
  Val a = any();
  std::vector<int64_t> perm = allAxes(type(a).rank());
  std::shuffle(perm.begin(), perm.end(), rng_);
  push(Val{b_.transpose(a.id, perm), a.exact, a.bound, a.lo});
  return true;
}

bool Gen::slice() {
  Val a = any();
  std::vector<int64_t> start, limit;
  for (int64_t e : shapeOf(a)) {
    int64_t s = static_cast<int64_t>(pick(static_cast<size_t>(e) + 1));
    start.push_back(chance(0.3) ? 0 : s);
    limit.push_back(start.back() + static_cast<int64_t>(pick(static_cast<size_t>(e - start.back()) + 1)));
    if (chance(0.3)) limit.back() = e;
  }
  push(Val{b_.slice(a.id, start, limit), a.exact, a.bound, a.lo});
  return true;
}

bool Gen::pad() {
  Val a = any();
  Shape s = shapeOf(a);
  std::vector<int64_t> low, high;
  Shape out;
  for (int64_t e : s) {
    low.push_back(static_cast<int64_t>(pick(3)));
    high.push_back(static_cast<int64_t>(pick(3)));
    out.push_back(e + low.back() + high.back());
  }
  if (numel(out) > maxNumel()) return false;
  push(Val{b_.pad(a.id, low, high), a.exact, a.bound, 0});
  return true;
}

bool Gen::dotGeneral() {
  Val a = any();
  Shape ls = shapeOf(a);
  std::vector<int64_t> order = allAxes(static_cast<int>(ls.size()));
  std::shuffle(order.begin(), order.end(), rng_);
  std::vector<int64_t> lb, lc, rb, rc;
  size_t lfree = 0;
  for (int64_t d : order) {
    size_t role = pick(3);
    if (role == 0) lb.push_back(d);
    else if (role == 1) lc.push_back(d);
    else ++lfree;
  }
  Val r;
  Shape result;
  for (int64_t d : lb) result.push_back(ls[static_cast<size_t>(d)]);
  for (size_t d = 0; d < ls.size(); ++d)
    if (std::find(lb.begin(), lb.end(), d) == lb.end() &&
        std::find(lc.begin(), lc.end(), d) == lc.end())
      result.push_back(ls[d]);
  if (chance(0.3)) {
    // The operand with itself, batch and contracting dims paired with themselves.
    r = a;
    rb = lb;
    rc = lc;
    for (size_t d = 0; d < ls.size(); ++d)
      if (std::find(lb.begin(), lb.end(), d) == lb.end() &&
          std::find(lc.begin(), lc.end(), d) == lc.end())
        result.push_back(ls[d]);
  } else {
    // A right operand with the batch and contracting extents and up to two free dims,
    // in a random order of its own.
    Shape rs;
    for (int64_t d : lb) rs.push_back(ls[static_cast<size_t>(d)]);
    for (int64_t d : lc) rs.push_back(ls[static_cast<size_t>(d)]);
    size_t nfree = pick(3);
    for (size_t f = 0; f < nfree; ++f) rs.push_back(extent());
    std::vector<int64_t> place = allAxes(static_cast<int>(rs.size()));
    std::shuffle(place.begin(), place.end(), rng_);
    Shape placed(rs.size());
    for (size_t i = 0; i < rs.size(); ++i) placed[static_cast<size_t>(place[i])] = rs[i];
    for (size_t i = 0; i < lb.size(); ++i) rb.push_back(place[i]);
    for (size_t i = 0; i < lc.size(); ++i) rc.push_back(place[lb.size() + i]);
    for (size_t f = 0; f < nfree; ++f) result.push_back(rs[lb.size() + lc.size() + f]);
    if (result.size() > static_cast<size_t>(kMaxRank) || numel(result) > maxNumel()) return false;
    std::vector<size_t> same;
    for (size_t i = 0; i < pool_.size(); ++i)
      if (shapeOf(pool_[i]) == placed) same.push_back(i);
    r = !same.empty() && chance(0.4) ? pool_[same[pick(same.size())]] : input(Type(placed));
  }
  if (result.size() > static_cast<size_t>(kMaxRank) || numel(result) > maxNumel()) return false;
  if (!productIsDecided({a, r})) return false;
  int64_t k = 1;
  for (int64_t d : lc) k *= ls[static_cast<size_t>(d)];
  push(Val{b_.dotGeneral(a.id, r.id, lb, rb, lc, rc), false,
           a.bound * r.bound * static_cast<double>(std::max<int64_t>(1, k)), 0});
  return true;
}

bool Gen::einsum() {
  // Operands from the pool; each dim reuses a label of the same extent (shared with
  // another operand, or repeated inside its own: a diagonal) or takes a new one.
  std::string labels; // every label so far
  std::vector<int64_t> extents;
  std::vector<Val> ops;
  std::vector<std::string> subs;
  for (size_t n = 1 + pick(3); n > 0; --n) {
    Val v = any();
    if (type(v).rank() > 4) continue;
    std::string sub;
    for (int64_t e : shapeOf(v)) {
      std::vector<size_t> same;
      for (size_t i = 0; i < labels.size(); ++i)
        if (extents[i] == e) same.push_back(i);
      if (!same.empty() && chance(0.5)) {
        sub += labels[same[pick(same.size())]];
      } else {
        if (labels.size() >= kMaxEinsumLabels) return false;
        char c = static_cast<char>(labels.size() < 26 ? 'a' + labels.size() : 'A' + labels.size() - 26);
        labels += c;
        extents.push_back(e);
        sub += c;
      }
    }
    ops.push_back(v);
    subs.push_back(sub);
  }
  if (ops.empty() || numel(extents) > kMaxEinsumWork || !productIsDecided(ops)) return false;
  std::string out;
  Shape outShape;
  for (size_t i = 0; i < labels.size(); ++i)
    if (chance(0.5)) out += labels[i];
  std::shuffle(out.begin(), out.end(), rng_);
  for (char c : out) outShape.push_back(extents[labels.find(c)]);
  if (outShape.size() > static_cast<size_t>(kMaxRank) || numel(outShape) > maxNumel()) return false;
  std::string spec;
  std::vector<ValueId> ids;
  double bound = 1;
  for (size_t i = 0; i < ops.size(); ++i) {
    spec += (i ? "," : "") + subs[i];
    ids.push_back(ops[i].id);
    bound *= ops[i].bound;
  }
  spec += "->" + out;
  int64_t summed = 1;
  for (size_t i = 0; i < labels.size(); ++i)
    if (out.find(labels[i]) == std::string::npos) summed *= extents[i];
  push(Val{b_.einsum(spec, ids), false, bound * static_cast<double>(std::max<int64_t>(1, summed)), 0});
  return true;
}

bool Gen::asMatrix(const Val &a, Val &m) {
  Shape s = shapeOf(a);
  if (s.size() == 2 && chance(0.7)) {
    m = a;
  } else {
    int64_t n = numel(s), rows;
    if (n == 0) {
      rows = chance(0.5) ? 0 : extent();
    } else {
      std::vector<int64_t> divisors;
      for (int64_t d = 1; d <= n; ++d)
        if (n % d == 0 && d <= kMaxSvdSide && n / d <= kMaxSvdSide) divisors.push_back(d);
      if (divisors.empty()) return false;
      rows = divisors[pick(divisors.size())];
    }
    int64_t cols = rows == 0 ? extent() : n / rows;
    m = Val{b_.reshape(a.id, {rows, cols}), a.exact, a.bound, a.lo};
  }
  Shape ms = shapeOf(m);
  return ms[0] <= kMaxSvdSide && ms[1] <= kMaxSvdSide;
}

Val Gen::reconstruction(ValueId u, ValueId s, ValueId vt, double sBound) {
  // g = s·h(s) with h even, so U·diag(g)·Vt = A·h(AᵀA)-like: a smooth function of A
  // that does not depend on the basis LAPACK picked.
  ValueId g = s;
  double gBound = sBound;
  Shape ks = b_.type(s).shape;
  switch (pick(4)) {
  case 0: break;
  case 1: g = b_.mul(s, b_.unary(OpKind::Cos, s)); break;
  case 2:
    g = b_.mul(s, b_.add(b_.mul(s, s), splat(1.0, ks)));
    gBound = sBound * (1 + sBound * sBound);
    break;
  default: g = b_.mul(s, b_.unary(OpKind::Exp, b_.neg(b_.mul(s, s)))); break;
  }
  Shape us = b_.type(u).shape;
  ValueId r;
  if (chance(0.5)) {
    r = b_.einsum("ik,k,kj->ij", {u, g, vt});
  } else {
    ValueId ug = b_.mul(u, b_.broadcastInDim(g, us, {1}));
    r = b_.dotGeneral(ug, vt, {}, {}, {1}, {0});
  }
  return Val{r, false, gBound, 0};
}

/// svd_topk in forms whose value does not depend on the basis: the k leading singular
/// values, all K triplets reconstructed, or (for a matrix made generic by a noise
/// input) the r < K leading ones reconstructed.
bool Gen::svdTopk() {
  Val m;
  if (!asMatrix(any(), m)) return false;
  m = scaled(m, 1);
  Shape ms = shapeOf(m);
  const int64_t rows = ms[0], cols = ms[1], K = std::min(rows, cols);
  if (K == 0) return false;
  if (out_.differentiable) {
    // A generic matrix, as for svd: distinct, nonzero singular values (at a zero or
    // repeated one the derivative depends on the basis the kernel picks).
    Val noise = input(Type(ms), true);
    m = Val{b_.add(m.id, noise.id), m.exact, m.bound + 1, 0};
  }
  const int e = tinyScale(m);
  const double sBound = m.bound * std::sqrt(static_cast<double>(std::max<int64_t>(1, rows * cols)));
  const size_t form = pick(out_.differentiable && K >= 2 ? 3 : 2);
  if (form == 0) {
    auto usv = b_.svdTopk(m.id, 1 + static_cast<int64_t>(pick(static_cast<size_t>(K))));
    push(unscale(Val{usv[1], false, sBound, 0}, e));
  } else if (form == 2) {
    // The r < K leading triplets of a generic matrix: basis independent while
    // s[r-1] > s[r]; its gradient goes through svd_topk_complement.
    const int64_t r = 1 + static_cast<int64_t>(pick(static_cast<size_t>(K - 1)));
    auto usv = b_.svdTopk(m.id, r);
    push(unscale(reconstruction(usv[0], usv[1], usv[2], sBound), e));
  } else {
    auto usv = b_.svdTopk(m.id, K);
    push(unscale(reconstruction(usv[0], usv[1], usv[2], sBound), e));
  }
  return true;
}

/// svd_topk_complement as svd_topk's reverse rule uses it, on cotangents that turn with
/// the kept triplets (Ū = G·V_r, V̄t = U_rᵀ·G' for fresh continuous G, G': a sign flip or
/// a rotation of kept triplets with equal values turns X and Y alike), read out as
/// X·Vt_r + U_r·Yt, which does not depend on the basis the kernel picks. The matrix gets
/// a fresh continuous one added (distinct singular values: the solve's gaps are
/// generic). Never in a program meant to be differentiated: the op has no VJP rule yet.
bool Gen::svdTopkComplement() {
  if (out_.differentiable) return false;
  Val m;
  if (!asMatrix(any(), m)) return false;
  m = scaled(m, 1);
  Shape ms = shapeOf(m);
  const int64_t rows = ms[0], cols = ms[1], K = std::min(rows, cols);
  if (K < 2) return false;
  Val noise = input(Type(ms), true);
  m = Val{b_.add(m.id, noise.id), false, m.bound + 1, 0};
  // k ≤ K: with every triplet kept the side the kept vectors span has no complement, and
  // X (or Y) is exactly 0 there.
  const int64_t k = 1 + static_cast<int64_t>(pick(static_cast<size_t>(K)));
  const int64_t r = 1 + static_cast<int64_t>(pick(static_cast<size_t>(k)));
  auto usv = b_.svdTopk(m.id, k);
  ValueId ur = b_.slice(usv[0], {0, 0}, {rows, r});
  ValueId vtr = b_.slice(usv[2], {0, 0}, {r, cols});
  Val g = input(Type({rows, cols}), true), g2 = input(Type({rows, cols}), true);
  ValueId gU = b_.dotGeneral(g.id, vtr, {}, {}, {1}, {1});   // G·V_r [rows, r]
  ValueId gVt = b_.dotGeneral(ur, g2.id, {}, {}, {0}, {0});  // U_rᵀ·G' [r, cols]
  static const double epss[] = {1e-12, 1e-9, 0.0};
  auto xy = b_.svdTopkComplement(m.id, usv[0], usv[1], usv[2], gU, gVt, epss[pick(3)]);
  ValueId out = b_.add(b_.dotGeneral(xy[0], vtr, {}, {}, {1}, {0}), b_.dotGeneral(ur, xy[1], {}, {}, {1}, {0}));
  // |X|, |Y| <= |Ū| / gap: no bound the generator knows; tanh keeps the value in (-1, 1)
  // for the ops after it (its derivative at most 1, so differences stay as they are).
  push(Val{b_.unary(OpKind::Tanh, out), false, 1, 0});
  return true;
}

bool Gen::svd() {
  Val m;
  if (!asMatrix(any(), m)) return false;
  m = scaled(m, 1);
  Shape ms = shapeOf(m);
  if (out_.differentiable) {
    // A generic matrix: distinct, nonzero singular values.
    Val noise = input(Type(ms), true);
    m = Val{b_.add(m.id, noise.id), m.exact, m.bound + 1, 0};
  }
  const int e = tinyScale(m);
  // Broadenings down to one whose square underflows (1e-200) and none at all.
  static const double epss[] = {1e-12, 1e-12, 1e-9, 0.0, 1e-6, 1e-200};
  auto usv = b_.svd(m.id, epss[pick(6)]);
  const int64_t rows = ms[0], cols = ms[1], k = std::min(rows, cols);
  const double sBound = m.bound * std::sqrt(static_cast<double>(std::max<int64_t>(1, rows * cols)));
  size_t form = pick(out_.differentiable && k >= 2 ? 3 : 2);
  if (form == 0) {
    push(unscale(Val{usv[1], false, sBound, 0}, e));
  } else if (form == 1) {
    push(unscale(reconstruction(usv[0], usv[1], usv[2], sBound), e));
  } else {
    // Truncated to the r leading triplets: basis independent while s[r-1] > s[r].
    int64_t r = 1 + static_cast<int64_t>(pick(static_cast<size_t>(k - 1)));
    ValueId u = b_.slice(usv[0], {0, 0}, {rows, r});
    ValueId s = b_.slice(usv[1], {0}, {r});
    ValueId vt = b_.slice(usv[2], {0, 0}, {r, cols});
    push(unscale(reconstruction(u, s, vt, sBound), e));
  }
  return true;
}

/// eigh in forms whose value does not depend on the basis: the eigenvalues, or
/// V·diag(g)·Vᵀ with g = w·h(w) (reconstruction()) over all n eigenpairs or, for a
/// generic matrix, the r lowest. A non-symmetric operand is fine: the op takes its
/// symmetric part.
bool Gen::eigh() {
  Val m;
  if (!asMatrix(any(), m)) return false;
  m = scaled(m, 1);
  Shape ms = shapeOf(m);
  const int64_t n = std::min(ms[0], ms[1]);
  if (n == 0) return false;
  if (ms[0] != ms[1]) m = Val{b_.slice(m.id, {0, 0}, {n, n}), m.exact, m.bound, m.lo};
  if (out_.differentiable) {
    // A generic matrix: distinct eigenvalues (at a tie the derivative of the r lowest
    // depends on the basis the kernel picks).
    Val noise = input(Type({n, n}), true);
    m = Val{b_.add(m.id, noise.id), m.exact, m.bound + 1, 0};
  }
  const int e = tinyScale(m);
  static const double epss[] = {1e-12, 1e-12, 1e-9, 0.0, 1e-6, 1e-200};
  auto wv = b_.eigh(m.id, epss[pick(6)]);
  const double wBound = m.bound * static_cast<double>(n); // |w| <= ‖S‖₂ <= n·max|S_ij|
  const size_t form = pick(out_.differentiable && n >= 2 ? 3 : 2);
  if (form == 0) {
    push(unscale(Val{wv[0], false, wBound, 0}, e));
    return true;
  }
  const int64_t r = form == 1 ? n : 1 + static_cast<int64_t>(pick(static_cast<size_t>(n - 1)));
  ValueId v = r == n ? wv[1] : b_.slice(wv[1], {0, 0}, {n, r});
  ValueId w = r == n ? wv[0] : b_.slice(wv[0], {0}, {r});
  push(unscale(reconstruction(v, w, b_.transpose(v, {1, 0}), wBound), e));
  return true;
}

/// qr of a matrix made generic, hence of full rank, by a noise input (of a rank-deficient
/// matrix Q's trailing columns are rounding noise, which a pass that changes A's last bits
/// turns around): R, Q, or Q·R (= A). The reference's Householder QR is Eigen's, whose
/// reflectors take the sign LAPACK's dlarfg takes (β = −sign(α)·‖x‖), so for a matrix of
/// full rank the factors agree as they are and each is compared so.
bool Gen::qr() {
  Val m;
  if (!asMatrix(any(), m)) return false;
  m = scaled(m, 1);
  const Shape ms = shapeOf(m);
  const int64_t rows = ms[0], cols = ms[1];
  if (std::min(rows, cols) == 0) return false;
  Val noise = input(Type(ms), true);
  m = Val{b_.add(m.id, noise.id), false, m.bound + 1, 0};
  auto qrs = b_.qr(m.id);
  const double rBound = m.bound * std::sqrt(static_cast<double>(rows)); // |R_ij| <= ‖A_:j‖
  switch (pick(3)) {
  case 0: push(Val{qrs[1], false, rBound, 0}); break;
  case 1: push(Val{qrs[0], false, 1, 0}); break;
  default:
    push(Val{b_.dotGeneral(qrs[0], qrs[1], {}, {}, {1}, {0}), false,
             rBound * static_cast<double>(std::min(rows, cols)), 0});
  }
  return true;
}

/// I + E, E the leading square block of a pool matrix (or of `m` when given) scaled to
/// |E_ij| <= 1/(2n): ‖E‖ <= 1/2, so I + E is well conditioned (its eigenvalues or, for a
/// triangle, its inverse bounded). Sets n; false for a pool value with no such block.
bool Gen::nearIdentity(ValueId &A, int64_t &n, const Val *given) {
  Val m;
  if (given) m = *given;
  else if (!asMatrix(any(), m)) return false;
  const Shape ms = shapeOf(m);
  n = std::min(ms[0], ms[1]);
  if (n == 0) return false;
  if (ms[0] != ms[1]) m = Val{b_.slice(m.id, {0, 0}, {n, n}), m.exact, m.bound, m.lo};
  m = scaled(m, 0.5 / static_cast<double>(n));
  ValueId eye = b_.compare(b_.iota({n, n}, 0), b_.iota({n, n}, 1), "EQ");
  A = b_.add(eye, m.id);
  return true;
}

/// triangular_solve with A = I + E (nearIdentity: ‖A⁻¹‖∞ <= 2 on either triangle, so
/// |X| <= 2·max|B|), every flag at random, on a fresh right-hand side.
bool Gen::triangularSolve() {
  ValueId A;
  int64_t n = 0;
  if (!nearIdentity(A, n)) return false;
  const bool left = chance(0.5), lower = chance(0.5), trans = chance(0.5);
  const int64_t r = 1 + static_cast<int64_t>(pick(4));
  Val B = scaled(input(Type(left ? Shape{n, r} : Shape{r, n}), true), 1);
  push(Val{b_.triangularSolve(A, B.id, left, lower, trans), false, 2 * B.bound, 0});
  return true;
}

/// S_A·X + X·S_B = C with A = I + E from the pool and B = I + E' from a fresh input
/// (nearIdentity: eigenvalues in [1/2, 3/2]), so λ_i + μ_j >= 1: a well-conditioned
/// equation whose solution is bounded by the Frobenius norm of C.
bool Gen::sylvesterSolve() {
  ValueId A, B;
  int64_t n = 0, r = 1 + static_cast<int64_t>(pick(4));
  if (!nearIdentity(A, n)) return false;
  const Val fresh = input(Type({r, r}), true);
  if (!nearIdentity(B, r, &fresh)) return false;
  Val C = scaled(input(Type({n, r}), true), 1);
  const double bound = C.bound * std::sqrt(static_cast<double>(n * r));
  push(Val{b_.sylvesterSolve(A, B, C.id), false, bound, 0});
  return true;
}

void Gen::chooseOutputs() {
  ir::Program &p = out_.program;
  // The sinks: op results nothing reads, so that most of the program is live.
  std::vector<int> uses(p.values.size(), 0);
  for (const ir::Op &op : p.ops)
    for (ValueId v : op.operands) ++uses[v];
  std::vector<Val> sinks;
  for (const Val &v : pool_)
    if (p.value(v.id).def >= 0 && uses[v.id] == 0 &&
        std::none_of(sinks.begin(), sinks.end(), [&](const Val &s) { return s.id == v.id; }))
      sinks.push_back(v);
  std::shuffle(sinks.begin(), sinks.end(), rng_);
  if (sinks.empty()) sinks.push_back(pool_.back());
  if (sinks.size() > 5) sinks.resize(5);
  if (out_.differentiable && chance(0.5)) {
    // One scalar loss, so that grad can seed it (no cotangent input): the sum of a
    // weighted sum of each sink.
    ValueId loss = ir::kNoValue;
    for (const Val &v : sinks) {
      ValueId x = v.id;
      if (chance(0.5)) {
        Val w = partner(v, false);
        if (productIsDecided({v, w})) x = b_.mul(v.id, w.id);
      }
      ValueId term = b_.reduceSum(x, allAxes(b_.type(x).rank()));
      loss = loss == ir::kNoValue ? term : b_.add(loss, term);
    }
    if (chance(0.5)) p.setName(loss, chance(0.8) ? "loss" : "the loss");
    p.addOutput(loss);
    return;
  }
  for (const Val &v : sinks) p.addOutput(v.id);
  if (chance(0.2)) p.addOutput(any().id); // perhaps an input, or an output twice
}

// --- The table of generator cases, in ops.def order --------------------------------

using Case = bool (*)(Gen &);
struct Entry {
  OpKind kind;
  Case generate;
};
constexpr Entry kCases[] = {
    {OpKind::Constant, [](Gen &g) { return g.constant(); }},
    {OpKind::Iota, [](Gen &g) { return g.iota(); }},
    {OpKind::Neg, [](Gen &g) { return g.unary(OpKind::Neg); }},
    {OpKind::Exp, [](Gen &g) { return g.unary(OpKind::Exp); }},
    {OpKind::Log, [](Gen &g) { return g.unary(OpKind::Log); }},
    {OpKind::Sqrt, [](Gen &g) { return g.unary(OpKind::Sqrt); }},
    {OpKind::Sin, [](Gen &g) { return g.unary(OpKind::Sin); }},
    {OpKind::Cos, [](Gen &g) { return g.unary(OpKind::Cos); }},
    {OpKind::Tanh, [](Gen &g) { return g.unary(OpKind::Tanh); }},
    {OpKind::Abs, [](Gen &g) { return g.unary(OpKind::Abs); }},
    {OpKind::Sign, [](Gen &g) { return g.unary(OpKind::Sign); }},
    {OpKind::Add, [](Gen &g) { return g.binary(OpKind::Add); }},
    {OpKind::Sub, [](Gen &g) { return g.binary(OpKind::Sub); }},
    {OpKind::Mul, [](Gen &g) { return g.binary(OpKind::Mul); }},
    {OpKind::Div, [](Gen &g) { return g.binary(OpKind::Div); }},
    {OpKind::Maximum, [](Gen &g) { return g.binary(OpKind::Maximum); }},
    {OpKind::Compare, [](Gen &g) { return g.compare(); }},
    {OpKind::Select, [](Gen &g) { return g.select(); }},
    {OpKind::ReduceSum, [](Gen &g) { return g.reduce(OpKind::ReduceSum); }},
    {OpKind::ReduceMax, [](Gen &g) { return g.reduce(OpKind::ReduceMax); }},
    {OpKind::BroadcastInDim, [](Gen &g) { return g.broadcastInDim(); }},
    {OpKind::Reshape, [](Gen &g) { return g.reshape(); }},
    {OpKind::Transpose, [](Gen &g) { return g.transpose(); }},
    {OpKind::Slice, [](Gen &g) { return g.slice(); }},
    {OpKind::Pad, [](Gen &g) { return g.pad(); }},
    {OpKind::DotGeneral, [](Gen &g) { return g.dotGeneral(); }},
    {OpKind::Einsum, [](Gen &g) { return g.einsum(); }},
    {OpKind::Svd, [](Gen &g) { return g.svd(); }},
    {OpKind::SvdTopk, [](Gen &g) { return g.svdTopk(); }},
    // Appears in gradients of svd_topk only (its operands are an SVD and cotangents).
    {OpKind::SvdTopkComplement, [](Gen &g) { return g.svdTopkComplement(); }},
    {OpKind::Eigh, [](Gen &g) { return g.eigh(); }},
    {OpKind::Qr, [](Gen &g) { return g.qr(); }},
    {OpKind::TriangularSolve, [](Gen &g) { return g.triangularSolve(); }},
    {OpKind::SylvesterSolve, [](Gen &g) { return g.sylvesterSolve(); }},
    {OpKind::StopGradient, [](Gen &g) { return g.unary(OpKind::StopGradient); }},
    // Made by stageProgram (below) from a generated program, not op by op.
    {OpKind::Call, [](Gen &) { return false; }},
    {OpKind::Scan, [](Gen &) { return false; }},
};
static_assert(ir::coversEveryOpInOrder(kCases),
              "the differential fuzzer needs a generator case for every op of ir/ops.def, "
              "in its order (fuzz/diff/ProgramGenerator.cpp)");

GeneratedProgram Gen::run() {
  input(Type(shape(3)));
  input(Type(shape(3)));
  const std::vector<OpKind> &kinds = ir::allOpKinds();
  const int size = large_ ? std::min(opts_.size, 10) : opts_.size; // large ones take time
  for (int i = 0; i < size; ++i) {
    maybeSetLoc();
    for (int attempt = 0; attempt < 8; ++attempt)
      if (kCases[static_cast<size_t>(kinds[pick(kinds.size())])].generate(*this)) break;
  }
  b_.setLoc("");
  chooseOutputs();
  if (chance(0.25)) stage();
  return std::move(out_);
}

void Gen::stage() {
  ir::Program body = std::move(out_.program);
  ir::Program entry;
  entry.name = body.name;
  const bool scan = chance(0.5);
  body.name = scan ? "body" : "f";
  for (ValueId in : body.inputs) entry.addInput(body.value(in).name, body.type(in));
  llvm::SmallVector<ValueId, 8> results;
  Builder eb(entry);
  eb.setCallees(entry.functions);
  if (!scan) {
    entry.functions.push_back(std::move(body));
    results = eb.call("f", entry.inputs);
  } else {
    // Some inputs become carries the body returns unchanged (so every iteration computes
    // the same values: the generator's bounds and exactness still hold), the others xs of
    // identical slices; each output is read back from the last slice of its stack.
    std::vector<size_t> carries, xs;
    for (size_t i = 0; i < body.inputs.size(); ++i) (chance(0.4) ? carries : xs).push_back(i);
    std::vector<ValueId> order, outs;
    for (size_t i : carries) order.push_back(body.inputs[i]);
    for (size_t i : xs) order.push_back(body.inputs[i]);
    for (size_t i : carries) outs.push_back(body.inputs[i]);
    outs.insert(outs.end(), body.outputs.begin(), body.outputs.end());
    const size_t nOut = body.outputs.size();
    body.inputs = order;
    body.outputs = outs;
    entry.functions.push_back(std::move(body));
    const int64_t n = 1 + static_cast<int64_t>(pick(3));
    llvm::SmallVector<ValueId, 8> init, stacked;
    for (size_t i : carries) init.push_back(entry.inputs[i]);
    for (size_t i : xs) {
      const Type &t = entry.type(entry.inputs[i]);
      ir::Shape s{n};
      s.append(t.shape.begin(), t.shape.end());
      ir::I64List dims(t.shape.size());
      std::iota(dims.begin(), dims.end(), 1);
      stacked.push_back(eb.broadcastInDim(entry.inputs[i], s, dims));
    }
    auto r = eb.scan("body", init, stacked, n, chance(0.5));
    for (size_t y = 0; y < nOut; ++y) {
      const ValueId ys = r[carries.size() + y];
      const Type &t = entry.type(ys);
      ir::I64List start(t.shape.size(), 0), limit(t.shape.begin(), t.shape.end());
      start[0] = n - 1;
      ir::Shape one(t.shape.begin() + 1, t.shape.end());
      results.push_back(eb.reshape(eb.slice(ys, start, limit), one));
    }
  }
  const ir::Program &f = entry.functions.back();
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string &name = f.value(f.outputs[i + (f.outputs.size() - results.size())]).name;
    if (!ir::isAnonymousName(name) && entry.lookup(name) == ir::kNoValue) entry.setName(results[i], name);
    entry.addOutput(results[i]);
  }
  out_.program = std::move(entry);
}

} // namespace

GeneratedProgram generateProgram(uint64_t seed, const GeneratorOptions &opts) {
  return Gen(seed, opts).run();
}

bool hasKinks(const ir::Program &p) {
  for (const ir::Program &f : p.functions)
    if (hasKinks(f)) return true;
  for (const ir::Op &op : p.ops)
    switch (op.kind) {
    case OpKind::Abs:
    case OpKind::Sign:
    case OpKind::Compare:
    case OpKind::Select:
    case OpKind::Maximum:
    case OpKind::ReduceMax: return true;
    default: break;
    }
  return false;
}

} // namespace tessel::difffuzz
