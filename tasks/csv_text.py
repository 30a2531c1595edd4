"""The release's CSV reader and the declared types' rules on text columns, column-wise (issue
41 §2: the per-cell reader and rules took 6.1 s of a 10^6-row release on 2 loaded cores, against
0.4 s for ``pandas.read_csv``).

Both give exactly what the per-cell reader and rules give (:func:`tasks.data.read_csv_table`'s
rules, :func:`tasks.data.coerce`'s): where a file or a cell falls outside what the column-wise
path reproduces, that file or cell takes the per-cell path, so no value and no error changes.

* :func:`arrow_records`: ``pyarrow.csv`` reads every field as text (RFC 4180, quoted line
  breaks, a blank line a row of empty fields), or returns None, and the caller parses the file
  record by record, when pyarrow's reading could differ from Python's ``csv`` module's: bytes
  that are not UTF-8 (replaced there), a record that does not split into as many fields as the
  header (a row of missing values there), or a header that differs (a BOM is kept in the first
  name there, dropped by pyarrow).
* :func:`text_as_float`: a column whose cells are all numbers to pyarrow's cast (a plain
  decimal number, ``inf`` or ``nan`` in their spellings) or empty is cast whole (correctly
  rounded, as ``pandas.to_numeric``; an empty cell is missing); otherwise a cell written as a
  plain decimal number (ASCII digits, an optional sign, point and exponent) is cast, an empty
  cell is missing, and any other cell (text, whitespace around a number, ``NA``) takes the
  per-cell rule. ``pandas.to_numeric`` gives a column of whole
  numbers as integers, so ``-0`` is +0.0 in such a column and -0.0 in others: a column with a
  zero written with a minus sign takes the per-cell rule whole.
* :func:`text_as_bool_words`: the cells whose stripped, lower-cased text is ``true``/``false``,
  looked for by the per-cell rule only in cells that hold those letters in some case.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: A cell that pyarrow's cast to float64 reads exactly as ``pandas.to_numeric`` does (RE2: \d is
#: ASCII): an optional sign, digits with an optional point, or a point and digits, an exponent
_PLAIN_NUMBER = r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$"
_BOM = "\ufeff"


def csv_header(path: Path) -> list[str]:
    """The first record of the file by Python's ``csv`` module (the per-cell reader's rules:
    UTF-8, undecodable bytes replaced); a ValueError when it names no column."""
    limit = csv.field_size_limit(sys.maxsize)  # a long quoted field is a value, not an error
    try:
        with path.open(newline="", encoding="utf-8", errors="replace") as fh:
            header = next(csv.reader(fh, strict=False), [])
    finally:
        csv.field_size_limit(limit)
    if not any(header):
        raise ValueError(f"data file {str(path)!r} has no header line (the column names); a "
                         "CSV source starts with one")
    return header


def arrow_records(path: Path, header: list[str]) -> pd.DataFrame | None:
    """Every record after the header as text columns (pandas' pyarrow-backed ``str``), or None
    where pyarrow's reading could differ from the per-cell reader's (module docstring)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    if len(set(header)) != len(header):  # types are given by name: one name, one column
        return None
    broken: list[int] = []

    def odd_record(row: Any) -> str:
        broken.append(1)
        return "skip"

    try:
        table = pcsv.read_csv(
            path,
            parse_options=pcsv.ParseOptions(newlines_in_values=True, ignore_empty_lines=False,
                                            invalid_row_handler=odd_record),
            convert_options=pcsv.ConvertOptions(
                column_types={name.removeprefix(_BOM): pa.string() for name in header},
                strings_can_be_null=False, quoted_strings_can_be_null=False, check_utf8=True))
    except pa.ArrowInvalid:  # bytes that are not UTF-8, a quote left open at the end ...
        return None
    names = [header[0].removeprefix(_BOM), *header[1:]]
    if broken or table.column_names != names or any(
            not pa.types.is_string(t) for t in table.schema.types):
        return None
    frame = table.to_pandas()
    frame.columns = header  # the per-cell reader's names, the BOM kept
    return frame


def arrow_text(col: pd.Series) -> Any:
    """The column as a pyarrow string array when it is a pyarrow-backed text column (the CSV
    reader's, pandas' ``str``), else None."""
    import pyarrow as pa

    if not isinstance(col.dtype, pd.StringDtype) or col.dtype.storage != "pyarrow":
        return None
    return pa.array(col.array)


def text_as_float(text: Any, per_cell: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Float64 values of a pyarrow text column by the per-cell rule ``per_cell`` (an object
    array of cells to their floats), the numbers parsed column-wise (module docstring)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = _cast_numbers(text)
    if out is None:  # some cell is no number to pyarrow: the plain ones cast, the others by rule
        plain = pc.fill_null(pc.match_substring_regex(text, _PLAIN_NUMBER), False)
        out = np.full(len(text), np.nan)
        out[plain.to_numpy(zero_copy_only=False)] = pc.cast(
            pc.filter(text, plain), pa.float64()).to_numpy(zero_copy_only=False)
        other = pc.and_(pc.invert(plain), pc.fill_null(pc.not_equal(text, ""), False))
        odd = other.to_numpy(zero_copy_only=False)
        if odd.any():
            out[odd] = per_cell(pc.filter(text, other).to_numpy(zero_copy_only=False))
    zero = out == 0.0
    if zero.any():
        minus = pc.fill_null(pc.match_substring(text, "-"), False).to_numpy(zero_copy_only=False)
        if (zero & minus).any():  # the sign of this zero depends on the other cells
            return per_cell(text.to_numpy(zero_copy_only=False))
    return out


def _cast_numbers(text: Any) -> np.ndarray | None:
    """The column cast by pyarrow, an empty cell NaN, or None if a cell is no number to it.
    What it reads as a number is a plain number, or ``inf``/``infinity``/``nan`` in any case
    with a sign (``nan(...)`` too), each the same float as by ``pandas.to_numeric``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    blank = pc.fill_null(pc.equal(text, ""), True)
    try:
        values = pc.cast(pc.if_else(blank, pa.scalar(None, text.type), text), pa.float64())
    except pa.ArrowInvalid:
        return None
    return np.asarray(pc.fill_null(values, np.nan).to_numpy(zero_copy_only=False), dtype=float)


def text_as_bool_words(text: Any, per_cell: Callable[[np.ndarray], np.ndarray]
                       ) -> np.ndarray:
    """The stripped, lower-cased text of the cells of a pyarrow text column that may read as
    ``true``/``false`` (``per_cell`` of those: an object array of cells to their words), None
    elsewhere."""
    import pyarrow.compute as pc

    maybe = pc.fill_null(pc.match_substring_regex(text, "true|false", ignore_case=True), False)
    words = np.full(len(text), None, dtype=object)
    hit = maybe.to_numpy(zero_copy_only=False)
    if hit.any():
        words[hit] = per_cell(pc.filter(text, maybe).to_numpy(zero_copy_only=False))
    return words
