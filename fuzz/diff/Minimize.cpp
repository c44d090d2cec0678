//===- fuzz/diff/Minimize.cpp - Shrinking a failing case --------------------------===//
#include "fuzz/diff/Minimize.h"

#include <chrono>
#include <optional>

#include "ir/Diagnostics.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Dce.h"
#include "passes/PassManager.h"
#include "runtime/Runtime.h"

namespace tessel::difffuzz {

namespace {

using ir::Program;
using ir::Tensor;
using ir::ValueId;

/// One edit of a case's program (each field unset = not part of the edit).
struct Edit {
  /// The op to remove; its results are `cutValues` read from new inputs, or its one
  /// result is `bypass` (a value of the program of the same type).
  std::optional<size_t> op;
  std::vector<Tensor> cutValues;
  ValueId bypass = ir::kNoValue;
  std::optional<size_t> output; ///< the output to drop
  std::optional<size_t> input;  ///< the input to drop (no op or output reads it)
  bool dce = false;             ///< remove dead code (a failure may need dead ops)
};

/// A name for a new input that no value of `p` has: the cut value's own name when it
/// has one, else cut<k>.
std::string freshName(const Program &p, ValueId v, int &counter) {
  const std::string &own = p.value(v).name;
  if (!ir::isAnonymousName(own)) return own;
  std::string n;
  do n = "cut" + std::to_string(counter++);
  while (p.lookup(n) != ir::kNoValue);
  return n;
}

/// The case with `e` applied, or nullopt if the result is not a program (it does not
/// verify).
std::optional<Case> apply(const Case &c, const Edit &e) {
  const Program &p = c.program;
  Program q;
  q.name = p.name;
  q.functions = p.functions; // a module's entry is shrunk, its functions kept
  std::vector<ValueId> map(p.values.size(), ir::kNoValue);
  Case out;
  out.seed = c.seed;
  out.pipeline = c.pipeline;
  out.fd = c.fd;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    if (e.input == i) continue;
    ValueId v = p.inputs[i];
    map[v] = q.addInput(p.value(v).name, p.type(v));
    out.inputs.push_back(c.inputs[i]);
  }
  int counter = 0;
  if (e.op && !e.cutValues.empty()) {
    const ir::Op &op = p.ops[*e.op];
    for (size_t r = 0; r < op.results.size(); ++r) {
      ValueId v = op.results[r];
      map[v] = q.addInput(freshName(p, v, counter), p.type(v));
      out.inputs.push_back(e.cutValues[r]);
    }
  }
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const ir::Op &op = p.ops[i];
    if (e.op == i) {
      if (e.bypass != ir::kNoValue) map[op.results[0]] = map[e.bypass];
      continue;
    }
    llvm::SmallVector<ValueId, 4> operands;
    for (ValueId v : op.operands) {
      if (map[v] == ir::kNoValue) return std::nullopt; // reads a dropped input
      operands.push_back(map[v]);
    }
    llvm::SmallVector<ir::Type, 1> types;
    for (ValueId r : op.results) types.push_back(p.type(r));
    auto results = q.appendOp(op.kind, operands, op.attrs, types, op.loc, op.remat);
    for (size_t r = 0; r < results.size(); ++r) {
      map[op.results[r]] = results[r];
      const std::string &name = p.value(op.results[r]).name;
      if (!ir::isAnonymousName(name)) q.setName(results[r], name);
    }
  }
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    if (e.output == k) continue;
    if (map[p.outputs[k]] == ir::kNoValue) return std::nullopt;
    q.addOutput(map[p.outputs[k]]);
  }
  if (q.outputs.empty()) return std::nullopt;
  if (e.dce) passes::runDce(q, {});
  if (!ir::verify(q).empty()) return std::nullopt;
  out.program = std::move(q);
  return out;
}

/// The value of every result of every op of the case's program at its inputs (by
/// ValueId; inputs left empty), or nullopt when the reference fails.
std::optional<std::vector<Tensor>> allValues(const Case &c) {
  Program probe = c.program;
  probe.outputs.clear();
  for (const ir::Op &op : probe.ops)
    for (ValueId r : op.results) probe.outputs.push_back(r);
  try {
    std::vector<Tensor> out = rt::evaluateReference(probe, c.inputs);
    std::vector<Tensor> byId(c.program.values.size());
    for (size_t k = 0; k < probe.outputs.size(); ++k) byId[probe.outputs[k]] = std::move(out[k]);
    return byId;
  } catch (const std::exception &) {
    return std::nullopt;
  }
}

bool readsValue(const Program &p, ValueId v) {
  for (const ir::Op &op : p.ops)
    for (ValueId o : op.operands)
      if (o == v) return true;
  for (ValueId o : p.outputs)
    if (o == v) return true;
  return false;
}

} // namespace

Case minimize(const Case &c, const std::string &oracle, Checker &checker, double seconds,
              MinimizeStats *stats) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  MinimizeStats local;
  MinimizeStats &st = stats ? *stats : local;
  Case best = c;
  auto timeUp = [&] { return Clock::now() > deadline; };
  // Takes `cand` when it still fails the same oracle.
  auto attempt = [&](std::optional<Case> cand) {
    if (!cand || timeUp()) return false;
    ++st.attempts;
    if (!checker.check(*cand).hasFailure(oracle)) return false;
    ++st.accepted;
    best = std::move(*cand);
    return true;
  };

  for (bool progress = true; progress && !timeUp();) {
    progress = false;
    Edit dce;
    dce.dce = true;
    if (ir::printProgram(apply(best, dce)->program) != ir::printProgram(best.program))
      progress |= attempt(apply(best, dce));

    passes::Pipeline pipeline = passes::Pipeline::parse(best.pipeline, "pipeline");
    for (size_t i = pipeline.passes.size(); i-- > 0;) {
      passes::Pipeline shorter = pipeline;
      shorter.passes.erase(shorter.passes.begin() + static_cast<long>(i));
      Case cand = best;
      cand.pipeline = shorter.str();
      if (attempt(std::move(cand))) {
        pipeline = shorter;
        progress = true;
      }
    }

    for (size_t k = best.program.outputs.size(); k-- > 0 && best.program.outputs.size() > 1;) {
      Edit e;
      e.output = k;
      progress |= attempt(apply(best, e));
    }

    std::optional<std::vector<Tensor>> values = allValues(best);
    for (size_t i = best.program.ops.size(); i-- > 0 && !timeUp();) {
      if (i >= best.program.ops.size()) continue; // dead code went away with an edit
      const ir::Op op = best.program.ops[i];
      bool done = false;
      if (op.results.size() == 1)
        for (ValueId operand : op.operands)
          if (!done && best.program.type(operand) == best.program.type(op.results[0])) {
            Edit e;
            e.op = i;
            e.bypass = operand;
            done = attempt(apply(best, e));
          }
      if (!done) {
        // Without values (the reference fails on the program) the cut inputs hold
        // zeros, which still serves to cut dead ops away.
        Edit e;
        e.op = i;
        for (ValueId r : op.results)
          e.cutValues.push_back(values ? (*values)[r] : Tensor::zeros(best.program.type(r)));
        done = attempt(apply(best, e));
      }
      if (done) {
        progress = true;
        values = allValues(best);
      }
    }

    for (size_t i = best.program.inputs.size(); i-- > 0;) {
      if (readsValue(best.program, best.program.inputs[i])) continue;
      Edit e;
      e.input = i;
      progress |= attempt(apply(best, e));
    }
  }
  return best;
}

} // namespace tessel::difffuzz
