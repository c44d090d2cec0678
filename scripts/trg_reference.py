"""The numpy TRG tessel's reference scripts share: docs/trg.md §2's step, §2.4's rank rule.

numpy.linalg.svd (LAPACK gesdd, full SVDs) and numpy.einsum, sharing no code with tessel;
used by scripts/potts_multiplet_reference.py and scripts/ising_field_reference.py, which
build their models' initial tensors. The rank rule:

    D' = min(D², χ, #{s > 1e-12} of Ma and of Mb), then, while the cut splits a multiplet
    (s[D'-1] >= 1e-7 s[0], s[D'] > 0 and s[D'-1] - s[D'] <= tol s[D'-1], of Ma or Mb), the
    start of that multiplet, where that keeps more than half of D'.
"""
import numpy as np

RANK_TOL = 1e-12
MULTIPLET_TOL = 1e-6  # tessel's kTrgMultipletTol
FIELD_PAIR_TOL = 1e-3  # kTrgFieldPairTol: the rule's relative gap in a field
MULTIPLET_FLOOR = 1e-7


def splits(s, k, tol):
    """Whether a cut keeping k values of the descending spectrum s splits a multiplet."""
    return s[k] > 0 and s[k - 1] >= MULTIPLET_FLOOR * s[0] and s[k - 1] - s[k] <= tol * s[k - 1]


def multiplet_start(s, k, tol):
    """The index of the first value of the multiplet that holds s[k - 1]."""
    m = k - 1
    while m > 0 and s[m - 1] - s[m] <= tol * s[m - 1]:
        m -= 1
    return m


def run(t, chi, steps, tol, ranks=None, spectra=None):
    """TRG of the periodic lattice of 2^steps copies of t[r,u,l,d]: (schedule, ln Z / 2^steps).

    Each step factors Ma and Mb, divides both spectra by m = sa[0] (kept in the sum: the
    same as dividing T by m first), cuts them per the rule (or at `ranks`, which pins the
    schedule) and contracts the four half-tensors; the closure is the trace over both
    pairs of legs. `spectra`, if given, gets each step's normalised (sa, sb).
    """
    lnz, kept = 0.0, []
    for n in range(steps):
        d = t.shape[0]
        ma = t.transpose(2, 1, 0, 3).reshape(d * d, d * d)
        mb = t.transpose(3, 2, 1, 0).reshape(d * d, d * d)
        ua, sa, va = np.linalg.svd(ma)
        ub, sb, vb = np.linalg.svd(mb)
        m = sa[0]
        sa, sb = sa / m, sb / m
        lnz += np.log(m) / 2**n
        if spectra is not None:
            spectra.append((sa, sb))
        if ranks is not None:
            k = ranks[n]
        else:
            k = min(chi, d * d, int((sa > RANK_TOL).sum()), int((sb > RANK_TOL).sum()))
            if k < d * d:
                starts = [multiplet_start(s, k, tol) for s in (sa, sb) if splits(s, k, tol)]
                if starts and 2 * min(starts) > k:
                    k = min(starts)
        kept.append(k)
        s1 = (ua[:, :k] * np.sqrt(sa[:k])).reshape(d, d, k)
        s3 = (va[:k].T * np.sqrt(sa[:k])).reshape(d, d, k)
        s2 = (ub[:, :k] * np.sqrt(sb[:k])).reshape(d, d, k)
        s4 = (vb[:k].T * np.sqrt(sb[:k])).reshape(d, d, k)
        t = np.einsum("war,abu,bgl,gwd->ruld", s1, s2, s3, s4, optimize=True)
    return kept, lnz + np.log(np.einsum("ijij->", t)) / 2**steps
