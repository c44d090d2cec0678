//===- runtime/PlanPrinter.cpp - describePlan: a plan for people and tools ----===//
//
// The text form (`tessel prepare`) lists one line per instruction: kernel, source op,
// results and operands with their storage, dependencies, chunks, bytes written,
// in-place execution, temporaries and the kernel plan's summary; then the outputs.
// The JSON form ("kind": "tessel.plan") carries the same fields.
//
//===----------------------------------------------------------------------===//
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ir/Printer.h"
#include "ir/TextUtil.h"
#include "runtime/ModulePlan.h"
#include "runtime/Plan.h"
#include "runtime/PrepareStages.h"

namespace tessel::rt {
namespace {

/// `assigned`: buffer assignment has run (before it, arena values are "unassigned").
std::string storageStr(const Plan &P, int32_t v, bool assigned = true) {
  const Group &g = P.groups[P.values[v].group];
  switch (g.kind) {
  case GroupKind::Arena:
    if (!assigned) return "unassigned";
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

std::string describePlanText(const Plan &P, bool assigned);

} // namespace

std::string describePlan(const Plan &P, bool json) {
  if (P.module) {
    if (!json) return describeModulePlan(P);
    nlohmann::ordered_json j;
    j["kind"] = "tessel.module-plan";
    j["program"] = P.program.name;
    j["functions"] = nlohmann::ordered_json::array();
    for (const ModuleFunction &f : P.module->functions) {
      nlohmann::ordered_json fj;
      fj["name"] = f.fn->name;
      fj["segments"] = nlohmann::ordered_json::array();
      for (const ModuleSegment &seg : f.segments)
        fj["segments"].push_back(nlohmann::ordered_json::parse(describePlan(*seg.plan, true)));
      j["functions"].push_back(std::move(fj));
    }
    return j.dump(1) + "\n";
  }
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
      e["kernel"] = instructionKernelName(in);
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
      e["in_place"] = in.inPlace;
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
  return describePlanText(P, true);
}

namespace {

std::string describePlanText(const Plan &P, bool assigned) {
  const ir::Program &prog = P.program;
  std::ostringstream os;
  os << "plan " << ir::text::atName(prog.name) << ": " << P.insts.size() << " instructions";
  if (assigned)
    os << ", " << P.slotElems.size() << " buffers, arena " << P.arenaElems * 8 << " bytes ("
       << bytesStr(P.arenaElems * 8) << "), peak live " << P.peakLiveBytes << " bytes ("
       << bytesStr(P.peakLiveBytes) << ")";
  os << "\n";
  for (size_t i = 0; i < P.insts.size(); ++i) {
    const Instruction &in = P.insts[i];
    os << "  #" << i << " " << instructionKernelName(in) << " " << ir::opName(P.srcOp(in).kind);
    for (int32_t k = 0; k < in.numResults; ++k)
      os << (k ? ", " : " ") << P.values[in.out[k]].name << "@" << storageStr(P, in.out[k], assigned);
    os << " <-";
    for (int32_t v : in.in) os << " " << P.values[v].name << "@" << storageStr(P, v, assigned);
    os << " | deps:";
    if (in.preds.empty()) os << " -";
    for (int32_t p : in.preds) os << " #" << p;
    os << " | chunks: " << in.nchunks << " | bytes: " << in.bytesWritten;
    if (in.inPlace) os << " | in-place";
    for (size_t k = static_cast<size_t>(in.numResults); k < in.out.size(); ++k)
      if (P.values[in.out[k]].type.numel() > 0 && storageStr(P, in.out[k], assigned) != "none")
        os << " | temp " << P.values[in.out[k]].type.bytes() << " B@" << storageStr(P, in.out[k], assigned);
    os << " | " << in.what << "\n";
  }
  for (size_t i = 0; i < P.outputValue.size(); ++i)
    os << "  output " << prog.outputName(i) << " = " << P.values[P.outputValue[i]].name << "@"
       << storageStr(P, P.outputValue[i], assigned) << "\n";
  return os.str();
}

} // namespace

namespace prep {

std::string describePlanStage(const Plan &P, PrepareStage stage) {
  return describePlanText(P, stage != PrepareStage::Lower);
}

std::string describeFusion(const ir::Program &prog, const Fusion &fusion) {
  const std::vector<std::string> names = ir::valueRefs(prog);
  // The ops of each loop; an op in more than one is recomputed by each.
  const std::vector<Fusion::Loop> loops = fusion.loops(prog);
  std::vector<int32_t> timesInLoops(prog.ops.size(), 0);
  for (const Fusion::Loop &L : loops)
    for (int32_t o : L.ops) ++timesInLoops[static_cast<size_t>(o)];
  size_t inlinedValues = 0;
  for (size_t v = 0; v < prog.values.size(); ++v) inlinedValues += fusion.inlined(static_cast<ir::ValueId>(v));
  std::ostringstream os;
  os << "fusion plan " << ir::text::atName(prog.name) << ": " << prog.ops.size() << " ops, "
     << loops.size() << " fused loops, " << inlinedValues << " values computed inside their readers' loops"
     << (loops.empty() ? " (fusion off with --no-fusion or a value check, or nothing to fuse)" : "")
     << "\n";
  for (const Fusion::Loop &L : loops) {
    const ir::Op &root = prog.ops[L.root];
    os << "  loop " << names[root.results[0]] << " = " << ir::opName(root.kind) << " (op " << L.root << "): "
       << L.ops.size() << " ops:";
    for (int32_t o : L.ops) {
      const ir::Op &op = prog.ops[static_cast<size_t>(o)];
      os << " " << ir::opName(op.kind) << " " << names[op.results[0]];
      if (timesInLoops[static_cast<size_t>(o)] > 1) os << " (recomputed)";
      os << (o == L.ops.back() ? "" : ",");
    }
    os << " | reads:";
    for (ir::ValueId v : L.reads) os << " " << names[v];
    if (L.reads.empty()) os << " -";
    os << "\n";
  }
  return os.str();
}

} // namespace prep

} // namespace tessel::rt
