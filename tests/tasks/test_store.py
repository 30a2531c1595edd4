"""Private fold-model store: keyed fingerprints, chunk keys, and the file-aware cache policy."""

import os
import stat
from types import SimpleNamespace

import numpy as np
import pytest

from tasks import model_store as ms


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


def test_save_and_load_roundtrip_and_missing_chunk(tmp_path):
    ms.save_chunk(tmp_path, "k1", [{"a": 1}, 2.5])
    assert ms.load_chunk(tmp_path, "k1") == [{"a": 1}, 2.5]
    assert not list(tmp_path.glob("*.tmp*"))
    with pytest.raises(FileNotFoundError, match="fold-model chunk k2 is missing"):
        ms.load_chunk(tmp_path, "k2")


def test_policy_drops_the_cache_record_when_the_chunk_file_is_gone(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    ctx = SimpleNamespace(result_store=SimpleNamespace(
        result_storage=SimpleNamespace(basepath=results)))
    inputs = {"data_fp": "fp", "plan": "p", "folds": [0, 1], "models": "m", "store": str(tmp_path)}
    key = ms.chunk_key("fp", "p", [0, 1], "m")
    record = results / key
    record.write_text("{}")
    ms.save_chunk(tmp_path, key, [1])
    assert ms.StoredChunkPolicy().compute_key(ctx, inputs, {}) == key
    assert record.exists()  # file present: the record stays, the task can hit the cache
    ms.chunk_path(tmp_path, key).unlink()
    assert ms.StoredChunkPolicy().compute_key(ctx, inputs, {}) == key
    assert not record.exists()  # file gone: record dropped, the task refits


def test_digest_of_arrays_is_layout_independent():
    a = np.arange(6)
    assert ms.digest(a[::2]) == ms.digest(np.array([0, 2, 4]))
    assert ms.digest({"b": 1, "a": 2}) == ms.digest({"a": 2, "b": 1})
