"""The noise-wider-than-the-bounds warning (issue 21): public parameters only, raised before
anything is charged, at the threshold 1.96 sigma_1 > hi - lo."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dpcausal import PrivateATE
from dpcausal.datasets import make_experiment_a
from dpcausal.validation import NoiseWiderThanBoundsWarning, check_noise_scale

Z975 = 1.959963984540054  # standard normal 97.5% quantile


def _no_warning(call) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoiseWiderThanBoundsWarning)
        call()


def test_threshold_is_the_whole_ate_range():
    width = 3.0  # bounds (-1, 2): every ATE lies in [-3, 3]
    _no_warning(lambda: check_noise_scale(width / Z975 * (1 - 1e-9), (-1.0, 2.0)))
    with pytest.warns(NoiseWiderThanBoundsWarning, match=r"half-width of 3, more than the whole "
                                                         r"range of ATEs the bounds \[-1, 2\] "
                                                         r"allow \(\+/-3\)"):
        check_noise_scale(width / Z975 * (1 + 1e-9), (-1.0, 2.0))


def test_a_release_warns_before_any_charge_and_a_precise_one_does_not():
    X, A, Y, _ = make_experiment_a(2000, random_state=1)
    noisy = PrivateATE(n_folds=20, zeta=0.7, outcome_bounds=(-1, 1))
    with pytest.warns(NoiseWiderThanBoundsWarning, match="Raise zeta"):
        noisy.check_input(X, A, Y)                      # the public checks, before any charge
    with pytest.warns(NoiseWiderThanBoundsWarning):
        noisy.fit(X, A, Y)
    precise = PrivateATE(n_folds=20, zeta=1.5, outcome_bounds=(-1, 1))
    _no_warning(lambda: precise.check_input(X, A, Y))
    _no_warning(lambda: precise.fit(X, A, Y))
    assert np.isfinite(precise.release_.ate)
