"""Fixtures of the CLI tests."""

from __future__ import annotations

from pathlib import Path

import pytest

TRIAL = "conf/release/trial_dim.yaml"


@pytest.fixture
def trial(tmp_path, monkeypatch, curator_registers):
    """The shipped trial config's 2,000-row CSV, a ledger of the test's own, and
    ``register(**kw)``: the curator's registration of it (``planning=`` facts declared public)."""
    from demo.trial import write_trial_csv

    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path / "data"))
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("DPCAUSAL_LEDGER_URL", url)
    data = write_trial_csv(tmp_path / "trial.csv")
    config = tmp_path / "trial.yaml"      # the curator's own config: the shipped one, here
    config.write_text(Path(TRIAL).read_text().replace("../../data/demo/trial.csv", str(data)))

    def register(**kw):
        reg = curator_registers(TRIAL, [f"data.path={data}"], **kw)
        assert reg is not None and reg.n == 2000
        return reg

    return {"args": ["--set", f"data.path={data}"], "register": register, "ledger": url,
            "config": str(config)}
