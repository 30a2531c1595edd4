"""The planner for a release config (issue 19 §1): the data's public shape, the table over K and
the recommendation, as plain data. No Prefect import here: ``dpcausal plan`` runs these without a
server; the ``dp_plan`` flow runs them as tasks (:mod:`tasks.plan_release`)."""

from __future__ import annotations

import warnings
from typing import Any

import pandas as pd

from tasks.data import partition_footers, source_shape

TABLE_COLUMNS = ["n_folds", "n_blocks", "block_folds", "rows_per_fold", "sigma2", "ci_share",
                 "sigma1", "halfwidth", "ratio", "seconds", "feasible"]


def public_params(config: Any) -> dict[str, Any]:
    """The estimator's public parameters the planner uses (config values over library
    defaults)."""
    from dpcausal import PrivateATE

    p = PrivateATE(**config.estimator.library_kwargs()).get_params()
    if p.get("outcome_bounds") is None:
        raise ValueError("estimator.outcome_bounds is required: the noise is calibrated to them")
    keys = ("estimator", "propensity_clip", "zeta", "ci", "alpha", "p1", "sensitivity")
    return {"outcome_bounds": tuple(p["outcome_bounds"]), **{k: p[k] for k in keys}}


def best_per_k(table: pd.DataFrame) -> pd.DataFrame:
    """For each K, the (sigma2, ci_share) row with the narrowest CI: what a reader is shown."""
    order = table.sort_values(["n_folds", "halfwidth"], kind="stable")
    return order.groupby("n_folds", sort=True).head(1).reset_index(drop=True)


def plan_summary(config: Any, *, outcome_sd: float | None = None, compute_budget: float = 60.0,
                 target_halfwidth: float | None = None) -> dict[str, Any]:
    """``{"n", "d", "zeta", "recommended", "zeta_for_target", "table"}`` (JSON-ready): the shape
    from metadata or a count, the planner's table (:func:`dpcausal.ate.planner.plan`) for the
    config's public parameters and its recommended row, and the zeta that reaches
    ``target_halfwidth`` at the recommended K (None when not asked, inf when unreachable)."""
    from dpcausal.ate.planner import plan, recommended, zeta_for_halfwidth

    n, d = source_shape(config.data, config.columns)
    p = public_params(config)
    kind = "parametric" if {config.models.propensity.name, config.models.outcome.name} <= {
        "logistic", "linear"} else "other"
    table = plan(n, d, **p, model_kind=kind, outcome_sd=outcome_sd,
                 compute_budget=compute_budget)
    best = recommended(table)
    zeta = p.pop("zeta")
    needed = None
    if target_halfwidth is not None:
        needed = zeta_for_halfwidth(target_halfwidth, n, int(best["n_folds"]), **p,
                                    ci_share=float(best["ci_share"]), sigma2=str(best["sigma2"]),
                                    outcome_sd=outcome_sd,
                                    block_folds=int(best["block_folds"]))
    return {"n": n, "d": d, "zeta": zeta, "recommended": plain_row(best.to_dict()),
            "zeta_for_target": needed, "table": [plain_row(r) for r in table.to_dict("records")],
            "partitioned": partitioned_layout(config, outcome_sd)}


def partitioned_layout(config: Any, outcome_sd: float | None = None) -> dict[str, Any] | None:
    """What a partitioned source's release will use (issue 28 §3), from the footers only
    (:func:`dpcausal.ate.partitioned.plan_partitions`, the release's own public plan): partitions,
    K, B, K', the rows of the largest block and of the smallest fold (None for the full
    ensemble, whose keyed-hash folds are not balanced), and the CI half-width expected with that
    layout (:func:`dpcausal.ate.planner.layout_halfwidth`; the table's rows assume balanced
    blocks). None for other sources."""
    if config.data.partitions is None:
        return None
    from conf.kinds import build_mechanism
    from dpcausal.ate.partitioned import plan_partitions
    from dpcausal.ate.planner import layout_halfwidth

    footers = partition_footers(str(config.data.partitions))
    c = config.columns
    with warnings.catch_warnings():     # the parameter warnings are the table's and run's
        warnings.simplefilter("ignore")
        plan = plan_partitions(footers, build_mechanism(config),
                               id_column=str(config.data.id_column), treatment=c.treatment,
                               outcome=c.outcome, covariates=c.covariates,
                               evaluation=config.evaluation)
    layout = plan.layout
    half, ratio = layout_halfwidth(plan.n, plan.n_folds, layout,
                                   **public_params(config),
                                   outcome_sd=outcome_sd)
    return {"partitions": len(footers), "n_folds": plan.n_folds, "n_blocks": plan.n_blocks,
            "block_folds": plan.block_folds,
            "rows_per_block": plan.n if layout is None else layout.block_rows,
            "rows_per_fold": None if layout is None else layout.fold_rows,
            "halfwidth": half, "ratio": ratio}


def recommendation_lines(summary: dict[str, Any], outcome_sd: float | None) -> list[str]:
    """The recommendation in words, and the warning when the release would not be informative
    (:func:`uninformative`)."""
    best = summary["recommended"]
    spread = "worst case of the bounds" if outcome_sd is None else f"{outcome_sd:g}"
    lines = [f"Recommended: K={int(best['n_folds'])} ({int(best['rows_per_fold'])} rows per "
             f"fold), sigma2={best['sigma2']}, ci_share={best['ci_share']:g}: expected 95% CI "
             f"half-width {best['halfwidth']:.4g}, {best['ratio']:.1f}x the non-private one "
             f"(assumed outcome sd: {spread})."]
    part = summary.get("partitioned")
    if part is not None and part["n_blocks"] > 1:
        lines.append(
            f"Partitioned path ({part['partitions']} partitions): K={part['n_folds']} in "
            f"B={part['n_blocks']} blocks of K'={part['block_folds']} folds, each block inside "
            f"one partition; largest block {part['rows_per_block']} rows, smallest fold "
            f"{part['rows_per_fold']} rows (only per-block sums leave the workers); expected "
            f"95% CI half-width {part['halfwidth']:.4g}, {part['ratio']:.1f}x the non-private "
            f"one.")
    elif part is not None:
        lines.append(
            f"Partitioned path ({part['partitions']} partitions): the full ensemble, "
            f"K={part['n_folds']} keyed-hash folds (fold models travel between workers).")
    warning = uninformative(best["ratio"], outcome_sd)
    if warning is not None:
        lines.append(f"Warning: {warning}")
    return lines


def uninformative(ratio: float, outcome_sd: float | None) -> str | None:
    """The planner's warning, in words, when the expected CI is more than
    ``UNINFORMATIVE_RATIO`` times the non-private one (else None): one text for ``plan`` and
    for ``run``'s checks before the charge (issue 33 §5)."""
    from dpcausal.ate.planner import UNINFORMATIVE_RATIO

    if not ratio > UNINFORMATIVE_RATIO:   # a NaN ratio (no CI released) is no warning
        return None
    spread = ("the widest spread the outcome bounds allow, so a narrower one makes it wider "
              "still" if outcome_sd is None else f"outcome sd {outcome_sd:g}")
    return (f"this release would not be informative: its CI is expected to be {ratio:.0f}x "
            f"wider than the non-private one (assumed: {spread}). Raise zeta, add rows, or "
            "narrow the outcome bounds.")


def release_warnings(config: Any, mechanism: Any, checked: Any) -> list[str]:
    """What ``plan`` would warn of the release ``checked`` is for (issue 33 §5: ``run`` says what
    ``plan`` says), from public facts only: n and d, the mechanism's public parameters, the
    partitions' public layout (the partitioned path) and the stated outcome spread. The expected
    CI is that of the release's own K and noise modes (the planner's row for them,
    :func:`dpcausal.ate.planner.plan`, or :func:`dpcausal.ate.planner.layout_halfwidth` on the
    partitions' layout). Empty for other kinds."""
    if config.kind != "ate":
        return []
    from dpcausal.ate.planner import layout_halfwidth, recommended

    n, d = checked.prepared.public.n, checked.prepared.public.d
    if config.data.partitioned:
        plan = checked.prepared.data
        _, ratio = layout_halfwidth(plan.n, plan.n_folds, plan.layout, **public_params(config))
    else:
        K = mechanism.resolved_n_folds(n, d)
        ratio = float(recommended(mechanism.plan(n, d, n_folds=[K]))["ratio"])
    warning = uninformative(ratio, None)
    return [] if warning is None else [warning]


def target_line(summary: dict[str, Any], target_halfwidth: float) -> str:
    """The zeta that reaches ``target_halfwidth`` at the recommended K, in words."""
    needed = summary["zeta_for_target"]
    return (f"zeta needed for an expected half-width of {target_halfwidth:g} at "
            f"K={int(summary['recommended']['n_folds'])}: "
            + ("unreachable (the non-private CI is already wider)"
               if needed == float("inf") else f"{needed:.4g}"))


def plain_row(row: dict[str, Any]) -> dict[str, Any]:
    """numpy scalars as Python ones (JSON, Prefect artifacts)."""
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
