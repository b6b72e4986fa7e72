import pytest
from django.core.exceptions import ValidationError

from runs.models import Result, Run, RunCase
from suggestions.models import Suggestion
from suggestions.services import (
    SuggestionEdit,
    suggestion_apply,
    suggestion_change_request,
    suggestion_edits_validate,
    suggestion_generate,
    suggestion_rewrite_preview,
)
from tests.factories import AgentFactory


def _run(agent, outcomes, *, average=None):
    """A completed run whose results have the given (status, expected, actual, score) outcomes."""
    run = Run.objects.create(
        agent=agent,
        agent_version=agent.current_version,
        dataset_name="Support policy",
        status=Run.Status.COMPLETED,
        scoring={"pass_threshold": 7},
        total=len(outcomes),
        completed=len(outcomes),
        passed=sum(1 for o in outcomes if o[0] == "pass"),
        failed=sum(1 for o in outcomes if o[0] == "fail"),
        errored=sum(1 for o in outcomes if o[0] == "error"),
        average_score=average,
    )
    for position, (status, expected, actual, score) in enumerate(outcomes):
        case = RunCase.objects.create(
            run=run, position=position, question=f"Question {position}?", expected_answer=expected
        )
        Result.objects.create(run=run, case=case, status=status, actual_answer=actual, score=score)
    return run


from tests.suggestions.conftest import PHONE, PHONE_FACT, REFUND  # noqa: E402


@pytest.mark.django_db
def test_offline_generator_proposes_the_missing_knowledge(agent, no_llm):
    run = _run(agent, [("pass", REFUND, REFUND, 9), ("fail", PHONE, "I do not know.", 2)], average=5.5)

    suggestions = suggestion_generate(run_id=run.pk)

    assert len(suggestions) == 1
    suggestion = suggestions[0]
    assert suggestion.offline
    assert suggestion.category == Suggestion.Category.KNOWLEDGE
    assert "555 0100" in suggestion.proposed_text
    assert [c.position for c in suggestion.cases.all()] == [1]


@pytest.mark.django_db
def test_no_suggestions_when_everything_passed_well(agent, no_llm):
    run = _run(agent, [("pass", REFUND, REFUND, 9)], average=9.0)

    assert suggestion_generate(run_id=run.pk) == []


@pytest.mark.django_db
def test_a_weak_average_alone_asks_for_suggestions(agent, fake_llm):
    run = _run(agent, [("pass", REFUND, "Refunds within 30 days.", 7)], average=6.5)
    fake_llm.add_rule(
        task="suggest",
        json={
            "suggestions": [
                {"title": "Quote the policy fully", "category": "Instructions", "description": "Say it all."}
            ]
        },
    )

    suggestions = suggestion_generate(run_id=run.pk)

    assert [s.category for s in suggestions] == ["instructions"]
    assert not suggestions[0].offline


@pytest.mark.django_db
def test_model_suggestions_are_cut_merged_and_categories_checked(agent, fake_llm):
    run = _run(agent, [("fail", PHONE, "No idea.", 1), ("error", REFUND, "", None)], average=1.0)
    fake_llm.add_rule(
        task="suggest",
        json={
            "suggestions": [
                {"title": "Add phone support number", "category": "knowledge", "description": "d" * 2500, "cases": [0]},
                {"title": "Add the phone support number", "category": "Knowledge", "description": "dup", "cases": [1]},
                {"title": "T" * 300, "category": "astrology", "description": "Odd one."},
            ]
        },
    )

    suggestions = suggestion_generate(run_id=run.pk)

    assert len(suggestions) == 2
    merged, odd = suggestions
    assert sorted(c.position for c in merged.cases.all()) == [0, 1]
    assert len(merged.description) == 2000
    assert len(odd.title) == 200 and odd.title.endswith("…")
    assert odd.category == Suggestion.Category.OTHER
    # The second call does not ask the model again.
    assert suggestion_generate(run_id=run.pk) == suggestions
    assert fake_llm.count(task="suggest") == 1


@pytest.mark.django_db
def test_dialog_edits_are_what_gets_applied(agent, alice, no_llm):
    run = _run(agent, [("fail", PHONE, "No idea.", 1)], average=1.0)
    suggestion = suggestion_generate(run_id=run.pk)[0]

    edits = [SuggestionEdit(id=suggestion.pk, title="Add the hotline", category="knowledge", description="Hotline")]
    chosen = suggestion_edits_validate(run=run, edits=edits)
    preview = suggestion_rewrite_preview(run=run, suggestions=chosen)
    old, new = preview["knowledge"]
    assert old == agent.current_version.knowledge
    assert new.startswith(old) and "555 0100" in new

    version = suggestion_apply(run=run, user=alice, suggestions=chosen, fields={"knowledge": new + "\nEdited by me."})

    agent.refresh_from_db()
    assert agent.current_version == version
    assert version.number == 2
    assert version.knowledge.endswith("Edited by me.")
    suggestion.refresh_from_db()
    assert suggestion.title == "Add the hotline"
    assert suggestion.state == Suggestion.State.APPLIED and suggestion.applied_version == version


@pytest.mark.django_db
def test_the_model_rewrites_the_field(agent, fake_llm):
    run = _run(agent, [("fail", PHONE, "No idea.", 1)], average=1.0)
    fake_llm.add_rule(
        task="suggest",
        json={"suggestions": [{"title": "Be polite", "category": "guardrails", "description": "Always be polite."}]},
    )
    fake_llm.add_rule(task="rewrite", json={"text": "Always be polite."})
    chosen = suggestion_generate(run_id=run.pk)

    preview = suggestion_rewrite_preview(run=run, suggestions=chosen)

    assert preview == {"guardrails": ("", "Always be polite.")}


@pytest.mark.django_db
@pytest.mark.parametrize(
    "edit, message",
    [
        ({"title": ""}, "needs a title"),
        ({"title": "x" * 201}, "at most 200"),
        ({"description": "x" * 2001}, "at most 2000"),
        ({"category": "astrology"}, "Unknown category"),
    ],
)
def test_bad_edits_are_refused(agent, no_llm, edit, message):
    run = _run(agent, [("fail", PHONE, "No idea.", 1)], average=1.0)
    suggestion = suggestion_generate(run_id=run.pk)[0]
    fields = {"id": suggestion.pk, "title": "Fine", "category": "knowledge", "description": "Fine", **edit}

    with pytest.raises(ValidationError, match=message):
        suggestion_edits_validate(run=run, edits=[SuggestionEdit(**fields)])


@pytest.mark.django_db
def test_http_agents_get_a_change_request_instead_of_a_version(team, alice, no_llm):
    agent = AgentFactory(team=team, kind="http")
    run = _run(agent, [("fail", PHONE, "No idea.", 1)], average=1.0)
    suggestions = suggestion_generate(run_id=run.pk)

    with pytest.raises(ValidationError, match="change request"):
        suggestion_apply(run=run, user=alice, suggestions=suggestions, fields={"knowledge": "x"})
    markdown = suggestion_change_request(run=run, suggestions=suggestions)

    assert markdown.startswith(f"# Change request for {agent.name}")
    assert "555 0100" in markdown
    assert "Motivating cases: #1" in markdown


KNOWLEDGE = "\n".join(f"Policy line {n}: refunds, plans and support hours are described here." for n in range(24))


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("rewrite", "message"),
    [
        ("the whole rewritten section", "returned its instructions' own wording instead of a rewritten knowledge"),
        ("Refunds in 30 days.", "would remove most of it (19 of 1,645 characters left)"),
    ],
)
def test_a_rewrite_that_loses_the_field_is_refused_before_review(agent, alice, fake_llm, rewrite, message):
    from agents.services import agent_update

    agent = agent_update(agent=agent, user=alice, note="long knowledge", knowledge=KNOWLEDGE)
    run = _run(agent, [("fail", PHONE, "No idea.", 1)], average=1.0)
    fake_llm.add_rule(
        task="suggest",
        json={"suggestions": [{"title": "Hotline", "category": "knowledge", "description": "Add the hotline."}]},
    )
    fake_llm.add_rule(task="rewrite", json={"text": rewrite})
    chosen = suggestion_generate(run_id=run.pk)

    with pytest.raises(ValidationError) as caught:
        suggestion_rewrite_preview(run=run, suggestions=chosen)

    assert message in caught.value.messages[0]
    assert "Nothing was changed" in caught.value.messages[0]
    agent.refresh_from_db()
    assert agent.current_version.knowledge == KNOWLEDGE


@pytest.mark.django_db
def test_a_rewrite_that_keeps_the_field_and_adds_to_it_goes_to_review(agent, alice, fake_llm):
    from agents.services import agent_update

    agent = agent_update(agent=agent, user=alice, note="long knowledge", knowledge=KNOWLEDGE)
    run = _run(agent, [("fail", PHONE, "No idea.", 1)], average=1.0)
    fake_llm.add_rule(
        task="suggest",
        json={"suggestions": [{"title": "Hotline", "category": "knowledge", "description": "Add the hotline."}]},
    )
    fake_llm.add_rule(task="rewrite", json={"text": KNOWLEDGE + "\n" + PHONE_FACT})
    chosen = suggestion_generate(run_id=run.pk)

    preview = suggestion_rewrite_preview(run=run, suggestions=chosen)

    assert preview["knowledge"] == (KNOWLEDGE, KNOWLEDGE + "\n" + PHONE_FACT)


@pytest.mark.django_db
def test_applying_a_suggestion_keeps_the_agents_llm_timeout(team, alice, no_llm):
    known = "Refunds: 30 days.\n\nSupport is open 9-17 CET on weekdays."
    agent = AgentFactory(team=team, kind="llm", version__llm_timeout=45, version__knowledge=known)
    run = _run(agent, [("fail", PHONE, "No idea.", 1)], average=1.0)
    suggestion = suggestion_generate(run_id=run.pk)[0]
    chosen = suggestion_edits_validate(
        run=run, edits=[SuggestionEdit(id=suggestion.pk, title="Hotline", category="knowledge", description="x")]
    )

    version = suggestion_apply(
        run=run, user=alice, suggestions=chosen, fields={"knowledge": f"{known}\n\n{PHONE_FACT}"}
    )

    assert version.number == 2
    assert version.llm_timeout == 45
