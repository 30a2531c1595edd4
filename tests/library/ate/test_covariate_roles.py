"""One meaning for the covariates of a DataFrame release (issue 34 §1): omitted, they are the
other columns whose type is numeric (or bool), never a text column; an empty list is no
covariates, refused alike by check_input and check_data; check_data names a covariate missing
in every row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpcausal import PrivateATE


@pytest.fixture
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    n = 600
    return pd.DataFrame({"x1": rng.normal(size=n), "flag": rng.integers(0, 2, n).astype(bool),
                         "address": [f"{i} Main St" for i in range(n)],
                         "a": rng.integers(0, 2, n), "y": rng.uniform(4.6, 7.8, n)})


def test_omitted_covariates_are_the_numeric_columns_never_text(frame) -> None:
    est = PrivateATE(outcome_bounds=(4, 8), n_folds=10)
    assert est.check_input(frame, treatment="a", outcome="y").public.d == 2  # x1, flag
    check = est.check_data(frame, treatment="a", outcome="y")
    assert list(check.table.loc[check.table.role == "covariate", "column"]) == ["x1", "flag"]
    assert "address" in str(check) and "not a number" in str(check)  # says what it left out


def test_an_empty_covariate_list_is_no_covariates_everywhere(frame) -> None:
    est = PrivateATE(outcome_bounds=(4, 8), n_folds=10)
    for call in (est.check_input, est.check_data):
        with pytest.raises(ValueError, match=r"no covariate columns: covariates=\[\] names none"):
            call(frame, treatment="a", outcome="y", covariates=[])


def test_check_data_flags_a_covariate_missing_in_every_row(frame) -> None:
    frame = frame.assign(village=np.nan)
    check = PrivateATE(outcome_bounds=(4, 8), n_folds=10).check_data(
        frame, treatment="a", outcome="y", covariates=["x1", "village"])
    assert "missing in every row: village" in str(check)
