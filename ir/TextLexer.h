//===- ir/TextLexer.h - Tokens and literals of the text form -------------------===//
//
// Internal to ir/: the part of reading the text (.tir) form that knows nothing of
// programs. Source positions and diagnostics (`file:line:col: error: msg`, the source
// line, a caret), tokens, and the literals the grammar is built from: numbers, types
// `f64[...]` and `dense<...> : f64[...]` constants. The program parser
// (ir/Parser.cpp) derives from Lexer; a type read on its own (ir::parseType,
// text::parseTypePlain) needs nothing more. The rules the literals follow are listed at
// the top of ir/Parser.cpp.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "ir/Type.h"

namespace tessel::ir::text {

enum class Tok {
  Eof,
  Ident,   // program, return, dense, loc, f64, inf, nan, op and attribute names
  Value,   // %name (text = the name, unquoted)
  Symbol,  // @name
  Number,  // -?digits(.digits)?(e[+-]digits)?
  String,  // "..." (text = decoded bytes)
  LParen, RParen, LBrace, RBrace, LBracket, RBracket, Less, Greater,
  Comma, Colon, Equal, Minus,
};

struct Token {
  Tok kind = Tok::Eof;
  std::string text;
  size_t off = 0; ///< byte offset of the first character
  size_t end = 0; ///< byte offset after the last character
};

/// Reads tokens and literals from `text`, which must outlive it. Every error is
/// thrown by fail() at a byte offset.
class Lexer {
public:
  Lexer(const std::string &text, std::string filename);

  /// Reads the whole text as one type, e.g. "f64[4,4]".
  Type parseStandaloneType();
  /// Errors become plain tessel::Error messages (no file:line:col, no caret).
  bool plain_ = false;

protected:
  //===--- Diagnostics ----------------------------------------------------===//
  /// File, 1-based line and byte column of byte offset `off`.
  SourcePos posAt(size_t off) const;
  /// Throws ParseError `file:line:col: error: msg` with the line and a caret at `off`.
  [[noreturn]] void fail(size_t off, const std::string &msg) const;
  /// Fails at the current token: "expected <what>, got <token>" (or the end of file).
  [[noreturn]] void unexpected(const std::string &what) const;

  //===--- Tokens ---------------------------------------------------------===//
  /// The token at pos_ (after whitespace and comments); moves pos_ past it.
  Token lex();
  /// Moves on to the next token.
  void advance();
  /// Checks that the current token is a `k` and moves past it.
  void expect(Tok k, const std::string &what);
  bool isIdent(const char *s) const { return tok_.kind == Tok::Ident && tok_.text == s; }
  /// A token in messages: "'f64'", "value %x", "number 2.5", "end of file", ...
  static std::string describe(const Token &t);

  //===--- Literals and types ---------------------------------------------===//
  static bool looksFloat(const std::string &s) {
    return s.find_first_of(".eE") != std::string::npos;
  }
  /// The integer `t`; `what` names it when it is a float.
  int64_t toI64(const Token &t, const std::string &what) const;
  double toF64(const Token &t) const;
  /// A number, nan, inf or -inf; `what` names the literal in messages, `loneMinus` is
  /// the message for a '-' followed by anything else.
  double parseFloat(const std::string &what, const std::string &loneMinus);
  /// `f64[d0,...]`; `context` says where a type was expected ("for input %x").
  Type parseType(const std::string &context);
  /// `dense<...> : type`; `what` names the attribute in messages. The type follows the
  /// literal, so the literal is first skipped (bracket matching only) to read the type,
  /// then re-read against it.
  Tensor parseDense(const std::string &what);

  //===--- State ----------------------------------------------------------===//
  const std::string &src_;
  std::string file_;
  /// Byte offset of the start of each line; line 1 starts after a byte order mark.
  std::vector<size_t> lineStarts_;
  size_t pos_ = 0;
  size_t prevEnd_ = 0; ///< end of the token before tok_
  Token tok_;

private:
  std::string lineText(unsigned line) const;
  void skipTrivia();
  std::string lexString(size_t start);
  void parseDenseLevel(const Type &t, int depth, std::vector<double> &data);
};

} // namespace tessel::ir::text
