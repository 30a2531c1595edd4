"""The ensemble ATE on data that never sits in one process (issue 19 §3; spec dp_ate_ensemble.md
§2.2, §2.7).

The source is a list of partitions (e.g. a directory of Parquet files), each read whole by one
worker. The in-memory phases of :class:`dpcausal.PrivateATE` run per partition; only fitted fold
models (small) and three numbers per partition travel.

Partition and fold rule (public, issue 18 item 2)
-------------------------------------------------
- Partition p holds ``n_p`` rows; the ``n_p`` (Parquet footers) are public like ``n`` itself:
  under replace-one neighbouring (spec §1.3) a record is replaced in place, keeping its identity
  and its partition, so no ``n_p`` changes between neighbours.
- :func:`allocate_folds`: partition p owns the contiguous block of global fold ids
  ``offset_p .. offset_p + K_p - 1``, ``K_p`` proportional to ``n_p`` (largest remainder, at
  least one fold per non-empty partition, ties to the lower index), so every fold's rows live in
  one partition and each fold is fitted where its rows are.
- :func:`assign_folds`: a row's fold is ``offset_p + (HMAC-SHA256(key, id) mod K_p)`` with ``id``
  the row's value in the declared id column (integers as 8-byte big-endian two's complement,
  strings as UTF-8; the first 8 bytes of the MAC read big-endian). It is a function of the
  record's identity only, never of data values or row order: shuffling a partition moves no row
  to another fold. The id is the index of replace-one neighbouring (spec §1.3: "the replaced
  record keeps its index, hence its fold"): ids must be unique, and a record's id is not one of
  its private values. ``key`` is fresh per release (:func:`release_key`, OS entropy) or the
  curator's key for reproducible folds; the guarantee holds for any key fixed before the data
  are read, a secret key only keeps fold membership unpredictable.

Fold sizes follow the hash (multinomial, not balanced); Theorem 1's sensitivity
``sqrt(C) (1/n + 1/(K-1))`` (spec §2.4-2.5) assumes only that each row lies in exactly one fold
and influences only that fold's model, which holds. A fold that receives no row gets the public
constant nuisances of an empty fold (propensity 1/2, outcome models ``None``, i.e. the centre of
the bounds: spec §2.7 fallbacks).

Phases: :func:`fit_partition` (fold models of one partition), :func:`partition_sums`
(n_p, sum Gamma, sum Gamma^2 over one partition, given all K fold models, through
:meth:`PrivateATE.block_scores`), :func:`combine` (the sums over partitions), then
:meth:`PrivateATE.release_sums` (tau_hat = S1/n, V_hat = (S2 - S1^2/n)/(n(n-1)), spec §2.1, and
the noise, drawn once). The sums and models are
non-private: in a release they stay in memory and never reach logs, results stores or errors.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
from sklearn.base import clone

from dpcausal.estimator import PrivateATE
from dpcausal.missing import Completed, apply_missing
from dpcausal.nuisance import FoldModels, take_rows
from dpcausal.validation import check_schema, outcome_bounds, private_failures


def release_key() -> bytes:
    """A fresh 256-bit fold key from OS entropy (one per release)."""
    return secrets.token_bytes(32)


def allocate_folds(partition_rows: Sequence[int], n_folds: int) -> list[range]:
    """Global fold ids owned by each partition: spec §2.2 step 1 (data splitting) with the
    partition rule of the module docstring (largest remainder).

    ``partition_rows`` are the public row counts n_p; returns one ``range`` per partition, the
    ranges contiguous, in partition order, covering 0..K-1 (empty for an empty partition).
    """
    counts = np.asarray(partition_rows, dtype=np.int64)
    if counts.ndim != 1 or counts.size == 0 or (counts < 0).any() or counts.sum() == 0:
        raise ValueError(f"partition_rows must be row counts >= 0, not all 0; got {counts}")
    nonempty = counts > 0
    if isinstance(n_folds, bool) or not isinstance(n_folds, (int, np.integer)):
        raise TypeError(f"n_folds must be an integer, got {type(n_folds).__name__}")
    if n_folds < max(2, int(nonempty.sum())):
        raise ValueError(f"n_folds={n_folds} must be >= 2 and >= the number of non-empty "
                         f"partitions ({int(nonempty.sum())}): each partition fits its own folds")
    quota = n_folds * counts / counts.sum()
    alloc = np.where(nonempty, np.maximum(1, np.floor(quota)), 0).astype(np.int64)
    while alloc.sum() > n_folds:        # the minimum of 1 can overshoot: take from the richest
        alloc[np.argmax(np.where(alloc > 1, alloc - quota, -np.inf))] -= 1
    while alloc.sum() < n_folds:        # largest remainders first
        alloc[np.argmax(np.where(nonempty, quota - alloc, -np.inf))] += 1
    stops = np.cumsum(alloc)
    return [range(int(stop - a), int(stop)) for a, stop in zip(alloc, stops, strict=True)]


def assign_folds(ids: Any, key: bytes, folds: range) -> np.ndarray:
    """Global fold id of each row of one partition: ``folds.start + HMAC-SHA256(key, id) mod
    len(folds)`` (module docstring). Depends on ``(key, id)`` only, so the replaced record keeps
    its fold (spec §1.3, issue 18 item 2)."""
    if len(folds) == 0:
        raise ValueError("this partition owns no folds")
    if not (isinstance(key, bytes) and len(key) >= 16):
        raise ValueError("key must be at least 16 bytes (see release_key())")
    values = np.asarray(ids)
    if values.ndim != 1:
        raise ValueError(f"ids must be one-dimensional, got shape {values.shape}")
    if np.issubdtype(values.dtype, np.integer):
        buf = values.astype(">i8").tobytes()
        messages: Any = (buf[i:i + 8] for i in range(0, len(buf), 8))
    elif values.dtype == object or np.issubdtype(values.dtype, np.str_):
        if not all(isinstance(v, str) for v in values):
            raise TypeError("an id column must hold integers or strings only")
        messages = (v.encode("utf-8") for v in values)
    else:
        raise TypeError(f"an id column must hold integers or strings, got dtype {values.dtype}")
    keyed = hmac.new(key, digestmod=hashlib.sha256)
    digests = np.fromiter((_mac64(keyed, m) for m in messages), dtype=np.uint64,
                          count=values.size)
    return (digests % np.uint64(len(folds))).astype(np.int64) + folds.start


def _mac64(keyed: Any, message: bytes) -> int:
    mac = keyed.copy()
    mac.update(message)
    return int.from_bytes(mac.digest()[:8], "big")


@dataclass(frozen=True)
class Roles:
    """Column roles of a partitioned source: the id, treatment, outcome and covariate columns."""

    id: str
    treatment: str
    outcome: str
    covariates: tuple[str, ...]

    def columns(self) -> list[str]:
        return [self.id, self.treatment, self.outcome, *self.covariates]


_NUMERIC = ("int", "uint", "float", "double", "bool", "halffloat")


def check_roles(schemas: Sequence[dict[str, str]], id_column: str, treatment: str,
                outcome: str, covariates: Sequence[str] | None) -> Roles:
    """Column roles checked against every partition's schema (``{column: Arrow type}`` from its
    footer: public facts); covariates default to every other column."""
    if not schemas:
        raise ValueError("a partitioned source needs at least one partition")
    if any(s != schemas[0] for s in schemas[1:]):
        raise ValueError("the partitions do not share one schema (names and types)")
    schema = schemas[0]
    named = [id_column, treatment, outcome]
    if covariates is None:
        covariates = [c for c in schema if c not in named]
    missing = [c for c in named + list(covariates) if c not in schema]
    if missing:
        raise ValueError(f"columns {missing} are not in the partitions (columns: {list(schema)})")
    if not covariates:
        raise ValueError("no covariate columns: name them with covariates=[...]")
    for c in [treatment, outcome, *covariates]:
        if not schema[c].startswith(_NUMERIC):
            raise TypeError(f"column {c!r} must be numeric, got {schema[c]}")
    if not (schema[id_column].startswith(("int", "uint")) or schema[id_column] in
            ("string", "large_string")):
        raise TypeError(f"id column {id_column!r} must hold integers or strings, "
                        f"got {schema[id_column]}")
    return Roles(id=id_column, treatment=treatment, outcome=outcome, covariates=tuple(covariates))


@dataclass(frozen=True)
class PartitionPlan:
    """The public facts of one partitioned release, fixed before the charge: the column roles,
    each partition's rows and folds, the schema and the estimator with its K (folds "secret":
    they come from :func:`assign_folds`)."""

    roles: Roles
    rows: tuple[int, ...]
    folds: tuple[range, ...]
    schema: dict[str, str]
    estimator: PrivateATE

    @property
    def n(self) -> int:
        return sum(self.rows)

    @property
    def d(self) -> int:
        return len(self.roles.covariates)

    @property
    def n_folds(self) -> int:
        return int(self.estimator.n_folds)


def plan_partitions(footers: Sequence[tuple[int, dict[str, str]]], estimator: PrivateATE, *,
                    id_column: str, treatment: str, outcome: str,
                    covariates: Sequence[str] | None, evaluation: bool) -> PartitionPlan:
    """Every public refusal of a partitioned release, from the partitions' footers (rows,
    schema) and the estimator's parameters: roles, K (the planner's for "auto"), the parameter
    checks of the in-memory path (spec §7), the mode, and each partition's folds
    (:func:`allocate_folds`). Reads no value; ``estimator`` is left as given."""
    roles = check_roles([s for _, s in footers], id_column, treatment, outcome, covariates)
    rows = tuple(int(r) for r, _ in footers)
    n, d = sum(rows), len(roles.covariates)
    if estimator.block_folds not in (None, "auto"):
        raise ValueError("a partitioned release uses the full ensemble: its folds are spread "
                         "over partitions by keyed hash, so blocks are not yet balanced; pass "
                         "block_folds=None (or 'auto')")
    if estimator.missing == "drop":
        raise ValueError(
            "missing='drop' does not apply to data.partitions: n is the sum of the partitions' "
            "footer counts, fixed before any value is read; use missing='impute' (the default)")
    est = clone(estimator).set_params(folds="secret", block_folds=None)
    est.set_params(n_folds=est.resolved_n_folds(n, d))
    est._params(n, d)
    est.check_mode(evaluation)
    folds = tuple(allocate_folds(rows, est.n_folds))
    return PartitionPlan(roles=roles, rows=rows, folds=folds, schema=dict(footers[0][1]),
                         estimator=est)


def read_partition(source: str | Path, roles: Roles) -> pd.DataFrame:
    """One partition's declared columns (a Parquet file, local path or fsspec URL)."""
    return pd.read_parquet(source, columns=roles.columns())


def _arrays(frame: pd.DataFrame, roles: Roles, est: PrivateATE, evaluation: bool) -> Completed:
    """(X, A, Y) of a partition after the declared missing-value policy (row by row, so the
    same as on the whole data; issue 26 §2: no check of the arms here, a partition may hold one
    arm only), Y clipped to the bounds (spec §1.2)."""
    X, A, Y = check_schema(frame[list(roles.covariates)], frame[roles.treatment],
                           frame[roles.outcome], keep_frame=not est._plain_linear())
    with private_failures(evaluation, "reading a partition"):
        done = apply_missing(X, A, Y, est.missing, est.missing_fill,
                             indicators=est._indicators("all"))
    return Completed(X=done.X, A=done.A, Y=np.clip(done.Y, *outcome_bounds(est.outcome_bounds)),
                     usable=done.usable)


def fit_partition(frame: pd.DataFrame, roles: Roles, est: PrivateATE, key: bytes,
                  folds: range, evaluation: bool = False) -> list[FoldModels]:
    """The fold models of the folds ``folds`` that partition ``frame`` owns, each fitted on its
    own rows (spec §2.2 step 2); an empty fold gets the public constants of the module
    docstring."""
    done = _arrays(frame, roles, est, evaluation)
    with private_failures(evaluation, "fitting"):
        use = done.usable
        fold_ids = assign_folds(frame[roles.id].to_numpy(), key, folds)[use]
        present = set(np.unique(fold_ids).tolist())
        fitted = {fm.k: fm for fm in est.fit_folds(take_rows(done.X, use), done.A[use],
                                                    done.Y[use], fold_ids,
                                                    ks=[k for k in folds if k in present])}
        return [fitted.get(k) or _empty_fold(k, est.estimator) for k in folds]


def _empty_fold(k: int, estimator: str) -> FoldModels:
    return FoldModels(k=k, propensity=0.5 if estimator in ("ipw", "aipw") else None,
                      mu1=None, mu0=None)


@dataclass(frozen=True)
class ScoreSums:
    """Non-private sums over a partition: rows, sum of Gamma_i, sum of Gamma_i^2."""

    n: int
    s1: float
    s2: float


def partition_sums(frame: pd.DataFrame, roles: Roles, est: PrivateATE, key: bytes,
                   folds: range, fold_models: Sequence[FoldModels], evaluation: bool = False
                   ) -> ScoreSums:
    """(n_p, sum Gamma, sum Gamma^2) of one partition: each row's nuisances aggregate the K-1
    fold models of every partition not trained on its own fold (spec §2.2 steps 3-4)."""
    done = _arrays(frame, roles, est, evaluation)
    with private_failures(evaluation, "scoring"):
        fold_ids = assign_folds(frame[roles.id].to_numpy(), key, folds)
        gamma = est.block_scores(done.X, done.A, done.Y, fold_ids, fold_models, done.usable)
        return ScoreSums(n=int(gamma.size), s1=float(gamma.sum()), s2=float(gamma @ gamma))


def combine(sums: Sequence[ScoreSums]) -> ScoreSums:
    """The partitions' sums added up (compensated summation), for
    :meth:`PrivateATE.release_sums`."""
    return ScoreSums(n=sum(s.n for s in sums), s1=math.fsum(s.s1 for s in sums),
                     s2=math.fsum(s.s2 for s in sums))


def fold_rule(id_column: str, n_partitions: int) -> dict[str, Any]:
    """The public description of the fold rule, added to the release's parameters."""
    return {"folds": f"keyed_hash({id_column})", "partitions": n_partitions}


def write_parquet_partitions(path: str | Path, n: int, d: int, n_partitions: int,
                             seed: int | None = None, *, id_column: str = "id") -> list[Path]:
    """Synthetic partitioned source for the scale target (issue 19 §3): ``n`` rows in
    ``n_partitions`` Parquet files ``part-00000.parquet ...`` under ``path``, columns
    ``id`` (unique int64, shuffled), ``A``, ``Y``, ``x1..xd``.

    X ~ N(0, I_d); pi = clip(expit(0.1 + X b_pi), 0.1, 0.9) with b_pi = 0.2 (-1)^j / sqrt(d);
    Y = clip(-0.05 + X b_y + 0.15 A + N(0, 0.1^2), -1, 1) with b_y = 0.1 / sqrt(d): true ATE
    0.15 (up to the clip). Written one partition at a time (memory O(n / n_partitions)).
    """
    if not (n >= 2 * n_partitions >= 2 and d >= 1):
        raise ValueError(f"need n >= 2 n_partitions >= 2 and d >= 1, got {n}, {n_partitions}, {d}")
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    ids = rng.permutation(n).astype(np.int64)
    b_pi = 0.2 * (-1.0) ** np.arange(d) / math.sqrt(d)
    b_y = np.full(d, 0.1 / math.sqrt(d))
    files = []
    for p, rows in enumerate(np.array_split(np.arange(n), n_partitions)):
        m = rows.size
        X = rng.standard_normal((m, d))
        pi = np.clip(1.0 / (1.0 + np.exp(-(0.1 + X @ b_pi))), 0.1, 0.9)
        A = (rng.random(m) < pi).astype(np.int8)
        Y = np.clip(-0.05 + X @ b_y + 0.15 * A + rng.normal(0.0, 0.1, m), -1.0, 1.0)
        frame = pd.DataFrame({id_column: ids[rows], "A": A, "Y": Y,
                              **{f"x{j + 1}": X[:, j] for j in range(d)}})
        files.append(out / f"part-{p:05d}.parquet")
        frame.to_parquet(files[-1], index=False)
    return files
