//===- runtime/Engine.cpp - The fixed-width engine -----------------------------===//
//
// Width 1: the calling thread runs the instructions in list order, each one's chunks
// in one go (runChunks: a GEMM's row strips become one BLAS call). No threads, no
// atomics, no locks.
//
// Width W > 1: the calling thread and W-1 workers share one ready queue. An
// instruction enters the queue when its last predecessor finishes; threads claim
// its chunks one at a time (so a preempted thread holds up at most one chunk), and
// whichever thread finishes the last chunk releases the successors. A thread keeps
// one newly ready single-chunk successor for itself (no queue round trip for chains
// of small ops). Idle threads spin for a few microseconds at most, then block on a
// condition variable. There is no barrier across workers per op. Chunking is fixed
// by the plan and every chunk is computed the same way whoever runs it, so the
// outputs are bitwise identical for every width (width 1's merged GEMM strips too:
// see runChunks in runtime/Kernels.h for the BLAS property that takes).
//
// The pointer table and counters of a plan are allocated on its first run on this
// engine and kept (a small cache keyed by plan id). The arena is one buffer per engine,
// grown to the largest plan it has run and shared by all of them (runs are one at a
// time), so a driver that alternates many plans (the staged TRG sweeps) neither holds
// one arena per plan nor allocates them again; a steady-state run allocates only the
// returned output tensors.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include <sys/mman.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TESSEL_PAUSE() _mm_pause()
#else
#define TESSEL_PAUSE() std::this_thread::yield()
#endif

#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "runtime/Kernels.h"
#include "runtime/ModulePlan.h"
#include "runtime/Plan.h"

namespace tessel::rt {
namespace {

/// Iterations of the bounded spin before an idle thread blocks (a few microseconds).
constexpr int kSpinIters = 256;
/// Plans whose buffers an engine keeps.
constexpr size_t kCachedPlans = 4;

/// Index of the engine thread running on this OS thread (0 = the calling thread).
thread_local int tlsThread = 0;

struct AlignedFree {
  void operator()(double *p) const { std::free(p); }
};

/// Per-(engine, plan) run state: arena, pointer table, counters.
struct PlanState {
  uint64_t planId = 0;
  uint64_t lastUse = 0;
  std::vector<double *> ptr;
  std::unique_ptr<std::atomic<int32_t>[]> deps;
  std::unique_ptr<std::atomic<int32_t>[]> done;
  std::vector<int32_t> nextChunk;
  std::vector<int32_t> queue;
  std::unique_ptr<std::atomic<int64_t>[]> profNs; ///< per instruction, when profiling
  /// Timeline of the last profiled run: first chunk start and last chunk end (ns since
  /// the run started) and the set of threads (bit i = thread i; 0 = calling thread).
  std::unique_ptr<std::atomic<int64_t>[]> profBegin, profEnd, profThreads;
  std::chrono::steady_clock::time_point runStart;
  int64_t profRuns = 0;

  explicit PlanState(const Plan &P) : planId(P.id) {
    size_t n = P.insts.size();
    ptr.assign(P.values.size(), nullptr);
    deps.reset(new std::atomic<int32_t>[n == 0 ? 1 : n]);
    done.reset(new std::atomic<int32_t>[n == 0 ? 1 : n]);
    nextChunk.assign(n, 0);
    queue.assign(n, 0);
    size_t m = n == 0 ? 1 : n;
    profNs.reset(new std::atomic<int64_t>[m]);
    profBegin.reset(new std::atomic<int64_t>[m]);
    profEnd.reset(new std::atomic<int64_t>[m]);
    profThreads.reset(new std::atomic<int64_t>[m]);
    for (size_t i = 0; i < m; ++i) {
      profNs[i].store(0);
      profBegin[i].store(0);
      profEnd[i].store(0);
      profThreads[i].store(0);
    }
  }
};

} // namespace

struct Engine::Impl {
  int width = 1;
  bool profiling = false;
  std::function<void(const ir::Op &, int64_t)> moduleStepHook;
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<PlanState>> cache;
  uint64_t useCounter = 0;
  /// The arena every plan runs in (64-byte aligned), arenaBytes of the largest plan run.
  std::unique_ptr<double, AlignedFree> arena;
  int64_t arenaBytes = 0;

  /// The arena, grown (not kept: its old contents are dead) to hold plan P.
  double *arenaFor(const Plan &P) {
    int64_t need = (P.arenaElems * static_cast<int64_t>(sizeof(double)) + 63) / 64 * 64;
    if (need > arenaBytes) {
      arena.reset();
      arenaBytes = 0;
      // A large arena is asked for transparent huge pages: transposes and GEMM packing
      // walk megabytes with strides of up to a whole tensor row, and 2 MiB pages spare
      // them a TLB miss per access. Only a hint; the kernel may ignore it.
      const bool huge = need >= kHugeArenaBytes;
      if (huge) need = (need + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
      void *mem = std::aligned_alloc(huge ? kHugePageBytes : 64, static_cast<size_t>(need));
      if (!mem) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
      if (huge) madvise(mem, static_cast<size_t>(need), MADV_HUGEPAGE);
#endif
      arena.reset(static_cast<double *>(mem));
      arenaBytes = need;
    }
    return arena.get();
  }

  // Shared run state (width > 1). Guarded by mu unless atomic.
  std::mutex mu;
  std::condition_variable cv;
  const Plan *plan = nullptr;
  PlanState *st = nullptr;
  size_t qhead = 0, qtail = 0;
  std::atomic<int32_t> qsize{0};
  std::atomic<int32_t> remaining{0};
  std::atomic<bool> aborted{false};
  std::atomic<bool> stop{false};
  int active = 0;
  int sleepers = 0;
  std::exception_ptr error;

  PlanState &stateFor(const Plan &P) {
    ++useCounter;
    for (auto &s : cache)
      if (s->planId == P.id) {
        s->lastUse = useCounter;
        return *s;
      }
    // While profiling, no plan's state (its counters) is evicted: a module runs a plan
    // per segment of every function, far more than the cache holds.
    if (cache.size() >= kCachedPlans && !profiling) {
      auto lru = std::min_element(cache.begin(), cache.end(),
                                  [](const auto &a, const auto &b) { return a->lastUse < b->lastUse; });
      cache.erase(lru);
    }
    cache.push_back(std::make_unique<PlanState>(P));
    cache.back()->lastUse = useCounter;
    return *cache.back();
  }

  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> lk(mu);
    if (!error) error = e;
    aborted.store(true);
  }

  /// Under mu: claims the next chunk of the front instruction.
  bool claim(int32_t &inst, int32_t &chunk) {
    if (aborted.load(std::memory_order_relaxed) || qhead == qtail) return false;
    inst = st->queue[qhead];
    chunk = st->nextChunk[inst]++;
    if (st->nextChunk[inst] == plan->insts[inst].nchunks) {
      ++qhead;
      qsize.fetch_sub(1, std::memory_order_relaxed);
    }
    ++active;
    return true;
  }

  /// Under mu: appends a ready instruction and wakes sleepers for its chunks.
  void push(int32_t s) {
    st->queue[qtail++] = s;
    qsize.fetch_add(1, std::memory_order_relaxed);
    int want = std::min(sleepers, plan->insts[s].nchunks);
    for (int k = 0; k < want; ++k) cv.notify_one();
  }

  /// Chunks [c0, c1) (runChunks), timed into the plan's profile when profiling.
  void exec(const Plan &P, PlanState &S, int32_t inst, int32_t c0, int32_t c1) {
    if (!profiling) {
      runChunks(P, P.insts[inst], c0, c1, S.ptr.data());
      return;
    }
    auto t0 = std::chrono::steady_clock::now();
    runChunks(P, P.insts[inst], c0, c1, S.ptr.data());
    auto t1 = std::chrono::steady_clock::now();
    auto ns = [](auto d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); };
    S.profNs[inst].fetch_add(ns(t1 - t0), std::memory_order_relaxed);
    int64_t b = ns(t0 - S.runStart), e = ns(t1 - S.runStart);
    int64_t cur = S.profBegin[inst].load();
    while ((cur < 0 || b < cur) && !S.profBegin[inst].compare_exchange_weak(cur, b)) {}
    cur = S.profEnd[inst].load();
    while (e > cur && !S.profEnd[inst].compare_exchange_weak(cur, e)) {}
    S.profThreads[inst].fetch_or(int64_t(1) << std::min(tlsThread, 62));
  }

  /// Runs a claimed chunk, then follows single-chunk successors it makes ready.
  void process(int32_t inst, int32_t chunk) {
    const Plan &P = *plan;
    PlanState &S = *st;
    for (;;) {
      const Instruction &I = P.insts[inst];
      bool ok = true;
      try {
        exec(P, S, inst, chunk, chunk + 1);
      } catch (...) {
        fail(std::current_exception());
        ok = false;
      }
      int32_t next = -1;
      bool last = I.nchunks == 1 || S.done[inst].fetch_add(1, std::memory_order_acq_rel) + 1 == I.nchunks;
      if (last) {
        if (ok && P.options.valueCheck != ValueCheck::Off && !aborted.load()) {
          try {
            checkFiniteResults(P, I, S.ptr.data());
          } catch (...) {
            fail(std::current_exception());
          }
        }
        if (!aborted.load(std::memory_order_relaxed)) {
          std::unique_lock<std::mutex> lk(mu, std::defer_lock);
          for (int32_t k = I.succBegin; k < I.succEnd; ++k) {
            int32_t s = P.succ[k];
            if (S.deps[s].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
            if (next < 0 && P.insts[s].nchunks == 1) {
              next = s;
              continue;
            }
            if (!lk.owns_lock()) lk.lock();
            push(s);
          }
        }
        remaining.fetch_sub(1, std::memory_order_acq_rel);
      }
      if (next < 0 || aborted.load(std::memory_order_relaxed)) break;
      inst = next;
      chunk = 0;
    }
    std::lock_guard<std::mutex> lk(mu);
    if (--active == 0 && (remaining.load() == 0 || aborted.load())) cv.notify_all();
  }

  void workerLoop() {
    for (;;) {
      for (int k = 0; k < kSpinIters; ++k) {
        if (qsize.load(std::memory_order_relaxed) > 0 || stop.load(std::memory_order_relaxed)) break;
        TESSEL_PAUSE();
      }
      int32_t inst = 0, chunk = 0;
      {
        std::unique_lock<std::mutex> lk(mu);
        while (!stop.load() && !claim(inst, chunk)) {
          ++sleepers;
          cv.wait(lk);
          --sleepers;
        }
        if (stop.load()) return;
      }
      process(inst, chunk);
    }
  }

  void runParallel(const Plan &P, PlanState &S) {
    size_t n = P.insts.size();
    for (size_t i = 0; i < n; ++i) {
      S.deps[i].store(P.insts[i].initialDeps, std::memory_order_relaxed);
      S.done[i].store(0, std::memory_order_relaxed);
      S.nextChunk[i] = 0;
    }
    std::unique_lock<std::mutex> lk(mu);
    plan = &P;
    st = &S;
    qhead = qtail = 0;
    qsize.store(0);
    remaining.store(static_cast<int32_t>(n));
    aborted.store(false);
    error = nullptr;
    active = 0;
    for (int32_t i : P.initiallyReady) push(i);
    // The calling thread works too.
    for (;;) {
      if (active == 0 && (remaining.load() == 0 || aborted.load())) break;
      int32_t inst = 0, chunk = 0;
      if (claim(inst, chunk)) {
        lk.unlock();
        process(inst, chunk);
        lk.lock();
        continue;
      }
      ++sleepers;
      cv.wait(lk);
      --sleepers;
    }
    plan = nullptr;
    st = nullptr;
    qhead = qtail = 0;
    qsize.store(0);
    if (aborted.load()) {
      std::exception_ptr e = error;
      error = nullptr;
      aborted.store(false);
      lk.unlock();
      // When several ops would fail, which one fails first depends on the schedule.
      // The error is that of width 1, the first failing op in list order: the plan
      // runs again, serially (a kernel failure depends only on the values, so it comes
      // back; one that does not, such as an allocation failure, is rethrown as it was).
      runSerial(P, S);
      std::rethrow_exception(e);
    }
  }

  void runSerial(const Plan &P, PlanState &S) {
    for (size_t i = 0; i < P.insts.size(); ++i) {
      const Instruction &I = P.insts[i];
      if (I.nchunks > 0) exec(P, S, static_cast<int32_t>(i), 0, I.nchunks); // merged where they can be
      if (P.options.valueCheck != ValueCheck::Off) checkFiniteResults(P, I, S.ptr.data());
    }
  }
};

namespace {
/// A run allocates its output tensors, and the module interpreter the tensors it holds
/// between segments; each is freed when its last reader is done. glibc's defaults give
/// every block of 128 KiB or more its own mmap and return freed memory at the heap's top
/// to the system, so each run page-faults (and zeroes) its large tensors afresh: 12% of
/// a χ = 24 TRG value+grad module (1023 -> 915 ms, width 1). Raised once per process, so
/// freed tensor memory is reused; the peak resident size does not change (it is the
/// peak of what is live).
void keepFreedTensorMemory() {
#if defined(__GLIBC__)
  static const bool once = [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20); // glibc's largest (64-bit); larger blocks keep mmap
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    return true;
  }();
  (void)once;
#endif
}
} // namespace

Engine::Engine(int width) : impl_(std::make_unique<Impl>()) {
  if (width < 1 || width > 256)
    throw Error("error: engine width must be between 1 and 256, got " + std::to_string(width));
  ensureBlasSingleThreaded();
  keepFreedTensorMemory();
  impl_->width = width;
  for (int i = 1; i < width; ++i)
    impl_->threads.emplace_back([this, i] {
      tlsThread = i;
      impl_->workerLoop();
    });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stop.store(true);
  }
  impl_->cv.notify_all();
  for (auto &t : impl_->threads) t.join();
}

int Engine::width() const { return impl_->width; }

std::vector<Tensor> Engine::run(const Plan &P, const std::vector<Tensor> &inputs) {
  validateInputs(P.program, inputs);
  if (P.module) {
    try {
      return runModulePlan(*this, P, inputs);
    } catch (const std::bad_alloc &) {
      throw Error("error: run: module " + ir::text::atName(P.program.name) +
                  ": out of memory for the tensors the module interpreter holds between its "
                  "segments (calls, scan carries and stacked outputs), which the plan's peak "
                  "does not count");
    }
  }
  PlanState &S = impl_->stateFor(P);
  double *arena = impl_->arenaFor(P);
  // Output tensors: the only allocation of a steady-state run.
  std::vector<Tensor> outs;
  outs.reserve(P.outputValue.size());
  for (int32_t v : P.outputValue) {
    const ir::Type &t = P.values[v].type;
    outs.emplace_back(t, std::vector<double>(static_cast<size_t>(t.numel())));
  }
  // Buffer of every value for this run.
  for (size_t v = 0; v < P.values.size(); ++v) {
    if (P.values[v].group < 0) { // computed inside a fused loop: no buffer
      S.ptr[v] = nullptr;
      continue;
    }
    const Group &g = P.groups[P.values[v].group];
    double *p = nullptr;
    switch (g.kind) {
    case GroupKind::Arena: p = g.index >= 0 ? arena + P.slotOffset[g.index] : nullptr; break;
    case GroupKind::Input: p = const_cast<double *>(inputs[g.index].data.data()); break;
    case GroupKind::Constant: p = const_cast<double *>(P.constants[g.index]); break;
    case GroupKind::Output: p = outs[g.index].data.data(); break;
    }
    S.ptr[v] = p;
  }
  if (impl_->profiling) {
    for (size_t i = 0; i < P.insts.size(); ++i) {
      S.profBegin[i].store(-1);
      S.profEnd[i].store(0);
      S.profThreads[i].store(0);
    }
    S.runStart = std::chrono::steady_clock::now();
  }
  if (!P.insts.empty()) {
    if (impl_->width == 1) impl_->runSerial(P, S);
    else impl_->runParallel(P, S);
  }
  if (impl_->profiling) ++S.profRuns;
  for (const FinalCopy &fc : P.finalCopies) {
    size_t n = outs[fc.output].data.size();
    if (n) std::memcpy(outs[fc.output].data.data(), S.ptr[fc.value], n * sizeof(double));
  }
  return outs;
}

void Engine::setProfiling(bool on) { impl_->profiling = on; }

int64_t Engine::residentBytes() const { return impl_->arenaBytes; }

void Engine::setModuleStepHook(std::function<void(const ir::Op &, int64_t)> hook) {
  impl_->moduleStepHook = std::move(hook);
}

const std::function<void(const ir::Op &, int64_t)> &Engine::moduleStepHook() const {
  return impl_->moduleStepHook;
}

std::string Engine::profileReport(const Plan &P, size_t top) const {
  if (P.module) { // one report per segment plan that ran
    std::string out;
    for (const ModuleFunction &f : P.module->functions)
      for (size_t k = 0; k < f.segments.size(); ++k) {
        std::string r = profileReport(*f.segments[k].plan, top);
        if (!r.empty()) out += "function " + f.fn->name + ", segment " + std::to_string(k) + ":\n" + r;
      }
    return out;
  }
  const PlanState *S = nullptr;
  for (const auto &s : impl_->cache)
    if (s->planId == P.id) S = s.get();
  if (!S || S->profRuns == 0) return "";
  struct Row {
    size_t i;
    double ms;
  };
  std::vector<Row> rows;
  double total = 0;
  for (size_t i = 0; i < P.insts.size(); ++i) {
    double ms = static_cast<double>(S->profNs[i].load()) / 1e6 / static_cast<double>(S->profRuns);
    rows.push_back({i, ms});
    total += ms;
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row &a, const Row &b) { return a.ms > b.ms; });
  std::string out;
  char buf[128];
  std::snprintf(buf, sizeof buf,
                "profile: %lld runs, %.3f ms per run in kernels (summed over threads); "
                "[first start .. last end] ms and threads in the last run\n",
                static_cast<long long>(S->profRuns), total);
  out += buf;
  // Totals per kernel kind.
  {
    constexpr int kKinds = static_cast<int>(std::variant_size_v<KernelPlan>);
    double byKind[kKinds] = {};
    int countKind[kKinds] = {};
    for (const Row &r : rows) {
      byKind[static_cast<int>(P.insts[r.i].kernel())] += r.ms;
      ++countKind[static_cast<int>(P.insts[r.i].kernel())];
    }
    out += "  by kernel:";
    for (int k = 0; k < kKinds; ++k) {
      if (!countKind[k]) continue;
      std::snprintf(buf, sizeof buf, " %s %.3f ms (%.1f%%, %d)", kernelName(static_cast<Kernel>(k)),
                    byKind[k], total > 0 ? 100.0 * byKind[k] / total : 0.0, countKind[k]);
      out += buf;
    }
    out += "\n";
  }
  if (top && rows.size() > top) rows.resize(top);
  for (const Row &r : rows) {
    const Instruction &I = P.insts[r.i];
    const ir::Op &op = P.srcOp(I);
    std::string threads;
    for (int t = 0; t < 63; ++t)
      if ((S->profThreads[r.i].load() >> t) & 1) {
        if (!threads.empty()) threads += ",";
        threads += std::to_string(t);
      }
    std::snprintf(buf, sizeof buf, "  %9.3f ms %5.1f%%  [%8.3f ..%8.3f] t%-5s #%-4zu %-11s ", r.ms,
                  total > 0 ? 100.0 * r.ms / total : 0.0,
                  static_cast<double>(std::max<int64_t>(0, S->profBegin[r.i].load())) / 1e6,
                  static_cast<double>(S->profEnd[r.i].load()) / 1e6, threads.c_str(), r.i,
                  instructionKernelName(I));
    out += buf;
    out += std::string(ir::opName(op.kind)) + " " + P.values[I.out[0]].name;
    if (!op.loc.empty()) out += " (" + op.loc + ")";
    out += " | " + I.what + "\n";
  }
  return out;
}

} // namespace tessel::rt
