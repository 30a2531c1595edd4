"""Pooling private ATE releases: releases of one dataset first, then the studies (spec
dp_ate_ensemble.md §4)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpcausal.accounting import DEFAULT_DELTA, compose_gdp, gdp_epsilon
from dpcausal.meta.privacy import privacy_position, shared_groups
from dpcausal.meta.result import MODELS, MetaResult
from dpcausal.meta.studies import STUDY_COLUMNS, is_missing, study_table
from dpcausal.meta.weighting import critical_value, custom_weights, dersimonian_laird, named_weights


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
    repeated noisy measurements of one estimate (:func:`pool_same_data`), so the shared sampling
    variance is counted once, or refused when their noise variances are not known. Each study
    keeps the CI it published; a study that published none gets ``ate ± critical·se``.

    Privacy: this function reads only released numbers, so it is post-processing and charges
    nothing (spec §2.6). A person in several studies has exposure ``sqrt(sum zeta_j^2)`` over
    those studies; declare such studies in ``shared_people`` to have it reported.
    """
    crit = critical_value(level, critical)
    table = pool_same_data(study_table(releases), crit)
    n_studies = len(table)
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    if model == "random" and n_studies < 2:
        raise ValueError(f"model='random' needs at least 2 studies to estimate the between-study "
                         f"variance, got {n_studies}; use model='fixed' or add studies")
    custom = custom_weights(weights, n_studies)
    groups = shared_groups(shared_people, table)

    ate = table["ate"].to_numpy(dtype=float)
    var = table["variance"].to_numpy(dtype=float)
    if model == "random":
        tau2, q, i2 = dersimonian_laird(ate, var)
    else:
        tau2, q, i2 = 0.0, None, None
    lam = custom if custom is not None else named_weights(weights, var + tau2)
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
        studies=table[list(STUDY_COLUMNS)], privacy=privacy_position(table, groups),
    )


def pool_same_data(table: pd.DataFrame, crit: float) -> pd.DataFrame:
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
        if len(group) == 1 or is_missing(dataset):
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
        zeta = compose_gdp(zetas) if not any(is_missing(z) for z in zetas) else None
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
