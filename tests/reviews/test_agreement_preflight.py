"""The agreement page shows each judge configuration's preflight and the model its server
reported beside its figures (issue 33, item 1)."""

import pytest
from django.urls import reverse

from reviews import services
from runs.judging import configs as judging
from runs.services.preflight import judge_config_preflight
from tests.reviews.conftest import results_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def judged_run(ten_run, dataset, alice, fake_llm):
    fake_llm.set_model_identity("fake-judge", reported="SmolLM2-135M-Instruct-Q8_0.gguf")
    config = judge_config_preflight(config=judging.dataset_judge_config(dataset=dataset))  # the fake scores all 8
    ten_run.judge_config = config
    ten_run.save(update_fields=["judge_config"])
    services.review_save(result=results_of(ten_run)[0], reviewer=alice, agrees=True)
    return ten_run


def test_a_judge_that_failed_its_preflight_says_so_beside_its_agreement(client_alice, judged_run, agent):
    text = client_alice.get(reverse("reviews:agreement", args=[agent.pk])).text

    assert "Preflight failed" in text and "It gave every answer the same score (8)" in text
    assert "Its figures are not to be trusted." in text
    assert "6 of 15 answers in place" in text  # the right answers at 8 are in place, the rest are not
    assert "SmolLM2-135M-Instruct-Q8_0.gguf" in text


def test_a_judge_never_preflighted_says_so(client_alice, ten_run, dataset, alice, agent, fake_llm):
    ten_run.judge_config = judging.dataset_judge_config(dataset=dataset)
    ten_run.save(update_fields=["judge_config"])
    services.review_save(result=results_of(ten_run)[0], reviewer=alice, agrees=True)

    text = client_alice.get(reverse("reviews:agreement", args=[agent.pk])).text

    assert "Not preflighted" in text
