//===- python/src/module.cpp - tessel._tessel: the C++ stages for Python ---------===//
//
// Errors, Program, the grad transform and pass pipelines, prepare and Plan, the
// fixed-width Engine, the reference evaluator, and the TRG driver. The Python package
// (python/tessel/__init__.py) re-exports these with its own documentation; the
// docstrings here are what help() shows on the extension's objects.
//
// The GIL is released while prepare, an engine, the reference evaluator or the TRG
// driver runs, so Python threads can run engines at the same time. One Engine runs one
// plan at a time: a second thread calling run() on the same engine waits for it.
//
//===----------------------------------------------------------------------===//
#include "common.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <variant>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "frontend/Onsager.h"
#include "frontend/TrgDriver.h"
#include "frontend/TrgJob.h"
#include "frontend/TrgMeasure.h"
#include "runtime/MemoryLimit.h"
#include "ir/Diagnostics.h"
#include "ir/Json.h"
#include "ir/OpTable.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/TextUtil.h"
#include "ir/Verifier.h"
#include "passes/Checkpoint.h"
#include "passes/Grad.h"
#include "passes/Jvp.h"
#include "passes/Order.h"
#include "passes/RunPipeline.h"
#include "passes/PassManager.h"
#include "runtime/Runtime.h"
#include "runtime/Stats.h"

namespace tessel::py {
namespace {

using namespace nb::literals;
using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

//--- Errors ------------------------------------------------------------------------

PyObject *gError = nullptr, *gParseError = nullptr, *gShapeError = nullptr, *gVerifyError = nullptr;

/// A library message without the CLI's leading "error: " (a Python traceback says so).
std::string pythonMessage(const std::string &what) {
  return what.rfind("error: ", 0) == 0 ? what.substr(7) : what;
}

void translateErrors(const std::exception_ptr &p, void *) {
  try {
    std::rethrow_exception(p);
  } catch (const ParseError &e) {
    // The full `file:line:col: error: msg` with the source line and a caret, and the
    // position as attributes.
    nb::object exc = nb::borrow(gParseError)(std::string(e.what()));
    exc.attr("file") = e.pos().file;
    exc.attr("line") = e.pos().line;
    exc.attr("col") = e.pos().col;
    PyErr_SetObject(gParseError, exc.ptr());
  } catch (const VerifyError &e) {
    PyErr_SetString(gVerifyError, pythonMessage(e.what()).c_str());
  } catch (const ShapeError &e) {
    PyErr_SetString(gShapeError, pythonMessage(e.what()).c_str());
  } catch (const Error &e) {
    PyErr_SetString(gError, pythonMessage(e.what()).c_str());
  }
}

PyObject *newError(nb::module_ &m, const char *name, PyObject *base, const char *doc) {
  const std::string qual = std::string("tessel.") + name;
  PyObject *t = PyErr_NewExceptionWithDoc(qual.c_str(), doc, base, nullptr);
  if (!t) throw nb::python_error();
  m.attr(name) = nb::borrow(t);
  return t;
}

//--- Program -----------------------------------------------------------------------

/// An input or output of a program: name and type.
struct ValueSig {
  std::string name;
  ir::Shape shape;
};

std::vector<ValueSig> inputsOf(const ir::Program &p) {
  std::vector<ValueSig> v;
  for (ir::ValueId id : p.inputs) v.push_back({p.value(id).name, p.type(id).shape});
  return v;
}

std::vector<ValueSig> outputsOf(const ir::Program &p) {
  std::vector<ValueSig> v;
  for (size_t i = 0; i < p.outputs.size(); ++i) v.push_back({p.outputName(i), p.type(p.outputs[i]).shape});
  return v;
}

std::string readFile(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(path + ": is a directory, not a program file");
  return rt::readBoundedFile(path);
}

/// JSON when the first non-blank character is '{', else the text form.
ir::Program parseAny(const std::string &text, const std::string &filename) {
  const size_t i = text.find_first_not_of(" \t\r\n");
  if (i != std::string::npos && text[i] == '{') return ir::programFromJson(text, filename);
  return ir::parseProgram(text, filename);
}

//--- Plans and engines -------------------------------------------------------------

struct PyPlan {
  std::shared_ptr<const rt::Plan> plan;
  double prepareMs = 0;
  std::string note; ///< what prepare lowered first ("2 einsum ops lowered ...")
};

struct PyEngine {
  explicit PyEngine(int width) : engine(width) {}
  rt::Engine engine;
  std::mutex mu; ///< one run at a time
  double lastRunMs = 0;
};

/// The inputs of `p` from a dict {name: array} (each input exactly once) or a sequence
/// in input order.
std::vector<ir::Tensor> inputsFromPython(const ir::Program &p, nb::handle inputs) {
  std::vector<ir::Tensor> out;
  const size_t n = p.inputs.size();
  if (nb::isinstance<nb::dict>(inputs)) {
    nb::dict d = nb::borrow<nb::dict>(inputs);
    for (auto [k, v] : d) {
      if (!nb::isinstance<nb::str>(k) || p.inputIndex(nb::cast<std::string>(k)) < 0) {
        std::string known;
        for (ir::ValueId id : p.inputs) known += (known.empty() ? "" : ", ") + p.value(id).name;
        throw Error("run: unknown input " + nb::cast<std::string>(nb::repr(k)) + " (the inputs of @" +
                    p.name + ": " + (known.empty() ? "none" : known) + ")");
      }
    }
    for (ir::ValueId id : p.inputs) {
      const std::string &name = p.value(id).name;
      if (!d.contains(name.c_str())) throw Error("run: missing input '" + name + "' (" + p.type(id).str() + ")");
      out.push_back(tensorFromArray(d[name.c_str()], "input '" + name + "'"));
    }
    return out;
  }
  if (nb::isinstance<nb::str>(inputs) || !PySequence_Check(inputs.ptr()))
    throw Error("run: inputs must be a dict {name: array} or a sequence of arrays in input order");
  nb::sequence seq = nb::borrow<nb::sequence>(inputs);
  if (nb::len(seq) != n)
    throw Error("run: " + ir::text::atName(p.name) + " has " + std::to_string(n) + " input(s), got " +
                std::to_string(nb::len(seq)) + " array(s)");
  for (size_t i = 0; i < n; ++i)
    out.push_back(tensorFromArray(seq[i], "input '" + p.value(p.inputs[i]).name + "'"));
  return out;
}

nb::dict outputsToPython(const ir::Program &p, std::vector<ir::Tensor> &&outs) {
  nb::dict d;
  for (size_t i = 0; i < outs.size(); ++i) d[p.outputName(i).c_str()] = arrayFromTensor(std::move(outs[i]));
  return d;
}

//--- TRG ---------------------------------------------------------------------------

nb::object jsonToPython(const nlohmann::json &j) {
  return nb::module_::import_("json").attr("loads")(j.dump());
}

} // namespace
} // namespace tessel::py

using namespace tessel;
using namespace tessel::py;

NB_MODULE(_tessel, m) {
  m.doc() = "The C++ core of tessel (IR, passes, prepare, engine, TRG driver); use the tessel package.";
  m.attr("__version__") = TESSEL_VERSION;

  gError = newError(m, "Error", PyExc_Exception,
                    "A user error reported by tessel (bad input, a failed pass, a kernel failure). "
                    "The message is the complete diagnostic, as the command line prints it.");
  gParseError = newError(m, "ParseError", gError,
                         "A malformed program: `file:line:col: error: message`, the source line and a "
                         "caret. Attributes file, line, col (1-based).");
  gShapeError = newError(m, "ShapeError", gError,
                         "A shape or attribute error while building an op: names the op, both shapes "
                         "and the location (the Python line, when tracing).");
  gVerifyError = newError(m, "VerifyError", gError,
                          "A program the verifier rejects: names the op, its result, its location and "
                          "the shapes.");
  nb::register_exception_translator(&translateErrors);

  nb::class_<ValueSig>(m, "Value", "An input or output of a program: its name and f64 shape.")
      .def_ro("name", &ValueSig::name)
      .def_prop_ro("shape", [](const ValueSig &v) { return shapeTuple(v.shape); })
      .def_prop_ro("dtype", [](const ValueSig &) { return "float64"; })
      .def("__repr__", [](const ValueSig &v) { return "%" + v.name + ": " + ir::Type(v.shape).str(); })
      // A Value keys the result dict of Engine.run / evaluate_reference as its name does:
      // it hashes as its name and equals it (and another Value of the same name and shape).
      .def("__hash__", [](const ValueSig &v) { return nb::hash(nb::str(v.name.c_str())); })
      .def(
          "__eq__",
          [](const ValueSig &v, nb::handle other) -> nb::object {
            if (nb::isinstance<nb::str>(other)) return nb::bool_(nb::cast<std::string>(other) == v.name);
            if (nb::isinstance<ValueSig>(other)) {
              const ValueSig &o = nb::cast<const ValueSig &>(other);
              return nb::bool_(o.name == v.name && o.shape == v.shape);
            }
            return nb::borrow(Py_NotImplemented);
          },
          "other"_a.none());

  nb::class_<PyProgram>(m, "Program",
                        "A typed SSA program (tessel's IR). Immutable: transforms return new programs.")
      .def_static(
          "parse",
          [](const std::string &text, const std::string &filename) { return PyProgram{parseAny(text, filename), 0}; },
          "text"_a, "filename"_a = "<string>",
          "Parses the text form (or JSON, when the text starts with '{') and verifies it. Raises "
          "ParseError (file:line:col with a caret) or VerifyError.")
      .def_static(
          "from_json",
          [](const std::string &text, const std::string &filename) {
            return PyProgram{ir::programFromJson(text, filename), 0};
          },
          "text"_a, "filename"_a = "<string>", "Reads the JSON form (Program.to_json) and verifies it.")
      .def_static(
          "load", [](const std::string &path) { return PyProgram{parseAny(readFile(path), path), 0}; },
          "path"_a, "Reads a .tir (text) or .json program file and verifies it.")
      .def("__str__", [](const PyProgram &p) { return ir::printProgram(p.ir); })
      .def("__repr__",
           [](const PyProgram &p) {
             return "<tessel.Program " + ir::text::atName(p.ir.name) + ": " + std::to_string(p.ir.inputs.size()) + " inputs, " +
                    std::to_string(p.ir.ops.size()) + " ops, " + std::to_string(p.ir.outputs.size()) +
                    " outputs>";
           })
      .def("to_json", [](const PyProgram &p, int indent) { return ir::programToJson(p.ir, indent); },
           "indent"_a = 1, "The JSON form (tessel dump --format json); Program.from_json reads it back.")
      .def("to_dot", [](const PyProgram &p) { return ir::printDot(p.ir); }, "Graphviz DOT of the dataflow graph.")
      .def("verify", [](const PyProgram &p) { ir::verifyOrThrow(p.ir); },
           "Runs the verifier; raises VerifyError naming the op, its location and the shapes.")
      .def_prop_ro("name", [](const PyProgram &p) { return p.ir.name; })
      .def_prop_ro("inputs", [](const PyProgram &p) { return inputsOf(p.ir); })
      .def_prop_ro("outputs", [](const PyProgram &p) { return outputsOf(p.ir); })
      .def_prop_ro("num_ops", [](const PyProgram &p) { return p.ir.ops.size(); })
      .def_prop_ro("op_counts",
                   [](const PyProgram &p) {
                     nb::dict d;
                     for (const ir::Op &op : p.ir.ops) {
                       const char *n = ir::opName(op.kind);
                       d[n] = (d.contains(n) ? nb::cast<int>(d[n]) : 0) + 1;
                     }
                     return d;
                   },
                   "{op name: count}.")
      .def_rw("compile_ms", &PyProgram::compileMs,
              "Milliseconds of tracing, transforms and passes that made this program.");

  m.def(
      "grad",
      [](const PyProgram &p, const std::vector<std::string> &wrt, bool vjp, bool keepOutputs, bool svdBlocks) {
        passes::GradOptions o;
        o.wrt = wrt;
        o.vjp = vjp;
        o.keepOutputs = keepOutputs;
        o.svdBlocks = svdBlocks;
        auto t0 = Clock::now();
        PyProgram r{passes::grad(p.ir, o), 0};
        r.compileMs = p.compileMs + msSince(t0);
        return r;
      },
      "program"_a, "wrt"_a, "vjp"_a, "keep_outputs"_a, "svd_blocks"_a);

  m.def(
      "jvp",
      [](const PyProgram &p, const std::vector<std::string> &wrt, bool keepOutputs) {
        passes::JvpOptions o;
        o.wrt = wrt;
        o.keepOutputs = keepOutputs;
        auto t0 = Clock::now();
        PyProgram r{passes::jvp(p.ir, o), 0};
        r.compileMs = p.compileMs + msSince(t0);
        return r;
      },
      "program"_a, "wrt"_a, "keep_outputs"_a);

  m.def(
      "hessian",
      [](const PyProgram &p, const std::vector<std::string> &wrt) {
        passes::HessianOptions o;
        o.wrt = wrt;
        auto t0 = Clock::now();
        PyProgram r{passes::hessian(p.ir, o), 0};
        r.compileMs = p.compileMs + msSince(t0);
        return r;
      },
      "program"_a, "wrt"_a);

  m.def(
      "opt",
      [](const PyProgram &p, const std::string &pipeline, const passes::PassManagerOptions &base,
         nb::object write) {
        // The instrumentation text goes to write(text), also when a pass fails.
        std::ostringstream os;
        passes::PassManagerOptions o = base;
        o.log = &os;
        auto flush = [&] {
          if (!os.str().empty()) write(os.str());
        };
        auto t0 = Clock::now();
        PyProgram r{p.ir, 0};
        try {
          passes::PassManager pm(passes::Pipeline::parse(pipeline, "pipeline"), o);
          pm.run(r.ir);
        } catch (...) {
          flush();
          throw;
        }
        flush();
        r.compileMs = p.compileMs + msSince(t0);
        return r;
      },
      "program"_a, "pipeline"_a, "options"_a, "write"_a);

  nb::class_<passes::PassManagerOptions>(m, "_PassOptions")
      .def(nb::init<>())
      .def_rw("verify_each", &passes::PassManagerOptions::verifyEach)
      .def_rw("print_ir_before", &passes::PassManagerOptions::printIrBefore)
      .def_rw("print_ir_after", &passes::PassManagerOptions::printIrAfter)
      .def_rw("print_ir_after_all", &passes::PassManagerOptions::printIrAfterAll)
      .def_rw("print_ir_after_change", &passes::PassManagerOptions::printIrAfterChange)
      .def_rw("print_changed_diff", &passes::PassManagerOptions::printChangedDiff)
      .def_rw("time_passes", &passes::PassManagerOptions::timePasses)
      .def_rw("statistics", &passes::PassManagerOptions::statistics)
      .def_rw("disabled_passes", &passes::PassManagerOptions::disabledPasses)
      .def_rw("bisect_limit", &passes::PassManagerOptions::bisectLimit)
      .def_rw("dump_dir", &passes::PassManagerOptions::dumpDir);

  m.def("describe_passes", &passes::describePasses,
        "Every registered pass with its options (the text of `tessel opt --list-passes`).");
  m.def("op_table", [] {
    nb::list l;
    for (ir::OpKind k : ir::allOpKinds()) {
      const ir::OpInfo &info = ir::opInfo(k);
      nb::list attrs;
      for (const ir::AttrSpec &a : info.attrs) {
        const char *kind = a.kind == ir::AttrKind::I64    ? "i64"
                           : a.kind == ir::AttrKind::F64  ? "f64"
                           : a.kind == ir::AttrKind::Str  ? "str"
                           : a.kind == ir::AttrKind::I64s ? "i64s"
                                                          : "tensor";
        attrs.append(nb::make_tuple(a.name, kind, a.defaultValue ? nb::cast(ir::printAttr(*a.defaultValue)) : nb::none()));
      }
      nb::dict d;
      d["name"] = info.name;
      d["operands"] = info.numOperands;
      d["results"] = info.numResults;
      d["attrs"] = attrs;
      d["summary"] = info.summary;
      nb::list traits;
      if (info.elementwise) traits.append("elementwise");
      if (info.cheap) traits.append("cheap");
      if (info.savedBySaveSvd) traits.append("save-svd");
      d["traits"] = traits;
      d["has_vjp"] = passes::hasVjpRule(k);
      d["vjp"] = passes::vjpRuleInfo(k).rule;
      d["jvp"] = passes::jvpRuleDoc(k);
      l.append(d);
    }
    return l;
  }, "The op table: per op its name, operand count (-1 = variadic), result count, attributes "
     "(name, kind, default or None), traits (ir/ops.def), summary, and its VJP and JVP rules "
     "in words (\"vjp\", \"jvp\").");

  nb::class_<PyPlan>(m, "Plan",
                     "A prepared program: flat instruction list, kernel plans, buffer plan. "
                     "Independent of the engine width; one plan may run on several engines.")
      .def("__str__", [](const PyPlan &p) { return rt::describePlan(*p.plan); })
      .def("__repr__",
           [](const PyPlan &p) {
             return "<tessel.Plan @" + rt::planProgram(*p.plan).name + ": " + std::to_string(rt::planSize(*p.plan)) +
                    " instructions, peak live " + frontend::formatBytes(rt::peakLiveBytes(*p.plan)) + ">";
           })
      .def("to_json", [](const PyPlan &p) { return rt::describePlan(*p.plan, true); },
           "The plan as JSON (tessel prepare --format json).")
      .def_prop_ro("num_instructions", [](const PyPlan &p) { return rt::planSize(*p.plan); })
      .def_prop_ro("peak_live_bytes", [](const PyPlan &p) { return rt::peakLiveBytes(*p.plan); },
                   "Peak bytes of live buffers of the schedule (not inputs or constants).")
      .def_prop_ro("arena_bytes", [](const PyPlan &p) { return rt::arenaBytes(*p.plan); },
                   "Bytes of engine arena the plan needs.")
      .def_ro("prepare_ms", &PyPlan::prepareMs, "Milliseconds prepare took.")
      .def_ro("note", &PyPlan::note, "What prepare lowered first (einsums by the order pass), or ''.")
      .def_prop_ro("program", [](const PyPlan &p) { return PyProgram{rt::planProgram(*p.plan), 0}; },
                   "The program the plan was prepared from (after einsum lowering).")
      .def_prop_ro("inputs", [](const PyPlan &p) { return inputsOf(rt::planProgram(*p.plan)); })
      .def_prop_ro("outputs", [](const PyPlan &p) { return outputsOf(rt::planProgram(*p.plan)); });

  m.def(
      "prepare",
      [](const PyProgram &p, const std::string &order, const std::string &pipeline, int valueCheck,
         bool reuseBuffers, bool fuse) {
        auto t0 = Clock::now();
        ir::Program lowered = p.ir;
        PyPlan r;
        {
          nb::gil_scoped_release release;
          // The same path as `tessel run` and `tessel prepare` (passes/RunPipeline.h).
          r.note = passes::prepareForRun(lowered, order, pipeline, "passes").note;
          rt::PrepareOptions o;
          o.valueCheck = static_cast<rt::ValueCheck>(valueCheck);
          o.reuseBuffers = reuseBuffers;
          o.fuseElementwise = fuse;
          r.plan = rt::prepare(lowered, o);
        }
        r.prepareMs = msSince(t0);
        return r;
      },
      "program"_a, "order"_a, "passes"_a, "value_check"_a, "reuse_buffers"_a, "fuse"_a);

  nb::class_<PyEngine>(m, "Engine",
                       "An engine of fixed width W: W threads run a plan's instructions (width 1 runs "
                       "on the calling thread). Results are bitwise identical for every width.")
      .def(nb::init<int>(), "width"_a = 1, "Raises Error for a width outside [1, 256].")
      .def_prop_ro("width", [](PyEngine &e) { return e.engine.width(); })
      .def(
          "run",
          [](PyEngine &e, const PyPlan &plan, nb::handle inputs) {
            const ir::Program &p = rt::planProgram(*plan.plan);
            std::vector<ir::Tensor> in = inputsFromPython(p, inputs);
            std::vector<ir::Tensor> out;
            {
              nb::gil_scoped_release release;
              std::lock_guard<std::mutex> lock(e.mu);
              auto t0 = Clock::now();
              out = e.engine.run(*plan.plan, in);
              e.lastRunMs = msSince(t0);
            }
            return outputsToPython(p, std::move(out));
          },
          "plan"_a, "inputs"_a,
          "Runs the plan on {input name: array} (or arrays in input order); returns {output name: "
          "numpy float64 array} (0-d arrays for scalars). Inputs are read as C-contiguous float64 "
          "(bool/int/float arrays are converted, copying; complex is an error). Raises Error naming "
          "the input for a missing, unknown or mis-shaped input, and naming the op for a kernel "
          "failure (the engine stays usable). The GIL is released while it runs.")
      .def_prop_ro("last_run_ms", [](const PyEngine &e) { return e.lastRunMs; },
                   "Milliseconds of the last run inside the engine (no Python conversion).")
      .def_prop_ro("resident_bytes",
                   [](PyEngine &e) {
                     nb::gil_scoped_release release;
                     std::lock_guard<std::mutex> lock(e.mu);
                     return e.engine.residentBytes();
                   },
                   "Bytes of the arena the engine keeps between runs.")
      .def(
          "set_profiling",
          [](PyEngine &e, bool on) {
            nb::gil_scoped_release release;
            std::lock_guard<std::mutex> lock(e.mu);
            e.engine.setProfiling(on);
          },
          "on"_a, "Per-instruction timing of the following runs (two clock reads per chunk).")
      .def(
          "profile_report",
          [](PyEngine &e, const PyPlan &plan, size_t top) {
            nb::gil_scoped_release release;
            std::lock_guard<std::mutex> lock(e.mu); // not while a run changes the counters
            return e.engine.profileReport(*plan.plan, top);
          },
          "plan"_a, "top"_a = 0, "The profiled runs of `plan`: per kernel kind, then per instruction.");

  m.def(
      "evaluate_reference",
      [](const PyProgram &p, nb::handle inputs) {
        std::vector<ir::Tensor> in = inputsFromPython(p.ir, inputs);
        std::vector<ir::Tensor> out;
        {
          nb::gil_scoped_release release;
          out = rt::evaluateReference(p.ir, in);
        }
        return outputsToPython(p.ir, std::move(out));
      },
      "program"_a, "inputs"_a);

  m.def("blas_info", &rt::blasInfo, "The BLAS/LAPACK library loaded and its thread count.");

  m.def(
      "onsager",
      [](double beta) {
        if (!(beta > 0) || !std::isfinite(beta))
          throw Error("onsager: beta must be finite and > 0, got " + ir::text::formatDouble(beta));
        nb::dict d;
        d["beta"] = beta;
        d["lnZ_per_site"] = frontend::onsagerLnZ(beta);
        const frontend::OnsagerValues v = frontend::onsager(beta);
        d["dlnZ_dbeta"] = v.dlnZ;
        d["energy_per_site"] = v.energy;
        if (std::isfinite(v.d2lnZ)) {
          d["d2lnZ_dbeta2"] = v.d2lnZ;
          d["specific_heat"] = v.specificHeat;
        } else {
          d["d2lnZ_dbeta2"] = d["specific_heat"] = nb::none(); // diverge at β_c
        }
        return d;
      },
      "beta"_a);
  m.attr("ISING_BETA_C") = frontend::kIsingBetaC;
  m.attr("TRG_SVD_EPS") = frontend::kTrgSvdEps;

  m.def("_parse_trg_ranks",
        [](const std::string &text) { return frontend::parseTrgRanks(text, "trg: ranks"); },
        "A schedule in the report's words (\"2,4,4,16x17\") as a list of ranks.", "text"_a);

  m.def(
      "trg",
      [](const std::vector<double> &betas, const std::string &model, std::optional<int64_t> q,
         double field,
         bool susceptibility, int64_t chi, int steps, bool stepsAuto, bool grad, bool second,
         const std::string &secondMode, const std::string &mode, const std::string &algorithm,
         std::optional<double> btrgK, bool cft, const std::string &checkpoint, const std::string &order,
         const std::string &svd, int width, std::optional<std::vector<int64_t>> ranks,
         int64_t repeat, double eps, int valueCheck, nb::object progress) {
        // The same request, normalised by the same code, as `tessel trg` (frontend/TrgJob.h).
        frontend::TrgRequest r;
        r.model = model;
        r.q = q;
        r.field = field;
        r.susceptibility = susceptibility;
        r.chi = chi;
        if (!stepsAuto) r.steps = steps;
        if (ranks) r.ranks = *ranks;
        r.grad = grad;
        r.second = second;
        r.secondMode = secondMode;
        r.mode = mode;
        r.algorithm = algorithm;
        r.btrgKGiven = btrgK.has_value();
        if (btrgK) r.btrgK = *btrgK;
        r.cft = cft;
        r.checkpoint = checkpoint;
        r.order = order;
        r.svd = svd;
        r.width = width;
        r.repeat = repeat;
        r.eps = eps;
        r.valueCheck = static_cast<rt::ValueCheck>(valueCheck);
        const frontend::TrgOptions o = frontend::trgOptions(r);
        for (double b : betas) frontend::checkTrgBeta(b);
        // Per β its report, or (a failed β) its error message: tessel.trg raises at the
        // end with the completed reports (the sweep goes on after a failure, as tessel trg).
        std::vector<std::variant<nlohmann::json, std::string>> reports;
        {
          nb::gil_scoped_release release;
          // The driver derives the schedule at each β itself (no ranks given).
          frontend::TrgDriver drv(o);
          // Before every step: Ctrl-C (a pending SIGINT) ends the call with
          // KeyboardInterrupt within a step, and `progress` (if not None) is called with
          // (beta, phase, step, steps, at_most).
          double currentBeta = 0;
          drv.setProgress([&](const frontend::TrgProgressStep &st) {
            nb::gil_scoped_acquire acquire;
            if (PyErr_CheckSignals() != 0) throw nb::python_error();
            if (!progress.is_none())
              progress(currentBeta, st.phase, st.step, st.steps, st.atMost);
          });
          frontend::TrgReportContext ctx;
          ctx.checkpoint = checkpoint;
          ctx.order = order;
          ctx.repeat = repeat;
          ctx.blas = frontend::TrgDriver::blas();
          ctx.rssBase = rt::residentBytes(); // once per sweep, as tessel trg
          frontend::TrgBetaSweepOptions so;
          so.repeat = repeat;
          so.rssBase = ctx.rssBase;
          so.onRun = [&](size_t i, const std::string &, int64_t, int64_t) { currentBeta = betas[i]; };
          frontend::sweepTrgBetas(drv, betas, so, [&](frontend::TrgBetaRow &&row) {
            if (!row.measurement) {
              reports.emplace_back(row.error);
              return;
            }
            ctx.ranksProbeMs = drv.planExtraMs();
            reports.emplace_back(frontend::trgBetaJson(*row.measurement, drv, ctx));
          });
        }
        nb::list out;
        for (const auto &r : reports) {
          if (const auto *j = std::get_if<nlohmann::json>(&r)) out.append(jsonToPython(*j));
          else out.append(nb::str(std::get<std::string>(r).c_str()));
        }
        return out;
      },
      "betas"_a, "model"_a, "q"_a.none(), "field"_a, "susceptibility"_a, "chi"_a, "steps"_a, "steps_auto"_a, "grad"_a, "second"_a, "second_mode"_a, "mode"_a, "algorithm"_a, "btrg_k"_a.none(), "cft"_a, "checkpoint"_a, "order"_a,
      "svd"_a, "width"_a, "ranks"_a.none(), "repeat"_a, "eps"_a, "value_check"_a, "progress"_a.none());

  bindTracing(m);
}
