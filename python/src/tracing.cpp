//===- python/src/tracing.cpp - The tracing front end for Python -----------------===//
//
// A traced function receives `Tensor`s: symbolic SSA values of a program being built by
// frontend::Tracer. Every op appended gets the location of the Python line that caused it
// ("trg.py:42 in step"), so shape errors, the verifier, the NaN check and the printed IR
// point at the user's code. One generic builder (`_Trace.op`) reaches every op of the op
// table (ir/ops.def) with its shape rule; python/tessel/ops.py gives each op a numpy-like
// function on top of it.
//
//===----------------------------------------------------------------------===//
#include "common.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "frontend/Tracer.h"
#include "ir/OpAttrs.h"
#include "ir/Diagnostics.h"
#include "ir/OpTable.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

namespace tessel::py {
namespace {

using namespace nb::literals;

/// One program being traced. Tensors keep it alive; after finish() it refuses new ops.
/// A trace made while another is being traced (a function's or a loop body's) has that
/// one as its parent: a tensor of an enclosing trace used here is captured, as JAX
/// closes over tracers: it becomes an input of this trace (`captured.<k>`), and the op
/// that calls or scans this trace passes the enclosing tensor for it.
struct TraceState {
  TraceState(const std::string &name, std::shared_ptr<TraceState> parent)
      : tracer(name), start(std::chrono::steady_clock::now()), parent(std::move(parent)) {}
  frontend::Tracer tracer;
  std::chrono::steady_clock::time_point start;
  bool finished = false;
  std::shared_ptr<TraceState> parent;
  /// The captured tensors, as values of the parent trace, and their inputs here.
  std::vector<frontend::Tensor> capturedOuter;
  std::vector<ir::ValueId> capturedInputs;
  std::map<ir::ValueId, size_t> captureOf; ///< parent value -> index in the lists above

  std::string addOne(const ir::Program &f, const std::map<std::string, std::string> &renamed);

  /// Adds function `f` of another trace (its own functions first) to this trace's module
  /// and returns the name to call it by: a function already there with the same text is
  /// reused, a name taken by another function gets a suffix (and its callers follow).
  std::string addFunction(const ir::Program &f) {
    std::map<std::string, std::string> renamed;
    for (const ir::Program &g : f.functions) renamed[g.name] = addOne(g, renamed);
    return addOne(f, renamed);
  }

  void checkOpen() {
    if (finished)
      throw Error("tracing: this tensor belongs to a trace that has finished (program @" +
                  tracer.builder().program().name +
                  "); use it only inside the function being traced");
  }
};

std::string TraceState::addOne(const ir::Program &f0, const std::map<std::string, std::string> &renamed) {
  ir::Program f = f0;
  f.functions.clear();
  for (ir::Op &op : f.ops)
    if (ir::hasCallee(op.kind))
      if (auto it = renamed.find(ir::calleeOf(op)); it != renamed.end())
        op.attrs.set("callee", ir::Attr::str(it->second));
  ir::Program &module = tracer.builder().program();
  auto taken = [&](const std::string &name) {
    return name == module.name || module.functionIndex(name) >= 0;
  };
  std::string name = f.name;
  for (int k = 1; taken(name); ++k) {
    ir::Program same = f;
    same.name = name;
    if (module.functionIndex(name) >= 0 &&
        ir::printProgram(module.functions[static_cast<size_t>(module.functionIndex(name))]) ==
            ir::printProgram(same))
      return name;
    name = f.name + "_" + std::to_string(k);
  }
  f.name = name;
  module.functions.push_back(std::move(f));
  return name;
}

struct PyTensor {
  std::shared_ptr<TraceState> st;
  frontend::Tensor t;
};

/// The directory of the tessel package: frames of its files are skipped when locating
/// the user's line.
std::string &packageDir() {
  static std::string dir;
  return dir;
}

/// "file.py:LINE in FUNC" of the innermost Python frame outside the tessel package.
std::string callerLoc() {
  PyFrameObject *f = PyEval_GetFrame(); // borrowed
  nb::object hold;                       // keeps the frames walked to alive
  while (f) {
    nb::object code = nb::steal(reinterpret_cast<PyObject *>(PyFrame_GetCode(f)));
    std::string file = nb::cast<std::string>(code.attr("co_filename"));
    const std::string &pkg = packageDir();
    if (pkg.empty() || file.rfind(pkg, 0) != 0) {
      const size_t slash = file.find_last_of('/');
      if (slash != std::string::npos) file = file.substr(slash + 1);
      return file + ":" + std::to_string(PyFrame_GetLineNumber(f)) + " in " +
             nb::cast<std::string>(code.attr("co_name"));
    }
    hold = nb::steal(reinterpret_cast<PyObject *>(PyFrame_GetBack(f)));
    f = reinterpret_cast<PyFrameObject *>(hold.ptr());
  }
  return "";
}

PyTensor wrap(const std::shared_ptr<TraceState> &st, frontend::Tensor t) { return PyTensor{st, t}; }

bool isAncestor(const TraceState *a, const TraceState *b) {
  for (const TraceState *p = b->parent.get(); p; p = p->parent.get())
    if (p == a) return true;
  return false;
}

[[noreturn]] void twoTraces(TraceState &a, TraceState &b) {
  throw Error("tracing: operands come from two different traces (@" +
              a.tracer.builder().program().name + " and @" + b.tracer.builder().program().name +
              "; a function or loop body may use the tensors of the traces around it, not of "
              "another trace)");
}

/// `t` as a value of trace `st`: itself, or, for a tensor of an enclosing trace, the
/// input that captures it (made on first use, through every trace in between).
frontend::Tensor localize(const PyTensor &t, const std::shared_ptr<TraceState> &st) {
  if (t.st == st) return t.t;
  if (!st->parent || !isAncestor(t.st.get(), st.get())) twoTraces(*t.st, *st);
  const frontend::Tensor outer = localize(t, st->parent);
  if (auto it = st->captureOf.find(outer.id()); it != st->captureOf.end())
    return frontend::Tensor(st->tracer.builder(), st->capturedInputs[it->second]);
  const frontend::Tensor in =
      st->tracer.input("captured." + std::to_string(st->capturedInputs.size()), outer.shape());
  st->captureOf[outer.id()] = st->capturedInputs.size();
  st->capturedOuter.push_back(outer);
  st->capturedInputs.push_back(in.id());
  return in;
}

/// The innermost of the traces of `ts` (every other one must enclose it), open and
/// located at the caller's line.
std::shared_ptr<TraceState> commonTrace(const std::vector<const PyTensor *> &ts) {
  std::shared_ptr<TraceState> st;
  for (const PyTensor *t : ts) {
    if (!st || isAncestor(st.get(), t->st.get())) st = t->st;
    else if (t->st != st && !isAncestor(t->st.get(), st.get())) twoTraces(*st, *t->st);
  }
  st->checkOpen();
  st->tracer.setLoc(callerLoc());
  return st;
}

/// A binary operator's operands as tensors of one trace (the innermost of theirs):
/// `other` is a Tensor, a Python or numpy number (a rank-0 constant), or an array (a
/// constant of its shape).
struct OperandPair {
  std::shared_ptr<TraceState> st;
  frontend::Tensor a, b;
};
OperandPair operands(const PyTensor &a, nb::handle other) {
  if (nb::isinstance<PyTensor>(other)) {
    const PyTensor &b = nb::cast<const PyTensor &>(other);
    std::shared_ptr<TraceState> st = commonTrace({&a, &b});
    return {st, localize(a, st), localize(b, st)};
  }
  commonTrace({&a});
  return {a.st, a.t, a.st->tracer.constant(tensorFromArray(other, "operand of a traced operator"))};
}

/// numpy's broadcast of shapes a and b: aligned at the right, each pair of extents equal
/// or one of them 1 (which stretches). A ShapeError names `what` and both shapes otherwise.
ir::Shape broadcastShapes(const ir::Shape &a, const ir::Shape &b, const std::string &what) {
  const size_t n = std::max(a.size(), b.size());
  ir::Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1)
      throw ShapeError(what + ": shapes f64" + ir::shapeStr(a) + " and f64" + ir::shapeStr(b) +
                       " cannot be broadcast together (numpy's rule: aligned at the right, "
                       "each pair of extents equal or one of them 1) (at " + callerLoc() + ")");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

/// `t` broadcast to `shape` by numpy's rule (broadcast_in_dim with its dimensions at the
/// right); unchanged when it has that shape already or is rank 0 (the frontend's binary
/// ops broadcast a scalar themselves).
frontend::Tensor broadcastOperand(const frontend::Tensor &t, const ir::Shape &shape) {
  if (t.shape() == shape || t.rank() == 0) return t;
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < t.rank(); ++i) dims.push_back(static_cast<int64_t>(shape.size()) - t.rank() + i);
  return t.broadcastInDim(shape, dims);
}

double toDouble(nb::handle h, const std::string &what) {
  double v = PyFloat_AsDouble(h.ptr());
  if (v == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    throw Error(what + ": expected a number, got " + nb::cast<std::string>(nb::repr(h)));
  }
  return v;
}

/// The attributes of `kind` from a Python dict, by their declared kinds (ir/ops.def).
ir::AttrList attrsFromDict(ir::OpKind kind, nb::dict d) {
  const ir::OpInfo &info = ir::opInfo(kind);
  ir::AttrList attrs;
  for (auto [k, v] : d) {
    const std::string name = nb::cast<std::string>(k);
    const ir::AttrSpec *spec = nullptr;
    for (const ir::AttrSpec &s : info.attrs)
      if (s.name == name) spec = &s;
    if (!spec) {
      std::string known;
      for (const ir::AttrSpec &s : info.attrs) known += (known.empty() ? "" : ", ") + s.name;
      throw Error(std::string(info.name) + ": unknown attribute '" + name + "' (" +
                  (known.empty() ? "it has none" : "allowed: " + known) + ")");
    }
    const std::string what = std::string(info.name) + " attribute " + name;
    switch (spec->kind) {
    case ir::AttrKind::I64: {
      std::vector<int64_t> one = shapeFromObject(v, what);
      if (one.size() != 1 || !PyIndex_Check(v.ptr()))
        throw Error(what + ": expected an int, got " + nb::cast<std::string>(nb::repr(v)));
      attrs.set(name, ir::Attr::i64(one[0]));
      break;
    }
    case ir::AttrKind::F64: attrs.set(name, ir::Attr::f64(toDouble(v, what))); break;
    case ir::AttrKind::Str:
      if (!nb::isinstance<nb::str>(v))
        throw Error(what + ": expected a str, got " + nb::cast<std::string>(nb::repr(v)));
      attrs.set(name, ir::Attr::str(nb::cast<std::string>(v)));
      break;
    case ir::AttrKind::I64s:
      if (PyIndex_Check(v.ptr()))
        throw Error(what + ": expected a sequence of ints, got " + nb::cast<std::string>(nb::repr(v)));
      attrs.set(name, ir::Attr::i64s(shapeFromObject(v, what)));
      break;
    case ir::AttrKind::Tensor: attrs.set(name, ir::Attr::tensor(tensorFromArray(v, what))); break;
    }
  }
  return attrs;
}

std::string tensorRepr(const PyTensor &t) {
  const ir::Program &p = t.st->tracer.builder().program();
  const std::string &name = p.value(t.t.id()).name;
  return "Tensor(" + (name.empty() ? std::string("%") + std::to_string(t.t.id()) : "%" + name) +
         ": " + t.t.type().str() + ")";
}

[[noreturn]] void noValue(const char *what) {
  throw Error(std::string("tracing: a traced Tensor has no value while tracing, so it cannot be ") +
              what + " (use tessel.ops.select for a data-dependent choice, and run the "
              "program for values)");
}

} // namespace

void bindTracing(nb::module_ &m) {
  m.def("_set_package_dir", [](const std::string &d) { packageDir() = d; });

  nb::class_<TraceState>(m, "_Trace",
                         "A program being traced (use tessel.trace; this is its machinery).")
      .def(nb::new_([](const std::string &name, std::shared_ptr<TraceState> parent) {
             return std::make_shared<TraceState>(name, std::move(parent));
           }),
           "name"_a, "parent"_a.none() = nb::none())
      .def(
          "input",
          [](std::shared_ptr<TraceState> st, const std::string &name, nb::handle shape) {
            st->checkOpen();
            if (name.empty()) throw Error("tracing: an input needs a name");
            if (st->tracer.program().lookup(name) != ir::kNoValue)
              throw Error("tracing: two inputs are named '" + name + "'");
            std::vector<int64_t> dims = shapeFromObject(shape, "shape of input " + name);
            if (dims.size() > 8)
              throw ShapeError("input %" + name + ": rank " + std::to_string(dims.size()) +
                               " is above tessel's limit of 8");
            for (int64_t d : dims)
              if (d < 0) throw ShapeError("input %" + name + ": negative extent " + std::to_string(d));
            return wrap(st, st->tracer.input(name, dims));
          },
          "name"_a, "shape"_a)
      .def(
          "output",
          [](std::shared_ptr<TraceState> st, const PyTensor &t, const std::string &name) {
            if (t.st != st && !isAncestor(t.st.get(), st.get()))
              throw Error("tracing: an output must be a tensor of the traced function");
            st->checkOpen();
            st->tracer.output(localize(t, st), name);
          },
          "tensor"_a, "name"_a = "")
      .def(
          "constant",
          [](std::shared_ptr<TraceState> st, nb::handle value) {
            st->checkOpen();
            st->tracer.setLoc(callerLoc());
            return wrap(st, st->tracer.constant(tensorFromArray(value, "constant")));
          },
          "value"_a.none())
      .def(
          "op",
          [](std::shared_ptr<TraceState> st, const std::string &name,
             const std::vector<const PyTensor *> &operands, nb::dict attrs) {
            auto kind = ir::opKindByName(name);
            if (!kind)
              throw Error("unknown op '" + name + "' (did you mean '" + ir::closestOpName(name) + "'?)");
            for (size_t k = 0; k < operands.size(); ++k)
              if (!operands[k]) throw Error(name + ": operand " + std::to_string(k) + " is None");
            st->checkOpen();
            const std::string loc = callerLoc();
            ir::AttrList al = attrsFromDict(*kind, attrs);
            std::vector<ir::ValueId> ids;
            for (const PyTensor *t : operands) ids.push_back(localize(*t, st).id());
            st->tracer.setLoc(loc);
            llvm::SmallVector<ir::ValueId, 1> results;
            try {
              results = st->tracer.builder().createMulti(*kind, ids, std::move(al));
            } catch (const ShapeError &e) {
              if (loc.empty()) throw;
              throw ShapeError(std::string(e.what()) + " (at " + loc + ")");
            }
            std::vector<PyTensor> out;
            for (ir::ValueId v : results) out.push_back(wrap(st, frontend::Tensor(st->tracer.builder(), v)));
            return out;
          },
          "name"_a, "operands"_a, "attrs"_a = nb::dict(),
          "Appends one op of the op table (tessel.op_table()) with these operands and "
          "attributes; returns its results. Shape errors raise tessel.ShapeError naming the "
          "op, the shapes and the Python line.")
      .def(
          "captured",
          [](std::shared_ptr<TraceState> st) {
            std::vector<PyTensor> out;
            for (const frontend::Tensor &t : st->capturedOuter) out.push_back(wrap(st->parent, t));
            return out;
          },
          "The tensors of the enclosing trace this one captured, in the order of their inputs.")
      .def(
          "captured_inputs",
          [](std::shared_ptr<TraceState> st) {
            std::vector<PyTensor> out;
            for (ir::ValueId v : st->capturedInputs)
              out.push_back(wrap(st, frontend::Tensor(st->tracer.builder(), v)));
            return out;
          },
          "The inputs of this trace that capture them.")
      .def(
          "move_captured_inputs",
          [](std::shared_ptr<TraceState> st, size_t position) {
            // The captured inputs, last in the input list, moved to `position` (a scan's
            // carries come first).
            ir::Program &p = st->tracer.builder().program();
            std::vector<ir::ValueId> rest, captured;
            for (ir::ValueId v : p.inputs)
              (std::find(st->capturedInputs.begin(), st->capturedInputs.end(), v) !=
                       st->capturedInputs.end()
                   ? captured
                   : rest)
                  .push_back(v);
            if (position > rest.size()) throw Error("move_captured_inputs: position out of range");
            rest.insert(rest.begin() + static_cast<ptrdiff_t>(position), captured.begin(), captured.end());
            p.inputs = rest;
          },
          "position"_a)
      .def(
          "add_function",
          [](std::shared_ptr<TraceState> st, const PyProgram &f) {
            st->checkOpen();
            return st->addFunction(f.ir);
          },
          "function"_a,
          "Adds a traced program (and the functions it calls) to this trace's module; returns "
          "the name a call or scan op names it by.")
      .def(
          "finish",
          [](std::shared_ptr<TraceState> st) {
            st->checkOpen();
            // A copy: tensors kept after the trace still read their types from it.
            PyProgram p{st->tracer.program(), 0};
            ir::verifyOrThrow(p.ir);
            st->finished = true;
            p.compileMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                                    st->start)
                              .count();
            return p;
          },
          "Ends the trace: the verified program (its compile time is the trace's).");

  // Elementwise operators broadcast by numpy's rule (broadcast_in_dim ops, visible in the
  // IR); `name` is the op for the message, nullptr for @ (matmul has its own shape rule).
  auto binary = [](frontend::Tensor (*f)(const frontend::Tensor &, const frontend::Tensor &),
                   bool reflected, const char *name) {
    return [f, reflected, name](const PyTensor &a, nb::handle other) {
      OperandPair ab = operands(a, other);
      frontend::Tensor x = reflected ? ab.b : ab.a, y = reflected ? ab.a : ab.b;
      if (name != nullptr) {
        const ir::Shape shape = broadcastShapes(x.shape(), y.shape(), name);
        x = broadcastOperand(x, shape);
        y = broadcastOperand(y, shape);
      }
      return wrap(ab.st, f(x, y));
    };
  };
  using F = frontend::Tensor (*)(const frontend::Tensor &, const frontend::Tensor &);
  F add = [](const frontend::Tensor &x, const frontend::Tensor &y) { return x + y; };
  F sub = [](const frontend::Tensor &x, const frontend::Tensor &y) { return x - y; };
  F mul = [](const frontend::Tensor &x, const frontend::Tensor &y) { return x * y; };
  F div = [](const frontend::Tensor &x, const frontend::Tensor &y) { return x / y; };
  F matmul = [](const frontend::Tensor &x, const frontend::Tensor &y) { return frontend::matmul(x, y); };
  auto cmp = [](const char *dir) {
    return [dir](const PyTensor &a, nb::handle other) {
      OperandPair ab = operands(a, other);
      const ir::Shape shape = broadcastShapes(ab.a.shape(), ab.b.shape(), "compare");
      return wrap(ab.st, frontend::compare(broadcastOperand(ab.a, shape), broadcastOperand(ab.b, shape), dir));
    };
  };

  // == and != compare elementwise (1.0/0.0) with a Tensor, a number or an array; with
  // anything else (None, a string, ...) Python's identity comparison applies.
  auto eqne = [](const char *dir) {
    return [dir](const PyTensor &a, nb::handle other) -> nb::object {
      if (!nb::isinstance<PyTensor>(other) && !PyNumber_Check(other.ptr()) &&
          !PyObject_HasAttrString(other.ptr(), "__array__") && !PySequence_Check(other.ptr()))
        return nb::borrow(Py_NotImplemented);
      if (nb::isinstance<nb::str>(other)) return nb::borrow(Py_NotImplemented);
      OperandPair ab = operands(a, other);
      const ir::Shape shape = broadcastShapes(ab.a.shape(), ab.b.shape(), "compare");
      return nb::cast(wrap(ab.st, frontend::compare(broadcastOperand(ab.a, shape), broadcastOperand(ab.b, shape), dir)));
    };
  };
  nb::class_<PyTensor> tensor(
      m, "Tensor",
      "A symbolic f64 tensor inside a traced function: an SSA value of the program being "
      "built. Arithmetic (+ - * / @ **, unary -, abs, == != < <= > >= giving 1.0/0.0) "
      "appends ops and broadcasts by numpy's rule (broadcast_in_dim ops in the IR; "
      "incompatible shapes are a tessel.ShapeError naming the op and both shapes); a Python "
      "or numpy number is a rank-0 constant, an array a constant of its shape. numpy's "
      "ufuncs and functions on a Tensor (np.sin(t), np.sum(t)) record the same ops or name "
      "the tessel.ops function to use. Methods such as .sum(), .mean(), .reshape(), .T and "
      "indexing come from tessel.ops.");
  tensor.def_prop_ro("shape", [](const PyTensor &t) { return shapeTuple(t.t.shape()); })
      .def_prop_ro("ndim", [](const PyTensor &t) { return t.t.rank(); })
      .def_prop_ro("size", [](const PyTensor &t) { return t.t.numel(); })
      .def_prop_ro("dtype", [](const PyTensor &) { return "float64"; })
      .def_prop_ro("name",
                   [](const PyTensor &t) { return t.st->tracer.builder().program().value(t.t.id()).name; },
                   "The SSA value's name ('' if anonymous).")
      .def_prop_ro("_trace", [](const PyTensor &t) { return t.st; })
      .def_prop_ro("_id", [](const PyTensor &t) { return t.t.id(); }, "The SSA value's number.")
      .def_prop_ro("_is_input",
                   [](const PyTensor &t) { return t.st->tracer.builder().program().inputIndex(t.t.id()) >= 0; })
      .def(
          "named",
          [](const PyTensor &t, const std::string &name) {
            t.st->checkOpen();
            t.t.named(name);
            return t;
          },
          "name"_a, "Names the SSA value (%name in the printed IR; made unique if taken). Returns the tensor.")
      .def("__repr__", &tensorRepr)
      .def("__add__", binary(add, false, "add"))
      .def("__radd__", binary(add, true, "add"))
      .def("__sub__", binary(sub, false, "sub"))
      .def("__rsub__", binary(sub, true, "sub"))
      .def("__mul__", binary(mul, false, "mul"))
      .def("__rmul__", binary(mul, true, "mul"))
      .def("__truediv__", binary(div, false, "div"))
      .def("__rtruediv__", binary(div, true, "div"))
      .def("__matmul__", binary(matmul, false, nullptr))
      .def("__rmatmul__", binary(matmul, true, nullptr))
      .def("__eq__", eqne("EQ"), "other"_a.none())
      .def("__ne__", eqne("NE"), "other"_a.none())
      .def("__hash__", [](nb::handle self) { return static_cast<Py_ssize_t>(reinterpret_cast<intptr_t>(self.ptr()) >> 4); })
      .def("__lt__", cmp("LT"))
      .def("__le__", cmp("LE"))
      .def("__gt__", cmp("GT"))
      .def("__ge__", cmp("GE"))
      .def("__neg__", [](const PyTensor &a) { commonTrace({&a}); return wrap(a.st, -a.t); })
      .def("__pos__", [](const PyTensor &a) { return a; })
      .def("__abs__", [](const PyTensor &a) { commonTrace({&a}); return wrap(a.st, a.t.abs()); })
      .def("__bool__", [](const PyTensor &) -> bool { noValue("used as a bool (if, and, or, while)"); })
      .def("__float__", [](const PyTensor &) -> double { noValue("converted to a float"); })
      .def("__array__", [](const PyTensor &, nb::args, nb::kwargs) -> nb::object {
        noValue("converted to a numpy array");
      });
  // numpy's protocols (__array_ufunc__, __array_function__) are set by tessel.ops.

  // numpy-like methods, implemented by tessel.ops (python/tessel/ops.py, _tensor_<name>):
  // declared here so that they are real methods with signatures in the type stubs.
  struct Method {
    const char *name, *impl, *sig, *doc;
  };
  static const Method methods[] = {
      {"sum", "_tensor_sum", "def sum(self, axis: int | Sequence[int] | None = None) -> Tensor",
       "Sum over axis (None: all axes, a scalar); tessel.ops.sum."},
      {"max", "_tensor_max", "def max(self, axis: int | Sequence[int] | None = None) -> Tensor",
       "Maximum over axis (None: all axes, a scalar); tessel.ops.max."},
      {"reshape", "_tensor_reshape", "def reshape(self, *shape: int | Sequence[int]) -> Tensor",
       "t.reshape(2, 3) or t.reshape((2, 3)); one extent may be -1; tessel.ops.reshape."},
      {"transpose", "_tensor_transpose", "def transpose(self, *axes: int | Sequence[int]) -> Tensor",
       "t.transpose() (axes reversed), t.transpose(1, 0) or t.transpose((1, 0))."},
      {"exp", "_tensor_exp", "def exp(self) -> Tensor", "e^x; tessel.ops.exp."},
      {"log", "_tensor_log", "def log(self) -> Tensor", "ln x; tessel.ops.log."},
      {"sqrt", "_tensor_sqrt", "def sqrt(self) -> Tensor", "sqrt(x); tessel.ops.sqrt."},
      {"sin", "_tensor_sin", "def sin(self) -> Tensor", "sin x; tessel.ops.sin."},
      {"cos", "_tensor_cos", "def cos(self) -> Tensor", "cos x; tessel.ops.cos."},
      {"tanh", "_tensor_tanh", "def tanh(self) -> Tensor", "tanh x; tessel.ops.tanh."},
      {"__getitem__", "_getitem", "def __getitem__(self, key: object) -> Tensor",
       "Basic indexing: ints (drop the axis), slices with unit step, Ellipsis (slice op)."},
      {"__len__", "_tensor_len", "def __len__(self) -> int", "The first extent."},
      {"mean", "_tensor_mean",
       "def mean(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor",
       "Mean over axis (None: all axes); tessel.ops.mean."},
      {"min", "_tensor_min",
       "def min(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor",
       "Minimum over axis (None: all axes); tessel.ops.min."},
      {"prod", "_tensor_prod",
       "def prod(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor",
       "Product over axis (None: all axes); tessel.ops.prod."},
      {"__array_ufunc__", "_array_ufunc",
       "def __array_ufunc__(self, ufunc: object, method: str, *inputs: object, **kwargs: object) -> object",
       "numpy's ufuncs on a Tensor (np.sin(t), np.add.reduce(t)) record tessel ops."},
      {"__array_function__", "_array_function",
       "def __array_function__(self, func: object, types: object, args: object, kwargs: object) -> object",
       "numpy's functions on a Tensor (np.sum, np.einsum, ...) record tessel ops."},
      {"__pow__", "_tensor_pow", "def __pow__(self, exponent: object) -> Tensor",
       "x ** y for a number or Tensor y (numpy's broadcasting); tessel.ops.power."},
      {"__rpow__", "_tensor_rpow", "def __rpow__(self, base: object) -> Tensor",
       "b ** x for a number or array b; tessel.ops.power."},
      {"__iter__", "_tensor_iter", "def __iter__(self) -> collections.abc.Iterator[Tensor]",
       "t[0], t[1], ... along the first axis."},
  };
  for (const Method &md : methods) {
    const char *impl = md.impl;
    tensor.def(
        md.name,
        [impl](nb::handle self, nb::args args, nb::kwargs kwargs) {
          nb::object fn = nb::module_::import_("tessel.ops").attr(impl);
          nb::list all;
          all.append(self);
          for (nb::handle a : args) all.append(a);
          nb::object r = nb::steal(PyObject_Call(fn.ptr(), nb::tuple(all).ptr(), kwargs.ptr()));
          if (!r.is_valid()) throw nb::python_error();
          return r;
        },
        nb::sig(md.sig), md.doc);
  }
  tensor.def_prop_ro(
      "T",
      [](nb::handle self) { return nb::module_::import_("tessel.ops").attr("_tensor_T")(self); },
      nb::sig("def T(self) -> Tensor"), "The transpose with the axes reversed (numpy's .T).");
}

} // namespace tessel::py
