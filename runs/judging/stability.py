"""Judge stability near the line (issue 18, section 3): a score that a one-point wobble of the
judge would move across the pass threshold is asked again, and the median of every sample counts.

"Within 1 point of the threshold" is read as: the verdict would change if the score moved by one
point. At a threshold of 7 that is a 6 (one more passes) or a 7 (one less fails); an 8 still passes
at 7 and a 5 still fails at 6, so asking again about them buys nothing. Pure functions: no model
calls, no database.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

# Re-samples ask at a little temperature: at 0 a deterministic server would only repeat itself.
RESAMPLE_TEMPERATURE = 0.7


def near_threshold(score: float, threshold: float) -> bool:
    """One point up or down would change pass into fail or fail into pass."""
    return threshold - 1 <= score < threshold + 1


def median_score(samples: Sequence[float]) -> float:
    return round(float(statistics.median(samples)), 1)


def is_stable(samples: Sequence[float], threshold: float) -> bool:
    """Every sample on the same side of the threshold: the verdict does not depend on which one counted."""
    return len({sample >= threshold for sample in samples}) == 1


def closest_to(samples: Sequence[float], value: float) -> int:
    """Index of the first sample nearest to `value` (whose reasoning the result shows)."""
    return min(range(len(samples)), key=lambda index: abs(samples[index] - value))
