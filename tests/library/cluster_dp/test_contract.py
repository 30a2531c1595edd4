"""ClusterDP under the common release contract (issue 17): a scikit-learn estimator whose ``fit``
on a DataFrame with column roles returns a ``dpcausal.Release``."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from dpcausal import session
from dpcausal.accounting import PrivacyCharge
from dpcausal.cluster_dp import (
    ClusterDP,
    ClusterDPFacts,
    ClusterDPPublished,
    ClusterDPResult,
    ResponseSpace,
)
from dpcausal.cluster_dp.data import assign_balanced, draw_subpopulation, make_gmm
from dpcausal.contract import Mechanism, Prepared, Privacy, Release

from ._reference import strat_dim_loop

SPACE = ResponseSpace(np.arange(-5, 7))
PARAMS = {"space": SPACE, "epsilon": 3.0, "gamma": 0.02, "sigma": 10.0}


def test_params_are_stored_as_given():
    m = ClusterDP(**PARAMS, accounting="paper", noise_seed=3)
    assert isinstance(m, Mechanism) and m.unit == "label"
    p = m.get_params()
    assert p["epsilon"] == 3.0 and p["accounting"] == "paper" and p["space"] is SPACE
    assert p["noise_seed"] == 3 and p["strata"] == "clusters" and p["alpha"] == 0.05
    c = clone(m).set_params(epsilon=2.0)
    assert c.epsilon == 2.0 and m.epsilon == 3.0
    # the constructor stores, it does not validate (validation happens in check_input)
    bad = ClusterDP(space=SPACE, epsilon=-1.0, mechanism="nope")
    assert bad.epsilon == -1.0 and clone(bad).mechanism == "nope"


def test_fit_returns_release_with_common_names(df):
    m = ClusterDP(**PARAMS)
    r = m.fit(df, treatment="z", outcome="y", cluster="c")
    assert isinstance(r, ClusterDPResult) and isinstance(r, Release) and m.release_ is r
    assert r.kind == "cluster_dp" and r.n == len(df) and r.level == 0.95 and not r.evaluation
    assert isinstance(r.privacy, Privacy) and r.privacy.unit == "label"
    assert r.privacy.epsilon == pytest.approx(3.0) and r.privacy.delta == 0.0
    assert r.privacy.mechanism == "Cluster-DP"
    assert set(r.privacy.detail) >= {"epsilon_paper", "epsilon_strict", "accounting"}
    assert r.privacy.detail["epsilon_strict"] == pytest.approx(3.0)
    assert r.privacy.detail["epsilon_paper"] == pytest.approx(2.9)
    assert isinstance(r.published, ClusterDPPublished)
    assert r.lam == r.published.lam and r.gamma == 0.02 and r.sigma == 10.0
    assert r.space is SPACE and r.strata == "clusters"
    # ate/se/ci are the debiased estimate of the published data (post-processing), checked
    # against the hand-written loop
    pub = r.published
    m_ca = {}
    for row in pub.priors.itertuples():
        key = (row.cluster, row.arm)
        m_ca[key] = m_ca.get(key, 0.0) + row.value * row.q_tilde
    d = pub.data
    y_hat = np.array([(o - r.lam * m_ca[(c, t)]) / (1 - r.lam)
                      for c, t, o in zip(d.cluster, d.treatment, d.outcome, strict=True)])
    tau, v = strat_dim_loop(y_hat, d.cluster.to_numpy(), d.treatment.to_numpy())
    assert r.ate == pytest.approx(tau, rel=1e-12) and r.se == pytest.approx(math.sqrt(v))
    assert r.ci[0] == pytest.approx(tau - 1.959963984540054 * math.sqrt(v))


def test_printing_tables_and_json(df):
    r = ClusterDP(**PARAMS).fit(df, treatment="z", outcome="y", cluster="c")
    table = r.summary()
    assert list(table.index) == ["ATE"] and table.loc["ATE", "estimate"] == r.ate
    assert table.loc["ATE", "epsilon"] == pytest.approx(3.0)
    text = str(r)
    assert "ClusterDPResult" in text and "per label (Cluster-DP)" in text and "lambda=" in text
    d = json.loads(r.to_json())
    assert d["kind"] == "cluster_dp" and d["ate"] == r.ate and d["privacy"]["unit"] == "label"
    assert d["space"] == SPACE.values.tolist() and len(d["priors"]["q_tilde"]) == 3 * 2 * 12
    assert "published" not in d and "data" not in d  # the unit-level data stay out of the JSON
    # integer cluster labels serialise too, and equal releases compare equal
    ints = df.assign(c=df["c"].map({"a": 10, "b": 20, "c": 30}))
    m = ClusterDP(**PARAMS, noise_seed=4)
    r1 = m.fit(ints, treatment="z", outcome="y", cluster="c", evaluation=True)
    r2 = m.fit(ints, treatment="z", outcome="y", cluster="c", evaluation=True)
    assert json.loads(r1.to_json())["priors"]["cluster"][:13] == [10] * 12 + [10]
    assert r1 == r2


def test_call_forms_agree_in_evaluation_mode(df):
    """Keywords, positional roles in the ``privatize`` order, and the three phases give the same
    evaluation release for one noise seed."""
    m = ClusterDP(**PARAMS, noise_seed=11)
    a = m.fit(df, treatment="z", outcome="y", cluster="c", evaluation=True)
    b = m.fit(df, "c", "z", "y", evaluation=True)
    prepared = m.check_input(df, cluster="c", treatment="z", outcome="y")
    assert isinstance(prepared, Prepared) and prepared.public == {"n": len(df), "clusters": 3}
    charge = m.privacy_charge(**prepared.public)
    assert isinstance(prepared.public, ClusterDPFacts)
    assert m.privacy_charge(prepared.public) == charge
    assert isinstance(charge, PrivacyCharge) and charge.epsilon == pytest.approx(3.0)
    c = m._private_release(prepared, evaluation=True)
    assert a.evaluation and a.ate == b.ate == c.ate and a.se == b.se == c.se
    assert "EVALUATION" in str(a)


def test_privacy_charge_needs_no_data():
    charge = ClusterDP(**PARAMS).privacy_charge()
    assert charge.mechanism == "pure" and charge.epsilon == pytest.approx(3.0)
    assert charge.detail["unit"] == "label"


def test_missing_role_is_refused(df):
    with pytest.raises(TypeError, match="needs the cluster column: pass cluster="):
        ClusterDP(**PARAMS).fit(df, treatment="z", outcome="y")


def test_refusal_in_check_input_charges_nothing(df, monkeypatch):
    """A refusal raises in check_input: neither the charge nor the release phase runs."""
    m = ClusterDP(**PARAMS)

    def boom(*a, **k):
        raise AssertionError("charged or drew after a refusal")

    monkeypatch.setattr(m, "privacy_charge", boom)
    monkeypatch.setattr(m, "_private_release", boom)
    with pytest.raises(ValueError, match="must hold only 0/1"):
        m.fit(df.assign(z=df["z"] * 2), treatment="z", outcome="y", cluster="c")
    assert not hasattr(m, "release_")


def test_repeated_fit_warns_as_the_session_accountant_says(df):
    m = ClusterDP(**PARAMS)
    m.fit(df, treatment="z", outcome="y", cluster="c")
    with pytest.warns(session.RepeatedReleaseWarning, match="release 2 of the same data"):
        m.fit(df, treatment="z", outcome="y", cluster="c")


def test_single_unit_group_refused_before_release(df):
    one = df[~((df["c"] == "b") & (df["z"] == 1))]
    one = pd.concat([one, df[(df["c"] == "b") & (df["z"] == 1)].iloc[:1]])
    with pytest.raises(ValueError, match=r"a \(cluster, arm\) group has a single unit"):
        ClusterDP(**PARAMS).check_input(one, "c", "z", "y")


@pytest.mark.slow
@pytest.mark.parametrize("kw", [{"gamma": 0.02, "sigma": 10.0}, {}])
def test_released_ci_covers_the_ate(kw):
    """The released CI uses the total se (sampling, resampling and prior noise; spec §3.6): over
    fresh assignments and releases it covers the finite-population ATE (exactly 1, spec §4.1) at
    least at about its level. Population sizes (100, 200, 400) keep the prior noise visible."""
    rng = np.random.default_rng(5)
    sub = draw_subpopulation(rng, make_gmm(2), sizes=(100, 200, 400))
    m = ClusterDP(space=SPACE, epsilon=3.0, noise_seed=np.random.default_rng(6), **kw)
    R, covered = 300, 0
    for z in assign_balanced(rng, sub.cidx, reps=R):
        frame = pd.DataFrame({"c": sub.cidx, "z": z, "y": np.where(z == 1, sub.y1, sub.y0)})
        r = m.fit(frame, treatment="z", outcome="y", cluster="c", evaluation=True)
        covered += r.ci[0] <= 1.0 <= r.ci[1]
    assert covered / R >= 0.92  # 0.95 nominal; 3 binomial s.e. below it is 0.913


def test_check_groups_decides_from_the_public_groups_alone():
    """An orchestrator checks a registered dataset from its (cluster, arm) group sizes, with no
    data (issue 32 §3): the same facts and refusals as check_input on data with those groups."""
    mech = ClusterDP(ResponseSpace(np.arange(3.0)), epsilon=2.0)
    frame = pd.DataFrame({"c": ["a"] * 12 + ["b"] * 9, "z": [0, 1] * 6 + [0] * 5 + [1] * 4,
                          "y": [1.0] * 21})
    data = dict(mech.check_input(frame, cluster="c", treatment="z", outcome="y").public)
    assert data == {"n": 21, "clusters": 2}
    assert dict(mech.check_groups(np.array([[6, 6], [5, 4]]), ["a", "b"])) == data
    empty = frame[~((frame["c"] == "b") & (frame["z"] == 1))]
    with pytest.raises(ValueError, match=r"groups with no units: \[\('b', 1\)\]"):
        mech.check_input(empty, cluster="c", treatment="z", outcome="y")
    with pytest.raises(ValueError, match=r"groups with no units: \[\('b', 1\)\]"):
        mech.check_groups(np.array([[6, 6], [5, 0]]), ["a", "b"])
    with pytest.raises(ValueError, match="no rows"):
        mech.check_groups(np.zeros((0, 2)), [])
