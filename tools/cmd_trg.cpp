//===- tools/cmd_trg.cpp - `tessel trg`: the main job -----------------------------===//
//
//   [mpirun -n P] tessel trg [--beta B[,B...] | --beta-range A:B:N] [--chi 16] [--steps 20] [--grad]
//              [--second] [--mode staged|whole] [--checkpoint store|recompute|save-svd]
//              [--order chain|pairwise|greedy|optimal] [--width N] [--repeat N]
//              [--ranks r1,...] [--passes ...] [--json] [--check-nan] [--check-inf]
//
// Compiles and prepares the TRG programs once (frontend/TrgDriver.h), then per β runs
// the value (and value+grad, second order), compares with Onsager's exact values and
// reports timings the way docs/benchmarking.md asks: compile, prepare, first run, steady
// min/median/p90/max over --repeat runs after one warm-up, engine width, BLAS, load
// average before/after. --json prints one JSON object per β (JSON Lines). Under mpirun the
// β values are dealt out to the ranks (tools/Sweep.h).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <filesystem>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "frontend/Onsager.h"
#include "frontend/TrgDriver.h"
#include "frontend/TrgJob.h"
#include "frontend/TrgMeasure.h"
#include "ir/TextUtil.h"
#include "tools/RuntimeCommon.h"
#include "runtime/Npy.h"
#include "runtime/Stats.h"
#include "tools/Commands.h"
#include "tools/PassFlags.h"
#include "tools/Sweep.h"
#include "tools/TrgProgress.h"

namespace tessel::tools {
namespace {

using Clock = std::chrono::steady_clock;

struct TrgArgs {
  /// The run in the flags' words, normalised by frontend::trgOptions as tessel.trg's is;
  /// the flags below are the command line's own (text forms, output, sweeps).
  frontend::TrgRequest req;
  std::string output; ///< -o FILE: rank 0 writes the results there itself
  int64_t q = 0;
  bool qGiven = false;
  std::string beta;
  std::string betaRange;
  std::string steps = "auto";
  bool stepsGiven = false;
  std::string ranks;
  /// --repeat given; unset: kDefaultRepeat for one β in the table or JSON, else 0 (a
  /// sweep or --csv prints no steady timings).
  bool repeatGiven = false;
  bool json = false;
  bool csv = false;
  bool noProgress = false;
  PrepareFlags prepareFlags;
  std::string dumpSvdInputs;
  bool profile = false;
  PassFlags flags;
};

//--- Argument parsing ------------------------------------------------------------

using ir::text::formatDouble;

std::vector<std::string> splitOn(const std::string &s, char sep) {
  std::vector<std::string> parts;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) parts.push_back(item);
  if (!s.empty() && s.back() == sep) parts.push_back("");
  return parts;
}

/// The most β values one call runs. Each is a full TRG run with its own report, so a
/// sweep this long already takes minutes; the bound keeps a mistyped N from allocating
/// without end.
constexpr int64_t kMaxBetaValues = 100000;

/// Steady runs per β when --repeat is not given and one β is timed.
constexpr int64_t kDefaultRepeat = 10;

std::vector<double> parseBetas(const TrgArgs &a) {
  if (!a.beta.empty() && !a.betaRange.empty())
    throw Error("error: --beta and --beta-range are exclusive (give one of them)");
  std::vector<double> betas;
  if (!a.betaRange.empty()) {
    auto parts = splitOn(a.betaRange, ':');
    if (parts.size() != 3)
      throw Error("error: --beta-range: expected A:B:N (N points from A to B inclusive), got '" +
                  a.betaRange + "'");
    double lo = parseDoubleArg(parts[0], "--beta-range"), hi = parseDoubleArg(parts[1], "--beta-range");
    int64_t n = parseIntArg(parts[2], "--beta-range");
    if (n < 1) throw Error("error: --beta-range: N must be >= 1, got " + std::to_string(n));
    if (n > kMaxBetaValues)
      throw Error("error: --beta-range: N = " + std::to_string(n) + " beta values is more than " +
                  std::to_string(kMaxBetaValues) +
                  " (each value is a full TRG run; split the sweep into several calls)");
    frontend::checkTrgBeta(lo, "--beta-range");
    frontend::checkTrgBeta(hi, "--beta-range");
    if (n == 1 && lo != hi)
      throw Error("error: --beta-range: N = 1 gives one value, but A = " + formatDouble(lo) +
                  " and B = " + formatDouble(hi) + " differ (use N >= 2 for a sweep from A to B, "
                  "or --beta " + formatDouble(lo) + ")");
    // lo + (hi − lo)·t with t = i/(N − 1) ∈ [0, 1] (never (hi − lo)·i, which overflows
    // for B near the largest double), and B itself as the last point.
    for (int64_t i = 0; i < n; ++i)
      betas.push_back(n == 1 || i == n - 1
                          ? (n == 1 ? lo : hi)
                          : lo + (hi - lo) * (static_cast<double>(i) / static_cast<double>(n - 1)));
    return betas;
  }
  std::string list = a.beta.empty() ? "0.3" : a.beta;
  for (const std::string &s : splitOn(list, ',')) {
    double b = parseDoubleArg(s, "--beta");
    frontend::checkTrgBeta(b, "--beta");
    betas.push_back(b);
  }
  return betas;
}

frontend::TrgOptions makeOptions(const TrgArgs &a) {
  // The request in the flags' words; frontend::trgOptions normalises and checks it as it
  // does for tessel.trg (chi, steps, width, eps and ranks are checked by the driver).
  frontend::TrgRequest r = a.req;
  if (a.qGiven) r.q = a.q;
  if (!a.ranks.empty() && a.ranks != "auto") r.ranks = frontend::parseTrgRanks(a.ranks, "--ranks");
  if (a.steps != "auto") r.steps = parseIntArg(a.steps, "--steps");
  r.stepsAutoGiven = a.steps == "auto" && a.stepsGiven;
  r.valueCheck = a.prepareFlags.value();
  r.fuseElementwise = !a.prepareFlags.noFusion;
  frontend::TrgOptions o = frontend::trgOptions(r);
  if (!a.dumpSvdInputs.empty() && o.algorithm != frontend::TrgAlgorithm::Trg)
    throw Error("error: --dump-svd-inputs writes TRG's SVD inputs (the SVD-floor benchmark), not " +
                std::string(o.algorithm == frontend::TrgAlgorithm::Btrg ? "BTRG's" : "HOTRG's"));
  o.pipeline = a.flags.passesGiven ? a.flags.passes : "";
  o.passOptions = a.flags.managerOptions();
  o.passOptions.dumpDirPerProgram = true; // one subdirectory per compiled program
  return o;
}

//--- Timing --------------------------------------------------------------------------

std::string fmt(const char *f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

//--- Report ----------------------------------------------------------------------------

/// "ising, h = 0.001" or "potts, q = 3".
std::string modelText(const frontend::TrgOptions &o) {
  if (o.model.hasField()) return "ising, h = " + formatDouble(o.field);
  return "potts, q = " + std::to_string(o.model.q);
}

/// "infinite lattice (--steps auto: ...)" or "1048576 sites (2^20, periodic)".
std::string latticeText(const frontend::TrgOptions &o) {
  if (o.stepsAuto)
    return "infinite (--steps auto: coarse-grain until lnZ/N stops changing, at most " +
           std::to_string(o.steps) + " steps, then the fixed point's remaining steps in "
           "closed form)";
  const int k = o.sitesLog2();
  return fmt("%.15g", std::ldexp(1.0, o.steps * k)) + " sites (" + (k == 2 ? "4^" : "2^") +
         std::to_string(o.steps) + ", periodic)";
}

/// The schedule as given, or how it is derived.
std::string ranksText(const frontend::TrgOptions &o, const frontend::TrgDriver &drv) {
  if (!o.ranks.empty()) return frontend::formatTrgRanks(drv.ranks()) + " (given)";
  return std::string("from the spectrum at each beta: ") +
         (o.algorithm == frontend::TrgAlgorithm::Hotrg ? "min(D^2, chi)" : "min(D^2, chi, rank bound)") +
         " per step, fewer where the step's own SVD has singular values <= " + formatDouble(o.rankTol) +
         " or its cut splits a multiplet (relative gap <= " + formatDouble(frontend::trgMultipletTol(o)) + ")";
}

/// What the exact columns hold for this model (frontend::trgExactValues).
std::string exactText(const frontend::TrgOptions &o) {
  if (o.model.hasField())
    return o.field == 0 ? "exact = Onsager's infinite lattice"
                        : "no exact values in a field (Onsager's solution is for h = 0)";
  if (o.model.q == 2) return "exact = Onsager's infinite lattice at beta/2, plus beta (q = 2 Potts is Ising)";
  if (o.model.q <= 4)
    return "exact = the energy u_c = -(1 + 1/sqrt(q)) at beta_c = ln(1 + sqrt(q)) only (Baxter)";
  return "no exact values for q > 4 (a first-order transition at beta_c = ln(1 + sqrt(q)))";
}

/// Writes the SVD inputs of the largest size (Ma, Mb of every step with D = max D) of a
/// forward pass at `beta` as DIR/svd_sNN_{a,b}.npy (NN = step).
void dumpSvdInputs(const std::string &dir, double beta, const frontend::TrgDriver &drv,
                   const frontend::TrgOptions &opts) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("error: --dump-svd-inputs: cannot create '" + dir + "': " + ec.message());
  auto mats = frontend::trgSvdInputs(beta, drv.ranks(), opts.pipeline, opts.model, opts.field);
  int64_t big = 0;
  for (const auto &m : mats) big = std::max(big, m[0].type.shape[0]);
  int written = 0;
  for (size_t n = 0; n < mats.size(); ++n) {
    if (mats[n][0].type.shape[0] != big) continue;
    char name[64];
    for (int k = 0; k < 2; ++k) {
      std::snprintf(name, sizeof name, "/svd_s%02zu_%c.npy", n + 1, k ? 'b' : 'a');
      rt::writeNpy(dir + name, mats[n][static_cast<size_t>(k)]);
      ++written;
    }
  }
  std::cerr << "tessel trg: wrote " << written << " SVD inputs (f64[" << big << "," << big
            << "], beta = " << formatDouble(beta) << ") to " << dir << "\n";
}

/// The report of a β that threw: its place in every output format, and the message.
SweepReport failedReport(size_t ib, double beta, std::string msg, bool json, bool csv,
                         const Sweep &sweep) {
  if (msg.starts_with("error: ")) msg.erase(0, 7);
  while (!msg.empty() && msg.back() == '\n') msg.pop_back();
  // The driver's messages name the step and β; any other gets β in front.
  if (msg.find("beta = " + formatDouble(beta)) == std::string::npos)
    msg = "beta = " + formatDouble(beta) + ": " + msg;
  const std::string firstLine = msg.substr(0, msg.find('\n'));
  SweepReport r;
  r.index = ib;
  r.failed = true;
  r.err = "error: " +
          (sweep.size() > 1 ? "rank " + std::to_string(sweep.rank()) + " of " + std::to_string(sweep.size()) + ": "
                            : std::string()) +
          msg + "\n";
  if (json) {
    nlohmann::json j;
    j["beta"] = beta;
    j["temperature"] = 1 / beta;
    j["rank"] = sweep.rank();
    j["mpi_ranks"] = sweep.size();
    j["error"] = msg;
    r.out = j.dump() + "\n";
  } else if (csv) {
    r.out = "# beta = " + formatDouble(beta) + " failed: " + firstLine + "\n";
  } else {
    r.out = "beta = " + formatDouble(beta) + "  (T = " + fmt("%.15g", 1 / beta) + ")" +
            (sweep.size() > 1 ? "  rank " + std::to_string(sweep.rank()) + " of " +
                                    std::to_string(sweep.size())
                              : std::string()) +
            "\n  failed            " + firstLine + "\n";
  }
  return r;
}

/// Warns (stderr, once per node) when the engine threads of this node's ranks exceed its
/// cores, or the cores the load average leaves free, or when one rank's width exceeds the
/// cores its CPU affinity allows (OpenMPI binds each of up to 2 ranks to a core): the
/// timings would then include waiting for a core (docs/benchmarking.md).
void warnOversubscribed(const Sweep &sweep, int width) {
  if (sweep.nodeRank() != 0) return;
  const int cores = onlineCores(), mine = availableCores();
  const int64_t threads = static_cast<int64_t>(sweep.nodeRanks()) * width;
  const std::string who = sweep.size() > 1 ? std::to_string(sweep.nodeRanks()) + " ranks x width " +
                                                 std::to_string(width) + " = " +
                                                 std::to_string(threads) + " engine threads"
                                           : "width " + std::to_string(width);
  if (width > mine) {
    std::cerr << "warning: trg: width " << width << " on the " << mine
              << " core(s) this process may run on (its CPU affinity"
              << (sweep.size() > 1 ? "; mpirun may bind each rank to one core: give it "
                                     "--bind-to none, or --map-by slot:PE=" + std::to_string(width)
                                   : std::string())
              << "): the engine's threads share them, and the timings include the waiting\n";
    return;
  }
  if (threads > cores) {
    std::cerr << "warning: trg: " << who << " on this node's " << cores
              << " cores: threads wait for cores, and the timings include the waiting (use "
                 "fewer ranks or a smaller --width)\n";
    return;
  }
  const std::vector<double> load = rt::readLoadAverage();
  if (threads < 2 || load.empty()) return; // one thread: the loadavg line says enough
  const double freeCores = static_cast<double>(cores) - load[0];
  if (static_cast<double>(threads) > freeCores + 0.5)
    std::cerr << "warning: trg: " << who << " on this node's " << cores
              << " cores with a load average of " << fmt("%.2f", load[0]) << " (about "
              << fmt("%.1f", std::max(0.0, freeCores))
              << " free): the timings include waiting for busy cores\n";
}

void runTrg(TrgArgs &a) {
  if (a.flags.handleListPasses()) return;
  Sweep sweep;
  std::ostream quiet(nullptr); // pass instrumentation of ranks other than 0
  std::vector<double> betas;
  frontend::TrgOptions opts;
  std::unique_ptr<frontend::TrgDriver> drv;
  // Every rank parses and compiles; a failure there is reported once (Sweep::agree).
  std::string compileError;
  try {
    betas = parseBetas(a);
    if (!a.repeatGiven) a.req.repeat = betas.size() == 1 && !a.csv ? kDefaultRepeat : 0;
    sweep.begin(betas.size());
    opts = makeOptions(a);
    if (sweep.rank() != 0) {
      // The same programs, instrumented once: only rank 0 prints, dumps or times them
      // (verification, --disable-pass and --bisect-limit stay: they decide what is run).
      passes::PassManagerOptions &po = opts.passOptions;
      po.printIrBefore.clear();
      po.printIrAfter.clear();
      po.printIrAfterAll = po.printIrAfterChange = po.printChangedDiff = false;
      po.timePasses = po.timePassesJson = po.statistics = false;
      po.dumpDir.clear();
      po.crashReproducer.clear();
      po.log = &quiet; // the BISECT lines
    }
    if (a.flags.printPipeline && sweep.rank() == 0)
      std::cerr << "pipeline: " << passes::Pipeline::parse(frontend::trgPipeline(opts)).str() << "\n";
    drv = std::make_unique<frontend::TrgDriver>(opts); // compile + prepare (timed inside)
    if (!a.dumpSvdInputs.empty() && sweep.rank() == 0)
      dumpSvdInputs(a.dumpSvdInputs, betas[0], *drv, opts);
  } catch (const Error &e) {
    compileError = e.what();
    if (compileError.empty()) compileError = "error: trg: compile failed";
  } catch (const std::exception &e) {
    compileError = std::string("error: trg: internal error: ") + e.what();
  }
  if (!sweep.agree(compileError.empty(), compileError)) return;
  // -o FILE: rank 0's stdout becomes the file, written by this process itself. Under
  // mpirun, stdout is a pipe to mpirun, which relays it in chunks: Ctrl-C there stops the
  // relay mid-line (a truncated JSON line); the file gets whole lines only (Sweep::print).
  std::string openError;
  if (!a.output.empty() && sweep.rank() == 0 && std::freopen(a.output.c_str(), "w", stdout) == nullptr)
    openError = "error: -o: cannot open '" + ir::text::clipForMessage(a.output, 200) + "' for writing: " +
                std::strerror(errno);
  if (!sweep.agree(openError.empty(), openError)) return;
  if (a.profile) drv->setProfiling(true);
  warnOversubscribed(sweep, opts.width);
  const std::string blas = frontend::TrgDriver::blas();
  Progress prog;
  prog.on = sweep.rank() == 0 && !a.noProgress && isatty(STDERR_FILENO);
  prog.nbeta = betas.size();
  if (prog.on) drv->setProgress([&prog](const frontend::TrgProgressStep &s) { prog.step(s); });

  const bool table = !a.json && !a.csv;
  frontend::TopkCounts topkTotal;
  if (a.csv && sweep.rank() == 0) {
    // A comment line with the configuration, then the header: numpy.loadtxt(..., delimiter=",",
    // skiprows=2), pandas.read_csv(..., comment="#") and gnuplot read it as it is.
    std::cout << "# tessel trg: " << modelText(opts) << ", chi = " << opts.chi << ", "
              << latticeText(opts) << ", mode = " << frontend::trgModeName(opts.mode)
              << ", checkpoint = " << a.req.checkpoint << ", order = " << a.req.order
              << ", ranks = " << ranksText(opts, *drv) << "; " << exactText(opts)
              << "; nan = not computed or refused (--json gives the reason); no timings (--json or "
                 "the table give them, with --repeat N); algorithm = "
              << frontend::trgAlgorithmText(opts.algorithm, opts.btrgK) << "\n"
              << frontend::trgCsvHeader() << "\n";
    std::cout.flush();
  }
  if (table && sweep.rank() == 0) {
    std::cout << "tessel trg: " << modelText(opts) << ", chi = " << opts.chi
              << ", steps = " << (opts.stepsAuto ? std::string("auto") : std::to_string(opts.steps))
              << ", mode = " << frontend::trgModeName(opts.mode)
              << ", checkpoint = " << a.req.checkpoint << ", order = " << a.req.order
              << ", width = " << opts.width << ", eps = " << formatDouble(opts.svdEps)
              << ", algorithm = " << frontend::trgAlgorithmText(opts.algorithm, opts.btrgK) << "\n";
    if (sweep.size() > 1)
      std::cout << "  mpi        " << sweep.size() << " ranks (beta number i on rank i mod "
                << sweep.size() << "; each compiles and prepares once; compile and prepare "
                << "below are rank 0's)\n";
    std::cout << "  lattice    " << latticeText(opts) << "; " << exactText(opts) << "\n";
    std::cout << "  ranks      " << ranksText(opts, *drv) << "\n";
    std::cout << "  passes     "
              << frontend::trgPipeline(opts)
              << "\n";
    std::cout << "  svd        "
              << (opts.svd == frontend::TrgSvd::Truncated
                      ? "truncated: svd_topk computes the D' leading triplets (randomized block "
                        "Krylov, residual stop) and its derivatives need no full SVD"
                      : "full (LAPACK dgesdd, then the slice)")
              << (opts.pipeline.empty() ? "" : " (with --passes: as the pipeline says)") << "\n";
    std::cout << "  compile    " << fmt("%.3f", drv->compileMs()) << " ms (trace + passes; "
              << drv->totalOps() << " ops in " << drv->programs().size() << " programs)\n";
    for (const auto &g : drv->groups()) {
      char line[200];
      // Uses are known once a derived schedule has run (the β blocks give it).
      const std::string uses = g.uses ? "x" + std::to_string(g.uses) : "";
      std::snprintf(line, sizeof line,
                    "    %-14s %-4s %6zu ops  compile %8.3f ms  prepare %8.3f ms  peak live %s\n",
                    g.group.c_str(), uses.c_str(), g.ops, g.compileMs, g.prepareMs, frontend::formatBytes(g.peakLiveBytes).c_str());
      std::cout << line;
    }
    std::cout << "  prepare    " << fmt("%.3f", drv->prepareMs()) << " ms\n";
    std::cout << "  engine     width " << opts.width << " | BLAS " << blas << "\n";
    if (a.req.repeat == 0)
      std::cout << "  timings    first run only" << (betas.size() > 1 ? " (a sweep" : " (")
                << (betas.size() > 1 ? "; " : "") << "--repeat N adds N steady runs per beta "
                << "after a warm-up)\n";
    if (a.req.second)
      std::cout << "  note       d2(lnZ/N)/dbeta2: " << (opts.secondForwardOverReverse ? "jvp(grad(" : "grad(grad(")
                << (opts.mode == frontend::TrgMode::Staged ? "staged module)): calls and scans, no host sweep"
                                                           : "whole program))")
                << "\n";
    std::cout.flush();
  }

  // The process's size before the first run (binary, compiled programs, plans, BLAS
  // buffers): measured peaks are counted above it.
  const int64_t rssBase = rt::residentBytes();
  // One β's report (table block, JSON line or CSV row) into `os`.
  auto renderBeta = [&](const frontend::TrgBetaMeasurement &m, std::ostream &os) {
    if (a.csv) {
      os << frontend::trgCsvRow(m, opts, drv->ranks().size()) << "\n";
      return;
    }
    frontend::TrgReportContext ctx;
    ctx.checkpoint = a.req.checkpoint;
    ctx.order = a.req.order;
    ctx.rank = sweep.rank();
    ctx.mpiRanks = sweep.size();
    ctx.ranksProbeMs = drv->planExtraMs();
    ctx.repeat = a.req.repeat;
    ctx.blas = blas;
    ctx.rssBase = rssBase;
    if (a.json) os << frontend::trgBetaJson(m, *drv, ctx).dump() << "\n";
    else os << frontend::trgBetaText(m, *drv, ctx);
  };

  frontend::TrgBetaSweepOptions so;
  so.repeat = a.req.repeat;
  so.rssBase = rssBase;
  so.owns = [&](size_t ib) { return sweep.owns(ib); };
  so.onRun = [&](size_t ib, const std::string &what, int64_t k, int64_t n) {
    prog.startRun(ib, betas[ib], what, k, n);
  };
  so.captureInternalErrors = true;
  frontend::sweepTrgBetas(*drv, betas, so, [&](frontend::TrgBetaRow &&row) {
    prog.clear();
    SweepReport r;
    if (row.measurement) {
      topkTotal.add(row.measurement->topk);
      try {
        std::ostringstream os;
        renderBeta(*row.measurement, os);
        r.index = row.index;
        r.out = os.str();
      } catch (const std::exception &e) { // a β's report fails as the β would (MPI ranks wait on it)
        r = failedReport(row.index, row.beta, std::string("internal error: ") + e.what(), a.json, a.csv, sweep);
      }
    } else {
      r = failedReport(row.index, row.beta, row.error, a.json, a.csv, sweep);
    }
    sweep.submit(std::move(r));
  });
  const std::vector<size_t> failed = sweep.finish();
  if (a.profile && sweep.rank() == 0) {
    std::ostream &os = table ? std::cout : std::cerr;
    os << "profile (engine" << (sweep.size() > 1 ? ", rank 0's runs" : "")
       << ", mean ms per run of each program over every run above, top 8 "
          "instructions; profiling adds two clock reads per chunk):\n"
       << drv->profileReport(8);
    os << "truncated SVD kernels over every run above" << (sweep.size() > 1 ? " on rank 0" : "")
       << ": " << topkTotal.text() << "\n";
    os.flush();
  }
  if (!failed.empty()) {
    // Each failure is already printed in its place; a sweep ends with the list.
    if (betas.size() > 1) {
      std::string list;
      for (size_t i : failed) list += (list.empty() ? "" : ", ") + formatDouble(betas[i]);
      std::cerr << "error: trg: " << failed.size() << " of " << betas.size()
                << " beta values failed (beta = " << list
                << "; their errors are above); the other results are complete\n";
    }
    throw ExitStatus{1};
  }
}

} // namespace

void addTrgCommand(CLI::App &app) {
  auto args = std::make_shared<TrgArgs>();
  CLI::App *cmd = app.add_subcommand(
      "trg",
      "TRG of the 2D Ising model (docs/trg.md; in a field h, or the q-state Potts model\n"
      "with --model potts --q Q): lnZ/N, d(lnZ/N)/dbeta and d2(lnZ/N)/dbeta2 per beta\n"
      "(in a field also the magnetization and susceptibility by AD in h), compared with\n"
      "Onsager's exact values where they apply, with timings\n"
      "(compile = trace + passes, prepare, first run, steady min/median/p90/max over\n"
      "--repeat runs after one warm-up, engine width, BLAS, load average, and per sweep\n"
      "the planned peak bytes against the measured peak RSS; method: docs/benchmarking.md).\n"
      "Example: tessel trg --beta 0.3 --grad\n"
      "Staged mode (default) compiles one program per step class D->D' and chains them:\n"
      "use it for physics runs, its compile and prepare do not grow with --steps. Whole\n"
      "mode inlines the staged module into one program for all steps: use it to see or\n"
      "transform the whole computation as one IR (e.g. --print-ir-after-all); its compile and\n"
      "prepare grow with the number of steps (about 0.3 s for both with --second at\n"
      "chi = 16, 20 steps). --json prints one JSON object per beta (JSON Lines; schema in\n"
      "docs/cli.md).\n"
      "Sweeps: under mpirun (e.g. mpirun -n 4 tessel trg --beta-range 0.2:0.7:51 --csv)\n"
      "beta number i runs on rank i mod P, every rank compiles once, rank 0 prints in\n"
      "beta order, and the values are bitwise the serial run's. A beta that fails (with\n"
      "or without MPI) is reported in its place, the others are kept, and the exit\n"
      "status is 1. scripts/plot_sweep.py plots a --csv sweep against Onsager.\n"
      "Pipeline: --passes runs on every program. With --grad (--second) the derivatives\n"
      "are the staged module's (tessel emit trg --staged): the pipeline, the required\n"
      "pass grad{...,aux=skept,remat=<--checkpoint>} (first order; --second: grad, the\n"
      "pipeline, then jvp of it, or grad{vjp=true} with --second-mode reverse-over-reverse),\n"
      "the pipeline again; each call and scan then runs the\n"
      "forward half of its callee's gradient, which returns the residuals of the policy.\n"
      "Whole mode: the staged module inlined (the required pass inline), the pipeline,\n"
      "grad on that one program, then the pipeline's svd-topk-guards (first order,\n"
      "unless disabled) and checkpoint{policy=<--checkpoint>} unless store.\n"
      "--print-ir-after=grad, --print-ir-after-all, --dump-dir (one directory per run),\n"
      "--pass-statistics and --time-passes show grad and checkpoint like any pass;\n"
      "--bisect-limit never skips them and does not count them (logged 'running required\n"
      "pass'); --disable-pass=grad|checkpoint and --passes naming them are errors.");

  cmd->add_option("--model", args->req.model,
                  "ising (default: the Ising model, spins +-1, in the field --field) or potts "
                  "(the q-state Potts model, --q states; docs/trg.md section 8)");
  // CLI11 reads an empty value as 0: refuse it for the numbers 0 would be valid for.
  const CLI::Validator nonEmpty([](const std::string &s) { return s.empty() ? "empty value" : ""; },
                                "", "non-empty");
  CLI::Option *q = cmd->add_option("--q", args->q,
                                   "number of Potts states (integer in [2, 20]; --model potts)")
                       ->check(nonEmpty);
  cmd->add_option("--field", args->req.field,
                  "magnetic field h of the Ising model, in units of J (default 0); with --grad "
                  "also d(lnZ/N)/dh and the magnetization m = (1/beta) d(lnZ/N)/dh (at h = 0 "
                  "only with --second or --svd full: it is 0 there by symmetry), with "
                  "--second also d2(lnZ/N)/dbeta dh (refused, with the reason, where the two "
                  "ordered states' singular values are tied below T_c; at h = 0 d/dh and "
                  "d2/dbeta dh are refused, with their value, where that value, which is "
                  "rounding, exceeds 1e-10 of d/dbeta or d2/dbeta2: near T_c)")
      ->check(nonEmpty);
  cmd->add_flag("--susceptibility", args->req.susceptibility,
                "also compute d2(lnZ/N)/dh2 and the susceptibility chi_m = (1/beta) "
                "d2(lnZ/N)/dh2 (one more reverse sweep over the gradient; Ising; implies "
                "--second)");
  cmd->add_option("--beta", args->beta,
                  "inverse temperature(s), comma-separated, each > 0 (default 0.3)");
  cmd->add_option("--beta-range", args->betaRange,
                  "sweep A:B:N: N values from A to B inclusive (N >= 2 unless A = B; "
                  "exclusive with --beta)");
  cmd->add_option("--chi", args->req.chi, "maximal bond dimension chi (integer >= 2; default 16)");
  CLI::Option *steps = cmd->add_option("--steps", args->steps,
                  "auto (default): the infinite lattice - coarse-grain until lnZ/N stops "
                  "changing in double precision (two steps in a row; at most 80), then sum the "
                  "fixed point's remaining steps in closed form; or N (integer >= 1): a "
                  "periodic lattice of 2^N sites (e.g. --steps 20: 1048576 sites; with "
                  "--algorithm hotrg 4^N sites)")
      ->check(nonEmpty);
  cmd->add_option("--ranks", args->ranks,
                  "truncation schedule D'_1,...,D'_N (the number of steps is its length; with "
                  "--steps N it must have N entries; DxK repeats D K times, as the report "
                  "prints it: 2,4,4,16x17). Default ('auto'): at "
                  "each beta the value sweep itself decides: min(D^2, chi, exact rank bound) "
                  "(2,4,4,16,16,... for chi = 16; HOTRG: min(D^2, chi)), and where a step's own SVDs keep a singular "
                  "value <= " + formatDouble(frontend::kTrgRankTol) +
                  " that step keeps only those above (compiling the new class), and where its "
                  "cut splits a degenerate multiplet (relative gap <= " +
                  formatDouble(frontend::kTrgMultipletTol) +
                  ", e.g. the pairs of Potts q = 3; with a nonzero --field, relative gap <= " +
                  formatDouble(frontend::kTrgFieldPairTol) +
                  ": the pairs a field splits) the values above the multiplet (docs/trg.md "
                  "section 2.4). A given schedule runs as given; the report's 'multiplet cut' "
                  "line names each step whose cut splits a multiplet");
  cmd->add_flag("--grad", args->req.grad, "also compute d(lnZ/N)/dbeta (and time value+grad)");
  cmd->add_flag("--second", args->req.second,
                "also compute d2(lnZ/N)/dbeta2 and the specific heat (through the staged "
                "sweep or the whole program; implies --grad)");
  cmd->add_option("--second-mode", args->req.secondMode,
                  "how --second differentiates the gradient: forward-over-reverse (default: "
                  "jvp of grad) or reverse-over-reverse (grad of grad); equal to rounding");
  cmd->add_option("--algorithm", args->req.algorithm,
                  "trg (default: Levin-Nave TRG), btrg (bond-weighted TRG, Adachi-Okubo-Todo "
                  "2022: the same cost per step, 10-40x more accurate at T_c; docs/trg.md "
                  "section 9) or hotrg (higher-order TRG, Xie et al. 2012: O(chi^7) per step, "
                  "a step covers 4 sites, so --steps N is a torus of 4^N sites; 8x more "
                  "accurate than TRG at T_c, chi = 16; docs/trg.md section 11)");
  CLI::Option *btrgK = cmd->add_option("--btrg-k", args->req.btrgK,
                  "btrg: the bond-weight exponent k in [-1, 1) (default -0.5; 0 is TRG; an "
                  "error with another --algorithm)")
      ->check(nonEmpty);
  cmd->add_flag("--cft", args->req.cft,
                "also the central charge c and the lowest scaling dimensions x of each step's "
                "tensor (Gu-Wen: the transfer matrices of cylinders 1 and 2 tensors around; "
                "table and --json, not --csv; an untimed value sweep more; staged mode). At "
                "beta_c they hold c = 1/2, x = 1/8, 1 (Ising) in a window of steps; "
                "docs/trg.md section 10");
  cmd->add_option("--mode", args->req.mode, "staged (default) or whole");
  cmd->add_option("--svd", args->req.svd,
                  "step SVDs: truncated (default: the truncate-svd pass computes only the D' "
                  "leading triplets by randomized block Krylov, and differentiates them "
                  "without a full SVD, wherever min(m, n) >= 32 and D' <= min(m, n)/2) or full (LAPACK dgesdd of the whole matrix, then the "
                  "slice); --second differentiates svd_topk twice, by either --second-mode; with --passes "
                  "the pipeline given is used as is");
  cmd->add_option("--checkpoint", args->req.checkpoint,
                  "residual policy of the backward: store (default), recompute, save-svd");
  cmd->add_option("--order", args->req.order,
                  "contraction order of the plaquette einsum: chain, pairwise (default), "
                  "greedy, optimal, auto (optimal up to 8 operands, else greedy)");
  cmd->add_option("--width", args->req.width, "engine width, threads (integer >= 1; default 1)");
  CLI::Option *repeat = cmd->add_option(
      "--repeat", args->req.repeat,
      "steady-state runs after the first run and one warm-up, per beta (integer in [0, 1e6]; "
      "default 10 for one beta in the table or --json, 0 = first run only for a sweep and "
      "for --csv, which print no steady timings)");
  cmd->add_option("--eps", args->req.eps,
                  "Lorentzian broadening of the svd reverse rule, relative to each SVD's largest "
                  "singular value (default 1e-9: above the noise floor of the singular-value "
                  "gaps of degenerate pairs; see docs/trg.md section 5)");
  cmd->add_flag("--json", args->json, "one JSON object per beta (JSON Lines) on stdout");
  cmd->add_option("-o,--output", args->output,
                  "write the results (table, --json or --csv) to FILE instead of stdout; under "
                  "mpirun rank 0 writes it itself, so Ctrl-C never leaves a truncated line "
                  "(mpirun relays a rank's stdout in chunks and stops mid-line)");
  cmd->add_flag("--csv", args->csv,
                "a CSV table of the physics on stdout for plotting (a '#' line with the "
                "configuration, a header, one row per beta: beta, temperature, lnZ/N, d/dbeta, "
                "energy, d2/dbeta2, specific heat, each beside the exact value; then field, "
                "d/dh, magnetization, d2/dbeta dh, d2/dh2, susceptibility; nan where not "
                "computed or not known)")
      ->excludes("--json");
  cmd->add_flag("--no-progress", args->noProgress, "no progress line on stderr");
  cmd->add_option("--dump-svd-inputs", args->dumpSvdInputs,
                  "write the largest SVD inputs (Ma, Mb of each step with D = max D) of a forward "
                  "pass at the first beta as DIR/svd_sNN_{a,b}.npy (for the SVD floor benchmark)");
  cmd->add_flag("--profile", args->profile,
                "profile the engine during the runs and print where the time goes (per program, "
                "top instructions; to stderr with --json)");
  args->prepareFlags.addTo(*cmd, "the TRG step, the op, its location and which operands held NaN or inf");
  // A run verifies each program once, when it is prepared (TrgOptions::passOptions);
  // --verify-each verifies after every pass, as tessel opt does by default.
  args->flags.verifyEach = frontend::TrgOptions{}.passOptions.verifyEach;
  args->flags.addTo(*cmd, "pass pipeline applied to every TRG program, gradient programs "
                          "after grad/checkpoint (default: "
                          "order{strategy=<--order>},pad-sink,cse,dce; grad and checkpoint "
                          "are not allowed: trg runs them itself)");
  cmd->callback([args, q, repeat, steps, btrgK] {
    args->qGiven = q->count() > 0;
    args->stepsGiven = steps->count() > 0;
    args->req.btrgKGiven = btrgK->count() > 0;
    args->repeatGiven = repeat->count() > 0;
    runTrg(*args);
  });
}

} // namespace tessel::tools
