"""Registering a dataset: its curator binds a config's data half to the dataset id, with n
counted now (issue 32 §1; :mod:`conf.registration` holds the two halves). The curator reads
the data here, on the curator's own machine, to count the records and to bind the data's and
the source's keyed fingerprints, so the same data cannot be registered again under another id.
``dpcausal ledger register``, ``dpcausal demo`` and the tests go through :func:`register`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conf.kinds import KINDS, default_covariates
from conf.models import Schema
from conf.registration import PLANNING_FACTS, registration_values
from dpcausal.ate.partitioned import check_roles
from dpcausal.ledger import Cap, Ledger, Registration
from store import frame_identities, source_fingerprint
from tasks.data import partition_footers, read_frame, select, source_identity, source_shape
from tasks.sql_partitions import check_database_types, sql_partitions, sql_schema


def register(config: Any, *, zeta: float | None = None, origin: str | None = None,
             public: str | None = None, planning: dict[str, float] | None = None,
             path: str | Path | None = None, dataset: str | None = None) -> Registration:
    """Register ``config``'s dataset id with its data half (:func:`conf.registration.
    registration_values`), the mechanism's unit (``public``: the relation's public facts,
    default the unit's), n counted now (records, not lines) and, for the core release, d;
    ``origin`` (synthetic or public) allows evaluation mode; ``zeta`` also sets the cap;
    ``planning``: the core release's planning facts the curator declares public
    (:data:`conf.registration.PLANNING_FACTS`: ``treated_share``, ``outcome_sd``; issue 39
    item 5).
    ``path``, the config's file, is kept as the fact ``config`` (its absolute path: the file a
    deployment run of the dataset releases, :func:`conf.deployment.registered_config`).
    ``dataset``, the id the curator names, must be the config's (ValueError naming both).
    Creates the ledger if needed."""
    if dataset is not None and config.ledger.dataset_id != dataset:
        raise ValueError(f"{path or 'the config'} names dataset {config.ledger.dataset_id!r} "
                         f"(ledger.dataset_id), not {dataset!r}: register the dataset its "
                         "config names, or fix ledger.dataset_id")
    kind = KINDS[config.kind]
    declared = {k: v for k, v in (planning or {}).items() if v is not None}
    if set(declared) - set(PLANNING_FACTS) or (declared and config.kind != "ate"):
        raise ValueError(f"planning facts are {', '.join(PLANNING_FACTS)} of the core release "
                         f"(kind ate), got {sorted(declared)} for kind {config.kind!r}")
    counted = count(config)
    facts = {"unit": kind.build(config).unit, **({"public": public} if public else {}),
             **{k: v for k, v in counted.items() if k not in ("n", "identity")}, **declared,
             **({"config": str(Path(path).resolve())} if path is not None else {})}
    with Ledger(create=True) as led:
        return led.register(config.ledger.dataset_id, **registration_values(config),
                            n=counted["n"], facts=facts, evaluation_allowed=origin is not None,
                            origin=origin, zeta=zeta, fingerprint=counted["identity"])


def register_demo(config: Any) -> tuple[Registration, Cap]:
    """The demo's own data (``config`` points at them): their cap if they have none
    (:func:`demo.demo_cap`), and their registration as a synthetic source, which allows
    evaluation mode on them; returns the registration and the dataset's cap."""
    from demo import demo_cap
    from tasks.ledger_ops import set_initial_budget

    cap = set_initial_budget(config.ledger.dataset_id, **demo_cap(config.kind))
    return register(config, origin="synthetic"), cap


def prepare_demo(kind: str, n_rows: int) -> tuple[dict[str, Any], str]:
    """``dpcausal demo``'s curator step: ``kind``'s synthetic data (``n_rows`` for the core
    demo) written under the data folder, its demo config (:func:`demo.example_config`) pointed at
    them, as a raw dict, and their registration with their cap (:func:`register_demo`); returns
    the config and a note for the user saying what was registered, the cap,
    and why the demo may give one (issue 42: caps are otherwise never assumed)."""
    from conf.kinds import load_any
    from conf.settings import data_dir
    from demo import example_config, write_demo

    path = write_demo(kind, data_dir() / "demo", n_rows)
    base = {**example_config(kind), "data": {"path": str(path)}}
    reg, cap = register_demo(load_any(None, base=base))
    return base, (
        f"demo data: {path} ({kind} demo), registered as dataset {reg.dataset!r} (n={reg.n}, "
        f"version {reg.version}; `dpcausal ledger show {reg.dataset}`); its cap, {cap.kind} "
        f"{cap.value:g}, was set by the demo itself because these data are synthetic (made just "
        "now; no person is in them): any other dataset's cap is set by its curator (`dpcausal "
        "ledger set-budget`), never assumed")


def count(config: Any) -> dict[str, Any]:
    """What the curator counts at registration: ``n`` (the records the release's reader
    parses: :func:`tasks.data.read_csv_table` for CSV, the footers of Parquet partitions,
    ``COUNT(*)`` of a query), the release's column ``names``, for the core release ``d``
    (:func:`conf.kinds.default_covariates`, as ``plan`` and ``run`` take them: ``[]`` refused),
    and the public facts a further kind's charge and checks need (:attr:`conf.kinds.Kind.facts`:
    the Cluster-DP groups, the federated group sizes, the user-level occupancy);
    the keyed ``identity`` of the source and, where one process reads every value, of the
    table (its order-invariant fingerprint and keyed row sketch, which catches a near copy
    registered under another id: :mod:`dpcausal.fingerprints`). A partitioned source's roles
    are checked first on its schema (:func:`dpcausal.ate.partitioned.check_roles`: the Parquet
    footers, or the query's column names as their declared types,
    :func:`tasks.sql_partitions.sql_schema`), as its release will check them after the charge."""
    where = source_fingerprint(source_identity(config.data))
    if config.data.partitioned:
        # the partitioned release's public refusal of the roles, from the footers or the
        # query's column names as their declared types: a run reads them only after its
        # reservation (tasks.preflight.check_registered)
        roles = KINDS[config.kind].roles(config)
        schemas = ([s for _, s in partition_footers(config.data.partitions)]
                   if config.data.partitions is not None
                   else [sql_schema(sql_partitions(config.data), roles)])
        check_roles(schemas, str(config.data.id_column), roles["treatment"], roles["outcome"],
                    roles["covariates"])
        if config.data.sql_partitions is not None:
            check_database_types(sql_partitions(config.data), roles)
        n, d = source_shape(config.data, config.columns)
        return {"n": n, "d": d, "identity": (where,), "names": list(schemas[0])}
    schema = KINDS[config.kind].schema(config)
    table = read_frame(config.data, Schema(schema.columns, rest=schema.rest or "float"))
    frame = select(table, None if schema.rest is not None else list(schema.columns))
    out: dict[str, Any] = {"n": len(frame), "names": [str(c) for c in frame.columns],
                           "identity": (*frame_identities(table), where)}
    if config.kind == "ate":  # the covariates as the release takes them (issue 34 §1)
        covariates = default_covariates(out["names"], config.columns, config.data)
        if config.columns.covariates is None:
            _refuse_unread_columns(frame, covariates)
        _refuse_unfilled_roles(frame, config.columns.treatment, config.columns.outcome)
        out["d"] = len(covariates)
    kind = KINDS[config.kind]
    return {**out, **kind.facts(kind.build(config), frame, kind.roles(config))}


def _refuse_unfilled_roles(frame: Any, treatment: str, outcome: str) -> None:
    """The curator's check of the core release's roles, as :func:`_refuse_unread_columns`'s of
    the covariates: a treatment no row of which reads as 0 or 1 (a yes/no or treated/control
    coding the reader does not take for one), or an outcome no row of which reads as a number,
    would leave every row unusable, so every release of the dataset would be charged and say
    nothing. A coding some rows fill is the missing-value policy's, after a run's charge."""
    if treatment not in frame or outcome not in frame:
        return      # the schema's refusal, naming the column, is the release checks'
    if len(frame) and not frame[treatment].isin((0, 1)).any():
        raise ValueError(f"the treatment {treatment!r} reads as 0 or 1 in no row (a text coding "
                         "such as yes/no?): recode it as 1/0 or true/false before registering")
    if len(frame) and frame[outcome].isna().all():
        raise ValueError(f"the outcome {outcome!r} holds no number in any row (text?): recode "
                         "it as numbers before registering")


def _refuse_unread_columns(frame: Any, covariates: list[str]) -> None:
    """The curator's check of omitted covariates (issue 34 §1-2): a column no value of which
    reads as a number (an undeclared text or id column read as float) would be a covariate
    missing in every row; registration refuses it, naming the fix. The curator sees the data;
    a run only meets the registered d."""
    unread = [c for c in covariates if len(frame) and frame[c].isna().all()]
    if unread:
        raise ValueError(f"columns {unread} hold no number in any row (text or id columns read "
                         "as numbers?): declare them in data.dtypes (e.g. str), or name the "
                         "covariates in columns.covariates")
