"""CAL round trips, joint calibration, central Gaussian multipliers (spec §5, §6.2)."""

import numpy as np
import pytest

from dpcausal.federated import (
    calibrate,
    calibrate_joint,
    central_gaussian_scales,
    cks_epsilon,
    gaussian_noise_multiplier,
    pbm_rdp,
)


@pytest.mark.parametrize("n,m,theta,eps", [
    (500, 256, 0.07611, 1.00004), (500, 1024, 0.03843, 1.00004), (500, 2048, 0.02722, 1.00008),
    (500, 256, 0.1344, 1.89996), (5000, 256, 0.25, 1.20064),
])
def test_round_trip_values(n, m, theta, eps):
    """CAL: the spec's (n, m, theta) -> epsilon at delta = 1e-6 on the default orders."""
    assert cks_epsilon(pbm_rdp(n, m, theta), 1e-6)[0] == pytest.approx(eps, abs=1e-5)


@pytest.mark.parametrize("n,m,eps,theta", [
    (500, 256, 0.1, 0.00843), (500, 256, 1.0, 0.07611), (500, 1024, 0.4, 0.01631),
    (500, 2048, 1.9, 0.04921), (5000, 1024, 0.1, 0.0133),
])
def test_calibrate_matches_spec_table(n, m, eps, theta):
    got = calibrate(n, m, eps, 1e-6)
    assert got == pytest.approx(theta, abs=6e-5)
    achieved = cks_epsilon(pbm_rdp(n, m, got), 1e-6)[0]
    assert eps * (1 - 1e-5) <= achieved <= eps  # spends the budget, never more
    # a theta 1% larger would overspend: the calibration is tight
    assert cks_epsilon(pbm_rdp(n, m, got * 1.01), 1e-6)[0] > eps


def test_cap_at_quarter():
    assert calibrate(5000, 256, 1.3, 1e-6) == 0.25


def test_joint_calibration_spec_values():
    """Joint (w = 0.99, n_g = 500, m1 = m2 = 1024): spec §6.2 (theta1, theta2)."""
    for eps, t1, t2 in [(0.1, 0.004194, 0.000422), (1.0, 0.038237, 0.003854),
                        (1.9, 0.068900, 0.006991)]:
        cal = calibrate_joint((500, 500), 1024, 1024, eps, 1e-6, 0.99)
        assert cal.theta1[0] == pytest.approx(t1, abs=2e-6)
        assert cal.theta2[0] == pytest.approx(t2, abs=2e-6)
        assert eps * (1 - 1e-6) <= cal.epsilon <= eps
        curve = pbm_rdp(500, 1024, cal.theta1[0]) + pbm_rdp(500, 1024, cal.theta2[0])
        np.testing.assert_allclose(cal.rdp_epsilons, curve, rtol=1e-12)


def test_joint_unequal_groups_charges_the_smaller():
    cal = calibrate_joint((300, 700), 256, 256, 1.0, 1e-6)
    assert cal.epsilon <= 1.0
    assert cal.theta1[0] < cal.theta1[1]


@pytest.mark.parametrize("eps,mult", [(0.1, 41.4421), (0.4, 10.7029), (1.0, 4.5309),
                                      (1.9, 2.4970)])
def test_gaussian_multiplier(eps, mult):
    assert gaussian_noise_multiplier(eps, 1e-6) == pytest.approx(mult, abs=2e-4)


def test_central_gaussian_modes():
    per = central_gaussian_scales(500, 500, 1.0, 1.0, 1e-6, "per_group")
    diff = central_gaussian_scales(500, 500, 1.0, 1.0, 1e-6, "difference")
    assert per.sigma[0] == pytest.approx(2 / 500 * 4.5309, rel=1e-4)
    assert diff.variance_dp == pytest.approx(per.variance_dp / 2, rel=1e-12)
    with pytest.raises(ValueError, match="mode must be one of"):
        central_gaussian_scales(500, 500, 1.0, 1.0, 1e-6, "sum")


@pytest.mark.parametrize("eps", [0.0, -1.0, float("inf")])
def test_epsilon_not_positive_refused(eps):
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        calibrate(500, 256, eps, 1e-6)
