//===- ir/TextUtil.h - Lexical helpers shared by the text, JSON and DOT forms ---===//
//
// Number formatting, string quoting, identifier rules and UTF-8 validation used by
// Printer.cpp, TextLexer.cpp, Parser.cpp and Json.cpp, so that every form spells
// numbers, names and types the same way; and the limits that keep a diagnostic
// readable and a reader's nesting bounded whatever the input. The driver and the
// frontend use the same helpers for the numbers and names in their messages.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "ir/Program.h"
#include "llvm/ADT/StringRef.h"

namespace tessel::ir::text {

/// `prefix` followed by the decimal `n` (e.g. "%3"); avoids a GCC 12 -Wrestrict false
/// positive on `"%" + std::to_string(n)`.
std::string prefixedNumber(const char *prefix, int64_t n);

/// Shortest decimal spelling of `x` that reads back to the same double
/// (std::to_chars, shortest round-trip form), e.g. "1", "0.1", "1e-12", "-0".
/// Non-finite values are spelled "nan", "inf", "-inf" (the sign and payload of a NaN
/// are not kept).
std::string formatDouble(double x);

/// formatDouble, but always recognisable as a float: ".0" is appended when the
/// shortest form has no '.', exponent or letters ("1" -> "1.0"). Used for f64
/// attributes so that they read differently from i64 ones.
std::string formatFloatAttr(double x);

/// Type spelling `f64[4,4]`, `f64[]` (no spaces).
std::string formatType(const Type &t);

/// True when `s` may be written bare after '%' or '@': non-empty, only
/// [A-Za-z0-9_.]. Other names are written quoted, `%"a b"`.
bool isBareName(llvm::StringRef s);

/// How a message or a report names a program, `@name` (`@"a b"` with escapes when not
/// bare; a name over 64 bytes clipped with its size), and a value, `%name`: never a raw
/// control byte.
std::string atName(llvm::StringRef name);
std::string percentName(llvm::StringRef name);

/// Double-quoted string with escapes: \" \\ \n \t \r, \xHH for other control bytes,
/// DEL and bytes that are not part of valid UTF-8 (so the output is always valid
/// UTF-8 and reads back to the same bytes).
std::string quoteString(llvm::StringRef s);

/// Byte offset of the first byte of `s` that is not part of a well-formed UTF-8
/// sequence (overlong forms, surrogates and code points above U+10FFFF are invalid),
/// or nullopt when `s` is valid UTF-8.
std::optional<size_t> findInvalidUtf8(llvm::StringRef s);

/// Length of the valid UTF-8 sequence starting at s[i], or 0 when s[i] does not
/// start one.
size_t utf8SequenceLength(llvm::StringRef s, size_t i);

/// The source line of `text` that starts at byte `lineStart`, ready to echo under a
/// diagnostic: without its line ending ("\n" or "\r\n"), one '?' per byte that is
/// not valid UTF-8 and per control character other than a tab (so the caret stays
/// aligned, the message stays valid UTF-8 and nothing in it drives the terminal).
/// formatDiagnostic shows only a window of a long line around the caret.
std::string echoSourceLine(llvm::StringRef text, size_t lineStart);

/// `s` ready to quote inside a message: unchanged when it has at most `max` bytes,
/// otherwise its first `max` bytes (cut back to a UTF-8 boundary) followed by
/// "...(N bytes)", so a 4 MB name makes a one-line message.
std::string clipForMessage(llvm::StringRef s, size_t max = 64);

/// `msg` with every line longer than `max` bytes cut to its first and last max/2 bytes
/// (at UTF-8 boundaries) around " ...(N-byte line clipped)... ": the last guard that keeps
/// a diagnostic a few short lines whatever a flag or a name held, with the end of each
/// line (often what to do) kept. Control bytes other than newline and tab, and bytes
/// that are not UTF-8, come out as \xNN, the C1 controls U+0080..U+009F as \u00NN (a
/// terminal escape sequence in a flag's value is shown, not run).
std::string clipLongLines(llvm::StringRef msg, size_t max = 480);

/// Byte offset of the first '[' or '{' of the JSON text `s` that opens a level deeper
/// than `maxDepth` (brackets inside strings do not count), or nullopt when the nesting
/// stays within it. Locates a too-deep value for a reader that bounds nesting before
/// anything walks the parsed value recursively.
std::optional<size_t> findJsonNestingBeyond(llvm::StringRef s, int maxDepth);

/// Printed names (without '%') of every value of `p`: named values keep their name,
/// anonymous ones (ValueInfo::name empty or all digits) are numbered 0, 1, ... in
/// order of definition (inputs first, then op results in op order). Indexed by
/// ValueId; values defined nowhere get "?<id>".
std::vector<std::string> printedNames(const Program &p);

/// Total element count of `shape`, or nullopt when any extent is negative or the
/// count (times 8 bytes) would overflow int64.
std::optional<int64_t> checkedNumel(llvm::ArrayRef<int64_t> shape);

/// Parses a type string such as "f64[4,4]" (implemented in Parser.cpp). Throws
/// tessel::Error with a plain message (no file position or caret), for embedding in
/// diagnostics of other forms (JSON).
Type parseTypePlain(const std::string &s);

} // namespace tessel::ir::text
