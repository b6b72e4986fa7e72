"""Whether two runs were scored by the same judge.

Stand-in until the judge configuration (a fingerprinted JudgeConfig per score) lands: it
compares what each run stored of its judge when it was created (the scorer, the judge
model and the scoring settings that change what a score means). The comparison pages,
the verify panel and the CI gate ask only `judges_differ`, so the real implementation
replaces this module without touching them.
"""

from __future__ import annotations

from runs.models import Run

# The Run.scoring keys that change what a score or a verdict means (repeats and the
# similarity switches add information, they do not change the judge's verdict).
_JUDGE_KEYS = (
    ("judge_prompt", "judge prompt"),
    ("acceptance_criteria", "acceptance criteria"),
    ("rejection_criteria", "rejection criteria"),
    ("evaluation_criteria", "evaluation criteria"),
    ("pass_threshold", "pass threshold"),
)


def judges_differ(run_a: Run, run_b: Run) -> str | None:
    """A sentence naming what differs between the two runs' judges, or None when they are the same."""
    parts = []
    if run_a.scorer != run_b.scorer or (run_a.judge_model or "") != (run_b.judge_model or ""):
        parts.append(f"{_judge_name(run_a)} in run #{run_a.pk}, {_judge_name(run_b)} in run #{run_b.pk}")
    for key, label in _JUDGE_KEYS:
        if _setting(run_a, key) != _setting(run_b, key):
            parts.append(f"the {label} changed")
    if not parts:
        return None
    return "The runs were scored by different judges: " + "; ".join(parts) + "."


def _judge_name(run: Run) -> str:
    if run.scorer == Run.Scorer.OFFLINE:
        return "the offline reference scorer"
    return f"LLM judge {run.judge_model}" if run.judge_model else "the default LLM judge"


def _setting(run: Run, key: str) -> str:
    value = (run.scoring or {}).get(key)
    if key == "pass_threshold":
        return str(value if value is not None else 7)
    return str(value or "").strip()
