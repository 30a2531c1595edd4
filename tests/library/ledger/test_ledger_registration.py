"""Issue 32 §1: the curator registers a dataset once; the ledger keeps every registration."""

from __future__ import annotations

import pytest

from dpcausal.ledger import DatasetIdentityError, Ledger, Registration

_SOURCE = {"sql": "SELECT * FROM t", "url_block": "secret/db", "id_column": "id"}


def _register(led: Ledger, dataset: str = "trial-A", **kw) -> Registration:
    args = dict(source=_SOURCE, columns={"treatment": "A", "outcome": "Y", "covariates": None},
                n=1234, dtypes={"A": "int"}, missing={"missing": "impute", "missing_fill": 0.0},
                facts={"d": 3})
    return led.register(dataset, **{**args, **kw})


def test_a_registration_is_stored_shown_and_versioned(sqlite_url: str) -> None:
    with Ledger(sqlite_url, create=True) as led:
        assert led.registration("trial-A") is None
        first = _register(led)
        assert first.version == 1 and first.n == 1234 and not first.evaluation_allowed
        assert led.registration("trial-A") == first
        assert first.facts == {"unit": "row", "d": 3}
        assert "n=1234 records (public)" in first.describe()
        assert "evaluation mode refused" in first.describe()
        second = _register(led, n=1300, evaluation_allowed=True, origin="synthetic")
        assert led.registration("trial-A") == second and second.version == 2
        assert [r.n for r in led.registrations("trial-A")] == [1234, 1300]
        assert not led.has_dataset("trial-A")  # registering sets no cap without zeta


def test_register_with_zeta_sets_the_cap_in_the_registered_unit(sqlite_url: str) -> None:
    with Ledger(sqlite_url, create=True) as led:
        _register(led, zeta=2.5, facts={"unit": "user", "public": "occupancy"})
        assert led.cap("trial-A").value == 2.5
        assert led.relation("trial-A").describe() == "per user (n, occupancy public)"


@pytest.mark.parametrize("kw, match", [
    (dict(evaluation_allowed=True), "needs origin='synthetic' or 'public'"),
    (dict(origin="mine"), "origin must be one of synthetic, public"),
    (dict(n=-1), "n must be the number of records"),
    (dict(n=2.5), "n must be the number of records"),
    (dict(facts={"unit": "person"}), "unit"),
])
def test_a_bad_registration_is_refused_and_nothing_is_recorded(sqlite_url: str, kw: dict,
                                                               match: str) -> None:
    with Ledger(sqlite_url, create=True) as led:
        with pytest.raises(ValueError, match=match):
            _register(led, **kw)
        assert led.registrations("trial-A") == []


def test_the_same_data_cannot_be_registered_under_a_second_id(sqlite_url: str) -> None:
    with Ledger(sqlite_url, create=True) as led:
        _register(led, zeta=1.0, fingerprint="fp-of-the-table")
        with pytest.raises(DatasetIdentityError):
            _register(led, "copy-of-A", fingerprint="fp-of-the-table")
        assert led.registration("copy-of-A") is None


def test_registering_the_same_values_again_records_no_new_version(sqlite_url: str) -> None:
    with Ledger(sqlite_url, create=True) as led:
        first = _register(led)
        assert _register(led) == first
        assert len(led.registrations("trial-A")) == 1
