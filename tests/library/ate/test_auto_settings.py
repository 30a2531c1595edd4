"""``n_folds``, ``sigma2`` and ``ci_share`` default to the planner's data-free choices (issue 19
§1): public, logged, consistent between the plan, the charge and the release."""

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression

from dpcausal import PrivateATE
from dpcausal.ate.planner import recommended


def _data(n=3000, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    A = rng.binomial(1, 0.5, n)
    Y = np.clip(0.5 + 0.1 * X[:, 0] + 0.1 * A + rng.normal(0, 0.2, n), 0, 1)
    return X, A, Y


def test_auto_k_follows_the_floor_and_is_published():
    # AIPW, d = 2, the default degree-2 models (issue 39): p = 5 features, floor
    # max(100, 10 * 6) = 100 rows, so K = 3000 // 100 = 30; K <= 256: one block (issue 28)
    X, A, Y = _data()
    rel = PrivateATE(outcome_bounds=(0, 1)).fit(X, A, Y, evaluation=True)
    assert rel.params["n_folds"] == 30
    assert (rel.params["n_blocks"], rel.params["block_folds"]) == (1, 30)
    assert rel.params["planned"] == (
        "n_folds,sigma2,ci_share,block_folds,propensity_clip,estimator")
    # plain logistic / linear models: floor max(25, 8 * 3) = 25 rows, K = 3000 // 25 = 120 (the
    # 60 s budget and sqrt(3000) = 54 do not bind at this n)
    plain = PrivateATE(outcome_bounds=(0, 1), propensity_model=LogisticRegression(),
                       outcome_model=LinearRegression()).fit(X, A, Y, evaluation=True)
    assert plain.params["n_folds"] == 120
    assert rel.params["sigma2"] == "tight"             # the narrower valid sigma2 (spec §2.5)
    assert rel.params["ci_share"] in (0.05, 0.1, 0.2, 0.3)
    assert rel.params["compute_budget"] == 60.0
    fixed = PrivateATE(estimator="aipw", outcome_bounds=(0, 1), n_folds=50, sigma2="paper",
                       ci_share=0.1)
    params = fixed.fit(X, A, Y, evaluation=True).params
    assert (params["n_folds"], params["sigma2"], params["ci_share"], params["planned"]) == (
        50, "paper", 0.1, "propensity_clip")       # eta is "auto" by default (issue 39)


def test_the_plans_recommended_row_is_what_auto_chooses():
    est = PrivateATE(outcome_bounds=(0, 1), zeta=1.0)
    for n, d in ((3000, 2), (200_000, 5), (1_000_000, 5), (5_000_000, 20)):
        best = recommended(est.plan(n, d))
        assert best["n_folds"] == est.resolved_n_folds(n, d)
        assert (best["sigma2"], best["ci_share"]) == est.resolved_noise_modes(n, d)
        cal = est.calibration(n, d)
        assert best["sigma1"] == pytest.approx(cal.sigma_ate, rel=1e-12)


def test_the_plan_and_the_estimator_comparison_plan_the_k_the_release_takes():
    """The ensemble's row of compare_estimators (what auto ranks by) and the plan's recommended
    row are at the K and noise the release takes, for the default degree-2 models too (main
    compared them at the plain models' K: on the NSW + CPS design 8.5 where releases gave 33),
    and where no K keeps the rows-per-fold floor (d = 18 at n = 1,566: the release takes K = 2,
    the plan recommended K = 500)."""
    for n, d in ((16_177, 8), (1_566, 18), (3_000, 2)):
        est = PrivateATE(outcome_bounds=(0, 60), zeta=1.0, covariate_bounds=[(0, 1)] * d,
                         assume_linear=True)
        best = recommended(PrivateATE(**est.get_params() | {"estimator": "aipw"}).plan(n, d))
        assert best["n_folds"] == est.resolved_n_folds(n, d)
        compared = est.compare_estimators(n, d).set_index("estimator")
        cal = PrivateATE(**est.get_params() | {"estimator": "aipw"}).calibration(n, d)
        assert best["sigma1"] == pytest.approx(cal.sigma_ate, rel=1e-12)
        assert compared.loc["aipw", "halfwidth"] == pytest.approx(best["halfwidth"], rel=1e-12)


def test_auto_k_at_a_million_rows_is_far_narrower_than_the_old_default():
    """Issue 19: K = 500 gave a CI about 26x the non-private one (worst-case spread, zeta 1)."""
    plain = {"propensity_model": LogisticRegression(), "outcome_model": LinearRegression(),
             "propensity_clip": 0.2}     # issue 19's models and eta
    est = PrivateATE(outcome_bounds=(0, 1), zeta=1.0, **plain)
    best = recommended(est.plan(1_000_000, 5))
    old = PrivateATE(outcome_bounds=(0, 1), zeta=1.0, n_folds=500, sigma2="paper",
                     ci_share=0.1, **plain).plan(1_000_000, 5, n_folds=[500]).iloc[0]
    assert best["n_folds"] >= 5000 and best["ratio"] <= 3.0 < old["ratio"] / 5


def test_the_charge_needs_d_only_for_auto_k():
    est = PrivateATE(outcome_bounds=(0, 1), zeta=1.2)
    with pytest.raises(ValueError, match="needs|depends on the number of covariates d"):
        est.privacy_charge(10_000)
    charge = est.privacy_charge(10_000, 3)
    assert charge.zeta == pytest.approx(1.2)
    share = est.resolved_noise_modes(10_000, 3)[1]
    assert charge.detail["zeta2"] == pytest.approx(1.2 * share**0.5)
    assert PrivateATE(outcome_bounds=(0, 1), n_folds=20).privacy_charge(10_000).zeta == 1.5


def test_a_release_refuses_nuisances_of_another_k():
    X, A, Y = _data(n=600)
    est = PrivateATE(outcome_bounds=(0, 1), n_folds=6, random_state=0)
    other = PrivateATE(outcome_bounds=(0, 1), n_folds=5, random_state=0)
    Xa, Aa, Ya = other.validate(X, A, Y)
    folds = other.make_folds(600, evaluation=True)
    nuis = other.aggregate(Xa, folds, other.fit_folds(Xa, Aa, Ya, folds))
    with pytest.raises(ValueError, match="aggregated over 5 folds but the release is calibrated"):
        est._release(Aa, Ya, nuis, evaluation=True)
    assert other._release(Aa, Ya, nuis, evaluation=True).params["n_folds"] == 5


def test_block_scores_summed_over_partitions_give_the_in_memory_release():
    """Issue 19 §3's building blocks: folds fitted partition by partition (each holding whole
    folds) and scores of row blocks, summed, equal the in-memory release (sigma = 0 parts)."""
    X, A, Y = _data(n=1200, d=3, seed=5)
    est = PrivateATE(outcome_bounds=(0, 1), n_folds=12, random_state=3, noise_seed=4)
    whole = est.fit(X, A, Y, evaluation=True)
    Xa, Aa, Ya = est.validate(X, A, Y)
    folds = est.make_folds(1200, evaluation=True)
    parts = [np.isin(folds, range(0, 5)), np.isin(folds, range(5, 12))]
    models = [m for p, ks in zip(parts, (range(0, 5), range(5, 12)), strict=True)
              for m in est.fit_folds(Xa[p], Aa[p], Ya[p], folds[p], ks=list(ks))]
    gammas = [est.block_scores(Xa[r], Aa[r], Ya[r], folds[r], models)
              for r in np.array_split(np.arange(1200), 3)]
    total = sum(float(g.sum()) for g in gammas)
    total_sq = sum(float((g * g).sum()) for g in gammas)
    rel = est._release_sums(1200, total, total_sq, n_folds=12, evaluation=True)
    assert abs(rel.nonprivate["ate"] - whole.nonprivate["ate"]) < 1e-12
    assert abs(rel.nonprivate["variance"] - whole.nonprivate["variance"]) < 1e-9 * max(
        1.0, whole.nonprivate["variance"])
    assert rel.ate == whole.ate                  # the same seeded noise on the same estimate
    with pytest.raises(ValueError, match="aggregated over 11 folds"):
        est._release_sums(1200, total, total_sq, n_folds=11, evaluation=True)
