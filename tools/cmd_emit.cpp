//===- tools/cmd_emit.cpp - `tessel emit`: print the TRG programs ---------------===//
//
//   tessel emit trg-step --din D --dout K    one step class D -> K (docs/trg.md §2)
//   tessel emit trg-init [--q Q]             beta, h -> T0 (docs/trg.md §1, §8)
//   tessel emit trg-closure --d D            T -> ln Σ T[i,j,i,j] (docs/trg.md §3)
//   tessel emit trg --chi 16 --steps N       beta -> lnZ/N, all steps in one program
//   tessel emit trg ... --staged             the same as a module: functions, calls, scans
//
//===----------------------------------------------------------------------===//

#include "frontend/Trg.h"
#include "ir/Json.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "tools/Commands.h"

namespace tessel::tools {
namespace {

struct EmitArgs {
  std::string what;
  int64_t q = 0; ///< Potts states; 0: the Ising model
  int64_t din = 0, dout = 0, d = 0;
  int64_t chi = 16;
  int steps = 20;
  bool stepsGiven = false;
  bool btrgKGiven = false;
  std::string ranks;
  double eps = frontend::kTrgSvdEps; // what tessel trg uses
  bool kept = false;
  bool stopGradient = false;
  bool staged = false;
  std::string algorithm = "trg";
  double btrgK = frontend::kBtrgDefaultK;
  std::string format = "text";
  std::string output = "-";
};

void requirePositive(int64_t v, const char *flag) {
  if (v < 1)
    throw Error(std::string("error: ") + flag + " must be >= 1, got " + std::to_string(v));
}

/// Builds the program of `a.what`. The builder checks every op's shape rule as it
/// traces; a problem it finds there (a --din so large that a result's byte size
/// overflows, a bad --eps) is reported as an error of this command.
ir::Program buildProgram(const EmitArgs &a) {
  frontend::TrgModel model;
  if (a.q != 0) {
    if (a.what != "trg-init" && a.what != "trg")
      throw Error("error: --q: only trg-init and trg depend on the model (the step and closure "
                  "programs are the same for every model)");
    model = frontend::parseTrgModel("potts", a.q);
  }
  frontend::TrgStepOptions opts;
  opts.algorithm = frontend::parseTrgAlgorithm(a.algorithm);
  opts.btrgK = a.btrgK;
  if (a.btrgKGiven) frontend::checkBtrgKApplies(opts.algorithm);
  if (opts.weighted()) {
    frontend::checkBtrgK(a.btrgK);
    if (a.what == "trg-init")
      throw Error("error: --algorithm: trg-init is the same for every algorithm (BTRG's initial "
                  "bond weights are ones, made by the program that runs the steps)");
  }
  opts.svdEps = a.eps;
  opts.stopGradientOnNorm = a.stopGradient;
  opts.outputKeptSingularValues = a.kept;
  if (a.what == "trg-step") {
    requirePositive(a.din, "--din");
    requirePositive(a.dout, "--dout");
    // A din whose square overflows is refused by the builder (f64[D,D,D,D] is too large).
    int64_t din2 = 0;
    if (!__builtin_mul_overflow(a.din, a.din, &din2) && a.dout > din2)
      throw Error("error: --dout " + std::to_string(a.dout) + " exceeds --din^2 = " +
                  std::to_string(din2) + " (the full SVD has D^2 singular values)");
    return frontend::buildTrgStep(a.din, a.dout, opts);
  }
  if (a.what == "trg-init") return frontend::buildTrgInit(model);
  if (a.what == "trg-closure") {
    requirePositive(a.d, "--d");
    return frontend::buildTrgClosure(a.d, opts);
  }
  if (a.what == "trg-limit-closure") {
    requirePositive(a.d, "--d");
    const int64_t dout = a.dout > 0 ? a.dout : a.d;
    int64_t d2 = 0;
    if (!__builtin_mul_overflow(a.d, a.d, &d2) && dout > d2)
      throw Error("error: --dout " + std::to_string(dout) + " exceeds --d^2 = " + std::to_string(d2));
    return frontend::buildTrgLimitClosure(a.d, dout, opts);
  }
  if (a.what == "trg") {
    if (a.chi < 2) throw Error("error: --chi must be >= 2, got " + std::to_string(a.chi));
    if (a.steps < 1) throw Error("error: --steps must be >= 1, got " + std::to_string(a.steps));
    frontend::checkTrgStepCount(a.steps, opts.algorithm, "--steps");
    std::vector<int64_t> ranks = a.ranks.empty()
                                     ? frontend::trgDefaultRanks(a.chi, a.steps, model.states(), opts.algorithm)
                                     : frontend::parseTrgRanks(a.ranks, "--ranks");
    if (!a.ranks.empty() && a.stepsGiven && static_cast<int>(ranks.size()) != a.steps)
      throw Error("error: --ranks has " + std::to_string(ranks.size()) + " entries but --steps is " +
                  std::to_string(a.steps));
    frontend::checkTrgStepCount(static_cast<int64_t>(ranks.size()), opts.algorithm, "--ranks");
    frontend::checkTrgRanks(ranks, a.chi, model.states());
    return a.staged ? frontend::buildTrgModule(ranks, opts, model)
                    : frontend::buildTrgWhole(ranks, opts, model);
  }
  throw Error("error: emit: unknown program '" + a.what +
              "' (allowed: trg-step, trg-init, trg-closure, trg-limit-closure, trg)");
}

void runEmit(const EmitArgs &a) {
  ir::Program p;
  try {
    p = buildProgram(a);
  } catch (const ShapeError &e) {
    throw Error("error: emit " + a.what + ": " + e.what());
  }
  ir::verifyOrThrow(p);
  std::string text;
  if (a.format == "text") text = ir::printProgram(p);
  else if (a.format == "json") text = ir::programToJson(p) + "\n";
  else if (a.format == "dot") text = ir::printDot(p);
  else
    throw Error("error: --format: unknown format '" + a.format + "' (allowed: text, json, dot)");
  writeOutput(a.output, text);
}

} // namespace

void addEmitCommand(CLI::App &app) {
  auto args = std::make_shared<EmitArgs>();
  CLI::App *cmd = app.add_subcommand(
      "emit",
      "Print a TRG program of the 2D Ising model (docs/trg.md; or of Potts, --q) as text IR.\n"
      "  trg-step --din D --dout K   one step class: (%T: f64[D,D,D,D]) -> (%logm: f64[],\n"
      "                              %Tn: f64[K,K,K,K]); plaquette left as one einsum\n"
      "  trg-init                    (%beta: f64[], %h: f64[]) -> (%T0: f64[2,2,2,2]);\n"
      "                              with --q Q the q-state Potts model:\n"
      "                              (%beta: f64[]) -> (%T0: f64[Q,Q,Q,Q])\n"
      "  trg-closure --d D           (%T: f64[D,D,D,D]) -> (%lntr: f64[]) = ln sum T[i,j,i,j]\n"
      "  trg-limit-closure --d D [--dout K]\n"
      "                              the infinite lattice's closure (--steps auto):\n"
      "                              (%T) -> (%ltail: f64[], %skept: f64[2]) =\n"
      "                              2 ln m + ln|T'| - ln|T|, T' the step D -> K and m its\n"
      "                              normalisation (K = D by default; docs/trg.md section\n"
      "                              3.1; HOTRG, whose step covers 4 tensors: (4 ln m + ...)/3)\n"
      "  trg --chi X --steps N       (%beta: f64[], %h: f64[]) -> (%lnz: f64[]) = lnZ/N,\n"
      "                              all steps (Potts with --q Q: (%beta: f64[]) -> ...);\n"
      "                              default ranks min(D^2, chi, exact rank bound):\n"
      "                              2,4,4,16,16,... for chi = 16 (HOTRG: min(D^2, chi),\n"
      "                              4,16,16,...)\n"
      "  trg ... --staged            the same computation as a module: functions trg_init,\n"
      "                              trg_step_D_D' per step class, a loop body per class and\n"
      "                              the closure; the entry calls init, runs one scan per run\n"
      "                              of equal D -> D classes, calls the closure (docs/trg.md\n"
      "                              section 6.1)\n"
      "The output is the traced program (einsums not yet ordered); pipe it to\n"
      "`tessel opt` or `tessel verify -`.");
  cmd->add_option("program", args->what, "trg-step | trg-init | trg-closure | trg-limit-closure | trg")
      ->required()
      ->check(CLI::IsMember({"trg-step", "trg-init", "trg-closure", "trg-limit-closure", "trg"}));
  cmd->add_option("--q", args->q,
                  "trg-init, trg: the q-state Potts model with Q states (2..20) instead of the "
                  "Ising model in a field (docs/trg.md section 8)");
  cmd->add_option("--din", args->din, "trg-step: input bond dimension D (>= 1)");
  cmd->add_option("--dout", args->dout,
                  "trg-step, trg-limit-closure: kept bond dimension D' (1 <= D' <= D^2)");
  cmd->add_option("--d", args->d, "trg-closure, trg-limit-closure: bond dimension D (>= 1)");
  cmd->add_option("--chi", args->chi, "trg: maximal bond dimension chi (>= 2; default 16)");
  CLI::Option *steps =
      cmd->add_option("--steps", args->steps,
                      "trg: number of TRG steps (>= 1; default 20, or the length of --ranks)");
  cmd->add_option("--ranks", args->ranks,
                  "trg: explicit schedule D'_1,...,D'_N (comma-separated; DxK repeats D K "
                  "times, as tessel trg prints a schedule: 2,4,4,16x17), overriding the default rule");
  cmd->add_option("--eps", args->eps,
                  "Lorentzian broadening of the svd reverse rule, relative to the largest singular value "
                  "(default 1e-9, as tessel trg)");
  cmd->add_option("--algorithm", args->algorithm,
                  "trg (Levin-Nave, default), btrg (bond-weighted TRG: the step and closures "
                  "also take the bond weights %wh, %wv and the step returns the next ones; "
                  "docs/trg.md section 9) or hotrg (higher-order TRG: the step contracts "
                  "along each axis with the isometries of two environments; section 11)");
  CLI::Option *btrgK = cmd->add_option("--btrg-k", args->btrgK,
                  "btrg: the bond-weight exponent k in [-1, 1) (default -0.5; 0 is TRG; an "
                  "error with another --algorithm)");
  cmd->add_flag("--kept-singular-values", args->kept,
                "add the output %skept: the smallest kept singular values of Ma and Mb "
                "(per step), for run-time rank checks");
  cmd->add_flag("--staged", args->staged,
                "trg: emit the staged module (functions, calls, one scan per run of equal step "
                "classes) instead of one straight-line program; the same lnZ/N, bitwise");
  cmd->add_flag("--stop-gradient,!--no-stop-gradient", args->stopGradient,
                "normalise by stop_gradient(m), m = sa[0] (HOTRG: max|T|); the default "
                "(--no-stop-gradient) differentiates through m. Value and gradient are the same, but with "
                "the stop-gradient the second derivative cancels catastrophically "
                "(docs/trg.md section 2.1)");
  cmd->add_option("--format", args->format, "text (default), json or dot");
  cmd->add_option("-o,--output", args->output, "output file (default: stdout)");
  cmd->callback([args, steps, btrgK] {
    args->stepsGiven = steps->count() > 0;
    args->btrgKGiven = btrgK->count() > 0;
    runEmit(*args);
  });
}

} // namespace tessel::tools
