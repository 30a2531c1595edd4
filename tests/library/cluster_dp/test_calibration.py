"""Calibration (spec cluster_dp.md §2.8, §4.9 T1-T4, T8): exact values, round trips, refusals."""

import math

import pytest

from dpcausal.cluster_dp import eps1, eps_total, lam_for, uniform_eps, uniform_lam


def test_t1_default_cluster_dp_epsilon_both_accountings():
    assert eps_total(0.8, 0.02, 10, mode="paper") == pytest.approx(0.1 + math.log(13.5), abs=0)
    assert round(eps_total(0.8, 0.02, 10, mode="paper"), 6) == 2.702690
    assert round(eps_total(0.8, 0.02, 10, mode="strict"), 6) == 2.802690


def test_t2_uniform_epsilon():
    assert round(uniform_eps(0.8, 12), 6) == 1.386294
    assert round(uniform_eps(0.5, 12), 6) == 2.564949
    assert uniform_eps(0.8, 12) == pytest.approx(math.log(4), rel=1e-14)


@pytest.mark.parametrize(
    "gk, expected",
    [
        (0.1, 0.999024),
        (0.2, 0.998150),
        (0.25, 0.997714),
        (0.5, 0.995537),
        (0.75, 0.993370),
        (1.0, 0.991213),
    ],
)
def test_t3_exp1a_lambda(gk, expected):
    assert round(lam_for(0.2, 1e-4, gk / 12, 10, mode="paper"), 6) == expected


def test_t3_strict_is_infeasible_at_exp1a():
    with pytest.raises(ValueError, match="infeasible: eps=0.2 <= eps1=0.2"):
        lam_for(0.2, 1e-4, 0.1 / 12, 10, mode="strict")


def test_t4_uniform_lambda():
    assert round(uniform_lam(0.2, 12, 1e-4), 6) == 0.981786
    assert round(uniform_lam(0.2, 12), 6) == 0.981884
    assert uniform_lam(0.2, 12) == pytest.approx(12 / (12 + math.exp(0.2) - 1), rel=1e-14)


@pytest.mark.parametrize("lam, expected", [(0.5, 4.5944), (0.8, 3.2445), (0.9, 2.4914)])
def test_t8_youtube_epsilon(lam, expected):
    assert round(eps_total(lam, 0.0125, 5, mode="paper"), 4) == expected


def test_eps1_branches():
    assert eps1(10, 0.02, "paper") == 0.1
    assert eps1(10, 0.02, "strict") == 0.2
    assert eps1(0, 0.02, "paper") == 100.0  # the 2/gamma branch (paper only)
    assert eps1(0, 0.02, "strict") == math.inf  # E7: sigma = 0 has no finite epsilon
    assert eps1(math.inf, 0.01, "strict") == 0.0 == eps1(math.inf, 0.01, "paper")
    assert eps1(1000, 0.001, "paper") == 0.001  # 1/sigma branch below 2/gamma


@pytest.mark.parametrize("mode", ["paper", "strict"])
@pytest.mark.parametrize(
    "eps, delta, gamma, sigma",
    [
        (3.0, 0.0, 0.02, 10),
        (1.0, 1e-4, 0.05, 20),
        (8.0, 1e-6, 0.001, 5),
        (0.5, 0.0, 1 / 12, math.inf),
    ],
)
def test_round_trip(mode, eps, delta, gamma, sigma):
    lam = lam_for(eps, delta, gamma, sigma, mode=mode)
    assert 0 < lam < 1
    assert eps_total(lam, gamma, sigma, delta, mode=mode) == pytest.approx(eps, rel=1e-12)
    # smallest feasible: a slightly smaller lambda costs more epsilon
    assert eps_total(lam * (1 - 1e-6), gamma, sigma, delta, mode=mode) > eps


@pytest.mark.parametrize("K, eps, delta", [(2, 0.3, 0.0), (12, 2.0, 1e-4), (8, 5.0, 0.0)])
def test_uniform_round_trip_and_theorem_3_1_special_case(K, eps, delta):
    lam = uniform_lam(eps, K, delta)
    assert uniform_eps(lam, K, delta) == pytest.approx(eps, rel=1e-12)
    # Theorem 3.1 at gamma = 1/K, sigma = inf is Theorem A.5
    assert eps_total(lam, 1 / K, math.inf, delta, mode="paper") == pytest.approx(eps, rel=1e-12)
    assert lam_for(eps, delta, 1 / K, math.inf, mode="strict") == pytest.approx(lam, rel=1e-12)


def test_theorem_3_1_delta_form_matches():
    # delta(eps_t) = max(0, 1 - lam + lam gamma (1 - e^eps_t)) must vanish at the calibrated eps_t
    lam, gamma, delta = 0.9, 0.02, 1e-3
    eps_t = eps_total(lam, gamma, 10, delta, "paper") - 0.1
    assert 1 - lam + lam * gamma * (1 - math.exp(eps_t)) == pytest.approx(delta, abs=1e-14)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: lam_for(0.0, 0, 0.02, 10), "eps must be a number > 0, got 0.0"),
        (lambda: lam_for(1.0, 0, 0.0, 10), "gamma=0 leaves the resampling step"),
        (lambda: lam_for(1.0, 0, 1.5, 10), r"gamma must be a number in \[0, 1\], got 1.5"),
        (lambda: lam_for(1.0, 1.0, 0.02, 10), "delta must be < 1"),
        (lambda: eps_total(1.0, 0.02, 10), r"lam must be a number in \[0, 1\), got 1.0"),
        (lambda: eps_total(0.5, 0.02, -1), "sigma must be >= 0"),
        (lambda: eps_total(0.5, 0.02, 10, delta=0.6), "delta=0.6 >= 1 - lam"),
        (lambda: eps_total(0.5, 0.02, 10, mode="loose"), "mode must be one of"),
        (lambda: uniform_eps(0.5, 1), "K must be an integer >= 2, got 1"),
    ],
)
def test_refusals(call, match):
    with pytest.raises(ValueError, match=match):
        call()
