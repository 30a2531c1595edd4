"""Slow: the planner's rows-per-fold floors keep the pre-noise estimate unbiased (issue 19 §1).

A K sweep on Exp. D (n = 50,000, d = 20, linear/logistic nuisances): at the auto K (the largest K
each floor allows), the pre-noise estimate of every estimator stays close to the truth, while IPW
far past its floor is visibly biased (the control that shows the test can fail)."""

import numpy as np
import pytest

from dpcausal import PrivateATE
from dpcausal.ate.planner import rows_per_fold_floor
from dpcausal.datasets import make_experiment_d

pytestmark = pytest.mark.slow
N, D, REPS = 50_000, 20, 3


def _bias(estimator, K):
    errors, used = [], set()
    for rep in range(REPS):
        X, A, Y, tau = make_experiment_d(N, random_state=100 + rep)
        est = PrivateATE(estimator=estimator, n_folds=K, outcome_bounds=(-1, 1),
                         propensity_clip=0.1, random_state=rep)
        rel = est.fit(X, A, Y, evaluation=True)
        errors.append(rel.nonprivate["ate"] - tau)
        used.add(rel.params["n_folds"])
    return float(np.mean(errors)), used


@pytest.mark.parametrize("estimator", ["aipw", "g", "ipw"])
def test_auto_k_is_unbiased(estimator):
    """The default n_folds="auto": at n = 50,000 the floor binds (the compute budget does not)."""
    bias, used = _bias(estimator, "auto")
    assert used == {N // rows_per_fold_floor(estimator, D)}
    assert abs(bias) < 0.006  # 4% of the ATE 0.15


def test_ipw_far_past_its_floor_is_biased():
    assert _bias("ipw", 476)[0] > 0.03
