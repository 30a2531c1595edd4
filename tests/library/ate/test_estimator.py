"""PrivateATE's contract: hygiene (spec §5 item 11), determinism (item 12), bad input (issue 3),
results that print and serialise, fallbacks for degenerate folds (§2.7)."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline

from dpcausal import ATERelease, PrivateATE
from dpcausal.ate.release import clamp_to_feasible
from dpcausal.datasets import make_experiment_a


@pytest.fixture(scope="module")
def data_a():
    X, A, Y, _ = make_experiment_a(n=2000, random_state=0)
    return X, A, Y


def test_fit_returns_a_private_release(data_a):
    rel = PrivateATE(estimator="aipw", n_folds=40, random_state=0,
                     outcome_bounds=(-1, 1)).fit(*data_a)
    assert isinstance(rel, ATERelease) and not rel.evaluation and rel.nonprivate is None
    lo, hi = rel.ci
    assert lo < rel.ate < hi and rel.variance > rel.noise["sigma_ate"] ** 2
    # plain Python floats: they print as numbers, not np.float64(...)
    assert all(type(v) is float for v in (rel.ate, lo, hi, rel.variance))
    assert rel.privacy.zeta == pytest.approx(1.5) and rel.privacy.unit == "row"
    assert rel.privacy.epsilon == pytest.approx(7.0514, abs=1e-3)
    assert rel.privacy.rho == pytest.approx(1.125)
    assert rel.privacy.mechanism == "gaussian"
    assert rel.privacy.detail["zeta1"] == pytest.approx(1.5 * 0.9**0.5)
    assert rel.se == pytest.approx(rel.variance**0.5) and rel.level == pytest.approx(0.95)
    assert rel.noise_share() == pytest.approx(rel.noise["sigma_ate"] ** 2 / rel.variance)
    assert rel.confint().iloc[0].tolist() == list(rel.ci)
    d = rel.to_dict()
    json.dumps(d)
    assert d["kind"] == "ate" and d["ate"] == rel.ate and d["nonprivate"] is None
    assert d["privacy"]["unit"] == "row" and d["se"] == rel.se
    text = str(rel)
    assert "ATE" in text and "1.5-GDP" in text and "EVALUATION" not in text


def test_release_mode_carries_no_nonprivate_value(data_a):
    """Item 11: the non-private estimate and variance appear nowhere in a release's dict/str."""
    ev = PrivateATE(n_folds=40, random_state=0,
                    outcome_bounds=(-1, 1)).fit(*data_a, evaluation=True)
    rel = PrivateATE(n_folds=40, random_state=0, outcome_bounds=(-1, 1)).fit(*data_a)
    secrets = {repr(ev.nonprivate["ate"]), repr(ev.nonprivate["variance"]),
               f"{ev.nonprivate['ate']:.6g}"}
    blob = rel.to_json() + str(rel) + repr(rel.to_dict())
    assert not any(s in blob for s in secrets)


def test_point_estimate_only(data_a):
    rel = PrivateATE(estimator="g", n_folds=40, ci_share=0.0, random_state=0,
                     outcome_bounds=(-1, 1)).fit(*data_a)
    assert rel.ci is None and rel.variance is None and rel.se is None
    assert rel.privacy.zeta == pytest.approx(1.5) and rel.privacy.detail["zeta2"] == 0
    assert rel.noise_share() is None and "not released" in str(rel)


def test_determinism_in_evaluation(data_a):
    def fit(noise_seed):
        return PrivateATE(n_folds=40, folds="shuffle", random_state=3,
                          noise_seed=noise_seed,
                          outcome_bounds=(-1, 1)).fit(*data_a, evaluation=True)

    a, b, c = fit(3), fit(3), fit(4)
    assert a.to_dict() == b.to_dict()
    assert a.ate != c.ate and a.nonprivate == c.nonprivate


def test_published_parameters_never_carry_the_noise_seed(data_a):
    """A seeded draw is reproducible from its seed, so the release records only that a seed was
    set; without a seed two releases differ (OS entropy)."""
    seed = 987_654_321
    seeded = PrivateATE(n_folds=20, noise_seed=seed,
                        outcome_bounds=(-1, 1)).fit(*data_a, evaluation=True)
    assert str(seed) not in json.dumps(seeded.to_dict())
    assert seeded.params["noise_seeded"] is True
    a, b = (PrivateATE(n_folds=20, outcome_bounds=(-1, 1)).fit(*data_a) for _ in range(2))
    assert a.params["noise_seeded"] is False and a.ate != b.ate


def test_fold_assignment_ignores_data_values(data_a):
    """Item 11: same seed and n give the same folds whatever X, A, Y hold (evaluation)."""
    X, A, Y = data_a
    seen = []

    class Spy(PrivateATE):
        def fit_folds(self, X, A, Y, fold_ids, ks=None):
            seen.append(fold_ids.copy())
            return super().fit_folds(X, A, Y, fold_ids, ks)

    rng = np.random.default_rng(0)
    spy = Spy(n_folds=40, folds="shuffle", random_state=9, outcome_bounds=(-1, 1))
    spy.fit(X, A, Y, evaluation=True)
    spy.fit(rng.permutation(X), rng.permutation(A), -Y, evaluation=True)
    assert np.array_equal(seen[0], seen[1])


class RecordingScaler(TransformerMixin, BaseEstimator):
    """A scaler that records which rows (by a fingerprint column) it was fitted on."""

    log: list = []

    def fit(self, X, y=None):
        RecordingScaler.log.append(frozenset(np.round(X[:, -1], 12)))
        self.mean_ = X.mean(axis=0)
        return self

    def transform(self, X):
        return X - self.mean_


def test_preprocessing_is_fitted_inside_the_fold():
    """Item 11: a Pipeline's scaler only ever sees one fold's rows (never a global fit)."""
    rng = np.random.default_rng(1)
    n, K = 300, 5
    X = np.column_stack([rng.standard_normal(n), np.arange(n) / 1000.0])   # fingerprint column
    A = rng.binomial(1, 0.5, n)
    Y = np.clip(0.2 * A + rng.normal(0, 0.2, n), -1, 1)
    RecordingScaler.log = []
    est = PrivateATE(estimator="aipw", n_folds=K, folds="contiguous", random_state=0,
                     propensity_model=make_pipeline(RecordingScaler(), LogisticRegression()),
                     outcome_model=make_pipeline(RecordingScaler(), LinearRegression()),
                     outcome_bounds=(-1, 1))
    est.fit(X, A, Y, evaluation=True)
    folds = [frozenset(np.round(X[rows, -1], 12)) for rows in np.array_split(np.arange(n), K)]
    assert len(RecordingScaler.log) == 3 * K
    assert all(any(seen <= fold for fold in folds) for seen in RecordingScaler.log)


def test_degenerate_folds_use_fold_local_fallbacks():
    """§2.7: a fold with one arm gets constant nuisances; the release still works."""
    rng = np.random.default_rng(2)
    n = 200
    X = rng.standard_normal((n, 1))
    A = np.r_[np.ones(40), rng.binomial(1, 0.5, n - 40)].astype(int)   # fold 0 all treated
    Y = np.clip(0.1 * A + rng.normal(0, 0.1, n), -1, 1)
    est = PrivateATE(estimator="aipw", n_folds=5, folds="contiguous", random_state=0,
                     outcome_bounds=(-1, 1), propensity_clip=0.2)
    Xa, Aa, Ya = est.validate(X, A, Y)
    fm = est.fit_fold(Xa, Aa, Ya, est.make_folds(n, evaluation=True), 0)
    assert fm.propensity == pytest.approx(0.8)      # clip(mean A = 1, eta, 1 - eta)
    # the default models (issue 39): degree-2 features, then least squares
    assert fm.mu0 is None and isinstance(fm.mu1[-1], LinearRegression) and fm.failed == 0
    assert np.isfinite(est.fit(X, A, Y, evaluation=True).ate)
    # propensity_clip="auto": the fit clips at the rule's least eta, 0.01; the aggregation
    # clips again at the release's eta
    auto = est.set_params(propensity_clip="auto")
    assert auto.fit_fold(Xa, Aa, Ya, auto.make_folds(n, evaluation=True), 0).propensity == (
        pytest.approx(0.99))


def test_binary_outcome_with_classifier():
    rng = np.random.default_rng(4)
    n = 1000
    X = rng.standard_normal((n, 2))
    A = rng.binomial(1, 0.5, n)
    Y = rng.binomial(1, 0.3 + 0.2 * A)
    rel = PrivateATE(estimator="g", outcome_model=LogisticRegression(), outcome_bounds=(0, 1),
                     n_folds=10, random_state=0).fit(X, A, Y, evaluation=True)
    assert rel.noise["B_mu"] == 0.5
    assert rel.nonprivate["ate"] == pytest.approx(0.2, abs=0.08)


def test_dataframe_input(data_a):
    X, A, Y = data_a
    df = pd.DataFrame(X, columns=["x1"])
    a = PrivateATE(n_folds=40, random_state=0,
                   outcome_bounds=(-1, 1)).fit(df, pd.Series(A), pd.Series(Y),
                                                   evaluation=True)
    b = PrivateATE(n_folds=40, random_state=0, outcome_bounds=(-1, 1)).fit(X, A, Y,
                                                                      evaluation=True)
    assert a.nonprivate == b.nonprivate


def _ok():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 2))
    A = rng.binomial(1, 0.5, 100)
    Y = np.clip(rng.normal(0, 0.3, 100), -1, 1)
    return X, A, Y


@pytest.mark.parametrize("kwargs, data_edit, match", [
    ({}, lambda X, A, Y: (X, A[:-1], Y), "same number of rows"),
    ({"n_folds": 1}, None, r"^n_folds must be >= 2 \(K=2 is plain cross-fitting\), got 1$"),
    ({"n_folds": 60}, None, r"^n_folds=60 is too large for n=100: each fold needs at least 2 "
                            r"rows; use n_folds <= 50 \(PrivateATE also takes n_folds='auto'"),
    ({"n_folds": 5.0}, None, r"^n_folds must be an integer in \[2, n // 2\] = \[2, 50\], got "
                             r"5\.0 \(float\)$"),
    ({"propensity_clip": 0.6}, None, r"propensity_clip .* must be in \(0, 0.5\]"),
    ({"propensity_clip": 0.0}, None, "propensity_clip"),
    ({"zeta": 0.0}, None, "zeta must be a finite number > 0"),
    ({"ci_share": 1.0}, None, r"ci_share must be in \[0, 1\)"),
    ({"estimator": "dr"}, None, "estimator must be one of"),
    ({"outcome_bounds": (1, -1)}, None, "outcome_bounds must be finite with low < high"),
    ({"outcome_bounds": None}, None, r"outcome_bounds is required: pass .* no safe default"),
    ({"propensity_model": LinearRegression()}, None,
     "propensity_model must implement fit and predict_proba"),
    ({"sigma2": "exact"}, None, "sigma2 must be one of"),
    ({"p1": 0.05}, None, r"p1 must be in \(0, alpha/2\)"),
])
def test_bad_input_is_refused_before_any_noise(kwargs, data_edit, match, monkeypatch):
    """Parameter and schema errors: refused before the charge in either mode. Data-value errors
    carry their detail in evaluation mode only (a release's are generic: test_estimator_safeguards);
    either way no noise is drawn."""
    X, A, Y = _ok()
    evaluation = data_edit is not None and kwargs == {} and match != "same number of rows"
    if data_edit:
        X, A, Y = data_edit(X, A, Y)
    drawn = []
    import dpcausal.ate.estimator as mod
    real = mod.draw_release
    monkeypatch.setattr(mod, "draw_release", lambda *a, **k: drawn.append(1) or real(*a, **k))
    params = {"n_folds": 5, "random_state": 0, "outcome_bounds": (-1, 1), **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            PrivateATE(**params).fit(X, A, Y, evaluation=evaluation)
    assert drawn == []


@pytest.mark.parametrize("n_folds", [1, 60, 5.0, True])
def test_n_folds_is_refused_with_one_text_by_the_estimator_and_make_folds(n_folds):
    """One check of n_folds (dpcausal.ate.folds.check_n_folds): PrivateATE's public checks and
    make_folds refuse a bad K with the same exception and the same text."""
    from dpcausal.ate.folds import make_folds

    with pytest.raises((ValueError, TypeError)) as direct:
        make_folds(100, n_folds)
    with pytest.raises(direct.type) as estimator:
        PrivateATE(n_folds=n_folds, outcome_bounds=(-1, 1)).fit(*_ok(), evaluation=True)
    assert str(estimator.value) == str(direct.value) and "n_folds" in str(direct.value)


def test_released_code_mode_warns():
    X, A, Y = _ok()
    with pytest.warns(UserWarning, match="NOT a valid privacy bound"):
        rel = PrivateATE(n_folds=5, sensitivity="released_code", random_state=0,
                         outcome_bounds=(-1, 1)).fit(X, A, Y)
    assert rel.privacy.detail["valid_claim"] is False


def test_small_folds_warn():
    X, A, Y = _ok()
    with pytest.warns(UserWarning, match="rows per fold"):
        PrivateATE(n_folds=10, random_state=0, outcome_bounds=(-1, 1)).fit(X, A, Y)


def test_repr_shows_non_defaults():
    assert repr(PrivateATE(estimator="g", zeta=0.5)) == "PrivateATE(estimator='g', zeta=0.5)"


def test_clamp_to_feasible_by_hand():
    """Issue 25 §6: a binary outcome's ATE lies in [-1, 1]; 1.03 [0.53, 1.54] is clamped."""
    assert clamp_to_feasible(1.03, (0.53, 1.54), (0, 1)) == (1.0, (0.53, 1.0), (-1.0, 1.0))
    assert clamp_to_feasible(-7.0, None, (2, 4)) == (-2.0, None, (-2.0, 2.0))
    assert clamp_to_feasible(0.2, (-0.1, 0.5), (0, 1)) == (0.2, (-0.1, 0.5), None)


def test_binary_release_stays_in_the_feasible_range_and_says_it_was_clamped():
    rng = np.random.default_rng(4)
    n = 1000
    X = rng.standard_normal((n, 2))
    A = rng.binomial(1, 0.5, n)
    Y = rng.binomial(1, 0.3 + 0.2 * A)
    with pytest.warns(UserWarning, match="noise alone is wider"):
        rel = PrivateATE(outcome_bounds=(0, 1), n_folds=10, zeta=0.2,
                         random_state=0).fit(X, A, Y, evaluation=True)
    assert rel.noise["sigma_ate"] > 4  # unclamped, the ATE would leave [-1, 1] most of the time
    assert -1.0 <= rel.ci[0] <= rel.ate <= rel.ci[1] <= 1.0
    assert rel.clamped_to == (-1.0, 1.0)
    assert rel.to_dict()["clamped_to"] == [-1.0, 1.0]
    assert "to the feasible range [-1, 1] of the outcome bounds" in str(rel)
