"""Laplace noise without the floating-point weakness of the textbook sampler.

The textbook sampler ``f(D) + b * log(u)`` (or ``rng.laplace``) outputs floating-point numbers
whose set of reachable values depends on ``f(D)``; Mironov (CCS 2012) showed this "porosity" lets
an observer tell neighbouring inputs apart, breaking epsilon-DP outright. Here instead:

1. the statistic is rounded to the lattice ``gamma * Z`` with ``gamma`` a power of two chosen from
   the public sensitivity (``gamma <= Delta * 2**-20``), so rounding changes the lattice
   sensitivity to at most ``floor(Delta/gamma) + 1`` steps;
2. integer noise is drawn EXACTLY from the discrete Laplace distribution
   ``P(z) ∝ exp(-|z| / t)`` with the rational scale ``t = (floor(Delta/gamma) + 1) / eps`` (the
   float ``eps`` is converted to its exact rational value), by Canonne, Kamath & Steinke's
   rejection sampler (NeurIPS 2020, Algorithms 1-2) on exact integers/fractions fed by the
   injected ``numpy.random.Generator``;
3. the output ``(round(f/gamma) + z) * gamma`` is an exactly representable float.

Every output is a lattice point reachable from every input, and the lattice mechanism is
eps-DP for integer queries of sensitivity ``floor(Delta/gamma)+1`` (geometric mechanism). The
effective continuous scale ``(floor(Delta/gamma)+1) * gamma / eps`` exceeds ``Delta/eps`` by a
relative ``<= 2**-19``, so the spec's error accounting (§2.5) is unchanged. Decision for spec §7.3
("textbook float Laplace has known floating-point vulnerabilities"); no new dependency.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

_GRID_BITS = 20


def lattice_step(sensitivity: float) -> float:
    """Power-of-two lattice step for a statistic of sensitivity ``Delta > 0``:
    ``<= Delta/2**20``."""
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ValueError(f"sensitivity must be a finite number > 0, got {sensitivity!r}")
    return math.ldexp(1.0, math.floor(math.log2(sensitivity)) - _GRID_BITS)


def lattice_sensitivity(sensitivity: float) -> int:
    """Sensitivity in lattice steps after rounding both neighbours: ``floor(Delta/gamma) + 1``."""
    return math.floor(sensitivity / lattice_step(sensitivity)) + 1


def effective_scale(sensitivity: float, epsilon: float) -> float:
    """Continuous-equivalent Laplace scale of :func:`laplace_mechanism`: ``(floor(D/g)+1) g / eps``.

    Thm II.1 (spec §1.4) with the lattice sensitivity; ``0`` for a zero-sensitivity statistic.
    """
    if sensitivity == 0:
        return 0.0
    return lattice_sensitivity(sensitivity) * lattice_step(sensitivity) / epsilon


def laplace_mechanism(value: float, sensitivity: float, epsilon: float,
                      rng: np.random.Generator) -> float:
    """Release ``value`` with epsilon-DP lattice Laplace noise (see module docstring).

    A statistic with sensitivity 0 is a constant of the public occupancy and is returned as is.
    """
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    if sensitivity == 0:
        return float(value)
    step = lattice_step(sensitivity)
    scale = Fraction(lattice_sensitivity(sensitivity)) / Fraction(epsilon)
    base = round(value / step)
    return float((base + sample_discrete_laplace(scale, rng)) * step)


def sample_discrete_laplace(scale: Fraction, rng: np.random.Generator) -> int:
    """One exact draw of P(z) ∝ exp(-|z|/scale) on the integers (CKS 2020, Algorithm 2)."""
    if scale <= 0:
        raise ValueError(f"scale must be > 0, got {scale!r}")
    t, s = scale.numerator, scale.denominator      # scale = t/s
    while True:
        u = _uniform_below(t, rng)
        if not _bernoulli_exp(Fraction(u, t), rng):
            continue
        v = 0
        while _bernoulli_exp(Fraction(1), rng):
            v += 1
        y = (u + t * v) // s
        negative = _uniform_below(2, rng) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


def _bernoulli_exp(gamma: Fraction, rng: np.random.Generator) -> bool:
    """Exact Bernoulli(exp(-gamma)) for rational gamma >= 0 (CKS 2020, Algorithm 1)."""
    while gamma > 1:
        if not _bernoulli_exp(Fraction(1), rng):
            return False
        gamma -= 1
    k = 1
    while _uniform_below(gamma.denominator * k, rng) < gamma.numerator:   # Bernoulli(gamma/k)
        k += 1
    return k % 2 == 1


def _uniform_below(b: int, rng: np.random.Generator) -> int:
    """Exact uniform integer in [0, b) for arbitrary-size Python int b (rejection on random
    bits)."""
    if b < 2**62:
        return int(rng.integers(0, b))
    nbits = b.bit_length()
    nwords = (nbits + 63) // 64
    while True:
        words = rng.integers(0, 2**63, size=nwords, dtype=np.uint64) * 2 + rng.integers(
            0, 2, size=nwords, dtype=np.uint64)
        x = 0
        for w in words.tolist():
            x = (x << 64) | w
        x >>= nwords * 64 - nbits
        if x < b:
            return x
