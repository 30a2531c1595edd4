"""The partitioned ensemble (dpcausal.ate.partitioned, issue 19 §3): fold rule, per-partition phases
against the in-memory estimator, and the Parquet generator."""

from __future__ import annotations

import hashlib
import hmac

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression

from dpcausal import PrivateATE
from dpcausal.ate.partitioned import (
    Roles,
    ScoreSums,
    allocate_folds,
    assign_folds,
    auto_partitions,
    combine,
    fit_partition,
    fold_rule,
    partition_sums,
    write_parquet_partitions,
)

KEY = bytes(range(32))
ROLES = Roles(id="id", treatment="A", outcome="Y", covariates=("x1", "x2", "x3"))


def _reference_fold(key: bytes, ident: int | str, start: int, count: int) -> int:
    """The documented rule, written out per id."""
    msg = (ident.encode("utf-8") if isinstance(ident, str)
           else int(ident).to_bytes(8, "big", signed=True))
    return start + int.from_bytes(hmac.new(key, msg, hashlib.sha256).digest()[:8], "big") % count


def test_allocate_folds_largest_remainder_by_hand():
    assert allocate_folds([100, 300], 4) == [range(0, 1), range(1, 4)]
    assert allocate_folds([10, 10, 10], 4) == [range(0, 2), range(2, 3), range(3, 4)]
    assert allocate_folds([1000, 1], 3) == [range(0, 2), range(2, 3)]       # at least one fold
    assert allocate_folds([5, 0, 5], 2) == [range(0, 1), range(1, 1), range(1, 2)]
    assert allocate_folds([7, 3], 10) == [range(0, 7), range(7, 10)]


def test_allocate_folds_refuses_fewer_folds_than_partitions():
    with pytest.raises(ValueError, match="number of non-empty partitions"):
        allocate_folds([10, 10, 10], 2)
    with pytest.raises(ValueError, match="row counts"):
        allocate_folds([0, 0], 2)


def test_assign_folds_is_the_documented_keyed_hash():
    ids = np.array([0, 1, 2, 17, -5, 2**40, 123456789], dtype=np.int64)
    got = assign_folds(ids, KEY, range(10, 17))
    assert got.tolist() == [_reference_fold(KEY, int(i), 10, 7) for i in ids]
    names = np.array(["alice", "bob", "ümlaut", ""], dtype=object)
    assert assign_folds(names, KEY, range(3, 8)).tolist() == [
        _reference_fold(KEY, s, 3, 5) for s in names]


def test_assign_folds_ignores_row_order_and_depends_on_the_key():
    rng = np.random.default_rng(0)
    ids = rng.permutation(5000).astype(np.int64)
    folds = assign_folds(ids, KEY, range(0, 9))
    order = rng.permutation(ids.size)
    assert np.array_equal(assign_folds(ids[order], KEY, range(0, 9)), folds[order])
    other = assign_folds(ids, bytes(32), range(0, 9))
    assert np.mean(other != folds) > 0.8               # ~ 8/9 of rows move under another key
    assert set(np.unique(folds)) == set(range(9))


@pytest.mark.parametrize("ids, error", [(np.array([0.5, 1.5]), TypeError),
                                        (np.array(["a", 3], dtype=object), TypeError)])
def test_assign_folds_refuses_non_id_values(ids, error):
    with pytest.raises(error, match="integers or strings"):
        assign_folds(ids, KEY, range(2))


def test_write_parquet_partitions(tmp_path):
    files = write_parquet_partitions(tmp_path, n=1001, d=3, n_partitions=4, seed=1)
    assert [f.name for f in files] == [f"part-{p:05d}.parquet" for p in range(4)]
    frames = [pd.read_parquet(f) for f in files]
    assert [len(f) for f in frames] == [251, 250, 250, 250]
    whole = pd.concat(frames)
    assert list(whole.columns) == ["id", "A", "Y", "x1", "x2", "x3"]
    assert sorted(whole["id"]) == list(range(1001))
    assert set(whole["A"]) == {0, 1} and whole["Y"].between(-1, 1).all()
    again = pd.concat(pd.read_parquet(f) for f in write_parquet_partitions(
        tmp_path / "again", n=1001, d=3, n_partitions=4, seed=1))
    pd.testing.assert_frame_equal(whole, again)


@pytest.fixture(scope="module")
def partitions(tmp_path_factory):
    files = write_parquet_partitions(tmp_path_factory.mktemp("parts"), n=3000, d=3,
                                     n_partitions=3, seed=7)
    return [pd.read_parquet(f) for f in files]


def _partitioned(frames, est, K, key=KEY, evaluation=True):
    folds = allocate_folds([len(f) for f in frames], K)
    models = [m for f, r in zip(frames, folds, strict=True)
              for m in fit_partition(f, ROLES, est, key, r, evaluation)]
    sums = [partition_sums(f, ROLES, est, key, r, models, evaluation)
            for f, r in zip(frames, folds, strict=True)]
    return folds, models, sums


@pytest.mark.parametrize("estimator", ["aipw", "g", "ipw"])
def test_partitioned_equals_in_memory_on_the_same_folds(partitions, estimator):
    _check_equals_in_memory(partitions, estimator)


def _with_missing_values(partitions):
    """A NaN covariate, an infinite one, a missing outcome and a missing treatment (issue 26 §2:
    the first failed a charged release before)."""
    damaged = [f.copy() for f in partitions]
    damaged[0].loc[3, "x2"] = np.nan
    damaged[1].loc[4, "x1"] = np.inf
    damaged[1].loc[7, "Y"] = np.nan
    damaged[2]["A"] = damaged[2]["A"].astype(float)
    damaged[2].loc[9, "A"] = np.nan
    return damaged


@pytest.mark.parametrize("estimator", ["aipw", "ipw"])
def test_missing_values_follow_the_policy_as_in_memory(partitions, estimator):
    """The policy is row by row: partitions and the in-memory estimator impute and score the
    same rows the same way."""
    _check_equals_in_memory(_with_missing_values(partitions), estimator)


def test_a_partition_with_one_treated_row_releases_when_that_row_changes(partitions):
    """Issue 26 §2: arms are never checked per partition (a partition whose single treated row
    turns to control, which failed the release before, releases through the §2.7 fallbacks)."""
    K = 12
    frames = [f.copy() for f in partitions]
    frames[1]["A"] = 0
    frames[1].loc[0, "A"] = 1
    neighbour = [f.copy() for f in frames]
    neighbour[1].loc[0, "A"] = 0
    est = PrivateATE(n_folds=K, outcome_bounds=(-1, 1))
    results = []
    for data in (frames, neighbour):
        for evaluation in (True, False):
            _, _, sums = _partitioned(data, est, K, evaluation=evaluation)
            total = combine(sums)
            rel = est.release_sums(total.n, total.s1, total.s2, n_folds=K, d=3,
                                   evaluation=evaluation)
            assert np.isfinite([rel.ate, rel.se, *rel.ci]).all()
        results.append(rel)
    assert results[0].n == results[1].n


def _check_equals_in_memory(partitions, estimator):
    K = 12
    est = PrivateATE(estimator=estimator, n_folds=K, outcome_bounds=(-1, 1))
    folds, _, sums = _partitioned(partitions, est, K)
    total = combine(sums)
    n = total.n
    # in memory: all rows in one frame, in another order, folds from the same (key, id) rule
    whole = pd.concat(partitions, keys=range(3), names=["part", None]).sample(frac=1.0,
                                                                              random_state=3)
    part = whole.index.get_level_values("part").to_numpy()
    fold_ids = np.empty(len(whole), dtype=np.int64)
    for p, r in enumerate(folds):
        fold_ids[part == p] = assign_folds(whole["id"].to_numpy()[part == p], KEY, r)
    ref = PrivateATE(estimator=estimator, n_folds=K, outcome_bounds=(-1, 1), folds=fold_ids
                     ).fit(whole[list(ROLES.covariates)].to_numpy(), whole["A"].to_numpy(),
                           whole["Y"].to_numpy(), evaluation=True)
    assert n == len(whole) == ref.n
    rel = est._release_sums(n, total.s1, total.s2, n_folds=K, d=3, evaluation=True,
                           params=fold_rule("id", 3))
    assert rel.nonprivate["ate"] == pytest.approx(ref.nonprivate["ate"], rel=1e-9, abs=1e-12)
    assert rel.nonprivate["variance"] == pytest.approx(ref.nonprivate["variance"], rel=1e-9)
    assert rel.noise == ref.noise and rel.privacy == ref.privacy
    assert rel.params["folds"] == "keyed_hash(id)" and rel.params["partitions"] == 3


def test_shuffling_a_partition_changes_no_fold_model_and_no_sum(partitions):
    K = 9
    est = PrivateATE(n_folds=K, outcome_bounds=(-1, 1), propensity_model=LogisticRegression(),
                     outcome_model=LinearRegression())     # coef_ read below
    _, models, sums = _partitioned(partitions, est, K)
    shuffled = [f.sample(frac=1.0, random_state=5).reset_index(drop=True) for f in partitions]
    _, models2, sums2 = _partitioned(shuffled, est, K)
    for a, b in zip(models, models2, strict=True):
        assert a.k == b.k
        np.testing.assert_allclose(a.mu1.coef_, b.mu1.coef_, rtol=1e-9)
        np.testing.assert_allclose(a.propensity.coef_, b.propensity.coef_, rtol=1e-6)
    for a, b in zip(sums, sums2, strict=True):
        assert a.n == b.n
        assert a.s1 == pytest.approx(b.s1, rel=1e-9) and a.s2 == pytest.approx(b.s2, rel=1e-9)


def test_each_fold_model_sees_only_its_own_rows(partitions):
    """Changing one row's outcome changes its own fold's models and no other."""
    K = 9
    est = PrivateATE(n_folds=K, outcome_bounds=(-1, 1))
    folds = allocate_folds([len(f) for f in partitions], K)
    base = fit_partition(partitions[1], ROLES, est, KEY, folds[1], True)
    changed = partitions[1].copy()
    changed.loc[0, "Y"] = -changed.loc[0, "Y"] + 0.5
    own = int(assign_folds(changed["id"].to_numpy()[:1], KEY, folds[1])[0])
    after = fit_partition(changed, ROLES, est, KEY, folds[1], True)
    for a, b in zip(base, after, strict=True):
        arm = a.mu1 if changed.loc[0, "A"] == 1 else a.mu0
        arm_after = b.mu1 if changed.loc[0, "A"] == 1 else b.mu0
        # the default models are fitted pipelines (degree-2 features, then least squares)
        assert np.array_equal(arm[-1].coef_, arm_after[-1].coef_) == (a.k != own)


def test_an_empty_fold_gets_the_public_constants(partitions):
    small = partitions[0].iloc[:3]
    est = PrivateATE(n_folds=2, outcome_bounds=(-1, 1))
    ids = small["id"].to_numpy()
    folds = range(0, 40)
    models = fit_partition(small, ROLES, est, KEY, folds, True)
    used = set(assign_folds(ids, KEY, folds).tolist())
    assert [m.k for m in models] == list(folds)
    empty = [m for m in models if m.k not in used]
    assert len(empty) >= 37
    assert all(m.propensity == 0.5 and m.mu1 is None and m.mu0 is None for m in empty)


def test_combine_is_mean_and_variance_of_the_scores():
    rng = np.random.default_rng(2)
    gamma = rng.normal(0.3, 2.0, 1000)
    parts = np.split(gamma, [100, 650])
    total = combine([ScoreSums(len(g), float(g.sum()), float(g @ g)) for g in parts])
    assert total.n == 1000
    rel = PrivateATE(n_folds=10, outcome_bounds=(-1, 1))._release_sums(
        total.n, total.s1, total.s2, n_folds=10, d=1, evaluation=True)
    assert rel.nonprivate["ate"] == pytest.approx(gamma.mean(), rel=1e-12)
    assert rel.nonprivate["variance"] == pytest.approx(gamma.var(ddof=1) / 1000, rel=1e-10)


def test_release_mode_draws_from_os_entropy_and_hides_estimates():
    # zeta=10: the noise sd is about 0.3, so the ATE is not clamped to [-2, 2] (at zeta=1 one
    # release in four was, and both releases at one bound made the test fail 4% of the time)
    est = PrivateATE(n_folds=10, outcome_bounds=(-1, 1), zeta=10.0)
    def release(e):
        return e._release_sums(5000, 500.0, 50.5, n_folds=10, d=3, params=fold_rule("id", 2))

    a, b = release(est), release(est)
    assert a.nonprivate is None and not a.evaluation
    assert a.ate != b.ate and abs(a.ate) < 2 and abs(b.ate) < 2
    seeded = PrivateATE(n_folds=10, outcome_bounds=(-1, 1), noise_seed=1)
    with pytest.raises(ValueError, match="noise_seed is for evaluation"):
        release(seeded)




@pytest.mark.parametrize("n, d, workers, memory, expected", [
    # 4 GiB workers, d = 5: (2 GiB - 400 MiB) / (120 * 8 B) = 1,800,055 rows per partition
    (10**8, 5, 2, 4 * 2**30, 56),     # ceil(10^8 / 1,800,055) = 56, a multiple of 2
    (10**8, 5, 3, 4 * 2**30, 57),     # 56 rounded up to whole rounds of 3 workers
    (10**6, 5, 2, 4 * 2**30, 2),      # one partition per worker at least
    (3, 5, 2, 4 * 2**30, 1),          # at most n // 2
    # 1 GiB workers: (512 - 400) MiB / 960 B = 122,333 rows: ceil(10^7 / 122,333) = 82
    (10**7, 5, 2, 2**30, 82),
])
def test_auto_partitions_by_hand(n, d, workers, memory, expected):
    """Issue 35 §5: P of ``sql_partitions: auto`` from n, d and the workers' memory, the
    stated model worked by hand."""
    assert auto_partitions(n, d, workers=workers, worker_memory=memory) == expected


def test_auto_partitions_refuses_a_worker_too_small_for_any_partition():
    with pytest.raises(ValueError, match="holds no partition"):
        auto_partitions(10**6, 5, workers=2, worker_memory=600 * 2**20)
