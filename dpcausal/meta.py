"""Meta-analysis of private ATE releases: pool several studies' released (ATE, variance) pairs.

Every study publishes a private ATE and a private variance (the core release of spec
dp_ate_ensemble.md §2.7). :func:`combine` reads only those released numbers, so it is
post-processing and costs no privacy (spec §2.6); the result says so in ``privacy`` and reports
each study's zeta and, for studies the analyst declares to share people, their composed exposure.

References
----------
Lebeda, Even, Bellet, Josse (2025), "Model agnostic differentially private causal inference", §5
(Proposition 1); spec dp_ate_ensemble.md §4 and erratum §8 item 7.
DerSimonian, Laird (1986), "Meta-analysis in clinical trials", Controlled Clinical Trials 7.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from dpcausal._results import ResultMixin
from dpcausal.accounting import DEFAULT_DELTA, compose_gdp, gdp_epsilon

if TYPE_CHECKING:
    from matplotlib.axes import Axes

WEIGHTINGS = ("inverse_variance", "paper_sqrt", "equal")
MODELS = ("fixed", "random")
CRITICALS = ("normal", "paper")
#: p1 of the paper's CI constant (eq. 12, spec §3): c = Phi^{-1}(1 - p/2 + p1/2) = 2.0537 at p=0.05.
PAPER_P1 = 0.01
_STUDY_COLUMNS = ("label", "ate", "variance", "se", "ci_low", "ci_high", "zeta", "epsilon",
                  "delta", "unit", "mechanism", "dataset", "releases", "n", "weight")
_RECORD_KEYS = ("label", "ate", "variance", "ci_low", "ci_high", "zeta", "epsilon", "delta",
                "unit", "mechanism", "dataset", "noise_variance", "n")


@dataclass(frozen=True, eq=False)
class MetaResult(ResultMixin):
    """Pooled estimate of several private ATE releases (returned by :func:`combine`).

    Attributes
    ----------
    ate, variance, se : float
        Pooled ATE, its variance ``sum_j w_j^2 (V_j + tau2)`` and standard error.
    ci : tuple of float
        ``ate -/+ critical_value * se``.
    level : float
        Confidence level of ``ci``.
    critical, critical_value : str, float
        ``"normal"`` (Phi^{-1}(1 - (1-level)/2), 1.96 at 95%) or ``"paper"`` (2.0537 at 95%).
    weights : tuple of float
        The pooling weights, non-negative and summing to one, in study order.
    weighting : str
        ``"inverse_variance"``, ``"paper_sqrt"``, ``"equal"`` or ``"custom"``.
    model : str
        ``"fixed"`` or ``"random"`` (DerSimonian-Laird).
    n_studies : int
        Number of pooled studies.
    tau2, q, i2 : float or None
        Between-study variance, Cochran's Q and I^2 (``model="random"`` only; None for fixed).
    studies : pandas.DataFrame
        One row per study: label, ate, variance, se, ci_low, ci_high (with the same critical
        value as the pooled CI), zeta, n, weight.
    privacy : dict
        The privacy position: ``additional_charge`` (always 0: post-processing), per-study
        ``study_zeta`` / ``study_epsilon``, the declared ``shared_groups`` with their composed
        zeta, ``composed_zeta`` / ``composed_epsilon`` (largest over the declared groups, None if
        none declared), ``same_data`` (each dataset whose several releases were pooled as one
        study, with their composed zeta) and ``max_individual_zeta``, the worst exposure of any
        one person under the declaration (None if some study's zeta is unknown).
    """

    ate: float
    variance: float
    se: float
    ci: tuple[float, float]
    level: float
    critical: str
    critical_value: float
    weights: tuple[float, ...]
    weighting: str
    model: str
    n_studies: int
    tau2: float | None
    q: float | None
    i2: float | None
    studies: pd.DataFrame
    privacy: dict

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")
        if not (math.isfinite(self.variance) and self.variance > 0):
            raise ValueError(f"variance must be finite and > 0, got {self.variance!r}")
        if not math.isclose(self.se, math.sqrt(self.variance), rel_tol=1e-12):
            raise ValueError(f"se must equal sqrt(variance), got se={self.se!r}")
        if not self.ci[0] <= self.ate <= self.ci[1]:
            raise ValueError(f"ci must contain ate, got ci={self.ci!r}, ate={self.ate!r}")
        if len(self.weights) != self.n_studies or len(self.studies) != self.n_studies:
            raise ValueError("weights and studies must have one entry per study")
        if min(self.weights) < 0 or not math.isclose(math.fsum(self.weights), 1.0, abs_tol=1e-9):
            raise ValueError(f"weights must be >= 0 and sum to 1, got {self.weights!r}")
        set_fields = [v is not None for v in (self.tau2, self.q, self.i2)]
        if set_fields != [self.model == "random"] * 3:
            raise ValueError("tau2, q and i2 are set for model='random' and None for 'fixed'")
        object.__setattr__(self, "studies", self.studies.copy())
        object.__setattr__(self, "privacy", dict(self.privacy))

    def __str__(self) -> str:
        model = "fixed-effect" if self.model == "fixed" else "random-effects (DerSimonian-Laird)"
        pct = f"{100 * self.level:g}%"
        lines = [f"MetaResult: {model} pooling of {self.n_studies} private releases, "
                 f"{self.weighting} weights, {pct} CI with critical value "
                 f"{self.critical_value:.4f}"]
        rows = [(str(r.label), r.ate, r.se, (r.ci_low, r.ci_high), _opt(r.zeta, ".3g"),
                 _opt(r.n, ".0f"), r.weight) for r in self.studies.itertuples()]
        rows.append(("pooled", self.ate, self.se, self.ci, "", "", 1.0))
        width = max(len("label"), *(len(r[0]) for r in rows))
        header = f"{'label':<{width}}  {'ate':>9}  {'se':>8}  {pct + ' CI':^21}  " \
                 f"{'zeta':>6}  {'n':>8}  {'weight':>6}"
        lines += [header, "-" * len(header)]
        for i, (label, ate, se, ci, zeta, n, w) in enumerate(rows):
            if i == len(rows) - 1:
                lines.append("-" * len(header))
            interval = f"[{ci[0]:.4f}, {ci[1]:.4f}]"
            lines.append(f"{label:<{width}}  {ate:>9.4f}  {se:>8.4f}  {interval:^21}  "
                         f"{zeta:>6}  {n:>8}  {w:>6.3f}")
        if self.model == "random":
            assert self.tau2 is not None and self.q is not None and self.i2 is not None, \
                "bug: a random-effects result without its heterogeneity"
            lines.append(f"heterogeneity: tau2 = {self.tau2:.4g}, Q = {self.q:.4g} "
                         f"(df {self.n_studies - 1}), I2 = {100 * self.i2:.1f}%")
        lines.append(f"privacy: {self.privacy['statement']}")
        for group in self.privacy["shared_groups"]:
            zeta = ("" if group["composed_zeta"] is None
                    else f"zeta {group['composed_zeta']:.4g}, ")
            lines.append(f"  studies {', '.join(group['studies'])} share people: composed "
                         f"{zeta}epsilon {group['composed_epsilon']:.4g} at delta "
                         f"{group['composed_delta']:.3g}")
        if self.privacy["max_individual_zeta"] is not None:
            lines.append(f"  worst exposure of any one person: zeta "
                         f"{self.privacy['max_individual_zeta']:.4g}")
        return "\n".join(lines)

    def plot(self, ax: Axes | None = None) -> Axes:
        """The forest plot (studies, pooled diamond, zeta and weights, privacy notes) on ``ax``,
        or on a new figure sized to the studies; returns the Axes. The CLI's ``forest.png`` is
        this figure."""
        from dpcausal._forest import forest

        return forest(self, ax)


def combine(
    releases: Any,
    weights: str | Sequence[float] | np.ndarray = "inverse_variance",
    model: str = "fixed",
    level: float = 0.95,
    shared_people: Sequence[Any] | None = None,
    critical: str = "normal",
) -> MetaResult:
    """Pool private ATE releases into one estimate: spec dp_ate_ensemble.md §4.

    Parameters
    ----------
    releases : sequence of releases or dicts, or pandas.DataFrame
        The studies: any :class:`dpcausal.Release` (of any mechanism) or its ``to_dict()``, or
        any object or dict with ``ate`` and ``se`` (or ``variance``), and optionally ``ci``,
        ``privacy`` (a :class:`dpcausal.Privacy` or its dict: epsilon, delta, unit, mechanism,
        zeta), ``zeta``, ``n``, ``label`` and ``dataset`` (what identifies the data released).
        A DataFrame has columns ``ate``, ``se`` or ``variance`` and optionally the others
        (without a label column, a non-default index names the studies). A study without a
        label is named by what identifies it (dataset, mechanism, estimator, K).
    weights : {"inverse_variance", "paper_sqrt", "equal"} or array-like
        ``"inverse_variance"`` (default) weights by ``1/V_j``; ``"paper_sqrt"`` by
        ``V_j^{-1/2}`` (Proposition 1 as printed); ``"equal"`` by 1; an array gives one
        non-negative weight per study (normalised to sum to one). Must be public or a function of
        released numbers (spec §1.3).
    model : {"fixed", "random"}
        ``"fixed"``: one common effect (the paper's setting). ``"random"``: DerSimonian-Laird
        between-study variance ``tau2``; the named weightings then use ``V_j + tau2`` in place of
        ``V_j``, custom weights are used as given, and the pooled variance is
        ``sum_j w_j^2 (V_j + tau2)`` in every case. Needs at least two studies.
    level : float
        Confidence level of the pooled CI, in (0, 1).
    shared_people : sequence of labels, or sequence of sequences of labels, optional
        Studies the analyst declares may contain the same people (one group, or several groups).
        Their composed exposure ``sqrt(sum zeta_j^2)`` is reported; it is not a new charge.
    critical : {"normal", "paper"}
        ``"normal"``: ``Phi^{-1}(1 - (1-level)/2)`` (1.96 at 95%, spec §4 decision).
        ``"paper"``: the paper's eq. 12 constant ``Phi^{-1}(1 - p/2 + p1/2)`` with
        ``p = 1 - level``, ``p1 = 0.01`` (2.0537 at 95%); needs ``level < 0.98``.

    Returns
    -------
    MetaResult

    Notes
    -----
    Pooled estimate and variance (spec §4):

    .. math:: \\hat\\tau_{meta} = \\sum_j \\lambda_j \\hat\\tau_j, \\qquad
              \\hat V_{meta} = \\sum_j \\lambda_j^2 (\\hat V_j + T^2),

    with ``T^2 = 0`` for the fixed-effect model. Random effects (DerSimonian-Laird, spec §4):
    ``w_j = 1/V_j``, ``Q = sum_j w_j (tau_j - tau_FE)^2``,
    ``T^2 = max(0, (Q - (N-1)) / (sum w - sum w^2 / sum w))``,
    ``I^2 = max(0, (Q - (N-1)) / Q)``.

    Departure from the paper (spec §8 item 7): Proposition 1's weights ``∝ V_j^{-1/2}`` are not
    variance-minimising; the default is inverse-variance weighting and ``"paper_sqrt"`` keeps
    the printed rule. The paper has no meta CI; the CI here is the spec §4 decision.

    Releases of the same data (the same ``dataset``) are not independent studies: their noise
    draws are independent but their sampling error is one and the same. They are pooled first as
    repeated noisy measurements of one estimate (:func:`_pool_same_data`), so the shared sampling
    variance is counted once, or refused when their noise variances are not known. Each study
    keeps the CI it published; a study that published none gets ``ate ± critical·se``.

    Privacy: this function reads only released numbers, so it is post-processing and charges
    nothing (spec §2.6). A person in several studies has exposure ``sqrt(sum zeta_j^2)`` over
    those studies; declare such studies in ``shared_people`` to have it reported.
    """
    crit = _critical_value(level, critical)
    table = _pool_same_data(_study_table(releases), crit)
    n_studies = len(table)
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    if model == "random" and n_studies < 2:
        raise ValueError(f"model='random' needs at least 2 studies to estimate the between-study "
                         f"variance, got {n_studies}; use model='fixed' or add studies")
    custom = _custom_weights(weights, n_studies)
    groups = _shared_groups(shared_people, table)

    ate = table["ate"].to_numpy(dtype=float)
    var = table["variance"].to_numpy(dtype=float)
    if model == "random":
        tau2, q, i2 = _dersimonian_laird(ate, var)
    else:
        tau2, q, i2 = 0.0, None, None
    lam = custom if custom is not None else _named_weights(weights, var + tau2)
    pooled = float(np.dot(lam, ate))
    pooled_var = float(np.dot(lam * lam, var + tau2))
    se = math.sqrt(pooled_var)

    table["se"] = np.sqrt(var)
    unpublished = table["ci_low"].isna() | table["ci_high"].isna()
    table.loc[unpublished, "ci_low"] = (ate - crit * table["se"])[unpublished]
    table.loc[unpublished, "ci_high"] = (ate + crit * table["se"])[unpublished]
    table["weight"] = lam
    return MetaResult(
        ate=pooled, variance=pooled_var, se=se, ci=(pooled - crit * se, pooled + crit * se),
        level=float(level), critical=critical, critical_value=crit,
        weights=tuple(float(w) for w in lam),
        weighting="custom" if custom is not None else str(weights), model=model,
        n_studies=n_studies, tau2=tau2 if model == "random" else None, q=q, i2=i2,
        studies=table[list(_STUDY_COLUMNS)], privacy=_privacy_position(table, groups),
    )


def _dersimonian_laird(ate: np.ndarray, var: np.ndarray) -> tuple[float, float, float]:
    """(tau2, Q, I^2) by DerSimonian-Laird with w_j = 1/V_j: spec dp_ate_ensemble.md §4."""
    w = 1.0 / var
    fixed = np.dot(w, ate) / w.sum()
    q = float(np.dot(w, (ate - fixed) ** 2))
    df = len(ate) - 1
    scale = w.sum() - np.dot(w, w) / w.sum()
    tau2 = max(0.0, (q - df) / scale)
    i2 = max(0.0, (q - df) / q) if q > 0 else 0.0
    return float(tau2), q, float(i2)


def _named_weights(weighting: Any, var: np.ndarray) -> np.ndarray:
    """Normalised weights 1/V (inverse variance), V^{-1/2} (Prop. 1, spec §4) or equal."""
    if weighting == "inverse_variance":
        raw = 1.0 / var
    elif weighting == "paper_sqrt":
        raw = 1.0 / np.sqrt(var)
    else:  # "equal"; anything else was rejected by _custom_weights
        raw = np.ones_like(var)
    return raw / raw.sum()


def _custom_weights(weights: Any, n_studies: int) -> np.ndarray | None:
    """Validate ``weights``: None for a named weighting, else the normalised custom array."""
    if isinstance(weights, str):
        if weights not in WEIGHTINGS:
            raise ValueError(f"weights must be one of {WEIGHTINGS} or an array of {n_studies} "
                             f"non-negative numbers, got {weights!r}")
        return None
    try:
        lam = np.asarray(weights, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"weights must be one of {WEIGHTINGS} or an array of {n_studies} "
                        f"non-negative numbers, got {weights!r}") from None
    if lam.shape != (n_studies,):
        raise ValueError(f"weights must have one entry per study ({n_studies}), got shape "
                         f"{lam.shape}; pass one weight per release, in the same order")
    if not np.all(np.isfinite(lam)) or np.any(lam < 0):
        raise ValueError(f"weights must be finite and >= 0, got {lam.tolist()}; "
                         f"use non-negative weights")
    if lam.sum() <= 0:
        raise ValueError(f"weights must have a positive sum, got {lam.tolist()}; "
                         f"give at least one study a positive weight")
    return lam / lam.sum()


def _critical_value(level: float, critical: str) -> float:
    """Normal quantile for the meta CI (spec §4 decision), or the eq. 12 constant (spec §3)."""
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level must be a number in (0, 1), got {level!r}; e.g. level=0.95")
    p = 1.0 - level
    if critical == "normal":
        return float(norm.ppf(1.0 - p / 2.0))
    if critical == "paper":
        if not PAPER_P1 < p / 2.0:
            raise ValueError(f"critical='paper' uses p1={PAPER_P1} and needs p1 < (1-level)/2, "
                             f"i.e. level < {1 - 2 * PAPER_P1:g}, got level={level!r}; "
                             f"use critical='normal'")
        return float(norm.ppf(1.0 - p / 2.0 + PAPER_P1 / 2.0))
    raise ValueError(f"critical must be one of {CRITICALS}, got {critical!r}")


# --- reading the releases ---------------------------------------------------------------------

def _study_table(releases: Any) -> pd.DataFrame:
    """One row per release (label, ate, variance, published CI, privacy, dataset, n), validated."""
    if isinstance(releases, pd.DataFrame):
        records = _records_from_frame(releases)
    elif isinstance(releases, (str, bytes, Mapping)) or hasattr(releases, "ate") \
            or not isinstance(releases, Iterable):
        raise TypeError(f"releases must be a list of releases/dicts or a DataFrame, got "
                        f"{type(releases).__name__}; wrap a single release in a list, or use "
                        f"pandas.DataFrame(...) for a dict of columns")
    else:
        records = [_record(item, j) for j, item in enumerate(releases)]
    if not records:
        raise ValueError("releases is empty; pass at least one study")
    _name_studies(records)
    labels = [r["label"] for r in records]
    duplicates = sorted({x for x in labels if labels.count(x) > 1})
    if duplicates:
        raise ValueError(f"study labels must be unique, got duplicates {duplicates}; "
                         f"give each release its own label")
    table = pd.DataFrame.from_records(records, columns=list(_RECORD_KEYS))
    table["n"] = pd.Series([r["n"] for r in records], dtype=object)  # ints, None where unknown
    table["releases"] = 1
    return table


def _records_from_frame(frame: pd.DataFrame) -> list[dict]:
    missing = [c for c in ("ate", "variance") if c not in frame.columns]
    if missing and not (missing == ["variance"] and "se" in frame.columns):
        raise ValueError(f"releases DataFrame needs columns 'ate' and 'variance' (or 'se'), "
                         f"missing {missing} (has {list(frame.columns)})")
    use_index = "label" not in frame.columns and not isinstance(frame.index, pd.RangeIndex)
    rows = []
    for j, (idx, row) in enumerate(frame.iterrows()):
        item = {k: row[k] for k in frame.columns}
        if use_index:
            item["label"] = idx
        rows.append(_record(item, j))
    return rows


def _record(item: Any, j: int) -> dict:
    """Read one study from a release object or a dict and validate its numbers."""
    where = f"releases[{j}]"
    if isinstance(item, Mapping):
        get = item.get
    elif hasattr(item, "ate"):
        def get(key: str, default: Any = None) -> Any:
            value = getattr(item, key, default)
            return value() if key == "noise_share" and callable(value) else value
    else:
        raise TypeError(f"{where} must be a release (attributes ate, se), a dict or a "
                        f"DataFrame row, got {type(item).__name__}")
    if get("ate") is None:
        raise ValueError(f"{where} has no 'ate': that release published no ATE to pool")
    ate = _number(get("ate"), f"{where}.ate")
    variance = _variance(get, where)
    privacy = _privacy_fields(get, where)
    share = get("noise_share")
    noise_variance = None if _missing(share) else _number(share, f"{where}.noise_share") * variance
    ci = get("ci")
    ci_low, ci_high = (None, None) if _missing(ci) else _interval(ci, f"{where}.ci")
    n = get("n")
    if not _missing(n):
        n_float = _number(n, f"{where}.n")
        if n_float != int(n_float) or n_float < 1:
            raise ValueError(f"{where}.n must be a positive integer (or missing), got {n!r}")
        n = int(n_float)
    else:
        n = None
    dataset = get("dataset", get("dataset_id"))
    label = get("label")
    return {"label": None if _missing(label) else str(label), "ate": ate, "variance": variance,
            "ci_low": ci_low, "ci_high": ci_high, **privacy,
            "dataset": None if _missing(dataset) else str(dataset),
            "noise_variance": noise_variance, "n": n,
            "_identity": _identity(get, dataset, privacy["mechanism"])}


def _variance(get: Any, where: str) -> float:
    se, variance = get("se"), get("variance")
    if se is None and variance is None:
        raise ValueError(f"{where}.variance is None: that study released no variance (no se); "
                         f"pooling needs each study's private se (release it with a CI)")
    key, value = ("variance", variance) if se is None else ("se", se)
    value = _number(value, f"{where}.{key}")
    if not value > 0:
        raise ValueError(f"{where}.{key} must be > 0, got {value!r}; a private standard error "
                         f"is always positive, check the input")
    return value if key == "variance" else value * value


def _privacy_fields(get: Any, where: str) -> dict[str, Any]:
    """zeta, epsilon, delta, unit, mechanism of a study, from its ``privacy`` or flat keys."""
    privacy = get("privacy")
    if isinstance(privacy, Mapping):
        pget = privacy.get
    else:
        def pget(key: str, default: Any = None) -> Any:
            return getattr(privacy, key, default)
    out: dict[str, Any] = {}
    for key in ("zeta", "epsilon", "delta"):
        value = get(key)
        value = pget(key) if _missing(value) else value
        value = None if _missing(value) else _number(value, f"{where}.{key}")
        if key != "delta" and value is not None and not value > 0:
            raise ValueError(f"{where}.{key} must be > 0 (or missing), got {value!r}")
        out[key] = value
    for key in ("unit", "mechanism"):
        value = get(key) if not _missing(get(key)) else pget(key)
        out[key] = None if _missing(value) else str(value)
    if out["epsilon"] is None and out["zeta"] is not None:
        out["epsilon"], out["delta"] = gdp_epsilon(out["zeta"], DEFAULT_DELTA), DEFAULT_DELTA
    return out


def _interval(ci: Any, name: str) -> tuple[float, float]:
    try:
        lo, hi = ci
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a pair (low, high), got {ci!r}") from None
    return _number(lo, f"{name}[0]"), _number(hi, f"{name}[1]")


def _identity(get: Any, dataset: Any, mechanism: Any) -> str:
    """What identifies a release when it has no label: dataset, kind, estimator, K, bounds."""
    params = get("params")
    params = params if isinstance(params, Mapping) else {}
    parts = [dataset, get("kind") or mechanism, get("estimator") or params.get("estimator")]
    k = get("n_folds") or params.get("n_folds")
    bounds = params.get("outcome_bounds")
    text = " ".join(str(p) for p in parts if not _missing(p))
    if not _missing(k):
        text += f" K={k}"
    if isinstance(bounds, (list, tuple)) and len(bounds) == 2:
        text += f" Y in [{bounds[0]:g}, {bounds[1]:g}]"
    return text.strip()


def _name_studies(records: list[dict]) -> None:
    """Label unlabelled studies by their identity, numbered where identities repeat."""
    auto = []
    for j, r in enumerate(records):
        identity = r.pop("_identity")
        if r["label"] is None:
            r["label"] = identity or f"study {j + 1}"
            auto.append(r)
    labels = [r["label"] for r in auto]
    for label in {x for x in labels if labels.count(x) > 1}:
        for i, r in enumerate((r for r in auto if r["label"] == label), start=1):
            r["label"] = f"{label} #{i}"


def _pool_same_data(table: pd.DataFrame, crit: float) -> pd.DataFrame:
    """Collapse releases of one dataset into one study: repeated noisy measurements of one
    estimate (spec dp_ate_ensemble.md §4 assumes independent studies; this is our decision).

    Release j of a dataset publishes ``tau_j = tau_hat + e_j`` with independent noise
    ``e_j ~ N(0, s_j^2)`` (``s_j^2 = noise_share_j · se_j^2``, public) and the same sampling error.
    The noise-weighted mean ``sum_j w_j tau_j``, ``w_j ∝ 1/s_j^2``, has variance
    ``S + 1/sum_j s_j^-2``, where the shared sampling variance ``S`` is taken, conservatively, as
    the largest released estimate ``max_j (se_j^2 - s_j^2)``: counted once, never divided by the
    number of releases. Without every ``s_j^2`` the releases cannot be separated and are refused.
    """
    if table["dataset"].isna().all():
        return table
    rows = []
    for dataset, group in table.groupby("dataset", sort=False, dropna=False):
        if len(group) == 1 or _missing(dataset):
            rows.extend(group.to_dict("records"))
            continue
        if group["noise_variance"].isna().any():
            raise ValueError(
                f"studies {group['label'].tolist()} are releases of the same dataset "
                f"{dataset!r}: they share one sampling error, so pooling them as independent "
                "studies would understate the variance, and their noise variances are not known "
                "to pool them as repeated measurements; pool one release per dataset")
        noise = np.maximum(group["noise_variance"].to_numpy(float), 1e-300)
        w = (1.0 / noise) / np.sum(1.0 / noise)
        sampling = max(0.0, float(np.max(group["variance"].to_numpy(float) - noise)))
        variance = sampling + 1.0 / float(np.sum(1.0 / noise))
        ate = float(np.dot(w, group["ate"].to_numpy(float)))
        zetas = group["zeta"].tolist()
        zeta = compose_gdp(zetas) if not any(_missing(z) for z in zetas) else None
        units = set(group["unit"].dropna())
        rows.append({
            "label": f"{dataset} ({len(group)} releases)", "ate": ate, "variance": variance,
            "ci_low": ate - crit * math.sqrt(variance), "ci_high": ate + crit * math.sqrt(variance),
            "zeta": zeta, "epsilon": None if zeta is None else gdp_epsilon(zeta, DEFAULT_DELTA),
            "delta": DEFAULT_DELTA if zeta is not None else None,
            "unit": units.pop() if len(units) == 1 else None,
            "mechanism": ",".join(sorted(set(group["mechanism"].dropna()))) or None,
            "dataset": dataset, "noise_variance": 1.0 / float(np.sum(1.0 / noise)),
            "n": group["n"].iloc[0], "releases": int(group["releases"].sum()),
        })
    out = pd.DataFrame.from_records(rows, columns=list(table.columns))
    out["n"] = pd.Series([r["n"] for r in rows], dtype=object)
    return out


def _number(value: Any, name: str) -> float:
    if isinstance(value, (bool, str, bytes)):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {x!r}; drop or fix that study")
    return x


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, (float, np.floating)) and math.isnan(value)) \
        or value is pd.NA


# --- privacy position ---------------------------------------------------------------------------

def _shared_groups(shared_people: Any, table: pd.DataFrame) -> list[list[str]]:
    """Normalise ``shared_people`` to a list of groups of known labels, each with known zetas."""
    if shared_people is None:
        return []
    if isinstance(shared_people, (str, bytes)) or not isinstance(shared_people, Iterable):
        raise TypeError(f"shared_people must be a list of study labels (or a list of such "
                        f"lists), got {shared_people!r}")
    items = list(shared_people)
    nested = [not isinstance(x, (str, bytes)) and isinstance(x, Iterable) for x in items]
    if any(nested) and not all(nested):
        raise TypeError(f"shared_people must be a list of labels or a list of lists of labels, "
                        f"not a mixture, got {shared_people!r}")
    groups = [list(g) for g in items] if items and all(nested) else [items]
    zeta_of = dict(zip(table["label"], table["zeta"], strict=True))
    out = []
    for group in groups:
        labels = [str(x) for x in group]
        if len(set(labels)) != len(labels) or len(labels) < 2:
            raise ValueError(f"each shared_people group must name at least 2 distinct studies, "
                             f"got {group!r}")
        unknown = [x for x in labels if x not in zeta_of]
        if unknown:
            raise ValueError(f"shared_people names unknown studies {unknown}; known labels are "
                             f"{list(zeta_of)}")
        eps_of = dict(zip(table["label"], table["epsilon"], strict=True))
        unknown_loss = [x for x in labels if _missing(zeta_of[x]) and _missing(eps_of[x])]
        if unknown_loss:
            raise ValueError(f"shared_people: studies {unknown_loss} have no zeta or epsilon, so "
                             f"their composed exposure is unknown; give each release its privacy")
        out.append(labels)
    return out


def _privacy_position(table: pd.DataFrame, groups: list[list[str]]) -> dict:
    """Privacy of the pooled result: no new charge; GDP composition over shared studies (§2.6)."""
    zeta_of = {lab: (None if _missing(z) else float(z))
               for lab, z in zip(table["label"], table["zeta"], strict=True)}
    eps_of = {lab: (None if _missing(e) else float(e))
              for lab, e in zip(table["label"], table["epsilon"], strict=True)}
    delta_of = {lab: (0.0 if _missing(d) else float(d))
                for lab, d in zip(table["label"], table["delta"], strict=True)}
    shared: list[dict[str, Any]] = []
    for labels in groups:
        zetas = [z for z in (zeta_of[x] for x in labels) if z is not None]
        if len(zetas) == len(labels):  # Gaussian DP composes exactly
            composed = compose_gdp(zetas)
            shared.append({"studies": labels, "composed_zeta": composed,
                           "composed_epsilon": gdp_epsilon(composed, DEFAULT_DELTA),
                           "composed_delta": DEFAULT_DELTA})
        else:  # basic composition of (epsilon, delta) across mechanisms
            shared.append({"studies": labels, "composed_zeta": None,
                           "composed_epsilon": math.fsum(eps_of[x] or 0.0 for x in labels),
                           "composed_delta": math.fsum(delta_of[x] for x in labels)})
    gdp_groups = [g for g in shared if g["composed_zeta"] is not None]
    worst_group = max(gdp_groups, key=lambda g: g["composed_zeta"]) if gdp_groups else None
    known = [z for z in zeta_of.values() if z is not None]
    max_zeta = None
    if len(known) == len(zeta_of) and len(gdp_groups) == len(shared):
        max_zeta = max(known + [g["composed_zeta"] for g in shared])
    same_data = [{"dataset": row.dataset, "label": row.label, "releases": int(row.releases),
                  "composed_zeta": None if _missing(row.zeta) else float(row.zeta)}
                 for row in table.itertuples() if row.releases > 1]
    same_notes = [f"the {s['releases']} releases of dataset {s['dataset']} compose"
                  + ("" if s["composed_zeta"] is None else f" to zeta {s['composed_zeta']:.4g}")
                  + " (pooled as one study)" for s in same_data]
    return {
        "additional_charge": 0.0,
        "statement": ("post-processing of released numbers: no additional privacy charge; "
                      "each person keeps their own study's zeta-GDP guarantee"
                      + (", composed over the studies declared to share people"
                         if shared else "")
                      + "".join(f"; {note}" for note in same_notes)),
        "same_data": same_data,
        "delta": DEFAULT_DELTA,
        "study_zeta": zeta_of,
        "study_epsilon": eps_of,
        "shared_groups": shared,
        "composed_zeta": worst_group["composed_zeta"] if worst_group else None,
        "composed_epsilon": worst_group["composed_epsilon"] if worst_group else None,
        "max_individual_zeta": max_zeta,
    }


def _opt(value: Any, fmt: str) -> str:
    return "-" if _missing(value) else format(value, fmt)
