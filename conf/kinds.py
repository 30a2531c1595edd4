"""The registry of release kinds: for each ``kind`` of a ``conf/release/*.yaml``, its config model,
how the mechanism is built from it (once per run, at the flow's boundary), which columns it reads
and under which roles they reach :meth:`dpcausal.Mechanism.check_input`, and what the ledger
records about a release. ``kind`` absent means ``ate``, the core release.

A new mechanism is one entry here (and its config model), not a new flow.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Callable, Union

import numpy as np
import pandas as pd
from pydantic import Discriminator, Tag

from conf.cluster_dp import ClusterDPConfig
from conf.federated import FederatedConfig
from conf.models import (
    ConfigError,
    ReleaseConfig,
    Schema,
    load_typed,
    override_at,
    read_raw,
    with_absolute_paths,
)
from conf.registry import build_model, resolve
from conf.user_level import UserLevelConfig
from dpcausal import Mechanism, PrivateATE
from dpcausal.ate.estimator import ATEFacts
from dpcausal.ate.sums import SUM_ESTIMATORS
from dpcausal.cluster_dp import ClusterDP, ResponseSpace
from dpcausal.cluster_dp.release import cluster_codes, group_sizes, treatment_codes
from dpcausal.contract import PublicFacts
from dpcausal.federated import FederatedATE, FederatedFacts
from dpcausal.ledger import Registration
from dpcausal.user_level import UserLevelATE


@dataclass(frozen=True)
class Kind:
    """One release kind: ``build`` makes the mechanism (of class ``mechanism``) from a config,
    ``roles`` gives the column roles of ``check_input``, ``detail`` what the ledger's history
    records of a release (public parameters only), ``budget`` the cap a config suggests
    (``set_budget`` keyword arguments; the demo gives its own data that cap), and
    ``published`` the tables a release publishes besides its figures (artifact name -> table).
    ``facts`` is what the curator counts at registration besides n and the core's d
    (``facts(mechanism, frame, roles)``: JSON values, only facts the kind's neighbouring
    relation holds public), ``public`` the mechanism's public facts of a run from the
    registration alone (``public(mechanism, roles, registration)``, raising every refusal
    those facts decide): a release is checked and charged from them before its data are read
    (issue 32 §3; :func:`tasks.preflight.check_registered`). ``example`` is the kind's demo
    config (relative to the project root); its data are written by ``demo.<name>``.

    Every list of kinds (the CLI's ``--kind`` choices, the deployments, the demo, the flow
    parameter :data:`AnyConfig`) is read from :data:`KINDS`."""

    name: str
    model: type
    mechanism: type[Mechanism]
    example: str
    build: Callable[[Any], Mechanism]
    roles: Callable[[Any], dict[str, Any]]
    detail: Callable[[Any], dict[str, Any]]
    budget: Callable[[Any], dict[str, float | None]]
    facts: Callable[[Any, pd.DataFrame, dict[str, Any]], dict[str, Any]]
    public: Callable[[Any, dict[str, Any], Registration], PublicFacts]
    published: Callable[[Any], dict[str, pd.DataFrame]] | None = None

    def cap(self, config: Any) -> str:
        """The ``dpcausal ledger set-budget`` arguments ``config`` suggests (``Z``, ``E``, ``D``
        where it gives no value)."""
        return " ".join(f"--{key} {key[0].upper()}" if value is None else f"--{key} {value:g}"
                        for key, value in self.budget(config).items())

    def schema(self, config: Any) -> Schema:
        """The columns the release reads with their declared types (every other column is
        dropped at load, except the core's default covariates: every other column, floats unless
        ``data.dtypes`` declares another type; the id column as text: the library takes the
        number columns, :func:`default_covariates`).
        A role's type is ``data.dtypes`` of its column, else :data:`ROLE_DTYPES` of its role; a
        ``data.dtypes`` entry for a column the release does not read is refused (a typo)."""
        roles = self.roles(config)
        declared: dict[str, str] = dict(config.data.dtypes)
        out: dict[str, str] = {}
        for role, value in roles.items():
            for name in [value] if isinstance(value, str) else (value or []):
                out.setdefault(name, declared.get(name, ROLE_DTYPES[role]))
        if "covariates" in roles and roles["covariates"] is None:  # every other number column
            ids = {config.data.id_column: "str"} if config.data.id_column else {}
            return Schema({**ids, **declared, **out}, ROLE_DTYPES["covariates"])
        unread = sorted(set(declared) - set(out) - {getattr(config.data, "id_column", None)})
        if unread:
            raise ValueError(f"data.dtypes names {unread[0]!r}, which is not a column this "
                             f"release reads ({', '.join(out)}); remove it or fix its name")
        return Schema(out)


NUMBER_TYPES = ("float", "int", "bool")


def default_covariates(names: list[str], c: Any, data: Any) -> list[str]:
    """The core's covariates among the source's columns ``names``: ``columns.covariates`` as
    given, or, omitted, every other column whose declared type (``data.dtypes``, else float) is
    a number, never the id column or one declared ``str`` (issue 34 §1: one meaning for
    ``plan``, ``check-data``, ``run`` and the library's DataFrame default). None at all is a
    ValueError, as the library's. ``c`` is the config's ``columns``, ``data`` its source."""
    if c.covariates is not None:
        if not c.covariates:
            raise ValueError("no covariate columns: columns.covariates is [], which names none; "
                             "name at least one, or omit the key to take every other column "
                             "declared a number")
        return list(c.covariates)
    taken = {c.treatment, c.outcome, data.id_column}
    found = [n for n in names if n not in taken and data.dtypes.get(n, "float") in NUMBER_TYPES]
    if not found:
        raise ValueError("no covariate columns: no column besides the treatment and the outcome "
                         "is declared a number; name them in columns.covariates")
    return found


#: The type of a column by its role when ``data.dtypes`` does not declare it (issue 26 §1).
ROLE_DTYPES = {"treatment": "int", "outcome": "float", "covariates": "float", "cluster": "str",
               "unit": "str", "stratum": "str", "order": "float", "record": "str"}


# ------------------------------------------------------------------ core (PrivateATE)
def _build_core(config: ReleaseConfig) -> PrivateATE:
    models = config.models
    return PrivateATE(
        propensity_model=build_model(models.propensity.name, models.propensity.params,
                                     "propensity"),
        outcome_model=build_model(models.outcome.name, models.outcome.params, "outcome"),
        noise_seed=config.noise_seed, missing=config.data.missing,
        missing_fill=config.data.missing_fill, **config.estimator.library_kwargs())


def _core_roles(config: ReleaseConfig) -> dict[str, Any]:
    c = config.columns
    return {"treatment": c.treatment, "outcome": c.outcome, "covariates": c.covariates}


def _core_detail(config: ReleaseConfig) -> dict[str, Any]:
    """What the ledger records of a core release: the estimator (the planner's choice for
    ``auto``, written into the config by :func:`with_planned`; ``auto`` with a ``prerelease``,
    whose share of zeta^2 it records, the commit adding the choice), its design, the covariate
    bounds, the assumption the release states and whether it declares ``assume_linear``, the
    stated ``treated_share``, the estimand (``ate`` or ``att``), K for an ensemble (and K' for
    a block ensemble, the planner's or the config's), its propensity clip eta (the planner's
    for "auto"), and the missing-value policy."""
    e = config.estimator
    sums = e.estimator in SUM_ESTIMATORS
    bounds = e.covariate_bounds
    return {"mechanism": "PrivateATE", "estimator": e.estimator, "design": e.design,
            "assumption": None if e.estimator == "auto" else
            PrivateATE(design=e.design, assume_linear=bool(e.assume_linear)).assumption(
                e.estimator),
            "assume_linear": bool(e.assume_linear), "treated_share": e.treated_share,
            "estimand": e.estimand,
            "K": None if sums else e.n_folds or "auto",
            "K'": e.block_folds if isinstance(e.block_folds, int) and not sums else None,
            "eta": None if sums or e.estimator == "g" else e.propensity_clip or "auto",
            "bounds": list(e.outcome_bounds) if e.outcome_bounds else None,
            "covariate_bounds": None if bounds is None or e.estimator == "dim" else (
                {k: list(v) for k, v in bounds.items()} if isinstance(bounds, dict)
                else [list(b) for b in bounds]),
            "models": f"{config.models.propensity.name}/{config.models.outcome.name}",
            "prerelease": e.prerelease,
            "missing": config.data.missing,
            "missing_fill": config.data.missing_fill if config.data.missing == "impute" else None}


def _core_facts(mechanism: PrivateATE, frame: pd.DataFrame, roles: dict[str, Any]
                ) -> dict[str, Any]:
    """None besides n and d, which :func:`tasks.registration.count` counts for every core
    source (the partitioned ones from their footers)."""
    return {}


def _core_public(mechanism: PrivateATE, roles: dict[str, Any],
                 registration: Registration) -> ATEFacts:
    """n and d as registered, checked (:meth:`dpcausal.PrivateATE.check_facts`: K against n,
    the parameters, the noise scale), with the planning facts the curator registered where the
    mechanism states none (:func:`conf.registration.planning_facts`: a run loaded by
    ``load_asked`` holds them already)."""
    from conf.registration import planning_facts

    mechanism.set_params(**planning_facts(registration, mechanism.get_params(deep=False)))
    facts = ATEFacts(registration.n, registration.facts["d"])
    mechanism.check_facts(facts)
    return facts


def with_planned(config: AnyConfig, planned: dict[str, Any]) -> AnyConfig:
    """``config`` with the planner's choices (``Mechanism.planned_params``, e.g. the core's
    ``n_folds`` for "auto") written into its mechanism section, so the run's MLflow params and
    the ledger's detail record the values the release used (issue 25 §1)."""
    if not planned:
        return config
    if not isinstance(config, ReleaseConfig):
        raise AssertionError(f"bug: no planned parameters expected for kind {config.kind!r}")
    return config.model_copy(
        update={"estimator": config.estimator.model_copy(update=planned)})


def unused_settings(config: AnyConfig) -> tuple[str, ...]:
    """The dotted config keys (or sections) a core release with its planned estimator
    (:func:`with_planned`) does not use, which its MLflow run leaves out of its params (issue
    42): ``estimator.fold_seed`` but in evaluation mode with folds (a release draws secret
    folds); the fold models, their chunks and the fold layout for an estimator from noisy sums
    (``dim``, ``lin``); the outcome model for ``ipw``, the propensity model for ``g``."""
    if not isinstance(config, ReleaseConfig):
        return ()
    estimator = config.estimator.estimator
    folds = estimator not in SUM_ESTIMATORS
    unused = [] if config.evaluation and folds else ["estimator.fold_seed"]
    if not folds:
        unused += ["models", "folds_per_task", "estimator.n_folds", "estimator.block_folds",
                   "estimator.folds", "estimator.propensity_clip"]
    return (*unused, *{"ipw": ["models.outcome"], "g": ["models.propensity"]}.get(estimator, []))


def model_specs(config: ReleaseConfig) -> dict[str, Any]:
    """The public description of the core's fold models (part of their store key)."""
    return {"propensity": {"class": resolve(config.models.propensity.name, "propensity"),
                           **config.models.propensity.model_dump()},
            "outcome": {"class": resolve(config.models.outcome.name, "outcome"),
                        **config.models.outcome.model_dump()},
            "missing": {"policy": config.data.missing, "fill": config.data.missing_fill}}


# ------------------------------------------------------------------ Cluster-DP
def _build_cluster_dp(config: ClusterDPConfig) -> ClusterDP:
    return ClusterDP(ResponseSpace(np.asarray(config.mechanism.values, float)),
                     strata=config.estimate.strata, alpha=config.estimate.alpha,
                     noise_seed=config.noise_seed, **config.mechanism.library_kwargs())


def _cluster_roles(config: ClusterDPConfig) -> dict[str, Any]:
    c = config.columns
    return {"cluster": c.cluster, "treatment": c.treatment, "outcome": c.outcome}


def _cluster_detail(config: ClusterDPConfig) -> dict[str, Any]:
    m = config.mechanism
    return {"mechanism": f"ClusterDP/{m.mechanism}", "K": len(m.values),
            "bounds": [min(m.values), max(m.values)], "accounting": m.accounting}


def _cluster_facts(mechanism: ClusterDP, frame: pd.DataFrame, roles: dict[str, Any]
                   ) -> dict[str, Any]:
    """The cluster labels and the (cluster, arm) group sizes: public under label DP, where
    only the outcomes are private (spec cluster_dp.md §1.2)."""
    z = treatment_codes(frame[roles["treatment"]], name=str(roles["treatment"]))
    cidx, labels = cluster_codes(frame[roles["cluster"]],
                                 name=f"cluster column {roles['cluster']!r}")
    return {"clusters": labels.tolist(), "groups": group_sizes(z, cidx, labels.size).tolist()}


def _cluster_public(mechanism: ClusterDP, roles: dict[str, Any],
                    registration: Registration) -> PublicFacts:
    """The registered groups, checked (:meth:`dpcausal.cluster_dp.ClusterDP.check_groups`);
    the charge depends on the public parameters only (spec §2.8)."""
    return mechanism.check_groups(np.asarray(registration.facts["groups"]),
                                  registration.facts["clusters"])


def _cluster_published(release: Any) -> dict[str, pd.DataFrame]:
    """What the platform publishes (spec cluster_dp.md Fig. 1): the privatized unit-level data
    (secret order within (cluster, arm), no source index) and the noisy priors."""
    return {"privatized.parquet": release.published.data,
            "priors.parquet": release.published.priors}


# ------------------------------------------------------------------ federated
def _build_federated(config: FederatedConfig) -> FederatedATE:
    return FederatedATE(**config.mechanism.model_dump(), noise_seed=config.noise_seed)


def _federated_roles(config: FederatedConfig) -> dict[str, Any]:
    return {"treatment": config.columns.treatment, "outcome": config.columns.outcome}


def _federated_facts(mechanism: FederatedATE, frame: pd.DataFrame, roles: dict[str, Any]
                     ) -> dict[str, Any]:
    """The group sizes, public in this protocol (spec federated_secagg.md §1: n_c, n_t and each
    client's group), as the library's input check finds them."""
    return dict(mechanism.check_input(frame, **roles).public)


def _federated_public(mechanism: FederatedATE, roles: dict[str, Any],
                      registration: Registration) -> PublicFacts:
    """The registered group sizes; their charge (:meth:`dpcausal.federated.FederatedATE.
    privacy_charge`) makes the options' and the calibration's refusals."""
    facts = FederatedFacts(registration.facts["n_treated"], registration.facts["n_control"])
    mechanism.privacy_charge(facts)
    return facts


def _federated_detail(config: FederatedConfig) -> dict[str, Any]:
    m = config.mechanism
    return {"mechanism": f"FederatedATE/{m.secagg}", "bounds": [-m.R, m.R], "m1": m.m1,
            "m2": m.m2, "ci_form": m.ci_form}


# ------------------------------------------------------------------ user-level
def _build_user_level(config: UserLevelConfig) -> UserLevelATE:
    return UserLevelATE(**config.mechanism.library_kwargs(), noise_seed=config.noise_seed)


def _user_level_roles(config: UserLevelConfig) -> dict[str, Any]:
    c = config.columns
    arm = c.arm or ("arm" if "arm" in c.cell else None)
    strata = [x for x in c.cell if x != arm]
    return {"unit": c.unit, "stratum": strata or None, "treatment": arm, "outcome": c.value,
            "order": c.order, "record": c.record}


def _cell_keys(roles: dict[str, Any]) -> list[str]:
    """The occupancy's key columns: the unit, then the cell's (strata, then the arm)."""
    arm = [roles["treatment"]] if roles["treatment"] is not None else []
    return [roles["unit"], *(roles["stratum"] or []), *arm]


def _user_level_facts(mechanism: UserLevelATE, frame: pd.DataFrame, roles: dict[str, Any]
                      ) -> dict[str, Any]:
    """The occupancy: the records of each (unit, cell), with the units' and cells' keys. It is
    public under the kind's relation (spec user_level_clip.md §1.3, §7.2-1: neighbours differ
    in one user's values only; the release is refused unless ``occupancy_public``), and the
    plan, hence the charge K * epsilon, is a function of it (spec §1.5)."""
    keys = _cell_keys(roles)
    occupancy = frame.groupby(keys, sort=True, dropna=False).size()
    index = occupancy.index.to_frame(index=False)
    return {"occupancy": {"keys": keys, "records": occupancy.to_numpy().tolist(),
                          "values": [index[k].astype(object).where(index[k].notna(), None)
                                     .tolist() for k in keys]}}


def _user_level_public(mechanism: UserLevelATE, roles: dict[str, Any],
                       registration: Registration) -> PublicFacts:
    """The plan's facts of the registered occupancy: the library's input check of a table of
    its records with every value missing (values are never refused, only clamped:
    :func:`dpcausal.user_level.records.clamp_values`), one order and one id per record."""
    held = registration.facts["occupancy"]
    counts = np.asarray(held["records"], dtype=np.int64)
    table = pd.DataFrame({k: np.repeat(np.asarray(v, dtype=object), counts) for k, v in
                          zip(held["keys"], held["values"], strict=True)}).infer_objects()
    table[roles["outcome"]] = np.nan
    for role in ("order", "record"):
        if roles[role] is not None:
            table[roles[role]] = np.arange(len(table)).astype(float if role == "order" else str)
    return mechanism.check_input(table, **roles).public


def _user_level_published(release: Any) -> dict[str, pd.DataFrame]:
    """The noisy per-cell statistics and the per-stratum ATE table (spec user_level.md §7.1), as
    CSV files a reader opens in MLflow's UI."""
    tables = {"cells.csv": release.cells}
    if release.strata is not None:
        tables["strata.csv"] = release.strata
    return tables


def _user_level_detail(config: UserLevelConfig) -> dict[str, Any]:
    m = config.mechanism
    return {"mechanism": f"UserLevelRelease/{m.clip}", "bounds": list(m.outcome_bounds),
            "epsilon_per_cell": m.epsilon}


def _zeta_cap(config: Any) -> dict[str, float | None]:
    return {"zeta": getattr(config.ledger, "budget", None)}


def _epsilon_cap(config: Any) -> dict[str, float | None]:
    led = config.ledger
    return ({"epsilon": led.epsilon, "delta": led.delta} if led.epsilon is not None
            else {"epsilon": None, "delta": None})


KINDS: dict[str, Kind] = {
    "ate": Kind("ate", ReleaseConfig, PrivateATE, "conf/release/demo.yaml", _build_core,
                _core_roles, _core_detail, _zeta_cap, _core_facts, _core_public),
    "cluster_dp": Kind("cluster_dp", ClusterDPConfig, ClusterDP,
                       "conf/release/cluster_dp_demo.yaml",
                       _build_cluster_dp, _cluster_roles, _cluster_detail, _epsilon_cap,
                       _cluster_facts, _cluster_public, _cluster_published),
    "federated": Kind("federated", FederatedConfig, FederatedATE,
                      "conf/release/federated_demo.yaml",
                      _build_federated, _federated_roles, _federated_detail, _epsilon_cap,
                      _federated_facts, _federated_public),
    "user_level": Kind("user_level", UserLevelConfig, UserLevelATE,
                       "conf/release/user_level_demo.yaml",
                       _build_user_level, _user_level_roles, _user_level_detail, _epsilon_cap,
                       _user_level_facts, _user_level_public, _user_level_published),
}


def _tag(value: Any) -> str:
    return value.get("kind", "ate") if isinstance(value, dict) else value.kind


# The flow parameter: a config of any kind, told apart by ``kind`` (absent: ``ate``).
AnyConfig = Annotated[
    Union[tuple(Annotated[k.model, Tag(k.name)] for k in KINDS.values())],
    Discriminator(_tag),
]


def kind_of(path: str | Path | None, overrides: list[str] | tuple[str, ...] = (),
            base: dict[str, Any] | None = None) -> str:
    """The ``kind`` the settings declare (after overrides); unknown kinds are refused."""
    raw, where = read_raw(path, overrides, base)
    kind = raw.get("kind", "ate")
    if kind not in KINDS:
        item = override_at("kind", overrides)
        origin = where if item is None else f"--set {item}"
        raise ConfigError(f"invalid {origin}: kind {kind!r} is not one of "
                          f"{', '.join(sorted(KINDS))} (leave it out for the core ATE release)")
    return kind


def load_any(path: str | Path | None, overrides: list[str] | tuple[str, ...] = (),
             base: dict[str, Any] | None = None) -> Any:
    """The validated config of whichever kind the settings declare, with ``data.path`` or
    ``data.partitions`` absolute: a path written in the config file is relative to the file's
    folder, one given by an override (``--set``) to the working directory."""
    kind = KINDS[kind_of(path, overrides, base)]
    config = load_typed(kind.model, path, overrides, base, example=kind.example)
    key = "data.path" if config.data.path is not None else "data.partitions"
    in_file = path is not None and override_at(key, overrides) is None
    return with_absolute_paths(config, Path(path).resolve().parent if in_file else None)


def kind_of_mechanism(mechanism: Mechanism) -> Kind:
    """The first kind whose ``build`` makes ``mechanism``'s class (or a base of it)."""
    return next(k for k in KINDS.values() if isinstance(mechanism, k.mechanism))


def build_mechanism(config: Any) -> Mechanism:
    """The mechanism of ``config``'s kind; a model or parameter the library cannot use raises a
    ``ValueError`` here, before any data are read."""
    return KINDS[config.kind].build(config)
