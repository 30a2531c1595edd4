"""Data generators (spec §5.1 substitute, §5.2 synthetic design)."""

from __future__ import annotations

import numpy as np
import pytest

from dpcausal.user_level import make_itms_like, make_user_level_panel, make_user_level_synthetic

from ._reference import array_digest, load_oracle

ORACLE = load_oracle()


def test_synthetic_design_laws():
    A = make_user_level_synthetic(0, G=12, q=0.01, gamma=3)
    assert A.shape == (4095, 12) and A.min() >= 0
    occ = (A > 0).sum(1)
    for user in (1, 2, 3, 4, 7, 2048, 4095):  # user l occupies G - floor(log2 l) cells
        assert occ[user - 1] == 12 - int(np.floor(np.log2(user)))
    assert occ.max() == 12 and (A.sum(0) > 0).all()


@pytest.mark.parametrize("case", ORACLE["synth"], ids=lambda c: f"seed{c['seed']}")
def test_synthetic_matches_the_spec_rng_order(case):
    A = make_user_level_synthetic(case["seed"], gamma=case["gamma"])
    assert array_digest(A) == case["A"]


def test_itms_like_matches_spec_proposal():
    for case in ORACLE["itms_like"]:
        A = make_itms_like(case["seed"])
        assert A.shape == (223, 50) and (A > 0).sum(1).max() == 11 and (A.sum(0) > 0).all()
        assert array_digest(A) == case["A"]


def test_panel_records_are_bounded_and_complete():
    df = make_user_level_panel(n_units=300, n_strata=5, seed=2)
    assert list(df.columns) == ["unit_id", "stratum", "arm", "ts", "y"]
    assert df["y"].between(0, 65).all() and set(df["arm"]) == {0, 1}
    assert df.groupby("unit_id")[["stratum", "arm"]].value_counts().size > 300


@pytest.mark.parametrize("kw,match", [(dict(G=0), "G must"), (dict(q=0.0), "q must"),
                                      (dict(gamma=-1), "gamma must")])
def test_synthetic_refuses_bad_parameters(kw, match):
    with pytest.raises(ValueError, match=match):
        make_user_level_synthetic(0, **kw)
