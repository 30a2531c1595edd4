"""Typed release configuration: ``conf/release/*.yaml`` validated by pydantic at the flow boundary.

Everything here is public (it is logged as Prefect flow parameters and MLflow params), so secrets
such as database passwords belong in environment variables or Prefect blocks: ``data.url`` expands
``${VAR}`` only when the data are loaded, never in the stored config, and ``data.url_block`` names
a saved Prefect ``Secret`` or ``SqlAlchemyConnector`` block that is loaded only then.
"""

from __future__ import annotations

import difflib
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, TypeVar, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, model_validator

from conf import registry
from dpcausal.location import data_dir

_M = TypeVar("_M", bound=BaseModel)
_C = TypeVar("_C", bound=BaseModel)


class ConfigError(ValueError):
    """A release config that cannot be used; the message is one paragraph naming the problem."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def renamed_keys(raw: Any, section: str, old_to_new: dict[str, str],
                 convert: dict[str, Callable[[Any], Any]] | None = None) -> Any:
    """``raw`` (a config section before validation) with its deprecated keys renamed (old ->
    new, the value ``convert``-ed to the new key's meaning), each with a DeprecationWarning: the
    old names keep working for one release. A section giving both names is refused."""
    if not isinstance(raw, dict):
        return raw
    out = dict(raw)
    for old, new in old_to_new.items():
        if old not in out:
            continue
        if new in out:
            raise ValueError(f"{section}.{old} is the old name of {section}.{new}: give only "
                             f"{section}.{new}")
        value = out.pop(old)
        out[new] = (convert or {}).get(old, lambda v: v)(value)
        warnings.warn(f"config key {section}.{old} is deprecated and will be removed in the next "
                      f"release: use {section}.{new}", DeprecationWarning, stacklevel=2)
    return out


URL_BLOCK_TYPES = ("secret", "sqlalchemy-connector")
#: A ``data.path`` or ``data.partitions`` beginning with this lies under the project's data
#: folder (docs/guide/where-things-live.md), e.g. the shipped demo configs' ``<data>/demo/...``.
DATA_FOLDER = "<data>/"

#: The column types a config can declare (``data.dtypes``); see :class:`Schema`.
DType = Literal["float", "int", "bool", "str"]


@dataclass(frozen=True)
class Schema:
    """The declared types of the columns a release reads (issue 26 §1): ``columns`` maps each
    column to a :data:`DType`, in reading order; ``rest`` is the type of every other column of
    the source (the core's default covariates), or None to drop them. The reader
    (:func:`tasks.data.read_frame`) coerces each column to its type by public rules, so no type
    is ever inferred from the values."""

    columns: dict[str, str]
    rest: str | None = None


class DataSource(_Strict):
    """Either a CSV/Parquet ``path``, a ``sql`` query against a database given by a SQLAlchemy
    ``url`` (``${VAR}`` expanded from the environment) or by ``url_block``, a saved Prefect block
    named ``secret/<name>`` (its value is the URL) or ``sqlalchemy-connector/<name>``
    (prefect-sqlalchemy), or ``partitions``, a directory of Parquet files read by Dask workers
    (the core release only, issue 19 §3), whose folds hash the record identity ``id_column``;
    ``fold_key: curator`` takes the curator's fold key instead of a fresh one per release. A
    ``sql`` source with ``sql_partitions: P`` and ``id_column`` is partitioned too (issue 28 §3,
    issue 35): P partitions by ranges of the id (``auto``: P from n and the workers' memory),
    each read from the query by a Dask worker (:mod:`tasks.sql_partitions`; the id's type is
    ``dtypes`` of the id column, else str).
    ``missing`` is the core release's declared missing-value policy (``impute``, the default:
    covariates take ``missing_fill`` plus an indicator, a row without treatment or outcome scores
    0; ``drop``: complete cases, whose count is published as n).

    A local ``path`` or ``partitions`` is relative to the config file's folder, or, beginning
    with ``<data>/``, to the project's data folder (``$DPCAUSAL_DATA``, else the checkout's
    ``data/``; docs/guide/where-things-live.md).

    ``dtypes`` declares a column's type (float, int, bool or str) where its role's default does
    not fit (defaults: float for outcomes, covariates and orders, int for a treatment or arm, str
    for ids, clusters and strata): the reader never infers a type from the values."""

    path: str | None = None
    sql: str | None = None
    url: str | None = None
    url_block: str | None = None
    partitions: str | None = None
    id_column: str | None = None
    sql_partitions: Annotated[int, Field(ge=1)] | Literal["auto"] | None = None
    fold_key: Literal["release", "curator"] | None = None
    # the declared missing-value policy of the core release (dpcausal.missing): public
    missing: Literal["impute", "drop", "drop_public_count"] = "impute"
    missing_fill: float = 0.0
    dtypes: dict[str, DType] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_source(self) -> "DataSource":
        if sum(x is not None for x in (self.path, self.sql, self.partitions)) != 1:
            raise ValueError("give exactly one of data.path (CSV/Parquet), data.sql "
                             "(with data.url or data.url_block) or data.partitions (a directory "
                             "of Parquet files, with data.id_column)")
        if self.sql is not None and (self.url is None) == (self.url_block is None):
            raise ValueError("data.sql needs exactly one of data.url (a SQLAlchemy database URL) "
                             "or data.url_block (a saved Prefect block: secret/<name> or "
                             "sqlalchemy-connector/<name>)")
        if self.sql is None and (self.url or self.url_block):
            raise ValueError("data.url and data.url_block go with data.sql only")
        if self.sql_partitions is not None and self.sql is None:
            raise ValueError("data.sql_partitions splits a data.sql query: give data.sql")
        if self.partitioned and not self.id_column:
            raise ValueError(f"data.{'partitions' if self.partitions else 'sql_partitions'} "
                             "needs data.id_column, the column of unique record ids that assigns "
                             "each row its fold (a keyed hash) and, for SQL, its partition (a "
                             "range)")
        if not self.partitioned and (self.id_column is not None or self.fold_key is not None):
            raise ValueError("data.id_column and data.fold_key go with data.partitions or "
                             "data.sql_partitions only")
        if self.partitions is not None and self.dtypes:
            raise ValueError("data.dtypes does not apply to data.partitions: a partitioned "
                             "source's types are the Parquet schema in its footers")
        if self.url_block is not None:
            kind, _, name = self.url_block.partition("/")
            if kind not in URL_BLOCK_TYPES or not name:
                raise ValueError(f"data.url_block must be secret/<name> or "
                                 f"sqlalchemy-connector/<name>, got {self.url_block!r}")
        if self.path is not None and not self.path.lower().endswith((".csv", ".parquet", ".pq")):
            raise ValueError(f"data.path must end in .csv or .parquet, got {self.path!r}")
        return self

    @property
    def partitioned(self) -> bool:
        """Whether the release runs on the partitioned path: Parquet files (``partitions``) or
        a SQL query split by ranges of its id (``sql_partitions``)."""
        return self.partitions is not None or self.sql_partitions is not None


class Columns(_Strict):
    treatment: str
    outcome: str
    covariates: list[str] | None = None  # None: every other column


class ModelSpec(_Strict):
    name: str
    params: dict[str, Any] = Field(default_factory=dict)


class Models(_Strict):
    """The fold models by registry name (:mod:`conf.registry`); the default ``quadratic`` is
    the library's (degree-2 features, logistic propensity, per-arm least squares)."""

    propensity: ModelSpec = ModelSpec(name="quadratic")
    outcome: ModelSpec = ModelSpec(name="quadratic")

    @model_validator(mode="after")
    def _known(self) -> "Models":
        for role in ("propensity", "outcome"):
            spec = getattr(self, role)
            registry.resolve(spec.name, role)
            registry.check_params(spec.name, spec.params, role)
        return self


#: A covariate's public bounds: ``[lo, hi]``.
Bounds = tuple[float, float]


class EstimatorConfig(_Strict):
    """Public parameters of :class:`dpcausal.PrivateATE`; ``None`` keeps the library default.

    ``estimator``: ``auto`` (the default: the planner's narrowest expected CI among the
    estimators whose assumptions the release states), the cross-fitted ensembles ``aipw``,
    ``ipw``, ``g``, or the estimators from noisy sums ``dim`` (difference in means: a
    randomized ``design`` only) and ``lin`` (Lin's regression adjustment: needs
    ``covariate_bounds``, a mapping covariate -> [lo, hi] or one pair per covariate in column
    order, and in an observational design ``assume_linear: true``). ``design``
    (``observational`` or ``randomized``), ``assume_linear`` (the declaration that each arm's
    outcome is linear in the covariates: only then may ``auto`` take ``lin`` in an
    observational design) and ``covariate_bounds`` are public and published with the release;
    ``prerelease`` (a share r of zeta^2 in (0, 0.5]) learns the planning facts below that are
    unstated, by a charged pre-release inside zeta, from which ``auto`` chooses after the
    charge (issue 39 item 5);
    ``outcome_sd`` and ``treated_share`` are stated planning facts for the planner's expected
    CI and ``auto``'s choice (defaults: the widest spread the outcome bounds allow, and 1/2, or
    the values the curator registered as public facts). ``estimand``: ``ate`` (the default)
    or ``att``, the average effect on the treated (the ``aipw`` ensemble, and ``auto`` when it
    takes it; ``g`` and ``ipw`` refuse it), published with the release."""

    estimator: Literal["auto", "aipw", "ipw", "g", "dim", "lin"] = "auto"
    design: Literal["observational", "randomized"] = "observational"
    covariate_bounds: dict[str, Bounds] | list[Bounds] | None = None
    outcome_sd: float | None = Field(None, gt=0, allow_inf_nan=False)
    assume_linear: StrictBool | None = None     # None: not declared (the library's False)
    prerelease: float | None = Field(None, gt=0, le=0.5, allow_inf_nan=False)
    treated_share: float | None = Field(None, gt=0, lt=1, allow_inf_nan=False)
    estimand: Literal["ate", "att"] = "ate"
    n_folds: int | Literal["auto"] | None = None
    block_folds: int | Literal["auto", "full"] | None = None  # "full": the paper's ensemble
    folds: Literal["shuffle", "contiguous"] | None = None
    fold_seed: int = 0  # evaluation only: seeds the folds (a release draws secret folds)
    outcome_bounds: tuple[float, float] | None = None
    propensity_clip: float | Literal["auto"] | None = None
    zeta: float | None = None
    ci_share: float | None = None
    alpha: float | None = None
    p1: float | None = None
    sensitivity: Literal["tight", "theorem1", "lemma", "released_code"] | None = None
    sigma2: Literal["paper", "tight"] | None = None
    ci: Literal["paper", "conservative"] | None = None
    delta: float | None = None
    chunk_size: int | None = None

    @model_validator(mode="after")
    def _estimator_rules(self) -> "EstimatorConfig":
        """The library's refusals of the estimator choice, at load (its arguments are these
        keys): ``dim`` only in a randomized design, ``lin`` with covariate bounds and, in an
        observational design, ``assume_linear: true``, each bound finite with lo < hi,
        ``outcome_sd`` within the outcome bounds, ``estimand: att`` not with ``g`` or
        ``ipw``."""
        from dpcausal import PrivateATE

        bounds = self.covariate_bounds
        PrivateATE(**self.library_kwargs())._check_choice(
            None if bounds is None else len(bounds),
            list(bounds) if isinstance(bounds, dict) else None)
        return self

    def library_kwargs(self) -> dict[str, Any]:
        """Constructor arguments for PrivateATE (models excluded), library defaults for unset
        ones."""
        kw = self.model_dump(exclude_none=True, exclude={"fold_seed"})
        kw["random_state"] = self.fold_seed
        if kw.get("block_folds") == "full":
            kw["block_folds"] = None
        return kw


class DaskTLSConfig(_Strict):
    """The PEM files of Dask's mutual TLS (``distributed.security.Security``): the CA that signed
    every scheduler, worker and client certificate, and this client's certificate and key."""

    ca_file: str
    cert: str
    key: str


_LOOPBACK = ("127.", "localhost", "[::1]", "::1")


class RunnerConfig(_Strict):
    """Where a release's parallel work runs. Dask workers receive rows, fold keys and fold
    models, so a scheduler off this machine is reached over ``tls://`` with ``tls`` (mutual
    TLS), or over cleartext ``tcp://`` only when ``cleartext: true`` declares the network
    trusted (deploy/README.md, "Trust boundary")."""

    kind: Literal["threads", "dask"] = "threads"
    address: str | None = None  # a running Dask scheduler; None starts a LocalCluster
    max_workers: int = Field(2, ge=1)
    tls: DaskTLSConfig | None = None
    cleartext: bool = False

    @model_validator(mode="after")
    def _secure_transport(self) -> RunnerConfig:
        if self.address is None:
            if self.tls is not None:
                raise ValueError("runner.tls is for a running scheduler: set runner.address "
                                 "(tls://host:port) too")
            return self
        scheme, _, rest = self.address.rpartition("://")
        if scheme == "tls" and self.tls is None:
            raise ValueError(f"runner.address {self.address} needs runner.tls (ca_file, cert, "
                             "key): the PEM files of the cluster's mutual TLS")
        if scheme != "tls" and self.tls is not None:
            raise ValueError(f"runner.tls is set but runner.address {self.address} is not "
                             "tls://: write the scheduler's address as tls://host:port")
        if scheme in ("", "tcp") and not rest.startswith(_LOOPBACK) and not self.cleartext:
            raise ValueError(
                f"runner.address {self.address} sends rows and fold models in cleartext to "
                "another machine: use tls://host:port with runner.tls (deploy/README.md), or "
                "declare a trusted network with runner.cleartext: true")
        return self


class LedgerConfig(_Strict):
    dataset_id: str = Field(min_length=1)
    budget: float | None = Field(None, gt=0)  # the cap a refusal suggests; never creates one


class EpsilonLedgerConfig(_Strict):
    """Ledger dataset of an (epsilon, delta) mechanism and, for a dataset seen for the first
    time, its (epsilon, delta) cap."""

    dataset_id: str = Field(min_length=1)
    epsilon: float | None = Field(None, gt=0)
    delta: float = Field(1e-5, gt=0, lt=1)


def default_experiment(dataset_id: str) -> str:
    """The MLflow experiment of a dataset's releases unless the curator names one:
    ``dpcausal/<dataset_id>``."""
    return f"dpcausal/{dataset_id}"


class MlflowConfig(_Strict):
    experiment: str | None = None  # default: dpcausal/<dataset_id>
    tracking_uri: str | None = None  # default: MLFLOW_TRACKING_URI (project: sqlite under data/)


class ReleaseCommon(_Strict):
    """What every release config kind has: the mode, the runner, MLflow settings and the
    evaluation-only noise seed (a release draws its noise from OS entropy)."""

    mode: Literal["release", "evaluation"] = "release"
    runner: RunnerConfig = RunnerConfig()
    mlflow: MlflowConfig = MlflowConfig()
    noise_seed: int | None = None  # evaluation mode only

    @property
    def evaluation(self) -> bool:
        return self.mode == "evaluation"

    @property
    def experiment_name(self) -> str:
        """The MLflow experiment: ``dpcausal/<dataset_id>`` unless configured; evaluation runs
        go to ``<experiment>/evaluation`` (issue 18 item 6)."""
        name = self.mlflow.experiment or default_experiment(
            self.ledger.dataset_id)  # type: ignore[attr-defined]
        return f"{name}/evaluation" if self.evaluation else name

    @model_validator(mode="after")
    def _partitions_in_core_only(self) -> "ReleaseCommon":
        data, kind = getattr(self, "data", None), getattr(self, "kind", "ate")
        if kind != "ate" and data is not None and data.partitioned:
            key = "partitions" if data.partitions is not None else "sql_partitions"
            raise ValueError(f"data.{key} works with the core release (kind: ate) only, "
                             f"not with kind: {kind}")
        if kind != "ate" and data is not None and (data.missing, data.missing_fill) != (
                "impute", 0.0):
            raise ValueError(f"data.missing and data.missing_fill configure the core release "
                             f"(kind: ate) only, not kind: {kind}: leave them out")
        return self

    @model_validator(mode="after")
    def _seed_in_evaluation_only(self) -> "ReleaseCommon":
        if self.mode == "release" and self.noise_seed is not None:
            raise ValueError(
                "noise_seed is only allowed in evaluation mode: a release draws its noise from OS "
                "entropy (a known seed would let anyone subtract the noise)"
            )
        return self


class ReleaseConfig(ReleaseCommon):
    kind: Literal["ate"] = "ate"  # the core estimator; other kinds: conf/kinds.py
    name: str = Field("release", pattern=r"^[A-Za-z0-9_.-]+$")
    data: DataSource
    columns: Columns
    estimator: EstimatorConfig = EstimatorConfig()
    models: Models = Models()
    folds_per_task: int | None = Field(None, ge=1)  # None: about 4 chunks per worker
    ledger: LedgerConfig

    @model_validator(mode="after")
    def _release_rules(self) -> "ReleaseConfig":
        if self.mode == "release" and self.estimator.sensitivity == "released_code":
            raise ValueError(
                "estimator.sensitivity='released_code' is not a valid privacy bound; "
                "use it in evaluation mode only"
            )
        bounds, named = self.estimator.covariate_bounds, self.columns.covariates
        if isinstance(bounds, dict) and named is not None and set(bounds) != set(named):
            raise ValueError(
                "estimator.covariate_bounds must name exactly the covariates of "
                f"columns.covariates ({', '.join(named)}): missing "
                f"{sorted(set(named) - set(bounds))}, not covariates "
                f"{sorted(set(bounds) - set(named))}")
        if isinstance(bounds, list) and named is not None and len(bounds) != len(named):
            raise ValueError(f"estimator.covariate_bounds gives {len(bounds)} pairs for "
                             f"{len(named)} covariates in columns.covariates: give one [lo, hi] "
                             "per covariate, in column order (or a mapping covariate -> "
                             "[lo, hi])")
        if self.data.partitioned:
            self._partitioned_rules()
        return self

    def _partitioned_rules(self) -> None:
        """What a partitioned source (issue 19 §3) needs: keyed-hash folds, an id column that is
        not also a value the release reads. It runs on Dask whatever ``runner.kind`` says (the
        curator's ``runner.address``, else a LocalCluster of ``runner.max_workers``:
        :func:`flows.partitioned_release.dask_runner`), so the curator's deployment settings
        need no runner of their own for it."""
        if self.estimator.folds is not None:
            raise ValueError("estimator.folds does not apply to data.partitions, whose folds "
                             "are a keyed hash of data.id_column: leave it out")
        if self.data.missing != "impute":
            raise ValueError(f"data.missing: {self.data.missing} does not apply to "
                             "data.partitions, whose n is fixed by the partitions' footers "
                             "before any value is read: use data.missing: impute (the default)")
        if self.estimator.prerelease is not None:
            from dpcausal.ate.partitioned import PRERELEASE_REFUSED

            raise ValueError(f"estimator.{PRERELEASE_REFUSED}")
        c = self.columns
        if self.data.id_column in (c.treatment, c.outcome, *(c.covariates or [])):
            raise ValueError(f"data.id_column {self.data.id_column!r} is the record identity, "
                             "so it cannot also be the treatment, the outcome or a covariate")


# ---------------------------------------------------------------------------- loading

def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = (),
                base: dict[str, Any] | None = None) -> ReleaseConfig:
    """Read a YAML config (or start from ``base``), apply ``key=value`` overrides, validate.

    Raises :class:`ConfigError` with a one-paragraph message for a missing file, invalid YAML, an
    unknown key, a wrong type or an unknown model.
    """
    return load_typed(ReleaseConfig, path, overrides, base, example="conf/release/demo.yaml")


def load_typed(model: type[_M], path: str | Path | None, overrides: list[str] | tuple[str, ...],
               base: dict[str, Any] | None, *, example: str) -> _M:
    """The shared loader of every config kind: YAML file (merged over ``base``), then ``--set``
    overrides, then pydantic validation; every failure is one :class:`ConfigError` paragraph
    that names the ``--set`` an error came from and the closest valid key to an unknown one."""
    raw, where = read_raw(path, overrides, base, example=example)
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(describe_invalid(model, exc, where, overrides)) from None


def read_raw(path: str | Path | None, overrides: list[str] | tuple[str, ...] = (),
             base: dict[str, Any] | None = None, *, example: str = "conf/release/demo.yaml"
             ) -> tuple[dict[str, Any], str]:
    """The unvalidated settings (``base`` <- YAML file <- overrides) and where they came from."""
    raw: dict[str, Any] = dict(base or {})
    where = "config"
    if path is not None:
        p = Path(path)
        where = str(p)
        if not p.is_file():
            raise ConfigError(f"config file {where!r} does not exist; pass a YAML file such as "
                              f"{example}")
        try:
            loaded = yaml.safe_load(p.read_text())
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {where!r} is not valid YAML: "
                              f"{' '.join(str(exc).split())}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {where!r} must hold a mapping of settings, "
                              f"got {type(loaded).__name__}")
        raw = _merge(raw, loaded)
    for item in overrides:
        raw = apply_override(raw, item)
    return raw, where


def apply_override(raw: dict[str, Any], item: str) -> dict[str, Any]:
    """Set a dotted ``key=value`` (value parsed as YAML: numbers, lists, null) in a copy of raw."""
    key, sep, value = item.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", key):
        raise ConfigError(f"--set expects key=value with a dotted key (e.g. estimator.zeta=1.0), "
                          f"got {item!r}")
    try:
        parsed = yaml.safe_load(value) if value.strip() else None
    except yaml.YAMLError:
        parsed = value
    out = _merge(raw, {})
    node = out
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        node[part] = dict(child) if isinstance(child, dict) else {}
        node = node[part]
    node[parts[-1]] = parsed
    return out


def describe_invalid(model: type[BaseModel], exc: ValidationError, where: str,
                     overrides: list[str] | tuple[str, ...] = ()) -> str:
    """pydantic errors as one line, ``invalid <file>: a.b: message (got x); c: ...``: an unknown
    key gets the closest valid key of ``model`` (difflib), and an error at a key given by
    ``--set`` says so (the whole message is then ``invalid --set ...``)."""
    keys = config_keys(model)
    parts, blamed = [], []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"] if not str(x).startswith("function-after"))
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
            near = closest_key(loc, keys)
            if near is not None:
                msg += f"; did you mean {near}?"
        got = f" (got {err['input']!r})" if err["type"] not in (
            "missing", "value_error", "extra_forbidden") and \
            not isinstance(err.get("input"), dict) else ""
        item = override_at(loc, overrides)
        blamed.append(item is not None)
        source = f" [from --set {item}]" if item is not None else ""
        parts.append(f"{loc + ': ' if loc else ''}{msg}{got}{source}")
    origin = "--set" if all(blamed) else where
    return f"invalid {origin}: " + "; ".join(parts)


def override_at(loc: str, overrides: list[str] | tuple[str, ...]) -> str | None:
    """The last ``--set key=value`` that set ``loc``, a key above it, or a key below it."""
    for item in reversed(overrides):
        key = item.partition("=")[0]
        if loc and (loc == key or loc.startswith(key + ".") or key.startswith(loc + ".")):
            return item
    return None


def config_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every dotted key a config model accepts (nested models included)."""
    keys: list[str] = []
    for name, info in model.model_fields.items():
        keys.append(prefix + name)
        for sub in _models_in(info.annotation):
            keys += config_keys(sub, f"{prefix}{name}.")
    return keys


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def closest_key(key: str, keys: list[str]) -> str | None:
    """The valid key closest to a mistyped one: by the whole dotted key, else by its last part
    (``zeta`` -> ``estimator.zeta``); None when nothing is close."""
    near = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
    if near:
        return near[0]
    leaf = key.rsplit(".", 1)[-1]
    leaves = difflib.get_close_matches(leaf, [k.rsplit(".", 1)[-1] for k in keys], n=1,
                                       cutoff=0.75)
    return next((k for k in keys if leaves and k.rsplit(".", 1)[-1] == leaves[0]), None)


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = {k: (_merge(v, {}) if isinstance(v, dict) else v) for k, v in a.items()}
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def with_absolute_paths(config: _C, base: Path | None = None) -> _C:
    """The config (any kind) with a relative ``data.path`` or ``data.partitions`` made absolute
    (against ``base`` or the cwd), and one beginning with ``<data>/`` under the project's data
    folder (:func:`dpcausal.location.data_dir`, docs/guide/where-things-live.md: where ``dpcausal
    demo`` writes); an fsspec URL (``s3://...``) is left as given."""
    key = "path" if config.data.path is not None else "partitions"
    where = getattr(config.data, key)
    if where is None or "://" in where:
        return config
    if where.startswith(DATA_FOLDER):
        path = data_dir() / where.removeprefix(DATA_FOLDER)
    elif Path(where).is_absolute():
        return config
    else:
        path = Path(base or Path.cwd()) / where
    return config.model_copy(update={"data": config.data.model_copy(update={key: str(path)})})
