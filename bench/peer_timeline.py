"""Where a lane's time goes between model calls, from one peer-bench run's mock timeline.

    python3 bench/peer_timeline.py <peer-bench run dir or its timeline.json> [...]

The peer harness (`harness.py --keep-run-dir`, or `bench_matrix.py --out DIR`) writes the
mock's timeline of every request: (received, answered, kind, case). For each run it prints
the mean and median gap from a case's agent answer to its judge request, from a judge
answer to the next agent request that slot sends (the hand-off between cases), and how
far apart the last three lanes ended.
Standard library only, so it runs with any Python.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def analyse(path: Path) -> str:
    timeline = json.loads((path / "timeline.json" if path.is_dir() else path).read_text())
    start = min(received for received, *_ in timeline)
    cases: dict[str, dict[str, tuple[float, float]]] = {}
    for received, answered, kind, case in timeline:
        cases.setdefault(case, {})["agent" if kind == "agent" else "judge"] = (received - start, answered - start)
    ordered = sorted((c for c in cases.values() if "agent" in c and "judge" in c), key=lambda c: c["agent"][0])
    judge_ends = sorted(c["judge"][1] for c in ordered)
    # Each agent request after the first wave follows the latest judge answer not yet matched.
    hand_offs, free = [], list(judge_ends)
    for case in ordered[3:]:
        earlier = [end for end in free if end <= case["agent"][0]]
        if earlier:
            free.remove(earlier[-1])
            hand_offs.append((case["agent"][0] - earlier[-1]) * 1000)
    inside = [(c["judge"][0] - c["agent"][1]) * 1000 for c in ordered]
    lanes_ended = (judge_ends[-1] - judge_ends[-3]) * 1000 if len(judge_ends) >= 3 else 0.0
    return (
        f"{path}: agent->judge mean {statistics.mean(inside):.1f} ms (p50 {statistics.median(inside):.1f}); "
        f"judge->next agent mean {statistics.mean(hand_offs):.1f} ms (p50 {statistics.median(hand_offs):.1f}); "
        f"last three lanes ended within {lanes_ended:.0f} ms"
    )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for argument in sys.argv[1:]:
        print(analyse(Path(argument)))
