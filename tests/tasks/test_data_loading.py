"""load_data: CSV, Parquet and SQL sources; bad input named before anything is fitted."""

import sqlite3

import numpy as np
import pandas as pd
import pytest
from prefect.logging import disable_run_logger

from conf.models import ReleaseConfig
from tasks.data import load_data


@pytest.fixture(autouse=True)
def _data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path / "data"))


def _frame(n=400, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 2))
    a = (rng.random(n) < 0.5).astype(int)
    y = 0.2 * x[:, 0] + 0.1 * a + 0.1 * rng.standard_normal(n)
    return pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "treated": a, "y": y})


def _config(data, **columns):
    return ReleaseConfig.model_validate({
        "data": data, "columns": {"treatment": "treated", "outcome": "y", **columns},
        "estimator": {"n_folds": 4}, "ledger": {"dataset_id": "t"}})


def _load(cfg):
    with disable_run_logger():
        return load_data.fn(cfg)


def test_csv_parquet_and_sql_give_the_same_arrays_and_fingerprint(tmp_path):
    df = _frame()
    df.to_csv(tmp_path / "d.csv", index=False)
    df.to_parquet(tmp_path / "d.parquet")
    with sqlite3.connect(tmp_path / "d.db") as conn:
        df.to_sql("trial", conn, index=False)
    out = [_load(_config({"path": str(tmp_path / "d.csv")})),
           _load(_config({"path": str(tmp_path / "d.parquet")})),
           _load(_config({"sql": "SELECT * FROM trial", "url": f"sqlite:///{tmp_path / 'd.db'}"}))]
    for o in out:
        np.testing.assert_allclose(o.X, df[["x1", "x2"]].to_numpy(), rtol=1e-15)
        np.testing.assert_array_equal(o.A, df["treated"].to_numpy())
        assert o.covariates == ("x1", "x2") and (o.n, o.d) == (400, 2)
    assert out[1].fingerprint == out[2].fingerprint


def test_sql_url_expands_environment_variables(tmp_path, monkeypatch):
    with sqlite3.connect(tmp_path / "d.db") as conn:
        _frame().to_sql("trial", conn, index=False)
    monkeypatch.setenv("TRIAL_DB_DIR", str(tmp_path))
    cfg = _config({"sql": "SELECT * FROM trial", "url": "sqlite:///${TRIAL_DB_DIR}/d.db"})
    assert "${TRIAL_DB_DIR}" in cfg.data.url  # the stored (public) config keeps the variable
    assert _load(cfg).n == 400


def test_explicit_covariates_select_columns(tmp_path):
    _frame().to_csv(tmp_path / "d.csv", index=False)
    assert _load(_config({"path": str(tmp_path / "d.csv")}, covariates=["x2"])).d == 1


def test_fingerprint_changes_with_the_clipped_outcome(tmp_path):
    df = _frame()
    df.to_csv(tmp_path / "a.csv", index=False)
    df.assign(y=df["y"] + 1e-9).to_csv(tmp_path / "b.csv", index=False)
    a, b = (_load(_config({"path": str(tmp_path / f)})) for f in ("a.csv", "b.csv"))
    assert a.fingerprint != b.fingerprint


def test_repr_shows_no_data(tmp_path):
    _frame().to_csv(tmp_path / "d.csv", index=False)
    text = repr(_load(_config({"path": str(tmp_path / "d.csv")})))
    assert "array" not in text and "X=" not in text and "fingerprint=" in text


@pytest.mark.parametrize("mutate, columns, match", [
    (None, {"treatment": "arm"}, r"columns\.treatment names column 'arm', which is not in the "
                                 r"data; available columns: \['x1', 'x2', 'treated', 'y'\]"),
    (None, {"covariates": ["x1", "zz"]}, r"columns\.covariates names column 'zz'"),
    (lambda d: d.assign(treated=d["treated"] * 2), {}, r"treatment A must be coded 0/1"),
    (lambda d: d.assign(x1=d["x1"].astype(str) + "u"), {}, r"X has non-numeric columns \['x1'\]"),
    (lambda d: d.assign(treated=1), {}, r"control arm is empty"),
])
def test_bad_data_raise_value_errors(tmp_path, mutate, columns, match):
    df = _frame()
    (mutate(df) if mutate else df).to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(ValueError, match=match):
        _load(_config({"path": str(tmp_path / "d.csv")}, **columns))


def test_missing_file_and_bad_sql(tmp_path):
    with pytest.raises(ValueError, match=r"data file .*missing\.csv' does not exist"):
        _load(_config({"path": str(tmp_path / "missing.csv")}))
    with sqlite3.connect(tmp_path / "d.db") as conn:
        _frame().to_sql("trial", conn, index=False)
    with pytest.raises(ValueError, match=r"data\.sql failed against data\.url: "
                                         r"OperationalError: no such table"):
        _load(_config({"sql": "SELECT * FROM nope", "url": f"sqlite:///{tmp_path / 'd.db'}"}))
    with pytest.raises(ValueError, match=r"data\.url is not a usable SQLAlchemy URL"):
        _load(_config({"sql": "SELECT 1", "url": "nodialect://x"}))


def test_release_mode_hides_the_clipped_count_evaluation_mode_shows_it(tmp_path):
    df = _frame()
    df.loc[:4, "y"] = 5.0  # 5 rows beyond the default bounds (-1, 1)
    df.to_csv(tmp_path / "d.csv", index=False)
    cfg = _config({"path": str(tmp_path / "d.csv")})
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = _load(cfg)
    assert out.Y.max() == 1.0
    assert not [w for w in caught if "outcome_bounds" in str(w.message)]
    with pytest.warns(UserWarning, match=r"5 outcome values lay outside"):
        _load(cfg.model_copy(update={"mode": "evaluation"}))
