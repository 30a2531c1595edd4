"""The data-free planner (issue 19 §1): its figures against the spec's tables and hand
computations, the recommendation's rules, and the zeta solver."""

import math

import pytest

from dpcausal.ate.planner import (
    auto_n_folds,
    expected_halfwidth,
    layout_halfwidth,
    plan,
    recommended,
    rows_per_fold_floor,
    zeta_for_halfwidth,
    zeta_for_sums_halfwidth,
)


def test_sigmas_match_the_spec_tables():
    # spec §6.8, experiment A: G, n=5000, K=200, bounds (-1, 1), zeta 1.5 point estimate:
    # sigma1 = 0.013934; spec §2.5: tight sigma2 = 0.00179 vs paper 0.0131 at zeta2 = 0.474
    table = plan(5000, 2, outcome_bounds=(-1, 1), estimator="g", zeta=1.5, n_folds=[200],
                 ci_share=0.1)
    paper = table[table["sigma2"] == "paper"].iloc[0]
    tight = table[table["sigma2"] == "tight"].iloc[0]
    assert paper["sigma1"] == pytest.approx(0.013934 / math.sqrt(0.9), rel=6e-4)
    assert tight["sigma2_sd"] == pytest.approx(0.00179, rel=3e-3)
    assert paper["sigma2_sd"] == pytest.approx(0.0131, rel=3e-3)


def test_halfwidth_by_hand():
    # conservative: c * sqrt((sqrt(V) + z sigma2)^2 + sigma1^2), c = 2.0537, z = 2.3263
    v, s1, s2 = 0.01, 0.05, 0.002
    expected = 2.0537489 * math.sqrt((0.1 + 2.3263479 * s2) ** 2 + s1**2)
    assert expected_halfwidth(s1, s2, v) == pytest.approx(expected, rel=1e-6)
    assert expected_halfwidth(s1, s2, v, ci="paper") == pytest.approx(
        2.0537489 * math.sqrt(v + s1**2 + 2.3263479 * s2**2), rel=1e-6)


def test_a_layout_of_unequal_blocks_widens_the_expected_ci():
    """The partitioned path's layout follows its files' row counts: with balanced blocks its
    half-width is the table's narrowest at that K and K'; a larger largest block (n_b,max in
    the sensitivity, spec §2.5b) gives a wider one, and so does a smaller smallest fold."""
    from dpcausal.ate.blocks import BlockLayout, balanced_layout

    n, k, kb = 100_000, 500, 50
    table = plan(n, 5, outcome_bounds=(-1, 1), zeta=1.0, n_folds=[k], block_folds=kb)
    balanced = balanced_layout(n, k, kb)
    half, ratio = layout_halfwidth(n, k, balanced, outcome_bounds=(-1, 1), zeta=1.0)
    assert half == pytest.approx(table["halfwidth"].min(), rel=1e-12)
    assert ratio == pytest.approx(half / table["nonprivate_halfwidth"].iloc[0], rel=1e-12)
    lopsided = BlockLayout(n, k, kb, block_rows=2 * balanced.block_rows,
                           fold_rows=balanced.fold_rows)
    assert layout_halfwidth(n, k, lopsided, outcome_bounds=(-1, 1), zeta=1.0)[0] > half * 1.01


def test_nonprivate_halfwidth_follows_the_stated_assumption():
    # bounds (0, 1): worst-case sd 0.5; p = 1/2: V = 0.25 * 4 / n = 1/n
    table = plan(10_000, 5, outcome_bounds=(0, 1), n_folds=[100], ci_share=0.1,
                 sigma2="tight")
    assert table["nonprivate_halfwidth"].iloc[0] == pytest.approx(1.959964 / 100, rel=1e-6)
    smaller = plan(10_000, 5, outcome_bounds=(0, 1), n_folds=[100], ci_share=0.1,
                   sigma2="tight", outcome_sd=0.25)
    assert smaller["nonprivate_halfwidth"].iloc[0] == pytest.approx(1.959964 / 200, rel=1e-6)


def test_exactly_one_recommended_row_and_it_is_the_narrowest_feasible():
    table = plan(1_000_000, 5, outcome_bounds=(0, 1), compute_budget=60.0)
    assert table["recommended"].sum() == 1
    best = recommended(table)
    feasible = table[table["feasible"]]
    assert best["halfwidth"] == feasible["halfwidth"].min()
    assert best["rows_per_fold"] >= rows_per_fold_floor("aipw", 5)
    assert best["seconds"] <= 60.0
    # issue 19: today's default (K=500, sigma2 paper) is far wider than the planner's choice
    default = plan(1_000_000, 5, outcome_bounds=(0, 1), n_folds=[500], sigma2="paper",
                   ci_share=0.1, block_folds=None).iloc[0]
    assert best["ratio"] < default["ratio"] / 3


def test_small_data_is_flagged_uninformative():
    table = plan(500, 3, outcome_bounds=(0, 100), zeta=1.0)
    assert not recommended(table)["informative"]


def test_floors_are_stricter_for_ipw_and_other_models():
    assert rows_per_fold_floor("aipw", 1) == 25  # the paper's Exp. A: 25 rows per fold
    assert rows_per_fold_floor("aipw", 5) == 48  # 8(d+1): issue 28 (biased at 25, d = 5)
    assert rows_per_fold_floor("g", 20) == 210
    assert rows_per_fold_floor("ipw", 20) == 1050
    assert rows_per_fold_floor("aipw", 5, "other") == 100
    with pytest.raises(ValueError, match="model_kind"):
        rows_per_fold_floor("aipw", 5, "tree")


def test_auto_n_folds_respects_floor_budget_and_sqrt_n():
    assert auto_n_folds(1_000_000, 5, compute_budget=1e9) == 1_000_000 // 48  # floor binds
    k = auto_n_folds(1_000_000, 5, compute_budget=60.0)
    assert 1000 <= k <= 20_000  # budget binds, never below sqrt(n)
    assert auto_n_folds(1_000_000, 5, compute_budget=0.1) == 1000  # sqrt(n) beats the budget
    assert auto_n_folds(100, 5) == 2  # 50 rows per fold >= the floor of 48
    assert auto_n_folds(40, 5) == 2  # too few rows for the floor: the least K there is


def test_zeta_solver_reaches_the_target():
    kw = dict(outcome_bounds=(0, 1), estimator="aipw", ci_share=0.1, sigma2="tight")
    zeta = zeta_for_halfwidth(0.01, 1_000_000, 10_000, **kw)
    row = plan(1_000_000, 5, zeta=zeta, n_folds=[10_000], block_folds=None, **kw).iloc[0]
    assert row["halfwidth"] == pytest.approx(0.01, rel=1e-6)
    # with blocks (K = 10,000 as 40 blocks of 250 folds, spec §2.5b)
    zeta = zeta_for_halfwidth(0.01, 1_000_000, 10_000, block_folds=250, **kw)
    row = plan(1_000_000, 5, zeta=zeta, n_folds=[10_000], block_folds=250, **kw).iloc[0]
    assert (row["n_blocks"], row["halfwidth"]) == (40, pytest.approx(0.01, rel=1e-6))
    # below the non-private width no budget suffices
    assert zeta_for_halfwidth(1e-4, 1_000_000, 10_000, **kw) == math.inf


@pytest.mark.parametrize("estimator", ["dim", "lin"])
def test_sums_zeta_solver_round_trips_through_the_plans_estimator_table(estimator):
    """The zeta for a target half-width of dim and lin, checked by the half-width the plan's
    estimator table (compare_estimators) shows at that zeta: the target, and wider a little
    below it; a target at or under the table's non-private half-width is unreachable."""
    from dpcausal import PrivateATE

    n, d, bounds, sd = 2000, 3, (0.0, 1.0), 0.3
    kw = dict(outcome_bounds=bounds, outcome_sd=sd, design="randomized")

    def row(zeta):
        est = PrivateATE(estimator=estimator, zeta=zeta, covariate_bounds=[(0.0, 1.0)] * d,
                         **kw)
        table = est.compare_estimators(n, d)
        return table[table["estimator"] == estimator].iloc[0]

    target = row(0.7)["halfwidth"]     # the plan's figure at zeta 0.7
    zeta = zeta_for_sums_halfwidth(target, estimator, n, d, **kw)
    assert zeta == pytest.approx(0.7, rel=1e-6)
    assert row(zeta)["halfwidth"] == pytest.approx(target, rel=1e-6)
    assert row(zeta * (1 - 1e-4))["halfwidth"] > target
    # the non-private half-width the table shows is the floor: a hair above it is reached at a
    # large zeta (past the ensemble solver's 1e6 cut-off), at or below it never
    floor = row(1.0)["nonprivate_halfwidth"]
    far = zeta_for_sums_halfwidth(floor * (1 + 1e-9), estimator, n, d, **kw)
    assert 1e3 < far < math.inf
    assert row(far)["halfwidth"] == pytest.approx(floor * (1 + 1e-9), rel=1e-6)
    assert row(far * (1 - 1e-4))["halfwidth"] > floor * (1 + 1e-9)
    assert zeta_for_sums_halfwidth(floor, estimator, n, d, **kw) == math.inf
    assert zeta_for_sums_halfwidth(floor * (1 - 1e-6), estimator, n, d, **kw) == math.inf
