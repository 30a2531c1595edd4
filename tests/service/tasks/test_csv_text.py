"""The column-wise CSV reader and text rules (tasks.csv_text, issue 41 §2) against the per-cell
reader and rules they replace where they can: the same records, the same values bit for bit
(the sign of a zero included), the same missing cells, on nasty files and on random ones."""

import csv
import io

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conf.models import Schema
from tasks.csv_text import arrow_records, csv_header
from tasks.data import coerce, csv_records, read_csv_table

TYPES = ("float", "int", "bool", "str")

#: cells a user's file holds: missing markers, text in number columns, booleans in their
#: spellings, large integers, zeros with signs, whitespace (Unicode too), quoted fields
NASTY = [
    "", "NA", "N/A", "NULL", "null", "None", "nan", "NaN", "abc", "\"1,5\"", "0x10", "--1",
    "true", "false", "TRUE", " True ", "FALSE ", "yes", "no", "1", "0", "-1", "+1", "1.0",
    "0.0", "-0", "-0.0", "+0", "00", "-00", "0e5", "-0e-5", "1e400", "-1e400", "1e-400",
    "inf", "-Infinity", "12345678901234567890", "123456789012345678901234",
    "-9223372036854775809", "18446744073709551615", "9007199254740993", "0.1", "-.5", "5.",
    "1.5e3", "1E-3", " 2.5 ", "\t7\t", "\xa03\u2003", "0.30000000000000004",
    "2.2250738585072014e-308", "4.9e-324", "1.7976931348623157e308", "3 4", "1.2.3",
    "a\"b", "\"quoted\"", "\"with, comma\"", "\"two\r\nlines\"", "\"say \"\"hi\"\"\"",
    "\"1.5\"", "\" 2 \"", "\"\"", "é", "\u00e9t\u00e9",
]


def _write(tmp_path, text, name="t.csv", encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return path


def _per_cell(path):
    """The per-cell reader (Python's csv module, object columns of text)."""
    return csv_records(path, csv_header(path))


def _assert_same_values(got, want):
    """Equal frames, float columns bit for bit (so -0.0 is not 0.0) with NaN where NaN."""
    assert list(got.columns) == list(want.columns)
    assert len(got) == len(want)
    for i in range(got.shape[1]):
        a, b = got.iloc[:, i], want.iloc[:, i]
        assert a.dtype == b.dtype, (got.columns[i], a.dtype, b.dtype)
        if a.dtype == float:
            x, y = a.to_numpy(), b.to_numpy()
            np.testing.assert_array_equal(np.isnan(x), np.isnan(y))
            ok = ~np.isnan(x)
            np.testing.assert_array_equal(x[ok].view(np.int64), y[ok].view(np.int64),
                                          err_msg=str(got.columns[i]))
        else:
            assert a.isna().tolist() == b.isna().tolist()
            assert a[a.notna()].tolist() == b[b.notna()].tolist()


def _assert_reads_alike(path, schema):
    """The reader gives the per-cell reader's records, and every declared type the per-cell
    rules' values."""
    fast, slow = read_csv_table(path), _per_cell(path)
    pd.testing.assert_frame_equal(fast.astype(object), slow)
    _assert_same_values(coerce(fast, schema), coerce(slow, schema))


def _nasty_csv(newline):
    cells = [c.replace("\r\n", newline) for c in NASTY]
    rows = [",".join(f"{cells[(i + j) % len(cells)]}" for j in range(4))
            for i in range(3 * len(cells))]
    return newline.join(["\ufeffa,b,c,\"d\"", *rows, ""])


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_nasty_file_reads_column_wise_as_cell_by_cell(tmp_path, newline):
    """A BOM, CRLF, quoted fields (commas, doubled quotes, line breaks), missing markers, text
    in number columns, booleans, large integers, signed zeros, whitespace: every column under
    every declared type gives the per-cell reader's values, through the column-wise path."""
    path = _write(tmp_path, _nasty_csv(newline))
    header = csv_header(path)
    assert header[0] == "\ufeffa"  # the per-cell reader keeps the BOM in the first name
    assert arrow_records(path, header) is not None  # the column-wise path is the one tested
    for declared in TYPES:
        _assert_reads_alike(path, Schema({}, rest=declared))


@pytest.mark.parametrize("body", [
    "1,2\n3\n4,5\n",                     # a record short of a field
    "1,2,\n3,4\n",                       # one field too many
    "1,2\n\"3,4\n5,6\n",                 # a quote left open swallows the rest
    b"1,\xff2\n3,4\n",                   # bytes that are not UTF-8
])
def test_a_file_pyarrow_would_read_otherwise_reads_cell_by_cell(tmp_path, body):
    """Where pyarrow's reading could differ (a broken record, bytes that are not UTF-8), the
    reader parses the file record by record: the same rows of missing values, the same
    replaced bytes."""
    head = b"a,b\n" if isinstance(body, bytes) else "a,b\n"
    path = _write(tmp_path, head + body)
    assert arrow_records(path, csv_header(path)) is None
    for declared in TYPES:
        _assert_reads_alike(path, Schema({}, rest=declared))


def test_a_blank_line_and_a_file_of_a_header_only(tmp_path):
    """A blank line is a row of missing values, column-wise too; a header alone, no row; no
    header, the per-cell reader's error."""
    for text in ("a\n1\n\n2\n\n", "a,b\n1,2\n\n3,4\n", "a,b\n", "a,b"):
        path = _write(tmp_path, text)
        for declared in TYPES:
            _assert_reads_alike(path, Schema({}, rest=declared))
    with pytest.raises(ValueError, match="has no header line"):
        read_csv_table(_write(tmp_path, "\n1,2\n"))


@pytest.mark.parametrize("column", [["-0", "1"], ["-0", "1.5"], ["-0", ""], ["-0"],
                                    [" -0 ", "2"], [" -0 ", "0.5"], ["-0.0", "3"]])
def test_the_sign_of_a_zero_follows_its_column(tmp_path, column):
    """pandas.to_numeric reads a column of whole numbers as integers, where -0 is 0: a zero
    with a minus sign is +0.0 or -0.0 by the other cells of its column, column-wise too."""
    path = _write(tmp_path, "v\n" + "\n".join(column) + "\n")
    _assert_reads_alike(path, Schema({}, rest="float"))


TOKENS = st.sampled_from(NASTY) | st.text(
    alphabet=st.sampled_from(list("0123456789.-+eE ,\"\r\ntrufalsTRUEnai\xa0")), max_size=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(cells=st.lists(st.lists(TOKENS, min_size=2, max_size=2), min_size=1, max_size=12),
       newline=st.sampled_from(["\n", "\r\n", "\r"]), raw=st.booleans())
def test_random_files_read_alike(tmp_path, cells, newline, raw):
    """Random two-column files, their cells written raw (so that quotes and line breaks can
    break records) or quoted by Python's csv writer: the reader, column-wise or not, gives the
    per-cell reader's records and values."""
    if raw:
        text = newline.join(["x,y", *(",".join(row) for row in cells)])
    else:
        buf = io.StringIO()
        csv.writer(buf, lineterminator=newline).writerows([["x", "y"], *cells])
        text = buf.getvalue()
    path = _write(tmp_path, text)
    for declared in TYPES:
        _assert_reads_alike(path, Schema({}, rest=declared))


NUMBERS = ["1", "-2.5", "", "-0", "0", "+.5", "1e400", "-1E-400", "inf", "-Infinity", "INF",
           "+iNfInItY", "nan", "-NaN", "nan(1)", "12345678901234567890", "9007199254740993",
           "0.1", "5.", "4.9e-324"]


@pytest.mark.parametrize("drop", [None, "-0", "12345678901234567890"])
def test_a_column_of_numbers_is_cast_whole(tmp_path, drop):
    """A column whose every cell is a number to pyarrow (infinities and NaNs in their
    spellings) or empty is cast whole: the per-cell rule's values, a minus zero's sign
    included (without "-0" the column is cast whole; the integers make it pandas' integer
    column when only they remain)."""
    column = [c for c in NUMBERS if c != drop]
    path = _write(tmp_path, "v,w\n" + "\n".join(f"{c},{c}" for c in column) + "\n")
    _assert_reads_alike(path, Schema({"v": "float", "w": "int"}))
    ints = ["-0", "1", "12345678901234567890", "", "7"]
    path = _write(tmp_path, "v\n" + "\n".join(ints) + "\n")
    _assert_reads_alike(path, Schema({}, rest="float"))
