"""``Release.from_json``/``from_dict`` rebuild every mechanism's release exactly (issue 27 §4):
the same class, dict, text and summary, so flows, tasks and the ledger pass ``Release`` objects
and render them once."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dpcausal import ATERelease, PrivateATE, Release
from dpcausal.bounds_check import BoundsCheck, BoundsCheckRelease
from dpcausal.cluster_dp import ClusterDP, ResponseSpace
from dpcausal.cluster_dp.data import assign_balanced, draw_subpopulation, make_gmm
from dpcausal.federated import FederatedATE
from dpcausal.user_level import UserLevelATE, make_user_level_panel


def _ate_frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 2))
    a = rng.integers(0, 2, 400)
    return pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "a": a,
                         "y": np.clip(x[:, 0] + a + rng.normal(size=400), -5, 5)})


def _cluster_frame() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    sub = draw_subpopulation(rng, make_gmm(1))
    z = assign_balanced(rng, sub.cidx)[0]
    return pd.DataFrame({"c": np.array(["a", "b", "c"])[sub.cidx], "z": z,
                         "y": np.where(z == 1, sub.y1, sub.y0)})


def _federated_frame() -> pd.DataFrame:
    rng = np.random.default_rng(2)
    t = np.zeros(600, int)
    t[rng.permutation(600)[:200]] = 1
    return pd.DataFrame({"t": t, "y": np.where(t == 1, 0.3, -0.1) + rng.normal(0, 0.2, 600)})


def _panel() -> pd.DataFrame:
    df = make_user_level_panel(n_units=300, n_strata=3, cells_per_unit=3, seed=5)
    return df.rename(columns={"unit_id": "user", "stratum": "s"})


SPACE = ResponseSpace(np.arange(-5, 7))
RELEASES = {
    "ate": lambda: PrivateATE(outcome_bounds=(-5, 5), n_folds=4).fit(
        _ate_frame(), treatment="a", outcome="y"),
    "ate-evaluation": lambda: PrivateATE(outcome_bounds=(-5, 5), n_folds=4, ci_share=0).fit(
        _ate_frame(), treatment="a", outcome="y", evaluation=True),
    "bounds-laplace": lambda: BoundsCheck(outcome_bounds=(-5, 5)).fit(_ate_frame(), outcome="y"),
    "bounds-gaussian": lambda: BoundsCheck(outcome_bounds=(-1, 1), zeta=0.5).fit(
        _ate_frame(), outcome="y"),
    "cluster_dp": lambda: ClusterDP(SPACE, epsilon=3.0, gamma=0.02, sigma=10.0).fit(
        _cluster_frame(), cluster="c", treatment="z", outcome="y"),
    "cluster_dp-uniform": lambda: ClusterDP(SPACE, epsilon=3.0).fit(
        _cluster_frame(), cluster="c", treatment="z", outcome="y"),
    "federated": lambda: FederatedATE(R=1.0, epsilon=1.0, delta=1e-6, m1=256, m2=256).fit(
        _federated_frame(), treatment="t", outcome="y"),
    "user_level": lambda: UserLevelATE(bounds=(0.0, 65.0), epsilon=1.0).fit(
        _panel(), treatment="arm", outcome="y", unit="user", stratum="s"),
}
# dataclass equality is defined where no field is a DataFrame
COMPARABLE = {"ate", "ate-evaluation", "bounds-laplace", "bounds-gaussian", "cluster_dp",
              "cluster_dp-uniform", "federated"}


@pytest.fixture(scope="module", params=sorted(RELEASES))
def case(request):
    return request.param, RELEASES[request.param]()


def test_json_round_trip_is_exact(case):
    name, release = case
    text = release.to_json()
    back = Release.from_json(text)
    assert type(back) is type(release) and back.kind == release.kind
    assert back.to_json() == text  # every released figure, bit for bit
    assert str(back) == str(release) and back._repr_html_() == release._repr_html_()
    pd.testing.assert_frame_equal(back.summary(), release.summary())
    if name in COMPARABLE:
        assert back == release
    assert type(release).from_dict(json.loads(text)).to_dict() == release.to_dict()


def test_from_dict_refuses_an_unknown_kind_and_the_wrong_class(case):
    _, release = case
    d = release.to_dict()
    with pytest.raises(ValueError, match=r"kind 'nonsense' is not a release kind"):
        Release.from_dict({**d, "kind": "nonsense"})
    other = ATERelease if release.kind != "ate" else BoundsCheckRelease
    with pytest.raises(ValueError, match=rf"kind '{release.kind}' is a {type(release).__name__}"
                                         rf", not a {other.__name__}"):
        other.from_dict(d)
