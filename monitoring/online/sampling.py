"""Which traces an online evaluator samples: decided by a hash, never by chance, so a task that is
delivered twice (or a beat sweep that looks at a trace the hook already did) samples the same."""

from __future__ import annotations

import hashlib

# 2**64 - 1: the hash's first 8 bytes, read as an integer, over this is a fraction in [0, 1].
_SCALE = float(2**64 - 1)


def sample_point(evaluator_id: int, key: str) -> float:
    """A fixed fraction in [0, 1] for this evaluator and trace (or conversation): `key` is the
    trace's otel_trace_id or "conversation:<id>". Another evaluator draws independently."""
    digest = hashlib.sha256(f"{evaluator_id}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / _SCALE


def sampled(evaluator_id: int, key: str, rate: float) -> bool:
    """True for about `rate` (0-1) of keys: 1 takes every one, 0 none."""
    if rate >= 1:
        return True
    if rate <= 0:
        return False
    return sample_point(evaluator_id, key) < rate
