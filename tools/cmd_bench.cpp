//===- tools/cmd_bench.cpp - `tessel bench svd --n 256` -----------------------------===//
//
// Times LAPACK dgesdd through the engine on a fixed-seed random matrix, alternated
// (A B A B ...) with the same gesdd called directly through LAPACKE on the same
// matrix (the floor), as docs/benchmarking.md asks: ratios measured side by side in one
// run, first run reported apart, min/median/p90/max of the steady state, width, BLAS
// library and load average.
//
//===----------------------------------------------------------------------===//
#include <chrono>
#include <cstring>
#include <cstdio>
#include <memory>
#include <random>

#include <lapacke.h>

#include "frontend/TrgDriver.h"
#include "ir/Builder.h"
#include "ir/Diagnostics.h"
#include "passes/Grad.h"
#include "runtime/Npy.h"
#include "runtime/Runtime.h"
#include "runtime/Stats.h"
#include "tools/Commands.h"
#include "tools/RuntimeCommon.h"

namespace tessel::tools {
namespace {

struct SvdBenchOpts {
  int64_t n = 256;
  int64_t m = 0;
  int repeat = 30;
  int width = 1;
  int count = 1;
  uint64_t seed = 42;
  std::string matrix; ///< .npy file to factor instead of a random matrix
};

void benchSvd(const SvdBenchOpts &o) {
  ir::Tensor given;
  if (!o.matrix.empty()) {
    given = rt::readNpy(o.matrix);
    if (given.type.rank() != 2)
      throw Error("error: bench svd: --matrix " + o.matrix + " holds " + given.type.str() +
                  ", not a matrix");
  }
  int64_t n = given.type.rank() == 2 ? given.type.shape[1] : o.n;
  int64_t m = given.type.rank() == 2 ? given.type.shape[0] : (o.m > 0 ? o.m : o.n);
  if (n < 1 || m < 1 || n > 8192 || m > 8192)
    throw Error("error: bench svd: --n/--m must be in [1, 8192], got " + std::to_string(m) + "x" +
                std::to_string(n));
  if (o.repeat < 1) throw Error("error: bench svd: --repeat must be >= 1");
  if (o.width < 1 || o.width > 256) throw Error("error: bench svd: --width must be in [1, 256]");
  if (o.count < 1 || o.count > 64) throw Error("error: bench svd: --count must be in [1, 64]");
  std::string loadBefore = rt::loadAverage();

  // The program: `count` independent SVDs of m×n inputs.
  ir::Program p;
  p.name = "bench_svd";
  ir::Builder b(p);
  std::vector<ir::Tensor> inputs;
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int c = 0; c < o.count; ++c) {
    ir::ValueId a = p.addInput("A" + std::to_string(c), ir::Type({m, n}));
    b.setLoc("bench svd " + std::to_string(c));
    auto usv = b.svd(a);
    for (auto v : usv) p.addOutput(v);
    ir::Tensor t = ir::Tensor::zeros(ir::Type({m, n}));
    for (double &x : t.data) x = u(rng);
    inputs.push_back(given.type.rank() == 2 ? given : std::move(t));
  }
  auto t0 = std::chrono::steady_clock::now();
  auto plan = rt::prepare(p);
  double prepMs = rt::msSince(t0);
  rt::Engine engine(o.width);

  // Direct LAPACKE calls on the same matrices (the same column-major problem the
  // engine solves), workspace allocated once outside the timed region.
  int64_t k = std::min(m, n);
  double wq = 0;
  std::vector<double> a(static_cast<size_t>(m * n)), U(static_cast<size_t>(m * k)),
      s(static_cast<size_t>(k)), Vt(static_cast<size_t>(k * n));
  std::vector<lapack_int> iwork(static_cast<size_t>(8 * k));
  LAPACKE_dgesdd_work(LAPACK_COL_MAJOR, 'S', static_cast<lapack_int>(n), static_cast<lapack_int>(m),
                      a.data(), static_cast<lapack_int>(n), s.data(), Vt.data(),
                      static_cast<lapack_int>(n), U.data(), static_cast<lapack_int>(k), &wq, -1,
                      iwork.data());
  std::vector<double> work(static_cast<size_t>(wq));
  auto direct = [&]() {
    for (int c = 0; c < o.count; ++c) {
      a = inputs[c].data; // gesdd destroys its input: copy (timed, as the engine copies too)
      lapack_int info = LAPACKE_dgesdd_work(
          LAPACK_COL_MAJOR, 'S', static_cast<lapack_int>(n), static_cast<lapack_int>(m), a.data(),
          static_cast<lapack_int>(n), s.data(), Vt.data(), static_cast<lapack_int>(n), U.data(),
          static_cast<lapack_int>(k), work.data(), static_cast<lapack_int>(work.size()), iwork.data());
      if (info != 0) throw Error("error: bench svd: LAPACKE_dgesdd_work info " + std::to_string(info));
    }
  };

  t0 = std::chrono::steady_clock::now();
  auto outs = engine.run(*plan, inputs);
  double firstEngine = rt::msSince(t0);
  t0 = std::chrono::steady_clock::now();
  direct();
  double firstDirect = rt::msSince(t0);
  // Same singular values both ways (bitwise: the same call on the same data); `s`
  // holds those of the last matrix.
  bool same = std::equal(s.begin(), s.end(), outs[3 * (o.count - 1) + 1].data.begin());

  engine.run(*plan, inputs); // warm-up
  direct();
  std::vector<double> te, td;
  for (int r = 0; r < o.repeat; ++r) {
    t0 = std::chrono::steady_clock::now();
    auto out = engine.run(*plan, inputs);
    te.push_back(rt::msSince(t0));
    t0 = std::chrono::steady_clock::now();
    direct();
    td.push_back(rt::msSince(t0));
  }
  std::string loadAfter = rt::loadAverage();
  rt::Summary se = rt::summarize(te), sd = rt::summarize(td);
  std::string source = o.matrix.empty() ? "seed " + std::to_string(o.seed) : o.matrix;
  std::printf("bench svd: %d x dgesdd('S') of a %lldx%lld matrix (%s), %d repeats "
              "alternated engine/direct after 1 warm-up\n",
              o.count, static_cast<long long>(m), static_cast<long long>(n), source.c_str(),
              o.repeat);
  std::printf("prepare: %.3f ms (gesdd workspace query, %lld arena bytes)\n", prepMs,
              static_cast<long long>(rt::arenaBytes(*plan)));
  std::printf("engine (width %d): first %.3f ms, steady %s\n", o.width, firstEngine,
              rt::formatSummary(se).c_str());
  std::printf("direct LAPACKE:    first %.3f ms, steady %s\n", firstDirect, rt::formatSummary(sd).c_str());
  std::printf("ratio engine/direct: min %.3f, median %.3f\n", se.min / sd.min, se.median / sd.median);
  std::printf("singular values engine vs direct: %s\n", same ? "bitwise identical" : "DIFFER");
  std::printf("blas: %s\n", rt::blasInfo().c_str());
  std::printf("load average: before %s, after %s\n", loadBefore.c_str(), loadAfter.c_str());
  std::fflush(stdout);
}

struct WidthsBenchOpts {
  std::string file;
  std::vector<std::string> inputs;
  int64_t randomSeed = -1;
  std::string widths = "1,2";
  int repeat = 20;
  std::string order = "auto";
};

/// "1,2,4" -> {1, 2, 4}; each item an integer in [1, max] (`what` names it in the
/// error). Throws naming the flag.
std::vector<int64_t> parseIntList(const std::string &s, const std::string &flag,
                                  const std::string &what = "a positive integer",
                                  int64_t max = INT64_MAX) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 1 || v > max)
      throw Error("error: " + flag + ": '" + item + "' is not " + what + " (expected e.g. 1,2,4)");
    out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

std::vector<int> parseWidths(const std::string &s) {
  std::vector<int> w;
  for (int64_t v : parseIntList(s, "--widths", "a width in [1, 256]", 256)) w.push_back(static_cast<int>(v));
  return w;
}

void benchWidths(const WidthsBenchOpts &o) {
  std::vector<int> widths = parseWidths(o.widths);
  if (o.repeat < 1) throw Error("error: bench widths: --repeat must be >= 1");
  std::string loadBefore = rt::loadAverage();
  ir::Program p = loadProgram(o.file);
  std::string note = lowerEinsumsForRuntime(p, o.order);
  std::vector<ir::Tensor> inputs = loadProgramInputs(p, o.inputs, o.randomSeed);
  auto t0 = std::chrono::steady_clock::now();
  auto plan = rt::prepare(p);
  double prepMs = rt::msSince(t0);
  std::vector<std::unique_ptr<rt::Engine>> engines;
  for (int w : widths) engines.push_back(std::make_unique<rt::Engine>(w));
  std::vector<double> first(widths.size());
  std::vector<std::vector<ir::Tensor>> results(widths.size());
  for (size_t k = 0; k < widths.size(); ++k) {
    t0 = std::chrono::steady_clock::now();
    results[k] = engines[k]->run(*plan, inputs);
    first[k] = rt::msSince(t0);
  }
  bool identical = true;
  for (size_t k = 1; k < widths.size(); ++k)
    for (size_t i = 0; i < results[0].size(); ++i)
      identical &= results[k][i].data.size() == results[0][i].data.size() &&
                   std::memcmp(results[k][i].data.data(), results[0][i].data.data(),
                               results[0][i].data.size() * sizeof(double)) == 0;
  for (auto &e : engines) e->run(*plan, inputs); // warm-up
  std::vector<std::vector<double>> times(widths.size());
  for (int r = 0; r < o.repeat; ++r)
    for (size_t k = 0; k < widths.size(); ++k) {
      t0 = std::chrono::steady_clock::now();
      auto out = engines[k]->run(*plan, inputs);
      times[k].push_back(rt::msSince(t0));
    }
  std::string loadAfter = rt::loadAverage();
  std::printf("bench widths: @%s, %zu instructions, %d repeats alternated over widths %s after 1 "
              "warm-up each\n",
              p.name.c_str(), rt::planSize(*plan), o.repeat, o.widths.c_str());
  std::printf("prepare: %.3f ms\n", prepMs);
  std::vector<rt::Summary> sums;
  for (size_t k = 0; k < widths.size(); ++k) {
    sums.push_back(rt::summarize(times[k]));
    std::printf("width %d: first %.3f ms, steady %s\n", widths[k], first[k],
                rt::formatSummary(sums.back()).c_str());
  }
  for (size_t k = 1; k < widths.size(); ++k)
    std::printf("ratio width %d / width %d: min %.3f, median %.3f\n", widths[k], widths[0],
                sums[k].min / sums[0].min, sums[k].median / sums[0].median);
  std::printf("outputs across widths: %s\n", identical ? "bitwise identical" : "DIFFER");
  std::printf("blas: %s\n", rt::blasInfo().c_str());
  std::printf("load average: before %s, after %s\n", loadBefore.c_str(), loadAfter.c_str());
  if (!note.empty()) std::printf("note: %s\n", note.c_str());
  std::fflush(stdout);
}

struct PrepareBenchOpts {
  std::string chains = "10000,20000,40000,70000";
  std::string trgSteps = "20,64";
  int64_t chi = 8;
  int repeat = 3;
};

/// The gradient of x -> sin(sin(...sin(x))) -> sum, n sins, x of 8 elements: a program
/// of ~3n ops whose forward values all live until the backward reads them.
ir::Program chainGradient(int64_t n) {
  ir::Program p;
  p.name = "sin_chain_" + std::to_string(n);
  ir::Builder b(p);
  ir::ValueId v = p.addInput("x", ir::Type({8}));
  for (int64_t k = 0; k < n; ++k) v = b.unary(ir::OpKind::Sin, v);
  p.addOutput(b.reduceSum(v, {0}));
  return passes::grad(p, passes::GradOptions{});
}

void benchPrepare(const PrepareBenchOpts &o) {
  if (o.repeat < 1) throw Error("error: bench prepare: --repeat must be >= 1");
  std::string loadBefore = rt::loadAverage();
  std::printf("bench prepare: median of %d prepare() calls per program, width-independent\n",
              o.repeat);
  std::printf("%-34s %9s %12s %12s %14s %14s\n", "program", "ops", "instructions", "prepare ms",
              "peak live B", "arena B");
  auto row = [&](const std::string &name, const ir::Program &p) {
    std::vector<double> ms;
    std::shared_ptr<const rt::Plan> plan;
    for (int r = 0; r < o.repeat; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      plan = rt::prepare(p);
      ms.push_back(rt::msSince(t0));
    }
    std::printf("%-34s %9zu %12zu %12.1f %14lld %14lld\n", name.c_str(), p.ops.size(),
                rt::planSize(*plan), rt::summarize(ms).median,
                static_cast<long long>(rt::peakLiveBytes(*plan)),
                static_cast<long long>(rt::arenaBytes(*plan)));
    std::fflush(stdout);
  };
  for (int64_t n : parseIntList(o.chains, "--chains"))
    row("grad of a " + std::to_string(n) + "-op sin chain", chainGradient(n));
  // The TRG whole-program gradients and second derivatives (forward over reverse, then
  // reverse over reverse): prepare against compile.
  for (int64_t steps : parseIntList(o.trgSteps, "--trg-steps"))
    for (int kind : {0, 1, 2}) {
      frontend::TrgOptions t;
      t.chi = o.chi;
      t.steps = static_cast<int>(steps);
      t.mode = frontend::TrgMode::Whole;
      t.grad = true;
      t.second = kind > 0;
      t.secondForwardOverReverse = kind == 1;
      frontend::TrgDriver drv(t);
      const char *what[] = {"--grad", "--second", "--second --second-mode reverse-over-reverse"};
      std::printf("trg whole chi=%lld steps=%lld %s: compile %.1f ms, prepare %.1f ms (driver, once)\n",
                  static_cast<long long>(o.chi), static_cast<long long>(steps), what[kind], drv.compileMs(),
                  drv.prepareMs());
      for (const frontend::TrgProgramInfo &info : drv.programs())
        row("  " + info.group + ": " + info.role, info.program());
    }
  std::printf("load average: before %s, after %s\n", loadBefore.c_str(), rt::loadAverage().c_str());
}

} // namespace

void addBenchCommand(CLI::App &app) {
  CLI::App *bench = app.add_subcommand(
      "bench", "Benchmarks that print numbers (never pass/fail). See docs/benchmarking.md.");
  bench->require_subcommand(1);
  auto o = std::make_shared<SvdBenchOpts>();
  CLI::App *svd = bench->add_subcommand(
      "svd",
      "Time LAPACK dgesdd (thin, jobz='S') through the engine on a fixed-seed random matrix, "
      "alternated with the same gesdd called directly through LAPACKE (the floor). Prints "
      "first run and steady min/median/p90/max (ms) of both, their ratio, the width, the "
      "BLAS library and thread count and the load average before and after. With "
      "--count 2 --width 2 the two independent SVDs run concurrently (the TRG case).");
  svd->add_option("--n", o->n, "Columns (and rows unless --m is given)")->capture_default_str();
  svd->add_option("--m", o->m, "Rows (default: --n)");
  svd->add_option("--repeat", o->repeat, "Timed runs of each after one warm-up")->capture_default_str();
  svd->add_option("--width", o->width, "Engine width")->capture_default_str();
  svd->add_option("--count", o->count, "Independent SVDs in the program")->capture_default_str();
  svd->add_option("--seed", o->seed, "Seed of the random matrix")->capture_default_str();
  svd->add_option("--matrix", o->matrix,
                  "Factor this matrix (.npy, float64) instead of a random one (e.g. to time "
                  "the same matrix as numpy.linalg.svd)");
  svd->callback([o]() { benchSvd(*o); });
  addBenchPlaquetteCommand(*bench);

  auto wo = std::make_shared<WidthsBenchOpts>();
  CLI::App *wcmd = bench->add_subcommand(
      "widths",
      "Run one program on engines of several widths, alternated (A B A B ...) in one process: "
      "first run and steady min/median/p90/max (ms) per width, the ratios to the first "
      "width, whether the outputs are bitwise identical, the BLAS library and the load "
      "average. E.g. tessel emit trg-step --din 16 --dout 16 > step.tir; tessel bench widths "
      "step.tir --random-inputs 1 --widths 1,2");
  wcmd->add_option("file", wo->file, "Program file (.tir text or .json)")->required();
  wcmd->add_option("-i,--input", wo->inputs, "NAME=PATH.npy or NAME=<JSON>, as for tessel run");
  wcmd->add_option("--random-inputs", wo->randomSeed,
                   "Fill inputs not given with uniform values in [-1, 1) from this seed");
  wcmd->add_option("--widths", wo->widths, "Comma-separated engine widths")->capture_default_str();
  wcmd->add_option("--repeat", wo->repeat, "Timed rounds after one warm-up")->capture_default_str();
  wcmd->add_option("--order", wo->order, "Strategy to lower einsum ops, or 'none'")->capture_default_str();
  wcmd->callback([wo]() { benchWidths(*wo); });

  auto po = std::make_shared<PrepareBenchOpts>();
  CLI::App *pcmd = bench->add_subcommand(
      "prepare",
      "Time prepare() (lowering, dependencies, buffer assignment, schedule) on large programs: "
      "the gradients of n-op sin chains and the whole-program TRG gradient and second "
      "derivative (compile and prepare time of the driver, then each program). Prints ops, "
      "instructions, the median prepare time (ms), peak live bytes and arena bytes.");
  pcmd->add_option("--chains", po->chains, "Comma-separated chain lengths n")->capture_default_str();
  pcmd->add_option("--trg-steps", po->trgSteps, "Comma-separated TRG step counts")->capture_default_str();
  pcmd->add_option("--chi", po->chi, "TRG bond dimension")->capture_default_str();
  pcmd->add_option("--repeat", po->repeat, "prepare() calls per program (median)")->capture_default_str();
  pcmd->callback([po]() { benchPrepare(*po); });
}

} // namespace tessel::tools
