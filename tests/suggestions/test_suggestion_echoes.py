"""A model that answers with the prompt's own field descriptions gets no suggestion from
them: each is dropped with a note the panel shows (issue 33: Gemma 3 270M did this)."""

import pytest
from django.urls import reverse

from suggestions.models import SuggestionGeneration
from suggestions.services import suggestion_generate

pytestmark = pytest.mark.django_db

ECHO = {
    "title": "short imperative title",
    "category": "...",
    "description": "what to change and why, citing the cases",
    "proposed_text": "text to add, if the change is an addition",
    "cases": [1],
}
REAL = {
    "title": "Add the phone support number to the knowledge",
    "category": "knowledge",
    "description": "Case 1 failed because the agent lacked the number.",
    "proposed_text": "Phone support: +1 555 0100 for Enterprise customers.",
    "cases": [1],
}


def test_a_suggestion_that_repeats_the_schema_description_is_dropped_with_a_note(failing_run, fake_llm):
    fake_llm.add_rule(task="suggest", json={"suggestions": [ECHO, REAL]})

    created = suggestion_generate(run_id=failing_run.pk)

    assert [suggestion.title for suggestion in created] == [REAL["title"]]
    generation = SuggestionGeneration.objects.get(run=failing_run)
    assert generation.notes == [
        "A suggestion was dropped: the model answered “short imperative title”, the instructions' own "
        "description of the field, not a change to make."
    ]


def test_placeholder_descriptions_are_dropped_too(failing_run, fake_llm):
    fake_llm.add_rule(task="suggest", json={"suggestions": [{**REAL, "description": "<description>"}]})

    assert suggestion_generate(run_id=failing_run.pk) == []
    assert "“<description>”" in SuggestionGeneration.objects.get(run=failing_run).notes[0]


def test_the_panel_shows_the_note(failing_run, fake_llm, client_alice):
    fake_llm.add_rule(task="suggest", json={"suggestions": [ECHO]})
    suggestion_generate(run_id=failing_run.pk)

    url = reverse("runs:detail", args=[failing_run.agent_id, failing_run.pk])
    page = client_alice.get(url, {"tab": "suggestions"}).content.decode()

    assert "A suggestion was dropped: the model answered “short imperative title”" in page
