//===- ir/Printer.cpp - Text (.tir) and DOT forms ------------------------------===//
//
// The canonical text form. Grammar (the parser, ir/Parser.cpp, accepts exactly this,
// plus free whitespace and `//` comments between tokens):
//
//   file      ::= program EOF  |  program* 'entry' program EOF      (a module)
//   program   ::= 'program' symbol '(' [input (',' input)*] ')' [gradsig]
//                 '{' op* return '}'
//   input     ::= value ':' type
//   op        ::= value (',' value)* '=' opname operands [attrdict]
//                 ':' type (',' type)* ['remat'] [loc]
//   operands  ::= [value (',' value)*]
//               | symbol '(' [value (',' value)*] ')'  (call, scan: the callee)
//   return    ::= 'return' [value (',' value)*]
//   attrdict  ::= '{' attr (',' attr)* '}'
//   attr      ::= ident '=' attrval
//   attrval   ::= integer                          (i64)
//               | float | integer                  (f64; finite only)
//               | string                           (str)
//               | '[' [integer (',' integer)*] ']' (i64s)
//               | 'dense' '<' dense '>' ':' type   (tensor)
//   dense     ::= element | '[' [dense (',' dense)*] ']'   nested as the type's shape
//   element   ::= float | integer | 'nan' | 'inf' | '-inf'
//   loc       ::= 'loc' '(' string ')'
//   type      ::= 'f64' '[' [integer (',' integer)*] ']'   rank 0..8, extents >= 0
//   value     ::= '%' name        symbol ::= '@' name
//   name      ::= [A-Za-z0-9_.]+ | string           (quoted when not bare)
//   string    ::= '"' (char | '\"' | '\\' | '\n' | '\t' | '\r' | '\xHH')* '"'
//   integer   ::= '-'? [0-9]+      float ::= '-'? [0-9]+ ('.' [0-9]*)? ([eE] [+-]? [0-9]+)?
//
// Printing rules (what makes the form canonical):
//   * one op per line, indented by two spaces; `program` header and `}` on their own
//     lines; the file ends with a newline;
//   * anonymous values (ValueInfo::name empty or all digits) print as %0, %1, ...
//     numbered in order of definition (inputs first, then op results in op order);
//     other names print as themselves, quoted (%"a b") when not bare;
//   * every result is typed; attributes print in op-table order (ops.def) with all
//     defaults filled; i64 lists as `[0, 1]`; f64 attributes in the shortest form that
//     reads back exactly, always with a '.' or an exponent (`1.0`, `1e-12`);
//   * constants print in full as nested `dense<[[1, 2], [3, 4]]> : f64[2,2]` (elements
//     in shortest round-trip form; nan/inf/-inf spelled out) unless
//     PrintOptions::elideConstantsAbove > 0 and the constant has more elements, in
//     which case `dense<N elements, min A, max B, sum S>` is printed (not parsable);
//   * `loc("...")` ends the line when the op has a location and printLocations is set.
//   * a module prints its functions in order, each as a program, then its entry
//     preceded by `entry` on the same line; a blank line between programs. The
//     `callee` attribute of call and scan prints as the symbol before the operands.
//
//===----------------------------------------------------------------------===//
#include "ir/Printer.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "ir/TextUtil.h"

namespace tessel::ir {
namespace {

using text::formatDouble;
using text::formatType;

std::string refName(const std::string &name) {
  return "%" + (text::isBareName(name) ? name : text::quoteString(name));
}

std::string symbolName(const std::string &name) {
  return "@" + (text::isBareName(name) ? name : text::quoteString(name));
}

void printDenseLevel(std::string &out, const Tensor &t, int depth, size_t &idx) {
  if (depth == t.type.rank()) {
    out += idx < t.data.size() ? formatDouble(t.data[idx]) : "nan";
    ++idx;
    return;
  }
  out += '[';
  int64_t n = t.type.shape[depth];
  for (int64_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    printDenseLevel(out, t, depth + 1, idx);
  }
  out += ']';
}

std::string printTensorAttr(const Tensor &t, const PrintOptions &opts) {
  std::string out = "dense<";
  int64_t n = static_cast<int64_t>(t.data.size());
  if (opts.elideConstantsAbove > 0 && n > opts.elideConstantsAbove) {
    double mn = INFINITY, mx = -INFINITY, sum = 0;
    for (double x : t.data) {
      mn = std::fmin(mn, x);
      mx = std::fmax(mx, x);
      sum += x;
    }
    out += std::to_string(n) + " elements, min " + formatDouble(mn) + ", max " +
           formatDouble(mx) + ", sum " + formatDouble(sum);
  } else {
    size_t idx = 0;
    printDenseLevel(out, t, 0, idx);
  }
  out += "> : " + formatType(t.type);
  return out;
}

std::string printAttrValue(const Attr &a, const PrintOptions &opts) {
  switch (a.kind()) {
  case AttrKind::I64: return std::to_string(a.getI64());
  case AttrKind::F64: return text::formatFloatAttr(a.getF64());
  case AttrKind::Str: return text::quoteString(a.getStr());
  case AttrKind::I64s: {
    std::string s = "[";
    const I64List &l = a.getI64s();
    for (size_t i = 0; i < l.size(); ++i) {
      if (i) s += ", ";
      s += std::to_string(l[i]);
    }
    return s + "]";
  }
  case AttrKind::Tensor: return printTensorAttr(a.getTensor(), opts);
  }
  return "?";
}

/// Attributes in op-table order, then any the table does not know (the verifier
/// rejects those; printing them keeps the problem visible).
std::vector<const NamedAttr *> orderedAttrs(const Op &op) {
  std::vector<const NamedAttr *> out;
  const auto &list = op.attrs.list();
  std::vector<bool> used(list.size(), false);
  for (const AttrSpec &spec : opInfo(op.kind).attrs)
    for (size_t i = 0; i < list.size(); ++i)
      if (!used[i] && list[i].name == spec.name) {
        out.push_back(&list[i]);
        used[i] = true;
        break;
      }
  for (size_t i = 0; i < list.size(); ++i)
    if (!used[i]) out.push_back(&list[i]);
  return out;
}

std::string attrKey(const std::string &name) {
  return text::isBareName(name) ? name : text::quoteString(name);
}

} // namespace

std::string describeOp(const Program &p, const Op &op) {
  std::string s;
  for (size_t i = 0; i < op.results.size(); ++i) s += (i ? ", " : "") + valueRef(p, op.results[i]);
  if (!op.results.empty()) s += " = ";
  s += opName(op.kind);
  const Attr *callee = hasCallee(op.kind) ? op.attrs.find("callee") : nullptr;
  if (callee && callee->kind() != AttrKind::Str) callee = nullptr;
  if (callee) s += " " + text::atName(callee->getStr()) + "(";
  for (size_t i = 0; i < op.operands.size(); ++i)
    s += (i ? ", " : callee ? "" : " ") + valueRef(p, op.operands[i]);
  if (callee) s += ")";
  if (op.remat) s += " remat";
  if (!op.loc.empty()) s += " loc(" + text::quoteString(op.loc) + ")";
  if (op.pos.known()) s += " at " + op.pos.str();
  return s;
}

std::string valueRef(const Program &p, ValueId v) {
  if (v >= p.values.size()) return "%<invalid " + std::to_string(v) + ">";
  const std::string &n = p.values[v].name;
  if (!isAnonymousName(n)) return refName(n);
  // Anonymous: its number is the count of anonymous values defined before it. A scan
  // without allocation (the verifier calls this once per op).
  int64_t count = 0;
  auto anon = [&](ValueId w) { return w < p.values.size() && isAnonymousName(p.values[w].name); };
  for (ValueId w : p.inputs) {
    if (w == v) return text::prefixedNumber("%", count);
    count += anon(w);
  }
  for (const Op &op : p.ops)
    for (ValueId w : op.results) {
      if (w == v) return text::prefixedNumber("%", count);
      count += anon(w);
    }
  return text::prefixedNumber("%?", v);
}

std::string printAttr(const Attr &a) { return printAttrValue(a, PrintOptions{}); }

std::vector<std::string> valueRefs(const Program &p) {
  std::vector<std::string> refs = text::printedNames(p);
  for (size_t v = 0; v < refs.size(); ++v)
    refs[v] = isAnonymousName(p.values[v].name) ? "%" + refs[v] : refName(p.values[v].name);
  return refs;
}

namespace {

std::string printFunction(const Program &p, const PrintOptions &opts) {
  std::vector<std::string> names = text::printedNames(p);
  auto ref = [&](ValueId v) -> std::string {
    if (v >= names.size()) return "%<invalid " + std::to_string(v) + ">";
    return refName(names[v]);
  };
  auto typeOf = [&](ValueId v) -> std::string {
    if (v >= p.values.size()) return "f64[?]";
    return formatType(p.values[v].type);
  };

  std::string out = "program " + symbolName(p.name) + "(";
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    if (i) out += ", ";
    out += ref(p.inputs[i]) + ": " + typeOf(p.inputs[i]);
  }
  out += ")";
  if (const auto &g = p.gradSignature) {
    out += " grad(primal_outputs = " + std::to_string(g->primalOutputs) + ", wrt = [";
    for (size_t i = 0; i < g->wrt.size(); ++i)
      out += (i ? ", " : "") +
             (g->wrt[i] < p.inputs.size() ? ref(p.inputs[g->wrt[i]]) : "%?" + std::to_string(g->wrt[i]));
    out += "]";
    if (g->cotangents) out += ", cotangents = " + std::to_string(g->cotangents);
    out += ")";
  }
  out += " {\n";
  for (const Op &op : p.ops) {
    out += "  ";
    for (size_t i = 0; i < op.results.size(); ++i) {
      if (i) out += ", ";
      out += ref(op.results[i]);
    }
    out += " = ";
    out += opName(op.kind);
    std::vector<const NamedAttr *> attrs = orderedAttrs(op);
    // The callee of call and scan is the symbol before the operands.
    const bool callee = hasCallee(op.kind) && !attrs.empty() && attrs[0]->name == "callee" &&
                        attrs[0]->value.kind() == AttrKind::Str;
    if (callee) {
      out += " " + symbolName(attrs[0]->value.getStr()) + "(";
      attrs.erase(attrs.begin());
    }
    for (size_t i = 0; i < op.operands.size(); ++i) {
      out += i ? ", " : callee ? "" : " ";
      out += ref(op.operands[i]);
    }
    if (callee) out += ")";
    if (!attrs.empty()) {
      out += " {";
      for (size_t i = 0; i < attrs.size(); ++i) {
        if (i) out += ", ";
        out += attrKey(attrs[i]->name) + " = " + printAttrValue(attrs[i]->value, opts);
      }
      out += "}";
    }
    out += " : ";
    for (size_t i = 0; i < op.results.size(); ++i) {
      if (i) out += ", ";
      out += typeOf(op.results[i]);
    }
    if (op.remat) out += " remat";
    if (opts.printLocations && !op.loc.empty()) out += " loc(" + text::quoteString(op.loc) + ")";
    out += "\n";
  }
  out += "  return";
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    out += i ? ", " : " ";
    out += ref(p.outputs[i]);
  }
  out += "\n}\n";
  return out;
}

} // namespace

std::string printProgram(const Program &p, const PrintOptions &opts) {
  if (p.functions.empty()) return printFunction(p, opts);
  std::string out;
  for (const Program &f : p.functions) out += printFunction(f, opts) + "\n";
  return out + "entry " + printFunction(p, opts);
}

//===----------------------------------------------------------------------===//
// DOT form
//===----------------------------------------------------------------------===//
//
// digraph "<name>" with one node per input (`in<i>`, shape invhouse), per op
// (`op<i>`, box; label: op name, attributes except tensors, location) and per output
// (`out<i>`, house). Edges go from the defining node to each use, labelled with the
// value's printed name and type; constants are drawn as ellipses with a summary.

namespace {

std::string dotEscape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

} // namespace

std::string printDot(const Program &p) {
  std::vector<std::string> names = text::printedNames(p);
  PrintOptions summary;
  summary.elideConstantsAbove = 8;
  std::ostringstream os;
  os << "digraph \"" << dotEscape(p.name) << "\" {\n";
  os << "  rankdir=TB;\n";
  os << "  node [fontname=\"monospace\", fontsize=10];\n";
  os << "  edge [fontname=\"monospace\", fontsize=9];\n";

  // Where each value comes from (node id), for the edges.
  std::vector<std::string> source(p.values.size());
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    ValueId v = p.inputs[i];
    std::string id = "in" + std::to_string(i);
    if (v < source.size()) source[v] = id;
    std::string label = refName(v < names.size() ? names[v] : "?") + "\n" +
                        (v < p.values.size() ? formatType(p.values[v].type) : "");
    os << "  " << id << " [shape=invhouse, style=filled, fillcolor=\"#dbe9f6\", label=\""
       << dotEscape(label) << "\"];\n";
  }
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const Op &op = p.ops[i];
    std::string id = "op" + std::to_string(i);
    for (ValueId r : op.results)
      if (r < source.size()) source[r] = id;
    std::string label = opName(op.kind);
    for (const NamedAttr *a : orderedAttrs(op))
      label += "\n" + a->name + " = " + printAttrValue(a->value, summary);
    if (op.remat) label += "\nremat";
    if (!op.loc.empty()) label += "\n" + op.loc;
    bool isConst = op.kind == OpKind::Constant || op.kind == OpKind::Iota;
    os << "  " << id << " [shape=" << (isConst ? "ellipse" : "box") << ", label=\""
       << dotEscape(label) << "\"];\n";
  }
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    os << "  out" << i << " [shape=house, style=filled, fillcolor=\"#e3f1df\", label=\""
       << dotEscape("return " + std::to_string(i) + "\n" + p.outputName(i)) << "\"];\n";
  }
  auto edgeLabel = [&](ValueId v) {
    if (v >= p.values.size()) return std::string("?");
    return refName(names[v]) + " : " + formatType(p.values[v].type);
  };
  for (size_t i = 0; i < p.ops.size(); ++i)
    for (size_t k = 0; k < p.ops[i].operands.size(); ++k) {
      ValueId v = p.ops[i].operands[k];
      if (v >= source.size() || source[v].empty()) continue;
      os << "  " << source[v] << " -> op" << i << " [label=\"" << dotEscape(edgeLabel(v));
      if (p.ops[i].operands.size() > 1) os << " (#" << k << ")";
      os << "\"];\n";
    }
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    ValueId v = p.outputs[i];
    if (v >= source.size() || source[v].empty()) continue;
    os << "  " << source[v] << " -> out" << i << " [label=\"" << dotEscape(edgeLabel(v))
       << "\"];\n";
  }
  os << "}\n";
  return os.str();
}

} // namespace tessel::ir
