"""Helpers for suggestion tests: completed runs with chosen outcomes, and POST data for the Apply dialog."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agents.models import Agent
from runs.models import Result, Run, RunCase
from suggestions.models import Suggestion
from tests.runs.conftest import _clear_worker_caches  # noqa: F401  (autouse: per-process caches keyed by pk)

# Each failing expected answer states a fact the agent's knowledge (tests.factories.AgentFactory)
# lacks, next to one it has: an offline suggestion may teach the fact, never the whole answer.
PHONE_FACT = "Phone support is available at +1 555 0100 for Enterprise customers."
PHONE = f"{PHONE_FACT} Support is open 9-17 CET on weekdays."
REFUND = "Refunds are available within 30 days of purchase."
SLA_FACT = "Enterprise customers get a 10% credit when uptime falls below 99.95%."
SLA = f"{SLA_FACT} Claims go to support, open 9-17 CET on weekdays."


@pytest.fixture
def make_run(agent) -> Callable[..., Run]:
    """make_run([(status, expected, actual, score), ...], average=None, agent=None, status="completed")."""

    def make(outcomes: list[tuple[str, str, str, float | None]], *, average: float | None = None,
             agent: Agent = agent, status: str = Run.Status.COMPLETED, parent: Run | None = None,
             purpose: str = Run.Purpose.RUN) -> Run:  # fmt: skip
        run = Run.objects.create(
            agent=agent,
            agent_version=agent.current_version,
            dataset_name="Support policy",
            status=status,
            scoring={"pass_threshold": 7},
            total=len(outcomes),
            completed=len(outcomes),
            passed=sum(1 for o in outcomes if o[0] == "pass"),
            failed=sum(1 for o in outcomes if o[0] == "fail"),
            errored=sum(1 for o in outcomes if o[0] == "error"),
            average_score=average,
            parent=parent,
            purpose=purpose,
        )
        for position, (result_status, expected, actual, score) in enumerate(outcomes):
            case = RunCase.objects.create(
                run=run, position=position, question=f"Question {position}?", expected_answer=expected
            )
            Result.objects.create(run=run, case=case, status=result_status, actual_answer=actual, score=score)
        return run

    return make


@pytest.fixture
def failing_run(make_run) -> Run:
    """Two cases pass, two fail on facts the knowledge lacks."""
    return make_run(
        [
            ("pass", REFUND, REFUND, 9),
            ("fail", PHONE, "I do not know.", 2),
            ("pass", REFUND, REFUND, 9),
            ("fail", SLA, "No idea.", 1),
        ],
        average=5.25,
    )


def suggestion(run: Run, position: int, **fields: Any) -> Suggestion:
    values = {
        "title": f"Suggestion {position}",
        "category": Suggestion.Category.KNOWLEDGE,
        "description": f"Description {position}",
        "proposed_text": f"Fact number {position}.",
        "offline": True,
        **fields,
    }
    return Suggestion.objects.create(run=run, position=position, **values)


def edit_post(suggestions: list[Suggestion], **changes: dict[str, Any]) -> dict[str, Any]:
    """Step 1's POST data: every suggestion ticked and unchanged, except for `changes`
    keyed "s<index>" (e.g. s1={"selected": False}, s0={"title": "New"})."""
    data: dict[str, Any] = {
        "s-TOTAL_FORMS": str(len(suggestions)),
        "s-INITIAL_FORMS": str(len(suggestions)),
        "s-MIN_NUM_FORMS": "0",
        "s-MAX_NUM_FORMS": "1000",
    }
    for index, item in enumerate(suggestions):
        row = {"id": item.pk, "selected": True, "title": item.title, "category": item.category,
               "description": item.description, **changes.get(f"s{index}", {})}  # fmt: skip
        for name, value in row.items():
            if name == "selected":
                if value:
                    data[f"s-{index}-selected"] = "on"
            else:
                data[f"s-{index}-{name}"] = value
    return data


def leaked_versions() -> list[str]:
    """Every leak in the text of an agent version made by Apply: an expected answer of its agent's
    runs, or behaviour wording, that the version before it did not have (suggestions/leaks.py)."""
    from agents.models import AgentVersion
    from suggestions.affected import version_text
    from suggestions.leaks import ExpectedAnswer, text_leaks

    found = []
    for version in AgentVersion.objects.filter(pk__in=Suggestion.objects.values("applied_version")):
        before = AgentVersion.objects.filter(agent=version.agent_id, number__lt=version.number).order_by("-number")
        answers = [
            ExpectedAnswer(case_number=case.display_number, text=case.expected_answer)
            for case in RunCase.objects.filter(run__agent=version.agent_id).exclude(expected_answer="")
        ]
        for leak in text_leaks(version_text(version), answers=answers, known=version_text(before.first())):
            found.append(f"version {version.number} of {version.agent}: {leak.reason}")
    return found


@pytest.fixture(autouse=True)
def _no_applied_version_learns_its_test(request):
    """Every test of suggestions and Apply, offline or with the fake model: when it ends, no
    version that Apply made holds its dataset's expected answers (a leaked test)."""
    marker = request.node.get_closest_marker("django_db")
    if "transactional_db" in request.fixturenames or (marker and marker.kwargs.get("transaction")):
        request.getfixturevalue("transactional_db")  # torn down after this fixture's check
    elif marker or "db" in request.fixturenames:
        request.getfixturevalue("db")
    else:
        yield
        return
    yield
    assert leaked_versions() == []
