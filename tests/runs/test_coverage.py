"""Rule coverage: rules split with stable ids, cases mapped to them (by words, or by the model),
the coverage page's order and verdicts, generation for uncovered rules, and rules marked
after a suggestion made a new version."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents.models import AgentVersion
from agents.rules import rule_id, rules_changed, rules_split
from datasets.coverage import coverage_for, lexical_links
from datasets.models import Dataset, RuleMap, TestCase
from runs.models import Result, Run, RunCase
from runs.reports.coverage import coverage_view
from tests.factories import AgentFactory, DatasetFactory, TestCaseFactory

pytestmark = pytest.mark.django_db

INSTRUCTIONS = """You are the billing assistant of Acme Cloud.
Tone:
- Answer in two sentences at most. Be polite.
- Quote prices in euros, never in dollars, and say
  whether VAT is included.
"""
GUARDRAILS = "Never reveal another customer's invoice. Refuse to change a plan without the account owner's consent."
KNOWLEDGE = "## Refunds\nRefunds are possible within 30 days of purchase.\n\nThe Pro plan costs 20 EUR per month."


@pytest.fixture
def billing_agent(team):
    return AgentFactory(
        team=team, version__instructions=INSTRUCTIONS, version__guardrails=GUARDRAILS, version__knowledge=KNOWLEDGE
    )


def _texts(version):
    return [(rule.section, rule.text) for rule in rules_split(version)]


# ---- splitting --------------------------------------------------------------------------


def test_rules_are_sentences_and_list_items_with_headings_as_topics(billing_agent):
    rules = rules_split(billing_agent.current_version)
    assert [(rule.section, rule.text) for rule in rules] == [
        ("Instructions", "You are the billing assistant of Acme Cloud."),
        ("Instructions", "Answer in two sentences at most."),
        ("Instructions", "Be polite."),
        ("Instructions", "Quote prices in euros, never in dollars, and say whether VAT is included."),  # wrapped
        ("Guardrails", "Never reveal another customer's invoice."),
        ("Guardrails", "Refuse to change a plan without the account owner's consent."),
        ("Knowledge", "Refunds are possible within 30 days of purchase."),
        ("Knowledge", "The Pro plan costs 20 EUR per month."),
    ]
    assert rules[1].topic == "Tone" and rules[6].topic == "Refunds"
    assert rules[4].id.startswith("G-") and rules[6].id.startswith("K-")


def test_a_rule_keeps_its_id_in_every_version_and_changes_are_found(billing_agent):
    first = billing_agent.current_version
    second = AgentVersion.objects.create(
        agent=billing_agent,
        number=2,
        instructions=INSTRUCTIONS,
        guardrails=GUARDRAILS + " Never promise a refund after 30 days.",
        knowledge=KNOWLEDGE.replace("20 EUR", "25 EUR"),
    )
    assert [r.id for r in rules_split(first)] == [r.id for r in rules_split(first)]  # stable when split again
    changed = rules_changed(second, first)
    by_id = {rule.id: rule.text for rule in rules_split(second)}
    assert sorted(by_id[i] for i in changed) == [
        "Never promise a refund after 30 days.",
        "The Pro plan costs 25 EUR per month.",
    ]
    assert rule_id("G", "Never reveal another customer's invoice.") == rule_id(
        "G", "never reveal another customers invoice"
    )


# ---- mapping ----------------------------------------------------------------------------


def test_cases_map_to_the_rules_they_share_words_with_or_name(billing_agent):
    dataset = DatasetFactory(agent=billing_agent)
    refund = TestCaseFactory(
        dataset=dataset, question="Can I still get refunds 20 days after purchase?", expected_answer=""
    )
    invoice = TestCaseFactory(dataset=dataset, question="Show me the invoice of another customer", expected_answer="")
    weather = TestCaseFactory(dataset=dataset, question="What is the weather like?", expected_answer="")
    named = TestCaseFactory(
        dataset=dataset,
        question="Hello",
        expected_answer="",
        tests_rule="R6 · Guardrails: Refuse to change a plan without the account owner's consent.",
    )
    rules = {rule.text: rule.id for rule in rules_split(billing_agent.current_version)}

    links = lexical_links([refund, invoice, weather, named], rules_split(billing_agent.current_version))

    assert links[refund.pk] == [rules["Refunds are possible within 30 days of purchase."]]
    assert links[invoice.pk] == [rules["Never reveal another customer's invoice."]]
    assert links[weather.pk] == []
    assert links[named.pk][0] == rules["Refuse to change a plan without the account owner's consent."]


def test_the_models_map_replaces_the_word_map_and_new_cases_fall_back(
    client_alice, billing_agent, fake_llm, tasks_run_here, django_capture_on_commit_callbacks
):
    dataset = DatasetFactory(agent=billing_agent)
    polite = TestCaseFactory(dataset=dataset, question="Hi, who are you?", expected_answer="")
    fake_llm.add_rule(
        task="coverage",
        contains="atomic, testable rules",
        json={
            "rules": [
                {"section": "Instructions", "text": "The agent introduces itself as Acme Cloud's billing assistant."}
            ]
        },
    )
    statement = rule_id("I", "The agent introduces itself as Acme Cloud's billing assistant.")
    fake_llm.add_rule(
        task="coverage", contains="map test cases", json={"cases": [{"case": 1, "rules": [statement, "X-nope"]}]}
    )
    url = reverse("coverage:map", args=[billing_agent.pk, dataset.pk])

    with django_capture_on_commit_callbacks(execute=True):
        response = client_alice.post(url, {"version": billing_agent.current_version_id})

    assert response.status_code == 302
    rule_map = RuleMap.objects.get(dataset=dataset)
    assert rule_map.status == RuleMap.Status.DONE and rule_map.tokens > 0
    assert fake_llm.count(task="coverage") == 2
    later = TestCaseFactory(dataset=dataset, question="Quote the Pro plan in dollars please", expected_answer="")
    coverage = coverage_for(dataset=dataset, version=billing_agent.current_version)
    assert coverage.method == "model"
    assert coverage.links[polite.pk] == [statement]  # the unknown id is dropped
    assert coverage.links[later.pk] == []  # matched by words against the model's statements
    page = client_alice.get(reverse("datasets:detail", args=[billing_agent.pk, dataset.pk]))
    assert f'#rule-{statement}"'.encode() in page.content  # a chip on the case


def test_mapping_without_a_model_says_so(client_alice, billing_agent, no_llm):
    dataset = DatasetFactory(agent=billing_agent)
    TestCaseFactory(dataset=dataset)
    response = client_alice.post(reverse("coverage:map", args=[billing_agent.pk, dataset.pk]), follow=True)
    assert b"Mapping with AI needs a model" in response.content
    assert not RuleMap.objects.exists()
    assert b"Mapped by word overlap" in response.content


# ---- the coverage page ------------------------------------------------------------------


def _run(agent, dataset, version, verdicts, purpose=Run.Purpose.RUN):
    run = Run.objects.create(
        agent=agent, agent_version=version, dataset=dataset, dataset_name=dataset.name,
        status=Run.Status.COMPLETED, purpose=purpose,
    )  # fmt: skip
    for position, (case, status) in enumerate(verdicts.items()):
        run_case = RunCase.objects.create(run=run, position=position, source_case=case, question=case.question)
        Result.objects.create(run=run, case=run_case, status=status, score=9 if status == "pass" else 2)
    return run


def test_the_page_lists_untested_rules_first_with_the_latest_verdicts(client_alice, billing_agent):
    dataset = DatasetFactory(agent=billing_agent, name="Billing")
    refund = TestCaseFactory(
        dataset=dataset, question="Can I get refunds after purchase of 20 days?", expected_answer=""
    )
    refund_2 = TestCaseFactory(dataset=dataset, question="Refunds possible 40 days after purchase?", expected_answer="")
    price = TestCaseFactory(dataset=dataset, question="What does the Pro plan cost per month?", expected_answer="")
    version = billing_agent.current_version
    _run(billing_agent, dataset, version, {refund: "fail", refund_2: "pass", price: "fail"})
    _run(billing_agent, dataset, version, {refund: "pass"})  # newer: the refund case now passes

    view = coverage_view(dataset=dataset, version=version)

    texts = [row.rule.text for row in view.rows]
    assert texts[-2:] == ["The Pro plan costs 20 EUR per month.", "Refunds are possible within 30 days of purchase."]
    assert all(not row.covered for row in view.rows[:-2])  # the six untested rules first, in written order
    refunds = view.rows[-1]
    assert {(item.case.pk, item.verdict) for item in refunds.cases} == {(refund.pk, "pass"), (refund_2.pk, "pass")}
    page = client_alice.get(reverse("coverage:page", args=[billing_agent.pk, dataset.pk]))
    assert page.status_code == 200
    assert b"6 rules no case tests" in page.content
    assert page.content.index(b"Be polite.") < page.content.index(b"Refunds are possible within 30 days")


def test_after_a_suggestion_the_new_rules_are_marked_with_the_verify_runs_result(client_alice, billing_agent):
    dataset = DatasetFactory(agent=billing_agent)
    first = billing_agent.current_version
    late = TestCaseFactory(
        dataset=dataset, question="Will you promise a refund 40 days after buying?", expected_answer=""
    )
    baseline = _run(billing_agent, dataset, first, {late: "fail"})
    applied = AgentVersion.objects.create(
        agent=billing_agent, number=2, instructions=INSTRUCTIONS, knowledge=KNOWLEDGE,
        guardrails=GUARDRAILS + " Never promise a refund after 30 days.", note="Applied 1 suggestion",
    )  # fmt: skip
    verify = _run(billing_agent, dataset, applied, {late: "pass"}, purpose=Run.Purpose.VERIFY)
    verify.parent = baseline
    verify.save()

    page = client_alice.get(
        reverse("coverage:page", args=[billing_agent.pk, dataset.pk]), {"version": applied.pk, "run": verify.pk}
    )

    view = page.context["view"]
    [changed] = [row for row in view.rows if row.changed]
    assert changed.rule.text == "Never promise a refund after 30 days."
    assert [(item.case.pk, item.verdict) for item in changed.cases] == [(late.pk, "pass")]
    assert b"New or changed since v1" in page.content
    assert f"Run #{verify.pk} · Verification".encode() in page.content


# ---- generating for the uncovered rules -----------------------------------------------


def test_generating_for_uncovered_rules_appends_exactly_the_count_without_duplicates(
    client_alice, billing_agent, fake_llm, tasks_run_here, django_capture_on_commit_callbacks, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path
    dataset = DatasetFactory(agent=billing_agent)
    existing = TestCaseFactory(
        dataset=dataset, question="Can I get refunds 20 days after purchase?", expected_answer=""
    )
    view = coverage_view(dataset=dataset, version=billing_agent.current_version)
    uncovered = [rule.text for rule in view.uncovered]
    assert "Refunds are possible within 30 days of purchase." not in uncovered
    written = [
        {"question": existing.question, "expected_answer": "Yes.", "tests_rule": "R1"},  # repeats the dataset
        *[
            {
                "question": f"Question {n} about {text}",
                "expected_answer": f"As the rule says: {text}",
                "tests_rule": f"R{n}",
            }
            for n, text in enumerate(uncovered, start=1)
        ],
    ]
    fake_llm.add_rule(task="generate", json={"cases": written})

    with django_capture_on_commit_callbacks(execute=True):
        response = client_alice.post(
            reverse("coverage:generate", args=[billing_agent.pk, dataset.pk]),
            {"count": 5, "version": billing_agent.current_version_id},
        )

    assert response.status_code == 302
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.READY
    assert dataset.cases.count() == 6  # the one it had and exactly five new ones
    assert TestCase.objects.filter(dataset=dataset, question=existing.question).count() == 1
    prompt = fake_llm.requests[0].messages[-1]["content"]
    assert "Refunds are possible within 30 days" not in prompt  # only the uncovered rules are asked for
    assert all(text[:40] in prompt for text in uncovered)
    after = coverage_view(dataset=dataset, version=billing_agent.current_version)
    assert len(after.uncovered) == len(uncovered) - 5
    assert dataset.generation["added"] == [{"count": 5, "rules": [rule.id for rule in view.uncovered]}]


def test_a_failed_generation_keeps_the_dataset_and_its_cases(
    client_alice, billing_agent, fake_llm, tasks_run_here, django_capture_on_commit_callbacks
):
    dataset = DatasetFactory(agent=billing_agent)
    TestCaseFactory(dataset=dataset)
    fake_llm.add_rule(task="generate", status=400, error="This model's maximum context length is 10 tokens.")
    with django_capture_on_commit_callbacks(execute=True):
        client_alice.post(reverse("coverage:generate", args=[billing_agent.pk, dataset.pk]), {"count": 2})
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.READY
    assert dataset.cases.count() == 1
    assert dataset.notice.startswith("Generating more test cases failed:")
    assert "more" not in dataset.generation


def test_generating_needs_a_model_and_a_ready_dataset(client_alice, billing_agent, no_llm):
    dataset = DatasetFactory(agent=billing_agent)
    response = client_alice.post(
        reverse("coverage:generate", args=[billing_agent.pk, dataset.pk]), {"count": 2}, follow=True
    )
    assert b"Generating test cases needs a model" in response.content
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.READY
