"""The estimators from noisy sums, ``dim`` and ``lin`` (issue 33 §1-2; spec small_n_estimators.md
§2-3; SPECS.md "Estimators from noisy sums"): hand-written loop references for the pre-noise
statistics and the non-noisy estimates, adversarial replace-one neighbours against the declared
sensitivity (with a 0.98x control that must be caught), the noise against its intended scale
(KS, with 0.8x and 1.25x controls), the refusals before the charge, and the release contract."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpcausal import ATERelease, PrivateATE, Release, meta
from dpcausal.ate import release as release_module
from dpcausal.ate import sums
from dpcausal.noise import gaussian_lattice_step
from tests.library._trap import vector_noise


def _trial(n=600, d=2, seed=0, randomized=True):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 3, size=(n, d))
    A = (rng.uniform(size=n) < (0.5 if randomized else 1 / (1 + np.exp(-X[:, 0])))).astype(int)
    Y = np.clip(10 + 5 * A + X @ np.arange(1, d + 1) + rng.normal(0, 4, n), 0, 40)
    return X, A, Y


COV_BOUNDS = [(-2.0, 3.0), (-2.0, 3.0)]
Y_BOUNDS = (0.0, 40.0)


# ------------------------------------------------------------------ loop references

def _loop_statistics(X, A, Y, y_bounds, x_bounds):
    """Per arm (1, 0): count, sums of x_j, of x_j x_k (j <= k), of y, of x_j y, of y^2, of the
    clipped rows scaled to [-1, 1], accumulated row by row."""
    c, h = (y_bounds[0] + y_bounds[1]) / 2, (y_bounds[1] - y_bounds[0]) / 2
    d = len(x_bounds)
    out = []
    for arm in (1, 0):
        m = (d + 1) * (d + 2) // 2
        gram, cross, sq = [0.0] * m, [0.0] * (d + 1), 0.0
        for i in range(len(A)):
            if A[i] != arm:
                continue
            y = (min(max(Y[i], y_bounds[0]), y_bounds[1]) - c) / h
            u = [1.0] + [(min(max(X[i][j], lo), hi) - (lo + hi) / 2) / ((hi - lo) / 2)
                         for j, (lo, hi) in enumerate(x_bounds)]
            k = 0
            for p in range(d + 1):
                for q in range(p, d + 1):
                    gram[k] += u[p] * u[q]
                    k += 1
            for p in range(d + 1):
                cross[p] += u[p] * y
            sq += y * y
        out += gram + cross + [sq]
    return np.array(out)


def test_statistics_match_a_loop_and_add_over_chunks():
    X, A, Y = _trial()
    X[0, 0], Y[1] = 9.0, 55.0                                  # clipped to the bounds
    est = PrivateATE(estimator="lin", outcome_bounds=Y_BOUNDS, covariate_bounds=COV_BOUNDS,
                     assume_linear=True)
    whole = est.sum_statistics(X, A, Y, estimator="lin")
    np.testing.assert_allclose(whole, _loop_statistics(X, A, Y, Y_BOUNDS, COV_BOUNDS),
                               rtol=1e-12, atol=1e-9)
    parts = sum(est.sum_statistics(X[s], A[s], Y[s], estimator="lin")
                for s in (slice(0, 100), slice(100, 401), slice(401, None)))
    np.testing.assert_allclose(parts, whole, rtol=1e-12, atol=1e-9)
    dim = est.sum_statistics(None, A, Y, estimator="dim")
    np.testing.assert_allclose(dim, _loop_statistics(X[:, :0], A, Y, Y_BOUNDS, []), atol=1e-9)


def test_dim_without_noise_is_the_difference_in_means():
    X, A, Y = _trial(n=800)
    rel = PrivateATE(estimator="dim", design="randomized", outcome_bounds=Y_BOUNDS,
                     noise_seed=3).fit(X, A, Y, evaluation=True)
    treated = [y for y, a in zip(Y, A, strict=True) if a == 1]
    control = [y for y, a in zip(Y, A, strict=True) if a == 0]
    plain = sum(treated) / len(treated) - sum(control) / len(control)
    assert rel.nonprivate["ate"] == pytest.approx(plain, abs=1e-9)
    var = (np.var(treated, ddof=1) / len(treated) + np.var(control, ddof=1) / len(control))
    assert rel.nonprivate["variance"] == pytest.approx(var, rel=1e-9)


@pytest.mark.parametrize("randomized", [True, False])
def test_lin_without_noise_or_ridge_is_lins_ols(randomized):
    X, A, Y = _trial(n=900, d=3, seed=2, randomized=randomized)
    bounds = [(-2.0, 3.0)] * 3
    stat = sums.chunk_statistics(X, A, Y, estimator="lin", outcome_bounds=Y_BOUNDS,
                                 covariate_bounds=bounds)
    tau, *_ = sums.point(stat, 3, 0.0, 0.0, 1.0)
    # Lin (2013): OLS of Y on (1, A, X - mean X, A (X - mean X)); the ATE is A's coefficient
    Xc = X - X.mean(axis=0)
    design = np.column_stack([np.ones(len(A)), A, Xc, A[:, None] * Xc])
    coef = np.linalg.lstsq(design, Y, rcond=None)[0]
    assert tau * (Y_BOUNDS[1] - Y_BOUNDS[0]) / 2 == pytest.approx(coef[1], abs=1e-8)


# ------------------------------------------------------------------ sensitivity

def _corners(d):
    """Adversarial rows in scaled units: every covariate sign pattern, the outcome at both bounds
    and at 0, covariates at 0 too, in both arms."""
    xs = [np.array(p, dtype=float) for p in itertools.product((-1.0, 1.0), repeat=d)]
    xs.append(np.zeros(d))
    return [(x, a, y) for x in xs for a in (0, 1) for y in (-1.0, 0.0, 1.0)]


def _largest_move(estimator, d):
    """The largest L2 move of the weighted statistic vector, lattice-rounded as the release
    rounds it, over replace-one neighbours: a base data set, one row replaced by every pair of
    corner rows (a row moved across arms, to the corners of the outcome and covariate bounds)."""
    rng = np.random.default_rng(5)
    n = 40
    base_x, base_a = rng.uniform(-1, 1, size=(n, d)), rng.integers(0, 2, n)
    base_y = rng.uniform(-1, 1, n)
    cal = sums.calibrate_sums(estimator, 1000, d, 1.0)
    w = sums.weights(cal.d, cal.q_weight)
    step = gaussian_lattice_step(cal.sensitivity / cal.zeta)
    largest = 0.0
    corners = _corners(d)
    for (x, a, y), (x2, a2, y2) in itertools.product(corners, corners):
        vecs = []
        for row in ((x, a, y), (x2, a2, y2)):
            X = np.vstack([base_x, row[0]])
            A = np.append(base_a, row[1])
            Y = np.append(base_y, row[2])
            vecs.append(np.rint(sums.statistics(X, A, Y) * w / step))
        largest = max(largest, float(np.linalg.norm(vecs[0] - vecs[1])) * step)
    return largest, cal, step


@pytest.mark.parametrize("estimator, d", [("dim", 0), ("lin", 1), ("lin", 2), ("lin", 3)])
@pytest.mark.parametrize("factor, holds", [(1.0, True), (0.98, False)])
def test_neighbours_never_move_the_statistics_past_the_sensitivity(estimator, d, factor, holds):
    largest, cal, step = _largest_move(estimator, d)
    p = 2 * sums.block_size(d)
    declared = factor * cal.sensitivity + step * math.ceil(math.sqrt(p))   # the lattice's
    assert (largest <= declared) is holds
    assert largest >= 0.9 * cal.sensitivity


def test_sensitivity_values():
    assert sums.sensitivity(0, 0.5) == pytest.approx(math.sqrt(4.5))      # dim: sqrt(4 + 2 w^2)
    assert sums.sensitivity(18, 1.0) == pytest.approx(math.sqrt(19 * 22 + 2))


# ------------------------------------------------------------------ noise

def _noise_draws(monkeypatch, estimator, releases):
    """The noise the release path adds to the statistic vector, recorded at the sampler."""
    seen = vector_noise(monkeypatch, release_module)
    X, A, Y = _trial(n=300)
    est = PrivateATE(estimator=estimator, design="randomized", outcome_bounds=Y_BOUNDS,
                     covariate_bounds=COV_BOUNDS, zeta=1.0)
    for seed in range(releases):
        est.set_params(noise_seed=seed).fit(X, A, Y, evaluation=True)
    return np.concatenate(seen), sums.calibrate_sums(estimator, 300, 2, 1.0)


@pytest.mark.parametrize("estimator, releases", [("dim", 500), ("lin", 150)])
def test_noise_has_the_intended_scale(monkeypatch, estimator, releases):
    noise, cal = _noise_draws(monkeypatch, estimator, releases)
    assert noise.size >= 3000
    assert stats.kstest(noise, stats.norm(scale=cal.sigma).cdf).pvalue > 1e-3
    for wrong in (0.8, 1.25):
        assert stats.kstest(noise, stats.norm(scale=wrong * cal.sigma).cdf).pvalue < 1e-6


def test_noise_scale_is_sensitivity_over_zeta():
    cal = sums.calibrate_sums("dim", 1000, 5, 0.5)
    assert cal.d == 0 and cal.sigma == pytest.approx(math.sqrt(4.5) / 0.5, rel=1e-5)
    assert cal.sigma >= math.sqrt(4.5) / 0.5


# ------------------------------------------------------------------ public checks and contract

def test_dim_is_refused_in_an_observational_design_before_any_charge(accountant):
    X, A, Y = _trial()
    with pytest.raises(ValueError, match="design='randomized'"):
        PrivateATE(estimator="dim", outcome_bounds=Y_BOUNDS).fit(X, A, Y)
    with pytest.raises(ValueError, match="covariate_bounds"):
        PrivateATE(estimator="lin", outcome_bounds=Y_BOUNDS).fit(X, A, Y)
    with pytest.raises(ValueError, match="covariate_bounds has 1 pairs for 2"):
        PrivateATE(estimator="lin", outcome_bounds=Y_BOUNDS, assume_linear=True,
                   covariate_bounds=[(0, 1)]).fit(X, A, Y)
    # each pair by the library's one bounds check (dpcausal.validation.bounds_pair)
    with pytest.raises(ValueError, match=r"^covariate_bounds\[1\] must be finite with low < "
                                         r"high, got \(3, -2\)$"):
        PrivateATE(estimator="lin", outcome_bounds=Y_BOUNDS, assume_linear=True,
                   covariate_bounds=[(-2, 3), (3, -2)]).fit(X, A, Y)
    with pytest.raises(ValueError, match=r"^covariate_bounds\[0\] must be a pair \(low, high\), "
                                         r"got 5$"):
        PrivateATE(estimator="lin", outcome_bounds=Y_BOUNDS, assume_linear=True,
                   covariate_bounds=[5, (-2, 3)]).fit(X, A, Y)
    with pytest.raises(ValueError, match="design must be one of"):
        PrivateATE(design="rct", outcome_bounds=Y_BOUNDS).fit(X, A, Y)
    with pytest.raises(ValueError, match="outcome_sd"):
        PrivateATE(outcome_sd=30.0, outcome_bounds=Y_BOUNDS).fit(X, A, Y)
    assert accountant.charges == []


def test_mapping_bounds_follow_the_columns_and_are_published():
    X, A, Y = _trial()
    df = pd.DataFrame({"b": X[:, 1], "a_cov": X[:, 0], "t": A, "y": Y})
    est = PrivateATE(estimator="lin", outcome_bounds=Y_BOUNDS, noise_seed=1, assume_linear=True,
                     covariate_bounds={"a_cov": (-2, 3), "b": (-1, 1)})
    rel = est.fit(df, treatment="t", outcome="y", evaluation=True)
    assert rel.params["covariate_bounds"] == [[-1.0, 1.0], [-2.0, 3.0]]    # column order
    assert "linear in the covariates" in rel.params["assumption"]
    assert rel.n_folds is None and rel.estimator == "lin"
    assert "linear in the covariates" in str(rel)


def test_release_round_trips_and_pools(accountant):
    X, A, Y = _trial(n=1000)
    releases = []
    for estimator in ("dim", "lin"):
        rel = PrivateATE(estimator=estimator, design="randomized", outcome_bounds=Y_BOUNDS,
                         covariate_bounds=COV_BOUNDS).fit(X, A, Y)
        assert isinstance(rel, ATERelease) and rel.ci[0] <= rel.ate <= rel.ci[1]
        again = Release.from_json(rel.to_json())
        assert again.to_dict() == rel.to_dict() and str(again) == str(rel)
        assert json.loads(rel.to_json())["params"]["design"] == "randomized"
        assert rel.summary().shape == (1, 7)
        assert rel.summary().loc["ATE", "estimator"] == estimator   # named (issue 42)
        assert 0 < rel.noise_share() < 1
        releases.append(rel)
    assert len(accountant.charges) == 2
    assert [c.zeta for c in accountant.charges] == [1.5, 1.5]
    pooled = meta.combine([releases[0].of_dataset("trial-1"), releases[1].of_dataset("trial-2")])
    assert math.isfinite(pooled.ate)


@pytest.mark.parametrize("estimator", ["dim", "lin"])
def test_the_summary_says_how_the_sums_treat_missing_values(estimator):
    """SPECS.md "Estimators from noisy sums", missing values: a missing covariate takes
    missing_fill without an indicator column, and a row without a usable treatment or outcome
    adds nothing (no score 0, the ensemble's rule)."""
    X, A, Y = _trial(n=600)
    X[5, 0], Y[9] = np.nan, np.nan
    rel = PrivateATE(estimator=estimator, design="randomized", outcome_bounds=Y_BOUNDS,
                     covariate_bounds=COV_BOUNDS, missing_fill=1.5,
                     noise_seed=3).fit(X, A, Y, evaluation=True)
    line = dict(rel.summary_rows())["missing values"]
    assert "indicator" not in line.replace("no indicator", "") and "score 0" not in line
    assert "adds nothing" in line
    assert ("covariates 1.5, no indicator" in line) == (estimator == "lin")
    assert str(rel).count(line) == 1                           # the printed summary holds it


@pytest.mark.parametrize("estimand", ["ate", "att"])
def test_partitioned_sums_release_equals_the_in_memory_one(estimand):
    X, A, Y = _trial(n=700)
    est = PrivateATE(estimator="lin", design="randomized", outcome_bounds=Y_BOUNDS,
                     covariate_bounds=COV_BOUNDS, noise_seed=9, estimand=estimand)
    whole = est.fit(X, A, Y, evaluation=True)
    summed = sum(est.sum_statistics(X[s], A[s], Y[s], estimator="lin")
                 for s in (slice(0, 350), slice(350, None)))
    parts = est._release_statistics(700, summed, estimator="lin", d=2, evaluation=True)
    assert parts.ate == pytest.approx(whole.ate, abs=1e-9)
    assert parts.ci == pytest.approx(whole.ci, abs=1e-9)
    assert parts.params["estimand"] == whole.params["estimand"] == estimand
    with pytest.raises(ValueError, match="statistics must have"):
        est._release_statistics(700, summed[:-1], estimator="lin", d=2, evaluation=True)


# ------------------------------------------------------------------ the choice

def test_auto_follows_the_design_and_the_stated_assumptions():
    obs = PrivateATE(outcome_bounds=(0, 1))
    assert obs.resolved_estimator(2000, 3) == "aipw"
    rct = PrivateATE(outcome_bounds=(0, 1), design="randomized", zeta=1.0)
    assert rct.resolved_estimator(2000, 3) == "dim"
    assert rct.planned_params(2000, 3) == {"estimator": "dim"}
    lin = PrivateATE(outcome_bounds=(0, 1), covariate_bounds=[(0, 1)] * 3, zeta=1.0,
                     assume_linear=True)
    assert lin.resolved_estimator(3000, 3) == "lin"
    table = lin.plan(3000, 3)
    # no dim without randomization; the comparators are listed, never auto's pick
    assert set(table["estimator"]) == {"aipw", "lin", "lpgm19", "gr25"}
    assert not table.set_index("estimator").loc[["lpgm19", "gr25"], "selectable"].any()
    chosen = table[table["recommended"]]
    assert list(chosen["estimator"]) == ["lin"]
    assert "linear in the covariates" in chosen["assumption"].iloc[0]
    assert table["outcome_spread"].iloc[0].startswith("worst case")
    stated = PrivateATE(outcome_bounds=(0, 1), outcome_sd=0.3, design="randomized").plan(500, 2)
    assert set(stated["outcome_spread"]) == {"stated outcome_sd = 0.3"}
    assert set(stated["estimator"]) == {"aipw", "dim", "lpgm19", "gr25"}
    wide = PrivateATE(outcome_bounds=(0, 60), design="randomized").plan(500, 2)
    assert "gr25" not in set(wide["estimator"])                # binary outcomes only


def test_the_plan_ratio_of_dim_matches_its_formula():
    """With arms large against the noise the planner's Monte-Carlo of the noise gives the delta
    method's linear figure, by hand."""
    table = PrivateATE(outcome_bounds=(0, 1), design="randomized", zeta=1.0,
                       outcome_sd=0.5).plan(2000, 3)
    row = table[table["estimator"] == "dim"].iloc[0]
    sigma = sums.calibrate_sums("dim", 2000, 3, 1.0).sigma
    # h = 0.5, sd = h: sampling 1/n_a per arm, noise sigma^2 (1 + 0)/n_a^2, in scaled units
    var = 2 * (1 / 1000 + sigma**2 / 1000**2)
    assert row["halfwidth"] == pytest.approx(stats.norm.ppf(0.975) * 0.5 * math.sqrt(var),
                                             rel=1e-3)


def test_a_comparator_module_joins_the_plan_but_not_auto(monkeypatch):
    import sys
    import types

    fake = types.ModuleType("dpcausal.ate.comparators.lpgm19")
    fake.expected_halfwidth = lambda n, d, *, zeta, outcome_bounds, alpha=0.05, \
        outcome_sd=None, **public: 1e-6                        # narrower than anything
    fake.valid_for = lambda *, design, binary_outcome: True
    fake.ASSUMPTION = "a fake comparator's own"
    monkeypatch.setitem(sys.modules, "dpcausal.ate.comparators.lpgm19", fake)
    est = PrivateATE(outcome_bounds=(0, 1), design="randomized", zeta=1.0)
    table = est.compare_estimators(2000, 3)
    assert "lpgm19" in set(table["estimator"])
    assert table.loc[table["chosen"], "estimator"].item() == "dim"
    assert est.plan(2000, 3).query("recommended")["estimator"].item() == "dim"


def test_dim_needs_no_covariate():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.integers(0, 2, 500), "y": rng.uniform(0, 1, 500)})
    rel = PrivateATE(estimator="dim", design="randomized", outcome_bounds=(0, 1),
                     noise_seed=1).fit(df, treatment="a", outcome="y", evaluation=True)
    plain = df.y[df.a == 1].mean() - df.y[df.a == 0].mean()
    assert rel.params["d"] == 0 and rel.nonprivate["ate"] == pytest.approx(plain, abs=1e-12)


def test_partition_statistics_add_up_to_the_in_memory_release():
    from dpcausal.ate.partitioned import Roles, partition_statistics

    X, A, Y = _trial(n=500)
    Y[3], X[7, 1] = np.nan, np.nan                     # the policy, row by row
    frame = pd.DataFrame({"id": range(500), "t": A, "y": Y, "u": X[:, 0], "v": X[:, 1]})
    roles = Roles(id="id", treatment="t", outcome="y", covariates=("u", "v"))
    est = PrivateATE(estimator="lin", design="randomized", outcome_bounds=Y_BOUNDS,
                     covariate_bounds={"u": (-2, 3), "v": (-2, 3)}, noise_seed=4)
    summed = sum(partition_statistics(frame.iloc[s], roles, est, "lin", evaluation=True)
                 for s in (slice(0, 120), slice(120, None)))
    whole = est.fit(frame, treatment="t", outcome="y", covariates=["u", "v"], evaluation=True)
    parts = est._release_statistics(500, summed, estimator="lin", d=2, evaluation=True,
                                    columns=["u", "v"])
    assert parts.ate == pytest.approx(whole.ate, abs=1e-9)
    assert summed[0] + summed[sums.block_size(2)] == 499       # the arms' counts: one row out


def test_the_comparison_keeps_its_columns_and_prints_a_readable_view():
    """Issue 42: compare_estimators() returns 10 columns, which pandas truncated to `...` on
    print. The frame keeps them all (an API); its printed form is the narrow view of
    EstimatorComparison.VIEW, in full, and names the other columns."""
    from dpcausal.ate.choice import EstimatorComparison

    table = PrivateATE(outcome_bounds=(0, 1), design="randomized", zeta=1.0).compare_estimators(
        5000, 3)
    assert isinstance(table, pd.DataFrame) and list(table.columns) == [
        "estimator", "design", "halfwidth", "nonprivate_halfwidth", "ratio", "selectable",
        "assumption", "outcome_spread", "robust_halfwidth", "chosen"]
    for shown in (repr(table), str(table)):
        lines = shown.splitlines()
        assert "..." not in shown and max(len(line) for line in lines) <= 100, shown
        assert lines[0].split() == EstimatorComparison.VIEW
        assert [line.split()[0] for line in lines[1:5]] == ["aipw", "dim", "lpgm19", "gr25"]
        assert " ".join(lines[5:]) == ("(more columns: design, nonprivate_halfwidth, assumption, "
                                       "outcome_spread, robust_halfwidth; to_string() shows all)")
    assert "<table" in table._repr_html_() and "<th>assumption</th>" not in table._repr_html_()
    assert "<th>chosen</th>" in table._repr_html_()
    assert type(table[["estimator", "ratio"]]) is pd.DataFrame   # a slice is a plain frame
