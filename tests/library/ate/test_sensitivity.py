"""Noise scales against the spec's §6.8 tables (exact values, pure functions of public inputs)."""

import math

import pytest

from dpcausal.ate.ci import critical_values, private_variance
from dpcausal.ate.sensitivity import (
    ate_sensitivity,
    calibrate,
    outcome_scale,
    sqrt_variance_sensitivity,
)

# (setting, estimator, n, K, B_pi, bounds, zeta, theorem1, lemma, released_code): spec §6.8(a)
SIGMA1_TABLE = [
    ("A", "g", 5000, 200, 5, (-1, 1), 1.5, 0.013934, 0.013934, 0.013867),
    ("A", "ipw", 5000, 200, 1 / 0.0035, (-1, 1), 1.5, 1.9905, 1.0334, 1.0286),
    ("A", "ipw", 5000, 200, 1 / 0.05, (-1, 1), 1.5, 0.13934, 0.07234, 0.07200),
    ("A", "ipw", 5000, 200, 1 / 0.2, (-1, 1), 1.5, 0.03483, 0.01808, 0.01800),
    ("A", "aipw", 5000, 200, 1 / 0.0035, (-1, 1), 1.5, 3.9950, 3.9950, 2.0638),
    ("A", "aipw", 5000, 200, 1 / 0.05, (-1, 1), 1.5, 0.29261, 0.29261, 0.15067),
    ("A", "aipw", 5000, 200, 1 / 0.2, (-1, 1), 1.5, 0.08360, 0.08360, 0.04267),
    ("B", "g", 250000, 500, 5, (-1, 1), 1.5, 0.005355, 0.005355, 0.005344),
    ("B", "ipw", 250000, 500, 5, (-1, 1), 1.5, 0.013387, 0.006707, 0.006693),
    ("B", "aipw", 250000, 500, 5, (-1, 1), 1.5, 0.032128, 0.032128, 0.016053),
    ("C", "g", 50000, 500, 10, (-1, 1), 1.5, 0.005397, 0.005397, None),
    ("C", "ipw", 50000, 500, 10, (0, 1), 1.5, 0.026987, 0.013627, 0.013600),
    ("C", "aipw", 50000, 500, 10, (-1, 1), 1.5, 0.059371, 0.059371, None),
    ("C", "g", 50000, 500, 10, (-1, 1), 0.5, 0.01619, 0.01619, None),
    ("C", "ipw", 50000, 500, 10, (0, 1), 0.5, 0.08096, 0.04088, 0.04080),
    ("C", "aipw", 50000, 500, 10, (-1, 1), 0.5, 0.17811, 0.17811, None),
]


@pytest.mark.parametrize("row", SIGMA1_TABLE, ids=lambda r: f"{r[0]}-{r[1]}-{r[4]:.4g}-{r[6]}")
def test_sigma1_table(row):
    _, est, n, K, B_pi, bounds, zeta, thm1, lemma, code = row
    for mode, target in (("theorem1", thm1), ("lemma", lemma), ("released_code", code)):
        if target is None:
            continue
        cal = calibrate(est, n, K, bounds, 1 / B_pi, zeta, ci_share=0.0, sensitivity=mode)
        assert cal.sigma_ate == pytest.approx(target, rel=6e-4, abs=6e-6), mode


def test_binary_outcomes_halve_g_noise_and_match_released_code():
    """Spec §6.8: C, G with B_mu = 0.5 (bounds (0,1), centred) is 0.002699; code's 2/n + 2/K."""
    cal = calibrate("g", 50000, 500, (0, 1), 0.1, 1.5, ci_share=0.0)
    assert cal.B_mu == 0.5 and cal.sigma_ate == pytest.approx(0.002699, rel=5e-4)
    code = calibrate("g", 50000, 500, (0, 1), 0.1, 1.5, 0.0, sensitivity="released_code")
    assert code.sigma_ate == pytest.approx(0.002693, rel=5e-4)
    aipw = calibrate("aipw", 50000, 500, (0, 1), 0.1, 1.5, 0.0, sensitivity="released_code")
    assert aipw.sigma_ate == pytest.approx(0.013600, rel=5e-4)


@pytest.mark.parametrize("K, g, ipw, aipw", [(2, 2.667, 13.33, 29.33), (25, 0.1112, 0.5562, 1.224),
                                              (50, 0.05456, 0.2728, 0.6001),
                                              (100, 0.02707, 0.1354, 0.2978),
                                              (200, 0.01353, 0.06767, 0.1489)])
def test_experiment_d_sigma1(K, g, ipw, aipw):
    for est, target in (("g", g), ("ipw", ipw), ("aipw", aipw)):
        cal = calibrate(est, 20000, K, (-1, 1), 0.1, 1.5, ci_share=0.0, sensitivity="theorem1")
        assert cal.sigma_ate == pytest.approx(target, rel=1.5e-3)


@pytest.mark.parametrize("setting, est, n, K, B_pi, target", [
    ("A", "g", 5000, 200, 5, 0.006201), ("B", "g", 250000, 500, 5, 0.000530),
    ("B", "aipw", 250000, 500, 5, 0.003178), ("C", "ipw", 50000, 500, 10, 0.005947)])
def test_sigma2_paper_at_zeta2_one(setting, est, n, K, B_pi, target):
    assert (sqrt_variance_sensitivity(est, n, K, 1.0, B_pi, "paper")
            == pytest.approx(target, rel=1e-3))


def test_sigma2_tight_example():
    """Spec §2.5: exp. A, G, zeta2 = 1.5 sqrt(0.1): tight 0.00179 vs paper 0.0131."""
    cal_t = calibrate("g", 5000, 200, (-1, 1), 0.2, 1.5, ci_share=0.1, sigma2="tight")
    cal_p = calibrate("g", 5000, 200, (-1, 1), 0.2, 1.5, ci_share=0.1, sigma2="paper")
    assert cal_t.sigma_var == pytest.approx(0.00179, rel=3e-3)
    assert cal_p.sigma_var == pytest.approx(0.0131, rel=3e-3)


def test_theorem1_equals_lemma_for_g_and_aipw_and_doubles_ipw():
    for est in ("g", "aipw"):
        assert ate_sensitivity(est, 1000, 50, 1, 5, "theorem1") == pytest.approx(
            ate_sensitivity(est, 1000, 50, 1, 5, "lemma"))
    ratio = ate_sensitivity("ipw", 10**6, 50, 1, 5, "theorem1") / ate_sensitivity(
        "ipw", 10**6, 50, 1, 5, "lemma")
    assert ratio == pytest.approx(2.0, rel=1e-3)


def test_outcome_scale_shift_trick():
    assert outcome_scale("g", (0, 1)) == (0.5, 0.5)
    assert outcome_scale("aipw", (-3, 1)) == (2.0, -1.0)
    assert outcome_scale("ipw", (-3, 1)) == (3.0, 0.0)


def test_budget_split():
    cal = calibrate("g", 5000, 200, (-1, 1), 0.2, 1.5, ci_share=0.1)
    assert cal.zeta1 == pytest.approx(1.5 * math.sqrt(0.9))
    assert cal.zeta2 == pytest.approx(1.5 * math.sqrt(0.1))
    assert math.hypot(cal.zeta1, cal.zeta2) == pytest.approx(1.5)


def test_ci_constants():
    c, z = critical_values(0.05, 0.01)
    assert c == pytest.approx(2.0537, abs=1e-4)
    assert z == pytest.approx(2.3263, abs=1e-4)


def test_private_variance_formulas():
    z = 2.3263478740408408
    assert private_variance(0.1, 0.02, 0.01, 0.01, "paper") == pytest.approx(
        0.1**2 + 0.02**2 + z * 0.01**2)
    assert private_variance(-0.05, 0.02, 0.01, 0.01, "conservative") == pytest.approx(
        (0 + z * 0.01) ** 2 + 0.02**2)
    with pytest.raises(ValueError, match="ci mode"):
        private_variance(0.1, 0.02, 0.01, 0.01, "exact")
