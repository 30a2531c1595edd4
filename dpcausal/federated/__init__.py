"""Federated ATE under distributed DP: PBM + secure aggregation (spec federated_secagg.md).

Chen, Cormode, Bharadwaj, Romov, Özgür (2024), "Federated Experiment Design under Distributed
Differential Privacy", AISTATS.
"""

from dpcausal.contract import renamed_names
from dpcausal.federated.calibration import (
    JointCalibration,
    calibrate,
    calibrate_joint,
    composed_curve,
    gaussian_rho_for,
)
from dpcausal.federated.central import (
    CentralGaussianScales,
    central_gaussian_ate,
    central_gaussian_scales,
    gaussian_noise_multiplier,
)
from dpcausal.federated.estimator import (
    FederatedATE,
    FederatedFacts,
    FederatedRelease,
    interval,
    simulate_release,
)
from dpcausal.federated.intervals import (
    asymptotic_halfwidth,
    nonasymptotic_halfwidth,
    sampling_variance,
    z_test,
)
from dpcausal.federated.pbm import (
    clip_outcomes,
    decode_mean,
    decode_second_moment,
    mean_noise_bound,
    pbm2_encode,
    pbm_encode,
    private_variance,
)
from dpcausal.federated.protocol import (
    ClientReports,
    DecodedGroup,
    ReleasePlan,
    aggregate,
    decode_group,
    encode_clients,
    plan_release,
)
from dpcausal.federated.rdp import DEFAULT_ORDERS, cks_epsilon, pbm_rdp
from dpcausal.federated.secagg import (
    TRUST_ASSUMPTIONS,
    AggregateView,
    client_messages,
    direct_sum,
    draw_client_keys,
    modulus_for,
    secure_sum,
)

__all__ = [
    "DEFAULT_ORDERS", "AggregateView", "CentralGaussianScales", "ClientReports", "DecodedGroup",
    "FederatedATE", "FederatedFacts", "FederatedRelease", "JointCalibration", "ReleasePlan",
    "TRUST_ASSUMPTIONS",
    "aggregate", "asymptotic_halfwidth", "calibrate", "calibrate_joint", "central_gaussian_ate",
    "central_gaussian_scales", "cks_epsilon", "client_messages", "clip_outcomes", "composed_curve",
    "decode_group", "decode_mean", "decode_second_moment", "direct_sum", "draw_client_keys",
    "encode_clients", "gaussian_noise_multiplier", "gaussian_rho_for", "interval",
    "mean_noise_bound", "modulus_for", "nonasymptotic_halfwidth", "pbm2_encode", "pbm_encode",
    "pbm_rdp", "plan_release", "private_variance", "sampling_variance", "secure_sum",
    "simulate_release", "z_test",
]

# the names before issue 27 §5, for one release
__getattr__ = renamed_names(__name__, {"FederatedResult": "FederatedRelease"})
