"""Partitioned block ensembles (spec §2.5b, issue 28 §3): every block inside one partition, sizes
from the public row counts, rows ranked by keyed hash; the per-block sums give the release of the
in-memory block estimator on the same assignment, whatever the row order, and adversarial
neighbours inside a partition stay within Delta_tau and Delta_V.

Expected values are written out here: the block counts and layouts by hand, the assignment by a
per-id loop over the documented rule, the sensitivities from §2.5b's formulas."""

from __future__ import annotations

import hashlib
import hmac
import math

import numpy as np
import pandas as pd
import pytest

from dpcausal import PrivateATE
from dpcausal.ate.partitioned import (
    BlockSums,
    Roles,
    allocate_blocks,
    assign_blocks,
    combine_blocks,
    partition_block_split,
    partition_block_sums,
    plan_partitions,
    write_parquet_partitions,
)
from tests.library.ate.test_blocks import TIGHT
from tests.library.ate.test_privacy_properties import HashClassifier, HashRegressor


class _FrameHashClassifier(HashClassifier):
    """The black-box classifier on a partition's DataFrame covariates (as arrays)."""

    def fit(self, X, y):
        return super().fit(np.asarray(X, dtype=float), y)

    def predict_proba(self, X):
        return super().predict_proba(np.asarray(X, dtype=float))


class _FrameHashRegressor(HashRegressor):
    def fit(self, X, y):
        return super().fit(np.asarray(X, dtype=float), y)

    def predict(self, X):
        return super().predict(np.asarray(X, dtype=float))


KEY = bytes(range(32))
ROLES = Roles(id="id", treatment="A", outcome="Y", covariates=("x1", "x2", "x3"))
SCHEMA = {"id": "int64", "A": "int8", "Y": "double", "x1": "double", "x2": "double",
          "x3": "double"}


def _reference_assignment(ids, key: bytes, first_block: int, n_blocks: int, kb: int):
    """The documented rule per id: rank by (MAC, id), cut into n_blocks blocks of K' folds with
    sizes as np.array_split's (the first ``m % parts`` pieces one longer)."""
    def mac(i):
        msg = int(i).to_bytes(8, "big", signed=True)
        return int.from_bytes(hmac.new(key, msg, hashlib.sha256).digest()[:8], "big")

    ranked = sorted(ids.tolist(), key=lambda i: (mac(i), i))
    fold = {}
    pos = 0
    for b in range(n_blocks):
        size = len(ranked) // n_blocks + (b < len(ranked) % n_blocks)
        block = ranked[pos:pos + size]
        pos += size
        at = 0
        for k in range(kb):
            fsize = size // kb + (k < size % kb)
            for i in block[at:at + fsize]:
                fold[i] = (first_block + b) * kb + k
            at += fsize
    return np.array([fold[i] for i in ids.tolist()])


def test_block_allocation_and_layout_by_hand():
    blocks, layout = allocate_blocks([100, 300], 8, 2)
    assert blocks == [range(0, 1), range(1, 4)]
    assert (layout.n, layout.block_rows, layout.fold_rows, layout.n_blocks) == (400, 100, 50, 4)
    blocks, layout = allocate_blocks([101, 299], 8, 2)
    # blocks of 101 | 100, 100, 99 rows; the smallest fold is 99 // 2 = 49
    assert blocks == [range(0, 1), range(1, 4)]
    assert (layout.block_rows, layout.fold_rows) == (101, 49)
    blocks, layout = allocate_blocks([40, 0, 50], 6, 3)
    assert blocks == [range(0, 1), range(1, 1), range(1, 2)]
    assert (layout.block_rows, layout.fold_rows) == (50, 13)


def test_block_split_rules():
    # "auto": the in-memory B raised to the 3 non-empty partitions
    assert partition_block_split([10_000] * 3, 300, 300, auto=True) == (300, 100)
    assert partition_block_split([10_000] * 3, 1000, 250, auto=True) == (1000, 250)
    assert partition_block_split([10_000, 0, 5, 9], 14, 14, auto=True) == (12, 4)
    assert partition_block_split([10_000, 0, 5], 12, 4) == (12, 4)
    with pytest.raises(ValueError, match="fewer than the number of non-empty partitions"):
        partition_block_split([100, 100, 100], 12, 6)
    with pytest.raises(ValueError, match="at least 2 folds per block"):
        partition_block_split([100] * 5, 8, 8, auto=True)
    with pytest.raises(ValueError, match="a fold of 1 rows"):
        allocate_blocks([400, 7], 8, 4)


def test_assign_blocks_is_the_documented_rule_and_ignores_row_order():
    ids = np.random.default_rng(3).permutation(10_000)[:503].astype(np.int64)
    got = assign_blocks(ids, KEY, range(4, 7), 5)
    assert np.array_equal(got, _reference_assignment(ids, KEY, 4, 3, 5))
    order = np.random.default_rng(4).permutation(ids.size)
    assert np.array_equal(assign_blocks(ids[order], KEY, range(4, 7), 5), got[order])
    sizes = np.bincount(got - 20)
    assert sorted(set(sizes.tolist())) == [33, 34]
    assert not np.array_equal(assign_blocks(ids, bytes(32), range(4, 7), 5), got)


@pytest.fixture(scope="module")
def partitions(tmp_path_factory):
    files = write_parquet_partitions(tmp_path_factory.mktemp("block-parts"), n=3200, d=3,
                                     n_partitions=3, seed=11)
    frames = [pd.read_parquet(f) for f in files]
    # unequal partitions: 1067, 1067 + 400, 1066 - 400 rows (no ties in the block shares)
    frames[1] = pd.concat([frames[1], frames[2].iloc[:400]], ignore_index=True)
    frames[2] = frames[2].iloc[400:].reset_index(drop=True)
    return frames


def _plan(frames, est, evaluation=True):
    return plan_partitions([(len(f), SCHEMA) for f in frames], est, id_column="id",
                           treatment="A", outcome="Y", covariates=None, evaluation=evaluation)


def _partitioned(frames, est, key=KEY, evaluation=True):
    plan = _plan(frames, est, evaluation)
    sums = [partition_block_sums(f, ROLES, plan.estimator, key, b, evaluation)
            for f, b in zip(frames, plan.blocks, strict=True)]
    total = combine_blocks(sums)
    rel = plan.estimator._release_sums(total.n, total.s1, total.s2, n_folds=plan.n_folds,
                                       d=3, evaluation=evaluation, layout=plan.layout)
    return plan, sums, rel


def _in_memory_reference(frames, plan, kw):
    """The in-memory block estimator on all rows, its folds given by the documented per-id rule
    (:func:`_reference_assignment`, K' = 5) for each partition's blocks in ``plan``."""
    fold_ids = np.concatenate([
        _reference_assignment(f["id"].to_numpy(), KEY, b.start, len(b), 5)
        for f, b in zip(frames, plan.blocks, strict=True)])
    whole = pd.concat(frames, ignore_index=True)
    return PrivateATE(**kw, folds=fold_ids).fit(whole[["x1", "x2", "x3"]].to_numpy(),
                                                whole["A"].to_numpy(), whole["Y"].to_numpy(),
                                                evaluation=True)


@pytest.mark.parametrize("estimator", ["aipw", "g", "ipw"])
def test_partitioned_blocks_equal_the_in_memory_block_estimator(partitions, estimator):
    kw = dict(estimator=estimator, n_folds=30, block_folds=5, outcome_bounds=(-1, 1),
              noise_seed=5)
    plan, sums, rel = _partitioned(partitions, PrivateATE(**kw))
    # 6 blocks over 1067 : 1467 : 666 rows: 1, 1, 1, then to 1467 (734), 1067 (534), 1467 (489)
    assert [len(b) for b in plan.blocks] == [2, 3, 1]
    ref = _in_memory_reference(partitions, plan, kw)
    assert rel.nonprivate["ate"] == pytest.approx(ref.nonprivate["ate"], rel=1e-9, abs=1e-12)
    assert rel.nonprivate["variance"] == pytest.approx(ref.nonprivate["variance"], rel=1e-9)
    assert rel.ate == pytest.approx(ref.ate, rel=1e-9)        # the same calibration and noise
    assert (rel.se is None) == (ref.se is None) == (estimator == "g")   # G: no CI by default
    if rel.se is not None:
        assert rel.se == pytest.approx(ref.se, rel=1e-9)
    for name in ("n_folds", "n_blocks", "block_folds", "rows_per_block", "rows_per_fold"):
        assert rel.params[name] == ref.params[name], name
    # the largest block is partition 2's only one (666 rows); the smallest fold 489 // 5 = 97
    assert (rel.params["rows_per_block"], rel.params["rows_per_fold"]) == (666, 97)
    # only sums: one (block, n_b, sum, sum of squares) per block, plain numbers
    flat = [b for part in sums for b in part]
    assert [b.block for b in flat] == list(range(6))
    assert all(type(b) is BlockSums and type(b.n) is int and type(b.s1) is float
               and type(b.s2) is float for b in flat)
    assert [b.n for b in flat] == [534, 533, 489, 489, 489, 666]


def test_block_partitions_add_indicators_only_for_their_own_missing_covariates(partitions,
                                                                               monkeypatch):
    """A block's models never leave its partition, so a partition adds an indicator only for a
    covariate missing in it (SPECS.md "Missing and non-finite values"): a complete partition's
    fits see the d covariates, not d more all-zero columns (with the default degree-2 features,
    65 columns instead of 20 at d = 5). The release equals the in-memory block estimator's,
    whose indicators are those of covariates missing anywhere."""
    import dpcausal.ate.partitioned as partitioned

    frames = [f.copy() for f in partitions]
    frames[1].loc[::7, "x2"] = np.nan                  # only partition 1 has a missing value
    widths = []
    fit = partitioned._fit_folds

    def spy(done, fold_ids, est, folds):
        widths.append(done.X.shape[1])
        return fit(done, fold_ids, est, folds)

    monkeypatch.setattr(partitioned, "_fit_folds", spy)
    kw = dict(estimator="aipw", n_folds=30, block_folds=5, outcome_bounds=(-1, 1),
              noise_seed=5)
    plan, _, rel = _partitioned(frames, PrivateATE(**kw))
    assert widths == [3, 4, 3]                         # x1..x3, and x2's indicator in partition 1
    ref = _in_memory_reference(frames, plan, kw)
    assert rel.nonprivate["ate"] == pytest.approx(ref.nonprivate["ate"], rel=1e-9, abs=1e-12)
    assert rel.nonprivate["variance"] == pytest.approx(ref.nonprivate["variance"], rel=1e-9)


def test_result_ignores_row_order_inside_and_across_files(partitions):
    est = PrivateATE(n_folds=30, block_folds=5, outcome_bounds=(-1, 1), noise_seed=1)
    _, sums, rel = _partitioned(partitions, est)
    rng = np.random.default_rng(8)
    shuffled = [f.sample(frac=1.0, random_state=rng.integers(1 << 30)).reset_index(drop=True)
                for f in partitions]
    assert not shuffled[0]["id"].equals(partitions[0]["id"])
    _, sums2, rel2 = _partitioned(shuffled, est)
    for a, b in zip([x for p in sums for x in p], [x for p in sums2 for x in p], strict=True):
        assert (a.block, a.n) == (b.block, b.n)
        assert a.s1 == pytest.approx(b.s1, rel=1e-12, abs=1e-12)
        assert a.s2 == pytest.approx(b.s2, rel=1e-12)
    # the files listed in another order: each partition keeps its rows, hence its blocks' rows
    _, sums3, rel3 = _partitioned(shuffled[::-1], est)
    per_rows = sorted((b.n, round(b.s1, 9)) for p in sums for b in p)
    assert sorted((b.n, round(b.s1, 9)) for p in sums3 for b in p) == per_rows
    for other in (rel2, rel3):
        assert other.nonprivate["ate"] == pytest.approx(rel.nonprivate["ate"], rel=1e-12)
        assert other.nonprivate["variance"] == pytest.approx(rel.nonprivate["variance"],
                                                             rel=1e-9)


def _target(frame, blocks, kb):
    """Row position in ``frame`` of the smallest fold of the largest block it owns."""
    ids = assign_blocks(frame["id"].to_numpy(), KEY, blocks, kb)
    local = ids - blocks.start * kb
    sizes = np.bincount(local // kb)
    b = int(np.argmax(sizes))
    folds = np.bincount(local)[b * kb:(b + 1) * kb]
    return int(np.flatnonzero(local == b * kb + int(np.argmin(folds)))[0])


@pytest.mark.parametrize("estimator", ["g", "aipw"])
@pytest.mark.parametrize("models", ["hash", "linear"])
def test_adversarial_neighbours_in_one_partition_stay_within_the_bounds(estimator, models):
    """A record of the largest block's smallest fold (partition 0) replaced in place, same id,
    by an extreme one: |dtau| <= Delta_tau and |d sqrt V| <= Delta_V of §2.5b with the public
    n_b,max, and no other partition's block moves."""
    rows = [150, 241, 90]
    rng = np.random.default_rng(len(estimator) + len(models))
    ids = rng.permutation(10_000)[:sum(rows)]
    kw = dict(estimator=estimator, n_folds=12, block_folds=3, propensity_clip=0.2,
              outcome_bounds=(-1, 1))
    if models == "hash":
        kw.update(propensity_model=_FrameHashClassifier(), outcome_model=_FrameHashRegressor())
    est = PrivateATE(**kw)
    n, kb = sum(rows), 3
    # 4 blocks over 150 : 241 : 90 rows -> 1, 2, 1 (blocks of 150 | 121, 120 | 90):
    # n_b,max = 150, partition 0's only block
    d_eq, kappa = TIGHT[estimator]
    d_tau = d_eq / n + kappa * 150 / (n * (kb - 1))
    d_v = math.sqrt(d_eq**2 + 150 * kappa**2 / (kb - 1) ** 2) / math.sqrt(n * (n - 1))
    moved = 0.0
    for _ in range(4):
        frames = []
        for p, m in enumerate(rows):
            frames.append(pd.DataFrame({
                "id": ids[sum(rows[:p]):sum(rows[:p + 1])].astype(np.int64),
                "A": np.tile([0, 1], m)[:m].astype(np.int8), "Y": rng.uniform(-1, 1, m),
                **{f"x{j + 1}": rng.standard_normal(m) for j in range(3)}}))
        plan = _plan(frames, est)
        assert plan.layout.block_rows == 150 and [len(b) for b in plan.blocks] == [1, 2, 1]
        cal = plan.estimator.calibration(n, 3, plan.layout)
        assert cal.sensitivity == pytest.approx(d_tau, rel=1e-12)
        assert cal.sensitivity_var == pytest.approx(d_v, rel=1e-12)
        i = _target(frames[0], plan.blocks[0], kb)
        changed = [f.copy() for f in frames]
        big = 50.0 if models == "linear" else 3.0
        for j in range(3):
            changed[0].loc[i, f"x{j + 1}"] = rng.choice([-1.0, 1.0]) * big
        changed[0].loc[i, "A"] = 1 - frames[0].loc[i, "A"]
        changed[0].loc[i, "Y"] = 1.0 if frames[0].loc[i, "Y"] < 0 else -1.0
        before = [partition_block_sums(f, ROLES, plan.estimator, KEY, b, True)
                  for f, b in zip(frames, plan.blocks, strict=True)]
        after = [partition_block_sums(f, ROLES, plan.estimator, KEY, b, True)
                 for f, b in zip(changed, plan.blocks, strict=True)]
        assert before[1] == after[1] and before[2] == after[2]
        t1, t2 = combine_blocks(before), combine_blocks(after)
        tau, tau2 = t1.s1 / n, t2.s1 / n
        v = (t1.s2 - n * tau**2) / (n * (n - 1))
        v2 = (t2.s2 - n * tau2**2) / (n * (n - 1))
        assert abs(tau - tau2) <= d_tau + 1e-12
        assert abs(math.sqrt(max(v, 0)) - math.sqrt(max(v2, 0))) <= d_v + 1e-12
        moved = max(moved, abs(tau - tau2))
    assert moved > 0

