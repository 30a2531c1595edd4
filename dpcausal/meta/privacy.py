"""The privacy position of a pooled result: no new charge (post-processing, spec
dp_ate_ensemble.md §2.6), and the composed exposure of studies declared to share people."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd

from dpcausal.accounting import DEFAULT_DELTA, compose_gdp, gdp_epsilon
from dpcausal.meta.studies import is_missing


def shared_groups(shared_people: Any, table: pd.DataFrame) -> list[list[str]]:
    """Normalise ``shared_people`` to a list of groups of known labels, each with known zetas."""
    if shared_people is None:
        return []
    if isinstance(shared_people, (str, bytes)) or not isinstance(shared_people, Iterable):
        raise TypeError(f"shared_people must be a list of study labels (or a list of such "
                        f"lists), got {shared_people!r}")
    items = list(shared_people)
    nested = [not isinstance(x, (str, bytes)) and isinstance(x, Iterable) for x in items]
    if any(nested) and not all(nested):
        raise TypeError(f"shared_people must be a list of labels or a list of lists of labels, "
                        f"not a mixture, got {shared_people!r}")
    groups = [list(g) for g in items] if items and all(nested) else [items]
    zeta_of = dict(zip(table["label"], table["zeta"], strict=True))
    out = []
    for group in groups:
        labels = [str(x) for x in group]
        if len(set(labels)) != len(labels) or len(labels) < 2:
            raise ValueError(f"each shared_people group must name at least 2 distinct studies, "
                             f"got {group!r}")
        unknown = [x for x in labels if x not in zeta_of]
        if unknown:
            raise ValueError(f"shared_people names unknown studies {unknown}; known labels are "
                             f"{list(zeta_of)}")
        eps_of = dict(zip(table["label"], table["epsilon"], strict=True))
        unknown_loss = [x for x in labels if is_missing(zeta_of[x]) and is_missing(eps_of[x])]
        if unknown_loss:
            raise ValueError(f"shared_people: studies {unknown_loss} have no zeta or epsilon, so "
                             f"their composed exposure is unknown; give each release its privacy")
        out.append(labels)
    return out


def privacy_position(table: pd.DataFrame, groups: list[list[str]]) -> dict:
    """Privacy of the pooled result: no new charge; GDP composition over shared studies (§2.6)."""
    zeta_of = {lab: (None if is_missing(z) else float(z))
               for lab, z in zip(table["label"], table["zeta"], strict=True)}
    eps_of = {lab: (None if is_missing(e) else float(e))
              for lab, e in zip(table["label"], table["epsilon"], strict=True)}
    delta_of = {lab: (0.0 if is_missing(d) else float(d))
                for lab, d in zip(table["label"], table["delta"], strict=True)}
    shared: list[dict[str, Any]] = []
    for labels in groups:
        zetas = [z for z in (zeta_of[x] for x in labels) if z is not None]
        if len(zetas) == len(labels):  # Gaussian DP composes exactly
            composed = compose_gdp(zetas)
            shared.append({"studies": labels, "composed_zeta": composed,
                           "composed_epsilon": gdp_epsilon(composed, DEFAULT_DELTA),
                           "composed_delta": DEFAULT_DELTA})
        else:  # basic composition of (epsilon, delta) across mechanisms
            shared.append({"studies": labels, "composed_zeta": None,
                           "composed_epsilon": math.fsum(eps_of[x] or 0.0 for x in labels),
                           "composed_delta": math.fsum(delta_of[x] for x in labels)})
    gdp_groups = [g for g in shared if g["composed_zeta"] is not None]
    worst_group = max(gdp_groups, key=lambda g: g["composed_zeta"]) if gdp_groups else None
    known = [z for z in zeta_of.values() if z is not None]
    max_zeta = None
    if len(known) == len(zeta_of) and len(gdp_groups) == len(shared):
        max_zeta = max(known + [g["composed_zeta"] for g in shared])
    same_data = [{"dataset": row.dataset, "label": row.label, "releases": int(row.releases),
                  "composed_zeta": None if is_missing(row.zeta) else float(row.zeta)}
                 for row in table.itertuples() if row.releases > 1]
    same_notes = [f"the {s['releases']} releases of dataset {s['dataset']} compose"
                  + ("" if s["composed_zeta"] is None else f" to zeta {s['composed_zeta']:.4g}")
                  + " (pooled as one study)" for s in same_data]
    return {
        "additional_charge": 0.0,
        "statement": ("post-processing of released numbers: no additional privacy charge; "
                      "each person keeps their own study's zeta-GDP guarantee"
                      + (", composed over the studies declared to share people"
                         if shared else "")
                      + "".join(f"; {note}" for note in same_notes)),
        "same_data": same_data,
        "delta": DEFAULT_DELTA,
        "study_zeta": zeta_of,
        "study_epsilon": eps_of,
        "shared_groups": shared,
        "composed_zeta": worst_group["composed_zeta"] if worst_group else None,
        "composed_epsilon": worst_group["composed_epsilon"] if worst_group else None,
        "max_individual_zeta": max_zeta,
    }
