"""The seed paper's comparators as our own implementations (issue 33 item 3; spec
small_n_estimators.md §4): :mod:`.lpgm19` (IPW with a DP-ERM logistic propensity, Lee et al.
2019) and :mod:`.gr25` (per-split IPW aggregated as a meta-analysis, Guha & Reiter 2025).

Each module offers the data-free ``charge_of(zeta, shares) -> PrivacyCharge``,
``expected_halfwidth(n, d, *, zeta, outcome_bounds, alpha=0.05, outcome_sd=None, **public) ->
float`` from public facts (the planner's entry), ``valid_for(*, design, binary_outcome) ->
bool`` and its ``ASSUMPTION``; its noise-drawing body ``_release(X, A, Y, *, zeta,
outcome_bounds, ..., rng=None, evaluation=False) -> ComparatorRelease`` is private (it draws
uncharged) and no public call reaches it: the comparators are not ``PrivateATE(estimator=...)``
values; the reproduction runs them in evaluation mode.
:data:`COMPARATORS` maps each name to its module.
"""

from __future__ import annotations

from dpcausal.ate.comparators import gr25, lpgm19
from dpcausal.ate.comparators._mechanism import ComparatorRelease

COMPARATORS = {lpgm19.NAME: lpgm19, gr25.NAME: gr25}

__all__ = ["COMPARATORS", "ComparatorRelease", "gr25", "lpgm19"]
