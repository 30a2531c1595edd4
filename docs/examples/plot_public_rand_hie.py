"""
A randomized experiment on public data: the RAND Health Insurance Experiment
============================================================================

The RAND Health Insurance Experiment (1974-1982) assigned families at random to insurance
plans. Its public extract, shipped with statsmodels (``statsmodels.datasets.randhie``), has
20,190 person-years: ``idp`` = 1 for the individual-deductible plan, ``mdvis`` the number of
outpatient visits to a doctor that year, and health covariates.

Two public facts decide the release, both declared before anything is read:

- the design is randomized (``design="randomized"``), so the difference in arm means
  (``dim``) needs no model assumption, and its noise is O(1/n);
- the outcome's range, ``(0, 30)`` visits a year: a choice made from what a visit count can
  plausibly be, not from the data (a larger count is clipped to 30).

One caveat that the guarantee makes plain: a row here is a person-year, and the core
release protects one *row*. To protect a person across all their years, the unit must be the
person (:doc:`/guide/mechanisms`, the user-level mechanism).
"""

# %%
import matplotlib.pyplot as plt
import statsmodels.api as sm

import dpcausal

hie = sm.datasets.randhie.load_pandas().data
covariates = ["physlm", "disea", "hlthg", "hlthf", "hlthp"]
estimator = dpcausal.PrivateATE(
    outcome_bounds=(0, 30), zeta=1.0, design="randomized",
    covariate_bounds={"physlm": (0, 1), "disea": (0, 60), "hlthg": (0, 1), "hlthf": (0, 1),
                      "hlthp": (0, 1)})

# %%
# ``compare_estimators`` ranks the estimators by their expected half-width from public facts
# only (n, d, the bounds, the design); ``auto`` takes the narrowest.
comparison = estimator.compare_estimators(n=len(hie), d=len(covariates))
print(comparison[["estimator", "halfwidth", "ratio", "chosen"]].to_string(index=False))

# %%
release = estimator.fit(hie, treatment="idp", outcome="mdvis", covariates=covariates)
print(release.summary())
print(release.privacy.describe())

# %%
# The non-private difference in means, for comparison (never part of a release).
naive = hie.groupby("idp")["mdvis"].mean()
print(f"non-private difference in means: {naive[1] - naive[0]:.3f} visits")
release.plot()
plt.show()
