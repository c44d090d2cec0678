//===- fuzz/diff/DiffFuzz.h - Differential fuzzing of the whole compiler ----------===//
//
// A case is a random program (fuzz/diff/ProgramGenerator.h), its inputs and a random
// pass pipeline. Checking a case runs the pipeline (verify-each) and compares what
// every part of tessel says about the result (fuzz/README.md lists the oracles):
//
//   roundtrip            the program before and after the pipeline prints, parses and
//                        goes through JSON to the same text (fuzz/FuzzCommon.h), and the
//                        re-read input program evaluates to the same bits;
//   pipeline             the pipeline text is canonical and reads the same with blanks
//                        around its separators; every pass accepts the program the fuzzer
//                        chose it for and the result verifies; a pass given options
//                        without regard to their validity throws tessel::Error or
//                        succeeds, nothing else;
//   prepare              rt::prepare accepts the result;
//   widths               the engine at widths 1, 2 and 4, again on a warm engine, and
//                        without buffer reuse: the same bits, or the same error; with
//                        the --check-inf value check at widths 1 and 4: the same error
//                        (naming the same op), or the same bits as without it;
//   engine-vs-reference  engine vs rt::evaluateReference on the same program: each
//                        output within kRelTol of the reference relative to the largest
//                        |value| of that output (NaN and inf at the same places), or both
//                        throw tessel::Error with the same message;
//   passes-vs-reference  the reference on the result vs the reference on the input
//                        program with only its grad passes applied, both after dce (the
//                        other passes must not change values beyond rounding): the same
//                        tolerance; with non-finite inputs, the result may also be
//                        non-finite where the baseline is finite (sums regrouped around
//                        inf), but not finite where the baseline is not;
//   grad-vs-fd           for the last grad of the pipeline, ⟨t, gradient⟩ from the
//                        engine against a 5-point central difference of the program it
//                        differentiated (stop_gradient values frozen at the point) along
//                        a random direction t, weighted by the cotangent inputs. Points
//                        where the differences with steps h and h/2 disagree (a kink or
//                        a jump of select/compare/sign inside the stencil) are skipped.
//
// Inputs the pipeline adds (grad's cotangents) get values drawn from the case's seed.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fuzz/diff/ProgramGenerator.h"
#include "ir/Program.h"

namespace tessel::rt {
class Engine;
}

namespace tessel::difffuzz {

/// The oracles, as failures name them.
inline constexpr const char *kRoundTrip = "roundtrip";
inline constexpr const char *kPipeline = "pipeline";
inline constexpr const char *kPrepare = "prepare";
inline constexpr const char *kWidths = "widths";
inline constexpr const char *kEngineVsReference = "engine-vs-reference";
inline constexpr const char *kPassesVsReference = "passes-vs-reference";
inline constexpr const char *kGradVsFd = "grad-vs-fd";
inline constexpr const char *kCheck = "check"; ///< an exception escaped the checks

/// Relative tolerance of the value comparisons (engine-vs-reference, passes-vs-reference).
inline constexpr double kRelTol = 1e-12;

struct Case {
  /// The seed the case was generated from; it also seeds the checks' own random values
  /// (cotangent inputs, the finite-difference direction).
  uint64_t seed = 0;
  ir::Program program; ///< before the pipeline
  std::vector<ir::Tensor> inputs;
  std::string pipeline; ///< canonical pipeline text (passes::Pipeline::str())
  /// The finite-difference oracle applies (off for quantized inputs at kinks).
  bool fd = true;
};

/// The case of `seed`: the generated program (size drawn from the seed, at most
/// `maxSize` ops) and a random pipeline for it, chosen pass by pass (each pass is run
/// as it is chosen, so that the next choice sees the program as it is: its inputs for
/// grad's wrt, its grad signature for checkpoint). Every registered pass can be
/// chosen, with random values of all its options; grad only for programs generated to
/// be differentiated, checkpoint only after grad, and a pipeline that leaves an einsum
/// ends with order. Now and then a pass gets options without regard to their validity.
Case generateCase(uint64_t seed, int maxSize);

struct Failure {
  std::string oracle; ///< one of the names above
  std::string message;
};

struct CheckResult {
  std::vector<Failure> failures;
  bool fdChecked = false; ///< the finite-difference comparison was made
  /// Why not, when the pipeline differentiates but fdChecked is false ("" otherwise).
  std::string fdSkipped;
  bool engineRan = false; ///< the engine produced outputs (not an error)
  /// Value comparisons that passed only with the rounding model's slack.
  int roundingSlackNeeded = 0;
  /// The finite-difference comparison passed only with the transform's own rounding.
  bool fdSlackNeeded = false;
  bool hasFailure(const std::string &oracle) const;
};

/// Runs the oracles on cases; owns the engines (widths 1, 2, 4), reused from case to case.
class Checker {
public:
  Checker();
  ~Checker();
  Checker(const Checker &) = delete;
  Checker &operator=(const Checker &) = delete;

  /// Runs every oracle on `c`. Never throws: an exception that escapes the checks is
  /// reported as a failure of kCheck.
  CheckResult check(const Case &c);

private:
  CheckResult checkOrThrow(const Case &c);

  std::vector<std::unique_ptr<rt::Engine>> engines_;
};

/// Values for the inputs of `p` beyond the case's own (grad's cotangent inputs):
/// uniform in [-1, 1), drawn from the case's seed. Returns the case's inputs followed
/// by those.
std::vector<ir::Tensor> inputsFor(const ir::Program &p, const Case &c);

} // namespace tessel::difffuzz
