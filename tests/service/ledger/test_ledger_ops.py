"""tasks/ledger_ops.py and the charged task (no Prefect needed), against a SQLite ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpcausal.accounting import PrivacyCharge
from dpcausal.ledger import Ledger
from tasks import ledger_ops


@pytest.fixture
def url(tmp_path: Path, monkeypatch) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("DPCAUSAL_LEDGER_URL", url)
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path / "data"))
    return url


class _Mechanism:
    """A stand-in mechanism for the charged task: records whether it drew."""

    unit = "row"

    def __init__(self) -> None:
        self.draws = 0

    def _private_release(self, prepared, *, evaluation=False):
        from dpcausal import Privacy, Release

        self.draws += 1
        return Release(ate=1.0, ci=None, se=None, level=0.95, n=10,
                       privacy=Privacy(epsilon=9.0, delta=0.0, unit="row", mechanism="gaussian"))


def _charged(dataset: str, charge: PrivacyCharge, mechanism: _Mechanism, cap: str = "--zeta Z"):
    from dpcausal import Prepared
    from tasks.preflight import Checked
    from tasks.release import charged_release

    checked = Checked(prepared=Prepared(public={}, data=None), fingerprint="fp-x",
                      source="src-x", schema=(), charge=charge)
    return charged_release.fn(mechanism, checked, dataset=dataset, release_id="r/1",
                              evaluation=False, detail={}, cap=cap)


def test_a_config_budget_never_creates_a_ledger_or_a_cap(url: str, tmp_path: Path) -> None:
    """Issue 18 item 5: `ledger.budget` in a config created the ledger and gave any new dataset
    id a fresh cap, so the same data under a new id started with a full budget."""
    charge = PrivacyCharge("gaussian", zeta=0.5)
    msg = r"dataset 'new-id' has no privacy budget.*`dpcausal ledger set-budget new-id --zeta 15"
    with pytest.raises(ledger_ops.NoCapError, match=msg):
        ledger_ops.check_budget("new-id", charge, cap="--zeta 15", unit="row")
    assert not (tmp_path / "ledger.db").exists()
    with Ledger(url, create=True) as led:
        led.set_budget("old-id", zeta=1.0)
    with pytest.raises(ValueError, match=msg):
        ledger_ops.check_budget("new-id", charge, cap="--zeta 15", unit="row")
    mechanism = _Mechanism()
    with pytest.raises(ValueError, match=r"has no privacy budget.*--epsilon 2 --delta 1e-06"):
        _charged("new-id", charge, mechanism, cap="--epsilon 2 --delta 1e-06")
    assert mechanism.draws == 0
    with Ledger(url) as led:
        assert not led.has_dataset("new-id") and led.history("old-id").empty


def test_the_demo_sets_its_own_cap_explicitly_once(url: str, tmp_path: Path) -> None:
    cap = ledger_ops.set_initial_budget("demo-a", zeta=15.0)
    assert cap.describe() == "zeta=15 (GDP)"
    mechanism = _Mechanism()
    out = _charged("demo-a", PrivacyCharge("gaussian", zeta=9.0), mechanism)
    assert out.release.ate == 1.0 and not out.reused and mechanism.draws == 1
    again = _charged("demo-a", PrivacyCharge("gaussian", zeta=9.0), mechanism)
    assert again.reused and again.release == out.release and mechanism.draws == 1  # no draw
    # calling it again (the next demo run) keeps the cap, its spend, and a curator's change
    with Ledger(url) as led:
        led.set_budget("demo-a", zeta=12.0)
    assert ledger_ops.set_initial_budget("demo-a", zeta=15.0).value == 12.0
    assert ledger_ops.spent("demo-a")["zeta"] == pytest.approx(9.0)
    ledger_ops.set_initial_budget("demo-labels", epsilon=4.0, delta=1e-6, unit="label",
                                  fingerprint="fp-demo")
    with Ledger(url) as led:
        assert led.unit("demo-labels") == "label"
        assert led.known(fingerprint="fp-demo") == "demo-labels"


def test_evaluation_check_knows_budgeted_ids_and_fingerprints(url: str, tmp_path: Path) -> None:
    """Issue 18 item 6: evaluation mode must be refused for data the ledger budgets or knows."""
    assert ledger_ops.budgeted_as("trial-A", fingerprint="fp-1") is None  # no ledger file yet
    assert not (tmp_path / "ledger.db").exists()  # and asking did not create one
    with Ledger(url, create=True) as led:
        led.set_budget("trial-A", zeta=1.0, fingerprint="fp-1")
    assert ledger_ops.budgeted_as("trial-A") == "trial-A"
    assert ledger_ops.budgeted_as("scratch", fingerprint="fp-1") == "trial-A"  # same data
    assert ledger_ops.budgeted_as(fingerprint="fp-1") == "trial-A"
    assert ledger_ops.budgeted_as("scratch", fingerprint="fp-2") is None
    with pytest.raises(ValueError, match="give a dataset id, a fingerprint or both"):
        ledger_ops.budgeted_as()


def test_a_bounds_check_charged_through_the_library_is_known_to_the_notice(url: str) -> None:
    """The private bounds check is a library fit charged like any other (reserve, draw once,
    commit); ``bounds_checked`` finds it by its bounds, so ``run`` stops its notice."""
    import numpy as np
    import pandas as pd

    from dpcausal.bounds_check import BoundsCheck

    with Ledger(url, create=True) as led:
        led.set_budget("scores", epsilon=1.0, delta=1e-5)
        assert not ledger_ops.bounds_checked("scores", (0.0, 50.0))
        with led.charging("scores"):
            out = BoundsCheck(outcome_bounds=(0, 50)).fit(
                pd.DataFrame({"y": np.linspace(0, 100, 3000)}), outcome="y")
        assert out.privacy.describe() == "(0.1, 0.0e+00)-DP per row (laplace)"
        assert led.history("scores")["status"].tolist() == ["committed"]
    assert ledger_ops.bounds_checked("scores", (0.0, 50.0))
    assert not ledger_ops.bounds_checked("scores", (0.0, 60.0))


def test_refusals_in_the_orchestration_name_the_cli_command(url: str) -> None:
    """The CLI's refusals name ``dpcausal ledger set-budget``, never the Python call
    ``Ledger.set_budget`` (issue 34 §6)."""
    from dpcausal.ledger import BudgetExceededError, IncompatibleChargeError

    with Ledger(url, create=True) as led:
        led.set_budget("cli-words", zeta=1.0)
    cases = [(PrivacyCharge("gaussian", zeta=2.0), BudgetExceededError,
              "`dpcausal ledger set-budget cli-words --zeta Z`"),
             (PrivacyCharge("laplace", epsilon=1.0), IncompatibleChargeError,
              "`dpcausal ledger set-budget cli-words --epsilon E --delta D`")]
    for charge, error, command in cases:
        with pytest.raises(error) as caught:
            ledger_ops.check_budget("cli-words", charge, unit="row", cap="--zeta 15")
        assert command in str(caught.value) and "Ledger.set_budget" not in str(caught.value)
