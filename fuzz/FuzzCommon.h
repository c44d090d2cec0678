//===- fuzz/FuzzCommon.h - Oracles shared by the fuzz targets and their regressions ===//
//
// The contract of every program reader of tessel (ir/Diagnostics.h): any input either
// yields a verified program or throws tessel::Error. Anything else is a bug:
//   * another exception type (the driver would report an internal error, exit 2);
//   * a crash, hang, or an ASan/UBSan report (caught by the sanitizers, not here);
//   * a program that does not survive its own round trips: print -> parse -> print
//     and print -> JSON -> read -> print must both give the same canonical text.
//
// checkText / checkJson return "" when the contract holds, else a description of the
// violation. The libFuzzer targets abort on a violation; the regression test
// (tests/reliability/fuzz_regressions_test.cpp) checks that every input the fuzzer
// ever broke (fuzz/regressions/) now satisfies it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <exception>
#include <string>

#include "ir/Diagnostics.h"
#include "ir/Json.h"
#include "ir/TextUtil.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

namespace tessel::fuzz {

/// Round trips of a program that was read successfully; "" if they hold.
inline std::string checkRoundTrips(const ir::Program &p) {
  std::vector<std::string> problems = ir::verify(p);
  if (!problems.empty()) return "reader returned a program that does not verify: " + problems[0];
  std::string text = ir::printProgram(p), again, viaJson;
  try {
    again = ir::printProgram(ir::parseProgram(text, "<printed>"));
  } catch (const std::exception &e) {
    return "printed program does not parse back: " + std::string(e.what()) + "\n--- printed:\n" + text;
  }
  if (again != text) return "print -> parse -> print is not the identity:\n" + text + "\n--- vs\n" + again;
  // JSON holds only UTF-8: a program, value or loc name that is not is refused by the
  // writer, by name (docs/ir-json.md); any other refusal is a failure.
  bool notUtf8 = ir::text::findInvalidUtf8(p.name).has_value();
  for (const ir::ValueInfo &v : p.values) notUtf8 |= ir::text::findInvalidUtf8(v.name).has_value();
  for (const ir::Op &op : p.ops) notUtf8 |= ir::text::findInvalidUtf8(op.loc).has_value();
  std::string json;
  try {
    json = ir::programToJson(p);
  } catch (const std::exception &e) {
    if (notUtf8 && std::string(e.what()).find("is not valid UTF-8") != std::string::npos) return "";
    return "JSON writer refused a program: " + std::string(e.what()) + "\n--- text:\n" + text;
  }
  if (notUtf8) return "JSON writer accepted a name that is not UTF-8:\n" + text;
  try {
    viaJson = ir::printProgram(ir::programFromJson(json, "<json>"));
  } catch (const std::exception &e) {
    return "JSON form does not read back: " + std::string(e.what()) + "\n--- text:\n" + text;
  }
  if (viaJson != text) return "text -> JSON -> text is not the identity:\n" + text + "\n--- vs\n" + viaJson;
  return "";
}

/// Runs `read`; a tessel::Error is the expected failure, anything else a violation.
template <class Read> std::string readOrError(Read &&read) {
  try {
    ir::Program p = read();
    return checkRoundTrips(p);
  } catch (const Error &) {
    return ""; // a diagnosed user error
  } catch (const std::exception &e) {
    return std::string("reader threw a non-tessel exception (the driver would exit 2): ") + e.what();
  }
}

/// The text parser + verifier on arbitrary bytes.
inline std::string checkText(const std::string &bytes) {
  return readOrError([&] { return ir::parseProgram(bytes, "fuzz.tir"); });
}

/// The JSON reader + verifier on arbitrary bytes.
inline std::string checkJson(const std::string &bytes) {
  return readOrError([&] { return ir::programFromJson(bytes, "fuzz.json"); });
}

} // namespace tessel::fuzz
