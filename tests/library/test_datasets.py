"""Data generators of spec §6: shapes, seeding and the true effects they claim."""

import numpy as np
import pytest

from dpcausal.datasets import (
    make_experiment_a,
    make_experiment_b,
    make_experiment_c,
    make_experiment_d,
    make_large,
)


@pytest.mark.parametrize("make, n, d, tau", [
    (make_experiment_a, 4000, 1, 0.1), (make_experiment_b, 4000, 2, 0.2),
    (make_experiment_c, 4000, 10, 0.1), (make_experiment_d, 4000, 20, 0.15)])
def test_shapes_seeding_and_truth(make, n, d, tau):
    X, A, Y, true = make(n=n, random_state=1)
    assert X.shape == (n, d) and A.shape == Y.shape == (n,)
    assert set(np.unique(A)) == {0, 1} and np.all(np.abs(Y) <= 1)
    assert true == pytest.approx(tau, abs=5e-4)
    X2, A2, Y2, _ = make(n=n, random_state=1)
    assert np.array_equal(Y, Y2) and np.array_equal(A, A2)
    assert not np.array_equal(Y, make(n=n, random_state=2)[2])


def test_experiment_b_propensity_cells():
    X, A, _, _ = make_experiment_b(n=200_000, random_state=0)
    cell = (X[:, 1] > 0) & (X[:, 0] > 0.1)
    assert A[cell].mean() == pytest.approx(0.75, abs=0.01)
    cell = (X[:, 1] <= 0) & (X[:, 0] < -0.05)
    assert A[cell].mean() == pytest.approx(0.25, abs=0.01)


def test_experiment_a_effect_is_recovered_by_difference_in_regressions():
    X, A, Y, _ = make_experiment_a(n=50_000, random_state=3)
    design = np.column_stack([np.ones_like(A), X[:, 0], A])
    coef = np.linalg.lstsq(design, Y, rcond=None)[0]
    assert coef[2] == pytest.approx(0.1, abs=0.005)
    assert coef[1] == pytest.approx(0.225, abs=0.005)


def test_make_large_outcomes_in_bounds_and_the_clipped_population_ate():
    X, A, Y, tau = make_large(20_000, 7, random_state=3)
    assert X.shape == (20_000, 7) and set(np.unique(A)) == {0, 1}
    assert Y.min() == 0.0 and Y.max() == 1.0          # the clip binds at both ends
    # independent Monte Carlo of E[clip(U + 0.1)] - E[clip(U)], U ~ N(0.5, 0.1^2 + 0.15^2)
    u = np.random.default_rng(0).normal(0.5, np.hypot(0.1, 0.15), 4_000_000)
    assert tau == pytest.approx(np.mean(np.clip(u + 0.1, 0, 1) - np.clip(u, 0, 1)), abs=2e-4)
    assert 0.098 < tau < 0.1                   # the clip lowers the nominal 0.1 slightly


@pytest.mark.parametrize("name, d", [("quadratic", 2), ("interaction", 5), ("threshold", 2),
                                     ("exponential", 2)])
@pytest.mark.parametrize("confounding", ["mild", "strong", "poor_overlap", "rare_treated"])
def test_nonlinear_designs_shapes_bounds_overlap_and_truth(name, d, confounding):
    """Issue 39's designs: seeded, outcomes inside the public bounds (never clipped), the
    propensity range of the confounding level reached, and the stated ATE against the sample
    mean of Y(1) - Y(0) recomputed here from X by the docstrings' formulas."""
    from dpcausal.datasets import (
        CONFOUNDING,
        HARD_OVERLAP,
        NONLINEAR_DESIGNS,
        NONLINEAR_OUTCOME_BOUNDS,
    )

    n = 400_000
    X, A, Y, truth = NONLINEAR_DESIGNS[name](n, confounding, random_state=5)
    assert X.shape == (n, d) and A.shape == Y.shape == (n,) and np.abs(X).max() <= 1
    lo, hi = NONLINEAR_OUTCOME_BOUNDS
    assert lo <= Y.min() and Y.max() <= hi
    x1, x2 = X[:, 0], X[:, 1]
    effect = {"quadratic": 0.1 + 0.2 * x1**2, "interaction": 0.1 + 0.1 * x1 * x2,
              "threshold": 0.1 + 0.2 * (x1 > 0.5), "exponential": 0.1 + 0.1 * np.exp(x1)}[name]
    assert truth == pytest.approx(effect.mean(), abs=4 * effect.std() / np.sqrt(n))
    assert truth == pytest.approx({"quadratic": 1 / 6, "interaction": 0.1, "threshold": 0.15,
                                   "exponential": 0.2175201}[name], abs=1e-7)
    # the docstrings' propensity covers the stated range, and A follows it
    score = (1 + x1 * x2) / 2 if name == "interaction" else x1**2
    p_lo, p_hi = (CONFOUNDING | HARD_OVERLAP)[confounding]
    l0, l1 = np.log(p_lo / (1 - p_lo)), np.log(p_hi / (1 - p_hi))
    pi = 1 / (1 + np.exp(-(l0 + (l1 - l0) * score)))
    assert pi.min() == pytest.approx(p_lo, abs=2e-3) and pi.max() == pytest.approx(p_hi, abs=2e-3)
    for part in (score < 0.25, score > 0.75):
        assert A[part].mean() == pytest.approx(pi[part].mean(), abs=4 / np.sqrt(part.sum()))
    X2, A2, Y2, _ = NONLINEAR_DESIGNS[name](1000, confounding, random_state=5)
    assert np.array_equal(Y2, NONLINEAR_DESIGNS[name](1000, confounding, random_state=5)[2])


def test_hard_overlap_levels_reach_the_shares_they_state():
    """HARD_OVERLAP's docstring: with selection on X1^2 (X1 ~ U(-1, 1)), "poor_overlap" puts
    28% of the rows at pi < 0.02 and 4% at pi > 0.98 and treats 31%; "rare_treated" treats 3.6%.
    By hand: pi < t where X1^2 < (logit t - l0) / (l1 - l0), a share sqrt of that; the treated
    share E[pi] on a fine grid of X1."""
    from dpcausal.datasets import HARD_OVERLAP, make_threshold

    def logit(p):
        return np.log(p / (1 - p))

    def share_below(t, lo, hi):
        return np.sqrt((logit(t) - logit(lo)) / (logit(hi) - logit(lo)))

    def treated(lo, hi):
        x = (np.arange(100_000) + 0.5) / 100_000
        return np.mean(1 / (1 + np.exp(-(logit(lo) + (logit(hi) - logit(lo)) * x**2))))

    poor, rare = HARD_OVERLAP["poor_overlap"], HARD_OVERLAP["rare_treated"]
    assert share_below(0.02, *poor) == pytest.approx(0.28, abs=0.005)
    assert 1 - share_below(0.98, *poor) == pytest.approx(0.04, abs=0.005)
    assert treated(*poor) == pytest.approx(0.31, abs=0.005)
    assert treated(*rare) == pytest.approx(0.036, abs=0.0005)
    _, A, _, _ = make_threshold(400_000, "rare_treated", random_state=3)
    assert A.mean() == pytest.approx(treated(*rare), abs=4 * np.sqrt(0.036 / 400_000))


def test_nonlinear_designs_refuse_an_unknown_confounding():
    from dpcausal.datasets import make_quadratic

    with pytest.raises(ValueError, match="confounding must be one of"):
        make_quadratic(100, "extreme")
