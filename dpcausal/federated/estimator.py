"""FederatedATE: ATE and CI from PBM reports summed under (simulated) secure aggregation.

Algorithm 1 (corrected) of Chen, Cormode et al. (AISTATS 2024): spec federated_secagg.md §3.1.
The clients, the secure aggregation and the server run in one process: every result says so,
with the trust assumptions of :data:`dpcausal.federated.secagg.TRUST_ASSUMPTIONS`.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, Sequence, cast

import numpy as np
import pandas as pd
from pandas.api.types import is_numeric_dtype

from dpcausal.accounting import PrivacyCharge
from dpcausal.contract import (
    DEPRECATED,
    Mechanism,
    Prepared,
    Privacy,
    PublicFacts,
    Release,
    columns,
    renamed,
    renamed_names,
)
from dpcausal.federated.intervals import (
    ASYMPTOTIC_FORMS,
    ESTIMANDS,
    NONASYMPTOTIC_KINDS,
    asymptotic_halfwidth,
    check_alpha,
    nonasymptotic_halfwidth,
    sampling_variance,
    z_test,
)
from dpcausal.federated.protocol import (
    SECAGG_MODES,
    ClientReports,
    ReleasePlan,
    aggregate,
    decode_group,
    encode_clients,
    plan_release,
)
from dpcausal.federated.secagg import TRUST_ASSUMPTIONS
from dpcausal.noise import secure_rng

CI_FORMS = ASYMPTOTIC_FORMS + NONASYMPTOTIC_KINDS
SECAGG_LABELS = {
    "pairwise": TRUST_ASSUMPTIONS,
    "none": ("none: the server sees every client's report, each only locally randomised; the "
             "DP guarantee holds for the four sums, i.e. it assumes a trusted aggregator"),
}


@dataclass(frozen=True, kw_only=True)
class FederatedRelease(Release):
    """One federated ATE release (:class:`dpcausal.contract.Release`, kind ``"federated"``).

    ``ate`` = mu_hat_t - mu_hat_c, ``ci`` the ``level`` = 1 - ``alpha`` interval of ``ci_form``,
    ``se`` the total standard error sqrt(sampling_variance + variance_dp) (Algorithm 1 corrected,
    spec §3.1), ``privacy`` per client (PBM, RDP composed and converted by CKS, spec §1), ``n``
    the clients whose reports were summed. The other fields are the mechanism's own figures, all
    post-processing of the four secure sums. ``secure_aggregation`` says how the sums were
    formed: a simulation of secure aggregation, with its trust assumptions (it is not a deployed
    cryptographic protocol).
    """

    kind: ClassVar[str] = "federated"

    variance_dp: float
    sampling_variance: float
    mean_treated: float
    mean_control: float
    variance_treated: float
    variance_control: float
    n_treated: int
    n_control: int
    theta: dict[str, tuple[float, ...]]
    bits_per_client: int
    estimand: str
    ci_form: str
    alpha: float
    z_stat: float
    p_value_one_sided: float
    reject_two_sided: bool
    secure_aggregation: str

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.variance_dp <= 0:
            raise AssertionError("bug: a PBM release has positive noise variance")

    @classmethod
    def _decoded(cls, values: dict[str, Any], d: Mapping[str, Any]) -> dict[str, Any]:
        values["theta"] = {k: tuple(v) for k, v in values["theta"].items()}
        return super()._decoded(values, d)

    def noise_share(self) -> float:
        return self.variance_dp / (self.variance_dp + self.sampling_variance)

    def extra_rows(self) -> list[tuple[str, str]]:
        return [("estimand", f"{self.estimand} (CI form {self.ci_form})"),
                ("clients", f"treated {self.n_treated}, control {self.n_control} "
                            f"({self.bits_per_client} bits each)"),
                ("privacy status", str(self.privacy.detail.get("privacy_status", ""))),
                ("secure aggregation", self.secure_aggregation)]

    def reading(self) -> str:
        return f"{super().reading()} Secure aggregation: {self.secure_aggregation}."


def _resolve_rng(random_state: Any) -> np.random.Generator:
    if isinstance(random_state, np.random.Generator):
        return random_state
    return np.random.default_rng(random_state)


def _check_noise_seed(seed: Any) -> None:
    if not (seed is None or isinstance(seed, np.random.Generator)
            or (isinstance(seed, (int, np.integer))
                and not isinstance(seed, bool) and seed >= 0)):
        raise TypeError(f"noise_seed must be None, a non-negative int or a numpy Generator, "
                        f"got {seed!r}")


_ROLES_HINT = "fit(df, treatment='<0/1 label column>', outcome='<outcome column>')"


def _split_input(data: Any, treated: Any, treatment: str | None,
                 outcome: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Outcomes (float, possibly non-finite: :func:`finite_outcomes` maps them) and boolean group
    labels from a DataFrame with column roles, or from two arrays; every refusal here depends on
    the schema, sizes and the public label coding only."""
    if isinstance(data, pd.DataFrame):
        if treated is not None or not isinstance(treatment, str) or not isinstance(outcome, str):
            raise TypeError(f"with a DataFrame, pass the column roles by name: {_ROLES_HINT}")
        cols = columns(data, treatment=treatment, outcome=outcome)
        x, t = (col.to_numpy(dtype=float, na_value=np.nan) if is_numeric_dtype(col)
                else col.to_numpy() for col in (cols["outcome"], cols["treatment"]))
    else:
        if treatment is not None or outcome is not None:
            raise TypeError("column roles (treatment=, outcome=) need a DataFrame; with arrays "
                            "pass fit(x, treated)")
        if treated is None:
            raise TypeError(f"pass the group labels: fit(x, treated) or {_ROLES_HINT}")
        x, t = data, treated
    xs, t = np.asarray(x).ravel(), np.asarray(t).ravel()
    if t.shape != xs.shape:
        raise ValueError(f"treated has {t.size} labels but there are {xs.size} outcomes")
    for name, arr in (("outcomes", xs), ("treated labels", t)):
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"{name} must have a numeric (or bool) dtype, got {arr.dtype}; "
                             "numbers stored as strings or objects are refused, not coerced: "
                             "convert them first (e.g. pandas.to_numeric)")
    xs = xs.astype(float)
    if not np.isin(t, (0, 1)).all():
        raise ValueError("treated must hold group labels 0 (control) / 1 (treated) or booleans")
    return xs, t.astype(bool)


def finite_outcomes(x: np.ndarray, R: float) -> np.ndarray:
    """The public rule for non-finite outcomes (never refused: a refusal would depend on data): a
    missing outcome (NaN) is the centre 0 of the public range [-R, R], and -inf/+inf are -R/+R,
    the values the clients' clipping to [-R, R] gives them (spec §2.1). One client's report stays
    in [-R, R], so the guarantee is unchanged."""
    return np.nan_to_num(x, nan=0.0, neginf=-R, posinf=R)


@dataclass(frozen=True, eq=False)
class FederatedFacts(PublicFacts):
    """The public facts of a federated release: the group sizes (public in this protocol,
    spec §1)."""

    n_treated: int
    n_control: int


class FederatedATE(Mechanism[FederatedFacts]):
    """Federated difference-in-means ATE under distributed DP (PBM + secure aggregation).

    Algorithm 1 (corrected) of Chen, Cormode et al. (AISTATS 2024), spec federated_secagg.md
    §3.1, as a :class:`dpcausal.contract.Mechanism`: :meth:`check_input` (every refusal),
    the data-free :meth:`privacy_charge` of the public group sizes, then
    ``_private_release``; :meth:`fit` runs the three. The unit of privacy is one client.

    Parameters
    ----------
    R : float
        Public outcome bound; outcomes are clipped to [-R, R] on the client, a missing one
        counts as 0 (:func:`finite_outcomes`).
    epsilon, delta : float
        Target (epsilon, delta) of everything released (both moments, both groups).
    m1, m2 : int
        PBM trials of the first and second moment.
    mean_share : float
        Budget share of the first moment in the joint calibration (spec §2.4).
    estimand : {"PATE", "SATE"}
    ci_form : {"quadrature", "sum_sd", "paper", "corrected", "hoeffding"}
        Asymptotic forms (spec §3.2) or non-asymptotic kinds (spec §3.4, beta = alpha).
    variance_mode : {"private", "oracle_nonprivate"}
        ``oracle_nonprivate`` uses exact sample variances (reproduction only; the result is
        tagged ``privacy_status="NOT_PRIVATE"``) and sends the whole budget to the mean.
    secagg : {"pairwise", "none"}
    dropout : float
        Fraction of each group that drops out (simulated; privacy is planned for the rest).
    alpha : float
        CI miscoverage (0.1 for 90%).
    noise_seed : None, int or numpy.random.Generator
        Seeds the protocol's randomness in evaluation mode only (``fit(...,
        evaluation=True)``); a release always draws from OS entropy, whatever this is.
    orders : sequence of float, optional
        Rényi orders (dp_accounting defaults).
    debias : bool
        Add the DP-noise correction to the private variances (spec §2.2).
    random_state : deprecated
        The old name of ``noise_seed`` (for one release).
    """

    unit: ClassVar[str] = "client"

    def __init__(self, R: float, epsilon: float, delta: float, m1: int = 1024, m2: int = 1024,
                 mean_share: float = 0.99, estimand: str = "PATE", ci_form: str = "quadrature",
                 variance_mode: str = "private", secagg: str = "pairwise", dropout: float = 0.0,
                 alpha: float = 0.1, noise_seed: Any = None,
                 orders: Sequence[float] | None = None, debias: bool = True,
                 random_state: Any = DEPRECATED) -> None:
        self.R = R
        self.epsilon = epsilon
        self.delta = delta
        self.m1 = m1
        self.m2 = m2
        self.mean_share = mean_share
        self.estimand = estimand
        self.ci_form = ci_form
        self.variance_mode = variance_mode
        self.secagg = secagg
        self.dropout = dropout
        self.alpha = alpha
        self.noise_seed = noise_seed
        self.orders = orders
        self.debias = debias
        self.random_state = random_state

    def _noise_seed(self) -> Any:
        return renamed(self, "noise_seed", "random_state")

    # -- data-free part -------------------------------------------------------------------
    def _check_options(self) -> None:
        if self.estimand not in ESTIMANDS:
            raise ValueError(f"estimand must be one of {ESTIMANDS}, got {self.estimand!r}")
        if self.ci_form not in CI_FORMS:
            raise ValueError(f"ci_form must be one of {CI_FORMS}, got {self.ci_form!r}")
        if self.secagg not in SECAGG_MODES:
            raise ValueError(f"secagg must be one of {SECAGG_MODES}, got {self.secagg!r}")
        check_alpha(self.alpha)
        _check_noise_seed(self._noise_seed())

    def plan(self, n_treated: int, n_control: int) -> ReleasePlan:
        """Calibrated, data-free release plan for the public group sizes (spec §2.4).

        Parameters
        ----------
        n_treated, n_control : int
            The public group sizes.

        Returns
        -------
        ReleasePlan
            What the clients and server agree on: R, the group sizes, the message counts, the
            joint calibration and the moduli; its ``privacy_charge()`` is the release's charge.
        """
        self._check_options()
        return plan_release(n_treated, n_control, R=self.R, epsilon=self.epsilon,
                            delta=self.delta, m1=self.m1, m2=self.m2,
                            mean_share=self.mean_share, variance_mode=self.variance_mode,
                            dropout=self.dropout, orders=self.orders)

    def privacy_charge(self, n_treated: FederatedFacts | int, n_control: int | None = None
                       ) -> PrivacyCharge:
        """Composed RDP curve of the release from the public group sizes only (or their
        :class:`FederatedFacts`; Theorem 3.2)."""
        if isinstance(n_treated, FederatedFacts):
            n_control, n_treated = n_treated.n_control, n_treated.n_treated
        if n_control is None:
            raise TypeError("privacy_charge needs n_control (or FederatedFacts)")
        return self.plan(n_treated, n_control).privacy_charge()

    # -- release --------------------------------------------------------------------------
    def check_input(self, data: Any, treated: Any = None, *,
                    treatment: str | None = None, outcome: str | None = None
                    ) -> Prepared[FederatedFacts]:
        """Validate the options and the input; every refusal happens here, before anything is
        drawn or charged (the release contract; spec §7.5 ``assign``/``calibrate``).

        Parameters
        ----------
        data : pandas.DataFrame or array-like
            A DataFrame with the column roles ``treatment`` (labels 0/1 or bool) and
            ``outcome``, or an array of outcomes.
        treated : array-like, optional
            With an array ``data``: the treatment labels.
        treatment, outcome : str, optional
            The column roles of a DataFrame.

        Returns
        -------
        Prepared
            ``public`` holds the group sizes, which are public in this protocol (spec §1);
            ``data`` the outcomes (non-finite ones by :func:`finite_outcomes`) and the labels.
        """
        self._check_options()
        x, t = _split_input(data, treated, treatment, outcome)
        public = FederatedFacts(int(t.sum()), int((~t).sum()))
        # calibration and every data-free refusal, before any draw
        plan = self.plan(public.n_treated, public.n_control)
        return Prepared(public=public, data=(finite_outcomes(x, plan.R), t))

    def _private_release(self, prepared: Prepared[FederatedFacts], *,
                         evaluation: bool = False) -> FederatedRelease:
        """Run the protocol once (Algorithm 1, spec §3.1) on a checked input.

        The PBM reports and simulated dropouts draw from :func:`dpcausal.noise.secure_rng` (OS
        entropy); ``noise_seed`` seeds them only when ``evaluation`` is True (differencing
        two seeded releases on neighbouring data would give the exact change).
        """
        x, t = prepared.data
        rng = _resolve_rng(self._noise_seed()) if evaluation else secure_rng()
        return simulate_release(
            x, t, self.plan(prepared.public.n_treated, prepared.public.n_control), rng,
            secagg=self.secagg, debias=self.debias,
            variance_mode=self.variance_mode, estimand=self.estimand, ci_form=self.ci_form,
            alpha=self.alpha, evaluation=evaluation, encode=self.encode)

    def encode(self, x: np.ndarray, plan: ReleasePlan, group: int,
               rng: np.random.Generator) -> ClientReports:
        """The clients' PBM reports of one group (spec §2.1-2.2); an orchestrator may override
        it to encode in chunks elsewhere (it must give the same reports)."""
        return encode_clients(x, plan, group, rng)

    def run(self, x: Any, treated: Any, outcome: str | None = None, *,
            evaluation: bool = False) -> FederatedRelease:
        """:meth:`fit` with the argument names of the earlier API: ``run(x, treated)`` on
        arrays, or ``run(df, "<label column>", "<outcome column>")``."""
        if isinstance(x, pd.DataFrame):
            release = self.fit(x, evaluation=evaluation, treatment=treated, outcome=outcome)
        else:
            release = self.fit(x, treated, evaluation=evaluation)
        return cast(FederatedRelease, release)


def simulate_release(x: np.ndarray, treated: np.ndarray, plan: ReleasePlan,
                     rng: np.random.Generator, *, secagg: str, debias: bool, variance_mode: str,
                     estimand: str, ci_form: str, alpha: float, evaluation: bool = False,
                     encode: Callable[..., ClientReports] = encode_clients) -> FederatedRelease:
    """Algorithm 1 (spec §3.1) on validated outcomes and boolean labels, control group first:
    ``encode(x_g, plan, g, rng)`` per group, simulated dropouts (spec §4), the two secure sums
    and the decoding per group, then :func:`interval`.

    ``rng`` is the noise source (PBM reports, simulated dropouts): :func:`secure_rng` in a
    release. The session id of the secure aggregation is drawn apart from it, from OS entropy
    (a session id derived from the noise seed would let its holder unmask every report); the
    clients' secret keys are drawn inside each secure sum.
    """
    session = secrets.token_hex(16)
    groups = []
    for g, members in enumerate((~treated, treated)):
        reports = encode(x[members], plan, g, rng)
        n_g = int(members.sum())
        dropped = None
        if n_g > plan.n_plan[g]:
            dropped = np.zeros(n_g, dtype=bool)
            dropped[rng.choice(n_g, n_g - plan.n_plan[g], replace=False)] = True
        first, second = aggregate(reports, plan, g, secagg=secagg, session=session,
                                  dropped=dropped)
        groups.append(decode_group(first, second, plan, g, debias))
    if variance_mode == "oracle_nonprivate":  # exact sample variances: NOT private (spec §3.3)
        s2 = tuple(float(np.var(np.clip(x[m], -plan.R, plan.R), ddof=1))
                   for m in (~treated, treated))
    else:
        s0, s1 = groups[0].variance, groups[1].variance
        assert s0 is not None and s1 is not None, "bug: private variances were not released"
        s2 = (s0, s1)
    release = interval(groups[0].mean, groups[1].mean, s2[0], s2[1], plan,
                       (groups[0].n_received, groups[1].n_received), estimand=estimand,
                       ci_form=ci_form, alpha=alpha, secagg=secagg, evaluation=evaluation)
    return release


def interval(mean_control: float, mean_treated: float, s2_control: float, s2_treated: float,
             plan: ReleasePlan, n_received: tuple[int, int], *, estimand: str, ci_form: str,
             alpha: float, secagg: str = "pairwise", evaluation: bool = False
             ) -> FederatedRelease:
    """ATE, CI and test from decoded group means and variances: spec §3.1-3.5 (last phase).

    V_DP = sum_g R^2/(4 n_g m1 theta1_g^2) over the received counts (Theorem 4.1 bound).
    ``secagg`` names how the sums were formed; the result carries the matching label.
    """
    cal = plan.calibration
    n_c, n_t = n_received
    v_dp = sum(plan.R**2 / (4 * n * plan.m1 * th**2)
               for n, th in zip(n_received, cal.theta1, strict=True))
    ate = mean_treated - mean_control
    sig2 = sampling_variance(s2_treated, s2_control, n_t, n_c, estimand)
    if ci_form in ASYMPTOTIC_FORMS:
        half = asymptotic_halfwidth(sig2, v_dp, alpha, ci_form)
    else:
        half = nonasymptotic_halfwidth(ci_form, estimand, plan.R, n_t, n_c, plan.m1,
                                       cal.theta1, s2_treated, s2_control, alpha, plan.m2,
                                       cal.theta2 or None)
    z, p = z_test(ate, sig2, v_dp)
    lo, hi = ate - half, ate + half
    privacy = Privacy(
        epsilon=float(cal.epsilon), delta=float(cal.delta), unit="client", mechanism="pbm",
        detail={"optimal_order": cal.optimal_order, "theta_capped": cal.theta_capped,
                "epsilon_target": cal.epsilon_target, "mean_share": cal.mean_share,
                "n_plan": plan.n_plan, "conversion": "CKS2020",
                "secure_aggregation": SECAGG_LABELS[secagg],
                "privacy_status": ("PRIVATE" if plan.variance_mode == "private"
                                   else "NOT_PRIVATE")})
    return FederatedRelease(
        ate=float(ate), ci=(float(lo), float(hi)), se=math.sqrt(sig2 + v_dp),
        level=1.0 - float(alpha), privacy=privacy, n=n_t + n_c, evaluation=evaluation,
        variance_dp=float(v_dp),
        sampling_variance=float(sig2), mean_treated=float(mean_treated),
        mean_control=float(mean_control), variance_treated=float(s2_treated),
        variance_control=float(s2_control), n_treated=n_t, n_control=n_c,
        theta={"mean": cal.theta1, "second_moment": cal.theta2},
        bits_per_client=plan.bits_per_client, estimand=estimand, ci_form=ci_form,
        alpha=float(alpha), z_stat=z, p_value_one_sided=p, reject_two_sided=not lo <= 0 <= hi,
        secure_aggregation=SECAGG_LABELS[secagg])


# the names before issue 27 §5, for one release
__getattr__ = renamed_names(__name__, {"FederatedResult": "FederatedRelease"})
