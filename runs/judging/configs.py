"""Judge configurations (issue 18, sections 4 and 7): which judge made a score, and the reviewers'
worked examples it was shown.

A configuration is the fingerprint (sha256) of everything that decides a score besides the answer:
the judge model as resolved and what its server says it runs behind that name (model_identity_for),
the judge's messages with the case left as {placeholders} (so the
instructions, the rubric, the criteria and the worked examples are all in it), the threshold, the
scorer set and the re-sample count. `judge_config_for` gets or makes the dataset's configuration
for a set of scoring settings, numbering new ones v1, v2... per dataset; runs record theirs at
creation, and a change of a dataset's scoring settings makes its new one at once
(`datasets.services` calls the hook this module registers in `RunsConfig.ready`).

Worked examples come from above: runs never imports the reviews app. That app registers a
provider with `register_alignment_examples_provider(fn)`, `fn(dataset, limit)` returning the
most recent reviewer overrides as dicts (question, answer, expected, verdict, note, score).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction

from datasets.fields import SCORING_FIELDS
from datasets.models import ALIGNMENT_MAX, DEFAULT_PASS_THRESHOLD, Dataset
from evalsite import llm
from evalsite.llm import identity
from runs.judging.scoring import OFFLINE_LABEL, Evaluation, judge_messages
from runs.models import JudgeConfig, Run

AlignmentProvider = Callable[[Dataset, int], list[dict[str, Any]]]
# Scoring keys that decide a score (the rest, such as repeats, decide how often a case is asked).
JUDGE_KEYS = (
    "acceptance_criteria",
    "rejection_criteria",
    "evaluation_criteria",
    "judge_model",
    "judge_prompt",
    "pass_threshold",
    "jaccard_enabled",
    "vector_enabled",
    "context_gates",
    "judge_resamples",
    "alignment_examples",
    "alignment",
)
CRITERIA_KEYS = ("acceptance_criteria", "rejection_criteria", "evaluation_criteria")
EXAMPLE_LIMITS = {"question": 2_000, "answer": 2_000, "expected": 2_000, "note": 1_000}
# What the judge's user message shows in place of one case's text.
PLACEHOLDER_CASE = Evaluation(question="{question}", answer="{answer}", expected_answer="{expected_answer}")

_providers: list[AlignmentProvider] = []


def register_alignment_examples_provider(provider: AlignmentProvider) -> None:
    """Called once by the app that stores reviews (its AppConfig.ready)."""
    if provider not in _providers:
        _providers.append(provider)


def unregister_alignment_examples_provider(provider: AlignmentProvider) -> None:
    if provider in _providers:
        _providers.remove(provider)


def alignment_examples_for(dataset: Dataset | None) -> list[dict[str, Any]]:
    """The dataset's most recent reviewer overrides, at most its `alignment_examples` (0: off)."""
    if dataset is None:
        return []
    limit = min(ALIGNMENT_MAX, dataset.alignment_examples)
    if limit <= 0:
        return []
    examples: list[dict[str, Any]] = []
    for provider in _providers:
        examples += [_example_clean(example) for example in provider(dataset, limit)]
    return examples[:limit]


def _example_clean(example: dict[str, Any]) -> dict[str, Any]:
    cleaned: dict[str, Any] = {key: str(example.get(key) or "")[:limit] for key, limit in EXAMPLE_LIMITS.items()}
    cleaned["verdict"] = "pass" if str(example.get("verdict", "")).lower() == "pass" else "fail"
    score = example.get("score")
    cleaned["score"] = float(score) if isinstance(score, int | float) and 0 <= score <= 10 else None
    return cleaned


def dataset_scoring(dataset: Dataset) -> dict[str, Any]:
    """A run's scoring settings from the dataset now: its fields plus the worked examples."""
    scoring = {name: getattr(dataset, name) for name in SCORING_FIELDS}
    scoring["alignment"] = alignment_examples_for(dataset)
    return scoring


# ---- configurations ------------------------------------------------------------------------------


def scorer_set(scoring: dict[str, Any]) -> list[str]:
    """The scorers a result may get besides the judge (trajectory and context rows need case data)."""
    # A context check that fails the case changes verdicts: a configuration of its own.
    names = ["trajectory", "rouge_l", "context (fails the case)" if scoring.get("context_gates") else "context"]
    if scoring.get("jaccard_enabled", True):
        names.append("jaccard")
    if scoring.get("vector_enabled"):
        names.append("vector")
    return sorted(names)


def prompt_template(scoring: dict[str, Any], *, offline: bool) -> str:
    if offline:
        return OFFLINE_LABEL
    system, user = judge_messages(PLACEHOLDER_CASE, scoring)
    return f"{system['content']}\n\n---\n\n{user['content']}"


def judge_config_for(*, dataset: Dataset | None, scoring: dict[str, Any]) -> JudgeConfig:
    """The dataset's configuration for these settings: the existing one with the same fingerprint,
    or a new one numbered after the dataset's last."""
    model = llm.model_for("judge", scoring.get("judge_model") or None) or ""
    fields: dict[str, Any] = {
        "judge_model": model,
        "prompt_template": prompt_template(scoring, offline=not model),
        "criteria": {key: (scoring.get(key) or "").strip() for key in CRITERIA_KEYS},
        "threshold": int(scoring.get("pass_threshold", DEFAULT_PASS_THRESHOLD)),
        "scorers": scorer_set(scoring),
        "resamples": int(scoring.get("judge_resamples") or 0) if model else 0,
        "examples": list(scoring.get("alignment") or []) if model else [],
    }
    known = model_identity_for(model)
    if known:
        # Only when known, so configurations from before identities were read keep their fingerprint.
        fields["model_identity"] = known
    fingerprint = hashlib.sha256(json.dumps(fields, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    existing = JudgeConfig.objects.filter(dataset=dataset, fingerprint=fingerprint).first()
    if existing is not None:
        return existing
    settings = {key: scoring[key] for key in JUDGE_KEYS if key in scoring}
    settings["judge_model"] = model  # pinned: a re-score with this configuration uses this model
    try:
        with transaction.atomic():
            if dataset is not None:
                Dataset.objects.select_for_update().filter(pk=dataset.pk).first()  # one number at a time
            last = JudgeConfig.objects.filter(dataset=dataset).order_by("-number").values_list("number", flat=True)
            return JudgeConfig.objects.create(
                dataset=dataset, number=(last.first() or 0) + 1, fingerprint=fingerprint, settings=settings, **fields
            )
    except IntegrityError:
        # The same configuration was made at the same moment (two runs started together).
        return JudgeConfig.objects.get(dataset=dataset, fingerprint=fingerprint)


def model_identity_for(model: str) -> str:
    """What the server last said it runs behind `model` (evalsite.llm.identity); when this
    process has no record of it (the cache was emptied), the identity of the newest
    configuration of that model: a swap is noticed at the next call, Test connection or preflight."""
    if not model:
        return ""
    seen = identity.identity_get(model)
    if seen is not None:
        return seen.text
    latest = JudgeConfig.objects.filter(judge_model=model).exclude(model_identity="").order_by("-created_at", "-id")
    return latest.values_list("model_identity", flat=True).first() or ""


def config_again(config: JudgeConfig) -> JudgeConfig:
    """The configuration `config`'s settings make now: itself, or a new one when the model's
    identity changed since it was made."""
    return judge_config_for(dataset=config.dataset, scoring=config.settings)


def dataset_judge_config(*, dataset: Dataset) -> JudgeConfig:
    """The dataset's current configuration (made now if its settings changed since the last)."""
    return judge_config_for(dataset=dataset, scoring=dataset_scoring(dataset))


def console_judge_config() -> JudgeConfig:
    """The console's own judge (EVALSITE_JUDGE_MODEL with a new dataset's default settings, no
    dataset): what Settings preflights, before any dataset has a judge of its own."""
    defaults = Dataset()  # unsaved: only its field defaults are read
    scoring = {name: getattr(defaults, name) for name in SCORING_FIELDS}
    scoring["alignment"] = []
    return judge_config_for(dataset=None, scoring=scoring)


def dataset_scoring_changed(dataset: Dataset) -> None:
    """The hook datasets.services calls after a scoring settings change: each change makes a new
    configuration, so the dataset's history of judges is complete even before a run uses one."""
    dataset_judge_config(dataset=dataset)


# ---- comparisons -----------------------------------------------------------------------------------


def judges_differ(run_a: Run, run_b: Run) -> str | None:
    """A sentence when two runs were not scored by the same judge configuration, else None.

    Comparisons, trends, the CI gate and the verify panel show it beside any regression or fix.
    """
    a, b = run_a.judge_config, run_b.judge_config
    if a is None and b is None:
        return _stored_judges_differ(run_a, run_b)
    if a is None or b is None:
        older = run_a if a is None else run_b
        return (
            f"Run #{older.pk} was scored before judges were recorded, so it may have had a different judge "
            f"from run #{(run_b if a is None else run_a).pk}."
        )
    if a.fingerprint == b.fingerprint:
        return None
    return (
        f"Scored by different judges: {a.label} (run #{run_a.pk}) vs {b.label} (run #{run_b.pk}); "
        "a difference may be the judge's, not the agent's."
    )


# Runs from before judges were recorded: what each stored of its judge when it was made (the
# scorer, the judge model and the Run.scoring keys that change what a score means; repeats and
# the similarity switches add information, they do not change the verdict).
_JUDGE_KEYS = (
    ("judge_prompt", "judge prompt"),
    ("acceptance_criteria", "acceptance criteria"),
    ("rejection_criteria", "rejection criteria"),
    ("evaluation_criteria", "evaluation criteria"),
    ("pass_threshold", "pass threshold"),
)


def _stored_judges_differ(run_a: Run, run_b: Run) -> str | None:
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
        return str(value if value is not None else DEFAULT_PASS_THRESHOLD)
    return str(value or "").strip()
