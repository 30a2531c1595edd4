"""The core release: the model-agnostic DP ATE ensemble of Lebeda, Even, Bellet, Josse (2025),
arXiv:2505.19589 (spec ``dp_ate_ensemble.md``, decisions in ``dpcausal/SPECS.md``).

Public API: :class:`PrivateATE` (``fit`` -> :class:`ATERelease`; its public facts are
:class:`ATEFacts`). The modules hold the steps of spec §2.2 and §2.7: ``folds`` (step 1),
``nuisance`` and ``batched_fit`` (step 2, the fold fits), ``aggregation`` and ``linear_collapse``
(step 3, eq. 5), ``blocks`` (§2.5b), ``scores`` (step 4, eq. 6), ``sensitivity`` (§2.4-2.5,
Theorem 1), ``release`` and ``ci`` (step 5 and §3); ``planner`` plans a release from public
parameters only and ``partitioned`` runs the phases on data split over workers.
"""

from dpcausal.ate.estimator import ATEFacts, PrivateATE
from dpcausal.ate.release import ATERelease

__all__ = ["ATEFacts", "ATERelease", "PrivateATE"]
