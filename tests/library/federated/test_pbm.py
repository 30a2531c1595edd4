"""Encoders/decoders: TH-4.1a (unbiased, variance bound, exact variance), clipping."""

import numpy as np
import pytest

from dpcausal.federated import (
    clip_outcomes,
    decode_mean,
    decode_second_moment,
    mean_noise_bound,
    pbm2_encode,
    pbm_encode,
    private_variance,
)


def test_mean_unbiased_and_variance_th41a():
    rng = np.random.default_rng(0)
    R, m, theta, n, reps = 1.0, 16, 0.1, 200, 4000
    x = rng.uniform(-R, R, n)
    truth = x.mean()
    est = np.array([decode_mean(int(pbm_encode(x, R, m, theta, rng).sum()), n, m, theta, R)
                    for _ in range(reps)])
    se = est.std(ddof=1) / np.sqrt(reps)
    assert abs(est.mean() - truth) < 4 * se
    bound = mean_noise_bound(n, m, theta, R)
    assert bound == pytest.approx(R**2 / (4 * n * m * theta**2))
    exact = bound - (x**2).sum() / (n**2 * m)  # spec §2.1 [D]
    assert est.var(ddof=1) <= bound * 1.05
    assert est.var(ddof=1) == pytest.approx(exact, rel=0.05)


def test_second_moment_unbiased():
    rng = np.random.default_rng(1)
    R, m, theta, n, reps = 2.0, 32, 0.2, 100, 3000
    x = rng.uniform(-R, R, n)
    est = np.array([decode_second_moment(int(pbm2_encode(x, R, m, theta, rng).sum()), n, m,
                                         theta, R) for _ in range(reps)])
    se = est.std(ddof=1) / np.sqrt(reps)
    assert abs(est.mean() - (x**2).sum()) < 4 * se
    assert est.var(ddof=1) <= n * R**4 / (16 * m * theta**2) * 1.05


def test_decoders_by_hand():
    # n=4, m=10, theta=0.2, R=1: S=24 -> (1/(4*10*0.2)) * (24 - 20) = 0.5
    assert decode_mean(24, 4, 10, 0.2, 1.0) == pytest.approx(0.5)
    # S2_hat = 4/2 + (1/(2*10*0.2)) * (24 - 20) = 2 + 1 = 3
    assert decode_second_moment(24, 4, 10, 0.2, 1.0) == pytest.approx(3.0)
    # (3 - 4 * 0.25) / 3 = 2/3, debiased by 4/3 * 0.01, clipped at R^2 n/(n-1) = 4/3
    assert private_variance(3.0, 0.5, 4, 0.01, 1.0) == pytest.approx(2 / 3 + 4 / 300)
    assert private_variance(3.0, 0.5, 4, 0.01, 1.0, debias=False) == pytest.approx(2 / 3)
    assert private_variance(-5.0, 0.5, 4, 0.01, 1.0) == 0.0
    assert private_variance(50.0, 0.0, 4, 0.0, 1.0) == pytest.approx(4 / 3)


def test_clipping_and_encoder_clips():
    x = np.array([-3.0, -1.0, 0.0, 0.5, 1.0, 7.0])
    clipped = clip_outcomes(x, 1.0)  # no count returned (it would be exact)
    np.testing.assert_array_equal(clipped, [-1, -1, 0, 0.5, 1, 1])
    rng = np.random.default_rng(0)
    z = pbm_encode(np.full(20000, 7.0), 1.0, 8, 0.25, rng)  # p = 3/4 after clipping
    assert z.min() >= 0 and z.max() <= 8
    assert z.mean() == pytest.approx(6.0, abs=0.05)
    with pytest.raises(ValueError, match="outcomes must be finite"):
        clip_outcomes(np.array([0.0, np.nan]), 1.0)
    with pytest.raises(ValueError, match="R must be a finite outcome bound"):
        clip_outcomes(x, 0.0)
