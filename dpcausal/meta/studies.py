"""Reading the studies to pool: one validated row per release (label, ATE, variance, published
CI, privacy, dataset, n), from release objects, their dicts or a DataFrame (spec
dp_ate_ensemble.md §4)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from dpcausal.accounting import DEFAULT_DELTA, gdp_epsilon

STUDY_COLUMNS = ("label", "ate", "variance", "se", "ci_low", "ci_high", "zeta", "epsilon",
                 "delta", "unit", "mechanism", "dataset", "releases", "n", "weight")
_RECORD_KEYS = ("label", "ate", "variance", "ci_low", "ci_high", "zeta", "epsilon", "delta",
                "unit", "mechanism", "dataset", "noise_variance", "n")


def study_table(releases: Any) -> pd.DataFrame:
    """One row per release (label, ate, variance, published CI, privacy, dataset, n), validated."""
    if isinstance(releases, pd.DataFrame):
        records = _records_from_frame(releases)
    elif isinstance(releases, (str, bytes, Mapping)) or hasattr(releases, "ate") \
            or not isinstance(releases, Iterable):
        raise TypeError(f"releases must be a list of releases/dicts or a DataFrame, got "
                        f"{type(releases).__name__}; wrap a single release in a list, or use "
                        f"pandas.DataFrame(...) for a dict of columns")
    else:
        records = [_record(item, j) for j, item in enumerate(releases)]
    if not records:
        raise ValueError("releases is empty; pass at least one study")
    estimands = sorted({r["_estimand"] for r in records})
    if len(estimands) > 1:
        raise ValueError(f"the releases estimate different effects ({' and '.join(estimands)}):"
                         " an average effect over everyone and one on the treated are "
                         "different quantities; pool releases of one estimand")
    _name_studies(records)
    labels = [r["label"] for r in records]
    duplicates = sorted({x for x in labels if labels.count(x) > 1})
    if duplicates:
        raise ValueError(f"study labels must be unique, got duplicates {duplicates}; "
                         f"give each release its own label")
    table = pd.DataFrame.from_records(records, columns=list(_RECORD_KEYS))
    table["n"] = pd.Series([r["n"] for r in records], dtype=object)  # ints, None where unknown
    table["releases"] = 1
    return table


def _records_from_frame(frame: pd.DataFrame) -> list[dict]:
    missing = [c for c in ("ate", "variance") if c not in frame.columns]
    if missing and not (missing == ["variance"] and "se" in frame.columns):
        raise ValueError(f"releases DataFrame needs columns 'ate' and 'variance' (or 'se'), "
                         f"missing {missing} (has {list(frame.columns)})")
    use_index = "label" not in frame.columns and not isinstance(frame.index, pd.RangeIndex)
    rows = []
    for j, (idx, row) in enumerate(frame.iterrows()):
        item = {k: row[k] for k in frame.columns}
        if use_index:
            item["label"] = idx
        rows.append(_record(item, j))
    return rows


def _record(item: Any, j: int) -> dict:
    """Read one study from a release object or a dict and validate its numbers."""
    where = f"releases[{j}]"
    if isinstance(item, Mapping):
        get = item.get
    elif hasattr(item, "ate"):
        def get(key: str, default: Any = None) -> Any:
            value = getattr(item, key, default)
            return value() if key == "noise_share" and callable(value) else value
    else:
        raise TypeError(f"{where} must be a release (attributes ate, se), a dict or a "
                        f"DataFrame row, got {type(item).__name__}")
    if get("ate") is None:
        raise ValueError(f"{where} has no 'ate': that release published no ATE to pool")
    ate = number(get("ate"), f"{where}.ate")
    variance = _variance(get, where)
    privacy = _privacy_fields(get, where)
    share = get("noise_share")
    noise_variance = None if is_missing(share) else number(share, f"{where}.noise_share") * variance
    ci = get("ci")
    ci_low, ci_high = (None, None) if is_missing(ci) else _interval(ci, f"{where}.ci")
    n = get("n")
    if not is_missing(n):
        n_float = number(n, f"{where}.n")
        if n_float != int(n_float) or n_float < 1:
            raise ValueError(f"{where}.n must be a positive integer (or missing), got {n!r}")
        n = int(n_float)
    else:
        n = None
    dataset = get("dataset", get("dataset_id"))
    label = get("label")
    return {"label": None if is_missing(label) else str(label), "ate": ate, "variance": variance,
            "ci_low": ci_low, "ci_high": ci_high, **privacy,
            "dataset": None if is_missing(dataset) else str(dataset),
            "noise_variance": noise_variance, "n": n,
            "_identity": _identity(get, dataset, privacy["mechanism"]),
            "_estimand": _estimand(get)}


def _estimand(get: Any) -> str:
    """The effect a study estimates (``"ate"`` unless its release or its params say
    ``"att"``: issue 39 item 7)."""
    value = get("estimand")
    if is_missing(value):
        params = get("params")
        value = params.get("estimand") if isinstance(params, Mapping) else None
    return "ate" if is_missing(value) else str(value)


def _variance(get: Any, where: str) -> float:
    se, variance = get("se"), get("variance")
    if se is None and variance is None:
        raise ValueError(f"{where}.variance is None: that study released no variance (no se); "
                         f"pooling needs each study's private se (release it with a CI)")
    key, value = ("variance", variance) if se is None else ("se", se)
    value = number(value, f"{where}.{key}")
    if not value > 0:
        raise ValueError(f"{where}.{key} must be > 0, got {value!r}; a private standard error "
                         f"is always positive, check the input")
    return value if key == "variance" else value * value


def _privacy_fields(get: Any, where: str) -> dict[str, Any]:
    """zeta, epsilon, delta, unit, mechanism of a study, from its ``privacy`` or flat keys."""
    privacy = get("privacy")
    if isinstance(privacy, Mapping):
        pget = privacy.get
    else:
        def pget(key: str, default: Any = None) -> Any:
            return getattr(privacy, key, default)
    out: dict[str, Any] = {}
    for key in ("zeta", "epsilon", "delta"):
        value = get(key)
        value = pget(key) if is_missing(value) else value
        value = None if is_missing(value) else number(value, f"{where}.{key}")
        if key != "delta" and value is not None and not value > 0:
            raise ValueError(f"{where}.{key} must be > 0 (or missing), got {value!r}")
        out[key] = value
    for key in ("unit", "mechanism"):
        value = get(key) if not is_missing(get(key)) else pget(key)
        out[key] = None if is_missing(value) else str(value)
    if out["epsilon"] is None and out["zeta"] is not None:
        out["epsilon"], out["delta"] = gdp_epsilon(out["zeta"], DEFAULT_DELTA), DEFAULT_DELTA
    return out


def _interval(ci: Any, name: str) -> tuple[float, float]:
    try:
        lo, hi = ci
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a pair (low, high), got {ci!r}") from None
    return number(lo, f"{name}[0]"), number(hi, f"{name}[1]")


def _identity(get: Any, dataset: Any, mechanism: Any) -> str:
    """What identifies a release when it has no label: dataset, kind, estimator, K, bounds."""
    params = get("params")
    params = params if isinstance(params, Mapping) else {}
    parts = [dataset, get("kind") or mechanism, get("estimator") or params.get("estimator")]
    k = get("n_folds") or params.get("n_folds")
    bounds = params.get("outcome_bounds")
    text = " ".join(str(p) for p in parts if not is_missing(p))
    if not is_missing(k):
        text += f" K={k}"
    if isinstance(bounds, (list, tuple)) and len(bounds) == 2:
        text += f" Y in [{bounds[0]:g}, {bounds[1]:g}]"
    return text.strip()


def _name_studies(records: list[dict]) -> None:
    """Label unlabelled studies by their identity, numbered where identities repeat."""
    auto = []
    for j, r in enumerate(records):
        identity = r.pop("_identity")
        if r["label"] is None:
            r["label"] = identity or f"study {j + 1}"
            auto.append(r)
    labels = [r["label"] for r in auto]
    for label in {x for x in labels if labels.count(x) > 1}:
        for i, r in enumerate((r for r in auto if r["label"] == label), start=1):
            r["label"] = f"{label} #{i}"


def number(value: Any, name: str) -> float:
    if isinstance(value, (bool, str, bytes)):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {x!r}; drop or fix that study")
    return x


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, (float, np.floating)) and math.isnan(value)) \
        or value is pd.NA
