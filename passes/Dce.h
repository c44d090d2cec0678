//===- passes/Dce.h - Dead code elimination --------------------------------------===//
//
// Keeps every output (in order, duplicates included; gradients that are zero
// constants or broadcasts of zero are outputs like any other and stay), every input
// (the program's signature never changes, unused inputs included), and every op one
// of whose results an output depends on (an svd stays whole when any of its three
// results is used). Removes every other op and compacts the value table: afterwards
// Program::values holds exactly the inputs and the results of the remaining ops, in
// their previous relative order. Names, locations and op order are kept.
//
// On a module it does so in every function, drops the outputs of a function that no
// call reads (with the ops only they need; a scan body and the entry keep their
// signatures), and then removes the functions no call of the entry reaches.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

#include "ir/Program.h"

namespace tessel::passes {

struct DceOptions {};

struct DceStats {
  int64_t removedOps = 0;    ///< ops erased
  int64_t removedValues = 0; ///< entries dropped from Program::values
  int64_t removedFunctions = 0; ///< functions of a module no call reaches
};

/// Runs DCE on `p`. Returns true if an op was removed or the value table shrank.
bool runDce(ir::Program &p, const DceOptions &opts, DceStats *stats = nullptr);

} // namespace tessel::passes
