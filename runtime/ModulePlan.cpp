//===- runtime/ModulePlan.cpp - Preparing and running a module (see ModulePlan.h) ===//
#include "runtime/ModulePlan.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "ir/OpAttrs.h"
#include "ir/Diagnostics.h"
#include "ir/Printer.h"
#include "ir/TextUtil.h"
#include "runtime/Runtime.h"
#include "runtime/RuntimeInternal.h"

namespace tessel::rt {

namespace {

/// The ops [first, last) of `f` as a program: inputs the values they read from before,
/// outputs the values they define that a later op or an output of `f` reads.
ModuleSegment segmentOf(const ir::Program &f, size_t first, size_t last,
                        const std::vector<size_t> &lastUse, const PrepareOptions &opts, size_t number,
                        const MemoryLimit &mem) {
  ModuleSegment seg;
  ir::Program q;
  q.name = f.name + "." + std::to_string(number);
  std::vector<ir::ValueId> map(f.values.size(), ir::kNoValue);
  std::vector<char> inside(f.values.size(), 0);
  size_t results = 0;
  for (size_t i = first; i < last; ++i)
    for (ir::ValueId r : f.ops[i].results) inside[r] = 1, ++results;
  q.ops.reserve(last - first);
  q.values.reserve(2 * results); // the results and, at most as many again, inputs
  for (size_t i = first; i < last; ++i) {
    const ir::Op &op = f.ops[i];
    llvm::SmallVector<ir::ValueId, 4> args;
    for (ir::ValueId v : op.operands) {
      if (map[v] == ir::kNoValue) {
        // The function's own name for the value when it has one (errors name it).
        const std::string &own = f.value(v).name;
        const bool free = !ir::isAnonymousName(own) && q.lookup(own) == ir::kNoValue;
        map[v] = q.addInput(free ? own : "in." + std::to_string(seg.inputs.size()), f.type(v));
        seg.inputs.push_back(v);
      }
      args.push_back(map[v]);
    }
    llvm::SmallVector<ir::Type, 3> types;
    for (ir::ValueId r : op.results) types.push_back(f.type(r));
    auto rs = q.appendOp(op.kind, args, op.attrs, types, op.loc, op.remat);
    q.ops.back().pos = op.pos; // errors point at the op in the file
    for (size_t k = 0; k < rs.size(); ++k) {
      map[op.results[k]] = rs[k];
      const std::string &name = f.value(op.results[k]).name;
      if (!ir::isAnonymousName(name)) q.setName(rs[k], name);
    }
  }
  for (ir::ValueId v = 0; v < f.values.size(); ++v)
    if (inside[v] && lastUse[v] >= last) {
      seg.outputs.push_back(v);
      q.addOutput(map[v]);
    }
  if (!seg.outputs.empty()) seg.plan = preparePlain(std::move(q), opts, mem);
  return seg;
}

ModuleFunction prepareFunction(const ir::Program &module, const ir::Program &f,
                               const PrepareOptions &opts, const MemoryLimit &mem) {
  ModuleFunction mf;
  mf.fn = &f;
  // The last op that reads each value (ops.size() for an output): a segment's outputs are
  // its values read after it.
  std::vector<size_t> lastUse(f.values.size(), 0);
  for (size_t i = 0; i < f.ops.size(); ++i)
    for (ir::ValueId v : f.ops[i].operands) lastUse[v] = i;
  for (ir::ValueId v : f.outputs) lastUse[v] = f.ops.size();
  // The values each op reads last (none for an output of the function).
  std::vector<std::vector<ir::ValueId>> diesAt(f.ops.size());
  {
    std::vector<char> isOutput(f.values.size(), 0);
    for (ir::ValueId v : f.outputs) isOutput[v] = 1;
    std::vector<char> read(f.values.size(), 0);
    for (const ir::Op &op : f.ops)
      for (ir::ValueId v : op.operands) read[v] = 1;
    for (ir::ValueId v = 0; v < f.values.size(); ++v)
      if (read[v] && !isOutput[v]) diesAt[lastUse[v]].push_back(v);
  }
  auto dying = [&](size_t lo, size_t hi) {
    std::vector<ir::ValueId> d;
    for (size_t i = lo; i < hi; ++i) d.insert(d.end(), diesAt[i].begin(), diesAt[i].end());
    return d;
  };
  size_t start = 0;
  auto cut = [&](size_t end) {
    if (end > start) {
      ModuleSegment seg = segmentOf(f, start, end, lastUse, opts, mf.segments.size(), mem);
      if (seg.plan) {
        mf.steps.push_back({ModuleStep::Kind::Segment, mf.segments.size(), 0, dying(start, end)});
        mf.segments.push_back(std::move(seg));
      }
    }
  };
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const ir::Op &op = f.ops[i];
    if (!ir::hasCallee(op.kind)) continue;
    cut(i);
    const int callee = module.functionIndex(ir::calleeOf(op));
    mf.steps.push_back({op.kind == ir::OpKind::Call ? ModuleStep::Kind::Call : ModuleStep::Kind::Scan,
                        i, static_cast<size_t>(callee), dying(i, i + 1)});
    start = i + 1;
  }
  cut(f.ops.size());
  return mf;
}

bool dies(const ModuleStep &step, ir::ValueId v) {
  return std::find(step.dies.begin(), step.dies.end(), v) != step.dies.end();
}

/// The most bytes of host tensors the interpreter holds while running function `fi`
/// (its frame and, during a call or scan, the callee's), by the rules of Interpreter:
/// `peaks` holds the callees' (callees come first).
int64_t framePeakBytes(const ModuleExec &m, size_t fi, const std::vector<int64_t> &peaks) {
  const ModuleFunction &mf = m.functions[fi];
  const ir::Program &f = *mf.fn;
  auto bytes = [&](ir::ValueId v) { return f.type(v).bytes(); };
  int64_t live = 0;
  for (ir::ValueId v : f.inputs) live += bytes(v);
  int64_t peak = live;
  for (const ModuleStep &step : mf.steps) {
    int64_t during = live, results = 0;
    if (step.kind == ModuleStep::Kind::Segment) {
      const ModuleSegment &seg = mf.segments[step.index];
      for (ir::ValueId v : seg.inputs)
        if (!dies(step, v)) during += bytes(v); // a copy
      for (ir::ValueId v : seg.outputs) results += bytes(v);
      during += results;
    } else {
      const ir::Op &op = f.ops[step.index];
      for (ir::ValueId r : op.results) results += bytes(r);
      if (step.kind == ModuleStep::Kind::Call) {
        // The callee's frame counts its arguments: those moved leave this one.
        for (ir::ValueId v : op.operands)
          if (dies(step, v)) during -= bytes(v);
        during += peaks[step.callee];
      } else {
        const size_t k = static_cast<size_t>(ir::attr<ir::OpKind::Scan, "carries">(op));
        for (size_t c = 0; c < k; ++c)
          if (dies(step, op.operands[c])) during -= bytes(op.operands[c]);
        for (size_t r = k; r < op.results.size(); ++r) during += bytes(op.results[r]); // stacked ys
        during += peaks[step.callee]; // carries and slices are the body's arguments
      }
    }
    for (ir::ValueId v : step.dies) live -= bytes(v);
    live += results;
    peak = std::max({peak, during, live});
  }
  return peak;
}

/// A value of a function frame: a tensor, or a scan's stacked output kept as its
/// per-iteration tensors (`parts`, in index order), stacked only if a step other than a
/// scan's xs reads it. So a forward scan's residuals reach the reverse scan without a
/// copy into a stacked tensor and out of it again.
struct Slot {
  Tensor t;
  std::vector<Tensor> parts;
  bool stacked() const { return !parts.empty(); }
};

/// Runs the module of `plan` on engine `e`.
class Interpreter {
public:
  Interpreter(Engine &e, const ModuleExec &m) : e_(e), m_(m) {}

  std::vector<Tensor> run(size_t fi, std::vector<Tensor> args) {
    const ModuleFunction &mf = m_.functions[fi];
    const bool entry = fi + 1 == m_.functions.size();
    const auto &hook = e_.moduleStepHook();
    const ir::Program &f = *mf.fn;
    std::vector<Slot> env(f.values.size());
    for (size_t i = 0; i < f.inputs.size(); ++i) env[f.inputs[i]].t = std::move(args[i]);
    for (const ModuleStep &step : mf.steps) {
      if (step.kind == ModuleStep::Kind::Segment) {
        const ModuleSegment &seg = mf.segments[step.index];
        std::vector<Tensor> out = e_.run(*seg.plan, gather(f, env, seg.inputs, step));
        for (size_t k = 0; k < seg.outputs.size(); ++k) env[seg.outputs[k]].t = std::move(out[k]);
      } else if (step.kind == ModuleStep::Kind::Call) {
        const ir::Op &op = f.ops[step.index];
        if (entry && hook) hook(op, 0);
        std::vector<Tensor> out = run(step.callee, gather(f, env, op.operands, step));
        for (size_t k = 0; k < op.results.size(); ++k) env[op.results[k]].t = std::move(out[k]);
      } else {
        scan(f, env, f.ops[step.index], step, entry ? &hook : nullptr);
      }
      for (ir::ValueId v : step.dies) env[v] = Slot();
    }
    return gather(f, env, f.outputs, ModuleStep{}, /*all=*/true);
  }

private:
  /// The tensor of slot `v`, stacked from its parts if it has them.
  static Tensor whole(const ir::Program &f, const Slot &s, ir::ValueId v) {
    if (!s.stacked()) return s.t;
    Tensor t = Tensor::zeros(f.type(v));
    const int64_t per = s.parts[0].type.numel();
    for (size_t i = 0; i < s.parts.size(); ++i)
      std::copy(s.parts[i].data.begin(), s.parts[i].data.end(), t.data.begin() + static_cast<int64_t>(i) * per);
    return t;
  }

  /// The tensors of `vs`: moved out of `env` at their last reader (`step.dies`, or `all`
  /// when the frame ends) and last occurrence in `vs`, copied otherwise.
  template <typename Values>
  static std::vector<Tensor> gather(const ir::Program &f, std::vector<Slot> &env, const Values &vs,
                                    const ModuleStep &step, bool all = false) {
    std::vector<Tensor> in;
    in.reserve(vs.size());
    for (auto it = vs.begin(); it != vs.end(); ++it) {
      Slot &s = env[*it];
      const bool last = std::find(it + 1, vs.end(), *it) == vs.end();
      if (s.stacked()) in.push_back(whole(f, s, *it));
      else if (last && (all || dies(step, *it))) in.push_back(std::move(s.t));
      else in.push_back(s.t);
    }
    return in;
  }

  void scan(const ir::Program &f, std::vector<Slot> &env, const ir::Op &op, const ModuleStep &step,
            const std::function<void(const ir::Op &, int64_t)> *hook) {
    const size_t body = step.callee;
    const ir::Program &g = *m_.functions[body].fn;
    const int64_t n = ir::attr<ir::OpKind::Scan, "length">(op);
    const size_t k = static_cast<size_t>(ir::attr<ir::OpKind::Scan, "carries">(op));
    const bool reverse = ir::attr<ir::OpKind::Scan, "reverse">(op) != 0;
    llvm::SmallVector<ir::ValueId, 4> carries(op.operands.begin(), op.operands.begin() + static_cast<ptrdiff_t>(k));
    std::vector<Tensor> carry = gather(f, env, carries, step);
    // Each xs operand: its per-iteration tensors (moved out when this scan reads it last),
    // or the stacked tensor to slice.
    const size_t nx = op.operands.size() - k;
    std::vector<Slot *> xs(nx);
    std::vector<char> takeParts(nx, 0);
    for (size_t x = 0; x < nx; ++x) {
      const ir::ValueId v = op.operands[k + x];
      xs[x] = &env[v];
      const bool once = std::count(op.operands.begin(), op.operands.end(), v) == 1;
      takeParts[x] = xs[x]->stacked() && once && dies(step, v);
    }
    std::vector<std::vector<Tensor>> ys(g.outputs.size() - k, std::vector<Tensor>(static_cast<size_t>(n)));
    for (int64_t it = 0; it < n; ++it) {
      const size_t i = static_cast<size_t>(reverse ? n - 1 - it : it);
      if (hook && *hook) (*hook)(op, it);
      std::vector<Tensor> args = std::move(carry);
      for (size_t x = 0; x < nx; ++x) {
        Slot &s = *xs[x];
        if (s.stacked()) {
          args.push_back(takeParts[x] ? std::move(s.parts[i]) : s.parts[i]);
          continue;
        }
        const ir::Type &t = g.type(g.inputs[k + x]);
        const int64_t per = t.numel();
        Tensor slice = Tensor::zeros(t);
        std::copy(s.t.data.begin() + static_cast<int64_t>(i) * per,
                  s.t.data.begin() + static_cast<int64_t>(i + 1) * per, slice.data.begin());
        args.push_back(std::move(slice));
      }
      std::vector<Tensor> out = run(body, std::move(args));
      carry.assign(std::make_move_iterator(out.begin()),
                   std::make_move_iterator(out.begin() + static_cast<ptrdiff_t>(k)));
      for (size_t y = 0; y < ys.size(); ++y) ys[y][i] = std::move(out[k + y]);
    }
    for (size_t c = 0; c < k; ++c) env[op.results[c]].t = std::move(carry[c]);
    for (size_t y = 0; y < ys.size(); ++y) env[op.results[k + y]].parts = std::move(ys[y]);
  }

  Engine &e_;
  const ModuleExec &m_;
};

} // namespace

std::shared_ptr<const Plan> prepareModule(ir::Program p, const PrepareOptions &opts,
                                          const MemoryLimit &mem) {
  auto plan = std::make_shared<Plan>();
  static std::atomic<uint64_t> nextId{uint64_t(1) << 62};
  plan->id = nextId.fetch_add(1);
  plan->program = std::move(p);
  plan->options = opts;
  const ir::Program &m = plan->program; // the functions' home (ModuleFunction::fn)
  auto exec = std::make_shared<ModuleExec>();
  for (const ir::Program &f : m.functions) exec->functions.push_back(prepareFunction(m, f, opts, mem));
  exec->functions.push_back(prepareFunction(m, m, opts, mem));
  // The largest segment's arena and peak; the tensors the interpreter keeps between
  // segments are host memory beside them (ModulePlan.h).
  for (const ModuleFunction &mf : exec->functions)
    for (const ModuleSegment &seg : mf.segments) {
      plan->arenaElems = std::max(plan->arenaElems, seg.plan->arenaElems);
      plan->peakLiveBytes = std::max(plan->peakLiveBytes, seg.plan->peakLiveBytes);
    }
  std::vector<int64_t> peaks;
  for (size_t fi = 0; fi < exec->functions.size(); ++fi) peaks.push_back(framePeakBytes(*exec, fi, peaks));
  plan->moduleTensorBytes = peaks.back();
  plan->module = std::move(exec);
  return plan;
}

std::vector<Tensor> runModulePlan(Engine &e, const Plan &plan, const std::vector<Tensor> &inputs) {
  const ModuleExec &m = *plan.module;
  return Interpreter(e, m).run(m.functions.size() - 1, inputs);
}

std::string describeModulePlan(const Plan &plan) {
  const ModuleExec &m = *plan.module;
  std::string out = "module plan " + ir::text::atName(plan.program.name) + ": " +
                    std::to_string(m.functions.size()) +
                    " functions, run by the module interpreter (host tensors between segments: at most " +
                    std::to_string(plan.moduleTensorBytes) + " bytes at once)\n";
  for (const ModuleFunction &mf : m.functions) {
    out += "function " + ir::text::atName(mf.fn->name) + ":\n";
    for (const ModuleStep &st : mf.steps) {
      if (st.kind == ModuleStep::Kind::Segment) {
        const ModuleSegment &seg = mf.segments[st.index];
        out += "  segment " + std::to_string(st.index) + " (" + std::to_string(seg.plan->insts.size()) +
               " instructions, " + std::to_string(seg.inputs.size()) + " inputs, " +
               std::to_string(seg.outputs.size()) + " outputs):\n";
        std::string inner = describePlan(*seg.plan);
        size_t at = 0;
        while (at < inner.size()) {
          size_t nl = inner.find('\n', at);
          if (nl == std::string::npos) nl = inner.size();
          out += "    " + inner.substr(at, nl - at) + "\n";
          at = nl + 1;
        }
      } else {
        out += "  " + ir::describeOp(*mf.fn, mf.fn->ops[st.index]) + "\n";
      }
    }
  }
  return out;
}

} // namespace tessel::rt
