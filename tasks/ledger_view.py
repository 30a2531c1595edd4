"""The ledger's tables as public, readable values: JSON-ready records and aligned plain text
(``dpcausal ledger``'s output), and one dataset's history with its budget in one read."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:  # the ledger's module (SQLAlchemy) loads when a command opens one
    from dpcausal.ledger import Ledger


def cell(value: object) -> str:
    """A table cell: :func:`plain`'s value, a timestamp to the second (UTC), missing as '-'."""
    if isinstance(value, pd.Timestamp):
        return _utc(value).strftime("%Y-%m-%d %H:%M:%S")
    value = plain(value)
    if isinstance(value, dict):
        text = ", ".join(f"{k}={cell(v)}" for k, v in value.items())
        return (text or "-") if len(text) <= 60 else text[:57] + "..."
    if isinstance(value, float):
        return f"{value:.6g}"
    return "-" if value is None else str(value) or "-"


def _utc(stamp: pd.Timestamp) -> pd.Timestamp:
    """UTC (SQLite drops the zone, PostgreSQL keeps it)."""
    return stamp.tz_convert("UTC") if stamp.tzinfo is not None else stamp.tz_localize("UTC")


def plain(value: Any) -> Any:
    """A JSON value: missing -> null, inf -> "inf", timestamps -> ISO 8601 UTC."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, pd.Timestamp):
        return _utc(value).isoformat()
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NaT:
        return None
    if hasattr(value, "item"):  # numpy scalars
        value = value.item()
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return value


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of ``frame`` as JSON-ready dicts (:func:`plain`)."""
    return [{k: plain(v) for k, v in row.items()} for row in frame.to_dict("records")]


def table(frame: pd.DataFrame, title: str) -> str:
    """``title``, then ``frame`` as an aligned plain-text table (columns as given, cells by
    :func:`cell`)."""
    cells = [[cell(v) for v in row] for row in frame.itertuples(index=False)]
    head = [str(c) for c in frame.columns]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(head)]
    return "\n".join([title, *("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
                               .rstrip() for row in [head, ["-" * w for w in widths], *cells])])


def dataset_history(led: Ledger, dataset: str) -> dict[str, Any]:
    """``dataset``'s charges (``charges``, a frame), its corrections of a unit
    (``corrections``), cap, spend, neighbouring relation and what one more release could spend
    (``next``): ``dpcausal ledger history``'s reads. ValueError for an unknown dataset."""
    return {"charges": led.history(dataset), "spent": led.spent(dataset),
            "cap": led.cap(dataset), "relation": led.relation(dataset),
            "next": led.headroom(dataset), "corrections": led.corrections(dataset)}


def history_json(dataset: str, history: dict[str, Any]) -> dict[str, Any]:
    """:func:`dataset_history` as one JSON-ready document (``ledger history --json``)."""
    cap, spent, relation = history["cap"], history["spent"], history["relation"]
    return plain({"dataset": dataset, "unit": relation.unit, "public": relation.text,
                  "cap": cap.describe(), "delta": cap.delta,
                  "spent": {"zeta": spent.zeta, "rho": spent.rho, "epsilon": spent.epsilon,
                            "n_charges": spent.n_charges},
                  "next": history["next"], "charges": records(history["charges"]),
                  "corrections": records(history["corrections"])})


def registrations_json(versions: list[Any]) -> list[dict[str, Any]]:
    """Registrations (oldest first) as JSON-ready documents (``ledger show --json``)."""
    return plain([{**r.bound(), "version": r.version, "by": r.by, "at": pd.Timestamp(r.at)}
                  for r in versions])


def analyst_records(led: Any) -> list[dict[str, Any]]:
    """Every analyst of the ledger ``led`` as JSON-ready dicts (``dpcausal analyst list``):
    name, whether active, who added them and when (ISO 8601 UTC), when revoked, and per dataset
    their own zeta cap (None: the dataset's) and their spend so far."""
    return [plain({"name": a.name, "active": a.active, "by": a.by,
                   "created_at": a.created_at.isoformat(),
                   "revoked_at": a.revoked_at and a.revoked_at.isoformat(),
                   "datasets": {d: {"zeta_cap": z,
                                    "spent": led.analyst_spent(a.name, d).describe()}
                                for d, z in a.datasets.items()}})
            for a in led.analysts()]


def analyst_lines(rows: list[dict[str, Any]]) -> list[str]:
    """:func:`analyst_records` as text: one line per analyst, one per dataset granted."""
    if not rows:
        return ["No analysts; admit one with `dpcausal analyst add NAME --datasets A,B`."]
    lines = []
    for r in rows:
        added = pd.Timestamp(r["created_at"]).strftime("%Y-%m-%d %H:%M:%S")
        state = "active" if r["active"] else (
            f"revoked {pd.Timestamp(r['revoked_at']):%Y-%m-%d %H:%M:%S} UTC")
        lines.append(f"{r['name']} ({state}; added {added} UTC by {r['by']})")
        for dataset, g in r["datasets"].items():
            cap = "dataset's cap" if g["zeta_cap"] is None else f"own cap zeta={g['zeta_cap']:g}"
            lines.append(f"  {dataset}: {cap}; spent {g['spent']}")
    return lines


def registration_lines(led: Any, dataset: str, versions: list[Any]) -> list[str]:
    """``dpcausal ledger show``'s text of a registered ``dataset`` (``versions``, oldest first):
    the registration, how many charges came from the curator's own runs and how many analysts
    asked (issue 40), each admitted analyst's cap and spend, then the earlier versions."""
    charged = (led.history(dataset)["analyst"] if led.has_dataset(dataset)
               else pd.Series(dtype=object))
    lines = [versions[-1].describe(),
             f"Charges: {int(charged.isna().sum())} by the curator's own runs, "
             f"{int(charged.notna().sum())} asked by analysts."]
    for who in led.analysts():
        if dataset not in who.datasets:
            continue
        own = who.datasets[dataset]
        cap = "the dataset's cap" if own is None else f"own cap zeta={own:g}"
        lines.append(f"  analyst {who.name} ({'active' if who.active else 'revoked'}): {cap}; "
                     f"spent {led.analyst_spent(who.name, dataset).describe()}")
    if len(versions) > 1:
        lines.append(table(pd.DataFrame([{"version": r.version, "by": r.by,
                                          "at": pd.Timestamp(r.at), "n": r.n,
                                          "evaluation": r.evaluation_allowed}
                                         for r in versions]),
                           "Registrations (each change, oldest first)"))
    return lines
