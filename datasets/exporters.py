"""Write a dataset's cases as CSV or as an ADK/10xgraph EvalSet (JSON).

Both formats import back into the same cases (datasets.importers), apart from the
attached document files, which are listed by name only. An EvalSet export then import
keeps eval_set_id, every eval_id and every invocation id (only the creation timestamps
are those of the new rows).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

from django.utils.text import slugify

from datasets.fields import (
    CSV_FIELDS,
    EVAL_SET_EXTENSION_FIELDS,
    EVAL_SET_EXTRA_KEYS,
    SCORING_FIELDS,
    invocation_ids,
    neutralise,
)
from datasets.models import Dataset, TestCase

CSV_HEADER = tuple(field.name for field in CSV_FIELDS)


def _csv_row(case: TestCase) -> list[str]:
    return [neutralise(field.cell(getattr(case, field.name))) for field in CSV_FIELDS]


def cases_to_csv(cases: Iterable[TestCase]) -> str:
    """UTF-8 CSV text with a BOM (so Excel reads the accents), every field quoted."""
    buffer = io.StringIO()
    buffer.write("\ufeff")
    writer = csv.writer(buffer, quoting=csv.QUOTE_ALL)
    writer.writerow(CSV_HEADER)
    for case in cases:
        writer.writerow(_csv_row(case))
    return buffer.getvalue()


def _content(role: str, text: str) -> dict[str, Any] | None:
    return {"role": role, "parts": [{"text": text}]} if text else None


def _invocation(
    *, invocation_id: str, user: str, expected: str, tools: list[dict[str, Any]], timestamp: float
) -> dict[str, Any]:
    return {
        "invocation_id": invocation_id,
        "user_content": _content("user", user),
        "final_response": _content("model", expected),
        "intermediate_data": {"tool_uses": tools, "intermediate_responses": []},
        "creation_timestamp": timestamp,
    }


def _kept_invocation_ids(case: TestCase, eval_id: str, count: int) -> list[str]:
    # An imported file's own invocation ids (TestCase.extra["invocation_ids"]), while the
    # case still has as many invocations; else ours.
    kept = case.extra.get("invocation_ids")
    if isinstance(kept, list) and len(kept) == count and all(isinstance(item, str) and item for item in kept):
        return kept
    return invocation_ids(eval_id, count)


def _scenario_case(case: TestCase, eval_id: str) -> dict[str, Any]:
    # ADK's shape: a starting prompt and a plan, no scripted conversation. ADK has no goal
    # field, so a scenario written with a goal only gives its goal as the plan.
    kept = case.extra.get("conversation_scenario")
    return {
        "eval_id": eval_id,
        "conversation_scenario": {
            **(kept if isinstance(kept, dict) else {}),
            "starting_prompt": case.question,
            "conversation_plan": case.scenario.get("plan") or case.scenario.get("goal", ""),
        },
    }


def case_to_eval_case(case: TestCase, number: int) -> dict[str, Any]:
    # dataset_export_json gives every case a case_id first; "case-N" only for callers that do not.
    eval_id = case.case_id or f"case-{number}"
    timestamp = case.created_at.timestamp()
    if case.scenario:
        eval_case = _scenario_case(case, eval_id)
    else:
        eval_case = _scripted_case(case, eval_id, timestamp)
    eval_case.update({key: value for key, value in case.extra.items() if key in EVAL_SET_EXTRA_KEYS})
    if case.tags:
        eval_case["tags"] = case.tags
    eval_case["creation_timestamp"] = timestamp
    # Everything the EvalSet shape has no place for, under our own key (other tools ignore it).
    eval_case["evalsite"] = {
        "case_id": case.case_id,
        **{name: getattr(case, name) for name in EVAL_SET_EXTENSION_FIELDS},
        "documents": [document.original_name for document in case.documents.all()],
    }
    return eval_case


def _scripted_case(case: TestCase, eval_id: str, timestamp: float) -> dict[str, Any]:
    ids = _kept_invocation_ids(case, eval_id, len(case.turns) + 1)
    conversation = [
        _invocation(
            invocation_id=ids[index - 1],
            user=turn["user"],
            expected=turn.get("expected", ""),
            tools=[],
            timestamp=timestamp,
        )
        for index, turn in enumerate(case.turns, start=1)
    ]
    # The whole conversation's tool trajectory sits on its last invocation; the importer
    # concatenates every invocation's tool uses, so this round-trips exactly.
    conversation.append(
        _invocation(
            invocation_id=ids[-1],
            user=case.question,
            expected=case.expected_answer,
            tools=[{"name": tool["name"], "args": tool.get("args", {})} for tool in case.expected_tools],
            timestamp=timestamp,
        )
    )
    return {"eval_id": eval_id, "conversation": conversation}


def dataset_to_eval_set(dataset: Dataset, cases: Iterable[TestCase]) -> dict[str, Any]:
    return {
        "eval_set_id": dataset.eval_set_id or slugify(dataset.name) or f"dataset-{dataset.pk}",
        "name": dataset.name,
        "description": dataset.description,
        "eval_cases": [case_to_eval_case(case, number) for number, case in enumerate(cases, start=1)],
        "creation_timestamp": dataset.created_at.timestamp(),
        "evalsite": {"format": 1, "scoring": {key: getattr(dataset, key) for key in SCORING_FIELDS}},
    }


def dataset_export_csv(*, dataset: Dataset) -> str:
    return cases_to_csv(dataset.cases.all())


def export_filename(dataset: Dataset, extension: str) -> str:
    return f"{slugify(dataset.name) or 'dataset'}.{extension}"
