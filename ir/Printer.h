//===- ir/Printer.h - Text (.tir) and DOT forms --------------------------------===//
#pragma once

#include <iosfwd>
#include <string>

#include "ir/Program.h"

namespace tessel::ir {

/// Output meant for a person (the --print-ir-* logs; verify, opt and dump writing to a
/// terminal) summarises constants with more elements than this.
inline constexpr int64_t kElideConstantsForReading = 16;

struct PrintOptions {
  /// Constants with more elements than this print as a summary
  /// `dense<N elements, min .., max .., sum ..>` that the parser rejects with a clear
  /// error. 0 = never summarise (exact round trip through text).
  int64_t elideConstantsAbove = 0;
  bool printLocations = true;
};

/// Canonical text form: one op per line, every result typed, attributes in op-table
/// order, floats printed in the shortest form that reads back exactly (std::to_chars).
/// print(parse(print(p))) == print(p). Grammar: top of ir/Printer.cpp, docs/ir-text.md.
std::string printProgram(const Program &p, const PrintOptions &opts = {});

/// Graphviz DOT of the dataflow graph (inputs, ops, outputs).
std::string printDot(const Program &p);

/// Display name of a value as printed, with '%' (e.g. "%T" or "%12"); anonymous
/// values are numbered in order of definition.
std::string valueRef(const Program &p, ValueId v);
/// An attribute value as the text form prints it (e.g. `[0, 1]`, `1.0e-12`, `"EQ"`).
std::string printAttr(const Attr &a);
/// valueRef of every value of `p`, indexed by ValueId, in one pass over the program
/// (valueRef alone scans the program for an anonymous value: use this in loops).
std::vector<std::string> valueRefs(const Program &p);

/// An op as every diagnostic names it, in the words of the text form without attributes
/// and types: `%U, %s, %Vt = svd %Ma loc("trg 16->16: svd Ma") at step.tir:12:3` (the loc and
/// the source position only when known; `remat` for a remat op). Safe on programs that do
/// not verify (dangling value ids print as %<invalid N>).
std::string describeOp(const Program &p, const Op &op);

} // namespace tessel::ir
