//===- tools/Sweep.cpp - A sweep over β values, on one process or over MPI ranks -===//
#include "tools/Sweep.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "ir/Diagnostics.h"

#if TESSEL_HAVE_MPI
#include <mpi.h>
#endif

namespace tessel::tools {

namespace {

/// Set by the launchers tessel knows: PMIx (OpenMPI 4/5, Slurm with PMIx), OpenMPI's
/// own, MPICH/Hydra and Intel MPI (PMI).
bool startedByMpiLauncher() {
  for (const char *v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

constexpr int kReportTag = 17;

} // namespace

int availableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return 1;
}

int onlineCores() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

#if TESSEL_HAVE_MPI

struct Sweep::Outgoing {
  std::string buf;
  MPI_Request req = MPI_REQUEST_NULL;
};

namespace {

/// index, failed, |out| (three uint64), then out, then err.
std::string encode(const SweepReport &r) {
  uint64_t head[3] = {r.index, r.failed ? 1u : 0u, r.out.size()};
  std::string b(reinterpret_cast<const char *>(head), sizeof head);
  return b + r.out + r.err;
}

SweepReport decode(const std::string &b) {
  uint64_t head[3];
  if (b.size() < sizeof head) throw Error("error: trg: a malformed report arrived from another rank");
  std::memcpy(head, b.data(), sizeof head);
  if (head[2] > b.size() - sizeof head) throw Error("error: trg: a malformed report arrived from another rank");
  SweepReport r;
  r.index = head[0];
  r.failed = head[1] != 0;
  r.out = b.substr(sizeof head, head[2]);
  r.err = b.substr(sizeof head + head[2]);
  return r;
}

void check(int rc, const char *what) {
  if (rc != MPI_SUCCESS) throw Error(std::string("error: trg: MPI: ") + what + " failed");
}

} // namespace

Sweep::Sweep() {
  if (!startedByMpiLauncher()) return;
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    // Only this thread calls MPI; the engine's threads never do.
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  }
  joined_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm node;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node) ==
      MPI_SUCCESS) {
    MPI_Comm_size(node, &nodeRanks_);
    MPI_Comm_rank(node, &nodeRank_);
    MPI_Comm_free(&node);
  }
}

Sweep::~Sweep() {
  if (!joined_) return;
  if (!clean_) {
    // An exception left the sweep half way: other ranks may be waiting for this one's
    // reports (or it for theirs), and MPI_Finalize would wait for them.
    std::cerr.flush();
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (auto &o : outgoing_) MPI_Wait(&o->req, MPI_STATUS_IGNORE);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

bool Sweep::agree(bool ok, const std::string &message) {
  std::vector<int> oks(static_cast<size_t>(size_), 1);
  if (joined_) {
    int mine = ok ? 1 : 0;
    check(MPI_Allgather(&mine, 1, MPI_INT, oks.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
  } else {
    oks[0] = ok ? 1 : 0;
  }
  if (oks[0] == 0) {
    // Rank 0's message speaks for all: the ranks compile the same programs from the same
    // flags, so the others' messages (if they failed too) would repeat it.
    clean_ = true;
    if (rank_ == 0) throw Error(message);
    return false;
  }
  int firstBad = -1;
  for (int r = 0; r < size_ && firstBad < 0; ++r)
    if (oks[static_cast<size_t>(r)] == 0) firstBad = r;
  if (firstBad < 0) return true;
  clean_ = true; // every rank ends here, together
  if (!ok) {
    std::string m = message;
    if (m.starts_with("error: ")) m.erase(0, 7);
    throw Error("error: rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": " + m);
  }
  if (rank_ == 0)
    throw Error("error: trg: rank " + std::to_string(firstBad) + " of " + std::to_string(size_) +
                " could not compile or prepare the programs (that rank prints its own message); "
                "no beta ran");
  return false;
}

void Sweep::submit(SweepReport r) {
  if (r.failed) failed_.push_back(r.index);
  if (rank_ != 0) {
    auto o = std::make_unique<Outgoing>();
    o->buf = encode(r);
    check(MPI_Isend(o->buf.data(), static_cast<int>(o->buf.size()), MPI_BYTE, 0, kReportTag,
                    MPI_COMM_WORLD, &o->req),
          "MPI_Isend");
    outgoing_.push_back(std::move(o));
    return;
  }
  pending_.emplace(r.index, std::move(r));
  receiveReady(false);
  flushInOrder();
}

void Sweep::receiveReady(bool block) {
  if (!joined_ || rank_ != 0) return;
  for (;;) {
    MPI_Status st;
    int flag = 0;
    if (block) {
      check(MPI_Probe(MPI_ANY_SOURCE, kReportTag, MPI_COMM_WORLD, &st), "MPI_Probe");
      flag = 1;
    } else {
      check(MPI_Iprobe(MPI_ANY_SOURCE, kReportTag, MPI_COMM_WORLD, &flag, &st), "MPI_Iprobe");
    }
    if (!flag) return;
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    std::string buf(static_cast<size_t>(count), '\0');
    check(MPI_Recv(buf.data(), count, MPI_BYTE, st.MPI_SOURCE, kReportTag, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE),
          "MPI_Recv");
    SweepReport r = decode(buf);
    if (r.failed) failed_.push_back(r.index);
    pending_.emplace(r.index, std::move(r));
    if (block) return;
  }
}

#else // !TESSEL_HAVE_MPI

struct Sweep::Outgoing {};

Sweep::Sweep() {
  if (startedByMpiLauncher())
    throw Error("error: trg: started by an MPI launcher, but this tessel was built without MPI "
                "(configure with -DTESSEL_MPI=ON and libopenmpi-dev installed)");
}
Sweep::~Sweep() = default;

bool Sweep::agree(bool ok, const std::string &message) {
  if (!ok) throw Error(message);
  return true;
}

void Sweep::submit(SweepReport r) {
  if (r.failed) failed_.push_back(r.index);
  pending_.emplace(r.index, std::move(r));
  flushInOrder();
}

void Sweep::receiveReady(bool) {}

#endif // TESSEL_HAVE_MPI

void Sweep::print(const SweepReport &r) {
  // A result line is written whole or not at all: SIGINT, SIGTERM (mpirun forwards
  // Ctrl-C as it), SIGHUP and SIGQUIT wait while it is written and flushed, then take
  // effect; a line longer than stdio's buffer (a --json row) is several write()s, and a
  // signal between them left a truncated JSON line.
  sigset_t block, old;
  sigemptyset(&block);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&block, sig);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  std::cout << r.out;
  std::cout.flush();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (!r.err.empty()) {
    std::cerr << r.err;
    std::cerr.flush();
  }
}

void Sweep::flushInOrder() {
  for (auto it = pending_.find(next_); it != pending_.end(); it = pending_.find(next_)) {
    print(it->second);
    pending_.erase(it);
    ++next_;
  }
}

std::vector<size_t> Sweep::finish() {
  if (rank_ != 0) {
#if TESSEL_HAVE_MPI
    for (auto &o : outgoing_) check(MPI_Wait(&o->req, MPI_STATUS_IGNORE), "MPI_Wait");
    outgoing_.clear();
#endif
    clean_ = true;
    return {};
  }
  while (next_ < nbeta_ && joined_) {
    receiveReady(true);
    flushInOrder();
  }
  clean_ = true;
  std::vector<size_t> failed = failed_;
  std::sort(failed.begin(), failed.end());
  return failed;
}

} // namespace tessel::tools
