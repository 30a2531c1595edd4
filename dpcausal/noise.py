"""Exact noise samplers on a public power-of-two lattice (the only noise source of a release).

Textbook floating-point samplers (``rng.laplace``, ``rng.standard_normal``, ``f(D) + b*log(u)``)
output floats whose set of reachable values depends on ``f(D)``; Mironov (CCS 2012) and Jin et al.
(2022) showed this "porosity" lets an observer tell neighbouring inputs apart. Here instead:

1. the statistic is rounded to the lattice ``gamma * Z``, ``gamma`` a power of two chosen from the
   public sensitivity (Laplace: ``gamma <= Delta * 2**-20``) or noise scale (Gaussian:
   ``gamma <= sigma * 2**-20``), so rounding moves neighbours apart by at most one more step;
2. integer noise is drawn EXACTLY, in rational arithmetic, by Canonne, Kamath & Steinke's
   rejection samplers (NeurIPS 2020, Algorithms 1-3): the discrete Laplace
   ``P(z) ∝ exp(-|z|/t)`` and the discrete Gaussian ``P(z) ∝ exp(-z^2 / (2 s^2))``, fed by
   uniform integers from the injected ``numpy.random.Generator`` (OS entropy in a release:
   :func:`secure_rng`);
3. the output ``(round(f/gamma) + z) * gamma`` is an exactly representable float.

Laplace: the lattice mechanism is eps-DP for integer queries of sensitivity
``floor(Delta/gamma)+1`` (geometric mechanism); the effective continuous scale
``(floor(Delta/gamma)+1) * gamma / eps`` exceeds ``Delta/eps`` by a relative ``<= 2**-19``.
Gaussian: adding the discrete Gaussian of scale ``sigma/gamma`` to an integer query of
sensitivity ``Delta/gamma + 1`` is exactly ``rho``-zCDP with ``rho = (Delta + gamma)^2 /
(2 sigma^2)`` (CKS Theorem 4); callers inflate ``sigma`` by ``(Delta + gamma)/Delta`` (see
:func:`gaussian_sigma_for`) so that the continuous calibration's claim still holds.
"""

from __future__ import annotations

import math
import secrets
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


def secure_rng() -> np.random.Generator:
    """A generator seeded with 128 bits of OS entropy: the noise source of every release."""
    return np.random.default_rng(secrets.randbits(128))


def gaussian_lattice_step(sigma: float) -> float:
    """Power-of-two lattice step for Gaussian noise of scale ``sigma > 0``: ``<= sigma/2**20``."""
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma must be a finite number > 0, got {sigma!r}")
    return math.ldexp(1.0, math.floor(math.log2(sigma)) - _GRID_BITS)


def gaussian_sigma_for(sigma: float, sensitivity: float) -> float:
    """The lattice scale that keeps a continuous calibration's claim: ``sigma (Delta + gamma) /
    Delta``, so that ``(Delta + gamma)/sigma' = Delta/sigma`` (CKS Theorem 4 with rounding)."""
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ValueError(f"sensitivity must be a finite number > 0, got {sensitivity!r}")
    step = gaussian_lattice_step(sigma)
    return sigma * (sensitivity + step) / sensitivity


def gaussian_mechanism(value: float, sigma: float, rng: np.random.Generator) -> float:
    """``value`` rounded to the lattice plus exact discrete Gaussian noise of scale ``sigma``.

    ``sigma`` is the final scale (already inflated by :func:`gaussian_sigma_for`); ``value``
    must be finite.
    """
    if not math.isfinite(value):
        raise ValueError(f"value must be finite, got {value!r}")
    step = gaussian_lattice_step(sigma)
    s2 = (Fraction(sigma) / Fraction(step)) ** 2
    return float((round(value / step) + sample_discrete_gaussian(s2, rng)) * step)


def sample_discrete_gaussian(sigma2: Fraction, rng: np.random.Generator) -> int:
    """One exact draw of P(z) ∝ exp(-z^2 / (2 sigma2)) on the integers (CKS 2020, Algorithm 3).

    Proposal: discrete Laplace of scale ``t = floor(sigma) + 1``; accept with probability
    ``exp(-(|y| - sigma2/t)^2 / (2 sigma2))``.
    """
    sigma2 = Fraction(sigma2)
    if sigma2 <= 0:
        raise ValueError(f"sigma2 must be > 0, got {sigma2!r}")
    t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1
    while True:
        y = sample_discrete_laplace(Fraction(t), rng)
        gamma = (abs(y) - sigma2 / t) ** 2 / (2 * sigma2)
        if _bernoulli_exp(gamma, rng):
            return y
