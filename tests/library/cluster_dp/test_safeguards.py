"""What the Cluster-DP release keeps private: sigma = 0 refused, the strict epsilon reported
under paper accounting, the uniform prior reading no outcome, no leak through row order, huge
epsilons and malformed parameters refused before any draw, exact prior noise from OS entropy,
seeds in evaluation only. Each test failed on the code before its fix."""

import math

import numpy as np
import pandas as pd
import pytest

from dpcausal import session
from dpcausal.cluster_dp import ClusterDP, ResponseSpace, eps_total, lam_for

SPACE = ResponseSpace(np.arange(-5, 7))


# ---- sigma = 0 ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw",
    [
        {"accounting": "paper"},
        {"accounting": "paper", "gamma": 1 / 12},
        {"accounting": "paper", "mechanism": "cluster_free"},
        {"accounting": "strict"},
        {"mechanism": "uniform"},
    ],
)
def test_sigma_zero_refused_in_every_mode(df, kw):
    """sigma = 0 publishes q_tilde as a function of the labels (spec §6 E7): no mode takes it."""
    m = ClusterDP(space=SPACE, epsilon=30.0, sigma=0.0, **({"gamma": 0.02} | kw))
    with pytest.raises(ValueError, match="sigma=0 publishes q_tilde as a deterministic"):
        m.privacy_charge()
    with pytest.raises(ValueError, match="sigma=0"):
        m.check_input(df, cluster="c", treatment="z", outcome="y")


def test_paper_accounting_reports_the_strict_epsilon(df):
    """accounting='paper' calibrates lambda as printed, but the release states what it is worth:
    the strict epsilon (2/sigma for the prior, spec §6 E1), the paper figure only in detail."""
    m = ClusterDP(space=SPACE, epsilon=3.0, gamma=0.02, sigma=10.0, accounting="paper")
    r = m.fit(df, treatment="z", outcome="y", cluster="c")
    lam = lam_for(3.0, 0.0, 0.02, 10.0, mode="paper")
    strict = 0.2 + math.log1p((1 - lam) / (lam * 0.02))  # Theorem 3.1 with eps1 = 2/sigma
    assert r.lam == pytest.approx(lam)
    assert r.privacy.epsilon == pytest.approx(strict) == pytest.approx(3.1)
    assert r.privacy.detail["epsilon_paper"] == pytest.approx(3.0)
    assert r.published.privacy["epsilon"] == pytest.approx(3.1)
    assert m.calibrate()[1]["epsilon"] == pytest.approx(eps_total(lam, 0.02, 10.0, 0.0, "strict"))


# ---- a prior uniform by construction is free ----------------------------------------------------
@pytest.mark.parametrize("eps, lam", [(1.0, 0.744), (2.0, 0.439), (4.0, 0.085)])
@pytest.mark.parametrize("kw", [{}, {"gamma": 0.2, "sigma": 3.0}, {"accounting": "paper"},
                                {"mechanism": "cluster_free", "gamma": 0.2}])
def test_gamma_one_over_k_takes_the_uniform_branch(eps, lam, kw):
    """gamma = 1/K makes q_tilde uniform whatever the noise (spec §2.1): charge nothing for it.
    K = 5: lambda = K/(K + e^eps - 1) (Theorem A.5), the figures issue 18 quotes, not the
    0.803/0.559/0.175 of spending 20% of epsilon on a prior that carries no information."""
    m = ClusterDP(space=ResponseSpace(np.arange(5)), epsilon=eps, **kw)
    got, p = m.calibrate()
    assert got == pytest.approx(lam, abs=5e-4)
    assert got == pytest.approx(5 / (5 + math.exp(eps) - 1), rel=1e-12)
    assert p["sigma"] == math.inf and p["gamma"] == pytest.approx(0.2)
    assert p["epsilon"] == p["epsilon_strict"] == p["epsilon_paper"] == pytest.approx(eps)
    assert m.privacy_charge().epsilon == pytest.approx(eps)


def test_uniform_by_construction_reads_no_outcome(df, monkeypatch):
    """The uniform branch publishes the uniform prior and draws no prior noise."""
    import dpcausal.cluster_dp.mechanisms as kernels

    def no_noise(*a, **k):
        raise AssertionError("prior noise drawn for a prior that is uniform by construction")

    monkeypatch.setattr(kernels, "draw_prior_noise", no_noise)
    r = ClusterDP(space=SPACE, epsilon=2.0).fit(df, treatment="z", outcome="y", cluster="c")
    assert np.allclose(r.published.priors["q_tilde"], 1 / 12) and r.sigma == math.inf
    assert r.lam == pytest.approx(12 / (12 + math.exp(2.0) - 1), rel=1e-12)


# ---- the published order ------------------------------------------------------------------------
def test_a_file_sorted_by_outcome_does_not_leak_through_row_order(df):
    """Rows are published grouped by (cluster, arm), in a secret random order within each group
    and without the source index: a source sorted by outcome (most labels kept at lambda ~ 0.11)
    says nothing through the published order."""
    from scipy.stats import spearmanr

    source = df.sort_values("y").set_index(np.arange(len(df)) * 7 + 3)
    m = ClusterDP(space=SPACE, epsilon=8.0, gamma=0.02, sigma=1.0, noise_seed=0)
    r = m.fit(source, treatment="z", outcome="y", cluster="c", evaluation=True)
    assert r.lam < 0.15
    pub = r.published.data
    pd.testing.assert_index_equal(pub.index, pd.RangeIndex(len(df)))
    keys = list(zip(pub["cluster"], pub["treatment"], strict=True))
    assert keys == sorted(keys)  # grouped by the public (cluster, arm), nothing else
    assert (pub.groupby(["cluster", "treatment"]).size()
            == source.groupby(["c", "z"]).size().rename_axis(["cluster", "treatment"])).all()
    for _, group in pub.groupby(["cluster", "treatment"]):
        rho = spearmanr(np.arange(len(group)), group["outcome"]).statistic
        assert abs(rho) < 0.15, rho  # source order: rho about 0.9


# ---- clear refusals, before anything is drawn ---------------------------------------------------
def _refused_before_charge(m, frame, match, monkeypatch):
    """fit refuses in check_input: neither the charge nor the draw runs."""

    def boom(*a, **k):
        raise AssertionError("charged or drew after a refusal")

    monkeypatch.setattr(m, "privacy_charge", boom)
    monkeypatch.setattr(m, "_private_release", boom)
    with pytest.raises(ValueError, match=match):
        m.fit(frame, treatment="z", outcome="y", cluster="c")


@pytest.mark.parametrize("kw", [{}, {"gamma": 0.02, "sigma": 10.0}, {"mechanism": "uniform"},
                                {"gamma": 0.02, "accounting": "paper"}])
def test_huge_epsilon_is_a_clear_value_error(df, kw, monkeypatch):
    """epsilon = 1e6 raised a bare OverflowError from exp()."""
    m = ClusterDP(space=SPACE, epsilon=1e6, **kw)
    _refused_before_charge(m, df, r"epsilon=1000000.0 is too large", monkeypatch)


def test_calibration_functions_refuse_huge_epsilon():
    from dpcausal.cluster_dp import uniform_lam

    with pytest.raises(ValueError, match="too large"):
        lam_for(1e6, 0.0, 0.02, 10.0)
    with pytest.raises(ValueError, match="too large"):
        uniform_lam(1e6, 12)
    assert 0 < uniform_lam(700.0, 12) < 1e-290  # the largest accepted exponent still works


def test_response_space_with_infinite_variance_refused(df, monkeypatch):
    """Y = [0, 1e300] returned ATE 4.5e299 with an infinite variance (printed as None)."""
    space = ResponseSpace([0.0, 1e300])
    frame = df.assign(y=np.where(df["y"] > 0, 1e300, 0.0))
    m = ClusterDP(space=space, epsilon=2.0)
    _refused_before_charge(m, frame, "response space is too wide", monkeypatch)
    # a wide but representable space is fine
    r = ClusterDP(space=ResponseSpace([0.0, 1e100]), epsilon=2.0).fit(
        df.assign(y=np.where(df["y"] > 0, 1e100, 0.0)), treatment="z", outcome="y", cluster="c")
    assert math.isfinite(r.ate) and math.isfinite(r.se) and r.se > 0


def test_numeric_strings_refused_not_parsed(df, monkeypatch):
    frame = df.assign(y=df["y"].astype(int).astype(str))
    match = r"outcome column 'y' must be numeric \(dtype \w+\); numeric strings"
    _refused_before_charge(ClusterDP(space=SPACE, epsilon=2.0), frame, match, monkeypatch)
    with pytest.raises(ValueError, match="values must be numbers"):
        ResponseSpace(["0", "1", "2"])


# ---- exact discrete Laplace for the published priors, from OS entropy ---------------------------
COUNTS = np.array([[1, 2, 1], [3, 0, 1]])  # two groups of n = 4, K = 3


def _prior_noise(sigma, reps, seed):
    """w = (p_hat + noise) - p_hat of the release's prior kernel, ``reps`` draws of 6 cells."""
    from dpcausal.cluster_dp.mechanisms import exact_noisy_histograms

    rng = np.random.default_rng(seed)
    return np.concatenate([(exact_noisy_histograms(COUNTS, sigma, rng) - COUNTS / 4).ravel()
                           for _ in range(reps)])


def _laplace_chi2_pvalue(w, scale, bins=10):
    """Chi-square of w against Laplace(scale) in ``bins`` equiprobable bins. At sigma/(n g) ~ 2^20
    lattice steps per scale the discrete Laplace's bin masses equal the continuous ones to ~1e-6,
    far below what 3,600 draws resolve."""
    from scipy import stats

    q = np.arange(1, bins) / bins
    edges = np.where(q < 0.5, scale * np.log(2 * q), -scale * np.log(2 * (1 - q)))
    observed = np.bincount(np.searchsorted(edges, w), minlength=bins)
    return stats.chisquare(observed).pvalue


def test_prior_noise_has_the_laplace_pmf_of_scale_sigma_over_n():
    """Algorithm 2 step 2: Laplace(sigma/n_{a,c}) per cell (spec §2.1); a sampler at 0.8 sigma
    (the mis-scaled control) is rejected by the same test."""
    from dpcausal.noise import lattice_step

    sigma = 0.5
    w = _prior_noise(sigma, reps=600, seed=1)
    assert _laplace_chi2_pvalue(w, sigma / 4) > 1e-3
    assert _laplace_chi2_pvalue(_prior_noise(0.8 * sigma, reps=600, seed=2), sigma / 4) < 1e-6
    assert _laplace_chi2_pvalue(_prior_noise(1.25 * sigma, reps=600, seed=3), sigma / 4) < 1e-6
    noisy = w + np.tile(COUNTS.ravel() / 4, 600)
    steps = noisy / lattice_step(1 / 4)
    assert np.array_equal(steps, np.round(steps))  # published on the power-of-two lattice


def test_release_draws_exact_prior_noise_from_os_entropy(df, monkeypatch):
    """A release's priors go through dpcausal.noise.laplace_mechanism, per cell with sensitivity
    1/n_{a,c} and epsilon 1/sigma (one label moves two cells: 2/sigma, spec §6 E1), with the
    generator of secure_rng(); the noise seed is used in evaluation mode only."""
    import dpcausal.cluster_dp.mechanisms as kernels
    import dpcausal.cluster_dp.release as release_module
    from dpcausal import noise

    made, calls = [], []

    def spy_rng():
        made.append(noise.secure_rng())
        return made[-1]

    def spy_laplace(value, sensitivity, epsilon, rng):  # one vectorised call: an entry each
        sens = np.broadcast_to(sensitivity, np.shape(value)).ravel().tolist()
        calls.extend((d, epsilon, rng) for d in sens)
        return noise.laplace_mechanism(value, sensitivity, epsilon, rng)

    def float_sampler(*a, **k):
        raise AssertionError("the floating-point Laplace sampler was used in a release")

    monkeypatch.setattr(release_module, "secure_rng", spy_rng)
    monkeypatch.setattr(kernels, "laplace_mechanism", spy_laplace)
    monkeypatch.setattr(kernels, "draw_prior_noise", float_sampler)
    m = ClusterDP(space=SPACE, epsilon=3.0, gamma=0.02, sigma=10.0, noise_seed=1)
    a = m.fit(df, treatment="z", outcome="y", cluster="c")
    n_g = df.groupby(["c", "z"]).size().to_numpy()  # group order 2 * cluster + arm
    assert len(made) == 1 and len(calls) == 6 * 12
    assert [c[0] for c in calls] == pytest.approx(np.repeat(1.0 / n_g, 12).tolist(), rel=1e-15)
    assert all(c[1] == pytest.approx(0.1) and c[2] is made[0] for c in calls)
    session.reset()
    b = m.fit(df, treatment="z", outcome="y", cluster="c")
    assert not a.published.priors.equals(b.published.priors)  # the seed did not seed a release
    assert len(made) == 2


def test_privatize_takes_a_noise_seed_in_evaluation_only(df):
    m = ClusterDP(space=SPACE, epsilon=3.0, gamma=0.02, sigma=10.0)
    with pytest.raises(ValueError, match="random_state seeds the noise: evaluation mode only"):
        m._privatize(df, "c", "z", "y", random_state=0)
    a = m._privatize(df, "c", "z", "y", random_state=0, evaluation=True)
    b = m._privatize(df, "c", "z", "y", random_state=0, evaluation=True)
    pd.testing.assert_frame_equal(a.priors, b.priors)
