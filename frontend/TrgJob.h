//===- frontend/TrgJob.h - A TRG run as a user asks for it, made into TrgOptions -===//
//
// `tessel trg` (tools/cmd_trg.cpp) and `tessel.trg` (python/src/module.cpp) take the same
// options, in the words of their users: model and algorithm names, "auto" steps, a remat
// policy's name. trgOptions turns such a request into the driver's TrgOptions in one
// place, so the two front ends cannot drift apart: the implications (susceptibility
// needs the second derivative, which needs the first), h = −0 read as h = 0, the
// names parsed, the checks that are not the driver's (repeat, β). Each error names the
// command-line flag ("--repeat"); the Python package renames flags to its parameters.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "frontend/TrgDriver.h"
#include "frontend/TrgMeasure.h"

namespace tessel::frontend {

struct TrgRequest {
  std::string model = "ising";   ///< --model: ising or potts
  std::optional<int64_t> q;      ///< --q (Potts)
  double field = 0;              ///< --field h (Ising; units of J)
  bool susceptibility = false;   ///< --susceptibility (implies second)
  int64_t chi = 16;              ///< --chi
  /// --steps: nullopt = auto (the infinite lattice), or N (2^N sites; HOTRG 4^N). With `ranks`
  /// given and steps nullopt, the schedule's length.
  std::optional<int64_t> steps;
  /// steps "auto" was given explicitly: with `ranks` the driver refuses it (the schedule
  /// gives the number of steps).
  bool stepsAutoGiven = false;
  std::vector<int64_t> ranks;    ///< --ranks (empty: derived at each β)
  bool grad = false;             ///< --grad
  bool second = false;           ///< --second (implies grad)
  std::string secondMode = "forward-over-reverse"; ///< --second-mode
  std::string mode = "staged";   ///< --mode: staged or whole
  std::string algorithm = "trg"; ///< --algorithm: trg, btrg or hotrg
  double btrgK = kBtrgDefaultK;  ///< --btrg-k
  bool btrgKGiven = false;       ///< --btrg-k was given (an error unless the algorithm is btrg)
  bool cft = false;              ///< --cft
  std::string checkpoint = "store"; ///< --checkpoint: store, recompute, save-svd
  std::string order = "pairwise";   ///< --order
  std::string svd = "truncated";    ///< --svd: truncated or full
  int64_t width = 1;                ///< --width
  int64_t repeat = 0;               ///< --repeat: steady runs after one warm-up
  double eps = kTrgSvdEps;          ///< --eps
  rt::ValueCheck valueCheck = rt::ValueCheck::Off; ///< --check-nan / --check-inf
  bool fuseElementwise = true;      ///< --no-fusion turns it off
};

/// The driver's options for `r`: names parsed (errors name the flag and the allowed
/// values), second = second || susceptibility, grad = grad || second, field −0 → 0,
/// steps auto → stepsAuto with kTrgStepsAutoMax, ranks given without steps → their
/// count (unless auto was given explicitly). --btrg-k given with another algorithm than
/// btrg is an error (it would change nothing). Throws tessel::Error "error: --repeat must be an integer in [0, 1000000], got
/// N", "error: --second-mode: ...", "error: --width ..." and the parsers' errors; χ,
/// steps, ε and the schedule are checked by the driver (validateTrgOptions).
TrgOptions trgOptions(const TrgRequest &r);

/// Checks one inverse temperature β (in units of 1/J). Throws tessel::Error
/// "error: FLAG: beta must be finite and > 0, got B (allowed: …)" otherwise; `flag` names
/// where β came from ("--beta", "--beta-range"; empty for the Python argument).
void checkTrgBeta(double beta, const std::string &flag = "");

/// One β of a sweep over β: its measurement, or why it failed.
struct TrgBetaRow {
  size_t index = 0; ///< its place in the sweep's β list
  double beta = 0;
  std::optional<TrgBetaMeasurement> measurement; ///< empty when β failed
  std::string error; ///< the failure's message ("error: …"), empty on success
};

/// What sweepTrgBetas needs besides the driver and the β values.
struct TrgBetaSweepOptions {
  int64_t repeat = 0;  ///< steady runs per β after a warm-up (measureTrgBeta)
  int64_t rssBase = 0; ///< the process's resident bytes before the first run
  /// The β indices this process runs (an MPI rank's share); every one if empty.
  std::function<bool(size_t index)> owns;
  /// Called before each run of β `index` (what: "value", "value+grad", "second"; run k
  /// of n): progress displays.
  std::function<void(size_t index, const std::string &what, int64_t k, int64_t n)> onRun;
  /// A failure that is not a tessel::Error (a bug) becomes the β's error too ("error:
  /// internal error: …"); otherwise it ends the sweep, so that a caller's own
  /// exception (Python's KeyboardInterrupt from a progress callback) passes through.
  bool captureInternalErrors = false;
};

/// The sweep over β that `tessel trg` and tessel.trg run: each β of `betas` that `o`
/// owns, in order, through measureTrgBeta on `drv`, then `row` with its measurement or
/// its error. A β that fails (tessel::Error: a kept singular value below the rank
/// tolerance, …) does not stop the others.
void sweepTrgBetas(TrgDriver &drv, const std::vector<double> &betas, const TrgBetaSweepOptions &o,
                   const std::function<void(TrgBetaRow &&)> &row);

} // namespace tessel::frontend
