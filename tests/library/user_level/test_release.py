"""UserLevelATE: issue-11 API, privacy figures, retention order, refusals before any draw."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpcausal.accounting import PrivacyCharge
from dpcausal.user_level import UserLevelATE, clip_user, pseudo_user

from ._reference import pop_var


def _rel(**kw):
    base = dict(outcome_bounds=(0.0, 65.0), epsilon=1.0, clip="clip_user", split=(0.5, 0.5),
                weights=(1.0, 1.0), variant="corrected", protect_min_grid=True,
                error_target=None, noise_seed=0)
    return UserLevelATE(**(base | kw))


def test_issue_example_api(records):
    rel = _rel()
    plan = rel.plan(records, unit="unit_id", cell=["stratum", "arm"], order="ts")
    assert 1 <= plan.K <= plan.G1 and plan.epsilon_total == plan.K * 1.0
    assert plan.error <= plan.error_baseline
    charge = plan.privacy_charge()
    assert isinstance(charge, PrivacyCharge) and charge.mechanism == "laplace"
    assert charge.epsilon == plan.K * 1.0
    out = rel._release(records, value="y", plan=plan)
    for col in ("stratum", "arm", "n", "c", "m_g", "mean", "variance", "scale_mean", "scale_var",
                "bias_mean_bound", "bias_var_bound"):
        assert col in out.cells.columns
    assert len(out.cells) == 8 and list(out.strata["stratum"]) == [0, 1, 2, 3]
    assert {"ate", "se", "ci_lower", "ci_upper"} <= set(out.strata.columns)
    p, d = out.privacy, out.privacy.detail
    assert p.epsilon == plan.K and d["epsilon_parallel"] == plan.G1 and p.unit == "user"
    assert d["epsilon_naive"] == 8.0 and p.epsilon <= d["epsilon_parallel"] <= 8.0
    assert len(out.caveats) >= 3 and "lattice" in out.noise_sampler
    assert "K" in str(plan) and out.to_dict()["privacy"]["detail"]["K"] == plan.K
    text = str(out)  # the summary a user prints: the three losses and one row per stratum
    assert (f"{plan.K:g} (K*eps) vs {plan.G1:g} without Clip-User (G1*eps), 8 naive" in text)
    assert [line.split()[:2] for line in text.splitlines() if line.startswith("ATE stratum")] == [
        ["ATE", f"stratum={k}"] for k in range(4)]


def test_plan_matches_clip_user_and_pseudo_user_on_the_same_occupancy(records):
    plan = _rel(rollback_partial_stage=False).plan(records, order="ts")
    A = pd.crosstab(records["unit_id"], [records["stratum"], records["arm"]]).to_numpy()
    r = clip_user(A, 65.0, 1.0)
    p = pseudo_user(r.n, r.Gamma, 65.0, 1.0)
    assert plan.K == r.K and plan.G1 == r.G1 and plan.error == pytest.approx(p.E_bar_max)
    assert plan.cells["m_g"].tolist() == p.m.tolist()
    assert plan.cells["c"].tolist() == p.c.tolist()
    assert plan.cells["gamma_star"].tolist() == r.Gamma.max(0).tolist()
    m = plan.metrics()
    assert m["K"] == r.K and m["n_suppressed_pairs"] == r.n_suppressions
    assert m["frac_records_suppressed"] == pytest.approx(1 - p.c.sum() / A.sum())
    assert m["n_cells_capped"] == int((p.m < r.Gamma.max(0)).sum())


def test_clip_none_is_the_baseline(records):
    plan = _rel(clip="none").plan(records, order="ts")
    assert plan.K == plan.G1 and plan.epsilon_total == plan.G1 * 1.0
    assert plan.error == pytest.approx(plan.error_baseline) and plan.n_suppressions == 0
    assert any("baseline" in n for n in plan.notes)


def test_G1_equal_1_skips_suppression_and_says_why():
    df = pd.DataFrame({"unit_id": np.arange(40), "stratum": np.arange(40) % 2,
                       "arm": (np.arange(40) // 2) % 2, "ts": 0.0, "y": 1.0})
    plan = _rel().plan(df, order="ts")
    assert plan.G1 == plan.K == 1 and plan.epsilon_total == 1.0
    assert any("G_1 = 1" in n and "parallel composition" in n for n in plan.notes)
    out = _rel()._release(df, "y", plan)
    assert out.notes == plan.notes and out.privacy.epsilon == 1.0


def test_release_statistics_follow_retention_by_order():
    """Clipped mean/variance from ts-ordered caps, checked against a loop reference.

    Noise depends only on the generator and the public scales, so releasing the same plan with
    the same (evaluation-only) seed on all-zero values isolates the noise:
    release(y) - release(0) = statistic.
    """
    rng = np.random.default_rng(0)
    rows = []
    for u in range(40):
        for cell in range(3):
            k = 1 + (u % 4) + (30 if u < 2 else 0)             # units 0 and 1 are heavy hitters
            rows.extend((u, cell, rng.random(), rng.uniform(0, 10)) for _ in range(k))
    df = pd.DataFrame(rows, columns=["unit_id", "site", "ts", "y"])
    rel = UserLevelATE(outcome_bounds=(0.0, 10.0), epsilon=0.2, noise_seed=11,
                           protect_min_grid=False, weights=(1.0, 0.0))
    plan = rel.plan(df, unit="unit_id", cell="site", order="ts")
    assert plan.n_retained < plan.n_records                     # caps bind somewhere
    out = rel._release(df, value="y", plan=plan, evaluation=True).cells
    noise = rel._release(df.assign(y=0.0), value="y", plan=plan, evaluation=True).cells
    A = pd.crosstab(df["unit_id"], df["site"])
    kw = dict(weights=(1.0, 0.0))
    r = clip_user(A.to_numpy(), 10.0, 0.2, protect_min_grid=False, rollback_partial_stage=True,
                  **kw)
    caps = pseudo_user(r.n, r.Gamma, 10.0, 0.2, **kw).Gbar
    for j, site in enumerate(A.columns):
        kept = []
        for i, u in enumerate(A.index):
            grp = df[(df["unit_id"] == u) & (df["site"] == site)].sort_values("ts")
            kept.extend(grp["y"].iloc[: caps[i, j]].tolist())
        assert len(kept) == plan.cells["c"].iat[j]
        step_mu = plan.cells["delta_mu"].iat[j] * 2.0**-19
        step_var = plan.cells["delta_var"].iat[j] * 2.0**-19
        assert out["mean"].iat[j] - noise["mean"].iat[j] == pytest.approx(np.mean(kept),
                                                                           abs=step_mu)
        assert out["variance"].iat[j] - noise["variance"].iat[j] == pytest.approx(
            pop_var(kept), abs=step_var)


def test_same_seed_same_evaluation_release_and_injected_generator(records):
    plan = _rel().plan(records, order="ts")

    def means(rel):
        return rel._release(records, "y", plan, evaluation=True).cells["mean"].to_numpy()

    a, b = means(_rel(noise_seed=7)), means(_rel(noise_seed=7))
    g = np.random.default_rng(7)
    c, d = means(_rel(noise_seed=g)), means(_rel(noise_seed=g))
    assert np.array_equal(a, b) and np.array_equal(a, c) and not np.array_equal(c, d)


# ------------------------------------------------------------------ refusals, nothing drawn
@pytest.mark.parametrize("mutate,match", [
    (lambda df: df.assign(y=df["y"].astype(str)), "numeric"),
])
def test_bad_values_refused_before_noise(records, noise_source, mutate, match):
    plan = _rel().plan(records, order="ts")
    with pytest.raises((ValueError, TypeError), match=match):
        _rel(noise_seed=noise_source)._release(mutate(records), "y", plan)
    assert noise_source.draws == 0


@pytest.mark.parametrize("bad,public", [(70.0, 65.0), (-1e300, 0.0), (np.inf, 65.0),
                                        (np.nan, 32.5)])
def test_values_are_clamped_never_refused(records, bad, public):
    """Issue 26 §1: a value outside the bounds [0, 65] (or missing) is not refused; it counts as
    the bound (or the midpoint), so the release equals the release of the clamped records."""
    plan = _rel().plan(records, order="ts")
    rows = records.index.isin(records.index[:3])

    def cells(y):
        return _rel(noise_seed=5).release(records.assign(y=y), "y", plan,
                                            evaluation=True).cells

    pd.testing.assert_frame_equal(cells(records["y"].mask(rows, bad)),
                                  cells(records["y"].mask(rows, public)))


def test_changed_occupancy_refused(records, noise_source):
    plan = _rel().plan(records, order="ts")
    with pytest.raises(ValueError, match="occupancy differs"):
        _rel(noise_seed=noise_source)._release(records.iloc[1:], "y", plan)
    with pytest.raises(ValueError, match="different settings"):
        _rel(noise_seed=noise_source, epsilon=2.0)._release(records, "y", plan)
    assert noise_source.draws == 0


@pytest.mark.parametrize("kw,match", [
    (dict(epsilon=0.0), "epsilon must be"), (dict(epsilon=-1.0), "epsilon must be"),
    (dict(outcome_bounds=(0.0, np.inf)), "unbounded outcomes"),
    (dict(outcome_bounds=(5.0, 1.0)), "a < b"),
    (dict(occupancy_public=False), "occupancy_public"),
    (dict(variant="paper_statement"), "erratum E1"), (dict(clip="greedy"), "clip must be"),
    (dict(split=(0.6, 0.6)), "split"), (dict(noise_seed="x"), "noise_seed"),
])
def test_bad_configuration_refused(records, kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        _rel(**kw).plan(records, order="ts")


@pytest.mark.parametrize("mutate,kw,match", [
    (lambda df: df.assign(unit_id=df["unit_id"].astype(float).where(df.index != 3)), {},
     "missing ids"),
    (lambda df: df.assign(arm=df["arm"].astype(float).where(df.index != 3)), {}, "missing keys"),
    (lambda df: df, dict(unit="patient"), "not a column"),
    (lambda df: df.assign(rid=np.arange(len(df)) // 2), dict(record="rid"), "cells overlap"),
])
def test_bad_records_refused(records, mutate, kw, match):
    with pytest.raises(ValueError, match=match):
        _rel().plan(mutate(records), **({"order": "ts"} | kw))


def test_expected_occupancy_hash_checked(records):
    plan = _rel().plan(records, order="ts")
    assert _rel().plan(records, order="ts", expected_occupancy_hash=plan.occupancy_hash).K == plan.K
    with pytest.raises(ValueError, match="registered public"):
        _rel().plan(records, order="ts", expected_occupancy_hash="0" * 64)


def test_mean_only_release_has_no_variance(records):
    rel = _rel(split=(1.0, 0.0), weights=(1.0, 0.0))
    plan = rel.plan(records, order="ts")
    out = rel._release(records, "y", plan)
    assert out.cells["variance"].isna().all() and out.strata["ate"].notna().all()
    # no released variance: the sampling SE uses the public bound U^2/4 = 65^2/4 per record
    s = out.strata
    bound = np.sqrt(65.0**2 / 4 * (1 / s["c_treated"] + 1 / s["c_control"]))
    assert np.allclose(s["se_sampling"], bound) and np.all(s["se"] > s["se_noise"])
    assert plan.error_baseline < _rel().plan(records, order="ts").error_baseline


def test_release_sensitivity_fuzz_with_witness_and_negative_control_P10():
    """Same evaluation seed => same noise, so out(D) - out(D') is the statistic's change: it
    stays within the plan's declared sensitivities on random neighbours, attains delta_mu on the
    witness pair, and a halved sensitivity would be caught. Also epsilon_total = max_l eps *
    #cells retained (Thm II.3)."""
    rng = np.random.default_rng(4)
    rows = [(u, cell, rng.random(), rng.uniform(0, 10))
            for u in range(30) for cell in range(3) if (u + cell) % 4
            for _ in range(1 + (u % 5) + (25 if u < 2 else 0))]
    df = pd.DataFrame(rows, columns=["unit_id", "site", "ts", "y"])
    rel = UserLevelATE(outcome_bounds=(0.0, 10.0), epsilon=0.3, noise_seed=9,
                           weights=(1.0, 0.0))
    plan = rel.plan(df, unit="unit_id", cell="site", order="ts")
    A = pd.crosstab(df["unit_id"], df["site"])
    kw = dict(weights=(1.0, 0.0))
    r = clip_user(A.to_numpy(), 10.0, 0.3, rollback_partial_stage=True, **kw)
    caps = pseudo_user(r.n, r.Gamma, 10.0, 0.3, **kw).Gbar
    assert plan.epsilon_total == pytest.approx(0.3 * (caps > 0).sum(1).max())
    base = rel._release(df, "y", plan, evaluation=True).cells
    d_mu = plan.cells["delta_mu"].to_numpy()
    d_var = plan.cells["delta_var"].to_numpy()
    step = 2.0**-19
    for _ in range(15):
        u = int(rng.integers(30))
        mask = df["unit_id"] == u
        other = df.assign(y=df["y"].where(~mask, rng.choice([0.0, 10.0], size=len(df))))
        out = rel._release(other, "y", plan, evaluation=True).cells
        assert np.all(np.abs(out["mean"] - base["mean"]) <= d_mu * (1 + step))
        assert np.all(np.abs(out["variance"] - base["variance"]) <= d_var * (1 + step))
    # witness for the mean (§2.1): the capped unit's retained records at U vs 0, others at 0
    j = int(np.argmax(plan.cells["m_g"].to_numpy()))
    i = int(np.argmax(caps[:, j]))
    assert caps[i, j] == plan.cells["m_g"].iat[j]
    site, unit = A.columns[j], A.index[i]
    sel = (df["unit_id"] == unit) & (df["site"] == site)
    d1 = df.assign(y=np.where(sel, 10.0, 0.0))
    d2 = df.assign(y=0.0)
    gap = abs(rel._release(d1, "y", plan, evaluation=True).cells["mean"].iat[j]
              - rel._release(d2, "y", plan, evaluation=True).cells["mean"].iat[j])
    assert gap == pytest.approx(d_mu[j], rel=step)
    assert gap > (d_mu[j] / 2) * (1 + step)           # negative control: Delta/2 is caught


def test_release_invariant_to_row_order(records):
    shuffled = records.sample(frac=1.0, random_state=1)
    p1 = _rel().plan(records, order="ts")
    p2 = _rel().plan(shuffled, order="ts")
    assert p1.occupancy_hash == p2.occupancy_hash and p1.K == p2.K
    a = _rel(noise_seed=3)._release(records, "y", p1, evaluation=True).cells
    b = _rel(noise_seed=3)._release(shuffled, "y", p1, evaluation=True).cells
    assert np.array_equal(a["mean"], b["mean"]) and np.array_equal(a["variance"], b["variance"])
