"""Fixtures of the Cluster-DP tests."""

import numpy as np
import pandas as pd
import pytest

from dpcausal.cluster_dp.data import assign_balanced, draw_subpopulation, make_gmm


@pytest.fixture(scope="module")
def df():
    """One balanced assignment of the one-dimensional GMM population (3,500 units in clusters
    "a", "b", "c"): cluster ``c``, 0/1 treatment ``z``, observed outcome ``y``."""
    rng = np.random.default_rng(0)
    sub = draw_subpopulation(rng, make_gmm(1))
    z = assign_balanced(rng, sub.cidx)[0]
    return pd.DataFrame(
        {"c": np.array(["a", "b", "c"])[sub.cidx], "z": z, "y": np.where(z == 1, sub.y1, sub.y0)}
    )
