"""No public call draws noise without being charged (issue 27 §2), for every mechanism.

``fit`` has always gone through the accountant; nine other public methods drew noise outside it.
Their noise-drawing bodies are now private (``_private_release``, ``_release``, ``_release_sums``,
``_privatize``) and the old public names are deprecated aliases that charge like ``fit``. Each
public name is called with the recording accountant of the current context installed (fixture
``accountant``, ``_trap.py``): refusing (as a ledger past its cap), it must stop the call before
any noise sampler is touched; recording, it must see exactly one charge with every draw inside
it. On the old code each call drew at once, uncharged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcausal import PrivateATE, Release
from dpcausal.accounting import PrivacyCharge
from dpcausal.bounds_check import BoundsCheck
from dpcausal.cluster_dp import ClusterDP, ClusterDPPublished, ResponseSpace
from dpcausal.federated import FederatedATE
from dpcausal.user_level import UserLevelATE
from tests.library._frames import ate_frame, cluster_frame, federated_frame, user_panel
from tests.library._trap import NoiseDrawn, Refused


def _ate_nuisances() -> tuple[PrivateATE, Any, Any, Any]:
    df = ate_frame()
    est = PrivateATE(outcome_bounds=(-5, 5), n_folds=4, folds=np.arange(400) % 4)
    X, A, Y = df[["x1", "x2"]].to_numpy(), df["a"].to_numpy(), df["y"].to_numpy()
    folds = est.make_folds(400, d=2)
    return est, A, Y, est.aggregate(X, folds, est.fit_folds(X, A, Y, folds))


def _cluster() -> tuple[ClusterDP, pd.DataFrame]:
    return ClusterDP(ResponseSpace(np.arange(-5, 7)), epsilon=3.0, gamma=0.02,
                     sigma=10.0), cluster_frame()


def _federated() -> tuple[FederatedATE, pd.DataFrame]:
    return FederatedATE(R=1.0, epsilon=1.0, delta=1e-6, m1=256, m2=256), federated_frame()


def _user_level() -> tuple[UserLevelATE, pd.DataFrame]:
    return UserLevelATE(outcome_bounds=(0.0, 65.0), epsilon=1.0), user_panel()


def _ate_release():
    est, A, Y, nuis = _ate_nuisances()
    return lambda: est.release(A, Y, nuis, d=2)


def _ate_release_sums():
    est = PrivateATE(outcome_bounds=(-1, 1), n_folds=10)
    return lambda: est.release_sums(5000, 500.0, 50.5, n_folds=10, d=3)


def _ate_private_release():
    est = PrivateATE(outcome_bounds=(-5, 5), n_folds=4)
    prepared = est.check_input(ate_frame(), treatment="a", outcome="y")
    return lambda: est.private_release(prepared)


def _cluster_private_release():
    mech, df = _cluster()
    prepared = mech.check_input(df, cluster="c", treatment="z", outcome="y")
    return lambda: mech.private_release(prepared)


def _cluster_privatize():
    mech, df = _cluster()
    return lambda: mech.privatize(df, "c", "z", "y")


def _user_level_private_release():
    rel, records = _user_level()
    prepared = rel.check_input(records, outcome="y", unit="user", treatment="arm", stratum="s")
    return lambda: rel.private_release(prepared)


def _user_level_release():
    rel, records = _user_level()
    plan = rel.plan(records, unit="user", cell=["s", "arm"], order="ts")
    return lambda: rel.release(records, value="y", plan=plan)


def _federated_private_release():
    fed, df = _federated()
    prepared = fed.check_input(df, treatment="t", outcome="y")
    return lambda: fed.private_release(prepared)


def _bounds_private_release():
    check = BoundsCheck(outcome_bounds=(-1, 1))
    prepared = check.check_input(ate_frame(), outcome="y")
    return lambda: check.private_release(prepared)


PUBLIC_DRAWS = {
    "PrivateATE.release": _ate_release,
    "PrivateATE.release_sums": _ate_release_sums,
    "PrivateATE.private_release": _ate_private_release,
    "ClusterDP.private_release": _cluster_private_release,
    "ClusterDP.privatize": _cluster_privatize,
    "UserLevelATE.private_release": _user_level_private_release,
    "UserLevelATE.release": _user_level_release,
    "FederatedATE.private_release": _federated_private_release,
    "BoundsCheck.private_release": _bounds_private_release,
}


@pytest.mark.parametrize("name", sorted(PUBLIC_DRAWS))
def test_a_refused_charge_stops_every_public_draw(name, accountant):
    with accountant.trap.opened():
        call = PUBLIC_DRAWS[name]()  # inputs are built (with their public folds) before arming
    accountant.refuse = True
    with pytest.warns(DeprecationWarning, match=name.split(".")[1]), pytest.raises(Refused):
        call()
    assert len(accountant.charges) == 1 and accountant.trap.hits == 0


@pytest.mark.parametrize("name", sorted(PUBLIC_DRAWS))
def test_every_public_draw_is_one_charge_with_all_noise_inside_it(name, accountant):
    with accountant.trap.opened():
        call = PUBLIC_DRAWS[name]()
    with pytest.warns(DeprecationWarning, match="is deprecated"):
        out = call()
    assert isinstance(out, (Release, ClusterDPPublished)) and len(accountant.charges) == 1
    assert isinstance(accountant.charges[0], PrivacyCharge) and accountant.trap.hits == 0


def test_the_trap_catches_an_uncharged_draw(accountant):
    """Negative control: the private body, called directly, draws outside any accountant."""
    check = BoundsCheck(outcome_bounds=(-1, 1))
    prepared = check.check_input(ate_frame(), outcome="y")
    with pytest.raises(NoiseDrawn):
        check._private_release(prepared)
