"""Report verdicts (spec cluster_dp.md §4.9) on hand-made frames, and the flow's plan/plots."""

import numpy as np
import pandas as pd
import pytest

from reproduce.cluster_dp.report import claims, render, targets


def test_all_deterministic_targets_reproduce():
    t = targets()
    assert [c.id for c in t] == ["T1", "T2", "T3", "T4", "T5", "T6", "T7", "T8", "T10"]
    assert all(c.reproduced for c in t), [c for c in t if not c.reproduced]


def _frames(cluster_better: bool) -> dict[str, pd.DataFrame]:
    """Minimal experiment frames where every claim holds (cluster_better) or fails."""
    f = 0.5 if cluster_better else 2.0
    gk = [0.1, 1.0]
    e1a = pd.DataFrame(
        [
            (0, m, g, 0.9, v, 0.001)
            for g in gk
            for m, v in (
                ("cluster", 10 * f if g == 0.1 else 50),
                ("cluster_free", 30),
                ("uniform_stratified", 20),
                ("uniform_unstratified", 20),
            )
        ],
        columns=["subpop", "mechanism", "gamma_k", "lam", "var", "var_nodp"],
    )
    e1b = pd.DataFrame(
        [
            (0, m, eps, 10.0, 0.1, 0.9, eps, v, True)
            for eps in (1.0, 2.0)
            for m, v in (
                ("cluster", 1 * f),
                ("cluster_free", 1.5),
                ("uniform_stratified", 2),
                ("uniform_unstratified", 2),
            )
        ],
        columns=["subpop", "mechanism", "eps", "sigma", "gamma_k", "lam", "eps_t", "var", "best"],
    )
    betas = np.arange(5.0)
    e2 = pd.DataFrame(
        [
            (
                1,
                b,
                lam,
                1,
                1,
                (1 - 0.1 * b * (2 if lam == 0.5 else 1)) if cluster_better else 1 + 0.01 * b,
                0.1,
                0.01,
            )
            for b in betas
            for lam in (0.5, 0.8)
        ],
        columns=[
            "seed",
            "beta",
            "lam",
            "var_cluster",
            "var_cluster_free",
            "ratio",
            "phi_sum",
            "var_nodp",
        ],
    )
    e3 = pd.DataFrame(
        [
            (lam, 3.0, m, v, 1e-4, 1.0)
            for lam in (0.5, 0.8)
            for m, v in (("cluster", 1e-3 * f), ("cluster_free", 1e-3))
        ],
        columns=["lam", "eps_paper", "mechanism", "var", "var_nodp", "mean"],
    )
    rng = np.random.default_rng(0)
    err = rng.normal(0, 0.1, 300) if cluster_better else rng.exponential(0.3, 300)
    e4 = pd.DataFrame({"err": err})
    e5 = pd.DataFrame(
        {
            "beta": betas,
            "gap": 0.1 if cluster_better else 50.0,
            "gap_se": 0.001,
            "first_term": 0.05,
            "bound": 33.0,
        }
    )
    e6 = pd.DataFrame(
        [
            (0, 1.0, m, b)
            for m, b in (
                ("cluster_dp", 0.001 * f * f),
                ("noisy_ht", 0.002),
                ("noisy_histogram", 0.003),
            )
        ],
        columns=["dp_seed", "eps", "mechanism", "bias"],
    )
    return {
        "exp1a": e1a,
        "exp1b": e1b,
        "exp2": e2,
        "exp3": e3,
        "exp4": e4,
        "exp5": e5,
        "exp6": e6,
        "exp7": e4,
    }


@pytest.mark.parametrize("holds", [True, False])
def test_claim_verdicts_follow_the_data(holds):
    q = claims(_frames(holds))
    assert [c.id for c in q] == [f"Q{i}" for i in range(1, 8)]
    assert [c.reproduced for c in q] == [holds] * 7


def test_render_contains_verdicts_and_figures():
    md = render(
        _frames(False), {"fig5": "figures/cluster_dp_fig5.png"}, {"reps": 3}, {"exp1a": 1.0}
    )
    assert "9 of 9 reproduced" in md and "0 of 7 reproduced" in md
    assert "![fig5](figures/cluster_dp_fig5.png)" in md and "NOT reproduced" in md


def test_flow_plan_and_plots(tmp_path):
    pytest.importorskip("prefect")
    from flows.reproduce_cluster_dp import experiment_plan
    from tasks.reproduce_cluster_dp import draw_figures

    assert experiment_plan(None)["exp4"] == {"reps": 500}
    assert experiment_plan(200)["exp1a"] == {"reps": 200, "n_subpops": 2}
    with pytest.raises(ValueError, match="reps must be None or an integer >= 2, got 1"):
        experiment_plan(1)
    frames = _frames(True)
    frames["exp5"] = frames["exp5"].assign(gap=0.1)
    paths = draw_figures.fn(frames, str(tmp_path))
    assert len(paths) == 9
    for p in paths.values():
        with open(p, "rb") as fh:
            assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
