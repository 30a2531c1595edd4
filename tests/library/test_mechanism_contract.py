"""The release contract, checked once for every mechanism (issue 27 §6; scikit-learn's
``check_estimator`` in spirit).

Each check is a plain function of a :class:`Case` (an unfitted mechanism, data and column roles)
run over the four mechanisms and the bounds check: ``fit`` returns a :class:`dpcausal.Release`;
bad input (a missing column, one column in two roles, bad bounds, wrong types) is refused before
any noise is drawn or any charge is asked; a fit is exactly one charge with every draw inside
it; the release prints, shows as HTML and as a DataFrame, and rebuilds from its JSON to an equal
release; the unfitted mechanism clones and pickles. ``test_each_check_catches_its_broken_variant``
runs every check once against a mechanism broken in the way that check guards against.

Noise is trapped at its source (:mod:`dpcausal.noise`; ``_trap.py``): the OS-entropy generator
and the exact samplers, under whatever name a module imported them, raise ``NoiseDrawn`` unless
the recording accountant (the ``accountant`` fixture) is inside its release.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from dpcausal import PrivateATE, Release
from dpcausal.accounting import PrivacyCharge
from dpcausal.bounds_check import BoundsCheck, BoundsCheckRelease
from dpcausal.cluster_dp import ClusterDP, ResponseSpace
from dpcausal.contract import Mechanism
from dpcausal.federated import FederatedATE
from dpcausal.user_level import UserLevelATE
from tests.library._frames import ate_frame, cluster_frame, federated_frame, user_panel
from tests.library._trap import NoiseDrawn, Recording

SUMMARY_COLUMNS = ["estimator", "estimate", "se", "ci_lower", "ci_upper", "epsilon", "delta"]


# ---------------------------------------------------------------------------------------------
# the cases: public parameters, data and roles of one valid release, and its bad inputs


@dataclass(frozen=True)
class Case:
    make: Callable[..., Mechanism]          # keyword overrides of the public parameters
    data: Callable[[], pd.DataFrame]
    roles: dict[str, Any]
    bounds: str                             # the name of the outcome-bounds parameter
    bad_bounds: tuple[Any, ...]
    epsilon: str = "epsilon"                # the privacy parameter

    def fit(self, mech: Mechanism | None = None, data: Any = None, **roles: Any) -> Release:
        mech = self.make() if mech is None else mech
        return mech.fit(self.data() if data is None else data, **(roles or self.roles))


def _with(defaults: dict[str, Any], cls: type[Mechanism]) -> Callable[..., Mechanism]:
    return lambda **kw: cls(**(defaults | kw))


SPACE = ResponseSpace(np.arange(-5, 7))
CASES = {
    "PrivateATE": Case(_with({"outcome_bounds": (-5, 5), "n_folds": 4}, PrivateATE),
                       ate_frame, {"treatment": "a", "outcome": "y"},
                       "outcome_bounds", ((5, -5), (0, float("inf")), "wide", None),
                       epsilon="zeta"),
    "PrivateATE-dim": Case(_with({"outcome_bounds": (-5, 5), "estimator": "dim",
                                  "design": "randomized"}, PrivateATE),
                           ate_frame, {"treatment": "a", "outcome": "y"},
                           "outcome_bounds", ((5, -5), (0, float("inf")), "wide", None),
                           epsilon="zeta"),
    "PrivateATE-lin": Case(_with({"outcome_bounds": (-5, 5), "estimator": "lin",
                                  "assume_linear": True,
                                  "covariate_bounds": {"x1": (-4, 4), "x2": (-4, 4)}},
                                 PrivateATE),
                           ate_frame, {"treatment": "a", "outcome": "y"},
                           "outcome_bounds", ((5, -5), (0, float("inf")), "wide", None),
                           epsilon="zeta"),
    "PrivateATE-prerelease": Case(_with({"outcome_bounds": (-5, 5), "design": "randomized",
                                         "n_folds": 4, "prerelease": 0.1}, PrivateATE),
                                  ate_frame, {"treatment": "a", "outcome": "y"},
                                  "outcome_bounds", ((5, -5), (0, float("inf")), "wide", None),
                                  epsilon="zeta"),
    "ClusterDP": Case(_with({"space": SPACE, "epsilon": 3.0, "gamma": 0.02, "sigma": 10.0},
                            ClusterDP),
                      cluster_frame, {"cluster": "c", "treatment": "z", "outcome": "y"},
                      "space", ((-5, 6), "wide", None)),
    "UserLevelATE": Case(_with({"outcome_bounds": (0.0, 65.0), "epsilon": 1.0}, UserLevelATE),
                         user_panel, {"treatment": "arm", "outcome": "y", "unit": "user",
                                      "stratum": "s"},
                         "outcome_bounds", ((65.0, 0.0), (0.0, float("nan")), "wide", None)),
    "FederatedATE": Case(_with({"R": 1.0, "epsilon": 1.0, "delta": 1e-6, "m1": 256, "m2": 256},
                               FederatedATE),
                         federated_frame, {"treatment": "t", "outcome": "y"},
                         "R", (-1.0, 0.0, float("inf"), "wide")),
    "BoundsCheck": Case(_with({"outcome_bounds": (-5, 5)}, BoundsCheck),
                        ate_frame, {"outcome": "y"},
                        "outcome_bounds", ((5, -5), (0, float("inf")), "wide", None)),
}


#: the message of the refusals every mechanism words the same way (dpcausal.contract.columns)
MESSAGES = {"missing column": r"outcome='nope' is not a column of the data",
            "one column in two roles": r"cannot also be .*=",
            "a path, not a DataFrame": "DataFrame"}


def _bad_inputs(case: Case) -> dict[str, Callable[[], Any]]:
    """Each bad input of ``case`` as a call that must raise ``ValueError``/``TypeError``."""
    data = case.data()
    outcome = case.roles["outcome"]
    other = next(r for r in case.roles if r != "outcome") if len(case.roles) > 1 else None
    bad: dict[str, Callable[[], Any]] = {
        "missing column": lambda: case.fit(data=data, **(case.roles | {"outcome": "nope"})),
        "no roles": lambda: case.make().fit(data),
        "a dict, not a DataFrame": lambda: case.fit(data=data.to_dict("list")),
        "a path, not a DataFrame": lambda: case.fit(data="data.csv"),
        "epsilon as text": lambda: case.fit(case.make(**{case.epsilon: "1"})),
        "negative epsilon": lambda: case.fit(case.make(**{case.epsilon: -1.0})),
    }
    if other is not None:  # the outcome column given a second role as well
        bad["one column in two roles"] = lambda: case.fit(
            data=data, **(case.roles | {other: outcome}))
    for value in case.bad_bounds:
        bad[f"{case.bounds}={value!r}"] = lambda v=value: case.fit(case.make(**{case.bounds: v}))
    return bad


BAD = [(name, bad) for name, case in CASES.items() for bad in _bad_inputs(case)]


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    return CASES[request.param]


@pytest.fixture(scope="module")
def fitted(case):
    """One release of ``case`` (the session accountant; noise untrapped)."""
    mech = case.make()
    return mech, case.fit(mech)


# ---------------------------------------------------------------------------------------------
# the checks


def check_fit_returns_a_release(case: Case, acc: Recording) -> None:
    mech = case.make()
    out = case.fit(mech)
    assert isinstance(out, Release), f"fit returned a {type(out).__name__}, not a Release"
    assert mech.release_ is out and out.evaluation is False
    assert out.privacy.unit == mech.unit and out.n > 0
    assert json.loads(out.to_json())["kind"] == out.kind


def check_refused_before_any_draw(case: Case, acc: Recording, bad: str) -> None:
    with pytest.raises((ValueError, TypeError), match=MESSAGES.get(bad)):
        _bad_inputs(case)[bad]()
    assert acc.trap.hits == 0 and acc.charges == [], "a bad input drew noise or was charged"


def check_one_charge_per_fit(case: Case, acc: Recording) -> None:
    case.fit()
    assert len(acc.charges) == 1, f"one fit made {len(acc.charges)} charges"
    assert isinstance(acc.charges[0], PrivacyCharge) and acc.trap.hits == 0
    case.fit()
    assert len(acc.charges) == 2


def check_prints_as_text_html_and_a_table(release: Release) -> None:
    name = type(release).__name__
    text = str(release)
    assert name in text and release.privacy.describe() in text
    html = release._repr_html_()
    assert name in html and "<table" in html
    table = release.summary()
    assert isinstance(table, pd.DataFrame) and list(table.columns) == SUMMARY_COLUMNS
    assert len(table) > 0 and table["estimate"].notna().all(), f"{name}.summary() is empty"
    if release.ate is not None:
        assert table.iloc[0]["estimate"] == release.ate
        assert table.iloc[0]["epsilon"] == release.privacy.epsilon


def _fields(release: Release) -> dict[str, Any]:
    """The release's fields, DataFrames as records (dataclass ``==`` is undefined on them)."""
    return {f.name: (v.to_dict("records") if isinstance(v, pd.DataFrame) else v)
            for f in dataclasses.fields(release) if f.compare
            for v in [getattr(release, f.name)]}


def check_json_round_trip(release: Release) -> None:
    text = release.to_json()
    back = Release.from_json(text)
    assert type(back) is type(release)
    assert _fields(back) == _fields(release), "from_json(to_json()) is not the same release"
    assert back.to_json() == text and str(back) == str(release)
    assert back._repr_html_() == release._repr_html_()
    pd.testing.assert_frame_equal(back.summary(), release.summary())
    assert type(release).from_dict(json.loads(text)).to_json() == text


def check_clone_and_pickle(mech: Mechanism) -> None:
    params = mech.get_params()
    twin = clone(mech)
    assert twin is not mech and repr(twin.get_params()) == repr(params)
    assert not hasattr(twin, "release_")
    thawed = pickle.loads(pickle.dumps(mech))
    assert type(thawed) is type(mech) and repr(thawed.get_params()) == repr(params)


# ---------------------------------------------------------------------------------------------
# the checks run over every mechanism


def test_fit_returns_a_release(case, accountant):
    check_fit_returns_a_release(case, accountant)


@pytest.mark.parametrize("name, bad", BAD, ids=[f"{n}-{b}" for n, b in BAD])
def test_bad_input_is_refused_before_any_draw_or_charge(name, bad, accountant):
    check_refused_before_any_draw(CASES[name], accountant, bad)


def test_one_fit_is_one_charge_with_every_draw_inside_it(case, accountant):
    check_one_charge_per_fit(case, accountant)


def test_the_trap_catches_the_mechanisms_own_noise(case, accountant):
    """Negative control of the trap: the noise-drawing phase, called outside any accountant,
    draws through a trapped sampler (so the two checks above can fail for this mechanism); a
    mechanism may turn the failure into its generic one (``ReleaseFailedError``)."""
    from dpcausal.validation import ReleaseFailedError

    mech = case.make()
    prepared = mech.check_input(case.data(), **case.roles)
    with pytest.raises((NoiseDrawn, ReleaseFailedError)):
        mech._private_release(prepared)
    assert accountant.trap.hits >= 1


def test_release_prints_as_text_html_and_a_table(fitted):
    check_prints_as_text_html_and_a_table(fitted[1])


def test_release_rebuilds_from_its_json(fitted):
    check_json_round_trip(fitted[1])


@pytest.mark.parametrize("release", [
    lambda: PrivateATE(outcome_bounds=(-5, 5), n_folds=4, ci_share=0).fit(
        ate_frame(), treatment="a", outcome="y", evaluation=True),
    lambda: BoundsCheck(outcome_bounds=(-1, 1), zeta=0.5).fit(ate_frame(), outcome="y"),
    lambda: ClusterDP(SPACE, epsilon=3.0).fit(cluster_frame(), cluster="c", treatment="z",
                                              outcome="y"),
    lambda: UserLevelATE(outcome_bounds=(0.0, 65.0), epsilon=1.0).fit(
        user_panel(), outcome="y", unit="user", stratum="s"),
], ids=["ate-evaluation-no-ci", "bounds-gaussian", "cluster_dp-uniform", "user_level-no-arm"])
def test_other_release_shapes_rebuild_from_their_json(release):
    check_json_round_trip(release())


def test_unfitted_and_fitted_mechanisms_clone_and_pickle(case, fitted):
    check_clone_and_pickle(case.make())
    check_clone_and_pickle(fitted[0])


def test_from_dict_refuses_an_unknown_kind_and_the_wrong_class(fitted):
    from dpcausal import ATERelease

    d = fitted[1].to_dict()
    with pytest.raises(ValueError, match=r"kind 'nonsense' is not a release kind"):
        Release.from_dict({**d, "kind": "nonsense"})
    other = ATERelease if d["kind"] != "ate" else BoundsCheckRelease
    with pytest.raises(ValueError, match=rf"kind '{d['kind']}' is a {type(fitted[1]).__name__}"
                                         rf", not a {other.__name__}"):
        other.from_dict(d)


# ---------------------------------------------------------------------------------------------
# negative controls: each check fails on a mechanism broken in its way


class _ReturnsADict(BoundsCheck):
    def fit(self, data, *args, evaluation=False, **roles):
        return super().fit(data, *args, evaluation=evaluation, **roles).to_dict()


class _DrawsWhileChecking(BoundsCheck):
    def check_input(self, data, *args, **roles):
        import dpcausal.bounds_check as module

        module.secure_rng().integers(2)   # a look at the noise before the refusal
        return super().check_input(data, *args, **roles)


class _ChargesTwice(BoundsCheck):
    def fit(self, data, *args, evaluation=False, **roles):
        super().fit(data, *args, evaluation=evaluation, **roles)
        return super().fit(data, *args, evaluation=evaluation, **roles)


class _ChangesAParameter(BoundsCheck):
    def __init__(self, outcome_bounds=None, epsilon=0.1, tolerance=0.01, alpha=0.05, zeta=None):
        super().__init__(tuple(map(float, outcome_bounds)), epsilon, tolerance, alpha, zeta)


def _case(cls: type[BoundsCheck]) -> Case:
    return dataclasses.replace(CASES["BoundsCheck"], make=_with({"outcome_bounds": (-5, 5)}, cls))


def _no_table(monkeypatch):
    monkeypatch.setattr(BoundsCheckRelease, "_repr_html_", lambda self: "<div></div>")


def _changes_a_share(monkeypatch):
    real = BoundsCheckRelease.to_dict
    monkeypatch.setattr(BoundsCheckRelease, "to_dict",
                        lambda self: {**real(self), "share_above": 0.5})


BROKEN = {
    "returns a dict": lambda mp, acc: check_fit_returns_a_release(_case(_ReturnsADict), acc),
    "draws before refusing": lambda mp, acc: check_refused_before_any_draw(
        _case(_DrawsWhileChecking), acc, "missing column"),
    "charges twice": lambda mp, acc: check_one_charge_per_fit(_case(_ChargesTwice), acc),
    "no HTML table": lambda mp, acc: _no_table(mp) or check_prints_as_text_html_and_a_table(
        CASES["BoundsCheck"].fit()),
    "JSON changes a figure": lambda mp, acc: _changes_a_share(mp) or check_json_round_trip(
        CASES["BoundsCheck"].fit()),
    "constructor changes a parameter": lambda mp, acc: check_clone_and_pickle(
        _ChangesAParameter(outcome_bounds=[-5, 5])),
    "unpicklable attribute": lambda mp, acc: check_clone_and_pickle(
        BoundsCheck(outcome_bounds=(-5, 5), alpha=lambda: 0.05)),
}


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_each_check_catches_its_broken_variant(broken, monkeypatch, accountant):
    with pytest.raises((AssertionError, RuntimeError, pickle.PicklingError, AttributeError)):
        BROKEN[broken](monkeypatch, accountant)
