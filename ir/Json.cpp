//===- ir/Json.cpp - JSON form of programs --------------------------------------===//
//
// Schema (version 1; documented in docs/ir-json.md):
//
//   {"version": 1, "kind": "tessel.program", "name": "step",
//    "inputs":  [{"name": "T", "type": "f64[4,4,4,4]"}, ...],
//    "ops":     [{"op": "svd", "operands": ["Ma"],
//                 "results": [{"name": "U", "type": "f64[16,16]"}, ...],
//                 "attrs": {"eps": 1e-12},            // op-table order
//                 "remat": true,                      // only for remat ops
//                 "loc": "step: svd Ma"},             // only when non-empty
//                ...],
//    "outputs": ["lnz", "Tn"],
//    "grad": {"primal_outputs": 1, "wrt": ["T"], "cotangents": 0},  // gradient programs only
//    "functions": [{"name": "body", "inputs": ..., "ops": ..., "outputs": ...}, ...]}
//                                                   // a module's other functions only
//
// A module is its entry (the root object) with "functions": the others in order,
// callees before callers, each with the fields of a program but no version or kind.
// A call or scan names its callee in the attribute "callee" (a string).
// Value names are the text form's names without '%' (anonymous values numbered "0",
// "1", ... in order of definition, exactly as printed). Attribute values: i64 -> JSON
// integer, f64 -> JSON number, str -> JSON string, i64s -> array of integers,
// tensor -> {"type": "f64[2,2]", "data": [1, 2, 3, 4]} (row-major, in full; non-finite
// elements as the strings "nan", "inf", "-inf"). Doubles are written by nlohmann-json
// in a round-trip-exact form, so text -> JSON -> text is the identity.
//
// Reading checks the same things as the text parser (names defined once and before
// use, op names, types, and each op with ir::checkOp, so a bad op gets the text
// reader's message) and reports each problem as tessel::Error
// "<file>: <JSON pointer>: error: <message>", the pointer naming the part of the op
// (an attribute, the operands, a result's type) the problem is about. Syntax errors from
// nlohmann-json are reported as "<file>:<line>:<col>: error: invalid JSON: ..." with
// the source line and a caret. Arrays and objects nest at most kMaxJsonDepth deep,
// checked while parsing (nlohmann's parser does not recurse; writing a value out for a
// message does), and a value a message quotes is clipped.
//
//===----------------------------------------------------------------------===//
#include "ir/Json.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "ir/OpCheck.h"
#include "ir/TextUtil.h"
#include "ir/Verifier.h"

namespace tessel::ir {
namespace {

using ojson = nlohmann::ordered_json;

ojson doubleToJson(double x) {
  if (std::isfinite(x)) return x;
  return text::formatDouble(x); // "nan", "inf", "-inf"
}

ojson attrToJson(const Attr &a) {
  switch (a.kind()) {
  case AttrKind::I64: return a.getI64();
  case AttrKind::F64: return doubleToJson(a.getF64());
  case AttrKind::Str: return a.getStr();
  case AttrKind::I64s: {
    ojson arr = ojson::array();
    for (int64_t x : a.getI64s()) arr.push_back(x);
    return arr;
  }
  case AttrKind::Tensor: {
    const Tensor &t = a.getTensor();
    ojson data = ojson::array();
    for (double x : t.data) data.push_back(doubleToJson(x));
    ojson o = ojson::object();
    o["type"] = text::formatType(t.type);
    o["data"] = std::move(data);
    return o;
  }
  }
  return nullptr;
}

//===--- Reading ------------------------------------------------------------===//

class Reader {
public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string &ptr, const std::string &msg) const {
    throw Error(file_ + ": " + (ptr.empty() ? "/" : text::clipForMessage(ptr, 200)) +
                ": error: " + msg);
  }

  static const char *typeName(const ojson &j) { return j.type_name(); }
  /// A JSON value as a message quotes it: its JSON text, clipped (the parse bounded the
  /// nesting, so writing it out recurses at most kMaxJsonDepth deep).
  static std::string shown(const ojson &j) {
    return text::clipForMessage(j.dump(-1, ' ', false, ojson::error_handler_t::replace));
  }
  /// A name or key from the file as a message quotes it.
  static std::string shown(const std::string &name) { return text::clipForMessage(name); }

  const ojson &field(const ojson &obj, const std::string &ptr, const char *key) {
    auto it = obj.find(key);
    if (it == obj.end()) fail(ptr, std::string("missing field \"") + key + "\"");
    return *it;
  }
  const ojson &objectAt(const ojson &j, const std::string &ptr) {
    if (!j.is_object()) fail(ptr, std::string("expected an object, got ") + typeName(j));
    return j;
  }
  const ojson &arrayAt(const ojson &j, const std::string &ptr) {
    if (!j.is_array()) fail(ptr, std::string("expected an array, got ") + typeName(j));
    return j;
  }
  std::string stringAt(const ojson &j, const std::string &ptr) {
    if (!j.is_string()) fail(ptr, std::string("expected a string, got ") + typeName(j));
    return j.get<std::string>();
  }
  /// An integer that fits int64; `what` names it in messages.
  int64_t intAt(const ojson &j, const std::string &ptr, const std::string &what) {
    if (!j.is_number_integer()) fail(ptr, what + " must be an integer, got " + shown(j));
    if (!j.is_number_unsigned()) return j.get<int64_t>();
    uint64_t u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX))
      fail(ptr, "integer literal " + shown(j) + " is out of the range of a 64-bit integer");
    return static_cast<int64_t>(u);
  }
  Type typeAt(const ojson &j, const std::string &ptr) {
    std::string s = stringAt(j, ptr);
    try {
      return text::parseTypePlain(s);
    } catch (const Error &e) {
      fail(ptr, "bad type \"" + shown(s) + "\": " + e.what());
    }
  }
  /// A number or "nan", "inf", "-inf" (how non-finite numbers are written); nullopt
  /// for anything else.
  static std::optional<double> numberAt(const ojson &j) {
    if (j.is_number()) return j.get<double>();
    if (j.is_string()) {
      const std::string &s = j.get_ref<const std::string &>();
      if (s == "nan") return NAN;
      if (s == "inf") return INFINITY;
      if (s == "-inf") return -INFINITY;
    }
    return std::nullopt;
  }
  /// A tensor element.
  double elementAt(const ojson &j, const std::string &ptr) {
    if (std::optional<double> x = numberAt(j)) return *x;
    fail(ptr, std::string("expected a number (or \"nan\", \"inf\", \"-inf\"), got ") +
                  (j.is_string() ? shown(j) : typeName(j)));
  }

  /// A JSON value in the words checkOp uses for an attribute value (ir/OpCheck.h).
  static std::string describeValue(const ojson &j) {
    if (j.is_number_integer()) return "the integer " + shown(j);
    if (j.is_number_float()) return "the float " + shown(j);
    if (j.is_string()) return "a string";
    if (j.is_array()) return "a list";
    if (j.is_object()) return "an object";
    return shown(j); // true, false, null
  }

  /// The value of attribute `spec` of an op of `kind`, read as its kind says. nan and
  /// inf are read for an f64 so that checkOp rejects them in its words.
  Attr attrAt(const ojson &j, const std::string &ptr, const AttrSpec &spec, OpKind kind) {
    std::string what = describeAttr(kind, spec.name);
    auto wrongKind = [&]() {
      fail(ptr, attrKindMessage(kind, spec, describeValue(j)) +
                    (spec.kind == AttrKind::Tensor
                         ? " (written {\"type\": \"f64[2]\", \"data\": [1, 2]})"
                         : ""));
    };
    switch (spec.kind) {
    case AttrKind::I64:
      if (!j.is_number_integer()) wrongKind();
      return Attr::i64(intAt(j, ptr, what));
    case AttrKind::F64: {
      std::optional<double> x = numberAt(j);
      if (!x) wrongKind();
      return Attr::f64(*x);
    }
    case AttrKind::Str:
      if (!j.is_string()) wrongKind();
      return Attr::str(j.get<std::string>());
    case AttrKind::I64s: {
      if (!j.is_array()) wrongKind();
      I64List l;
      for (size_t i = 0; i < j.size(); ++i)
        l.push_back(intAt(j[i], ptr + "/" + std::to_string(i), "element of " + what));
      return Attr::i64s(l);
    }
    case AttrKind::Tensor: {
      if (!j.is_object()) wrongKind();
      Type t = typeAt(field(j, ptr, "type"), ptr + "/type");
      const ojson &data = arrayAt(field(j, ptr, "data"), ptr + "/data");
      int64_t n = t.numel(); // typeAt checked it fits
      if (static_cast<int64_t>(data.size()) != n)
        fail(ptr + "/data", "type " + text::formatType(t) + " has " + std::to_string(n) +
                                " elements, but data has " + std::to_string(data.size()));
      for (auto it = j.begin(); it != j.end(); ++it)
        if (it.key() != "type" && it.key() != "data")
          fail(ptr + "/" + escapePtr(it.key()), "unknown field \"" + shown(it.key()) + "\" in a tensor");
      std::vector<double> v;
      v.reserve(data.size());
      for (size_t i = 0; i < data.size(); ++i)
        v.push_back(elementAt(data[i], ptr + "/data/" + std::to_string(i)));
      return Attr::tensor(Tensor(std::move(t), std::move(v)));
    }
    }
    fail(ptr, what + ": unsupported attribute kind");
  }

  static std::string escapePtr(const std::string &key) {
    std::string out;
    for (char c : key) {
      if (c == '~') out += "~0";
      else if (c == '/') out += "~1";
      else out += c;
    }
    return out;
  }

  ValueId use(const ojson &j, const std::string &ptr) {
    std::string name = stringAt(j, ptr);
    auto it = defs_.find(name);
    if (it == defs_.end()) fail(ptr, "undefined value %" + shown(name));
    return it->second;
  }
  void define(const std::string &name, const std::string &ptr) {
    if (name.empty()) fail(ptr, "empty value name");
    if (defs_.count(name)) fail(ptr, "redefinition of value %" + shown(name));
  }

  void checkKeys(const ojson &obj, const std::string &ptr,
                 std::initializer_list<const char *> allowed) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool ok = false;
      for (const char *a : allowed) ok = ok || it.key() == a;
      if (!ok) fail(ptr + "/" + escapePtr(it.key()), "unknown field \"" + shown(it.key()) + "\"");
    }
  }

  Program read(const ojson &root) {
    objectAt(root, "");
    checkKeys(root, "", {"version", "kind", "name", "inputs", "ops", "outputs", "grad", "functions"});
    const ojson &kind = field(root, "", "kind");
    if (!kind.is_string() || kind.get<std::string>() != "tessel.program")
      fail("/kind", "expected \"tessel.program\", got " + shown(kind));
    const ojson &version = field(root, "", "version");
    if (!version.is_number_integer() || version.get<int64_t>() != kJsonVersion)
      fail("/version", "unsupported version " + shown(version) + " (this tessel reads version " +
                           std::to_string(kJsonVersion) + ")");
    // A module: its functions, callees before callers, then the entry (the root).
    if (auto it = root.find("functions"); it != root.end()) {
      const ojson &fns = arrayAt(*it, "/functions");
      for (size_t i = 0; i < fns.size(); ++i) {
        const std::string ptr = "/functions/" + std::to_string(i);
        objectAt(fns[i], ptr);
        checkKeys(fns[i], ptr, {"name", "inputs", "ops", "outputs", "grad"});
        Program f = readFunction(fns[i], ptr);
        for (const Program &g : functions_)
          if (g.name == f.name)
            fail(ptr + "/name", "function @" + shown(f.name) + " is defined twice in the module");
        functions_.push_back(std::move(f));
      }
    }
    Program p = readFunction(root, "");
    p.functions = std::move(functions_);
    std::vector<std::string> problems = verify(p);
    if (!problems.empty()) {
      std::string msg = "verification failed: " + problems[0];
      for (size_t i = 1; i < problems.size(); ++i) msg += "\n  also: " + problems[i];
      fail("", msg);
    }
    return p;
  }

  /// One function at JSON pointer `at` ("" for the entry), whose calls may name the
  /// functions read before it.
  Program readFunction(const ojson &obj, const std::string &at) {
    defs_.clear();
    Program p;
    p.name = stringAt(field(obj, at, "name"), at + "/name");

    const ojson &inputs = arrayAt(field(obj, at, "inputs"), at + "/inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::string ptr = at + "/inputs/" + std::to_string(i);
      const ojson &in = objectAt(inputs[i], ptr);
      checkKeys(in, ptr, {"name", "type"});
      std::string name = stringAt(field(in, ptr, "name"), ptr + "/name");
      define(name, ptr + "/name");
      if (isAnonymousName(name))
        fail(ptr + "/name", "program input needs a name that is not a number, got \"" + shown(name) + "\"");
      Type t = typeAt(field(in, ptr, "type"), ptr + "/type");
      defs_[name] = p.addInput(name, t);
    }

    if (auto it = obj.find("grad"); it != obj.end()) p.gradSignature = readGradSignature(p, *it, at + "/grad");

    const ojson &ops = arrayAt(field(obj, at, "ops"), at + "/ops");
    for (size_t i = 0; i < ops.size(); ++i) readOp(p, ops[i], at + "/ops/" + std::to_string(i));

    const ojson &outputs = arrayAt(field(obj, at, "outputs"), at + "/outputs");
    for (size_t i = 0; i < outputs.size(); ++i)
      p.addOutput(use(outputs[i], at + "/outputs/" + std::to_string(i)));

    if (at.empty()) return p; // the entry: verified with its functions by read()
    std::vector<std::string> problems = verifyFunction(p, functions_);
    if (!problems.empty()) {
      std::string msg = "verification failed: " + problems[0];
      for (size_t i = 1; i < problems.size(); ++i) msg += "\n  also: " + problems[i];
      fail(at, msg);
    }
    return p;
  }

  /// "grad": {"primal_outputs": N, "wrt": ["a", ...], "cotangents": K}; read right after
  /// the inputs, so every name it uses must be an input.
  GradSignature readGradSignature(const Program &p, const ojson &j, const std::string &ptr) {
    objectAt(j, ptr);
    checkKeys(j, ptr, {"primal_outputs", "wrt", "cotangents"});
    auto count = [&](const char *k) -> size_t {
      const ojson &v = field(j, ptr, k);
      if (!v.is_number_integer() || v.get<int64_t>() < 0)
        fail(ptr + "/" + k, std::string("'") + k + "' must be a non-negative integer, got " + shown(v));
      return static_cast<size_t>(v.get<int64_t>());
    };
    GradSignature g;
    g.primalOutputs = count("primal_outputs");
    if (j.contains("cotangents")) g.cotangents = count("cotangents");
    const ojson &wrt = arrayAt(field(j, ptr, "wrt"), ptr + "/wrt");
    for (size_t i = 0; i < wrt.size(); ++i) {
      ValueId v = use(wrt[i], ptr + "/wrt/" + std::to_string(i));
      g.wrt.push_back(static_cast<size_t>(p.inputIndex(v)));
    }
    return g;
  }

  void readOp(Program &p, const ojson &j, const std::string &ptr) {
    objectAt(j, ptr);
    checkKeys(j, ptr, {"op", "operands", "results", "attrs", "remat", "loc"});
    std::string name = stringAt(field(j, ptr, "op"), ptr + "/op");
    std::optional<OpKind> kind = opKindByName(name);
    if (!kind) fail(ptr + "/op", "unknown op '" + shown(name) + "'");

    const ojson &operandsJ = arrayAt(field(j, ptr, "operands"), ptr + "/operands");
    llvm::SmallVector<ValueId, 4> operands;
    for (size_t i = 0; i < operandsJ.size(); ++i)
      operands.push_back(use(operandsJ[i], ptr + "/operands/" + std::to_string(i)));
    if (auto msg = operandCountProblem(*kind, operands.size())) fail(ptr + "/operands", *msg);

    const ojson &resultsJ = arrayAt(field(j, ptr, "results"), ptr + "/results");
    if (auto msg = resultCountProblem(*kind, resultsJ.size())) fail(ptr + "/results", *msg);
    std::vector<std::string> resultNames;
    std::vector<Type> types;
    for (size_t i = 0; i < resultsJ.size(); ++i) {
      std::string rp = ptr + "/results/" + std::to_string(i);
      const ojson &r = objectAt(resultsJ[i], rp);
      checkKeys(r, rp, {"name", "type"});
      std::string rn = stringAt(field(r, rp, "name"), rp + "/name");
      define(rn, rp + "/name");
      for (const std::string &prev : resultNames)
        if (prev == rn) fail(rp + "/name", "value %" + shown(rn) + " is defined twice by the same op");
      resultNames.push_back(rn);
      types.push_back(typeAt(field(r, rp, "type"), rp + "/type"));
    }

    // The rest of the op's checks (ir/OpCheck.h) point at the part of the op they are
    // about: an attribute, the attributes, a result's type, or the op.
    std::vector<std::string> attrPtrs;
    auto report = [&](const OpProblem &problem) {
      switch (problem.part) {
      case OpProblem::Part::Results: fail(ptr + "/results", problem.message);
      case OpProblem::Part::Operands: fail(ptr + "/operands", problem.message);
      case OpProblem::Part::Attrs: fail(ptr + "/attrs", problem.message);
      case OpProblem::Part::AttrName:
      case OpProblem::Part::AttrValue: fail(attrPtrs[problem.index], problem.message);
      case OpProblem::Part::ResultType:
        fail(ptr + "/results/" + std::to_string(problem.index) + "/type", problem.message);
      case OpProblem::Part::Op: break;
      }
      fail(ptr, problem.message);
    };

    // Attributes as written. Reading a value needs its attribute's kind, so an unknown
    // name stops here.
    AttrList attrs;
    if (auto it = j.find("attrs"); it != j.end()) {
      const ojson &a = objectAt(*it, ptr + "/attrs");
      for (auto kv = a.begin(); kv != a.end(); ++kv) {
        std::string ap = ptr + "/attrs/" + escapePtr(kv.key());
        const AttrSpec *spec = findAttrSpec(*kind, kv.key());
        if (!spec) fail(ap, unknownAttrMessage(*kind, kv.key()));
        attrs.list().push_back({kv.key(), attrAt(kv.value(), ap, *spec, *kind)});
        attrPtrs.push_back(ap);
      }
    }
    checkAttrs(*kind, attrs, report);

    bool remat = false;
    if (auto it = j.find("remat"); it != j.end()) {
      if (!it->is_boolean()) fail(ptr + "/remat", "'remat' must be true or false");
      remat = it->get<bool>();
    }
    std::string loc;
    if (auto it = j.find("loc"); it != j.end()) loc = stringAt(*it, ptr + "/loc");

    auto results = p.appendOp(*kind, operands, std::move(attrs), types, std::move(loc), remat);
    Op &op = p.ops.back();
    for (size_t i = 0; i < results.size(); ++i)
      p.values[results[i]].name = isAnonymousName(resultNames[i]) ? std::string() : resultNames[i];
    checkOp(p, op, report, [&](size_t i) { return "%" + resultNames[i]; }, functions_);
    canonicalizeAttrs(op.kind, op.attrs);
    for (size_t i = 0; i < results.size(); ++i) defs_[resultNames[i]] = results[i];
  }

private:
  std::string file_;
  std::unordered_map<std::string, ValueId> defs_;
  /// The functions of the module read so far (what a call may name).
  std::vector<Program> functions_;
};

/// Line and column (1-based, bytes) of byte offset `off`, and the text of that line.
SourcePos offsetToPos(const std::string &text, size_t off, const std::string &file,
                      std::string &lineText) {
  off = std::min(off, text.size());
  unsigned line = 1;
  size_t lineStart = 0;
  for (size_t i = 0; i < off; ++i)
    if (text[i] == '\n') {
      ++line;
      lineStart = i + 1;
    }
  lineText = text::echoSourceLine(text, lineStart);
  SourcePos p;
  p.file = file;
  p.line = line;
  p.col = static_cast<unsigned>(off - lineStart + 1);
  return p;
}

/// Throws the ParseError `file:line:col: error: msg`, with the source line and a caret,
/// for byte offset `off` of `text`.
[[noreturn]] void failAt(const std::string &text, const std::string &file, size_t off,
                         const std::string &msg) {
  std::string line;
  SourcePos pos = offsetToPos(text, off, file, line);
  throw ParseError(formatDiagnostic(pos, msg, line), pos);
}

} // namespace

namespace {

/// The fields of one function (name, inputs, ops, outputs, grad) into `root`.
void functionToJson(const Program &p, ojson &root) {
  // JSON text holds only valid UTF-8; the text form holds any byte (\xHH). A name that
  // is not UTF-8 is refused by name rather than written with U+FFFD in its place (which
  // would read back as another program).
  auto checkUtf8 = [](const std::string &what, const std::string &s) {
    if (auto at = text::findInvalidUtf8(s))
      throw Error("error: JSON: " + what + " is not valid UTF-8 (byte " + std::to_string(*at) +
                  "), which a JSON string cannot hold; rename it, or use the text form "
                  "(tessel dump --format text), which can");
  };
  checkUtf8("the program name " + text::atName(p.name), p.name);
  for (const ValueInfo &v : p.values) checkUtf8("the value name " + text::percentName(v.name), v.name);
  for (const Op &op : p.ops) checkUtf8("the loc " + text::quoteString(text::clipForMessage(op.loc, 200)), op.loc);
  std::vector<std::string> names = text::printedNames(p);
  auto nameOf = [&](ValueId v) -> std::string {
    return v < names.size() ? names[v] : text::prefixedNumber("?", v);
  };
  auto typeOf = [&](ValueId v) -> std::string {
    return v < p.values.size() ? text::formatType(p.values[v].type) : "f64[?]";
  };
  root["name"] = p.name;
  ojson inputs = ojson::array();
  for (ValueId v : p.inputs) inputs.push_back({{"name", nameOf(v)}, {"type", typeOf(v)}});
  root["inputs"] = std::move(inputs);
  ojson ops = ojson::array();
  for (const Op &op : p.ops) {
    ojson o = ojson::object();
    o["op"] = opName(op.kind);
    ojson operands = ojson::array();
    for (ValueId v : op.operands) operands.push_back(nameOf(v));
    o["operands"] = std::move(operands);
    ojson results = ojson::array();
    for (ValueId v : op.results) results.push_back({{"name", nameOf(v)}, {"type", typeOf(v)}});
    o["results"] = std::move(results);
    ojson attrs = ojson::object();
    // Op-table order, then anything unknown (kept so the reader can report it).
    const auto &list = op.attrs.list();
    std::vector<bool> used(list.size(), false);
    for (const AttrSpec &spec : opInfo(op.kind).attrs)
      for (size_t i = 0; i < list.size(); ++i)
        if (!used[i] && list[i].name == spec.name) {
          attrs[spec.name] = attrToJson(list[i].value);
          used[i] = true;
          break;
        }
    for (size_t i = 0; i < list.size(); ++i)
      if (!used[i]) attrs[list[i].name] = attrToJson(list[i].value);
    o["attrs"] = std::move(attrs);
    if (op.remat) o["remat"] = true;
    if (!op.loc.empty()) o["loc"] = op.loc;
    ops.push_back(std::move(o));
  }
  root["ops"] = std::move(ops);
  ojson outputs = ojson::array();
  for (ValueId v : p.outputs) outputs.push_back(nameOf(v));
  root["outputs"] = std::move(outputs);
  if (const auto &g = p.gradSignature) {
    ojson wrt = ojson::array();
    for (size_t k : g->wrt) wrt.push_back(k < p.inputs.size() ? nameOf(p.inputs[k]) : "?");
    root["grad"] = {{"primal_outputs", g->primalOutputs}, {"wrt", std::move(wrt)},
                    {"cotangents", g->cotangents}};
  }
}

} // namespace

std::string programToJson(const Program &p, int indent) {
  if (indent < -1 || indent > kMaxJsonIndent)
    throw Error("error: JSON indent must be between -1 (one line) and " +
                std::to_string(kMaxJsonIndent) + ", got " + std::to_string(indent));
  ojson root = ojson::object();
  root["version"] = kJsonVersion;
  root["kind"] = "tessel.program";
  functionToJson(p, root);
  if (!p.functions.empty()) {
    ojson fns = ojson::array();
    for (const Program &f : p.functions) {
      ojson o = ojson::object();
      functionToJson(f, o);
      fns.push_back(std::move(o));
    }
    root["functions"] = std::move(fns);
  }
  try {
    return root.dump(indent, ' ', false, ojson::error_handler_t::strict) + "\n";
  } catch (const ojson::type_error &) {
    throw Error("error: JSON: a string attribute is not valid UTF-8, which a JSON string "
                "cannot hold; use the text form (tessel dump --format text)");
  }
}

namespace {

/// Offset of the first number literal of the JSON `text` (outside strings) whose
/// mantissa has a nonzero digit but which reads as 0 (below the subnormals), or nullopt.
std::optional<size_t> findUnderflowingNumber(const std::string &text) {
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (inString) {
      if (c == '\\') ++i;
      else if (c == '"') inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
      continue;
    }
    if (c != '-' && (c < '0' || c > '9')) continue;
    const size_t end = std::min(text.find_first_not_of("+-.eE0123456789", i), text.size());
    const std::string lit = text.substr(i, end - i);
    const size_t e = lit.find_first_of("eE");
    const bool nonzero = lit.substr(0, e).find_first_of("123456789") != std::string::npos;
    if (nonzero && e != std::string::npos && std::strtod(lit.c_str(), nullptr) == 0) return i;
    i = end - 1;
  }
  return std::nullopt;
}

/// Thrown by the parse callback for a key that appears twice in one object.
struct DuplicateKey {
  std::string pointer, key;
};

/// Thrown by the parse callback for an array or object nested deeper than kMaxJsonDepth.
struct TooDeep {};

/// What the reader checks while nlohmann-json parses (its parser is iterative, so it
/// reads any nesting without recursing; writing a value out, copying or comparing it
/// recurses):
///   * nesting at most kMaxJsonDepth deep, so that nothing done with the parsed value
///     later (a message quoting it) can overflow the stack;
///   * no duplicate keys: nlohmann-json keeps the last of them silently, and a program
///     file with two "eps" attributes or two "ops" arrays is ambiguous, so the reader
///     rejects it (as the text parser rejects a duplicate attribute). Tracks the JSON
///     pointer of the object being read to name it.
class ParseChecks {
public:
  bool operator()(int depth, ojson::parse_event_t ev, ojson &parsed) {
    using E = ojson::parse_event_t;
    // `depth` counts the arrays and objects around the one starting.
    if ((ev == E::object_start || ev == E::array_start) && depth >= kMaxJsonDepth) throw TooDeep{};
    switch (ev) {
    case E::object_start: frames_.push_back({true, {}, {}, 0}); break;
    case E::array_start: frames_.push_back({false, {}, {}, 0}); break;
    case E::key: {
      std::string k = parsed.get<std::string>();
      Frame &f = frames_.back();
      if (!f.keys.insert(k).second) throw DuplicateKey{pointer(), k};
      f.key = k;
      break;
    }
    case E::object_end:
    case E::array_end:
      frames_.pop_back();
      [[fallthrough]];
    case E::value:
      if (!frames_.empty() && !frames_.back().obj) ++frames_.back().index;
      break;
    }
    return true;
  }

private:
  struct Frame {
    bool obj;
    std::set<std::string> keys;
    std::string key;
    size_t index;
  };
  std::vector<Frame> frames_;
  /// Pointer of the innermost object (the one holding the duplicate).
  std::string pointer() const {
    std::string ptr;
    for (size_t i = 0; i + 1 < frames_.size(); ++i) {
      const Frame &f = frames_[i];
      ptr += "/";
      if (!f.obj) {
        ptr += std::to_string(f.index);
        continue;
      }
      for (char c : f.key) ptr += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
    }
    return ptr.empty() ? "/" : ptr;
  }
};

} // namespace

Program programFromJson(const std::string &text, const std::string &filename) {
  ojson root;
  try {
    root = ojson::parse(text, ParseChecks());
  } catch (const DuplicateKey &d) {
    throw Error(filename + ": " + text::clipForMessage(d.pointer, 200) + ": error: duplicate key \"" +
                text::clipForMessage(d.key) + "\" (JSON object keys must be unique)");
  } catch (const TooDeep &) {
    // The parser stopped at the first bracket beyond the limit, with no syntax error
    // before it: the same scan finds that bracket.
    failAt(text, filename, text::findJsonNestingBeyond(text, kMaxJsonDepth).value_or(text.size()),
           "JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
               " levels (a program needs 6: the program, its ops, an op, its attrs, a tensor, its data)");
  } catch (const ojson::out_of_range &e) {
    // A number literal outside the range of double (e.g. 1e400): nlohmann reports no
    // position, so point at the first occurrence of the literal it quotes.
    std::string msg = e.what(), lit;
    if (size_t a = msg.find('\''), b = msg.rfind('\''); a != std::string::npos && b > a)
      lit = msg.substr(a + 1, b - a - 1);
    if (size_t c = msg.find("] "); c != std::string::npos) msg = msg.substr(c + 2);
    if (!lit.empty()) msg = msg.substr(0, msg.find('\'')) + "'" + text::clipForMessage(lit) + "'";
    size_t off = lit.empty() ? std::string::npos : text.find(lit);
    if (off == std::string::npos) throw Error(filename + ": error: invalid JSON: " + msg);
    failAt(text, filename, off, "invalid JSON: " + msg + " (out of the range of f64)");
  } catch (const ojson::parse_error &e) {
    // e.byte is the 1-based offset of the last byte read; point at that byte.
    size_t off = e.byte > 0 ? e.byte - 1 : 0;
    std::string msg = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 2: ".
    if (size_t c = msg.find("column "); c != std::string::npos)
      if (size_t colon = msg.find(": ", c); colon != std::string::npos) msg = msg.substr(colon + 2);
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) msg = "empty input";
    // nlohmann quotes the token it read last, which may be a whole unterminated string.
    const std::string lastRead = "last read: '";
    if (size_t q = msg.find(lastRead); q != std::string::npos && msg.ends_with("'")) {
      q += lastRead.size();
      msg = msg.substr(0, q) + text::clipForMessage(msg.substr(q, msg.size() - 1 - q)) + "'";
    }
    failAt(text, filename, off, "invalid JSON: " + msg);
  }
  // nlohmann reads a literal below the range of f64 (1e-400) as 0; the text form rejects
  // it, and so does this reader (a nonzero mantissa that reads as 0).
  if (auto off = findUnderflowingNumber(text)) {
    const size_t end = text.find_first_not_of("+-.eE0123456789", *off);
    failAt(text, filename, *off,
           "invalid JSON: number '" + text::clipForMessage(text.substr(*off, end - *off)) +
               "' is out of the range of f64 (it would read as 0)");
  }
  Reader r(filename);
  return r.read(root);
}

} // namespace tessel::ir
