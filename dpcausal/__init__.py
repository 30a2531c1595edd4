"""dpcausal: differentially private causal-effect releases.

Every mechanism is a scikit-learn style estimator whose ``fit`` is one privacy release returning a
:class:`Release`: the central estimator :class:`PrivateATE` (Lebeda et al. 2025, subpackage
``ate``), and the mechanisms of the subpackages ``cluster_dp``, ``user_level`` and ``federated``.
``meta`` pools releases; :class:`Ledger` keeps a persistent privacy budget per dataset, and
:func:`fingerprint` is the keyed, order-invariant identity of a table it binds to a dataset id.
:func:`ask` is a remote analyst's release through the curator's gateway (:mod:`dpcausal.client`:
the standard library only).

The names below are loaded on first use, so a light module (``dpcausal.location``, which the
CLI reads before anything else) does not pull in scikit-learn and SciPy.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpcausal.ate import ATEFacts, ATERelease, PrivateATE
    from dpcausal.client import ask
    from dpcausal.contract import Mechanism, Prepared, Privacy, PublicFacts, Release
    from dpcausal.fingerprints import fingerprint
    from dpcausal.ledger import Ledger

_HOME = {"Mechanism": "dpcausal.contract", "Prepared": "dpcausal.contract",
         "Privacy": "dpcausal.contract", "Release": "dpcausal.contract",
         "PublicFacts": "dpcausal.contract", "ATEFacts": "dpcausal.ate",
         "PrivateATE": "dpcausal.ate", "Ledger": "dpcausal.ledger",
         "ATERelease": "dpcausal.ate", "fingerprint": "dpcausal.fingerprints",
         "ask": "dpcausal.client"}

try:
    __version__ = version("dpcausal")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without metadata
    __version__ = "0+unknown"


def __getattr__(name: str) -> Any:
    """``dpcausal.PrivateATE`` and the other public names, imported on first use (PEP 562)."""
    if name not in _HOME:
        raise AttributeError(f"module 'dpcausal' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value
    return value


__all__ = ["ATEFacts", "ATERelease", "Ledger", "Mechanism", "Prepared", "PrivateATE", "Privacy",
           "PublicFacts", "Release", "__version__", "ask", "fingerprint"]
