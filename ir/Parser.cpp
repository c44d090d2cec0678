//===- ir/Parser.cpp - Reading the text (.tir) form ----------------------------===//
//
// A hand-written lexer and recursive-descent parser for the grammar documented at the
// top of ir/Printer.cpp. Decisions worth knowing:
//
//   * Input must be UTF-8; the first invalid byte is reported at its line:col before
//     anything else is read. Columns are 1-based byte columns.
//   * Whitespace (space, tab, CR, LF) and `//` comments may separate any two tokens;
//     the printer puts one op per line, the parser does not require it.
//   * Values must be defined before use (inputs, then op results in order); a name may
//     be defined once. `%12` and other all-digit names are anonymous: they are only
//     labels in the file and are renumbered on printing.
//   * Each op is checked as it is read, with ir::checkOp (ir/OpCheck.h): the reader
//     itself checks only what it needs to read on (the op name, the number of result
//     names against the op table and against the result types, the attribute names and
//     the kinds of their values), then checkOp checks the op and the reader puts the
//     caret on the part of the op a problem is about. Absent attributes with a default
//     get the default. Op::pos is the position of the op name.
//   * Types: `f64[...]` with rank <= 8, extents >= 0, and a byte size (8 * numel)
//     that fits in int64; nothing is allocated for a declared type.
//   * NaN and infinities (`nan`, `inf`, `-inf`) are accepted only as elements of
//     `dense<...>` constants, where a program may legitimately need them (e.g. a -inf
//     start value); an f64 attribute must be finite (checkOp says so). Number literals
//     out of the range of double or int64 are errors, never silently inf or wrapped.
//   * A constant printed as a summary (`dense<N elements, ...>`) is rejected with an
//     error that says how to print it in full.
//   * After the closing `}` only whitespace and comments may follow.
//   * The finished program is run through ir::verify(); any problem it still finds is
//     reported as a ParseError at the 'return'.
//
//===----------------------------------------------------------------------===//
#include "ir/Parser.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <unordered_map>

#include "ir/OpCheck.h"
#include "ir/TextUtil.h"
#include "ir/Verifier.h"

namespace tessel::ir {
namespace {

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

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '.';
}
bool isDigit(char c) { return c >= '0' && c <= '9'; }

class Parser {
public:
  Parser(const std::string &text, std::string filename)
      : src_(text), file_(std::move(filename)) {
    // A UTF-8 byte order mark (some editors write one) is not part of the program: line 1
    // starts after it, so columns and the echoed line ignore it.
    lineStarts_.push_back(src_.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') lineStarts_.push_back(i + 1);
  }

  Program parseFile();
  Type parseStandaloneType();
  /// Errors become plain tessel::Error messages (no file:line:col, no caret).
  bool plain_ = false;

private:
  //===--- Diagnostics ----------------------------------------------------===//
  SourcePos posAt(size_t off) const {
    off = std::max(off, lineStarts_[0]);
    auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), off);
    size_t line = static_cast<size_t>(it - lineStarts_.begin()); // 1-based
    SourcePos p;
    p.file = file_;
    p.line = static_cast<unsigned>(line);
    p.col = static_cast<unsigned>(off - lineStarts_[line - 1] + 1);
    return p;
  }
  std::string lineText(unsigned line) const {
    return text::echoSourceLine(src_, lineStarts_[line - 1]);
  }
  [[noreturn]] void fail(size_t off, const std::string &msg) const {
    SourcePos p = posAt(off);
    if (plain_) throw Error(msg + " (column " + std::to_string(p.col) + ")");
    throw ParseError(formatDiagnostic(p, msg, lineText(p.line)), p);
  }

  //===--- Lexer ----------------------------------------------------------===//
  void skipTrivia() {
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++pos_;
      } else if (c == '/' && pos_ + 1 < src_.size() && src_[pos_ + 1] == '/') {
        while (pos_ < src_.size() && src_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string lexString(size_t start) {
    // src_[pos_] == '"'
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= src_.size() || src_[pos_] == '\n')
        fail(start, "unterminated string literal (missing closing '\"')");
      char c = src_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      size_t escOff = pos_;
      if (pos_ + 1 >= src_.size()) fail(start, "unterminated string literal (missing closing '\"')");
      char e = src_[pos_ + 1];
      pos_ += 2;
      switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'x': {
        auto hexv = [](char h) {
          if (h >= '0' && h <= '9') return h - '0';
          if (h >= 'a' && h <= 'f') return h - 'a' + 10;
          if (h >= 'A' && h <= 'F') return h - 'A' + 10;
          return -1;
        };
        int hi = pos_ < src_.size() ? hexv(src_[pos_]) : -1;
        int lo = pos_ + 1 < src_.size() ? hexv(src_[pos_ + 1]) : -1;
        if (hi < 0 || lo < 0) fail(escOff, "invalid escape: '\\x' must be followed by two hex digits");
        out += static_cast<char>(hi * 16 + lo);
        pos_ += 2;
        break;
      }
      default:
        fail(escOff, std::string("invalid escape sequence '\\") + e +
                         "' (allowed: \\\" \\\\ \\n \\t \\r \\xHH)");
      }
    }
  }

  Token lex() {
    skipTrivia();
    Token t;
    t.off = pos_;
    if (pos_ >= src_.size()) {
      t.kind = Tok::Eof;
      t.end = pos_;
      return t;
    }
    char c = src_[pos_];
    auto single = [&](Tok k) {
      t.kind = k;
      t.text = std::string(1, c);
      ++pos_;
    };
    switch (c) {
    case '(': single(Tok::LParen); break;
    case ')': single(Tok::RParen); break;
    case '{': single(Tok::LBrace); break;
    case '}': single(Tok::RBrace); break;
    case '[': single(Tok::LBracket); break;
    case ']': single(Tok::RBracket); break;
    case '<': single(Tok::Less); break;
    case '>': single(Tok::Greater); break;
    case ',': single(Tok::Comma); break;
    case ':': single(Tok::Colon); break;
    case '=': single(Tok::Equal); break;
    case '"':
      t.kind = Tok::String;
      t.text = lexString(t.off);
      break;
    case '%':
    case '@': {
      ++pos_;
      t.kind = c == '%' ? Tok::Value : Tok::Symbol;
      if (pos_ < src_.size() && src_[pos_] == '"') {
        t.text = lexString(pos_);
        if (t.text.empty() && c == '%') fail(t.off, "empty value name '%\"\"'");
      } else {
        size_t b = pos_;
        while (pos_ < src_.size() && isNameChar(src_[pos_])) ++pos_;
        if (b == pos_)
          fail(t.off, std::string("expected a name after '") + c +
                          "' (letters, digits, '_', '.', or a quoted string)");
        t.text = src_.substr(b, pos_ - b);
      }
      break;
    }
    default:
      if (c == '-' || isDigit(c)) {
        size_t b = pos_;
        if (c == '-') {
          ++pos_;
          if (pos_ >= src_.size() || !isDigit(src_[pos_])) {
            t.kind = Tok::Minus;
            t.text = "-";
            break;
          }
        }
        while (pos_ < src_.size() && isDigit(src_[pos_])) ++pos_;
        if (pos_ < src_.size() && src_[pos_] == '.') {
          ++pos_;
          while (pos_ < src_.size() && isDigit(src_[pos_])) ++pos_;
        }
        if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
          size_t save = pos_;
          ++pos_;
          if (pos_ < src_.size() && (src_[pos_] == '+' || src_[pos_] == '-')) ++pos_;
          if (pos_ >= src_.size() || !isDigit(src_[pos_])) {
            pos_ = save;
          } else {
            while (pos_ < src_.size() && isDigit(src_[pos_])) ++pos_;
          }
        }
        if (pos_ < src_.size() && isNameChar(src_[pos_]))
          fail(b, "invalid number literal '" + src_.substr(b, pos_ + 1 - b) + "'");
        t.kind = Tok::Number;
        t.text = src_.substr(b, pos_ - b);
      } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
        size_t b = pos_;
        while (pos_ < src_.size() && isNameChar(src_[pos_])) ++pos_;
        t.kind = Tok::Ident;
        t.text = src_.substr(b, pos_ - b);
      } else {
        unsigned char uc = static_cast<unsigned char>(c);
        size_t n = text::utf8SequenceLength(src_, pos_);
        std::string shown = uc < 0x20 || uc == 0x7F
                                ? text::quoteString(std::string(1, c))
                                : "'" + src_.substr(pos_, n ? n : 1) + "'";
        fail(pos_, "unexpected character " + shown);
      }
    }
    t.end = pos_;
    return t;
  }

  void advance() {
    prevEnd_ = tok_.end;
    tok_ = lex();
  }

  static std::string describe(const Token &t) {
    switch (t.kind) {
    case Tok::Eof: return "end of file";
    case Tok::Ident: return "'" + t.text + "'";
    case Tok::Value: return "value %" + (text::isBareName(t.text) ? t.text : text::quoteString(t.text));
    case Tok::Symbol: return "'@" + t.text + "'";
    case Tok::Number: return "number " + t.text;
    case Tok::String: return "string " + text::quoteString(t.text);
    default: return "'" + t.text + "'";
    }
  }

  [[noreturn]] void unexpected(const std::string &what) const {
    if (tok_.kind == Tok::Eof)
      fail(prevEnd_, "unexpected end of file: expected " + what + " (the file is truncated?)");
    fail(tok_.off, "expected " + what + ", got " + describe(tok_));
  }
  void expect(Tok k, const std::string &what) {
    if (tok_.kind != k) unexpected(what);
    advance();
  }
  bool isIdent(const char *s) const { return tok_.kind == Tok::Ident && tok_.text == s; }

  //===--- Literals and types ---------------------------------------------===//
  static bool looksFloat(const std::string &s) {
    return s.find_first_of(".eE") != std::string::npos;
  }

  int64_t toI64(const Token &t, const std::string &what) const {
    if (looksFloat(t.text))
      fail(t.off, what + " must be an integer, got " + t.text);
    int64_t v = 0;
    auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (r.ec != std::errc() || r.ptr != t.text.data() + t.text.size())
      fail(t.off, "integer literal " + t.text + " is out of the range of a 64-bit integer");
    return v;
  }

  double toF64(const Token &t) const {
    double v = 0;
    auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (r.ec != std::errc() || r.ptr != t.text.data() + t.text.size() || !std::isfinite(v))
      fail(t.off, "float literal " + t.text + " is out of the range of f64");
    return v;
  }

  /// Parses `f64[d0,...]`. `typeOff` receives the position of `f64`.
  Type parseType(const std::string &context) {
    size_t start = tok_.off;
    if (tok_.kind != Tok::Ident) unexpected("a type like f64[4,4] " + context);
    if (tok_.text != "f64") {
      bool looksType = tok_.text.size() >= 2 &&
                       (tok_.text[0] == 'f' || tok_.text[0] == 'i' || tok_.text[0] == 'c') &&
                       isDigit(tok_.text[1]);
      fail(tok_.off, (looksType ? "unsupported element type '" : "expected a type like f64[4,4] " +
                                                                      context + ", got '") +
                         tok_.text + "'" + (looksType ? " (only f64 is supported)" : ""));
    }
    advance();
    if (tok_.kind != Tok::LBracket)
      unexpected("'[' after 'f64' (a type is written f64[d0,d1,...], a scalar f64[])");
    advance();
    Type t;
    if (tok_.kind != Tok::RBracket) {
      while (true) {
        if (tok_.kind != Tok::Number) unexpected("a dimension (non-negative integer) or ']'");
        if (looksFloat(tok_.text))
          fail(tok_.off, "dimension must be an integer, got " + tok_.text);
        if (tok_.text[0] == '-') fail(tok_.off, "negative dimension " + tok_.text + " in type");
        int64_t d = toI64(tok_, "dimension");
        if (static_cast<int>(t.shape.size()) == kMaxRank)
          fail(start, "type has more than " + std::to_string(kMaxRank) +
                          " dimensions; the maximum rank is " + std::to_string(kMaxRank));
        t.shape.push_back(d);
        advance();
        if (tok_.kind == Tok::Comma) {
          advance();
          continue;
        }
        if (tok_.kind == Tok::RBracket) break;
        unexpected("',' or ']' in type");
      }
    }
    advance(); // ']'
    if (!text::checkedNumel(t.shape))
      fail(start, "type " + text::formatType(t) +
                      " is too large: its element count overflows a 64-bit byte size");
    return t;
  }

  //===--- Values ---------------------------------------------------------===//
  struct Def {
    ValueId id;
    size_t off;
  };

  std::string refText(const std::string &name) const {
    return "%" + (text::isBareName(name) ? name : text::quoteString(name));
  }

  ValueId useValue(const Token &t) {
    auto it = defs_.find(t.text);
    if (it == defs_.end()) fail(t.off, "use of undefined value " + refText(t.text));
    return it->second.id;
  }

  /// `grad(primal_outputs = N, wrt = [%a, ...][, cotangents = K])` after the inputs (the
  /// counts are checked against the outputs by the verifier).
  GradSignature parseGradSignature(const Program &p) {
    advance(); // 'grad'
    expect(Tok::LParen, "'(' after 'grad'");
    auto key = [&](const char *k) {
      if (!isIdent(k)) unexpected(std::string("'") + k + " = ...' in grad(...)");
      advance();
      expect(Tok::Equal, std::string("'=' after '") + k + "'");
    };
    auto count = [&](const char *k) {
      key(k);
      if (tok_.kind != Tok::Number) unexpected(std::string("a non-negative integer for '") + k + "'");
      int64_t v = toI64(tok_, k);
      if (v < 0)
        fail(tok_.off, std::string("'") + k + "' must be a non-negative integer, got " + tok_.text);
      advance();
      return static_cast<size_t>(v);
    };
    GradSignature g;
    g.primalOutputs = count("primal_outputs");
    expect(Tok::Comma, "',' and 'wrt = [...]' in grad(...)");
    key("wrt");
    expect(Tok::LBracket, "'[' opening the wrt inputs");
    while (tok_.kind != Tok::RBracket) {
      if (tok_.kind != Tok::Value) unexpected("a program input like %x in the wrt list");
      // Only inputs are defined before the body, so useValue finds an input.
      ValueId v = useValue(tok_);
      g.wrt.push_back(static_cast<size_t>(p.inputIndex(v)));
      advance();
      if (tok_.kind == Tok::Comma) {
        advance();
        continue;
      }
      if (tok_.kind != Tok::RBracket) unexpected("',' or ']' in the wrt inputs");
    }
    advance(); // ']'
    if (tok_.kind == Tok::Comma) {
      advance();
      g.cotangents = count("cotangents");
    }
    expect(Tok::RParen, "')' closing grad(...)");
    return g;
  }

  void checkFresh(const Token &t) {
    auto it = defs_.find(t.text);
    if (it != defs_.end()) {
      SourcePos first = posAt(it->second.off);
      fail(t.off, "redefinition of value " + refText(t.text) + " (first defined at line " +
                      std::to_string(first.line) + ", column " + std::to_string(first.col) + ")");
    }
  }

  //===--- Attributes -----------------------------------------------------===//
  /// A token in the words checkOp uses for an attribute value (ir/OpCheck.h).
  std::string tokenKindWord(const Token &t) const {
    switch (t.kind) {
    case Tok::Number: return looksFloat(t.text) ? "the float " + t.text : "the integer " + t.text;
    case Tok::String: return "a string";
    case Tok::LBracket: return "a list";
    case Tok::Ident:
      if (t.text == "dense") return "a dense tensor";
      return "'" + t.text + "'";
    default: return describe(t);
    }
  }

  /// The value of attribute `spec` of an op of `kind`, read as its kind says. nan and
  /// inf are read for an f64 so that checkOp rejects them in its words.
  Attr parseAttrValue(const AttrSpec &spec, OpKind kind) {
    std::string what = describeAttr(kind, spec.name);
    auto wrongKind = [&]() {
      if (tok_.kind == Tok::Eof) unexpected("a value for " + what);
      fail(tok_.off, attrKindMessage(kind, spec, tokenKindWord(tok_)) +
                         (spec.kind == AttrKind::Tensor ? " (written dense<[1, 2]> : f64[2])" : ""));
    };
    switch (spec.kind) {
    case AttrKind::I64: {
      if (tok_.kind != Tok::Number || looksFloat(tok_.text)) wrongKind();
      int64_t v = toI64(tok_, what);
      advance();
      return Attr::i64(v);
    }
    case AttrKind::F64:
      if (tok_.kind != Tok::Number && tok_.kind != Tok::Minus && !isIdent("inf") && !isIdent("nan"))
        wrongKind();
      return Attr::f64(parseFloat(what, attrKindMessage(kind, spec, "'-'")));
    case AttrKind::Str: {
      if (tok_.kind != Tok::String) wrongKind();
      std::string s = tok_.text;
      advance();
      return Attr::str(std::move(s));
    }
    case AttrKind::I64s: {
      if (tok_.kind != Tok::LBracket) wrongKind();
      advance();
      I64List l;
      if (tok_.kind != Tok::RBracket) {
        while (true) {
          if (tok_.kind != Tok::Number) unexpected("an integer in the list of " + what);
          l.push_back(toI64(tok_, "element of " + what));
          advance();
          if (tok_.kind == Tok::Comma) {
            advance();
            continue;
          }
          if (tok_.kind == Tok::RBracket) break;
          unexpected("',' or ']' in the list of " + what);
        }
      }
      advance();
      return Attr::i64s(l);
    }
    case AttrKind::Tensor: {
      if (!isIdent("dense")) wrongKind();
      return Attr::tensor(parseDense(what));
    }
    }
    fail(tok_.off, what + ": unsupported attribute kind");
  }

  /// A number, nan, inf or -inf; `what` names the literal in messages, `loneMinus` is
  /// the message for a '-' followed by anything else.
  double parseFloat(const std::string &what, const std::string &loneMinus) {
    if (tok_.kind == Tok::Number) {
      double v = toF64(tok_);
      advance();
      return v;
    }
    bool minus = false;
    size_t off = tok_.off;
    if (tok_.kind == Tok::Minus) {
      minus = true;
      advance();
    }
    if (tok_.kind == Tok::Ident && (tok_.text == "inf" || tok_.text == "nan")) {
      double v = tok_.text == "inf" ? INFINITY : NAN;
      advance();
      return minus ? -v : v;
    }
    if (minus) fail(off, loneMinus);
    unexpected("a number in " + what);
  }

  void parseDenseLevel(const Type &t, int depth, std::vector<double> &data) {
    if (depth == t.rank()) {
      data.push_back(parseFloat("dense literal", "expected a number after '-' in dense literal"));
      return;
    }
    int64_t n = t.shape[depth];
    size_t open = tok_.off;
    if (tok_.kind != Tok::LBracket)
      unexpected("'[' opening dimension " + std::to_string(depth) + " (extent " +
                 std::to_string(n) + ") of dense literal of type " + text::formatType(t));
    advance();
    int64_t count = 0;
    if (tok_.kind != Tok::RBracket) {
      while (true) {
        if (count == n)
          fail(tok_.off, "dense literal has more than " + std::to_string(n) +
                             " elements along dimension " + std::to_string(depth) +
                             " (type " + text::formatType(t) + ")");
        parseDenseLevel(t, depth + 1, data);
        ++count;
        if (tok_.kind == Tok::Comma) {
          advance();
          continue;
        }
        if (tok_.kind == Tok::RBracket) break;
        unexpected("',' or ']' in dense literal");
      }
    }
    if (count != n)
      fail(open, "dense literal has " + std::to_string(count) + " elements along dimension " +
                     std::to_string(depth) + ", but type " + text::formatType(t) + " needs " +
                     std::to_string(n));
    advance();
  }

  /// `dense<...> : type`. The type follows the literal, so the literal is first
  /// skipped (bracket matching only) to read the type, then re-read against it.
  Tensor parseDense(const std::string &what) {
    advance(); // 'dense'
    if (tok_.kind != Tok::Less) unexpected("'<' after 'dense'");
    advance();
    size_t saveTokPos = pos_;
    Token saveTok = tok_;
    size_t savePrev = prevEnd_;
    if (tok_.kind == Tok::Number) {
      // A summary `dense<N elements, min .., max .., sum ..>`?
      Token first = tok_;
      advance();
      if (isIdent("elements"))
        fail(first.off, "cannot read an elided constant (" + what +
                            "): it was printed as a summary 'dense<N elements, ...>'; print "
                            "the program in full (tessel dump without --elide-constants) to "
                            "get a parsable file");
    }
    pos_ = saveTokPos;
    tok_ = saveTok;
    prevEnd_ = savePrev;
    int depth = 0;
    while (!(depth == 0 && tok_.kind == Tok::Greater)) {
      if (tok_.kind == Tok::Eof) unexpected("'>' closing dense<...>");
      if (tok_.kind == Tok::LBracket) ++depth;
      if (tok_.kind == Tok::RBracket) {
        if (depth == 0) fail(tok_.off, "unbalanced ']' in dense literal");
        --depth;
      }
      if (tok_.kind != Tok::LBracket && tok_.kind != Tok::RBracket &&
          tok_.kind != Tok::Comma && tok_.kind != Tok::Number && tok_.kind != Tok::Minus &&
          !isIdent("inf") && !isIdent("nan"))
        unexpected("a number, ',', '[' or ']' in dense literal");
      advance();
    }
    advance(); // '>'
    if (tok_.kind != Tok::Colon) unexpected("':' and the type after dense<...>");
    advance();
    Type t = parseType("of the dense literal");
    size_t afterPos = pos_;
    Token afterTok = tok_;
    size_t afterPrev = prevEnd_;
    // Re-read the literal against the type.
    pos_ = saveTokPos;
    tok_ = saveTok;
    prevEnd_ = savePrev;
    std::vector<double> data;
    if (t.rank() == 0 && tok_.kind == Tok::LBracket)
      fail(tok_.off, "dense literal of scalar type f64[] must be a single number, not a list");
    if (t.rank() > 0 && tok_.kind != Tok::LBracket)
      fail(tok_.off, "dense literal of type " + text::formatType(t) +
                         " must be a nested list like [[1, 2], [3, 4]]");
    parseDenseLevel(t, 0, data);
    if (tok_.kind != Tok::Greater)
      fail(tok_.off, "dense literal has more elements than its type " + text::formatType(t) +
                         " holds");
    pos_ = afterPos;
    tok_ = afterTok;
    prevEnd_ = afterPrev;
    return Tensor(std::move(t), std::move(data));
  }

  //===--- Ops ------------------------------------------------------------===//
  std::string suggestOp(const std::string &name) const {
    std::string best;
    unsigned bestDist = 3;
    for (OpKind k : allOpKinds()) {
      unsigned d = llvm::StringRef(opName(k)).edit_distance(name, true, bestDist);
      if (d < bestDist) {
        bestDist = d;
        best = opName(k);
      }
    }
    return best.empty() ? "" : "; did you mean '" + best + "'?";
  }

  void parseOp(Program &p) {
    // Results.
    std::vector<Token> resultToks;
    size_t stmtOff = tok_.off;
    while (true) {
      if (tok_.kind != Tok::Value) unexpected("a result value like %x");
      checkFresh(tok_);
      for (const Token &r : resultToks)
        if (r.text == tok_.text)
          fail(tok_.off, "value " + refText(tok_.text) + " is defined twice by the same op");
      resultToks.push_back(tok_);
      advance();
      if (tok_.kind == Tok::Comma) {
        advance();
        continue;
      }
      break;
    }
    expect(Tok::Equal, "'=' after the result values");
    if (tok_.kind != Tok::Ident) unexpected("an op name");
    Token opTok = tok_;
    std::optional<OpKind> kind = opKindByName(opTok.text);
    if (!kind) fail(opTok.off, "unknown op '" + opTok.text + "'" + suggestOp(opTok.text));
    const OpInfo &info = opInfo(*kind);
    advance();
    if (auto msg = resultCountProblem(*kind, resultToks.size())) fail(stmtOff, *msg);

    // Operands.
    llvm::SmallVector<ValueId, 4> operands;
    if (tok_.kind == Tok::Value) {
      while (true) {
        if (tok_.kind != Tok::Value) unexpected("an operand value like %x");
        operands.push_back(useValue(tok_));
        advance();
        if (tok_.kind == Tok::Comma) {
          advance();
          continue;
        }
        break;
      }
    }
    if (auto msg = operandCountProblem(*kind, operands.size())) fail(opTok.off, *msg);

    // The rest of the op's checks (ir/OpCheck.h) point at the part of the op they are
    // about: an attribute's name or value, the attributes, or the op name.
    std::vector<size_t> attrNameOffs, attrValueOffs;
    size_t attrOff = tok_.off;
    auto report = [&](const OpProblem &problem) {
      switch (problem.part) {
      case OpProblem::Part::Results: fail(stmtOff, problem.message);
      case OpProblem::Part::Attrs: fail(attrOff, problem.message);
      case OpProblem::Part::AttrName: fail(attrNameOffs[problem.index], problem.message);
      case OpProblem::Part::AttrValue: fail(attrValueOffs[problem.index], problem.message);
      case OpProblem::Part::Op:
      case OpProblem::Part::Operands:
      case OpProblem::Part::ResultType: break;
      }
      fail(opTok.off, problem.message);
    };

    // Attributes as written. Reading a value needs its attribute's kind, so an unknown
    // name stops here.
    AttrList attrs;
    if (tok_.kind == Tok::LBrace) {
      advance();
      while (true) {
        if (tok_.kind != Tok::Ident && tok_.kind != Tok::String)
          unexpected("an attribute name");
        Token nameTok = tok_;
        const AttrSpec *spec = findAttrSpec(*kind, nameTok.text);
        if (!spec) fail(nameTok.off, unknownAttrMessage(*kind, nameTok.text));
        advance();
        expect(Tok::Equal, "'=' after attribute name '" + nameTok.text + "'");
        attrNameOffs.push_back(nameTok.off);
        attrValueOffs.push_back(tok_.off);
        attrs.list().push_back({nameTok.text, parseAttrValue(*spec, *kind)});
        if (tok_.kind == Tok::Comma) {
          advance();
          continue;
        }
        if (tok_.kind == Tok::RBrace) break;
        unexpected("',' or '}' in the attributes of '" + opTok.text + "'");
      }
      advance();
    }
    checkAttrs(*kind, attrs, report);

    // Result types.
    expect(Tok::Colon, "':' and the result type" + std::string(info.numResults == 1 ? "" : "s"));
    std::vector<Type> types;
    size_t typesOff = tok_.off;
    while (true) {
      types.push_back(parseType("for a result of '" + opTok.text + "'"));
      if (tok_.kind == Tok::Comma) {
        advance();
        continue;
      }
      break;
    }
    if (types.size() != resultToks.size())
      fail(typesOff, "'" + opTok.text + "' has " + std::to_string(resultToks.size()) +
                         " result" + (resultToks.size() == 1 ? "" : "s") + ", but " +
                         std::to_string(types.size()) + " type" + (types.size() == 1 ? " is" : "s are") +
                         " given");

    // Remat flag, then location.
    bool remat = false;
    if (isIdent("remat")) {
      advance();
      remat = true;
    }
    std::string loc;
    if (isIdent("loc")) {
      advance();
      expect(Tok::LParen, "'(' after 'loc'");
      if (tok_.kind != Tok::String) unexpected("a string in loc(...)");
      loc = tok_.text;
      advance();
      expect(Tok::RParen, "')' closing loc(...)");
    }

    auto results = p.appendOp(*kind, operands, std::move(attrs), types, std::move(loc), remat);
    Op &op = p.ops.back();
    op.pos = posAt(opTok.off);
    for (size_t i = 0; i < results.size(); ++i) {
      const std::string &n = resultToks[i].text;
      p.values[results[i]].name = isAnonymousName(n) ? std::string() : n;
    }
    checkOp(p, op, report, [&](size_t i) { return refText(resultToks[i].text); });
    canonicalizeAttrs(op.kind, op.attrs);
    for (size_t i = 0; i < results.size(); ++i)
      defs_[resultToks[i].text] = Def{results[i], resultToks[i].off};
  }

  //===--- State ----------------------------------------------------------===//
  const std::string &src_;
  std::string file_;
  std::vector<size_t> lineStarts_;
  size_t pos_ = 0;
  size_t prevEnd_ = 0;
  Token tok_;
  std::unordered_map<std::string, Def> defs_;
};

Program Parser::parseFile() {
  if (auto bad = text::findInvalidUtf8(src_)) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02X", static_cast<unsigned char>(src_[*bad]));
    fail(*bad, std::string("invalid UTF-8 byte ") + buf + "; .tir files must be UTF-8 text");
  }
  pos_ = lineStarts_[0]; // after a byte order mark
  tok_ = lex();
  if (tok_.kind == Tok::Eof)
    fail(tok_.off, "empty input: expected 'program @name(...) { ... }'");
  if (tok_.kind == Tok::LBrace)
    fail(tok_.off, "expected 'program' at the start of the file, got '{' (this looks like the "
                   "JSON form: use --input-format json)");
  if (!isIdent("program")) unexpected("'program' at the start of the file");
  size_t programOff = tok_.off;
  advance();
  Program p;
  if (tok_.kind != Tok::Symbol) unexpected("the program name, like @main");
  p.name = tok_.text;
  advance();
  expect(Tok::LParen, "'(' and the program inputs");
  if (tok_.kind != Tok::RParen) {
    while (true) {
      if (tok_.kind != Tok::Value) unexpected("an input like %x: f64[4]");
      Token nameTok = tok_;
      checkFresh(nameTok);
      if (isAnonymousName(nameTok.text))
        fail(nameTok.off, "program input " + refText(nameTok.text) +
                              " needs a name that is not a number");
      advance();
      expect(Tok::Colon, "':' and the type of input " + refText(nameTok.text));
      Type t = parseType("for input " + refText(nameTok.text));
      ValueId v = p.addInput(nameTok.text, t);
      defs_[nameTok.text] = Def{v, nameTok.off};
      if (tok_.kind == Tok::Comma) {
        advance();
        continue;
      }
      if (tok_.kind == Tok::RParen) break;
      unexpected("',' or ')' in the program inputs");
    }
  }
  advance(); // ')'
  if (isIdent("grad")) p.gradSignature = parseGradSignature(p);
  if (tok_.kind != Tok::LBrace) unexpected("'{' opening the program body");
  size_t braceOff = tok_.off;
  advance();
  size_t returnOff = 0;
  while (true) {
    if (tok_.kind == Tok::Value) {
      parseOp(p);
      continue;
    }
    if (isIdent("return")) {
      returnOff = tok_.off;
      advance();
      if (tok_.kind == Tok::Value) {
        while (true) {
          if (tok_.kind != Tok::Value) unexpected("an output value like %x");
          p.addOutput(useValue(tok_));
          advance();
          if (tok_.kind == Tok::Comma) {
            advance();
            continue;
          }
          break;
        }
      }
      break;
    }
    if (tok_.kind == Tok::Eof)
      fail(prevEnd_, "unexpected end of file: the program body opened at line " +
                         std::to_string(posAt(braceOff).line) +
                         " has no 'return' and no closing '}' (the file is truncated?)");
    if (tok_.kind == Tok::RBrace) fail(tok_.off, "expected 'return' before '}' closing the program");
    unexpected("an op like '%x = add %a, %b : f64[4]' or 'return'");
  }
  if (tok_.kind == Tok::Eof)
    fail(prevEnd_, "unexpected end of file: expected '}' closing the program body opened at line " +
                       std::to_string(posAt(braceOff).line) + " (the file is truncated?)");
  if (tok_.kind != Tok::RBrace) unexpected("'}' closing the program (or ',' between outputs)");
  advance();
  if (tok_.kind != Tok::Eof)
    fail(tok_.off, "unexpected " + describe(tok_) +
                       " after the end of the program (one program per file)");

  // Each op passed ir::checkOp as it was read, so what the verifier can still find is
  // about the program as a whole (the grad signature against the inputs and outputs).
  std::vector<std::string> problems = verify(p);
  if (!problems.empty()) {
    std::string msg = "verification failed: " + problems[0];
    for (size_t i = 1; i < problems.size(); ++i) msg += "\n  also: " + problems[i];
    fail(returnOff ? returnOff : programOff, msg);
  }
  return p;
}

Type Parser::parseStandaloneType() {
  if (auto bad = text::findInvalidUtf8(src_)) fail(*bad, "invalid UTF-8 byte in type");
  tok_ = lex();
  Type t = parseType("");
  if (tok_.kind != Tok::Eof) fail(tok_.off, "unexpected " + describe(tok_) + " after the type");
  return t;
}

} // namespace

Program parseProgram(const std::string &text, const std::string &filename) {
  Parser parser(text, filename);
  return parser.parseFile();
}

Type parseType(const std::string &text) {
  Parser parser(text, "<type>");
  return parser.parseStandaloneType();
}

namespace text {
Type parseTypePlain(const std::string &s) {
  Parser parser(s, "<type>");
  parser.plain_ = true;
  return parser.parseStandaloneType();
}
} // namespace text

} // namespace tessel::ir
