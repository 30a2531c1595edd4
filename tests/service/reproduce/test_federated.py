"""Recipe-R reproduction pieces: spec §6.2 predicted widths, curves, report marks."""

import numpy as np
import pytest

from reproduce.federated.experiments import make_federated_design, simulate_table, width_curves
from reproduce.federated.report import render

# spec §6.3 "pred" rows for T3 (recipe R mean widths)
T3_PRED = {"CG": (0.7712, 0.1992, 0.1177, 0.0843, 0.0661, 0.0545, 0.0465),
           "PBM256": (0.7714, 0.1997, 0.1186, 0.0855, 0.0675, 0.0562, 0.0484),
           "PBM1024": (0.7713, 0.1993, 0.1180, 0.0846, 0.0664, 0.0549, 0.0470)}


def test_t3_widths_match_spec_prediction():
    df = simulate_table("T3", 40, np.random.default_rng(0))
    for meth, pred in T3_PRED.items():
        got = df[df["method"] == meth]["width"].to_numpy()
        np.testing.assert_allclose(got, pred, atol=1.5e-4)
    np_row = df[df["method"] == "NP"].iloc[0]
    assert np_row["width"] == pytest.approx(2.08e-3, abs=5e-5)
    assert df[df["method"] != "NP"]["within_tol"].all()


def test_designs():
    rng = np.random.default_rng(0)
    y0, y1 = make_federated_design("constant", 1000, 3, rng)
    np.testing.assert_allclose(y1 - y0, 0.2)
    assert y0.min() >= -1 and y0.max() <= 0.8
    with pytest.raises(ValueError, match="design must be"):
        make_federated_design("binary", 10, 1, rng)


def test_width_curves_order():
    df = width_curves(500, 1e-4, epsilons=(0.4, 1.0)).set_index(["epsilon", "mechanism"])
    w = df["width"]
    for e in (0.4, 1.0):
        assert w[(e, "PBM m=256")] > w[(e, "PBM m=2048")] > w[(e, "Central Gaussian (per group)")]
        assert w[(e, "Central Gaussian (difference)")] < w[(e, "Central Gaussian (per group)")]
        assert w[(e, "non-private")] < w[(e, "Central Gaussian (difference)")]


def test_report_marks_cells_outside_tolerance():
    df = simulate_table("T4", 10, np.random.default_rng(1))
    bad = df.copy()
    bad.loc[bad["method"] == "CG", "within_tol"] = False
    text = render({"T4": bad}, "figures/f.png", {"reps": 10}, {"T4": 0.1})
    assert "✗" in text and "Table 4" in text and "![width vs epsilon](figures/f.png)" in text


def test_flow_repetition_plan():
    from flows.reproduce_federated import table_reps

    assert table_reps(None) == {"T2": 4000, "T3": 4000, "T4": 4000, "T6": 1000, "T7": 1000}
    assert set(table_reps(50).values()) == {50}
    with pytest.raises(ValueError, match="reps must be None or an integer >= 2"):
        table_reps(1)
