"""Accountant: reference values, closed form vs convolution (CF), ALG-3v5, TH-4.1b, CKS, TH-3.2."""

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import RdpAccountant
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcausal.federated import DEFAULT_ORDERS, cks_epsilon, composed_curve, pbm_rdp

from ._reference import exact_pbm_rdp, log_binom_pmf, log_convolve, renyi, sum_distribution

# spec §5, reference RDP values: m * D_a(P1 || P2)
REFERENCE = [
    (100, 1, 0.1, 2, 0.00167079704535),
    (500, 256, 0.07611, 2, 0.0485934967),
    (500, 256, 0.07611, 10, 0.243212131),
    (500, 1024, 0.03843, 32, 0.779687492),
    (1000, 1, 0.25, 2, 0.00133600673),
    (10000, 64, 0.1, 8, 0.00426705777),
    (500, 2048, 0.00298, 128, 0.0372492663),
]


@pytest.mark.parametrize("n,m,theta,order,value", REFERENCE)
def test_reference_values(n, m, theta, order, value):
    assert pbm_rdp(n, m, theta, [order])[0] == pytest.approx(value, rel=1e-7)


def test_reverse_direction_is_smaller_and_max_taken():
    # spec §5: the reverse direction is 0.242629241 at (500, 256, 0.07611, a=10)
    q = 0.5 - 0.07611
    p1 = log_binom_pmf(500, q)
    p2 = log_convolve(log_binom_pmf(499, q), log_binom_pmf(1, 1 - q))
    assert 256 * renyi(p2, p1, 10) == pytest.approx(0.242629241, rel=1e-7)
    assert pbm_rdp(500, 256, 0.07611, [10])[0] == pytest.approx(256 * renyi(p1, p2, 10), rel=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_closed_form_equals_convolution(seed):
    """CF: closed form = per-trial convolution form (m * D_a) to 1e-6 relative."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 400))
    theta = float(rng.uniform(0.005, 0.25))
    order = float(rng.choice([1.1, 1.5, 2.0, 7.3, 32.0, 128.0, 512.0]))
    m = int(rng.integers(1, 50))
    q = 0.5 - theta
    p1 = log_binom_pmf(n, q)
    p2 = log_convolve(log_binom_pmf(n - 1, q), log_binom_pmf(1, 1 - q))
    ref = m * max(renyi(p1, p2, order), renyi(p2, p1, order))
    assert pbm_rdp(n, m, theta, [order])[0] == pytest.approx(ref, rel=1e-6)


@pytest.mark.parametrize("n,m,theta,order,exact,approx", [
    (100, 4, 0.1, 2, 0.006679014966, 0.006683188181),
    (100, 16, 0.2, 2, 0.12286044714, 0.12330953932),
    (50, 32, 0.25, 4, 1.82098551, 1.84979465),
])
def test_alg5_bounds_alg3(n, m, theta, order, exact, approx):
    """ALG-3v5: the exact accountant (loop reference) matches the spec; Alg 5 is above it."""
    assert exact_pbm_rdp(n, m, theta, order) == pytest.approx(exact, rel=1e-7)
    ours = pbm_rdp(n, m, theta, [order])[0]
    assert ours == pytest.approx(approx, rel=1e-7)
    assert ours >= exact_pbm_rdp(n, m, theta, order)


def test_accountant_bounds_the_real_mechanism_and_catches_a_broken_one():
    """DP-MC (exact): the encoder's output sum on worst neighbours never beats the curve.

    Neighbours: all clients at -R vs one client moved to +R. A curve understated by using
    0.8 theta (a deliberately broken accountant) must be caught.
    """
    n, m, R = 6, 3, 1.0
    for theta in (0.05, 0.15, 0.25):
        d = sum_distribution([-R] * n, R, m, theta)
        d_prime = sum_distribution([-R] * (n - 1) + [R], R, m, theta)
        for order in (1.5, 2.0, 8.0, 64.0):
            true = max(renyi(d, d_prime, order), renyi(d_prime, d, order))
            assert pbm_rdp(n, m, theta, [order])[0] >= true * (1 - 1e-9)
            broken = pbm_rdp(n, m, 0.8 * theta, [order])[0]
            assert broken < true  # the check above would fail for the broken accountant


def test_gaussian_approximation_th41b():
    """TH-4.1b: eps(a) / (8 a m theta^2 / (n (1 - 4 theta^2))) in [0.999, 1.04]."""
    orders = [2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    for n, m, theta in [(500, 256, 0.076), (500, 1024, 0.15), (5000, 64, 0.1), (2000, 8, 0.01)]:
        approx = 8 * np.array(orders) * m * theta**2 / (n * (1 - 4 * theta**2))
        ratio = pbm_rdp(n, m, theta, orders) / approx
        assert np.all((ratio >= 0.999) & (ratio <= 1.04)), ratio


def test_monotone_in_theta_m_and_inverse_n():
    base = pbm_rdp(500, 64, 0.1)
    assert np.all(pbm_rdp(500, 64, 0.11) > base)
    assert np.all(pbm_rdp(500, 128, 0.1) > base)
    assert np.all(pbm_rdp(400, 64, 0.1) > base)


def test_cks_matches_spec_and_dp_accounting():
    """CKS: Gaussian noise multiplier 1.0 -> 5.22154 at 1e-6, 4.72851 at 1e-5; 4.5309 -> 1.0."""
    a = np.array(DEFAULT_ORDERS)
    assert cks_epsilon(a / 2, 1e-6)[0] == pytest.approx(5.22154, abs=1e-5)
    assert cks_epsilon(a / 2, 1e-5)[0] == pytest.approx(4.72851, abs=1e-5)
    assert cks_epsilon(a / (2 * 4.5309**2), 1e-6)[0] == pytest.approx(1.0000, abs=1e-4)
    acc = RdpAccountant(list(DEFAULT_ORDERS))
    acc.compose(dp_event.GaussianDpEvent(1.0))
    assert cks_epsilon(a / 2, 1e-6)[0] == pytest.approx(acc.get_epsilon(1e-6), rel=1e-12)
    # the textbook conversion eps + log(1/delta)/(a-1) is looser; CKS must be below it
    textbook = min(e + math.log(1e6) / (o - 1) for e, o in zip(a / 2, a, strict=True))
    assert cks_epsilon(a / 2, 1e-6)[0] < textbook


def test_composition_th32():
    """TH-3.2: composed curve = max over groups of (mean + second moment); not double-charged."""
    n, t1, t2 = (500, 300), (0.05, 0.06), (0.01, 0.012)
    curve = composed_curve(n, 256, t1, 128, t2)
    per_group = [pbm_rdp(g, 256, a) + pbm_rdp(g, 128, b) for g, a, b in zip(n, t1, t2, strict=True)]
    np.testing.assert_allclose(curve, np.maximum(*per_group), rtol=1e-12)
    assert np.all(curve < per_group[0] + per_group[1])  # groups are not summed
    eps_total = cks_epsilon(curve, 1e-6)[0]
    for part in per_group + [pbm_rdp(500, 256, 0.05)]:
        assert eps_total >= cks_epsilon(part, 1e-6)[0]


@pytest.mark.parametrize("theta", [0.0, -0.1, 0.2500001, 0.5, float("nan")])
def test_theta_outside_range_refused(theta):
    with pytest.raises(ValueError, match=r"theta must be in \(0, 1/4\]"):
        pbm_rdp(100, 4, theta)


def test_bad_orders_and_counts_refused():
    with pytest.raises(ValueError, match="orders must be"):
        pbm_rdp(100, 4, 0.1, [1.0, 2.0])
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        pbm_rdp(0, 4, 0.1)
    with pytest.raises(ValueError, match="delta must be in"):
        cks_epsilon(pbm_rdp(100, 4, 0.1), 0.0)


@settings(max_examples=40, deadline=None)
@given(x=st.lists(st.floats(-1.0, 1.0), min_size=2, max_size=5),
       new=st.floats(-1.0, 1.0), m=st.integers(1, 3), theta=st.floats(0.01, 0.25),
       order=st.sampled_from([1.5, 2.0, 8.0, 32.0]))
def test_random_neighbours_never_exceed_curve(x, new, m, theta, order):
    """Sensitivity fuzz: any replace-one neighbour pair stays within the worst-case curve."""
    d = sum_distribution(x, 1.0, m, theta)
    d_prime = sum_distribution(x[:-1] + [new], 1.0, m, theta)
    true = max(renyi(d, d_prime, order), renyi(d_prime, d, order))
    assert pbm_rdp(len(x), m, theta, [order])[0] >= true - 1e-12
