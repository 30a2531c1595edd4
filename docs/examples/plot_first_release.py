"""
A first private release
=======================

Experiment A of Lebeda, Even, Bellet and Josse (2025) at n = 5,000: one covariate, a binary
treatment whose propensity depends on it (so the design is observational), outcomes in
[-1, 1] and a true ATE of 0.1. The release goes through a temporary ledger: the cap is set
explicitly, the charge is reserved before the data are read and committed before the result is
returned.
"""

# %%
import tempfile

import matplotlib.pyplot as plt

import dpcausal
from dpcausal.datasets import make_experiment_a

X, A, Y, true_ate = make_experiment_a(n=5_000, random_state=1)
ledger = dpcausal.Ledger(f"sqlite:///{tempfile.mkdtemp()}/ledger.db", create=True)
ledger.set_budget("experiment-a", zeta=2.0)  # caps are explicit, never assumed
estimator = dpcausal.PrivateATE(outcome_bounds=(-1, 1), zeta=1.0)
release = ledger.fit("experiment-a", estimator, X, A, Y)
print(release.summary())
print(f"true ATE of the generator: {true_ate:.3f}")

# %%
# The release draws its own figure: the estimate, its CI (which covers the sampling error and
# the privacy noise) and the share of the CI's width due to the noise.
release.plot()
plt.show()

# %%
# The ledger now holds the committed charge; a second release at ζ = 1 would compose to
# ζ = √2 ≈ 1.41 ≤ 2 and be admitted, a third would be refused before any noise is drawn.
print(ledger.history("experiment-a")[["status", "mechanism", "unit", "zeta", "epsilon"]])
