"""Tests for dpcausal.meta: pooling private ATE releases (spec dp_ate_ensemble.md §4, §5.10)."""

from __future__ import annotations

import dataclasses
import json
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.meta_analysis import combine_effects

from dpcausal.meta import MetaResult, combine

# Heterogeneous studies (Q > N-1, so DerSimonian-Laird's tau2 is positive and no truncation is
# involved when comparing with statsmodels, which does not truncate at 0).
ATE = np.array([0.10, 0.25, 0.18, -0.05, 0.31])
VAR = np.array([0.0020, 0.0045, 0.0011, 0.0030, 0.0060])
ZETA = [1.5, 0.5, 1.0, 1.5, 2.0]
N = [20000, 5000, 50000, 20000, 3000]


def _dicts(ate=ATE, var=VAR):
    return [{"ate": a, "variance": v} for a, v in zip(ate, var, strict=True)]


studies_strategy = st.lists(
    st.tuples(st.floats(-1, 1), st.floats(1e-4, 1.0)), min_size=2, max_size=12
)


# --- weights ------------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(studies=studies_strategy, weighting=st.sampled_from(["inverse_variance", "paper_sqrt",
                                                             "equal"]),
       model=st.sampled_from(["fixed", "random"]))
def test_weights_are_nonnegative_and_sum_to_one(studies, weighting, model):
    ate, var = map(np.array, zip(*studies, strict=True))
    res = combine(_dicts(ate, var), weights=weighting, model=model)
    assert math.isclose(math.fsum(res.weights), 1.0, abs_tol=1e-12)
    assert min(res.weights) >= 0
    assert res.studies["weight"].tolist() == list(res.weights)


@settings(max_examples=60, deadline=None)
@given(studies=studies_strategy)
def test_inverse_variance_never_has_larger_variance_than_paper_sqrt_or_equal(studies):
    # Cauchy-Schwarz, spec §4 erratum: 1/sum(1/V) <= N / (sum V^{-1/2})^2
    ate, var = map(np.array, zip(*studies, strict=True))
    iv = combine(_dicts(ate, var), weights="inverse_variance").variance
    assert iv <= combine(_dicts(ate, var), weights="paper_sqrt").variance * (1 + 1e-12)
    assert iv <= combine(_dicts(ate, var), weights="equal").variance * (1 + 1e-12)


@pytest.mark.parametrize("weighting", ["inverse_variance", "paper_sqrt", "equal"])
@pytest.mark.parametrize("model", ["fixed", "random"])
def test_equal_variances_give_the_plain_mean(weighting, model):
    ate = [0.1, 0.4, -0.2, 0.3]
    res = combine([{"ate": a, "variance": 0.01} for a in ate], weights=weighting, model=model)
    assert res.ate == pytest.approx((0.1 + 0.4 - 0.2 + 0.3) / 4, abs=1e-15)
    assert res.weights == pytest.approx((0.25,) * 4, abs=1e-15)
    if model == "fixed":
        assert res.variance == pytest.approx(0.01 / 4, rel=1e-12)


def test_two_study_example_by_hand():
    # ate (0.1, 0.3), V (0.01, 0.04). Inverse variance: weights 100:25 = (0.8, 0.2),
    # ate 0.14, V = 1/125 = 0.008. Paper (Prop. 1): weights 10:5 = (2/3, 1/3), ate 0.5/3,
    # V = (1/N)((1/N) sum V^{-1/2})^{-2} = 0.5 / 7.5^2 (spec §4).
    studies = [{"ate": 0.1, "variance": 0.01}, {"ate": 0.3, "variance": 0.04}]
    iv = combine(studies)
    assert iv.weights == pytest.approx((0.8, 0.2), rel=1e-14)
    assert iv.ate == pytest.approx(0.14, rel=1e-14)
    assert iv.variance == pytest.approx(0.008, rel=1e-14)
    assert iv.se == pytest.approx(math.sqrt(0.008), rel=1e-14)
    paper = combine(studies, weights="paper_sqrt")
    assert paper.weights == pytest.approx((2 / 3, 1 / 3), rel=1e-14)
    assert paper.ate == pytest.approx(0.5 / 3, rel=1e-14)
    assert paper.variance == pytest.approx(0.5 / 7.5**2, rel=1e-14)
    equal = combine(studies, weights="equal")
    assert equal.variance == pytest.approx(0.25 * 0.01 + 0.25 * 0.04, rel=1e-14)


def test_custom_weights_are_normalised_and_used_as_given():
    res = combine(_dicts(), weights=[2, 0, 1, 1, 0])
    assert res.weighting == "custom"
    assert res.weights == pytest.approx((0.5, 0.0, 0.25, 0.25, 0.0), abs=1e-15)
    expected_var = 0.25 * VAR[0] + 0.0625 * VAR[2] + 0.0625 * VAR[3]
    assert res.ate == pytest.approx(0.5 * ATE[0] + 0.25 * ATE[2] + 0.25 * ATE[3], rel=1e-14)
    assert res.variance == pytest.approx(expected_var, rel=1e-14)


def test_single_study_fixed_effect_returns_that_study():
    res = combine([{"ate": 0.2, "variance": 0.04, "label": "only"}])
    assert (res.ate, res.variance, res.weights) == (0.2, 0.04, (1.0,))


# --- agreement with statsmodels -------------------------------------------------------------------

def test_fixed_effect_matches_statsmodels():
    ref = combine_effects(ATE, VAR, method_re="dl")
    res = combine(_dicts(), model="fixed")
    assert res.ate == pytest.approx(ref.mean_effect_fe, abs=1e-10)
    assert res.variance == pytest.approx(ref.var_eff_w_fe, abs=1e-10)
    assert res.weights == pytest.approx(tuple(ref.weights_rel_fe), abs=1e-10)
    low, high = ref.conf_int(alpha=0.05)[0]
    assert res.ci == pytest.approx((low, high), abs=1e-10)
    assert (res.tau2, res.q, res.i2) == (None, None, None)


def test_dersimonian_laird_matches_statsmodels():
    ref = combine_effects(ATE, VAR, method_re="dl")
    assert ref.tau2 > 0  # the comparison must not depend on truncation at 0
    res = combine(_dicts(), model="random")
    assert res.tau2 == pytest.approx(ref.tau2, abs=1e-10)
    assert res.q == pytest.approx(ref.q, abs=1e-10)
    assert res.i2 == pytest.approx(ref.i2, abs=1e-10)
    assert res.ate == pytest.approx(ref.mean_effect_re, abs=1e-10)
    assert res.variance == pytest.approx(ref.var_eff_w_re, abs=1e-10)
    assert res.weights == pytest.approx(tuple(ref.weights_rel_re), abs=1e-10)
    low, high = ref.conf_int(alpha=0.05)[1]
    assert res.ci == pytest.approx((low, high), abs=1e-10)


def test_dersimonian_laird_by_hand_loop():
    w = [1 / v for v in VAR]
    fixed = sum(wi * a for wi, a in zip(w, ATE, strict=True)) / sum(w)
    q = sum(wi * (a - fixed) ** 2 for wi, a in zip(w, ATE, strict=True))
    tau2 = max(0.0, (q - 4) / (sum(w) - sum(wi * wi for wi in w) / sum(w)))
    lam = [1 / (v + tau2) for v in VAR]
    lam = [x / sum(lam) for x in lam]
    res = combine(_dicts(), model="random")
    assert res.q == pytest.approx(q, rel=1e-12)
    assert res.i2 == pytest.approx((q - 4) / q, rel=1e-12)
    assert res.ate == pytest.approx(sum(x * a for x, a in zip(lam, ATE, strict=True)), rel=1e-12)
    assert res.variance == pytest.approx(
        sum(x * x * (v + tau2) for x, v in zip(lam, VAR, strict=True)),
                                         rel=1e-12)


def test_homogeneous_studies_truncate_tau2_at_zero_and_equal_fixed_effect():
    ate, var = [0.15, 0.151, 0.149], [0.01, 0.02, 0.015]
    ref = combine_effects(np.array(ate), np.array(var), method_re="dl")
    assert ref.tau2 < 0  # statsmodels does not truncate; the spec's DL does (max(0, .))
    random, fixed = combine(_dicts(ate, var), model="random"), combine(_dicts(ate, var))
    assert (random.tau2, random.i2) == (0.0, 0.0)
    assert random.ate == fixed.ate and random.variance == fixed.variance


def test_random_effects_with_custom_or_paper_weights_adds_tau2_to_every_variance():
    tau2 = combine(_dicts(), model="random").tau2
    lam = np.array([1.0, 2.0, 3.0, 4.0, 5.0]) / 15
    res = combine(_dicts(), model="random", weights=lam * 7)
    assert res.variance == pytest.approx(float(np.sum(lam**2 * (VAR + tau2))), rel=1e-12)
    sqrt_w = 1 / np.sqrt(VAR + tau2)
    paper = combine(_dicts(), model="random", weights="paper_sqrt")
    assert paper.weights == pytest.approx(tuple(sqrt_w / sqrt_w.sum()), rel=1e-12)


# --- confidence interval ------------------------------------------------------------------------

@pytest.mark.parametrize(("level", "critical", "c"), [
    (0.95, "normal", 1.959964), (0.90, "normal", 1.644854), (0.95, "paper", 2.053749),
    (0.90, "paper", 1.695398),  # Phi^{-1}(1 - 0.05 + 0.005)
])
def test_ci_critical_values(level, critical, c):
    res = combine(_dicts(), level=level, critical=critical)
    assert res.critical_value == pytest.approx(c, abs=1e-6)
    assert res.ci == pytest.approx((res.ate - c * res.se, res.ate + c * res.se), abs=1e-6)
    assert res.studies["ci_high"].to_numpy() == pytest.approx(ATE + c * np.sqrt(VAR), abs=1e-6)


# --- input forms --------------------------------------------------------------------------------

def _release(a, v, z, n, label=None):
    ns = SimpleNamespace(ate=a, variance=v, privacy={"zeta": z, "zeta1": z}, n=n)
    if label is not None:
        ns.label = label
    return ns


def test_release_objects_dicts_and_dataframe_agree():
    objects = [_release(a, v, z, n) for a, v, z, n in zip(ATE, VAR, ZETA, N, strict=True)]
    dicts = [{"ate": a, "variance": v, "zeta": z, "n": n}
             for a, v, z, n in zip(ATE, VAR, ZETA, N, strict=True)]
    frame = pd.DataFrame({"ate": ATE, "variance": VAR, "zeta": ZETA, "n": N})
    results = [combine(x, model="random") for x in (objects, dicts, frame)]
    for res in results[1:]:
        assert res.to_dict() == results[0].to_dict()
    studies = results[0].studies
    assert studies["label"].tolist() == [f"study {j}" for j in range(1, 6)]
    assert studies["zeta"].tolist() == ZETA and studies["n"].tolist() == N


def test_labels_come_from_label_field_or_dataframe_index():
    frame = pd.DataFrame({"ate": ATE[:2], "variance": VAR[:2]}, index=["Lyon", "Oslo"])
    assert combine(frame).studies["label"].tolist() == ["Lyon", "Oslo"]
    objects = [_release(0.1, 0.01, 1.0, 10, "a"), {"ate": 0.2, "variance": 0.02, "label": "b"}]
    res = combine(objects)
    assert res.studies["label"].tolist() == ["a", "b"]
    assert res.studies["zeta"].isna().tolist() == [False, True]


#: what combine may read of a release: released numbers and public descriptions
PUBLIC_NAMES = {"privacy", "zeta", "epsilon", "delta", "unit", "mechanism", "n", "label", "se",
                "ci", "noise_share", "dataset", "dataset_id", "kind", "estimator", "params",
                "n_folds", "estimand"}


def test_reads_only_released_numbers():
    # A release whose other attributes would be non-private intermediates: combine must not
    # read them.
    class Release:
        def __init__(self, ate, variance):
            self.ate, self.variance = ate, variance

        def __getattr__(self, name):
            if name in PUBLIC_NAMES:
                return None
            raise AssertionError(f"combine read {name!r}, which is not a released number")

    res = combine([Release(a, v) for a, v in zip(ATE, VAR, strict=True)])
    assert res.ate == pytest.approx(combine(_dicts()).ate, abs=0)


def _core_release(seed, ci_share=0.1):
    from sklearn.linear_model import LinearRegression

    from dpcausal import PrivateATE
    from dpcausal.datasets import make_experiment_d

    X, A, Y, _ = make_experiment_d(3000, random_state=seed)
    estimator = PrivateATE(estimator="aipw", outcome_model=LinearRegression(), n_folds=10,
                           outcome_bounds=(-1, 1), zeta=1.5, ci_share=ci_share,
                           random_state=seed)
    return estimator.fit(X, A, Y)


def test_reads_core_ate_releases():
    releases = [_core_release(seed) for seed in (1, 2)]
    res = combine(releases)
    w = np.array([1 / r.variance for r in releases])
    assert res.ate == pytest.approx(float(np.dot(w / w.sum(), [r.ate for r in releases])),
                                    rel=1e-12)
    assert res.studies["n"].tolist() == [3000, 3000]
    assert list(res.privacy["study_zeta"].values()) == [1.5, 1.5]  # zeta of each release
    labels = [f"{r.dataset} ate aipw K=10 Y in [-1, 1]" for r in releases]  # two data identities
    assert list(res.privacy["study_zeta"]) == labels and labels[0] != labels[1]
    with pytest.raises(ValueError, match=r"releases\[1\]\.variance is None"):
        combine([releases[0], _core_release(3, ci_share=0.0)])


# --- privacy position ---------------------------------------------------------------------------

def _passes_spec_composition(epsilon):
    # spec §1.3 table: sqrt(1.5^2 + 0.5^2) = 1.5811-GDP <=> epsilon 7.5113 at delta 1e-5
    return abs(epsilon - 7.5113) < 1e-3


def test_privacy_position_no_charge_and_composed_exposure_of_shared_studies():
    dicts = [{"ate": a, "variance": v, "zeta": z, "label": lab}
             for a, v, z, lab in zip(ATE, VAR, ZETA, "ABCDE", strict=True)]
    res = combine(dicts, shared_people=["A", "B"])
    p = res.privacy
    assert p["additional_charge"] == 0
    assert "no additional privacy charge" in p["statement"]
    assert p["study_zeta"] == dict(zip("ABCDE", ZETA, strict=True))
    assert p["study_epsilon"]["A"] == pytest.approx(7.0514, abs=1e-3)  # spec §1.3
    assert p["study_epsilon"]["B"] == pytest.approx(1.9931, abs=1e-3)
    assert p["composed_zeta"] == pytest.approx(math.sqrt(1.5**2 + 0.5**2), rel=1e-12)
    assert _passes_spec_composition(p["composed_epsilon"])
    assert p["max_individual_zeta"] == 2.0  # study E alone exceeds the A+B composition
    # negative control: composing zetas linearly instead of in quadrature is caught
    from dpcausal.accounting import gdp_epsilon
    assert not _passes_spec_composition(gdp_epsilon(1.5 + 0.5))


def test_privacy_several_shared_groups_and_no_declaration():
    dicts = [{"ate": a, "variance": v, "zeta": z, "label": lab}
             for a, v, z, lab in zip(ATE, VAR, ZETA, "ABCDE", strict=True)]
    res = combine(dicts, shared_people=[["A", "B"], ["C", "D", "E"]])
    groups = res.privacy["shared_groups"]
    assert [g["studies"] for g in groups] == [["A", "B"], ["C", "D", "E"]]
    cde = math.sqrt(1.0 + 1.5**2 + 2.0**2)
    assert groups[1]["composed_zeta"] == pytest.approx(cde, rel=1e-12)
    assert res.privacy["composed_zeta"] == pytest.approx(cde, rel=1e-12)
    assert res.privacy["max_individual_zeta"] == pytest.approx(cde, rel=1e-12)
    plain = combine(dicts).privacy
    assert plain["shared_groups"] == [] and plain["composed_zeta"] is None
    assert plain["max_individual_zeta"] == 2.0


# --- result object ------------------------------------------------------------------------------

def test_result_is_frozen_prints_and_serialises():
    releases = [_release(*args) for args in zip(ATE, VAR, ZETA, N, "ABCDE", strict=True)]
    res = combine(releases, model="random", shared_people=["A", "B"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.ate = 0.0
    text = str(res)
    for needle in ("random-effects", "pooled", "tau2", "I2", "no additional privacy charge",
                   "studies A, B share people", "1.581"):
        assert needle in text
    assert len([line for line in text.splitlines() if line.startswith(tuple("ABCDE"))]) == 5
    data = json.loads(res.to_json())
    assert data["studies"][0]["label"] == "A" and data["privacy"]["additional_charge"] == 0
    assert data["ci"] == pytest.approx(list(res.ci))


def test_result_validates_its_invariants():
    res = combine(_dicts())
    fields = {f.name: getattr(res, f.name) for f in dataclasses.fields(res)}
    with pytest.raises(ValueError, match="weights must be >= 0 and sum to 1"):
        MetaResult(**{**fields, "weights": (0.5,) * 5})
    with pytest.raises(ValueError, match="tau2, q and i2"):
        MetaResult(**{**fields, "tau2": 0.1})
    with pytest.raises(ValueError, match="ci must contain ate"):
        MetaResult(**{**fields, "ci": (res.ate + 1, res.ate + 2)})


# --- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("variance", "match"), [
    (-0.01, r"releases\[1\]\.variance must be > 0, got -0\.01"),
    (0.0, r"releases\[1\]\.variance must be > 0, got 0\.0"),
    (float("nan"), r"releases\[1\]\.variance must be finite"),
    (None, r"releases\[1\]\.variance is None: that study released no variance"),
])
def test_rejects_bad_variances(variance, match):
    with pytest.raises(ValueError, match=match):
        combine([{"ate": 0.1, "variance": 0.01}, {"ate": 0.2, "variance": variance}])


def test_rejects_bad_variance_in_dataframe_before_anything_else():
    frame = pd.DataFrame({"ate": [0.1, 0.2], "variance": [0.01, -1.0]})
    with pytest.raises(ValueError, match=r"releases\[1\]\.variance must be > 0"):
        combine(frame)


@pytest.mark.parametrize(("studies", "exc", "match"), [
    ([{"ate": float("nan"), "variance": 0.01}], ValueError, r"releases\[0\]\.ate must be finite"),
    ([{"ate": "0.1", "variance": 0.01}], TypeError, r"releases\[0\]\.ate must be a real number"),
    ([{"ate": 0.1}], ValueError, r"releases\[0\]\.variance is None"),
    ([0.1, 0.2], TypeError, r"releases\[0\] must be a release"),
    ([], ValueError, "releases is empty"),
    ({"ate": 0.1, "variance": 0.01}, TypeError, "wrap a single release in a list"),
    (pd.DataFrame({"ate": [0.1]}), ValueError,
     r"needs columns 'ate' and 'variance' \(or 'se'\), missing \['variance'\]"),
    ([{"ate": 0.1, "variance": 0.01, "label": "x"}] * 2, ValueError, r"labels must be unique.*'x'"),
    ([{"ate": 0.1, "variance": 0.01, "zeta": -1}], ValueError, r"releases\[0\]\.zeta must be > 0"),
    ([{"ate": 0.1, "variance": 0.01, "n": 10.5}], ValueError,
     r"releases\[0\]\.n must be a positive integer"),
])
def test_rejects_malformed_releases(studies, exc, match):
    with pytest.raises(exc, match=match):
        combine(studies)


@pytest.mark.parametrize(("weights", "exc", "match"), [
    ([0.5, 0.5], ValueError, r"weights must have one entry per study \(5\), got shape \(2,\)"),
    ([1, 1, -1, 1, 1], ValueError, r"weights must be finite and >= 0, got \[1\.0, 1\.0, -1\.0"),
    ([0, 0, 0, 0, 0], ValueError, "weights must have a positive sum"),
    ([1, 1, float("nan"), 1, 1], ValueError, "weights must be finite and >= 0"),
    ("inverse", ValueError,
     r"weights must be one of \('inverse_variance', 'paper_sqrt', 'equal'\)"),
    (["a"] * 5, TypeError, "weights must be one of"),
])
def test_rejects_bad_weights(weights, exc, match):
    with pytest.raises(exc, match=match):
        combine(_dicts(), weights=weights)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"model": "mixed"}, r"model must be one of \('fixed', 'random'\), got 'mixed'"),
    ({"level": 1.5}, r"level must be a number in \(0, 1\), got 1\.5"),
    ({"level": 0.99, "critical": "paper"}, r"critical='paper' .* needs p1 < \(1-level\)/2"),
    ({"critical": "t"}, r"critical must be one of \('normal', 'paper'\), got 't'"),
    ({"shared_people": ["study 1", "nope"]}, r"shared_people names unknown studies \['nope'\]"),
    ({"shared_people": ["study 1"]}, "at least 2 distinct studies"),
])
def test_rejects_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        combine(_dicts(), **kwargs)


def test_rejects_random_effects_with_fewer_than_two_studies():
    with pytest.raises(ValueError, match="model='random' needs at least 2 studies.*got 1"):
        combine([{"ate": 0.1, "variance": 0.01}], model="random")


def test_rejects_shared_people_without_zeta():
    with pytest.raises(ValueError, match=r"studies \['study 2'\] have no zeta"):
        combine([{"ate": 0.1, "variance": 0.01, "zeta": 1.0}, {"ate": 0.2, "variance": 0.01}],
                shared_people=["study 1", "study 2"])


# --- simulation (spec §5 item 10) ---------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(3600)  # 500 private fits at n = 20,000: longer than the suite's 600 s default
def test_meta_of_five_private_experiment_d_studies_is_unbiased_and_covers():
    """Five independent studies of exp. D (n = 20,000 each), private G-formula releases with a CI
    at 1.5-GDP (K = 100: 200 rows per fold for 20 covariates), pooled by inverse variance:
    spec §5 item 10."""
    from sklearn.linear_model import LinearRegression, LogisticRegression

    from dpcausal import PrivateATE
    from dpcausal.datasets import make_experiment_d

    reps, n_studies = 100, 5
    errors, covered = [], []
    for r in range(reps):
        releases, true_ates = [], []
        for j in range(n_studies):
            seed = 10_000 * (r + 1) + j
            X, A, Y, true_ate = make_experiment_d(20_000, random_state=seed)
            estimator = PrivateATE(
                estimator="aipw", propensity_model=LogisticRegression(),
                outcome_model=LinearRegression(), n_folds=100, outcome_bounds=(-1, 1),
                zeta=1.5, ci_share=0.1, random_state=seed + 1,
            )
            releases.append(estimator.fit(X, A, Y))
            true_ates.append(true_ate)
        res = combine(releases)
        assert res.privacy["additional_charge"] == 0
        # studies are labelled by what identifies them (mechanism, estimator, K, bounds)
        assert res.privacy["study_zeta"] == {
            f"ate aipw K=100 Y in [-1, 1] #{j + 1}": 1.5 for j in range(n_studies)}
        # the studies share one population; if the generator returns a sample ATE, pool those
        target = float(np.mean(true_ates))
        errors.append(res.ate - target)
        covered.append(res.ci[0] <= target <= res.ci[1])
    errors = np.array(errors)
    se = errors.std(ddof=1) / math.sqrt(reps)
    print(f"meta of {n_studies} exp. D studies, {reps} reps: bias {errors.mean():+.5f} "
          f"(MC se {se:.5f}), empirical sd {errors.std(ddof=1):.5f}, "
          f"coverage {np.mean(covered):.3f}")
    assert abs(errors.mean()) <= 3 * se, (errors.mean(), se)
    assert np.mean(covered) >= 0.93, np.mean(covered)


def _noisy(ate, se, share, dataset, zeta=1.0):
    return {"ate": ate, "se": se, "noise_share": share, "dataset": dataset,
            "privacy": {"epsilon": 3.0, "delta": 1e-5, "unit": "row", "mechanism": "gaussian",
                        "zeta": zeta}}


def test_releases_of_one_dataset_count_their_sampling_variance_once():
    # Five releases of one data set: sampling variance S = 0.04 each, noise variance 0.12 each
    # (se^2 = 0.16). As independent studies the pooled variance would be 0.16/5 = 0.032 < S.
    releases = [_noisy(a, 0.4, 0.75, "trial-A") for a in (3.1, 2.7, 3.4, 2.9, 3.3)]
    res = combine(releases)
    assert res.n_studies == 1 and res.studies["releases"].tolist() == [5]
    assert res.ate == pytest.approx(np.mean([3.1, 2.7, 3.4, 2.9, 3.3]), rel=1e-12)
    assert res.variance == pytest.approx(0.04 + 0.12 / 5, rel=1e-12)
    assert res.variance > 0.04  # never below one release's sampling variance
    assert res.studies["zeta"].iloc[0] == pytest.approx(np.sqrt(5), rel=1e-12)


def test_releases_of_one_dataset_without_noise_variances_are_refused():
    releases = [{"ate": 1.0, "se": 0.3, "dataset": "d"}, {"ate": 1.2, "se": 0.3, "dataset": "d"}]
    with pytest.raises(ValueError, match="same dataset 'd'.*one sampling error"):
        combine(releases)


def test_other_datasets_stay_independent_studies_and_keep_their_published_ci():
    a = {**_noisy(1.0, 0.2, 0.5, "A"), "ci": (0.5, 1.6)}
    b = _noisy(2.0, 0.3, 0.5, "B")
    res = combine([a, b])
    assert res.n_studies == 2
    row = res.studies.set_index("dataset").loc["A"]
    assert (row["ci_low"], row["ci_high"]) == (0.5, 1.6)  # the published CI, not recomputed
    assert res.studies["label"].tolist() == ["A gaussian", "B gaussian"]


def test_pools_releases_of_every_mechanism_through_the_contract():
    from dpcausal.contract import Privacy, Release

    def rel(ate, unit, mechanism, eps):
        return Release(ate=ate, ci=(ate - 0.5, ate + 0.5), se=0.25, level=0.95, n=100,
                       privacy=Privacy(epsilon=eps, delta=0.0, unit=unit, mechanism=mechanism))

    releases = [rel(1.0, "label", "cluster_dp", 2.0), rel(1.4, "user", "laplace", 1.0),
                rel(0.8, "client", "pbm", 0.5)]
    res = combine(releases)
    assert res.ate == pytest.approx((1.0 + 1.4 + 0.8) / 3, rel=1e-12)
    assert res.studies["unit"].tolist() == ["label", "user", "client"]
    assert res.studies["epsilon"].tolist() == [2.0, 1.0, 0.5]


def test_shared_people_across_mechanisms_compose_by_basic_composition():
    a = {"ate": 1.0, "se": 0.2, "label": "a",
         "privacy": {"epsilon": 1.0, "delta": 0.0, "unit": "user", "mechanism": "laplace"}}
    b = {"ate": 1.1, "se": 0.2, "label": "b", "zeta": 1.0}
    res = combine([a, b], shared_people=["a", "b"])
    group = res.privacy["shared_groups"][0]
    assert group["composed_zeta"] is None
    assert group["composed_epsilon"] == pytest.approx(1.0 + 4.3772, abs=1e-3)  # dp_accounting
    assert "share people" in str(res)


def _ten_releases_of_one_sample():
    from sklearn.linear_model import LinearRegression

    from dpcausal import PrivateATE
    from dpcausal.datasets import make_experiment_d
    from dpcausal.session import RepeatedReleaseWarning

    X, A, Y, _ = make_experiment_d(3000, random_state=4)
    est = PrivateATE(estimator="aipw", outcome_model=LinearRegression(), n_folds=10,
                     outcome_bounds=(-1, 1), zeta=1.0, ci_share=0.1, random_state=4)
    with pytest.warns(RepeatedReleaseWarning):
        return [est.fit(X, A, Y) for _ in range(10)]


def test_ten_releases_of_one_sample_are_one_study_of_composed_exposure():
    """Issue 26 §6: pooled as 10 independent studies, they gave se 0.0076 where one study's se
    is 0.0102, with a privacy note of zeta 1 per person (the exposure is sqrt(10))."""
    releases = _ten_releases_of_one_sample()
    assert len({r.dataset for r in releases}) == 1 and releases[0].dataset.startswith("session-")
    res = combine(releases)
    assert res.n_studies == 1
    assert res.studies["label"].tolist() == [f"{releases[0].dataset} (10 releases)"]
    # the shared sampling variance is counted once: never divided by the number of releases
    sampling = max(r.se**2 * (1 - r.noise_share()) for r in releases)
    assert res.variance >= sampling
    assert res.privacy["max_individual_zeta"] == pytest.approx(10**0.5, rel=1e-12)
    assert f"the 10 releases of dataset {releases[0].dataset} compose to zeta 3.162" in str(res)
    # the same rule on the releases' dicts (what MLflow, a CSV or JSON hand over)
    assert combine([r.to_dict() for r in releases]).variance == pytest.approx(res.variance,
                                                                              rel=1e-12)


def test_releases_charged_to_a_ledger_carry_its_dataset_id(tmp_path):
    from sklearn.linear_model import LinearRegression

    from dpcausal import PrivateATE
    from dpcausal.datasets import make_experiment_d
    from dpcausal.ledger import Ledger

    X, A, Y, _ = make_experiment_d(3000, random_state=4)
    est = PrivateATE(estimator="aipw", outcome_model=LinearRegression(), n_folds=10,
                     outcome_bounds=(-1, 1), zeta=1.0, ci_share=0.1)
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}", create=True) as led:
        led.set_budget("trial-A", zeta=5.0)
        releases = [led.fit("trial-A", est, X, A, Y) for _ in range(3)]
        statuses = set(led.history("trial-A")["status"])
    assert statuses == {"committed"} and {r.dataset for r in releases} == {"trial-A"}
    res = combine(releases)
    assert res.studies["label"].tolist() == ["trial-A (3 releases)"]
    assert res.privacy["same_data"] == [{"dataset": "trial-A", "label": "trial-A (3 releases)",
                                         "releases": 3, "composed_zeta": pytest.approx(3**0.5)}]


def test_meta_result_plot_is_the_forest_plot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = combine([_noisy(1.0, 0.2, 0.5, "A"), _noisy(1.4, 0.3, 0.5, "B"),
                   _noisy(1.2, 0.3, 0.5, "B")])
    ax = res.plot()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["A gaussian", "B (2 releases)",
                                                            "pooled"]
    notes = ax.figure.texts[-1].get_text()
    assert "2 releases of dataset B pooled as one study" in notes
    _, given = plt.subplots()
    assert res.plot(ax=given) is given and "2 releases of dataset B" in given.get_title("left")
    plt.close("all")


def test_releases_of_different_estimands_are_not_pooled():
    """An ATE and an ATT (issue 39 item 7) are different quantities: pooling them is refused,
    whether the estimand is a field or in the release's params; ATTs pool together."""
    att = [{"ate": 0.2, "variance": 0.01, "params": {"estimand": "att"}},
           {"ate": 0.25, "variance": 0.02, "estimand": "att"}]
    ate = {"ate": 0.1, "variance": 0.01}
    with pytest.raises(ValueError, match=r"different effects \(ate and att\)"):
        combine([*att, ate])
    assert combine(att).ate == pytest.approx((0.2 / 0.01 + 0.25 / 0.02) / (1 / 0.01 + 1 / 0.02))
