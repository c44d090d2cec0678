//===- frontend/TrgHotrg.h - The HOTRG step's two halves (docs/trg.md §11) -----===//
//
// Internal to frontend/Trg.cpp: traceTrgStep checks the shapes and normalises T for
// every algorithm, then for TrgAlgorithm::Hotrg hands the normalised tensor here.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "frontend/Trg.h"

namespace tessel::frontend {

/// The two half-steps of one HOTRG step on the normalised Tm (f64[D,D,D,D], legs r, u,
/// l, d): each stacks two tensors along legs 1–3, cuts the doubled legs 0 and 2 (D² ->
/// dout) with the dout leading singular vectors P of their environment E = M·Mᵀ (divided
/// by max|E|), and turns the result by 90° (legs 1, 2, 3, 0), so the second half cuts the
/// other axis. Sets r.Tn (f64[dout,dout,dout,dout]), r.sa, r.sb (the environments'
/// singular values, f64[D²]) and r.Ma, r.Mb (the environments); traceTrgStep adds
/// r.skept and r.scut from r.sa, r.sb. `loc` sets the location of what follows.
void traceHotrgHalves(const Tensor &Tm, int64_t dout, const TrgStepOptions &opts,
                      const std::function<void(const std::string &)> &loc, TrgStepTrace &r);

} // namespace tessel::frontend
