"""FederatedATE end to end: phases, privacy charge, input handling, CI formulas by hand."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from dpcausal.accounting import PrivacyCharge
from dpcausal.federated import (
    ClientReports,
    FederatedATE,
    aggregate,
    cks_epsilon,
    decode_group,
    encode_clients,
    interval,
    nonasymptotic_halfwidth,
    pbm_rdp,
    plan_release,
    sampling_variance,
)


def _data(n=1000, seed=0):
    rng = np.random.default_rng(seed)
    t = np.zeros(n, bool)
    t[rng.permutation(n)[: n // 2]] = True
    x = np.where(t, rng.normal(0.1, 0.1, n), rng.normal(-0.1, 0.1, n))
    return x, t


def _fed(**kw):
    args = dict(R=1.0, epsilon=1.0, delta=1e-6, m1=256, m2=256, noise_seed=0)
    args.update(kw)
    return FederatedATE(**args)


def test_issue_example_runs_and_reports():
    x, t = _data()
    res = _fed(mean_share=0.99, estimand="PATE", ci_form="quadrature",
               variance_mode="private", secagg="pairwise", dropout=0.0, alpha=0.1).run(x, t)
    assert res.ci[0] < res.ate < res.ci[1]
    assert res.privacy.epsilon <= 1.0 and res.privacy.delta == 1e-6
    assert set(res.privacy.detail) >= {"optimal_order", "theta_capped"}
    assert res.bits_per_client == 17 + 17  # two messages over Z_{2^17} (n_g=500, m=256)
    assert res.theta["mean"][0] == pytest.approx(0.0761, abs=5e-4)
    assert "ate" in str(res) and res.to_dict()["ci"] == list(res.ci)


def test_secagg_and_direct_give_identical_release():
    x, t = _data()
    a = _fed(secagg="pairwise").run(x, t, evaluation=True)
    b = _fed(secagg="none").run(x, t, evaluation=True)
    assert a.ate == b.ate and a.ci == b.ci
    assert a.secure_aggregation.startswith("simulation of secure aggregation")
    assert b.secure_aggregation.startswith("none: the server sees every client's report")


def test_phases_reproduce_run():
    x, t = _data()
    fed = _fed()
    res = fed.run(x, t, evaluation=True)  # seeded: evaluation mode only
    plan = plan_release(500, 500, R=1.0, epsilon=1.0, delta=1e-6, m1=256, m2=256)
    rng = np.random.default_rng(0)  # the session id is not drawn from it
    groups = []
    for g, members in enumerate((~t, t)):
        reports = encode_clients(x[members], plan, g, rng)
        views = aggregate(reports, plan, g, secagg="pairwise", session="any-session")
        groups.append(decode_group(*views, plan, g))
    again = interval(groups[0].mean, groups[1].mean, groups[0].variance, groups[1].variance,
                     plan, (500, 500), estimand="PATE", ci_form="quadrature", alpha=0.1)
    assert again.ate == pytest.approx(res.ate, abs=1e-12)
    assert again.ci == pytest.approx(res.ci, abs=1e-12)


def test_chunked_encoding_sums_like_one_batch():
    x, t = _data()
    plan = plan_release(500, 500, R=1.0, epsilon=1.0, delta=1e-6, m1=256, m2=256)
    chunks = [encode_clients(c, plan, 1, np.random.default_rng(i))
              for i, c in enumerate(np.array_split(x[t], 3))]
    reports = ClientReports(np.concatenate([c.z1 for c in chunks]),
                            np.concatenate([c.z2 for c in chunks]))
    first, second = aggregate(reports, plan, 1, secagg="pairwise", session=3)
    assert first.sum_mod_m == int(reports.z1.sum()) and first.n_received == 500


def test_privacy_charge_is_data_free_and_composed():
    fed = _fed()
    charge = fed.privacy_charge(n_treated=500, n_control=400)
    assert isinstance(charge, PrivacyCharge) and charge.mechanism == "rdp"
    plan = fed.plan(500, 400)
    cal = plan.calibration
    expected = np.maximum(
        pbm_rdp(400, 256, cal.theta1[0]) + pbm_rdp(400, 256, cal.theta2[0]),
        pbm_rdp(500, 256, cal.theta1[1]) + pbm_rdp(500, 256, cal.theta2[1]))
    np.testing.assert_allclose(charge.rdp_epsilons, expected, rtol=1e-12)
    eps = cks_epsilon(charge.rdp_epsilons, charge.delta, charge.rdp_orders)[0]
    assert 0.99999 < eps <= 1.0
    # the release run on data charges exactly the planned curve
    x, t = _data(900)
    t[:] = False
    t[:500] = True
    assert fed.run(x, t).privacy.epsilon == pytest.approx(eps, rel=1e-12)


def test_injected_generator_and_determinism_in_evaluation():
    """noise_seed seeds the protocol in evaluation mode only."""
    x, t = _data()
    a = _fed(noise_seed=np.random.default_rng(7)).run(x, t, evaluation=True)
    b = _fed(noise_seed=np.random.default_rng(7)).run(x, t, evaluation=True)
    c = _fed(noise_seed=np.random.default_rng(8)).run(x, t, evaluation=True)
    assert a.ate == b.ate and a.ate != c.ate
    assert a.evaluation and "EVALUATION (not private)" in str(a)
    with pytest.raises(TypeError, match="noise_seed must be"):
        _fed(noise_seed="seed").run(x, t)


def test_dataframe_input():
    x, t = _data()
    df = pd.DataFrame({"y": x, "arm": t.astype(int)})
    assert (_fed().run(df, "arm", "y", evaluation=True).ate
            == _fed().run(x, t, evaluation=True).ate)
    with pytest.raises(ValueError, match="outcome='z' is not a column of the data"):
        _fed().run(df, "arm", "z")


def test_oracle_mode_tagged_not_private():
    x, t = _data()
    res = _fed(variance_mode="oracle_nonprivate").run(x, t)
    assert res.privacy.detail["privacy_status"] == "NOT_PRIVATE"
    assert res.theta["second_moment"] == ()
    assert res.variance_treated == pytest.approx(np.var(x[t], ddof=1))


def test_dropout_accounted_for_survivors():
    x, t = _data()
    res = _fed(dropout=0.1).run(x, t)
    assert res.n_treated == 450 and res.n_control == 450
    assert res.privacy.detail["n_plan"] == (450, 450) and res.privacy.epsilon <= 1.0


def test_no_clipped_count_anywhere():
    """No exact count of clipped outcomes on the estimator (the old
    ``client_log_["n_clipped"]``), the client reports or the release."""
    x, t = _data()
    x[:10] = 5.0
    fed = _fed()
    res = fed.run(x, t)
    assert set(vars(fed)) == set(fed.get_params()) | {"release_"}
    assert not hasattr(fed, "client_log_")
    assert "n_clipped" not in res.to_dict() and "n_clipped" not in ClientReports.__annotations__


@pytest.mark.parametrize("kw,exc,match", [
    (dict(epsilon=0.0), ValueError, "epsilon must be a finite number > 0"),
    (dict(epsilon=-1.0), ValueError, "epsilon must be a finite number > 0"),
    (dict(estimand="ATT"), ValueError, "estimand must be one of"),
    (dict(ci_form="bootstrap"), ValueError, "ci_form must be one of"),
    (dict(secagg="trusted"), ValueError, "secagg must be one of"),
    (dict(variance_mode="exact"), ValueError, "variance_mode must be one of"),
    (dict(mean_share=1.5), ValueError, "mean_share must be in"),
    (dict(dropout=1.0), ValueError, "dropout must be a fraction"),
])
def test_bad_options_refused_before_noise(kw, exc, match):
    x, t = _data()
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    with pytest.raises(exc, match=match):
        _fed(noise_seed=rng, **kw).run(x, t, evaluation=True)
    assert rng.bit_generator.state == state  # nothing drawn


def test_group_with_fewer_than_two_clients_refused():
    x, t = _data(20)
    t[:] = False
    t[0] = True
    with pytest.raises(ValueError, match="n_treated must be an integer >= 2"):
        _fed().run(x, t)


def test_labels_checked():
    x, t = _data(20)
    with pytest.raises(ValueError, match="treated must hold group labels"):
        _fed().run(x, np.arange(20))
    with pytest.raises(ValueError, match="treated has 19 labels"):
        _fed().run(x, t[:19])


def test_ci_forms_by_hand():
    z = norm.ppf(0.95)
    s2t, s2c, nt, nc = 0.04, 0.01, 400, 600
    assert sampling_variance(s2t, s2c, nt, nc, "PATE") == pytest.approx(0.04 / 400 + 0.01 / 600)
    sate = 600 * 400 / 1000 * (0.2 / 400 + 0.1 / 600) ** 2
    assert sampling_variance(s2t, s2c, nt, nc, "SATE") == pytest.approx(sate)
    x, t = _data()
    plan = plan_release(500, 500, R=1.0, epsilon=1.0, delta=1e-6, m1=256, m2=256)
    th = plan.calibration.theta1[0]
    vdp = 2 / (4 * 500 * 256 * th**2)
    q = interval(0.0, 0.3, 0.01, 0.02, plan, (500, 500), estimand="PATE",
                 ci_form="quadrature", alpha=0.1)
    assert q.ci[1] - q.ate == pytest.approx(z * math.sqrt(0.03 / 500 + vdp))
    s = interval(0.0, 0.3, 0.01, 0.02, plan, (500, 500), estimand="PATE",
                 ci_form="sum_sd", alpha=0.1)
    assert s.ci[1] - s.ate == pytest.approx(z * (math.sqrt(0.03 / 500) + math.sqrt(vdp)))
    assert q.z_stat == pytest.approx(0.3 / math.sqrt(0.03 / 500 + vdp))


def test_nonasymptotic_by_hand():
    beta, R, n, m1, m2, t1, t2 = 0.1, 1.0, 1000, 256, 256, 0.07, 0.007
    s2t = s2c = 0.01
    L, l1 = math.log(1200 / beta), math.log(2.01 / beta)
    A = L / (4 * m2 * n * t2**2)
    B = L / (2 * m1 * n * t1**2)
    sig2 = 2 * (s2t + s2c) / n
    paper = (math.sqrt(2 * sig2 * l1) + 56 * L / (3 * (n - 1)) + math.sqrt(B)
             + math.sqrt(4 * l1 / n) * min(A**0.25 + B**0.25,
                                           (math.sqrt(A) + math.sqrt(B)) / math.sqrt(0.02)))
    got = nonasymptotic_halfwidth("paper", "PATE", R, 500, 500, m1, (t1, t1), s2t, s2c, beta,
                                  m2, (t2, t2))
    assert got == pytest.approx(paper, rel=1e-12)
    hoeff = (math.sqrt(2 * (2 / 500) * math.log(4 / beta))
             + math.sqrt(2 / (2 * 500 * m1 * t1**2) * math.log(4 / beta)))
    assert nonasymptotic_halfwidth("hoeffding", "PATE", R, 500, 500, m1, (t1, t1), s2t, s2c,
                                   beta) == pytest.approx(hoeff, rel=1e-12)
    corrected = nonasymptotic_halfwidth("corrected", "PATE", R, 500, 500, m1, (t1, t1), s2t,
                                        s2c, beta, m2, (t2, t2))
    assert corrected > paper  # the fixes widen the bound
    with pytest.raises(ValueError, match="assumes n_c = n_t"):
        nonasymptotic_halfwidth("paper", "PATE", R, 400, 600, m1, (t1, t1), s2t, s2c, beta)
