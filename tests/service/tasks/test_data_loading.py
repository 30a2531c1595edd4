"""check_release: CSV, Parquet and SQL sources; public checks (schema, parameters, budget)
before anything is charged; data-value checks are left to the charged release."""

import sqlite3

import numpy as np
import pandas as pd
import pytest

from conf.kinds import KINDS
from conf.models import ReleaseConfig
from dpcausal.ate.estimator import ATEFacts
from tasks.ledger_ops import set_initial_budget
from tasks.preflight import check_release


@pytest.fixture(autouse=True)
def _data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("DPCAUSAL_LEDGER_URL", f"sqlite:///{tmp_path / 'ledger.db'}")


def _frame(n=400, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 2))
    a = (rng.random(n) < 0.5).astype(int)
    y = 0.2 * x[:, 0] + 0.1 * a + 0.1 * rng.standard_normal(n)
    return pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "treated": a, "y": y})


def _config(data, mode="evaluation", **columns):
    """A core config on ``data`` (a data source dict, ``dtypes`` included if given)."""
    return ReleaseConfig.model_validate({
        "data": data, "columns": {"treatment": "treated", "outcome": "y", **columns},
        "estimator": {"n_folds": 4, "outcome_bounds": [-1, 1]}, "ledger": {"dataset_id": "t"},
        "mode": mode})


def _check(cfg):
    """The curator registers ``cfg``'s data (evaluation allowed for an evaluation config: the
    test data are synthetic), then a run's checks."""
    from tasks.registration import register

    kind = KINDS[cfg.kind]
    register(cfg, origin="synthetic" if cfg.evaluation else None)
    return check_release(cfg.data, kind.schema(cfg), kind.build(cfg), kind.roles(cfg),
                         dataset=cfg.ledger.dataset_id, evaluation=cfg.evaluation,
                         cap=kind.cap(cfg))


def test_csv_parquet_and_sql_give_the_same_input_and_fingerprint(tmp_path):
    df = _frame()
    df.to_csv(tmp_path / "d.csv", index=False)
    df.to_parquet(tmp_path / "d.parquet")
    with sqlite3.connect(tmp_path / "d.db") as conn:
        df.to_sql("trial", conn, index=False)
    out = [_check(_config({"path": str(tmp_path / "d.csv")})),
           _check(_config({"path": str(tmp_path / "d.parquet")})),
           _check(_config({"sql": "SELECT * FROM trial", "url": f"sqlite:///{tmp_path / 'd.db'}"}))]
    for o in out:
        X, A, _ = o.prepared.data
        np.testing.assert_allclose(X, df[["x1", "x2"]].to_numpy(), rtol=1e-15)
        np.testing.assert_array_equal(A, df["treated"].to_numpy())
        assert o.prepared.public == {"n": 400, "d": 2}
        assert list(o.schema) == ["x1", "x2", "treated", "y"]
        assert o.charge.zeta == pytest.approx(1.5)
    assert out[0].fingerprint == out[1].fingerprint == out[2].fingerprint


def test_sql_url_expands_environment_variables(tmp_path, monkeypatch):
    with sqlite3.connect(tmp_path / "d.db") as conn:
        _frame().to_sql("trial", conn, index=False)
    monkeypatch.setenv("TRIAL_DB_DIR", str(tmp_path))
    cfg = _config({"sql": "SELECT * FROM trial", "url": "sqlite:///${TRIAL_DB_DIR}/d.db"})
    assert "${TRIAL_DB_DIR}" in cfg.data.url  # the stored (public) config keeps the variable
    assert _check(cfg).prepared.public["n"] == 400


def test_source_description_hides_the_password():
    from conf.models import DataSource
    from tasks.data import source_description

    src = DataSource(sql="SELECT * FROM t", url="postgresql+psycopg://u:s3cret@db/trial")
    text = source_description(src)
    assert "s3cret" not in text and "u:***@db/trial" in text and "SELECT * FROM t" in text


def test_explicit_covariates_select_columns(tmp_path):
    _frame().to_csv(tmp_path / "d.csv", index=False)
    checked = _check(_config({"path": str(tmp_path / "d.csv")}, covariates=["x2"]))
    assert checked.prepared.public["d"] == 1 and list(checked.schema) == ["treated", "y", "x2"]


def test_fingerprint_changes_with_any_value(tmp_path):
    df = _frame()
    df.to_csv(tmp_path / "a.csv", index=False)
    df.assign(y=df["y"] + 1e-9).to_csv(tmp_path / "b.csv", index=False)
    a, b = (_check(_config({"path": str(tmp_path / f)})) for f in ("a.csv", "b.csv"))
    assert a.fingerprint != b.fingerprint


def test_repr_shows_no_data(tmp_path):
    _frame().to_csv(tmp_path / "d.csv", index=False)
    text = repr(_check(_config({"path": str(tmp_path / "d.csv")})))
    assert "array" not in text and "x1=" not in text and "fingerprint=" in text


@pytest.mark.parametrize("mutate, columns, match", [
    (None, {"treatment": "arm"}, r"treatment='arm' is not a column of the data"),
    (None, {"covariates": ["x1", "zz"]}, r"column 'zz' named in the config's columns"),
])
def test_bad_schema_is_refused_before_the_charge(tmp_path, mutate, columns, match):
    df = _frame()
    (mutate(df) if mutate else df).to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises((ValueError, TypeError), match=match):
        _check(_config({"path": str(tmp_path / "d.csv")}, **columns))


@pytest.mark.parametrize("mutate", [lambda d: d.assign(treated=d["treated"] * 2),
                                    lambda d: d.assign(treated=1)])
def test_value_checks_are_left_to_the_charged_release(tmp_path, mutate):
    """A 0/2 treatment or an empty arm is a fact about data values: refusing it here, before
    the charge, would answer a question about the data for free (issue 18 item 3)."""
    mutate(_frame()).to_csv(tmp_path / "d.csv", index=False)
    set_initial_budget("t", zeta=10.0)
    assert _check(_config({"path": str(tmp_path / "d.csv")}, mode="release")).charge.zeta > 0


def test_release_mode_needs_an_explicit_cap(tmp_path):
    from tasks.ledger_ops import NoCapError

    _frame().to_csv(tmp_path / "d.csv", index=False)
    cfg = _config({"path": str(tmp_path / "d.csv")}, mode="release")
    with pytest.raises(NoCapError, match=r"set-budget t --zeta Z"):
        _check(cfg)
    set_initial_budget("t", zeta=10.0)
    assert _check(cfg).charge.zeta == pytest.approx(1.5)


def test_missing_file_and_bad_sql(tmp_path):
    with pytest.raises(ValueError, match=r"data file .*missing\.csv' does not exist"):
        _check(_config({"path": str(tmp_path / "missing.csv")}))
    with sqlite3.connect(tmp_path / "d.db") as conn:
        _frame().to_sql("trial", conn, index=False)
    with pytest.raises(ValueError, match=r"data\.sql failed against data\.url: "
                                         r"OperationalError: no such table"):
        _check(_config({"sql": "SELECT * FROM nope", "url": f"sqlite:///{tmp_path / 'd.db'}"}))
    with pytest.raises(ValueError, match=r"data\.url is not a usable SQLAlchemy URL"):
        _check(_config({"sql": "SELECT 1", "url": "nodialect://x"}))


def test_a_data_error_of_the_query_does_not_quote_the_value(tmp_path):
    """SQLite's "integer overflow" (and PostgreSQL's data errors, which quote the value) comes
    from a row's value: its message is withheld; an error about the query names its cause."""
    with sqlite3.connect(tmp_path / "d.db") as conn:
        _frame().assign(big=-9223372036854775808).to_sql("trial", conn, index=False)
    url = f"sqlite:///{tmp_path / 'd.db'}"
    with pytest.raises(ValueError, match="OperationalError; the database's message is withheld"
                       ) as refused:
        _check(_config({"sql": "SELECT x1, x2, treated, y + abs(big) AS y FROM trial",
                        "url": url}))
    assert "overflow" not in str(refused.value)
    with pytest.raises(ValueError, match=r"OperationalError: no such column: z"):
        _check(_config({"sql": "SELECT z FROM trial", "url": url}))


# ------------------------------------------------------------------ declared schema (issue 26 §1)
def _cells(tmp_path, text: str) -> str:
    path = tmp_path / "d.csv"
    path.write_text(text)
    return str(path)


def _csv_lines(df: pd.DataFrame) -> list[str]:
    return df.to_csv(index=False).splitlines()


@pytest.mark.parametrize("column", ["x1", "y", "treated"])
def test_an_unparseable_cell_is_missing_not_a_refusal(tmp_path, column):
    """`abc` in one cell made a numeric column text, refused before the charge ("Y must be
    numeric", "non-numeric columns"): a free bit about one record. The declared type reads it
    as missing (NaN), left to the charged release's missing-value policy."""
    df = _frame()
    bad = df.astype({column: object})
    bad.loc[7, column] = "abc"
    set_initial_budget("t", zeta=10.0)
    out = _check(_config({"path": _cells(tmp_path, bad.to_csv(index=False))}, mode="release"))
    assert out.prepared.data is None  # release mode: nothing read before the reservation
    assert out.prepared.public == ATEFacts(400, 2)
    assert out.schema == ("x1", "x2", "treated", "y")   # names only: no dtype from the values
    X, A, Y = out.load().data  # what the charged release reads after its reservation
    got = {"x1": X[:, 0], "treated": A, "y": Y}[column]
    assert np.isnan(got[7]) and np.isfinite(np.delete(got, 7)).all()


def test_a_malformed_row_is_a_row_of_missing_values(tmp_path):
    """A row with an extra field gave pandas' "Expected 4 fields in line 9, saw 5" before the
    charge; the reader's rule makes it a row of missing values, n unchanged."""
    lines = _csv_lines(_frame())
    lines[8] += ",1.0"
    lines[20] = lines[20].rsplit(",", 1)[0]  # one field short
    out = _check(_config({"path": _cells(tmp_path, "\n".join(lines) + "\n")}))
    X, A, Y = out.prepared.data
    assert out.prepared.public["n"] == 400
    for row in (7, 19):
        assert np.isnan(X[row]).all() and np.isnan(A[row]) and np.isnan(Y[row])
    assert np.isfinite(np.delete(Y, [7, 19])).all()


def test_a_record_with_a_line_break_is_one_row(tmp_path):
    """Issue 32 §6: a quoted line break in a text column made two rows of one record (that
    person got 2-row protection); the reader now parses records (RFC 4180): n = 400, and the
    record keeps its values."""
    from tasks.data import source_shape

    df = _frame().assign(note="plain")
    df.loc[3, "note"] = "two\nlines"
    cfg = _config({"path": _cells(tmp_path, df.to_csv(index=False))},
                  covariates=["x1", "x2"])
    assert source_shape(cfg.data, cfg.columns) == (400, 2)
    out = _check(cfg)
    assert out.prepared.public == {"n": 400, "d": 2}
    X, A, Y = out.prepared.data
    np.testing.assert_allclose(Y, df["y"].to_numpy(), rtol=1e-15)


@pytest.mark.parametrize("line", ["0.1,0.2", ""])
def test_a_broken_or_blank_line_is_one_row_of_missing_values(tmp_path, line):
    """A blank line, or a line without the header's number of fields, is one row of missing
    values (n unchanged). A quote left open swallows the later records, as RFC 4180 reads it:
    n is then not the registered n, and the release fails after its charge
    (tests/service/flows/test_registration.py)."""
    from tasks.data import source_shape

    lines = _csv_lines(_frame())
    lines[12] = line
    cfg = _config({"path": _cells(tmp_path, "\n".join(lines) + "\n")})
    assert source_shape(cfg.data, cfg.columns) == (400, 2)
    out = _check(cfg)
    assert out.prepared.public["n"] == 400
    X, A, Y = out.prepared.data
    assert np.isnan(Y[11]) and np.isfinite(np.delete(Y, 11)).all()


def test_declared_types(tmp_path):
    """data.dtypes overrides a role's default; a declared str covariate is a schema fact (the
    plain linear models refuse it, before the charge, whatever the values); a declared column
    the release does not read is a typo."""
    df = _frame().assign(treated=lambda d: d["treated"].map({0: "false", 1: "TRUE"}))
    path = _cells(tmp_path, df.to_csv(index=False))
    out = _check(_config({"path": path, "dtypes": {"treated": "bool"}}, covariates=["x1"]))
    np.testing.assert_array_equal(out.prepared.data[1], _frame()["treated"])
    # (the text treatment stays declared: read as a float it is 0/1 in no row, which the
    # registration refuses first: test_registration_refuses_a_role_no_row_can_fill)
    with pytest.raises(ValueError, match="non-numeric columns"):
        _check(_config({"path": path, "dtypes": {"x1": "str", "treated": "bool"}},
                       covariates=["x1"]))
    with pytest.raises(ValueError, match="data.dtypes names 'x9', which is not a column"):
        _check(_config({"path": path, "dtypes": {"x9": "int", "treated": "bool"}},
                       covariates=["x1"]))


def test_text_cells_read_as_numbers_by_fixed_rules():
    """The float rule on text cells, token by token (issue 26 §1), pinned by hand: whitespace
    around a number, Unicode spaces included, is dropped; anything else that is no number, an
    empty cell among them, is missing. (Kept exact when the reader was vectorised: issue 41 §2.)"""
    from conf.models import Schema
    from tasks.data import coerce

    tokens = {" 1.5 ": 1.5, "\t-2e3\n": -2000.0, "\xa07\u2003": 7.0, "inf": np.inf,
              "-Infinity": -np.inf, "1e400": np.inf, "abc": np.nan, "": np.nan, "1,5": np.nan,
              "0x10": np.nan, "--1": np.nan, "1.5.2": np.nan, None: np.nan}
    frame = pd.DataFrame({"v": list(tokens)}, dtype=object)
    got = coerce(frame, Schema({}, rest="float"))["v"].to_numpy()
    np.testing.assert_array_equal(got, np.array(list(tokens.values()), dtype=float))
    assert coerce(frame, Schema({"v": "int"}))["v"].iloc[[0, 2]].isna().tolist() == [True, False]


def test_a_value_that_is_neither_number_nor_text_is_missing_as_a_number():
    """Issue 41 §1: a database's timestamp, date or bytes declared ``float`` is missing, as text
    that is no number is; a NULL timestamp was -9.2e18 (NaT's integer) and a timestamp its
    nanoseconds, whether the column came as objects or as datetime64."""
    import datetime as dt
    import decimal

    from conf.models import Schema
    from tasks.data import coerce

    values = [dt.datetime(2020, 1, 2, 3, 4, 5), None, dt.date(2020, 1, 2), b"1",
              dt.timedelta(days=1), decimal.Decimal("1.5"), True, 3, " 2.5 "]
    frame = pd.DataFrame({"x": pd.Series(values, dtype=object),
                          "t": pd.Series(pd.to_datetime(["2020-01-02", None] * 4 + [None])),
                          "b": pd.Series(values, dtype=object)})
    out = coerce(frame, Schema({"x": "float", "t": "float", "b": "bool"}))
    expected = [np.nan] * 5 + [1.5, 1.0, 3.0, 2.5]
    np.testing.assert_array_equal(out["x"].to_numpy(), expected)
    assert out["t"].isna().all()
    np.testing.assert_array_equal(out["b"].to_numpy(), [np.nan] * 6 + [1.0, np.nan, np.nan])


@pytest.mark.parametrize("column, cells, match", [
    ("treated", ["yes", "no"], r"the treatment 'treated' reads as 0 or 1 in no row"),
    ("treated", ["treated", "control"], r"reads as 0 or 1 in no row"),
    ("y", ["high", "low"], r"the outcome 'y' holds no number in any row"),
])
def test_registration_refuses_a_role_no_row_can_fill(tmp_path, column, cells, match):
    """The curator's check (like an unread covariate's, issue 34 §1): a treatment coded as text
    the reader does not take for 0/1 (yes/no, treated/control), or an outcome of words, would
    leave every row without a usable treatment or outcome; the release would be charged and say
    nothing. Registration refuses, naming the fix. A coding that some rows fill (0/2, all 1) is
    the missing-value policy's, after the charge (test above)."""
    df = _frame()
    df[column] = np.where(np.arange(len(df)) % 2 == 0, cells[0], cells[1])
    df.to_csv(tmp_path / "d.csv", index=False)
    from tasks.registration import register

    with pytest.raises(ValueError, match=match):
        register(_config({"path": str(tmp_path / "d.csv")}, mode="release"))
