"""
The three other mechanisms, one small release each
==================================================

Small versions of the experiments of the three other papers this project implements. Each
mechanism protects a different **unit** (:doc:`/privacy`), and each returns the same
:class:`dpcausal.Release`, which prints, plots and pools alike.
"""

# %%
# Cluster-DP: label privacy in a clustered experiment
# ---------------------------------------------------
# Javanmard et al.: the outcomes (labels) are privatized on a public, finite response space
# with per-cluster priors; cluster and arm are public. Three clusters of 300, 600 and 900
# units, treatment assigned at random within each cluster.
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dpcausal.cluster_dp import ClusterDP, ResponseSpace
from dpcausal.cluster_dp.data import assign_balanced, make_gmm

pop = make_gmm(7, sizes=(300, 600, 900))
z = assign_balanced(np.random.default_rng(8), pop.cidx)[0]
clustered = pd.DataFrame({"cluster": pop.cidx, "treatment": z,
                          "outcome": np.where(z == 1, pop.y1, pop.y0).astype(int)})
cluster_release = ClusterDP(ResponseSpace(np.arange(-5, 7)), epsilon=3.0).fit(
    clustered, cluster="cluster", treatment="treatment", outcome="outcome")
print(cluster_release.summary())
print(cluster_release.privacy.describe())

# %%
# User-level DP: every record of a person, clipped together
# ---------------------------------------------------------
# Rameshwar and Tandon's Clip-User: people seen repeatedly across (stratum, arm) cells; the
# unit is the person, so all their records move together in a neighbouring data set.
from dpcausal.user_level import UserLevelATE, make_user_level_panel  # noqa: E402

panel = make_user_level_panel(n_units=3_000, n_strata=5, cells_per_unit=3.0, seed=3)
user_release = UserLevelATE(outcome_bounds=(0, 65), epsilon=1.0).fit(
    panel, unit="unit_id", stratum="stratum", treatment="arm", outcome="y", order="ts")
print(user_release.summary())
print(user_release.privacy.describe())

# %%
# Federated: each client holds one record
# ---------------------------------------
# Chen et al.: clients encode their outcome with the Poisson binomial mechanism and a
# (simulated) secure aggregation sums the messages; the server only sees the noisy sums.
from dpcausal.federated import FederatedATE  # noqa: E402

rng = np.random.default_rng(5)
treated = rng.permutation(np.arange(4_000) < 2_000).astype(int)
clients = pd.DataFrame({"treatment": treated,
                        "outcome": np.clip(0.3 * treated + rng.normal(0, 0.5, 4_000), -1, 1)})
federated_release = FederatedATE(R=1.0, epsilon=1.0, delta=1e-5).fit(
    clients, treatment="treatment", outcome="outcome")
print(federated_release.summary())
print(federated_release.privacy.describe())

# %%
# Each release draws its own figure.
fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
for release, ax in zip((cluster_release, user_release, federated_release), axes, strict=True):
    release.plot(ax=ax)
fig.tight_layout()
plt.show()
