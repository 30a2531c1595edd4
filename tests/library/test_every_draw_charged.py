"""No public call draws noise without being charged (issue 27 §2), for every mechanism.

``fit`` has always gone through the accountant; nine other public methods drew noise outside it.
Their noise-drawing bodies are now private (``_private_release``, ``_release``, ``_release_sums``,
``_privatize``) and the old public names are deprecated aliases that charge like ``fit``. Each
public name is called with an accountant of the current context installed
(:func:`dpcausal.session.charging_to`): a refusing one (as a ledger past its cap) must stop it
before any noise source is touched, and a recording one must see exactly one charge with every
draw inside it. On the old code each call drew at once, uncharged.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pandas as pd
import pytest

from dpcausal import PrivateATE, Release, session
from dpcausal.accounting import PrivacyCharge
from dpcausal.bounds_check import BoundsCheck
from dpcausal.cluster_dp import ClusterDP, ClusterDPPublished, ResponseSpace
from dpcausal.cluster_dp.data import assign_balanced, draw_subpopulation, make_gmm
from dpcausal.federated import FederatedATE
from dpcausal.user_level import UserLevelATE, make_user_level_panel

# every module that takes a release's noise from OS entropy
NOISE_SOURCES = ("dpcausal.estimator", "dpcausal.bounds_check", "dpcausal.cluster_dp.release",
                 "dpcausal.federated.estimator", "dpcausal.user_level.release")


class _Uncharged(AssertionError):
    """Noise was drawn outside the accountant's release."""


class _Refused(Exception):
    """The accountant refused the charge (nothing may be drawn)."""


class _Accountant:
    """Records each charge; refuses it, or runs the draw with the noise sources armed."""

    def __init__(self, refuse: bool) -> None:
        self.refuse = refuse
        self.charges: list[PrivacyCharge] = []
        self.inside = False

    def release(self, mechanism: Any, prepared: Any, charge: PrivacyCharge, *,
                evaluation: bool = False, draw: Callable[[], Release] | None = None) -> Release:
        self.charges.append(charge)
        if self.refuse:
            raise _Refused
        self.inside = True
        try:
            return session._draw_of(mechanism, prepared, evaluation, draw)()
        finally:
            self.inside = False


def _ate_frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 2))
    a = rng.integers(0, 2, 400)
    return pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "a": a, "y": x[:, 0] + a})


def _ate_nuisances() -> tuple[PrivateATE, Any, Any, Any]:
    df = _ate_frame()
    est = PrivateATE(outcome_bounds=(-5, 5), n_folds=4, folds=np.arange(400) % 4)
    X, A, Y = df[["x1", "x2"]].to_numpy(), df["a"].to_numpy(), df["y"].to_numpy()
    folds = est.make_folds(400, d=2)
    return est, A, Y, est.aggregate(X, folds, est.fit_folds(X, A, Y, folds))


def _cluster() -> tuple[ClusterDP, pd.DataFrame]:
    rng = np.random.default_rng(1)
    sub = draw_subpopulation(rng, make_gmm(1))
    z = assign_balanced(rng, sub.cidx)[0]
    df = pd.DataFrame({"c": np.array(["a", "b", "c"])[sub.cidx], "z": z,
                       "y": np.where(z == 1, sub.y1, sub.y0)})
    return ClusterDP(ResponseSpace(np.arange(-5, 7)), epsilon=3.0, gamma=0.02, sigma=10.0), df


def _federated() -> tuple[FederatedATE, pd.DataFrame]:
    t = np.zeros(600, int)
    t[::3] = 1
    df = pd.DataFrame({"t": t, "y": np.where(t == 1, 0.3, -0.1)})
    return FederatedATE(R=1.0, epsilon=1.0, delta=1e-6, m1=256, m2=256), df


def _user_level() -> tuple[UserLevelATE, pd.DataFrame]:
    records = make_user_level_panel(n_units=300, n_strata=3, cells_per_unit=3, seed=5)
    return UserLevelATE(bounds=(0.0, 65.0), epsilon=1.0), records


def _ate_release():
    est, A, Y, nuis = _ate_nuisances()
    return lambda: est.release(A, Y, nuis, d=2)


def _ate_release_sums():
    est = PrivateATE(outcome_bounds=(-1, 1), n_folds=10)
    return lambda: est.release_sums(5000, 500.0, 50.5, n_folds=10, d=3)


def _ate_private_release():
    est = PrivateATE(outcome_bounds=(-5, 5), n_folds=4)
    prepared = est.check_input(_ate_frame(), treatment="a", outcome="y")
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
    prepared = rel.check_input(records, outcome="y", unit="unit_id", treatment="arm",
                               stratum="stratum")
    return lambda: rel.private_release(prepared)


def _user_level_release():
    rel, records = _user_level()
    plan = rel.plan(records, unit="unit_id", cell=["stratum", "arm"], order="ts")
    return lambda: rel.release(records, value="y", plan=plan)


def _federated_private_release():
    fed, df = _federated()
    prepared = fed.check_input(df, treatment="t", outcome="y")
    return lambda: fed.private_release(prepared)


def _bounds_private_release():
    check = BoundsCheck(outcome_bounds=(-1, 1))
    prepared = check.check_input(_ate_frame(), outcome="y")
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


@pytest.fixture
def armed(monkeypatch):
    """Arms every OS-entropy noise source: a draw outside the accountant's release raises."""
    def arm(acc: _Accountant) -> None:
        from dpcausal import noise

        def guarded() -> np.random.Generator:
            if not acc.inside:
                raise _Uncharged("noise drawn outside the accountant")
            return noise.secure_rng()

        for module in NOISE_SOURCES:
            monkeypatch.setattr(f"{module}.secure_rng", guarded)
    return arm


@pytest.mark.parametrize("name", sorted(PUBLIC_DRAWS))
def test_a_refused_charge_stops_every_public_draw(name, armed):
    call = PUBLIC_DRAWS[name]()  # inputs are built (with their public folds) before arming
    acc = _Accountant(refuse=True)
    armed(acc)
    with session.charging_to(acc), pytest.warns(DeprecationWarning, match=name.split(".")[1]):
        with pytest.raises(_Refused):
            call()
    assert len(acc.charges) == 1


@pytest.mark.parametrize("name", sorted(PUBLIC_DRAWS))
def test_every_public_draw_is_one_charge_with_all_noise_inside_it(name, armed):
    call = PUBLIC_DRAWS[name]()
    acc = _Accountant(refuse=False)
    armed(acc)
    with session.charging_to(acc), pytest.warns(DeprecationWarning, match="is deprecated"):
        out = call()
    assert isinstance(out, (Release, ClusterDPPublished)) and len(acc.charges) == 1
    assert isinstance(acc.charges[0], PrivacyCharge)


def test_the_guard_catches_an_uncharged_draw(armed):
    """Negative control: the private body, called directly, draws outside any accountant."""
    check = BoundsCheck(outcome_bounds=(-1, 1))
    prepared = check.check_input(_ate_frame(), outcome="y")
    armed(_Accountant(refuse=False))
    with pytest.raises(_Uncharged):
        check._private_release(prepared)
