//===- ir/Parser.h - Reading the text (.tir) form ------------------------------===//
//
// The grammar is documented at the top of ir/Printer.cpp (and in docs/ir-text.md); the
// parser's decisions (UTF-8 check first, byte columns, anonymous %N values, NaN/inf only
// in dense<> constants, elided constants rejected, overflow checks on declared shapes,
// Op::pos = position of the op name) at the top of ir/Parser.cpp.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "ir/Program.h"

namespace tessel::ir {

/// Parses the text form. `filename` is used in diagnostics. Throws tessel::ParseError
/// with `file:line:col: error: message`, the source line and a caret, for any lexical,
/// syntactic, type or shape error (including non-UTF-8 bytes and truncated input).
/// The result is verified.
Program parseProgram(const std::string &text, const std::string &filename = "<stdin>");

/// Parses a type such as `f64[16,16]` or `f64[]`. Throws tessel::Error.
Type parseType(const std::string &text);

} // namespace tessel::ir
