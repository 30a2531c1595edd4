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
        """(label, value) rows for the text summary; override for a custom layout."""
        return [(k, _fmt(v)) for k, v in self.to_dict().items() if not isinstance(v, (dict, list))]

    def __str__(self) -> str:
        rows = self.summary_rows()
        width = max((len(k) for k, _ in rows), default=0)
        title = type(self).__name__
        return "\n".join([title, "-" * len(title)] + [f"{k:<{width}}  {v}" for k, v in rows])


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)
