"""dpcausal: differentially private causal-effect releases.

The central estimator is :class:`PrivateATE` (Lebeda et al. 2025); further mechanisms live in the
subpackages ``cluster_dp``, ``user_level`` and ``federated``; ``meta`` pools released estimates.
"""

from dpcausal.estimator import PrivateATE
from dpcausal.release import ATERelease

__all__ = ["PrivateATE", "ATERelease"]
