"""Counter-based randomness: every value is a pure function of its key, never of a stream.

``stable_hash`` names things (UUIDs, pod suffixes, offsets) from their identity; ``uniform``
draws vectorised noise for a (unit key, instant, channel) triple with a splitmix64 finaliser, so
the same instant gives the same value whether it is generated alone or inside a long window.
"""

from __future__ import annotations

import hashlib

import numpy as np
from numpy.typing import NDArray

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_CHANNEL = np.uint64(0xD6E8FEB86659FD93)
_MASK64 = (1 << 64) - 1
#: Characters Kubernetes uses for generated name suffixes (no vowels, no look-alikes).
K8S_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

U64 = NDArray[np.uint64]
F64 = NDArray[np.float64]


def stable_hash(*parts: object) -> int:
    """A 64-bit hash of the parts' text, stable across runs and platforms."""
    text = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def stable_unit(*parts: object) -> float:
    """A number in [0, 1) from the parts' identity."""
    return (stable_hash(*parts) >> 11) / float(1 << 53)


def k8s_suffix(length: int, *parts: object) -> str:
    """A Kubernetes-style random-looking suffix (``x7k2p``) derived from the parts."""
    value = stable_hash(*parts)
    chars = []
    for _ in range(length):
        value, index = divmod(value, len(K8S_ALPHABET))
        chars.append(K8S_ALPHABET[index])
    return "".join(chars)


def hex_id(*parts: object) -> str:
    """32 hex digits derived from the parts."""
    return hashlib.blake2b("\x1f".join(str(p) for p in parts).encode(), digest_size=16).hexdigest()


def uuid_text(*parts: object) -> str:
    """A UUID-formatted string (8-4-4-4-12 hex digits) derived from the parts."""
    h = hex_id(*parts)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def splitmix64(values: U64) -> U64:
    """The splitmix64 finaliser, element-wise (wrapping uint64 arithmetic)."""
    z = values + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def unit_keys(seeds: list[int]) -> U64:
    """Python ints (any size) as a uint64 key array."""
    return np.array([s & _MASK64 for s in seeds], dtype=np.uint64)


def uniform(keys: U64, ts: NDArray[np.int64], channel: int) -> F64:
    """Noise in [0, 1) for every (key, instant): shape ``(len(keys), len(ts))``."""
    ts_mixed = splitmix64(np.asarray(ts, dtype=np.int64).astype(np.uint64))
    salt = splitmix64(np.array([channel], dtype=np.uint64) * _CHANNEL)
    mixed = splitmix64((keys[:, None] ^ salt) ^ ts_mixed[None, :])
    return (mixed >> np.uint64(11)).astype(np.float64) * (1.0 / float(1 << 53))


def slow_uniform(keys: U64, ts: NDArray[np.int64], channel: int, period_s: int) -> F64:
    """Noise held constant over ``period_s`` blocks and blended linearly between them."""
    ts = np.asarray(ts, dtype=np.int64)
    block = ts // period_s
    frac = (ts - block * period_s) / float(period_s)
    left = uniform(keys, block, channel)
    right = uniform(keys, block + 1, channel)
    return left + (right - left) * frac[None, :]
