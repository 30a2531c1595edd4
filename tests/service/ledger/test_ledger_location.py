"""One ledger, visibly (issue 25 §4): the library's ``Ledger()`` and the CLI default to the same
place by one rule (``DPCAUSAL_DATA``), whatever the working directory; ``DPCAUSAL_DATA`` moves
everything the project writes, Prefect's home included; every refusal names the ledger."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conf import settings
from dpcausal import location
from dpcausal.accounting import PrivacyCharge
from dpcausal.ledger import (
    BudgetExceededError,
    DatasetIdentityError,
    IncompatibleChargeError,
    Ledger,
    LedgerError,
    schema,
)

ROOT = Path(__file__).resolve().parents[3]
STORES = ("PREFECT_HOME", "PREFECT_RESULTS_LOCAL_STORAGE_PATH", "MLFLOW_TRACKING_URI",
          "DPCAUSAL_LEDGER_URL")


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A copy of the environment without any store setting (apply_defaults writes into it)."""
    monkeypatch.setattr(os, "environ", dict(os.environ))
    for key in (*STORES, "DPCAUSAL_DATA"):
        monkeypatch.delenv(key, raising=False)
    return os.environ  # type: ignore[return-value]


def test_library_and_cli_default_to_one_ledger_from_any_directory(
        env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the library defaulted to ~/.dpcausal/ledger.db, the CLI to <checkout>/data."""
    library = schema.default_url()
    monkeypatch.chdir(tmp_path)
    assert schema.default_url() == library  # not the working directory
    settings.apply_defaults()  # what `dpcausal` sets before any command
    assert env["DPCAUSAL_LEDGER_URL"] == library == f"sqlite:///{ROOT / 'data' / 'ledger.db'}"


def test_dpcausal_data_moves_every_store(env: dict[str, str], tmp_path: Path) -> None:
    env["DPCAUSAL_DATA"] = str(tmp_path / "elsewhere")
    assert schema.default_url() == f"sqlite:///{tmp_path / 'elsewhere' / 'ledger.db'}"
    settings.apply_defaults()
    for key in STORES:
        assert str(tmp_path / "elsewhere") in env[key], key


def test_dev_environment_moves_prefect_with_dpcausal_data(tmp_path: Path) -> None:
    """scripts/env.sh pinned PREFECT_HOME to the checkout's data folder first."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    shown = subprocess.run(
        ["bash", "-c", f'source "{ROOT}/scripts/env.sh"; echo "$PREFECT_HOME";'
                       ' echo "$PREFECT_RESULTS_LOCAL_STORAGE_PATH"'],
        env={**clean, "DPCAUSAL_DATA": str(tmp_path / "d")}, capture_output=True, text=True,
        check=True).stdout.split()
    assert shown == [str(tmp_path / "d" / "prefect"), str(tmp_path / "d" / "prefect" / "results")]


def test_an_installed_library_defaults_to_the_home_folder(
        env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(location, "CHECKOUT", tmp_path / "site-packages")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert location.data_dir() == tmp_path / "home" / ".dpcausal"


def test_the_old_library_default_is_never_silently_replaced(
        env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ledger at ~/.dpcausal (the library's default before) while the new default has none:
    opening or creating the default would give the same data a fresh budget."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text('[project]\nname = "dpcausal"\n')
    monkeypatch.setattr(location, "CHECKOUT", checkout)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    old = tmp_path / "home" / ".dpcausal" / "ledger.db"
    Ledger(f"sqlite:///{old}", create=True).close()
    for create in (False, True):
        with pytest.raises(LedgerError, match=f"a ledger is at {old} .*move that file to "
                                              f"{checkout / 'data' / 'ledger.db'}"):
            Ledger(create=create)
    assert not (checkout / "data").exists()
    env["DPCAUSAL_DATA"] = str(old.parent)  # the way to keep using it
    with Ledger() as led:
        assert led.where == str(old)


def test_every_refusal_names_the_ledger(sqlite_url: str, tmp_path: Path) -> None:
    with Ledger(sqlite_url, create=True) as led:
        at = f"Ledger: {tmp_path / 'ledger.db'}."
        led.set_budget("ds", zeta=1.0, fingerprint="fp")
        led.set_budget("other", zeta=1.0)
        refusals = [
            (BudgetExceededError, lambda: led.check("ds", PrivacyCharge("gaussian", zeta=2.0),
                                                     unit="row")),
            (IncompatibleChargeError, lambda: led.check("ds", PrivacyCharge("gaussian", zeta=0.1),
                                                         unit="user")),
            (DatasetIdentityError, lambda: led.check("other", PrivacyCharge("gaussian", zeta=0.1),
                                                      unit="row", fingerprint="fp")),
            (BudgetExceededError, lambda: led.release(
                "ds", "r/1", PrivacyCharge("gaussian", zeta=2.0), unit="row").__enter__()),
        ]
        for kind, call in refusals:
            with pytest.raises(kind) as info:
                call()
            assert str(info.value).endswith(at) and info.value.ledger == str(tmp_path / "ledger.db")
        with pytest.raises(ValueError, match=r"unknown dataset 'nope' .*\(ledger: .*ledger\.db\)"):
            led.cap("nope")
