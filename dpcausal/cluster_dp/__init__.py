"""Cluster-DP: label-DP releases of clustered randomized experiments (Javanmard, Mirrokni,
Pouget-Abadie, ICML 2025). Spec ``cluster_dp.md``, summarised in ``dpcausal/SPECS.md``.

Public API: :class:`ResponseSpace`, :func:`bin_continuous`, :class:`ClusterDP` (``fit`` ->
:class:`ClusterDPResult`, whose ``published`` :class:`ClusterDPPublished` gives
``estimate``), the calibration functions :func:`eps_total`,
:func:`lam_for`, :func:`uniform_eps`, :func:`uniform_lam` (spec §2.8) and the aggregate baselines
:func:`noisy_ht`, :func:`noisy_histogram`.
"""

from dpcausal.cluster_dp.baselines import (
    aggregate_charge,
    noisy_histogram,
    noisy_histogram_scales,
    noisy_histogram_var,
    noisy_ht,
    noisy_ht_scales,
    noisy_ht_var,
)
from dpcausal.cluster_dp.calibration import eps1, eps_total, lam_for, uniform_eps, uniform_lam
from dpcausal.cluster_dp.estimation import ClusterDPEstimate, debias, stratified_dim, unit_weights
from dpcausal.cluster_dp.mechanisms import privatize_arrays, qtilde, transition_matrix
from dpcausal.cluster_dp.release import (
    ClusterDP,
    ClusterDPFacts,
    ClusterDPPublished,
    ClusterDPResult,
    SmallGroupWarning,
    cluster_codes,
    treatment_codes,
)
from dpcausal.cluster_dp.spaces import ResponseSpace, bin_continuous
from dpcausal.cluster_dp.theory import (
    a_term,
    exact_cond_var,
    lemma_a12_bound,
    phi,
    thm35_bound,
    uniform_var_exact,
    var_nodp_exact,
)
from dpcausal.contract import renamed_names

__all__ = [
    "ClusterDP",
    "ClusterDPEstimate",
    "ClusterDPFacts",
    "ClusterDPPublished",
    "ClusterDPResult",
    "ResponseSpace",
    "SmallGroupWarning",
    "a_term",
    "aggregate_charge",
    "bin_continuous",
    "cluster_codes",
    "debias",
    "eps1",
    "eps_total",
    "exact_cond_var",
    "lam_for",
    "lemma_a12_bound",
    "noisy_histogram",
    "noisy_histogram_scales",
    "noisy_histogram_var",
    "noisy_ht",
    "noisy_ht_scales",
    "noisy_ht_var",
    "phi",
    "privatize_arrays",
    "qtilde",
    "stratified_dim",
    "thm35_bound",
    "transition_matrix",
    "treatment_codes",
    "uniform_eps",
    "uniform_lam",
    "uniform_var_exact",
    "unit_weights",
    "var_nodp_exact",
]

# the names before issue 27 §5, for one release
__getattr__ = renamed_names(__name__, {"ClusterDPRelease": "ClusterDPPublished"})
