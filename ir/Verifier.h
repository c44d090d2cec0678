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
std::vector<std::string> verify(const Program &p);

/// verify() and throw tessel::VerifyError with all messages (one per line) if any.
void verifyOrThrow(const Program &p);

} // namespace tessel::ir
