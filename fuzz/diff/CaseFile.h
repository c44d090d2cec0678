//===- fuzz/diff/CaseFile.h - Cases as regression files ---------------------------===//
//
// A case is kept as a text-form program preceded by `//` comment lines (which the
// program reader skips) holding the rest of it:
//
//   // tessel_difffuzz case: replay with tessel_difffuzz --replay FILE
//   // seed: 1234
//   // pipeline: cse,grad{wrt=x0,vjp=true,keep-outputs=true,svd-blocks=true,bond-gauge=false,remat=recompute,svd-topk-guards=false,aux=}
//   // fd: true
//   // oracle: engine-vs-reference
//   // message: output 0 (%3 f64[2]): engine vs reference: at [1] ...
//   // cause: what was wrong, and where it was fixed          (optional, by hand)
//   // known-failure: why it still fails, for the team to fix   (optional)
//   // input %x0: f64[2,3] = 1 0.5 -0.25 0 0 1
//   program @main(%x0: f64[2,3]) { ... }
//
// Input values are written in the shortest form that reads back to the same double.
// `oracle` and `message` record what failed when the case was found, `cause` why (a
// bug of tessel, or a false alarm of the fuzzer's own); a case marked known-failure is
// reported by the replay test without failing it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "fuzz/diff/DiffFuzz.h"

namespace tessel::difffuzz {

struct CaseFile {
  Case c;
  std::string oracle;       ///< what failed when the case was found
  std::string message;      ///< first line of its message
  std::string cause;        ///< what was wrong (written by hand when the case is kept)
  std::string knownFailure; ///< empty unless the case is a known, unfixed failure
};

std::string formatCaseFile(const CaseFile &f);

/// Reads a case file; throws tessel::Error naming the file for a malformed header, a
/// missing or ill-typed input, or a program that does not parse.
CaseFile parseCaseFile(const std::string &text, const std::string &filename);

} // namespace tessel::difffuzz
