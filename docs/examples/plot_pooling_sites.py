"""
Pooling two sites' releases (experiment D)
==========================================

Two sites each release a private ATE on their own data (experiment D of Lebeda et al. 2025,
n = 20,000 each, charged to their own dataset), and an analyst pools the two released
estimates by inverse-variance weighting. Pooling reads released numbers only, so it costs no
privacy budget (spec §4).
"""

# %%
import tempfile

import matplotlib.pyplot as plt

import dpcausal
from dpcausal import meta
from dpcausal.datasets import make_experiment_d

ledger = dpcausal.Ledger(f"sqlite:///{tempfile.mkdtemp()}/ledger.db", create=True)
releases = []
for site, seed in (("site-A", 1), ("site-B", 2)):
    X, A, Y, truth = make_experiment_d(n=20_000, random_state=seed)
    ledger.set_budget(site, zeta=1.0)
    estimator = dpcausal.PrivateATE(outcome_bounds=(-1, 1), zeta=1.0)
    releases.append(ledger.fit(site, estimator, X, A, Y))

pooled = meta.combine(releases)
print(pooled)
print(f"true ATE of the generator: {truth:.3f}")

# %%
# The forest plot: each site's release and the pooled estimate.
pooled.plot()
plt.show()
