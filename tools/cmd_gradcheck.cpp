//===- tools/cmd_gradcheck.cpp - `tessel gradcheck FILE --wrt ...` -------------===//
//
// Checks the grad transform of a program against central finite differences along one
// random direction (frontend/GradCheck.h, JAX check_grads style). Prints one line per
// check and exits 1 when a tolerance is exceeded.
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <functional>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "frontend/GradCheck.h"
#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "runtime/Npy.h"
#include "tools/Commands.h"

namespace tessel::tools {

namespace {

/// NAME=VALUE: a number (fills the tensor), a list of all numel numbers in row-major
/// order (bare "a,b,c" or JSON, possibly nested "[[a,b],[c,d]]"), or a .npy file.
void applyInputSpec(const ir::Program &p, const std::string &spec, std::vector<ir::Tensor> &xs) {
  size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error("error: --input '" + spec + "': expected NAME=VALUE (a number, a list "
                "of numbers, or a .npy file)");
  std::string name = spec.substr(0, eq), value = spec.substr(eq + 1);
  if (!name.empty() && name[0] == '%') name = name.substr(1);
  int idx = p.inputIndex(name);
  if (idx < 0) {
    std::string names;
    for (ir::ValueId in : p.inputs) names += (names.empty() ? "%" : ", %") + p.value(in).name;
    throw Error("error: --input: program " + ir::text::atName(p.name) + " has no input named '%" + name +
                "' (inputs: " + (names.empty() ? "none" : names) + ")");
  }
  const ir::Type t = p.type(p.inputs[static_cast<size_t>(idx)]);
  ir::Tensor &x = xs[static_cast<size_t>(idx)];
  if (value.size() > 4 && value.substr(value.size() - 4) == ".npy") {
    ir::Tensor v = rt::readNpy(value);
    if (v.type != t)
      throw Error("error: --input " + name + ": '" + ir::text::clipForMessage(value) + "' holds " + v.type.str() +
                  " but input '%" + name + "' has type " + t.str());
    x = std::move(v);
    return;
  }
  // A JSON number or nested list (as `tessel run` takes), or a bare list "a,b,c".
  std::vector<double> nums;
  checkInlineNesting(value, "error: --input " + name);
  nlohmann::json j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) j = nlohmann::json::parse("[" + value + "]", nullptr, false);
  bool ok = !j.is_discarded();
  std::function<void(const nlohmann::json &)> flatten = [&](const nlohmann::json &v) {
    if (v.is_number()) nums.push_back(v.get<double>());
    else if (v.is_array()) for (const auto &e : v) flatten(e);
    else ok = false;
  };
  if (ok) flatten(j);
  for (double d : nums) ok &= std::isfinite(d);
  if (!ok || nums.empty())
    throw Error("error: --input " + name + ": '" + ir::text::clipForMessage(value) +
                "' is not a finite number, a list of numbers ('a,b,...' or JSON "
                "'[[a,b],[c,d]]') or a .npy file");
  if (nums.size() == 1) {
    std::fill(x.data.begin(), x.data.end(), nums[0]);
  } else if (static_cast<int64_t>(nums.size()) == t.numel()) {
    x.data = nums;
  } else {
    throw Error("error: --input " + name + ": " + std::to_string(nums.size()) +
                " values given but input '%" + name + "' of type " + t.str() + " has " +
                std::to_string(t.numel()) + " elements (give 1 to fill, or all of them)");
  }
}

} // namespace

void addGradcheckCommand(CLI::App &app) {
  struct Opts {
    std::string file;
    std::string inputFormat = "auto";
    std::vector<std::string> wrt;
    int order = 1;
    double eps = 1e-5;
    int stencil = 5;
    uint64_t seed = 0;
    double atol = 1e-8;
    double rtol = 1e-6;
    std::vector<std::string> inputs;
    std::string init = "positive";
  };
  auto o = std::make_shared<Opts>();
  CLI::App *cmd = app.add_subcommand(
      "gradcheck",
      "Check the grad transform against finite differences (like JAX's check_grads).\n"
      "Draws one random direction t (N(0,1) entries, fixed --seed) for the --wrt inputs and "
      "compares the central finite difference in f64 along t with the directional derivative "
      "from grad: <grad f, t> for a single scalar output; otherwise, with a random cotangent c "
      "per output, <J t, c> (finite difference) against <t, J^T c> (vjp). --order 2 also "
      "checks the gradient program itself the same way (grad of grad). Programs run on the "
      "reference evaluator; einsum is allowed. A check passes when |fd - ad| <= atol + "
      "rtol*max(|fd|,|ad|). Prints one line per check; exit 1 when a tolerance is exceeded.\n"
      "Inputs not given with --input are drawn at random from --init with --seed (default "
      "'positive': uniform in [0.5, 1.5], safe for log/sqrt/div and TRG tensors).\n"
      "Example: tessel emit trg-step --din 4 --dout 4 | "
      "tessel gradcheck - --wrt T --order 2");
  cmd->add_option("file", o->file, "Program file (.tir text or .json), or '-' for stdin")
      ->required();
  cmd->add_option("--wrt", o->wrt,
                  "Inputs to differentiate with respect to, comma-separated (default: all)")
      ->delimiter(',');
  cmd->add_option("--order", o->order, "1 = first derivatives; 2 = also grad of grad")
      ->check(CLI::IsMember({1, 2}))
      ->capture_default_str();
  cmd->add_option("--eps", o->eps,
                  "Finite-difference step along the direction t (N(0,1) entries), relative to "
                  "the wrt inputs' scale: h = eps * max|x| (1 if all are 0). Smaller "
                  "if a gauge-dependent output (a TRG step's Tn) crosses a sign flip of "
                  "LAPACK's singular vectors")
      ->check(nonNegative(/*strict=*/true))
      ->capture_default_str();
  cmd->add_option("--stencil", o->stencil,
                  "Points of the central difference: 3 (error O(h^2)) or 5 (O(h^4))")
      ->check(CLI::IsMember({3, 5}))
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the direction, cotangents and random inputs")
      ->capture_default_str();
  cmd->add_option("--atol", o->atol, "Absolute tolerance")->check(nonNegative())->capture_default_str();
  cmd->add_option("--rtol", o->rtol, "Relative tolerance")->check(nonNegative())->capture_default_str();
  cmd->add_option("--input", o->inputs,
                  "NAME=VALUE: the value of an input: a number (fills the tensor), all its "
                  "elements in row-major order ('a,b,c' or JSON '[[a,b],[c,d]]'), or a "
                  ".npy file (float64, C order). Repeatable.")
      ->take_all();
  cmd->add_option("--init", o->init,
                  "Distribution of inputs not given: positive (U[0.5,1.5]), symmetric "
                  "(U[-1,1]) or normal (N(0,1))")
      ->check(CLI::IsMember({"positive", "symmetric", "normal"}))
      ->capture_default_str();
  cmd->add_option("--input-format", o->inputFormat, "auto, text or json")->capture_default_str();
  cmd->callback([o]() {
    ir::Program p = loadProgram(o->file, parseInputFormat(o->inputFormat));
    // Random inputs use their own stream (seed + 1) so that the direction stream of
    // the check does not depend on which inputs were given.
    std::vector<ir::Tensor> point =
        frontend::randomInputs(p, o->seed + 1, frontend::parseInitKind(o->init));
    for (const std::string &spec : o->inputs) applyInputSpec(p, spec, point);

    frontend::GradCheckOptions go;
    go.wrt = o->wrt;
    go.order = o->order;
    go.eps = o->eps;
    go.stencil = o->stencil;
    go.seed = o->seed;
    go.atol = o->atol;
    go.rtol = o->rtol;
    frontend::GradCheckResult r;
    try {
      r = frontend::gradCheck(p, point, go);
    } catch (const Error &e) {
      std::string m = e.what();
      throw Error(m.rfind("error", 0) == 0 ? m : "error: " + m);
    }

    std::string wrt;
    if (o->wrt.empty())
      for (ir::ValueId in : p.inputs) wrt += (wrt.empty() ? "" : ", ") + ir::text::percentName(p.value(in).name);
    for (const std::string &w : o->wrt) wrt += (wrt.empty() ? "" : ", ") + ir::text::percentName(w);
    std::ostringstream head;
    using ir::text::formatDouble;
    head << "gradcheck " << ir::text::atName(p.name) << " wrt " << wrt << ": order " << o->order << ", h = "
         << formatDouble(o->eps) << " * max|x| = " << (r.checks.empty() ? 0.0 : r.checks[0].step)
         << ", " << o->stencil
         << "-point stencil, seed " << o->seed << ", atol " << formatDouble(o->atol) << ", rtol "
         << formatDouble(o->rtol) << "\n";
    writeOutput("-", head.str() + frontend::formatGradCheck(r));
    if (!r.passed) {
      std::ostringstream msg;
      msg << "error: gradcheck of " << ir::text::atName(p.name) << " failed: max abs err " << formatDouble(r.maxAbsErr);
      if (r.maxRelErr > 0) msg << ", max rel err " << formatDouble(r.maxRelErr);
      msg << " (atol " << formatDouble(o->atol) << ", rtol " << formatDouble(o->rtol) << ")";
      size_t stops = 0;
      for (const ir::Op &op : p.ops) stops += op.kind == ir::OpKind::StopGradient;
      if (stops)
        msg << "\nnote: the program has " << stops << " stop_gradient op" << (stops > 1 ? "s" : "")
            << "; finite differences see through stop_gradient, so they can disagree with "
               "the transform where it matters (for TRG steps: emit without --stop-gradient)";
      throw Error(msg.str());
    }
  });
}

} // namespace tessel::tools
