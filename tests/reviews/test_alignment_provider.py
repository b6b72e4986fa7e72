"""The reviews app hands the judge its reviewers' overrides as worked examples (issue 18,
section 7): registered in ReviewsConfig.ready(), no stand-in provider."""

from datasets.models import Dataset
from reviews import services
from runs import judging
from tests.reviews.conftest import results_of


def test_the_reviewers_overrides_become_the_judges_examples(ten_run, dataset, alice, bob):
    results = results_of(ten_run)
    services.review_save(result=results[0], reviewer=alice, agrees=True)  # agreeing is no example
    services.review_save(result=results[1], reviewer=alice, agrees=False, passed=False, score=3, note="Misses the fee")
    services.review_save(
        result=results[2], reviewer=bob, agrees=False, passed=True, score=6
    )  # same verdict: score only
    services.review_save(result=results[8], reviewer=bob, agrees=False, passed=True, note="Correct after all")
    services.case_correct(result=results[1], user=alice, expected_answer="Refunds within 30 days, minus a 5 EUR fee.")
    Dataset.objects.filter(pk=dataset.pk).update(alignment_examples=5)
    dataset.refresh_from_db()

    examples = judging.alignment_examples_for(dataset)

    assert [(e["question"], e["verdict"], e["note"]) for e in examples] == [
        ("Question 9?", "pass", "Correct after all"),
        ("Question 2?", "fail", "Misses the fee"),
    ]
    assert examples[1]["expected"] == "Refunds within 30 days, minus a 5 EUR fee."  # the corrected case


def test_no_examples_unless_the_dataset_opts_in(ten_run, dataset, alice):
    services.review_save(result=results_of(ten_run)[1], reviewer=alice, agrees=False, passed=False)
    assert dataset.alignment_examples == 0
    assert judging.alignment_examples_for(dataset) == []
