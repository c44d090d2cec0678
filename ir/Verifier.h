//===- ir/Verifier.h - Program verifier ----------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "ir/Program.h"

namespace tessel::ir {

/// Checks a program: inputs named, names unique, every operand defined before use,
/// every op passing ir::checkOp (counts, attributes, the op's rule, declared result
/// types) with its attributes in canonical form, outputs defined, the grad signature.
/// Returns one message per problem; one about an op starts with ir::describeOp (its
/// results, operands, loc and file:line:col) followed by checkOp's message.
/// How many functions deep calls and scans may nest in a module (the entry counts as one).
inline constexpr size_t kMaxCallDepth = 256;

/// A module (a program with functions) is checked function by function, each seeing only
/// the functions before it (so a call names an earlier function: no recursion); no two
/// functions share a name, only the entry holds functions, and calls and scans nest at
/// most kMaxCallDepth functions deep.
std::vector<std::string> verify(const Program &p);

/// verify() of the functions of module `p` marked in `which` (index i < p.functions.size()
/// is function i, index p.functions.size() the entry), each against the functions before
/// it, and the module-wide checks (names, nesting). What a pass manager verifies after a
/// function pass that changed only those functions (their callers' calls must be marked
/// too: they check the callee's signature).
std::vector<std::string> verify(const Program &p, const std::vector<char> &which);

/// verify() of one function of a module, whose calls may name `callees`.
std::vector<std::string> verifyFunction(const Program &f, Callees callees);

/// verify() and throw tessel::VerifyError with all messages (one per line) if any.
void verifyOrThrow(const Program &p);

} // namespace tessel::ir
