"""HMAC-SHA256 of many 8-byte messages at once, on numpy arrays: the keyed hash of integer ids
that assigns the partitioned path's folds (:mod:`dpcausal.ate.partitioned`, module docstring).

Bit-identical to ``hmac.new(key, id.to_bytes(8, "big", signed=True), hashlib.sha256)``: the
same SHA-256 compression function (FIPS 180-4 §6.2.2) run on uint32 arrays, one lane per id.
HMAC (RFC 2104) hashes ``(key ^ ipad) || message`` then ``(key ^ opad) || inner digest``; the
two 64-byte key blocks are the same for every id, so their compressions are done once, and
each id costs two compressions: its 8-byte message padded to one block (length 72 bytes), and
the 32-byte inner digest padded to one block (length 96 bytes). Only the first 8 bytes of the
outer digest are returned (read big-endian), as the fold rule uses them.

The per-id loop over :mod:`hmac` cost about 10 CPU microseconds per id (5 CPU s of a
500,000-row partition); this costs about 2.5.
"""

from __future__ import annotations

import hashlib
from typing import Union

import numpy as np

# FIPS 180-4 §4.2.2 (round constants) and §5.3.3 (initial hash value).
_K = (
    0x428A2F98, 0x71374491, 0xB5C0FBCF, 0xE9B5DBA5, 0x3956C25B, 0x59F111F1, 0x923F82A4, 0xAB1C5ED5,
    0xD807AA98, 0x12835B01, 0x243185BE, 0x550C7DC3, 0x72BE5D74, 0x80DEB1FE, 0x9BDC06A7, 0xC19BF174,
    0xE49B69C1, 0xEFBE4786, 0x0FC19DC6, 0x240CA1CC, 0x2DE92C6F, 0x4A7484AA, 0x5CB0A9DC, 0x76F988DA,
    0x983E5152, 0xA831C66D, 0xB00327C8, 0xBF597FC7, 0xC6E00BF3, 0xD5A79147, 0x06CA6351, 0x14292967,
    0x27B70A85, 0x2E1B2138, 0x4D2C6DFC, 0x53380D13, 0x650A7354, 0x766A0ABB, 0x81C2C92E, 0x92722C85,
    0xA2BFE8A1, 0xA81A664B, 0xC24B8B70, 0xC76C51A3, 0xD192E819, 0xD6990624, 0xF40E3585, 0x106AA070,
    0x19A4C116, 0x1E376C08, 0x2748774C, 0x34B0BCB5, 0x391C0CB3, 0x4ED8AA4A, 0x5B9CCA4F, 0x682E6FF3,
    0x748F82EE, 0x78A5636F, 0x84C87814, 0x8CC70208, 0x90BEFFFA, 0xA4506CEB, 0xBEF9A3F7, 0xC67178F2,
)
_IV = (0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB,
       0x5BE0CD19)
_MASK = 0xFFFFFFFF
# Ids per pass: each uint32 lane array is 64 KiB, in cache and under glibc's default mmap
# threshold (128 KiB), which Dask's worker setting MALLOC_TRIM_THRESHOLD_ freezes: with 256 KiB
# lanes every temporary array was an mmap and its page faults (measured 5x the CPU time).
_CHUNK = 1 << 14

# A 32-bit word: a Python int (the same for every id, e.g. padding) or a uint32 array (one lane
# per id). Constant words stay ints, so the rounds that depend only on the key cost nothing.
Word = Union[int, np.ndarray]


def hmac_sha256_64(ids: np.ndarray, key: bytes) -> np.ndarray:
    """``HMAC-SHA256(key, id)[:8]`` as big-endian uint64 for each integer id, the id encoded as
    8-byte big-endian two's complement (module docstring)."""
    inner, outer = _key_state(key, 0x36), _key_state(key, 0x5C)
    words = np.asarray(ids).astype(np.int64).view(np.uint64)
    out = np.empty(words.size, dtype=np.uint64)
    for start in range(0, words.size, _CHUNK):
        x = words[start:start + _CHUNK]
        hi = (x >> np.uint64(32)).astype(np.uint32)
        lo = (x & np.uint64(_MASK)).astype(np.uint32)
        digest = _compress(inner, [hi, lo, 0x80000000, *[0] * 12, 72 * 8])
        mac = _compress(outer, [*digest, 0x80000000, *[0] * 6, 96 * 8])
        out[start:start + _CHUNK] = (np.asarray(mac[0], dtype=np.uint64) << np.uint64(32)) \
            | np.asarray(mac[1], dtype=np.uint64)
    return out


def _key_state(key: bytes, pad: int) -> list[Word]:
    """The SHA-256 state after the block ``key ^ pad`` (RFC 2104: a key longer than the
    64-byte block is hashed first, a shorter one padded with zeros)."""
    k = hashlib.sha256(key).digest() if len(key) > 64 else key
    block = bytes(b ^ pad for b in k.ljust(64, b"\0"))
    return _compress(list(_IV), [int.from_bytes(block[i:i + 4], "big") for i in range(0, 64, 4)])


def _compress(state: list[Word], block: list[Word]) -> list[Word]:
    """The SHA-256 compression of one 16-word block into ``state`` (FIPS 180-4 §6.2.2)."""
    w = list(block)
    for t in range(16, 64):
        s0 = _rotr(w[t - 15], 7) ^ _rotr(w[t - 15], 18) ^ _shr(w[t - 15], 3)
        s1 = _rotr(w[t - 2], 17) ^ _rotr(w[t - 2], 19) ^ _shr(w[t - 2], 10)
        w.append(_add(w[t - 16], s0, w[t - 7], s1))
    a, b, c, d, e, f, g, h = state
    for t in range(64):
        s1 = _rotr(e, 6) ^ _rotr(e, 11) ^ _rotr(e, 25)
        ch = g ^ (e & (f ^ g))                  # (e & f) ^ (~e & g), one op fewer
        t1 = _add(h, s1, ch, _K[t], w[t])
        s0 = _rotr(a, 2) ^ _rotr(a, 13) ^ _rotr(a, 22)
        maj = (a & b) | (c & (a | b))           # (a & b) ^ (a & c) ^ (b & c)
        h, g, f, e, d, c, b, a = g, f, e, _add(d, t1), c, b, a, _add(t1, s0, maj)
    return [_add(s, v) for s, v in zip(state, (a, b, c, d, e, f, g, h), strict=True)]


def _add(*words: Word) -> Word:
    """Sum modulo 2^32 (uint32 arrays wrap; the int terms are added once, masked)."""
    constant = sum(v for v in words if isinstance(v, int)) & _MASK
    arrays = [v for v in words if not isinstance(v, int)]
    if not arrays:
        return constant
    total = arrays[0].copy()
    for v in arrays[1:]:
        total += v
    if constant:
        total += np.uint32(constant)
    return total


def _rotr(x: Word, n: int) -> Word:
    if isinstance(x, int):
        return ((x >> n) | (x << (32 - n))) & _MASK
    return (x >> np.uint32(n)) | (x << np.uint32(32 - n))


def _shr(x: Word, n: int) -> Word:
    return x >> n if isinstance(x, int) else x >> np.uint32(n)
