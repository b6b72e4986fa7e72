import pytest

from runs.judging.scoring import (
    BANDS,
    Evaluation,
    JudgeError,
    context_row,
    judge,
    judge_prompt,
    offline_judgment,
    rouge_l,
    score_case,
    trajectory_match,
    verdict_for,
)

LOOKUP = {"name": "lookup_order", "args": {"order_id": "A-1"}}
REFUND = {"name": "issue_refund", "args": {"amount": 79}}
EMAIL = {"name": "send_email", "args": {"to": "a@example.com"}}


@pytest.mark.parametrize(
    ("mode", "actual", "expected", "matches"),
    [
        ("strict", [LOOKUP, REFUND], [LOOKUP, REFUND], True),
        ("strict", [REFUND, LOOKUP], [LOOKUP, REFUND], False),
        ("strict", [LOOKUP], [LOOKUP, REFUND], False),
        ("unordered", [REFUND, LOOKUP], [LOOKUP, REFUND], True),
        ("unordered", [REFUND, LOOKUP, EMAIL], [LOOKUP, REFUND], False),
        ("superset", [EMAIL, LOOKUP, REFUND], [LOOKUP, REFUND], True),
        ("superset", [EMAIL, LOOKUP], [LOOKUP, REFUND], False),
        ("subset", [LOOKUP], [LOOKUP, REFUND], True),
        ("subset", [LOOKUP, EMAIL], [LOOKUP, REFUND], False),
        ("subset", [LOOKUP, LOOKUP], [LOOKUP, REFUND], False),
    ],
)
def test_each_trajectory_mode_passes_and_fails(mode, actual, expected, matches):
    assert trajectory_match(actual, expected, mode, check_args=False)[0] is matches


def test_arguments_are_checked_only_when_asked():
    actual = [{"name": "lookup_order", "args": {"order_id": "B-9"}}]
    assert trajectory_match(actual, [LOOKUP], "strict", check_args=False) == (True, "")
    matched, problem = trajectory_match(actual, [LOOKUP], "strict", check_args=True)
    assert not matched
    assert problem == 'Call 1 should have been lookup_order(order_id="A-1").'


def test_argument_checks_ignore_case_spacing_and_extra_arguments():
    actual = [{"name": "Lookup_Order", "args": {"order_id": " a-1 ", "verbose": True}}]
    assert trajectory_match(actual, [LOOKUP], "strict", check_args=True)[0]
    assert trajectory_match([{"name": "issue_refund", "args": {"amount": "79"}}], [REFUND], "strict", check_args=True)[
        0
    ]


def test_unordered_matching_with_arguments_finds_the_right_pairs():
    first = {"name": "lookup_order", "args": {}}
    actual = [
        {"name": "lookup_order", "args": {"order_id": "A-1"}},
        {"name": "lookup_order", "args": {"order_id": "Z"}},
    ]
    assert trajectory_match(actual, [LOOKUP, first], "unordered", check_args=True)[0]


@pytest.mark.parametrize(
    ("score", "verdict"),
    [
        (0, "Incorrect"),
        (3.9, "Incorrect"),
        (4, "Partially correct"),
        (6.5, "Partially correct"),
        (7, "Correct"),
        (8.9, "Correct"),
        (9, "Comprehensive"),
        (10, "Comprehensive"),
    ],
)
def test_verdict_bands(score, verdict):
    assert verdict_for(score) == verdict


def test_rouge_l_is_one_for_identical_text_and_zero_for_disjoint():
    assert rouge_l("refunds within 30 days", "refunds within 30 days") == 1.0
    assert rouge_l("completely different words", "refunds within 30 days") == 0.0
    assert 0 < rouge_l("you get refunds within 30 days of purchase", "refunds are available within 30 days") < 1


def test_context_match_counts_expected_passages_found():
    row = context_row(
        ["Refunds are available within 30 days of purchase."],
        ["Refunds within 30 days of purchase", "Phone support 24/7"],
    )
    assert row.passed is False
    assert row.detail.startswith("1 of 2 expected passage(s) found in the 1 retrieved: ")


def test_the_offline_scorer_names_covered_and_missed_points():
    evaluation = Evaluation(
        question="Refunds?",
        answer="You can get a refund within 30 days of purchase.",
        expected_answer="Refunds are possible within 30 days of purchase. Refunds go to the original card in 5 days.",
    )
    judgment = offline_judgment(evaluation)
    assert judgment.score == 5
    assert judgment.verdict == "1 of 2 key points"
    assert judgment.reasoning.startswith("Offline reference scorer (no judge model configured): 1 of 2 key points")
    assert "Covered: “Refunds are possible within 30 days of purchase.”" in judgment.reasoning
    assert "Missed: “Refunds go to the original card in 5 days.”" in judgment.reasoning


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ("Refunds within 30 days of purchase, back to the original card in 5 days.", "All key points"),
        ("Refunds within 30 days of purchase.", "1 of 2 key points"),
        ("Please ask support.", "No key point"),
    ],
)
def test_the_offline_scorer_has_its_own_words_not_the_judges_bands(answer, verdict):
    """A key-point match is not a judge's assessment: no "Comprehensive" or "Correct"."""
    evaluation = Evaluation(
        question="Refunds?",
        answer=answer,
        expected_answer="Refunds are possible within 30 days of purchase. Refunds go to the original card in 5 days.",
    )
    judgment = offline_judgment(evaluation)
    assert judgment.verdict == verdict
    assert judgment.verdict not in {label for _, label in BANDS}


def test_the_offline_scorer_refuses_a_case_without_an_expected_answer():
    with pytest.raises(JudgeError, match="needs an expected answer"):
        offline_judgment(Evaluation(question="Q", answer="A", expected_answer=""))


def test_the_judge_prompt_carries_everything_the_judge_needs():
    evaluation = Evaluation(
        question="Can I get my money back?",
        answer="Yes, within 14 days.",
        expected_answer="Refunds within 30 days.",
        document_context="Policy: refunds within 30 days of purchase.",
        guideline="The number of days must be exact.",
        tool_calls=[{"name": "lookup_order", "args": {"order_id": "A-1"}}],
        expected_tools=[LOOKUP],
        trajectory_mode="strict",
    )
    scoring = {
        "acceptance_criteria": "Names the window",
        "rejection_criteria": "Invents a number",
        "evaluation_criteria": "Be precise",
    }
    prompt = judge_prompt(evaluation, scoring)
    for text in (
        "Can I get my money back?",
        "Yes, within 14 days.",
        "Refunds within 30 days.",
        "Policy: refunds within 30",
        "Names the window",
        "Invents a number",
        "Be precise",
        "The number of days must be exact.",
        'lookup_order(order_id="A-1")',
        "Expected tool calls (strict)",
    ):
        assert text in prompt
    assert "<data>" in prompt


def test_the_judge_scores_through_the_gateway(fake_llm):
    fake_llm.add_rule(task="judge", json={"score": 9, "verdict": "whatever", "reasoning": "All facts."})
    judgment = judge(Evaluation(question="Q", answer="A", expected_answer="E"), {}, {"run": 1, "case": 2})
    assert (judgment.score, judgment.verdict, judgment.reasoning) == (9, "Comprehensive", "All facts.")
    assert judgment.tokens > 0
    assert fake_llm.requests[0].model == "fake-judge"


def test_the_dataset_judge_prompt_and_model_are_honoured(fake_llm):
    scoring = {"judge_prompt": "You are a pedantic legal reviewer.", "judge_model": "openai/legal-judge"}
    judge(Evaluation(question="Q", answer="A", expected_answer="E"), scoring, {})
    request = fake_llm.requests[0]
    assert request.model == "legal-judge"
    system = request.messages[0]["content"]
    assert system.startswith("You are a pedantic legal reviewer.")
    assert "0-3 Incorrect" in system  # the rubric and JSON contract always follow


def test_an_unparseable_judgment_is_an_error_not_a_zero(fake_llm):
    fake_llm.add_rule(task="judge", broken_json=True)
    with pytest.raises(JudgeError, match="The judge failed: The model's answer was not valid JSON after one repair"):
        judge(Evaluation(question="Q", answer="A", expected_answer="E"), {}, {})
    assert fake_llm.count(task="judge") == 2


def test_a_score_outside_0_to_10_is_repaired_or_refused(fake_llm):
    fake_llm.add_rule(task="judge", json={"score": 42, "reasoning": "Great"}, times=1)
    judgment = judge(Evaluation(question="Q", answer="A", expected_answer="E"), {}, {})
    assert judgment.score == 8  # the repair call got the default, valid judgment


def test_a_rate_limited_judge_is_retried(fake_llm):
    fake_llm.add_rule(task="judge", status=429, headers={"Retry-After": "0"}, times=2)
    judgment = judge(Evaluation(question="Q", answer="A", expected_answer="E"), {}, {})
    assert judgment.score == 8
    assert fake_llm.count(task="judge") == 3


def test_vector_similarity_uses_embeddings_when_on(fake_llm):
    scoring = {"vector_enabled": True, "jaccard_enabled": False, "pass_threshold": 7}
    scored = score_case(
        evaluation=Evaluation(question="Q", answer="refunds in 30 days", expected_answer="refunds in 30 days"),
        scoring=scoring,
        offline=False,
        trace={},
    )
    rows = {row["name"]: row for row in scored.scorers}
    assert set(rows) == {"rouge_l", "vector"}
    assert rows["vector"]["score"] == pytest.approx(1.0)


def test_vector_similarity_says_why_it_is_missing_without_an_embedding_model(fake_llm, settings):
    settings.EVALSITE_EMBEDDING_MODEL = ""
    scored = score_case(
        evaluation=Evaluation(question="Q", answer="A b c", expected_answer="A b d"),
        scoring={"vector_enabled": True},
        offline=True,
        trace={},
    )
    vector = next(row for row in scored.scorers if row["name"] == "vector")
    assert vector["score"] is None
    assert vector["detail"] == "Not computed: no embedding model is configured."


def test_the_judge_reads_a_bounded_share_of_the_document(fake_llm):
    context = "Refund policy paragraph. " * 1000  # 25,000 characters

    judge(Evaluation(question="Q", answer="A", expected_answer="E", document_context=context), {}, {})

    prompt = fake_llm.requests[0].messages[1]["content"]
    assert "Refund policy paragraph." in prompt
    assert len(prompt) < 4_000 + 500
