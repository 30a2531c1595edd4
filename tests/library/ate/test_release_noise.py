"""The release's discrete Gaussian against dp_accounting's exact discrete-Gaussian privacy loss
(exact noise, never a float sampler; privacy_testing.md, 'Exact noise on a lattice').

Each of the release's two draws adds N_Z(0, (sigma'/gamma)^2) to an integer query of lattice
sensitivity m = floor(Delta/gamma) + 1, with sigma' = gaussian_sigma_for(sigma, Delta) and
sigma/gamma >= 2^20. Its (eps, delta) curve must lie on or below the zeta_j-GDP curve the release
is charged with, and within a relative 1e-5 of it (the margin stated in draw_release's
docstring); a scale 0.8x must exceed it.
"""

import math

import pytest
from dp_accounting.pld.privacy_loss_mechanism import DiscreteGaussianPrivacyLoss

from dpcausal.accounting import gdp_delta
from dpcausal.ate.sensitivity import calibrate
from dpcausal.noise import gaussian_lattice_step, gaussian_sigma_for

MARGIN = 1e-5


def _discrete_loss(sigma, sensitivity, factor=1.0):
    scale = gaussian_sigma_for(sigma, sensitivity) * factor
    gamma = gaussian_lattice_step(gaussian_sigma_for(sigma, sensitivity))
    assert scale / gamma >= 2**20 * factor
    m = math.floor(sensitivity / gamma) + 1
    return DiscreteGaussianPrivacyLoss(scale / gamma, sensitivity=m)


@pytest.mark.slow
@pytest.mark.parametrize("factor, matches", [(1.0, True), (0.8, False)])
def test_discrete_gaussian_matches_the_charged_gdp_curve(factor, matches):
    cal = calibrate("aipw", 5000, 50, (-1, 1), 0.2, zeta=1.5, ci_share=0.1)
    for sigma, sensitivity, zeta_j in ((cal.sigma_ate, cal.sensitivity, cal.zeta1),
                                       (cal.sigma_var, cal.sensitivity_var, cal.zeta2)):
        loss = _discrete_loss(sigma, sensitivity, factor)
        for eps in (0.5, 1.0, 3.0):
            exact, charged = loss.get_delta_for_epsilon(eps), gdp_delta(eps, zeta_j)
            if matches:
                assert charged * (1 - MARGIN) <= exact <= charged * (1 + 1e-9)
            else:
                assert exact > charged * (1 + MARGIN)
