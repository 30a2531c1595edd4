"""Estimation (spec cluster_dp.md §3.1, §3.6; §3.8 item 3) against explicit inverses and loops."""

import numpy as np
import pytest

from dpcausal.cluster_dp import debias, stratified_dim, transition_matrix, unit_weights
from dpcausal.cluster_dp.estimation import ClusterDPEstimate, make_estimate

from ._reference import strat_dim_loop


def test_debias_matches_explicit_inverse():
    rng = np.random.default_rng(0)
    for _ in range(20):
        K = rng.integers(2, 12)
        yvec = np.sort(rng.normal(size=K))
        q = rng.dirichlet(np.ones(K))
        lam = rng.uniform(0, 0.99)
        row = yvec @ np.linalg.inv(transition_matrix(q, lam))  # yvec^T Q^{-1}
        m = q @ yvec
        np.testing.assert_allclose(debias(yvec, np.full(K, m), lam), row, rtol=1e-10, atol=1e-10)


def test_stratified_dim_matches_loop():
    rng = np.random.default_rng(1)
    n = 60
    s = rng.integers(0, 3, n)
    z = np.zeros(n, int)
    for c in range(3):
        idx = np.flatnonzero(s == c)
        z[rng.choice(idx, idx.size // 2, replace=False)] = 1
    v = rng.normal(size=n)
    tau, vhat = stratified_dim(v, s, z, 3)
    t_ref, v_ref = strat_dim_loop(v, s, z)
    assert tau[0] == pytest.approx(t_ref, rel=1e-12)
    assert vhat[0] == pytest.approx(v_ref, rel=1e-12)
    w = unit_weights(s, z, 3)[0]
    assert np.dot(w, v) == pytest.approx(t_ref, rel=1e-12)


def test_stratified_dim_vectorised_over_assignments():
    rng = np.random.default_rng(2)
    n, R = 40, 5
    s = np.repeat([0, 1], 20)
    z = np.stack(
        [
            np.concatenate([rng.permutation(np.repeat([0, 1], 10)) for _ in range(2)])
            for _ in range(R)
        ]
    )
    v = rng.normal(size=(R, n))
    tau, vhat = stratified_dim(v, s, z, 2)
    for r in range(R):
        t_ref, v_ref = strat_dim_loop(v[r], s, z[r])
        assert tau[r] == pytest.approx(t_ref) and vhat[r] == pytest.approx(v_ref)


def test_uniform_stratified_equals_unstratified_under_balance():
    """Spec §3.1 [derived]: with n_{1,c} = n_c/2, estimators (1) and (8) coincide."""
    rng = np.random.default_rng(3)
    s = np.repeat([0, 1, 2], [10, 20, 40])
    z = np.concatenate([rng.permutation(np.repeat([0, 1], k)) for k in (5, 10, 20)])
    v = rng.integers(-5, 7, s.size).astype(float)
    a, _ = stratified_dim(v, s, z, 3)
    b, _ = stratified_dim(v, np.zeros_like(s), z, 1)
    assert a[0] == pytest.approx(b[0], rel=1e-12)


def test_estimate_result_ci_and_invariants():
    e = make_estimate(1.0, 0.04, "clusters", 0.95, 10)
    assert e.ci == pytest.approx((1 - 1.959963984540054 * 0.2, 1 + 1.959963984540054 * 0.2))
    assert "ate" in str(e) and e.to_dict()["strata"] == "clusters"
    with pytest.raises(ValueError, match="strata must be one of"):
        ClusterDPEstimate(1.0, 0.1, 0.3, (0.0, 2.0), 0.95, "bogus", 3)
