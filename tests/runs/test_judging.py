"""Judge configurations (issue 18, sections 4 and 7): every score records the judge that made it,
any change of a judge input makes a new configuration, comparisons say when two runs had
different judges, and reviewers' overrides reach the judge prompt as worked examples."""

import pytest
from django.urls import reverse

from agents.models import Agent
from datasets import services as dataset_services
from runs import services
from runs.judging import configs as judging
from runs.models import JudgeConfig
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db

BASE = {
    "acceptance_criteria": "",
    "rejection_criteria": "",
    "evaluation_criteria": "",
    "judge_model": "",
    "judge_prompt": "",
    "pass_threshold": 7,
    "number_of_requests": 1,
    "jaccard_enabled": True,
    "vector_enabled": False,
    "judge_resamples": 2,
    "alignment_examples": 0,
    "alignment": [],
}
EXAMPLE = {
    "question": "Can I return a gift without a receipt?",
    "answer": "No, never.",
    "expected": "Yes, for store credit.",
    "verdict": "fail",
    "note": "Gifts get store credit without a receipt.",
    "score": 2,
}


@pytest.fixture
def dataset(make_dataset):
    return make_dataset(1, kind=Agent.Kind.LLM)


@pytest.mark.parametrize(
    "change",
    [
        {"judge_model": "openai/another-judge"},
        {"judge_prompt": "Be lenient about wording."},
        {"acceptance_criteria": "States the 30-day window."},
        {"rejection_criteria": "Promises a refund after 30 days."},
        {"evaluation_criteria": "Weigh tone too."},
        {"pass_threshold": 8},
        {"jaccard_enabled": False},
        {"vector_enabled": True},
        {"judge_resamples": 0},
        {"alignment": [EXAMPLE]},
    ],
    ids=lambda change: next(iter(change)),
)
def test_any_judge_input_changes_the_fingerprint(dataset, fake_llm, change):
    before = judging.judge_config_for(dataset=dataset, scoring=BASE)

    after = judging.judge_config_for(dataset=dataset, scoring={**BASE, **change})

    assert after.fingerprint != before.fingerprint
    assert (before.number, after.number) == (1, 2)


def test_the_same_settings_map_to_the_same_configuration(dataset, fake_llm):
    first = judging.judge_config_for(dataset=dataset, scoring=BASE)

    # Repeats are how often a case is asked, not how it is judged.
    again = judging.judge_config_for(dataset=dataset, scoring={**BASE, "number_of_requests": 3})

    assert again.pk == first.pk
    assert len(first.fingerprint) == 64
    assert "{question}" in first.prompt_template and "{answer}" in first.prompt_template


def test_the_console_judge_model_is_part_of_the_fingerprint(dataset, fake_llm, settings):
    first = judging.judge_config_for(dataset=dataset, scoring=BASE)
    settings.EVALSITE_JUDGE_MODEL = "openai/bigger-judge"

    second = judging.judge_config_for(dataset=dataset, scoring=BASE)

    assert second.pk != first.pk
    assert (first.judge_model, second.judge_model) == ("openai/fake-judge", "openai/bigger-judge")


def test_labels_say_which_judge(dataset, fake_llm):
    plain = judging.judge_config_for(dataset=dataset, scoring=BASE)
    custom = judging.judge_config_for(dataset=dataset, scoring={**BASE, "acceptance_criteria": "Cites the policy."})
    aligned = judging.judge_config_for(
        dataset=dataset, scoring={**BASE, "judge_prompt": "Be strict.", "alignment": [EXAMPLE, EXAMPLE]}
    )

    assert plain.label == "judge v1: fake-judge, default prompt"
    assert custom.label == "judge v2: fake-judge, custom criteria"
    assert aligned.label == "judge v3: fake-judge, custom prompt, 2 review examples"


def test_each_change_of_the_dataset_settings_makes_a_new_configuration(dataset, fake_llm):
    dataset_services.dataset_update_settings(dataset=dataset, pass_threshold=8)
    dataset_services.dataset_update_settings(dataset=dataset, evaluation_criteria="Weigh tone too.")
    dataset_services.dataset_update_settings(dataset=dataset, evaluation_criteria="Weigh tone too.")  # no change

    history = list(JudgeConfig.objects.filter(dataset=dataset).order_by("number"))
    assert [(c.number, c.threshold, c.criteria["evaluation_criteria"]) for c in history] == [
        (1, 8, ""),
        (2, 8, "Weigh tone too."),
    ]


def test_a_run_records_its_judge_and_runs_after_a_change_record_the_new_one(dataset, alice, fake_llm):
    first = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))
    same = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))
    dataset_services.dataset_update_settings(dataset=dataset, acceptance_criteria="Names the 30 days.")
    changed = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))

    assert first.judge_config == same.judge_config
    assert changed.judge_config != first.judge_config
    assert judging.judges_differ(first, same) is None
    sentence = judging.judges_differ(first, changed)
    assert sentence is not None
    assert first.judge_config.label in sentence and changed.judge_config.label in sentence
    assert sentence.startswith("Scored by different judges")


def test_a_run_from_before_judges_were_recorded_is_named(dataset, alice, fake_llm):
    old = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))
    new = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))
    type(old).objects.filter(pk=old.pk).update(judge_config=None)
    old.refresh_from_db()

    assert f"Run #{old.pk} was scored before judges were recorded" in judging.judges_differ(old, new)


def test_the_run_page_the_card_and_the_exports_show_the_judge(dataset, alice, fake_llm, client_alice):
    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))
    label = run.judge_config.label

    page = client_alice.get(reverse("runs:detail", args=[run.agent_id, run.pk])).content.decode()
    exported = client_alice.get(reverse("runs:export_json", args=[run.agent_id, run.pk])).json()
    csv_text = client_alice.get(reverse("runs:export_csv", args=[run.agent_id, run.pk])).content.decode()

    assert page.count(label) >= 2  # the run's header and the card
    assert exported["run"]["judge"]["label"] == label
    assert exported["run"]["judge"]["fingerprint"] == run.judge_config.fingerprint
    assert "judge_samples" in exported["results"][0]
    assert label in csv_text


# ---- alignment: reviewers' overrides as worked examples ----------------------------------------


@pytest.fixture
def reviews_provider():
    """Stands in for the reviews app, which registers its provider in AppConfig.ready()."""
    calls = []

    def provider(dataset, limit):
        calls.append((dataset.pk, limit))
        newest_first = [
            {**EXAMPLE, "question": f"Override {n}?", "note": f"Reviewer note {n}."} for n in range(3, 0, -1)
        ]
        return newest_first[:limit]

    judging.register_alignment_examples_provider(provider)
    yield calls
    judging.unregister_alignment_examples_provider(provider)


def test_alignment_examples_reach_the_judge_prompt(make_dataset, alice, fake_llm, reviews_provider):
    dataset = make_dataset(1, kind=Agent.Kind.LLM, dataset={"alignment_examples": 2})

    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))

    assert reviews_provider == [(dataset.pk, 2)]
    judge_calls = [r for r in fake_llm.requests if r.task == "judge"]
    system = judge_calls[0].messages[0]["content"]
    assert "Override 3?" in system and "Override 2?" in system and "Override 1?" not in system
    assert "Reviewer's note: Reviewer note 3." in system
    assert "Reviewer's verdict: fail, score 2/10" in system
    assert "Gifts get store credit" not in judge_calls[0].messages[1]["content"]  # the case stays the case
    assert len(run.judge_config.examples) == 2
    assert "2 review examples" in run.judge_config.label


def test_without_opting_in_the_reviewers_overrides_stay_out(make_dataset, alice, fake_llm, reviews_provider):
    dataset = make_dataset(1, kind=Agent.Kind.LLM)  # alignment_examples is 0 by default

    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))

    assert reviews_provider == []
    assert all("Override" not in r.messages[0]["content"] for r in fake_llm.requests if r.task == "judge")
    assert run.judge_config.examples == []


def test_new_overrides_make_a_new_configuration(make_dataset, alice, fake_llm, reviews_provider):
    dataset = make_dataset(1, kind=Agent.Kind.LLM, dataset={"alignment_examples": 1})
    aligned_on_one = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))
    dataset_services.dataset_update_settings(dataset=dataset, alignment_examples=3)
    aligned_on_three = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))

    assert len(aligned_on_one.judge_config.examples) == 1
    assert len(aligned_on_three.judge_config.examples) == 3
    assert judging.judges_differ(aligned_on_one, aligned_on_three) is not None


def test_the_settings_form_saves_the_judge_settings(make_dataset, client_alice, fake_llm):
    dataset = make_dataset(1)
    url = reverse("datasets:settings", args=[dataset.agent_id, dataset.pk])
    form = {"pass_threshold": 7, "number_of_requests": 1, "judge_resamples": 0, "alignment_examples": 5}

    client_alice.post(url, form)
    refused = client_alice.post(url, {**form, "judge_resamples": 9})

    dataset.refresh_from_db()
    assert (dataset.judge_resamples, dataset.alignment_examples) == (0, 5)
    assert refused.status_code == 200 and "Ensure this value is less than or equal to 4" in refused.content.decode()
    assert JudgeConfig.objects.filter(dataset=dataset, resamples=0).exists()
