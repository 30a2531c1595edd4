"""The planner for a release config (issue 19 §1): the data's public shape, the table over K and
the recommendation, as plain data. No Prefect import here: ``dpcausal plan`` runs these without a
server; the ``dp_plan`` flow runs them as tasks (:mod:`tasks.plan_release`)."""

from __future__ import annotations

import textwrap
import warnings
from typing import Any

import pandas as pd

from conf.registration import PLANNING_FACTS, planning_facts, registered
from dpcausal.ate.choice import LARGE_IMBALANCE
from dpcausal.ate.sums import SUM_ESTIMATORS as SUMS
from tasks.data import partition_footers

ENSEMBLES = ("aipw", "ipw", "g")
WIDTH = 100  # characters of a line of plan's text
#: the table's column names as ``plan`` prints them (the spec's K, B, K')
SHORT = {"n_folds": "K", "n_blocks": "B", "block_folds": "K'", "rows_per_fold": "rows/fold"}
TABLE_COLUMNS = ["n_folds", "n_blocks", "block_folds", "rows_per_fold", "sigma2", "ci_share",
                 "sigma1", "halfwidth", "ratio", "seconds", "feasible"]


def public_params(config: Any, estimator: str) -> dict[str, Any]:
    """The public parameters the ensemble planner uses (config values over library defaults),
    for the ensemble ``estimator`` (the config's, or ``auto``'s choice)."""
    from dpcausal import PrivateATE

    p = PrivateATE(**config.estimator.library_kwargs()).get_params()
    if p.get("outcome_bounds") is None:
        raise ValueError("estimator.outcome_bounds is required: the noise is calibrated to them")
    keys = ("propensity_clip", "zeta", "ci", "alpha", "p1", "sensitivity", "estimand")
    return {"outcome_bounds": tuple(p["outcome_bounds"]), "estimator": estimator,
            **{k: p[k] for k in keys}}


def best_per_k(table: pd.DataFrame) -> pd.DataFrame:
    """For each K, the (sigma2, ci_share) row with the narrowest CI: what a reader is shown."""
    order = table.sort_values(["n_folds", "halfwidth"], kind="stable")
    return order.groupby("n_folds", sort=True).head(1).reset_index(drop=True)


def planned_mechanism(config: Any, outcome_sd: float | None = None,
                      compute_budget: float | None = None, treated_share: float | None = None
                      ) -> Any:
    """The config's mechanism with the plan's stated planning facts (``outcome_sd`` and
    ``treated_share`` over the config's ``estimator.*``) and compute budget."""
    from conf.kinds import build_mechanism

    mechanism = build_mechanism(config)
    stated = {"outcome_sd": outcome_sd, "treated_share": treated_share,
              "compute_budget": compute_budget}
    mechanism.set_params(**{k: v for k, v in stated.items() if v is not None})
    return mechanism


def assumed_facts(config: Any, mechanism: Any, registration: Any,
                  stated: dict[str, float | None]) -> dict[str, dict[str, Any]]:
    """Which planning facts the plan assumed and where each comes from (issue 39 item 5):
    ``{fact: {"value", "source"}}`` for :data:`conf.registration.PLANNING_FACTS`, the source
    ``"stated (--option)"`` (``stated``: the plan's options), ``"stated (estimator.<key>)"``,
    ``"registered by the curator"`` or ``"default"`` (1/2 treated; the worst spread the outcome
    bounds allow)."""
    out = {}
    for key in PLANNING_FACTS:
        value = mechanism.get_params()[key]
        if stated.get(key) is not None:
            source = f"stated (--{key.replace('_', '-')})"
        elif value is None:
            source = "default"
        elif registration.facts.get(key) == value and getattr(config.estimator, key) in (
                None, value):
            source = "registered by the curator"
        else:
            source = f"stated (estimator.{key})"
        out[key] = {"value": value, "source": source}
    return out


def plan_summary(config: Any, *, outcome_sd: float | None = None, compute_budget: float = 60.0,
                 target_halfwidth: float | None = None, treated_share: float | None = None
                 ) -> dict[str, Any]:
    """``{"n", "d", "zeta", "design", "estimator", "estimators", "recommended", "ensemble",
    "zeta_for_target", "table", "partitioned", "facts", "declarations"}`` (JSON-ready): n and
    d from the dataset's registration (issue 32 §1: counted by its curator); ``facts``, the
    planning facts assumed and their sources (:func:`assumed_facts`: ``treated_share`` and
    ``outcome_sd`` as stated here, in the config, or registered by the curator, else the
    defaults); ``declarations``, the declarations that would change ``auto``'s choice
    (:meth:`dpcausal.PrivateATE.declaration_changes`);
    ``estimators``, every estimator valid for the declared design compared from public
    facts (:meth:`dpcausal.PrivateATE.compare_estimators`: expected half-width, ratio, the
    assumption each states, ``chosen`` by ``auto``); ``estimator``, the one the release runs
    (the config's, or ``auto``'s choice); ``table``, the ensemble's rows over K
    (:meth:`dpcausal.PrivateATE.plan`) and ``ensemble`` its best; ``recommended``, the row of the
    estimator the release runs (the ensemble's best K, or its comparison row); and the zeta that
    reaches ``target_halfwidth`` with that estimator (:func:`dpcausal.ate.planner.
    zeta_for_sums_halfwidth` for one from noisy sums; :func:`dpcausal.ate.planner.
    zeta_for_halfwidth` at the ensemble's best K; None when not asked, inf when unreachable).
    ``outcome_sd``: the stated spread (default the config's ``estimator.outcome_sd``, else the
    widest the bounds allow); ``warnings``, the fold-size bias warnings of an ensemble release
    (:func:`fold_bias_warnings`)."""
    from dpcausal.ate.planner import recommended, zeta_for_halfwidth, zeta_for_sums_halfwidth

    registration = registered(config.ledger.dataset_id)  # n and d as the curator counted them
    n, d = registration.n, registration.facts["d"]
    mechanism = planned_mechanism(config, outcome_sd, compute_budget, treated_share)
    mechanism.set_params(**planning_facts(registration, mechanism.get_params(deep=False)))
    facts = assumed_facts(config, mechanism, registration,
                          {"outcome_sd": outcome_sd, "treated_share": treated_share})
    prerelease = prerelease_plan(mechanism, facts)   # with one, planned under the defaults
    chosen = mechanism.resolved_estimator(n, d)
    compared = mechanism.compare_estimators(n, d)
    # the ensemble's K table: the release's ensemble, or the one auto compares (AIPW)
    table = mechanism.plan(n, d, estimators=[chosen if chosen in ENSEMBLES else "aipw"])
    ensemble_best = recommended(table)
    best = (compared[compared["estimator"] == chosen].iloc[0] if chosen in SUMS
            else ensemble_best)
    needed = None
    if target_halfwidth is not None:
        p = public_params(config, chosen)
        p.pop("zeta")
        needed = (zeta_for_sums_halfwidth(target_halfwidth, chosen, n, d,
                                          outcome_bounds=p["outcome_bounds"], alpha=p["alpha"],
                                          outcome_sd=mechanism.outcome_sd,
                                          treated_share=mechanism.assumed_treated_share(),
                                          design=mechanism.design)
                  if chosen in SUMS else
                  zeta_for_halfwidth(target_halfwidth, n, int(best["n_folds"]), **p,
                                     ci_share=float(best["ci_share"]),
                                     sigma2=str(best["sigma2"]), outcome_sd=mechanism.outcome_sd,
                                     treated_share=mechanism.assumed_treated_share(),
                                     block_folds=int(best["block_folds"])))
    return {"n": n, "d": d, "zeta": float(mechanism.zeta), "design": mechanism.design,
            "estimator": chosen, "estimand": mechanism.estimand, "outcome_sd": mechanism.outcome_sd,
            "estimators": [plain_row(r) for r in compared.to_dict("records")],
            "recommended": plain_row(best.to_dict()),
            "ensemble": plain_row(ensemble_best.to_dict()),
            "zeta_for_target": needed, "table": [plain_row(r) for r in table.to_dict("records")],
            "partitioned": partitioned_layout(config, mechanism.outcome_sd),
            "facts": facts, "declarations": mechanism.declaration_changes(n, d),
            "prerelease": prerelease,
            "warnings": fold_bias_warnings(mechanism, n, d) if chosen in ENSEMBLES else []}


def fold_bias_warnings(mechanism: Any, n: int, d: int) -> list[str]:
    """The texts of the fold-size bias warnings the release's own checks give on n rows and d
    covariates (:func:`dpcausal.ate.planner.check_fold_bias`): ``plan`` says what ``run`` will
    (issue 33 §5). Public facts only; a refusal of the checks is ``run``'s to report."""
    from dpcausal.validation import FoldBiasWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            mechanism.check_facts(n, d)
        except (ValueError, TypeError):
            return []
    return [str(w.message) for w in caught if issubclass(w.category, FoldBiasWarning)]


def prerelease_plan(mechanism: Any, facts: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """With ``estimator.prerelease`` (issue 39 item 5; its refusals raised here, before any
    charge): ``{"share", "learns", "zeta_release", "text"}``, the facts it would learn (their
    ``facts`` source says so; the plan assumes their defaults) and what it costs, in words
    (:func:`dpcausal.ate.prerelease.plan_line`); None without one."""
    from dpcausal.ate import prerelease as pre

    mechanism._check_choice()
    share = mechanism.prerelease
    if share is None:
        return None
    learns = [f for f in pre.FACTS if getattr(mechanism, f) is None]
    for fact in learns:
        facts[fact]["source"] = f"learned by a pre-release of {share:g}·ζ² (here: the default)"
    return {"share": share, "learns": learns,
            "zeta_release": pre.split(float(mechanism.zeta), share)[1],
            "text": pre.plan_line(float(mechanism.zeta), share, learns)}


def wrapped(text: str) -> list[str]:
    """``text`` as lines of at most :data:`WIDTH` characters (issue 42: ``plan`` fits a
    terminal), words kept whole."""
    return textwrap.wrap(text, WIDTH, break_on_hyphens=False, break_long_words=False) or [""]


def estimator_lines(summary: dict[str, Any]) -> list[str]:
    """The estimator comparison as text lines: estimator, expected half-width, ratio and which
    one the release runs (``auto``'s choice marked), then the assumption each states, wrapped
    under the table."""
    table = pd.DataFrame(summary["estimators"])
    runs = summary["estimator"]
    table["use"] = [("<- this release" if e == runs else "")
                    + (" (auto's choice)" if chosen else "")
                    for e, chosen in zip(table["estimator"], table["chosen"], strict=True)]
    lines = table[["estimator", "halfwidth", "ratio", "use"]].to_string(
        index=False, float_format=lambda v: f"{v:.4g}").splitlines()
    for estimator, assumption in zip(table["estimator"], table["assumption"], strict=True):
        lines += textwrap.wrap(f"{estimator}: {assumption}", WIDTH, initial_indent="  ",
                               subsequent_indent="    ", break_on_hyphens=False)
    for row in table[table["robust_halfwidth"] > table["halfwidth"]].itertuples():
        lines += wrapped(f"{row.estimator} at a large covariate imbalance (arms "
                         f"{LARGE_IMBALANCE:g} sds apart in every covariate): half-width "
                         f"{row.robust_halfwidth:.4g}; auto ranks it by the wider figure "
                         "(its noise grows with an imbalance no public fact bounds)")
    return [*lines, *wrapped(facts_line(summary))]


def facts_line(summary: dict[str, Any]) -> str:
    """The planning facts the plan assumed and where each comes from (issue 39 item 5)."""
    share, sd = summary["facts"]["treated_share"], summary["facts"]["outcome_sd"]
    spread = pd.DataFrame(summary["estimators"])["outcome_spread"].iloc[0]
    treated = (f"{share['value']:g}, {share['source']}" if share["value"] is not None
               else f"1/2, {_source(share)}")
    return (f"(planning facts assumed: treated share {treated}; outcome spread {spread}, "
            f"{_source(sd)})")


def _source(fact: dict[str, Any]) -> str:
    """Where a planning fact comes from, in :func:`facts_line`'s words."""
    return "default (none declared)" if fact["source"] == "default" else fact["source"]


def declaration_lines(summary: dict[str, Any]) -> list[str]:
    """What declaring ``design: randomized`` or ``assume_linear: true`` would change (issue 39
    item 6): the estimator ``auto`` would take and the half-width it would then expect."""
    lines = []
    for change in summary["declarations"]:
        needs = (" (with estimator.covariate_bounds, which lin needs)"
                 if change["needs_covariate_bounds"] else "")
        lines.append(
            f"Declaring {change['declare']}{needs} would let auto take {change['estimator']}: "
            f"expected 95% CI half-width {change['halfwidth']:.4g}, {change['ratio']:.1f}x the "
            f"non-private one; the release would then state: {change['assumption']}. Declare it "
            "only if it is true of the study.")
    return lines


def plan_lines(summary: dict[str, Any], config: Any, config_path: str, *,
               outcome_sd: float | None, target_halfwidth: float | None) -> list[str]:
    """``dpcausal plan``'s text of :func:`plan_summary` for ``config`` (read from
    ``config_path``), every line within :data:`WIDTH` characters: where n, d and zeta come
    from, the estimators compared, the ensemble's table over K (its best row per K, the
    recommended K marked), the recommendation and, with ``target_halfwidth``, the zeta it
    needs."""
    asked = config.estimator.estimator
    lines = wrapped(f"Plan for {config_path}: n={summary['n']}, d={summary['d']} (from the "
                    f"registration), design={summary['design']}, estimator={asked}"
                    + ("" if asked == summary["estimator"] else f" -> {summary['estimator']}")
                    + (", estimand=att" if summary.get("estimand") == "att" else "")
                    + f", zeta={summary['zeta']:g} (from the config); nothing read, nothing "
                    "charged")
    if summary.get("prerelease") is not None:
        lines += wrapped(f"Pre-release: {summary['prerelease']['text']}. The plan below assumes "
                         "the defaults for the facts it would learn.")
    if config.data.missing == "drop_public_count":  # the curator declared the count public
        lines += wrapped("data.missing: drop_public_count: the release's n is the exact "
                         "complete-case count, and K is resolved from it; this table uses all "
                         f"{summary['n']} rows (`dpcausal check-data {config_path}` shows the "
                         "count; it charges nothing)")
    lines += ["Estimators compared (expected 95% CI; ratio to the non-private CI):",
              *estimator_lines(summary)]
    ensemble, best = summary["ensemble"], summary["recommended"]
    shown = best_per_k(pd.DataFrame(summary["table"]))[TABLE_COLUMNS].rename(columns=SHORT)
    marker = " <- recommended" if best["estimator"] == ensemble["estimator"] else " <- its best K"
    lines.append(f"The {ensemble['estimator']} ensemble over K (B blocks of K' folds):")
    for line in shown.to_string(index=False, float_format=lambda v: f"{v:.4g}").splitlines():
        parts = line.split()
        lines.append(line + (marker if parts and parts[0] == str(int(ensemble["n_folds"]))
                             else ""))
    for line in recommendation_lines(summary, outcome_sd):
        lines += wrapped(line)
    for text in summary.get("warnings", []):
        lines += wrapped(f"Warning: {text}")
    if target_halfwidth is not None:
        lines += wrapped(target_line(summary, target_halfwidth))
    return lines


def partitioned_layout(config: Any, outcome_sd: float | None = None) -> dict[str, Any] | None:
    """What a partitioned source's release will use (issue 28 §3), from the footers only
    (:func:`dpcausal.ate.partitioned.plan_partitions`, the release's own public plan): partitions,
    K, B, K', the rows of the largest block and of the smallest fold (None for the full
    ensemble, whose keyed-hash folds are not balanced), and the CI half-width expected with that
    layout (:func:`dpcausal.ate.planner.layout_halfwidth`; the table's rows assume balanced
    blocks); for a release from noisy sums, only the partitions and the estimator. None for
    other sources."""
    if config.data.partitions is None:
        return None
    from dpcausal.ate.partitioned import plan_partitions
    from dpcausal.ate.planner import layout_halfwidth

    footers = partition_footers(str(config.data.partitions))
    c = config.columns
    with warnings.catch_warnings():     # the parameter warnings are the table's and run's
        warnings.simplefilter("ignore")
        plan = plan_partitions(footers, planned_mechanism(config, outcome_sd),
                               id_column=str(config.data.id_column), treatment=c.treatment,
                               outcome=c.outcome, covariates=c.covariates,
                               evaluation=config.evaluation)
    if plan.sums is not None:   # summed statistics: the in-memory CI, no folds
        return {"partitions": len(footers), "sums": plan.sums}
    layout = plan.layout
    half, ratio = layout_halfwidth(plan.n, plan.n_folds, layout,
                                   **public_params(config, plan.estimator.estimator),
                                   outcome_sd=outcome_sd,
                                   treated_share=plan.estimator.assumed_treated_share())
    return {"partitions": len(footers), "n_folds": plan.n_folds, "n_blocks": plan.n_blocks,
            "block_folds": plan.block_folds,
            "rows_per_block": plan.n if layout is None else layout.block_rows,
            "rows_per_fold": None if layout is None else layout.fold_rows,
            "halfwidth": half, "ratio": ratio}


def recommendation_lines(summary: dict[str, Any], outcome_sd: float | None) -> list[str]:
    """The recommendation in words, and the warning when the release would not be informative
    (:func:`uninformative`)."""
    best = summary["recommended"]
    outcome_sd = summary.get("outcome_sd", outcome_sd)
    spread = "worst case of the bounds" if outcome_sd is None else f"{outcome_sd:g}"
    if best["estimator"] in SUMS:
        what = (f"estimator={best['estimator']} ({summary['design']} design; no folds: its "
                "statistics are sums over rows)")
    else:
        what = (f"estimator={best['estimator']}, K={int(best['n_folds'])} "
                f"({int(best['rows_per_fold'])} rows per fold), sigma2={best['sigma2']}, "
                f"ci_share={best['ci_share']:g}")
    of_att = ""
    if summary.get("estimand") == "att":
        share = summary["facts"]["treated_share"]
        of_att = (" of the ATT (the noise over the treated share "
                  + (f"{share['value']:g}, {share['source']}" if share["value"] is not None
                     else "1/2, the planner's default: none declared") + ")")
    lines = [f"Recommended: {what}: expected 95% CI half-width{of_att} "
             f"{best['halfwidth']:.4g}, {best['ratio']:.1f}x the non-private one (assumed "
             f"outcome sd: {spread})."]
    part = summary.get("partitioned")
    if part is not None and "sums" in part:
        lines.append(
            f"Partitioned path ({part['partitions']} partitions): each partition returns only "
            f"its {part['sums']} statistic vector; the vectors are added and the noise drawn "
            "once, as in memory.")
    elif part is not None and part["n_blocks"] > 1:
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
    return [*lines, *declaration_lines(summary)]


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
    ``plan`` says), from public facts only: n and d, the mechanism's public parameters (its
    stated ``outcome_sd``), and the partitions' public layout (the partitioned path). The
    expected CI is that of the estimator the release runs (the config's, or ``auto``'s choice):
    its comparison row (:meth:`dpcausal.PrivateATE.compare_estimators`) for an estimator from
    noisy sums; for an ensemble, the planner's row for the release's own K and noise modes
    (:meth:`dpcausal.PrivateATE.plan`), or :func:`dpcausal.ate.planner.layout_halfwidth` on the
    partitions' layout where the footers were read (evaluation); a release checked from its
    registration reads them only after the charge, so its planner row stands for the layout.
    Empty for other kinds."""
    if config.kind != "ate":
        return []
    from dpcausal.ate.planner import layout_halfwidth, recommended

    n, d = checked.prepared.public.n, checked.prepared.public.d
    chosen = mechanism.resolved_estimator(n, d)
    if chosen in SUMS:
        compared = mechanism.compare_estimators(n, d)
        ratio = float(compared.loc[compared["estimator"] == chosen, "ratio"].iloc[0])
    elif config.data.partitioned and checked.prepared.data is not None:
        plan = checked.prepared.data   # the footers' layout (a registered source has none yet)
        _, ratio = layout_halfwidth(plan.n, plan.n_folds, plan.layout,
                                    **public_params(config, chosen),
                                    outcome_sd=mechanism.outcome_sd,
                                    treated_share=mechanism.assumed_treated_share())
    else:
        K = mechanism.resolved_n_folds(n, d)
        ratio = float(recommended(mechanism.plan(n, d, n_folds=[K], estimators=[chosen]))[
            "ratio"])
    warning = uninformative(ratio, mechanism.outcome_sd)
    return [] if warning is None else [warning]


def target_line(summary: dict[str, Any], target_halfwidth: float) -> str:
    """The zeta that reaches ``target_halfwidth`` with the recommended estimator (at its K for
    an ensemble), in words."""
    needed = summary["zeta_for_target"]
    best = summary["recommended"]
    where = (f"with {best['estimator']}" if best["estimator"] in SUMS
             else f"at K={int(best['n_folds'])}")
    return (f"zeta needed for an expected half-width of {target_halfwidth:g} {where}: "
            + ("unreachable (the non-private CI is already wider)"
               if needed == float("inf") else f"{needed:.4g}"))


def plain_row(row: dict[str, Any]) -> dict[str, Any]:
    """numpy scalars as Python ones (JSON, Prefect artifacts)."""
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
