"""The library binds data to a dataset id as the CLI does (issue 32 item 7, Why 5):
``Ledger.fit`` and ``Ledger.charging`` compute the keyed, order-invariant identities of the data
themselves (:mod:`dpcausal.fingerprints`), so a copy spent under another id is refused, whether
shuffled, a row short, or with a constant column added; unrelated data are not."""

from __future__ import annotations

import os
import stat
import warnings

import numpy as np
import pandas as pd
import pytest

import dpcausal
from dpcausal import Ledger, PrivateATE
from dpcausal.datasets import make_experiment_a
from dpcausal.fingerprints import NEAR_COPY, SKETCH_MIN, near_copy, row_sketch
from dpcausal.ledger import DatasetIdentityError


def _table(seed: int, n: int = 2000) -> pd.DataFrame:
    X, A, Y, _ = make_experiment_a(n=n, random_state=seed)
    return pd.DataFrame({"x": X[:, 0], "a": A, "y": Y})


def _fit(led, dataset, df):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return led.fit(dataset, PrivateATE(outcome_bounds=(-1, 1), n_folds=10), df,
                       treatment="a", outcome="y")


@pytest.fixture
def spent(tmp_path):
    """A ledger where the table of seed 1 is spent under close-college; cc-copy has a cap."""
    led = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}", create=True)
    for name in ("close-college", "cc-copy"):
        led.set_budget(name, zeta=10.0)
    df = _table(1)
    _fit(led, "close-college", df)
    return led, df


COPIES = {
    "shuffled": lambda df: df.sample(frac=1.0, random_state=3).reset_index(drop=True),
    "less one row": lambda df: df.iloc[1:],
    "a few rows changed": lambda df: df.assign(y=np.where(np.arange(len(df)) < 20, 0.0, df.y)),
    "a constant column added": lambda df: df.assign(site=7),
    "columns renamed and reordered": lambda df: df.rename(columns={"x": "age"})[["y", "a", "age"]],
}


@pytest.mark.parametrize("copy", list(COPIES))
def test_a_copy_under_another_id_is_refused(spent, copy):
    """The issue's probe: ``ledger.fit("cc-copy", est, df_shuffled)`` charged a table already
    spent under close-college to a fresh cap; so did a copy less one row."""
    led, df = spent
    with pytest.raises(DatasetIdentityError, match="close-college"):
        _fit(led, "cc-copy", COPIES[copy](df))
    assert led.history("cc-copy").empty


def test_charging_binds_as_fit_does(spent):
    led, df = spent
    est = PrivateATE(outcome_bounds=(-1, 1), n_folds=10)
    with pytest.raises(DatasetIdentityError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with led.charging("cc-copy"):
            est.fit(df.iloc[::-1], treatment="a", outcome="y")
    X, A, Y = df[["x"]].to_numpy(), df["a"].to_numpy(), df["y"].to_numpy()
    with pytest.raises(DatasetIdentityError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with led.charging("cc-copy"):
            est.fit(X, A, Y)                  # the same data as arrays
    assert led.history("cc-copy").empty


def test_unrelated_data_and_the_same_id_are_admitted(spent):
    led, df = spent
    assert _fit(led, "cc-copy", _table(2)).n == 2000
    assert _fit(led, "close-college", df.sample(frac=1.0, random_state=4)).n == 2000
    assert len(led.history("close-college")) == 2


def test_the_fingerprint_is_public_keyed_and_order_invariant(tmp_path):
    df = _table(5, n=300)
    with Ledger(f"sqlite:///{tmp_path / 'ledger.db'}", create=True) as led:
        fp = dpcausal.fingerprint(df, ledger=led)
        assert fp == dpcausal.fingerprint(df.sample(frac=1.0, random_state=0)[["y", "x", "a"]],
                                          ledger=led)
        assert fp == dpcausal.fingerprint(df.astype({"a": "int64"}), ledger=led)
        assert fp != dpcausal.fingerprint(df.assign(y=df.y.where(df.index != 7, 0.5)),
                                          ledger=led)
    key = tmp_path / "private" / "fingerprint.key"     # beside the ledger, the curator's only
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    assert fp != dpcausal.fingerprint(df, key=os.urandom(32))     # another key, another id


def test_the_sketch_rule_by_hand():
    """near_copy: at least SKETCH_MIN entries each and NEAR_COPY of the smaller shared."""
    assert near_copy(256, 256, 128) and not near_copy(256, 256, 127)
    assert near_copy(256, 40, 20) and not near_copy(256, 40, 19)
    assert not near_copy(SKETCH_MIN - 1, 256, SKETCH_MIN - 1)     # too few distinct rows
    assert NEAR_COPY == 0.5
    key = b"k" * 32
    binary = pd.DataFrame({"a": np.arange(400) % 2, "y": np.arange(400) % 3})
    # 6 distinct rows, 5 distinct cell multisets ((0, 1) and (1, 0) alike): identifies nothing
    assert len(row_sketch(binary, key=key)) == 5 < SKETCH_MIN
    assert row_sketch(binary.assign(c=1.0), key=key) == row_sketch(binary, key=key)
    assert row_sketch(pd.DataFrame({"c": [1.0] * 5}), key=key) == ()
