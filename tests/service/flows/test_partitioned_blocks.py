"""The partitioned release with block ensembles (issue 28 §3, spec §2.5b) on the flow's Dask
runner: only per-block sums reach the flow (no fold-model task runs, no model or row-level array
is returned), the release equals the in-memory block estimator on the same assignment, and
shuffling the rows of every file changes nothing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _flowtools import spy_on_block_sums

N, PARTS, K, KB = 4000, 4, 40, 5
ESTIMATOR = {"estimator": "aipw", "block_folds": KB, "outcome_bounds": [-1.0, 1.0], "zeta": 1.0,
             "propensity_clip": 0.1, "ci_share": 0.1, "noise_seed": 3}


class _Forbidden:
    """A full-ensemble task that must not run on the block path."""

    def submit(self, *args, **kwargs):
        raise AssertionError("a fold-model task ran on the block path")


def _release(source):
    from flows.partitioned_release import partitioned_release

    return partitioned_release(str(source), id_column="id", treatment="A", outcome="Y",
                               estimator=ESTIMATOR, n_folds=K, fold_key="curator",
                               evaluation=True)


def test_block_release_ships_only_sums_and_equals_in_memory(tmp_path, monkeypatch):
    import flows.partitioned_release as partitioned_flow
    from dpcausal import PrivateATE
    from dpcausal.ate.partitioned import BlockSums, assign_blocks, write_parquet_partitions
    from store import fold_key

    write_parquet_partitions(tmp_path / "a", n=N, d=2, n_partitions=PARTS, seed=5)
    frames = [pd.read_parquet(f) for f in sorted((tmp_path / "a").glob("*.parquet"))]
    (tmp_path / "b").mkdir()
    for p, f in enumerate(frames):     # the same rows, shuffled inside each file
        f.sample(frac=1.0, random_state=p).to_parquet(tmp_path / "b" / f"part-{p:05d}.parquet",
                                                       index=False)

    reached = spy_on_block_sums(monkeypatch)
    for name in ("fit_partition_folds", "all_fold_models", "partition_score_sums"):
        monkeypatch.setattr(partitioned_flow, name, _Forbidden())
    out = _release(tmp_path / "a")
    again = _release(tmp_path / "b")

    # what crossed the worker boundary: 4 partitions x 2 blocks, (block, n_b, sum, sum sq) each
    for per_partition in reached:
        assert len(per_partition) == PARTS
        flat = [b for part in per_partition for b in part]
        assert [b.block for b in flat] == list(range(8)) and sum(b.n for b in flat) == N
        assert all(type(b) is BlockSums and type(b.n) is int and type(b.s1) is float
                   and type(b.s2) is float for b in flat)
        assert [b.n for b in flat] == [500] * 8

    # the in-memory block estimator on the same assignment: 1000 rows per file, 2 blocks each
    fold_ids = np.concatenate([assign_blocks(f["id"].to_numpy(), fold_key(),
                                             range(2 * p, 2 * p + 2), KB)
                               for p, f in enumerate(frames)])
    whole = pd.concat(frames, ignore_index=True)
    ref = PrivateATE(**{**ESTIMATOR, "outcome_bounds": (-1.0, 1.0)}, n_folds=K,
                     folds=fold_ids).fit(whole[["x1", "x2"]].to_numpy(), whole["A"].to_numpy(),
                                         whole["Y"].to_numpy(), evaluation=True)
    assert out["nonprivate"]["ate"] == pytest.approx(ref.nonprivate["ate"], rel=1e-9)
    assert out["nonprivate"]["variance"] == pytest.approx(ref.nonprivate["variance"], rel=1e-9)
    assert out["ate"] == pytest.approx(ref.ate, rel=1e-9)
    assert out["ci"] == pytest.approx(list(ref.ci), rel=1e-9)
    params = out["params"]
    assert params["folds"] == "keyed_rank(id)" and params["partitions"] == PARTS
    assert (params["n_folds"], params["n_blocks"], params["block_folds"]) == (K, 8, KB)
    assert (params["rows_per_block"], params["rows_per_fold"]) == (500, 100)

    assert again["nonprivate"]["ate"] == pytest.approx(out["nonprivate"]["ate"], rel=1e-12)
    assert again["nonprivate"]["variance"] == pytest.approx(out["nonprivate"]["variance"],
                                                            rel=1e-9)
