"""ClusterDP: the production entry point that privatizes a unit-level dataset
(spec cluster_dp.md §1.2, §5).

``ClusterDP(...).fit(df, treatment="z", outcome="y", cluster="c")`` is one label-DP release under
the common contract: :meth:`ClusterDP.check_input` refuses bad input before anything is charged,
:meth:`ClusterDP.privacy_charge` is data-free and ``ClusterDP._private_release`` draws the noise
once and returns a :class:`ClusterDPResult`: the debiased ATE with its CI and total standard error,
and the published artefact, a :class:`ClusterDPPublished` (the privatized unit-level data, the
public debiasing priors q_tilde and lambda), as ``fit(...).published``;
``ClusterDPPublished.estimate()`` is post-processing.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, cast

import numpy as np
import pandas as pd

from dpcausal._results import to_jsonable
from dpcausal.accounting import PrivacyCharge
from dpcausal.cluster_dp.calibration import (
    ACCOUNTINGS,
    eps_total,
    lam_for,
    uniform_eps,
    uniform_lam,
)
from dpcausal.cluster_dp.estimation import (
    STRATA,
    ClusterDPEstimate,
    debias,
    make_estimate,
    stratified_dim,
)
from dpcausal.cluster_dp.mechanisms import group_counts, release_priors, resample
from dpcausal.cluster_dp.spaces import ResponseSpace
from dpcausal.contract import (
    DEPRECATED,
    Mechanism,
    Prepared,
    Privacy,
    PublicFacts,
    Release,
    columns,
    deprecated,
    level_to_alpha,
    renamed,
    renamed_names,
)
from dpcausal.noise import secure_rng

MECHANISMS = ("cluster", "cluster_free", "uniform")
MECHANISM_NAMES = {"cluster": "Cluster-DP", "cluster_free": "Cluster-Free-DP",
                   "uniform": "Uniform-Prior-DP"}
MAX_LAMBDA = 0.999  # spec §5: refuse lambda >= 0.999 unless the caller opts in (§6 E9)
SMALL_GROUP = 20  # spec §5: warn when a (cluster, arm) group has fewer units


class SmallGroupWarning(UserWarning):
    """A (cluster, arm) group is so small that Laplace(sigma/n) noise swamps its histogram
    (spec §5)."""


@dataclass(frozen=True)
class ClusterDPPublished:
    """What the platform publishes: unit-level (cluster, treatment, outcome) and the priors
    (Fig. 1).

    Attributes
    ----------
    data : DataFrame with columns cluster, treatment, outcome (privatized) and a fresh
        RangeIndex; rows grouped by (cluster, arm), in a secret random order within each group
        (never the source's order or index).
    priors : DataFrame with columns cluster, arm, value, q_tilde; one row per (cluster, arm, value).
        For ``cluster_free`` and ``uniform`` the arm-level prior is repeated for every cluster.
    lam : the resampling probability used.
    privacy : dict with epsilon (= epsilon_strict), delta, accounting, epsilon_paper,
        epsilon_strict.
    mechanism, space, gamma, sigma : the public parameters used (sigma = inf: uniform prior).
    """

    data: pd.DataFrame = field(repr=False)
    priors: pd.DataFrame = field(repr=False)
    lam: float
    privacy: dict[str, Any]
    mechanism: str
    space: ResponseSpace
    gamma: float
    sigma: float

    def __post_init__(self) -> None:
        if not 0 <= self.lam < 1:
            raise AssertionError(f"bug: lambda {self.lam} outside [0, 1)")
        sums = self.priors.groupby(["cluster", "arm"], sort=False)["q_tilde"].sum().to_numpy()
        if sums.size and np.max(np.abs(sums - 1.0)) > 1e-9:
            raise AssertionError("bug: a published prior does not sum to 1")

    def prior_means(self) -> pd.DataFrame:
        """m_{c,a} = sum_y y q_tilde(y | c, a) for every group (Algorithm 2, spec §2.1)."""
        p = self.priors.assign(_yq=self.priors["value"] * self.priors["q_tilde"])
        return p.groupby(["cluster", "arm"], sort=False)["_yq"].sum().rename("m").reset_index()

    def debiased(self) -> np.ndarray:
        """Per-unit debiased outcomes y_hat (Theorem 3.2, spec §3.1), in row order;
        post-processing."""
        m = self.prior_means()
        keyed = self.data[["cluster", "treatment"]].merge(
            m, left_on=["cluster", "treatment"], right_on=["cluster", "arm"], how="left", sort=False
        )
        return debias(self.data["outcome"].to_numpy(float), keyed["m"].to_numpy(float), self.lam)

    def estimate(self, strata: str = "clusters", level: float = 0.95) -> ClusterDPEstimate:
        """Debiased ATE (Theorem 3.2), V_hat and CI (spec §3.6), from the release alone.

        Parameters
        ----------
        strata : "clusters" (stratified by cluster, eq. 5) or "none" (plain difference of arm
            means).
        level : confidence level of the normal interval.
        """
        if strata not in STRATA:
            raise ValueError(f"strata must be one of {STRATA}, got {strata!r}")
        if not isinstance(level, float) or not 0 < level < 1:
            raise ValueError(f"level must be a float in (0, 1), got {level!r}")
        y_hat = self.debiased()
        z = self.data["treatment"].to_numpy(np.int64)
        if strata == "clusters":
            s, _ = cluster_codes(self.data["cluster"])
            S = int(s.max()) + 1
        else:
            s, S = np.zeros(z.size, dtype=np.int64), 1
        tau, vhat = stratified_dim(y_hat, s, z, S)
        return make_estimate(tau[0], vhat[0], strata, level, z.size)


@dataclass(frozen=True, kw_only=True)
class ClusterDPResult(Release):
    """One Cluster-DP release under the common contract (spec §1.2 Fig. 1, §3.1, §3.6).

    ``ate`` is the debiased ATE of Theorem 3.2, ``se`` = sqrt(V_hat) of spec §3.6, which covers
    the sampling error and the privacy noise (resampling and noisy priors), ``ci`` its normal
    interval at ``level``. ``published`` is what the platform publishes (privatized unit-level
    data and priors); everything here is computed from it (post-processing).

    Attributes
    ----------
    published : ClusterDPPublished, or None in a release rebuilt by :meth:`Release.from_dict`
        (its JSON holds the priors, not the unit-level data, which are published as a table).
    priors : the published priors (``published.priors``).
    lam, gamma, sigma : the public calibration used (sigma = inf: uniform prior, no data access).
    space : the public response space Y.
    strata : "clusters" or "none", the estimator's stratification.
    """

    kind: ClassVar[str] = "cluster_dp"

    published: ClusterDPPublished | None = field(repr=False, compare=False)
    priors: pd.DataFrame = field(repr=False, compare=False)
    lam: float
    gamma: float
    sigma: float
    space: ResponseSpace = field(repr=False, compare=False)
    strata: str

    def extra_rows(self) -> list[tuple[str, str]]:
        sigma = "inf (uniform prior)" if math.isinf(self.sigma) else f"{self.sigma:.4g}"
        return [("calibration", f"lambda={self.lam:.4g}, gamma={self.gamma:.4g}, sigma={sigma}"),
                ("estimator", f"debiased difference in means, strata={self.strata}"),
                ("K", str(self.space.K))]

    def to_dict(self) -> dict[str, Any]:
        """The release's public figures, the response space and the published priors (the
        unit-level data stay in ``published.data``)."""
        out = super().to_dict()
        out["space"] = self.space.values.tolist()
        out["priors"] = to_jsonable(self.priors.to_dict(orient="list"))
        return out

    @classmethod
    def _decoded(cls, values: dict[str, Any], d: Mapping[str, Any]) -> dict[str, Any]:
        values.update(published=None, priors=pd.DataFrame(d["priors"]),
                      space=ResponseSpace(np.asarray(d["space"], float)),
                      sigma=math.inf if values["sigma"] is None else values["sigma"])
        return super()._decoded(values, d)


@dataclass(frozen=True)
class _Units:
    """Checked input: outcome codes in Y, 0/1 arms and cluster codes of every unit, and the
    sorted cluster labels (cluster membership and arms are public, spec §1.2)."""

    y_idx: np.ndarray
    z: np.ndarray
    cidx: np.ndarray
    labels: np.ndarray


@dataclass(frozen=True, eq=False)
class ClusterDPFacts(PublicFacts):
    """The public facts of a Cluster-DP release: ``n`` units in ``clusters`` clusters."""

    n: int
    clusters: int


class ClusterDP(Mechanism[ClusterDPFacts]):
    """Label-DP release of a clustered randomized experiment (Javanmard et al., ICML 2025).

    Parameters
    ----------
    space : ResponseSpace
        Public finite response space Y.
    epsilon, delta : float
        Target (epsilon, delta)-label DP under ``accounting``. lambda is the smallest feasible value
        (:func:`lam_for` / :func:`uniform_lam`, spec §2.8).
    gamma : float, optional
        Truncation threshold in [0, 1/K]; default 1/K (the safe choice at small epsilon, spec §5),
        which is the uniform prior: then sigma is not used and no epsilon is spent on the prior.
    sigma : float, optional
        Laplace scale numerator (noise sigma/n_{a,c}), > 0; inf means the uniform prior; sigma = 0
        is refused (spec §6 E7). Default: spend 20% of epsilon on the histogram, sigma =
        k/(0.2 epsilon), k = 2 strict, 1 paper (spec §5).
    mechanism : "cluster" (Algorithm 2), "cluster_free" (C = 1, §2.2) or "uniform" (Algorithm 1).
    accounting : "strict" (default; spec §6 E1/E7) or "paper" (lambda calibrated by Theorem 3.1 as
        printed, for figures). Either way the release reports the strict epsilon.
    allow_high_lambda : bool
        Accept lambda >= 0.999 (refused by default: the variance grows like 1/(1-lambda)^2; §6 E9).
    strata : "clusters" (default) or "none": stratification of the released ATE (spec §3.1).
    alpha : float
        Miscoverage of the released CI (spec §3.6): its level is ``1 - alpha``, default 0.95.
    out_of_space : "nearest" or a value of Y
        The public rule for an outcome outside Y (never refused, so no refusal
        tells whether a label takes a value): ``"nearest"`` (default) maps it to the nearest
        value of Y and a missing outcome to the value nearest the middle of Y's range; a value
        of Y maps every such outcome, missing ones included, to it
        (:meth:`ResponseSpace.nearest`).
    noise_seed : int or numpy Generator, optional
        Seed of the noise in evaluation mode only (``fit(..., evaluation=True)``), for
        reproducible studies; a release (``evaluation=False``) ignores it and draws from OS
        entropy (:func:`dpcausal.noise.secure_rng`).
    level : float, deprecated
        The CI level, the old name of ``1 - alpha`` (for one release).
    """

    unit: ClassVar[str] = "label"

    def __init__(
        self,
        space: ResponseSpace,
        epsilon: float,
        delta: float = 0.0,
        gamma: float | None = None,
        sigma: float | None = None,
        mechanism: str = "cluster",
        accounting: str = "strict",
        allow_high_lambda: bool = False,
        strata: str = "clusters",
        alpha: float = 0.05,
        out_of_space: str | float = "nearest",
        noise_seed: int | np.random.Generator | None = None,
        level: float | str = DEPRECATED,
    ) -> None:
        self.space = space
        self.epsilon = epsilon
        self.delta = delta
        self.gamma = gamma
        self.sigma = sigma
        self.mechanism = mechanism
        self.accounting = accounting
        self.allow_high_lambda = allow_high_lambda
        self.strata = strata
        self.alpha = alpha
        self.out_of_space = out_of_space
        self.noise_seed = noise_seed
        self.level = level

    def _alpha(self) -> Any:
        """``alpha``, or ``1 - level`` where the deprecated ``level`` was given."""
        return renamed(self, "alpha", "level", level_to_alpha)

    # ---- data-free calibration -------------------------------------------------------------
    def _params(self) -> tuple[float, float]:
        """Validated (gamma, sigma) actually used (spec §2.1-2.3).

        A prior that is uniform by construction takes the uniform branch, (1/K, inf): the
        ``uniform`` mechanism, sigma = inf, and gamma = 1/K, which makes q_tilde uniform whatever
        the noise (spec §2.1). Its prior reads no outcome and costs nothing (eps1 = 0), so lambda
        comes from Theorem A.5 (Uniform-Prior-DP), not Theorem 3.1.
        """
        if not isinstance(self.space, ResponseSpace):
            raise TypeError(f"space must be a ResponseSpace, got {type(self.space).__name__}")
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"mechanism must be one of {MECHANISMS}, got {self.mechanism!r}")
        if self.accounting not in ACCOUNTINGS:
            raise ValueError(f"accounting must be one of {ACCOUNTINGS}, got {self.accounting!r}")
        if self.strata not in STRATA:
            raise ValueError(f"strata must be one of {STRATA}, got {self.strata!r}")
        alpha = self._alpha()
        if not isinstance(alpha, float) or not 0 < alpha < 1:
            raise ValueError(f"alpha must be a float in (0, 1), got {alpha!r}")
        if self.out_of_space != "nearest":
            self.space.nearest(np.empty(0), self._default_label())  # a value of Y, or refused
        if (
            not isinstance(self.epsilon, (int, float))
            or not self.epsilon > 0
            or math.isinf(self.epsilon)
        ):
            raise ValueError(f"epsilon must be a finite number > 0, got {self.epsilon!r}")
        if not isinstance(self.delta, (int, float)) or not 0 <= self.delta < 1:
            raise ValueError(f"delta must be a number in [0, 1), got {self.delta!r}")
        K = self.space.K
        gamma = 1.0 / K if self.gamma is None else self.gamma
        if not isinstance(gamma, (int, float)) or not 0 <= gamma <= (1.0 / K) * (1 + 1e-12):
            raise ValueError(
                f"gamma must be in [0, 1/K] = [0, {1.0 / K:.6g}] for K={K}, got {self.gamma!r}; "
                "gamma = 1/K gives the uniform prior"
            )
        gamma = min(float(gamma), 1.0 / K)
        sigma = (
            (2.0 if self.accounting == "strict" else 1.0) / (0.2 * self.epsilon)
            if self.sigma is None
            else self.sigma
        )
        if not isinstance(sigma, (int, float)) or math.isnan(sigma) or sigma < 0:
            raise ValueError(f"sigma must be > 0 or inf, got {self.sigma!r}")
        if sigma == 0:
            raise ValueError(
                "sigma=0 publishes q_tilde as a deterministic function of the labels: no finite "
                "epsilon in any accounting (spec §6 E7; the paper's 2/gamma branch covers only "
                "the resampling); use sigma > 0, or sigma=inf for the uniform prior"
            )
        if self.mechanism == "uniform" or math.isinf(sigma) or gamma * K >= 1.0 - 1e-12:
            return 1.0 / K, math.inf  # the uniform prior (spec §2.3): no data access, eps1 = 0
        return gamma, float(sigma)

    def calibrate(self) -> tuple[float, dict[str, Any]]:
        """(lambda, privacy dict) from the public parameters only: spec §2.8; no data access.

        Returns
        -------
        lam : float
            The resampling probability lambda.
        privacy : dict
            epsilon, delta, accounting, epsilon_paper and epsilon_strict, plus the gamma and
            sigma actually used. ``epsilon`` is always the strict figure, the guarantee the
            release has (spec §6 E1/E7): ``accounting="paper"`` only calibrates lambda as
            Theorem 3.1 is printed (figure reproduction), and its figure stays in
            ``epsilon_paper``.
        """
        gamma, sigma = self._params()
        K, eps, delta = self.space.K, float(self.epsilon), float(self.delta)
        if self.mechanism == "uniform" or math.isinf(sigma):
            lam = uniform_lam(eps, K, delta)
            e_paper = e_strict = uniform_eps(lam, K, delta)
        else:
            lam = lam_for(eps, delta, gamma, sigma, mode=self.accounting)
            e_paper = eps_total(lam, gamma, sigma, delta, mode="paper")
            e_strict = eps_total(lam, gamma, sigma, delta, mode="strict")
        if lam >= MAX_LAMBDA and not self.allow_high_lambda:
            raise ValueError(
                f"epsilon={eps!r} needs lambda={lam:.6f} >= {MAX_LAMBDA}: the variance grows like "
                "1/(1-lambda)^2 (spec §5); raise epsilon or gamma, or pass allow_high_lambda=True"
            )
        privacy = {
            "epsilon": e_strict,
            "delta": delta,
            "accounting": self.accounting,
            "epsilon_paper": e_paper,
            "epsilon_strict": e_strict,
            "gamma": gamma,
            "sigma": sigma,
        }
        return lam, privacy

    def privacy_charge(self, public: ClusterDPFacts | None = None, /, **facts: Any
                       ) -> PrivacyCharge:
        """Data-free ledger charge: the strict (conservative) epsilon and delta (spec §6 E1/E7).

        ``public`` (the facts :meth:`check_input` found, also accepted by keyword) is taken
        for the common contract and not used: by parallel composition over the (cluster, arm)
        groups the charge depends on the public parameters only (spec §2.8).
        """
        lam, p = self.calibrate()
        return PrivacyCharge(
            mechanism="approx" if p["delta"] > 0 else "pure",
            epsilon=p["epsilon_strict"],
            delta=p["delta"],
            detail={
                "mechanism": self.mechanism,
                "unit": self.unit,
                "accounting": p["accounting"],
                "epsilon_paper": p["epsilon_paper"],
                "gamma": p["gamma"],
                "sigma": p["sigma"],
                "lam": lam,
            },
        )

    # ---- the release -------------------------------------------------------------------------
    def check_input(
        self,
        data: pd.DataFrame,
        cluster: str | None = None,
        treatment: str | None = None,
        outcome: str | None = None,
    ) -> Prepared[ClusterDPFacts]:
        """Every refusal that public facts decide, before anything is charged or drawn.

        The parameters (:meth:`calibrate`, which also refuses an epsilon so large that lambda
        underflows), the columns, a response space too wide for a finite variance, a non-numeric
        outcome dtype (numeric strings are not parsed), 0/1 arms and the (cluster, arm) group
        sizes (public: clusters and arms are not private, spec §1.2). No outcome value is ever
        refused: one outside Y takes a value of Y by the public rule ``out_of_space``.

        Parameters
        ----------
        data : DataFrame with one row per unit.
        cluster, treatment, outcome : column names (by keyword, or positionally in this order).

        Returns
        -------
        Prepared
            ``public``: n and the number of clusters; ``data``: the checked unit codes.
        """
        self.calibrate()
        if not isinstance(data, pd.DataFrame):
            raise TypeError(f"df must be a pandas DataFrame, got {type(data).__name__}")
        for arg, col in (("cluster", cluster), ("treatment", treatment), ("outcome", outcome)):
            if col is None:
                raise TypeError(f"ClusterDP needs the {arg} column: pass {arg}='<column name>'")
        cols = columns(data, cluster=cluster, treatment=treatment, outcome=outcome)
        if len(data) == 0:
            raise ValueError("df has no rows; nothing to release")
        y = cols["outcome"]
        if not pd.api.types.is_numeric_dtype(y):
            raise ValueError(
                f"outcome column {outcome!r} must be numeric (dtype {y.dtype}); numeric strings "
                "are not parsed: convert the column (e.g. pandas.to_numeric) before releasing"
            )
        y_idx = self.space.nearest(y.to_numpy(dtype=float, na_value=np.nan),
                                   self._default_label())
        z = treatment_codes(cols["treatment"], name=str(treatment))
        cidx, labels = cluster_codes(cols["cluster"], name=f"cluster column {cluster!r}")
        units = _Units(y_idx=y_idx, z=z, cidx=cidx, labels=labels)
        return Prepared(public=self.check_groups(group_sizes(z, cidx, labels.size), labels),
                        data=units)

    def check_groups(self, n_cell: np.ndarray, labels: Any) -> ClusterDPFacts:
        """Every refusal that the public parameters and the (cluster, arm) group sizes decide
        (public under label DP: clusters and arms are not private, spec §1.2), with no data:
        :meth:`calibrate`, no units, a response space too wide for a finite variance over n
        units, and the groups (:meth:`_check_groups`). ``n_cell`` is the (C, 2) array of group
        sizes (:func:`group_sizes`; arm 0 then 1) and ``labels`` the C cluster labels. Returns
        the public facts; :meth:`check_input` runs it on the data's groups, an orchestrator on
        the groups its curator counted at registration."""
        lam, _ = self.calibrate()
        n_cell = np.asarray(n_cell, dtype=np.int64).reshape(-1, 2)
        n = int(n_cell.sum())
        if n == 0:
            raise ValueError("df has no rows; nothing to release")
        self._check_finite_variance(lam, n)
        self._check_groups(n_cell, np.asarray(labels, dtype=object))
        return ClusterDPFacts(n, int(n_cell.shape[0]))

    def _default_label(self) -> float | None:
        """The value of Y every out-of-space outcome takes (None: the nearest rule)."""
        if self.out_of_space == "nearest":
            return None
        if isinstance(self.out_of_space, bool) or not isinstance(self.out_of_space, (int, float)):
            raise ValueError(f"out_of_space must be 'nearest' or a value of the response space, "
                             f"got {self.out_of_space!r}")
        return float(self.out_of_space)

    def _check_finite_variance(self, lam: float, n: int) -> None:
        """Refuse a response space whose debiased outcomes have no finite variance in floating
        point: |y_hat| <= B (1 + lambda)/(1 - lambda) (Theorem 3.2, spec §3.1), and V_hat sums n
        squares of differences of such values (spec §3.6). Public: Y, lambda and n only."""
        bound = self.space.B * (1.0 + lam) / (1.0 - lam)
        if not 2.0 * math.log10(2.0 * bound) + math.log10(n) < 300.0:
            raise ValueError(
                f"the response space is too wide: debiased outcomes reach B(1+lambda)/(1-lambda) "
                f"= {bound:.3g} (B = max|y| = {self.space.B:.3g}, lambda = {lam:.4g}) and their "
                f"variance over n = {n} units overflows floating point; rescale the outcomes"
            )

    def _check_groups(self, n_cell: np.ndarray, labels: np.ndarray) -> None:
        """Refuse empty (cluster, arm) groups and groups too small for V_hat (spec §1.1, §3.6);
        warn about small groups (spec §5). Group sizes are public (spec §1.2)."""
        empty = np.argwhere(n_cell == 0)
        if empty.size:
            shown = [(labels[c], int(a)) for c, a in empty[:5]]
            raise ValueError(
                f"(cluster, arm) groups with no units: {shown}; every cluster needs treated and "
                "control units (n_c >= 2, spec §1.1); merge small clusters before releasing"
            )
        cells = n_cell if self.strata == "clusters" else n_cell.sum(axis=0, keepdims=True)
        single = np.argwhere(cells < 2)
        if single.size:
            where = "(cluster, arm) group" if self.strata == "clusters" else "arm"
            raise ValueError(
                f"a {where} has a single unit: the variance estimate V_hat (spec §3.6) needs at "
                "least 2 per "
                f"{where}; merge small clusters (or use strata='none')"
            )
        pooled = self.mechanism != "cluster"
        small = n_cell.sum(axis=0) if pooled else n_cell.ravel()
        if math.isfinite(self._params()[1]) and small.min() < SMALL_GROUP:
            warnings.warn(
                f"a group has only {int(small.min())} < {SMALL_GROUP} units: Laplace(sigma/n) "
                "noise swamps its histogram (spec §5)",
                SmallGroupWarning,
                stacklevel=4,
            )

    def _private_release(self, prepared: Prepared[ClusterDPFacts], *, evaluation: bool = False,
                         rng: np.random.Generator | None = None) -> ClusterDPResult:
        """Draw the release once and estimate from it: Algorithm 2 (spec §2.1), then the
        debiased ATE (Theorem 3.2, §3.1) with V_hat and its CI (§3.6) as post-processing.
        ``rng`` (evaluation only; default ``noise_seed`` there, OS entropy in a release)."""
        if rng is None:
            rng = _noise_rng(self.noise_seed if evaluation else None)
        published = self._draw(prepared.data, rng)
        est = published.estimate(self.strata, 1 - self._alpha())
        p = published.privacy
        privacy = Privacy(
            epsilon=p["epsilon"], delta=p["delta"], unit=self.unit,
            mechanism=MECHANISM_NAMES[self.mechanism],
            detail={"accounting": p["accounting"], "epsilon_paper": p["epsilon_paper"],
                    "epsilon_strict": p["epsilon_strict"], "lam": published.lam,
                    "gamma": published.gamma, "sigma": published.sigma},
        )
        return ClusterDPResult(
            ate=est.ate, ci=est.ci, se=est.se, level=est.level, privacy=privacy, n=est.n,
            evaluation=evaluation, published=published, priors=published.priors, lam=published.lam,
            gamma=published.gamma, sigma=published.sigma, space=self.space, strata=self.strata,
        )

    def _draw(self, units: _Units, rng: np.random.Generator) -> ClusterDPPublished:
        """Algorithm 2 (or its pooled/uniform variants) once on checked units (spec §2.1-2.3)."""
        lam, privacy = self.calibrate()
        gamma, sigma = privacy.pop("gamma"), privacy.pop("sigma")
        pooled = self.mechanism != "cluster"
        C = units.labels.size
        G = 2 if pooled else 2 * C
        g = units.z if pooled else 2 * units.cidx + units.z
        q_t = release_priors(group_counts(units.y_idx, g, G, self.space.K)[0], gamma, sigma, rng)
        y_tilde = resample(units.y_idx, g, q_t[None], lam, rng)[0]
        order = secret_order(units.cidx, units.z, rng)
        data = pd.DataFrame(
            {
                "cluster": units.labels[units.cidx[order]],
                "treatment": units.z[order],
                "outcome": self.space.values[y_tilde[order]],
            }
        )
        priors = _priors_frame(q_t, units.labels, self.space, pooled)
        return ClusterDPPublished(
            data=data,
            priors=priors,
            lam=lam,
            privacy=privacy,
            mechanism=self.mechanism,
            space=self.space,
            gamma=gamma,
            sigma=sigma,
        )

    def privatize(self, df: pd.DataFrame, cluster: str, treatment: str, outcome: str,
                  random_state: int | np.random.Generator | None = None,
                  evaluation: bool = False) -> ClusterDPPublished:
        """Deprecated: the published artefact of a release charged like :meth:`fit` (it drew
        uncharged noise before); use ``fit(...).published``."""
        deprecated("ClusterDP.privatize", "fit(...).published")
        rng = self._seeded(random_state, evaluation)
        prepared = self.check_input(df, cluster, treatment, outcome)
        result = self._charged(prepared, evaluation=evaluation,
                               draw=lambda: self._private_release(prepared, evaluation=evaluation,
                                                                  rng=rng))
        published = cast(ClusterDPResult, result).published
        assert published is not None, "bug: a fresh release holds its published data"
        return published

    def _privatize(
        self,
        df: pd.DataFrame,
        cluster: str,
        treatment: str,
        outcome: str,
        random_state: int | np.random.Generator | None = None,
        evaluation: bool = False,
    ) -> ClusterDPPublished:
        """The published artefact alone, uncharged (the caller accounts for it); all checks of
        :meth:`check_input` run before any noise is drawn.

        Parameters
        ----------
        df : DataFrame with one row per unit.
        cluster, treatment, outcome : column names; treatment must be 0/1 and outcomes must lie
            in Y.
        random_state : int or numpy Generator seeding the noise, in evaluation mode only;
            None draws from OS entropy (:func:`dpcausal.noise.secure_rng`), as every release does.
        evaluation : bool
            True for a non-private study that may be reproduced from ``random_state``.
        """
        rng = self._seeded(random_state, evaluation)
        prepared = self.check_input(df, cluster, treatment, outcome)
        return self._draw(prepared.data, _noise_rng(None) if rng is None else rng)

    @staticmethod
    def _seeded(random_state: int | np.random.Generator | None, evaluation: bool
                ) -> np.random.Generator | None:
        """The generator ``random_state`` seeds (evaluation only), else None (OS entropy)."""
        if random_state is not None and not evaluation:
            raise ValueError(
                "random_state seeds the noise: evaluation mode only (evaluation=True); a release "
                "draws its noise from OS entropy"
            )
        return None if random_state is None else _noise_rng(random_state)


def _noise_rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    """A seeded generator (evaluation only) or, for ``None``, :func:`secure_rng` (OS entropy)."""
    if seed is None:
        return secure_rng()
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def secret_order(cidx: np.ndarray, z: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Publication order of the units: grouped by the public (cluster, arm), in a fresh random
    order within each group.

    The source's row order may depend on the outcomes (a file sorted by outcome); publishing in
    it would tell every label whatever the noise. The order drawn here is a function of the
    public groups and of ``rng`` only (OS entropy in a release).
    """
    perm = rng.permutation(z.size)
    return perm[np.lexsort((z[perm], cidx[perm]))]  # lexsort is stable: random within groups


def cluster_codes(col: pd.Series | np.ndarray,
                  name: str = "cluster") -> tuple[np.ndarray, np.ndarray]:
    """Integer codes 0..C-1 of the cluster labels (sorted), and the labels; missing labels are
    refused (every unit needs a cluster, spec §1.1)."""
    codes, labels = pd.factorize(pd.Series(col), sort=True)
    if np.any(codes < 0):
        raise ValueError(f"{name} has missing values; every unit needs a cluster")
    return codes.astype(np.int64), np.asarray(labels)


def group_sizes(z: np.ndarray, cidx: np.ndarray, clusters: int) -> np.ndarray:
    """The (cluster, arm) group sizes n_{c,a} (spec §1.1) as a (clusters, 2) array, arm 0 then
    1, of the treatment codes ``z`` and cluster codes ``cidx`` (:func:`cluster_codes`)."""
    return np.bincount(2 * cidx + z, minlength=2 * clusters).reshape(clusters, 2)


def treatment_codes(col: pd.Series, name: str = "treatment") -> np.ndarray:
    """The 0/1 arms of a treatment column (spec §1.1); anything else is refused."""
    z = col.to_numpy()
    ok = pd.notna(z) & np.isin(z, [0, 1])
    if not np.all(ok):
        raise ValueError(
            f"treatment column {name!r} must hold only 0/1, got e.g. {z[~ok][:3].tolist()}"
        )
    return z.astype(np.int64)


def _priors_frame(
    q_t: np.ndarray, labels: np.ndarray, space: ResponseSpace, pooled: bool
) -> pd.DataFrame:
    """Long table (cluster, arm, value, q_tilde) of the published priors."""
    C, K = labels.size, space.K
    q = np.repeat(q_t[None], C, axis=0) if pooled else q_t.reshape(C, 2, K)
    return pd.DataFrame(
        {
            "cluster": np.repeat(labels, 2 * K),
            "arm": np.tile(np.repeat([0, 1], K), C),
            "value": np.tile(space.values, 2 * C),
            "q_tilde": q.ravel(),
        }
    )


# the names before issue 27 §5, for one release (``ClusterDPRelease`` was the published data,
# which is not a Release)
__getattr__ = renamed_names(__name__, {"ClusterDPRelease": "ClusterDPPublished"})
