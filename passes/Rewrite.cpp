//===- passes/Rewrite.cpp - Helpers shared by the rewriting passes --------------===//
#include "passes/Rewrite.h"

#include <algorithm>
#include <string>

#include "ir/Diagnostics.h"
#include "ir/Printer.h"

namespace tessel::passes {

using namespace tessel::ir;

bool isOutput(const Program &p, ValueId v) {
  return std::find(p.outputs.begin(), p.outputs.end(), v) != p.outputs.end();
}

static bool isInput(const Program &p, ValueId v) {
  return std::find(p.inputs.begin(), p.inputs.end(), v) != p.inputs.end();
}

bool canReplaceValue(const Program &p, ValueId from, ValueId to) {
  if (from == to) return true;
  if (!isOutput(p, from)) return true;
  return isAnonymousName(p.values[to].name) && !isInput(p, to) && !isOutput(p, to);
}

void replaceAllUses(Program &p, ValueId from, ValueId to) {
  if (from == to) return;
  if (p.type(from) != p.type(to))
    throw Error("internal: cannot replace " + valueRef(p, from) + " : " + p.type(from).str() +
                " by " + valueRef(p, to) + " : " + p.type(to).str());
  for (Op &op : p.ops)
    for (ValueId &v : op.operands)
      if (v == from) v = to;
  for (ValueId &v : p.outputs)
    if (v == from) v = to;
  const std::string name = p.values[from].name;
  if (!isAnonymousName(name) && isAnonymousName(p.values[to].name) && !isInput(p, to)) {
    p.values[from].name.clear();
    p.setName(to, name);
  }
}

void redirectValue(Program &p, std::vector<ValueId> &repl, ValueId from, ValueId to) {
  repl[from] = to;
  for (ValueId &o : p.outputs)
    if (o == from) o = to;
  const std::string name = p.values[from].name;
  if (!isAnonymousName(name)) {
    p.values[from].name.clear();
    p.setName(to, name);
  }
}

std::vector<bool> liveOps(const Program &p) {
  std::vector<bool> liveValue(p.values.size(), false), live(p.ops.size(), false);
  for (ValueId v : p.outputs) liveValue[v] = true;
  for (size_t i = p.ops.size(); i-- > 0;) {
    for (ValueId r : p.ops[i].results) live[i] = live[i] || liveValue[r];
    if (live[i])
      for (ValueId v : p.ops[i].operands) liveValue[v] = true;
  }
  return live;
}

size_t eraseDeadOps(Program &p) {
  std::vector<bool> dead = liveOps(p);
  dead.flip();
  return eraseOpsAndCompact(p, dead);
}

std::vector<int> useCounts(const Program &p) {
  std::vector<int> uses(p.values.size(), 0);
  for (const Op &op : p.ops)
    for (ValueId v : op.operands) ++uses[v];
  for (ValueId v : p.outputs) ++uses[v];
  return uses;
}

size_t eraseOpsAndCompact(Program &p, const std::vector<bool> &dead) {
  auto isDead = [&](size_t i) { return i < dead.size() && dead[i]; };
  // Every value that survives, in its old relative order.
  std::vector<bool> keep(p.values.size(), false);
  for (ValueId v : p.inputs) keep[v] = true;
  for (size_t i = 0; i < p.ops.size(); ++i)
    if (!isDead(i))
      for (ValueId r : p.ops[i].results) keep[r] = true;
  // The message is built only for a failure (this runs after every erasing rewrite).
  auto kept = [&](ValueId v) { return v < keep.size() && keep[v]; };
  auto fail = [&](ValueId v, const std::string &user) {
    throw Error("internal: " + user + " uses " + valueRef(p, v) + ", the result of an op being erased");
  };
  for (size_t i = 0; i < p.ops.size(); ++i)
    if (!isDead(i))
      for (ValueId v : p.ops[i].operands)
        if (!kept(v)) fail(v, std::string(opName(p.ops[i].kind)) + " (op " + std::to_string(i) + ")");
  for (size_t i = 0; i < p.outputs.size(); ++i)
    if (!kept(p.outputs[i])) fail(p.outputs[i], "output " + std::to_string(i));

  bool anyDead = false;
  for (size_t i = 0; i < p.ops.size() && !anyDead; ++i) anyDead = isDead(i);
  if (!anyDead && std::find(keep.begin(), keep.end(), false) == keep.end()) return 0; // nothing to erase

  std::vector<ValueId> remap(p.values.size(), kNoValue);
  ValueId next = 0;
  for (size_t v = 0; v < keep.size(); ++v)
    if (keep[v]) remap[v] = next++;

  // A fresh program resets Program's private name cache.
  Program q;
  q.name = p.name;
  q.gradSignature = p.gradSignature;
  q.functions = std::move(p.functions);
  q.values.resize(next);
  for (size_t v = 0; v < keep.size(); ++v)
    if (keep[v]) q.values[remap[v]] = std::move(p.values[v]);
  for (ValueId v : p.inputs) q.inputs.push_back(remap[v]);
  q.ops.reserve(p.ops.size());
  size_t removed = 0;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    if (isDead(i)) {
      ++removed;
      continue;
    }
    Op op = std::move(p.ops[i]);
    for (ValueId &v : op.operands) v = remap[v];
    for (ValueId &v : op.results) v = remap[v];
    q.ops.push_back(std::move(op));
  }
  for (ValueId v : p.outputs) q.outputs.push_back(remap[v]);
  q.recomputeDefs();
  p = std::move(q);
  return removed;
}

} // namespace tessel::passes
