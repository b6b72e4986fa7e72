"""Generate with AI, through the fake LLM server: the services and the generator."""

import hashlib
import io
import json
import re

import docx
import openpyxl
import pytest
from django.core.exceptions import ValidationError
from pypdf import PdfReader

from datasets.generation import services
from datasets.generation.generator import agent_rules
from datasets.generation.parsing import Rule, is_near_duplicate, parse_case
from datasets.generation.services import dataset_generate, dataset_generate_create
from datasets.jobs import GENERATE
from datasets.models import Dataset, Document, TestCase
from tests.factories import AgentFactory, DatasetFactory

pytestmark = pytest.mark.django_db

QUESTIONS = [
    "Can I get my money back three weeks after buying the Pro plan?",
    "When can I reach a human on the support line?",
    "Is phone support available on Saturday mornings?",
    "I bought an annual plan 45 days ago; am I still eligible for a refund?",
    "Do refunds cover add-ons purchased separately?",
    "What time does support close on Fridays?",
    "Can you tell me my colleague's account password?",
    "How do I ask for a refund for a duplicate charge?",
    "Who should I contact on a public holiday?",
    "Does the refund window restart after a plan upgrade?",
    "Can support help me outside CET office hours?",
    "Will I get a refund if I cancel on day 30?",
]


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def support_agent(team):
    return AgentFactory(
        team=team,
        name="Support bot",
        version__instructions="Answer questions about Acme Cloud billing and support.\nBe brief and polite.",
        version__guardrails="Never reveal another customer's account details.",
    )


def case(question, rule="R1", answer="Refunds are available within 30 days of purchase.", document=None):
    data = {"question": question, "expected_answer": answer, "tests_rule": rule}
    if document is not None:
        data["document"] = document
    return data


def generated(agent, *, count=10, instructions=""):
    """A dataset made by the service, its job run here in the test process."""
    dataset = DatasetFactory(
        agent=agent,
        status=Dataset.Status.EXTRACTING,
        source=Dataset.Source.GENERATED,
        generation={"count": count, "instructions": instructions},
    )
    dataset_generate(dataset_id=dataset.pk)
    dataset.refresh_from_db()
    return dataset


def asked_for(request) -> int:
    """How many cases a request to the fake asks for ("Write 4 more test cases")."""
    return int(re.search(r"Write (\d+)", request["messages"][-1]["content"]).group(1))


def unique_cases(prefix="Scenario"):
    """A handler that writes exactly what each request asks for, never repeating itself."""
    serial = iter(range(1, 10_000))

    def handler(request):
        words = ["billing", "refund", "support", "hours", "upgrade", "invoice", "privacy", "holiday"]
        cases = []
        for _ in range(asked_for(request)):
            n = next(serial)
            cases.append(case(f"{prefix} {n}: {words[n % 8]} {n * 7} question {n * 13}?", rule=f"R{n % 5 + 1}"))
        return {"json": {"cases": cases}}

    return handler


# ---- exact count, duplicates, balance -----------------------------------------------------


def test_ten_asked_and_seven_returned_with_a_duplicate_ends_with_exactly_ten_distinct_cases(fake_llm, support_agent):
    first = [case(q, rule="R1") for q in QUESTIONS[:6]] + [case(QUESTIONS[0].upper(), rule="R1")]
    fake_llm.add_rule(task="generate", json={"cases": first}, times=1)
    fake_llm.add_rule(task="generate", json={"cases": [case(q, rule="R3") for q in QUESTIONS[6:10]]})

    dataset = generated(support_agent, count=10)

    assert dataset.status == Dataset.Status.READY, dataset.failure_reason
    questions = list(dataset.cases.values_list("question", flat=True))
    assert len(questions) == 10
    assert len({q.lower() for q in questions}) == 10
    assert fake_llm.count(task="generate") == 2
    second_prompt = fake_llm.requests[1].messages[-1]["content"]
    assert "Write 4 more test cases." in second_prompt
    assert QUESTIONS[5] in second_prompt  # told what is already written


def test_near_duplicate_questions_are_dropped(fake_llm, support_agent):
    fake_llm.add_rule(
        task="generate",
        json={
            "cases": [
                case("What is the refund window for annual plans?"),
                case("What's the refund window for annual plans?"),  # near-duplicate: dropped
                case("Is there a refund window for monthly plans?"),
            ]
        },
        times=1,
    )
    fake_llm.add_rule(task="generate", json={"cases": [case("When does support open on Mondays?")]})

    dataset = generated(support_agent, count=3)

    assert dataset.status == Dataset.Status.READY
    assert sorted(dataset.cases.values_list("question", flat=True)) == [
        "Is there a refund window for monthly plans?",
        "What is the refund window for annual plans?",
        "When does support open on Mondays?",
    ]
    assert dataset.generation["dropped"] == {"duplicate": 1}


def test_cases_without_an_expected_answer_are_dropped_and_replaced(fake_llm, support_agent):
    fake_llm.add_rule(
        task="generate",
        json={"cases": [case(QUESTIONS[0]), case(QUESTIONS[1], answer="   "), case(QUESTIONS[2], answer="")]},
        times=1,
    )
    fake_llm.add_rule(task="generate", json={"cases": [case(QUESTIONS[3]), case(QUESTIONS[4])]})

    dataset = generated(support_agent, count=3)

    assert dataset.status == Dataset.Status.READY
    assert list(dataset.cases.values_list("question", flat=True)) == [QUESTIONS[0], QUESTIONS[3], QUESTIONS[4]]
    assert all(c.expected_answer for c in dataset.cases.all())


def test_more_cases_than_asked_are_cut_to_the_count_keeping_the_rules_balanced(fake_llm, support_agent):
    answer = [case(q, rule="R1") for q in QUESTIONS[:6]] + [case(QUESTIONS[6], rule="R4")]
    fake_llm.add_rule(task="generate", json={"cases": answer})

    dataset = generated(support_agent, count=4)

    assert dataset.cases.count() == 4
    assert dataset.cases.filter(tests_rule__startswith="R4 ·").count() == 1


def test_each_case_records_the_rule_it_tests_and_the_prompt_numbers_the_rules(fake_llm, support_agent):
    fake_llm.add_rule(task="generate", json={"cases": [case(QUESTIONS[6], rule="R3")]})

    dataset = generated(support_agent, count=1)

    assert dataset.cases.get().tests_rule == "R3 · Guardrails: Never reveal another customer's account details."
    prompt = fake_llm.requests[0].messages[-1]["content"]
    assert "R1 (Instructions): Answer questions about Acme Cloud billing and support." in prompt
    assert "R4 (Knowledge): Refunds are available within 30 days of purchase." in prompt
    system = fake_llm.requests[0].messages[0]["content"]
    assert "never invent" in system  # expected answers grounded in the agent's rules and knowledge


def test_the_shortfall_request_names_the_rules_with_the_fewest_cases(fake_llm, support_agent):
    fake_llm.add_rule(task="generate", json={"cases": [case(q, rule="R1") for q in QUESTIONS[:5]]}, times=1)
    fake_llm.add_rule(task="generate", json={"cases": [case(q, rule="R2") for q in QUESTIONS[5:10]]})

    dataset = generated(support_agent, count=10)

    assert dataset.status == Dataset.Status.READY
    second_prompt = fake_llm.requests[1].messages[-1]["content"]
    assert "test them first: R2, R3, R4, R5." in second_prompt


def test_the_first_request_asks_to_spread_cases_across_the_rules(fake_llm, support_agent):
    fake_llm.add_rule(task="generate", handler=unique_cases())

    generated(support_agent, count=10)

    assert "about 2 per rule, every rule at least once" in fake_llm.requests[0].messages[-1]["content"]


def test_additional_instructions_reach_the_model(fake_llm, support_agent):
    fake_llm.add_rule(task="generate", handler=unique_cases())

    generated(support_agent, count=2, instructions="Focus on edge cases related to pricing")

    assert "Focus on edge cases related to pricing" in fake_llm.requests[0].messages[-1]["content"]


@pytest.mark.parametrize("count", [1, 50])
def test_one_and_fifty_cases_are_generated_exactly(fake_llm, support_agent, count):
    fake_llm.add_rule(task="generate", handler=unique_cases())

    dataset = generated(support_agent, count=count)

    assert dataset.status == Dataset.Status.READY, dataset.failure_reason
    assert dataset.cases.count() == count
    assert fake_llm.count(task="generate", dataset=dataset.pk) == (count + 9) // 10  # batches of 10
    assert list(dataset.cases.values_list("position", flat=True)) == list(range(count))


def test_a_model_that_keeps_repeating_itself_fails_after_a_bounded_number_of_requests(fake_llm, support_agent):
    fake_llm.add_rule(task="generate", json={"cases": [case(q) for q in QUESTIONS[:3]]})

    dataset = generated(support_agent, count=10)

    assert dataset.status == Dataset.Status.FAILED
    assert dataset.failure_reason.startswith(
        "The model wrote 3 usable test cases of the 10 asked for, after 4 requests"
    )
    assert "9 repeated an earlier question" in dataset.failure_reason
    assert fake_llm.count(task="generate") == 4
    assert not dataset.cases.exists()


# ---- documents ------------------------------------------------------------------------------

TABLE_DOC = {
    "title": "Q1 support budget",
    "document_context": "Excel budget sheet",
    "table": {"columns": ["Month", "Tickets", "Cost"], "rows": [["January", 420, 1890.5], ["February", "388", "1702"]]},
}
PROSE_DOC = {
    "title": "Refund policy memo",
    "document_context": "Internal policy memo",
    "paragraphs": ["## Purpose", "Refunds are granted within 30 days of purchase.", "Add-ons are refunded pro rata."],
}
INVOICE_DOC = {
    "title": "Invoice INV-2025-017",
    "document_context": "Customer invoice (PDF)",
    "formal": {
        "kind": "invoice",
        "parties": [
            {"role": "From", "name": "Acme Cloud Ltd", "details": ["1 Main St"]},
            {"role": "Bill to", "name": "Globex"},
        ],
        "fields": [{"label": "Invoice number", "value": "INV-2025-017"}, {"label": "Issued", "value": "2025-02-01"}],
        "line_items": {"columns": ["Description", "Qty", "Amount"], "rows": [["Pro plan", 2, "€98.00"]]},
        "totals": [{"label": "Total", "value": "€98.00"}],
    },
}


def with_documents(fake_llm, support_agent):
    fake_llm.add_rule(
        task="generate",
        json={
            "cases": [
                case("How much did support cost in February?", answer="1,702.", document=TABLE_DOC),
                case("Are add-ons refunded under this memo?", answer="Yes, pro rata.", document=PROSE_DOC),
                case("Is this invoice still refundable?", answer="Within 30 days of 2025-02-01.", document=INVOICE_DOC),
                case("When is support open?", answer="9-17 CET on weekdays."),
            ]
        },
    )
    return generated(support_agent, count=4)


def stored(document: Document) -> bytes:
    with document.file.open("rb") as handle:
        return handle.read()


def test_a_tabular_document_is_written_as_xlsx_and_attached_to_its_case(fake_llm, support_agent):
    dataset = with_documents(fake_llm, support_agent)

    case_ = dataset.cases.get(question__startswith="How much did support cost")
    document = case_.documents.get()
    assert (document.file_type, document.original_name, document.generated) == ("xlsx", "Q1 support budget.xlsx", True)
    assert document.dataset_id == dataset.pk and document.team_id == support_agent.team_id
    assert case_.document_context == "Excel budget sheet"
    content = stored(document)
    assert document.size == len(content)
    assert document.sha256 == hashlib.sha256(content).hexdigest()
    sheet = openpyxl.load_workbook(io.BytesIO(content)).active
    assert [[c.value for c in row] for row in sheet.iter_rows()] == [
        ["Month", "Tickets", "Cost"],
        ["January", 420, 1890.5],
        ["February", 388, 1702],
    ]
    assert "February | 388 | 1702" in document.text


def test_prose_is_written_as_docx(fake_llm, support_agent):
    dataset = with_documents(fake_llm, support_agent)

    document = dataset.cases.get(question__startswith="Are add-ons").documents.get()
    assert (document.file_type, document.original_name) == ("docx", "Refund policy memo.docx")
    paragraphs = [p.text for p in docx.Document(io.BytesIO(stored(document))).paragraphs]
    assert paragraphs == ["Refund policy memo", "Purpose", PROSE_DOC["paragraphs"][1], PROSE_DOC["paragraphs"][2]]
    assert "Add-ons are refunded pro rata." in document.text


def test_an_invoice_is_written_as_pdf(fake_llm, support_agent):
    dataset = with_documents(fake_llm, support_agent)

    document = dataset.cases.get(question__startswith="Is this invoice").documents.get()
    assert (document.file_type, document.original_name) == ("pdf", "Invoice INV-2025-017.pdf")
    text = PdfReader(io.BytesIO(stored(document))).pages[0].extract_text()
    for expected in ("INVOICE", "Acme Cloud Ltd", "Globex", "INV-2025-017", "Pro plan", "€98.00"):
        assert expected in text
    assert "Invoice number: INV-2025-017" in document.text


def test_a_case_without_a_document_has_none(fake_llm, support_agent):
    dataset = with_documents(fake_llm, support_agent)

    plain = dataset.cases.get(question="When is support open?")
    assert not plain.documents.exists() and plain.document_context == ""
    assert Document.objects.filter(dataset=dataset).count() == 3


def test_a_case_whose_document_has_no_content_is_dropped(fake_llm, support_agent):
    empty = {"title": "Empty sheet", "table": {"columns": ["A"], "rows": []}}
    fake_llm.add_rule(task="generate", json={"cases": [case(QUESTIONS[0], document=empty)]}, times=1)
    fake_llm.add_rule(task="generate", json={"cases": [case(QUESTIONS[1])]})

    dataset = generated(support_agent, count=1)

    assert list(dataset.cases.values_list("question", flat=True)) == [QUESTIONS[1]]
    assert dataset.generation["dropped"] == {"unusable document": 1}


# ---- failures leave nothing behind ------------------------------------------------------------


def files_in(root):
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_broken_json_twice_fails_the_dataset_with_a_reason_and_leaves_nothing(fake_llm, support_agent, media_root):
    fake_llm.add_rule(task="generate", json={"cases": [case(q, document=TABLE_DOC) for q in QUESTIONS[:5]]}, times=1)
    fake_llm.add_rule(task="generate", broken_json=True, json={"cases": [case(QUESTIONS[6])]})

    dataset = generated(support_agent, count=10)

    assert dataset.status == Dataset.Status.FAILED
    assert dataset.failure_reason.startswith("The model could not write the test cases.")
    assert "not valid JSON" in dataset.failure_reason
    # First batch; the broken answer and its repair; then once more, changed: half the cases, warmer.
    assert fake_llm.count(task="generate") == 5
    assert [r.body.get("temperature") for r in fake_llm.requests] == [None, None, None, 0.8, 0.8]
    assert not TestCase.objects.filter(dataset=dataset).exists()
    assert not Document.objects.exists()
    assert files_in(media_root) == []


def test_a_provider_error_fails_the_dataset_with_a_readable_reason(fake_llm, support_agent, settings):
    settings.EVALSITE_LLM_RETRIES = 0
    fake_llm.add_rule(task="generate", status=401)

    dataset = generated(support_agent, count=5)

    assert dataset.status == Dataset.Status.FAILED
    assert dataset.failure_reason == (
        "The model could not write the test cases. The model provider rejected the API key (401)."
    )


def test_a_model_that_never_answers_is_cut_off_and_fails_the_dataset(fake_llm, support_agent, settings):
    settings.EVALSITE_LLM_TIMEOUT = 0.2  # generation allows three times the usual call timeout
    settings.EVALSITE_LLM_RETRIES = 0
    fake_llm.add_rule(task="generate", hang=True)

    dataset = generated(support_agent, count=5)

    assert dataset.status == Dataset.Status.FAILED
    assert dataset.failure_reason == "The model could not write the test cases. The model did not answer within 0.6 s."


def test_a_failing_final_write_removes_the_files_already_written(fake_llm, support_agent, media_root, monkeypatch):
    fake_llm.add_rule(task="generate", json={"cases": [case(QUESTIONS[0], document=TABLE_DOC), case(QUESTIONS[1])]})

    def broken_bulk_create(**kwargs):
        assert files_in(media_root), "the files are written before the rows"
        raise RuntimeError("database went away")

    monkeypatch.setattr(services, "case_bulk_create", broken_bulk_create)

    with pytest.raises(RuntimeError):
        generated(support_agent, count=2)

    assert files_in(media_root) == []
    assert not Document.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_dataset_deleted_while_the_model_writes_gets_no_rows_and_no_files(fake_llm, support_agent, media_root):
    dataset = DatasetFactory(
        agent=support_agent, status=Dataset.Status.EXTRACTING, source=Dataset.Source.GENERATED, generation={"count": 1}
    )

    def delete_then_answer(request):
        from django.db import connection

        Dataset.objects.filter(pk=dataset.pk).delete()  # the user deletes it meanwhile
        connection.close()  # this runs in the fake server's thread, on its own connection
        return {"json": {"cases": [case(QUESTIONS[0], document=TABLE_DOC)]}}

    fake_llm.add_rule(task="generate", handler=delete_then_answer)

    dataset_generate(dataset_id=dataset.pk)

    assert not Dataset.objects.exists()
    assert not TestCase.objects.exists() and not Document.objects.exists()
    assert files_in(media_root) == []


def test_an_agent_without_rules_fails_with_a_reason(fake_llm, team):
    empty = AgentFactory(team=team, version__instructions="", version__knowledge="")

    dataset = generated(empty, count=3)

    assert dataset.status == Dataset.Status.FAILED
    assert "no instructions, skills, guardrails or knowledge" in dataset.failure_reason
    assert fake_llm.count() == 0


# ---- the job's claim ------------------------------------------------------------------------


def test_a_settled_dataset_is_not_generated_again(fake_llm, support_agent):
    fake_llm.add_rule(task="generate", handler=unique_cases())
    dataset = generated(support_agent, count=2)

    dataset_generate(dataset_id=dataset.pk)  # a redelivered message

    assert dataset.cases.count() == 2
    assert fake_llm.count(task="generate") == 1


def test_every_delivery_is_counted_and_one_past_the_limit_fails_the_dataset(fake_llm, support_agent, settings):
    settings.EVALSITE_EXTRACT_MAX_ATTEMPTS = 3
    settings.EVALSITE_LLM_RETRIES = 0
    dataset = DatasetFactory(
        agent=support_agent, status=Dataset.Status.EXTRACTING, source=Dataset.Source.GENERATED,
        generation={"count": 2}, job_attempts=2,
    )  # fmt: skip
    fake_llm.add_rule(task="generate", status=500)  # this delivery fails: the count is what matters

    dataset_generate(dataset_id=dataset.pk)  # the third delivery still runs
    dataset.refresh_from_db()
    assert dataset.job_attempts == 3 and fake_llm.count(task="generate") > 0

    Dataset.objects.filter(pk=dataset.pk).update(status=Dataset.Status.EXTRACTING)  # as if the worker died
    calls = fake_llm.count()
    dataset_generate(dataset_id=dataset.pk)  # a fourth delivery gives up without asking the model

    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.FAILED
    assert "stopped the worker 3 times" in dataset.failure_reason
    assert fake_llm.count() == calls


def test_an_unexpected_error_in_the_task_fails_the_dataset_with_a_plain_reason(fake_llm, support_agent, monkeypatch):
    from datasets.tasks import dataset_generate as dataset_generate_task

    dataset = DatasetFactory(
        agent=support_agent, status=Dataset.Status.EXTRACTING, source=Dataset.Source.GENERATED, generation={"count": 2}
    )

    def broken(**kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr(services, "generate_cases", broken)

    dataset_generate_task.apply(args=[dataset.pk])

    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.FAILED
    assert dataset.failure_reason == GENERATE.unexpected_reason
    assert "KeyError" not in dataset.failure_reason


def test_a_deleted_dataset_is_skipped(fake_llm):
    dataset_generate(dataset_id=999_999)

    assert fake_llm.count() == 0


# ---- creating the dataset -----------------------------------------------------------------


def test_create_makes_an_extracting_dataset_and_enqueues_the_job_after_commit(
    fake_llm, support_agent, alice, django_capture_on_commit_callbacks, tasks_run_here
):
    fake_llm.add_rule(task="generate", handler=unique_cases())
    with django_capture_on_commit_callbacks() as callbacks:
        dataset = dataset_generate_create(
            agent=support_agent, user=alice, name="  Pricing edge cases ", count=12, instructions=" Focus on pricing "
        )
    assert tasks_run_here == []  # nothing before the commit
    assert len(callbacks) == 1
    callbacks[0]()

    assert tasks_run_here == [("datasets.tasks.dataset_generate", (dataset.pk,), {})]
    assert dataset.name == "Pricing edge cases"
    assert (dataset.status, dataset.source, dataset.source_name) == ("extracting", "generated", "Generated with AI")
    assert dataset.generation == {"count": 12, "instructions": "Focus on pricing"}
    assert dataset.created_by == alice
    dataset.refresh_from_db()  # the job ran on this dataset: it wrote the cases
    assert (dataset.status, dataset.cases.count()) == ("ready", 12)


@pytest.mark.parametrize("count", [1, 50])
def test_create_accepts_one_and_fifty(fake_llm, support_agent, alice, count):
    dataset = dataset_generate_create(
        agent=support_agent, user=alice, name=f"Set {count}", count=count, instructions=""
    )

    assert dataset.generation["count"] == count


@pytest.mark.parametrize("count", [0, 51])
def test_create_refuses_zero_and_fifty_one(fake_llm, support_agent, alice, count):
    with pytest.raises(ValidationError) as error:
        dataset_generate_create(agent=support_agent, user=alice, name="Too many", count=count, instructions="")

    assert error.value.message_dict == {"count": ["Choose from 1 to 50 test cases."]}
    assert not Dataset.objects.exists()


def test_create_refuses_without_a_model(support_agent, alice, settings):
    settings.EVALSITE_LLM_MODEL = ""

    with pytest.raises(ValidationError) as error:
        dataset_generate_create(agent=support_agent, user=alice, name="No model", count=5, instructions="")

    assert "needs a model, and none is configured" in error.value.messages[0]
    assert not Dataset.objects.exists()


def test_create_refuses_a_name_the_agent_already_uses(fake_llm, support_agent, alice):
    DatasetFactory(agent=support_agent, name="Smoke")

    with pytest.raises(ValidationError) as error:
        dataset_generate_create(agent=support_agent, user=alice, name="smoke", count=5, instructions="")

    assert "name" in error.value.message_dict


def test_create_refuses_an_agent_without_rules(fake_llm, team, alice):
    empty = AgentFactory(team=team, version__instructions="", version__knowledge="")

    with pytest.raises(ValidationError, match="no instructions, skills, guardrails or knowledge"):
        dataset_generate_create(agent=empty, user=alice, name="Nothing", count=5, instructions="")


# ---- the generator's pieces ---------------------------------------------------------------


def test_agent_rules_number_lines_sentences_and_knowledge_paragraphs(support_agent):
    version = support_agent.current_version
    version.instructions = "Tone:\n- Be brief.\n- Cite the policy."
    version.skills = "Explains invoices. Issues refunds within policy."
    version.knowledge = "Refunds: 30 days.\n\nSupport: 9-17 CET."

    rules = agent_rules(version)

    assert [(r.number, r.section, r.text) for r in rules] == [
        (1, "Instructions", "Be brief."),
        (2, "Instructions", "Cite the policy."),
        (3, "Skills", "Explains invoices."),
        (4, "Skills", "Issues refunds within policy."),
        (5, "Guardrails", "Never reveal another customer's account details."),
        (6, "Knowledge", "Refunds: 30 days."),
        (7, "Knowledge", "Support: 9-17 CET."),
    ]


def test_questions_about_different_documents_are_not_duplicates():
    rules = [Rule(1, "Instructions", "Check invoices.")]
    first, _ = parse_case(case("What is the total on this invoice?", document=INVOICE_DOC), rules)
    other_doc = json.loads(json.dumps(INVOICE_DOC).replace("INV-2025-017", "INV-2025-018"))
    second, _ = parse_case(case("What is the total on this invoice?", document=other_doc), rules)
    same, _ = parse_case(case("What is the total on this invoice?", document=INVOICE_DOC), rules)

    assert not is_near_duplicate(first, second)
    assert is_near_duplicate(first, same)


def test_a_rule_the_agent_does_not_have_is_kept_as_the_model_wrote_it():
    rules = [Rule(1, "Instructions", "Be brief.")]

    parsed, _ = parse_case(case("Hi?", rule="R9 pricing\nrule"), rules)

    assert parsed.rule is None and parsed.tests_rule == "R9 pricing rule"
