//===- fuzz/diff/DiffFuzz.cpp - Random pipelines and the oracles ------------------===//
#include "fuzz/diff/DiffFuzz.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <sstream>

#include "fuzz/FuzzCommon.h"
#include "ir/OpAttrs.h"
#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "ir/Printer.h"
#include "ir/ShapeRules.h"
#include "passes/Grad.h"
#include "passes/Inline.h"
#include "passes/Jvp.h"
#include "passes/Instrumentation.h"
#include "passes/PassManager.h"
#include "runtime/Runtime.h"

namespace tessel::difffuzz {

namespace {

using ir::OpKind;
using ir::Program;
using ir::Tensor;

// Salts that give the pipeline choice and the checks their own random streams.
constexpr uint64_t kPipelineSalt = 0x9e3779b97f4a7c15ull;
constexpr uint64_t kExtraInputSalt = 0xc2b2ae3d27d4eb4full;
constexpr uint64_t kDirectionSalt = 0x165667b19e3779f9ull;
constexpr uint64_t kNoiseSalt = 0x27d4eb2f165667c5ull;

std::string firstLine(const std::string &s) { return s.substr(0, s.find('\n')); }

//===--- Running passes -------------------------------------------------------===//

/// How a pipeline run ended.
struct PassOutcome {
  /// Refused: a baseline (gradsOnly) met what hessian refuses by design, which
  /// the pipeline itself avoided (its inline flattened a module whose grad would give
  /// the complement guards): there is nothing to compare against.
  enum class Kind { Ok, Error, Verify, Internal, Refused } kind = Kind::Ok;
  std::string message;
};

/// The pass manager verifies only after a pass that reports a change, and after a
/// function pass on a module only the functions it reports changed: this checks that a
/// pass (or a function) reporting none was left as it was (printed text, constants
/// bit-exact).
class UnchangedCheck : public passes::PassInstrumentation {
public:
  void runBeforePass(const passes::PassRecord &, const Program &p) override { before_ = texts(p); }
  void runAfterPass(passes::PassRecord &pass, const Program &p) override {
    const std::vector<std::string> after = texts(p);
    auto fail = [&](const std::string &what) {
      throw passes::PassFailure{passes::PassFailure::Kind::Verify,
                                "error: pass '" + pass.name + "' reported no change but changed " + what, ""};
    };
    if (pass.changedFunctions.empty()) {
      if (!pass.changed && after != before_) fail("the program");
      return;
    }
    if (after.size() != before_.size() || pass.changedFunctions.size() != after.size())
      fail("the module's functions");
    for (size_t i = 0; i < after.size(); ++i)
      if (!pass.changedFunctions[i] && after[i] != before_[i])
        fail(i + 1 == after.size() ? std::string("the entry") : "function @" + p.functions[i].name);
  }

private:
  /// Each function's text, the entry's last (the whole program for a plain one).
  static std::vector<std::string> texts(const Program &p) {
    std::vector<std::string> t;
    for (const Program &f : p.functions) t.push_back(ir::printProgram(f));
    Program entry = p;
    entry.functions.clear();
    t.push_back(ir::printProgram(entry));
    return t;
  }
  std::vector<std::string> before_;
};

PassOutcome runPipeline(const passes::Pipeline &pipeline, Program &p) {
  std::ostringstream log;
  passes::PassManagerOptions o;
  o.verifyEach = true;
  o.log = &log;
  try {
    passes::PassManager pm(pipeline, o);
    pm.addInstrumentation(std::make_shared<UnchangedCheck>());
    pm.run(p);
    return {};
  } catch (const VerifyError &e) {
    return {PassOutcome::Kind::Verify, e.what()};
  } catch (const Error &e) {
    return {PassOutcome::Kind::Error, e.what()};
  } catch (const std::exception &e) {
    return {PassOutcome::Kind::Internal, e.what()};
  }
}

/// Ops of kind `k` in `p` and, for a module, in its functions.
size_t countOps(const Program &p, OpKind k) {
  size_t n = static_cast<size_t>(
      std::count_if(p.ops.begin(), p.ops.end(), [k](const ir::Op &op) { return op.kind == k; }));
  for (const Program &f : p.functions) n += countOps(f, k);
  return n;
}

/// The passes that change what a program computes: the derivative transforms.
bool isTransform(const std::string &pass) { return pass == "grad" || pass == "jvp" || pass == "hessian"; }

/// The wrt option of a derivative transform.
const std::vector<std::string> &wrtOf(const passes::PassInvocation &inv) {
  if (inv.name() == "jvp") return inv.options<passes::JvpOptions>().wrt;
  if (inv.name() == "hessian") return inv.options<passes::HessianOptions>().wrt;
  return inv.options<passes::GradOptions>().wrt;
}

/// The pipeline as it ran, pass by pass, and what its derivative transforms (grad, jvp,
/// hessian; "grads" below) saw.
struct PipelineRun {
  Program result;
  PassOutcome outcome; ///< of the first pass that failed, if one did
  /// For each transform of the pipeline, in order: its invocation and the input names of
  /// the program it differentiated.
  std::vector<std::pair<passes::PassInvocation, std::vector<std::string>>> grads;
  /// For each grad: the output names of the program it differentiated.
  std::vector<std::vector<std::string>> gradOutputs;
};

std::vector<std::string> inputNames(const Program &p) {
  std::vector<std::string> names;
  for (ir::ValueId v : p.inputs) names.push_back(p.value(v).name);
  return names;
}

PipelineRun runPassByPass(const passes::Pipeline &pipeline, const Program &p0) {
  PipelineRun run{p0, {}, {}, {}};
  for (const passes::PassInvocation &inv : pipeline.passes) {
    if (isTransform(inv.name())) {
      run.grads.emplace_back(inv, inputNames(run.result));
      std::vector<std::string> outs;
      for (size_t i = 0; i < run.result.outputs.size(); ++i) outs.push_back(run.result.outputName(i));
      run.gradOutputs.push_back(std::move(outs));
    }
    run.outcome = runPipeline(passes::Pipeline{{inv}, {}}, run.result);
    if (run.outcome.kind != PassOutcome::Kind::Ok) break;
  }
  return run;
}

/// `p0` with only the first `n` grads of `run` applied, then dce: the values the whole
/// pipeline must reproduce (its other passes change no value beyond rounding, and may
/// drop dead code, with the dead ops that would fail). Each grad differentiates with
/// respect to the inputs at the positions it did in the pipeline: the names of
/// anonymous outputs, hence of grad's cotangent inputs, may differ.
PassOutcome gradsOnly(const Program &p0, const PipelineRun &run, size_t n, Program &out) {
  out = p0;
  for (size_t k = 0; k < n && k < run.grads.size(); ++k) {
    passes::PassInvocation inv = run.grads[k].first;
    const std::vector<std::string> &saw = run.grads[k].second;
    std::string wrt;
    for (const std::string &name : wrtOf(inv)) {
      size_t i = static_cast<size_t>(std::find(saw.begin(), saw.end(), name) - saw.begin());
      if (i >= out.inputs.size()) return {PassOutcome::Kind::Error, "no input %" + name};
      wrt += (wrt.empty() ? "" : ";") + out.value(out.inputs[i]).name;
    }
    inv.set("wrt", wrt);
    if (inv.name() == "jvp") {
      PassOutcome r = runPipeline(passes::Pipeline{{inv}, {}}, out);
      if (r.kind != PassOutcome::Kind::Ok) return r;
      continue;
    }
    if (inv.name() != "grad") {
      auto guarded = [](const Program &f) {
        return std::any_of(f.ops.begin(), f.ops.end(), [](const ir::Op &op) {
          return op.kind == OpKind::SvdTopkComplement && ir::attr<OpKind::SvdTopkComplement, "guards">(op) != 0;
        });
      };
      if (guarded(out) || std::any_of(out.functions.begin(), out.functions.end(), guarded))
        return {PassOutcome::Kind::Refused, inv.name() + " of a svd_topk_complement with guards"};
      PassOutcome r = runPipeline(passes::Pipeline{{inv}, {}}, out);
      if (r.kind != PassOutcome::Kind::Ok) return r;
      continue;
    }
    // aux names outputs: by position, as wrt.
    const std::vector<std::string> &sawOut = run.gradOutputs[k];
    std::string aux;
    for (const std::string &name : inv.options<passes::GradOptions>().aux)
      for (size_t i = 0; i < sawOut.size() && i < out.outputs.size(); ++i)
        if (sawOut[i] == name) aux += (aux.empty() ? "" : ";") + out.outputName(i);
    inv.set("aux", aux);
    PassOutcome r = runPipeline(passes::Pipeline{{inv}, {}}, out);
    if (r.kind != PassOutcome::Kind::Ok) return r;
  }
  return runPipeline(passes::Pipeline::parse("dce"), out);
}

/// `text` with blanks and tabs added around its separators, from `seed`.
std::string withBlanks(const std::string &text, uint64_t seed) {
  std::mt19937_64 rng(seed);
  static const char *blanks[] = {"", " ", "  ", "\t", " \t "};
  std::string out = blanks[rng() % 5];
  for (char ch : text) {
    bool separator = ch == ',' || ch == '{' || ch == '}' || ch == '=' || ch == ';';
    if (separator) out += blanks[rng() % 5];
    out += ch;
    if (separator) out += blanks[rng() % 5];
  }
  return out + blanks[rng() % 5];
}

//===--- Random pipelines -----------------------------------------------------===//

class PipelineChooser {
public:
  PipelineChooser(uint64_t seed, bool allowGrad) : rng_(seed), allowGrad_(allowGrad) {}

  std::string choose(const Program &p0) {
    Program cur = p0;
    passes::Pipeline chosen;
    int grads = 0;
    const std::vector<passes::PassInfo> &registry = passes::passRegistry();
    const passes::PassInfo *afterGrad[] = {passes::lookupPass("checkpoint"),
                                           passes::lookupPass("split-vjp")};
    for (size_t n = pick(7); n > 0; --n) {
      // checkpoint and split-vjp apply only after a grad that kept its outputs: take them
      // more often then.
      const passes::PassInfo *special = afterGrad[pick(2)];
      const passes::PassInfo &info = special && eligible(*special, cur, grads) && chance(0.35)
                                         ? *special
                                         : registry[pick(registry.size())];
      // A "wild" pass gets option values without regard to their validity; it must
      // succeed or throw tessel::Error, and is then left out of the pipeline.
      const bool wild = chance(0.04);
      if (!wild && !eligible(info, cur, grads)) continue;
      if (misorders(chosen, info)) continue; // Pipeline::parse would refuse it

      passes::PassInvocation inv(info);
      try {
        for (const passes::PassOptionInfo &o : info.options)
          inv.set(o.name, optionValue(o, cur, wild));
      } catch (const Error &) {
        if (!wild) throw; // the option parser rejects a value meant to be valid
        continue;         // it rejects a wild value before the pass runs
      }
      if (!wild && info.name == "grad") {
        // Without explicit cotangents grad needs one scalar output.
        bool scalarLoss = cur.outputs.size() == 1 && cur.type(cur.outputs[0]).rank() == 0;
        if (!scalarLoss || chance(0.5)) inv.set("vjp", "true");
        // Auxiliary outputs (named ones) only with explicit cotangents: without, the
        // one output is the loss.
        std::string aux;
        if (inv.options<passes::GradOptions>().vjp && chance(0.3))
          for (size_t i = 0; i < cur.outputs.size(); ++i)
            if (!ir::isAnonymousName(cur.value(cur.outputs[i]).name) && chance(0.5))
              aux += (aux.empty() ? "" : ";") + cur.value(cur.outputs[i]).name;
        inv.set("aux", aux);
      }
      if (!wild && info.name == "hessian") {
        // Scalar inputs only, at least one.
        std::string wrt;
        for (ir::ValueId in : cur.inputs)
          if (cur.type(in).rank() == 0 && (wrt.empty() || chance(0.5)))
            wrt += (wrt.empty() ? "" : ";") + cur.value(in).name;
        inv.set("wrt", wrt);
      }
      Program next = cur;
      PassOutcome r = runPipeline(passes::Pipeline{{inv}, {}}, next);
      if (wild) {
        if (r.kind == PassOutcome::Kind::Verify || r.kind == PassOutcome::Kind::Internal) {
          chosen.passes.push_back(inv); // keep what broke, the check reports it
          break;
        }
        continue;
      }
      chosen.passes.push_back(inv);
      if (r.kind != PassOutcome::Kind::Ok) break; // a pass refused a valid program
      cur = std::move(next);
      grads += info.name == "hessian" ? 2 : isTransform(info.name) ? 1 : 0;
    }
    if (countOps(cur, OpKind::Einsum) > 0) {
      // The runtime executes pairwise products only (as `tessel run` does, lower last).
      const passes::PassInfo *order = passes::lookupPass("order");
      passes::PassInvocation inv(*order);
      for (const passes::PassOptionInfo &o : order->options) inv.set(o.name, optionValue(o, cur, false));
      chosen.passes.push_back(inv);
    }
    return chosen.str();
  }

private:
  /// Whether appending `info` would put a chosen pass that must run after it
  /// (PassInfo::runsAfter) before its first occurrence.
  static bool misorders(const passes::Pipeline &chosen, const passes::PassInfo &info) {
    bool seen = false;
    for (const passes::PassInvocation &c : chosen.passes) {
      if (c.name() == info.name) seen = true;
      if (seen) break;
      for (const passes::PassInfo::RunsAfter &r : c.info().runsAfter)
        if (r.pass == info.name) return true;
    }
    return false;
  }

  size_t pick(size_t n) { return n ? static_cast<size_t>(rng_() % n) : 0; }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  bool eligible(const passes::PassInfo &info, const Program &cur, int grads) {
    if (info.name == "grad") return allowGrad_ && grads < 2 && !cur.inputs.empty();
    // jvp and hessian refuse, by design, what has no derivative rule: a VJP built with
    // grad{bond-gauge=true}; hessian (its grad) also the complement of svd_topk's reverse
    // rule, whose guards jvp holds constant.
    auto hasBondVjp = [](const Program &f) {
      return std::any_of(f.ops.begin(), f.ops.end(), [](const ir::Op &op) {
        return (op.kind == OpKind::Svd || op.kind == OpKind::SvdTopk) && op.attrs.getStr("gauge") == "bond-vjp";
      });
    };
    const bool bondVjp = hasBondVjp(cur) || std::any_of(cur.functions.begin(), cur.functions.end(), hasBondVjp);
    auto hasGuards = [](const Program &f) {
      return std::any_of(f.ops.begin(), f.ops.end(), [](const ir::Op &op) {
        return op.kind == OpKind::SvdTopkComplement && op.attrs.getI64("guards") != 0;
      });
    };
    const bool guards = hasGuards(cur) || std::any_of(cur.functions.begin(), cur.functions.end(), hasGuards);
    if (info.name == "jvp") return allowGrad_ && grads < 2 && !cur.inputs.empty() && !bondVjp;
    if (info.name == "hessian")
      return allowGrad_ && grads == 0 && !bondVjp && !guards && cur.outputs.size() == 1 &&
             cur.type(cur.outputs[0]).rank() == 0 &&
             std::any_of(cur.inputs.begin(), cur.inputs.end(), [&](ir::ValueId v) { return cur.type(v).rank() == 0; });
    if (info.name == "checkpoint" || info.name == "split-vjp")
      return cur.gradSignature && cur.gradSignature->primalOutputs > 0;
    return true;
  }

  /// A random value of option `o` in its text form. List options name inputs of the
  /// program (grad's wrt): a random subset, empty meaning all.
  std::string optionValue(const passes::PassOptionInfo &o, const Program &cur, bool wild) {
    using Kind = passes::PassOptionInfo::Kind;
    switch (o.kind) {
    case Kind::Bool: return chance(0.5) ? "true" : "false";
    case Kind::Int: {
      int64_t lo = o.minInt == INT64_MIN ? 0 : o.minInt;
      if (wild && chance(0.3)) return std::to_string(lo - 1 - static_cast<int64_t>(pick(3)));
      return std::to_string(lo + static_cast<int64_t>(pick(300)));
    }
    case Kind::Enum: return wild && chance(0.2) ? "bogus" : o.allowed[pick(o.allowed.size())];
    case Kind::List: {
      std::string s;
      if (chance(0.2)) return s;
      for (ir::ValueId in : cur.inputs)
        if (chance(0.5)) s += (s.empty() ? "" : ";") + cur.value(in).name;
      if (wild && chance(0.3)) s += (s.empty() ? "" : ";") + std::string("nosuch");
      return s;
    }
    case Kind::String: break;
    }
    // A count: `auto` or an integer >= 1 (passes/PassOptions.h).
    if (wild && chance(0.3)) return "0";
    return chance(0.3) ? "auto" : std::to_string(1 + pick(4));
  }

  std::mt19937_64 rng_;
  bool allowGrad_;
};

//===--- Evaluations and comparisons ------------------------------------------===//

/// Outputs of one evaluation, or the error it threw.
struct Outcome {
  std::vector<Tensor> values;
  bool failed = false;
  bool internal = false; ///< the exception was not a tessel::Error
  std::string error;
};

template <class Evaluate> Outcome evaluate(Evaluate &&f) {
  Outcome o;
  try {
    o.values = f();
  } catch (const Error &e) {
    o.failed = true;
    o.error = e.what();
  } catch (const std::exception &e) {
    o.failed = o.internal = true;
    o.error = e.what();
  }
  return o;
}

std::string describe(const Outcome &o) {
  if (!o.failed) return "outputs";
  return std::string(o.internal ? "a non-tessel exception: " : "error: ") + firstLine(o.error);
}

bool bitwiseEqual(const Tensor &a, const Tensor &b) {
  return a.type == b.type && a.data.size() == b.data.size() &&
         (a.data.empty() ||
          std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(double)) == 0);
}

std::string indexString(const ir::Type &t, size_t lin) {
  std::string s;
  for (size_t d = t.shape.size(); d-- > 0;) {
    int64_t e = t.shape[d];
    s = std::to_string(static_cast<int64_t>(lin) % e) + (s.empty() ? "" : ",") + s;
    lin /= static_cast<size_t>(e);
  }
  return "[" + s + "]";
}

/// Per output, an absolute amount added to the relative tolerance (empty: none).
using Slack = std::vector<double>;

/// "" when `got` is within kRelTol of `want` relative to the largest finite |want|, plus
/// `slack`, else what differs where. Non-finite values must be the same (NaN, inf or
/// -inf) at the same places, unless `anyNonFinite`: then `got` may be non-finite
/// anywhere, and must be where `want` is (and may be anything where `want` is NaN,
/// with `nanIsAny`).
std::string compareTensor(const Tensor &got, const Tensor &want, double slack,
                          bool anyNonFinite, bool nanIsAny) {
  if (got.type != want.type || got.data.size() != want.data.size())
    return "type " + got.type.str() + " vs " + want.type.str();
  double scale = 0;
  for (double y : want.data)
    if (std::isfinite(y)) scale = std::max(scale, std::fabs(y));
  const double tol = kRelTol * scale + slack + 1e-300;
  size_t worst = 0;
  double worstRatio = 0;
  for (size_t i = 0; i < got.data.size(); ++i) {
    double x = got.data[i], y = want.data[i];
    if (x == y || (std::isnan(x) && std::isnan(y))) continue;
    if (anyNonFinite && !std::isfinite(x)) continue;
    if (nanIsAny && std::isnan(y)) continue;
    double ratio = std::isfinite(x) && std::isfinite(y) ? std::fabs(x - y) / tol : INFINITY;
    if (ratio > worstRatio) {
      worstRatio = ratio;
      worst = i;
    }
  }
  if (worstRatio <= 1) return "";
  double x = got.data[worst], y = want.data[worst];
  std::ostringstream s;
  s.precision(17);
  s << "at " << indexString(got.type, worst) << " " << x << " vs " << y << " (|diff| "
    << std::fabs(x - y) << ", max |value| " << scale << ", relative "
    << std::fabs(x - y) / std::max(scale, 1e-300) << ", rounding slack " << slack << ")";
  return s.str();
}

/// How two outcomes of the same outputs must agree.
struct Agreement {
  bool bitwise = false;       ///< the same bits (else within the tolerance)
  bool anyErrorAgrees = false; ///< two errors agree even with different messages
  const Slack *slack = nullptr;
  /// `got` may be non-finite where `want` is finite, and non-finite of another kind
  /// where `want` is non-finite. IEEE arithmetic is not associative around inf and
  /// NaN, and passes regroup sums: the order pass lowers Σ_ab x_a·y_b to (Σx)·(Σy),
  /// which gives inf where the einsum's own sum meets inf and −inf (NaN), and NaN·0
  /// where y is empty and the einsum sums nothing (0). A regrouped sum is non-finite
  /// wherever the sum of the products is, though: a value the grads-only program
  /// computes as NaN or inf must not come out finite after the other passes.
  bool anyNonFinite = false;
  /// `got` may be anything where `want` is NaN. A regrouped sum turns inf − inf (NaN)
  /// into ±inf, and a later op can take that to a finite value (x/inf = 0), so after
  /// the order pass on non-finite inputs a NaN need not survive. For the same reason
  /// `got` may fail where an op that refuses a non-finite operand (a decomposition:
  /// "contains NaN or inf") meets a value `want` computed finite (an empty sum's 0
  /// regrouped into 0·inf).
  bool nanIsAny = false;
};

/// "" when `got` and `want` agree as `how` says, else what differs.
std::string compareOutcomes(const Program &p, const Outcome &got, const Outcome &want,
                            Agreement how, const char *gotName, const char *wantName) {
  if (how.nanIsAny && got.failed && !got.internal && !want.failed && !want.internal &&
      got.error.find("contains NaN or inf") != std::string::npos)
    return "";
  if (got.internal || want.internal || got.failed != want.failed)
    return std::string(gotName) + " gives " + describe(got) + ", " + wantName + " " + describe(want);
  if (got.failed) {
    if (how.anyErrorAgrees || got.error == want.error) return "";
    return std::string("both fail, with different errors: ") + gotName + ": " +
           firstLine(got.error) + " | " + wantName + ": " + firstLine(want.error);
  }
  if (got.values.size() != want.values.size())
    return std::to_string(got.values.size()) + " outputs vs " + std::to_string(want.values.size());
  for (size_t i = 0; i < got.values.size(); ++i) {
    double slack = how.slack && i < how.slack->size() ? (*how.slack)[i] : 0.0;
    std::string d = how.bitwise
                        ? (bitwiseEqual(got.values[i], want.values[i]) ? "" : "bits differ")
                        : compareTensor(got.values[i], want.values[i], slack, how.anyNonFinite,
                                        how.nanIsAny);
    if (!d.empty())
      return "output " + std::to_string(i) + " (" +
             (i < p.outputs.size() ? ir::valueRef(p, p.outputs[i]) : std::string("?")) + " " +
             got.values[i].type.str() + "): " + gotName + " vs " + wantName + ": " + d;
  }
  return "";
}

//===--- The rounding model ----------------------------------------------------===//
//
// The evaluators round differently in sums of products (BLAS against loops, a lowered
// einsum against the naive one) and in the decompositions (the engine's LAPACK against
// the reference's Eigen), and the programs may amplify those differences (cancellation
// in a gradient that is mathematically zero, say). To tell amplified rounding from a
// bug, the reference also evaluates a copy of the program in which every such result
// is perturbed by about its own rounding error: a product y becomes y + δ·(|A|·|B|)
// (the same product of absolute values, |δ| uniform in [½, 1]·(K + 2)·u with either
// sign for K summed terms, u = 2⁻⁵³), and a reduce_sum of K terms y + δ·Σ|x| (the
// engine adds in another order than the reference's loop); svd's U and Vt get ±(m + n)·u and s gets
// ±(m + n)·u·Σs; eigh's V gets ±2n·u and w gets ±2n·u·Σ|w| (an eigenvalue is exact to
// u·‖A‖, not to u·|w_i|: a zero eigenvalue comes out as rounding of either sign); qr's Q
// gets ±(m + n)·u and R gets ±(m + n)·u·Σ|R|. Each decomposition's operand A also gets
// its backward error, ±(m + n)·u·max|A| (symmetric for eigh), and a triangular solve's
// triangle ±(n + 2)·u·|A| elementwise, which the results' own conditioning amplifies as
// it does in LAPACK and Eigen (singular vectors of close singular values); a solve's x
// also gets ±(n + 2)·u·|x| (dtrsm and the reference's loops round x differently, and two
// solves with one triangle then fail to cancel where the exact values do). The spread of
// two such evaluations, times kNoiseFactor, is added to the tolerance of each output.
// The noise is drawn kNoiseAmplification times larger and the spread divided by it: an
// output's response to noise of one ulp is itself about an ulp, which the noisy
// evaluation's own rounding can cancel exactly (a Hessian of qr that is 0 stayed 0 under
// both draws while dtrsm's rounding moved the engine's by 1e-16); 2¹⁰ ulps keep the
// response linear and above that rounding.
// The generator keeps discontinuous ops off inexact values (ProgramGenerator.h), so the
// perturbation only moves outputs continuously.

constexpr double kUnitRoundoff = 0x1p-53;
constexpr double kNoiseFactor = 8;
constexpr double kNoiseAmplification = 0x1p10;

/// Number of products each element of a contraction sums.
double summedTerms(const Program &p, const ir::Op &op) {
  double k = 1;
  if (op.kind == OpKind::DotGeneral) {
    const ir::Type &l = p.type(op.operands[0]);
    for (int64_t d : op.attrs.getI64s("lhs_contract")) k *= static_cast<double>(l.shape[static_cast<size_t>(d)]);
  } else {
    ir::EinsumSpec spec = ir::parseEinsumSpec(op.attrs.getStr("spec"));
    std::string seen;
    for (size_t i = 0; i < spec.inputs.size(); ++i)
      for (size_t j = 0; j < spec.inputs[i].size(); ++j) {
        char c = spec.inputs[i][j];
        if (spec.output.find(c) != std::string::npos || seen.find(c) != std::string::npos) continue;
        seen += c;
        k *= static_cast<double>(p.type(op.operands[i]).shape[j]);
      }
  }
  return k;
}

/// Whether an op's result rounds (an elementwise function or sum of inexact values): the
/// ops everyOp perturbs on top of the products and decompositions. Copies, signs, max and
/// comparisons are exact; a new op that rounds and is missing here only makes the
/// finite-difference slack smaller (stricter), never hides a difference.
bool rounds(OpKind k) {
  switch (k) {
  case OpKind::Exp: case OpKind::Log: case OpKind::Sqrt: case OpKind::Sin: case OpKind::Cos:
  case OpKind::Tanh: case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div:
  case OpKind::ReduceSum: return true;
  default: return false;
  }
}

/// A copy of `p` with every contraction and decomposition result perturbed as described above (a
/// module inlined first, so that each call and iteration gets noise of its own). With
/// `everyOp`, each result of an op that rounds gets ±2u relative noise as well: the rounding
/// of a transform's own program (a cotangent accumulated as −1 + x − x + 1), which the
/// evaluators share bit for bit but finite differences of the original program do not.
Program withRoundingNoise(const Program &module, std::mt19937_64 &rng, bool everyOp = false) {
  Program p = module;
  passes::runInline(p);
  Program q;
  q.name = p.name;
  ir::Builder b(q);
  // |δ| is drawn in [½, 1] of its bound, never near 0: a δ below half an ulp of the value
  // would round away and leave no slack where the evaluators differ by one ulp.
  std::uniform_real_distribution<double> u(0.5, 1);
  std::bernoulli_distribution negative(0.5);
  auto noiseTensor = [&](const ir::Type &t, double terms) {
    Tensor d = Tensor::zeros(t);
    for (double &x : d.data)
      x = (negative(rng) ? -1 : 1) * (terms + 2) * kUnitRoundoff * kNoiseAmplification * u(rng);
    return d;
  };
  auto noise = [&](const ir::Type &t, double terms) { return b.constant(noiseTensor(t, terms)); };
  std::vector<ir::ValueId> map(p.values.size(), ir::kNoValue);
  for (ir::ValueId v : p.inputs) map[v] = q.addInput(p.value(v).name, p.type(v));
  for (const ir::Op &op : p.ops) {
    llvm::SmallVector<ir::ValueId, 4> operands;
    for (ir::ValueId v : op.operands) operands.push_back(map[v]);
    if (op.kind == OpKind::TriangularSolve) {
      // Backward stable: the exact solution for a triangle A + E with |E| ≲ (n + 2)·u·|A|.
      const ir::Type &a = p.type(op.operands[0]);
      ir::ValueId E = noise(a, static_cast<double>(a.shape[0]));
      operands[0] = b.add(operands[0], b.mul(E, b.unary(OpKind::Abs, operands[0])));
    }
    if (op.kind == OpKind::Svd || op.kind == OpKind::SvdTopk || op.kind == OpKind::Eigh ||
        op.kind == OpKind::Qr) {
      // The backward error: the factors are those of a matrix A + E, |E| ≲ (m + n)·u·max|A|
      // (E symmetric for eigh), which the factors' own condition (1/gap for singular
      // vectors) amplifies as it does in the libraries.
      const ir::Type &a = p.type(op.operands[0]);
      Tensor E = noiseTensor(a, static_cast<double>(a.shape[0] + a.shape[1]));
      if (op.kind == OpKind::Eigh)
        for (int64_t i = 0; i < a.shape[0]; ++i)
          for (int64_t j = 0; j < i; ++j)
            E.data[static_cast<size_t>(j * a.shape[1] + i)] = E.data[static_cast<size_t>(i * a.shape[1] + j)];
      ir::ValueId top = b.reduceMax(b.unary(OpKind::Abs, operands[0]), {0, 1});
      operands[0] = b.add(operands[0], b.mul(b.constant(E), b.broadcastInDim(top, a.shape, {})));
    }
    llvm::SmallVector<ir::Type, 1> types;
    for (ir::ValueId r : op.results) types.push_back(p.type(r));
    auto rs = q.appendOp(op.kind, operands, op.attrs, types);
    if (op.kind == OpKind::DotGeneral || op.kind == OpKind::Einsum) {
      llvm::SmallVector<ir::ValueId, 4> magnitudes;
      for (ir::ValueId v : operands) magnitudes.push_back(b.unary(OpKind::Abs, v));
      ir::ValueId size = b.createMulti(op.kind, magnitudes, op.attrs)[0];
      rs[0] = b.add(rs[0], b.mul(noise(types[0], summedTerms(p, op)), size));
    } else if (op.kind == OpKind::ReduceSum) {
      // A sum of K terms, added in another order by the engine (vectorised, fused into
      // its producer) than by the reference's loop: ±(K + 2)·u·Σ|x|.
      const ir::I64List &axes = op.attrs.getI64s("axes");
      double terms = 1;
      for (int64_t d : axes) terms *= static_cast<double>(p.type(op.operands[0]).shape[static_cast<size_t>(d)]);
      ir::ValueId size = b.reduceSum(b.unary(OpKind::Abs, operands[0]), axes);
      rs[0] = b.add(rs[0], b.mul(noise(types[0], terms), size));
    } else if (op.kind == OpKind::Svd || op.kind == OpKind::SvdTopk) {
      const ir::Type &a = p.type(op.operands[0]);
      double terms = static_cast<double>(a.shape[0] + a.shape[1]);
      rs[0] = b.add(rs[0], noise(types[0], terms));
      rs[2] = b.add(rs[2], noise(types[2], terms));
      ir::ValueId sum = b.reduceSum(rs[1], {0});
      rs[1] = b.add(rs[1], b.mul(noise(types[1], terms), b.broadcastInDim(sum, types[1].shape, {})));
    } else if (op.kind == OpKind::Eigh || op.kind == OpKind::Qr) {
      // (w, V) of eigh, (Q, R) of qr: the vectors absolutely, the values (R) relative to
      // their total magnitude.
      const ir::Type &a = p.type(op.operands[0]);
      const double terms = static_cast<double>(a.shape[0] + a.shape[1]);
      const size_t vectors = op.kind == OpKind::Eigh ? 1 : 0, values = 1 - vectors;
      rs[vectors] = b.add(rs[vectors], noise(types[vectors], terms));
      const ir::Type &vt = types[values];
      std::vector<int64_t> all(static_cast<size_t>(vt.rank()));
      for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int64_t>(d);
      ir::ValueId sum = b.reduceSum(b.unary(OpKind::Abs, rs[values]), all);
      rs[values] = b.add(rs[values], b.mul(noise(vt, terms), b.broadcastInDim(sum, vt.shape, {})));
    }
    if (op.kind == OpKind::SylvesterSolve) {
      // Two eigendecompositions and four products (engine) against an LU of the n·m
      // system (reference): ±4(n + m)·u times Σ|X| (the generator keeps the equation's
      // condition ≤ 3).
      const double terms = 4.0 * static_cast<double>(p.type(op.operands[0]).shape[0] + p.type(op.operands[1]).shape[0]);
      const ir::Type &xt = types[0];
      ir::ValueId sum = b.reduceSum(b.unary(OpKind::Abs, rs[0]), {0, 1});
      rs[0] = b.add(rs[0], b.mul(noise(xt, terms), b.broadcastInDim(sum, xt.shape, {})));
    }
    if (op.kind == OpKind::TriangularSolve) {
      // ... and the solve's own rounding, ±(n + 2)·u·|x|.
      const ir::Type &a = p.type(op.operands[0]);
      rs[0] = b.add(rs[0], b.mul(noise(types[0], static_cast<double>(a.shape[0])), b.unary(OpKind::Abs, rs[0])));
    }
    if (everyOp && rounds(op.kind)) rs[0] = b.add(rs[0], b.mul(rs[0], noise(types[0], 0)));
    for (size_t r = 0; r < rs.size(); ++r) map[op.results[r]] = rs[r];
  }
  for (ir::ValueId v : p.outputs) q.addOutput(map[v]);
  return q;
}

/// kNoiseFactor times the largest change of `measure` (a number read off the outputs, such as
/// ⟨direction, gradient⟩) over two evaluations of `p` at `in` under the rounding model with
/// ±2u on every op that rounds, against its value on the reference's outputs: how far the
/// transform's own rounding can move it. 0 if an evaluation fails.
template <class Measure>
double transformRoundingSlack(const Program &p, const std::vector<Tensor> &in, uint64_t seed,
                              Measure &&measure) {
  Outcome ref = evaluate([&] { return rt::evaluateReference(p, in); });
  if (ref.failed) return 0;
  const double atRef = measure(ref.values);
  std::mt19937_64 rng(seed);
  double slack = 0;
  for (int sample = 0; sample < 2; ++sample) {
    Program noisy = withRoundingNoise(p, rng, /*everyOp=*/true);
    Outcome o = evaluate([&] { return rt::evaluateReference(noisy, in); });
    if (o.failed) continue;
    const double d = std::fabs(measure(o.values) - atRef);
    if (std::isfinite(d)) slack = std::max(slack, kNoiseFactor * d / kNoiseAmplification);
  }
  return slack;
}

/// Per output of `p`, kNoiseFactor times the largest change the rounding model makes
/// to `ref` (the reference's outputs at `in`).
Slack roundingSlack(const Program &p, const std::vector<Tensor> &in, const Outcome &ref,
                    uint64_t seed) {
  Slack slack(ref.values.size(), 0.0);
  if (ref.failed) return slack;
  std::mt19937_64 rng(seed);
  for (int sample = 0; sample < 2; ++sample) {
    Program noisy = withRoundingNoise(p, rng);
    Outcome o = evaluate([&] { return rt::evaluateReference(noisy, in); });
    if (o.failed) continue;
    for (size_t k = 0; k < slack.size(); ++k)
      for (size_t i = 0; i < o.values[k].data.size(); ++i) {
        double d = std::fabs(o.values[k].data[i] - ref.values[k].data[i]);
        if (std::isfinite(d)) slack[k] = std::max(slack[k], kNoiseFactor * d / kNoiseAmplification);
      }
  }
  return slack;
}

double dot(const Tensor &a, const Tensor &b) {
  double s = 0;
  for (size_t i = 0; i < a.data.size(); ++i) s += a.data[i] * b.data[i];
  return s;
}

double absDot(const Tensor &a, const Tensor &b) {
  double s = 0;
  for (size_t i = 0; i < a.data.size(); ++i) s += std::fabs(a.data[i] * b.data[i]);
  return s;
}

/// `q` with every stop_gradient replaced by a constant holding its value at `x`: the
/// function whose derivative grad computes (stop_gradient is constant for it).
Program freezeStopGradients(const Program &q0, const std::vector<Tensor> &x) {
  // In a module a stop_gradient may run once per call or iteration, each time on other
  // values: freeze the inlined program, where each run is an op of its own.
  Program q = q0;
  passes::runInline(q);
  Program probe = q;
  probe.outputs.clear();
  for (const ir::Op &op : q.ops)
    if (op.kind == OpKind::StopGradient) probe.outputs.push_back(op.results[0]);
  if (probe.outputs.empty()) return q;
  std::vector<Tensor> values = rt::evaluateReference(probe, x);
  Program frozen = q;
  size_t k = 0;
  for (ir::Op &op : frozen.ops)
    if (op.kind == OpKind::StopGradient) {
      op.kind = OpKind::Constant;
      op.operands.clear();
      op.attrs = ir::AttrList{{"value", ir::Attr::tensor(values[k++])}};
    }
  return frozen;
}

/// x + t·dir on the inputs `wrt` (dir[k] on input wrt[k]).
std::vector<Tensor> shifted(const std::vector<Tensor> &x, const std::vector<size_t> &wrt,
                            const std::vector<Tensor> &dir, double t) {
  std::vector<Tensor> xs = x;
  for (size_t k = 0; k < wrt.size(); ++k)
    for (size_t e = 0; e < xs[wrt[k]].data.size(); ++e) xs[wrt[k]].data[e] += t * dir[k].data[e];
  return xs;
}

/// Whether a select's predicate is exactly 0 at x but not at x ± s·dir (x − stop_gradient(x),
/// say). f may be continuous there (both branches 0 at the point), but the transform
/// differentiates the branch taken at the point (the false one) and the differences see the
/// other on both sides: the derivative of a select is one-sided at its switch.
bool selectSwitchesAtPoint(const Program &q, const std::vector<Tensor> &x, const std::vector<size_t> &wrt,
                           const std::vector<Tensor> &dir, double s) {
  Program probe = q;
  if (probe.isModule() && runPipeline(passes::Pipeline::parse("inline"), probe).kind != PassOutcome::Kind::Ok)
    return false;
  std::vector<ir::ValueId> preds;
  for (const ir::Op &op : probe.ops)
    if (op.kind == OpKind::Select) preds.push_back(op.operands[0]);
  if (preds.empty()) return false;
  probe.outputs = preds;
  probe.gradSignature.reset();
  auto at = [&](double t) { return rt::evaluateReference(probe, shifted(x, wrt, dir, t)); };
  const std::vector<Tensor> p0 = at(0), up = at(s), down = at(-s);
  for (size_t k = 0; k < p0.size(); ++k)
    for (size_t e = 0; e < p0[k].data.size(); ++e)
      if (p0[k].data[e] == 0 && (up[k].data[e] != 0 || down[k].data[e] != 0)) return true;
  return false;
}

/// 5-point differences of f(s) = Σ_o ⟨cot_o, q(x + s·dir)_o⟩ (dir on the inputs `wrt`)
/// against `ad`, the derivative a transform computed; `adMagnitude` the size of its terms.
/// A kink or jump in the stencil skips the check (res.fdSkipped).
template <class Fail>
void checkDirectional(const Program &q, const std::vector<Tensor> &x, const std::vector<size_t> &wrt,
                      const std::vector<Tensor> &dir, const std::vector<Tensor> &cot, double ad, double adMagnitude,
                      const std::function<double()> &adSlackOf, const char *what, Fail &&fail, CheckResult &res) {
  double scale = 1;
  for (size_t i : wrt)
    for (double v : x[i].data) scale = std::max(scale, std::fabs(v));
  Program frozen;
  double magnitude = 0;
  auto f = [&](double s) {
    std::vector<Tensor> out = rt::evaluateReference(frozen, shifted(x, wrt, dir, s));
    double acc = 0, mag = 0;
    for (size_t o = 0; o < out.size(); ++o) {
      acc += dot(out[o], cot[o]);
      mag += absDot(out[o], cot[o]);
    }
    // The size of the terms at every point of the stencil: the differences round at
    // that scale (f = x²·Σy with Σy = 0 is 0 at x = 0 and rounding noise at x = ±h).
    magnitude = std::max(magnitude, mag);
    return acc;
  };
  // f at 0, ±h/2, ±h, ±2h: 5-point differences with steps h and h/2.
  const double h = 1e-4 * scale;
  double f0, fh[2], f1[2], f2[2];
  try {
    frozen = freezeStopGradients(q, x);
    f0 = f(0);
    for (int sgn : {0, 1}) {
      double dir1 = sgn ? -1.0 : 1.0;
      fh[sgn] = f(dir1 * h / 2);
      f1[sgn] = f(dir1 * h);
      f2[sgn] = f(dir1 * 2 * h);
    }
  } catch (const Error &e) {
    res.fdSkipped = "the reference fails near the point: " + firstLine(e.what());
    return;
  }
  const double fd1 = (f2[1] - 8 * f1[1] + 8 * f1[0] - f2[0]) / (12 * h);
  const double fd2 = (f1[1] - 8 * fh[1] + 8 * fh[0] - f1[0]) / (6 * h);
  if (!std::isfinite(fd1) || !std::isfinite(fd2) || !std::isfinite(magnitude)) {
    res.fdSkipped = "non-finite values near the point";
    return;
  }
  auto tol = [&](double a, double b) {
    return 1e-5 * std::max(std::fabs(a), std::fabs(b)) + 1e-7 * (magnitude + adMagnitude);
  };
  if (std::fabs(fd1 - fd2) > tol(fd1, fd2)) {
    res.fdSkipped = "a kink or jump within the stencil (steps h and h/2 disagree)";
    return;
  }
  // A jump exactly at the point (compare EQ between a stop_gradient value and the value
  // itself, say) leaves both differences equal; for a smooth f the distance from f(0)
  // to the mean of f(±s) grows like s², by 4 from s = h/2 to s = h.
  const double d1 = f0 - (fh[0] + fh[1]) / 2, d2 = f0 - (f1[0] + f1[1]) / 2;
  if (std::fabs(d2 - 4 * d1) > 1e-9 * magnitude + 1e-300) {
    res.fdSkipped = "a jump at the point (f(0) is not the limit of its neighbours)";
    return;
  }
  res.fdChecked = true;
  // Only a comparison that fails pays for the transform's rounding (two more evaluations).
  double adSlack = 0;
  if (std::isfinite(ad) && std::fabs(fd2 - ad) > tol(fd2, ad)) {
    adSlack = adSlackOf();
    res.fdSlackNeeded = std::fabs(fd2 - ad) <= tol(fd2, ad) + adSlack;
  }
  if (!std::isfinite(ad) || std::fabs(fd2 - ad) > tol(fd2, ad) + adSlack) {
    // Only a disagreement pays for probing the selects too (three more evaluations); f ran
    // at the same points, so the probe's evaluations run as well.
    if (selectSwitchesAtPoint(frozen, x, wrt, dir, h / 2)) {
      res.fdChecked = false;
      res.fdSlackNeeded = false;
      res.fdSkipped = "a select's predicate is 0 at the point and not next to it (a one-sided derivative)";
      return;
    }
    std::ostringstream s;
    s.precision(17);
    s << what << " " << ad << " from the transform, " << fd2
      << " by finite differences (|diff| " << std::fabs(fd2 - ad) << ", tolerance "
      << tol(fd2, ad) << " + the transform's rounding " << adSlack << ")";
    fail(s.str());
  }
}

/// The finite-difference oracle of the last grad of `run`, whose result `full` gave
/// `engineOut` at `in`.
void checkGradient(const Case &c, const PipelineRun &run, const Program &full,
                   const std::vector<Tensor> &in, const std::vector<Tensor> &engineOut,
                   CheckResult &res) {
  const passes::PassInvocation &last = run.grads.back().first;
  const std::vector<std::string> &saw = run.grads.back().second;
  Program q; // the program the last grad differentiated, up to the other passes
  if (gradsOnly(c.program, run, run.grads.size() - 1, q).kind != PassOutcome::Kind::Ok) {
    res.fdSkipped = "the grads before the last one fail on the input program";
    return;
  }
  const passes::GradOptions &g = last.options<passes::GradOptions>();
  auto fail = [&](const std::string &m) { res.failures.push_back({kGradVsFd, last.str() + ": " + m}); };
  const size_t nq = q.inputs.size(), nout = q.outputs.size();
  std::vector<size_t> wrt;
  if (g.wrt.empty())
    for (size_t i = 0; i < nq; ++i) wrt.push_back(i);
  for (const std::string &name : g.wrt)
    wrt.push_back(static_cast<size_t>(std::find(saw.begin(), saw.end(), name) - saw.begin()));
  const size_t first = g.keepOutputs ? nout : 0;
  // Outputs named in aux get no cotangent (zero).
  std::vector<bool> withCt(nout, true);
  const std::vector<std::string> &sawOut = run.gradOutputs.back();
  for (size_t o = 0; o < nout && o < sawOut.size(); ++o)
    withCt[o] = std::find(g.aux.begin(), g.aux.end(), sawOut[o]) == g.aux.end();
  const size_t ncts = static_cast<size_t>(std::count(withCt.begin(), withCt.end(), true));
  if (full.inputs.size() != nq + (g.vjp ? ncts : 0) || engineOut.size() != first + wrt.size())
    return fail("the result has " + std::to_string(full.inputs.size()) + " inputs and " +
                std::to_string(engineOut.size()) + " outputs; the differentiated program has " +
                std::to_string(nq) + " inputs and " + std::to_string(nout) + " outputs");

  std::vector<Tensor> x(in.begin(), in.begin() + static_cast<long>(nq));
  std::vector<Tensor> cot;
  for (size_t o = 0, next = nq; o < nout; ++o) {
    if (!withCt[o]) cot.push_back(Tensor::zeros(q.type(q.outputs[o])));
    else if (g.vjp) cot.push_back(in[next++]);
    else cot.push_back(Tensor::scalar(1.0)); // the loss
  }
  std::mt19937_64 rng(c.seed ^ kDirectionSalt);
  std::normal_distribution<double> normal;
  std::vector<Tensor> dir;
  for (size_t i : wrt) {
    Tensor t = Tensor::zeros(x[i].type);
    for (double &v : t.data) v = normal(rng);
    dir.push_back(std::move(t));
  }
  double ad = 0, adMagnitude = 0;
  for (size_t k = 0; k < wrt.size(); ++k) {
    ad += dot(dir[k], engineOut[first + k]);
    adMagnitude += absDot(dir[k], engineOut[first + k]);
  }
  auto directional = [&](const std::vector<Tensor> &out) {
    double d = 0;
    for (size_t k = 0; k < wrt.size() && first + k < out.size(); ++k) d += dot(dir[k], out[first + k]);
    return d;
  };
  auto slack = [&] { return transformRoundingSlack(full, in, c.seed ^ kNoiseSalt, directional); };
  checkDirectional(q, x, wrt, dir, cot, ad, adMagnitude, slack, "directional derivative", fail, res);
}

/// The finite-difference oracle of a last jvp of `run`: along the tangent inputs the result
/// `full` took at `in`, Σ_o ⟨w_o, jvp_o⟩ for random weights w against differences of
/// Σ_o ⟨w_o, out_o⟩.
void checkJvp(const Case &c, const PipelineRun &run, const Program &full, const std::vector<Tensor> &in,
              const std::vector<Tensor> &engineOut, CheckResult &res) {
  const passes::PassInvocation &last = run.grads.back().first;
  const std::vector<std::string> &saw = run.grads.back().second;
  Program q;
  if (gradsOnly(c.program, run, run.grads.size() - 1, q).kind != PassOutcome::Kind::Ok) {
    res.fdSkipped = "the transforms before the last one fail on the input program";
    return;
  }
  const passes::JvpOptions &j = last.options<passes::JvpOptions>();
  auto fail = [&](const std::string &m) { res.failures.push_back({kGradVsFd, last.str() + ": " + m}); };
  const size_t nq = q.inputs.size(), nout = q.outputs.size();
  std::vector<size_t> wrt;
  for (size_t i = 0; i < nq; ++i)
    if (j.wrt.empty() || std::find(j.wrt.begin(), j.wrt.end(), saw[i]) != j.wrt.end()) wrt.push_back(i);
  const size_t first = j.keepOutputs ? nout : 0;
  if (full.inputs.size() != nq + wrt.size() || engineOut.size() != first + nout)
    return fail("the result has " + std::to_string(full.inputs.size()) + " inputs and " +
                std::to_string(engineOut.size()) + " outputs; the differentiated program has " +
                std::to_string(nq) + " inputs and " + std::to_string(nout) + " outputs");
  std::vector<Tensor> x(in.begin(), in.begin() + static_cast<long>(nq));
  std::vector<Tensor> dir(in.begin() + static_cast<long>(nq), in.end());
  std::mt19937_64 rng(c.seed ^ kDirectionSalt);
  std::normal_distribution<double> normal;
  std::vector<Tensor> cot;
  double ad = 0, adMagnitude = 0;
  for (size_t o = 0; o < nout; ++o) {
    Tensor w = Tensor::zeros(q.type(q.outputs[o]));
    for (double &v : w.data) v = normal(rng);
    ad += dot(w, engineOut[first + o]);
    adMagnitude += absDot(w, engineOut[first + o]);
    cot.push_back(std::move(w));
  }
  auto weighted = [&](const std::vector<Tensor> &out) {
    double d = 0;
    for (size_t o = 0; o < nout && first + o < out.size(); ++o) d += dot(cot[o], out[first + o]);
    return d;
  };
  auto slack = [&] { return transformRoundingSlack(full, in, c.seed ^ kNoiseSalt, weighted); };
  checkDirectional(q, x, wrt, dir, cot, ad, adMagnitude, slack, "the jvp", fail, res);
}

} // namespace

bool CheckResult::hasFailure(const std::string &oracle) const {
  return std::any_of(failures.begin(), failures.end(),
                     [&](const Failure &f) { return f.oracle == oracle; });
}

Case generateCase(uint64_t seed, int maxSize) {
  GeneratorOptions opts;
  opts.size = 1 + static_cast<int>((seed * 0x2545f4914f6cdd1dull >> 33) % static_cast<uint64_t>(std::max(1, maxSize)));
  GeneratedProgram g = generateProgram(seed, opts);
  Case c;
  c.seed = seed;
  c.pipeline = PipelineChooser(seed ^ kPipelineSalt, g.differentiable).choose(g.program);
  c.fd = !g.nonFinite && !(g.quantized && hasKinks(g.program));
  c.program = std::move(g.program);
  c.inputs = std::move(g.inputs);
  return c;
}

std::vector<Tensor> inputsFor(const Program &p, const Case &c) {
  std::vector<Tensor> in = c.inputs;
  std::mt19937_64 rng(c.seed ^ kExtraInputSalt);
  std::uniform_real_distribution<double> u(-1, 1);
  for (size_t i = in.size(); i < p.inputs.size(); ++i) {
    Tensor t = Tensor::zeros(p.type(p.inputs[i]));
    for (double &x : t.data) x = u(rng);
    in.push_back(std::move(t));
  }
  return in;
}

Checker::Checker() {
  for (int w : {1, 2, 4}) engines_.push_back(std::make_unique<rt::Engine>(w));
}

Checker::~Checker() = default;

CheckResult Checker::check(const Case &c) {
  try {
    return checkOrThrow(c);
  } catch (const std::exception &e) {
    // Every step above catches what the part of tessel it runs may throw; anything
    // else escaping is a bug too (of tessel or of the checks).
    CheckResult res;
    res.failures.push_back({kCheck, std::string("uncaught exception: ") + e.what()});
    return res;
  }
}

namespace {

/// The oracles of one case, phase by phase; each adds its failures to `res`.
class CaseCheck {
public:
  CaseCheck(const Case &c, CheckResult &res) : c_(c), res_(res) {}

  void fail(const char *oracle, const std::string &message) {
    if (!message.empty()) res_.failures.push_back({oracle, message});
  }

  /// The input program's round trips, its values after a re-read included.
  void inputRoundTrips() {
    std::string problem = fuzz::checkRoundTrips(c_.program);
    if (!problem.empty()) return fail(kRoundTrip, "input program: " + problem);
    Program reread = ir::parseProgram(ir::printProgram(c_.program), "<printed>");
    Outcome a = evaluate([&] { return rt::evaluateReference(c_.program, c_.inputs); });
    Outcome b = evaluate([&] { return rt::evaluateReference(reread, c_.inputs); });
    // Errors may differ in the source positions the re-read program has.
    fail(kRoundTrip, compareOutcomes(c_.program, b, a, {true, true}, "re-read", "original"));
  }

  /// The case's pipeline, which must be canonical and read the same with blanks
  /// around its separators (passes/PassManager.h); nullopt if it does not parse.
  std::optional<passes::Pipeline> readPipeline() {
    passes::Pipeline pipeline;
    try {
      pipeline = passes::Pipeline::parse(c_.pipeline, "pipeline");
    } catch (const Error &e) {
      fail(kPipeline, std::string("the pipeline does not parse: ") + e.what());
      return std::nullopt;
    }
    if (pipeline.str() != c_.pipeline)
      fail(kPipeline, "pipeline text '" + c_.pipeline + "' is not canonical: '" + pipeline.str() + "'");
    std::string spaced = withBlanks(c_.pipeline, c_.seed);
    try {
      if (passes::Pipeline::parse(spaced, "pipeline") != pipeline)
        fail(kPipeline, "'" + spaced + "' reads as another pipeline than '" + c_.pipeline + "'");
    } catch (const Error &e) {
      fail(kPipeline, "'" + spaced + "' does not parse: " + e.what());
    }
    return pipeline;
  }

  /// The engine at every width, warm, and without buffer reuse, against width 1; with
  /// the --check-inf value check, at widths 1 and 4 against each other (the first NaN
  /// or inf names the same op), and against the plain plan when no check fires.
  /// Returns the outcome at width 1, or nullopt when prepare fails.
  std::optional<Outcome> runEngine(const Program &full, const std::vector<Tensor> &in,
                                   const std::vector<std::unique_ptr<rt::Engine>> &engines) {
    std::shared_ptr<const rt::Plan> plan, planNoReuse, planChecked;
    try {
      // A module runs on the module interpreter (runtime/ModulePlan.h), segment by
      // segment; the reference evaluates its functions op by op.
      plan = rt::prepare(full);
      rt::PrepareOptions o;
      o.reuseBuffers = false;
      planNoReuse = rt::prepare(full, o);
      o.reuseBuffers = true;
      o.valueCheck = rt::ValueCheck::NanOrInf;
      planChecked = rt::prepare(full, o);
    } catch (const std::exception &e) {
      fail(kPrepare, e.what());
      return std::nullopt;
    }
    auto run = [&](size_t engine, const rt::Plan &p) {
      return evaluate([&] { return engines[engine]->run(p, in); });
    };
    const char *names[] = {"width 1", "width 2", "width 4", "width 4 again",
                           "width 2 without buffer reuse"};
    std::vector<Outcome> runs = {run(0, *plan), run(1, *plan), run(2, *plan), run(2, *plan),
                                 run(1, *planNoReuse)};
    for (size_t i = 1; i < runs.size(); ++i)
      fail(kWidths, compareOutcomes(full, runs[i], runs[0], {true, false}, names[i], names[0]));
    Outcome checked1 = run(0, *planChecked), checked4 = run(2, *planChecked);
    fail(kWidths, compareOutcomes(full, checked4, checked1, {true, false},
                                  "width 4 with --check-inf", "width 1 with --check-inf"));
    if (!checked1.failed)
      fail(kWidths, compareOutcomes(full, checked1, runs[0], {true, false},
                                    "width 1 with --check-inf", names[0]));
    return runs[0];
  }

  /// Compares outputs of `p` as `how` says: strictly first; only a disagreement costs
  /// the rounding model's evaluations, whose slack `slack()` gives.
  template <class SlackFn>
  std::string compareValues(const Program &p, const Outcome &got, const Outcome &want,
                            Agreement how, const char *gotName, const char *wantName,
                            SlackFn &&slack) {
    std::string d = compareOutcomes(p, got, want, how, gotName, wantName);
    if (d.empty()) return d;
    Slack s = slack();
    how.slack = &s;
    d = compareOutcomes(p, got, want, how, gotName, wantName);
    res_.roundingSlackNeeded += d.empty();
    return d;
  }

  /// The reference on the pipeline's result against the grads-only baseline, both
  /// without dead code (whose errors, an svd of NaN, the pipeline's dce may drop). Where
  /// one of the two fails and the other does not, both are compared again inlined: the
  /// pipeline may have inlined a call or scan and dropped a dead error inside it, which
  /// dce of a module keeps. Un-inlined first, so that the reference's own evaluation of
  /// calls and scans is checked against an inlined pipeline result.
  void againstBaseline(const Program &full, const PipelineRun &run, const std::vector<Tensor> &in) {
    bool nonFinite = false;
    for (const Tensor &t : c_.inputs)
      for (double x : t.data) nonFinite |= !std::isfinite(x);
    // pad-sink drops products of padded zeros with inf or NaN on purpose (PadSink.h).
    if (nonFinite && c_.pipeline.find("pad-sink") != std::string::npos) return;
    Program base, live = full;
    PassOutcome baseRan = gradsOnly(c_.program, run, run.grads.size(), base);
    if (baseRan.kind == PassOutcome::Kind::Refused) return;
    PassOutcome liveRan = runPipeline(passes::Pipeline::parse("dce"), live);
    if (baseRan.kind != PassOutcome::Kind::Ok || liveRan.kind != PassOutcome::Kind::Ok)
      return fail(kPassesVsReference, "the pipeline's grads alone, or dce after the pipeline, fail: " +
                                          baseRan.message + liveRan.message);
    if (base.inputs.size() != full.inputs.size())
      return fail(kPassesVsReference, "the pipeline's grads alone give " +
                                          std::to_string(base.inputs.size()) + " inputs, the pipeline " +
                                          std::to_string(full.inputs.size()));
    Outcome liveRef = evaluate([&] { return rt::evaluateReference(live, in); });
    Outcome baseRef = evaluate([&] { return rt::evaluateReference(base, in); });
    if (liveRef.failed != baseRef.failed && !liveRef.internal && !baseRef.internal &&
        runPipeline(passes::Pipeline::parse("inline,dce"), live).kind == PassOutcome::Kind::Ok &&
        runPipeline(passes::Pipeline::parse("inline,dce"), base).kind == PassOutcome::Kind::Ok) {
      liveRef = evaluate([&] { return rt::evaluateReference(live, in); });
      baseRef = evaluate([&] { return rt::evaluateReference(base, in); });
    }
    auto bothSlack = [&] { // both programs round, each in its own way
      Slack s = roundingSlack(live, in, liveRef, c_.seed ^ kNoiseSalt),
            b = roundingSlack(base, in, baseRef, c_.seed ^ kNoiseSalt);
      for (size_t i = 0; i < s.size() && i < b.size(); ++i) s[i] += b[i];
      return s;
    };
    Agreement how;
    how.anyErrorAgrees = true;
    how.anyNonFinite = nonFinite;
    how.nanIsAny = nonFinite && c_.pipeline.find("order") != std::string::npos;
    fail(kPassesVsReference,
         compareValues(live, liveRef, baseRef, how, "after the pipeline", "grads only", bothSlack));
  }

private:
  const Case &c_;
  CheckResult &res_;
};

} // namespace

CheckResult Checker::checkOrThrow(const Case &c) {
  CheckResult res;
  CaseCheck check(c, res);
  check.inputRoundTrips();
  std::optional<passes::Pipeline> pipeline = check.readPipeline();
  if (!pipeline) return res;
  const PipelineRun run = runPassByPass(*pipeline, c.program);
  if (run.outcome.kind != PassOutcome::Kind::Ok) {
    check.fail(kPipeline, run.outcome.message);
    return res;
  }
  const Program &full = run.result;
  std::string problem = fuzz::checkRoundTrips(full);
  check.fail(kRoundTrip, problem.empty() ? "" : "after the pipeline: " + problem);

  std::vector<Tensor> in = inputsFor(full, c);
  std::optional<Outcome> engine = check.runEngine(full, in, engines_);
  if (!engine) return res;
  res.engineRan = !engine->failed;
  Outcome ref = evaluate([&] { return rt::evaluateReference(full, in); });
  // The engine runs a module segment by segment, so its errors name a segment's values:
  // both must fail, in words that may differ.
  Agreement engineVsRef;
  engineVsRef.anyErrorAgrees = full.isModule();
  check.fail(kEngineVsReference,
             check.compareValues(full, *engine, ref, engineVsRef, "engine", "reference",
                                 [&] { return roundingSlack(full, in, ref, c.seed ^ kNoiseSalt); }));
  check.againstBaseline(full, run, in);

  if (!run.grads.empty()) {
    if (!c.fd) res.fdSkipped = "quantized inputs at kinks, or non-finite inputs";
    else if (engine->failed) res.fdSkipped = "the engine failed";
    else if (run.grads.back().first.name() == "grad") checkGradient(c, run, full, in, engine->values, res);
    else if (run.grads.back().first.name() == "jvp") checkJvp(c, run, full, in, engine->values, res);
    else res.fdSkipped = "a hessian (jvp of grad: each checked when it is the last transform)";
  }
  return res;
}

} // namespace tessel::difffuzz
