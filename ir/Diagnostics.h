//===- ir/Diagnostics.h - Errors shared by every stage ----------------------===//
//
// tessel reports problems by exception. The driver maps them to exit codes:
//   * tessel::Error (and subclasses): a user error, exit 1, message printed as is;
//   * any other std::exception: an internal error, exit 2.
//
// A ParseError already carries the full `file:line:col: error: msg` text with the
// source line and a caret under the column.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <stdexcept>
#include <string>

namespace tessel {

/// A user-facing error (bad input, shape mismatch, failed verification, kernel
/// failure). what() is the complete diagnostic.
class Error : public std::runtime_error {
public:
  explicit Error(const std::string &msg) : std::runtime_error(msg) {}
};

/// The message of `e` without its leading "error: " tag (the text a context is put in
/// front of).
std::string errorText(const std::exception &e);
/// `e` with `context` in front: "error: <context>: <e's text>" (the context chain of a
/// diagnostic: "error: trg: step 3 (...), beta = 0.4: <what the kernel said>"). Keeps the
/// subclass's meaning only as far as the message goes: the result is a plain Error.
Error withContext(const std::exception &e, const std::string &context);

/// A shape or attribute error raised by shape inference or the builder. The message
/// names the op and the offending shapes.
class ShapeError : public Error {
public:
  using Error::Error;
};

/// A verifier error: names the op, its result, its location and the shapes.
class VerifyError : public Error {
public:
  using Error::Error;
};

/// A position in a source file, 1-based. line == 0 means "unknown".
struct SourcePos {
  std::string file;
  unsigned line = 0;
  unsigned col = 0;
  bool known() const { return line != 0; }
  std::string str() const {
    return file + ":" + std::to_string(line) + ":" + std::to_string(col);
  }
};

/// A parse error with `file:line:col: error: msg`, the source line and a caret.
class ParseError : public Error {
public:
  ParseError(const std::string &formatted, SourcePos pos)
      : Error(formatted), pos_(std::move(pos)) {}
  const SourcePos &pos() const { return pos_; }

private:
  SourcePos pos_;
};

/// Formats `file:line:col: error: msg\n<source line>\n<spaces>^` (clang/MLIR style).
/// `sourceLine` is the text of the offending line without its newline; a line longer
/// than 160 bytes is shown as a 120-byte window around the caret, "..." marking each cut.
std::string formatDiagnostic(const SourcePos &pos, const std::string &msg,
                             const std::string &sourceLine);

} // namespace tessel
