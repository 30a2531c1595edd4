"""dpcausal: differentially private causal-effect releases.

Every mechanism is a scikit-learn style estimator whose ``fit`` is one privacy release returning a
:class:`Release`: the central estimator :class:`PrivateATE` (Lebeda et al. 2025), and the
mechanisms of the subpackages ``cluster_dp``, ``user_level`` and ``federated``. ``meta`` pools
releases; :class:`Ledger` keeps a persistent privacy budget per dataset.
"""

from importlib.metadata import PackageNotFoundError, version

from dpcausal.contract import Mechanism, Prepared, Privacy, Release
from dpcausal.estimator import PrivateATE
from dpcausal.ledger import Ledger
from dpcausal.release import ATERelease

try:
    __version__ = version("dpcausal")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without metadata
    __version__ = "0+unknown"

__all__ = ["ATERelease", "Ledger", "Mechanism", "Prepared", "PrivateATE", "Privacy", "Release",
           "__version__"]
