//===- ir/Json.h - JSON form of programs ----------------------------------------===//
#pragma once

#include <string>

#include "ir/Program.h"

namespace tessel::ir {

/// Current JSON schema version (field "version"; field "kind" is "tessel.program").
inline constexpr int kJsonVersion = 1;

/// Arrays and objects may nest at most this deep in a program file (the schema needs 6);
/// deeper input is rejected while parsing, with the position of the first bracket beyond.
inline constexpr int kMaxJsonDepth = 64;

/// Largest indentation programToJson accepts (spaces per level; -1 = one line).
inline constexpr int kMaxJsonIndent = 16;

/// Serialises a program to JSON (nlohmann-json), constants in full.
/// text -> JSON -> text is the identity. Throws tessel::Error for an indent outside
/// [-1, kMaxJsonIndent].
std::string programToJson(const Program &p, int indent = 1);

/// Reads the JSON form. Throws tessel::Error naming the JSON path of the problem
/// (e.g. "<file>: /ops/3/operands/1: undefined value %x"). The result is verified.
Program programFromJson(const std::string &text, const std::string &filename = "<stdin>");

} // namespace tessel::ir
