"""A look at the values before a release that costs nothing: ``check_data``.

The curator already holds the data, so reading them on the curator's side and showing the
counts to the curator alone spends no privacy budget. The result is NON-PRIVATE: it goes to
the curator's terminal or notebook only, never to the ledger, MLflow, Prefect or a report, and
must not be shared (a count of missing values or of an arm is a fact about the data).

It reports what the release's declared missing-value policy (:mod:`dpcausal.missing`) will do:
rows, missing and non-finite values per role, values a role cannot use (a treatment not coded
0/1, an outcome outside the public bounds, which is clipped), the arm sizes, the rows the
release will count as n and the rows per fold at the planned K, of each arm too, with a warning
when an arm has fewer than d + 1 rows per fold (the rows a linear model of one arm needs in a
fold, with its intercept: fewer, and most folds' models of that arm fall back to a constant).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from dpcausal.missing import missing_covariates, unusable_rows

COLUMNS = ["role", "column", "rows", "missing", "non_finite", "out_of_range", "out_of_range_share"]

WARNING = ("NON-PRIVATE: these counts describe the data themselves. Keep them on the curator's "
           "side; never share, publish or log them.")


@dataclass(frozen=True)
class DataCheck:
    """What ``check_data`` found (non-private). ``table`` has one row per column used (role,
    column, rows, missing, non_finite, out_of_range: a treatment not 0/1 or an outcome outside the
    bounds, and its share); ``facts`` the totals, arm sizes, the release's n under the policy,
    K and rows per fold."""

    table: pd.DataFrame
    facts: dict[str, Any] = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """The per-column table (a copy)."""
        return self.table.copy()

    def __str__(self) -> str:
        width = max(len(k) for k in self.facts) if self.facts else 0
        lines = [f"{k.ljust(width)}  {_fmt(v)}" for k, v in self.facts.items()]
        return "\n".join([WARNING, "", self.table.to_string(index=False), "", *lines])

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        facts = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(_fmt(v))}</td></tr>"
                        for k, v in self.facts.items())
        return (f"<div><p><strong>{html.escape(WARNING)}</strong></p>"
                f"{self.table.to_html(index=False)}<table>{facts}</table></div>")


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def describe(frame: pd.DataFrame, roles: Mapping[str, str | Sequence[str] | None], *,
             treatment: str | None = None, outcome: str | None = None,
             outcome_bounds: tuple[float, float] | None = None) -> pd.DataFrame:
    """The per-column table of :class:`DataCheck` for ``roles`` ({role: column or columns});
    ``treatment``/``outcome`` name the role whose values must be 0/1 / lie in the bounds."""
    rows = []
    for role, names in roles.items():
        if names is None:
            continue
        for name in [names] if isinstance(names, str) else list(names):
            col = frame[name]
            numeric = pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col)
            values = col.to_numpy(dtype=float, na_value=np.nan) if numeric else None
            missing = int(col.isna().sum())
            non_finite = int(np.isinf(values).sum()) if values is not None else 0
            unusable = 0
            if role == treatment and values is not None:
                unusable = int((np.isfinite(values) & ~np.isin(values, (0.0, 1.0))).sum())
            elif role == treatment and not pd.api.types.is_bool_dtype(col):
                unusable = int(col.notna().sum())        # not numeric: every value unusable
            if role == outcome and values is not None and outcome_bounds is not None:
                lo, hi = outcome_bounds
                unusable = int((np.isfinite(values) & ((values < lo) | (values > hi))).sum())
            rows.append({"role": role, "column": str(name), "rows": len(col), "missing": missing,
                         "non_finite": non_finite, "out_of_range": unusable,
                         "out_of_range_share": unusable / len(col) if len(col) else 0.0})
    return pd.DataFrame(rows, columns=COLUMNS)


def check_roles_data(frame: pd.DataFrame, roles: dict[str, Any],
                     outcome_bounds: tuple[float, float] | None = None) -> DataCheck:
    """:class:`DataCheck` of any mechanism from its column roles ({role: column(s)}; a role
    named "treatment" must be 0/1, one named "outcome" lie in ``outcome_bounds``): per-column
    counts, rows, rows with a missing value in a role, and the arm sizes."""
    used = {role: names for role, names in roles.items()
            if isinstance(names, str) or (isinstance(names, (list, tuple)) and names)}
    table = describe(frame, used, treatment="treatment", outcome="outcome",
                     outcome_bounds=outcome_bounds)
    names = [c for v in used.values() for c in ([v] if isinstance(v, str) else v)]
    facts: dict[str, Any] = {"rows": len(frame),
                             "rows with a missing value": int(frame[names].isna().any(axis=1)
                                                              .sum())}
    if isinstance(used.get("treatment"), str):
        arm = frame[used["treatment"]]
        facts["treated"], facts["control"] = int((arm == 1).sum()), int((arm == 0).sum())
    return DataCheck(table=table, facts=facts)


def check_ate_data(frame: pd.DataFrame, *, treatment: str, outcome: str,
                   covariates: Sequence[str], outcome_bounds: tuple[float, float],
                   missing: str, n_folds: Callable[[int, int], int],
                   left_out: Sequence[str] = (), folds: bool = True) -> DataCheck:
    """:class:`DataCheck` of the core release: per-column counts, arms, what the policy
    ``missing`` does (rows dropped or scored 0), n and rows per fold at ``n_folds(n, d)``; the
    covariates missing in every row (each adds an indicator, raises d and lowers K: a text or id
    column read as a number?) and the ``left_out`` columns the default covariates skipped;
    with ``folds`` (an ensemble release, not one from noisy sums) each arm's rows per fold, and
    a warning under d + 1 of either arm."""
    table = describe(frame, {"treatment": treatment, "outcome": outcome,
                             "covariate": list(covariates)},
                     treatment="treatment", outcome="outcome", outcome_bounds=outcome_bounds)
    A = frame[treatment].to_numpy(dtype=float, na_value=np.nan) \
        if pd.api.types.is_numeric_dtype(frame[treatment]) else np.full(len(frame), np.nan)
    Y = frame[outcome].to_numpy(dtype=float, na_value=np.nan) \
        if pd.api.types.is_numeric_dtype(frame[outcome]) else np.full(len(frame), np.nan)
    bad_x = missing_covariates(frame[list(covariates)]).any(axis=1)
    bad_ay = unusable_rows(A, Y)
    rows, d = len(frame), len(covariates)
    complete = int((~(bad_x | bad_ay)).sum())
    n = complete if missing == "drop_public_count" else rows
    facts: dict[str, Any] = {
        "rows": rows,
        "treated": int((A == 1).sum()), "control": int((A == 0).sum()),
        "rows with a missing covariate": int(bad_x.sum()),
        "rows without a usable treatment or outcome": int(bad_ay.sum()),
        "missing-value policy": missing,
    }
    if missing == "drop_public_count":
        facts["rows dropped"] = rows - n
    elif missing == "drop":
        facts["complete cases (released noisy)"] = complete
    else:
        facts["share of rows scored 0 (bias toward 0)"] = float(bad_ay.mean()) if rows else 0.0
    facts["n of the release"] = n
    empty = [str(c) for c in covariates if bool(frame[c].isna().all())]
    if empty:
        facts["covariates missing in every row: " + ", ".join(empty)] = (
            "each adds an indicator column and raises d, which lowers K and widens the CI; a text "
            "or id column? leave it out (name columns.covariates / covariates=, or declare it "
            "str in data.dtypes)")
    if left_out:
        facts["not covariates (not a number): " + ", ".join(map(str, left_out))] = (
            "name them in covariates= to use them")
    try:
        K = n_folds(n, d)
        facts["n_folds (planned K)"] = K
        facts["rows per fold"] = n / K
    except ValueError as exc:                    # e.g. too few rows for any K
        facts["n_folds (planned K)"] = f"none: {exc}"
        return DataCheck(table=table, facts=facts)
    if not folds:
        return DataCheck(table=table, facts=facts)
    arms = {"treated": facts["treated"], "control": facts["control"]}
    facts.update({f"{arm} rows per fold": count / K for arm, count in arms.items()})
    floor = d + 1
    arm, fewest = min(arms.items(), key=lambda item: item[1])
    if fewest / K < floor:
        facts["warning"] = (
            f"under {floor} {arm} rows per fold (d + 1 for d = {d} covariates): most folds' "
            f"models of the {arm} arm fall back to a constant; K <= {max(fewest // floor, 2)} "
            f"keeps {floor} (estimator.n_folds)")
    return DataCheck(table=table, facts=facts)
