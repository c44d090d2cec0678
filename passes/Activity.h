//===- passes/Activity.h - Which values the derivative transforms must follow -===//
//
// Activity analysis, shared by grad (passes/Grad.cpp) and jvp (passes/Jvp.cpp), as
// JAX's ad does for linearize and transpose alike: a value is active when it depends,
// through operands the VJP table calls differentiable (vjp::isDifferentiableOperand),
// on a differentiated input. A scan's carries that the body makes active from the
// active operands are found to a fixed point. And the one rule for naming a function a
// transform adds to a module.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "ir/Program.h"

namespace tessel::passes {

/// active[v] (indexed by ValueId of `p`) when v depends differentiably on one of `seeds`.
std::vector<char> activeValues(const ir::Program &p, const std::vector<ir::ValueId> &seeds);

/// The same, seeded with the inputs i of `p` for which marked[i] is set (inputs beyond
/// marked.size() are not).
std::vector<char> activeFromInputs(const ir::Program &p, const std::vector<bool> &marked);

/// The carries of a scan body (its first `carries` inputs and outputs) that depend on a
/// marked operand in some iteration: `marked` (carries first, then xs) gets every carry
/// the body makes active from it, to a fixed point (at most `carries` rounds). The others
/// need no derivative (a carry passed through untouched, a counter).
void activeCarries(const ir::Program &body, size_t carries, std::vector<bool> &marked);

/// A name for a function added to a module whose functions are `fns` and entry `entry`:
/// `base`, or base_1, base_2, ... — the first that neither holds.
std::string freshFunctionName(const std::vector<ir::Program> &fns, const std::string &entry,
                              const std::string &base);

} // namespace tessel::passes
