"""Slow coverage of the ensemble at its defaults on the nonlinear observational designs of issue 39
(run with ./dev slow): quadratic, interaction (d = 5), threshold and exponential outcomes with
U-shaped (or interaction) selection, mild (pi in [0.20, 0.73]) and strong (pi in [0.09, 0.88])
confounding, against the population ATE in closed form (:mod:`dpcausal.datasets`).

``estimator="auto"`` (covariate bounds declared, no assumption: the AIPW ensemble) at its
defaults: ``propensity_clip="auto"`` (SPECS.md "The propensity clip for the release at hand"),
the degree-2 default models (:mod:`dpcausal.ate.features`),
``n_folds="auto"``. Each release is a full ``fit`` in evaluation mode (seeded folds and noise);
the pre-noise estimate of one data draw is reused across zeta only where the release's K and eta
are the same (then it is the same number), and the noise is drawn by the release's own
calibration (:func:`dpcausal.ate.release.draw_release`).

Measured once at full size (300 releases per cell): the table and runtime in the docstring of
:func:`test_default_ensemble_covers_nonlinear_designs`.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpcausal import PrivateATE
from dpcausal.ate.release import draw_release
from dpcausal.datasets import CONFOUNDING, NONLINEAR_DESIGNS, NONLINEAR_OUTCOME_BOUNDS

REPS = 300
SIZES = (1_000, 3_000, 20_000)
ZETAS = (1.0, 4.0)


def coverage(design: str, confounding: str, n: int, zetas=ZETAS, reps: int = REPS,
             **params) -> dict[float, tuple[float, float, float]]:
    """``{zeta: (coverage, mean error of tau_DP, mean half-width)}`` of ``reps`` releases of
    ``PrivateATE(**params)`` (auto, covariate bounds declared: the AIPW ensemble) at each zeta
    on fresh draws of a design."""
    make = NONLINEAR_DESIGNS[design]
    hits: dict[float, list[tuple[bool, float, float]]] = {z: [] for z in zetas}
    for rep in range(reps):
        X, A, Y, truth = make(n, confounding, random_state=10_000 * n + rep)
        done: dict[tuple[int, float], tuple[float, float]] = {}
        for zeta in zetas:
            d = X.shape[1]
            # auto at its defaults, covariate bounds declared and no assumption (issue 39's
            # "Done when"): it takes the model-agnostic ensemble, which this loop then runs
            est = PrivateATE(outcome_bounds=NONLINEAR_OUTCOME_BOUNDS, zeta=zeta,
                             covariate_bounds=[(-1.0, 1.0)] * d, random_state=rep, **params)
            assert est.resolved_estimator(n, d) == "aipw", "auto took a model-based estimator"
            cal = est.calibration(n, d)
            key = (cal.n_folds, est.resolved_propensity_clip(n, d))
            if key not in done:     # the same folds, models and eta: the same pre-noise figures
                rel = est.fit(X, A, Y, evaluation=True)
                done[key] = (rel.nonprivate["ate"], rel.nonprivate["variance"])
            tau, v = done[key]
            noise = np.random.default_rng([n, rep, int(10 * zeta), len(design), len(confounding)])
            rel = draw_release(tau, v, cal, noise, ci_mode=est.ci)
            lo, hi = rel.ci
            hits[zeta].append((lo <= truth <= hi, rel.ate - truth, (hi - lo) / 2))
    return {z: tuple(np.mean(np.array(h, dtype=float), axis=0)) for z, h in hits.items()}


@pytest.mark.slow
@pytest.mark.parametrize("confounding", sorted(CONFOUNDING))
@pytest.mark.parametrize("design", sorted(NONLINEAR_DESIGNS))
def test_default_ensemble_covers_nonlinear_designs(design, confounding):
    """Coverage >= 0.93 over 300 releases per (n, zeta) cell, n in (1,000, 3,000, 20,000),
    zeta in (1, 4).

    Measured (7 Dec 2026, all 48 cells, 14,400 releases on 7,200 data draws): two processes,
    2,905 s and 2,921 s wall, at a load average of 5 to 23 on the shared 2 cores. Coverage at
    zeta = 1 / 4 (K and eta of the release: d = 2 gives K = 10, 30, 200; interaction, d = 5,
    K = 4, 14, 95; eta 0.2 except n = 3,000, K = 30, zeta = 4: 0.1866; n = 20,000, K = 200:
    0.1425 / 0.0712; K = 95, zeta = 4: 0.1034):

    ============  ===========  ===========  ===========  ===========  ===========  ===========
    design        strong 1k    strong 3k    strong 20k   mild 1k      mild 3k      mild 20k
    ============  ===========  ===========  ===========  ===========  ===========  ===========
    quadratic     .973 / .970  .970 / .950  .943 / .967  .960 / .967  .963 / .980  .950 / .967
    interaction   .967 / .977  .957 / .973  .950 / .940  .967 / .963  .973 / .980  .953 / .960
    threshold     .973 / .967  .970 / .950  .950 / .973  .960 / .967  .960 / .977  .957 / .973
    exponential   .963 / .977  .960 / .970  .947 / .937  .967 / .963  .973 / .987  .967 / .973
    ============  ===========  ===========  ===========  ===========  ===========  ===========

    Re-measured 7 Dec 2026 evening with the default propensity's C = 10^4 (was scikit-learn's
    1; 48 cells, one process per design, load 2-4): the same to the third decimal except the
    threshold row (above; it was .950 / .963 at strong 20k and .963 / .980 at mild 3k).

    Mean half-width at n = 20,000: 0.42 / 0.22 (d = 2), 0.60 / 0.31 (interaction); at
    n = 1,000 the CI is uninformative (half-width 6.6 / 1.7; 19.8 / 4.9 at d = 5)."""
    for n in SIZES:
        for zeta, (cov, _, _) in coverage(design, confounding, n).items():
            assert cov >= 0.93, (design, confounding, n, zeta, cov)


@pytest.mark.slow
def test_issue_39_clip_failure_is_fixed():
    """Issue 39 item 3: strong confounding, quadratic outcome, n = 20,000, zeta = 4,
    ``estimator="aipw"`` at its defaults. On main (eta = 0.2, logistic and linear models on the
    raw covariates) the review measured 0.747 (bias -0.039) on its design; on this design main
    covers 0.00 over 300 releases (seen failing: bias +0.380, half-width 0.026: the models on
    the raw covariates give about the confounded difference in means). Here: 0.967 (mean error
    of tau_DP -0.004, half-width 0.22; K = 200, eta = 0.0712)."""
    (cov, bias, half), = coverage("quadratic", "strong", 20_000, zetas=(4.0,)).values()
    assert cov >= 0.93, (cov, bias, half)


def nonprivate_coverage(design: str, n: int, reps: int = REPS) -> float:
    """Coverage of tau_hat +- 1.96 sqrt(V_hat) of non-private 2-fold cross-fitted AIPW at
    eta = 0.01 with the default degree-2 models, strong confounding."""
    hits = []
    for rep in range(reps):
        X, A, Y, truth = NONLINEAR_DESIGNS[design](n, "strong", random_state=7 * n + rep)
        rel = PrivateATE(estimator="aipw", n_folds=2, propensity_clip=0.01,
                         outcome_bounds=NONLINEAR_OUTCOME_BOUNDS, random_state=rep,
                         noise_seed=rep).fit(X, A, Y, evaluation=True)
        tau, se = rel.nonprivate["ate"], np.sqrt(rel.nonprivate["variance"])
        hits.append(abs(tau - truth) <= 1.96 * se)
    return float(np.mean(hits))


@pytest.mark.slow
@pytest.mark.parametrize("design", sorted(NONLINEAR_DESIGNS))
def test_nonprivate_cross_fitted_aipw_covers(design):
    """The designs' reference: non-private 2-fold cross-fitted AIPW at eta = 0.01 with the
    default degree-2 models, strong confounding, n = 3,000 and 20,000, 300 draws each. The
    review's reference covered 0.93-0.96 (0.93 on e^{X1} at n = 3,000). Measured 7 Dec 2026
    (one process, about 11 min at load 15-23), n = 3,000 / 20,000: quadratic 0.920 / 0.940,
    exponential 0.927 / 0.943, threshold 0.947 / 0.947, interaction 0.950 / 0.963. The bar is
    0.90: the reference's own finite-sample coverage, a little under 0.95 where the inverse
    weights reach 11."""
    for n in (3_000, 20_000):
        cov = nonprivate_coverage(design, n)
        assert cov >= 0.90, (design, n, cov)
