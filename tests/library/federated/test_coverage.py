"""Coverage Monte Carlo (TH-3.5, TH-4.3/4.5): slow; run with -m slow."""

import numpy as np
import pytest

from dpcausal.federated import FederatedATE

REPS = 2000
SE = np.sqrt(0.9 * 0.1 / REPS)


def _gaussian(rng, n=1000):
    """D2: Y(c) ~ N(-0.1, 0.01^2), Y(t) ~ N(0.1, 0.01^2), n_c = n_t = n/2 (spec §6.1)."""
    t = np.zeros(n, bool)
    t[rng.permutation(n)[: n // 2]] = True
    y0, y1 = rng.normal(-0.1, 0.01, n), rng.normal(0.1, 0.01, n)
    return np.where(t, y1, y0), t, 0.2, y1.mean() - y0.mean()


def _constant(rng, n=1000):
    """D3: Y(0) ~ U(-1, 0.8), Y(1) = Y(0) + 0.2 (spec §6.1, erratum 14)."""
    t = np.zeros(n, bool)
    t[rng.permutation(n)[: n // 2]] = True
    y0 = rng.uniform(-1, 0.8, n)
    return np.where(t, y0 + 0.2, y0), t, 0.2, 0.2


def _coverage(design, estimand, scale_dp=1.0, **kw):
    rng = np.random.default_rng(12345)
    hits = 0
    for _ in range(REPS):
        x, t, pate, sate = design(rng)
        res = FederatedATE(R=1.0, epsilon=kw.pop("epsilon", 1.0), delta=1e-6, m1=1024, m2=1024,
                           estimand=estimand, secagg="none", random_state=rng,
                           **kw).run(x, t, evaluation=True)  # seeded simulation
        half = (res.ci[1] - res.ci[0]) / 2
        if scale_dp != 1.0:  # broken variant: DP variance understated
            z = half / np.sqrt(res.sampling_variance + res.variance_dp)
            half = z * np.sqrt(res.sampling_variance + scale_dp * res.variance_dp)
        truth = pate if estimand == "PATE" else sate
        hits += abs(res.ate - truth) <= half
    return hits / REPS


@pytest.mark.slow
def test_th35_pate_coverage_oracle_variance():
    assert abs(_coverage(_gaussian, "PATE", variance_mode="oracle_nonprivate") - 0.9) < 3 * SE


@pytest.mark.slow
def test_th35_sate_constant_effect():
    assert abs(_coverage(_constant, "SATE", variance_mode="oracle_nonprivate") - 0.9) < 3 * SE


@pytest.mark.slow
def test_private_variance_covers_at_least_nominal():
    assert _coverage(_gaussian, "PATE", variance_mode="private") >= 0.9 - 3 * SE


@pytest.mark.slow
def test_negative_control_understated_dp_variance_is_caught():
    cov = _coverage(_gaussian, "PATE", scale_dp=0.5, variance_mode="oracle_nonprivate")
    assert cov < 0.9 - 3 * SE


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["paper", "corrected", "hoeffding"])
def test_nonasymptotic_coverage(kind):
    assert _coverage(_constant, "PATE", ci_form=kind, alpha=0.1) >= 0.9
