//===- frontend/TrgHotrg.cpp - The HOTRG step (docs/trg.md §11) -------------------===//
//
// Higher-order TRG (Xie, Chen, Qin, Zhu, Yang, Xiang, PRB 86, 045139 (2012)) as a step of
// the same interface as the Levin–Nave step (frontend/Trg.h: traceTrgStep checks the
// shapes and normalises, then calls traceHotrgHalves): T: f64[D,D,D,D] with legs
// (r, u, l, d) -> (logm, Tn: f64[D',D',D',D'], sa, sb, skept, …). A half-step
// stacks two tensors along the vertical bond and cuts the doubled horizontal legs with
// the isometry of their environment, then turns the tensor by 90°; a step is two
// halves, so it covers 4 tensors and cuts both axes.
//
//===----------------------------------------------------------------------===//
#include "frontend/TrgHotrg.h"

namespace tessel::frontend {
namespace {

struct HalfStep {
  Tensor Tn;   ///< f64[D, D', D, D']: the cut tensor, turned by 90°
  Tensor s;    ///< f64[D²]: singular values of the environment (descending)
  Tensor E;    ///< f64[D², D²]: the environment, divided by its largest entry
};

/// One half-step on T (f64[Dx, Dy, Dx, Dy], legs r, u, l, d): the top tensor's d leg
/// meets the bottom one's u leg, M[(r_t, r_b), u_t, (l_t, l_b), d_b] has legs of Dx²
/// on either side, and E[(r_t r_b), (r_t' r_b')] = Σ M·M over u_t, l_t, l_b, d_b is the
/// environment of its right legs (symmetric, positive semidefinite). Its Dp leading
/// singular vectors P (Dx² × Dp) cut both doubled legs (the left ones of the next column
/// are the same bond): T'[r', u, l', d] = Σ P[r_t r_b, r'] M[…] P[l_t l_b, l']. The
/// left environment is the right one's mirror image for the models here (both are
/// reflection symmetric), so one SVD serves (Xie et al. take the side that discards
/// less). E is divided by max|E| (P does not change; its singular values, the squares of
/// the doubled bond's, are then ≤ D² and compare with the rank tolerance as TRG's do).
HalfStep halfStep(const Tensor &T, int64_t Dp, const TrgStepOptions &opts,
                  const std::function<void(const std::string &)> &loc, const char *tag) {
  const int64_t Dx = T.shape()[0], D2 = Dx * Dx;
  HalfStep h;
  loc(std::string("environment ") + tag);
  // Operands in the order the pairwise strategy contracts well: (T·T) over u and l,
  // (T·T) over m and d, then over k and j: O(Dx⁴·Dy²) flops, Dx²·Dy² intermediates.
  Tensor E = einsum("aulk,culj,bkmd,ejmd->abce", {T, T, T, T}).reshape({D2, D2});
  E = (E / E.abs().max()).named(std::string("E") + tag);
  h.E = E;
  loc(std::string("svd E") + tag);
  // lnZ/N depends on P only through the projector P·Pᵀ (a rotation of P's columns is a
  // gauge of the new bond), not through the half-tensors of the bond gauge: the general
  // rule.
  SvdResult F = svd(E, opts.svdEps, "none");
  F.U.named(std::string("U") + tag);
  F.s.named(std::string("s") + tag);
  h.s = F.s;
  loc(std::string("isometry ") + tag);
  Tensor P = (Dp == D2 ? F.U : F.U.slice({0, 0}, {D2, Dp})).reshape({Dx, Dx, Dp});
  loc(std::string("contract ") + tag);
  // (P·T_top)·(T_bottom·P) over a, then over m, then over b, k, l: O(Dx⁴·Dy²·Dp) flops
  // with the doubled legs cut before the two tensors meet (the published O(χ⁷)).
  Tensor Tc = einsum("abr,aulk,bkmd,lmn->rund", {P, T, T, P});
  // Turn by 90°: legs (u, n, d, r), so the next half-step cuts the other axis.
  h.Tn = Tc.transpose({1, 2, 3, 0});
  return h;
}

} // namespace

void traceHotrgHalves(const Tensor &Tm, int64_t dout, const TrgStepOptions &opts,
                      const std::function<void(const std::string &)> &loc, TrgStepTrace &r) {
  // The first half cuts the horizontal legs (D² -> D'), the second the vertical ones of
  // the turned tensor f64[D, D', D, D'].
  HalfStep a = halfStep(Tm, dout, opts, loc, "a");
  HalfStep c = halfStep(a.Tn.named("Thalf"), dout, opts, loc, "b");
  r.Tn = c.Tn.named("Tn");
  r.sa = a.s;
  r.sb = c.s;
  r.Ma = a.E;
  r.Mb = c.E;
}

} // namespace tessel::frontend
