"""Generate with AI: the only code in datasets.generation that writes.

dataset_generate_create makes the dataset (Extracting) and enqueues the job;
dataset_generate is the job: it claims the dataset, asks the model for cases
(generator.py), writes their attachments (writers.py), and stores everything in one
transaction at the end, so a failure at any point leaves no cases and no files.
Claiming, failing and re-sending the job are datasets.jobs, shared with extraction.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.db import transaction

from agents.models import Agent
from agents.rules import AgentRule
from datasets.generation.generator import Generation, GenerationError, Rule, agent_rules, generate_cases
from datasets.generation.writers import WrittenDocument, write_document
from datasets.jobs import GENERATE, job_claim, job_enqueue, job_fail
from datasets.models import Dataset, Document
from datasets.services import case_bulk_create, dataset_create
from evalsite import llm
from evalsite.storage import stored_files_delete

logger = logging.getLogger(__name__)

MIN_CASES = 1
MAX_CASES = 50
MAX_WARNINGS = 100
KIND_QUESTIONS, KIND_SCENARIOS = "questions", "scenarios"
KINDS = (
    (KIND_QUESTIONS, "Questions with expected answers"),
    (KIND_SCENARIOS, "Scenarios: a simulated user with a goal, over several turns"),
)

NO_MODEL_MESSAGE = (
    "Generating test cases needs a model, and none is configured. Set EVALSITE_LLM_MODEL "
    "(and the provider's API key) to turn it on, or upload a file instead."
)
NO_RULES_MESSAGE = (
    "The agent has no instructions, skills, guardrails or knowledge to write test cases from. "
    "Add them on the agent's Configuration tab first."
)


def dataset_generate_create(
    *, agent: Agent, user: User, name: str, count: int, instructions: str, kind: str = KIND_QUESTIONS
) -> Dataset:
    """A new dataset in Extracting whose cases the model will write; the job starts after commit."""
    if kind not in dict(KINDS):
        raise ValidationError({"kind": ["Choose questions or scenarios."]})
    if not llm.is_configured("llm"):
        raise ValidationError(NO_MODEL_MESSAGE)
    if not MIN_CASES <= count <= MAX_CASES:
        raise ValidationError({"count": [f"Choose from {MIN_CASES} to {MAX_CASES} test cases."]})
    if agent.current_version is None or not agent_rules(agent.current_version):
        raise ValidationError(NO_RULES_MESSAGE)
    with transaction.atomic():
        # dataset_create checks the name (free, 120 characters) and the per-agent limit.
        dataset = dataset_create(
            agent=agent,
            user=user,
            name=name,
            source=Dataset.Source.GENERATED,
            status=Dataset.Status.EXTRACTING,
            source_name=Dataset.Source.GENERATED.label,
            # No "kind" means questions (datasets generated before scenarios existed).
            generation={
                "count": count,
                "instructions": instructions.strip(),
                **({"kind": kind} if kind == KIND_SCENARIOS else {}),
            },
        )
        job_enqueue(GENERATE, dataset.pk)
    return dataset


def dataset_generate_more(*, dataset: Dataset, user: User, rules: list[AgentRule], count: int) -> Dataset:
    """Append `count` generated cases to an existing dataset, testing only `rules` (coverage's
    "Generate cases for uncovered rules"). The dataset is Extracting while the model writes;
    if generation fails, it goes back to Ready with its cases untouched and the reason as a notice."""
    if not llm.is_configured("llm"):
        raise ValidationError(NO_MODEL_MESSAGE)
    if not MIN_CASES <= count <= MAX_CASES:
        raise ValidationError({"count": [f"Choose from {MIN_CASES} to {MAX_CASES} test cases."]})
    if not rules:
        raise ValidationError("Every rule already has a test case: there is nothing to fill.")
    with transaction.atomic():
        locked = Dataset.objects.select_for_update().get(pk=dataset.pk)
        if locked.status != Dataset.Status.READY:
            raise ValidationError("Cases can be generated into a Ready dataset only. Wait until it is Ready.")
        more = {"count": count, "rules": [{"section": r.section, "text": r.text, "id": r.id} for r in rules]}
        locked.generation = {**locked.generation, "more": more}
        locked.status = Dataset.Status.EXTRACTING
        locked.job_attempts, locked.job_started_at = 0, None
        locked.save(update_fields=["generation", "status", "job_attempts", "job_started_at", "updated_at"])
        job_enqueue(GENERATE, locked.pk)
    return locked


def dataset_generate(*, dataset_id: int) -> None:
    """The generation job. Safe to run twice: only a dataset still Extracting is worked on."""
    dataset = job_claim(GENERATE, dataset_id)
    if dataset is None:
        return
    more = dataset.generation.get("more")
    try:
        if more:
            generation = generate_cases(
                agent=dataset.agent,
                count=int(more.get("count") or 0),
                trace={"dataset": dataset.pk},
                rules=[
                    Rule(number=number, section=str(rule["section"]), text=str(rule["text"]))
                    for number, rule in enumerate(more.get("rules") or [], start=1)
                ],
                avoid=list(dataset.cases.values_list("question", flat=True)),
            )
        else:
            generation = generate_cases(
                agent=dataset.agent,
                count=int(dataset.generation.get("count") or 0),
                instructions=str(dataset.generation.get("instructions") or ""),
                trace={"dataset": dataset.pk},
                scenarios=dataset.generation.get("kind") == KIND_SCENARIOS,
            )
        written = [write_document(case.document) if case.document else None for case in generation.cases]
    except GenerationError as error:
        job_fail(dataset_id=dataset_id, reason=error.message)
        return
    except llm.LLMError as error:
        reason = f"The model could not write the test cases. {error.message}"
        job_fail(dataset_id=dataset_id, reason=reason)
        return
    except SoftTimeLimitExceeded:
        minutes = max(1, settings.CELERY_TASK_SOFT_TIME_LIMIT // 60)
        reason = f"Generation took longer than {minutes} minutes and was stopped. Try again with fewer test cases."
        job_fail(dataset_id=dataset_id, reason=reason)
        return
    _store(dataset, generation, written)


def _store(dataset: Dataset, generation: Generation, written: list[WrittenDocument | None]) -> None:
    """Files first, then every row in one transaction; files are removed again if it fails."""
    documents: list[Document | None] = []
    try:
        for document in written:
            documents.append(_document_file(dataset, document) if document else None)
        with transaction.atomic():
            # Locked and re-checked: the dataset may have been deleted while the model was writing.
            locked = Dataset.objects.select_for_update().filter(pk=dataset.pk, status=Dataset.Status.EXTRACTING).first()
            if locked is None:
                _delete_files(documents)
                return
            _save_rows(locked, generation, documents)
    except BaseException:
        _delete_files(documents)
        raise
    logger.info(
        "dataset %s generated %d cases in %d requests (%d prompt, %d completion tokens, $%.4f)",
        dataset.pk, len(generation.cases), generation.requests, generation.prompt_tokens,
        generation.completion_tokens, generation.cost,
    )  # fmt: skip


def _document_file(dataset: Dataset, written: WrittenDocument) -> Document:
    document = Document(
        team_id=dataset.agent.team_id,
        dataset=dataset,
        original_name=written.filename,
        file_type=written.file_type,
        size=len(written.content),
        sha256=hashlib.sha256(written.content).hexdigest(),
        text=written.text,
        generated=True,
    )
    # Storage picks the server-generated path (datasets.models._document_path); the row is saved later.
    document.file.save(written.filename, ContentFile(written.content), save=False)
    return document


def _save_rows(dataset: Dataset, generation: Generation, documents: list[Document | None]) -> None:
    for document in documents:
        if document is not None:
            document.save()
    case_bulk_create(
        dataset=dataset,
        cases=[
            {
                "question": case.question,
                "expected_answer": case.expected_answer,
                "tests_rule": case.tests_rule,
                "document_context": case.document.context if case.document else "",
                "documents": [document] if document is not None else [],
                "scenario": case.scenario or {},
            }
            for case, document in zip(generation.cases, documents, strict=True)
        ],
    )
    dataset.status = Dataset.Status.READY
    dataset.failure_reason = ""
    # Rejected cases make the dataset "Ready with warnings", each naming the case and why.
    dataset.warnings = [*dataset.warnings, *generation_warnings(generation)][:MAX_WARNINGS]
    more = dataset.generation.pop("more", None)
    if more is None:
        dataset.generation = {**dataset.generation, **_generation_record(generation)}
    else:  # the dataset's own generation record stays; the addition is listed after it
        added = {"count": len(generation.cases), "rules": [rule["id"] for rule in more.get("rules") or []]}
        dataset.generation["added"] = [*dataset.generation.get("added", []), added]
    dataset.save(update_fields=["status", "failure_reason", "generation", "warnings", "updated_at"])


def generation_warnings(generation: Generation) -> list[dict[str, str]]:
    """What the model wrote and was not kept, naming the model (the text is its, not the team's)."""
    where = f"Written by the model {llm.model_for('llm') or ''}".rstrip()
    return [{"where": where, "message": message} for message in generation.warnings]


def _generation_record(generation: Generation) -> dict[str, Any]:
    return {
        "agent_version": generation.agent_version,
        "requests": generation.requests,
        "prompt_tokens": generation.prompt_tokens,
        "completion_tokens": generation.completion_tokens,
        "cost": round(generation.cost, 6),
        "dropped": dict(generation.dropped),
    }


def _delete_files(documents: list[Document | None]) -> None:
    stored_files_delete(document.file.name for document in documents if document is not None)
