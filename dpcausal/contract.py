"""The one release contract every mechanism follows, so charging, printing and pooling are
written once for all of them.

A mechanism is a scikit-learn style estimator whose constructor stores public parameters only.
One call to :meth:`Mechanism.fit` is one privacy release, run in three phases:

1. :meth:`Mechanism.check_input` validates the input and raises every refusal that can be known
   before anything is charged; it returns a :class:`Prepared` input whose ``public`` facts are the
   only thing the charge may depend on (public: an orchestrator runs it before the charge);
2. :meth:`Mechanism.privacy_charge` computes the data-free charge from those public facts
   (public);
3. ``Mechanism._private_release`` draws the noise once and returns a :class:`Release`. It is
   private: every public way to draw noise goes through the accountant of the current context
   (:mod:`dpcausal.session`), as OpenDP admits no measurement outside its privacy map, so no
   public call draws noise without being charged. An orchestrator that has the checked input
   calls :func:`dpcausal.session.charged_release`.

Results share one frozen base, :class:`Release`: the same names everywhere (``ate``, ``ci``,
``se``, ``level``, ``privacy``, ``n``), the same printing, dict/JSON conversion, ``summary()``
and ``confint()`` tables, rich display in Jupyter and a ``plot()``.
"""

from __future__ import annotations

import dataclasses
import html
import importlib
import json
import math
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    ClassVar,
    Generic,
    Iterator,
    Mapping,
    Sequence,
    TypeVar,
    cast,
)

import numpy as np
import pandas as pd
from scipy.stats import norm
from sklearn.base import BaseEstimator

from dpcausal._results import ResultMixin, to_jsonable
from dpcausal.data_check import DataCheck, check_roles_data

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from dpcausal.accounting import PrivacyCharge

UNITS = ("row", "user", "label", "client")


@dataclass(frozen=True)
class Privacy:
    """The public privacy position of one release.

    ``epsilon``/``delta`` is the (ε, δ)-DP guarantee at the reported δ; ``unit`` is what a
    neighbouring data set changes (one ``"row"``, every record of one ``"user"``, one ``"label"``
    or one ``"client"``); ``mechanism`` names the noise mechanism. ``zeta`` (Gaussian DP) and
    ``rho`` (zCDP) are given where the mechanism has them exactly; ``detail`` holds the
    mechanism's own public figures.
    """

    epsilon: float
    delta: float
    unit: str
    mechanism: str
    zeta: float | None = None
    rho: float | None = None
    detail: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"unit must be one of {UNITS}, got {self.unit!r}")
        if not (isinstance(self.epsilon, (int, float)) and self.epsilon >= 0):
            raise ValueError(f"epsilon must be a number >= 0, got {self.epsilon!r}")
        if not (isinstance(self.delta, (int, float)) and 0 <= self.delta < 1):
            raise ValueError(f"delta must be in [0, 1), got {self.delta!r}")

    def describe(self) -> str:
        """One line: ``(ε, δ)-DP per <unit> (<mechanism>)`` with the GDP/zCDP figures if known."""
        text = f"({self.epsilon:.4g}, {self.delta:.1e})-DP per {self.unit}"
        if self.zeta is not None:
            text += f" = {self.zeta:.4g}-GDP"
        return f"{text} ({self.mechanism})"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Privacy:
        names = {"epsilon", "delta", "unit", "mechanism", "zeta", "rho", "detail"}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass(frozen=True, kw_only=True)
class Release(ResultMixin):
    """One differentially private release: the base every mechanism's result extends.

    Attributes
    ----------
    ate : float or None
        The released estimate (``None`` where a mechanism releases no ATE).
    ci : (float, float) or None
        Its ``level`` confidence interval.
    se : float or None
        Its *total* standard error, sampling and privacy noise together.
    level : float
        Coverage of ``ci``.
    privacy : Privacy
        The public privacy position (epsilon, delta, unit, mechanism, detail).
    n : int
        The public size.
    evaluation : bool
        True for an evaluation-mode result, which is NOT private.
    dataset : str or None
        Names the data released without telling anything about them: the ledger's dataset id
        the release was charged to, or the session accountant's random id of its input
        (:mod:`dpcausal.session`). Releases of the same data share it, which
        :func:`dpcausal.meta.combine` needs: their sampling error is one, so it pools them as
        one study.
    """

    kind: ClassVar[str] = "release"

    ate: float | None
    ci: tuple[float, float] | None
    se: float | None
    level: float
    privacy: Privacy
    n: int
    evaluation: bool = False
    dataset: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.privacy, Mapping):
            object.__setattr__(self, "privacy", Privacy.from_dict(self.privacy))
        if not isinstance(self.privacy, Privacy):
            raise AssertionError("bug: a release's privacy must be a Privacy object")
        if not 0 < self.level < 1:
            raise AssertionError(f"bug: CI level {self.level!r} outside (0, 1)")
        if self.ate is not None and not math.isfinite(self.ate):
            raise AssertionError("bug: a release must publish a finite estimate")
        if self.se is not None and not (math.isfinite(self.se) and self.se >= 0):
            raise AssertionError("bug: a release's standard error must be finite and >= 0")
        if self.ci is not None:
            lo, hi = self.ci
            if self.ate is not None and not lo <= self.ate <= hi:
                raise AssertionError("bug: the CI must contain the released estimate")

    # ------------------------------------------------------------------ tables
    def estimate_rows(self) -> list[dict[str, Any]]:
        """One dict per released estimate (``name``, ``estimate``, ``se``, ``ci_lower``,
        ``ci_upper``); mechanisms that release several estimates (strata) override it."""
        if self.ate is None:
            return []
        lo, hi = self.ci if self.ci is not None else (None, None)
        return [{"name": "ATE", "estimate": self.ate, "se": self.se,
                 "ci_lower": lo, "ci_upper": hi}]

    def table_rows(self) -> list[dict[str, Any]]:
        """The rows of :meth:`summary`: the released estimates (:meth:`estimate_rows`); a
        mechanism that releases no estimate gives its released figures instead."""
        return self.estimate_rows()

    @property
    def estimator_name(self) -> str:
        """What made the release, as :meth:`summary` names it: the release's kind unless its
        mechanism names its estimator (the core release: ``aipw``, ``dim``, ...)."""
        return self.kind

    def summary(self) -> pd.DataFrame:
        """The released estimates as a table (DoubleML's layout).

        Returns
        -------
        pandas.DataFrame
            One row per estimate (:meth:`table_rows`), columns ``estimator``
            (:attr:`estimator_name`), ``estimate``, ``se``, ``ci_lower``, ``ci_upper``,
            ``epsilon``, ``delta``.
        """
        rows = self.table_rows()
        frame = pd.DataFrame(rows, columns=["name", "estimate", "se", "ci_lower", "ci_upper"])
        frame = frame.set_index("name").astype(float)
        frame.index.name = None
        frame.insert(0, "estimator", self.estimator_name)
        frame["epsilon"] = float(self.privacy.epsilon)
        frame["delta"] = float(self.privacy.delta)
        return frame

    def confint(self, level: float | None = None) -> pd.DataFrame:
        """Confidence intervals, one row per estimate, columns named like statsmodels/DoubleML.

        Parameters
        ----------
        level : float, optional
            ``None`` (or the release's own level) gives the published intervals. Another level
            in (0, 1) gives the normal interval ``estimate ± z·se`` from the released values:
            post-processing, no further privacy cost, but it ignores any mechanism-specific CI
            construction.

        Returns
        -------
        pandas.DataFrame
            Columns ``"<lower> %"`` and ``"<upper> %"`` (``"2.5 %"``, ``"97.5 %"`` at 0.95).
        """
        level = self.level if level is None else float(level)
        if not 0 < level < 1:
            raise ValueError(f"level must be in (0, 1), got {level!r}")
        table = self.summary()
        lo_name, hi_name = f"{50 * (1 - level):g} %", f"{100 - 50 * (1 - level):g} %"
        if math.isclose(level, self.level):
            return pd.DataFrame({lo_name: table["ci_lower"], hi_name: table["ci_upper"]})
        z = float(norm.ppf(0.5 + level / 2))
        return pd.DataFrame({lo_name: table["estimate"] - z * table["se"],
                             hi_name: table["estimate"] + z * table["se"]})

    # ------------------------------------------------------------------ printing
    def reading(self) -> str:
        """One sentence saying what the interval covers."""
        return (f"The {100 * self.level:g}% CI covers both the sampling error and the privacy "
                "noise; se is the total standard error.")

    def summary_rows(self) -> list[tuple[str, str]]:
        rows: list[tuple[str, str]] = []
        for r in self.estimate_rows():
            ci = ("-" if r["ci_lower"] is None
                  else f"[{r['ci_lower']:.6g}, {r['ci_upper']:.6g}]")
            se = "-" if r["se"] is None else f"{r['se']:.4g}"
            rows.append((str(r["name"]), f"{r['estimate']:.6g}  {100 * self.level:g}% CI {ci}"
                                         f"  se {se}"))
        rows.append(("privacy", self.privacy.describe()))
        rows.append(("n", str(self.n)))
        rows += self.extra_rows()
        if self.evaluation:
            rows.append(("mode", "EVALUATION (not private)"))
        return rows

    def extra_rows(self) -> list[tuple[str, str]]:
        """Mechanism-specific (label, value) rows for the text summary."""
        return []

    def __str__(self) -> str:
        return super().__str__() + "\n" + self.reading()

    def _repr_html_(self) -> str:
        title = html.escape(type(self).__name__)
        privacy = html.escape(self.privacy.describe())
        return (f"<div><strong>{title}</strong> (n={self.n}; {privacy})"
                f"{self.summary().to_html(float_format=lambda v: f'{v:.6g}')}"
                f"<p>{html.escape(self.reading())}</p></div>")

    def to_dict(self) -> dict[str, Any]:
        """The release as JSON-ready values, with its ``kind`` and ``noise_share``; the inverse
        of :meth:`from_dict`.

        Returns
        -------
        dict
        """
        return {"kind": self.kind, **to_jsonable(self), "noise_share": self.noise_share()}

    # ------------------------------------------------------------------ rebuilding
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            _KINDS[cls.kind] = cls

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Release:
        """The release that :meth:`to_dict` gave ``d``, of the class its ``kind`` names.

        Parameters
        ----------
        d : mapping
            A release's :meth:`to_dict`; its ``"kind"`` selects the class.

        Returns
        -------
        Release
            ``Release.from_dict(r.to_dict())`` has the type of ``r`` and the same dict, text and
            summary (values not in the dict, such as Cluster-DP's unit-level data, are absent).

        Raises
        ------
        ValueError
            When ``kind`` names a class that is not ``cls`` or one of its subclasses.
        """
        kind = d.get("kind")
        target = _release_class(kind)
        if not issubclass(target, cls):
            raise ValueError(f"kind {kind!r} is a {target.__name__}, not a {cls.__name__}")
        names = {f.name for f in dataclasses.fields(target) if f.init}
        return target(**target._decoded({k: v for k, v in d.items() if k in names}, d))

    @classmethod
    def from_json(cls, text: str) -> Release:
        """:meth:`from_dict` of :meth:`to_json`'s text: ``Release.from_json(r.to_json())``.

        Parameters
        ----------
        text : str
            A release's JSON.

        Returns
        -------
        Release
        """
        return cls.from_dict(json.loads(text))

    @classmethod
    def _decoded(cls, values: dict[str, Any], d: Mapping[str, Any]) -> dict[str, Any]:
        """``values`` (the fields found in the dict ``d``) as the fields' types: JSON has no
        tuples, frames or objects; subclasses convert their own fields, then call this."""
        if values.get("ci") is not None:
            values["ci"] = tuple(values["ci"])
        values["privacy"] = Privacy.from_dict(values["privacy"])
        return values

    def ledger_detail(self) -> dict[str, Any]:
        """Public facts the release fixed after its charge that the ledger records with the
        charge when it commits (:meth:`dpcausal.ledger.store.ReleaseSlot.commit`); none by
        default."""
        return {}

    def of_dataset(self, dataset: str) -> Release:
        """This release labelled with the identity of its data (``dataset``), as the
        accountant that charged it names them."""
        return replace(self, dataset=dataset)

    # ------------------------------------------------------------------ plot
    def noise_share(self) -> float | None:
        """Share of the total variance that is privacy noise (``None`` where unknown)."""
        return None

    def plot(self, ax: Axes | None = None) -> Axes:
        """Estimates with their CIs (and the noise share in the title).

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Where to draw; default a new figure sized to the estimates.

        Returns
        -------
        matplotlib.axes.Axes
        """
        try:
            import matplotlib.pyplot as plt
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("plot() needs matplotlib: pip install matplotlib") from exc
        table = self.summary()
        if ax is None:
            _, ax = plt.subplots(figsize=(7, 1.6 + 0.4 * max(1, len(table))))
        y = np.arange(len(table))[::-1]
        lo = (table["estimate"] - table["ci_lower"]).to_numpy()
        hi = (table["ci_upper"] - table["estimate"]).to_numpy()
        ax.errorbar(table["estimate"], y, xerr=np.vstack([lo, hi]), fmt="o", capsize=4)
        ax.set_yticks(y, [str(i) for i in table.index])
        ax.axvline(0.0, color="grey", lw=0.8, ls="--")
        share = self.noise_share()
        title = f"{type(self).__name__}: {100 * self.level:g}% CI, {self.privacy.describe()}"
        if share is not None:
            title += f"\nprivacy noise: {100 * share:.0f}% of the variance"
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("estimate")
        return ax


_KINDS: dict[str, type[Release]] = {"release": Release}
# where the results of the mechanisms outside the core live (imported on first need)
_RESULT_MODULES = ("dpcausal.ate", "dpcausal.bounds_check", "dpcausal.cluster_dp",
                   "dpcausal.federated", "dpcausal.user_level")


def _release_class(kind: Any) -> type[Release]:
    if kind not in _KINDS:
        for module in _RESULT_MODULES:
            importlib.import_module(module)
    if kind not in _KINDS:
        raise ValueError(f"kind {kind!r} is not a release kind ({', '.join(sorted(_KINDS))}); "
                         "pass a dict made by Release.to_dict()")
    return _KINDS[kind]


@dataclass(frozen=True, eq=False)
class PublicFacts(Mapping[str, Any]):
    """Base of a mechanism's public facts: what :meth:`Mechanism.check_input` found that the
    charge may depend on (e.g. ``n``), a frozen dataclass per mechanism. It also reads as a
    mapping of its fields (``facts["n"]``, ``**facts``, equal to the dict of its fields), as the
    ``dict`` it replaces did."""

    def __getitem__(self, key: str) -> Any:
        if key not in self._names():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def _names(self) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(self))


P = TypeVar("P", bound=PublicFacts)


@dataclass(frozen=True)
class Prepared(Generic[P]):
    """A checked input: ``public`` holds the public facts the charge depends on (the
    mechanism's :class:`PublicFacts`); ``data`` holds the checked data, which only
    ``Mechanism._private_release`` may read."""

    public: P
    data: Any = field(repr=False)


class Mechanism(BaseEstimator, ABC, Generic[P]):
    """Base of every release mechanism: public parameters in the constructor, one release per
    :meth:`fit` (scikit-learn estimator contract: ``get_params``/``set_params``/``clone``).

    A mechanism supplies the three phases (abstract here): :meth:`check_input` returns a
    ``Prepared[P]`` whose public facts ``P`` are its own frozen dataclass, :meth:`privacy_charge`
    takes those facts, ``_private_release`` the prepared input."""

    unit: ClassVar[str] = "row"

    @abstractmethod
    def check_input(self, data: Any, *args: Any, **roles: Any) -> Prepared[P]:
        """Validate the input; raise every refusal that can be known before anything is
        charged."""

    @abstractmethod
    def privacy_charge(self, public: P, /) -> PrivacyCharge:
        """The data-free charge of one release, from its public facts only."""

    @abstractmethod
    def _private_release(self, prepared: Prepared[P], *, evaluation: bool = False) -> Release:
        """Compute the statistic and draw the noise once; return the :class:`Release`. Private:
        it runs only inside :meth:`_charged` or :func:`dpcausal.session.charged_release`."""

    def charge_of(self, prepared: Prepared[P]) -> PrivacyCharge:
        """:meth:`privacy_charge` of ``prepared``'s public facts. Facts given as a plain dict
        (the contract before typed facts) are passed by keyword, deprecated for one release."""
        public = prepared.public
        if isinstance(public, PublicFacts):
            return self.privacy_charge(public)
        warnings.warn(f"{type(self).__name__}.check_input returned its public facts as a "
                      f"{type(public).__name__}; return a frozen dataclass extending "
                      "dpcausal.contract.PublicFacts (a dict is deprecated and will be refused "
                      "in the next release)", DeprecationWarning, stacklevel=3)
        charge: Callable[..., PrivacyCharge] = self.privacy_charge
        return charge(**cast(Mapping[str, Any], public))

    def private_release(self, prepared: Prepared[P], *, evaluation: bool = False) -> Release:
        """Deprecated: the release of checked input, charged like :meth:`fit` (it drew uncharged
        noise before); use :meth:`fit`, or :func:`dpcausal.session.charged_release`."""
        deprecated(f"{type(self).__name__}.private_release", "fit(...)")
        return self._charged(prepared, evaluation=evaluation)

    def planned_params(self, public: P, /) -> dict[str, Any]:
        """The public parameters left to the planner (``"auto"``) with the values it picks for
        these public facts (data-free), so an orchestrator resolves them once before the charge
        and records them; empty when nothing is planned."""
        return {}

    def check_data(self, data: pd.DataFrame, *, outcome_bounds: tuple[float, float] | None
                   = None, **roles: Any) -> DataCheck:
        """A NON-PRIVATE look at the values of the columns given by role : rows,
        missing and non-finite values per column, a "treatment" not 0/1, an "outcome" outside
        ``outcome_bounds``, the arm sizes. Charges nothing and publishes nothing (the curator
        already holds the data); the result is for the curator's eyes only, never share it."""
        columns(data, **roles)
        return check_roles_data(data, roles, outcome_bounds)

    def fit(self, data: Any, *args: Any, evaluation: bool = False, **roles: Any) -> Release:
        """One release: :meth:`check_input`, :meth:`privacy_charge`, ``_private_release``.

        Each call is a new release that spends budget again: repeated fits on the same data
        compose, and the accountant of the current context (:mod:`dpcausal.session`) records
        them; every refusal happens before the charge, and nothing is drawn before it. What the
        release did with values goes to the curator's private log
        (:func:`dpcausal.curator_log.private_log_path`: beside the ledger by default).

        Parameters
        ----------
        data : pandas.DataFrame or array-like
            A DataFrame with the column roles given by keyword, or the mechanism's arrays
            (positional ``*args``).
        evaluation : bool
            Evaluation mode: seeds and row-position folds are allowed and the result is NOT
            private (it says so).
        **roles : str or list of str
            The column roles (``treatment=``, ``outcome=``, ``covariates=``, ``unit=``, ...).

        Returns
        -------
        Release
            The mechanism's release, also kept as ``release_``.

        Raises
        ------
        ValueError, TypeError
            A refusal of the public checks, before anything is charged or drawn.
        dpcausal.ledger.BudgetExceededError
            When the accountant's cap would be exceeded (nothing is drawn).
        """
        from dpcausal.curator_log import attach, private_log_path
        from dpcausal.session import accountant

        ledger = getattr(accountant(), "ledger", None)
        attach(private_log_path(getattr(ledger, "url", None)))
        release = self._charged(self.check_input(data, *args, **roles), evaluation=evaluation)
        self.release_ = release
        return release

    def _charged(self, prepared: Prepared[P], *, evaluation: bool = False,
                 draw: Callable[[], Release] | None = None) -> Release:
        """``draw`` (default: ``_private_release`` of ``prepared``) run once through the
        current accountant, charged :meth:`privacy_charge` of ``prepared.public``: the only way
        the library draws a release's noise."""
        from dpcausal.session import accountant

        charge = self.charge_of(prepared)
        return accountant().release(self, prepared, charge, evaluation=evaluation, draw=draw)


def deprecated(old: str, new: str) -> None:
    """Warn that ``old`` goes in the next release (it now charges like ``fit``); use ``new``."""
    warnings.warn(f"{old} is deprecated and will be removed in the next release; it is charged "
                  f"like fit() now (it drew uncharged noise before): use {new}",
                  DeprecationWarning, stacklevel=3)


#: The default of a renamed constructor argument (scikit-learn's convention): an estimator that
#: still receives the old name uses it, with a :class:`DeprecationWarning`, for one release.
DEPRECATED = "deprecated"


def renamed(estimator: Any, new: str, old: str,
            convert: Callable[[Any], Any] | None = None) -> Any:
    """The value of ``estimator``'s argument ``new``, or, where the caller gave the deprecated
    name ``old`` instead, that value (``convert``-ed to ``new``'s meaning, e.g. a CI ``level``
    to the miscoverage ``alpha = 1 - level``) with a :class:`DeprecationWarning`."""
    value = getattr(estimator, old)
    if isinstance(value, str) and value == DEPRECATED:
        return getattr(estimator, new)
    warnings.warn(f"{type(estimator).__name__}({old}=...) is deprecated and will be removed in "
                  f"the next release: use {new}=...", DeprecationWarning, stacklevel=3)
    return value if convert is None else convert(value)


def renamed_names(module: str, old_to_new: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) that gives each old public name (old -> new) of
    ``module`` as the object now named ``new``, with a DeprecationWarning, for one release."""

    def __getattr__(name: str) -> Any:
        if name not in old_to_new:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new = old_to_new[name]
        warnings.warn(f"{module}.{name} is deprecated and will be removed in the next release: "
                      f"use {new}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), new)

    return __getattr__


def level_to_alpha(level: Any) -> Any:
    """The miscoverage ``alpha`` of a CI ``level`` (``1 - level``; a non-number is passed on
    for the caller's own check to refuse)."""
    return 1 - level if isinstance(level, (int, float)) and not isinstance(level, bool) else level


def columns(frame: pd.DataFrame, **roles: str | Sequence[str] | None) -> dict[str, Any]:
    """The columns a mechanism needs from a DataFrame, by role; an unknown name, or one column
    given two roles (a treatment that is also the outcome), raises a ``ValueError`` that names
    the roles and the user's column (public: the schema only, never a value)."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"expected a pandas DataFrame, got {type(frame).__name__}")
    out: dict[str, Any] = {}
    seen: dict[Any, str] = {}
    for role, name in roles.items():
        if name is None:
            continue
        names = [name] if isinstance(name, str) else list(name)
        for column in names:
            if column in seen and seen[column] != role:
                raise ValueError(f"{role}={column!r} cannot also be {seen[column]}=: one column "
                                 "holds one role")
            seen.setdefault(column, role)
        missing = [c for c in names if c not in frame.columns]
        if missing:
            raise ValueError(f"{role}={missing[0]!r} is not a column of the data "
                             f"(columns: {list(map(str, frame.columns))})")
        out[role] = frame[names[0]] if isinstance(name, str) else frame[names]
    return out
