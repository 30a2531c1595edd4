"""Meta-analysis of private ATE releases: pool several studies' released (ATE, variance) pairs.

Every study publishes a private ATE and a private variance (the core release of spec
dp_ate_ensemble.md §2.7). :func:`combine` reads only those released numbers, so it is
post-processing and costs no privacy (spec §2.6); the result says so in ``privacy`` and reports
each study's zeta and, for studies the analyst declares to share people, their composed exposure.

The package reads one way: :mod:`~dpcausal.meta.studies` turns the releases into one validated
row per study, :mod:`~dpcausal.meta.pooling` pools releases of one dataset and then the studies
with the weights and critical values of :mod:`~dpcausal.meta.weighting`,
:mod:`~dpcausal.meta.privacy` states the privacy position, and :mod:`~dpcausal.meta.result`
holds the :class:`MetaResult` that prints and plots.

References
----------
Lebeda, Even, Bellet, Josse (2025), "Model agnostic differentially private causal inference", §5
(Proposition 1); spec dp_ate_ensemble.md §4 and erratum §8 item 7.
DerSimonian, Laird (1986), "Meta-analysis in clinical trials", Controlled Clinical Trials 7.
"""

from dpcausal.meta.pooling import combine
from dpcausal.meta.result import MODELS, MetaResult
from dpcausal.meta.weighting import CRITICALS, PAPER_P1, WEIGHTINGS

__all__ = ["combine", "MetaResult", "MODELS", "WEIGHTINGS", "CRITICALS", "PAPER_P1"]
