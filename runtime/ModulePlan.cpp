//===- runtime/ModulePlan.cpp - Preparing and running a module (see ModulePlan.h) ===//
#include "runtime/ModulePlan.h"

#include <algorithm>
#include <atomic>
#include <cstring>

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
                        const std::vector<size_t> &lastUse, const PrepareOptions &opts, size_t number) {
  ModuleSegment seg;
  ir::Program q;
  q.name = f.name + "." + std::to_string(number);
  std::vector<ir::ValueId> map(f.values.size(), ir::kNoValue);
  std::vector<char> inside(f.values.size(), 0);
  for (size_t i = first; i < last; ++i)
    for (ir::ValueId r : f.ops[i].results) inside[r] = 1;
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
  if (!seg.outputs.empty()) seg.plan = prepare(q, opts);
  return seg;
}

ModuleFunction prepareFunction(const ir::Program &module, const ir::Program &f,
                               const PrepareOptions &opts) {
  ModuleFunction mf;
  mf.fn = f;
  mf.fn.functions.clear();
  // The last op that reads each value (ops.size() for an output): a segment's outputs are
  // its values read after it.
  std::vector<size_t> lastUse(f.values.size(), 0);
  for (size_t i = 0; i < f.ops.size(); ++i)
    for (ir::ValueId v : f.ops[i].operands) lastUse[v] = i;
  for (ir::ValueId v : f.outputs) lastUse[v] = f.ops.size();
  size_t start = 0;
  auto cut = [&](size_t end) {
    if (end > start) {
      ModuleSegment seg = segmentOf(f, start, end, lastUse, opts, mf.segments.size());
      if (seg.plan) {
        mf.steps.push_back({ModuleStep::Kind::Segment, mf.segments.size(), 0});
        mf.segments.push_back(std::move(seg));
      }
    }
  };
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const ir::Op &op = f.ops[i];
    if (!ir::hasCallee(op.kind)) continue;
    cut(i);
    const int callee = module.functionIndex(op.attrs.getStr("callee"));
    mf.steps.push_back({op.kind == ir::OpKind::Call ? ModuleStep::Kind::Call : ModuleStep::Kind::Scan,
                        i, static_cast<size_t>(callee)});
    start = i + 1;
  }
  cut(f.ops.size());
  return mf;
}

/// Runs the module of `plan` on engine `e`.
class Interpreter {
public:
  Interpreter(Engine &e, const ModuleExec &m) : e_(e), m_(m) {}

  std::vector<Tensor> run(size_t fi, std::vector<Tensor> args) {
    const ModuleFunction &mf = m_.functions[fi];
    const ir::Program &f = mf.fn;
    std::vector<Tensor> env(f.values.size());
    for (size_t i = 0; i < f.inputs.size(); ++i) env[f.inputs[i]] = std::move(args[i]);
    for (const ModuleStep &step : mf.steps) {
      if (step.kind == ModuleStep::Kind::Segment) {
        const ModuleSegment &seg = mf.segments[step.index];
        std::vector<Tensor> in;
        in.reserve(seg.inputs.size());
        for (ir::ValueId v : seg.inputs) in.push_back(env[v]);
        std::vector<Tensor> out = e_.run(*seg.plan, in);
        for (size_t k = 0; k < seg.outputs.size(); ++k) env[seg.outputs[k]] = std::move(out[k]);
        continue;
      }
      const ir::Op &op = f.ops[step.index];
      std::vector<Tensor> in;
      for (ir::ValueId v : op.operands) in.push_back(env[v]);
      std::vector<Tensor> out = step.kind == ModuleStep::Kind::Call ? run(step.callee, std::move(in))
                                                                    : scan(op, step.callee, std::move(in));
      for (size_t k = 0; k < op.results.size(); ++k) env[op.results[k]] = std::move(out[k]);
    }
    std::vector<Tensor> outs;
    for (ir::ValueId v : f.outputs) outs.push_back(env[v]);
    return outs;
  }

private:
  std::vector<Tensor> scan(const ir::Op &op, size_t body, std::vector<Tensor> in) {
    const ir::Program &g = m_.functions[body].fn;
    const int64_t n = op.attrs.getI64("length");
    const size_t k = static_cast<size_t>(op.attrs.getI64("carries"));
    const bool reverse = op.attrs.getI64("reverse") != 0;
    std::vector<Tensor> carry(std::make_move_iterator(in.begin()),
                              std::make_move_iterator(in.begin() + static_cast<ptrdiff_t>(k)));
    std::vector<Tensor> ys;
    for (size_t y = k; y < g.outputs.size(); ++y) {
      const ir::Type &t = g.type(g.outputs[y]);
      ir::Shape s{n};
      s.append(t.shape.begin(), t.shape.end());
      ys.push_back(Tensor::zeros(ir::Type(s)));
    }
    for (int64_t step = 0; step < n; ++step) {
      const int64_t i = reverse ? n - 1 - step : step;
      std::vector<Tensor> args = carry;
      for (size_t x = k; x < in.size(); ++x) {
        const ir::Type &t = g.type(g.inputs[x]);
        const int64_t per = t.numel();
        Tensor slice = Tensor::zeros(t);
        std::copy(in[x].data.begin() + i * per, in[x].data.begin() + (i + 1) * per, slice.data.begin());
        args.push_back(std::move(slice));
      }
      std::vector<Tensor> out = run(body, std::move(args));
      for (size_t c = 0; c < k; ++c) carry[c] = std::move(out[c]);
      for (size_t y = 0; y < ys.size(); ++y) {
        const int64_t per = out[k + y].type.numel();
        std::copy(out[k + y].data.begin(), out[k + y].data.end(), ys[y].data.begin() + i * per);
      }
    }
    for (Tensor &y : ys) carry.push_back(std::move(y));
    return carry;
  }

  Engine &e_;
  const ModuleExec &m_;
};

} // namespace

std::shared_ptr<const Plan> prepareModule(const ir::Program &p, const PrepareOptions &opts) {
  auto exec = std::make_shared<ModuleExec>();
  for (const ir::Program &f : p.functions) exec->functions.push_back(prepareFunction(p, f, opts));
  exec->functions.push_back(prepareFunction(p, p, opts));
  auto plan = std::make_shared<Plan>();
  static std::atomic<uint64_t> nextId{uint64_t(1) << 62};
  plan->id = nextId.fetch_add(1);
  plan->program = p;
  plan->options = opts;
  // The largest segment's arena and peak; the tensors the interpreter keeps between
  // segments are host memory beside them (ModulePlan.h).
  for (const ModuleFunction &mf : exec->functions)
    for (const ModuleSegment &seg : mf.segments) {
      plan->arenaElems = std::max(plan->arenaElems, seg.plan->arenaElems);
      plan->peakLiveBytes = std::max(plan->peakLiveBytes, seg.plan->peakLiveBytes);
    }
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
                    std::to_string(m.functions.size()) + " functions, run by the module interpreter\n";
  for (const ModuleFunction &mf : m.functions) {
    out += "function " + ir::text::atName(mf.fn.name) + ":\n";
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
        out += "  " + ir::describeOp(mf.fn, mf.fn.ops[st.index]) + "\n";
      }
    }
  }
  return out;
}

} // namespace tessel::rt
