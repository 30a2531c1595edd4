"""What the federated release keeps private: a seed never drives a release's noise; the
secure-aggregation masks come from the clients' secret keys, apart from the noise; no count of
clipped outcomes; clear refusals before anything is drawn. Each test failed on the code before
its fix."""

import numpy as np
import pandas as pd
import pytest

from dpcausal.federated import FederatedATE, mean_noise_bound, protocol, secagg


def _data(n=1000, seed=0):
    rng = np.random.default_rng(seed)
    t = np.zeros(n, bool)
    t[rng.permutation(n)[: n // 2]] = True
    return np.where(t, rng.normal(0.1, 0.1, n), rng.normal(-0.1, 0.1, n)), t


def _fed(**kw):
    args = dict(R=1.0, epsilon=1.0, delta=1e-6, m1=256, m2=256, random_state=0)
    args.update(kw)
    return FederatedATE(**args)


@pytest.fixture
def no_draw(monkeypatch):
    """Makes any PBM report a test failure: a refusal must come before the first draw."""
    def drew(*args, **kwargs):
        raise AssertionError("a PBM report was drawn before the refusal")

    monkeypatch.setattr(protocol, "pbm_encode", drew)
    monkeypatch.setattr(protocol, "pbm2_encode", drew)


@pytest.fixture
def server_view(monkeypatch):
    """Records what the server of the simulation receives in each secure sum: the clients'
    individual masked messages, with the public session id, aggregation id and modulus."""
    calls = []
    real = secagg.client_messages

    def spy(z, modulus, session, aggregation_id, degree=None, **kw):
        y = real(z, modulus, session, aggregation_id, degree, **kw)
        calls.append({"z": np.array(z), "y": y, "modulus": modulus, "session": session,
                      "aggregation_id": aggregation_id, "degree": degree})
        return y

    monkeypatch.setattr(secagg, "client_messages", spy)
    return calls, real


# -- a seed never drives the noise of a release ----------------------------------------
def test_two_releases_with_the_same_random_state_differ():
    """Same data, same integer random_state: the releases draw fresh noise (OS entropy). Before
    the fix they were identical, so differencing releases on neighbouring data gave the exact
    change.

    The PBM sums are integers, so two fresh releases can coincide: a sum of sd s (in report
    units) repeats with probability about 1/(2 sqrt(pi) s). For the treated sum here (500
    clients, m = 256: s = 179) that is 1.6e-3; measured over 2,000 releases, 1.6e-3 for
    mean_treated and 8.7e-4 for the ATE, so comparing two releases failed about 1 run in 300.
    Three fresh releases all coincide with probability about 1/(2 pi sqrt(3) s^2) = 3e-6;
    seeded releases (the old bug) coincide always."""
    x, t = _data()
    fresh = [_fed(random_state=0).run(x, t) for _ in range(3)]
    assert len({r.ate for r in fresh}) > 1 and len({r.mean_treated for r in fresh}) > 1
    shared = [_fed(random_state=np.random.default_rng(5)).run(x, t) for _ in range(3)]
    assert len({r.ate for r in shared}) > 1


# -- masks from the clients' secret keys, session apart from the noise ------------------
def test_server_knowing_the_session_id_cannot_unmask_any_report(server_view):
    """The attacker holds every individual masked message, the session id, the aggregation ids
    and the client indices, and recomputes the masks from them. Before the fix this recovered
    every one of the 500 reports of each aggregation; now it does no better than chance."""
    calls, real = server_view
    x, t = _data()
    _fed(secagg="pairwise").run(x, t)
    assert len(calls) == 4  # {first, second moment} x {control, treated}
    for call in calls:
        z, M = call["z"], call["modulus"]
        masks = real(np.zeros_like(z), M, call["session"], call["aggregation_id"],
                     call["degree"])
        recovered = (call["y"].astype(np.int64) - masks.astype(np.int64)) % M
        assert np.mean(recovered == z) < 0.02  # chance level 1/M = 2^-17


def test_session_id_is_not_drawn_from_the_noise_generator(server_view):
    """Before the fix the session id was the first draw of the (seeded) noise generator, so a
    seed gave the session and with it every mask. Now two evaluation runs with the same seed
    draw the same noise (same estimate) but different sessions."""
    calls, _ = server_view
    x, t = _data()
    a = _fed(random_state=0).run(x, t, evaluation=True)
    b = _fed(random_state=0).run(x, t, evaluation=True)
    sessions = {c["session"] for c in calls}
    assert a.ate == b.ate and len(sessions) == 2
    assert all(isinstance(s, str) and len(s) == 32 for s in sessions)  # 128 bits of entropy


def test_estimator_keeps_no_key_material():
    """The clients' keys live inside one secure sum only: nothing on the estimator or in the
    release beyond its parameters and the released figures."""
    x, t = _data()
    fed = _fed()
    res = fed.run(x, t)
    assert set(vars(fed)) == set(fed.get_params()) | {"release_"}
    assert not any("key" in k or "session" in k for k in res.to_dict())


def test_results_are_labelled_as_a_simulation_with_trust_assumptions():
    x, t = _data()
    res = _fed().run(x, t)
    label = res.secure_aggregation
    assert label.startswith("simulation of secure aggregation")
    for assumption in ("honest-but-curious server", "colluding with no client",
                       "simulated key agreement", "oracle"):
        assert assumption in label
    assert res.privacy.detail["secure_aggregation"] == label
    assert res.to_dict()["secure_aggregation"] == label
    text = str(res)
    assert "secure aggregation  simulation of secure aggregation" in text
    assert "Secure aggregation: simulation" in res._repr_html_()
    plain = _fed(secagg="none").run(x, t)
    assert "trusted aggregator" in plain.secure_aggregation and "trusted aggregator" in str(plain)


# -- no clipped count ------------------------------------------------------------------------------
def test_no_clipped_count_on_the_server_side_object():
    x, t = _data()
    x[:10] = 5.0
    fed = _fed()
    res = fed.run(x, t)
    assert not hasattr(fed, "client_log_")
    assert "n_clipped" not in repr(vars(fed)) and "n_clipped" not in res.to_json()


# -- clear ValueErrors before anything is drawn ----------------------------------------
@pytest.mark.parametrize("R", [1e300, 1e200, 1e-160])
def test_float_range_of_R_refused_before_any_draw(no_draw, R):
    x, t = _data()
    with pytest.raises(ValueError, match=r"R=1e[+-]\d+ is outside what this release can "
                                         r"compute in float64"):
        _fed(R=R).run(x, t)


def test_moderate_R_still_releases():
    x, t = _data()
    res = _fed(R=1e12).run(x * 1e11, t)
    assert np.isfinite(res.ate) and res.variance_dp > 0


@pytest.mark.parametrize("theta", [-0.1, 0.0, 0.3, float("nan"), True])
def test_mean_noise_bound_refuses_theta_outside_its_range(theta):
    with pytest.raises(ValueError, match=r"theta must be in \(0, 1/4\]"):
        mean_noise_bound(500, 256, theta, 1.0)


@pytest.mark.parametrize("args,match", [
    ((0, 256, 0.1, 1.0), "n_g must be an integer >= 1"),
    ((500, 2.5, 0.1, 1.0), "m must be an integer >= 1"),
    ((500, 256, 0.1, -1.0), "R must be a finite outcome bound > 0"),
])
def test_mean_noise_bound_refuses_bad_counts_and_bound(args, match):
    with pytest.raises(ValueError, match=match):
        mean_noise_bound(*args)


def test_numeric_strings_are_refused_not_coerced(no_draw):
    x, t = _data()
    with pytest.raises(ValueError, match="outcomes must have a numeric .* dtype, got <U"):
        _fed().run(x.astype(str), t)
    df = pd.DataFrame({"arm": t.astype(int), "y": [str(v) for v in x]})
    with pytest.raises(ValueError, match="outcomes must have a numeric .* dtype, got object"):
        _fed().fit(df, treatment="arm", outcome="y")
    df = pd.DataFrame({"arm": t.astype(int).astype(str), "y": x})
    with pytest.raises(ValueError, match="treated labels must have a numeric .* dtype"):
        _fed().fit(df, treatment="arm", outcome="y")


@pytest.mark.parametrize("kw,match", [
    (dict(R=True), "R must be a finite outcome bound"),
    (dict(epsilon=True), "epsilon must be a finite number > 0"),
])
def test_bools_are_not_numbers_for_parameters(no_draw, kw, match):
    x, t = _data()
    with pytest.raises(ValueError, match=match):
        _fed(**kw).run(x, t)
