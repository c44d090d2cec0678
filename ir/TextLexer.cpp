//===- ir/TextLexer.cpp - Tokens and literals of the text form ------------------===//
#include "ir/TextLexer.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace tessel::ir::text {

namespace {

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '.';
}
bool isDigit(char c) { return c >= '0' && c <= '9'; }

} // namespace

Lexer::Lexer(const std::string &text, std::string filename)
    : src_(text), file_(std::move(filename)) {
  // A UTF-8 byte order mark (some editors write one) is not part of the program: line 1
  // starts after it, so columns and the echoed line ignore it.
  lineStarts_.push_back(src_.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0);
  for (size_t i = 0; i < src_.size(); ++i)
    if (src_[i] == '\n') lineStarts_.push_back(i + 1);
}

//===--- Diagnostics --------------------------------------------------------===//

SourcePos Lexer::posAt(size_t off) const {
  off = std::max(off, lineStarts_[0]);
  auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), off);
  size_t line = static_cast<size_t>(it - lineStarts_.begin()); // 1-based
  SourcePos p;
  p.file = file_;
  p.line = static_cast<unsigned>(line);
  p.col = static_cast<unsigned>(off - lineStarts_[line - 1] + 1);
  return p;
}

std::string Lexer::lineText(unsigned line) const {
  return echoSourceLine(src_, lineStarts_[line - 1]);
}

void Lexer::fail(size_t off, const std::string &msg) const {
  SourcePos p = posAt(off);
  if (plain_) throw Error(msg + " (column " + std::to_string(p.col) + ")");
  throw ParseError(formatDiagnostic(p, msg, lineText(p.line)), p);
}

//===--- Tokens -------------------------------------------------------------===//

void Lexer::skipTrivia() {
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

std::string Lexer::lexString(size_t start) {
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

Token Lexer::lex() {
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
        fail(b, "invalid number literal '" + clipForMessage(src_.substr(b, pos_ + 1 - b)) + "'");
      t.kind = Tok::Number;
      t.text = src_.substr(b, pos_ - b);
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
      size_t b = pos_;
      while (pos_ < src_.size() && isNameChar(src_[pos_])) ++pos_;
      t.kind = Tok::Ident;
      t.text = src_.substr(b, pos_ - b);
    } else {
      unsigned char uc = static_cast<unsigned char>(c);
      size_t n = utf8SequenceLength(src_, pos_);
      std::string shown = uc < 0x20 || uc == 0x7F
                              ? quoteString(std::string(1, c))
                              : "'" + src_.substr(pos_, n ? n : 1) + "'";
      fail(pos_, "unexpected character " + shown);
    }
  }
  t.end = pos_;
  return t;
}

void Lexer::advance() {
  prevEnd_ = tok_.end;
  tok_ = lex();
}

std::string Lexer::describe(const Token &t) {
  switch (t.kind) {
  case Tok::Eof: return "end of file";
  case Tok::Ident: return "'" + clipForMessage(t.text) + "'";
  case Tok::Value:
    return "value %" + clipForMessage(isBareName(t.text) ? t.text : quoteString(t.text));
  case Tok::Symbol: return "'@" + clipForMessage(t.text) + "'";
  case Tok::Number: return "number " + clipForMessage(t.text);
  case Tok::String: return "string " + clipForMessage(quoteString(t.text));
  default: return "'" + t.text + "'";
  }
}

void Lexer::unexpected(const std::string &what) const {
  if (tok_.kind == Tok::Eof)
    fail(prevEnd_, "unexpected end of file: expected " + what + " (the file is truncated?)");
  fail(tok_.off, "expected " + what + ", got " + describe(tok_));
}

void Lexer::expect(Tok k, const std::string &what) {
  if (tok_.kind != k) unexpected(what);
  advance();
}

//===--- Literals and types -------------------------------------------------===//

int64_t Lexer::toI64(const Token &t, const std::string &what) const {
  if (looksFloat(t.text))
    fail(t.off, what + " must be an integer, got " + clipForMessage(t.text));
  int64_t v = 0;
  auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
  if (r.ec != std::errc() || r.ptr != t.text.data() + t.text.size())
    fail(t.off, "integer literal " + clipForMessage(t.text) + " is out of the range of a 64-bit integer");
  return v;
}

double Lexer::toF64(const Token &t) const {
  double v = 0;
  auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
  if (r.ec != std::errc() || r.ptr != t.text.data() + t.text.size() || !std::isfinite(v))
    fail(t.off, "float literal " + clipForMessage(t.text) + " is out of the range of f64");
  return v;
}

Type Lexer::parseType(const std::string &context) {
  size_t start = tok_.off;
  if (tok_.kind != Tok::Ident) unexpected("a type like f64[4,4] " + context);
  if (tok_.text != "f64") {
    bool looksType = tok_.text.size() >= 2 &&
                     (tok_.text[0] == 'f' || tok_.text[0] == 'i' || tok_.text[0] == 'c') &&
                     isDigit(tok_.text[1]);
    fail(tok_.off, (looksType ? "unsupported element type '" : "expected a type like f64[4,4] " +
                                                                    context + ", got '") +
                       clipForMessage(tok_.text) + "'" + (looksType ? " (only f64 is supported)" : ""));
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
        fail(tok_.off, "dimension must be an integer, got " + clipForMessage(tok_.text));
      if (tok_.text[0] == '-')
        fail(tok_.off, "negative dimension " + clipForMessage(tok_.text) + " in type");
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
  if (!checkedNumel(t.shape))
    fail(start, "type " + formatType(t) +
                    " is too large: its element count overflows a 64-bit byte size");
  return t;
}

double Lexer::parseFloat(const std::string &what, const std::string &loneMinus) {
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

void Lexer::parseDenseLevel(const Type &t, int depth, std::vector<double> &data) {
  if (depth == t.rank()) {
    data.push_back(parseFloat("dense literal", "expected a number after '-' in dense literal"));
    return;
  }
  int64_t n = t.shape[depth];
  size_t open = tok_.off;
  if (tok_.kind != Tok::LBracket)
    unexpected("'[' opening dimension " + std::to_string(depth) + " (extent " +
               std::to_string(n) + ") of dense literal of type " + formatType(t));
  advance();
  int64_t count = 0;
  if (tok_.kind != Tok::RBracket) {
    while (true) {
      if (count == n)
        fail(tok_.off, "dense literal has more than " + std::to_string(n) +
                           " elements along dimension " + std::to_string(depth) +
                           " (type " + formatType(t) + ")");
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
                   std::to_string(depth) + ", but type " + formatType(t) + " needs " +
                   std::to_string(n));
  advance();
}

Tensor Lexer::parseDense(const std::string &what) {
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
                          "): it was printed as a summary 'dense<N elements, ...>' (verify, "
                          "opt and dump summarise large constants on a terminal, or with "
                          "--elide-constants N); write the program with -o FILE or "
                          "--elide-constants 0 to get a parsable file");
  }
  pos_ = saveTokPos;
  tok_ = saveTok;
  prevEnd_ = savePrev;
  // The nesting is bounded here, before parseDenseLevel recurses once per level.
  int depth = 0;
  while (!(depth == 0 && tok_.kind == Tok::Greater)) {
    if (tok_.kind == Tok::Eof) unexpected("'>' closing dense<...>");
    if (tok_.kind == Tok::LBracket && ++depth > kMaxRank)
      fail(tok_.off, "dense literal nested deeper than " + std::to_string(kMaxRank) +
                         " levels (the maximum rank is " + std::to_string(kMaxRank) + ")");
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
    fail(tok_.off, "dense literal of type " + formatType(t) +
                       " must be a nested list like [[1, 2], [3, 4]]");
  parseDenseLevel(t, 0, data);
  if (tok_.kind != Tok::Greater)
    fail(tok_.off, "dense literal has more elements than its type " + formatType(t) +
                       " holds");
  pos_ = afterPos;
  tok_ = afterTok;
  prevEnd_ = afterPrev;
  return Tensor(std::move(t), std::move(data));
}

Type Lexer::parseStandaloneType() {
  if (auto bad = findInvalidUtf8(src_)) fail(*bad, "invalid UTF-8 byte in type");
  tok_ = lex();
  Type t = parseType("");
  if (tok_.kind != Tok::Eof) fail(tok_.off, "unexpected " + describe(tok_) + " after the type");
  return t;
}

} // namespace tessel::ir::text
