"""Shared behaviour of result dataclasses: dict/JSON conversion and a readable summary."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np
import pandas as pd


def to_jsonable(value: Any) -> Any:
    """Convert numpy/pandas/dataclass values into plain JSON types (NaN/inf become None)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.repr}
    if isinstance(value, pd.DataFrame):
        return [to_jsonable(r) for r in value.to_dict(orient="records")]
    if isinstance(value, pd.Series):
        return to_jsonable(value.to_dict())
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [to_jsonable(v) for v in value.tolist()]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


class ResultMixin:
    """Mixin for frozen result dataclasses: ``to_dict()``, ``to_json()``, readable ``str``."""

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    def summary_rows(self) -> list[tuple[str, str]]:
        """(label, value) rows for the text summary: scalars, short numeric sequences (a CI) and
        the (epsilon, delta) of a ``privacy`` dict; override for a custom layout."""
        rows = []
        for k, v in self.to_dict().items():
            if isinstance(v, list) and 0 < len(v) <= 4 and all(_is_number(x) for x in v):
                rows.append((k, "[" + ", ".join(_fmt(x) for x in v) + "]"))
            elif k == "privacy" and isinstance(v, dict) and _is_number(v.get("epsilon")):
                rows.append((k, f"({v['epsilon']:.4g}, {v.get('delta') or 0:.3g})-DP"))
            elif not isinstance(v, (dict, list)):
                rows.append((k, _fmt(v)))
        return rows

    def __str__(self) -> str:
        rows = self.summary_rows()
        width = max((len(k) for k, _ in rows), default=0)
        title = type(self).__name__
        return "\n".join([title, "-" * len(title)] + [f"{k:<{width}}  {v}" for k, v in rows])


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)
