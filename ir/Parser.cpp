//===- ir/Parser.cpp - Reading the text (.tir) form ----------------------------===//
//
// A recursive-descent parser for the grammar documented at the top of ir/Printer.cpp,
// over the tokens and literals of ir/TextLexer.h. Decisions worth knowing:
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
//   * A dense literal nests at most kMaxRank deep; deeper nesting is an error found by
//     the bracket scan that precedes reading it (the reading recurses once per level).
//   * Messages quote names and literals clipped (text::clipForMessage) and echo a window
//     of a long line (formatDiagnostic), so a diagnostic is short whatever the input.
//   * After the closing `}` only whitespace and comments may follow.
//   * The finished program is run through ir::verify(); any problem it still finds is
//     reported as a ParseError at the 'return'.
//
//===----------------------------------------------------------------------===//
#include "ir/Parser.h"

#include <cstdio>
#include <optional>
#include <unordered_map>

#include "ir/OpCheck.h"
#include "ir/ShapeRules.h"
#include "ir/TextLexer.h"
#include "ir/Verifier.h"

namespace tessel::ir {
namespace {

using text::Tok;
using text::Token;

/// The program grammar over the tokens and literals of text::Lexer.
class Parser : public text::Lexer {
public:
  using Lexer::Lexer;
  Program parseFile();

private:
  //===--- Values ---------------------------------------------------------===//
  struct Def {
    ValueId id;
    size_t off;
  };

  /// A value as messages name it (a very long name clipped).
  std::string refText(const std::string &name) const {
    return "%" + text::clipForMessage(text::isBareName(name) ? name : text::quoteString(name));
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
        fail(tok_.off, std::string("'") + k + "' must be a non-negative integer, got " +
                           text::clipForMessage(tok_.text));
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
    case Tok::Number:
      return (looksFloat(t.text) ? "the float " : "the integer ") + text::clipForMessage(t.text);
    case Tok::String: return "a string";
    case Tok::LBracket: return "a list";
    case Tok::Ident:
      if (t.text == "dense") return "a dense tensor";
      return "'" + text::clipForMessage(t.text) + "'";
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

  //===--- Ops ------------------------------------------------------------===//
  std::string suggestOp(const std::string &name) const {
    std::string best = closestOpName(name);
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
    if (!kind)
      fail(opTok.off, "unknown op '" + text::clipForMessage(opTok.text) + "'" + suggestOp(opTok.text));
    const OpInfo &info = opInfo(*kind);
    advance();
    if (auto msg = resultCountProblem(*kind, resultToks.size())) fail(stmtOff, *msg);

    // The callee of call and scan, a symbol before its operands in parentheses.
    std::optional<Token> calleeTok;
    if (hasCallee(*kind)) {
      if (tok_.kind != Tok::Symbol)
        unexpected("the function '" + opTok.text + "' runs, like @f(%x)");
      calleeTok = tok_;
      if (tok_.text == p.name)
        fail(tok_.off, text::atName(tok_.text) + " calls itself: a function may call only the "
                       "functions defined above it in the module (no recursion)");
      if (!findCallee(functions_, tok_.text))
        fail(tok_.off, calleeProblem(tok_.text, functions_));
      advance();
      expect(Tok::LParen, "'(' and the operands of " + text::atName(calleeTok->text));
    } else if (tok_.kind == Tok::Symbol) {
      fail(tok_.off, "'" + opTok.text + "' runs no function: only call and scan name one (" +
                         text::atName(tok_.text) + ")");
    }
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
    if (calleeTok) expect(Tok::RParen, "',' or ')' closing the operands of " + text::atName(calleeTok->text));
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
    if (calleeTok) {
      attrNameOffs.push_back(calleeTok->off);
      attrValueOffs.push_back(calleeTok->off);
      attrs.list().push_back({"callee", Attr::str(calleeTok->text)});
    }
    if (tok_.kind == Tok::LBrace) {
      advance();
      while (true) {
        if (tok_.kind != Tok::Ident && tok_.kind != Tok::String)
          unexpected("an attribute name");
        Token nameTok = tok_;
        const AttrSpec *spec = findAttrSpec(*kind, nameTok.text);
        if (!spec) fail(nameTok.off, unknownAttrMessage(*kind, nameTok.text));
        if (calleeTok && nameTok.text == "callee")
          fail(nameTok.off, "the callee of '" + opTok.text + "' is the symbol before its operands (" +
                                text::atName(calleeTok->text) + "), not an attribute");
        advance();
        expect(Tok::Equal, "'=' after attribute name '" + text::clipForMessage(nameTok.text) + "'");
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
    checkOp(p, op, report, [&](size_t i) { return refText(resultToks[i].text); }, functions_);
    canonicalizeAttrs(op.kind, op.attrs);
    for (size_t i = 0; i < results.size(); ++i)
      defs_[resultToks[i].text] = Def{results[i], resultToks[i].off};
  }

  Program parseFunction();

  //===--- State ----------------------------------------------------------===//
  std::unordered_map<std::string, Def> defs_;
  /// The functions of the module read so far (what a call may name).
  std::vector<Program> functions_;
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
  // A plain program, or a module: its functions, then its entry marked `entry`.
  while (true) {
    const size_t startOff = tok_.off;
    const bool entry = isIdent("entry");
    if (entry) advance();
    if (!isIdent("program"))
      unexpected(entry ? std::string("'program' after 'entry'")
                       : functions_.empty() ? "'program' at the start of the file"
                                            : "'program', or 'entry program' for the module's entry");
    Program p = parseFunction();
    if (tok_.kind == Tok::Eof && (entry || functions_.empty())) {
      p.functions = std::move(functions_);
      // Each function was verified when read; what is left is the module as a whole.
      std::vector<std::string> problems = verify(p);
      if (!problems.empty()) {
        std::string msg = "verification failed: " + problems[0];
        for (size_t i = 1; i < problems.size(); ++i) msg += "\n  also: " + problems[i];
        fail(startOff, msg);
      }
      return p;
    }
    if (entry)
      fail(tok_.off, "unexpected " + describe(tok_) +
                         " after the entry program (the entry is the last function of a module)");
    if (tok_.kind == Tok::Eof)
      fail(startOff, "a module of " + std::to_string(functions_.size() + 1) +
                         " functions names its entry: write 'entry program " +
                         text::atName(p.name) + "(...)' for the last one");
    if (!isIdent("program") && !isIdent("entry"))
      fail(tok_.off, "unexpected " + describe(tok_) +
                         " after the end of the program (one program per file, or a module: "
                         "functions, then 'entry program @main(...)')");
    functions_.push_back(std::move(p));
  }
}

Program Parser::parseFunction() {
  size_t programOff = tok_.off;
  advance();
  defs_.clear();
  Program p;
  if (tok_.kind != Tok::Symbol) unexpected("the program name, like @main");
  p.name = tok_.text;
  for (const Program &f : functions_)
    if (f.name == p.name)
      fail(tok_.off, "function " + text::atName(p.name) + " is defined twice in the module");
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

  // Each op passed ir::checkOp as it was read, so what the verifier can still find is
  // about the program as a whole (the grad signature against the inputs and outputs).
  std::vector<std::string> problems = verifyFunction(p, functions_);
  if (!problems.empty()) {
    std::string msg = "verification failed: " + problems[0];
    for (size_t i = 1; i < problems.size(); ++i) msg += "\n  also: " + problems[i];
    fail(returnOff ? returnOff : programOff, msg);
  }
  return p;
}

} // namespace

Program parseProgram(const std::string &text, const std::string &filename) {
  Parser parser(text, filename);
  return parser.parseFile();
}

Type parseType(const std::string &text) {
  text::Lexer lexer(text, "<type>");
  return lexer.parseStandaloneType();
}

namespace text {
Type parseTypePlain(const std::string &s) {
  Lexer lexer(s, "<type>");
  lexer.plain_ = true;
  return lexer.parseStandaloneType();
}
} // namespace text

} // namespace tessel::ir
