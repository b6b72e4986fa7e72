"""The judge's preflight (issue 33, item 1): a judge configuration scores a fixed calibration set
before it scores a run, and one that ranks it wrongly, gives one score to all or answers with
placeholders fails, with what it did on each item, its cost and the model it was."""

import pytest

from agents.models import Agent
from runs import services
from runs.judging import configs as judging
from runs.judging.preflight import calibration_items
from runs.models import JudgeConfig
from runs.services.preflight import judge_config_preflight, judge_preflight_needed
from tests.runs.preflight_helpers import fit_judge

pytestmark = pytest.mark.django_db
ITEMS = len(calibration_items())


@pytest.fixture
def dataset(make_dataset):
    return make_dataset(2, kind=Agent.Kind.LLM)


@pytest.fixture
def config(dataset, fake_llm):
    return judging.dataset_judge_config(dataset=dataset)


def test_the_calibration_set_has_each_kind_of_answer_for_each_question():
    items = calibration_items()
    questions = {item.question_number for item in items}
    assert 3 <= len(questions) <= 4
    for number in questions:
        kinds = [item.kind for item in items if item.question_number == number]
        assert kinds == ["exact", "paraphrase", "partial", "wrong", "irrelevant"]
    assert len({item.answer for item in items}) == len(items)


def test_a_judge_that_ranks_the_set_rightly_passes(config, fake_llm):
    fit_judge(fake_llm)

    config = judge_config_preflight(config=config)

    assert config.preflight_status == "passed"
    details = config.preflight
    assert details["reasons"] == []
    assert details["in_place"] == details["total"] == ITEMS
    assert [item["kind"] for item in details["items"][:5]] == ["exact", "paraphrase", "partial", "wrong", "irrelevant"]
    assert [item["score"] for item in details["items"][:5]] == [10, 9, 5, 1, 0]
    assert details["tokens"] > 0 and details["model"] == "openai/fake-judge" and details["ran_at"]
    assert fake_llm.count(task="judge", preflight=config.pk) == ITEMS


def test_the_judge_is_asked_with_its_own_prompt_and_threshold(make_dataset, fake_llm):
    dataset = make_dataset(
        1, kind=Agent.Kind.LLM, dataset={"judge_prompt": "Be a very strict grader.", "pass_threshold": 8}
    )
    config = judging.dataset_judge_config(dataset=dataset)
    fit_judge(fake_llm, scores={"paraphrase": 7})  # 7 passes at the default threshold, not at 8

    config = judge_config_preflight(config=config)

    assert config.preflight_status == "failed"
    assert "Be a very strict grader." in fake_llm.requests[0].messages[0]["content"]
    paraphrases = [item for item in config.preflight["items"] if item["kind"] == "paraphrase"]
    assert all("below the pass threshold 8" in item["misplaced"] for item in paraphrases)


def test_a_judge_that_gives_every_answer_the_same_score_fails(config, fake_llm):
    # The fake's default judge answers 8 to everything, right or wrong.
    config = judge_config_preflight(config=config)

    assert config.preflight_status == "failed"
    assert any("same score (8)" in reason for reason in config.preflight["reasons"])
    wrong = [item for item in config.preflight["items"] if item["kind"] == "wrong"]
    assert all(item["score"] == 8 and "at or above the pass threshold" in item["misplaced"] for item in wrong)


def test_a_judge_that_answers_with_the_schema_placeholder_fails(config, fake_llm):
    placeholder = "<2-4 short sentences: what was right, what was missing or wrong>"
    fit_judge(fake_llm, reasoning=placeholder)

    config = judge_config_preflight(config=config)

    assert config.preflight_status == "failed"
    assert config.preflight["in_place"] == 0
    assert all("placeholder" in item["problem"] for item in config.preflight["items"])
    assert f"{ITEMS} of {ITEMS} answers could not be used." in config.preflight["reasons"]


def test_a_judge_that_copies_its_instructions_fails(config, fake_llm):
    fit_judge(fake_llm, reasoning="Compare the agent's actual answer with the expected answer")

    config = judge_config_preflight(config=config)

    assert config.preflight_status == "failed"
    assert "repeats the instructions it was given" in config.preflight["items"][0]["problem"]


def test_a_partly_right_answer_scored_as_high_as_the_right_one_fails(config, fake_llm):
    fit_judge(fake_llm, scores={"partial": 9})

    config = judge_config_preflight(config=config)

    assert config.preflight_status == "failed"
    misplaced = [item for item in config.preflight["items"] if item["misplaced"]]
    assert {item["kind"] for item in misplaced} == {"partial"}
    assert "as high as a fully right answer" in misplaced[0]["misplaced"]


def test_a_judge_that_errors_fails_with_the_error_and_its_cost(config, fake_llm):
    fake_llm.add_rule(task="judge", status=400, error="model not loaded")

    config = judge_config_preflight(config=config)

    assert config.preflight_status == "failed"
    assert all("model not loaded" in item["problem"] for item in config.preflight["items"])
    assert all(item["score"] is None for item in config.preflight["items"])


def test_a_configuration_is_preflighted_once_unless_asked_again(config, fake_llm):
    fit_judge(fake_llm)
    judge_config_preflight(config=config)
    config.refresh_from_db()

    judge_config_preflight(config=config)
    assert fake_llm.count(task="judge") == ITEMS

    judge_config_preflight(config=config, force=True)
    assert fake_llm.count(task="judge") == 2 * ITEMS


def test_runs_it_scored_before_its_preflight_failed_are_marked(dataset, config, fake_llm):
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=None)
    assert run.judge_config == config and not run.judge_failed_preflight

    judge_config_preflight(config=config)

    run.refresh_from_db()
    assert run.judge_failed_preflight


def test_the_offline_scorer_needs_no_preflight(dataset, no_llm):
    config = judging.dataset_judge_config(dataset=dataset)

    assert config.judge_model == ""
    assert not judge_preflight_needed(config)
    with pytest.raises(ValueError):
        judge_config_preflight(config=config)


def test_the_preflight_records_the_model_the_server_reported(config, fake_llm):
    fake_llm.set_model_identity("fake-judge", reported="SmolLM2-135M-Instruct-Q8_0.gguf", meta={"n_params": 134515008})
    fit_judge(fake_llm)

    preflighted = judge_config_preflight(config=config)

    # Made before the server was asked, the configuration did not know the model; the outcome
    # belongs to the configuration of the model that answered.
    assert preflighted.pk != config.pk and preflighted.number == config.number + 1
    assert preflighted.model_identity == "SmolLM2-135M-Instruct-Q8_0.gguf · n_params 134515008"
    assert preflighted.preflight["model_identity"] == preflighted.model_identity
    assert preflighted.preflight_status == "passed"
    assert JudgeConfig.objects.get(pk=config.pk).preflight_status == ""
    assert judging.dataset_judge_config(dataset=config.dataset) == preflighted
