"""The vectorised keyed hash against the standard library's HMAC-SHA256 (RFC 2104), id by id."""

from __future__ import annotations

import hashlib
import hmac

import numpy as np
import pytest

from dpcausal.ate.keyed_hash import hmac_sha256_64


def _reference(ids: np.ndarray, key: bytes) -> list[int]:
    return [int.from_bytes(hmac.new(key, int(i).to_bytes(8, "big", signed=True),
                                    hashlib.sha256).digest()[:8], "big") for i in ids]


@pytest.mark.parametrize("key_len", [16, 32, 63, 64, 65, 200])
def test_hmac_sha256_64_is_the_standard_hmac_for_every_key_length(key_len):
    rng = np.random.default_rng(key_len)
    key = rng.bytes(key_len)
    ids = rng.integers(-2**63, 2**63 - 1, 2_000, dtype=np.int64, endpoint=True)
    ids[:5] = [0, -1, 1, -2**63, 2**63 - 1]
    got = hmac_sha256_64(ids, key)
    assert got.dtype == np.uint64
    assert got.tolist() == _reference(ids, key)


def test_hmac_sha256_64_spans_chunks_and_takes_every_integer_dtype():
    key = b"k" * 32
    ids = np.arange(-5, 70_000, dtype=np.int64)          # more than one chunk of 2**16 ids
    got = hmac_sha256_64(ids, key)
    pick = np.r_[0:5, 65_530:65_545, ids.size - 3:ids.size]
    assert got[pick].tolist() == _reference(ids[pick], key)
    small = np.array([0, 7, 255], dtype=np.uint8)
    assert hmac_sha256_64(small, key).tolist() == _reference(small, key)
    big = np.array([2**64 - 1], dtype=np.uint64)         # encoded as its int64 bits, i.e. -1
    assert hmac_sha256_64(big, key).tolist() == _reference(np.array([-1]), key)
    assert hmac_sha256_64(np.array([], dtype=np.int64), key).size == 0
