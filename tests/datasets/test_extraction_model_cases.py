"""Cases the model reads out of prose are checked one by one (issue 33): a bad one is
dropped with a warning that names the model, the good ones are kept, and the user's file
is never blamed for what the model wrote."""

import pytest

from datasets.models import Dataset
from tests.datasets import files
from tests.datasets.extraction_helpers import case_rows, extract
from tests.datasets.extraction_helpers import media_root as media_root  # an autouse fixture

pytestmark = pytest.mark.django_db

# A 233-word-like prose page with rules and no rows: every case must come from the model.
PROSE = [
    [
        "Acme Cloud refund policy",
        "Refunds are available within 30 days of purchase.",
        "After 30 days no refund is possible, except for duplicate charges.",
        "Support is open 9-17 CET on weekdays and closed on public holidays.",
    ]
]
GOOD = {
    "question": "Can I get a refund 20 days after buying?",
    "expected_answer": "Yes, refunds are available within 30 days of purchase.",
    "source_span": "Refunds are available within 30 days of purchase.",
    "page": 1,
    "tests_rule": "Refund window",
}
MULTI_LINE_RULE = {
    "question": "Is support open on public holidays?",
    "expected_answer": "No, it is closed on public holidays.",
    "source_span": "Support is open 9-17 CET on weekdays and closed on public holidays.",
    "page": 1,
    "tests_rule": "Support hours\n- weekdays 9-17 CET\n- closed on public holidays",
}
PLACEHOLDER = {"question": "R1", "expected_answer": "{ {", "source_span": "x", "page": 1}


def test_a_model_case_with_a_multi_line_tests_rule_is_dropped_with_a_warning_naming_the_model(
    agent, fake_llm, settings
):
    fake_llm.add_rule(task="extract", json={"cases": [GOOD, MULTI_LINE_RULE, PLACEHOLDER]})

    dataset = extract(agent, "policy.pdf", files.pdf_bytes(PROSE))

    assert dataset.status == Dataset.Status.READY, dataset.failure_reason
    assert dataset.status_label == "Ready with warnings"
    assert case_rows(dataset) == [(GOOD["question"], GOOD["expected_answer"], "page 1")]
    where = {warning["where"] for warning in dataset.warnings}
    assert where == {f"Written by the model {settings.EVALSITE_LLM_MODEL}"}
    messages = [warning["message"] for warning in dataset.warnings]
    assert messages == [
        "A case the model read from page 1 was dropped: the case “Is support open on public holidays?”: "
        "Tests rule: Use a single line.",
        "A case the model read from page 1 was dropped: the question “R1”: it is too short to be a question.",
    ]
    assert "policy.pdf" not in " ".join(where)


def test_a_file_whose_every_model_case_is_bad_fails_saying_it_is_the_model_not_the_file(agent, fake_llm, settings):
    fake_llm.add_rule(task="extract", json={"cases": [MULTI_LINE_RULE, PLACEHOLDER]})

    dataset = extract(agent, "policy.pdf", files.pdf_bytes(PROSE))

    assert dataset.status == Dataset.Status.FAILED
    assert "Fix these rows" not in dataset.failure_reason
    assert dataset.failure_reason.startswith(
        f"The model {settings.EVALSITE_LLM_MODEL} wrote 2 test cases from the document and none could be used"
    )
    assert "not a problem in your file" in dataset.failure_reason
    assert "(for example the case “Is support open on public holidays?”: Tests rule: Use a single line). " in (
        dataset.failure_reason
    )


def test_an_answer_cut_by_the_servers_context_says_so_and_how_big_a_context_is_needed(agent, fake_llm, settings):
    # llama.cpp with --n_ctx 4096 and the 4,000-token extraction limit: the server lowers the
    # limit to what its context has left, and SmolLM2's answer never closes its JSON.
    fake_llm.set_server("llama.cpp")
    fake_llm.set_context_window(4096 * 4)
    fake_llm.add_rule(task="extract", runaway=True)

    dataset = extract(agent, "policy.pdf", files.pdf_bytes(PROSE))

    assert dataset.status == Dataset.Status.FAILED
    reason = dataset.failure_reason
    assert "before the 4000 allowed for reading a document: the model server's context was full" in reason
    assert "Start the server with a larger context" in reason and "--n_ctx 8192" in reason
    assert "raise EVALSITE_LLM_MAX_TOKENS_EXTRACT" not in reason


def test_an_answer_cut_at_evalsites_own_limit_still_says_to_raise_it(agent, fake_llm):
    fake_llm.add_rule(task="extract", runaway=True)

    dataset = extract(agent, "policy.pdf", files.pdf_bytes(PROSE))

    assert dataset.status == Dataset.Status.FAILED
    assert "raise EVALSITE_LLM_MAX_TOKENS_EXTRACT" in dataset.failure_reason
