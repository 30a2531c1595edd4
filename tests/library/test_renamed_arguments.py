"""One name per concept across the mechanisms (issue 27 §5): the CI's miscoverage is ``alpha``
(the results keep ``level``), an evaluation-only noise seed is ``noise_seed``, the outcome range is
``outcome_bounds``. The old names still work for one release, with a DeprecationWarning."""

import numpy as np
import pandas as pd
import pytest

from dpcausal.bounds_check import BoundsCheck
from dpcausal.cluster_dp import ClusterDP, ResponseSpace
from dpcausal.federated import FederatedATE
from dpcausal.user_level import UserLevelATE, make_user_level_panel

Y = pd.DataFrame({"y": np.r_[np.full(30, -5.0), np.linspace(0, 1, 970)]})


@pytest.mark.parametrize("make", [
    lambda **kw: BoundsCheck(outcome_bounds=(0, 1), **kw),
    lambda **kw: ClusterDP(ResponseSpace([0.0, 1.0]), epsilon=1.0, **kw),
    lambda **kw: UserLevelATE(outcome_bounds=(0.0, 65.0), **kw),
], ids=["BoundsCheck", "ClusterDP", "UserLevelATE"])
def test_every_mechanism_takes_the_ci_as_alpha(make):
    assert make(alpha=0.1).get_params()["alpha"] == 0.1
    assert make().get_params()["alpha"] == 0.05


def test_the_old_level_argument_still_sets_the_ci_with_a_warning():
    new = BoundsCheck(outcome_bounds=(0, 1), alpha=0.1).fit(Y, outcome="y")
    with pytest.warns(DeprecationWarning, match=r"BoundsCheck\(level=...\) is deprecated.*alpha"):
        old = BoundsCheck(outcome_bounds=(0, 1), level=0.9).fit(Y, outcome="y")
    assert new.level == old.level == pytest.approx(0.9)
    with pytest.warns(DeprecationWarning, match="level"):
        assert ClusterDP(ResponseSpace([0.0, 1.0]), epsilon=1.0, level=0.9)._alpha() == \
            pytest.approx(0.1)


def test_the_old_noise_seed_names_still_seed_evaluation_noise_with_a_warning():
    rng = np.random.default_rng(0)
    x, t = rng.uniform(-1, 1, 600), rng.uniform(size=600) < 0.5
    args = dict(R=1.0, epsilon=1.0, delta=1e-6, m1=64, m2=64)
    new = FederatedATE(**args, noise_seed=4).fit(x, t, evaluation=True)
    with pytest.warns(DeprecationWarning, match=r"FederatedATE\(random_state=...\).*noise_seed"):
        old = FederatedATE(**args, random_state=4).fit(x, t, evaluation=True)
    assert new.ate == old.ate


def test_the_old_user_level_names_still_work_with_a_warning():
    records = make_user_level_panel(n_units=200, n_strata=2, cells_per_unit=2, seed=1)
    roles = dict(unit="unit_id", cell=["stratum", "arm"], order="ts")
    new = UserLevelATE(outcome_bounds=(0.0, 65.0), noise_seed=3, alpha=0.1)
    with pytest.warns(DeprecationWarning) as caught:
        old = UserLevelATE(bounds=(0.0, 65.0), random_state=3, level=0.9)
        old_plan = old.plan(records, **roles)
    assert {str(w.message).split("(")[1].split("=")[0] for w in caught} >= {"bounds",
                                                                          "random_state",
                                                                          "level"}
    assert old_plan.public_facts() == new.plan(records, **roles).public_facts()


@pytest.mark.parametrize("module,old,new", [
    ("dpcausal.federated", "FederatedResult", "FederatedRelease"),
    ("dpcausal.federated.estimator", "FederatedResult", "FederatedRelease"),
    ("dpcausal.user_level", "UserLevelRelease", "UserLevelATE"),
    ("dpcausal.user_level.release", "UserLevelRelease", "UserLevelATE"),
    ("dpcausal.cluster_dp", "ClusterDPRelease", "ClusterDPPublished"),
    ("dpcausal.cluster_dp.release", "ClusterDPRelease", "ClusterDPPublished"),
])
def test_old_class_names_are_the_new_classes_with_a_warning(module, old, new):
    import importlib

    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated.*use {new}"):
        assert getattr(mod, old) is getattr(mod, new)
    with pytest.raises(AttributeError):
        assert mod.NoSuchName is None  # never reached: no such name
