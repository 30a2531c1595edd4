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
from typing import Any

import numpy as np

_GRID_BITS = 20
_SCALE_BITS = 40  # significant bits of the Laplace scale's numerator (< 2**41)


def lattice_step(sensitivity: float) -> float:
    """Power-of-two lattice step for a statistic of sensitivity ``Delta > 0``:
    ``<= Delta/2**20``."""
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ValueError(f"sensitivity must be a finite number > 0, got {sensitivity!r}")
    return math.ldexp(1.0, math.floor(math.log2(sensitivity)) - _GRID_BITS)


def lattice_sensitivity(sensitivity: float) -> int:
    """Sensitivity in lattice steps after rounding both neighbours: ``floor(Delta/gamma) + 1``."""
    return math.floor(sensitivity / lattice_step(sensitivity)) + 1


def discrete_laplace_scale(sensitivity: float, epsilon: float) -> Fraction:
    """The scale ``t / 2**q`` of the integer Laplace noise of :func:`laplace_mechanism`: the
    exact ``L / epsilon`` (``L`` = :func:`lattice_sensitivity`) rounded UP to at most 41
    significant bits, so the sampler runs in 64-bit integers.

    Rounding up only adds noise: the mechanism is ``L / scale <= epsilon``-DP, and the relative
    excess is below ``2**-39`` (none when ``L / epsilon`` already has 41 bits or fewer, e.g. any
    epsilon that is a power of two).
    """
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    exact = Fraction(lattice_sensitivity(sensitivity)) / Fraction(epsilon)
    q = max(0, _SCALE_BITS - (exact.numerator // exact.denominator).bit_length())
    return Fraction(-((-exact.numerator << q) // exact.denominator), 1 << q)


def effective_scale(sensitivity: float, epsilon: float) -> float:
    """Continuous-equivalent Laplace scale of :func:`laplace_mechanism`: its integer scale
    (:func:`discrete_laplace_scale`, ``~ (floor(D/g)+1) / eps``) times the step ``g``.

    Thm II.1 (spec §1.4) with the lattice sensitivity; ``0`` for a zero-sensitivity statistic.
    """
    if sensitivity == 0:
        return 0.0
    return float(discrete_laplace_scale(sensitivity, epsilon) * Fraction(lattice_step(sensitivity)))


def laplace_mechanism(value: Any, sensitivity: Any, epsilon: float,
                      rng: np.random.Generator) -> Any:
    """Release ``value`` (a float, or an array with a sensitivity per entry or one for all) with
    epsilon-DP lattice Laplace noise, i.i.d. per entry (see module docstring); an array is drawn
    in one vectorised pass, each entry on the lattice of its own sensitivity.

    A statistic with sensitivity 0 is a constant of the public occupancy and is returned as is.
    """
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    if np.ndim(value) == 0 and np.ndim(sensitivity) == 0:
        if sensitivity == 0:
            return float(value)
        step = lattice_step(sensitivity)
        scale = discrete_laplace_scale(sensitivity, epsilon)
        return float((round(float(value) / step) + sample_discrete_laplace(scale, rng)) * step)
    values = np.asarray(value, dtype=float)
    shape = np.broadcast_shapes(values.shape, np.shape(sensitivity))
    values = np.broadcast_to(values, shape)
    distinct, which = np.unique(np.broadcast_to(np.asarray(sensitivity, dtype=float), shape),
                                return_inverse=True)
    noisy = distinct > 0
    scales = [discrete_laplace_scale(d, epsilon) if d > 0 else Fraction(1) for d in distinct]
    steps = np.array([lattice_step(d) if d > 0 else 1.0 for d in distinct])[which]
    t = np.array([sc.numerator for sc in scales], dtype=np.int64)[which]
    s = np.array([sc.denominator for sc in scales], dtype=np.int64)[which]
    base = np.rint(values / steps).astype(np.int64)
    out = (base + _discrete_laplace_array(t.ravel(), s.ravel(), rng).reshape(shape)) * steps
    return np.where(noisy[which].reshape(shape), out, values)


def sample_discrete_laplace(scale: Fraction, rng: np.random.Generator,
                            size: int | tuple[int, ...] | None = None) -> Any:
    """Exact draws of ``P(z) ∝ exp(-|z|/scale)`` on the integers (CKS 2020, Algorithm 2): one int
    for ``size=None``, else an int64 array of that shape, drawn in vectorised passes.

    Every attempt is Algorithm 2's: ``u`` uniform below ``t`` (``scale = t/s``), accepted with
    probability ``exp(-u/t)``; ``v`` the number of successes of Bernoulli(exp(-1)) before a
    failure; ``y = (u + t v) // s``; a uniform sign, rejecting ``-0``; rejected attempts are
    redrawn. One draw runs it in Python integers (numpy's per-call cost would dominate); an
    array needs ``t, s < 2**62`` (:func:`discrete_laplace_scale` gives ``t < 2**42``). The two
    are equal in law (``tests/library/test_noise_vectorised.py``).
    """
    scale = Fraction(scale)
    if scale <= 0:
        raise ValueError(f"scale must be > 0, got {scale!r}")
    t, s = scale.numerator, scale.denominator
    if size is None:
        return _discrete_laplace_one(t, s, rng)
    if t >= 2**62 or s >= 2**62:
        raise ValueError(f"scale {scale} is out of the exact sampler's range (a numerator or "
                         "denominator of 2^62 or more)")
    shape = (size,) if isinstance(size, int) else tuple(size)
    count = math.prod(shape)
    return _discrete_laplace_array(np.full(count, t, dtype=np.int64),
                                   np.full(count, s, dtype=np.int64), rng).reshape(shape)


def _discrete_laplace_array(t: np.ndarray, s: np.ndarray, rng: np.random.Generator
                            ) -> np.ndarray:
    """One Algorithm-2 draw per entry, of scale ``t[i] / s[i]`` (int64 arrays, ``< 2**62``)."""
    out = np.empty(t.size, dtype=np.int64)
    pending = np.arange(t.size)
    while pending.size:
        tp = t[pending]
        u = rng.integers(0, tp, dtype=np.int64)
        kept = _bernoulli_exp_ratio(u, tp, rng)
        u, idx, tk = u[kept], pending[kept], tp[kept]
        v = _failures_before_success(idx.size, rng)
        if np.any(v >= (2**62 - tk) // tk):                  # beyond int64: exact Python ints
            y = np.array([(int(a) + int(b) * int(c)) // int(d)
                          for a, b, c, d in zip(u, tk, v, s[idx], strict=True)], dtype=object)
        else:
            y = (u + tk * v) // s[idx]
        negative = rng.integers(0, 2, size=idx.size) == 1
        ok = ~(negative & (y == 0))
        out[idx[ok]] = np.where(negative[ok], -y[ok], y[ok]).astype(np.int64)
        pending = np.setdiff1d(pending, idx[ok], assume_unique=True)
    return out


def _bernoulli_exp_ratio(num: np.ndarray, den: np.ndarray, rng: np.random.Generator
                         ) -> np.ndarray:
    """Exact Bernoulli(exp(-num/den)) per entry, for integers ``0 <= num <= den < 2**63`` (CKS
    2020, Algorithm 1 with gamma = num/den <= 1): ``k`` counts successes of Bernoulli(gamma/k),
    each drawn as Bernoulli(num/den) AND Bernoulli(1/k) (independent, so their product has
    probability gamma/k without forming ``den * k``); the result is ``k`` odd."""
    k = np.ones(num.shape, dtype=np.int64)
    active = np.arange(num.size)
    while active.size:
        hit = ((rng.integers(0, den[active], dtype=np.int64) < num[active])
               & (rng.integers(0, k[active]) == 0))
        k[active[hit]] += 1
        active = active[hit]
    return k % 2 == 1


def _failures_before_success(size: int, rng: np.random.Generator) -> np.ndarray:
    """Per entry, how many Bernoulli(exp(-1)) draws succeed before the first failure
    (Algorithm 2's ``v``; geometric, exact)."""
    v = np.zeros(size, dtype=np.int64)
    active = np.arange(size)
    while active.size:
        ones = np.ones(active.size, dtype=np.int64)
        hit = _bernoulli_exp_ratio(ones, ones, rng)
        v[active[hit]] += 1
        active = active[hit]
    return v


def _discrete_laplace_one(t: int, s: int, rng: np.random.Generator) -> int:
    """One draw of Algorithm 2 (see :func:`sample_discrete_laplace`) in Python integers."""
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
    Delta`` with ``gamma`` = :func:`gaussian_lattice_step` of ``sigma``, so that
    ``(Delta + gamma)/sigma' = Delta/sigma`` (CKS Theorem 4 with rounding). For reporting:
    :func:`gaussian_mechanism` forms the same scale exactly, with the same step."""
    in_steps, step = _inflated_over_step(sigma, sensitivity)
    return float(in_steps * Fraction(step))


def _inflated_over_step(sigma: float, sensitivity: float) -> tuple[Fraction, float]:
    """``(sigma' / gamma, gamma)``: the inflated scale in lattice steps, in exact rationals,
    with ONE step ``gamma`` taken from the calibrated ``sigma`` (the step of the inflated
    scale could be twice as large, which would shrink the claimed ratio by ``~2**-21``)."""
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ValueError(f"sensitivity must be a finite number > 0, got {sensitivity!r}")
    step = gaussian_lattice_step(sigma)
    delta = Fraction(sensitivity)
    return Fraction(sigma) * (delta + Fraction(step)) / delta / Fraction(step), step


def gaussian_mechanism(value: float, sigma: float, sensitivity: float,
                       rng: np.random.Generator) -> float:
    """``value`` rounded to the lattice plus exact discrete Gaussian noise: the release of a
    statistic of L2 sensitivity ``sensitivity`` calibrated to the continuous scale ``sigma``.

    The lattice step ``gamma`` is :func:`gaussian_lattice_step` of ``sigma``; the noise has
    scale ``sigma (Delta + gamma)/Delta`` (:func:`gaussian_sigma_for`) in exact rationals, so the
    lattice sensitivity over the noise scale is exactly ``Delta/sigma`` (CKS Theorem 4).
    ``value`` must be finite.
    """
    if not math.isfinite(value):
        raise ValueError(f"value must be finite, got {value!r}")
    in_steps, step = _inflated_over_step(sigma, sensitivity)
    return float((round(value / step) + sample_discrete_gaussian(in_steps ** 2, rng)) * step)


def gaussian_vector_mechanism(values: np.ndarray, sigma: float, sensitivity: float,
                              rng: np.random.Generator) -> np.ndarray:
    """A vector of ``p`` finite values of joint L2 sensitivity ``Delta``, each rounded to the
    lattice ``gamma Z`` (``gamma`` = :func:`gaussian_lattice_step` of ``sigma``) plus i.i.d.
    exact discrete Gaussian noise.

    Rounding moves each coordinate of two neighbours apart by at most one more step, so the
    lattice vectors differ by at most ``Delta + gamma ceil(sqrt(p))`` in L2; the noise scale is
    ``sigma (Delta + gamma ceil(sqrt(p))) / Delta`` in exact rationals, so that ratio over the
    scale is exactly ``Delta / sigma``: ``(Delta/sigma)^2/2``-zCDP by the multivariate discrete
    Gaussian (Canonne, Kamath, Steinke 2020, Theorem 14), as :func:`gaussian_mechanism` for
    one coordinate.
    """
    vals = np.asarray(values, dtype=float).ravel()
    if not np.all(np.isfinite(vals)):
        raise ValueError("values must be finite")
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ValueError(f"sensitivity must be a finite number > 0, got {sensitivity!r}")
    step = gaussian_lattice_step(sigma)
    widened = Fraction(sensitivity) + Fraction(step) * (math.isqrt(max(vals.size - 1, 0)) + 1)
    in_steps = Fraction(sigma) * widened / Fraction(sensitivity) / Fraction(step)
    base = np.array([round(v / step) for v in vals.tolist()], dtype=object)
    noise = sample_discrete_gaussian(in_steps ** 2, rng, size=vals.size)
    return np.array([float((int(b) + int(z)) * step) for b, z in zip(base, noise, strict=True)])


def gaussian_vector_sigma(sigma: float, sensitivity: float, size: int) -> float:
    """The noise sd per coordinate of :func:`gaussian_vector_mechanism` for ``size``
    coordinates: ``sigma (Delta + gamma ceil(sqrt(p))) / Delta`` (for reporting)."""
    step = gaussian_lattice_step(sigma)
    widened = sensitivity + step * (math.isqrt(max(size - 1, 0)) + 1)
    return sigma * widened / sensitivity


def sample_discrete_gaussian(sigma2: Fraction, rng: np.random.Generator,
                             size: int | None = None) -> Any:
    """Exact draws of P(z) ∝ exp(-z^2 / (2 sigma2)) on the integers (CKS 2020, Algorithm 3):
    one int for ``size=None``, else an int64 array of ``size`` draws.

    Proposal: discrete Laplace of scale ``t = floor(sigma) + 1`` (vectorised,
    :func:`sample_discrete_laplace`); accept with probability
    ``exp(-(|y| - sigma2/t)^2 / (2 sigma2))`` in exact rationals; rejected proposals are redrawn.
    """
    sigma2 = Fraction(sigma2)
    if sigma2 <= 0:
        raise ValueError(f"sigma2 must be > 0, got {sigma2!r}")
    t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1
    if size is None:
        while True:
            y = _discrete_laplace_one(t, 1, rng)
            if _bernoulli_exp((abs(y) - sigma2 / t) ** 2 / (2 * sigma2), rng):
                return y
    out: list[int] = []
    while len(out) < size:
        for y in sample_discrete_laplace(Fraction(t), rng, size=size - len(out)).tolist():
            if _bernoulli_exp((abs(y) - sigma2 / t) ** 2 / (2 * sigma2), rng):
                out.append(y)
    return np.array(out, dtype=np.int64)
