"""The G-formula releases its point estimate only (issue 26 §6): its V_hat omits the outcome
models' estimation error, so a G CI under-covers once the noise stops dominating. A G CI is
refused before anything is drawn; ci_share="auto" gives 0 for G; the planner shows no
half-width for G."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpcausal.ate.release as release_mod
from dpcausal import PrivateATE
from dpcausal.datasets import make_experiment_a


def _no_draw(*args, **kwargs):
    raise AssertionError("noise was drawn")


def test_a_g_ci_is_refused_before_any_draw(monkeypatch):
    monkeypatch.setattr(release_mod, "gaussian_mechanism", _no_draw)
    X, A, Y, _ = make_experiment_a(2000, random_state=1)
    with pytest.raises(ValueError, match="estimator='g' releases the point estimate only"):
        PrivateATE(estimator="g", ci_share=0.1, outcome_bounds=(-1, 1)).fit(X, A, Y)


def test_auto_gives_g_a_point_estimate_and_aipw_a_ci():
    X, A, Y, _ = make_experiment_a(2000, random_state=2)
    g = PrivateATE(estimator="g", outcome_bounds=(-1, 1), zeta=5.0).fit(X, A, Y)
    assert g.ci is None and g.params["ci_share"] == 0 and math.isfinite(g.ate)
    assert g.privacy.zeta == pytest.approx(5.0)   # the whole budget goes to the estimate
    aipw = PrivateATE(estimator="aipw", outcome_bounds=(-1, 1), zeta=5.0).fit(X, A, Y)
    assert aipw.ci is not None and aipw.params["ci_share"] > 0


def test_the_plan_shows_no_half_width_for_g():
    table = PrivateATE(outcome_bounds=(-1, 1)).plan(5000, 1, estimators=["g", "aipw"])
    g = table[table["estimator"] == "g"]
    assert (g["ci_share"] == 0).all() and g["halfwidth"].isna().all()
    assert table.loc[table["recommended"], "estimator"].item() == "aipw"
    assert np.isfinite(table.loc[table["estimator"] == "aipw", "halfwidth"]).all()
