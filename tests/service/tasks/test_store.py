"""The curator's private store: keyed fingerprints, chunk keys, permissions (0700/0600), refusal
of pickles others could have written, the private error log."""

import os
import stat

import numpy as np
import pytest

import store as ms


@pytest.fixture(autouse=True)
def _data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path / "data"))


def test_fingerprint_is_keyed_by_a_private_secret(tmp_path, monkeypatch):
    x = np.arange(10.0)
    fp1 = ms.fingerprint(x)
    key = ms.private_dir() / "fingerprint.key"
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600 and len(key.read_bytes()) == 32
    assert ms.fingerprint(x) == fp1  # stable while the secret stays
    # without the secret the fingerprint cannot be recomputed: a new secret gives a new value
    monkeypatch.setenv("DPCAUSAL_DATA", str(tmp_path / "other"))
    assert ms.fingerprint(x) != fp1


def test_fingerprint_sees_values_shape_and_dtype_not_memory_layout():
    x = np.arange(12.0).reshape(3, 4)
    assert ms.fingerprint(x) == ms.fingerprint(np.asfortranarray(x))
    assert ms.fingerprint(x[:, ::2]) == ms.fingerprint(np.ascontiguousarray(x[:, ::2]))
    assert ms.fingerprint(x) != ms.fingerprint(x.reshape(4, 3))
    assert ms.fingerprint(x) != ms.fingerprint(x.astype(np.float32))
    y = x.copy()
    y[2, 3] += 1e-12
    assert ms.fingerprint(x) != ms.fingerprint(y)


def test_frame_fingerprint_sees_names_and_values():
    import pandas as pd

    df = pd.DataFrame({"a": [1.0, 2.0], "b": [3, 4]})
    assert ms.frame_identities(df)[0] == ms.frame_identities(df.copy())[0]
    assert ms.frame_identities(df)[0] != ms.frame_identities(df.rename(columns={"b": "c"}))[0]
    assert ms.frame_identities(df)[0] != ms.frame_identities(df.assign(a=[1.0, 2.5]))[0]


def test_the_cli_and_the_library_bind_the_same_identities(tmp_path, monkeypatch):
    """Issue 32 item 7: the CLI's key file (<data>/private/fingerprint.key) is the one the
    library finds beside the default ledger, so a CLI run and a library fit bind alike."""
    import pandas as pd

    from dpcausal.fingerprints import identities
    from dpcausal.ledger import Ledger

    monkeypatch.delenv("DPCAUSAL_LEDGER_URL", raising=False)
    df = pd.DataFrame({"a": np.arange(50.0), "b": np.arange(50) % 2})
    cli = ms.frame_identities(df)
    with Ledger(create=True) as led:
        assert identities(df, key=(tmp_path / "data" / "private" / "fingerprint.key")
                          .read_bytes()) == cli
        import dpcausal

        assert dpcausal.fingerprint(df, ledger=led) == cli[0]


def test_chunk_key_depends_on_each_part():
    base = ms.chunk_key("fp", "plan", [0, 1], "models")
    assert base == ms.chunk_key("fp", "plan", [np.int64(0), 1], "models")
    others = {ms.chunk_key("fp2", "plan", [0, 1], "models"),
              ms.chunk_key("fp", "plan2", [0, 1], "models"),
              ms.chunk_key("fp", "plan", [0, 2], "models"),
              ms.chunk_key("fp", "plan", [0, 1], "m2")}
    assert base not in others and len(others) == 4


def test_code_version_is_in_the_key(monkeypatch):
    before = ms.chunk_key("fp", "plan", [0], "m")
    monkeypatch.setattr(ms, "CODE_VERSION", "fold-fit-v999")
    assert ms.chunk_key("fp", "plan", [0], "m") != before


def test_save_and_load_roundtrip_missing_chunk_and_permissions(tmp_path):
    store = tmp_path / "fold_models"
    ms.save_chunk(store, "k1", [{"a": 1}, 2.5])
    assert ms.load_chunk(store, "k1") == [{"a": 1}, 2.5]
    assert not list(store.glob("*.tmp*"))
    assert ms.load_chunk(store, "k2") is None
    assert stat.S_IMODE(os.stat(store).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(store / "k1.pkl").st_mode) == 0o600


@pytest.mark.parametrize("mode", [0o620, 0o602])
def test_a_pickle_writable_by_group_or_others_is_refused(tmp_path, mode):
    ms.save_chunk(tmp_path, "k", [1])
    os.chmod(tmp_path / "k.pkl", mode)
    with pytest.raises(PermissionError, match="refusing to load"):
        ms.load_chunk(tmp_path, "k")


def test_a_pickle_owned_by_another_user_is_refused(tmp_path, monkeypatch):
    ms.save_chunk(tmp_path, "k", [1])
    monkeypatch.setattr(ms.os, "getuid", lambda: os.stat(tmp_path / "k.pkl").st_uid + 1)
    with pytest.raises(PermissionError, match="owned by the current user"):
        ms.load_chunk(tmp_path, "k")


def test_private_dir_is_0700_and_the_error_log_0600():
    import logging

    path = ms.log_private_errors()
    assert stat.S_IMODE(os.stat(ms.private_dir()).st_mode) == 0o700
    logging.getLogger("dpcausal.private").error("detail only the curator may read")
    for handler in logging.getLogger("dpcausal.private").handlers:
        handler.flush()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert "detail only the curator may read" in path.read_text()


def test_digest_of_arrays_is_layout_independent():
    a = np.arange(6)
    assert ms.digest(a[::2]) == ms.digest(np.array([0, 2, 4]))
    assert ms.digest({"b": 1, "a": 2}) == ms.digest({"a": 2, "b": 1})
