"""Small valid inputs of each mechanism, for the tests that run every mechanism (the contract
suite, the charged public draws)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpcausal.cluster_dp.data import assign_balanced, draw_subpopulation, make_gmm
from dpcausal.user_level import make_user_level_panel


def ate_frame() -> pd.DataFrame:
    """400 rows: covariates ``x1``, ``x2``, 0/1 treatment ``a``, outcome ``y`` in [-5, 5]."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 2))
    a = rng.integers(0, 2, 400)
    return pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "a": a,
                         "y": np.clip(x[:, 0] + a + rng.normal(size=400), -5, 5)})


def cluster_frame() -> pd.DataFrame:
    """3,500 units of the 1-d GMM population: cluster ``c``, treatment ``z``, outcome ``y``."""
    rng = np.random.default_rng(1)
    sub = draw_subpopulation(rng, make_gmm(1))
    z = assign_balanced(rng, sub.cidx)[0]
    return pd.DataFrame({"c": np.array(["a", "b", "c"])[sub.cidx], "z": z,
                         "y": np.where(z == 1, sub.y1, sub.y0)})


def federated_frame() -> pd.DataFrame:
    """600 clients, 200 treated: group label ``t``, outcome ``y`` within [-1, 1]."""
    rng = np.random.default_rng(2)
    t = np.zeros(600, int)
    t[rng.permutation(600)[:200]] = 1
    return pd.DataFrame({"t": t, "y": np.where(t == 1, 0.3, -0.1) + rng.normal(0, 0.2, 600)})


def user_panel() -> pd.DataFrame:
    """300 users' records in 3 strata: ``user``, ``s``, ``arm``, ``ts``, ``y`` in [0, 65]."""
    df = make_user_level_panel(n_units=300, n_strata=3, cells_per_unit=3, seed=5)
    return df.rename(columns={"unit_id": "user", "stratum": "s"})
