//===- ir/Verifier.h - Program verifier ----------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include "ir/Program.h"

namespace tessel::ir {

/// Checks a program: inputs named, names unique, every operand defined before use,
/// op arity, attributes valid (known, present, right kind), result types equal to the
/// shape rule's, outputs defined. Returns one message per problem; each names the op,
/// its first result, its location (loc or file:line:col) and the offending shapes.
std::vector<std::string> verify(const Program &p);

/// verify() and throw tessel::VerifyError with all messages (one per line) if any.
void verifyOrThrow(const Program &p);

} // namespace tessel::ir
