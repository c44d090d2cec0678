//===- tools/Sweep.h - A sweep over β values, on one process or over MPI ranks ---===//
//
// `tessel trg` runs one report per β. Started by an MPI launcher (mpirun, mpiexec,
// srun), the β values are dealt out cyclically: value i runs on rank i mod P, every rank
// compiles and prepares the programs once, and rank 0 prints the reports in β order as
// they arrive (its own and those the other ranks send). Started without a launcher,
// the sweep is one rank and makes no MPI call. The values are bitwise those of the
// serial run: every rank runs the same programs with the same width, and the kernels
// do not depend on which process or thread runs them (on nodes of the same CPU type: the
// BLAS and the vectorised math pick their kernels from the CPU).
//
// A β that fails (a kernel error, a rank rule that does not hold) becomes a failed
// report: its message is printed in its place and the other reports are kept. A rank
// that dies ends the job through the MPI runtime (mpirun reports which one), not a hang; a
// rank that leaves the sweep by an unexpected exception aborts the job (MPI_Abort) rather
// than wait in MPI_Finalize for ranks that wait for it.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TOOLS_SWEEP_H
#define TESSEL_TOOLS_SWEEP_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessel::tools {

/// What one β produced: the text for stdout (a table block, a JSON line, a CSV row)
/// and, when it failed, the message for stderr.
struct SweepReport {
  size_t index = 0;  ///< position of the β in the sweep
  bool failed = false;
  std::string out;   ///< stdout text, printed as is
  std::string err;   ///< stderr text (failed reports), printed as is
};

/// The processes of one sweep and the order its reports are printed in.
class Sweep {
public:
  /// Joins the MPI job when the process was started by an MPI launcher (PMIx, OpenMPI or
  /// MPICH/Hydra variables in the environment), else a sweep of one rank.
  /// Throws Error when a launcher is present but this build has no MPI.
  Sweep();
  /// MPI_Finalize when joined and the sweep ended cleanly (finish(), or agree() ending it);
  /// MPI_Abort otherwise, so that no other rank waits for this one for ever.
  ~Sweep();
  Sweep(const Sweep &) = delete;
  Sweep &operator=(const Sweep &) = delete;

  /// The number of β values of the sweep (every rank passes the same).
  void begin(size_t nbeta) { nbeta_ = nbeta; }

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Ranks on this node (MPI_COMM_TYPE_SHARED): the processes that share its cores.
  int nodeRanks() const { return nodeRanks_; }
  /// This rank's position among them (0 = the one that speaks for the node).
  int nodeRank() const { return nodeRank_; }
  /// Whether this rank runs β number i.
  bool owns(size_t i) const { return static_cast<int>(i % static_cast<size_t>(size_)) == rank_; }

  /// Every rank calls this once after compiling (ok = false with its message when it
  /// threw). Returns normally when all ranks are ok; otherwise throws Error on the rank
  /// that reports the failure (rank 0's own message, or rank 0 naming the first failed
  /// rank, whose message that rank prints itself), and returns false on the ranks that
  /// should end quietly.
  bool agree(bool ok, const std::string &message);

  /// Hands over the report of a β this rank ran: rank 0 prints it (and every report
  /// before it that has arrived) in order; other ranks send it to rank 0.
  void submit(SweepReport r);
  /// Rank 0: waits for every report and prints the rest. Other ranks: waits until their
  /// reports are delivered. Returns the β indices that failed (rank 0; empty elsewhere).
  std::vector<size_t> finish();

private:
  void print(const SweepReport &r);
  void receiveReady(bool block);
  void flushInOrder();

  size_t nbeta_ = 0;
  int rank_ = 0, size_ = 1, nodeRanks_ = 1, nodeRank_ = 0;
  bool joined_ = false;
  bool clean_ = false;                    ///< ended by finish() or agree()
  size_t next_ = 0;                       ///< rank 0: the next index to print
  std::map<size_t, SweepReport> pending_; ///< rank 0: arrived, not yet printed
  std::vector<size_t> failed_;
  struct Outgoing;
  std::vector<std::unique_ptr<Outgoing>> outgoing_; ///< other ranks: sends in flight
};

/// Cores this process may run on (its CPU affinity, sched_getaffinity), at least 1.
int availableCores();
/// Cores online on this node (sysconf(_SC_NPROCESSORS_ONLN)), at least 1.
int onlineCores();

} // namespace tessel::tools

#endif
