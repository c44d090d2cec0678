//===- passes/Inline.h - Inlining a module into one program ---------------------===//
//
// `inline` replaces every call by the ops of its callee and unrolls every scan: the
// result is a plain program (no functions) computing the same values with the same
// ops in the same order as the module runs them, which prepare lowers for the engine.
// A scan's xs are sliced per iteration (slice + reshape) and its ys stacked by a
// balanced tree of pads and adds (about 3·length ops per stacked output, exact: each
// element is a sum of one value and zeros). An inlined op's location says where it was
// called from, as MLIR's call-site locations: "<its own> (in <the call's>)", a scan's
// with the iteration ("... (in <the scan's>, iteration 3 of 16)"), the sites of nested
// calls innermost first ("... (in <inner>, in <outer>, iteration 3 of 16)"); the call's
// alone where the op has none. Remat flags are kept (a remat call makes them
// remat).
// Names: the caller's names are kept, the callee's dropped (they would clash); a call
// result that is a named value of the caller gets an identity reshape of its own.
//
// removeDeadFunctions drops the functions no call of the entry reaches (directly or
// through other functions); `dce` on a module runs it after removing dead ops.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

#include "ir/Program.h"

namespace tessel::passes {

/// The largest program `inline` makes; a module that unrolls to more ops is refused
/// with an error giving the count (a scan of length 2^30, say).
inline constexpr int64_t kMaxInlinedOps = 20'000'000;

struct InlineOptions {};

/// Inlines every call and scan of the module `p` (see above). Returns true if `p` had
/// functions. Throws tessel::Error when the result would exceed kMaxInlinedOps.
bool runInline(ir::Program &p, const InlineOptions &opts = {});

/// The number of ops `p` has once inlined (saturating at INT64_MAX).
int64_t inlinedOpCount(const ir::Program &p);

/// Drops the functions of `p` that no call of its entry reaches. Returns how many.
size_t removeDeadFunctions(ir::Program &p);

} // namespace tessel::passes
