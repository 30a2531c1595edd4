"""ClusterDP public API (issue 10): release contents, post-processing estimate, refusals before
noise."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from dpcausal.accounting import PrivacyCharge
from dpcausal.cluster_dp import ClusterDP, ResponseSpace, SmallGroupWarning, eps_total, lam_for

from ._reference import strat_dim_loop

SPACE = ResponseSpace(np.arange(-5, 7))


@pytest.fixture(scope="module")
def gmm_df(df):
    return df.sample(frac=1.0, random_state=1).set_index(np.arange(3500) * 3)  # shuffled, odd index


def mech(**kw):
    args = {
        "space": SPACE,
        "epsilon": 3.0,
        "delta": 0.0,
        "gamma": 0.02,
        "sigma": 10.0,
        "mechanism": "cluster",
        "accounting": "strict",
    }
    return ClusterDP(**(args | kw))


def test_release_contents(gmm_df):
    rel = mech()._privatize(gmm_df, cluster="c", treatment="z", outcome="y", random_state=0,
                           evaluation=True)
    assert list(rel.data.columns) == ["cluster", "treatment", "outcome"]
    pd.testing.assert_index_equal(rel.data.index, pd.RangeIndex(len(gmm_df)))  # no source index
    # grouped by (cluster, arm), not in the source's order (row order is never public)
    by_group = gmm_df.sort_values(["c", "z"], kind="stable")
    np.testing.assert_array_equal(rel.data["cluster"], by_group["c"])
    np.testing.assert_array_equal(rel.data["treatment"], by_group["z"])
    assert set(rel.data["outcome"]) <= set(SPACE.values)
    assert list(rel.priors.columns) == ["cluster", "arm", "value", "q_tilde"]
    assert len(rel.priors) == 3 * 2 * 12
    assert rel.priors["q_tilde"].min() >= 0.02 - 1e-15
    assert rel.lam == pytest.approx(lam_for(3.0, 0.0, 0.02, 10.0, mode="strict"))
    assert set(rel.privacy) == {"epsilon", "delta", "accounting", "epsilon_paper", "epsilon_strict"}
    assert rel.privacy["epsilon"] == pytest.approx(3.0) == rel.privacy["epsilon_strict"]
    assert rel.privacy["epsilon_paper"] == pytest.approx(2.9)
    # same seed, same release (seeds: evaluation mode only); a Generator is
    # accepted
    again = mech()._privatize(gmm_df, "c", "z", "y", random_state=np.random.default_rng(0),
                             evaluation=True)
    pd.testing.assert_frame_equal(rel.data, again.data)
    # resampling moved some mass of each group's histogram, at most the resampled share lambda
    pub = rel.data.groupby(["cluster", "treatment", "outcome"]).size()
    true = gmm_df.groupby(["c", "z", "y"]).size().rename_axis(pub.index.names)
    moved = pub.sub(true, fill_value=0).abs().sum() / 2 / len(gmm_df)
    assert 0.05 < moved < rel.lam


def test_estimate_is_post_processing_with_loop_reference(gmm_df):
    rel = mech()._privatize(gmm_df, "c", "z", "y", random_state=3, evaluation=True)
    est = rel.estimate(strata="clusters")
    m = {(r.cluster, r.arm): 0.0 for r in rel.priors.itertuples()}
    for r in rel.priors.itertuples():
        m[(r.cluster, r.arm)] += r.value * r.q_tilde
    d = rel.data
    y_hat = [
        (o - rel.lam * m[(c, t)]) / (1 - rel.lam)
        for c, t, o in zip(d.cluster, d.treatment, d.outcome, strict=True)
    ]
    t_ref, v_ref = strat_dim_loop(np.array(y_hat), d.cluster.to_numpy(), d.treatment.to_numpy())
    assert est.ate == pytest.approx(t_ref, rel=1e-12)
    assert est.variance == pytest.approx(v_ref, rel=1e-12)
    lo, hi = est.ci
    assert lo < est.ate < hi and hi - lo == pytest.approx(2 * 1.959963984540054 * math.sqrt(v_ref))
    none = rel.estimate(strata="none")
    t_none, _ = strat_dim_loop(np.array(y_hat), np.zeros(len(d)), d.treatment.to_numpy())
    assert none.ate == pytest.approx(t_none, rel=1e-12)


@pytest.mark.parametrize("mechanism", ["cluster_free", "uniform"])
def test_pooled_mechanisms_publish_one_prior_per_arm(gmm_df, mechanism):
    rel = mech(mechanism=mechanism)._privatize(gmm_df, "c", "z", "y", random_state=0,
                                              evaluation=True)
    wide = rel.priors.pivot_table(index=["arm", "value"], columns="cluster", values="q_tilde")
    assert np.allclose(wide.to_numpy(), wide.to_numpy()[:, :1])  # identical across clusters
    if mechanism == "uniform":
        assert np.allclose(rel.priors["q_tilde"], 1 / 12)
        assert rel.privacy["epsilon_paper"] == rel.privacy["epsilon_strict"] == pytest.approx(3.0)


def test_sigma_inf_is_uniform_and_gamma_defaults():
    m = mech(sigma=math.inf, gamma=0.01)
    lam, p = m.calibrate()
    assert p["gamma"] == pytest.approx(1 / 12) and p["epsilon_strict"] == pytest.approx(3.0)
    lam_u, _ = mech(mechanism="uniform").calibrate()
    assert lam == pytest.approx(lam_u)
    # defaults: gamma = 1/K is the uniform prior, so sigma is not used (it was
    # 2/(0.2 eps) = 5.0 before); with gamma < 1/K the default sigma is 2/(0.2 eps)
    _, p = ClusterDP(space=SPACE, epsilon=2.0).calibrate()
    assert p["gamma"] == pytest.approx(1 / 12) and p["sigma"] == math.inf
    _, p = ClusterDP(space=SPACE, epsilon=2.0, gamma=0.02).calibrate()
    assert p["gamma"] == 0.02 and p["sigma"] == pytest.approx(5.0)


def test_privacy_charge_is_strict_and_data_free():
    c = mech(accounting="paper").privacy_charge()
    assert isinstance(c, PrivacyCharge) and c.mechanism == "pure"
    lam = lam_for(3.0, 0.0, 0.02, 10.0, mode="paper")
    assert (
        c.epsilon == pytest.approx(eps_total(lam, 0.02, 10.0, mode="strict")) == pytest.approx(3.1)
    )
    a = mech(delta=1e-4).privacy_charge()
    assert a.mechanism == "approx" and a.delta == 1e-4 and a.epsilon == pytest.approx(3.0)


class _TrapRng(np.random.Generator):
    """A generator that fails the test if any noise is drawn."""

    def __getattribute__(self, name):
        if name in {"laplace", "random", "integers", "choice"}:
            raise AssertionError("noise drawn before validation")
        return super().__getattribute__(name)


@pytest.mark.parametrize(
    "kw, df_change, match",
    [
        ({"out_of_space": 7.0}, None, r"out-of-space value 7.0 must be a value of the response"),
        ({"out_of_space": "drop"}, None, "out_of_space must be 'nearest' or a value"),
        (
            {},
            lambda d: d[~((d["c"] == "b") & (d["z"] == 1))],
            r"groups with no units: \[\('b', 1\)\]",
        ),
        ({}, lambda d: d.assign(z=d["z"] * 2), "treatment column 'z' must hold only 0/1"),
        ({"gamma": 0.1}, None, r"gamma must be in \[0, 1/K\] = \[0, 0.0833333\] for K=12, got 0.1"),
        ({"gamma": -0.01}, None, r"gamma must be in \[0, 1/K\]"),
        ({"sigma": 0.0}, None, "sigma=0 publishes q_tilde as a deterministic function"),
        ({"epsilon": 0.2}, None, r"infeasible: eps=0.2 <= eps1=0.2"),
        ({"epsilon": 0.3, "gamma": 0.001, "sigma": 100.0}, None, r"needs lambda=0.99\d+ >= 0.999"),
        ({"mechanism": "local"}, None, "mechanism must be one of"),
        ({"accounting": "loose"}, None, "accounting must be one of"),
        ({"epsilon": -1.0}, None, "epsilon must be a finite number > 0, got -1.0"),
        ({"delta": 1.0}, None, r"delta must be a number in \[0, 1\), got 1.0"),
    ],
)
def test_bad_input_refused_before_noise(gmm_df, kw, df_change, match):
    df = gmm_df if df_change is None else df_change(gmm_df)
    with pytest.raises(ValueError, match=match):
        mech(**kw)._privatize(df, "c", "z", "y", random_state=_TrapRng(np.random.PCG64(0)),
                             evaluation=True)


def test_bad_columns_and_types(gmm_df):
    with pytest.raises(ValueError, match=r"outcome='out' is not a column of the data"):
        mech()._privatize(gmm_df, "c", "z", "out")
    with pytest.raises(TypeError, match="df must be a pandas DataFrame"):
        mech()._privatize(gmm_df.to_numpy(), "c", "z", "y")
    with pytest.raises(TypeError, match="space must be a ResponseSpace"):
        ClusterDP(space=[1, 2, 3], epsilon=1.0).calibrate()


def test_high_lambda_opt_in(gmm_df):
    m = mech(epsilon=0.3, gamma=0.001, sigma=100.0, allow_high_lambda=True)
    assert m.calibrate()[0] > 0.999
    # paper mode with sigma = 0 (the 2/gamma branch) is refused (its noise is none): see
    # test_safeguards.py::test_sigma_zero_refused_in_every_mode


def test_small_groups_warn():
    df = pd.DataFrame({"c": [0] * 6, "z": [0, 1] * 3, "y": [0, 1, 2, 3, 4, 5]})
    with pytest.warns(SmallGroupWarning, match="only 3 < 20 units"):
        mech()._privatize(df, "c", "z", "y", random_state=0, evaluation=True)


def test_estimate_invariant_to_row_order(gmm_df):
    rel = mech()._privatize(gmm_df, "c", "z", "y", random_state=5, evaluation=True)
    shuffled = dataclasses.replace(rel, data=rel.data.sample(frac=1.0, random_state=2))
    a, b = rel.estimate(), shuffled.estimate()
    assert a.ate == pytest.approx(b.ate, rel=1e-12) and a.variance == pytest.approx(
        b.variance, rel=1e-12
    )
