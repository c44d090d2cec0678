"""quimb's HOTRG on the 2D Ising torus: the peer of bench/torus.py.

    lnz_per_site(beta, side, chi) -> (lnZ/N, seconds)

Builds quimb's own network of the model (`quimb.tensor.TN2D_classical_ising_partition_function`,
side × side sites, periodic, J = 1, h = 0) and contracts it with its finite-lattice HOTRG
(`TensorNetwork2D.contract_hotrg`, Xie et al., PRB 86, 045139 (2012), with the projectors of
arXiv:1905.02351), bond dimension χ (`max_bond`), no singular-value cutoff (so χ alone sets the
truncation, as in tessel), the overall scale kept as a separate exponent. The time covers the
contraction only (building the network is not timed). quimb treats every site as a tensor of its
own (a finite lattice, not translation invariant), so its cost grows with the number of sites.

    lnz_and_dbeta(beta, side, chi) -> (lnZ/N, d(lnZ/N)/dβ, compile seconds, seconds)

differentiates the same contraction through quimb's jax backend: the site tensors are built
from β in jax (Σ_s Π over the four bonds of √W[s, ·], W the bond's Boltzmann matrix; checked
against quimb's own arrays at β to 1e-12), and `jax.jit(jax.value_and_grad(...))` of the
contraction is timed after its compile (the faster of two runs).
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


def grad_available() -> bool:
    try:
        import jax  # noqa: F401
        import quimb.tensor  # noqa: F401
    except ImportError:
        return False
    return True


def lnz_and_dbeta(beta: float, side: int, chi: int) -> tuple[float, float, float, float]:
    """lnZ/N and d(lnZ/N)/dβ of the side × side Ising torus by quimb's HOTRG at bond
    dimension χ through its jax backend (float64), the jit compile's seconds (first call
    minus a steady one) and the faster of two steady value-and-gradient calls' seconds."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        import numpy as np
        import quimb.tensor as qtn
        tn0 = qtn.TN2D_classical_ising_partition_function(side, side, beta, cyclic=True)

        def site(b):
            # √W for W = [[e^b, e^-b], [e^-b, e^b]]: eigenvalues e^b ± e^-b on (1, ±1)/√2.
            p, m = jnp.sqrt(jnp.exp(b) + jnp.exp(-b)), jnp.sqrt(jnp.exp(b) - jnp.exp(-b))
            r = 0.5 * jnp.array([[p + m, p - m], [p - m, p + m]])
            return jnp.einsum("sa,sb,sc,sd->abcd", r, r, r, r)

        t_beta = np.asarray(site(beta))
        for t in tn0.tensors:
            if t.shape != t_beta.shape or np.abs(t.data - t_beta).max() > 1e-12 * np.abs(t_beta).max():
                raise RuntimeError("quimb's Ising site tensor is not the one rebuilt in jax")

        def lnz(b):
            tn = tn0.copy()
            T = site(b)
            for t in tn.tensors:
                t.modify(data=T)
            mantissa, exponent10 = tn.contract_hotrg(max_bond=chi, cutoff=0.0, strip_exponent=True)
            return (jnp.log(jnp.abs(mantissa)) + exponent10 * math.log(10.0)) / (side * side)

        f = jax.jit(jax.value_and_grad(lnz))
        t0 = time.perf_counter()
        jax.block_until_ready(f(beta))
        first = time.perf_counter() - t0
        best = math.inf
        for _ in range(2):
            t0 = time.perf_counter()
            value, grad = jax.block_until_ready(f(beta))
            best = min(best, time.perf_counter() - t0)
    return float(value), float(grad), first - best, best
