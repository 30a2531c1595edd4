"""GR25 (dpcausal.ate.comparators.gr25): sensitivities by hand and under adversarial
neighbours, the non-private part against a hand-written loop, the charge, release-mode rules,
and (slow) coverage on the seed paper's binary design (Exp. C, App. F.2). SPECS.md
"Comparators: GR25"."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit

from dpcausal.ate.comparators import gr25
from dpcausal.ate.comparators.lpgm19 import fit_logistic
from dpcausal.datasets import make_experiment_c


def test_sensitivities_by_hand():
    assert gr25.sensitivities(50, (0.0, 1.0)) == {"mean": 2 / 50, "second_moment": 1 / 50}
    s = gr25.sensitivities(10, (-1.0, 3.0))
    assert s["mean"] == pytest.approx(0.8) and s["second_moment"] == pytest.approx(1.6)
    assert gr25.default_splits(50_000, 10) == 227 and gr25.default_splits(150, 1) == 2


def _release(X, A, Y, M, seed=7):
    return gr25._release(X, A, Y, zeta=1.0, n_splits=M, rng=np.random.default_rng(seed),
                        evaluation=True)


def test_neighbours_at_the_corners_never_exceed_and_the_second_moment_reaches_its_bound():
    """Parts of two rows (M = n/2); one row replaced by every corner (arm, outcome 0/1, covariate
    at -/+ 3). The parts are drawn from the noise generator, not the data, so a seed fixes them
    for both neighbours. A part whose treated arm is the replaced row alone moves t_j from W to
    the empty-arm constant 0: the second moment moves by exactly W^2/M (fails at 0.98x); the
    mean by W/M, half its declared 2W/M (a Hajek difference with clipped weights cannot swing
    by 2W with one row: SPECS.md "Comparators: GR25")."""
    n, M = 20, 10
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 1))
    A = np.tile([0.0, 1.0], n // 2)
    Y = np.zeros(n)
    sens = gr25.sensitivities(M, (0.0, 1.0))
    worst = {"mean": 0.0, "second_moment": 0.0}
    corners = list(itertools.product((-3.0, 3.0), (0.0, 1.0), (0.0, 1.0)))
    for i in range(n):
        for (x1, a1, y1), (x2, a2, y2) in itertools.product(corners, corners):
            D1 = (X.copy(), A.copy(), Y.copy())
            D2 = (X.copy(), A.copy(), Y.copy())
            D1[0][i], D1[1][i], D1[2][i] = x1, a1, y1
            D2[0][i], D2[1][i], D2[2][i] = x2, a2, y2
            r1, r2 = _release(*D1, M).nonprivate, _release(*D2, M).nonprivate
            worst["mean"] = max(worst["mean"], abs(r1["ate"] - r2["ate"]))
            worst["second_moment"] = max(worst["second_moment"],
                                         abs(r1["second_moment"] - r2["second_moment"]))
        if i == 3:
            break
    assert worst["mean"] <= sens["mean"] * (1 + 1e-12)
    assert worst["second_moment"] <= sens["second_moment"] * (1 + 1e-12)
    assert worst["second_moment"] > 0.98 * sens["second_moment"]
    assert worst["mean"] > 0.49 * sens["mean"]


def test_random_neighbours_never_exceed_the_sensitivities():
    rng = np.random.default_rng(4)
    n, M = 60, 6
    sens = gr25.sensitivities(M, (0.0, 1.0))
    for trial in range(60):
        X = rng.normal(size=(n, 2))
        A = rng.integers(0, 2, n).astype(float)
        Y = rng.integers(0, 2, n).astype(float)
        X2, A2, Y2 = X.copy(), A.copy(), Y.copy()
        i = rng.integers(n)
        X2[i], A2[i], Y2[i] = rng.normal(0, 5, 2), 1 - A[i], 1 - Y[i]
        r1, r2 = _release(X, A, Y, M, trial).nonprivate, _release(X2, A2, Y2, M, trial).nonprivate
        assert abs(r1["ate"] - r2["ate"]) <= sens["mean"] * (1 + 1e-12)
        assert abs(r1["second_moment"] - r2["second_moment"]) <= sens["second_moment"] * (
            1 + 1e-12)


def _reference_split(X, A, Y, eta):
    """One part by hand: logistic propensity (ridge 1/m on (1, x)), clipped, Hajek arm means."""
    m = len(A)
    if A.sum() in (0, m):
        return 0.0
    Z = np.column_stack([np.ones(m), X])
    theta = fit_logistic(Z, A, 1.0 / m, 1e-10)
    num1 = den1 = num0 = den0 = 0.0
    for z, a, y in zip(Z, A, Y, strict=True):
        pi = min(max(float(expit(z @ theta)), eta), 1 - eta)
        if a == 1:
            num1, den1 = num1 + y / pi, den1 + 1 / pi
        else:
            num0, den0 = num0 + y / (1 - pi), den0 + 1 / (1 - pi)
    return num1 / den1 - num0 / den0


def test_non_private_part_matches_a_hand_written_reference():
    X, A, Y, _ = make_experiment_c(2000, random_state=0)
    rel = _release(X, A, Y, 8, seed=3)
    parts = np.array_split(np.random.default_rng(3).permutation(2000), 8)
    t = [_reference_split(X[p], A[p], Y[p], 0.1) for p in parts]
    assert rel.nonprivate["ate"] == pytest.approx(sum(t) / 8, rel=1e-9)
    assert rel.nonprivate["second_moment"] == pytest.approx(sum(v * v for v in t) / 8, rel=1e-9)


def test_charge_release_mode_and_refusals():
    X, A, Y, _ = make_experiment_c(800, random_state=1)
    a, b = gr25._release(X, A, Y, zeta=1.5), gr25._release(X, A, Y, zeta=1.5)
    assert a.charge.zeta == pytest.approx(1.5) and a.ate != b.ate and a.nonprivate is None
    assert gr25.charge_of(1.5) == a.charge
    want = (1.5 * 0.9 ** 0.5, 1.5 * 0.1 ** 0.5)
    assert gr25.charge_of(1.5).detail["zetas"] == pytest.approx(want)
    assert a.params["n_splits"] == 3  # 800 // 220
    with pytest.raises(ValueError, match="rng is for evaluation mode only"):
        gr25._release(X, A, Y, zeta=1.5, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"n_splits must be an integer in \[2, n/2\]"):
        gr25._release(X, A, Y, zeta=1.5, n_splits=1)
    with pytest.raises(ValueError, match="shares must give two shares"):
        gr25._release(X, A, Y, zeta=1.5, shares=(1.0,))


def test_expected_halfwidth_by_hand_and_validity():
    n, M = 50_000, 227
    c = stats.norm.ppf(1 - 0.025 + 0.005)
    sigma = (2 / M) / (1.5 * math.sqrt(0.9))
    got = gr25.expected_halfwidth(n, 10, zeta=1.5, outcome_bounds=(0, 1))
    assert got == pytest.approx(c * math.sqrt(4 * 0.25 / n + sigma ** 2), rel=1e-12)
    assert gr25.valid_for(design="randomized", binary_outcome=True)
    assert not gr25.valid_for(design="observational", binary_outcome=False)


@pytest.mark.slow
@pytest.mark.timeout(3600)  # 500 releases at n = 50,000: longer than the suite's 600 s default
def test_coverage_on_the_seed_papers_binary_design():
    """Exp. C (n = 50,000, d = 10, true ATE 0.1) at zeta = 1.5, eta = 0.1, M = 227: 500
    releases. Measured 2026-11-27: coverage 0.996, mean half-width 0.0251 (conservative: the
    upper bound z_p1 sigma_2 on the noisy second moment dominates the parts' variance), 1011 s at
    load 9-23."""
    rng = np.random.default_rng(2026)
    hits, widths = [], []
    for rep in range(500):
        X, A, Y, _ = make_experiment_c(50_000, random_state=[42, rep])
        rel = gr25._release(X, A, Y, zeta=1.5, rng=rng, evaluation=True)
        hits.append(rel.ci[0] <= 0.1 <= rel.ci[1])
        widths.append(rel.ci[1] - rel.ci[0])
    coverage = float(np.mean(hits))
    print(f"GR25 coverage {coverage:.3f}, mean half-width {np.mean(widths) / 2:.4f}")
    assert coverage >= 0.93
