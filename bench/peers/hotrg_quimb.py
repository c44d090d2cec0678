"""quimb's HOTRG on the 2D Ising torus: the peer of bench/torus.py.

    lnz_per_site(beta, side, chi) -> (lnZ/N, seconds)

Builds quimb's own network of the model (`quimb.tensor.TN2D_classical_ising_partition_function`,
side × side sites, periodic, J = 1, h = 0) and contracts it with its finite-lattice HOTRG
(`TensorNetwork2D.contract_hotrg`, Xie et al., PRB 86, 045139 (2012), with the projectors of
arXiv:1905.02351), bond dimension χ (`max_bond`), no singular-value cutoff (so χ alone sets the
truncation, as in tessel), the overall scale kept as a separate exponent. The time covers the
contraction only (building the network is not timed). quimb treats every site as a tensor of its
own (a finite lattice, not translation invariant), so its cost grows with the number of sites.
quimb can differentiate through a jax or torch backend; this peer runs the value only.
"""
from __future__ import annotations

import math
import time
import warnings


def available() -> bool:
    try:
        import quimb.tensor  # noqa: F401
    except ImportError:
        return False
    return True


def version() -> str:
    import quimb
    return quimb.__version__


def lnz_per_site(beta: float, side: int, chi: int) -> tuple[float, float]:
    """lnZ/N of the side × side Ising torus by quimb's HOTRG at bond dimension χ, and the
    contraction's wall time in seconds."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cotengra's note that kahypar is not installed
        import quimb.tensor as qtn
        tn = qtn.TN2D_classical_ising_partition_function(side, side, beta, cyclic=True)
        t0 = time.perf_counter()
        mantissa, exponent10 = tn.contract_hotrg(max_bond=chi, cutoff=0.0, strip_exponent=True)
        seconds = time.perf_counter() - t0
    lnz = math.log(abs(float(mantissa))) + float(exponent10) * math.log(10.0)
    return lnz / (side * side), seconds
