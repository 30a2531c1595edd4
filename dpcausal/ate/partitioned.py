"""The ensemble ATE on data that never sits in one process, so that n grows past one
machine's memory (spec dp_ate_ensemble.md §2.2, §2.7).

The source is a list of partitions (e.g. a directory of Parquet files), each read whole by one
worker. The in-memory phases of :class:`dpcausal.PrivateATE` run per partition; for the full
ensemble only fitted fold models (small) and three numbers per partition travel, for a block
ensemble (below) only three numbers per block.

Partition and fold rule (public: no function of values or of row order)
----------------------------------------------------------------------
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

Blocks (spec §2.5b: each block inside one partition, so only sums cross workers)
-------------------------------------------------------------------------------
With a block ensemble (B > 1 blocks of K' folds: an int ``block_folds``, or ``"auto"`` whenever the
in-memory rule gives B > 1) every block lives inside one partition, so a partition's worker fits,
aggregates and scores its blocks alone and returns only per-block sums; no fold model travels.

- :func:`partition_block_split`: ``"auto"`` takes B = max(B_mem, P) for P non-empty partitions
  and the in-memory rule's B_mem = K / K' (:func:`dpcausal.ate.planner.block_split`: ceil(K/128) of
  the planner's K above K = 256), K' = K // B; an int K' is refused when B < P.
- :func:`allocate_blocks`: partition p owns B_p blocks, one per non-empty partition and each
  further one to the partition with the largest blocks (which minimises n_b,max), and cuts its
  n_p rows into B_p blocks of ``floor(n_p/B_p)`` or ``ceil(n_p/B_p)`` rows, each into K' folds
  of ``floor(n_b/K')`` or ``ceil(n_b/K')`` rows. Sizes are functions of the public (n_p, K, K')
  only, so n_b,max and the smallest fold are public and the calibration (Delta_tau with n_b,max
  and K'-1, the tight sigma2) reads nothing else.
- :func:`assign_blocks`: which rows fill those sizes: the partition's rows ranked by
  HMAC-SHA256(key, id) (as above; ties by the id), the ranked order cut as
  :func:`dpcausal.ate.folds.make_folds` cuts its permutation. A record replaced in place keeps its
  id, hence its rank and its fold; a shuffled partition changes nothing. With a fresh secret key
  the ranking is a uniformly random permutation of the partition independent of the data, like
  the in-memory "secret" folds.

Estimators from noisy sums (``dim``, ``lin``: :mod:`dpcausal.ate.sums`, issue 33 §6)
-------------------------------------------------------------------------------------
Their statistic is one vector ``S = sum_i f(row_i)``, additive over disjoint sets of rows, so each
partition returns only its own vector (:func:`partition_statistics`), the vectors are added
(:func:`combine_statistics`) and the noise is drawn once on the total, as in memory: no fold, no
model, no key. The plan (:func:`plan_partitions`) has ``sums`` set to the estimator and no folds.

Phases: :func:`fit_partition` (fold models of one partition), :func:`partition_sums`
(n_p, sum Gamma, sum Gamma^2 over one partition, given all K fold models, through
:meth:`PrivateATE.block_scores`), :func:`combine` (the sums over partitions), then
:meth:`PrivateATE.release_sums` (tau_hat = S1/n, V_hat = (S2 - S1^2/n)/(n(n-1)), spec §2.1, and
the noise, drawn once). Blocks: :func:`partition_block_sums` (per-block n_b, sum Gamma,
sum Gamma^2 of one partition), :func:`combine_blocks`, then the release calibrated on the plan's
layout. The sums and models are
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

from dpcausal.ate.blocks import BlockLayout, check_block_folds
from dpcausal.ate.estimator import PARTITIONED_ATE_ONLY, PrivateATE
from dpcausal.ate.folds import make_folds
from dpcausal.ate.keyed_hash import hmac_sha256_64
from dpcausal.ate.nuisance import FoldModels, take_rows
from dpcausal.ate.sums import SUM_ESTIMATORS
from dpcausal.missing import Completed, apply_missing
from dpcausal.validation import (
    check_noise_scale,
    check_schema,
    outcome_bounds,
    private_failures,
)


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
    return _largest_remainder(counts, n_folds)


#: Peak working memory of a partition's block phase per row and per column of (X, A, Y), in
#: bytes, and a worker's memory outside its partition (interpreter, imports, one chunk): the
#: model of :func:`auto_partitions`, from measured peaks (deploy/README.md, "Sizing workers": 690
#: MiB per worker at 500,000 rows, d = 5, of which about 200 MiB interpreter and imports).
ROW_BYTES = 120
WORKER_BASE_BYTES = 400 * 2**20


def auto_partitions(n: int, d: int, *, workers: int, worker_memory: int) -> int:
    """The number P of partitions of ``sql_partitions: auto`` (issue 35 §5), from public facts
    only: n, d, the number of workers and each one's memory in bytes.

    A worker holds one partition at a time (one thread) and must keep it within half its
    memory: rows per partition ``R = (worker_memory / 2 - WORKER_BASE_BYTES) / (ROW_BYTES
    (d + 3))``; ``P = max(workers, ceil(n / R))`` rounded up to a multiple of ``workers`` (whole
    rounds of tasks), at most ``n // 2`` (two rows per partition) and at least 1. Refuses a
    worker whose memory holds no partition.
    """
    if workers < 1 or n < 0 or d < 0:
        raise ValueError(f"need workers >= 1, n >= 0 and d >= 0, got {workers}, {n}, {d}")
    room = worker_memory / 2 - WORKER_BASE_BYTES
    rows = int(room // (ROW_BYTES * (d + 3))) if room > 0 else 0
    if rows < 2:
        raise ValueError(f"a worker memory of {worker_memory / 2**20:.0f} MiB holds no "
                         f"partition (it needs more than {2 * WORKER_BASE_BYTES / 2**20:.0f} "
                         "MiB): give the workers more memory or set the number of partitions")
    parts = max(workers, -(-n // rows))
    return max(1, min(workers * -(-parts // workers), n // 2))


def _largest_remainder(counts: np.ndarray, total: int) -> list[range]:
    """``total`` consecutive ids shared out in proportion to ``counts`` (largest remainder, at
    least one per non-zero count, ties to the lower index), as one ``range`` per count."""
    nonempty = counts > 0
    quota = total * counts / counts.sum()
    alloc = np.where(nonempty, np.maximum(1, np.floor(quota)), 0).astype(np.int64)
    while alloc.sum() > total:          # the minimum of 1 can overshoot: take from the richest
        alloc[np.argmax(np.where(alloc > 1, alloc - quota, -np.inf))] -= 1
    while alloc.sum() < total:          # largest remainders first
        alloc[np.argmax(np.where(nonempty, quota - alloc, -np.inf))] += 1
    stops = np.cumsum(alloc)
    return [range(int(stop - a), int(stop)) for a, stop in zip(alloc, stops, strict=True)]


def assign_folds(ids: Any, key: bytes, folds: range) -> np.ndarray:
    """Global fold id of each row of one partition: ``folds.start + HMAC-SHA256(key, id) mod
    len(folds)`` (module docstring). Depends on ``(key, id)`` only, so the replaced record keeps
    its fold, whatever order the source returns rows in (spec §1.3)."""
    if len(folds) == 0:
        raise ValueError("this partition owns no folds")
    _, digests = _keyed_digests(ids, key)
    return (digests % np.uint64(len(folds))).astype(np.int64) + folds.start


def _keyed_digests(ids: Any, key: bytes) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, HMAC-SHA256(key, id)[:8] as big-endian uint64)`` per row, with the id encoding
    of the module docstring; the ids checked to be integers or strings."""
    if not (isinstance(key, bytes) and len(key) >= 16):
        raise ValueError("key must be at least 16 bytes (see release_key())")
    values = np.asarray(ids)
    if values.ndim != 1:
        raise ValueError(f"ids must be one-dimensional, got shape {values.shape}")
    if np.issubdtype(values.dtype, np.integer):     # vectorised, bit-identical to hmac
        return values, hmac_sha256_64(values, key)
    if values.dtype == object or np.issubdtype(values.dtype, np.str_):
        if not all(isinstance(v, str) for v in values):
            raise TypeError("an id column must hold integers or strings only")
    else:
        raise TypeError(f"an id column must hold integers or strings, got dtype {values.dtype}")
    keyed = hmac.new(key, digestmod=hashlib.sha256)
    digests = np.fromiter((_mac64(keyed, v.encode("utf-8")) for v in values), dtype=np.uint64,
                          count=values.size)
    return values, digests


def _mac64(keyed: Any, message: bytes) -> int:
    mac = keyed.copy()
    mac.update(message)
    return int.from_bytes(mac.digest()[:8], "big")


# ----------------------------------------------------------------- block ensembles (§2.5b)
def partition_block_split(partition_rows: Sequence[int], n_folds: int, block_folds: int, *,
                          auto: bool = False) -> tuple[int, int]:
    """``(K, K')`` of a partitioned block ensemble (spec §2.5b, module docstring "Blocks"), from
    public facts only, given the estimator's resolved (K, K') (B = K / K' blocks): with ``auto``
    (``block_folds="auto"``) B is raised to the number P of non-empty partitions
    (``K' = K // max(B, P)``, ``K = B K'``), so that every partition holds whole blocks; an int
    K' is refused when B < P."""
    counts = np.asarray(partition_rows, dtype=np.int64)
    parts = int((counts > 0).sum())
    check_block_folds(n_folds, block_folds)
    B = n_folds // block_folds
    if auto:
        B = max(B, parts)
        if n_folds // B < 2:
            raise ValueError(
                f"n_folds={n_folds} is too few for {parts} non-empty partitions: block "
                "ensembles need at least 2 folds per block and one block per partition")
        return B * (n_folds // B), n_folds // B
    if B < parts:
        raise ValueError(
            f"n_folds={n_folds} with block_folds={block_folds} gives {B} blocks, fewer than "
            f"the number of non-empty partitions ({parts}): each block lives inside one "
            "partition; lower block_folds or pass block_folds='auto'")
    return n_folds, block_folds


def allocate_blocks(partition_rows: Sequence[int], n_folds: int, block_folds: int
                    ) -> tuple[list[range], BlockLayout]:
    """Global block ids owned by each partition and the public block layout (spec §2.5b):
    B = K / K' blocks shared out by the public row counts n_p, one per non-empty partition and
    each further block to the partition whose blocks are then largest (``ceil(n_p / B_p)``;
    ties to the lower index), which makes n_b,max, hence Delta_tau, the smallest any split of B
    blocks over the partitions can give; partition p with B_p blocks cuts its rows into blocks
    of ``floor(n_p / B_p)`` or ``ceil(n_p / B_p)`` rows and each block into K' folds the same
    way (:func:`assign_blocks`), so n_b,max and the smallest fold follow from (n_p, B_p, K')
    alone. Refuses a layout whose smallest fold would hold fewer than 2 rows."""
    counts = np.asarray(partition_rows, dtype=np.int64)
    if counts.ndim != 1 or counts.size == 0 or (counts < 0).any() or counts.sum() == 0:
        raise ValueError(f"partition_rows must be row counts >= 0, not all 0; got {counts}")
    check_block_folds(n_folds, block_folds)
    B = n_folds // block_folds
    if B < int((counts > 0).sum()):
        raise ValueError(f"{B} blocks are fewer than the number of non-empty partitions "
                         f"({int((counts > 0).sum())})")
    shares = np.where(counts > 0, 1, 0)
    for _ in range(B - int(shares.sum())):   # the next block to the largest blocks (min-max)
        shares[np.argmax(np.where(shares > 0, -(-counts // np.maximum(shares, 1)), -1))] += 1
    stops = np.cumsum(shares)
    blocks = [range(int(stop - a), int(stop)) for a, stop in zip(shares, stops, strict=True)]
    used = [(int(c), len(r)) for c, r in zip(counts, blocks, strict=True) if len(r)]
    block_rows = max(-(-c // b) for c, b in used)
    fold_rows = min((c // b) // block_folds for c, b in used)
    if fold_rows < 2:
        raise ValueError(
            f"{B} blocks of {block_folds} folds leave a fold of {fold_rows} rows in the "
            "smallest partition: lower n_folds or block_folds, or merge small partitions")
    return blocks, BlockLayout(n=int(counts.sum()), n_folds=n_folds, block_folds=block_folds,
                               block_rows=block_rows, fold_rows=fold_rows)


def assign_blocks(ids: Any, key: bytes, blocks: range, block_folds: int) -> np.ndarray:
    """Global fold id of each row of one partition owning the blocks ``blocks`` (module
    docstring "Blocks"): the rows ranked by ``HMAC-SHA256(key, id)`` (ties, which need two ids
    with one 64-bit MAC, by the id), the ranked order cut as :func:`dpcausal.ate.folds.make_folds`
    cuts its order into ``len(blocks)`` blocks of ``block_folds`` folds, then offset to the
    partition's first fold ``blocks.start * block_folds``. A function of the partition's set of
    ids and the key only: never of values or row order."""
    if len(blocks) == 0:
        raise ValueError("this partition owns no blocks")
    values, digests = _keyed_digests(ids, key)
    tie = values.astype(str) if values.dtype == object else values
    order = np.lexsort((tie, digests))
    local = make_folds(values.size, len(blocks) * block_folds, "contiguous",
                       block_folds=block_folds)
    fold_ids = np.empty(values.size, dtype=np.int64)
    fold_ids[order] = local + blocks.start * block_folds
    return fold_ids


@dataclass(frozen=True)
class BlockSums:
    """Non-private sums over one block (spec §2.5b): its global id, rows n_b, sum of Gamma_i
    and sum of Gamma_i^2: all a block contributes to tau_hat and V_hat (spec §2.1); the tight
    sigma2 needs only the public layout."""

    block: int
    n: int
    s1: float
    s2: float


def partition_block_sums(frame: pd.DataFrame, roles: Roles, est: PrivateATE, key: bytes,
                         blocks: range, evaluation: bool = False) -> tuple[BlockSums, ...]:
    """Fit, aggregate and score the blocks of one partition (spec §2.5b: steps 1-4 of §2.2
    inside each block), returning only each block's sums: no fold model, no row-level value
    leaves. ``est`` has int ``n_folds`` and ``block_folds`` (:func:`plan_partitions`)."""
    kb = est.block_folds
    if not isinstance(kb, int):
        raise TypeError(f"the plan's estimator has an int block_folds, got {kb!r}")
    done = _arrays(frame, roles, est, evaluation, indicators="present")
    with private_failures(evaluation, "fitting"):
        fold_ids = assign_blocks(frame[roles.id].to_numpy(), key, blocks, kb)
        folds = range(blocks.start * kb, blocks.stop * kb)
        models = _fit_folds(done, fold_ids, est, folds)
    with private_failures(evaluation, "scoring"):
        local = fold_ids - folds.start
        gamma = est.block_scores(done.X, done.A, done.Y, local,
                                 [m.renumbered(m.k - folds.start) for m in models],
                                 done.usable)
        block = local // kb
        count = np.bincount(block, minlength=len(blocks))
        s1 = np.bincount(block, weights=gamma, minlength=len(blocks))
        s2 = np.bincount(block, weights=gamma * gamma, minlength=len(blocks))
        return tuple(BlockSums(block=blocks.start + j, n=int(count[j]), s1=float(s1[j]),
                               s2=float(s2[j])) for j in range(len(blocks)))


def combine_blocks(per_partition: Sequence[Sequence[BlockSums]]) -> ScoreSums:
    """The blocks' sums added up (compensated summation), each block id once."""
    sums = [b for part in per_partition for b in part]
    if len({b.block for b in sums}) != len(sums):
        raise AssertionError("bug: a block was summed twice")
    return combine([ScoreSums(n=b.n, s1=b.s1, s2=b.s2) for b in sums])


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
    they come from :func:`assign_folds`). A block ensemble (spec §2.5b) also has each
    partition's global block ids ``blocks`` and the public ``layout``; the full ensemble has
    ``blocks=None``. A release from noisy sums has ``sums`` (its estimator), no folds and K = 0
    (module docstring)."""

    roles: Roles
    rows: tuple[int, ...]
    folds: tuple[range, ...]
    schema: dict[str, str]
    estimator: PrivateATE
    blocks: tuple[range, ...] | None = None
    layout: BlockLayout | None = None
    sums: str | None = None     # "dim" or "lin": a release from summed statistics, no folds

    @property
    def n(self) -> int:
        return sum(self.rows)

    @property
    def d(self) -> int:
        return len(self.roles.covariates)

    @property
    def n_folds(self) -> int:
        return 0 if self.sums is not None else int(self.estimator.n_folds)

    @property
    def block_folds(self) -> int:
        """K' (K for the full ensemble)."""
        return self.n_folds if self.layout is None else self.layout.block_folds

    @property
    def n_blocks(self) -> int:
        return 1 if self.layout is None else self.layout.n_blocks


#: The partitioned path's refusal of a pre-release of the planning facts (issue 39 item 5).
PRERELEASE_REFUSED = (
    "prerelease does not apply to data.partitions: a partitioned release fixes its estimator, "
    "K and blocks from the footers before the charge, and its workers never pass their arm "
    "counts back for a choice after it; state the facts instead (estimator.treated_share, "
    "estimator.outcome_sd, or the curator's `ledger register --treated-share/--outcome-sd`), "
    "or release from one table")


def plan_partitions(footers: Sequence[tuple[int, dict[str, str]]], estimator: PrivateATE, *,
                    id_column: str, treatment: str, outcome: str,
                    covariates: Sequence[str] | None, evaluation: bool) -> PartitionPlan:
    """Every public refusal of a partitioned release, from the partitions' footers (rows,
    schema) and the estimator's parameters: roles, K (the planner's for "auto"), the parameter
    checks of the in-memory path (spec §7), the mode, and each partition's folds
    (:func:`allocate_folds`) or blocks (:func:`allocate_blocks`, module docstring "Blocks").
    Reads no value; ``estimator`` is left as given."""
    roles = check_roles([s for _, s in footers], id_column, treatment, outcome, covariates)
    rows = tuple(int(r) for r, _ in footers)
    n, d = sum(rows), len(roles.covariates)
    if estimator.missing != "impute":
        raise ValueError(
            f"missing={estimator.missing!r} does not apply to data.partitions: n is the sum of "
            "the partitions' footer counts, fixed before any value is read; use "
            "missing='impute' (the default)")
    if estimator.prerelease is not None:
        raise ValueError(PRERELEASE_REFUSED)
    est = clone(estimator).set_params(folds="secret")
    chosen = est.resolved_estimator(n, d)
    if chosen in SUM_ESTIMATORS:    # summed statistics: no folds (module docstring)
        est.set_params(estimator=chosen)
        est._check_choice(d, list(roles.covariates))
        est._sums_params(chosen, n, d, list(roles.covariates))
        est.check_mode(evaluation)
        return PartitionPlan(roles=roles, rows=rows, folds=tuple(range(0) for _ in rows),
                             schema=dict(footers[0][1]), estimator=est, sums=chosen)
    if est.estimand != "ate":     # the ensemble's ATT divides by a count no worker returns
        raise ValueError(PARTITIONED_ATE_ONLY)
    K, kb = est.resolved_folds(n, d)
    if kb == K:     # the full ensemble: block_folds=None, or "auto" at K <= 256
        est.set_params(n_folds=K, block_folds=None)
        est._params(n, d)
        est.set_params(propensity_clip=est.resolved_propensity_clip(n, d))
        est.check_mode(evaluation)
        return PartitionPlan(roles=roles, rows=rows, folds=tuple(allocate_folds(rows, K)),
                             schema=dict(footers[0][1]), estimator=est)
    K, kb = partition_block_split(rows, K, kb, auto=estimator.block_folds == "auto")
    est.set_params(n_folds=K, block_folds=kb)
    est._params(n, d)
    est.check_mode(evaluation)
    blocks, layout = allocate_blocks(rows, K, kb)
    est.set_params(propensity_clip=est.resolved_propensity_clip(n, d, layout))
    check_noise_scale(est.calibration(n, d, layout).sigma_ate, outcome_bounds(est.outcome_bounds))
    return PartitionPlan(roles=roles, rows=rows,
                         folds=tuple(range(b.start * kb, b.stop * kb) for b in blocks),
                         schema=dict(footers[0][1]), estimator=est, blocks=tuple(blocks),
                         layout=layout)


def read_partition(source: str | Path, roles: Roles) -> pd.DataFrame:
    """One partition's declared columns (a Parquet file, local path or fsspec URL)."""
    return pd.read_parquet(source, columns=roles.columns())


def _arrays(frame: pd.DataFrame, roles: Roles, est: PrivateATE, evaluation: bool,
            indicators: str = "all") -> Completed:
    """(X, A, Y) of a partition after the declared missing-value policy (row by row, so the
    same as on the whole data; no check of the arms here: a partition may hold one arm only,
    and a release never fails on values after its charge), Y clipped to the bounds (spec §1.2).

    ``indicators`` (plain linear/logistic models, SPECS.md "Missing and non-finite values"):
    "all" where a fold model predicts rows of other partitions (the full ensemble), so every
    partition's models share one column layout; "present" (an indicator only for a covariate
    missing in this partition) where every model stays inside the partition (blocks): an
    all-zero indicator changes no prediction, and with degree-2 features it would add d(d+3)/2
    all-zero columns to every fit."""
    X, A, Y = check_schema(frame[list(roles.covariates)], frame[roles.treatment],
                           frame[roles.outcome], keep_frame=not est._plain_linear())
    with private_failures(evaluation, "reading a partition"):
        done = apply_missing(X, A, Y, est.missing, est.missing_fill,
                             indicators=est._indicators(indicators))
    return Completed(X=done.X, A=done.A, Y=np.clip(done.Y, *outcome_bounds(est.outcome_bounds)),
                     usable=done.usable)


def fit_partition(frame: pd.DataFrame, roles: Roles, est: PrivateATE, key: bytes,
                  folds: range, evaluation: bool = False) -> list[FoldModels]:
    """The fold models of the folds ``folds`` that partition ``frame`` owns, each fitted on its
    own rows (spec §2.2 step 2); an empty fold gets the public constants of the module
    docstring."""
    done = _arrays(frame, roles, est, evaluation)
    with private_failures(evaluation, "fitting"):
        return _fit_folds(done, assign_folds(frame[roles.id].to_numpy(), key, folds), est,
                          folds)


def _fit_folds(done: Completed, fold_ids: np.ndarray, est: PrivateATE, folds: range
               ) -> list[FoldModels]:
    """The models of ``folds``, each on its usable rows; a fold without one gets the public
    constants of the module docstring."""
    use = done.usable
    present = set(np.unique(fold_ids[use]).tolist())
    fitted = {fm.k: fm for fm in est.fit_folds(take_rows(done.X, use), done.A[use],
                                                done.Y[use], fold_ids[use],
                                                ks=[k for k in folds if k in present])}
    return [fitted.get(k) or _empty_fold(k, est._ensemble()) for k in folds]


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


def partition_statistics(frame: pd.DataFrame, roles: Roles, est: PrivateATE, estimator: str,
                         evaluation: bool = False) -> np.ndarray:
    """The pre-noise ``dim``/``lin`` statistic vector of one partition
    (:meth:`PrivateATE.completed_statistics`; spec small_n_estimators.md §2-3): no folds, so
    only this vector leaves the worker. Additive: the partitions' vectors summed (entry by
    entry) are the whole data's, released once by ``est._release_statistics`` inside
    :func:`dpcausal.session.charged_release`. Non-private."""
    X, A, Y = check_schema(frame[list(roles.covariates)], frame[roles.treatment],
                           frame[roles.outcome])
    with private_failures(evaluation, "summing"):
        return est.completed_statistics(X, A, Y, estimator=estimator,
                                        columns=[str(c) for c in roles.covariates])


def combine(sums: Sequence[ScoreSums]) -> ScoreSums:
    """The partitions' sums added up (compensated summation), for
    :meth:`PrivateATE.release_sums`."""
    return ScoreSums(n=sum(s.n for s in sums), s1=math.fsum(s.s1 for s in sums),
                     s2=math.fsum(s.s2 for s in sums))


def combine_statistics(per_partition: Sequence[np.ndarray]) -> np.ndarray:
    """The partitions' statistic vectors added up, coordinate by coordinate (compensated
    summation): the vector of all rows, since it is a sum over rows."""
    stacked = np.asarray(per_partition, dtype=float)
    if stacked.ndim != 2:
        raise AssertionError("bug: the partitions' statistic vectors differ in length")
    return np.array([math.fsum(column) for column in stacked.T])


def fold_rule(id_column: str, n_partitions: int, blocks: bool = False, sums: bool = False
              ) -> dict[str, Any]:
    """The public description of the fold rule, added to the release's parameters:
    ``keyed_hash`` (:func:`assign_folds`) or, for blocks, ``keyed_rank`` (:func:`assign_blocks`);
    a release from noisy sums has no folds (``per_partition_sums``)."""
    if sums:
        return {"folds": None, "partitions": n_partitions, "combined": "per_partition_sums"}
    rule = "keyed_rank" if blocks else "keyed_hash"
    return {"folds": f"{rule}({id_column})", "partitions": n_partitions}


def write_parquet_partitions(path: str | Path, n: int, d: int, n_partitions: int,
                             seed: int | None = None, *, id_column: str = "id") -> list[Path]:
    """Synthetic partitioned source for the scale benchmarks: ``n`` rows in
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
