//===- passes/Rewrite.h - Small helpers shared by the rewriting passes ---------===//
//
// Used by order, cse, dce and fold (and free for any other pass). Conventions:
//
//  * Output names are part of a program's interface (drivers look outputs up by name).
//    A pass may replace a value that is an output only when the replacement can take
//    over the output's name without renaming anything else: see canReplaceValue().
//  * Ops created in place of an op take its `loc` and its remat flag
//    (ir::Builder::setOrigin; the flag must survive lowering, see Cse.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <vector>

#include "ir/Program.h"

namespace tessel::passes {

/// True if `v` is one of the program's outputs.
bool isOutput(const ir::Program &p, ir::ValueId v);

/// True if every use of `from` may be redirected to `to` without changing how the
/// outputs print: `from` is not an output, or `to` is an anonymous value that is
/// neither an input nor an output (it then inherits `from`'s name).
bool canReplaceValue(const ir::Program &p, ir::ValueId from, ir::ValueId to);

/// Redirects every use of `from` (op operands and outputs) to `to`. If `from` has a
/// name and `to` is an anonymous op result, the name moves to `to`. Types must match
/// (throws tessel::Error otherwise, naming both values).
void replaceAllUses(ir::Program &p, ir::ValueId from, ir::ValueId to);

/// For a pass that rebuilds the op list, remapping each op's operands through `repl`
/// as it goes: from now on `to` stands for `from` (repl[from] = to, outputs too), and a
/// name of `from` moves to `to` (an anonymous op result the pass just created).
void redirectValue(ir::Program &p, std::vector<ir::ValueId> &repl, ir::ValueId from,
                   ir::ValueId to);

/// live[i]: some result of op i is a program output or is read by a live op (one
/// backward sweep; the liveness that dce, grad and pad-sink share).
std::vector<bool> liveOps(const ir::Program &p);

/// Removes every op that liveOps() finds dead (see eraseOpsAndCompact). Returns the
/// number of ops removed.
size_t eraseDeadOps(ir::Program &p);

/// Number of uses of every value (operands of ops; outputs count once per position).
std::vector<int> useCounts(const ir::Program &p);

/// Removes the ops with dead[i] == true (dead.size() == p.ops.size(); a shorter vector
/// is padded with false) and rebuilds the value table so that it holds only the
/// inputs and the results of the remaining ops, in their previous relative order (when
/// no op is removed and every value is one of those, `p` is left as it is).
/// Names, locations, source positions and attributes are kept. The caller must make
/// sure no remaining op or output uses a result of a removed op (throws
/// tessel::Error naming the op otherwise). Returns the number of ops removed.
size_t eraseOpsAndCompact(ir::Program &p, const std::vector<bool> &dead);

} // namespace tessel::passes
